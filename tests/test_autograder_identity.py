"""`autograder grade` gives the same scores as `nbgrader autograde` on the exercises' catalogue.

Reuses the session fixtures ``graded_catalogue_course`` (plain nbgrader, every catalogue entry as a
student) and ``autograded_catalogue_course`` (a copy of that course with its submissions removed from
the gradebook and its autograded/ directory deleted, regraded by the autograder): every grade cell of
every student is compared.
The same copy then checks feedback (no hidden-check source) and the report (CSV totals = gradebook).
"""

from __future__ import annotations

import csv

import pytest
from nbgrader.api import Gradebook

from autograder.reports.feedback import HIDDEN_MARKERS, feedback
from autograder.reports.report import report


@pytest.fixture(scope="module")
def regraded(autograded_catalogue_course):
    return autograded_catalogue_course  # (source, root, summary); see conftest.py


def test_every_catalogue_submission_graded(regraded):
    source, _, summary = regraded
    expected = {(a, s) for a in source.assignments for s in source.students[a]}
    assert {(r.assignment, r.student) for r in summary.results} == expected
    assert {r.status for r in summary.results} == {"graded"}


def test_scores_identical_to_nbgrader_autograde(regraded):
    source, root, _ = regraded
    differences = []
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for assignment in source.assignments:
            for student, cells in source.scores[assignment].items():
                nb = gb.find_submission_notebook(assignment, assignment, student)
                ours = {g.name: (float(g.score), float(g.max_score)) for g in nb.grades}
                if ours != cells:
                    differences.append(f"{assignment}/{student}: nbgrader {cells} autograder {ours}")
    assert not differences, "\n".join(differences)


def test_feedback_shows_no_hidden_check_source(regraded):
    source, root, _ = regraded
    pages = feedback(course_root=root)
    expected = sum(len(source.students[a]) for a in source.assignments)
    assert len(pages) == expected
    failing = 0
    for page in pages:
        text = page.read_text()
        assert not [m for m in HIDDEN_MARKERS if m in text], page
        assert "@hidden_check" not in text and "def check_" not in text, page
        failing += "HiddenCheckFailed" in text
    assert failing > 0, "no feedback page shows a failed hidden check: the scan proved nothing"


def test_report_csv_totals_equal_gradebook(regraded):
    source, root, _ = regraded
    csv_path, html_path = report(course_root=root)
    rows = {row["student"]: row for row in csv.DictReader(csv_path.open())}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student in gb.students:
            expected = sum(float(s.score) for s in student.submissions)
            assert float(rows[student.id]["total"]) == pytest.approx(expected), student.id
            for submission in student.submissions:
                name = submission.assignment.name
                assert float(rows[student.id][name]) == pytest.approx(float(submission.score))
    html = html_path.read_text()
    assert html.count("data:image/png;base64,") >= 2 and "http://" not in html
