"""The service's database (SQLAlchemy; SQLite by default, any URL for production): the durable queue of
submissions with their results, and the course tokens of standalone mode.

Never nbgrader's gradebook: the service's scores live here until the instructor grades. Every state
change is one compare-and-set ``UPDATE ... WHERE state = ...`` so that the web process and the worker
(two processes, one database) never both own a submission, and a result is recorded exactly once
(``graded_count`` counts it; the fault test asserts it is 1 for every submission).

States: ``queued`` → ``running`` → ``done`` | ``failed``. A worker that starts puts back what an
earlier worker left ``running`` (it was killed): ``queued`` again, or ``failed`` after
``MAX_ATTEMPTS`` workers died on it.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    Integer,
    LargeBinary,
    String,
    Text,
    create_engine,
    event,
    func,
    select,
    update,
)
from sqlalchemy.engine import CursorResult, Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

if TYPE_CHECKING:
    from sqlalchemy.engine.interfaces import DBAPIConnection
    from sqlalchemy.pool import ConnectionPoolEntry

MAX_ATTEMPTS = 2  # workers that may die on one submission before it fails with a reason
STATES = ("queued", "running", "done", "failed")


class _Base(DeclarativeBase):
    pass


class SubmissionRow(_Base):
    """One accepted submission: the notebook as uploaded, its place in the queue, its result."""

    __tablename__ = "service_submission"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    student: Mapped[str] = mapped_column(String(128), index=True)
    assignment: Mapped[str] = mapped_column(String(128), index=True)
    notebook: Mapped[str] = mapped_column(String(256))  # file name, e.g. 01_strides.ipynb
    content: Mapped[bytes] = mapped_column(LargeBinary)
    sha256: Mapped[str] = mapped_column(String(64))
    received_at: Mapped[datetime] = mapped_column(DateTime, index=True)  # naive UTC
    late: Mapped[bool] = mapped_column(Boolean, default=False)
    round: Mapped[int] = mapped_column(Integer, default=0)  # fair queueing: the student's n-th pending
    state: Mapped[str] = mapped_column(String(16), index=True, default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claimed_by: Mapped[str | None] = mapped_column(String(64), nullable=True)
    started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    feedback: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON (feedback.py)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    graded_count: Mapped[int] = mapped_column(Integer, default=0)
    landed: Mapped[bool] = mapped_column(Boolean, default=False)  # copied to nbgrader's submitted/


class TokenRow(_Base):
    """A standalone-mode course token (only its SHA-256 is stored)."""

    __tablename__ = "service_token"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    user: Mapped[str] = mapped_column(String(128), index=True)
    instructor: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


@dataclass(frozen=True)
class ClaimedSubmission:
    """A claimed submission, as the worker needs it (no ORM object crosses a session)."""

    id: int
    student: str
    assignment: str
    notebook: str
    content: bytes
    received_at: datetime


def utcnow() -> datetime:
    """Now, as stored: naive UTC."""
    return datetime.now(UTC).replace(tzinfo=None)


def as_utc(when: datetime | None) -> str | None:
    """A stored time for JSON: ISO 8601 with its zone."""
    return None if when is None else when.replace(tzinfo=UTC).isoformat(timespec="seconds")


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def default_url(state_dir: Path) -> str:
    return f"sqlite:///{Path(state_dir).resolve() / 'service.db'}"


class Store:
    """The queue and its results, over one SQLAlchemy engine."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine: Engine = create_engine(url, connect_args={"timeout": 30}
                                            if url.startswith("sqlite") else {})
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        _Base.metadata.create_all(self.engine)

    @contextmanager
    def session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session, session.begin():
            yield session

    # -- intake (web process) ------------------------------------------------------------------
    def add(self, *, student: str, assignment: str, notebook: str, content: bytes,
            received_at: datetime, late: bool) -> int:
        with self.session() as s:
            pending = s.scalar(select(func.count()).select_from(SubmissionRow).where(
                SubmissionRow.student == student, SubmissionRow.state.in_(("queued", "running"))))
            row = SubmissionRow(student=student, assignment=assignment, notebook=notebook,
                                content=content, sha256=hashlib.sha256(content).hexdigest(),
                                received_at=received_at, late=late, round=pending or 0,
                                state="queued", attempts=0, graded_count=0, landed=False)
            s.add(row)
            s.flush()
            return row.id

    def received_since(self, student: str, assignment: str, since: datetime) -> list[datetime]:
        """When ``student`` submitted ``assignment`` since ``since`` (oldest first)."""
        with self.session() as s:
            return list(s.scalars(select(SubmissionRow.received_at).where(
                SubmissionRow.student == student, SubmissionRow.assignment == assignment,
                SubmissionRow.received_at >= since).order_by(SubmissionRow.received_at)))

    # -- the worker ----------------------------------------------------------------------------
    def recover(self, worker: str) -> tuple[int, int]:
        """What earlier workers left running: back to the queue, or failed after MAX_ATTEMPTS.
        Returns (requeued, failed)."""
        with self.session() as s:
            failed = _rowcount(s.execute(update(SubmissionRow).where(
                SubmissionRow.state == "running", SubmissionRow.claimed_by != worker,
                SubmissionRow.attempts >= MAX_ATTEMPTS).values(
                state="failed", finished_at=utcnow(),
                reason=f"the grading worker stopped {MAX_ATTEMPTS} times while grading this "
                       "submission; ask the course staff")))
            requeued = _rowcount(s.execute(update(SubmissionRow).where(
                SubmissionRow.state == "running", SubmissionRow.claimed_by != worker).values(
                state="queued", claimed_by=None, started_at=None)))
        return requeued, failed

    def release(self, worker: str) -> int:
        """A worker that stops gives its running submissions back (not counted as an attempt)."""
        with self.session() as s:
            return _rowcount(s.execute(update(SubmissionRow).where(
                SubmissionRow.state == "running", SubmissionRow.claimed_by == worker).values(
                state="queued", claimed_by=None, started_at=None,
                attempts=SubmissionRow.attempts - 1)))

    def claim(self, worker: str, limit: int) -> list[ClaimedSubmission]:
        """Up to ``limit`` queued submissions, fair: at most one per student (and none of a student
        with one running), lowest round first (a student's first pending submission before anyone's
        second), then oldest."""
        with self.session() as s:
            busy = set(s.scalars(select(SubmissionRow.student).where(
                SubmissionRow.state == "running")))
            candidates = s.execute(select(SubmissionRow.id, SubmissionRow.student).where(
                SubmissionRow.state == "queued").order_by(
                SubmissionRow.round, SubmissionRow.received_at, SubmissionRow.id)
                .limit(max(limit * 8, 64))).all()
            chosen: list[int] = []
            for row_id, student in candidates:
                if student in busy:
                    continue
                busy.add(student)
                chosen.append(row_id)
                if len(chosen) == limit:
                    break
            jobs = []
            for row_id in chosen:
                took = _rowcount(s.execute(update(SubmissionRow).where(
                    SubmissionRow.id == row_id, SubmissionRow.state == "queued").values(
                    state="running", claimed_by=worker, started_at=utcnow(),
                    attempts=SubmissionRow.attempts + 1)))
                if took:
                    row = s.get(SubmissionRow, row_id)
                    if row is None:  # this transaction has just updated it
                        raise LookupError(f"submission {row_id} is gone while being claimed")
                    jobs.append(ClaimedSubmission(row.id, row.student, row.assignment, row.notebook,
                                    row.content, row.received_at))
            return jobs

    def finish(self, job_id: int, worker: str, *, score: float | None, max_score: float | None,
               feedback: dict[str, Any]) -> bool:
        """Record a result, once: False when this worker no longer owns the submission."""
        with self.session() as s:
            return bool(_rowcount(s.execute(update(SubmissionRow).where(
                SubmissionRow.id == job_id, SubmissionRow.state == "running",
                SubmissionRow.claimed_by == worker).values(
                state="done", score=score, max_score=max_score, finished_at=utcnow(),
                feedback=json.dumps(feedback), graded_count=SubmissionRow.graded_count + 1))))

    def fail(self, job_id: int, worker: str, reason: str) -> bool:
        with self.session() as s:
            return bool(_rowcount(s.execute(update(SubmissionRow).where(
                SubmissionRow.id == job_id, SubmissionRow.state == "running",
                SubmissionRow.claimed_by == worker).values(
                state="failed", reason=reason, finished_at=utcnow()))))

    def mark_landed(self, job_ids: Sequence[int]) -> None:
        with self.session() as s:
            s.execute(update(SubmissionRow).where(SubmissionRow.id.in_(list(job_ids)))
                      .values(landed=True))

    # -- reading -------------------------------------------------------------------------------
    def get(self, job_id: int) -> SubmissionRow | None:
        with self.session() as s:
            return s.get(SubmissionRow, job_id)

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
        with self.session() as s:
            return list(s.scalars(query))

    def position(self, job_id: int) -> int | None:
        """How many queued submissions are ahead of ``job_id`` (None unless it is queued)."""
        with self.session() as s:
            row = s.get(SubmissionRow, job_id)
            if row is None or row.state != "queued":
                return None
            return s.scalar(select(func.count()).select_from(SubmissionRow).where(
                SubmissionRow.state == "queued", SubmissionRow.id < job_id)) or 0

    def counts(self) -> dict[str, int]:
        with self.session() as s:
            rows = s.execute(select(SubmissionRow.state, func.count())
                             .group_by(SubmissionRow.state)).all()
        return {state: 0 for state in STATES} | {state: n for state, n in rows}

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
        with self.session() as s:
            row = s.scalar(select(TokenRow).where(TokenRow.digest == token_digest,
                                                  ~TokenRow.revoked))
            return None if row is None else (row.user, row.instructor)


def _rowcount(result: object) -> int:
    """The rows an UPDATE changed: ``Session.execute`` is typed as returning a ``Result``; for an
    UPDATE it is a ``CursorResult``, which has ``rowcount``."""
    if not isinstance(result, CursorResult):
        raise TypeError(f"an UPDATE returned a {type(result).__name__}, not a CursorResult")
    return result.rowcount


def _sqlite_pragmas(connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    """WAL: the web process reads while the worker writes; a busy database waits, never errors."""
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
