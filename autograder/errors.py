"""The autograder's exceptions: each names the file, submission or argument at fault and what was expected."""

from __future__ import annotations


class AutograderError(Exception):
    """Base class: a problem the instructor can fix (bad input, missing setup); the CLI prints it and exits 1."""


class CourseError(AutograderError):
    """The course root is not an nbgrader course this tool can use (no config, no gradebook entry, ...)."""


class CollectError(AutograderError):
    """A file offered to ``collect`` is not a notebook of the assignment, or would overwrite a submission."""


class DeviceError(AutograderError):
    """The requested device cannot be used, or a GPU assignment would be graded on CPU without --allow-cpu."""


class GradingError(AutograderError):
    """Grading could not start (the submissions themselves never raise this: their failures are data)."""


class GraderFault(GradingError):
    """The grading machine failed before any of the student's code ran (the sandbox died at start,
    an instructor's set-up cell hung or died): never a score. Nothing is recorded; the service grades
    the submission again in a fresh sandbox."""


class PublishError(AutograderError):
    """The student edition cannot be written (a leak, a destination holding other files, a setting),
    or the leak check cannot read what it was given."""


class SlurmError(AutograderError):
    """Slurm refused a submission, or a run's folder is in use by another run."""


class ReleaseError(AutograderError, RuntimeError):
    """A source or a release step is not what the release pipeline expects (message names the file).
    Also a RuntimeError, as it was before it joined this hierarchy."""


class SampleError(AutograderError, ValueError):
    """A catalogue or replacement does not fit the assignment (the message says which and why).
    Also a ValueError, as it was before it joined this hierarchy."""
