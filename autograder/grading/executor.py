"""What an executor is (trusted side): the one interface local grading, Slurm and a service share.

An executor turns prepared submissions (each notebook with its ``ExecutionJob``) into
``NotebookOutcome`` s — nothing more. Planning, sanitizing, checking, scoring and recording are the
pipeline's (``pipeline.py``), the same for every executor; so is the rule that a submission is recorded
exactly once, when the last of its notebooks has an outcome.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from autograder.grading.model import NotebookOutcome, Submission
from autograder.grading.prepare import DeviceProbe
from autograder.grading.progress import ProgressBar


class Outcomes(Protocol):
    """Where an executor sends what it produced (the pipeline's side)."""

    def executed(self, submission: Submission, notebook: str, outcome: NotebookOutcome) -> None:
        """One notebook of ``submission`` has run (an outcome is also what a crash produces)."""

    def failed(self, submission: Submission, reason: str) -> None:
        """``submission`` could not be executed at all (never a score: listed as failed)."""


class Executor(Protocol):
    name: str

    def probe(self) -> DeviceProbe:
        """What the machines that will run the notebooks have (the GPU rule reads it)."""

    def execute(self, work: Iterator[Submission | None], outcomes: Outcomes, *, device_used: str,
                progress: ProgressBar, timings: dict[str, float]) -> None:
        """Run every notebook of every submission ``work`` yields (pull lazily: the pipeline sanitizes
        as it is asked), reporting each to ``outcomes``. An executor that sets ``streams = True``
        also accepts ``None`` from ``work`` (a stream: nothing to run now, ask again soon) and keeps
        its machines warm until ``work`` ends (``pipeline.grade_stream``)."""
