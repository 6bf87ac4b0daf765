"""Feedback names the misconception only when the course turns it on (issue 28; off by default).

A class of 01_strides graded in the sandbox as a course grades: a wrong catalogue implementation in
the English notebook and in the zh-TW one, and the reference. ``autograder feedback`` with the
course's default: no page names anything. With ``c.Autograder.feedback_names_misconception = True``:
the wrong submissions' pages open with the sentence naming what ``autograder report`` names (in
zh-TW for the zh-TW notebook, the name translated too), the passing one's page does not, and no page
shows hidden-check source.
"""

from __future__ import annotations

import html
import re

import nbformat
import pytest
from conftest import ROOT

from autograder.authoring import samples
from autograder.authoring.release import copy_course, release
from autograder.course.nbgrader import load_course
from autograder.errors import CourseError
from autograder.i18n.messages import translate
from autograder.reports.feedback import feedback
from autograder.reports.feedback_misconception import (
    SETTING,
    NameMisconception,
    enabled,
    named_students,
    sentence,
)

ASSIGNMENT = "01_strides"
WRONG = "column_major"  # a catalogue entry (the table was built from it)
HINT = "A hint from your failed checks"
STUDENTS = {"wrong": None, "wrong_zh": "zh_TW", "passing": None}


def _pages(root) -> dict[str, str]:
    """student -> their feedback page's text (tags dropped, entities decoded)."""
    return {s: html.unescape(re.sub(r"<[^>]+>", "", (root / "feedback" / s / ASSIGNMENT /
                                                      f"{ASSIGNMENT}.html").read_text()))
            for s in STUDENTS}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    from autograder.grading import grade

    root = copy_course(ROOT, tmp_path_factory.mktemp("named") / "course",
                       include=[str(samples.CATALOGUE_DIR)])
    release(assignments=[ASSIGNMENT], course_root=root)
    wrong = {e["name"]: e for e in samples.load_catalogue(ASSIGNMENT, course_root=ROOT)[0]}[WRONG]
    for student, language in STUDENTS.items():
        replace = None if student == "passing" else wrong["replace"]
        nb = samples.student_notebook(ASSIGNMENT, replace, course_root=root, language=language)
        samples.write_submission(nb, course_root=root, student=student, assignment=ASSIGNMENT)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AUTOGRADER_ALLOW_CPU", "1")
        grade(course_root=root, allow_cpu=True, progress=False)
    return root, wrong["misconception"]


def test_off_by_default_no_page_names_a_misconception(graded):
    root, _ = graded
    assert not enabled(load_course(root))
    pages = feedback(assignments=[ASSIGNMENT], course_root=root)
    assert len(pages) == len(STUDENTS) and not pages.failed
    assert not [s for s, page in _pages(root).items() if HINT in page or "來自未通過檢查的提示" in page]


def test_on_the_wrong_submissions_are_named_in_their_language_and_the_passing_one_is_not(graded):
    root, label = graded
    with (root / "nbgrader_config.py").open("a") as config:
        config.write(f"\nc.Autograder.{SETTING} = True\n")
    course = load_course(root)
    named = named_students(course, ASSIGNMENT, list(STUDENTS))
    assert set(named) == {"wrong", "wrong_zh"} and label in named["wrong"].split(" or "), named
    pages = feedback(assignments=[ASSIGNMENT], course_root=root)
    assert not pages.failed
    shown = _pages(root)
    assert sentence(named["wrong"], None) in shown["wrong"]
    chinese = sentence(named["wrong_zh"], "zh-TW")
    assert translate(label, "zh-TW") in chinese and HINT not in chinese
    assert chinese in shown["wrong_zh"] and HINT not in shown["wrong_zh"]
    assert HINT not in shown["passing"] and "來自未通過檢查的提示" not in shown["passing"]
    for page in shown.values():
        assert "BEGIN HIDDEN TESTS" not in page and "autograder.hidden" not in page
    feedback_nb = nbformat.read(root / "autograded" / "wrong" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
                                as_version=4)
    assert HINT not in nbformat.writes(feedback_nb)  # the graded notebook itself is untouched


def test_the_setting_must_be_a_boolean(graded):
    root, _ = graded
    with (root / "nbgrader_config.py").open("a") as config:
        config.write(f"\nc.Autograder.{SETTING} = 'yes'\n")
    with pytest.raises(CourseError, match=SETTING):
        enabled(load_course(root))


def test_tied_names_are_translated_one_by_one_and_markdown_shows_them_as_written():
    tied = "reshape without the transpose or features split as (d_in heads)"
    assert sentence(tied, None).count(tied) == 1
    chinese = sentence(tied, "zh-TW")
    assert f"{translate('reshape without the transpose', 'zh-TW')} / " \
           f"{translate('features split as (d_in heads)', 'zh-TW')}" in chinese
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    names = NameMisconception(names={"s1": "features split as (d_in heads)"})
    named, _ = names.preprocess(nb, {"nbgrader": {"student": "s1"}})
    assert named.cells[0].cell_type == "markdown" and r"(d\_in heads)" in named.cells[0].source
    other, _ = names.preprocess(nbformat.v4.new_notebook(), {"nbgrader": {"student": "s2"}})
    assert other.cells == []
