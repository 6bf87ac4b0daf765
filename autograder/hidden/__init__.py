"""Hidden checks: the grading logic called from the hidden-test regions of the exercise sources.

Each topic module (strides, einops_checks, flops, adagrad, get_batch, mixed_precision) offers plain
functions ``check_<thing>(student_fn_or_class, ...)``. They draw random shapes and values (the seed is
printed on failure), compare against torch itself and raise ``HiddenCheckFailed`` (an AssertionError)
whose notebook traceback is the message alone, so feedback never shows check source. GPU checks ask
``_gpu.gpu_device(...)`` for a device and raise ``NeedsGPU`` when there is none (README: "The GPU rule").

Submodules are imported by name (``from autograder.hidden import strides``) so that a notebook only
loads what it grades.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, typed
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

# name -> the submodule that defines it; loaded on first use (PEP 562), so that importing
# ``autograder.hidden._feedback`` (nbgrader_config.py does, in every grading parent) loads no torch
_DEFINED_IN = {
    "CheckRandom": "_base", "HiddenCheckFailed": "_base", "expect": "_base",
    "expect_equal": "_base", "hidden_check": "_base", "is_instance": "_base",
    "is_subclass": "_base", "student_module": "_base", "NeedsGPU": "_gpu", "gpu_device": "_gpu",
}


def __getattr__(name: str) -> Any:
    if name not in _DEFINED_IN:
        raise AttributeError(f"module 'autograder.hidden' has no attribute {name!r}")
    return getattr(importlib.import_module(f"autograder.hidden.{_DEFINED_IN[name]}"), name)


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
