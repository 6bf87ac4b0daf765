"""The worker's feedback reader (``service/results.graded_feedback``) on a gradebook kept open between
submissions: each call reads what was recorded since the last one, by any connection."""

from __future__ import annotations

import pytest
from nbgrader.api import Gradebook

from autograder.service.results import graded_feedback

COURSE = "course101"
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # nbgrader's add_submission


def _graded(url: str, score: float) -> None:
    """s0's notebook of a1 graded by another connection (as ``autograder grade`` records it)."""
    with Gradebook(url, COURSE) as gb:
        grade = gb.find_grade("check_sum", "nb", "a1", "s0")
        grade.auto_score = score
        gb.db.commit()


def test_feedback_from_a_gradebook_kept_open_reads_each_new_grade(tmp_path):
    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(url, COURSE) as gb:
        gb.add_assignment("a1")
        gb.add_notebook("nb", "a1")
        gb.add_grade_cell("check_sum", "nb", "a1", max_score=4, cell_type="code")
        gb.add_student("s0")
        gb.add_submission("a1", "s0")
    kept = Gradebook(url, COURSE)
    try:
        seen, held = [], []
        for score in (1.0, 4.0, 0.0):
            # what the kept gradebook loaded before stays alive (a session would hand it back
            # unchanged): the call must read the new grade anyway
            held.append(kept.find_grade("check_sum", "nb", "a1", "s0"))
            _graded(url, score)
            feedback = graded_feedback(kept, student="s0", assignment="a1",
                                       notebooks={"nb": tmp_path / "missing.ipynb"})
            seen.append((feedback["score"], [t["passed"] for t in feedback["tests"]]))
        assert seen == [(1.0, [False]), (4.0, [True]), (0.0, [False])]
    finally:
        kept.close()
