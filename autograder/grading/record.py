"""The check, score and record steps (trusted side): executed notebooks into the gradebook, one
transaction each.

For one submission, inside a single database transaction: create or update the student and the
submission (with its ``timestamp.txt``), zero the grades of notebooks that were not submitted (as
nbgrader does), then run nbgrader's post-execute preprocessors on each executed notebook
(``IgnorePattern``, ``LimitOutput``, ``SaveAutoGrades``, ``AssignLatePenalties``, ``CheckCellMetadata``, as
configured). The autograded notebooks are written in a staging directory first.

The folder and the grades change together, as one step seen from outside: the old
``autograded/<student>/<assignment>/`` is set aside *before* the commit, the commit writes the grades,
and only then is the staging directory moved into place. A run killed at any moment therefore leaves
either the old grades with their old folder, or no autograded folder at all — which ``prepare.plan``
never counts as graded, so the next run grades the submission again (the same result) and puts its
folder in place. Never new files with old grades, never a resubmission skipped as graded.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode
from nbgrader.api import Gradebook
from sqlalchemy.exc import SAWarning

import autograder
from autograder import forbidden
from autograder.course.nbgrader import Course
from autograder.errors import GraderFault, GradingError
from autograder.grading.model import (
    GRADE,
    STUDENT,
    TRUSTED,
    NotebookOutcome,
    NotebookRun,
    Submission,
    SubmissionResult,
)
from autograder.grading.nbgrader_seam import (
    AutogradeSteps,
    borrowed_gradebook,
    nbgrader_resources,
    one_transaction,
)
from autograder.grading.prepare import NBGRADER_LOGGER, CollectWarnings, discard_stage
from autograder.grading.run_record import (
    DIGESTS,
    RUN_RECORD,
    cell_outcomes,
    graded_digests,
    move_record_out,
    read_record,
    sandbox_log_path,
    write_sandbox_logs,
)
from autograder.machine_limits import NOT_RUN_REASON, not_run_cells
from autograder.sandbox.inside.protocol import Failure


def executed_notebook(nb: NotebookNode, run: NotebookOutcome,
                      kinds: dict[int, str] | None = None) -> tuple[NotebookNode, list[str]]:
    """Put the outcome's outputs into the sanitized notebook. Cells it never finished get an error
    output naming the reason, so nbgrader's scoring gives them 0 (never the full marks of an empty
    output); so does a grade cell (``kinds``) with no outputs from the checker at all."""
    if run.reason is not None and not run.outputs and run.running_cell is None:
        # the child died before running a single cell: a grading-machine problem, not the student's
        raise GraderFault(f"the grading process failed before running any cell ({run.reason}); "
                          "nothing recorded")
    reasons = [] if run.reason is None else [run.reason]
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if index in run.outputs:
            outputs, count = run.outputs[index]
            cell.outputs = [nbformat.from_dict(o) for o in outputs]
            cell.execution_count = count
            if (kinds or {}).get(index) == GRADE and index not in run.completed:
                # fails closed: a grade cell the checker did not run to completion earns nothing
                cell.outputs.append(_error("NotExecuted", "not run to completion: " + (
                    run.reason or "the checker did not finish this grade cell")))
        elif run.reason is not None and cell.source.strip():
            ename = run.failed_ename if index == run.running_cell else "NotExecuted"
            evalue = run.reason if index == run.running_cell else f"not run: {run.reason}"
            cell.outputs = [_error(ename, evalue)]
        elif (kinds or {}).get(index) == GRADE and cell.source.strip():
            cell.outputs = [_error("NotExecuted", "not run: the checker did not run this grade cell")]
        for output in cell.outputs:
            if output.output_type == "error" and _is_limit_error(output):
                where = cell.metadata.get("nbgrader", {}).get("grade_id", f"cell {index}")
                reasons.append(f"{where}: {output.ename}: {output.evalue}")
    _refuse_a_failed_set_up(nb, kinds)
    return nb, reasons


def _refuse_a_failed_set_up(nb: NotebookNode, kinds: dict[int, str] | None) -> None:
    """An instructor's locked cell that failed (an error, a timeout, a death) while nothing the
    student wrote had run yet is the grading machine's fault, never a score: GraderFault. (Files of
    the submission could still be imported by it: the service retries, then lists it for staff.)"""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        if (kinds or {}).get(index) != TRUSTED:
            return  # the student's code (or a grade cell) comes first from here on
        for output in cell.outputs:
            if output.output_type == "error":
                where = cell.metadata.get("nbgrader", {}).get("grade_id", f"cell {index}")
                raise GraderFault(f"the instructor's set-up cell {where} failed before any of the "
                                  f"student's code ran ({output.ename}: {output.evalue}); nothing "
                                  "recorded")


def _error(ename: str, evalue: str) -> NotebookNode:
    output: NotebookNode = nbformat.v4.new_output("error", ename=ename, evalue=evalue,
                                                  traceback=[f"\x1b[0;31m{ename}\x1b[0m: {evalue}"])
    return output


def _is_limit_error(output: NotebookNode) -> bool:
    """A timeout or an out-of-memory error (the instructor wants to see these listed)."""
    return (output.ename in (Failure.CELL_TIMEOUT, Failure.NOTEBOOK_TIMEOUT, "MemoryError")
            or "can't allocate memory" in output.evalue or "out of memory" in output.evalue)


def record(course: Course, steps: AutogradeSteps, gb: Gradebook, submission: Submission, *,
           device: str, timings: dict[str, float]) -> SubmissionResult:
    """``record_submission``, with its failure as data: a submission that cannot be recorded is
    "failed" with the reason, its stage removed, and the batch goes on."""
    logger = logging.getLogger(NBGRADER_LOGGER)
    handler = CollectWarnings(submission.log)
    logger.addHandler(handler)
    clock = time.monotonic()
    try:
        return record_submission(course, steps, gb, submission, logger=logger, device=device)
    except Exception as error:  # noqa: BLE001 - reported, the batch goes on
        discard_stage(submission.stage)
        why = str(error) if isinstance(error, GradingError) else f"{type(error).__name__}: {error}"
        return SubmissionResult(submission.student, submission.assignment, "failed",
                                reasons=(f"not graded: {why}",),
                                grader_fault=isinstance(error, GraderFault))
    finally:
        logger.removeHandler(handler)
        timings["record"] = timings.get("record", 0.0) + time.monotonic() - clock


def record_submission(course: Course, steps: AutogradeSteps, gb: Gradebook, submission: Submission,
                      *, logger: logging.Logger, device: str) -> SubmissionResult:
    """Score and record one submission (all notebooks) in one transaction; move its directory into
    place; return its result."""
    student, assignment = submission.student, submission.assignment
    reasons: list[str] = [f"{name}.ipynb: not submitted (0 points)" for name in submission.missing]
    reasons += [f"refused {why}" for why in submission.refused]
    run_record: dict[str, Any] = {"graded_by": f"autograder {autograder.__version__}",
                                  "device": device, "notebooks": {}, "review": []}
    rules = forbidden.course_rules(course, assignment)
    not_run: list[str] = []  # grade ids the machine could not run (machine_limits)
    logs: dict[str, str] = {}  # notebook -> its sandbox's log where it did not complete
    aside = None
    try:
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
                found = forbidden.review(forbidden.student_cells(nb_run.nb, nb_run.kinds, STUDENT),
                                         rules, forbidden.trusted_sources(nb_run.nb, nb_run.kinds,
                                                                          STUDENT))
                run_record["review"] += [{"notebook": nb_run.name, **f.as_json()} for f in found]
                if forbidden.shown_to_students(course):
                    reasons += [f"{nb_run.name}.ipynb: {f.describe()}" for f in found]
                outcome = nb_run.require_outcome()
                _keep_files(submission.stage, outcome.files)
                nb, nb_reasons = executed_notebook(nb_run.nb, outcome,
                                                   nb_run.kinds if outcome.executed else None)
                resources = nbgrader_resources(course, student=student, assignment=assignment,
                                               notebook=nb_run.name, workdir=str(submission.stage))
                nb = steps.run(steps.after_execute, nb, resources, logger)
                nbformat.write(nb, submission.stage / f"{nb_run.name}.ipynb")
                reasons += [f"{nb_run.name}.ipynb: {r}" for r in nb_reasons]
                review = _for_manual_review(gb, nb, nb_run, assignment=assignment, student=student)
                if review:
                    reasons.append(f"{nb_run.name}.ipynb: needs review: the notebook's process died "
                                   f"before {', '.join(review)} ran; flagged for manual grading "
                                   "(formgrader), 0 points until then")
                unrun = not_run_cells(nb.cells)  # NeedsGPU: the machine's, not the student's
                not_run += unrun
                logs[nb_run.name] = outcome.sandbox_log
                run_record["notebooks"][nb_run.name] = {
                    "seconds": round(outcome.seconds, 3), "reason": outcome.reason, "not_run": unrun,
                    "cells": cell_outcomes(nb.cells, nb_run.kinds, outcome.cell_seconds, unrun),
                    "sandbox_log": sandbox_log_path(submission.final, nb_run.name).name
                    if outcome.sandbox_log else None}
            if not_run:
                reasons.append(not_run_problem(len(not_run)))
            run_record["not_run"] = {"reason": NOT_RUN_REASON, "cells": not_run}
            gb.db.flush()
            gb.db.expire_all()  # scores are SQL sums: reload them after the flush
            found = gb.find_submission(assignment, student)
            score, max_score = float(found.score), float(found.max_score)
            penalty = 0.0
            if found.total_seconds_late > 0:  # nbgrader's AssignLatePenalties decided the penalty
                penalty = float(found.late_submission_penalty or 0)
                reasons.append(late_notice(found.total_seconds_late, penalty, score, max_score))
            digests = dict(submission.digests)
            if submission.only is not None:  # --notebook: the others keep the digest they were graded at
                kept = graded_digests(submission.final) or {}
                digests = {**{k: v for k, v in kept.items() if k in submission.digests},
                           **{k: v for k, v in submission.digests.items() if k in submission.only}}
            run_record.update(score=score, max_score=max_score, problems=reasons,
                              nbgrader_warnings=submission.log)
            run_record[DIGESTS] = digests
            (submission.stage / RUN_RECORD).write_text(json.dumps(run_record, indent=1))
            aside = _set_aside(submission.final)  # a kill from here on leaves no folder: regraded
    except BaseException:  # rolled back: the old grades stay, so does their folder
        _put_back(aside, submission.final)
        raise
    # committed: the new grades are in the gradebook; now their folder
    _swap_in(submission.stage, submission.final, aside)
    write_sandbox_logs(submission.final, logs)
    steps.set_permissions(assignment=assignment, student=student)
    seconds = sum(r.require_outcome().seconds for r in submission.notebooks)
    return SubmissionResult(student, assignment, "graded", score=score, max_score=max_score,
                            seconds=seconds, reasons=tuple(reasons), not_run=len(not_run),
                            late_penalty=penalty)


def late_notice(seconds: float, penalty: float, score: float, max_score: float) -> str:
    """How late a submission was and what it cost, one whole sentence per unit and case (each a
    catalogue entry, ``autograder.i18n.messages.REASON_SOURCES``): minutes under an hour, hours under
    two days, else days."""
    record = score - penalty
    if seconds < 3600:
        minutes = seconds / 60
        if penalty:
            return (f"late by {minutes:.0f} min: late penalty {penalty:g} (grade of record "
                    f"{record:g}/{max_score:g})")
        return f"late by {minutes:.0f} min: no penalty"
    if seconds < 2 * 86400:
        hours = seconds / 3600
        if penalty:
            return (f"late by {hours:.1f} h: late penalty {penalty:g} (grade of record "
                    f"{record:g}/{max_score:g})")
        return f"late by {hours:.1f} h: no penalty"
    days = seconds / 86400
    if penalty:
        return (f"late by {days:.1f} days: late penalty {penalty:g} (grade of record "
                f"{record:g}/{max_score:g})")
    return f"late by {days:.1f} days: no penalty"


def not_run_problem(cells: int) -> str:
    """The problems column's entry for a submission with grade cells this machine did not run
    (``NOT_RUN_REASON`` and a count; one sentence each for one check and for several)."""
    if cells == 1:
        return "not run: no GPU (1 check)"
    return f"not run: no GPU ({cells} checks)"


NEEDS_REVIEW = "needs review"


def _for_manual_review(gb: Gradebook, nb: NotebookNode, nb_run: NotebookRun, *, assignment: str,
                       student: str) -> list[str]:
    """Grade cells the checker never ran because the student's process died (not a time or memory
    limit: those are the limits' verdicts). nbgrader leaves such a notebook's grade cells ungraded
    (no score) and in formgrader's manual-grade queue; so are these (0 points until an instructor
    decides), while the cells that ran before keep their scores."""
    run = nb_run.require_outcome()
    if run.reason is None or run.failed_ename != Failure.KERNEL_DIED or run.running_cell is None:
        return []
    flagged = []
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if index >= run.running_cell and meta.get("grade") and index not in run.outputs:
            grade = gb.find_grade(meta["grade_id"], nb_run.name, assignment, student)
            grade.auto_score, grade.needs_manual_grade = None, True  # as nbgrader leaves it
            flagged.append(meta["grade_id"])
    return flagged


def _keep_files(stage: Path, files: dict[str, bytes]) -> None:
    """The files a notebook wrote next to itself, into its autograded folder (where a local run's
    checker already wrote them; a Slurm node's come with its result): new regular files only."""
    root = stage.resolve()
    for relative, data in files.items():
        target = (root / relative).resolve()
        if not target.is_relative_to(root) or target.exists() or target.suffix == ".ipynb":
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as out:
            out.write(data)


def _set_aside(final: Path) -> Path | None:
    """Move the old autograded folder out of the way (``prepare.remove_stale_stages`` deletes what a
    killed run left there); None when there was none."""
    if not final.exists():
        return None
    aside = final.with_name(final.name + f".old-{os.getpid()}")
    os.replace(final, aside)
    return aside


def _put_back(aside: Path | None, final: Path) -> None:
    """The commit failed: the old grades stay, so does their folder."""
    if aside is not None and not final.exists():
        os.replace(aside, final)


def _swap_in(stage: Path, final: Path, aside: Path | None) -> None:
    """After the commit: the staged folder becomes ``autograded/<student>/<assignment>/`` (its run
    record goes beside it, out of what nbgrader copies into feedback)."""
    os.replace(stage, final)
    move_record_out(final)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def read_run_record(course: Course, *, student: str, assignment: str) -> dict[str, Any] | None:
    """The autograder's note about a graded submission (None if nbgrader graded it, or none yet)."""
    return read_record(course.step_dir("autograded", student, assignment))
