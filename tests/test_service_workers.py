"""Several ``autograder worker`` processes on one service database (SQLite, and a real PostgreSQL
cluster of the test's own), each with its own state folder as on separate machines, through the faults a real
deadline brings: one worker's machine dies (``kill -9`` of its whole process group) while it grades,
another freezes (SIGSTOP past its lease, then SIGCONT: its late results are refused), a third starts
late. Every submission is graded exactly once with batch's score; none is failed or a grader error."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import httpx
import nbformat
import pytest
from postgres_cluster import postgres_cluster
from service_course import Service, WorkerProcess, make_course, right_notebook, wait_graded

from autograder.authoring.release import nbgrader_environment
from autograder.service.store import Store

STUDENTS = tuple(f"w{i:02d}" for i in range(10))
LEASE_S = 4.0


def _wait_started_by(store: Store, worker: str, timeout: float = 180) -> int:
    """The id of a submission whose notebook has started on ``worker``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for row in store.history():
            if row.state == "running" and row.claimed_by == worker and row.lease_started:
                return row.id
        time.sleep(0.05)
    raise AssertionError(f"{worker} started nothing: {store.counts()}")


def slow(content: bytes) -> bytes:
    """The notebook with a cell of the student's own that takes 2 s (it changes no score)."""
    nb = nbformat.reads(content.decode(), as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("import time\ntime.sleep(2)"))
    return nbformat.writes(nb).encode()


@pytest.fixture
def course(tmp_path) -> Path:
    return make_course(tmp_path / "course", students=STUDENTS, assignments=("01_strides",))


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'service.db'}"
        return
    with postgres_cluster() as cluster:
        yield cluster.url.replace("postgresql+psycopg://", "postgresql://")  # as a user writes it


def test_a_dead_a_frozen_and_a_late_worker_grade_every_submission_once(course, db_url, tmp_path):
    store = Store(db_url)
    content = slow(right_notebook(course))  # 2 s each: a fault always finds a notebook running
    ids = [store.add(student=s, assignment="01_strides", notebook="01_strides.ipynb",
                     content=content, received_at=datetime(2026, 11, 2, 12, i), late=False)
           for i, s in enumerate(STUDENTS)]
    logs = {name: tmp_path / f"{name}.log" for name in ("dies", "freezes", "late")}
    workers = {name: WorkerProcess(course, db_url, tmp_path / name, logs[name], lease_s=LEASE_S)
               for name in ("dies", "freezes")}
    try:
        names = {name: worker.worker_id() for name, worker in workers.items()}
        killed = _wait_started_by(store, names["dies"])
        workers["dies"].signal_group(signal.SIGKILL)  # its machine dies mid-notebook
        frozen = _wait_started_by(store, names["freezes"])
        workers["freezes"].signal_group(signal.SIGSTOP)
        workers["late"] = WorkerProcess(course, db_url, tmp_path / "late", logs["late"], lease_s=LEASE_S)
        names["late"] = workers["late"].worker_id()
        time.sleep(LEASE_S * 2)  # the frozen worker's leases expire; the late one takes them
        workers["freezes"].signal_group(signal.SIGCONT)
        deadline = time.monotonic() + 300
        while store.counts()["done"] < len(ids) and time.monotonic() < deadline:
            assert store.counts()["failed"] == store.counts()["error"] == 0, store.counts()
            time.sleep(0.2)
        rows = [store.get(i) for i in ids]
        assert [(r.state, r.graded_count, r.score) for r in rows] == [("done", 1, 10.0)] * len(ids)
        assert store.get(killed).attempts == 2 and store.get(frozen).attempts == 2
        assert max(r.attempts for r in rows) <= 2
        graded_by = {r.claimed_by for r in rows}
        assert names["late"] in graded_by  # the late worker took over work, and stole none live
        late_log = logs["late"].read_text() + logs["freezes"].read_text()
        assert "queued again" in late_log
        refused = f"{names['freezes']}: submission {frozen}: the lease expired before its result"
        deadline = time.monotonic() + 60  # the frozen worker, awake, finishes its notebook late
        while refused not in logs["freezes"].read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert refused in logs["freezes"].read_text(), logs["freezes"].read_text()[-2000:]
        assert store.get(frozen).graded_count == 1  # by whichever worker claimed it again
    finally:
        for worker in workers.values():
            worker.stop()


def test_two_web_processes_share_the_database_and_the_sessions(course, tmp_path):
    """Two ``serve --no-worker`` behind one proxy: a login on one is a session on the other, a
    submission through one is graded by a worker elsewhere and seen through the other."""
    state = tmp_path / "state"
    db_url = f"sqlite:///{tmp_path / 'service.db'}"
    webs = [Service(course, state=state, log=tmp_path / f"web{n}.log",
                    extra=("--no-worker", "--service-db", db_url)) for n in (1, 2)]
    worker = None
    try:
        for web in webs:
            web.start()
        done = subprocess.run([sys.executable, "-m", "autograder.cli", "--course-root", str(course),
                               "tokens", "issue", "w00", "--service-db", db_url], check=True,
                              capture_output=True, text=True,
                              env={**os.environ, **nbgrader_environment()})
        token = done.stdout.split("\t")[1].strip()
        with httpx.Client(base_url=webs[0].url) as http:
            form = http.get("login")
            xsrf = re.search(r'name="_xsrf" value="([^"]+)"', form.text)[1]
            assert http.post("login", data={"token": token, "_xsrf": xsrf}).status_code == 303
            cookies = http.cookies
        with httpx.Client(base_url=webs[1].url, cookies=cookies) as other:
            assert other.get("").status_code == 200  # the session holds on the second process
            assert "Your submissions" in other.get("").text
        with httpx.Client(base_url=webs[1].url, headers={"Authorization": f"Bearer {token}"},
                          timeout=30) as http:  # no worker yet: nothing would grade it (issue 41 M2)
            refused = http.post("api/submissions", params={"filename": "01_strides.ipynb"},
                                content=right_notebook(course))
            assert refused.status_code == 503 and "no grader is running" in refused.json()["error"]
        worker = WorkerProcess(course, db_url, tmp_path / "worker", tmp_path / "worker.log",
                               lease_s=LEASE_S)
        worker.wait_grading(db_url)
        with httpx.Client(base_url=webs[1].url, headers={"Authorization": f"Bearer {token}"},
                          timeout=30) as http:
            submitted = http.post("api/submissions", params={"filename": "01_strides.ipynb"},
                                  content=right_notebook(course)).json()["id"]
        with httpx.Client(base_url=webs[0].url, headers={"Authorization": f"Bearer {token}"},
                          timeout=30) as http:
            status = wait_graded(http, submitted)
        assert (status["state"], status["score"]) == ("done", 10.0)
    finally:
        for web in webs:
            web.stop()
        if worker is not None:
            worker.stop()
