"""The service's database (SQLAlchemy; SQLite by default, any URL for production): the durable queue of
submissions with their results, and the course tokens of standalone mode.

Never nbgrader's gradebook: the service's scores live here until the instructor grades. Every state
change is one compare-and-set ``UPDATE ... WHERE ...`` so that the web processes and any number of
workers, on any machines that reach the database, never both own a submission, and a result is
recorded exactly once (``graded_count`` counts it; the fault tests assert it is 1 for every submission).

States: ``queued`` → ``running`` → ``done`` | ``failed`` (the student's notebook could not be graded:
the reason is theirs to read) | ``error`` (the grader failed ``MAX_ATTEMPTS`` times: never a score,
never counted against the student's limit; staff requeue it). A claim is a **lease**: a random token
and ``lease_until``, renewed by the worker's heartbeat (``renew``); a result is taken only with the
live token (a worker whose lease expired, frozen or cut off, is refused). ``recover`` puts back only
expired leases, so a worker that starts late steals nothing. An attempt counts when a notebook of the
submission starts in a sandbox (``started``), never for claimed work that was waiting.

Claims are serialised: ``BEGIN IMMEDIATE`` on SQLite, ``FOR UPDATE SKIP LOCKED`` on PostgreSQL; a
partial unique index keeps one running submission per student whatever the interleaving. The tables
and the records read out of them: ``schema.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    ColumnElement,
    case,
    create_engine,
    delete,
    event,
    func,
    select,
    update,
)
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.exc import IntegrityError, ProgrammingError
from sqlalchemy.orm import Session

from autograder.service.options import LEASE_S
from autograder.service.schema import (
    ClaimedSubmission,
    Grader,
    SubmissionRow,
    TableBase,
    TokenRow,
    WorkerRow,
    add_missing_columns,
    digest,
    utcnow,
)

if TYPE_CHECKING:
    from sqlalchemy.engine.interfaces import DBAPIConnection
    from sqlalchemy.pool import ConnectionPoolEntry

MAX_ATTEMPTS = 2  # grader failures (a worker's death, a fault before the student's code) before
# the submission is marked "error" for the staff
STATES = ("queued", "running", "done", "failed", "error")
PACE_WINDOW_S, PACE_LEAST, PACE_EVERY_S = 60.0, 5, 5.0  # Store.pace_s: how the queue's pace is read
COUNTED = ("queued", "running", "done", "failed")  # states that count against a student's limit


def private_sqlite_file(url: str) -> None:
    """The SQLite file of ``url`` (and its -wal/-shm, which SQLite creates with its mode) readable
    by this user only: it holds every notebook and the token digests. Created so when missing; one
    of another mode that is ours is made so."""
    name = url.split("///", 1)[1] if "///" in url else ""
    if not name or name.startswith(":memory:") or "?" in name:
        return
    path = Path(name)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    for each in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        with contextlib.suppress(OSError):
            info = each.stat()
            if info.st_uid == os.geteuid() and info.st_mode & 0o077:
                each.chmod(0o600)


def default_url(state_dir: Path) -> str:
    return f"sqlite:///{Path(state_dir).resolve() / 'service.db'}"


class Store:
    """The queue and its results, over one SQLAlchemy engine (and, on SQLite, a second one whose
    transactions take the write lock at BEGIN, for the read-then-write claims)."""

    def __init__(self, url: str, *, lease_s: float = LEASE_S) -> None:
        if url.startswith(("postgresql://", "postgres://")):  # the driver this project ships
            url = "postgresql+psycopg://" + url.split("://", 1)[1]
        self.url = url
        self.lease = timedelta(seconds=lease_s)
        self.sqlite = url.startswith("sqlite")
        self._pace: tuple[float, float | None] | None = None  # (monotonic, pace_s()) last read
        if self.sqlite:
            private_sqlite_file(url)
        self.engine: Engine = create_engine(url, connect_args={"timeout": 30} if self.sqlite else {})
        self.writer: Engine = self.engine
        self.reader: Engine = self.engine if self.sqlite else \
            create_engine(url, isolation_level="AUTOCOMMIT")
        if self.sqlite:
            event.listen(self.engine, "connect", _sqlite_pragmas)
            self.writer = create_engine(url, connect_args={"timeout": 30})
            event.listen(self.writer, "connect", _sqlite_immediate)
            event.listen(self.writer, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
        for attempt in range(3):  # workers starting at once on an empty PostgreSQL race to create
            try:
                TableBase.metadata.create_all(self.engine)
                add_missing_columns(self.engine)
                break
            except (IntegrityError, ProgrammingError):
                if attempt == 2:
                    raise

    @contextmanager
    def read(self) -> Iterator[Session]:
        """A session for one read statement, in no transaction of its own: on PostgreSQL an
        autocommit connection, so a status poll (token, row, place: three reads) sends no BEGIN or
        COMMIT (SQLite's driver sends none for a read anyway)."""
        with Session(self.reader, expire_on_commit=False) as session:
            yield session

    @contextmanager
    def session(self, *, write: bool = False) -> Iterator[Session]:
        """One transaction; ``write``: serialised with every other writer from its first statement."""
        with Session(self.writer if write else self.engine, expire_on_commit=False) as session, \
                session.begin():
            yield session

    # -- intake (web process) ------------------------------------------------------------------
    def add(self, *, student: str, assignment: str, notebook: str, content: bytes,
            received_at: datetime, late: bool) -> int:
        with self.session(write=True) as s:
            pending = s.scalar(select(func.count()).select_from(SubmissionRow).where(
                SubmissionRow.student == student, SubmissionRow.state.in_(("queued", "running"))))
            row = SubmissionRow(student=student, assignment=assignment, notebook=notebook,
                                content=content, sha256=hashlib.sha256(content).hexdigest(),
                                received_at=received_at, late=late, round=pending or 0,
                                state="queued", attempts=0, graded_count=0, landed=False,
                                lease_started=False)
            s.add(row)
            s.flush()
            return row.id

    def received_since(self, student: str, assignment: str, since: datetime) -> list[datetime]:
        """When ``student`` submitted ``assignment`` since ``since`` (oldest first); a submission the
        grader failed on (``error``) is not counted."""
        with self.read() as s:
            return list(s.scalars(select(SubmissionRow.received_at).where(
                SubmissionRow.student == student, SubmissionRow.assignment == assignment,
                SubmissionRow.received_at >= since, SubmissionRow.state.in_(COUNTED))
                .order_by(SubmissionRow.received_at)))

    # -- the workers ---------------------------------------------------------------------------
    def recover(self) -> tuple[int, int]:
        """Running submissions whose lease expired (their worker died, froze or lost the
        database): back to the queue, or ``error`` once their notebooks started ``MAX_ATTEMPTS``
        times. A live lease is never touched. Returns (requeued, errored)."""
        now = utcnow()
        expired = (SubmissionRow.state == "running") & (
            SubmissionRow.lease_until.is_(None) | (SubmissionRow.lease_until < now))
        with self.session(write=True) as s:
            errored = _rowcount(s.execute(update(SubmissionRow).where(
                expired, SubmissionRow.attempts >= MAX_ATTEMPTS).values(
                state="error", finished_at=now, lease_token=None, lease_until=None,
                reason=f"the grader stopped {MAX_ATTEMPTS} times while grading this submission "
                       "(not your notebook's fault; the course staff can grade it again)")))
            requeued = _rowcount(s.execute(update(SubmissionRow).where(expired).values(
                **_UNCLAIMED)))
        return requeued, errored

    def release(self, worker: str) -> int:
        """A worker that stops gives its running submissions back (its attempt is not counted)."""
        with self.session(write=True) as s:
            return _rowcount(s.execute(update(SubmissionRow).where(
                SubmissionRow.state == "running", SubmissionRow.claimed_by == worker).values(
                attempts=SubmissionRow.attempts - case((SubmissionRow.lease_started, 1), else_=0),
                **_UNCLAIMED)))

    def claim(self, worker: str, limit: int, *,
              skip: Collection[str] = ()) -> list[ClaimedSubmission]:
        """Up to ``limit`` queued submissions under a fresh lease each, fair: at most one per
        student (and none of a student with one running), lowest round first (a student's first
        pending submission before anyone's second), then oldest. Submissions of the assignments
        in ``skip`` are left to other workers (a worker without a GPU skips the GPU exercises)."""
        if limit < 1:
            return []
        for _ in range(3):  # PostgreSQL: two claims may pick one student's rows at once
            try:
                return self._claim(worker, limit, skip)
            except IntegrityError:
                continue
        return []

    def _claim(self, worker: str, limit: int, skip: Collection[str]) -> list[ClaimedSubmission]:
        now = utcnow()
        with self.session(write=True) as s:
            busy = set(s.scalars(select(SubmissionRow.student).where(
                SubmissionRow.state == "running")))
            query = select(SubmissionRow.id, SubmissionRow.student).where(
                SubmissionRow.state == "queued", SubmissionRow.assignment.not_in(list(skip))
            ).order_by(
                SubmissionRow.round, SubmissionRow.received_at, SubmissionRow.id).limit(
                max(limit * 8, 64))
            if not self.sqlite:
                query = query.with_for_update(skip_locked=True)
            chosen: list[int] = []
            for row_id, student in s.execute(query).all():
                if student not in busy:
                    busy.add(student)
                    chosen.append(row_id)
                    if len(chosen) == limit:
                        break
            claimed = []
            for row_id in chosen:
                token = secrets.token_hex(16)
                if _rowcount(s.execute(update(SubmissionRow).where(
                        SubmissionRow.id == row_id, SubmissionRow.state == "queued").values(
                        state="running", claimed_by=worker, started_at=now, lease_token=token,
                        lease_until=now + self.lease, lease_started=False))):
                    row = s.get(SubmissionRow, row_id)
                    if row is None:  # this transaction has just updated it
                        raise LookupError(f"submission {row_id} is gone while being claimed")
                    claimed.append(ClaimedSubmission(row.id, row.student, row.assignment,
                                                     row.notebook, row.content, row.received_at,
                                                     token))
            return claimed

    def started(self, submission_id: int, lease: str) -> bool:
        """A notebook of the submission starts in a sandbox: this lease's attempt counts (once)."""
        with self.session(write=True) as s:
            return bool(_rowcount(s.execute(update(SubmissionRow).where(
                self._held(submission_id, lease), ~SubmissionRow.lease_started).values(
                lease_started=True, attempts=SubmissionRow.attempts + 1))))

    def renew(self, leases: Sequence[str]) -> int:
        """The heartbeat: every live lease of ``leases`` lives ``lease_s`` more; an expired one
        stays expired (it may be someone else's now). Returns how many were renewed."""
        if not leases:
            return 0
        now = utcnow()
        with self.session(write=True) as s:
            return _rowcount(s.execute(update(SubmissionRow).where(
                SubmissionRow.state == "running", SubmissionRow.lease_token.in_(list(leases)),
                SubmissionRow.lease_until >= now).values(lease_until=now + self.lease)))

    def finish(self, submission_id: int, lease: str, *, score: float | None,
               max_score: float | None, feedback: dict[str, Any]) -> bool:
        """Record a result, once: False when ``lease`` is no longer live (nothing is written)."""
        with self.session(write=True) as s:
            return bool(_rowcount(s.execute(update(SubmissionRow).where(
                self._held(submission_id, lease)).values(
                state="done", score=score, max_score=max_score, finished_at=utcnow(),
                feedback=json.dumps(feedback), graded_count=SubmissionRow.graded_count + 1,
                lease_token=None, lease_until=None))))

    def fail(self, submission_id: int, lease: str, reason: str) -> bool:
        """The notebook cannot be graded, for a reason of its own (shown to the student)."""
        with self.session(write=True) as s:
            return bool(_rowcount(s.execute(update(SubmissionRow).where(
                self._held(submission_id, lease)).values(
                state="failed", reason=reason, finished_at=utcnow(), lease_token=None,
                lease_until=None))))

    def fault(self, submission_id: int, lease: str, reason: str) -> str | None:
        """The grader failed (not the student): queued again for a fresh sandbox, or ``error`` after
        ``MAX_ATTEMPTS`` started attempts. Returns the new state, None when the lease is not live."""
        with self.session(write=True) as s:
            query = select(SubmissionRow).where(self._held(submission_id, lease))
            row = s.scalar(query if self.sqlite else query.with_for_update())
            if row is None:
                return None
            if row.attempts >= MAX_ATTEMPTS:
                row.state, row.finished_at, row.lease_token, row.lease_until = (
                    "error", utcnow(), None, None)
                row.reason = (f"the grader failed {row.attempts} times on this submission ({reason}); "
                              "not your notebook's fault, and not counted: the course staff can "
                              "grade it again")
                return "error"
            for name, value in _UNCLAIMED.items():
                setattr(row, name, value)
            row.reason = f"retried after a grader fault: {reason}"
            return "queued"

    def requeue(self, ids: Sequence[int] = (), *, failed: bool = False) -> list[int]:
        """Staff: grade again the submissions ``ids`` (in ``error`` or ``failed``), or with
        ``failed`` every one in ``error`` or ``failed``; attempts start again. Returns their ids."""
        where: ColumnElement[bool] = SubmissionRow.state.in_(("error", "failed"))
        if not failed:
            where = where & SubmissionRow.id.in_(list(ids))
        with self.session(write=True) as s:
            chosen = list(s.scalars(select(SubmissionRow.id).where(where)))
            if chosen:
                s.execute(update(SubmissionRow).where(SubmissionRow.id.in_(chosen)).values(
                    attempts=0, reason=None, finished_at=None, **_UNCLAIMED))
            return chosen

    @staticmethod
    def _held(submission_id: int, lease: str) -> ColumnElement[bool]:
        """The submission is running under ``lease`` and the lease has not expired."""
        return ((SubmissionRow.id == submission_id) & (SubmissionRow.state == "running")
                & (SubmissionRow.lease_token == lease) & (SubmissionRow.lease_until >= utcnow()))

    def mark_landed(self, submission_ids: Sequence[int]) -> None:
        with self.session() as s:
            s.execute(update(SubmissionRow).where(SubmissionRow.id.in_(list(submission_ids)))
                      .values(landed=True))

    # -- reading -------------------------------------------------------------------------------
    def get(self, submission_id: int) -> SubmissionRow | None:
        with self.read() as s:
            return s.get(SubmissionRow, submission_id)

    def history(self, student: str | None = None, assignment: str | None = None,
                *, limit: int | None = None) -> list[SubmissionRow]:
        """Submissions, newest first (``student``/``assignment`` None: everyone's)."""
        query = select(SubmissionRow).order_by(SubmissionRow.id.desc())
        if student is not None:
            query = query.where(SubmissionRow.student == student)
        if assignment is not None:
            query = query.where(SubmissionRow.assignment == assignment)
        if limit is not None:
            query = query.limit(limit)
        with self.read() as s:
            return list(s.scalars(query))

    def position(self, row: SubmissionRow) -> int | None:
        """How many queued submissions are ahead of ``row`` (None unless it was queued when read):
        one count, the row as the caller read it."""
        if row.state != "queued":
            return None
        with self.read() as s:
            return s.scalar(select(func.count()).select_from(SubmissionRow).where(
                SubmissionRow.state == "queued", SubmissionRow.id < row.id)) or 0

    def pace_s(self) -> float | None:
        """Seconds per graded submission over the last ``PACE_WINDOW_S`` (all workers together),
        None while fewer than ``PACE_LEAST`` finished in it. Read at most every ``PACE_EVERY_S`` by
        one Store: a thousand pages asking cost one count."""
        now = time.monotonic()
        if self._pace is not None and now - self._pace[0] < PACE_EVERY_S:
            return self._pace[1]
        with self.read() as s:
            finished = s.scalar(select(func.count()).select_from(SubmissionRow).where(
                SubmissionRow.finished_at >= utcnow() - timedelta(seconds=PACE_WINDOW_S))) or 0
        pace = PACE_WINDOW_S / finished if finished >= PACE_LEAST else None
        self._pace = (now, pace)
        return pace

    def counts(self) -> dict[str, int]:
        with self.read() as s:
            rows = s.execute(select(SubmissionRow.state, func.count())
                             .group_by(SubmissionRow.state)).all()
        return {state: 0 for state in STATES} | {state: n for state, n in rows}

    # -- the workers' registry: who grades what (the web refuses what nobody grades) ----------------
    def register_worker(self, worker: str, *, host: str, pid: int, gpu: bool,
                        skip: Collection[str], live_s: float) -> None:
        now = utcnow()
        with self.session(write=True) as s:
            s.execute(delete(WorkerRow).where(WorkerRow.live_until < now - timedelta(days=1)))
            s.merge(WorkerRow(id=worker, host=host[:256], pid=pid, gpu=gpu,
                              skip=json.dumps(sorted(skip)), started_at=now,
                              live_until=now + timedelta(seconds=live_s), probe=None))

    def worker_alive(self, worker: str, *, skip: Collection[str], live_s: float) -> None:
        """The worker's heartbeat: alive ``live_s`` more, grading all but ``skip``."""
        with self.session(write=True) as s:
            s.execute(update(WorkerRow).where(WorkerRow.id == worker).values(
                skip=json.dumps(sorted(skip)), live_until=utcnow() + timedelta(seconds=live_s)))

    def worker_probed(self, worker: str, outcome: str) -> None:
        """The worker's start-up probe: ``PROBE_OK`` or why it failed."""
        with self.session(write=True) as s:
            s.execute(update(WorkerRow).where(WorkerRow.id == worker).values(probe=outcome))

    def unregister_worker(self, worker: str) -> None:
        with self.session(write=True) as s:
            s.execute(delete(WorkerRow).where(WorkerRow.id == worker))

    def worker(self, worker: str) -> WorkerRow | None:
        with self.read() as s:
            return s.get(WorkerRow, worker)

    def graders(self) -> list[Grader]:
        """The workers alive now (their heartbeat is recent), oldest first."""
        with self.read() as s:
            rows = list(s.scalars(select(WorkerRow).where(WorkerRow.live_until >= utcnow())
                                  .order_by(WorkerRow.started_at)))
        return [Grader(r.id, r.host, r.gpu, tuple(json.loads(r.skip or "[]")), r.probe) for r in rows]

    # -- tokens (standalone mode) --------------------------------------------------------------
    def issue_token(self, user: str, *, instructor: bool = False) -> str:
        """A new random token for ``user``: returned once, stored as its SHA-256 only."""
        token = secrets.token_urlsafe(32)
        with self.session() as s:
            s.add(TokenRow(digest=digest(token), user=user, instructor=instructor,
                           created_at=utcnow(), revoked=False))
        return token

    def revoke_tokens(self, user: str) -> int:
        with self.session() as s:
            return _rowcount(s.execute(update(TokenRow).where(TokenRow.user == user,
                                                              ~TokenRow.revoked)
                                       .values(revoked=True)))

    def token_user_by_digest(self, token_digest: str) -> tuple[str, bool] | None:
        """(user, instructor) of a valid token given its SHA-256, or None."""
        with self.read() as s:
            row = s.scalar(select(TokenRow).where(TokenRow.digest == token_digest,
                                                  ~TokenRow.revoked))
            return None if row is None else (row.user, row.instructor)


_UNCLAIMED: dict[str, Any] = {"state": "queued", "claimed_by": None, "started_at": None,
                              "lease_token": None, "lease_until": None, "lease_started": False}


def _rowcount(result: object) -> int:
    """The rows an UPDATE changed: ``Session.execute`` is typed as returning a ``Result``; for an
    UPDATE it is a ``CursorResult``, which has ``rowcount``."""
    if not isinstance(result, CursorResult):
        raise TypeError(f"an UPDATE returned a {type(result).__name__}, not a CursorResult")
    return result.rowcount


def _sqlite_immediate(connection: DBAPIConnection, record: ConnectionPoolEntry) -> None:
    """The writer's connections: SQLAlchemy emits BEGIN IMMEDIATE itself (pysqlite would begin
    only at the first UPDATE, after the claim's reads)."""
    _sqlite_pragmas(connection, record)
    connection.isolation_level = None


def _sqlite_pragmas(connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    """WAL: the web process reads while the worker writes; a busy database waits, never errors."""
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
