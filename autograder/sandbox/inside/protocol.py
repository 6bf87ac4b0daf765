"""The checker <-> sandbox protocol: ONE vocabulary both sides import.

Runs on both sides of the trust boundary: the trusted checker imports it as
``autograder.sandbox.inside.protocol`` (``autograder/sandbox/channel.py``), the sandboxed student
process as a top-level module next to ``kernel.py`` (bubblewrap mounts only this folder). Standard
library only; torch is imported lazily, where a mirrored tensor is touched.

A message is a ``wire`` message (JSON header + raw blobs). Its header is one of the ``TypedDict`` s
below, told apart by ``kind``; a request names its operation with ``op``. Every request and every reply
carries a ``sync`` block: the mirrored tensors (tensors the checker passed in, which both sides hold)
that changed on the sender's side since the last message, so in-place updates travel both ways.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, TypedDict


class Kind(StrEnum):
    """What a message is."""

    REQUEST = "request"  # checker -> sandbox (or sandbox -> checker: a call back into a checker object)
    REPLY = "reply"  # the answer to the request with the same ``id``
    EXITED = "exited"  # the sandbox template -> checker: the notebook's process is gone (``status``)
    READY = "ready"  # control socket: the template has imported torch and waits for jobs
    DONE = "done"  # control socket: the template finished a job and cleaned up after it


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


# what FILES hands back at most (the rest is left out, and said so)
FILE_BYTES, FILES_BYTES, FILES_COUNT = 16 * 2**20, 64 * 2**20, 1000

# request fields sent as plain JSON; every other field is a ``wire``-encoded value
RAW_FIELDS = frozenset({"target", "name", "source", "names"})


class Sync(TypedDict):
    ids: list[int]  # mirror ids
    trees: list[dict]  # the tensors' wire trees, in the same order


class Request(TypedDict, total=False):
    kind: Literal["request"]
    id: int
    op: str  # an ``Op``
    timeout: float | None  # seconds the sandbox has for it (its per-cell clock)
    sync: Sync
    # operation fields: target (handle id), name, source, names (raw); args, kwargs, key, value, item
    # (wire trees); ids, mirrors (RELEASE)


class Reply(TypedDict, total=False):
    kind: Literal["reply"]
    id: int
    value: Any  # a wire tree
    error: dict  # ``wire.exception_record``: type, mro, message, traceback
    outputs: list[dict]  # what the student's code printed or displayed while answering
    sync: Sync


class Exited(TypedDict):
    kind: Literal["exited"]
    status: dict  # how (an ``ExitHow``), code / signal / rss / limit / count, seconds


class Job(TypedDict):
    """What the host sends the template for one notebook (control socket, with the two sockets)."""

    id: int
    env: dict[str, str]  # the student process's environment additions
    threads: int  # torch threads
    student_rss_bytes: int | None  # the template's watchdog on the notebook's resident memory
    rlimits: dict[str, int | None]  # RLIMIT_<NAME> of the notebook's process: as, fsize, nproc, cpu, core


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


def signature(t: Any) -> tuple:
    """What changes when a mirrored tensor (or its gradient) is modified, replaced or resized: a
    tensor whose signature differs from the one last sent goes into the next sync block."""
    grad = t.grad if t.is_leaf else None
    return (t._version, t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype, t.device,
            id(grad), grad._version if grad is not None else None)


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
