"""The checker <-> sandbox protocol: ONE vocabulary both sides import.

Runs on both sides of the trust boundary: the trusted checker imports it as
``autograder.sandbox.inside.protocol`` (``autograder/sandbox/channel.py``), the sandboxed student
process as a top-level module next to ``template.py`` (bubblewrap mounts only this folder). Standard
library only; torch is imported lazily, where a mirrored tensor is touched.

A message is a ``wire`` message (JSON header + raw blobs). Its header is one of the ``TypedDict`` s
below, told apart by ``kind``; a request names its operation with ``op``. Every request and every reply
carries a ``sync`` block: the mirrored tensors (tensors the checker passed in, which both sides hold)
that changed on the sender's side since the last message, so in-place updates travel both ways.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict


class Kind(StrEnum):
    """What a message is."""

    REQUEST = "request"  # checker -> sandbox (or sandbox -> checker: a call back into a checker object)
    REPLY = "reply"  # the answer to the request with the same ``id``
    EXITED = "exited"  # the sandbox template -> checker: the notebook's process is gone (``status``)
    READY = "ready"  # control socket: the template has imported torch and waits for launches
    DONE = "done"  # control socket: the template finished a launch and cleaned up after it


class Op(StrEnum):
    """The operations of a request."""

    # checker -> sandbox
    CELL = "cell"  # run a student or instructor cell (``source``)
    LOOKUP = "lookup"  # the values of ``names`` in the student's namespace
    MODULE = "module"  # the sandbox's module ``name`` (a handle), e.g. to seed its torch
    RELEASE = "release"  # the checker let go of handles ``ids`` and mirrors ``mirrors``
    NAMESPACE = "namespace"  # a grade cell deleted ``names`` and bound ``value`` (a dict)
    FILES = "files"  # the regular files the notebook wrote in its folder since the last FILES
    CALL = "call"
    GETATTR = "getattr"
    SETATTR = "setattr"
    DELATTR = "delattr"
    GETITEM = "getitem"
    SETITEM = "setitem"
    LEN = "len"
    ITER = "iter"
    CONTAINS = "contains"
    REPR = "repr"
    STR = "str"
    BOOL = "bool"
    # sandbox -> checker: the student's code uses a checker object it was given (a closure)
    LOCAL_CALL = "local_call"
    LOCAL_GETITEM = "local_getitem"
    LOCAL_LEN = "local_len"
    LOCAL_ITER = "local_iter"
    LOCAL_GETATTR = "local_getattr"


class ExitHow(StrEnum):
    """How a notebook's process ended (``Exited.status["how"]``)."""

    EXITED = "exited"
    SIGNAL = "signal"
    KILLED = "killed"  # the checker asked
    MEMORY = "memory"  # past ``student_rss_bytes``
    PROCESSES = "processes"  # past the task limit


class Failure(StrEnum):
    """Why a cell or a notebook did not finish: the ``ename`` of the error output the autograded
    notebook shows there (nbgrader's own names where it has one)."""

    CELL_TIMEOUT = "CellTimeoutError"  # a cell past its limit (sandbox/deadlines.py)
    NOTEBOOK_TIMEOUT = "NotebookTimeoutError"  # the notebook past its limit
    MEMORY = "MemoryLimitExceeded"  # past the notebook's memory limit
    KERNEL_DIED = "KernelDied"  # the notebook's process ended (nbgrader's "kernel died")
    GRADER = "GraderError"  # the checker itself could not run (its confinement failed)


# what FILES hands back at most (the rest is left out, and said so)
FILE_BYTES, FILES_BYTES, FILES_COUNT = 16 * 2**20, 64 * 2**20, 1000

# the fresh tmpfs of every notebook (mount point -> bytes; isolation.py), unless its NotebookLaunch says otherwise
NOTEBOOK_TMPFS_BYTES = {"/tmp": 512 * 2**20, "/sandbox-work": 512 * 2**20, "/dev/shm": 256 * 2**20}

# request fields sent as plain JSON; every other field is a ``wire``-encoded value
RAW_FIELDS = frozenset({"target", "name", "source", "names"})


class Sync(TypedDict):
    ids: list[int]  # mirror ids
    trees: list[dict]  # the tensors' wire trees, in the same order


class Request(TypedDict, total=False):
    kind: Literal[Kind.REQUEST]
    id: int
    op: str  # an ``Op``
    timeout: float | None  # seconds the sandbox has for it (its per-cell clock)
    sync: Sync
    # operation fields: target (handle id), name, source, names (raw); args, kwargs, key, value, item
    # (wire trees); ids, mirrors (RELEASE)
    ids: list[int]
    mirrors: list[int]


class Reply(TypedDict, total=False):
    kind: Literal[Kind.REPLY]
    id: int | None  # the request's, echoed back (None: a request that had none)
    value: Any  # a wire tree
    error: dict  # ``codec.exception_record``: type, mro, message, traceback
    outputs: list[dict]  # what the student's code printed or displayed while answering
    sync: Sync


class Exited(TypedDict):
    kind: Literal[Kind.EXITED]
    status: dict  # how (an ``ExitHow``), code / signal / rss / limit / count, seconds


class NotebookLaunch(TypedDict):
    """What the host sends the template for one notebook (control socket, with the two sockets)."""

    id: int
    env: dict[str, str]  # the student process's environment additions
    threads: int  # torch threads
    student_rss_bytes: int | None  # the template's watchdog on the notebook's resident memory
    rlimits: dict[str, int | None]  # RLIMIT_<NAME> of the notebook's process: as, fsize, nproc, cpu, core
    # the notebook's fresh folders and their sizes (absent or empty: ``NOTEBOOK_TMPFS_BYTES``)
    tmpfs: NotRequired[dict[str, int]]
    # the exercise's forbidden implementations, taken out of the notebook's process (``removal.py``)
    removed: NotRequired[list[Removal]]


class Removal(TypedDict):
    """One forbidden implementation to remove: the rule's sentence, the modules whose code goes, and
    the dispatcher operators (``aten::name``) that get a raising kernel."""

    message: str
    modules: list[str]
    ops: list[str]


def empty_sync() -> Sync:
    return {"ids": [], "trees": []}


def sync_entries(message: dict) -> list[tuple[int, dict]]:
    """The (mirror id, tree) pairs of a message's sync block (malformed entries are dropped)."""
    block = message.get("sync")
    if not isinstance(block, dict):
        return []
    ids, trees = block.get("ids"), block.get("trees")
    if not isinstance(ids, list) or not isinstance(trees, list):
        return []
    return [(mirror, tree) for mirror, tree in zip(ids, trees, strict=False)
            if type(mirror) is int and isinstance(tree, dict)]


class Offer:
    """A checker object offered to the student's code, and exactly what that code may do with it.

    The channel is default-deny: only plain values cross toward the sandbox (``wire``'s list). A
    hidden check that must hand the student's code something live — a function to call back, a
    dataset that counts its reads — wraps it in an ``Offer``; nothing else is ever sent as a handle.
    The sandbox may use only ``operations`` (``call``, ``getitem``, ``len``) and read only the
    ``attributes`` snapshot (plain values taken when the offer is made); every answer is plain data
    again. No attribute walk, no ``__self__``, no module, class or frame is reachable through it."""

    __slots__ = ("target", "operations", "attributes")

    OPERATIONS = frozenset({"call", "getitem", "len"})

    def __init__(self, target: Any, operations: set[str] | frozenset[str],
                 attributes: dict[str, Any] | None = None) -> None:
        unknown = set(operations) - self.OPERATIONS
        if unknown:
            raise ValueError(f"an Offer allows only {sorted(self.OPERATIONS)}, not {sorted(unknown)}")
        self.target, self.operations = target, frozenset(operations)
        self.attributes = dict(attributes or {})

    def __repr__(self) -> str:
        return f"<grader object: {', '.join(sorted(self.operations))}>"


def call_only(function: Any) -> Offer:
    """``function`` as the student's code may use it: called with plain values, answering plain values."""
    if not callable(function):
        raise TypeError(f"call_only needs a callable, got {type(function).__name__}")
    return Offer(function, {"call"})


def sequence_only(obj: Any, attributes: tuple[str, ...] = ()) -> Offer:
    """``obj`` as a read-only sequence for the student's code: ``len`` and ``[...]``, plus a snapshot
    of the named plain attributes (``shape``, ``dtype``, ...)."""
    return Offer(obj, {"getitem", "len"}, {name: getattr(obj, name) for name in attributes})


# What a mirrored tensor is at one moment, compared by content (not by torch's version counter,
# which ``p.data.add_``, ``.data`` assignments and some fused kernels leave unchanged): its layout and
# identity, and a copy of its storage bytes (and its gradient's), on the tensor's own device.
Snapshot: TypeAlias = tuple[Any, ...]


def _raw_bytes(t: Any) -> Any:
    import torch

    if t.device.type == "meta":
        return None
    storage = t.detach().untyped_storage()
    return torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage).clone()


def _layout(t: Any) -> tuple:
    return (t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype, t.device,
            t.requires_grad)


def snapshot(t: Any) -> Snapshot:
    """The state of mirrored tensor ``t`` now (see ``unchanged``)."""
    grad = t.grad if t.is_leaf else None
    return (_layout(t), _raw_bytes(t), id(grad),
            None if grad is None else (_layout(grad), _raw_bytes(grad)))


def unchanged(t: Any, before: Snapshot | None) -> bool:
    """Whether ``t`` (and its gradient) has the layout, identity and bytes it had at ``before``: a
    tensor that changed in any way goes into the next sync block."""
    if not before:
        return False
    now_grad = t.grad if t.is_leaf else None
    layout, raw, grad_id, grad = before
    if _layout(t) != layout or id(now_grad) != grad_id or not _same_bytes(t, raw):
        return False
    if now_grad is None:
        return grad is None
    return grad is not None and _layout(now_grad) == grad[0] and _same_bytes(now_grad, grad[1])


def _same_bytes(t: Any, raw: Any) -> bool:
    import torch

    if raw is None:
        return t.device.type == "meta"
    storage = t.detach().untyped_storage()
    if storage.nbytes() != raw.numel():
        return False
    current = torch.empty(0, dtype=torch.uint8, device=t.device).set_(storage)
    return bool(torch.equal(current, raw))


def assign(held: Any, new: Any) -> None:
    """Make ``held`` (a tensor both sides know) take the value, layout and gradient of ``new``."""
    import torch

    with torch.no_grad():
        if held.shape == new.shape and held.dtype == new.dtype and held.device == new.device:
            held.copy_(new)
        else:
            held.data = new.detach()
    if held.is_leaf and held.requires_grad:
        held.grad = new.grad
    elif held.is_leaf and new.requires_grad and not held.requires_grad:
        held.requires_grad_(True)
