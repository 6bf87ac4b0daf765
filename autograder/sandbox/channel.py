"""The checker's end of the channel (trusted side): requests to the student's process, values only between.

``SandboxChannel`` talks to one sandboxed student process (``inside/student_server.py``) over a
``SOCK_SEQPACKET`` socket with ``wire`` messages. Grade cells run here, in the trusted checker, and reach
what the student defined through it:

- plain data (numbers, strings, tuples/lists/dicts, tensors, arrays) arrives as a fresh local value;
  a tensor that is a view of one the checker passed in arrives as a view of the checker's own tensor;
- anything else arrives as a ``Remote`` handle (``handles.py``, with the errors that cross back and
  the offers): its every use is a request sent here;
- a tensor the checker passes in is *mirrored*: the sandbox keeps one object for it across calls, and
  every message carries the changes of either side (an optimizer that updates parameters in place,
  a ``.grad`` the checker sets before ``step()``);
- the channel is default-deny toward the sandbox: nothing but plain values crosses, except a checker
  object a hidden check wraps explicitly in a ``protocol.Offer`` (``call_only``, ``sequence_only``):
  the student's code may do with it exactly what the offer allows, and gets plain values back. A
  module, class, function or object of the checker is refused by the encoder, whoever sends it.

An exception raised in the sandbox arrives as ``handles.RemoteError``. Nothing from the sandbox is
unpickled or evaluated here.
"""

from __future__ import annotations

import os
import socket
import time
import types
import weakref
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from autograder.sandbox import deadlines
from autograder.sandbox.handles import (
    Remote,
    RemoteError,
    SandboxDied,
    mirror_seeding,
    offer_callback,
    refused_kind,
    remote_error,
)
from autograder.sandbox.inside import codec, protocol, wire
from autograder.sandbox.inside.protocol import (
    ExitHow,
    Failure,
    Kind,
    Offer,
    Op,
    call_only,
    sequence_only,
)
from autograder.sandbox.inside.shell import CellTimeoutError

# what a grade cell's checker reaches through ``channel`` (the handles and offers are handles.py's)
__all__ = ["Offer", "Remote", "RemoteError", "SandboxChannel", "SandboxDied", "call_only",
           "mirror_seeding", "sequence_only"]


class SandboxChannel:
    """The checker's connection to one sandboxed student process."""

    def __init__(self, data: socket.socket, kill: socket.socket, *, memmap_dir: str,
                 decode_bytes: int | None = None) -> None:
        self.data, self.kill_sock, self.memmap_dir = data, kill, memmap_dir
        # what the student's values may cost this side (codec.DecodeBudget; None: no limit)
        self.budget = codec.DecodeBudget(decode_bytes, decode_bytes)
        self.deadline: float | None = None  # monotonic time the current cell must end by
        self.dead: SandboxDied | None = None
        self.next_request = 1
        self.handles: dict[int, weakref.ref[Remote]] = {}
        self._released: list[int] = []
        self._released_mirrors: list[int] = []
        # mirror id -> (tensor, snapshot)
        self.mirrors: dict[int, tuple[weakref.ref[Any], protocol.Snapshot]] = {}
        self.mirror_of: dict[int, int] = {}  # id(tensor) -> mirror id
        self.next_mirror = 1
        self.locals: dict[int, Any] = {}  # checker objects the sandbox may call back
        self._grade_cell_offers: dict[int, tuple[Any, protocol.Offer]] = {}  # id -> (function, offer)
        # callback(outputs) for what the student's code printed
        self.on_outputs: Callable[[list[dict[str, Any]]], None] | None = None
        self.before_request: Callable[[], None] | None = None  # run before each grade-cell request
        self._syncing = False

    # ---- the requests grade cells make

    def run_cell(self, source: str,
                 timeout: float | None) -> tuple[list[dict[str, Any]], int | None]:
        result = self.request(Op.CELL, source=source, timeout=timeout, raw=True)
        outputs = result.get("cell_outputs") if isinstance(result, dict) else None
        if not isinstance(outputs, list):
            raise SandboxDied("the submission's process answered a cell with something else")
        count = result.get("count")
        return [_clean_output(o) for o in outputs[:1001]], count if type(count) is int else None

    def bind_names(self, deleted: list[str], bound: dict[str, Any]) -> None:
        """Delete ``deleted`` from the student's namespace and set ``bound`` there (plain data by
        value, the student's own objects by handle, checker functions as callbacks)."""
        self.request(Op.NAMESPACE, names=sorted(deleted), value=dict(bound))

    def new_files(self) -> tuple[dict[str, bytes], list[str]]:
        """The files the notebook wrote in its folder since the last call, and those left out."""
        found = self.request(Op.FILES, raw=True)
        if not isinstance(found, dict) or not isinstance(found.get("files"), dict):
            return {}, []
        files = {str(k): v for k, v in found["files"].items() if type(v) is bytes}
        left = [str(p) for p in found.get("left_out", [])][:100] if isinstance(
            found.get("left_out"), list) else []
        return files, left

    def lookup(self, names: list[str]) -> dict[str, Any]:
        found = self.request(Op.LOOKUP, names=sorted(names), raw=True)
        return {k: v for k, v in found.items() if k in names} if isinstance(found, dict) else {}

    def module(self, name: str) -> Any:
        """The sandbox's own module ``name`` (e.g. to seed its ``torch`` before a call)."""
        return self.request(Op.MODULE, name=name, raw=True)

    def kill(self, reason: str, ename: str = Failure.KERNEL_DIED) -> None:
        if self.dead is None:
            self.dead = SandboxDied(reason, ename)
        try:
            self.kill_sock.send(b"k")
        except OSError:
            pass

    # ---- the protocol

    def request(self, op: Op, *, raw: bool = False, timeout: float | None = None,
                **fields: Any) -> Any:
        if self.dead is not None:
            raise self.dead
        if self.before_request is not None and not self._syncing and op != Op.RELEASE:
            self._syncing = True
            try:
                self.before_request()
            finally:
                self._syncing = False
        remaining = None if self.deadline is None else max(self.deadline - time.monotonic(), 0.05)
        if timeout is not None:
            remaining = timeout if remaining is None else min(timeout, remaining)
        request_id, self.next_request = self.next_request, self.next_request + 1
        encoder = self._encoder()
        # a protocol.Request, with the operation's own fields
        header: dict[str, Any] = {"kind": Kind.REQUEST, "id": request_id, "op": op,
                                  "timeout": remaining}
        for key, value in fields.items():
            header[key] = value if key in protocol.RAW_FIELDS else encoder.encode(value)
        if self._released or self._released_mirrors:
            self._send_release()
        header["sync"] = self._sync_out(encoder)
        self._send(header, encoder.blobs)
        return self._wait(request_id, remaining)

    def _send_release(self) -> None:
        released, self._released = self._released, []
        mirrors, self._released_mirrors = self._released_mirrors, []
        release: protocol.Request = {"kind": Kind.REQUEST, "id": 0, "op": Op.RELEASE,
                                     "ids": released, "mirrors": mirrors,
                                     "sync": protocol.empty_sync()}
        self._send(release, [])

    def _send(self, header: Mapping[str, Any], blobs: list[bytes]) -> None:
        try:
            wire.send(self.data, header, blobs)
        except wire.WireError as error:
            self._died_with(f"the submission's process stopped answering ({error})")

    def _wait(self, request_id: int, remaining: float | None) -> Any:
        wait_s = deadlines.channel_wait_s(remaining)  # the sandbox's alarm, then its grace
        limit = None if wait_s is None else time.monotonic() + wait_s
        while True:
            wait = None if limit is None else limit - time.monotonic()
            if wait is not None and wait <= 0:
                self._died_with("a cell ran past its time limit and did not stop when interrupted; "
                                "the submission's process was killed", Failure.CELL_TIMEOUT)
            try:
                header, blobs = wire.recv(self.data, timeout=wait)
            except TimeoutError:
                continue
            except wire.WireError as error:
                self._died_with(f"the submission's process broke the channel ({error})")
            kind = header.get("kind")
            if kind == Kind.EXITED:
                self._died_with(_exit_reason(header.get("status")), _exit_ename(header.get("status")))
            if kind == Kind.REQUEST:  # the student's code calls a checker object back
                self._answer_callback(header, blobs)
                continue
            if kind != Kind.REPLY or header.get("id") != request_id:
                continue  # a stale reply to a request abandoned after a timeout
            return self._result(header, blobs)

    def _died_with(self, reason: str, ename: str = Failure.KERNEL_DIED) -> NoReturn:
        self.kill(reason, ename)
        assert self.dead is not None  # kill() sets it
        raise self.dead

    def _result(self, header: dict[str, Any], blobs: list[bytes]) -> Any:
        decoder = self._decoder(blobs)
        self._apply_sync(decoder, header)
        outputs = header.get("outputs")
        if outputs and self.on_outputs is not None:
            self.on_outputs([_clean_output(o) for o in outputs if isinstance(o, dict)])
        if "error" in header:
            raise remote_error(header["error"] if isinstance(header["error"], dict) else {})
        return decoder.decode(header.get("value"))

    # ---- callbacks: the sandbox calls a checker object

    def _answer_callback(self, header: dict[str, Any], blobs: list[bytes]) -> None:
        reply: protocol.Reply = {"kind": Kind.REPLY, "id": header.get("id")}
        encoder = self._encoder()
        try:
            decoder = self._decoder(blobs)
            self._apply_sync(decoder, header)
            handle = header.get("target")
            target = self.locals.get(handle) if handle is not None else None
            if target is None:
                raise LookupError("no such grader object")
            reply["value"] = encoder.encode(offer_callback(target, str(header.get("op")), decoder,
                                                      header))
        except (CellTimeoutError, SandboxDied):
            raise
        except Exception as error:  # noqa: BLE001 - the check's own failure, reported to the caller
            reply = {"kind": Kind.REPLY, "id": header.get("id"),
                     "error": {"type": type(error).__name__, "message": str(error)[:2000]}}
            encoder = self._encoder()
        reply["sync"] = self._sync_out(encoder)
        self._send(reply, encoder.blobs)

    # ---- encoding

    def _ref(self, obj: Any) -> dict[str, Any]:
        """Default-deny: a value that is not plain data crosses only as the student's own handle
        (``Remote``) or as an explicit ``protocol.Offer``; a module, class, function or any other
        checker object is refused here, whatever sends it."""
        if isinstance(obj, Remote):
            if obj._sandbox is not self:
                raise wire.NotPlainData("a handle from another sandbox")
            return {"$": "ref", "id": obj._handle}
        if isinstance(obj, types.FunctionType) and obj.__module__ == "__main__":
            # a function a grade cell defined (nbgrader hands it over live, e.g. an optimizer's
            # closure): it crosses call-only, plain values in and out, as if wrapped in call_only
            obj = self._grade_cell_offers.setdefault(id(obj), (obj, protocol.call_only(obj)))[1]
        if type(obj) is protocol.Offer:
            handle = id(obj)
            self.locals[handle] = obj
            return {"$": "local", "id": handle, "callable": "call" in obj.operations}
        raise wire.NotPlainData(
            f"a {refused_kind(obj)} cannot be handed to the submission's code: only plain values cross "
            "(numbers, strings, bytes, tuples/lists/dicts of them, tensors, arrays); a hidden check "
            "that must pass a function wraps it in protocol.call_only")

    def _mirror_gone(self, mirror: int, key: int) -> Callable[[weakref.ref[Any]], None]:
        def forget(_ref: weakref.ref[Any]) -> None:
            self.mirrors.pop(mirror, None)
            if self.mirror_of.get(key) == mirror:
                self.mirror_of.pop(key, None)
            self._released_mirrors.append(mirror)  # the sandbox sends it by value from now on
        return forget

    def _attach_file(self, path: str) -> bytes | None:
        """A file under the checker's temporary folder travels with a path that names it (a grade
        cell that writes a token file and passes its path to the student's loader)."""
        real = os.path.realpath(path)
        if not real.startswith(self.memmap_dir.rstrip("/") + "/") or not os.path.isfile(real):
            return None
        if os.path.getsize(real) > 64 * 2**20:
            return None
        with open(real, "rb") as handle:
            return handle.read()

    def _encoder(self) -> codec.Encoder:
        encoder = codec.Encoder(self._ref, attach_file=self._attach_file)

        def tensor_hook(t: Any) -> dict[str, Any]:
            mirror = self.mirror_of.get(id(t))
            if mirror is None or self.mirrors.get(mirror, (lambda: None,))[0]() is not t:
                mirror, self.next_mirror = self.next_mirror, self.next_mirror + 1
                self.mirror_of[id(t)] = mirror
                self.mirrors[mirror] = (weakref.ref(t, self._mirror_gone(mirror, id(t))), ())
            record = encoder.tensor(t)
            record["mirror"] = mirror
            self.mirrors[mirror] = (self.mirrors[mirror][0], protocol.snapshot(t))
            return record

        encoder.tensor_hook = tensor_hook
        return encoder

    def _decoder(self, blobs: list[bytes]) -> codec.Decoder:
        return codec.Decoder(blobs, self._resolve, self._tensor_in, memmap_dir=self.memmap_dir,
                             budget=self.budget)

    def _resolve(self, tree: dict[str, Any]) -> Any:
        if tree.get("$") == "local":
            raise wire.WireError("the sandbox cannot send back grader objects")
        handle = tree.get("id")
        if not isinstance(handle, int):
            raise wire.WireError("bad handle")
        known = self.handles.get(handle)
        proxy = known() if known is not None else None
        if proxy is None:  # one proxy per handle: the handle is released when it is collected
            proxy = Remote(self, tree)
            self.handles[handle] = weakref.ref(proxy)
        return proxy

    def _tensor_in(self, tree: dict[str, Any], tensor: Any) -> Any:
        mirror = tree.get("mirror", tree.get("alias"))
        if mirror is None:
            return tensor
        entry = self.mirrors.get(mirror)
        held = entry[0]() if entry else None
        if entry is None or held is None:
            if tensor is None:
                raise wire.WireError("reference to a tensor the grader no longer holds")
            return tensor  # a tensor the checker let go of: a plain value now
        if "alias" in tree:  # a view of the checker's own tensor: a view of it here too
            import torch

            dtype = codec.torch_dtype(tree["dtype"])
            return torch.empty(0, dtype=dtype, device=held.device).set_(
                held.untyped_storage(), int(tree["offset"]), [int(v) for v in tree["shape"]],
                [int(v) for v in tree["stride"]])
        if tensor is not None:  # a sync: the sandbox changed it
            protocol.assign(held, tensor)
            self.mirrors[mirror] = (entry[0], protocol.snapshot(held))
        return held

    def _apply_sync(self, decoder: codec.Decoder, message: dict[str, Any]) -> None:
        for mirror, tree in protocol.sync_entries(message):
            if mirror in self.mirrors:
                decoder.decode(dict(tree, mirror=mirror))

    def _sync_out(self, encoder: codec.Encoder) -> protocol.Sync:
        sync = protocol.empty_sync()
        for mirror, (ref, before) in list(self.mirrors.items()):
            t = ref()
            if t is not None and not protocol.unchanged(t, before):
                sync["ids"].append(mirror)
                sync["trees"].append(encoder.tensor(t))
                self.mirrors[mirror] = (ref, protocol.snapshot(t))
        return sync


def _clean_output(output: dict[str, Any]) -> dict[str, Any]:
    """An output as the sandbox reported it, reduced to the nbformat fields with plain types."""
    kind = output.get("output_type")
    if kind == "stream":
        return {"output_type": "stream", "name": "stderr" if output.get("name") == "stderr"
                else "stdout", "text": str(output.get("text", ""))[:1_000_000]}
    if kind == "error":
        return {"output_type": "error", "ename": str(output.get("ename", "Error"))[:200],
                "evalue": str(output.get("evalue", ""))[:20_000],
                "traceback": [str(t)[:20_000] for t in output.get("traceback", [])][:100]}
    if kind in ("display_data", "execute_result"):
        found = output.get("data")
        data: dict[Any, Any] = found if isinstance(found, dict) else {}
        clean: dict[str, Any] = {
            "output_type": kind,
            "data": {str(k): v if isinstance(v, str) else str(v) for k, v in data.items()},
            "metadata": {}}
        if kind == "execute_result":
            count = output.get("execution_count")
            clean["execution_count"] = count if type(count) is int else None
        return clean
    return {"output_type": "stream", "name": "stderr", "text": "(an output the grader dropped)\n"}


def _exit_reason(status: Any) -> str:
    status = status if isinstance(status, dict) else {}
    how = status.get("how")
    if how == ExitHow.MEMORY:
        return (f"memory use {status.get('rss', 0) / 2**30:.2f} GiB passed the limit of "
                f"{status.get('limit', 0) / 2**30:.2f} GiB; the submission's process was stopped")
    if how == ExitHow.PROCESSES:
        return (f"{status.get('count')} processes and threads passed the limit of "
                f"{status.get('limit')}; the submission's process was stopped")
    if how == ExitHow.SIGNAL:
        import signal

        try:
            name = signal.Signals(int(status.get("signal", 0))).name
        except ValueError:
            name = f"signal {status.get('signal')}"
        extra = " (often the system running out of memory)" if name == "SIGKILL" else ""
        extra = " (its CPU-time limit)" if name == "SIGXCPU" else extra
        return f"the submission's process was killed by {name}{extra}"
    if how == ExitHow.KILLED:
        return "the submission's process was stopped by the grader"
    return f"the submission's process exited with code {status.get('code')}"


def _exit_ename(status: Any) -> str:
    how = status.get("how") if isinstance(status, dict) else None
    return Failure.MEMORY if how == ExitHow.MEMORY else Failure.KERNEL_DIED
