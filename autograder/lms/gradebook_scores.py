"""What goes to the LMS, read from nbgrader's gradebook: per student and assignment the number
``nbgrader export`` writes (the submission's score less its late penalty, never below 0; 0 without a
submission), with each assignment's maximum and each student's names and email; and what decides
whether an assignment may be posted at all (``autograder.lms.posting``): its nbgrader due date, and
per submission the grade cells the grading machine did not run (``autograder.machine_limits``)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from nbgrader.api import MissingEntry

from autograder.course.nbgrader import Course
from autograder.errors import CourseError
from autograder.machine_limits import not_run_in_notebooks


@dataclass(frozen=True)
class GradebookStudent:
    id: str
    first_name: str
    last_name: str
    email: str


@dataclass
class GradebookScores:
    """Scores of the chosen assignments for every gradebook student."""

    assignments: list[str]
    maximum: dict[str, float]
    students: list[GradebookStudent]
    score: dict[tuple[str, str], float] = field(default_factory=dict)  # (student id, assignment)
    submitted: set[tuple[str, str]] = field(default_factory=set)
    due: dict[str, dt.datetime | None] = field(default_factory=dict)  # nbgrader's due date, UTC
    # assignment -> student -> grade ids the grading machine did not run (only where some were not)
    not_run: dict[str, dict[str, list[str]]] = field(default_factory=dict)


def read_scores(course: Course, assignments: list[str] | None = None) -> GradebookScores:
    """Scores of ``assignments`` (default: every assignment of the gradebook); an assignment the
    gradebook does not know is an error naming the ones it does."""
    with course.gradebook() as gb:
        known = sorted(a.name for a in gb.assignments)
        chosen = list(assignments) if assignments else known
        missing = [name for name in chosen if name not in known]
        if missing:
            raise CourseError(f"assignment(s) {missing} are not in the gradebook {course.db_url} "
                              f"(it has: {', '.join(known) or 'none'})")
        students = [GradebookStudent(id=s.id, first_name=s.first_name or "",
                                     last_name=s.last_name or "", email=s.email or "")
                    for s in sorted(gb.students, key=lambda s: s.id)]
        scores = GradebookScores(assignments=chosen, students=students,
                                 maximum={name: float(gb.find_assignment(name).max_score)
                                          for name in chosen})
        for name in chosen:
            due = gb.find_assignment(name).duedate
            scores.due[name] = due.replace(tzinfo=dt.UTC) if due is not None and due.tzinfo is None \
                else due
            for student in students:
                try:
                    submission = gb.find_submission(name, student.id)
                except MissingEntry:
                    scores.score[(student.id, name)] = 0.0
                    continue
                penalty = float(submission.late_submission_penalty or 0.0)
                scores.score[(student.id, name)] = max(0.0, float(submission.score) - penalty)
                scores.submitted.add((student.id, name))
                folder = course.step_dir("autograded", student.id, name)
                unrun = not_run_in_notebooks(sorted(folder.glob("*.ipynb"))) if folder.is_dir() else []
                if unrun:
                    scores.not_run.setdefault(name, {})[student.id] = unrun
    return scores
