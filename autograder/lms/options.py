"""The Canvas settings: ``c.Autograder.canvas = {...}`` in nbgrader_config.py, then the command line.

    c.Autograder.canvas = {"url": "https://canvas.example.edu", "course_id": 4321,
                           "assignments": {"01_strides": 1234}, "match": "sis_user_id"}

The API token is never a setting: it is read from ``CANVAS_API_TOKEN`` (``token_from_environment``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from autograder.course.settings import course_settings, setting
from autograder.errors import CourseError

CONFIG_SECTION, CONFIG_KEY = "Autograder", "canvas"  # c.Autograder.canvas in nbgrader_config.py
TOKEN_VARIABLE = "CANVAS_API_TOKEN"
MATCH_FIELDS = ("sis_user_id", "login_id", "email")


@dataclass(frozen=True)
class CanvasOptions:
    """Where the grades go and how gradebook students are found in Canvas."""

    url: str | None = setting(None, "--url", "Canvas base URL, e.g. https://canvas.example.edu "
                              "(http:// only for a local test server)")
    course_id: int | None = setting(None, "--course", "Canvas course id (the number in the "
                                    "course's URL)", metavar="ID")
    match: str = setting("sis_user_id", "--match", "the Canvas user field equal to the gradebook's "
                         "student id (email: the gradebook student's email)", choices=MATCH_FIELDS)
    assignments: dict[str, int | None] = field(default_factory=dict, metadata={
        "flag": None, "metavar": None, "choices": None,
        "help": "nbgrader assignment → Canvas assignment id; an assignment without an id is "
                "matched by its name (`--assignment NAME[=ID]`, repeatable)"})
    per_page: int = setting(100, None, "users and submissions asked for per page (Canvas's "
                            "maximum is 100)")
    timeout_s: float = setting(30.0, None, "seconds one HTTP request may take")
    retries: int = setting(5, None, "retries of a throttled (429, or 403 Rate Limit Exceeded) or "
                           "failed (5xx) request, with back-off")
    progress_timeout_s: float = setting(300.0, None, "seconds to wait for Canvas to finish a bulk "
                                        "grade update")

    def __post_init__(self) -> None:
        if self.match not in MATCH_FIELDS:
            raise CourseError(f"c.{CONFIG_SECTION}.{CONFIG_KEY}['match'] must be one of "
                              f"{', '.join(MATCH_FIELDS)}, got {self.match!r}")
        if self.course_id is not None and (isinstance(self.course_id, bool)
                                           or not isinstance(self.course_id, int)):
            raise CourseError(f"the Canvas course id must be an integer, got {self.course_id!r}")
        if not isinstance(self.assignments, dict):
            raise CourseError(f"c.{CONFIG_SECTION}.{CONFIG_KEY}['assignments'] must map nbgrader "
                              f"assignment names to Canvas ids, got {self.assignments!r}")
        for name, canvas_id in self.assignments.items():
            if canvas_id is not None and (isinstance(canvas_id, bool) or not isinstance(canvas_id, int)):
                raise CourseError(f"c.{CONFIG_SECTION}.{CONFIG_KEY}['assignments'][{name!r}] must be "
                                  f"a Canvas assignment id (an integer), got {canvas_id!r}")
        for name, least in (("per_page", 1), ("retries", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise CourseError(f"c.{CONFIG_SECTION}.{CONFIG_KEY}['{name}'] must be an integer "
                                  f">= {least}, got {value!r}")

    @classmethod
    def from_config(cls, config: Any, **overrides: Any) -> CanvasOptions:
        """The course's ``c.Autograder.canvas``, then ``overrides`` (the command line's, None = not
        given)."""
        options = cls(**course_settings(config, CONFIG_SECTION, CONFIG_KEY, cls))
        given = {name: value for name, value in overrides.items() if value is not None}
        return replace(options, **given) if given else options

    def with_assignments(self, picked: list[str]) -> CanvasOptions:
        """``--assignment NAME[=ID]`` arguments: only these assignments, an ``=ID`` overriding the
        configured id (a bad id names the argument)."""
        chosen: dict[str, int | None] = {}
        for argument in picked:
            name, _, canvas_id = argument.partition("=")
            if not name:
                raise CourseError(f"--assignment {argument!r}: expected NAME or NAME=CANVAS_ID")
            if canvas_id and not canvas_id.isdigit():
                raise CourseError(f"--assignment {argument!r}: the Canvas id after '=' must be a "
                                  f"number")
            chosen[name] = int(canvas_id) if canvas_id else self.assignments.get(name)
        return replace(self, assignments=chosen)


def token_from_environment() -> str:
    """The API token from ``CANVAS_API_TOKEN`` (never a flag: flags end up in shell history and
    process lists)."""
    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        raise CourseError(f"set {TOKEN_VARIABLE} to a Canvas access token (Canvas: Account → "
                          f"Settings → New access token); it is read from the environment only")
    return token
