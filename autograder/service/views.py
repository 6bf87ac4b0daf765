"""What the pages and the JSON API show of the queue: one submission as its student may see it, the
assignments open to a student, the staff's view of the queue. Plain functions of the store and the
settings (no request in them: the tests call them directly)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from autograder.reports.figures import score_distribution
from autograder.service.intake import no_grader
from autograder.service.policy import human_time, iso
from autograder.service.schema import SubmissionRow
from autograder.service.settings import ServiceSettings
from autograder.service.store import Store

POLL_SHARE = 0.8  # poll_after_s: of the time until a submission's turn, how much a page waits


def poll_after_s(position: int | None, pace_s: float | None = None) -> float:
    """When a page should ask again about a submission not yet graded, 1 to 30 s. With the queue's
    pace (seconds per graded submission, ``Store.pace_s``): 80% of the time until its turn, so each
    question finds the place about five times shorter and the last one comes about a second after the
    grade; before there is a pace, 1 s plus a tenth of a second per submission ahead."""
    places = position or 0
    wait = POLL_SHARE * places * pace_s if pace_s is not None else 1.0 + 0.1 * places
    return round(min(30.0, max(1.0, wait)), 1)


# a reason is one whole sentence (a catalogue entry: autograder.i18n.messages.REASON_SOURCES)
GRADER_ERROR = "grader error: the course staff have been told (not your notebook's fault)"
GRADER_ERROR_AGAIN = ("grader error: the course staff have been told (not your notebook's "
                      "fault); it is being graded again")
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~])/(?:[^\s'\"/:,;()]+/)+[^\s'\"/:,;()]*")


def redact_paths(text: str) -> str:
    """``text`` without the server's absolute paths (each becomes its last part: a file name)."""
    return _ABSOLUTE_PATH.sub(lambda m: m.group(0).rstrip("/").rsplit("/", 1)[-1] or "…", text)


def student_reason(row: SubmissionRow) -> str | None:
    """The reason a student is shown: their notebook's own (no server path in it), or for a fault
    of the grader only that it was one (the detail is the staff's, on their page and in the log)."""
    if row.state == "queued" and row.reason:
        return GRADER_ERROR_AGAIN
    if row.state == "error":
        return GRADER_ERROR
    return redact_paths(row.reason) if row.reason else None


def shown_reason(text: str | None, language: str | None) -> str | None:
    """A stored reason (English) in the reader's language (``autograder.service.language.reason``)."""
    from autograder.service.language import reason

    return reason(text, language) if text and language else text


def submission_view(row: SubmissionRow, settings: ServiceSettings, store: Store,
                    now: datetime, *, staff: bool = False,
                    shown: Callable[[datetime | None], str | None] = human_time,
                    language: str | None = None) -> dict[str, Any]:
    """What a student may see of one submission now (the policy's feedback level decides, by
    when it is read and when it was received: ``Policy.feedback_level``);
    ``staff``: every test whatever the level (the student's level as ``student_feedback_level``),
    and the grader's own words about a fault; ``language``: the reader's (``?lang=``, the cookie,
    ``Accept-Language``), in which a student reads the reasons and notices (staff read them as
    stored, in English)."""
    said = (lambda text: text) if staff else (lambda text: shown_reason(text, language))
    view: dict[str, Any] = {
        "id": row.id, "assignment": row.assignment, "notebook": row.notebook,
        "student": row.student, "received_at": iso(row.received_at),
        "received": shown(row.received_at), "late": row.late,
        "state": row.state, "finished_at": iso(row.finished_at), "counted": row.landed}
    if row.state == "queued":
        view["position"] = store.position(row)
        waiting = no_grader(store, row.assignment, queued=True)
        if waiting is not None:  # parked, visibly: the page and `submit` say why, not "0 ahead"
            view["waiting"] = said(waiting)
    if row.state in ("queued", "running"):
        view["poll_after_s"] = poll_after_s(view.get("position"),
                                             store.pace_s() if view.get("position") else None)
    if row.state in ("failed", "error") or (row.state == "queued" and row.reason):
        # "error": the grader's; queued with a reason: being retried
        view["reason"] = row.reason if staff else said(student_reason(row))
    if row.state == "done":
        level = settings.policy(row.assignment).feedback_level(now, row.received_at)
        if staff:  # the staff see every test; what the student sees is said beside it
            view["student_feedback_level"], level = level, "tests"
        view["feedback_level"] = level
        if level in ("tests", "score"):
            view["score"], view["max_score"] = row.score, row.max_score
        else:  # will a later reading show its score (after the due date), or never?
            view["score_later"] = settings.policy(row.assignment).feedback_level(
                datetime.max, row.received_at) != "none"
        if level == "tests" and row.feedback:
            feedback = json.loads(row.feedback)
            view["tests"], view["notices"] = feedback["tests"], [said(n) for n in feedback["notices"]]
    return view


def assignment_views(settings: ServiceSettings, store: Store, student: str | None,
                     now: datetime, shown: Callable[[datetime | None], str | None] = human_time
                     ) -> list[dict[str, Any]]:
    views = []
    for name, notebooks in sorted(settings.assignments().items()):
        policy = settings.policy(name)
        earlier = store.received_since(student, name, datetime.min) if student else []
        views.append({**policy.as_json(), "notebooks": [f"{nb}.ipynb" for nb in notebooks],
                      "open": (policy.opens is None or now >= policy.opens)
                      and (policy.due is None or now <= policy.due or policy.late),
                      "not_yet_open": policy.opens is not None and now < policy.opens,
                      "opens_shown": shown(policy.opens), "due_shown": shown(policy.due),
                      "submissions_left": policy.left(now, earlier) if student else None,
                      "submitted": len(earlier)})
    return views


def queue_view(settings: ServiceSettings, store: Store, *, figure: bool = False) -> dict[str, Any]:
    """Queue length, submissions being graded, per assignment: submissions, students, each
    student's latest score (and, with ``figure``, their distribution as the report draws it, a
    base64 PNG)."""
    counts = store.counts()
    per_assignment: dict[str, dict[str, Any]] = {}
    top: dict[str, float] = {}
    for row in store.history():  # newest first: the first score seen is a student's latest
        entry = per_assignment.setdefault(row.assignment, {"submissions": 0, "students": set(),
                                                           "latest": {}})
        entry["submissions"] += 1
        entry["students"].add(row.student)
        if row.state == "done" and row.score is not None:
            entry["latest"].setdefault(row.student, row.score)
            top[row.assignment] = max(top.get(row.assignment, 0.0), row.max_score or 0.0)
    for entry in per_assignment.values():
        entry["scores"] = list(entry.pop("latest").values())
    graders = store.graders()
    waiting = {}
    for name in sorted({row.assignment for row in store.history() if row.state == "queued"}):
        if not any(grader.grades(name) for grader in graders):
            waiting[name] = ("no running worker grades it: start one with a GPU (`autograder "
                             "worker --gpu`, or `serve --gpu`), or one that runs GPU checks on "
                             "CPU (`--allow-cpu`)" if graders else "no worker is running: start "
                             "`autograder serve` (with its worker) or `autograder worker`")
    view: dict[str, Any] = {
        "waiting": waiting,
        "workers": [{"id": g.id, "host": g.host, "gpu": g.gpu, "leaves": list(g.skip),
                     "probe": g.probe or "running"} for g in graders],
        "queued": counts["queued"], "running": counts["running"], "done": counts["done"],
        "failed": counts["failed"], "error": counts["error"],
        "grader_errors": [{"id": r.id, "student": r.student, "assignment": r.assignment,
                           "reason": r.reason} for r in store.history() if r.state == "error"][:200],
        "assignments": {name: {"submissions": e["submissions"], "students": len(e["students"]),
                               "scores": sorted(e["scores"])}
                        for name, e in sorted(per_assignment.items())}}
    if figure:
        view["figure"] = score_distribution(
            {name: e["scores"] for name, e in sorted(per_assignment.items())}, top)
    return view
