"""The misconception a submission's failing checks look like, named in the student's feedback (opt-in).

``c.Autograder.feedback_names_misconception = True`` in nbgrader_config.py (default False: the names
are for the course staff's report only) makes ``autograder feedback`` open each notebook's page with
one sentence naming the catalogue misconception the submission looks like: the name ``autograder
report`` gives it (``autograder.reports.misconceptions``), nothing for a submission that lost no points or
looks like no catalogue entry. The sentence and the names are in the notebook's language
(``locales/<lang>/messages.po``, ``autograder.i18n.messages``). Only a name is shown: never a check's
source, a hidden test or a solution line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from nbformat.v4 import new_markdown_cell
from traitlets import Bool, Dict

from autograder.course.nbgrader import Course
from autograder.course.source import shows_hidden_source
from autograder.errors import CourseError
from autograder.i18n.messages import language_code, notebook_language, translate
from autograder.reports import misconceptions

SETTING = "feedback_names_misconception"  # c.Autograder.<SETTING> in nbgrader_config.py
CELL_KEY = "misconception"  # the added cell's metadata.autograder key
_MARKDOWN = re.compile(r"([\\`*_\[\]<>#|])")


def enabled(course: Course) -> bool:
    """Whether the course names misconceptions in feedback (``c.Autograder.feedback_names_misconception``)."""
    value = course.config.get("Autograder", {}).get(SETTING, False)
    if not isinstance(value, bool):
        raise CourseError(f"nbgrader_config.py: c.Autograder.{SETTING} must be True or False, "
                          f"not {value!r}")
    return value


def named_students(course: Course, assignment: str, students: Iterable[str]) -> dict[str, str]:
    """student -> the misconception their graded ``assignment`` looks like (named ones only)."""
    with course.gradebook() as gb:
        full = {(s.student.id, assignment) for s in gb.find_assignment(assignment).submissions
                if float(s.score) >= float(s.max_score) - 1e-9}
    found = misconceptions.name_submissions(course, [(s, assignment) for s in students], passed=full)
    return {n.student: n.misconception for n in found if n.misconception}


def sentence(misconception: str, language: str | None) -> str:
    """What the student reads, in ``language`` (a notebook's tag, None: English); names tied at the
    top (``a or b``) are translated one by one and joined by `` / ``."""
    if language_code(language) is not None:
        misconception = " / ".join(translate(name, language) for name in misconception.split(misconceptions.TIED))
    message = (f"A hint from your failed checks: they fail the way a common mistake does, "
               f"{misconception}. It is a guess, not part of your grade.")
    return translate(message, language)


class NameMisconception(Preprocessor):
    """Open the page with the sentence for the student of ``resources['nbgrader']['student']`` when
    ``names`` has one (``autograder.reports.feedback`` fills it from ``named_students``)."""

    enabled = Bool(True, help="nbconvert skips preprocessors that are not enabled").tag(config=True)
    names = Dict(help="student id -> misconception to name in their feedback").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        student = (resources.get("nbgrader") or {}).get("student")
        name = self.names.get(student) if isinstance(student, str) else None
        if not name:
            return nb, resources
        text = sentence(str(name), notebook_language(nb))
        if shows_hidden_source(text):  # a catalogue name never should; never risk it
            return nb, resources
        cell = new_markdown_cell("> " + _MARKDOWN.sub(r"\\\1", text),
                                 metadata={"autograder": {CELL_KEY: str(name)}})
        nb.cells.insert(0, cell)
        return nb, resources
