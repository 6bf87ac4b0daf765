"""Grading pipeline: sanitize -> execute -> check -> score -> record (see ``pipeline.py``)."""

from autograder.grading.pipeline import GradeSummary, SubmissionResult, grade

__all__ = ["GradeSummary", "SubmissionResult", "grade"]
