"""Per-student HTML feedback through nbgrader's GenerateFeedback, without hidden-check source.

nbgrader's converter writes ``feedback/<student>/<assignment>/<notebook>.html`` as usual. Its
preprocessor list is the course's, with two guarantees added if the config lacks them:
``HideCheckFrames`` (a traceback that quotes a hidden-test line or mentions the hidden checks shows only
its last line) and ``ClearHiddenTests`` (drops the ``### BEGIN/END HIDDEN TESTS`` region of each cell). Every HTML
file written is then scanned, and ``FeedbackLeak`` is raised naming any file that still shows
hidden-check source.
"""

from __future__ import annotations

import copy
import glob
import os
import re
from collections.abc import Sequence
from pathlib import Path

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import ClearHiddenTests, GetGrades, NbGraderPreprocessor
from traitlets.config import Config

from autograder.course import load_course
from autograder.errors import AutograderError

HIDDEN_MARKERS = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "autograder.hidden", "autograder/hidden")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class FeedbackLeak(AutograderError):
    """A feedback file would show hidden-check source to a student."""


class HideCheckFrames(NbGraderPreprocessor):
    """Collapse to its final line any error traceback that quotes a hidden-test line of its cell or
    mentions the hidden checks (runs before ClearHiddenTests, while the hidden region is still there)."""

    def preprocess_cell(self, cell, resources, index):
        hidden = _hidden_lines(cell.get("source", ""))
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            text = _ANSI.sub("", "\n".join(output.get("traceback", [])))
            if any(m in text for m in HIDDEN_MARKERS) or any(line in text for line in hidden):
                output["traceback"] = [f"{output['ename']}: {output['evalue']}"]
        return cell, resources


def _hidden_lines(source: str) -> list[str]:
    """Non-trivial code lines between the hidden-test markers of ``source``."""
    lines, inside = [], False
    for line in source.splitlines():
        if "BEGIN HIDDEN TESTS" in line:
            inside = True
        elif "END HIDDEN TESTS" in line:
            inside = False
        elif inside and len(line.strip()) > 3:
            lines.append(line.strip())
    return lines


def feedback_config(base: Config) -> Config:
    """The course config with GenerateFeedback guaranteed to clear hidden tests and check frames."""
    config = copy.deepcopy(base)
    configured = list(config.GenerateFeedback.get(
        "preprocessors", [GetGrades, CSSHTMLHeaderPreprocessor]))
    if ClearHiddenTests not in configured:
        configured.insert(1, ClearHiddenTests)
    if HideCheckFrames not in configured:
        configured.insert(configured.index(ClearHiddenTests), HideCheckFrames)
    config.GenerateFeedback.preprocessors = configured
    config.ClearHiddenTests.enforce_metadata = False  # feedback is not a release: don't re-validate
    return config


def feedback(*, assignments: Sequence[str] | None = None, students: Sequence[str] | None = None,
             course_root: Path = Path("."), db_url: str | None = None,
             force: bool = True) -> list[Path]:
    """Write HTML feedback for autograded submissions; return the HTML files of those assignments.

    ``assignments``: default every assignment with autograded submissions; ``students``: default all.
    """
    course = load_course(course_root, db_url=db_url)
    names = list(assignments) if assignments else _autograded_assignments(course)
    written: list[Path] = []
    for name in names:
        course.require_assignment(name)
        for student in (students or ["*"]):
            config = feedback_config(course.config)
            config.CourseDirectory.assignment_id = name
            config.CourseDirectory.student_id = student
            converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
            converter.force = force
            try:
                converter.start()
            except Exception as error:  # nbgrader raises NbGraderException after logging
                raise AutograderError(f"nbgrader generate_feedback {name} (student {student}) "
                                      f"failed: {error}") from None
        pattern = course.coursedir.format_path(course.coursedir.feedback_directory, "*", name)
        written += sorted(Path(p) for p in glob.glob(os.path.join(pattern, "*.html")))
    if students:
        written = [p for p in written if any(f"/{s}/" in str(p) for s in students)]
    for path in written:
        check_no_hidden_source(path)
    return written


def check_no_hidden_source(path: Path) -> None:
    """Raise FeedbackLeak if the HTML at ``path`` shows hidden-test markers or check source."""
    text = _ANSI.sub("", path.read_text(encoding="utf-8", errors="replace"))
    found = [marker for marker in HIDDEN_MARKERS if marker in text]
    if found:
        raise FeedbackLeak(f"{path}: feedback shows hidden-check source ({', '.join(found)})")


def _autograded_assignments(course) -> list[str]:
    known = course.gradebook_assignments()
    return [a for a in known if glob.glob(course.coursedir.format_path(
        course.coursedir.autograded_directory, "*", a))]
