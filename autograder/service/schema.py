"""The service's tables (SQLAlchemy) and the records read out of them: the submissions (the queue
and its results), the course tokens, the workers' registry; a database made by an earlier version
gains the columns it lacks (``add_missing_columns``). The queue's operations: ``store.py``."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import (
    Boolean,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    inspect,
    text,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class TableBase(DeclarativeBase):
    pass


class SubmissionRow(TableBase):
    """One accepted submission: the notebook as uploaded, its place in the queue, its result."""

    __tablename__ = "service_submission"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    student: Mapped[str] = mapped_column(String(128), index=True)
    assignment: Mapped[str] = mapped_column(String(128), index=True)
    notebook: Mapped[str] = mapped_column(String(256))  # file name, e.g. 01_strides.ipynb
    # loaded only where it is read (a claim): a status poll or a history does not carry the notebook
    content: Mapped[bytes] = mapped_column(LargeBinary, deferred=True)
    sha256: Mapped[str] = mapped_column(String(64))
    received_at: Mapped[datetime] = mapped_column(DateTime, index=True)  # naive UTC
    late: Mapped[bool] = mapped_column(Boolean, default=False)
    round: Mapped[int] = mapped_column(Integer, default=0)  # fair queueing: the student's n-th pending
    state: Mapped[str] = mapped_column(String(16), index=True, default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claimed_by: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_token: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime, nullable=True, index=True)
    lease_started: Mapped[bool] = mapped_column(Boolean, default=False)  # counted in attempts
    started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    feedback: Mapped[str | None] = mapped_column(Text, nullable=True)  # JSON (feedback.py)
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    graded_count: Mapped[int] = mapped_column(Integer, default=0)
    landed: Mapped[bool] = mapped_column(Boolean, default=False)  # copied to nbgrader's submitted/

    __table_args__ = (Index("one_running_per_student", "student", unique=True,
                            sqlite_where=text("state = 'running'"),
                            postgresql_where=text("state = 'running'")),)


class TokenRow(TableBase):
    """A standalone-mode course token (only its SHA-256 is stored)."""

    __tablename__ = "service_token"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    user: Mapped[str] = mapped_column(String(128), index=True)
    instructor: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class WorkerRow(TableBase):
    """A running worker, as it registered and last said it was alive (``Store.register_worker``):
    what it grades (``skip``: the assignments it leaves to others, JSON) and its start-up probe
    (None while it runs, ``"ok"``, or why it failed)."""

    __tablename__ = "service_worker"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    host: Mapped[str] = mapped_column(String(256))
    pid: Mapped[int] = mapped_column(Integer)
    gpu: Mapped[bool] = mapped_column(Boolean, default=False)  # grades the GPU exercises
    skip: Mapped[str] = mapped_column(Text, default="[]")
    started_at: Mapped[datetime] = mapped_column(DateTime)
    live_until: Mapped[datetime] = mapped_column(DateTime, index=True)  # its heartbeat renews it
    probe: Mapped[str | None] = mapped_column(Text, nullable=True)


@dataclass(frozen=True)
class Grader:
    """A live worker, as the web process reads it."""

    id: str
    host: str
    gpu: bool
    skip: tuple[str, ...]
    probe: str | None

    def grades(self, assignment: str) -> bool:
        return assignment not in self.skip and self.probe in (None, PROBE_OK)


PROBE_OK = "ok"


@dataclass(frozen=True)
class ClaimedSubmission:
    """A claimed submission, as the worker needs it (no ORM object crosses a session)."""

    id: int
    student: str
    assignment: str
    notebook: str
    content: bytes
    received_at: datetime
    lease: str  # the claim's token: every result names it


def utcnow() -> datetime:
    """Now, as stored: naive UTC."""
    return datetime.now(UTC).replace(tzinfo=None)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def add_missing_columns(engine: Engine) -> None:
    """A database made by an earlier version: the columns it lacks are added (with their
    defaults), and the index that keeps one running submission per student."""
    table = TableBase.metadata.tables[SubmissionRow.__tablename__]
    present = {column["name"] for column in inspect(engine).get_columns(table.name)}
    with engine.begin() as connection:
        for column in table.columns:
            if column.name not in present:
                kind = column.type.compile(engine.dialect)
                default = {"BOOLEAN": " DEFAULT FALSE"}.get(kind, "")
                connection.exec_driver_sql(
                    f"ALTER TABLE {table.name} ADD COLUMN {column.name} {kind}{default}")
        for index in table.indexes:
            index.create(connection, checkfirst=True)
