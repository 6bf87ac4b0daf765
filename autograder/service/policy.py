"""What the service accepts and shows, per assignment: ``c.AutograderService`` in nbgrader_config.py.

    c.AutograderService.policy = {
        "default":    {"max_submissions": 5, "window_hours": 24},       # every assignment
        "01_strides": {"opens": "2026-10-01 09:00 UTC", "due": "2026-10-15 23:59 UTC",
                       "counts": "best", "late": True},
    }

Keys (all optional; the defaults are the fields of ``Policy`` below): ``opens``/``due`` (ISO 8601, a time without a zone is UTC;
``due`` defaults to the assignment's nbgrader due date), ``max_submissions`` per ``window_hours``
(a sliding window), ``late`` (accept after the due date, marked late), ``counts`` ("latest": every
accepted notebook replaces the one in ``submitted/``; "best": only one whose grade of record, late penalty applied, is higher does),
``feedback_before_due`` / ``feedback_after_due`` ("tests": every test with pass/fail and its message,
"score": the total only, "none": only that it was graded; decided when the page is read, and for a
late submission the lesser of the two). Service-wide settings live next to it:
``roster`` ("gradebook": the students in the nbgrader gradebook, or a list of ids),
``instructor_group`` (the hub group whose members see the instructor view), ``max_upload_mb``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from autograder.course.settings import setting
from autograder.errors import CourseError

FEEDBACK_LEVELS = ("tests", "score", "none")
COUNTS = ("latest", "best")


class Refused(Exception):
    """A submission the service does not take (the policy's refusals here, the upload's checks in
    ``intake.py``): ``status`` (HTTP), a message for the student, and when to try again."""

    def __init__(self, status: int, message: str, *, retry_after: datetime | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.retry_after = retry_after


@dataclass(frozen=True)
class Policy:
    """One assignment's rules (times are naive UTC, like the store's)."""

    assignment: str
    opens: datetime | None = setting(None, None, "when submissions open (ISO 8601; no zone: UTC)")
    due: datetime | None = setting(None, None, "the due date (default: nbgrader's due date of the "
                                   "assignment)")
    max_submissions: int = setting(5, None, "submissions per student in any `window_hours`")
    window_hours: float = setting(24.0, None, "the sliding window of `max_submissions`, hours")
    late: bool = setting(False, None, "accept after the due date (marked late)")
    counts: str = setting("latest", None, "which notebook lands in `submitted/`: every accepted one, "
                          "or only one whose grade of record (late penalty applied) is higher",
                          choices=COUNTS)
    feedback_before_due: str = setting("tests", None, "what a student sees before the due date: "
                                       "every test with its message, the total, or only that it "
                                       "was graded", choices=FEEDBACK_LEVELS)
    feedback_after_due: str = setting("tests", None, "the same, after the due date (a late "
                                      "submission: the lesser of the two)",
                                      choices=FEEDBACK_LEVELS)

    def feedback_level(self, now: datetime, received_at: datetime | None = None) -> str:
        """What a student sees at ``now`` of a submission received at ``received_at``: before the
        due date ``feedback_before_due``, after it ``feedback_after_due``; of one received after
        the due date, the lesser of the two (while late ones are taken, the after-due level must
        not be an oracle for them)."""
        if self.due is not None and received_at is not None and received_at > self.due:
            return max(self.feedback_before_due, self.feedback_after_due,
                       key=FEEDBACK_LEVELS.index)
        return self.feedback_after_due if self.due is not None and now > self.due \
            else self.feedback_before_due

    def admit(self, now: datetime, earlier: list[datetime]) -> None:
        """A submission at ``now``, or ``Refused`` saying why not; ``earlier`` are this student's
        submissions of the assignment within the window, oldest first."""
        if self.opens is not None and now < self.opens:
            raise Refused(403, f"{self.assignment} opens at {shown(self.opens)}; nothing was "
                                "submitted")
        if self.due is not None and now > self.due and not self.late:
            raise Refused(403, f"{self.assignment} was due at {shown(self.due)} and late "
                                "submissions are not accepted; nothing was submitted")
        window = timedelta(hours=self.window_hours)
        recent = [when for when in earlier if when > now - window]
        if self.max_submissions >= 0 and len(recent) >= self.max_submissions:
            next_at = recent[len(recent) - self.max_submissions] + window
            raise Refused(429, f"{self.max_submissions} submissions of {self.assignment} in "
                                f"{self.window_hours:g} h already; the next is possible at "
                                f"{shown(next_at)}", retry_after=next_at)

    def left(self, now: datetime, earlier: list[datetime]) -> int:
        """Submissions still possible in the current window."""
        window = timedelta(hours=self.window_hours)
        return max(0, self.max_submissions - sum(1 for when in earlier if when > now - window))

    def as_json(self) -> dict[str, Any]:
        return {"assignment": self.assignment, "opens": iso(self.opens), "due": iso(self.due),
                "max_submissions": self.max_submissions, "window_hours": self.window_hours,
                "late": self.late, "counts": self.counts,
                "feedback_before_due": self.feedback_before_due,
                "feedback_after_due": self.feedback_after_due}


def iso(when: datetime | None) -> str | None:
    """A stored time (naive UTC) for JSON and CSV: ISO 8601 with its zone."""
    return None if when is None else when.replace(tzinfo=UTC).isoformat(timespec="seconds")


def human_time(when: datetime | None) -> str | None:
    """A stored time (naive UTC) as pages show it: ``4 Dec 2026, 23:59 UTC``."""
    if when is None:
        return None
    return f"{when.day} {when:%b %Y, %H:%M} UTC"


def shown(when: datetime) -> str:
    return when.replace(tzinfo=UTC).strftime("%Y-%m-%d %H:%M UTC")


def parse_time(value: Any, *, where: str) -> datetime | None:
    """``value`` (ISO 8601 text, a datetime, or None) as naive UTC; a clear error names ``where``."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        when = value
    else:
        text = str(value).strip()
        if text.endswith(" UTC"):
            text = text[:-4]
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise CourseError(f"{where}: {value!r} is not a time (expected ISO 8601, "
                              "e.g. '2026-10-15 23:59 UTC')") from None
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when


def policy_for(assignment: str, settings: dict[str, Any], *, due: datetime | None) -> Policy:
    """The policy of ``assignment`` from ``c.AutograderService.policy`` (``settings``): its own keys
    over "default" over the defaults of ``Policy``; ``due`` is nbgrader's due date for the assignment."""
    if not isinstance(settings, dict):
        raise CourseError("nbgrader_config.py: c.AutograderService.policy must be a dict of "
                          f"assignment name -> settings, not {type(settings).__name__}")
    merged: dict[str, Any] = {}
    for key in ("default", assignment):
        part = settings.get(key, {})
        if not isinstance(part, dict):
            raise CourseError(f"nbgrader_config.py: c.AutograderService.policy[{key!r}] must be a "
                              f"dict, not {type(part).__name__}")
        merged.update(part)
    known = {f.name for f in fields(Policy)} - {"assignment"}
    unknown = sorted(set(merged) - known)
    if unknown:
        raise CourseError(f"nbgrader_config.py: c.AutograderService.policy for {assignment!r}: "
                          f"unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    where = f"nbgrader_config.py: c.AutograderService.policy[{assignment!r}]"
    policy = Policy(assignment=assignment, due=due)
    values: dict[str, Any] = {}
    for key, value in merged.items():
        if key in ("opens", "due"):
            values[key] = parse_time(value, where=f"{where}[{key!r}]")
        elif key in ("max_submissions",):
            values[key] = _number(value, int, f"{where}[{key!r}]")
        elif key == "window_hours":
            values[key] = _number(value, float, f"{where}[{key!r}]")
        elif key == "late":
            if not isinstance(value, bool):
                raise CourseError(f"{where}['late']: expected True or False, not {value!r}")
            values[key] = value
        elif key == "counts":
            values[key] = _choice(value, COUNTS, f"{where}['counts']")
        else:
            values[key] = _choice(value, FEEDBACK_LEVELS, f"{where}[{key!r}]")
    return replace(policy, **values)


def _number(value: Any, kind: type[int] | type[float], where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise CourseError(f"{where}: expected a number >= 0, not {value!r}")
    return kind(value)


def _choice(value: Any, allowed: tuple[str, ...], where: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise CourseError(f"{where}: expected one of {', '.join(allowed)}, not {value!r}")
    return value
