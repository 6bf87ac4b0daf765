"""The instructor's side of remote grading (trusted): submissions out as work units, results back in.

``work_item`` turns a prepared submission into a ``work.SubmissionWork`` keyed by its inputs and the
grading code; ``hand_over`` turns one result file (``work.py``'s format) into the submission's
outcomes for the pipeline, the only gradebook writer; ``drop_recorded_results`` removes what an
interrupted run recorded but did not delete.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote

import autograder
from autograder.course.nbgrader import Course
from autograder.errors import GradingError
from autograder.grading.executor import Outcomes
from autograder.grading.model import NotebookOutcome, Submission, starved_twice
from autograder.grading.options import GradeOptions
from autograder.grading.prepare import companion_files, is_graded
from autograder.grading.remote.work import (
    PASSED_ENV,
    RESULT_SUFFIX,
    NotebookWork,
    SubmissionWork,
)


def work_item(submission: Submission, options: GradeOptions, *, device: str,
              code: str) -> SubmissionWork:
    """``submission`` as a work unit keyed by its inputs and ``code`` (``code_digest()``); raises
    ``GradingError`` when its companion files cannot be read."""
    item = SubmissionWork(
        key="", student=submission.student, assignment=submission.assignment,
        notebooks=tuple(NotebookWork(nb_run.name, nb_run.require_program())
                        for nb_run in submission.notebooks),
        files=tuple(companion_files(submission.stage)), device=device,
        memory_limit_gb=options.memory_limit_gb, sandboxed=options.sandbox, workers=options.workers,
        environ=tuple((k, os.environ[k]) for k in PASSED_ENV if k in os.environ))
    return dataclasses.replace(
        item, key=f"{submission.assignment}/{submission.student}/{_digest(item, code)}")


def code_digest() -> str:
    """A digest of the grading code (this package: checker, sandbox, hidden checks)."""
    root = Path(autograder.__file__).resolve().parent
    digest = hashlib.sha256(autograder.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _digest(work: SubmissionWork, code: str) -> str:
    """16 hex digits naming a work item's inputs and the code that grades it."""
    inputs = dataclasses.asdict(dataclasses.replace(work, key="", files=()))
    inputs["files"] = [(path, hashlib.sha256(data).hexdigest()) for path, data in work.files]
    inputs["code"] = code
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]


def hand_over(submission: Submission, path: Path, outcomes: Outcomes,
              seen_task: Callable[[str, float, float], None] | None = None) -> None:
    """One result file -> the submission's outcomes (never raises); the file is consumed whatever
    happens (a rerun recomputes what was not recorded). ``seen_task(task, started, ready)`` hears
    when the machine's task started and had its first sandbox."""
    try:
        data = json.loads(path.read_text())
        if data.get("task") and seen_task is not None:
            seen_task(str(data["task"]), float(data["started"]), float(data["ready"]))
        if data.get("error"):
            outcomes.failed(submission, f"not graded: {data['error']}")
            return
        ran = data["notebooks"]
        if sorted(ran) != sorted(nb_run.name for nb_run in submission.notebooks):
            raise GradingError(f"the result holds notebooks {sorted(ran)}, not this submission's")
        done = {nb_run.name: NotebookOutcome.from_json(ran[nb_run.name])
                for nb_run in submission.notebooks}
        for name, outcome in done.items():  # the node ran it twice, starved both times
            if outcome.starved is not None:
                outcomes.failed(submission, starved_twice(name, outcome.starved))
                return
        for name, outcome in done.items():
            outcomes.executed(submission, name, outcome)
    except Exception as error:  # noqa: BLE001 - reported, the run goes on
        outcomes.failed(submission, f"not graded: {error}")
    finally:
        path.unlink(missing_ok=True)


def drop_recorded_results(course: Course, results: Path) -> None:
    """Delete result files of submissions the gradebook already holds (a run killed between its
    commit and deleting the file leaves one behind)."""
    if not results.is_dir():
        return
    with course.gradebook() as gb:
        for path in results.iterdir():
            parts = unquote(path.name.removesuffix(RESULT_SUFFIX)).split("/")
            if path.name.endswith(RESULT_SUFFIX) and len(parts) == 3 and is_graded(
                    gb, course, student=parts[1], assignment=parts[0]):
                path.unlink(missing_ok=True)
