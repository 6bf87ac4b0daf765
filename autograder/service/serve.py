"""``autograder serve``: the web process in this one, the worker as a supervised child process.

The worker is restarted when it dies (its unfinished submissions go back to the queue, see
``store.Store.recover``) and dies with this process (PR_SET_PDEATHSIG), so a ``kill -9`` of the service
leaves nothing running; started again, it grades what was queued. Under JupyterHub (``--hub``) the
address and prefix come from the hub's ``JUPYTERHUB_SERVICE_URL`` / ``JUPYTERHUB_SERVICE_PREFIX``.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO
from urllib.parse import urlparse

from autograder.course.nbgrader import load_course
from autograder.errors import CourseError
from autograder.grading.options import settings_json
from autograder.service.options import ServiceOptions
from autograder.service.schema import PROBE_OK
from autograder.service.settings import ServiceSettings
from autograder.service.store import Store, default_url
from autograder.service.web import make_app

if TYPE_CHECKING:
    from tornado import web

log = logging.getLogger("autograder.service")
PROBE_TIMEOUT_S = 600.0  # the worker's start (sandbox warm-up, torch) and one notebook, at most


def state_folder(options: ServiceOptions) -> Path:
    """The service's folder (database, cookie secret, the worker's workspace): this user's only,
    mode 700, wherever it lies. Nothing in it is opened to the checker's uid (grading as root): the
    checker works in a folder of its own that the grading engine makes reachable for it (a fresh
    tmpfs over the folders on the way that it cannot enter, ``grading.execute.confine``)."""
    folder = Path(options.state_dir or Path(options.course_root) / ".service").resolve()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = folder.stat()
    if info.st_uid == os.geteuid() and info.st_mode & 0o077:
        folder.chmod(0o700)  # made by an earlier version, or by hand (mkdir -m 755)
    return folder


def _service_lock(folder: Path) -> TextIO:
    """One service per state folder: a second ``serve`` on it stops with the reason."""
    handle = open(folder / "serve.lock", "a+")  # noqa: SIM115 - kept open: the lock lives with it
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise CourseError(f"another `autograder serve` is running on {folder} (serve.lock); "
                          "stop it, or give this one its own --state") from None
    return handle


def cookie_secret(folder: Path) -> bytes:
    """A secret kept across restarts (sessions survive them), readable by this user only."""
    path = folder / "cookie_secret"
    if not path.exists():
        partial = folder / f".cookie_secret.{os.getpid()}"
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(32))
        try:
            os.link(partial, path)  # atomic, and only the first of several processes wins
        except FileExistsError:
            pass
        finally:
            partial.unlink()
    return path.read_bytes()


class WorkerProcess:
    """The worker child: started, watched, restarted when it dies, stopped with the service."""

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self.restart_at: float | None = None  # when a dead worker is started again
        self.started_at = 0.0

    def start(self) -> None:
        self.process = subprocess.Popen([*self.command, "--report-id"], stdout=subprocess.PIPE)
        self.started_at = time.monotonic()
        log.info("worker started (pid %d)", self.process.pid)

    def read_id(self) -> str | None:
        """The worker's id, the first line it writes (None when it exits first)."""
        if self.process is None or self.process.stdout is None:
            return None
        line = self.process.stdout.readline().decode().strip()
        return line or None

    def watch(self) -> None:
        """Watched once a second: a dead worker is started again, after 1, 2, 4 ... 60 s (one that
        cannot start, or whose start-up probe fails, is retried ever more slowly, not in a loop)."""
        if self.process is None or self.process.poll() is None:
            return
        if self.restart_at is None:
            if time.monotonic() - self.started_at > 300:
                self.restarts = 0  # it had worked for a while: the next start is at once again
            delay = min(60.0, 2.0 ** min(self.restarts, 6))
            self.restart_at = time.monotonic() + delay
            log.error("worker exited with status %s%s; starting another in %g s (restart %d)",
                      self.process.returncode, " (its start-up probe failed: see above)"
                      if self.process.returncode == 3 else "", delay, self.restarts + 1)
        elif time.monotonic() >= self.restart_at:
            self.restarts += 1
            self.restart_at = None
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.start()

    def stop(self, timeout: float = 30.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def worker_command(options: ServiceOptions, course_root: Path, folder: Path, db_url: str) -> list[str]:
    """The worker's command line: one ``ServiceOptions`` (the course, state folder and database
    filled in), its grading settings as given, never re-defaulted."""
    settings_json(options.grading)  # a wrong grading setting is refused here, with its message
    sent = replace(options, course_root=course_root, state_dir=folder, db_url=db_url)
    return [sys.executable, "-m", "autograder.service.worker", "--options", sent.to_json(),
            "--with-parent"]


def serve(options: ServiceOptions) -> None:
    """Run until SIGTERM/SIGINT."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s serve %(message)s")
    course = load_course(options.course_root)
    settings = ServiceSettings.of(course)  # a wrong policy stops the start, with its message
    folder = state_folder(options)
    # held for the life of this process: one worker per state folder; web processes alone (several
    # behind one proxy) share the folder, its database and its cookie secret
    lock = _service_lock(folder) if options.worker else None  # noqa: F841
    db_url = options.db_url or default_url(folder)
    store = Store(db_url)
    host, port, prefix = options.host, options.port, options.prefix
    if options.hub:
        bind = urlparse(os.environ.get("JUPYTERHUB_SERVICE_URL", f"http://{host}:{port}"))
        host, port = bind.hostname or host, bind.port or port
        prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", prefix)
    worker = WorkerProcess(worker_command(options, course.root, folder, db_url)) \
        if options.worker else None
    app = make_app(store=store, settings=settings, hub=options.hub, prefix=prefix,
                   cookie_secret=cookie_secret(folder))
    if worker is not None:
        probe(worker, store)
    else:
        log.info("no worker here (--no-worker): uploads are refused until an `autograder worker` "
                 "that can grade them is running")
    asyncio.run(_run(app, worker, host=host, port=port, prefix=prefix,
                     max_body=settings.max_upload_bytes * 4 + 2**20))


def probe(worker: WorkerProcess, store: Store, *, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Start the worker and wait for its start-up probe (the reference solution of the first CPU
    exercise graded through this service's workspace, full marks): the service starts only if the
    grading it promises works here; otherwise it stops, saying why."""
    started = time.monotonic()
    worker.start()
    worker_id = worker.read_id()
    outcome: str | None = None
    while worker_id is not None and time.monotonic() - started < timeout_s:
        row = store.worker(worker_id)
        outcome = row.probe if row is not None else None
        if outcome is not None or worker.process is None or worker.process.poll() is not None:
            break
        time.sleep(0.2)
    if outcome == PROBE_OK:
        log.info("start-up probe passed in %.1f s (worker start, sandbox warm-up, one notebook)",
                 time.monotonic() - started)
        return
    worker.stop()
    if outcome is None:
        code = worker.process.poll() if worker.process is not None else None
        outcome = (f"the worker exited (status {code}) before grading the probe; its log is above"
                   if code is not None else f"no result in {timeout_s:g} s")
    raise CourseError(f"not started: the start-up probe failed: {outcome}")


async def _run(app: web.Application, worker: WorkerProcess | None, *, host: str, port: int,
               prefix: str, max_body: int) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    server = app.listen(port, address=host, max_body_size=max_body, xheaders=True)
    print(f"autograder serve: listening on http://{host}:{port}{prefix} (c.AutograderService in "
          "nbgrader_config.py is read again when the file changes: no restart for a policy edit)",
          flush=True)
    try:
        while not stopping.is_set():
            try:
                await asyncio.wait_for(stopping.wait(), timeout=1.0)
            except TimeoutError:
                if worker is not None:
                    worker.watch()
    finally:
        server.stop()
        if worker is not None:
            await asyncio.to_thread(worker.stop)
