"""The service's intake and queue, in-process, with a frozen clock: what is accepted, what each bad
input is told, that a refusal writes nothing (no queue row, no ``submitted/`` folder), rate limits and
due dates, the fair claim order, exactly-once results, recovery after a dead worker."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from nbgrader.utils import parse_utc
from service_course import make_course, right_notebook, web_app, wrong_notebook

from autograder.course.nbgrader import load_course
from autograder.errors import CourseError
from autograder.service.intake import accept
from autograder.service.policy import Refused
from autograder.service.settings import ServiceSettings
from autograder.service.store import Store

T0 = datetime(2026, 11, 2, 12, 0, 0)  # the frozen "now" (naive UTC)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return make_course(tmp_path_factory.mktemp("service-intake") / "course",
                       students=("alice", "bob", "carol", "dave"))


@pytest.fixture(scope="module")
def notebooks(course) -> dict[str, bytes]:
    return {"right": right_notebook(course), "wrong": wrong_notebook(course),
            "einops": right_notebook(course, "02_einops")}


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'service.db'}")


def settings_with(course: Path, **policy) -> ServiceSettings:
    settings = ServiceSettings.of(load_course(course))
    return dataclasses.replace(settings, policies={"default": policy}, _cache=None)


def nothing_written(course: Path, store: Store, student: str) -> bool:
    return not store.history() and not (course / "submitted" / student).exists()


def test_a_right_notebook_is_queued_and_lands_in_submitted_with_nbgrader_timestamp(course, store,
                                                                                 notebooks):
    settings = settings_with(course)
    accepted = accept(settings, store, student="carol", filename="01_strides.ipynb",
                      content=notebooks["right"], now=T0)
    row = store.get(accepted.id)
    assert (row.state, row.student, row.assignment, row.late) == ("queued", "carol", "01_strides",
                                                                   False)
    folder = course / "submitted" / "carol" / "01_strides"
    assert (folder / "01_strides.ipynb").read_bytes() == notebooks["right"]
    assert parse_utc((folder / "timestamp.txt").read_text()).replace(tzinfo=None) == T0
    assert sorted(p.name for p in folder.iterdir()) == ["01_strides.ipynb", "timestamp.txt"]
    assert row.landed


def test_a_zh_tw_edition_lands_as_the_notebook_it_is_graded_as(course, store, notebooks):
    """01_strides.zh-TW.ipynb is notebook 01_strides (autograder.course.source.graded_notebook_name)."""
    accepted = accept(settings_with(course), store, student="bob", filename="01_strides.zh-TW.ipynb",
                      content=notebooks["right"], now=T0)
    assert store.get(accepted.id).notebook == "01_strides.ipynb"
    folder = course / "submitted" / "bob" / "01_strides"
    assert sorted(p.name for p in folder.iterdir()) == ["01_strides.ipynb", "timestamp.txt"]


BAD_INPUTS = [
    # (id, student, filename, content key or bytes, assignment asked, status, words of the message)
    ("not-a-notebook", "alice", "answers.txt", b"42", None, 400, "is not a notebook"),
    ("invalid-json", "alice", "01_strides.ipynb", b"{ not json", None, 400,
     "not a Jupyter notebook"),
    ("unknown-notebook", "alice", "99_other.ipynb",
     b'{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}', None, 400,
     "its name is not that of a notebook of this course and its cells do not say which one"),
    ("renamed-copy-asked-for-another", "alice", "Copy of 01_strides.ipynb", "right", "02_einops",
     400, "is a notebook of 01_strides (by its cells), not of 02_einops"),
    ("another-assignment-asked", "alice", "02_einops.ipynb", "einops", "01_strides", 400,
     "is a notebook of 02_einops, not of 01_strides"),
    ("renamed-other-notebook", "alice", "01_strides.ipynb", "einops", None, 400,
     "not a notebook of 01_strides: its cells are those of 02_einops"),
    ("not-in-course", "mallory", "01_strides.ipynb", "right", None, 403,
     "is not a student of this course"),
    ("path-like-student", "../alice", "01_strides.ipynb", "right", None, 403,
     "is not a student of this course"),
]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_each_bad_input_is_refused_with_its_reason_and_writes_nothing(course, store, notebooks, case):
    _, student, filename, content, asked, status, words = case
    content = notebooks[content] if isinstance(content, str) else content
    with pytest.raises(Refused) as refused:
        accept(settings_with(course), store, student=student, filename=filename, content=content,
               now=T0, assignment=asked)
    assert refused.value.status == status
    assert words in refused.value.message
    assert nothing_written(course, store, student)


def test_over_the_size_cap_is_refused_with_the_limit(course, store, notebooks):
    settings = dataclasses.replace(settings_with(course), max_upload_bytes=1000)
    with pytest.raises(Refused) as refused:
        accept(settings, store, student="alice", filename="01_strides.ipynb",
               content=notebooks["right"], now=T0)
    assert refused.value.status == 413
    assert "over the" in refused.value.message and "MiB limit" in refused.value.message
    assert nothing_written(course, store, "alice")


def test_before_open_and_after_due_are_refused_late_accepted_when_allowed(course, store, notebooks):
    opens, due = "2026-11-03 09:00 UTC", "2026-11-10T23:59:00+00:00"
    early = settings_with(course, opens=opens, due=due)
    with pytest.raises(Refused, match="opens at 2026-11-03 09:00 UTC") as refused:
        accept(early, store, student="alice", filename="01_strides.ipynb",
               content=notebooks["right"], now=T0)
    assert refused.value.status == 403 and nothing_written(course, store, "alice")
    with pytest.raises(Refused, match="was due at 2026-11-10 23:59 UTC and late submissions "
                                      "are not accepted"):
        accept(early, store, student="alice", filename="01_strides.ipynb",
               content=notebooks["right"], now=T0 + timedelta(days=9))
    assert nothing_written(course, store, "alice")
    on_time = accept(early, store, student="alice", filename="01_strides.ipynb",
                     content=notebooks["right"], now=datetime(2026, 11, 10, 23, 58))
    late = accept(settings_with(course, due=due, late=True), store, student="alice",
                  filename="01_strides.ipynb", content=notebooks["right"],
                  now=datetime(2026, 11, 11, 0, 1))
    assert (on_time.late, late.late) == (False, True)
    assert store.get(late.id).late


def test_rate_limit_is_a_sliding_window_and_says_when_the_next_is_possible(course, store,
                                                                           notebooks):
    settings = settings_with(course, max_submissions=2, window_hours=1)
    submit = dict(student="bob", filename="01_strides.ipynb", content=notebooks["wrong"])
    accept(settings, store, now=T0, **submit)
    accept(settings, store, now=T0 + timedelta(minutes=10), **submit)
    with pytest.raises(Refused) as refused:
        accept(settings, store, now=T0 + timedelta(minutes=20), **submit)
    assert refused.value.status == 429
    assert "2 submissions of 01_strides in 1 h already; the next is possible at " \
           "2026-11-02 13:00 UTC" in refused.value.message
    assert refused.value.retry_after == T0 + timedelta(hours=1)
    assert len(store.history("bob")) == 2
    accept(settings, store, now=T0 + timedelta(minutes=61), **submit)  # the first left the window
    assert len(store.history("bob")) == 3


def test_when_the_best_counts_nothing_lands_before_grading(course, store, notebooks):
    accepted = accept(settings_with(course, counts="best"), store, student="dave",
                      filename="01_strides.ipynb", content=notebooks["right"], now=T0)
    assert not store.get(accepted.id).landed
    assert not (course / "submitted" / "dave").exists()


@pytest.mark.parametrize("policy, words", [
    ({"max_submision": 3}, "unknown key(s) max_submision"),
    ({"due": "next friday"}, "'next friday' is not a time"),
    ({"counts": "first"}, "expected one of latest, best, not 'first'"),
    ({"feedback_before_due": "everything"}, "expected one of tests, score, none"),
    ({"max_submissions": -1}, "expected a number >= 0"),
])
def test_a_wrong_policy_is_an_error_naming_the_setting(course, policy, words):
    with pytest.raises(CourseError, match="c.AutograderService.policy") as error:
        settings_with(course, **policy).policy("01_strides")
    assert words in str(error.value)


def test_tokens_are_stored_as_digests_and_can_be_revoked(store):
    token = store.issue_token("alice")
    from autograder.service.schema import TokenRow, digest

    with store.session() as s:
        stored = [row.digest for row in s.query(TokenRow)]
    assert stored == [digest(token)] and token not in stored
    assert store.token_user_by_digest(digest(token)) == ("alice", False)
    assert store.revoke_tokens("alice") == 1
    assert store.token_user_by_digest(digest(token)) is None


def test_feedback_shown_follows_the_policy_before_and_after_the_due_date(course, store):
    from autograder.service.views import submission_view

    job = store.add(student="alice", assignment="01_strides", notebook="01_strides.ipynb",
                    content=b"{}", received_at=T0, late=False)
    [claimed] = store.claim("w", 1)
    tests = [{"name": "test_flat_index", "passed": False, "message": "AssertionError: got 0"}]
    store.finish(claimed.id, claimed.lease, score=9, max_score=10, feedback={"tests": tests, "notices": []})
    settings = settings_with(course, due="2026-11-05 00:00", feedback_before_due="score",
                             feedback_after_due="tests")
    before = submission_view(store.get(job), settings, store, T0)
    after = submission_view(store.get(job), settings, store, T0 + timedelta(days=5))
    assert (before["score"], "tests" in before) == (9, False)
    assert after["tests"] == tests and after["score"] == 9
    hidden = submission_view(store.get(job), settings_with(course, feedback_before_due="none"),
                             store, T0)
    assert "score" not in hidden and "tests" not in hidden and hidden["state"] == "done"


def test_a_submission_not_yet_graded_says_when_to_ask_again(course, store):
    """``poll_after_s``: 1 s at the front, 0.1 s more per submission ahead, 30 s at most; none once
    graded (the page, ``autograder submit`` and the load benchmark follow it)."""
    from autograder.service.views import submission_view

    settings = settings_with(course)
    jobs = [store.add(student=f"s{n}", assignment="01_strides", notebook="01_strides.ipynb",
                      content=b"{}", received_at=T0, late=False) for n in range(4)]
    [claimed] = store.claim("w", 1)
    views = [submission_view(store.get(job), settings, store, T0) for job in jobs]
    assert [(v["state"], v.get("position"), v["poll_after_s"]) for v in views] == [
        ("running", None, 1.0), ("queued", 0, 1.0), ("queued", 1, 1.1), ("queued", 2, 1.2)]
    from autograder.service.views import poll_after_s

    assert (poll_after_s(95), poll_after_s(5000)) == (10.5, 30.0)  # no pace yet
    # with the queue's pace (seconds per graded submission): 80% of the time until its turn
    assert [poll_after_s(p, 0.25) for p in (0, 2, 100, 1000)] == [1.0, 1.0, 20.0, 30.0]
    store.finish(claimed.id, claimed.lease, score=1, max_score=10, feedback={"tests": [], "notices": []})
    assert "poll_after_s" not in submission_view(store.get(jobs[0]), settings, store, T0)
    page = (Path(__file__).resolve().parents[1] / "autograder/service/static/app.js").read_text()
    assert "s.poll_after_s" in page and "50 * (s.position" not in page


def test_the_queue_pace_is_read_from_recent_grades_at_most_every_few_seconds(store, monkeypatch):
    """``Store.pace_s``: seconds per graded submission over the last minute (None with fewer than
    five), one count per five seconds however many pages ask."""
    from autograder.service import store as store_module

    jobs = [store.add(student=f"s{n}", assignment="01_strides", notebook="01_strides.ipynb",
                      content=b"{}", received_at=T0, late=False) for n in range(8)]
    clock = [1000.0]
    monkeypatch.setattr(store_module.time, "monotonic", lambda: clock[0])

    def grade(count: int) -> None:
        for job in store.claim("w", count):
            assert store.finish(job.id, job.lease, score=1, max_score=1, feedback={})

    grade(4)
    assert store.pace_s() is None
    grade(2)
    assert store.pace_s() is None  # read less than five seconds ago
    clock[0] += 5
    assert store.pace_s() == pytest.approx(60 / 6)
    grade(2)
    assert store.pace_s() == pytest.approx(60 / 6)
    clock[0] += 5
    assert store.pace_s() == pytest.approx(60 / 8) and len(jobs) == 8


# -- issue 41: renamed copies, graders that are not running, what a student is shown, dates, reloads --

@pytest.mark.parametrize("filename", ["01_strides (1).ipynb", "Copy of 01_strides.ipynb",
                                      "Copy of 01_strides (2).zh-TW.ipynb"])
def test_a_renamed_copy_is_the_notebook_its_cells_identify(course, store, notebooks, filename):
    """m2: a browser's second download and Colab's copy are accepted as the notebook they are."""
    accepted = accept(settings_with(course), store, student="dave", filename=filename,
                      content=notebooks["right"], now=T0)
    row = store.get(accepted.id)
    assert (row.assignment, row.notebook) == ("01_strides", "01_strides.ipynb")
    folder = course / "submitted" / "dave" / "01_strides"
    assert sorted(p.name for p in folder.iterdir()) == ["01_strides.ipynb", "timestamp.txt"]
    # nbgrader's own format: the batch grader sees this upload as the newest submission
    assert parse_utc((folder / "timestamp.txt").read_text()).replace(tzinfo=None) == T0


def test_a_renamed_copy_of_another_exercise_is_that_exercise(course, store, notebooks):
    accepted = accept(settings_with(course), store, student="dave", filename="Copy of 01_strides.ipynb",
                      content=notebooks["einops"], now=T0)
    assert store.get(accepted.id).assignment == "02_einops"


def _enqueue_web(course, store, notebooks, name="01_strides"):
    """The web process's way: identify, then enqueue only if a running worker grades it."""
    from autograder.service.intake import check_upload, enqueue, identify

    upload = identify(check_upload(settings_with(course), student="alice",
                                   filename=f"{name}.ipynb", content=notebooks["right"]))
    assert not isinstance(upload, str), upload
    return enqueue(settings_with(course), store, upload, now=T0, require_grader=True)


def test_an_exercise_no_running_worker_grades_is_refused_and_what_waits_says_why(course, store,
                                                                                  notebooks):
    """M2: nobody grading (no worker, or only workers without a GPU for a GPU exercise): refused
    at upload, nothing written; a queued one (its worker gone) shows why it waits, to the student
    and the staff."""
    from autograder.service.views import queue_view, submission_view

    def landed() -> list[tuple[str, float]]:
        return sorted((str(p), p.stat().st_mtime) for p in (course / "submitted").rglob("*"))

    before = landed()
    answer = _get_page(settings_with(course), store, "alice",
                       upload=("01_strides.ipynb", notebooks["right"]))
    assert "no grader is running now: nothing was submitted" in answer, answer
    assert not store.history() and landed() == before
    with pytest.raises(Refused) as refused:
        _enqueue_web(course, store, notebooks)
    assert refused.value.status == 503 and "no grader is running now" in refused.value.message
    store.register_worker("worker-cpu", host="h", pid=1, gpu=False, skip=["01_strides"], live_s=60)
    with pytest.raises(Refused) as refused:  # a worker that leaves it to one with a GPU
        _enqueue_web(course, store, notebooks)
    assert "no grader for 01_strides is running now (it needs a GPU" in refused.value.message
    assert "nothing was submitted" in refused.value.message and "--" not in refused.value.message
    assert not store.history() and landed() == before
    parked = store.add(student="bob", assignment="01_strides", notebook="01_strides.ipynb",
                       content=notebooks["right"], received_at=T0, late=False)
    view = submission_view(store.get(parked), settings_with(course), store, T0)
    assert "stays in the queue and is graded when one starts" in view["waiting"]
    staff = queue_view(settings_with(course), store)
    assert "--gpu" in staff["waiting"]["01_strides"] and "--allow-cpu" in staff["waiting"]["01_strides"]
    assert [w["id"] for w in staff["workers"]] == ["worker-cpu"]
    store.register_worker("worker-gpu", host="h", pid=2, gpu=True, skip=[], live_s=60)
    assert "waiting" not in submission_view(store.get(parked), settings_with(course), store, T0)
    accepted = _enqueue_web(course, store, notebooks)
    assert store.get(accepted.id).state == "queued"
    store.worker_alive("worker-gpu", skip=[], live_s=-1)  # its heartbeat stopped: not a grader now
    assert "waiting" in submission_view(store.get(parked), settings_with(course), store, T0)
    store.unregister_worker("worker-cpu")
    assert queue_view(settings_with(course), store)["workers"] == []


def test_a_student_never_sees_a_server_path_and_a_grader_error_only_as_one(course, store, notebooks):
    """B1: the grader's own words (with the server's paths) are the staff's; the student reads
    "grader error: the course staff have been told", and no absolute path in any reason."""
    import json

    secret = "/srv/course/.service/workspace/autograded/alice/.grading-01_strides-42"
    job = store.add(student="alice", assignment="01_strides", notebook="01_strides.ipynb",
                    content=notebooks["right"], received_at=T0, late=False)
    lease = store.claim("w", 1)[0].lease
    store.started(job, lease)
    store.fault(job, lease, f"[Errno 13] Permission denied: '{secret}'")
    retried = json.loads(_get_page(settings_with(course), store, "alice", f"api/submissions/{job}"))
    assert retried["reason"].startswith("grader error: the course staff have been told")
    assert "/srv" not in str(retried)
    lease = store.claim("w", 1)[0].lease
    store.started(job, lease)
    store.fault(job, lease, f"[Errno 13] Permission denied: '{secret}'")
    for path in (f"api/submissions/{job}", f"submissions/{job}", "", "api/submissions"):
        assert "/srv" not in _get_page(settings_with(course), store, "alice", path), path

    from autograder.service.views import GRADER_ERROR, redact_paths, submission_view

    student = submission_view(store.get(job), settings_with(course), store, T0)
    staff = submission_view(store.get(job), settings_with(course), store, T0, staff=True)
    assert student["state"] == "error" and student["reason"].startswith(GRADER_ERROR)
    assert "/srv" not in str(student) and secret in staff["reason"]
    assert redact_paths(f"cannot read {secret}: gone; see /tmp/x.log") == \
        "cannot read .grading-01_strides-42: gone; see x.log"
    assert redact_paths("expected (3, 3, 1), got 0/10 and a/b") == "expected (3, 3, 1), got 0/10 and a/b"


def _get_page(settings: ServiceSettings, store: Store, user: str, path: str = "",
              upload: tuple[str, bytes] | None = None) -> str:
    """``path`` of the real web application (clock frozen at T0), as ``user`` sees it; with
    ``upload`` (file name, bytes), the answer of ``POST api/submissions``, whatever its status."""
    import httpx

    with web_app(settings, store, lambda: T0) as url:
        headers = {"Authorization": f"Bearer {store.issue_token(user)}"}
        if upload is not None:
            return httpx.post(f"{url}api/submissions", timeout=60,
                              params={"filename": upload[0]}, content=upload[1],
                              headers=headers).text
        reply = httpx.get(f"{url}{path}", timeout=30, headers=headers)
        assert reply.status_code == 200, reply.text[-2000:]
        return reply.text


def test_pages_show_dates_humanely_and_a_not_yet_open_exercise_says_when_it_opens(course, store):
    """m3: "4 Dec 2026, 23:59 UTC", not ISO; "opens <date>", not "(closed)"."""
    from autograder.service.views import assignment_views

    settings = dataclasses.replace(settings_with(course), policies={
        "01_strides": {"due": "2026-12-04T23:59:00+00:00"},
        "02_einops": {"opens": "2026-12-20T09:00:00Z"}}, _cache=None)
    page = _get_page(settings, store, "alice")
    assert "(opens 20 Dec 2026, 09:00 UTC)" in page and "4 Dec 2026, 23:59 UTC" in page
    assert "(closed)" not in page and "2026-12-04T23:59" not in page
    views = {v["assignment"]: v for v in assignment_views(settings, store, "alice", T0)}
    assert views["01_strides"]["due_shown"] == "4 Dec 2026, 23:59 UTC"
    assert views["02_einops"]["not_yet_open"] and not views["01_strides"]["not_yet_open"]


def test_a_policy_edit_in_nbgrader_config_is_read_again_without_a_restart(course, tmp_path,
                                                                          monkeypatch):
    """m4: the service reads c.AutograderService again when nbgrader_config.py changes; a broken
    edit keeps the settings before it."""
    import os
    import shutil

    from autograder.service import settings as settings_module

    monkeypatch.setattr(settings_module, "RELOAD_CHECK_S", 0.0, raising=False)
    course = shutil.copytree(course_root := course, tmp_path / "course")
    assert course != course_root
    config = course / "nbgrader_config.py"
    original = config.read_text()
    settings = ServiceSettings.of(load_course(course))
    assert settings.policy("01_strides").max_submissions != 1
    config.write_text(original + '\nc.AutograderService.policy = {"default": {"max_submissions": 1}}\n')
    os.utime(config, (1e9, 1e9))
    assert settings.policy("01_strides").max_submissions == 1
    config.write_text(original + '\nc.AutograderService.policy = {"default": {"counts": "nope"}}\n')
    os.utime(config, (2e9, 2e9))
    assert settings.policy("01_strides").max_submissions == 1  # the broken edit is not applied

