"""nbgrader's seam (trusted side): its own autograde steps, and the one place its gradebook is patched.

``nbgrader autograde`` runs two preprocessor lists: ``sanitize_preprocessors`` (clear outputs, restore
locked cells and metadata from the gradebook, ...) and ``autograde_preprocessors`` (Execute, then
output limits, SaveAutoGrades, late penalties, ...). The autograder runs the very same classes, with the
course's config, in the same order; only ``Execute`` is replaced by the sandboxed execution. That is
why its scores equal nbgrader's by construction.

nbgrader's preprocessors each open ``Gradebook(db_url)`` and commit after every cell. To reuse them
unchanged while keeping a submission all-or-nothing (a SIGKILL can never leave half its grades),
``borrowed_gradebook`` hands them the run's open gradebook instead, and ``one_transaction`` turns their
commits into flushes and commits once at the end (or rolls everything back). A third patch changes
speed only: nbgrader's metadata checks call ``jsonschema.validate``, which re-checks nbgrader's own
schema against the JSON Schema metaschema for every cell (a third of the parent's time per notebook);
``run`` checks each schema once and validates every cell against it, with the same errors. These
patches, tested against the pinned nbgrader, are the only ones.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any
from unittest import mock

import jsonschema
from nbconvert.preprocessors import ExecutePreprocessor
from nbformat import NotebookNode
from nbgrader.api import Gradebook
from nbgrader.converters import Autograde
from nbgrader.nbgraderformat import common as nbgrader_format
from nbgrader.preprocessors import (
    getgrades,
    latesubmissions,
    overwritecells,
    overwritekernelspec,
    saveautogrades,
)
from traitlets.config import Config

from autograder.course.nbgrader import Course


@dataclass(frozen=True)
class AutogradeSteps:
    """The preprocessor classes of ``nbgrader autograde`` for one course."""

    sanitize: tuple[type, ...]
    after_execute: tuple[type, ...]
    config: Config
    converter: Autograde  # nbgrader's own converter, for what it does around the preprocessors

    def set_permissions(self, *, assignment: str, student: str) -> None:
        """nbgrader's permissions on ``autograded/<student>/<assignment>/`` (``permissions``: 444,
        664 with ``CourseDirectory.groupshared``, whose folders also get 2775)."""
        self.converter.set_permissions(assignment, student)

    def check_kernel(self, nb: NotebookNode, *, notebook: str) -> None:
        """Refuse a notebook whose kernelspec (the source's, restored by nbgrader's sanitize steps)
        names a kernel this machine does not have: nbgrader's execute step fails it the same way."""
        spec = nb.metadata.get("kernelspec")
        name = spec.get("name") if isinstance(spec, dict) else None
        if not name or name in ("python", "python3"):  # jupyter_client's KernelManager: "python"
            return                                    # is the native kernel
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

        try:
            KernelSpecManager().get_kernel_spec(name)  # as nbclient resolves it ("python" too)
        except NoSuchKernel:
            raise ValueError(f"{notebook}.ipynb: No such kernel named {name} (its kernelspec); "
                             "the autograder grades Python notebooks") from None

    def run(self, classes: tuple[type, ...], nb: NotebookNode, resources: dict[str, Any],
            log: logging.Logger) -> NotebookNode:
        """Apply ``classes`` in order, each built from the course config (disabled ones are skipped,
        exactly as nbconvert's exporter does)."""
        with mock.patch.object(nbgrader_format, "jsonschema", _SchemaCheckedOnce):
            for cls in classes:
                preprocessor = cls(config=self.config, log=log)
                nb, resources = preprocessor(nb, resources)
        return nb


@functools.lru_cache(maxsize=8)
def _validator(schema_text: str) -> Any:
    """A validator of the schema ``schema_text`` (JSON), the schema itself checked once."""
    schema = json.loads(schema_text)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


class _SchemaCheckedOnce:
    """What nbgrader's metadata checks see as ``jsonschema``: ``validate`` as jsonschema's (the
    best-matching error raised), without re-checking the schema on every call."""

    ValidationError = jsonschema.ValidationError

    @staticmethod
    def validate(instance: Any, schema: dict[str, Any], *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            jsonschema.validate(instance, schema, *args, **kwargs)
            return
        validator = _validator(json.dumps(schema, sort_keys=True))
        error = jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error


def autograde_steps(course: Course) -> AutogradeSteps:
    """Read nbgrader's two autograde lists from the course config; drop the execute step."""
    # built as ``nbgrader autograde`` builds it: the app moves outdated keys (c.AutogradeApp.permissions
    # and the like) to the converter's sections, the converter reads the course config through it
    from nbgrader.apps import AutogradeApp

    app = AutogradeApp(config=course.config)
    app.log.setLevel(logging.WARNING)  # its per-submission INFO lines ("Setting ... permissions")
    converter = Autograde(coursedir=course.coursedir, parent=app)
    after = tuple(cls for cls in converter.autograde_preprocessors
                  if not (isinstance(cls, type) and issubclass(cls, ExecutePreprocessor)))
    return AutogradeSteps(sanitize=tuple(converter.sanitize_preprocessors),
                          after_execute=after, config=course.config, converter=converter)


def execute_timeout(course: Course) -> float | None:
    """The course's per-cell timeout, read as nbgrader reads it: ``c.Execute.timeout`` of
    nbgrader_config.py (this course sets 60 s; a course that sets none gets nbgrader's own default).
    ``GradeOptions.timeout`` (``--timeout``) wins over it when given; every limit derived from the
    result is in ``sandbox/deadlines.py``. None: no per-cell limit."""
    from nbgrader.preprocessors import Execute

    value = Execute(config=course.config).timeout
    return float(value) if value and value > 0 else None


def added_back_source(config: Config, source_cell: Any, max_score: float) -> str | None:
    """The source nbgrader's ``OverwriteCells`` gives a locked grade cell it adds back to a
    submission that deleted it (``c.OverwriteCells.add_missing_cells``: the course's
    ``missing_cell_notification`` as a comment, then the gradebook's source), or None when the course
    does not add cells back. Built by nbgrader's own ``missing_cell_transform``."""
    from nbgrader.preprocessors import OverwriteCells

    overwrite = OverwriteCells(config=config)
    if not overwrite.add_missing_cells:
        return None
    return str(overwrite.missing_cell_transform(source_cell, max_score).source)


def nbgrader_resources(course: Course, *, student: str, assignment: str, notebook: str,
                       workdir: str) -> dict[str, Any]:
    """The ``resources`` dict nbgrader's converter hands its preprocessors."""
    return {
        "unique_key": notebook,
        "output_files_dir": f"{notebook}_files",
        "metadata": {"path": workdir},
        "nbgrader": {"student": student, "assignment": assignment, "notebook": notebook,
                     "db_url": course.db_url},
    }


# nbgrader modules whose preprocessors construct their own Gradebook
_MODULES = (overwritecells, overwritekernelspec, saveautogrades, latesubmissions, getgrades)


class _BorrowedGradebook:
    """A gradebook lent to nbgrader code: leaving its ``with`` block does not close it."""

    def __init__(self, gradebook: Gradebook) -> None:
        self._gradebook = gradebook

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gradebook, name)

    def __enter__(self) -> _BorrowedGradebook:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def close(self) -> None:
        return None


@contextmanager
def borrowed_gradebook(gradebook: Gradebook) -> Iterator[None]:
    """While active, nbgrader preprocessors use ``gradebook`` instead of opening their own."""
    lent = _BorrowedGradebook(gradebook)
    with ExitStack() as stack:
        for module in _MODULES:
            stack.enter_context(mock.patch.object(module, "Gradebook", lambda *a, **k: lent))
        yield


@contextmanager
def one_transaction(gradebook: Gradebook) -> Iterator[None]:
    """Run the block as a single transaction: inner commits only flush; commit at the end, or roll
    back if the block raises."""
    session = gradebook.db
    session.commit()  # start from a clean transaction
    try:
        with mock.patch.object(session, "commit", session.flush):
            yield
    except BaseException:
        session.rollback()
        raise
    session.commit()
