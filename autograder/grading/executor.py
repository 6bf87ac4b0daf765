"""What an executor is (trusted side): the one interface local grading, Slurm and a service share,
and the registry that names them.

An executor turns prepared submissions (each notebook with its ``NotebookProgram``) into
``NotebookOutcome`` s — nothing more. Planning, sanitizing, checking, scoring and recording are the
pipeline's (``pipeline.py``), the same for every executor; so is the rule that a submission is recorded
exactly once, when the last of its notebooks has an outcome.

``registry.EXECUTORS`` names every executor and where it lives; ``executor_class`` imports one only
when it is chosen (the Slurm one needs submitit, the local one starts its checker forkserver). A new
backend is one entry there and a class with this protocol; remote backends build on
``grading/remote/`` as ``slurm/`` does.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import import_module
from typing import TYPE_CHECKING, Protocol

from autograder.grading.registry import EXECUTORS

if TYPE_CHECKING:
    from autograder.course.nbgrader import Course
    from autograder.grading.model import NotebookOutcome, Submission
    from autograder.grading.options import GradeOptions
    from autograder.grading.prepare import DeviceProbe
    from autograder.grading.progress import ProgressBar


class Outcomes(Protocol):
    """Where an executor sends what it produced (the pipeline's side)."""

    def executed(self, submission: Submission, notebook: str, outcome: NotebookOutcome) -> None:
        """One notebook of ``submission`` has run (an outcome is also what a crash produces)."""

    def failed(self, submission: Submission, reason: str) -> None:
        """``submission`` could not be executed at all (never a score: listed as failed)."""

    def starting(self, submission: Submission) -> None:
        """A notebook of ``submission`` is about to start in a sandbox (the service counts an
        attempt from here; executors that cannot tell may never call it)."""


class Executor(Protocol):
    name: str
    # True: ``execute`` also accepts ``None`` from ``work`` (a stream: nothing to run now, ask again
    # soon) and keeps its machines warm until ``work`` ends (``pipeline.grade_stream``, the service)
    streams: bool
    # False: nothing runs; each notebook's outcome is its outputs as submitted (nbgrader's
    # --no-execute, which also turns off clearing the outputs)
    executes: bool

    def __init__(self, options: GradeOptions, course: Course) -> None:
        """Set up for one run (the local executor starts its checker forkserver here)."""

    def probe(self) -> DeviceProbe:
        """What the machines that will run the notebooks have (the GPU rule reads it)."""

    def execute(self, work: Iterator[Submission | None], outcomes: Outcomes, *, device_used: str,
                progress: ProgressBar, timings: dict[str, float]) -> None:
        """Run every notebook of every submission ``work`` yields (pull lazily: the pipeline sanitizes
        as it is asked), reporting each to ``outcomes``."""

    def close(self) -> None:
        """Release what ``__init__`` started and ``execute`` did not take (the pipeline calls it at
        the end of every run, also one that failed before ``execute``)."""


def executor_class(name: str) -> type[Executor]:
    """The class of the executor registered as ``name`` (imported now)."""
    module, _, attribute = EXECUTORS[name].target.partition(":")
    cls: type[Executor] = getattr(import_module(module), attribute)
    return cls


def open_executor(options: GradeOptions, course: Course) -> Executor:
    """The executor ``options.executor`` names, constructed for this run."""
    return executor_class(options.executor)(options, course)
