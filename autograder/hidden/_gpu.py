"""The GPU rule for hidden checks (README, "The GPU rule"): GPU checks never pass silently on a CPU machine.

``gpu_device(what)``:
- CUDA available                      -> ``torch.device("cuda")``;
- no CUDA and AUTOGRADER_ALLOW_CPU=1  -> ``torch.device("cpu")`` after one loud printed line;
- no CUDA otherwise                   -> raises ``NeedsGPU`` (the grade cell scores 0; every step after
  grading reads it as "not run: no GPU", ``autograder.machine_limits``, never as the student's failure).

Its message is what the student reads in feedback: in the student's words, naming no grader flag
(translated through ``locales/<lang>/messages.po`` like every test message).
"""

from __future__ import annotations

import os

import torch

from autograder import ALLOW_CPU_ENV


class NeedsGPU(RuntimeError):
    """A GPU-only check ran where there is no CUDA device and CPU grading was not allowed.

    ``str(error)`` is the student's sentence; ``error.what`` names the check for staff."""

    def __init__(self, message: str, what: str = "") -> None:
        super().__init__(message)
        self.what = what

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""

    def _render_traceback_(self) -> list[str]:  # IPython hook: show the reason, no frames
        return [f"{type(self).__name__}: {self}"]


def cpu_allowed() -> bool:
    """True when the grader asked for GPU checks to run on CPU (``--allow-cpu``)."""
    return os.environ.get(ALLOW_CPU_ENV, "") == "1"


def gpu_device(what: str) -> torch.device:
    """The device a GPU check of ``what`` runs on, following the GPU rule (module docstring)."""
    if torch.cuda.is_available():
        return torch.device("cuda")
    if cpu_allowed():
        print(f"GPU check ran on CPU ({ALLOW_CPU_ENV}=1): {what}", flush=True)
        return torch.device("cpu")
    message = ("Not run: this check needs a GPU and the grading machine had none; "
               "the course staff will grade it on a GPU.")
    raise NeedsGPU(message, what)
