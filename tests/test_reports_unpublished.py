"""The instructor's class reports never reach students (issue 28: the similarity report is staff-only).

A course copy gets real reports where the commands write them: ``reports/similarity/04_adagrad.csv``
and ``.html`` from ``autograder similarity`` (one student pasted the instructor's solution, so the
HTML shows solution lines) and ``reports/misconceptions.csv`` as ``autograder report`` writes it.
Then ``autograder publish`` must ship none of them (no path, no content), the leak check must flag
each one where it lies and, copied out of ``reports/`` under another name, by its mark
(``autograder.authoring.staff_only``); the similarity HTML copied into an edition is also found by its
solution lines.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT
from similarity_variants import HONEST

from autograder.authoring.leaks import INSTRUCTOR_ONLY_NAMES, find_leaks
from autograder.authoring.publish import publish
from autograder.authoring.release import copy_course
from autograder.authoring.samples import write_submission
from autograder.authoring.staff_only import MARKS
from autograder.course.source import read_source_cells, release_path, source_path
from autograder.reports.misconceptions import Named
from autograder.reports.report import write_misconceptions_csv
from autograder.reports.similarity import SOLUTION, similarity

# what publish and the leak check read from a course root
PUBLISH_INPUTS = ("intro.md", "_toc.yml", "chapters", "_config.yml", "_ext", "data", "references.md",
                  "references.bib", "requirements.lock", "autograder/hidden")


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A course copy with the instructor's reports in ``reports/``."""
    root = copy_course(ROOT, tmp_path_factory.mktemp("reports") / "course", include=PUBLISH_INPUTS)
    solution = next(c.source for c in read_source_cells(source_path("04_adagrad", course_root=root))
                    if c.grade_id == "AdaGrad")
    released = nbformat.read(release_path("04_adagrad", course_root=root), as_version=4)
    for student, code in {"pastes_solution": solution, "honest": HONEST["honest_helpers"]}.items():
        nb = nbformat.from_dict(released)
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "AdaGrad":
                cell.source = code.strip("\n")
        write_submission(nb, course_root=root, student=student, assignment="04_adagrad")
    [result] = similarity(["04_adagrad"], course_root=root)
    assert [(m.a.owner, m.b.owner) for m in result.matches] == [("pastes_solution", SOLUTION)]
    write_misconceptions_csv([Named("04_adagrad", "honest", "eps inside the square root", ("x",))],
                             root / "reports" / "misconceptions.csv")
    return root


def _reports(course: Path) -> list[Path]:
    found = sorted(p for p in (course / "reports").rglob("*") if p.is_file())
    assert {p.relative_to(course).as_posix() for p in found} >= {
        "reports/similarity/04_adagrad.csv", "reports/similarity/04_adagrad.html",
        "reports/misconceptions.csv"}
    return found


def test_publish_ships_no_report(course, tmp_path):
    result = publish(destination=tmp_path / "edition", course_root=course, instructor_urls=[])
    assert not [f for f in result.files if f.split("/")[0] == "reports" or "similarity" in f
                or "misconceptions" in f]
    shipped = {p.read_bytes() for p in (tmp_path / "edition").rglob("*") if p.is_file()}
    assert not shipped & {p.read_bytes() for p in _reports(course)}


def test_the_leak_check_flags_every_report_in_reports(course):
    assert "reports" in INSTRUCTOR_ONLY_NAMES
    reports = _reports(course)
    flagged = {leak.path for leak in find_leaks(paths=[course], course_root=course)
               if leak.what == "instructor-only file name 'reports'"}
    assert flagged == set(reports)


def test_the_leak_check_flags_a_report_copied_anywhere_under_any_name(course, tmp_path):
    folder = tmp_path / "site"
    folder.mkdir()
    for n, report in enumerate(_reports(course)):
        shutil.copy(report, folder / f"page{n}{report.suffix}")
    flagged = {leak.path.name for leak in find_leaks(paths=[folder], course_root=course)
               if any(repr(mark) in leak.what for mark in MARKS)}
    assert flagged == {p.name for p in folder.iterdir()}


def test_the_similarity_html_is_found_by_its_solution_lines_under_any_name(course, tmp_path):
    edition = tmp_path / "edition"
    publish(destination=edition, course_root=course, instructor_urls=[])
    assert find_leaks(paths=[edition], course_root=course) == []
    shutil.copy(course / "reports" / "similarity" / "04_adagrad.html", edition / "data" / "notes.html")
    leaks = find_leaks(paths=[edition], course_root=course)
    assert leaks and all(leak.path == edition / "data" / "notes.html" for leak in leaks), leaks
    assert any("solution line from solutions/04_adagrad/04_adagrad.py" in leak.what for leak in leaks)
