"""The check, score and record steps: executed notebooks into nbgrader's gradebook, one transaction each.

For one submission, inside a single database transaction: create or update the student and the
submission (with its ``timestamp.txt``), zero the grades of notebooks that were not submitted (as
nbgrader does), then run nbgrader's post-execute preprocessors on each executed notebook
(``IgnorePattern``, ``LimitOutput``, ``SaveAutoGrades``, ``AssignLatePenalties``, ``CheckCellMetadata``, as
configured). The autograded notebooks are written in a staging directory that replaces
``autograded/<student>/<assignment>/`` just before the commit: a run killed at any moment leaves either
the old grades or the new ones, never half of them (a staged directory without a commit is regraded).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import nbformat
from nbformat import NotebookNode
from nbgrader import utils as nbgrader_utils
from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import SAWarning

import autograder
from autograder.course import Course
from autograder.errors import GradingError
from autograder.grading.steps import AutogradeSteps, nbgrader_resources
from autograder.grading.transaction import borrowed_gradebook, one_transaction

if TYPE_CHECKING:
    from autograder.grading.pipeline import Submission, SubmissionResult

RUN_RECORD = "autograder.json"  # per submission: device, timings, and why cells failed


def notebook_names(gb: Gradebook, assignment: str) -> list[str]:
    """The assignment's notebooks, as the gradebook knows them."""
    return sorted(nb.name for nb in gb.find_assignment(assignment).notebooks)


def gpu_cells(course: Course, assignment: str) -> list[str]:
    """Grade cells of ``assignment`` that hold GPU-only checks (grade ids ending in ``_gpu``)."""
    with course.gradebook() as gb:
        return sorted(cell.name for nb in gb.find_assignment(assignment).notebooks
                      for cell in nb.grade_cells if cell.name.endswith("_gpu"))


def is_graded(gb: Gradebook, course: Course, *, student: str, assignment: str) -> bool:
    """True when the gradebook holds this submission and its autograded directory exists, and the
    submission is not newer than what was graded (nbgrader's own rule for skipping)."""
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
    return not (new is not None and old is not None and new > old)


def stage_files(course: Course, submitted: Path, stage: Path, *, assignment: str) -> None:
    """Lay out the staging directory as nbgrader lays out ``autograded/``: the submission's other files,
    then the instructor's source files on top (minus ``Autograde.exclude_overwriting``)."""
    if stage.exists():
        shutil.rmtree(stage)
    stage.mkdir(parents=True)
    ignore = list(course.coursedir.ignore) + ["*.ipynb"]
    for filename in nbgrader_utils.find_all_files(str(submitted), ignore):
        _copy(Path(filename), stage / Path(filename).relative_to(submitted))
    source = Path(course.coursedir.format_path(course.coursedir.source_directory, ".", assignment))
    excluded = course.config.Autograde.get("exclude_overwriting", {}).get(assignment, [])
    for filename in nbgrader_utils.find_all_files(str(source), ignore):
        relative = Path(filename).relative_to(source)
        if str(relative) not in excluded:
            _copy(Path(filename), stage / relative)


def _copy(src: Path, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.exists():
        dest.unlink()
    shutil.copy(src, dest)


def executed_notebook(nb: NotebookNode, run) -> tuple[NotebookNode, list[str]]:
    """Put the child's outputs into the sanitized notebook. Cells it never finished get an error output
    naming the reason, so nbgrader's scoring gives them 0 (never the full marks of an empty output)."""
    if run.reason is not None and not run.outputs and run.running_cell is None:
        # the child died before running a single cell: a grading-machine problem, not the student's
        raise GradingError(f"the grading process failed before running any cell ({run.reason}); "
                           "nothing recorded")
    reasons = [] if run.reason is None else [run.reason]
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if index in run.outputs:
            outputs, count = run.outputs[index]
            cell.outputs = [nbformat.from_dict(o) for o in outputs]
            cell.execution_count = count
        elif run.reason is not None and cell.source.strip():
            ename = run.failed_ename if index == run.running_cell else "NotExecuted"
            evalue = run.reason if index == run.running_cell else f"not run: {run.reason}"
            cell.outputs = [nbformat.v4.new_output(
                "error", ename=ename, evalue=evalue,
                traceback=[f"\x1b[0;31m{ename}\x1b[0m: {evalue}"])]
        for output in cell.outputs:
            if output.output_type == "error" and _is_limit_error(output):
                where = cell.metadata.get("nbgrader", {}).get("grade_id", f"cell {index}")
                reasons.append(f"{where}: {output.ename}: {output.evalue}")
    return nb, reasons


def _is_limit_error(output: NotebookNode) -> bool:
    """A timeout or an out-of-memory error (the instructor wants to see these listed)."""
    return (output.ename in ("CellTimeoutError", "MemoryError")
            or "can't allocate memory" in output.evalue or "out of memory" in output.evalue)


def record_submission(course: Course, steps: AutogradeSteps, gb: Gradebook, submission: Submission,
                      *, logger: logging.Logger, device: str) -> SubmissionResult:
    """Score and record one submission (all notebooks) in one transaction; move its directory into
    place; return its result."""
    from autograder.grading.pipeline import SubmissionResult

    student, assignment = submission.student, submission.assignment
    reasons: list[str] = [f"{name}.ipynb: not submitted (0 points)" for name in submission.missing]
    run_record: dict = {"graded_by": f"autograder {autograder.__version__}", "device": device,
                        "notebooks": {}}
    with one_transaction(gb), borrowed_gradebook(gb), warnings.catch_warnings():
        # nbgrader's add_submission autoflushes a half-built object (harmless; it warns every time)
        warnings.simplefilter("ignore", SAWarning)
        gb.update_or_create_student(student)
        timestamp = course.coursedir.get_existing_timestamp(str(submission.submitted))
        if timestamp:
            gb.update_or_create_submission(assignment, student, timestamp=timestamp)
        else:
            gb.update_or_create_submission(assignment, student)
        for name in submission.missing:  # nbgrader: a missing notebook scores zero
            for grade in gb.find_submission_notebook(name, assignment, student).grades:
                grade.auto_score = 0
                grade.needs_manual_grade = False
        for nb_run in submission.notebooks:
            nb, nb_reasons = executed_notebook(nb_run.nb, nb_run.run)
            resources = nbgrader_resources(course, student=student, assignment=assignment,
                                           notebook=nb_run.name, workdir=str(submission.stage))
            nb = steps.run(steps.after_execute, nb, resources, logger)
            nbformat.write(nb, submission.stage / f"{nb_run.name}.ipynb")
            reasons += [f"{nb_run.name}.ipynb: {r}" for r in nb_reasons]
            run_record["notebooks"][nb_run.name] = {"seconds": round(nb_run.seconds, 3),
                                                    "reason": nb_run.run.reason}
        gb.db.flush()
        gb.db.expire_all()  # scores are SQL sums: reload them after the flush
        found = gb.find_submission(assignment, student)
        score, max_score = float(found.score), float(found.max_score)
        run_record.update(score=score, max_score=max_score, problems=reasons,
                          nbgrader_warnings=submission.log)
        (submission.stage / RUN_RECORD).write_text(json.dumps(run_record, indent=1))
        _replace_dir(submission.stage, submission.final)
    seconds = sum(r.seconds for r in submission.notebooks)
    return SubmissionResult(student, assignment, "graded", score=score, max_score=max_score,
                            seconds=seconds, reasons=tuple(reasons))


def _replace_dir(stage: Path, final: Path) -> None:
    """Swap ``stage`` in as ``final`` (the old directory is removed first)."""
    if final.exists():
        old = final.with_name(final.name + f".old-{os.getpid()}")
        os.replace(final, old)
        os.replace(stage, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(stage, final)


def read_run_record(course: Course, *, student: str, assignment: str) -> dict | None:
    """The autograder's note about a graded submission (None if nbgrader graded it, or none yet)."""
    path = course.step_dir("autograded", student, assignment) / RUN_RECORD
    return json.loads(path.read_text()) if path.is_file() else None
