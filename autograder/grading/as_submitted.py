"""The as-submitted executor (trusted side): nbgrader's ``--no-execute``, nothing runs.

Each notebook's outcome is the outputs it was submitted with; the pipeline then checks and scores
them as it would an executed notebook (``executes = False`` also turns off clearing the outputs).
"""

from __future__ import annotations

from collections.abc import Iterator

from autograder.course.nbgrader import Course
from autograder.errors import GradingError
from autograder.grading.executor import Outcomes
from autograder.grading.model import NotebookOutcome, Submission
from autograder.grading.options import GradeOptions
from autograder.grading.prepare import DeviceProbe
from autograder.grading.progress import ProgressBar


class AsSubmittedExecutor:
    """``executor="as-submitted"`` (``--no-execute``)."""

    name = "as-submitted"
    streams = False
    executes = False

    def __init__(self, options: GradeOptions, course: Course) -> None:
        del options, course  # nothing to set up

    def probe(self) -> DeviceProbe:
        return DeviceProbe(cuda_available=False, torch_version="(not executed)", cuda_version=None)

    def close(self) -> None:
        """Nothing to release."""

    def execute(self, work: Iterator[Submission | None], outcomes: Outcomes, *, device_used: str,
                progress: ProgressBar, timings: dict[str, float]) -> None:
        for submission in work:
            if submission is None:  # streams = False: the pipeline never hands this one a stream
                raise GradingError("--no-execute grades batches, not a stream")
            for nb_run in submission.notebooks:
                outputs = {i: ([dict(o) for o in cell.outputs], cell.execution_count)
                           for i, cell in enumerate(nb_run.nb.cells) if cell.cell_type == "code"}
                outcomes.executed(submission, nb_run.name,
                                  NotebookOutcome(outputs=outputs, executed=False))
