"""Grading pipeline: sanitize -> execute -> check -> score -> record (see ``pipeline.py``).

``grade``, ``GradeSummary`` and ``SubmissionResult`` load the pipeline on first use: the warm template
and a Slurm array task import modules of this package without paying for nbformat and nbgrader.
"""

__all__ = ["GradeSummary", "SubmissionResult", "grade"]


def __getattr__(name: str):
    if name in __all__:
        from autograder.grading import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
