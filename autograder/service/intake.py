"""Whether an upload is accepted, and what acceptance writes: nothing at all unless every check passes.

Checks in order, each refusal a ``Refused`` with an HTTP status and a message that says what was
expected: the user is a student of the course; the file is named like a notebook of an assignment
(and of the assignment asked for, when one is); it is within the size cap; it is a notebook of that
assignment (``autograder.collect.notebook_problem``, the same rule as ``autograder collect``); the
assignment's policy allows it now (open, not past due unless late is allowed, under the rate limit).
Then one row is queued and, when the latest submission counts, it lands in ``submitted/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import PurePosixPath

from autograder.collect import STUDENT_ID, notebook_problem
from autograder.service.landing import land
from autograder.service.settings import ServiceSettings
from autograder.service.store import Store
from autograder.source import graded_notebook_name


class Refused(Exception):
    """A submission the service does not take: ``status`` (HTTP) and a message for the student."""

    def __init__(self, status: int, message: str, *, retry_after: datetime | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True)
class Accepted:
    id: int
    student: str
    assignment: str
    late: bool


def accept(settings: ServiceSettings, store: Store, *, student: str, filename: str, content: bytes,
           now: datetime, assignment: str | None = None) -> Accepted:
    """Queue ``content`` (uploaded as ``filename`` by ``student`` at ``now``, naive UTC) or raise
    ``Refused`` having written nothing."""
    if not STUDENT_ID.match(student) or not settings.is_student(student):
        raise Refused(403, f"{student!r} is not a student of this course; ask the course staff to "
                           "add you to the roster")
    name = PurePosixPath(filename.replace("\\", "/")).name
    # a language edition (01_strides.zh-TW.ipynb) is the notebook it is graded as (01_strides)
    stem = graded_notebook_name(name) if name.endswith(".ipynb") else None
    found = settings.assignment_of(stem) if stem else None
    expected = ", ".join(f"{nb}.ipynb" for nbs in settings.assignments().values() for nb in nbs)
    if stem is None:
        raise Refused(400, f"{name!r} is not a notebook: upload the assignment's .ipynb file "
                           f"(one of {expected})")
    if found is None:
        raise Refused(400, f"{name!r} is not a notebook of this course (expected one of {expected})")
    if assignment is not None and found != assignment:
        raise Refused(400, f"{name!r} is a notebook of {found}, not of {assignment}: nothing was "
                           f"submitted to {assignment}")
    if len(content) > settings.max_upload_bytes:
        raise Refused(413, f"{name} is {len(content) / 2**20:.1f} MiB, over the "
                           f"{settings.max_upload_bytes / 2**20:g} MiB limit; clear the outputs "
                           "(Kernel → Restart and clear outputs) and upload again")
    problem = notebook_problem(content, stem, found, {nb: settings.grade_ids(found, nb)
                                                      for nb in settings.assignments()[found]})
    if problem:
        raise Refused(400, f"{name}: {problem}")
    other = _belongs_to(settings, content, found)
    if other is not None:
        raise Refused(400, f"{name}: not a notebook of {found}: its cells are those of {other} "
                           f"(upload {other}'s notebook under its own name)")
    policy = settings.policy(found)
    earlier = store.received_since(student, found, now - timedelta(hours=policy.window_hours))
    refusal = policy.refusal(now, earlier)
    if refusal is not None:
        raise Refused(refusal.status, refusal.message, retry_after=refusal.retry_after)
    late = policy.due is not None and now > policy.due
    job_id = store.add(student=student, assignment=found, notebook=f"{stem}.ipynb", content=content,
                       received_at=now, late=late)
    if policy.counts == "latest":
        land(settings.course, student=student, assignment=found, notebook=f"{stem}.ipynb",
             content=content, received_at=now)
        store.mark_landed([job_id])
    return Accepted(job_id, student, found, late)


def _belongs_to(settings: ServiceSettings, content: bytes, assignment: str) -> str | None:
    """Another assignment whose cells the notebook carries more of than ``assignment``'s (cells
    such as an introduction may share ids; the tests' ids decide), or None."""
    import json

    try:
        cells = json.loads(content).get("cells", [])
    except (ValueError, AttributeError):
        return None
    ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in cells
           if isinstance(c, dict) and isinstance(c.get("metadata"), dict)
           and isinstance(c["metadata"].get("nbgrader"), dict)}
    overlap = {name: len(ids & set().union(*(settings.grade_ids(name, nb) for nb in notebooks)))
               for name, notebooks in settings.assignments().items()}
    best = max(overlap, key=lambda name: (overlap[name], name == assignment))
    return None if best == assignment or overlap[best] <= overlap[assignment] else best
