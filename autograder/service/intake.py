"""Whether an upload is accepted, and what acceptance writes: nothing at all unless every check passes.

Checks in order, each refusal a ``Refused`` (``policy.py``) with an HTTP status and a message that says what was
expected: the user is a student of the course; the file is named like a notebook of an assignment
(and of the assignment asked for, when one is); it is within the size cap; it is a notebook of that
assignment (``autograder.collect.notebook_problem``, the same rule as ``autograder collect``); the
assignment's policy allows it now (open, not past due unless late is allowed, under the rate limit).
Then one row is queued and, when the latest submission counts, it lands in ``submitted/``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import PurePosixPath
from typing import Any

from autograder.collect import STUDENT_ID, notebook_problem
from autograder.course.source import graded_notebook_name
from autograder.service.landing import land
from autograder.service.policy import Refused
from autograder.service.schema import PROBE_OK
from autograder.service.settings import ServiceSettings
from autograder.service.store import Store


@dataclass(frozen=True)
class Accepted:
    id: int
    student: str
    assignment: str
    late: bool


MAX_CELLS = 2000  # a released exercise has well under 100; more is refused before it is parsed


@dataclass(frozen=True)
class Upload:
    """An upload that passed the quick checks (who, which notebook, the size): what ``examine``
    reads, picklable, so that the web process can examine it in another process."""

    student: str
    name: str  # as uploaded, for messages
    stem: str  # the notebook it is graded as ("": its name says not; its cells decide, ``identify``)
    assignment: str  # ("" likewise)
    content: bytes
    grade_ids: dict[str, dict[str, frozenset[str]]]  # assignment -> notebook -> its grade ids
    asked: str | None = None  # the assignment the student chose, if any


def accept(settings: ServiceSettings, store: Store, *, student: str, filename: str, content: bytes,
           now: datetime, assignment: str | None = None) -> Accepted:
    """Queue ``content`` (uploaded as ``filename`` by ``student`` at ``now``, naive UTC) or raise
    ``Refused`` having written nothing: ``check_upload``, ``examine``, ``enqueue`` in one process."""
    upload = check_upload(settings, student=student, filename=filename, content=content,
                          assignment=assignment)
    found = identify(upload)
    if isinstance(found, str):
        raise Refused(400, found)
    return enqueue(settings, store, found, now=now)


def check_upload(settings: ServiceSettings, *, student: str, filename: str, content: bytes,
                 assignment: str | None = None) -> Upload:
    """The checks that read no notebook: the user, the file's name, its size."""
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
    if assignment is not None and assignment not in settings.assignments():
        raise Refused(400, f"no assignment {assignment!r} in this course (expected one of "
                           f"{', '.join(sorted(settings.assignments()))})")
    if len(content) > settings.max_upload_bytes:
        raise Refused(413, too_large(name, len(content), settings.max_upload_bytes))
    grade_ids = {a: {nb: frozenset(settings.grade_ids(a, nb)) for nb in notebooks}
                 for a, notebooks in settings.assignments().items()}
    if found is None:  # "01_strides (1).ipynb", "Copy of 01_strides.ipynb": the cells decide
        return Upload(student, name, "", "", content, grade_ids, assignment)
    if assignment is not None and found != assignment:
        raise Refused(400, f"{name!r} is a notebook of {found}, not of {assignment}: nothing was "
                           f"submitted to {assignment}")
    return Upload(student, name, stem, found, content, grade_ids, assignment)


def identify(upload: Upload) -> Upload | str:
    """``upload`` with the notebook it is graded as, or why it cannot be graded (``examine``). A
    file whose name names no notebook of the course (a browser's ``01_strides (1).ipynb``, Colab's
    ``Copy of 01_strides.ipynb``) is the notebook its cells identify without doubt: the one whose
    grade ids it carries most of, at least half of them, and more than of any other. Pure and
    picklable, like ``examine``."""
    if not upload.stem:
        import json

        expected = ", ".join(f"{nb}.ipynb" for nbs in upload.grade_ids.values() for nb in nbs)
        try:
            raw = json.loads(upload.content)
        except ValueError:
            raw = None
        cells = raw.get("cells") if isinstance(raw, dict) else None
        if not isinstance(cells, list) or len(cells) > MAX_CELLS:
            cells = []
        ids = {meta.get("grade_id") for meta in map(_nbgrader_meta, cells) if meta is not None}
        ranked = sorted(((len(ids & wanted), assignment, notebook, len(wanted))
                         for assignment, notebooks in upload.grade_ids.items()
                         for notebook, wanted in notebooks.items()), reverse=True)
        best = ranked[0] if ranked else (0, "", "", 0)
        runner_up = ranked[1][0] if len(ranked) > 1 else 0
        if best[0] == 0 or 2 * best[0] < best[3] or best[0] == runner_up:
            return (f"{upload.name!r}: its name is not that of a notebook of this course and its "
                    f"cells do not say which one it is: upload the exercise's notebook (one of "
                    f"{expected}), renamed if your browser or Colab renamed it")
        _, assignment, stem, _ = best
        if upload.asked is not None and assignment != upload.asked:
            return (f"{upload.name!r} is a notebook of {assignment} (by its cells), not of "
                    f"{upload.asked}: nothing was submitted to {upload.asked}")
        upload = replace(upload, stem=stem, assignment=assignment)
    problem = examine(upload)
    return upload if problem is None else problem


def no_grader(store: Store, assignment: str, *, queued: bool = False) -> str | None:
    """Why nothing running now would grade ``assignment`` (None when a live worker does), in the
    student's words: an upload nobody grades is refused (``queued``: one already in the queue is
    parked, and says so), never left "0 ahead of you" forever."""
    graders = store.graders()
    if any(grader.grades(assignment) for grader in graders):
        return None
    # one whole sentence each (a catalogue entry: autograder.i18n.messages.REASON_SOURCES)
    if any(grader.probe in (None, PROBE_OK) for grader in graders):
        if queued:
            return (f"no grader for {assignment} is running now (it needs a GPU; none running has "
                    "one): it stays in the queue and is graded when one starts (the course staff "
                    "see why on their page)")
        return (f"no grader for {assignment} is running now (it needs a GPU; none running has "
                "one): nothing was submitted; try again later, or tell the course staff")
    if queued:
        return ("no grader is running now: it stays in the queue and is graded when one starts "
                "(the course staff see why on their page)")
    return "no grader is running now: nothing was submitted; try again later, or tell the course staff"


def too_large(name: str, size: int, cap: int) -> str:
    return (f"{name} is {size / 2**20:.1f} MiB, over the {cap / 2**20:g} MiB limit; clear the "
            "outputs (Kernel → Restart and clear outputs) and upload again")


def examine(upload: Upload) -> str | None:
    """Why the notebook cannot be graded as ``upload.stem`` (None when it can): a cell budget
    before any parsing, then ``autograder collect``'s rule, the checks the grader's preparation
    makes (nbgrader's schema, grade ids each on one cell, cell ids unique), and the cells of
    another assignment. Pure and picklable: the web process runs it in another process."""
    import json

    name, assignment = upload.name, upload.assignment
    try:
        raw = json.loads(upload.content)
    except ValueError as error:
        return f"{name}: not a Jupyter notebook (not JSON: {str(error)[:120]})"
    cells = raw.get("cells") if isinstance(raw, dict) else None
    if isinstance(cells, list) and len(cells) > MAX_CELLS:
        return (f"{name}: {len(cells)} cells, over the {MAX_CELLS} a notebook of this course may "
                "have; upload the notebook as you worked on it")
    problem = notebook_problem(upload.content, upload.stem, assignment, {
        nb: set(ids) for nb, ids in upload.grade_ids[assignment].items()})
    if problem:
        return f"{name}: {problem}"
    problem = _preparation_problem(cells or [])
    if problem:
        return f"{name}: {problem}; upload the notebook as released (or as you worked on it)"
    other = _belongs_to(upload.grade_ids, cells or [], assignment)
    if other is not None:
        return (f"{name}: not a notebook of {assignment}: its cells are those of {other} "
                f"(upload {other}'s notebook under its own name)")
    return None


def enqueue(settings: ServiceSettings, store: Store, upload: Upload, *, now: datetime,
            require_grader: bool = False) -> Accepted:
    """The policy (open, due, rate limit), with ``require_grader`` a running worker that grades
    the assignment (``no_grader``), then one queued row and, when the latest submission counts,
    the notebook in ``submitted/``."""
    student, found, stem, content = upload.student, upload.assignment, upload.stem, upload.content
    if not found or not stem:
        raise ValueError(f"{upload.name}: enqueue needs an identified upload (intake.identify)")
    policy = settings.policy(found)
    earlier = store.received_since(student, found, now - timedelta(hours=policy.window_hours))
    policy.admit(now, earlier)
    why = no_grader(store, found) if require_grader else None
    if why is not None:
        raise Refused(503, why)
    late = policy.due is not None and now > policy.due
    submission_id = store.add(student=student, assignment=found, notebook=f"{stem}.ipynb", content=content,
                       received_at=now, late=late)
    if policy.counts == "latest":
        land(settings.course, student=student, assignment=found, notebook=f"{stem}.ipynb",
             content=content, received_at=now)
        store.mark_landed([submission_id])
    return Accepted(submission_id, student, found, late)


def _nbgrader_meta(cell: object) -> dict[str, Any] | None:
    meta = cell.get("metadata") if isinstance(cell, dict) else None
    meta = meta.get("nbgrader") if isinstance(meta, dict) else None
    return meta if isinstance(meta, dict) else None


def _preparation_problem(cells: list[Any]) -> str | None:
    """What the grader's preparation would refuse, naming the cells: nbgrader metadata of another
    schema version, one grade id on two cells, one cell id twice."""
    seen_grade: dict[str, int] = {}
    seen_id: dict[str, int] = {}
    for index, cell in enumerate(cells):
        meta = _nbgrader_meta(cell)
        if meta is not None and meta:
            version = meta.get("schema_version", 0)
            if version != 3:
                return (f"cell {index} ({meta.get('grade_id', 'no grade id')}) has nbgrader "
                        f"metadata of schema version {version} (expected 3)")
            grade_id = meta.get("grade_id")
            if isinstance(grade_id, str) and grade_id:
                if grade_id in seen_grade:
                    return f"cells {seen_grade[grade_id]} and {index} both carry grade id {grade_id!r}"
                seen_grade[grade_id] = index
        cell_id = cell.get("id") if isinstance(cell, dict) else None
        if isinstance(cell_id, str):
            if cell_id in seen_id:
                return f"cells {seen_id[cell_id]} and {index} have the same cell id {cell_id!r}"
            seen_id[cell_id] = index
    return None


def _belongs_to(grade_ids: dict[str, dict[str, frozenset[str]]], cells: list[Any],
                assignment: str) -> str | None:
    """Another assignment whose cells the notebook carries more of than ``assignment``'s (cells
    such as an introduction may share ids; the tests' ids decide), or None."""
    ids = {meta.get("grade_id") for meta in map(_nbgrader_meta, cells) if meta is not None}
    overlap = {name: len(ids & set().union(*notebooks.values()))
               for name, notebooks in grade_ids.items()}
    best = max(overlap, key=lambda name: (overlap[name], name == assignment))
    return None if best == assignment or overlap[best] <= overlap[assignment] else best
