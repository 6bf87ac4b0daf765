"""Imported once by the warm template process (never by a grading child): pay the import costs of the
libraries the exercises use, so every forked child starts with them loaded.

Nothing here may initialise CUDA or start threads (a forked child must be able to create its own CUDA
context and thread pools): the only tensors touched live on the ``meta`` device, which runs no kernels.
"""

from __future__ import annotations

import importlib

import beartype  # noqa: F401
import einops  # noqa: F401
import jaxtyping  # noqa: F401
import numpy  # noqa: F401
import torch
from IPython.core.interactiveshell import InteractiveShell  # noqa: F401
from torch.utils.flop_counter import FlopCounterMode


def _warm_flop_counter() -> None:
    """The first FlopCounterMode use imports torch._dynamo, sympy and more (about a second)."""
    with FlopCounterMode(display=False):
        torch.ones(2, 3, device="meta") @ torch.ones(3, 4, device="meta")


_warm_flop_counter()
assert not torch.cuda.is_initialized(), "the warm template must not initialise CUDA"

# the checker runs the hidden checks: import them here too, once (each exercise's, from course.toml)
import autograder.sandbox.channel  # noqa: E402,F401
from autograder.course import manifest  # noqa: E402
from autograder.sandbox.inside import shell  # noqa: E402

for _exercise in manifest.course().exercises:
    importlib.import_module(f"autograder.hidden.{_exercise.hidden}")
shell.warm_up()  # a failing check's first traceback; last: inspect maps every module imported above
