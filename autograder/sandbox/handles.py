"""The student's objects as the checker holds them (trusted side): ``Remote`` handles, the errors that
cross back, the seeding mirrored into the student's process, and what a checker object offered to the
student's code may do.

- anything that is not plain data arrives from the sandbox as a ``Remote`` handle: calling it, reading
  an attribute, indexing, iterating are requests to the sandbox (``channel.SandboxChannel.request``).
  A handle never compares equal to anything and has no truth value — so an object that claims to
  equal everything earns nothing (``NotPlainData``);
- an exception raised in the sandbox arrives as ``RemoteError`` (type name and message), made an
  instance of the same-named class when that class is a known, harmless one (builtins, jaxtyping,
  beartype, torch), so a grade cell's ``except TypeCheckError`` keeps working; nothing from the sandbox
  is unpickled or evaluated here;
- ``mirror_seeding``: seeding a global generator in the checker seeds the student's process too;
- ``offer_callback``: a checker object a hidden check wraps in a ``protocol.Offer`` may be used by the
  student's code exactly as the offer allows, and answers with plain values only.

The channel itself — the requests, the replies, the mirrored tensors' sync — is ``channel.py``.
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Iterator
from typing import Any, NoReturn, Protocol, cast

from autograder.sandbox.inside import codec, protocol
from autograder.sandbox.inside.protocol import Failure, Op
from autograder.sandbox.inside.shell import CellTimeoutError

_KNOWN_ERROR_MODULES = ("builtins", "jaxtyping", "beartype.roar", "torch", "numpy")


class SandboxDied(Exception):
    """The student's process is gone (its own doing, a limit, or a timeout it did not honour)."""

    def __init__(self, reason: str, ename: str = Failure.KERNEL_DIED) -> None:
        super().__init__(reason)
        self.reason, self.ename = reason, ename

    def _render_traceback_(self) -> list[str]:
        return [f"{self.ename}: {self.reason}"]


class RemoteError(Exception):
    """An exception raised by the student's code in the sandbox (type name + message only)."""

    remote_type = "Exception"

    def _render_traceback_(self) -> list[str]:
        return [f"{self.remote_type}: {self}"]


class NotPlainData(TypeError):
    """A handle was used where plain data is needed (compared, tested for truth, hashed by value)."""


_error_classes: dict[tuple[str, ...], type[RemoteError]] = {}


def _error_class(record: dict[str, Any]) -> type[RemoteError]:
    """A RemoteError subclass that is also the first known class among the remote exception's bases."""
    mro = tuple(str(name) for name in record.get("mro", []))[:20]
    cls = _error_classes.get(mro)
    if cls is not None:
        return cls
    base: type = Exception
    for name in mro:
        module, _, qualname = name.rpartition(".")
        if module not in _KNOWN_ERROR_MODULES and not module.startswith(("torch.", "jaxtyping.")):
            continue
        found = sys.modules.get(module)  # only modules the checker already imported: no new imports
        try:
            for part in qualname.split("."):
                found = getattr(found, part)
        except AttributeError:
            continue
        if isinstance(found, type) and issubclass(found, Exception) and found is not Exception:
            base = found
            break
    name = str(record.get("type", "Exception"))[:100] or "Exception"
    try:
        cls = _new_error_class(name, (RemoteError, base) if base is not Exception
                               else (RemoteError,))
    except TypeError:  # an incompatible layout (some C exception types): keep the plain one
        cls = _new_error_class(name, (RemoteError,))
    _error_classes[mro] = cls
    return cls


def _new_error_class(name: str, bases: tuple[type, ...]) -> type[RemoteError]:
    # three-argument type() is typed as returning a plain ``type``; bases[0] is RemoteError
    namespace = {"remote_type": name, "__module__": "sandbox"}
    return cast("type[RemoteError]", type(name, bases, namespace))


def remote_error(record: dict[str, Any]) -> BaseException:
    if record.get("type") == Failure.CELL_TIMEOUT:
        return CellTimeoutError(record.get("message", "time limit"))
    cls = _error_class(record)
    error = cls.__new__(cls)
    Exception.__init__(error, str(record.get("message", "")))
    return error


class Requests(Protocol):
    """What a handle needs of its channel (``channel.SandboxChannel``; named by shape, not imported:
    the channel imports this module)."""

    dead: SandboxDied | None
    handles: dict[int, weakref.ref[Remote]]
    _released: list[int]

    def request(self, op: Op, *, raw: bool = False, timeout: float | None = None,
                **fields: Any) -> Any: ...

    def module(self, name: str) -> Any: ...


class Remote:
    """A handle to an object that lives in the sandbox (a function, a class, an instance, ...)."""

    __slots__ = ("_sandbox", "_handle", "_info", "__weakref__")

    def __init__(self, sandbox: Requests, info: dict[str, Any]) -> None:
        object.__setattr__(self, "_sandbox", sandbox)
        object.__setattr__(self, "_handle", int(info["id"]))
        object.__setattr__(self, "_info", info)

    # what the handle can do: each is one request
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._sandbox.request(Op.CALL, target=self._handle, args=args, kwargs=kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._sandbox.request(Op.GETATTR, target=self._handle, name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        self._sandbox.request(Op.SETATTR, target=self._handle, name=name, value=value)

    def __delattr__(self, name: str) -> None:
        self._sandbox.request(Op.DELATTR, target=self._handle, name=name)

    def __getitem__(self, key: Any) -> Any:
        return self._sandbox.request(Op.GETITEM, target=self._handle, key=key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._sandbox.request(Op.SETITEM, target=self._handle, key=key, value=value)

    def __len__(self) -> int:
        value = self._sandbox.request(Op.LEN, target=self._handle)
        if type(value) is not int or value < 0:
            raise NotPlainData(f"len() of {self.remote_type} is not a non-negative int")
        return value

    def __iter__(self) -> Iterator[Any]:
        items = self._sandbox.request(Op.ITER, target=self._handle)
        if type(items) is not list:
            raise NotPlainData(f"iterating {self.remote_type} gave no list")
        return iter(items)

    def __contains__(self, item: object) -> bool:
        return self._sandbox.request(Op.CONTAINS, target=self._handle, item=item) is True

    def __repr__(self) -> str:
        try:
            text = self._sandbox.request(Op.REPR, target=self._handle)
        except Exception:  # noqa: BLE001 - a broken __repr__ is the student's
            text = None
        return text if type(text) is str else f"<{self.remote_type} object>"

    def __str__(self) -> str:
        return self.__repr__()

    # what it cannot do: behave like plain data
    def _not_plain(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotPlainData(f"a {self.remote_type} object from the submission is not plain data "
                           "(numbers, strings, tuples, lists, dicts, tensors): it cannot be compared "
                           "or tested here")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = _not_plain
    __index__ = __int__ = __float__ = __complex__ = _not_plain

    def __hash__(self) -> int:
        return object.__hash__(self)

    @property
    def remote_type(self) -> str:
        return str(self._info.get("type", "object"))

    @property
    def remote_mro(self) -> list[str]:
        return [str(n) for n in self._info.get("mro") or []]

    @property
    def remote_class_mro(self) -> list[str] | None:
        mro = self._info.get("class_mro")
        return [str(n) for n in mro] if mro else None

    def __del__(self) -> None:
        try:
            self._sandbox.handles.pop(self._handle, None)
            self._sandbox._released.append(self._handle)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def mirror_seeding(sandbox: Requests) -> None:
    """Seeding a global generator in the checker (``torch.manual_seed(0)`` in a grade cell) seeds the
    student's process the same way, as it would in a single kernel."""
    import random

    import numpy
    import torch

    def mirrored(owner: Any, name: str, module: str, attribute: str) -> None:
        original = getattr(owner, name)

        def seed(value: Any = None, *args: Any, **kwargs: Any) -> Any:
            result = original(value, *args, **kwargs)
            if sandbox.dead is None:
                target = sandbox.module(module)
                for part in attribute.split("."):
                    target = getattr(target, part)
                target(value)
            return result

        setattr(owner, name, seed)

    mirrored(torch, "manual_seed", "torch", "manual_seed")
    mirrored(numpy.random, "seed", "numpy", "random.seed")
    mirrored(random, "seed", "random", "seed")


def refused_kind(obj: Any) -> str:
    """What an object is, in a word, for a refusal (never its repr: that would run its code)."""
    import types

    if isinstance(obj, types.ModuleType):
        return "module"
    if isinstance(obj, type):
        return "class"
    if callable(obj):
        return "function"
    return f"{type(obj).__name__} object"


_CALLBACK_OPERATION: dict[str, str] = {Op.LOCAL_CALL: "call", Op.LOCAL_GETITEM: "getitem",
                                       Op.LOCAL_LEN: "len", Op.LOCAL_ITER: "getitem"}


def offer_callback(offer: protocol.Offer, op: str, decoder: codec.Decoder, header: dict[str, Any]) -> Any:
    """What the student's code may do with a grader object: exactly what its ``Offer`` allows
    (call it, index it, take its length, read a plain attribute from the offer's snapshot). Every
    answer goes back through the default-deny encoder: plain values only."""
    if op == Op.LOCAL_GETATTR:
        name = str(header.get("name"))
        if name not in offer.attributes:
            raise AttributeError(f"{name} is not available to the submission")
        return offer.attributes[name]
    allowed = _CALLBACK_OPERATION.get(op)
    if allowed is None:
        raise ValueError(f"unknown callback {op!r}")
    if allowed not in offer.operations:
        raise TypeError(f"this grader object does not allow {allowed}")
    target = offer.target
    if op == Op.LOCAL_CALL:
        args = decoder.decode(header.get("args"))
        kwargs = decoder.decode(header.get("kwargs"))
        return target(*args, **{str(k): v for k, v in kwargs.items()})
    if op == Op.LOCAL_GETITEM:
        return target[decoder.decode(header.get("key"))]
    if op == Op.LOCAL_LEN:
        return len(target)
    return list(iter(target))
