"""Late submissions and per-student extensions, through nbgrader's own late-penalty step.

nbgrader's ``AssignLatePenalties`` (one of ``nbgrader autograde``'s steps, run by the engine as is: see
``nbgrader_seam.py``) compares the submission's timestamp (``timestamp.txt``, which ``autograder
collect`` writes for every notebook it takes) with the assignment's due date in the gradebook
(``nbgrader db assignment add NAME --duedate ...``) and asks its plugin for the penalty;
``c.LateSubmissionPlugin.penalty_method`` chooses nbgrader's rule (``none``, the default, or
``zero``).

``ExtensionsLatePlugin`` is that plugin with per-student extensions, a course setting:

    c.AssignLatePenalties.plugin_class = "autograder.grading.late.ExtensionsLatePlugin"
    c.Autograder.extensions = {"01_strides": {"bob": "2026-10-22 23:59 UTC"}}

A submission before the student's extended due date gets no penalty; one after it is late by the time
since the extended date (the method's penalty then applies as nbgrader's would). Since it is nbgrader's
plugin, ``nbgrader autograde`` applies the very same extensions, and ``nbgrader export`` shows the
penalised score whichever graded it. The time comes only from ``timestamp.txt`` as ``collect`` (or the
service) wrote it: nothing in the notebook itself buys time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.utils import parse_utc

from autograder.errors import GradingError

CONFIG_SECTION, CONFIG_KEY = "Autograder", "extensions"  # c.Autograder.extensions
PLUGIN = "autograder.grading.late.ExtensionsLatePlugin"


def extensions(config: Any) -> dict[str, dict[str, datetime]]:
    """``c.Autograder.extensions`` read and checked: assignment -> student -> extended due date
    (naive UTC, as nbgrader's dates). A value that is not a date raises ``GradingError`` naming it."""
    section = config.get(CONFIG_SECTION) if hasattr(config, "get") else None
    raw = (section.get(CONFIG_KEY) if section else None) or {}
    where = f"c.{CONFIG_SECTION}.{CONFIG_KEY}"
    if not isinstance(raw, dict):
        raise GradingError(f"{where} must be a dict {{assignment: {{student: due date}}}}, got "
                           f"{type(raw).__name__}")
    found: dict[str, dict[str, datetime]] = {}
    for assignment, students in raw.items():
        if not isinstance(students, dict):
            raise GradingError(f"{where}[{assignment!r}] must be a dict {{student: due date}}")
        for student, when in students.items():
            try:
                found.setdefault(str(assignment), {})[str(student)] = parse_utc(when)
            except Exception:  # noqa: BLE001 - any unreadable date is named
                raise GradingError(f"{where}[{assignment!r}][{student!r}] = {when!r} is not a date "
                                   "(e.g. '2026-10-22 23:59 UTC')") from None
    return found


def check_course(config: Any) -> None:
    """Refuse extensions nbgrader would ignore: they need ``ExtensionsLatePlugin`` as the late-penalty
    plugin (else ``nbgrader autograde`` and the gradebook would disagree with what staff granted)."""
    if not extensions(config):
        return
    plugin = config.get("AssignLatePenalties", {}).get("plugin_class")
    name = plugin if isinstance(plugin, str) else \
        f"{plugin.__module__}.{plugin.__qualname__}" if isinstance(plugin, type) else None
    ok = name == PLUGIN or (isinstance(plugin, type) and issubclass(plugin, ExtensionsLatePlugin))
    if not ok:
        raise GradingError(f"c.{CONFIG_SECTION}.{CONFIG_KEY} is set, but nbgrader's late-penalty "
                           f"plugin is {name or 'its default'}: set c.AssignLatePenalties.plugin_class "
                           f"= {PLUGIN!r} in nbgrader_config.py")


class ExtensionsLatePlugin(LateSubmissionPlugin):  # type: ignore[misc]
    """nbgrader's late-submission plugin, with ``c.Autograder.extensions`` (module docstring)."""

    def late_submission_penalty(self, student_id: str, score: float,
                                total_seconds_late: float) -> float | None:
        granted = self._extension_seconds(student_id)
        if granted > 0:
            if total_seconds_late <= granted:
                self.log.warning("%s: within the extension of %s s; no late penalty", student_id,
                                 granted)
                return None
            total_seconds_late -= granted
        penalty: float | None = super().late_submission_penalty(student_id, score, total_seconds_late)
        return penalty

    def _extension_seconds(self, student_id: str) -> float:
        """Seconds from the assignment's due date to the student's extended one (0: none)."""
        parent = self.parent  # nbgrader's AssignLatePenalties, inside its gradebook block
        assignment = getattr(parent, "assignment_id", None)
        until = extensions(self.config).get(str(assignment), {}).get(student_id)
        if until is None:
            return 0.0
        due = parent.gradebook.find_assignment(assignment).duedate
        if due is None:
            return 0.0
        seconds: float = (until - due).total_seconds()
        return max(0.0, seconds)
