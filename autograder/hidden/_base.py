"""Shared machinery for hidden checks: seeding, short failure messages, hidden frames.

A hidden check is written as

    @hidden_check("contiguous_strides")
    def check_contiguous_strides(contiguous_strides, *, rng: CheckRandom) -> None:
        shape = rng.shape(max_dims=4)
        expect_equal(tuple(contiguous_strides(shape)), torch.empty(shape).stride(),
                     f"contiguous_strides({shape})")

and called from a notebook as ``check_contiguous_strides(contiguous_strides)`` (optionally ``seed=...``).
The wrapper draws a seed (``AUTOGRADER_SEED`` if set, else fresh randomness), hands the check a seeded
``CheckRandom``, and turns any failure into ``HiddenCheckFailed("<what>: <message> [seed N]")``:
an AssertionError from the check keeps its message; any other exception came from the student's code
and is reported as "raised <Type>: <message>". ``NeedsGPU`` passes through unchanged.

In IPython (and so in nbgrader's kernels) both exception types render as their message alone
(``_render_traceback_``), so a failed hidden check never shows check source or the calling line.
"""

from __future__ import annotations

import functools
import os
import random
import secrets
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch

from autograder.hidden._gpu import NeedsGPU

SEED_ENV = "AUTOGRADER_SEED"

F = TypeVar("F", bound=Callable[..., Any])


class HiddenCheckFailed(AssertionError):
    """A hidden check rejected the student's code; the message says what was expected and what came."""

    def _render_traceback_(self) -> list[str]:  # IPython hook: show the message, no frames
        return [f"{type(self).__name__}: {self}"]


class CheckRandom(random.Random):
    """A seeded ``random.Random`` with the few draws the checks share."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.seed_value = seed

    def shape(self, *, min_dims: int = 1, max_dims: int = 4, max_size: int = 6,
              allow_zero: bool = False) -> tuple[int, ...]:
        """A random shape; sizes in [1, max_size] (or [0, max_size] with ``allow_zero``)."""
        low = 0 if allow_zero else 1
        return tuple(self.randint(low, max_size) for _ in range(self.randint(min_dims, max_dims)))

    def generator(self, device: str | torch.device = "cpu") -> torch.Generator:
        """A torch generator seeded from this stream (tensors reproducible from the printed seed)."""
        return torch.Generator(device=device).manual_seed(self.getrandbits(62))

    def randn(self, *shape: int, dtype: torch.dtype = torch.float32,
              device: str | torch.device = "cpu") -> torch.Tensor:
        return torch.randn(shape, generator=self.generator(), dtype=dtype).to(device)


def expect(condition: bool, message: str) -> None:
    """Fail the check with ``message`` unless ``condition`` holds (works under ``python -O`` too)."""
    if not condition:
        raise AssertionError(message)


def expect_equal(got: Any, expected: Any, what: str) -> None:
    """Fail with "<what>: expected <expected>, got <got>" unless ``got == expected``."""
    if not _equal(got, expected):
        raise AssertionError(f"{what}: expected {expected!r}, got {got!r}")


def _equal(got: Any, expected: Any) -> bool:
    if isinstance(expected, torch.Tensor) or isinstance(got, torch.Tensor):
        return (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor)
                and got.shape == expected.shape and bool(torch.equal(got, expected)))
    if isinstance(expected, Sequence) and not isinstance(expected, str):
        return (isinstance(got, Sequence) and not isinstance(got, str)
                and len(got) == len(expected) and all(map(_equal, got, expected)))
    if isinstance(got, bool) != isinstance(expected, bool):  # True must not pass for 1
        return False
    try:
        return bool(got == expected)
    except Exception:  # noqa: BLE001 - an uncomparable answer is simply wrong
        return False


def _remote_names(obj: Any, *, of_class: bool) -> list[str] | None:
    """The class names a sandbox handle reports (None when ``obj`` is a local object)."""
    names = getattr(type(obj), "remote_class_mro" if of_class else "remote_mro", None)
    if names is None or not hasattr(obj, "_sandbox"):
        return None
    return obj.remote_class_mro if of_class else obj.remote_mro


def is_instance(obj: Any, cls: type) -> bool:
    """``isinstance`` that also works on a handle to an object in the student's sandbox (by the
    class names the sandbox reports: it can claim any name, so use it for messages, not for trust)."""
    names = _remote_names(obj, of_class=False)
    if names is None:
        return isinstance(obj, cls)
    return f"{cls.__module__}.{cls.__qualname__}" in names


def is_subclass(obj: Any, cls: type) -> bool:
    """``isinstance(obj, type) and issubclass(obj, cls)``, also for a handle to a class in the sandbox."""
    names = _remote_names(obj, of_class=True)
    if names is None:
        return isinstance(obj, type) and issubclass(obj, cls)
    return f"{cls.__module__}.{cls.__qualname__}" in (names or [])


def student_module(student: Any, name: str) -> Any:
    """The module ``name`` as the student's code sees it: in the sandbox when ``student`` is a handle
    to sandboxed code (e.g. to seed its ``torch`` or read its allocator), else this process's own.
    ``"drivers"`` is ``autograder/sandbox/inside/drivers.py``, the observers that run next to the student's
    code (they report, the checks decide)."""
    sandbox = getattr(student, "_sandbox", None)
    if sandbox is not None and hasattr(type(student), "remote_mro"):
        return sandbox.module(name)
    if name == "drivers":
        from autograder.sandbox.inside import drivers

        return drivers
    import importlib

    return importlib.import_module(name)


def offered(student: Any, offer: Any) -> Any:
    """What a hidden check hands ``student``'s code that is not plain data: the explicit
    ``protocol.Offer`` (``call_only``, ``sequence_only``) when ``student`` is a handle to sandboxed
    code — the channel refuses anything else — and the bare object when it runs here (a unit test)."""
    return offer if hasattr(type(student), "remote_mro") else offer.target


def draw_seed() -> int:
    """``AUTOGRADER_SEED`` when set (reproduce a reported failure), else a fresh random seed."""
    env = os.environ.get(SEED_ENV)
    if env:
        try:
            return int(env)
        except ValueError:
            raise ValueError(f"{SEED_ENV} must be an integer, got {env!r}") from None
    return secrets.randbelow(2**31)


def hidden_check(what: str) -> Callable[[F], F]:
    """Decorate ``check(student, ..., *, rng)`` into ``check(student, ..., seed=None)`` (see module doc)."""

    def decorate(check: F) -> F:
        @functools.wraps(check)
        def run(*args: Any, seed: int | None = None, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # noqa: F841 - read by pytest/IPython to hide this frame
            used_seed = draw_seed() if seed is None else int(seed)
            try:
                return check(*args, rng=CheckRandom(used_seed), **kwargs)
            except NeedsGPU:
                raise
            except AssertionError as error:
                message = str(error) or "check failed"
            except Exception as error:  # noqa: BLE001 - the student's code raised
                message = f"raised {type(error).__name__}: {error}"
            raise HiddenCheckFailed(f"{what}: {message} [seed {used_seed}]") from None

        return run  # type: ignore[return-value]

    return decorate
