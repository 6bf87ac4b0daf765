"""``autograder lms csv OUT.csv``: the gradebook as a file for Canvas's Grades → Import, for staff
without an API token.

Columns as Canvas's own gradebook export has them: ``Student, ID, SIS User ID, SIS Login ID,
Section``, then one column per assignment, ``Name (canvas_id)`` when the mapping knows the Canvas id
(Canvas then matches the column by id) and ``Name`` otherwise (Canvas matches by name, or offers the
column as a new assignment in its import preview). Canvas finds a row's student by ``ID``, then ``SIS
User ID``, then ``SIS Login ID``: the gradebook's student id goes into the column that ``match`` names
(Canvas's import cannot match by email). Scores are nbgrader's points, as ``nbgrader export``. Only
the assignments ``autograder.lms.posting.choose`` keeps are columns: one with no submission and not
yet due is left out (no column of zeros), one with checks the grading machine did not run is refused.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from autograder.course.nbgrader import Course
from autograder.errors import CourseError
from autograder.lms.gradebook_scores import read_scores
from autograder.lms.options import CanvasOptions
from autograder.lms.posting import choose

FIXED_COLUMNS = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
ID_COLUMN = {"sis_user_id": "SIS User ID", "login_id": "SIS Login ID"}


def assignment_column(name: str, canvas_id: int | None) -> str:
    return f"{name} ({canvas_id})" if canvas_id is not None else name


@dataclass(frozen=True)
class ImportCsv:
    """The file written, its assignment columns, and a sentence per assignment left out or warned
    about."""

    path: Path
    assignments: list[str]
    left_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def write_import_csv(course: Course, options: CanvasOptions, output: Path, *,
                     all_assignments: bool = False, include_unrun: bool = False) -> ImportCsv:
    """Write ``output``; the number of students is the number of data rows."""
    if options.match not in ID_COLUMN:
        raise CourseError(f"Canvas's gradebook import cannot match students by {options.match}; "
                          f"use --match sis_user_id or --match login_id")
    if output.suffix.lower() != ".csv":
        raise CourseError(f"{output}: expected a file name ending in .csv")
    choice = choose(read_scores(course, list(options.assignments) or None),
                    all_assignments=all_assignments, include_unrun=include_unrun)
    scores = choice.scores
    columns = [assignment_column(name, options.assignments.get(name)) for name in scores.assignments]
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(FIXED_COLUMNS + columns)
        writer.writerow(["    Points Possible", "", "", "", ""]  # as Canvas exports it
                        + [f"{scores.maximum[name]:g}" for name in scores.assignments])
        for student in scores.students:
            name = ", ".join(part for part in (student.last_name, student.first_name) if part)
            ids = {column: "" for column in ID_COLUMN.values()}
            ids[ID_COLUMN[options.match]] = _cell(student.id)
            writer.writerow([_cell(name or student.id), "", ids["SIS User ID"], ids["SIS Login ID"], ""]
                            + [f"{scores.score[(student.id, a)]:g}" for a in scores.assignments])
    return ImportCsv(output, list(scores.assignments), choice.left_out, choice.notes)


def _cell(text: str) -> str:
    """A name or id as a spreadsheet shows it: a leading = + - @ would be read as a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text
