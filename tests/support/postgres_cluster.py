"""A private PostgreSQL cluster for one test session (Debian's ``postgresql``, installed by
``make system-deps``): ``initdb`` into a temporary folder as an unprivileged user (``nobody`` when the
tests run as root: PostgreSQL refuses root), listening on a unix socket in that folder only (no TCP
port), trust authentication for the one role ``autograder``. ``PostgresCluster.url`` is the
SQLAlchemy URL; ``stop`` is called even when a test fails (the fixture's ``finally``)."""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest


def postgres_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` that has initdb, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda path: int(Path(path).parts[4]))
    return Path(found[-1]).parent if found else None


@dataclass
class PostgresCluster:
    root: Path
    bin: Path
    user: str | None  # the OS user the server runs as (None: this one)

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    @property
    def url(self) -> str:
        return self.database_url("autograder")

    def database_url(self, name: str) -> str:
        return f"postgresql+psycopg://autograder@/{name}?host={self.socket_dir}"

    def new_database(self, name: str) -> str:
        """A fresh, empty database of the cluster; its SQLAlchemy URL."""
        self._run("createdb", "-h", str(self.socket_dir), "-U", "autograder", name)
        return self.database_url(name)

    def _run(self, *args: str) -> None:
        done = subprocess.run([str(self.bin / args[0]), *args[1:]], capture_output=True, text=True,
                              user=self.user, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(args)}: {done.stdout[-2000:]}{done.stderr[-2000:]}")

    def start(self) -> PostgresCluster:
        self.socket_dir.mkdir(parents=True)
        if self.user is not None:
            record = pwd.getpwnam(self.user)
            for path in (self.root, self.socket_dir):
                os.chown(path, record.pw_uid, record.pw_gid)
        self._run("initdb", "-D", str(self.root / "data"), "-U", "autograder", "--auth=trust",
                  "--no-sync", "-E", "UTF8")
        self._run("pg_ctl", "-D", str(self.root / "data"), "-l", str(self.root / "server.log"), "-w",
                  "-o", f"-k {self.socket_dir} -c listen_addresses='' -c fsync=off", "start")
        self.new_database("autograder")
        return self

    def stop(self) -> None:
        try:
            if (self.root / "data" / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A running private cluster, stopped and removed on the way out whatever happened (skips the
    test with the reason when PostgreSQL is not installed). Its folder is its own under /tmp: the
    server's user must reach it, and pytest's folders are root's alone."""
    binaries = postgres_bin()
    if binaries is None:
        pytest.skip("PostgreSQL is not installed (make system-deps installs Debian's postgresql)")
    cluster = PostgresCluster(Path(tempfile.mkdtemp(prefix="autograder-pg-")), binaries,
                              "nobody" if os.geteuid() == 0 else None)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
