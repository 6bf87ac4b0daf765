"""``autograder similarity`` on a class it has never seen (issue 28, "Done when").

The old fixed threshold (0.7) was chosen on tests/test_similarity.py's class; here other honest AdaGrads,
other planted copies and another library paste (tests/support/similarity_variants.py), with blank notebooks
and one that only adds a comment to the release. Every planted pair must be reported for the cell it
copied, no honest pair, no blank one, and the paste against ``(library)``.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from conftest import ROOT
from similarity_variants import COPIES, HONEST, library_paste

from autograder.authoring import samples
from autograder.authoring.release import copy_course
from autograder.course.source import release_path
from autograder.reports.similarity import LIBRARY, SOLUTION, Result, similarity

BLANK = ("blank_a", "blank_b")
TOUCHED = "blank_touched"  # the release with a comment of the student's own, nothing else


def write_class(root: Path) -> None:
    """The unseen class's submissions of 04_adagrad in the course at ``root``."""
    released = nbformat.read(release_path("04_adagrad", course_root=root), as_version=4)
    cells: dict[str, dict[str, str]] = {s: {"AdaGrad": code} for s, code in HONEST.items()}
    cells.update({s: {cell: code} for s, (_, cell, code) in COPIES.items()})
    cells["pastes_library"] = {"AdaGrad": library_paste()}
    cells.update({s: {} for s in BLANK})
    cells[TOUCHED] = {}
    for student, code in cells.items():
        nb = nbformat.from_dict(released)
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in code:
                cell.source = code[grade_id].strip("\n")
            elif student == TOUCHED and grade_id == "AdaGrad":
                cell.source = cell.source.replace("# YOUR CODE HERE", "# YOUR CODE HERE\n# I will do it later")
        samples.write_submission(nb, course_root=root, student=student, assignment="04_adagrad")


@pytest.fixture(scope="module")
def unseen(tmp_path_factory) -> Result:
    root = copy_course(ROOT, tmp_path_factory.mktemp("unseen") / "course")
    write_class(root)
    [result] = similarity(["04_adagrad"], course_root=root)
    return result


def _reported(result: Result) -> dict[tuple[frozenset, str], float]:
    return {(frozenset((m.a.owner, m.b.owner)), m.cell): m.similarity for m in result.matches}


PLANTED = {(frozenset((copier, copied)), cell) for copier, (copied, cell, _) in COPIES.items()} | \
    {(frozenset(("pastes_library", LIBRARY)), "AdaGrad")}


def test_every_planted_pair_is_reported_for_the_cell_it_copied(unseen):
    reported = _reported(unseen)
    missing = PLANTED - set(reported)
    assert not missing, f"planted pairs not reported (cut-offs {unseen.cutoffs}): {missing}; " \
                        f"reported: {reported}"


def test_no_honest_pair_and_no_blank_notebook_is_reported(unseen):
    extra = {pair: s for pair, s in _reported(unseen).items() if pair not in PLANTED}
    assert not extra, f"flagged beyond the planted pairs (cut-offs {unseen.cutoffs}): {extra}"
    owners = {o for m in unseen.matches for o in (m.a.owner, m.b.owner)}
    assert not owners & {*BLANK, TOUCHED}
    assert SOLUTION not in owners  # no honest style, no copy of one, is the instructor's
    assert TOUCHED in unseen.too_short.get("AdaGrad", [])  # compared, and too short to judge
    assert not set(BLANK) & set(unseen.too_short.get("AdaGrad", []))  # as released: not compared


def test_the_library_paste_is_flagged_as_library(unseen):
    rows = [m for m in unseen.matches if "pastes_library" in (m.a.owner, m.b.owner)]
    assert [(m.a.owner, m.b.owner, m.cell) for m in rows] == [("pastes_library", LIBRARY, "AdaGrad")]
