"""The GPU rule for hidden checks (README, "The GPU rule"): GPU checks never pass silently on a CPU machine.

``gpu_device(what)``:
- CUDA available                      -> ``torch.device("cuda")``;
- no CUDA and AUTOGRADER_ALLOW_CPU=1  -> ``torch.device("cpu")`` after one loud printed line;
- no CUDA otherwise                   -> raises ``NeedsGPU`` (the grade cell scores 0 with that reason).
"""

from __future__ import annotations

import os

import torch

from autograder import ALLOW_CPU_ENV


class NeedsGPU(RuntimeError):
    """A GPU-only check ran where there is no CUDA device and CPU grading was not allowed."""

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
    raise NeedsGPU(
        f"needs a GPU runner: {what} (no CUDA device here; "
        "grade with --allow-cpu to run on CPU)"
    )
