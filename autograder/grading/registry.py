"""The executors by name (trusted side): ``--executor``'s choices and where each one lives.

Data only, so that the settings (``options.py``) can list the names without importing an executor;
``executor.executor_class`` imports the one a run chooses.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExecutorEntry:
    """One registered executor: its class as ``module:Class`` (constructed with the run's
    ``GradeOptions`` and ``Course``) and one line for ``--executor``'s help."""

    target: str
    help: str


EXECUTORS: dict[str, ExecutorEntry] = {
    "local": ExecutorEntry("autograder.grading.local:LocalExecutor", "this machine's sandboxes"),
    "slurm": ExecutorEntry("autograder.grading.slurm.executor:SlurmExecutor", "a Slurm job array"),
    "as-submitted": ExecutorEntry("autograder.grading.as_submitted:AsSubmittedExecutor",
                                  "nothing runs, the outputs as submitted are scored: --no-execute"),
}
