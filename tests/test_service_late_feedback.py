"""Feedback levels of late submissions (issue 46 item 10): a notebook received after the due date, under
``late: True`` and ``feedback_before_due: "score"``, is graded and shown score-only, by the JSON API,
the pages and ``autograder submit``; the level is decided when the feedback is read, and a late
submission gets the lesser of the two levels (the after-due level is no oracle while late ones are
taken)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from service_course import Service, make_course, right_notebook, web_app, wrong_notebook

from autograder.course.nbgrader import load_course
from autograder.service import client as submit_client
from autograder.service.intake import accept
from autograder.service.policy import FEEDBACK_LEVELS
from autograder.service.store import Store
from autograder.service.views import submission_view
from tests.test_service_intake import settings_with

DUE = datetime(2026, 11, 5, 0, 0, 0)  # nbgrader's due date of 01_strides here (naive UTC)
ON_TIME, LATE = DUE - timedelta(days=1), DUE + timedelta(hours=2)
BEFORE, AFTER = DUE - timedelta(hours=1), DUE + timedelta(days=3)  # when the feedback is read
TESTS = [{"name": "test_flat_index", "notebook": "01_strides", "points": 0.0, "max_points": 1.0,
          "passed": False, "hidden": True, "message": "AssertionError: got 0"}]
NOTICES = ["late by 2.0 h: no penalty"]


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """The course, 01_strides due at ``DUE`` in nbgrader's gradebook (the policy's default due)."""
    root = make_course(tmp_path_factory.mktemp("service-late") / "course", students=("alice",))
    with load_course(root).gradebook() as gb:
        gb.update_or_create_assignment("01_strides", duedate=DUE)
    return root


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'service.db'}")


def graded(store: Store, received_at: datetime) -> int:
    """alice's 01_strides received at ``received_at``, graded 9/10 with one failed test."""
    number = store.add(student="alice", assignment="01_strides", notebook="01_strides.ipynb",
                    content=b"{}", received_at=received_at, late=received_at > DUE)
    [claimed] = store.claim("w", 1)
    assert store.finish(claimed.id, claimed.lease, score=9, max_score=10,
                        feedback={"tests": TESTS, "notices": NOTICES})
    return number


def shown(view: dict) -> str:
    """The level a view shows: what it holds, not what it says."""
    if "tests" in view:
        assert view["score"] == 9 and view["notices"] == NOTICES
        return "tests"
    assert "notices" not in view
    return "score" if view.get("score") == 9 else "none"


def test_the_policy_due_defaults_to_nbgraders_and_a_late_notebook_is_accepted_as_late(course, store):
    settings = settings_with(course, late=True, feedback_before_due="score")
    assert settings.policy("01_strides").due == DUE
    accepted = accept(settings, store, student="alice", filename="01_strides.ipynb",
                      content=wrong_notebook(course), now=LATE)
    assert accepted.late and store.get(accepted.id).late and store.get(accepted.id).state == "queued"


def test_a_late_submission_under_score_before_the_due_date_is_shown_its_score_only(course, store):
    """The red team's case: ``feedback_after_due`` left at its default ("tests")."""
    number = graded(store, LATE)
    for settings in (settings_with(course, late=True, feedback_before_due="score"),
                     settings_with(course, late=True, due=DUE.isoformat(),
                                   feedback_before_due="score", feedback_after_due="tests")):
        view = submission_view(store.get(number), settings, store, AFTER)
        assert (view["feedback_level"], shown(view)) == ("score", "score"), view
        assert view["late"] and view["state"] == "done"


@pytest.mark.parametrize("before", FEEDBACK_LEVELS)
@pytest.mark.parametrize("after", FEEDBACK_LEVELS)
def test_each_level_is_decided_when_read_and_a_late_one_gets_the_lesser(course, store, before,
                                                                       after):
    """On time: the level of when it is read (submitted before the due date, graded and read after
    it: the after-due level); late: the lesser of the two, read whenever."""
    settings = settings_with(course, late=True, feedback_before_due=before,
                             feedback_after_due=after)
    on_time, late = graded(store, ON_TIME), graded(store, LATE)
    lesser = max(before, after, key=FEEDBACK_LEVELS.index)
    seen = {(name, when): shown(submission_view(store.get(number), settings, store, at))
            for name, number in (("on time", on_time), ("late", late))
            for when, at in (("before", BEFORE), ("after", AFTER))}
    assert seen == {("on time", "before"): before, ("on time", "after"): after,
                    ("late", "before"): lesser, ("late", "after"): lesser}


@pytest.mark.parametrize("level", ["score", "none"])
def test_the_staff_see_every_test_and_the_level_the_student_sees(course, store, level):
    """Before: an instructor opening a student's submission was shown the student's level (a
    score, or nothing), so the staff could not read the failures they were asked about."""
    settings = settings_with(course, late=True, feedback_before_due=level, feedback_after_due=level)
    number = graded(store, LATE)
    assert shown(submission_view(store.get(number), settings, store, AFTER)) == level
    staff = submission_view(store.get(number), settings, store, AFTER, staff=True)
    assert shown(staff) == "tests" and staff["student_feedback_level"] == level
    headers = {"Authorization": f"Bearer {store.issue_token('prof', instructor=True)}"}
    with web_app(settings, store, lambda: AFTER) as url, \
            httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        view = http.get(f"api/submissions/{number}").json()
    assert shown(view) == "tests" and view["student_feedback_level"] == level


@pytest.mark.parametrize("after", FEEDBACK_LEVELS)
def test_the_api_the_pages_and_submit_show_a_late_submission_at_its_level(course, store, after):
    """After the due date, ``feedback_before_due: score``: a late submission is shown score-only
    (none when the after-due level is none), an on-time one at the after-due level, alike in
    ``GET api/submissions/<id>``, ``GET api/submissions``, the history on the index page and what
    ``autograder submit`` prints."""
    settings = settings_with(course, late=True, feedback_before_due="score",
                             feedback_after_due=after)
    late, on_time = graded(store, LATE), graded(store, ON_TIME)
    want = {late: "none" if after == "none" else "score", on_time: after}
    headers = {"Authorization": f"Bearer {store.issue_token('alice')}"}
    with web_app(settings, store, lambda: AFTER) as url, \
            httpx.Client(base_url=url, headers=headers, timeout=30) as http:
        history = {v["id"]: v for v in http.get("api/submissions").json()["submissions"]}
        index = http.get("").text
        for number, level in want.items():
            view = http.get(f"api/submissions/{number}").json()
            assert (view["feedback_level"], shown(view), shown(history[number])) == (level,) * 3
            page = http.get(f"submissions/{number}").text
            assert "test_flat_index" not in page and "AssertionError" not in page
            printed = "\n".join(submit_client.summary_lines(view))
            assert ("score: 9/10" in printed) == (level != "none")
            assert ("test_flat_index" in printed) == (level == "tests")
        row = index.split(f'href="/submissions/{late}"')[1].split("</tr>")[0]
        assert ("9 / 10" in row) == (want[late] != "none") and "(late)" in row


def test_a_late_notebook_graded_by_the_service_is_shown_score_only(course, tmp_path):
    """End to end: ``autograder serve`` with a due date an hour ago, ``late: True``,
    ``feedback_before_due: "score"``; ``autograder submit`` uploads a wrong notebook late: graded,
    and the API, the pages and ``submit`` show its score, no test."""
    import shutil

    root = shutil.copytree(course, tmp_path / "course")
    config = root / "nbgrader_config.py"
    due = datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1)
    config.write_text(config.read_text() + "\nc.AutograderService.policy = {\"default\": "
                      + json.dumps({"late": True, "feedback_before_due": "score",
                                    "due": due.isoformat()}).replace("true", "True") + "}\n")
    service = Service(root, workers=1).start()
    try:
        token = service.tokens("alice")["alice"]
        notebook = tmp_path / "01_strides.ipynb"
        notebook.write_bytes(wrong_notebook(root))
        printed: list[str] = []
        status = submit_client.submit(notebook, url=service.url, token=token, timeout_s=240,
                                      echo=printed.append)
        assert status["state"] == "done" and status["late"], status
        assert (status["feedback_level"], "tests" in status, "notices" in status) == \
            ("score", False, False)
        assert 0 < status["score"] < status["max_score"]
        lines = submit_client.summary_lines(status)
        assert lines == [f"score: {status['score']:g}/{status['max_score']:g}"]
        with httpx.Client(base_url=service.url, timeout=30,
                          headers={"Authorization": f"Bearer {token}"}) as http:
            index = http.get("").text
            page = http.get(f"submissions/{status['id']}").text
        assert f"{status['score']:g} / {status['max_score']:g}" in index and "(late)" in page
    finally:
        service.stop()


def test_a_late_penalty_is_in_the_score_shown_and_in_what_counts_as_best(course, tmp_path):
    """End to end, ``penalty_method = "zero"``, ``counts: best``, both notebooks late: the service
    shows the grade of record (0, as ``nbgrader export`` has it), not the tests' points, and the
    right notebook sent after a wrong one does not replace it in ``submitted/`` (before: its 10
    raw points beat 7, so the notebook the instructor grades changed for nothing)."""
    import shutil

    root = shutil.copytree(course, tmp_path / "course")
    config = root / "nbgrader_config.py"
    due = datetime.now(UTC).replace(tzinfo=None) - timedelta(hours=1)
    config.write_text(config.read_text() + "\nc.LateSubmissionPlugin.penalty_method = 'zero'\n"
                      "c.AutograderService.policy = {\"default\": "
                      + json.dumps({"late": True, "counts": "best", "due": due.isoformat()}
                                   ).replace("true", "True") + "}\n")
    landed = root / "submitted" / "alice" / "01_strides" / "01_strides.ipynb"
    service = Service(root, workers=1).start()
    try:
        token = service.tokens("alice")["alice"]
        seen = []
        for name, content in (("wrong", wrong_notebook(root)), ("right", right_notebook(root))):
            notebook = tmp_path / name / "01_strides.ipynb"
            notebook.parent.mkdir()
            notebook.write_bytes(content)
            status = submit_client.submit(notebook, url=service.url, token=token, timeout_s=240,
                                          echo=lambda line: None)
            assert status["state"] == "done" and status["late"], status
            passed = sum(t["points"] for t in status["tests"])
            assert status["score"] == 0 and passed > 0, status
            assert any("late penalty" in n and "grade of record 0/" in n
                       for n in status["notices"]), status["notices"]
            seen.append((name, passed, landed.read_bytes()))
        (_, wrong_points, after_wrong), (_, right_points, after_right) = seen
        assert right_points > wrong_points
        assert after_right == after_wrong == wrong_notebook(root)
    finally:
        service.stop()


@pytest.mark.parametrize(("before", "after", "received", "later"), [
    ("none", "score", ON_TIME, True),    # on time, read before the due date: shown after it
    ("none", "none", ON_TIME, False),    # never shown
    ("none", "tests", LATE, False),      # late: the lesser level, none, whenever it is read
])
def test_a_hidden_score_says_whether_it_will_be_shown(course, store, before, after, received,
                                                      later):
    """Level none: the view says whether a later reading shows the score (``score_later``), and
    ``submit`` prints that, not "later" for a score the course will never show."""
    settings = settings_with(course, late=True, feedback_before_due=before,
                             feedback_after_due=after)
    read_at = BEFORE if received == ON_TIME else AFTER
    view = submission_view(store.get(graded(store, received)), settings, store, read_at)
    assert view["feedback_level"] == "none" and "score" not in view
    assert view["score_later"] is later
    printed = "\n".join(submit_client.summary_lines(view))
    assert ("shows scores later" in printed) is later
    assert ("does not show the score" in printed) is not later
