"""The values-only codec both ends of the channel speak: a value as a JSON tree plus raw byte blobs.

Both sides import this file: the checker as ``autograder.sandbox.inside.codec``, the sandbox as a
top-level module (only this folder is visible inside it). It needs the standard library, and torch /
numpy when tensors or arrays cross; the framing that carries a tree and its blobs is ``wire.py``.

Values that cross by value: None, bool, int, float, complex, str, bytes, tuple, list, dict, set,
slice, Ellipsis, range, ``torch.Tensor`` / ``nn.Parameter`` (storage bytes + dtype, shape, stride,
storage offset, device, pinned flag, requires_grad, grad), ``numpy.ndarray`` / ``np.memmap`` and numpy
scalars, ``torch.dtype``, ``torch.device``, ``torch.Size``, ``numpy.dtype``. Anything else is sent as a
*handle* (``{"$": "ref", "id": ...}``) that the other side can only use through explicit requests.
How handles are made and resolved is the caller's business: ``Encoder`` takes a ``ref`` callback,
``Decoder`` a ``resolve`` callback. Nothing is ever unpickled or evaluated.
"""

from __future__ import annotations

import math
import pathlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same file, under the name mypy checks it by (this package's)
    from .wire import MAX_MESSAGE, NotPlainData, WireError
elif __package__:  # the trusted side: this package's module
    from .wire import MAX_MESSAGE, NotPlainData, WireError
else:  # inside the sandbox: a top-level module beside this one
    from wire import MAX_MESSAGE, NotPlainData, WireError

# The value vocabulary: every "$" tag a tree may carry, and what it stands for. Encoder produces
# them, Decoder accepts only them (anything else is a WireError); tests/test_wire_codec.py round-trips
# a value of each through a real socket.
TAGS: dict[str, str] = {
    "bigint": "an int of 64 bits or more (JSON numbers would lose digits)",
    "float": "a non-finite float: nan, inf, -inf",
    "complex": "a complex number",
    "bytes": "bytes, as a blob",
    "tuple": "a tuple", "list": "a list", "dict": "a dict (keys of any plain kind)",
    "set": "a set", "frozenset": "a frozenset",
    "slice": "a slice", "ellipsis": "Ellipsis", "range": "a range",
    "tensor": "a torch.Tensor / nn.Parameter: its storage as a blob plus the view's metadata",
    "dtype": "a torch.dtype", "device": "a torch.device", "size": "a torch.Size",
    "ndarray": "a numpy.ndarray or np.memmap", "npscalar": "a numpy scalar",
    "npdtype": "a numpy.dtype", "nptype": "a numpy scalar type (np.float32)",
    "path": "a pathlib path, or an absolute path string, with the file's bytes when attached",
    "ref": "a handle to an object that stays on the sender's side",
    "local": "a handle the receiver made itself, coming back",
}
MAX_DEPTH = 64
MAX_ITEMS = 1_000_000

_DTYPES = ("float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
           "float8_e4m3fnuz", "float8_e5m2fnuz", "complex64", "complex128", "int64", "int32",
           "int16", "int8", "uint8", "uint16", "uint32", "uint64", "bool")


def _torch():
    return sys.modules.get("torch")


def _numpy():
    return sys.modules.get("numpy")


def torch_dtype(name: str):
    """A torch dtype from its short name, only among the known numeric dtypes."""
    torch = _torch()
    if torch is None or name not in _DTYPES or not hasattr(torch, name):
        raise WireError(f"unknown dtype {name!r}")
    return getattr(torch, name)


def is_tensor(value: Any) -> bool:
    torch = _torch()
    return torch is not None and type(value) in (torch.Tensor, torch.nn.Parameter)


class Encoder:
    """Turns a value into a JSON tree plus blobs. ``ref(obj)`` returns the JSON of a handle for an
    object that does not cross by value (or raises ``NotPlainData``); ``tensor_hook(t)`` may return a
    JSON tree for a tensor (mirrors, aliases) or None for the default by-value encoding."""

    def __init__(self, ref: Callable[[Any], dict], tensor_hook: Callable[[Any], dict | None] | None = None,
                 max_bytes: int = MAX_MESSAGE,
                 attach_file: Callable[[str], bytes | None] | None = None) -> None:
        self.ref, self.tensor_hook, self.max_bytes = ref, tensor_hook, max_bytes
        self.attach_file = attach_file  # a path to a file the receiver must also have: its bytes
        self.blobs: list[bytes] = []
        self.size = 0
        self.items = 0

    def blob(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self.max_bytes:
            raise NotPlainData(f"value larger than {self.max_bytes // 2**20} MiB")
        self.blobs.append(data)
        return len(self.blobs) - 1

    def encode(self, value: Any, depth: int = 0) -> Any:
        self.items += 1
        if depth > MAX_DEPTH or self.items > MAX_ITEMS:
            raise NotPlainData("value nested too deeply or too many items")
        kind = type(value)
        if value is None or kind is bool:
            return value
        if kind is str:
            content = self.attach_file(value) if self.attach_file and value.startswith("/") else None
            if content is None:
                return value
            return {"$": "path", "v": value, "str": True, "file": self.blob(content)}
        if kind in (pathlib.PosixPath, pathlib.PurePosixPath):
            record: dict[str, Any] = {"$": "path", "v": str(value)}
            content = self.attach_file(str(value)) if self.attach_file else None
            if content is not None:
                record["file"] = self.blob(content)
            return record
        if kind is int:
            return value if abs(value) < 2**63 else {"$": "bigint", "v": str(value)}
        if kind is float:
            return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
        if kind is complex:
            return {"$": "complex", "v": [self.encode(value.real), self.encode(value.imag)]}
        if kind is bytes:
            return {"$": "bytes", "b": self.blob(value)}
        if kind is tuple:
            return {"$": "tuple", "v": [self.encode(v, depth + 1) for v in value]}
        if kind is list:
            return {"$": "list", "v": [self.encode(v, depth + 1) for v in value]}
        if kind is dict:
            return {"$": "dict", "k": [self.encode(k, depth + 1) for k in value],
                    "v": [self.encode(v, depth + 1) for v in value.values()]}
        if kind in (set, frozenset):
            return {"$": kind.__name__, "v": [self.encode(v, depth + 1) for v in value]}
        if kind is slice:
            return {"$": "slice", "v": [self.encode(value.start), self.encode(value.stop),
                                        self.encode(value.step)]}
        if value is Ellipsis:
            return {"$": "ellipsis"}
        if kind is range:
            return {"$": "range", "v": [value.start, value.stop, value.step]}
        torch, np = _torch(), _numpy()
        if torch is not None:
            if is_tensor(value):
                hooked = self.tensor_hook(value) if self.tensor_hook else None
                return hooked if hooked is not None else self.tensor(value, depth)
            if kind is torch.dtype:
                return {"$": "dtype", "v": str(value).removeprefix("torch.")}
            if kind is torch.device:
                return {"$": "device", "v": str(value)}
            if kind is torch.Size:
                return {"$": "size", "v": [int(v) for v in value]}
        if np is not None:
            if kind in (np.ndarray, np.memmap):
                return self.ndarray(value)
            if isinstance(value, np.generic) and kind.__module__ == "numpy" and value.dtype != object:
                return {"$": "npscalar", "dtype": value.dtype.str, "b": self.blob(value.tobytes())}
            if isinstance(value, np.dtype) and not value.hasobject:
                return {"$": "npdtype", "v": value.str}
            if isinstance(value, type) and issubclass(value, np.generic) and value is not np.object_ \
                    and value.__module__ == "numpy":
                return {"$": "nptype", "v": np.dtype(value).str}
        return self.ref(value)

    def tensor(self, t, depth: int = 0) -> dict:
        """A tensor by value: its whole storage as bytes plus the view's metadata."""
        torch = _torch()
        if t.layout != torch.strided or t.is_quantized or t.dtype.is_complex and t.is_conj():
            raise NotPlainData(f"tensor with layout {t.layout} cannot cross")
        name = str(t.dtype).removeprefix("torch.")
        if name not in _DTYPES:
            raise NotPlainData(f"tensor of dtype {t.dtype} cannot cross")
        record = {"$": "tensor", "dtype": name, "shape": list(t.shape), "stride": list(t.stride()),
                  "offset": t.storage_offset(), "device": str(t.device),
                  "requires_grad": bool(t.requires_grad), "param": type(t) is torch.nn.Parameter,
                  "pinned": bool(t.device.type == "cpu" and t.is_pinned())}
        if t.device.type == "meta":
            return record
        storage = t.detach().untyped_storage()
        if storage.nbytes() > self.max_bytes:
            raise NotPlainData(f"tensor storage of {storage.nbytes()} bytes is too large to cross")
        raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage)
        record["b"] = self.blob(raw.cpu().numpy().tobytes())
        if t.is_leaf and t.grad is not None and is_tensor(t.grad):
            record["grad"] = self.tensor(t.grad, depth + 1)
        return record

    def ndarray(self, a) -> dict:
        np = _numpy()
        if a.dtype.hasobject or a.dtype.fields is not None:
            raise NotPlainData(f"numpy array of dtype {a.dtype} cannot cross")
        if a.nbytes > self.max_bytes:
            raise NotPlainData(f"numpy array of {a.nbytes} bytes is too large to cross")
        return {"$": "ndarray", "dtype": a.dtype.str, "shape": list(a.shape),
                "memmap": isinstance(a, np.memmap), "writeable": bool(a.flags.writeable),
                "b": self.blob(np.ascontiguousarray(a).tobytes())}


class Decoder:
    """Rebuilds values from a JSON tree and blobs. ``resolve(tree)`` turns a handle's JSON into an
    object; ``tensor_hook(tree, tensor)`` may replace a decoded tensor (mirrors, aliases);
    ``memmap_dir`` is where a memmap's bytes are written back to a file (None: plain ndarray)."""

    def __init__(self, blobs: list[bytes], resolve: Callable[[dict], Any],
                 tensor_hook: Callable[[dict, Any], Any] | None = None,
                 memmap_dir: str | None = None, files_under: str | None = None,
                 budget: DecodeBudget | None = None) -> None:
        self.blobs, self.resolve, self.tensor_hook = blobs, resolve, tensor_hook
        self.memmap_dir = memmap_dir
        self.used: set[int] = set()
        self.files_under = files_under  # where attached files may be written (None: nowhere)
        self.budget = budget
        self.held = 0  # the bytes the values of this message stand for (a stride-0 view: all of them)

    def _hold(self, nbytes: int, what: str) -> None:
        """Count what a decoded value stands for against the budget (a 100-byte message must not make
        this side hold gigabytes, in memory now or when a check touches it)."""
        self.held += nbytes
        limit = self.budget.value_bytes if self.budget is not None else None
        if limit is not None and self.held > limit:
            raise WireError(f"{what} stands for {self.held} bytes; the values of one message may "
                            f"stand for at most {limit} (the notebook's memory limit)")

    def _write_to_disk(self, nbytes: int) -> None:
        if self.budget is not None:
            self.budget.spend_disk(nbytes)

    def blob(self, index: Any) -> bytes:
        """Blob ``index``, once: a message that refers to one blob twice is refused (its bytes would
        be decoded, copied or written to disk once per reference)."""
        if type(index) is not int or not 0 <= index < len(self.blobs):
            raise WireError("bad blob index")
        if index in self.used:
            raise WireError("a blob is referred to twice")
        self.used.add(index)
        return self.blobs[index]

    def decode(self, tree: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise WireError("value nested too deeply")
        if tree is None or type(tree) in (bool, int, float, str):
            return tree
        if type(tree) is list:  # never produced by Encoder: refuse rather than guess
            raise WireError("bare list in a message")
        if type(tree) is not dict:
            raise WireError(f"unexpected JSON {type(tree).__name__}")
        kind = tree.get("$")
        if kind not in TAGS:
            raise WireError(f"unknown value kind {kind!r}")
        sub = lambda v: self.decode(v, depth + 1)  # noqa: E731
        if kind == "bigint":
            return int(tree["v"])
        if kind == "float":
            if tree["v"] not in ("nan", "inf", "-inf"):
                raise WireError("bad float")
            return float(tree["v"])
        if kind == "complex":
            return complex(*(float(sub(v)) for v in tree["v"]))
        if kind == "bytes":
            return self.blob(tree["b"])
        if kind == "tuple":
            return tuple(sub(v) for v in _list(tree["v"]))
        if kind == "list":
            return [sub(v) for v in _list(tree["v"])]
        if kind == "dict":
            keys, values = _list(tree["k"]), _list(tree["v"])
            if len(keys) != len(values):
                raise WireError("dict keys and values differ in length")
            return {sub(k): sub(v) for k, v in zip(keys, values, strict=True)}
        if kind in ("set", "frozenset"):
            items = (sub(v) for v in _list(tree["v"]))
            return set(items) if kind == "set" else frozenset(items)
        if kind == "slice":
            return slice(*(sub(v) for v in _list(tree["v"])))
        if kind == "ellipsis":
            return Ellipsis
        if kind == "range":
            return range(*(int(v) for v in _list(tree["v"])))
        if kind == "tensor":
            tensor = self.tensor(tree)
            return self.tensor_hook(tree, tensor) if self.tensor_hook else tensor
        if kind == "dtype":
            return torch_dtype(tree["v"])
        if kind == "device":
            return _torch().device(str(tree["v"]))
        if kind == "size":
            return _torch().Size(int(v) for v in _list(tree["v"]))
        if kind == "ndarray":
            return self.ndarray(tree)
        if kind == "npscalar":
            np = _numpy()
            return np.frombuffer(self.blob(tree["b"]), dtype=np.dtype(str(tree["dtype"])))[0]
        if kind == "npdtype":
            return _numpy().dtype(str(tree["v"]))
        if kind == "nptype":
            return _numpy().dtype(str(tree["v"])).type
        if kind == "path":
            path = str(tree["v"])
            if "file" in tree:
                self.write_file(path, self.blob(tree["file"]))
            return path if tree.get("str") else pathlib.Path(path)
        if kind in ("ref", "local"):
            return self.resolve(tree)
        raise WireError(f"unknown value kind {kind!r}")

    def write_file(self, path: str, data: bytes) -> None:
        """Recreate a file the sender's value names, if it lies where this side may write."""
        import os

        root = self.files_under
        target = os.path.normpath(path)
        if root is None or not target.startswith(root.rstrip("/") + "/"):
            return
        self._write_to_disk(len(data))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if os.path.islink(target):
            os.unlink(target)
        with open(target, "wb") as out:
            out.write(data)

    def tensor(self, tree: dict):
        torch = _torch()
        dtype = torch_dtype(tree["dtype"])
        shape, stride = [int(v) for v in tree["shape"]], [int(v) for v in tree["stride"]]
        offset, device = int(tree["offset"]), torch.device(str(tree["device"]))
        if ("alias" in tree or "mirror" in tree) and "b" not in tree:
            return None  # a tensor (or a view of one) the decoder already holds: see tensor_hook
        self._hold(_elements(shape) * dtype.itemsize, f"a tensor of shape {shape}")
        if device.type == "meta":
            t = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
        else:
            data = self.blob(tree["b"])
            needed = _bytes_needed(shape, stride, offset, dtype.itemsize)
            if needed > len(data):
                raise WireError(f"a tensor of shape {shape}, stride {stride} and offset {offset} "
                                f"needs {needed} bytes; its blob has {len(data)}")
            raw = torch.frombuffer(bytearray(data), dtype=torch.uint8) \
                if data else torch.empty(0, dtype=torch.uint8)
            storage = raw.untyped_storage()
            t = torch.empty(0, dtype=dtype).set_(storage, offset, shape, stride)
            if device.type != "cpu":
                t = _to_device_keeping_layout(t, device)
            elif tree.get("pinned") and torch.cuda.is_available():
                t = t.pin_memory()
        if tree.get("param"):
            t = torch.nn.Parameter(t, requires_grad=bool(tree.get("requires_grad")))
        elif tree.get("requires_grad") and (t.is_floating_point() or t.is_complex()):
            t.requires_grad_(True)
        if tree.get("grad") is not None and t.requires_grad:
            t.grad = self.tensor(tree["grad"])
        return t

    def ndarray(self, tree: dict):
        np = _numpy()
        dtype = np.dtype(str(tree["dtype"]))
        if dtype.hasobject:
            raise WireError("object arrays cannot cross")
        shape = tuple(int(v) for v in tree["shape"])
        self._hold(_elements(list(shape)) * dtype.itemsize, f"an array of shape {list(shape)}")
        data = self.blob(tree["b"])
        if tree.get("memmap") and self.memmap_dir is not None:
            import tempfile

            self._write_to_disk(len(data))

            handle, path = tempfile.mkstemp(dir=self.memmap_dir, suffix=".memmap")
            with open(handle, "wb") as out:
                out.write(data)
            if not data:  # an empty file cannot be mapped
                return np.zeros(shape, dtype=dtype)
            return np.memmap(path, dtype=dtype, mode="r+" if tree.get("writeable") else "r",
                             shape=shape)
        array = np.frombuffer(data, dtype=dtype).reshape(shape).copy()
        array.flags.writeable = bool(tree.get("writeable", True))
        return array


def _elements(shape: list[int]) -> int:
    count = 1
    for n in shape:
        count *= max(0, n)
    return count


class DecodeBudget:
    """What one notebook's values may cost the side that decodes them: ``value_bytes`` per message
    (what its tensors and arrays stand for), ``disk_bytes`` in all (memmaps and files written back);
    None: no limit."""

    def __init__(self, value_bytes: int | None, disk_bytes: int | None) -> None:
        self.value_bytes, self.disk_left = value_bytes, disk_bytes
        self.disk_limit = disk_bytes

    def spend_disk(self, nbytes: int) -> None:
        if self.disk_left is None:
            return
        if nbytes > self.disk_left:
            raise WireError(f"the submission's values would write more than {self.disk_limit} bytes "
                            "to the checker's disk for this notebook (the notebook's memory limit)")
        self.disk_left -= nbytes


def _bytes_needed(shape: list[int], stride: list[int], offset: int, itemsize: int) -> int:
    """The storage bytes a strided view reaches (0 for an empty one); refuses what no tensor has."""
    if len(shape) != len(stride) or offset < 0 or any(n < 0 for n in shape) \
            or any(st < 0 for st in stride):
        raise WireError("a tensor with a negative size, stride or offset, or mismatched ranks")
    if any(n == 0 for n in shape):
        return 0
    return (offset + sum((n - 1) * st for n, st in zip(shape, stride, strict=True)) + 1) * itemsize


def _to_device_keeping_layout(t, device):
    """Move a CPU view to ``device`` keeping its storage layout (stride and offset)."""
    torch = _torch()
    storage = torch.empty(0, dtype=torch.uint8).set_(t.untyped_storage()).to(device)
    return torch.empty(0, dtype=t.dtype, device=device).set_(
        storage.untyped_storage(), t.storage_offset(), t.shape, t.stride())


def _list(value: Any) -> list:
    if type(value) is not list or len(value) > MAX_ITEMS:
        raise WireError("expected a list")
    return value


def exception_record(error: BaseException, traceback_lines: list[str] | None = None) -> dict:
    """An exception as plain data: type name, the names of its classes, message, traceback text."""
    mro = [f"{c.__module__}.{c.__qualname__}" for c in type(error).__mro__]
    try:
        message = str(error)
    except Exception:  # noqa: BLE001 - a hostile __str__
        message = "<unprintable exception>"
    return {"type": type(error).__name__, "mro": mro[:20], "message": message[:20_000],
            "traceback": [str(line)[:20_000] for line in (traceback_lines or [])][-50:]}
