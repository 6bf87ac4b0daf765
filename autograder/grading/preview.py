"""A regrade preview (``autograder grade A --preview``): whose total would change if every submission of
``A`` were graded again now, e.g. after a hidden-test fix — without touching the grade of record.

The engine runs unchanged on a scratch copy of the course: its ``nbgrader_config.py``, the assignments'
sources and submissions, and a copy of the SQLite gradebook (SQLite's backup API: a consistent copy
even while another process writes). Everything is graded (``force``) into the copy; then each total
(the score less nbgrader's late penalty: what ``nbgrader export`` calls the score) is compared with
the real gradebook's. The real gradebook, ``autograded/`` and ``feedback/`` are never written; the copy
is deleted at the end, also when the run fails or is stopped. The real regrade is then
``autograder grade A --force``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.course.nbgrader import Course, load_course
from autograder.errors import GradingError
from autograder.grading.model import GradeSummary
from autograder.grading.options import GradeOptions


@dataclass(frozen=True)
class Change:
    student: str
    assignment: str
    old: float | None  # the gradebook's total now (None: not graded yet)
    new: float | None  # the total a regrade would record (None: it would fail)
    max_score: float | None


@dataclass
class Preview:
    summary: GradeSummary  # the scratch run's (its failures are the regrade's failures)
    changes: list[Change] = field(default_factory=list)
    unchanged: int = 0


def preview_regrade(options: GradeOptions | None = None, /, **settings: Any) -> Preview:
    """Grade every submission of ``options.assignments`` (and ``students``) into a scratch copy of the
    course and compare its totals with the gradebook's (module docstring)."""
    from autograder.grading.pipeline import grade

    options = GradeOptions.of(options, **settings)
    if options.executor == "slurm" and options.slurm_folder is None:
        raise GradingError("--preview with --executor slurm needs --slurm-folder on storage the nodes "
                           "share (the scratch copy of the course is in this machine's temp folder)")
    course = load_course(options.course_root, db_url=options.db_url)
    if not course.db_url.startswith("sqlite:///"):
        raise GradingError(f"--preview copies the gradebook, and copies only SQLite ones ({course.db_url}"
                           " is not): grade a copy of the course instead")
    names = list(options.assignments or course.submitted_assignments())
    for name in names:
        course.require_assignment(name)
    with tempfile.TemporaryDirectory(prefix="autograder-preview-") as tmp:
        os.chmod(tmp, 0o711)  # the checker (its own uid when grading as root) passes through
        scratch = Path(tmp) / "course"
        db_url = _copy_course(course, scratch, names)
        summary = grade(GradeOptions.of(options, course_root=scratch, db_url=db_url, force=True,
                                        assignments=names,
                                        hidden_folders=(*options.hidden_folders, str(course.root))))
        copy = load_course(scratch, db_url=db_url)
        result = Preview(summary=summary)
        for r in sorted(summary.results, key=lambda r: (r.assignment, r.student)):
            old = _total(course, r.student, r.assignment)
            new = _total(copy, r.student, r.assignment) if r.status == "graded" else None
            if old is not None and new is not None and abs(old - new) < 1e-9:
                result.unchanged += 1
            else:
                result.changes.append(Change(r.student, r.assignment, old, new, r.max_score))
    return result


def _copy_course(course: Course, scratch: Path, names: list[str]) -> str:
    """The scratch course: config, sources and submissions of ``names``, the gradebook (SQLite backup).
    Every grading folder of the copy must lie inside it (a config with absolute folders is refused)."""
    scratch.mkdir(mode=0o755)
    shutil.copy2(course.root / "nbgrader_config.py", scratch / "nbgrader_config.py")
    db = scratch / "gradebook.db"
    source = sqlite3.connect(f"file:{course.db_url.removeprefix('sqlite:///')}?mode=ro", uri=True)
    try:
        target = sqlite3.connect(db)
        with target:
            source.backup(target)
        target.close()
    finally:
        source.close()
    db_url = f"sqlite:///{db}"
    copy = load_course(scratch, db_url=db_url)
    for step in ("submitted", "autograded", "feedback"):
        folder = copy.step_dir(step, "x", "y").resolve()
        if not folder.is_relative_to(scratch.resolve()):
            raise GradingError(f"--preview: the course's {step} folder ({folder}) is outside the "
                               "course folder, so a copy would grade into the real one; refused")
    coursedir = course.coursedir
    for name in names:
        src = Path(coursedir.format_path(coursedir.source_directory, ".", name))
        if src.is_dir():
            shutil.copytree(src, Path(copy.coursedir.format_path(copy.coursedir.source_directory,
                                                                 ".", name)), symlinks=True)
        for student in course.submitted_students(name):
            shutil.copytree(course.step_dir("submitted", student, name),
                            copy.step_dir("submitted", student, name), symlinks=True)
    return db_url


def _total(course: Course, student: str, assignment: str) -> float | None:
    """The submission's score less its late penalty, as ``nbgrader export`` reports it."""
    from nbgrader.api import MissingEntry

    with course.gradebook() as gb:
        try:
            found = gb.find_submission(assignment, student)
        except MissingEntry:
            return None
        return float(found.score) - float(found.late_submission_penalty or 0)
