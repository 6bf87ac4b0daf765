"""``autograder lms canvas``: the gradebook's scores into a Canvas course, previewed, then applied.

One pass: read the gradebook, read Canvas (the course, its students, the assignments, their current
scores), check everything that could refuse (token, the matching field's visibility, the assignment
mapping, point scales) *before* any write, then print one row per (student, assignment) with its
action: ``set`` (Canvas differs), ``unchanged`` (equal), ``not in Canvas`` (no Canvas student has the
matching value; never guessed through another field), ``excused in Canvas`` (staff excused the
submission there: never overwritten). With ``apply`` the ``set`` rows are written per
assignment in one bulk update (Canvas's Progress polled to its end), Canvas is read again, and every
written row is checked. A second apply on an unchanged gradebook has nothing to set and writes
nothing. What was written is appended to ``reports/lms-canvas.log`` (never the token).
"""

from __future__ import annotations

import datetime as dt
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import requests
from canvasapi import Canvas
from canvasapi.exceptions import (
    CanvasException,
    Forbidden,
    InvalidAccessToken,
    ResourceDoesNotExist,
    Unauthorized,
)

from autograder.course.nbgrader import Course
from autograder.errors import CourseError
from autograder.lms.canvas_http import PatientAdapter, make_patient, unreachable
from autograder.lms.gradebook_scores import GradebookScores, GradebookStudent, read_scores
from autograder.lms.options import CanvasOptions
from autograder.lms.posting import Choice, choose

SET, UNCHANGED, NOT_IN_CANVAS, EXCUSED = "set", "unchanged", "not in Canvas", "excused in Canvas"
ACTIONS = (SET, UNCHANGED, NOT_IN_CANVAS, EXCUSED)
TOLERANCE = 0.005  # scores are posted with two decimals
AUDIT_LOG = Path("reports") / "lms-canvas.log"
FIELD_NEEDS = {
    "sis_user_id": "the permission to view SIS information (an admin role, or a teacher role "
                   "with 'Users - view SIS ID')",
    "login_id": "the permission to view login ids ('Users - view login IDs')",
    "email": "the permission to see users' primary email addresses",
}


@dataclass(frozen=True)
class Row:
    """One (student, assignment) of the plan."""

    student: str
    assignment: str
    canvas_assignment: int | None
    canvas_user: int | None
    canvas_score: float | None
    gradebook_score: float
    posted: float | None  # what Canvas should hold (scaled when --scale); None when not in Canvas
    action: str


@dataclass
class SyncResult:
    """The plan, and after ``apply`` what happened."""

    rows: list[Row]
    applied: bool
    warnings: list[str] = field(default_factory=list)
    retries: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # Canvas's own bulk-update failures
    out_of_sync: list[Row] = field(default_factory=list)  # written but not read back equal
    writes: int = 0  # bulk updates sent
    left_out: list[str] = field(default_factory=list)  # assignments not posted, each with why

    @property
    def not_in_canvas(self) -> list[str]:
        return sorted({row.student for row in self.rows if row.action == NOT_IN_CANVAS})

    def exit_code(self) -> int:
        """0 for a preview; after apply, 0 only when every matched row is in sync and every
        gradebook student was found."""
        if not self.applied:
            return 0
        return 1 if self.failed or self.out_of_sync or self.not_in_canvas else 0


@dataclass(frozen=True)
class _Target:
    """An nbgrader assignment and the Canvas assignment it goes to."""

    name: str
    canvas: Any  # canvasapi.assignment.Assignment
    factor: float  # points_possible / nbgrader maximum, or 1


def connect(options: CanvasOptions, token: str, on_retry: Callable[[str], None]) -> Canvas:
    """A canvasapi client whose requests time out and wait out throttling."""
    url = (options.url or "").strip().rstrip("/")
    if not url:
        raise CourseError("no Canvas URL: pass --url or set c.Autograder.canvas['url']")
    if not url.startswith(("https://", "http://")) or "/api/v1" in url:
        raise CourseError(f"Canvas URL {url!r}: expected https://host (no /api/v1)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ours below says it once, in our words
        canvas = Canvas(url, token)
    requester = getattr(canvas, "_Canvas__requester", None)
    session = getattr(requester, "_session", None)
    if session is None:
        raise CourseError("this canvasapi has no requests session where autograder expects one; "
                          "install the version in requirements.lock")
    make_patient(session, PatientAdapter(retries=options.retries, timeout_s=options.timeout_s,
                                         on_retry=on_retry))
    return canvas


def _canvas_call(what: str, call: Callable[[], Any]) -> Any:
    """``call()``, with Canvas's refusals turned into errors that say what to do."""
    try:
        return call()
    except (InvalidAccessToken, Unauthorized):
        raise CourseError(f"Canvas refused the token while {what} (401): check "
                          f"CANVAS_API_TOKEN; nothing was written") from None
    except Forbidden as error:
        raise CourseError(f"Canvas forbids this token {what} (403: {str(error)[:200]}); "
                          f"nothing was written") from None
    except ResourceDoesNotExist:
        raise CourseError(f"Canvas has no such resource while {what} (404)") from None
    except CanvasException as error:
        raise CourseError(f"Canvas failed while {what}: {str(error)[:200]}") from None


def _key(match: str, value: Any) -> str | None:
    """A matching value as compared: login ids and emails are case-insensitive in Canvas."""
    if value is None or value == "":
        return None
    text = str(value).strip()
    return text.casefold() if match in ("login_id", "email") else text


def _index_students(users: list[Any], match: str) -> tuple[dict[str, Any], list[str]]:
    """Canvas students by their matching value; a value two students share matches neither."""
    if users and not any(hasattr(user, match) for user in users):
        raise CourseError(
            f"Canvas shows no {match} for any student of this course to this token: matching by "
            f"{match} needs {FIELD_NEEDS[match]}; use another --match or a token that has it. "
            f"Nothing was written")
    found: dict[str, Any] = {}
    shared: set[str] = set()
    for user in users:
        key = _key(match, getattr(user, match, None))
        if key is None:
            continue
        if key in found:
            shared.add(key)
        found[key] = user
    for key in shared:
        del found[key]
    notes = [f"{len(shared)} {match} value(s) are shared by several Canvas students; those "
             f"students are left alone"] if shared else []
    return found, notes


def _gradebook_key(student: GradebookStudent, match: str) -> str | None:
    return _key(match, student.email if match == "email" else student.id)


def _resolve(name: str, canvas_id: int | None, assignments: list[Any], course_id: int) -> Any:
    """The Canvas assignment for nbgrader's ``name``: by id when mapped, else the one with that
    name; none or several is a refusal naming the candidates."""
    if canvas_id is not None:
        for assignment in assignments:
            if assignment.id == canvas_id:
                return assignment
        raise CourseError(f"{name}: Canvas course {course_id} has no assignment {canvas_id}")
    same = [a for a in assignments if (a.name or "").strip() == name]
    if len(same) == 1:
        return same[0]
    listing = ", ".join(f"{a.name!r} ({a.id})" for a in assignments) or "none"
    if not same:
        raise CourseError(f"{name}: no Canvas assignment of course {course_id} is named {name!r}; "
                          f"map it with --assignment {name}=ID or c.Autograder.canvas"
                          f"['assignments']. Canvas's assignments: {listing}")
    ids = ", ".join(str(a.id) for a in same)
    raise CourseError(f"{name}: several Canvas assignments are named {name!r} (ids {ids}); "
                      f"choose one with --assignment {name}=ID")


def _factor(name: str, canvas: Any, maximum: float, scale: bool) -> float:
    points = canvas.points_possible
    if points is not None and abs(float(points) - maximum) < 1e-9:
        return 1.0
    if not scale:
        raise CourseError(
            f"{name}: Canvas assignment {canvas.id} is out of {points} points, nbgrader's maximum "
            f"is {maximum:g}; pass --scale to post score / {maximum:g} × {points}, or make them "
            f"equal. Nothing was written")
    if not points or maximum <= 0:
        raise CourseError(f"{name}: cannot scale to Canvas's points_possible {points!r} "
                          f"(nbgrader maximum {maximum:g})")
    return float(points) / maximum


EXCUSED_MARK = "excused"  # what _current_scores gives for a submission Canvas marks excused


def _current_scores(target: _Target, per_page: int) -> dict[int, float | str | None]:
    """Canvas's entered score (before its own late deductions; ``score`` where a Canvas has no
    ``entered_score``) per user id, or ``EXCUSED_MARK``."""
    submissions = _canvas_call(f"reading the submissions of {target.name}",
                               lambda: list(target.canvas.get_submissions(per_page=per_page)))
    found: dict[int, float | str | None] = {}
    for submission in submissions:
        value = getattr(submission, "entered_score", getattr(submission, "score", None))
        found[submission.user_id] = EXCUSED_MARK if getattr(submission, "excused", False) \
            else None if value is None else float(value)
    return found


def _plan_rows(scores: GradebookScores, target: _Target, current: dict[int, float | str | None],
               students: dict[str, Any], match: str) -> list[Row]:
    rows = []
    for student in scores.students:
        score = scores.score[(student.id, target.name)]
        key = _gradebook_key(student, match)
        user = students.get(key) if key is not None else None
        if user is None:
            rows.append(Row(student.id, target.name, target.canvas.id, None, None, score, None,
                            NOT_IN_CANVAS))
            continue
        posted = round(score * target.factor, 2)
        now = current.get(user.id)
        if isinstance(now, str):  # excused: a decision staff made in Canvas; never overwritten
            rows.append(Row(student.id, target.name, target.canvas.id, user.id, None, score,
                            None, EXCUSED))
            continue
        action = UNCHANGED if now is not None and abs(now - posted) < TOLERANCE else SET
        rows.append(Row(student.id, target.name, target.canvas.id, user.id, now, score, posted,
                        action))
    return rows


def _wait_for(progress: Any, timeout_s: float, what: str) -> str | None:
    """Poll a Canvas Progress to its end; the failure or timeout as a sentence, None when done."""
    deadline, pause = time.monotonic() + timeout_s, 0.2
    while progress.workflow_state not in ("completed", "failed"):
        if time.monotonic() > deadline:
            return f"{what}: Canvas's bulk update {progress.id} did not finish in {timeout_s:g} s"
        time.sleep(pause)
        pause = min(2.0, pause * 2)
        progress = _canvas_call(f"polling the progress of {what}", progress.query)
    if progress.workflow_state == "failed":
        return f"{what}: Canvas's bulk update {progress.id} failed: {getattr(progress, 'message', '')}"
    return None


def _audit(log: Path, lines: Iterable[str]) -> None:
    """Append ``lines`` with a UTC time stamp; control characters (a student id may hold a
    newline) are written escaped, so one line is one write."""
    log.parent.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    with log.open("a", encoding="utf-8") as handle:
        for line in lines:
            safe = "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)
            handle.write(f"{stamp} {safe}\n")


def _apply(result: SyncResult, targets: list[_Target], options: CanvasOptions, log: Path) -> None:
    for target in targets:
        changes = [row for row in result.rows
                   if row.assignment == target.name and row.action == SET]
        if not changes:
            continue
        grade_data = {row.canvas_user: {"posted_grade": row.posted} for row in changes}
        _audit(log, [f"set {target.name} (Canvas assignment {target.canvas.id}) student "
                     f"{row.student} (Canvas user {row.canvas_user}): {row.canvas_score} -> "
                     f"{row.posted}" for row in changes])
        progress = _canvas_call(f"writing the grades of {target.name}",
                                partial(target.canvas.submissions_bulk_update,
                                        grade_data=grade_data))
        result.writes += 1
        failure = _wait_for(progress, options.progress_timeout_s, target.name)
        _audit(log, [f"bulk update {progress.id} for {target.name}: {failure or 'completed'}"])
        if failure:
            result.failed.append(failure)
    for target in targets:
        current = _current_scores(target, options.per_page)
        for row in result.rows:
            if row.assignment != target.name or row.posted is None:
                continue
            now = current.get(row.canvas_user) if row.canvas_user is not None else None
            if not isinstance(now, float) or abs(now - row.posted) >= TOLERANCE:
                result.out_of_sync.append(row)


def sync(course: Course, options: CanvasOptions, *, token: str, apply: bool = False,
         scale: bool = False, all_assignments: bool = False,
         include_unrun: bool = False) -> SyncResult:
    """The plan of what Canvas should hold; with ``apply``, written and verified. Only the
    assignments ``autograder.lms.posting.choose`` keeps (``all_assignments``, ``include_unrun``)."""
    if options.course_id is None:
        raise CourseError("no Canvas course: pass --course ID or set "
                          "c.Autograder.canvas['course_id']")
    choice = choose(read_scores(course, list(options.assignments) or None),
                    all_assignments=all_assignments, include_unrun=include_unrun)
    retries: list[str] = []
    canvas = connect(options, token, retries.append)
    try:
        return _sync(course, options, canvas, choice, retries, apply=apply, scale=scale)
    except (requests.ConnectionError, requests.Timeout) as error:
        where = (options.url or "").strip().rstrip("/")
        after = f" (what was written is in {AUDIT_LOG})" if apply else "; nothing was written"
        raise CourseError(f"cannot reach Canvas at {where}: {unreachable(error)}{after}") from None


def _sync(course: Course, options: CanvasOptions, canvas: Canvas, choice: Choice,
          retries: list[str], *, apply: bool, scale: bool) -> SyncResult:
    assert options.course_id is not None  # sync checked it
    scores = choice.scores
    course_id = options.course_id
    canvas_course = _canvas_call(f"reading course {course_id}",
                                 lambda: canvas.get_course(course_id))
    include = ["email"] if options.match == "email" else []
    users = _canvas_call("listing the course's students", lambda: list(canvas_course.get_users(
        enrollment_type=["student"], include=include, per_page=options.per_page)))
    if not users:
        raise CourseError(f"Canvas course {course_id} has no students (or the token cannot list "
                          f"them); nothing was written")
    students, notes = _index_students(users, options.match)
    listed = _canvas_call("listing the course's assignments", lambda: list(
        canvas_course.get_assignments(per_page=options.per_page)))
    targets = []
    for name in scores.assignments:
        canvas_assignment = _resolve(name, options.assignments.get(name), listed, course_id)
        targets.append(_Target(name, canvas_assignment,
                               _factor(name, canvas_assignment, scores.maximum[name], scale)))
    result = SyncResult(rows=[], applied=apply, warnings=notes + choice.notes, retries=retries,
                        left_out=choice.left_out)
    if options.url and options.url.startswith("http://"):
        result.warnings.append("the Canvas URL is http://: the token travels unencrypted (use "
                               "it only for a local test server)")
    for target in targets:
        if getattr(target.canvas, "post_manually", None) is False:
            result.warnings.append(
                f"{target.name}: Canvas assignment {target.canvas.id} posts grades automatically, "
                f"so students see them as soon as they are written; set its grade posting policy "
                f"to Manually to keep them hidden until you post")
        result.rows += _plan_rows(scores, target, _current_scores(target, options.per_page),
                                  students, options.match)
    if apply:
        _apply(result, targets, options, course.root / AUDIT_LOG)
    return result
