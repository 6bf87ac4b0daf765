"""nbgrader's own autograde steps, as configured for the course, with execution taken out.

``nbgrader autograde`` runs two preprocessor lists: ``sanitize_preprocessors`` (clear outputs, restore
locked cells and metadata from the gradebook, ...) and ``autograde_preprocessors`` (Execute, then
output limits, SaveAutoGrades, late penalties, ...). The autograder runs the very same classes, with the
course's config, in the same order; only ``Execute`` is replaced by the warm-worker execution. That is
why its scores equal nbgrader's by construction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from nbconvert.preprocessors import ExecutePreprocessor
from nbformat import NotebookNode
from nbgrader.converters import Autograde
from traitlets.config import Config

from autograder.course import Course


@dataclass(frozen=True)
class AutogradeSteps:
    """The preprocessor classes of ``nbgrader autograde`` for one course."""

    sanitize: tuple[type, ...]
    after_execute: tuple[type, ...]
    config: Config

    def run(self, classes: tuple[type, ...], nb: NotebookNode, resources: dict,
            log: logging.Logger) -> NotebookNode:
        """Apply ``classes`` in order, each built from the course config (disabled ones are skipped,
        exactly as nbconvert's exporter does)."""
        for cls in classes:
            preprocessor = cls(config=self.config, log=log)
            nb, resources = preprocessor(nb, resources)
        return nb


def autograde_steps(course: Course) -> AutogradeSteps:
    """Read nbgrader's two autograde lists from the course config; drop the execute step."""
    converter = Autograde(coursedir=course.coursedir, config=course.config)
    after = tuple(cls for cls in converter.autograde_preprocessors
                  if not (isinstance(cls, type) and issubclass(cls, ExecutePreprocessor)))
    return AutogradeSteps(sanitize=tuple(converter.sanitize_preprocessors),
                          after_execute=after, config=course.config)


def execute_timeout(course: Course) -> float | None:
    """nbgrader's per-cell timeout for the course (``Execute.timeout``, default 30 s)."""
    from nbgrader.preprocessors import Execute

    value = Execute(config=course.config).timeout
    return float(value) if value and value > 0 else None


def nbgrader_resources(course: Course, *, student: str, assignment: str, notebook: str,
                       workdir: str) -> dict:
    """The ``resources`` dict nbgrader's converter hands its preprocessors."""
    return {
        "unique_key": notebook,
        "output_files_dir": f"{notebook}_files",
        "metadata": {"path": workdir},
        "nbgrader": {"student": student, "assignment": assignment, "notebook": notebook,
                     "db_url": course.db_url},
    }
