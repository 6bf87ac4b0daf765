"""The grading engine (trusted side): plan -> sanitize -> execute -> check -> score -> record.

``pipeline.py`` reads top to bottom; ``options.py`` holds every setting; ``model.py`` the data;
``prepare.py`` and ``record.py`` the steps before and after execution; ``nbgrader_seam.py`` nbgrader's
own preprocessors and the one place its gradebook is patched; the executors — ``local.py``,
``slurm/`` (over the generic ``remote/`` layer) and ``as_submitted.py`` — are siblings registered in
``executor.py``; ``execute/`` is how a notebook runs on any machine.

The public names below are the whole API the rest of ``autograder`` uses (an import-linter contract
keeps the other modules out of the engine's internals). They load on first use: the warm template and a
Slurm array task import modules of this package without paying for nbformat and nbgrader.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, typed (``X as X``: exported); at run time they load on first use
    from autograder.grading.execute.confine import CHECKER_UID as CHECKER_UID
    from autograder.grading.execute.confine import code_folders as code_folders
    from autograder.grading.execute.confine import confine as confine
    from autograder.grading.execute.forkserver import probe_forkserver as probe_forkserver
    from autograder.grading.executor import executor_class as executor_class
    from autograder.grading.model import GradeSummary as GradeSummary
    from autograder.grading.model import SubmissionResult as SubmissionResult
    from autograder.grading.options import GradeOptions as GradeOptions
    from autograder.grading.pipeline import grade as grade
    from autograder.grading.pipeline import grade_stream as grade_stream
    from autograder.grading.prepare import gpu_cells as gpu_cells
    from autograder.grading.preview import preview_regrade as preview_regrade
    from autograder.grading.record import read_run_record as read_run_record

_PUBLIC = {
    "grade": "autograder.grading.pipeline",
    "preview_regrade": "autograder.grading.preview",  # whose total a regrade would change (scratch copy)
    "grade_stream": "autograder.grading.pipeline",  # the service worker: warm sandboxes, one by one
    "GradeOptions": "autograder.grading.options",
    "executor_class": "autograder.grading.executor",  # what an executor declares (streams, executes)
    "GradeSummary": "autograder.grading.model",
    "SubmissionResult": "autograder.grading.model",
    "read_run_record": "autograder.grading.record",  # the autograder's note on a graded submission
    "gpu_cells": "autograder.grading.prepare",  # an assignment's GPU-only grade cells
    "probe_forkserver": "autograder.grading.execute.forkserver",  # torch/CUDA as a grading child sees it
    "confine": "autograder.grading.execute.confine",  # the checker's own view (doctor tries it)
    "code_folders": "autograder.grading.execute.confine",
    "CHECKER_UID": "autograder.grading.execute.confine",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    if name in _PUBLIC:
        return getattr(import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
