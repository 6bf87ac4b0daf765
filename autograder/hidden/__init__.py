"""Hidden checks: the grading logic called from the hidden-test regions of the exercise sources.

Each topic module (strides, einops_checks, flops, adagrad, get_batch, mixed_precision) offers plain
functions ``check_<thing>(student_fn_or_class, ...)``. They draw random shapes and values (the seed is
printed on failure), compare against torch itself and raise ``HiddenCheckFailed`` (an AssertionError)
whose notebook traceback is the message alone, so feedback never shows check source. GPU checks ask
``_gpu.gpu_device(...)`` for a device and raise ``NeedsGPU`` when there is none (README: "The GPU rule").

Submodules are imported by name (``from autograder.hidden import strides``) so that a notebook only
loads what it grades.
"""

from autograder.hidden._base import (
    CheckRandom,
    HiddenCheckFailed,
    expect,
    expect_equal,
    hidden_check,
    is_instance,
    is_subclass,
    student_module,
)
from autograder.hidden._gpu import NeedsGPU, gpu_device

__all__ = [
    "CheckRandom",
    "HiddenCheckFailed",
    "NeedsGPU",
    "expect",
    "expect_equal",
    "gpu_device",
    "hidden_check",
    "is_instance",
    "is_subclass",
    "student_module",
]
