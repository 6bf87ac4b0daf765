"""Grade submissions into nbgrader's gradebook: sanitize -> execute -> check -> score -> record.

Read top to bottom, one submission goes through:

1. **sanitize** (parent): read each submitted notebook and run nbgrader's sanitize preprocessors
   (``steps.py``); stage the submission's files in a hidden directory next to its final
   ``autograded/<student>/<assignment>/`` home, as nbgrader lays them out.
2. **execute** (``runner.py``): a checker child forked from the warm template (``workers.py``,
   ``execute.py``) runs the grade cells itself and sends every other cell to a warm bubblewrap sandbox
   (``sandbox.py``, ``autograder/sandbox/kernel.py``), reaching the student's names through a
   values-only channel (``remote.py``); per-cell time limit, memory and process limits; cells never
   finished get an error output that names the reason (timeout, memory, crash), so they score 0.
3. **check + score + record** (parent, ``record.py``): nbgrader's post-execute preprocessors
   (output limits, SaveAutoGrades, late penalties, metadata check) in ONE gradebook transaction; the
   autograded notebooks move into place just before that transaction commits.

Up to ``workers`` notebooks run at once (one sandbox each); the parent sanitizes and records between
their messages. ``executor="slurm"`` runs step 2 in Slurm array tasks instead (``cluster.py``).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
from nbformat import NotebookNode

from autograder import ALLOW_CPU_ENV
from autograder.course import Course, load_course
from autograder.errors import DeviceError, GradingError
from autograder.grading import record, workers
from autograder.grading.execute import GRADE, STUDENT, TRUSTED, ExecutionJob
from autograder.grading.runner import NotebookRunner, execution_limits
from autograder.grading.runner import sandboxes as _sandboxes
from autograder.grading.runner import wait_for_a_sandbox as _wait_for_a_sandbox
from autograder.grading.sandbox import SandboxProcess, companion_files
from autograder.grading.steps import (
    AutogradeSteps,
    autograde_steps,
    execute_timeout,
    nbgrader_resources,
)
from autograder.grading.transaction import borrowed_gradebook

if TYPE_CHECKING:
    from autograder.slurm import SlurmOptions

STAGING_PREFIX = ".grading-"


@dataclass
class NotebookRun:
    """One notebook of a submission: its sanitized form, then its execution."""

    name: str
    nb: NotebookNode
    kinds: dict[int, str] = field(default_factory=dict)  # code cell index -> student/trusted/grade
    run: workers.RunningNotebook | None = None
    seconds: float = 0.0


@dataclass
class Submission:
    """One student's submission of one assignment, on its way through the pipeline."""

    student: str
    assignment: str
    submitted: Path
    final: Path
    stage: Path
    notebooks: list[NotebookRun] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SubmissionResult:
    """What grading one submission produced (also returned for skipped or failed ones)."""

    student: str
    assignment: str
    status: str  # "graded", "skipped" (already graded), "failed" (could not be graded; see reason)
    score: float | None = None
    max_score: float | None = None
    seconds: float = 0.0
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class GradeSummary:
    results: tuple[SubmissionResult, ...]
    device: str
    seconds: float
    # where the time went (seconds): "setup" (course, torch, template start), "sanitize" and
    # "record" (parent, summed), "execute" (children's wall time, summed over parallel workers)
    timings: dict[str, float] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)


def grade(
    *,
    assignments: Sequence[str] | None = None,
    students: Sequence[str] | None = None,
    course_root: Path = Path("."),
    db_url: str | None = None,
    workers_count: int | None = None,
    device: str = "auto",
    allow_cpu: bool | None = None,
    timeout: float | None = None,
    memory_limit_gb: float | None = 4.0,
    force: bool = False,
    progress: bool = True,
    sandbox: bool = True,
    executor: str = "local",
    slurm_options: SlurmOptions | None = None,
    slurm_folder: Path | None = None,
) -> GradeSummary:
    """Autograde submissions into the course gradebook, with scores identical to ``nbgrader autograde``.

    ``assignments``: default every assignment with submissions; ``students``: default everyone.
    ``workers_count``: children at once (default: CPU count). ``device``: "auto" (CUDA when present),
    "cpu" or "cuda". ``allow_cpu``: run GPU checks on CPU (sets AUTOGRADER_ALLOW_CPU=1 in the children;
    default: inherit the variable from this process). ``timeout``: seconds per cell (default: the
    course's ``Execute.timeout``). ``memory_limit_gb``: extra memory one submission may use (None or 0:
    no limit). ``force``: regrade submissions already graded. ``sandbox``: run student code in the
    bubblewrap sandbox (False: ``--no-sandbox``, for debugging only — the submission can then read and
    change everything this process can).

    ``executor``: "local" (this machine) or "slurm": the notebooks run as a Slurm job array on the
    cluster's nodes, this process records them (``cluster.grade_on_slurm``; ``slurm_options``, default
    the course's ``c.Autograder.slurm``; ``slurm_folder``, default ``<course>/.slurm/grade``, shared
    with the nodes). Same scores, same rules; ``workers_count`` is then notebooks at once per task.
    """
    if executor == "slurm":
        from autograder.grading.cluster import grade_on_slurm

        return grade_on_slurm(
            assignments=assignments, students=students, course_root=course_root, db_url=db_url,
            options=slurm_options, folder=slurm_folder, workers_count=workers_count, device=device,
            allow_cpu=allow_cpu, timeout=timeout, memory_limit_gb=memory_limit_gb, force=force,
            progress=progress, sandbox=sandbox)
    if executor != "local":
        raise GradingError(f"the executor must be 'local' or 'slurm', got {executor!r}")
    started = time.monotonic()
    course = load_course(course_root, db_url=db_url)
    workers.start_template()  # its imports overlap with the checks below
    names = list(assignments) if assignments else course.submitted_assignments()
    for name in names:
        course.require_assignment(name)
    if allow_cpu is None:
        allow_cpu = os.environ.get(ALLOW_CPU_ENV) == "1"
    probe = workers.probe_template()
    device_used = _resolve_device(course, names, device=device, allow_cpu=allow_cpu, probe=probe)
    workers_count = max(1, workers_count or os.cpu_count() or 1)
    timeout = execute_timeout(course) if timeout is None else (timeout if timeout > 0 else None)
    env = _checker_env(allow_cpu=allow_cpu, device_used=device_used)
    sandbox_env = _sandbox_env(device_used=device_used)
    if not sandbox:
        logging.getLogger("autograder").warning(
            "GRADING WITHOUT A SANDBOX (--no-sandbox): submissions run with this process's rights; "
            "they can read the solutions, reach the network and change the gradebook")
    pool = [SandboxProcess(sandboxed=sandbox, gpu=device_used == "cuda")
            for _ in range(max(1, workers_count or os.cpu_count() or 1))]

    timings = {"setup": time.monotonic() - started, "sanitize": 0.0, "record": 0.0, "execute": 0.0}
    limits = execution_limits(probe, memory_limit_gb=memory_limit_gb, device_used=device_used,
                              workers_count=workers_count, cpus=os.cpu_count() or 1)
    with course.gradebook() as gb, _sandboxes(pool):
        results, todo = _plan(course, gb, names, students=students, force=force)
        batch = _Batch(course=course, steps=autograde_steps(course), gb=gb, device=device_used,
                       workers_count=workers_count, timings=timings,
                       make_job=lambda nb_run, workdir: _job(
                           nb_run, workdir, timeout=timeout, env=env, sandbox_env=sandbox_env,
                           address_space=limits.address_space, threads=limits.threads,
                           sandbox_rss=limits.sandbox_rss),
                       rss_limit=limits.rss_limit, pool=pool)
        if todo:
            _wait_for_a_sandbox(pool)
            timings["setup"] = time.monotonic() - started
        with _progress(progress, total=len(todo), device=device_used) as advance:
            results += batch.run(todo, advance)
    return GradeSummary(results=tuple(results), device=device_used,
                        seconds=time.monotonic() - started, timings=timings)


def _plan(course: Course, gb, names: Sequence[str], *, students: Sequence[str] | None,
          force: bool) -> tuple[list[SubmissionResult], list[tuple[str, str]]]:
    """Split the submissions into already graded (skipped unless ``force``) and to do."""
    skipped, todo = [], []
    for name in names:
        wanted = course.submitted_students(name)
        if students:
            wanted = [s for s in wanted if s in set(students)]
        for student in wanted:
            _remove_stale_stages(course, student, name)
            if not force and record.is_graded(gb, course, student=student, assignment=name):
                skipped.append(SubmissionResult(student, name, "skipped"))
            else:
                todo.append((student, name))
    return skipped, todo


@dataclass
class _Batch:
    """Moves submissions through the pipeline: sanitize ahead of the workers, fork up to
    ``workers_count`` children, record each submission as soon as all its notebooks are done."""

    course: Course
    steps: AutogradeSteps
    gb: object
    device: str
    workers_count: int
    timings: dict[str, float]
    make_job: object
    rss_limit: int | None
    pool: list[SandboxProcess]
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("autograder.nbgrader"))

    def run(self, todo: list[tuple[str, str]], advance) -> list[SubmissionResult]:
        results: list[SubmissionResult] = []
        pending = deque(todo)
        queue: deque[tuple[Submission, NotebookRun]] = deque()
        runner = NotebookRunner(self.pool, rss_limit_bytes=self.rss_limit)
        while pending or queue or runner.running:
            while pending and len(queue) < self.workers_count:  # sanitize ahead of the workers
                student, name = pending.popleft()
                submission, failed = self._sanitize(student, name)
                if failed is not None or not submission.notebooks:
                    results.append(failed or self._record(submission))
                    advance(student, name)
                else:
                    queue.extend((submission, nb_run) for nb_run in submission.notebooks)
            free = runner.free_sandboxes()
            while queue and free:  # execute: a checker child per notebook, with its sandbox
                submission, nb_run = queue.popleft()
                nb_run.run = runner.start(
                    free.pop(), (submission, nb_run),
                    key=(submission.student, submission.assignment, nb_run.name),
                    job=self.make_job(nb_run, submission.stage),
                    files=lambda stage=submission.stage: companion_files(stage))
            runner.wait(timeout=0.2)
            for (submission, nb_run), _, seconds in runner.finished():  # check, score, record
                nb_run.seconds = seconds
                self.timings["execute"] += seconds
                if all(r.run is not None and r.run.finished for r in submission.notebooks):
                    results.append(self._record(submission))
                    advance(submission.student, submission.assignment)
        return results

    def _sanitize(self, student: str, name: str) -> tuple[Submission | None, SubmissionResult | None]:
        clock = time.monotonic()
        try:
            return _sanitize(self.course, self.steps, self.gb, student=student, assignment=name,
                             logger=self.logger), None
        except Exception as error:  # noqa: BLE001 - one bad submission never stops a batch
            return None, SubmissionResult(student, name, "failed",
                                          reasons=(f"could not prepare: {error}",))
        finally:
            self.timings["sanitize"] += time.monotonic() - clock

    def _record(self, submission: Submission) -> SubmissionResult:
        return _record(self.course, self.steps, self.gb, submission, self.logger, self.device,
                       self.timings)


def _resolve_device(course: Course, assignments: Sequence[str], *, device: str,
                    allow_cpu: bool, probe: workers.TemplateProbe) -> str:
    """Apply the GPU rule of EXERCISES.md; return "cpu" or "cuda"."""
    if device not in ("auto", "cpu", "cuda"):
        raise DeviceError(f"--device must be auto, cpu or cuda, got {device!r}")
    has_cuda = probe.cuda_available
    if device == "cuda" and not has_cuda:
        raise DeviceError("--device cuda: this machine has no CUDA device (torch "
                          f"{probe.torch_version}, CUDA build {probe.cuda_version})")
    used = "cuda" if (device == "cuda" or (device == "auto" and has_cuda)) else "cpu"
    gpu_assignments = [a for a in assignments if record.gpu_cells(course, a)]
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


def _sandbox_env(*, device_used: str) -> dict[str, str]:
    """The student process's environment (the hidden checks' seed and switches stay outside)."""
    env = {
        "NBGRADER_EXECUTION": "autograde",  # what nbgrader's Execute sets for its kernels
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",  # as ipykernel does
        "AUTOGRADER_DEVICE": device_used,
    }
    if device_used == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def _checker_env(*, device_used: str, allow_cpu: bool) -> dict[str, str]:
    env = _sandbox_env(device_used=device_used)
    env[ALLOW_CPU_ENV] = "1" if allow_cpu else "0"
    return env


def _job(nb_run: NotebookRun, workdir: Path, *, timeout, env, sandbox_env, address_space, threads,
         sandbox_rss) -> ExecutionJob:
    cells = [(i, cell.source, list(cell.metadata.get("tags", [])), nb_run.kinds.get(i, STUDENT))
             for i, cell in enumerate(nb_run.nb.cells) if cell.cell_type == "code"]
    return ExecutionJob(cells=cells, workdir=str(workdir), timeout=timeout,
                        address_space_bytes=address_space, threads=threads, env=env,
                        sandbox_env=sandbox_env, sandbox_rss_bytes=sandbox_rss)


def cell_kinds(gb, nb: NotebookNode, *, notebook: str, assignment: str) -> dict[int, str]:
    """Where each code cell runs: grade cells in the checker, the instructor's locked cells in both
    places, everything else (solutions, cells the student added) in the sandbox only. Decided from
    the gradebook, never from the submission's metadata; the source of every trusted or grade cell
    is the gradebook's (nbgrader's sanitize step restored it; this makes sure)."""
    book = gb.find_notebook(notebook, assignment)
    grade_ids = {cell.name for cell in book.grade_cells}
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
            cell.source = source.source
        kinds[index] = kind
    return kinds


def _remove_stale_stages(course: Course, student: str, assignment: str) -> None:
    """Delete staging directories a killed run left behind (they never hold a recorded grade)."""
    parent = course.step_dir("autograded", student, assignment).parent
    if parent.is_dir():
        for stale in [*parent.glob(f"{STAGING_PREFIX}{assignment}-*"),
                      *parent.glob(f"{assignment}.old-*")]:
            shutil.rmtree(stale, ignore_errors=True)


class _ListHandler(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record_: logging.LogRecord) -> None:
        message = record_.getMessage()
        if "Attribute 'checksum'" not in message:  # always fires: releases lack the hidden tests
            self.sink.append(message)


def _sanitize(course: Course, steps: AutogradeSteps, gb, *, student: str, assignment: str,
              logger: logging.Logger) -> Submission:
    """Stage one submission's files and sanitize its notebooks with nbgrader's preprocessors."""
    final = course.step_dir("autograded", student, assignment)
    submission = Submission(
        student=student, assignment=assignment,
        submitted=course.step_dir("submitted", student, assignment), final=final,
        stage=final.parent / f"{STAGING_PREFIX}{assignment}-{os.getpid()}")
    record.stage_files(course, submission.submitted, submission.stage, assignment=assignment)
    handler = _ListHandler(submission.log)
    logger.addHandler(handler)
    try:
        _sanitize_notebooks(course, steps, gb, submission, logger)
    except BaseException:
        shutil.rmtree(submission.stage, ignore_errors=True)
        raise
    finally:
        logger.removeHandler(handler)
    return submission


def _sanitize_notebooks(course: Course, steps: AutogradeSteps, gb, submission: Submission,
                        logger: logging.Logger) -> None:
    """nbgrader's sanitize preprocessors on each notebook the gradebook expects; a missing or
    unreadable notebook is recorded as missing (nbgrader gives it 0)."""
    student, assignment = submission.student, submission.assignment
    with borrowed_gradebook(gb):
        for name in record.notebook_names(gb, assignment):
            path = submission.submitted / f"{name}.ipynb"
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
            nb = steps.run(steps.sanitize, nb, resources, logger)
            kinds = cell_kinds(gb, nb, notebook=name, assignment=assignment)
            submission.notebooks.append(NotebookRun(name=name, nb=nb, kinds=kinds))


def _record(course: Course, steps: AutogradeSteps, gb, submission: Submission,
            logger: logging.Logger, device_used: str, timings: dict[str, float]) -> SubmissionResult:
    handler = _ListHandler(submission.log)
    logger.addHandler(handler)
    clock = time.monotonic()
    try:
        return record.record_submission(course, steps, gb, submission, logger=logger,
                                        device=device_used)
    except Exception as error:  # noqa: BLE001 - reported, the batch goes on
        shutil.rmtree(submission.stage, ignore_errors=True)
        why = str(error) if isinstance(error, GradingError) else f"{type(error).__name__}: {error}"
        return SubmissionResult(submission.student, submission.assignment, "failed",
                                reasons=(f"not graded: {why}",))
    finally:
        logger.removeHandler(handler)
        timings["record"] += time.monotonic() - clock


class _progress:
    """A rich progress bar with ETA (or nothing when ``enabled`` is false)."""

    def __init__(self, enabled: bool, *, total: int, device: str) -> None:
        self.enabled, self.total, self.device = enabled, total, device

    def __enter__(self):
        if not self.enabled or self.total == 0:
            return lambda student, assignment: None
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(TextColumn(f"grading on {self.device}"), BarColumn(),
                             MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                             TimeRemainingColumn(), TextColumn("{task.description}"),
                             console=Console(stderr=True))
        self._bar.start()
        task = self._bar.add_task("", total=self.total)

        def advance(student: str, assignment: str) -> None:
            self._bar.update(task, advance=1, description=f"{assignment}/{student}")

        return advance

    def __exit__(self, *exc_info) -> None:
        if getattr(self, "_bar", None) is not None:
            self._bar.stop()

