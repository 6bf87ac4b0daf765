"""Everything before execution (trusted side, the instructor's process): plan, stage, sanitize, jobs.

- ``plan``: which submissions to grade and which are already graded;
- ``sanitize``: stage one submission's files next to its ``autograded/`` home, as nbgrader lays them
  out, and run nbgrader's sanitize preprocessors on each notebook the gradebook expects;
- ``cell_kinds``: where each code cell runs, decided from the gradebook, never from the submission;
- ``resolve_device``: the GPU rule; ``sandbox_env``/``checker_env``: the two processes' environments;
- ``make_program``: a notebook's ``NotebookProgram``; ``companion_files``: what its sandbox gets besides it.

Each function is the same for every executor.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbgrader import utils as nbgrader_utils
from nbgrader.api import Gradebook, MissingEntry
from traitlets.config import Config

from autograder import forbidden
from autograder.course.nbgrader import Course
from autograder.errors import DeviceError, GradingError
from autograder.grading.model import (
    GRADE,
    STUDENT,
    TRUSTED,
    NotebookProgram,
    NotebookRun,
    Submission,
)
from autograder.grading.nbgrader_seam import (
    AutogradeSteps,
    added_back_source,
    borrowed_gradebook,
    nbgrader_resources,
)
from autograder.grading.run_record import graded_digests, move_record_out, notebook_digests

STAGING_PREFIX = ".grading-"
COMPANION_LIMIT_BYTES = 64 * 2**20
NBGRADER_LOGGER = "autograder.nbgrader"


@dataclass(frozen=True)
class DeviceProbe:
    """What the machines that run the notebooks have (this one's template, or the Slurm nodes)."""

    cuda_available: bool
    torch_version: str
    cuda_version: str | None


def notebook_names(gb: Gradebook, assignment: str) -> list[str]:
    """The assignment's notebooks, as the gradebook knows them."""
    return sorted(nb.name for nb in gb.find_assignment(assignment).notebooks)


def gpu_cells(course: Course, assignment: str) -> list[str]:
    """Grade cells of ``assignment`` that hold GPU-only checks (grade ids ending in ``_gpu``)."""
    with course.gradebook() as gb:
        return sorted(cell.name for nb in gb.find_assignment(assignment).notebooks
                      for cell in nb.grade_cells if cell.name.endswith("_gpu"))


def is_graded(gb: Gradebook, course: Course, *, student: str, assignment: str) -> bool:
    """True when the gradebook holds this submission and its autograded directory exists, the
    submission is not newer than what was graded (nbgrader's own rule for skipping), and its
    submitted notebooks are the ones graded (``submission_changed``)."""
    final = course.step_dir("autograded", student, assignment)
    if not final.is_dir():
        return False
    try:
        gb.find_submission(assignment, student)
    except MissingEntry:
        return False
    submitted = course.step_dir("submitted", student, assignment)
    new = course.coursedir.get_existing_timestamp(str(submitted))
    old = course.coursedir.get_existing_timestamp(str(final))
    if new is not None and old is not None and new > old:
        return False
    if new is not None and old is None and graded_digests(final) is None:
        return False  # graded from a submission without a time (an LMS download collected before
        # collect wrote one), and collected again since: nothing tells it is the same notebook
    return not submission_changed(course, student=student, assignment=assignment)


def submission_changed(course: Course, *, student: str, assignment: str) -> bool:
    """True when the submitted notebooks differ from those graded: their content digests
    (``run_record.DIGESTS``, kept in the run record when grading) no longer match. A submission graded
    without a digest (by nbgrader, or before digests were kept) counts as unchanged."""
    recorded = graded_digests(course.step_dir("autograded", student, assignment))
    if recorded is None:
        return False
    return notebook_digests(course.step_dir("submitted", student, assignment)) != recorded


@dataclass(frozen=True)
class Plan:
    """What a run does with each submission it found, as nbgrader's autograde would decide."""

    todo: list[tuple[str, str]]  # (student, assignment) to grade
    skipped: list[tuple[str, str, str]]  # (student, assignment, why): nothing is recorded for them
    refused: list[tuple[str, str, str]]  # (student, assignment, why): nbgrader fails these
    # (student, assignment) of ``todo`` graded before whose submitted notebooks changed since
    changed: list[tuple[str, str]] = field(default_factory=list)


def plan(course: Course, gb: Gradebook, names: Sequence[str], *, students: Sequence[str] | None,
         force: bool, notebook: str | None = None) -> Plan:
    """Sort the submissions of ``names``: already graded ones are skipped unless ``force``; so are
    students in ``CourseDirectory.student_id_exclude`` and folders without a notebook (nbgrader
    matches none there); with ``Autograde.create_student = False`` a student the gradebook does
    not know is refused, as nbgrader refuses it."""
    result = Plan(todo=[], skipped=[], refused=[])
    wanted_students = set(students) if students else None
    excluded = {s for s in (course.coursedir.student_id_exclude or "").split(",") if s}
    create_student = bool(course.config.Autograde.get("create_student", True))
    for name in names:
        for student in course.submitted_students(name):
            if wanted_students is not None and student not in wanted_students:
                continue
            if student in excluded:
                result.skipped.append((student, name, "excluded (CourseDirectory.student_id_exclude)"))
                continue
            submitted = course.step_dir("submitted", student, name)
            matched = sorted(p.stem for p in submitted.glob(f"{notebook or '*'}.ipynb"))
            if not matched:
                result.skipped.append((student, name, f"no notebook{' ' + notebook if notebook else ''}"
                                       f" in {submitted}; nothing graded"))
                continue
            if not create_student and not _known_student(gb, student):
                result.refused.append((student, name, f"No student with ID '{student}' exists in "
                                       "the database (Autograde.create_student is False)"))
                continue
            remove_stale_stages(course, student, name)
            final = course.step_dir("autograded", student, name)
            if notebook and not force and not all((final / f"{nb}.ipynb").exists() for nb in matched):
                result.todo.append((student, name))  # nbgrader: a matched notebook not graded yet
            elif not force and is_graded(gb, course, student=student, assignment=name):
                result.skipped.append((student, name, ""))
            else:
                result.todo.append((student, name))
                if not force and submission_changed(course, student=student, assignment=name):
                    result.changed.append((student, name))
    return result


def _known_student(gb: Gradebook, student: str) -> bool:
    try:
        gb.find_student(student)
    except MissingEntry:
        return False
    return True


def remove_stale_stages(course: Course, student: str, assignment: str) -> None:
    """Delete staging directories a killed run left behind (they never hold a recorded grade)."""
    final = course.step_dir("autograded", student, assignment)
    move_record_out(final)  # a run killed right after its swap
    parent = final.parent
    if parent.is_dir():
        for stale in [*parent.glob(f"{STAGING_PREFIX}{assignment}-*"),
                      *parent.glob(f"{assignment}.old-*")]:
            shutil.rmtree(stale, ignore_errors=True)


def resolve_device(course: Course, assignments: Sequence[str], *, device: str, allow_cpu: bool,
                   probe: DeviceProbe) -> str:
    """Apply the GPU rule of the README; return "cpu" or "cuda"."""
    if device not in ("auto", "cpu", "cuda"):
        raise DeviceError(f"--device must be auto, cpu or cuda, got {device!r}")
    has_cuda = probe.cuda_available
    if device == "cuda" and not has_cuda:
        raise DeviceError("--device cuda: this machine has no CUDA device (torch "
                          f"{probe.torch_version}, CUDA build {probe.cuda_version})")
    used = "cuda" if (device == "cuda" or (device == "auto" and has_cuda)) else "cpu"
    gpu_assignments = [a for a in assignments if gpu_cells(course, a)]
    if used == "cpu" and gpu_assignments and not allow_cpu:
        if device == "cpu":
            raise DeviceError(
                f"{', '.join(gpu_assignments)} ha{'s' if len(gpu_assignments) == 1 else 've'} "
                "GPU-only checks; grading on --device cpu needs --allow-cpu (their GPU checks then "
                "run their CPU path), or grade on a GPU runner")
        logging.getLogger("autograder").warning(
            "no CUDA device: GPU-only grade cells of %s will score 0 with 'needs a GPU runner' "
            "(pass --allow-cpu to run them on CPU)", ", ".join(gpu_assignments))
    return used


def sandbox_env(*, device_used: str) -> dict[str, str]:
    """The student process's environment (the hidden checks' seed and switches stay outside)."""
    env = {
        "NBGRADER_EXECUTION": "autograde",  # what nbgrader's Execute sets for its kernels
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",  # as ipykernel does
        "AUTOGRADER_DEVICE": device_used,
    }
    if device_used == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def checker_env(*, device_used: str, allow_cpu: bool) -> dict[str, str]:
    """The checker's environment: the student's, plus whether GPU checks may run on CPU."""
    from autograder import ALLOW_CPU_ENV

    env = sandbox_env(device_used=device_used)
    env[ALLOW_CPU_ENV] = "1" if allow_cpu else "0"
    return env


def make_program(nb_run: NotebookRun, *, timeout: float | None, notebook_timeout: float | None,
             device_used: str, allow_cpu: bool, removed: list[dict[str, Any]] | None = None
             ) -> NotebookProgram:
    """The program of one sanitized notebook (the same on every machine)."""
    cells = []
    for index, cell in enumerate(nb_run.nb.cells):
        if cell.cell_type == "code":
            kind = nb_run.kinds.get(index, STUDENT)
            cells.append((index, cell.source, _student_tags(cell) if kind == STUDENT else [], kind))
    return NotebookProgram(cells=cells, timeout=timeout,
                        env=checker_env(device_used=device_used, allow_cpu=allow_cpu),
                        sandbox_env=sandbox_env(device_used=device_used),
                        notebook_timeout=notebook_timeout or None, removed=list(removed or []))


def _student_tags(cell: NotebookNode) -> list[str]:
    """The tags of a student's own cell (``skip-execution`` skips it, as nbclient would). Tags never
    decide whether an instructor or grade cell runs: those come from the gradebook, which has none."""
    tags = cell.metadata.get("tags", [])
    return [tag for tag in tags if isinstance(tag, str)] if isinstance(tags, list) else []


def cell_kinds(gb: Gradebook, nb: NotebookNode, *, notebook: str, assignment: str,
               config: Config | None = None) -> dict[int, str]:
    """Where each code cell runs: grade cells in the checker, the instructor's locked cells in both
    places, everything else (solutions, cells the student added) in the sandbox only. Decided from
    the gradebook, never from the submission's metadata; the source of every trusted or grade cell
    is the gradebook's (nbgrader's sanitize step restored it; this makes sure), or, for a grade cell
    the course's ``c.OverwriteCells.add_missing_cells`` (in ``config``) added back, exactly the text
    nbgrader's sanitize step gave it (``added_back_source``)."""
    book = gb.find_notebook(notebook, assignment)
    max_scores = {cell.name: cell.max_score for cell in book.grade_cells}
    grade_ids = set(max_scores)
    solution_ids = {cell.name for cell in book.solution_cells}
    sources = {cell.name: cell for cell in book.source_cells}
    kinds: dict[int, str] = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        source = sources.get(meta.get("grade_id"))
        kind = STUDENT
        if source is not None and source.locked and source.name not in solution_ids:
            kind = GRADE if meta.get("grade_id") in grade_ids else TRUSTED
            if cell.source != source.source and not (
                    kind == GRADE and config is not None
                    and cell.source == added_back_source(config, source, max_scores[source.name])):
                cell.source = source.source
        kinds[index] = kind
    return kinds


def stage_files(course: Course, submitted: Path, stage: Path, *, assignment: str) -> list[str]:
    """Lay out the staging directory as nbgrader lays out ``autograded/``: the submission's other files,
    then the instructor's source files on top (minus ``Autograde.exclude_overwriting``). Only regular
    files are copied, never through a link; return what was refused, each naming its path."""
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    ignore = list(course.coursedir.ignore) + ["*.ipynb"]
    refused = [f"{Path(path).relative_to(submitted)}: {why}; not copied"
               for path, why in _irregular_entries(submitted)]
    for filename in nbgrader_utils.find_all_files(str(submitted), ignore):
        _copy_regular(Path(filename), stage / Path(filename).relative_to(submitted))  # links: above
    source = Path(course.coursedir.format_path(course.coursedir.source_directory, ".", assignment))
    excluded = course.config.Autograde.get("exclude_overwriting", {}).get(assignment, [])
    for filename in nbgrader_utils.find_all_files(str(source), ignore):
        relative = Path(filename).relative_to(source)
        if str(relative) not in excluded:
            _copy_regular(Path(filename), stage / relative)
    return refused


def _irregular_entries(folder: Path) -> list[tuple[str, str]]:
    """Links, devices, FIFOs and sockets below ``folder`` (``os.walk`` never enters a linked folder)."""
    found = []
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            mode = os.lstat(path).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                found.append((path, _kind(mode)))
    return found


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file"


def _copy_regular(src: Path, dest: Path) -> str | None:
    """Copy ``src`` if it is a regular file (opened without following a link); else say what it is."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        try:
            return _kind(os.lstat(src).st_mode)
        except OSError:
            return f"unreadable ({error.strerror})"
    with os.fdopen(fd, "rb") as source:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            return _kind(mode)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists() or dest.is_symlink():
            dest.unlink()
        with open(dest, "xb") as target:
            shutil.copyfileobj(source, target)
    return None


def companion_files(folder: Path, *, limit_bytes: int = COMPANION_LIMIT_BYTES) -> list[tuple[str, bytes]]:
    """The notebook's companion files (everything in its staged folder but notebooks), size-capped."""
    files, total = [], 0
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink() and path.suffix != ".ipynb":
            size = path.stat().st_size
            if total + size > limit_bytes:
                raise GradingError(f"{folder}: companion files exceed {limit_bytes // 2**20} MiB")
            files.append((str(path.relative_to(folder)), path.read_bytes()))
            total += size
    return files


class CollectWarnings(logging.Handler):
    """Keeps nbgrader's warnings about one submission (they go into its run record)."""

    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record_: logging.LogRecord) -> None:
        message = record_.getMessage()
        if "Attribute 'checksum'" not in message:  # always fires: releases lack the hidden tests
            self.sink.append(message)


def sanitize(course: Course, steps: AutogradeSteps, gb: Gradebook, *, student: str,
             assignment: str, timeout: float | None, notebook_timeout: float | None,
             device_used: str, allow_cpu: bool, notebook: str | None = None) -> Submission:
    """Stage one submission's files and sanitize its notebooks with nbgrader's preprocessors; each
    notebook gets its program."""
    logger = logging.getLogger(NBGRADER_LOGGER)
    final = course.step_dir("autograded", student, assignment)
    submitted = course.step_dir("submitted", student, assignment)
    submission = Submission(
        student=student, assignment=assignment, submitted=submitted, final=final,
        stage=final.parent / f"{STAGING_PREFIX}{assignment}-{os.getpid()}",
        digests=notebook_digests(submitted))  # before reading: a later change is regraded
    submission.refused = stage_files(course, submission.submitted, submission.stage,
                                     assignment=assignment)
    rules = forbidden.course_rules(course, assignment)
    submission.refused += forbidden.disarm_library_copies(submission.stage, rules)
    if notebook:  # nbgrader's --notebook: the other notebooks' autograded files stay as they are
        submission.only = sorted(p.stem for p in submission.submitted.glob(f"{notebook}.ipynb"))
        _keep_graded(final, submission.stage, keep_out={f"{nb}.ipynb" for nb in submission.only})
    handler = CollectWarnings(submission.log)
    logger.addHandler(handler)
    try:
        _sanitize_notebooks(course, steps, gb, submission, logger)
        removed = forbidden.removals(rules)
        for nb_run in submission.notebooks:
            nb_run.program = make_program(nb_run, timeout=timeout, notebook_timeout=notebook_timeout,
                                  device_used=device_used, allow_cpu=allow_cpu, removed=removed)
    except BaseException:
        discard_stage(submission.stage)
        raise
    finally:
        logger.removeHandler(handler)
    return submission


def discard_stage(stage: Path) -> None:
    """Remove a staging folder that will not be recorded, and the student's ``autograded/<student>/``
    folder with it when nothing else is in it: an ungradable submission leaves no autograded folder."""
    shutil.rmtree(stage, ignore_errors=True)
    try:
        stage.parent.rmdir()  # only when empty
    except OSError:
        pass


# each field nbgrader reads from a cell's metadata: its type, and the value that stands in for one of
# the wrong type (the gradebook then restores the real one on grade and instructor cells)
_NBGRADER_TYPES: dict[str, tuple[type | tuple[type, ...], object]] = {
    "grade": (bool, False), "solution": (bool, False), "locked": (bool, False),
    "task": (bool, False), "points": ((int, float), 0), "schema_version": (int, 3)}


def _drop_wrong_types(nb: NotebookNode, name: str) -> list[str]:
    """Replace submission metadata of the wrong type (``tags: 5``, ``points: "ten"``) before nbgrader
    reads it: its sanitize steps would crash on it, failing the submission, while the gradebook
    restores every field a grade or instructor cell needs. Returns what was replaced."""
    removed = []
    if not isinstance(nb.metadata.get("kernelspec", {}), dict):
        del nb.metadata["kernelspec"]
        removed.append("kernelspec")
    for index, cell in enumerate(nb.cells):
        tags = cell.metadata.get("tags")
        if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
            del cell.metadata["tags"]
            removed.append(f"cell {index} tags")
        meta = cell.metadata.get("nbgrader")
        if meta is None:
            continue
        if not isinstance(meta, dict):
            del cell.metadata["nbgrader"]
            removed.append(f"cell {index} nbgrader")
            continue
        if not isinstance(meta.get("grade_id", ""), str):
            del cell.metadata["nbgrader"]
            removed.append(f"cell {index} nbgrader")
            continue
        for key, (kind, stand_in) in _NBGRADER_TYPES.items():
            value = meta.get(key)
            if value is not None and (not isinstance(value, kind) or (kind is not bool and
                                                                     isinstance(value, bool))):
                meta[key] = stand_in
                removed.append(f"cell {index} nbgrader.{key}")
    return [f"{name}: metadata of the wrong type replaced: {', '.join(removed)}"] if removed else []


def _keep_graded(final: Path, stage: Path, *, keep_out: set[str]) -> None:
    """Carry what an earlier run put in ``final`` into the stage (files not there yet), but the
    notebooks graded now."""
    if not final.is_dir():
        return
    for path in final.rglob("*"):
        relative = path.relative_to(final)
        target = stage / relative
        if str(relative) in keep_out or target.exists() or not path.is_file() or path.is_symlink():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def _sanitize_notebooks(course: Course, steps: AutogradeSteps, gb: Gradebook,
                        submission: Submission, logger: logging.Logger) -> None:
    """nbgrader's sanitize preprocessors on each notebook the gradebook expects; a missing or
    unreadable notebook is recorded as missing (nbgrader gives it 0)."""
    student, assignment = submission.student, submission.assignment
    with borrowed_gradebook(gb):
        for name in notebook_names(gb, assignment):
            path = submission.submitted / f"{name}.ipynb"
            if submission.only is not None and name not in submission.only and path.exists():
                continue  # submitted but not asked for this time: left as graded before
            if path.is_symlink() or (path.exists() and not path.is_file()):
                submission.missing.append(name)
                submission.log.append(f"{path.name}: {_kind(os.lstat(path).st_mode)}, not a "
                                      "notebook file; graded as missing")
                continue
            if not path.is_file():
                submission.missing.append(name)
                continue
            try:
                nb = nbformat.read(path, as_version=4)
            except Exception as error:  # noqa: BLE001 - unreadable: graded as missing
                submission.missing.append(name)
                submission.log.append(f"{path.name}: not a readable notebook ({error}); "
                                      "graded as missing")
                continue
            resources = nbgrader_resources(course, student=student, assignment=assignment,
                                           notebook=name, workdir=str(submission.stage))
            submission.log += _drop_wrong_types(nb, path.name)
            nb = steps.run(steps.sanitize, nb, resources, logger)  # raises: fails as in nbgrader
            steps.check_kernel(nb, notebook=name)  # raises: the submission fails, as in nbgrader
            try:
                kinds = cell_kinds(gb, nb, notebook=name, assignment=assignment,
                                   config=steps.config)
            except Exception as error:  # noqa: BLE001 - metadata nbgrader cannot read: missing
                submission.missing.append(name)
                submission.refused.append(f"{path.name}: its cells' metadata cannot be read "
                                          f"({type(error).__name__}: {error}); graded as missing")
                continue
            submission.notebooks.append(NotebookRun(name=name, nb=nb, kinds=kinds))
