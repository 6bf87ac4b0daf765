"""The service's queue (``service/store.py``) with many workers: fair claims, leases that a heartbeat
renews, results taken only under a live lease, recovery of expired leases only, attempts counted when a
notebook starts, grader faults retried then shown as grader errors (not counted against the student),
staff requeue, one running submission per student held by the database, an old database migrated.
Claims from several processes at once on one SQLite file."""

from __future__ import annotations

import multiprocessing
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta

import pytest
from postgres_cluster import postgres_cluster
from service_course import make_course
from sqlalchemy.exc import IntegrityError

from autograder.service.options import ServiceOptions
from autograder.service.schema import SubmissionRow
from autograder.service.store import MAX_ATTEMPTS, Store
from autograder.service.worker import Worker

T0 = datetime(2026, 11, 2, 12, 0, 0)
LEASE_S = 1.5  # short, so that expiry is seen in a test (long enough for a loaded CI); default 60 s


@pytest.fixture(scope="module")
def postgres():
    with postgres_cluster() as cluster:
        yield cluster


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path) -> str:
    """Each test on both databases: SQLite (the embedded default) and a real PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'service.db'}"
    return request.getfixturevalue("postgres").new_database(f"t{uuid.uuid4().hex[:12]}")


@pytest.fixture
def store(url) -> Store:
    return Store(url, lease_s=LEASE_S)


def submit(store: Store, *students: str) -> list[int]:
    return [store.add(student=student, assignment="01_strides", notebook="01_strides.ipynb",
                      content=b"{}", received_at=T0 + timedelta(minutes=minute), late=False)
            for minute, student in enumerate(students)]


def expire() -> None:
    time.sleep(LEASE_S + 0.15)


def test_claims_are_fair_one_per_student_first_submissions_first(store):
    submit(store, "alice", "alice", "alice", "bob")
    first = store.claim("w", 1)
    second = store.claim("w", 1)
    assert [j.student for j in first + second] == ["alice", "bob"]
    assert store.claim("w", 5) == []  # alice and bob each have one running
    assert store.finish(first[0].id, first[0].lease, score=1, max_score=1, feedback={})
    assert [j.id for j in store.claim("w", 5)] == [2]


def test_a_result_is_taken_once_and_only_under_the_live_lease(store):
    a, b = submit(store, "alice", "bob")
    claimed = {j.id: j for j in store.claim("w1", 2)}
    assert set(claimed) == {a, b} and claimed[a].lease != claimed[b].lease
    assert not store.finish(a, claimed[b].lease, score=9, max_score=10, feedback={})  # not its lease
    assert store.finish(a, claimed[a].lease, score=1, max_score=1, feedback={})
    assert not store.finish(a, claimed[a].lease, score=0, max_score=1, feedback={})  # once
    assert store.get(a).graded_count == 1 and store.get(a).score == 1


def test_a_late_starter_steals_nothing_and_an_expired_lease_is_refused(store):
    a, b = submit(store, "alice", "bob")
    slow = {j.id: j for j in store.claim("w1", 2)}
    assert store.recover() == (0, 0)  # a second worker starting now takes no live lease
    assert store.claim("w2", 2) == []
    store.started(a, slow[a].lease)
    for _ in range(3):  # the heartbeat keeps b's lease alive past several lease lengths
        time.sleep(LEASE_S / 2)
        assert store.renew([slow[b].lease]) == 1
    assert store.recover() == (1, 0)  # only a's: its worker froze
    row = store.get(a)
    assert (row.state, row.attempts, row.lease_token) == ("queued", 1, None)
    assert not store.finish(a, slow[a].lease, score=0, max_score=10, feedback={})  # it woke up late
    assert store.renew([slow[a].lease]) == 0  # an expired lease cannot be revived
    [again] = store.claim("w2", 2)
    assert again.id == a and store.finish(a, again.lease, score=10, max_score=10, feedback={})
    assert store.finish(b, slow[b].lease, score=10, max_score=10, feedback={})
    assert [(store.get(i).state, store.get(i).graded_count) for i in (a, b)] == [("done", 1)] * 2


def test_claimed_work_that_never_started_is_never_failed(store):
    """Two worker deaths with nothing started: every submission goes back, attempts stay 0."""
    ids = submit(store, "alice", "bob", "carol", "dave")
    for _ in range(MAX_ATTEMPTS + 1):
        assert len(store.claim("dying", 4)) == 4
        expire()
        assert store.recover() == (4, 0)
    assert [(store.get(i).state, store.get(i).attempts) for i in ids] == [("queued", 0)] * 4


def test_a_grader_that_keeps_failing_is_an_error_not_a_score_and_not_counted(store):
    [a] = submit(store, "alice")
    for attempt in range(1, MAX_ATTEMPTS + 1):
        [job] = store.claim("w", 1)
        assert store.started(job.id, job.lease) and not store.started(job.id, job.lease)  # once
        state = store.fault(job.id, job.lease, "the set-up cell imports did not finish")
        assert state == ("queued" if attempt < MAX_ATTEMPTS else "error")
    row = store.get(a)
    assert (row.state, row.score, row.graded_count) == ("error", None, 0)
    assert "not your notebook's fault" in row.reason and "imports" in row.reason
    assert store.received_since("alice", "01_strides", T0 - timedelta(days=1)) == []  # not counted
    assert store.requeue([a]) == [a]
    assert (store.get(a).state, store.get(a).attempts, store.get(a).reason) == ("queued", 0, None)
    assert store.requeue([a]) == []  # only failed or errored ones


def test_a_worker_that_dies_twice_on_a_started_notebook_leaves_a_grader_error(store):
    [a] = submit(store, "alice")
    for _ in range(MAX_ATTEMPTS):
        [job] = store.claim("w", 1)
        store.started(job.id, job.lease)
        expire()
        store.recover()
    assert store.get(a).state == "error" and "stopped 2 times" in store.get(a).reason
    assert store.counts()["error"] == 1
    assert store.requeue(failed=True) == [a]


def test_a_stopping_worker_gives_its_work_back_without_an_attempt(store):
    a, b = submit(store, "alice", "bob")
    jobs = store.claim("w", 2)
    store.started(jobs[0].id, jobs[0].lease)
    assert store.release("w") == 2
    assert [(store.get(i).state, store.get(i).attempts) for i in (a, b)] == [("queued", 0)] * 2


def test_the_database_holds_one_running_submission_per_student(store):
    submit(store, "alice", "alice")
    store.claim("w", 1)
    with pytest.raises(IntegrityError), store.session(write=True) as s:
        s.get(SubmissionRow, 2).state = "running"


def test_a_database_of_the_earlier_version_is_migrated(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:  # the table as the previous release created it
        db.execute("CREATE TABLE service_submission (id INTEGER PRIMARY KEY, student VARCHAR(128), "
                   "assignment VARCHAR(128), notebook VARCHAR(256), content BLOB, sha256 VARCHAR(64),"
                   " received_at DATETIME, late BOOLEAN, round INTEGER, state VARCHAR(16), attempts "
                   "INTEGER, claimed_by VARCHAR(64), started_at DATETIME, finished_at DATETIME, score "
                   "FLOAT, max_score FLOAT, feedback TEXT, reason TEXT, graded_count INTEGER, landed "
                   "BOOLEAN)")
        db.execute("INSERT INTO service_submission VALUES (1, 'alice', '01_strides', "
                   "'01_strides.ipynb', x'7b7d', '', '2026-11-02 12:00:00', 0, 0, 'queued', 0, NULL, "
                   "NULL, NULL, NULL, NULL, NULL, NULL, 0, 0)")
    store = Store(f"sqlite:///{path}", lease_s=LEASE_S)
    [job] = store.claim("w", 1)
    assert job.id == 1 and store.finish(1, job.lease, score=1, max_score=1, feedback={})


def _claim_until_empty(url: str, worker: str, results: multiprocessing.Queue) -> None:
    store = Store(url, lease_s=30)
    taken: list[tuple[int, str]] = []
    idle = 0
    while idle < 20:
        jobs = store.claim(worker, 3)
        idle = 0 if jobs else idle + 1
        for job in jobs:
            taken.append((job.id, job.student))
            assert store.started(job.id, job.lease)
            assert store.finish(job.id, job.lease, score=1, max_score=1, feedback={})
        time.sleep(0.005)
    results.put(taken)


def test_four_processes_claiming_at_once_take_each_submission_exactly_once(url):
    store = Store(url, lease_s=30)
    students = [f"s{i:02d}" for i in range(30)]
    ids = submit(store, *students, *students, *students)  # 90, three per student
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    workers = [context.Process(target=_claim_until_empty, args=(url, f"w{n}", results))
               for n in range(4)]
    for worker in workers:
        worker.start()
    taken = [item for _ in workers for item in results.get(timeout=120)]
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    assert Counter(i for i, _ in taken) == Counter(ids)  # each once, none lost
    rows = [store.get(i) for i in ids]
    assert {(r.state, r.graded_count, r.attempts) for r in rows} == {("done", 1, 1)}


def test_serve_requeue_from_the_command_line(url, tmp_path):
    store = Store(url, lease_s=LEASE_S)
    [a] = submit(store, "alice")
    for _ in range(MAX_ATTEMPTS):
        [job] = store.claim("w", 1)
        store.started(job.id, job.lease)
        store.fault(job.id, job.lease, "a sandbox that never started")
    command = [sys.executable, "-m", "autograder.cli", "--course-root", str(tmp_path), "serve",
               "--state", str(tmp_path / "state"), "--service-db", url, "requeue"]
    missing = subprocess.run([*command, "99"], capture_output=True, text=True)
    assert missing.returncode == 1 and "submission 99: not failed" in missing.stdout
    done = subprocess.run([*command, str(a)], capture_output=True, text=True)
    assert done.returncode == 0 and f"1 submission(s) queued again: {a}" in done.stdout
    assert (store.get(a).state, store.get(a).attempts) == ("queued", 0)
    wrong = subprocess.run([*command, "first"], capture_output=True, text=True)
    assert wrong.returncode == 1 and "submission ids are numbers" in wrong.stderr


@pytest.fixture(scope="module")
def worker_course(tmp_path_factory):
    """One course for the tests that make a real Worker (each with its own state folder)."""
    return make_course(tmp_path_factory.mktemp("workers") / "course",
                       assignments=("01_strides", "04_adagrad"))


def test_work_claimed_together_keeps_its_lease_while_it_waits_its_turn(worker_course, tmp_path):
    """A worker claims up to twice its sandboxes; the claims that wait for a free one are renewed by
    the heartbeat like the running ones (the heartbeat renews what ``inflight`` holds), so a busy
    worker never loses (and regrades) its own queue."""
    course = make_course(tmp_path / "course", assignments=("01_strides",))
    worker = Worker(ServiceOptions(course_root=course, state_dir=tmp_path / "state",
                                  grading={"workers": 1}))
    ids = submit(worker.store, "alice", "bob")
    worker.workspace.prepare()
    requests = worker._requests(threading.Event())
    assert next(requests) == ("autograder-probe", "01_strides")  # the start-up probe comes first
    assert next(requests) == ("alice", "01_strides")  # bob's claim now waits for the one sandbox
    rows = {row.student: row for row in (worker.store.get(i) for i in ids)}
    assert {s: (r.state, r.claimed_by) for s, r in rows.items()} == {
        "alice": ("running", worker.id), "bob": ("running", worker.id)}
    held = {job.student: job.lease for job in worker.inflight.values()}
    assert held == {s: r.lease_token for s, r in rows.items()}  # both renewed from now on
    assert worker.store.renew(list(held.values())) == 2
    assert next(requests) == ("bob", "01_strides")  # its turn: still its own claim


def test_claims_skip_the_assignments_a_worker_leaves_to_others(store):
    submit(store, "alice")
    store.add(student="bob", assignment="04_adagrad", notebook="04_adagrad.ipynb", content=b"{}",
              received_at=T0, late=False)
    assert [c.student for c in store.claim("cpu-only", 5, skip=("04_adagrad",))] == ["alice"]
    assert [c.assignment for c in store.claim("with-gpu", 5)] == ["04_adagrad"]


def test_a_worker_without_a_gpu_leaves_the_gpu_exercises_to_one_with_it(worker_course, tmp_path,
                                                                         monkeypatch):
    """On CPU a GPU-only check scores 0 (a fault of the machine, not of the notebook): a worker
    that has no GPU, and may not run GPU checks on CPU, does not take those exercises at all."""
    import torch

    from autograder.errors import DeviceError

    monkeypatch.delenv("AUTOGRADER_ALLOW_CPU", raising=False)

    def worker(**options) -> Worker:
        made = Worker(ServiceOptions(course_root=worker_course, state_dir=tmp_path / "state",
                                    **options))
        made._route()
        return made

    assert worker().skip == ("04_adagrad",)
    assert worker(grading={"allow_cpu": True}).skip == ()  # the course staff's choice: CPU paths
    if torch.cuda.is_available():
        assert worker(gpu=True).skip == ()
    else:  # --gpu is checked, never taken on trust
        with pytest.raises(DeviceError, match="no CUDA device"):
            worker(gpu=True)
