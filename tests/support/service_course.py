"""A course for the service tests: two exercises released, a roster, right and wrong notebooks, and a
running ``autograder serve`` (standalone, course tokens) that a test can SIGKILL and start again;
``web_app``, the web application alone in a thread, its clock given."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import httpx
import nbformat

from autograder.authoring import samples
from autograder.authoring.release import copy_course, nbgrader_environment, release
from autograder.course.nbgrader import load_course
from autograder.service.settings import ServiceSettings
from autograder.service.store import Store

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = ("01_strides", "02_einops")
STUDENTS = ("alice", "bob", "carol")


def make_course(root: Path, *, students=STUDENTS, assignments=ASSIGNMENTS) -> Path:
    """A copy of the course with ``assignments`` released and ``students`` on the roster."""
    copy_course(ROOT, root)
    release(assignments=list(assignments), course_root=root)
    with load_course(root).gradebook() as gb:
        for student in students:
            gb.update_or_create_student(student)
    return root


def right_notebook(root: Path, assignment: str = "01_strides") -> bytes:
    return nbformat.writes(samples.reference_notebook(assignment, course_root=root)).encode()


def wrong_notebook(root: Path, assignment: str = "01_strides") -> bytes:
    """The reference with the catalogue's first wrong answer (loses points, not all)."""
    wrong, _ = samples.load_catalogue(assignment, course_root=ROOT)
    nb = samples.student_notebook(assignment, wrong[0]["replace"], course_root=root)
    return nbformat.writes(nb).encode()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Service:
    """``autograder serve`` on a course, in its own process group."""

    root: Path
    port: int = field(default_factory=free_port)
    workers: int = 2
    state: Path | None = None  # default: <course>/.service
    log: Path | None = None
    process: subprocess.Popen | None = None
    lease_s: float | None = None  # the worker's lease (default: the service's)
    extra: tuple[str, ...] = ()  # more `serve` arguments
    db_url: str | None = None  # --service-db (default: SQLite in the state folder)
    allow_cpu: bool = True  # AUTOGRADER_ALLOW_CPU=1: GPU checks on their CPU path (the worker grades 04-06)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self, timeout: float = 240.0) -> Service:
        """Started: listening, which `serve` does once its worker's start-up probe has passed."""
        self.log = self.log or self.root / "serve.log"
        env = {**os.environ, **nbgrader_environment()}
        env.pop("AUTOGRADER_ALLOW_CPU", None)
        if self.allow_cpu:
            env["AUTOGRADER_ALLOW_CPU"] = "1"
        out = open(self.log, "ab")  # noqa: SIM115 - the child owns it
        self.process = subprocess.Popen(
            [sys.executable, "-m", "autograder.cli", "--course-root", str(self.root), "serve",
             "--port", str(self.port), "--workers", str(self.workers),
             *(["--state", str(self.state)] if self.state else []),
             *(["--lease-s", str(self.lease_s)] if self.lease_s else []),
             *(["--service-db", self.db_url] if self.db_url else []), *self.extra],
            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited: {self.log.read_text()[-3000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "login", timeout=2).status_code == 200:
                    return self
            time.sleep(0.2)
        raise RuntimeError(f"serve did not start: {self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the serve process alone (its worker must die with it, by itself)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.process is not None:  # whatever the group left (a worker that did not follow)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)

    def tokens(self, *users: str, instructor: bool = False) -> dict[str, str]:
        args = [sys.executable, "-m", "autograder.cli", "--course-root", str(self.root), "tokens",
                "issue", *users] + (["--instructor"] if instructor else []) + \
            (["--state", str(self.state)] if self.state else []) + \
            (["--service-db", self.db_url] if self.db_url else [])
        out = subprocess.run(args, check=True, capture_output=True, text=True,
                             env={**os.environ, **nbgrader_environment()}).stdout
        return dict(line.split("\t") for line in out.strip().splitlines())


class WorkerProcess:
    """One ``autograder worker``, in its own process group (its sandboxes die with it)."""

    def __init__(self, course: Path, db_url: str, state: Path, log: Path, *, workers: int = 1,
                 lease_s: float | None = None, extra: tuple[str, ...] = ()) -> None:
        self.log = log
        env = {**os.environ, **nbgrader_environment(), "AUTOGRADER_ALLOW_CPU": "1"}
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "autograder.cli", "--course-root", str(course), "worker",
                 "--service-db", db_url, "--state", str(state), "--workers", str(workers),
                 *(["--lease-s", str(lease_s)] if lease_s else []), *extra],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def wait_grading(self, db_url: str, timeout: float = 240) -> str:
        """Its id, once it grades: registered, and its start-up probe passed."""
        from autograder.service.schema import PROBE_OK
        from autograder.service.store import Store

        worker = self.worker_id(timeout)
        store = Store(db_url)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            row = store.worker(worker)
            if row is not None and row.probe == PROBE_OK:
                return worker
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            time.sleep(0.2)
        raise AssertionError(f"{worker}: no start-up probe in {timeout} s: {self.log.read_text()[-3000:]}")

    def worker_id(self, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(r"(worker-[0-9a-f]{12}): grading", self.log.read_text())
            if found:
                return found.group(1)
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            time.sleep(0.1)
        raise AssertionError(f"the worker did not start: {self.log.read_text()[-3000:]}")

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signum)

    def stop(self) -> None:
        self.signal_group(signal.SIGCONT)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                pass
        self.signal_group(signal.SIGKILL)


def client(service: Service, token: str) -> httpx.Client:
    return httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {token}"},
                        timeout=30)


def wait_graded(http: httpx.Client, job_id: int, timeout: float = 180.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = http.get(f"api/submissions/{job_id}").json()
        if status["state"] in ("done", "failed", "error"):
            return status
        time.sleep(0.3)
    raise AssertionError(f"submission {job_id} not graded in {timeout} s: {status}")


@contextlib.contextmanager
def web_app(settings: ServiceSettings, store: Store, clock: Callable[[], datetime],
            max_header_size: int | None = None) -> Iterator[str]:
    """The real web application on 127.0.0.1 in a thread, its clock ``clock`` (and tornado's
    ``max_header_size``, when given); yields its URL."""
    import asyncio
    import threading

    from tornado.httpserver import HTTPServer
    from tornado.netutil import bind_sockets

    from autograder.service.web import make_app

    sockets = bind_sockets(0, "127.0.0.1")
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        HTTPServer(make_app(store=store, settings=settings, hub=False, clock=clock),
                   max_header_size=max_header_size).add_sockets(sockets)
        loop.call_soon(started.set)
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    started.wait(10)
    try:
        yield f"http://127.0.0.1:{sockets[0].getsockname()[1]}/"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
