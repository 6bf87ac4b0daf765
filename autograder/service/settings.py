"""The service's settings: ``c.AutograderService`` in the course's nbgrader_config.py (see policy.py),
read again when that file changes (its modification time, looked at most once a second: a policy edit
needs no restart; an edit with an error is logged and the settings before it stay), plus what the web
process needs to know about the course (roster, assignments, notebooks)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeAlias

from autograder.course.nbgrader import CONFIG_FILE, Course, load_course
from autograder.errors import CourseError
from autograder.service.policy import Policy, parse_time, policy_for

log = logging.getLogger("autograder.service")
DEFAULT_UPLOAD_MB = 5.0
RELOAD_CHECK_S = 1.0  # how often nbgrader_config.py's modification time is looked at

# (when, assignment -> notebooks, students, assignment -> due date,
#  (assignment, notebook) -> grade ids)
_CourseView: TypeAlias = tuple[float, dict[str, list[str]], set[str], dict[str, datetime | None],
                               dict[tuple[str, str], set[str]]]


@dataclass
class ServiceSettings:
    """What ``c.AutograderService`` says, and the course's assignments as its gradebook knows them."""

    course: Course
    policies: dict[str, Any]
    roster: str | list[str] = "gradebook"
    instructors: list[str] = field(default_factory=list)
    instructor_group: str = "instructors"
    max_upload_bytes: int = int(DEFAULT_UPLOAD_MB * 2**20)
    refresh_s: float = 30.0
    _cache: _CourseView | None = None
    _config_seen: tuple[float, float | None] = (0.0, None)  # (monotonic, the file's mtime) last looked

    @classmethod
    def of(cls, course: Course) -> ServiceSettings:
        mtime = _mtime(course)
        settings = cls(course=course, **cls._section(course))
        settings._config_seen = (time.monotonic(), mtime)
        for name in settings.assignments():  # a wrong policy is an error at start, not at submit
            settings.policy(name)
        return settings

    def reload_if_changed(self) -> bool:
        """Read ``c.AutograderService`` again when nbgrader_config.py changed; True when it did."""
        now = time.monotonic()
        if now - self._config_seen[0] < RELOAD_CHECK_S:
            return False
        mtime = _mtime(self.course)
        changed = mtime != self._config_seen[1]
        self._config_seen = (now, mtime)
        if not changed:
            return False
        try:
            fresh = ServiceSettings.of(load_course(self.course.root, db_url=self.course.db_url))
        except Exception as error:  # noqa: BLE001 - a half-saved or wrong edit: keep what works
            log.error("%s changed but was not applied (the settings before it stay): %s",
                      CONFIG_FILE, error)
            return False
        self.policies, self.roster, self.instructors = fresh.policies, fresh.roster, fresh.instructors
        self.instructor_group, self.max_upload_bytes = fresh.instructor_group, fresh.max_upload_bytes
        log.info("%s changed: the service's policy and settings were read again", CONFIG_FILE)
        return True

    @staticmethod
    def _section(course: Course) -> dict[str, Any]:
        section = course.config.get("AutograderService", {})
        policies = dict(section.get("policy", {}) or {})
        roster = section.get("roster", "gradebook")
        if roster != "gradebook" and not (isinstance(roster, list)
                                          and all(isinstance(s, str) for s in roster)):
            raise CourseError("nbgrader_config.py: c.AutograderService.roster must be 'gradebook' "
                              f"or a list of student ids, not {roster!r}")
        instructors = section.get("instructors", [])
        if not isinstance(instructors, list):
            raise CourseError("nbgrader_config.py: c.AutograderService.instructors must be a list "
                              "of user names")
        upload_mb = section.get("max_upload_mb", DEFAULT_UPLOAD_MB)
        if isinstance(upload_mb, bool) or not isinstance(upload_mb, (int, float)) or upload_mb <= 0:
            raise CourseError("nbgrader_config.py: c.AutograderService.max_upload_mb must be a "
                              f"number > 0, not {upload_mb!r}")
        return {"policies": policies, "roster": roster, "instructors": instructors,
                "instructor_group": str(section.get("instructor_group", "instructors")),
                "max_upload_bytes": int(upload_mb * 2**20)}

    def _course_view(self) -> _CourseView:
        now = time.monotonic()
        if self._cache is None or now - self._cache[0] > self.refresh_s:
            with self.course.gradebook() as gb:
                notebooks = {a.name: sorted(nb.name for nb in a.notebooks) for a in gb.assignments}
                dues = {a.name: parse_time(a.duedate, where=f"gradebook due date of {a.name}")
                        for a in gb.assignments}
                students = {s.id for s in gb.students}
                ids = {(a.name, nb.name): {cell.name for cell in nb.source_cells}
                       for a in gb.assignments for nb in a.notebooks}
            self._cache = (now, notebooks, students, dues, ids)
        return self._cache

    def assignments(self) -> dict[str, list[str]]:
        """assignment -> its notebook names, from the course gradebook (refreshed every 30 s)."""
        return self._course_view()[1]

    def is_student(self, user: str) -> bool:
        self.reload_if_changed()
        if self.roster == "gradebook":
            return user in self._course_view()[2]
        return user in self.roster

    def policy(self, assignment: str) -> Policy:
        self.reload_if_changed()
        return policy_for(assignment, self.policies, due=self._course_view()[3].get(assignment))

    def grade_ids(self, assignment: str, notebook: str) -> set[str]:
        """The grade ids of a notebook's cells (what a notebook of it must carry some of)."""
        return self._course_view()[4].get((assignment, notebook), set())

    def assignment_of(self, notebook: str) -> str | None:
        """The assignment whose notebook is named ``notebook`` (the file's stem)."""
        for name, notebooks in self.assignments().items():
            if notebook in notebooks:
                return name
        return None


def _mtime(course: Course) -> float | None:
    try:
        return (course.root / CONFIG_FILE).stat().st_mtime
    except OSError:
        return None
