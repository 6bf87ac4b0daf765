"""The student process's server: runs the notebook's cells, keeps the student's objects and answers
the checker's requests with plain values (``StudentServer``); the checker-side objects the checker
passes in cross back as ``CheckerObject`` handles the student's code may call.

The sandbox template (``template.py``) forks one student process per notebook, which applies its
limits and then serves the checker with ``StudentServer(data, workdir).serve()`` until the checker
is done. Runs inside the sandbox only (untrusted side); nothing trusted imports it.
"""

from __future__ import annotations

import importlib
import os
import socket
import stat
import sys
import traceback
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same files, under the names mypy checks them by (this package's)
    from . import codec, drivers, protocol, shell, wire
    from .protocol import Kind, Op
else:
    import codec
    import drivers  # loaded from this read-only folder, never from a notebook's folder
    import protocol
    import shell
    import wire
    from protocol import Kind, Op

MAX_REPR = 2000
MAX_ITER = 100_000


def _file_stamps(folder: str) -> dict[str, tuple[int, int]]:
    """Relative path -> (size, mtime) of the regular files below ``folder`` (links not followed;
    the student server's own output captures left out)."""
    stamps = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and not name.startswith(".autograder-fd"):
                stamps[os.path.relpath(path, folder)] = (st.st_size, st.st_mtime_ns)
    return stamps


class StudentServer:
    """Serves one checker: runs cells, keeps the student's objects, answers requests with values."""

    def __init__(self, sock: socket.socket, workdir: str) -> None:
        self.sock = sock
        self.capture = shell.FdCapture(workdir)
        self.recorder = shell.Recorder()
        sys.stdout = shell.CellStream(self.recorder, "stdout")
        sys.stderr = shell.CellStream(self.recorder, "stderr")
        self.shell = shell.make_shell(self.recorder)
        self.clock = shell.CellClock()
        self.objects: dict[int, Any] = {}  # handle id -> object the checker holds a handle to
        self.ids: dict[int, int] = {}  # id(object) -> handle id
        self.mirrors: dict[int, Any] = {}  # mirror id -> tensor the checker also holds
        self.snapshots: dict[int, tuple] = {}  # mirror id -> its state when last sent
        self.depth = 0
        self.next_id = 1
        self.next_request = 1
        self.workdir = workdir
        self.files_seen = _file_stamps(workdir)  # the companion files, as the template wrote them
        self.files_sent = 0

    # ---- messages

    def serve(self) -> None:
        while True:
            try:
                header, blobs = wire.recv(self.sock)
            except wire.ChannelClosed:
                return
            if header.get("kind") == Kind.REQUEST:
                self._answer(header, blobs)

    def _answer(self, header: dict, blobs: list[bytes]) -> None:
        self.depth += 1
        outer = self.depth == 1
        if outer:
            self.recorder.clear()
            self.shell_timeout = header.get("timeout")
            shell.CellClock.start(self.shell_timeout)
        reply: dict[str, Any] = {"kind": Kind.REPLY, "id": header.get("id")}
        reply_blobs: list[bytes] = []
        try:
            try:
                self._apply_sync(header, blobs)
                result = self._dispatch(header, blobs)
            finally:
                if outer:
                    shell.CellClock.stop()
            encoder = self._encoder()
            reply["value"] = encoder.encode(result)
            reply_blobs = encoder.blobs
        except BaseException as error:  # noqa: BLE001 - every failure is an answer
            if outer:
                shell.CellClock.stop()
            reply = {"kind": Kind.REPLY, "id": header.get("id"),
                     "error": codec.exception_record(error, _student_traceback(error))}
            reply_blobs = []
        finally:
            self.depth -= 1
        if outer:
            self.capture.drain(self.recorder)
            reply["outputs"] = shell.bound_outputs(self.recorder.outputs)
        encoder = self._encoder(blobs=reply_blobs)
        reply["sync"] = self._sync_out(encoder)
        wire.send(self.sock, reply, encoder.blobs)

    def _dispatch(self, header: dict, blobs: list[bytes]) -> Any:
        op = header.get("op")
        decode = self._decoder(blobs).decode
        if op == Op.CELL:
            return self._run_cell(str(header["source"]))
        if op == Op.LOOKUP:
            namespace = self.shell.user_ns
            return {name: namespace[name] for name in header["names"]
                    if isinstance(name, str) and name in namespace}
        if op == Op.NAMESPACE:
            namespace = self.shell.user_ns
            for name in header.get("names", []):
                if isinstance(name, str) and name.isidentifier():
                    namespace.pop(name, None)
            for name, value in dict(decode(header["value"])).items():
                if isinstance(name, str) and name.isidentifier():
                    namespace[name] = value
            return None
        if op == Op.FILES:
            return self._new_files()
        if op == Op.MODULE:
            name = str(header["name"])
            return drivers if name == "drivers" else importlib.import_module(name)
        if op == Op.RELEASE:
            for handle in header.get("ids", []):
                obj = self.objects.pop(handle, None)
                self.ids.pop(id(obj), None)
            for mirror in header.get("mirrors", []):
                self.mirrors.pop(mirror, None)
                self.snapshots.pop(mirror, None)
            return None
        target = self._object(header.get("target"))
        if op == Op.CALL:
            args = decode(header["args"])
            kwargs = decode(header["kwargs"])
            return target(*args, **{str(k): v for k, v in kwargs.items()})
        if op == Op.GETATTR:
            return getattr(target, str(header["name"]))
        if op == Op.SETATTR:
            setattr(target, str(header["name"]), decode(header["value"]))
            return None
        if op == Op.DELATTR:
            delattr(target, str(header["name"]))
            return None
        if op == Op.GETITEM:
            return target[decode(header["key"])]
        if op == Op.SETITEM:
            target[decode(header["key"])] = decode(header["value"])
            return None
        if op == Op.LEN:
            return int(len(target))
        if op == Op.ITER:
            items = []
            for item in target:
                items.append(item)
                if len(items) > MAX_ITER:
                    raise ValueError(f"more than {MAX_ITER} items")
            return items
        if op == Op.CONTAINS:
            return bool(decode(header["item"]) in target)
        if op in (Op.REPR, Op.STR):
            text = repr(target) if op == Op.REPR else str(target)
            return str(text)[:MAX_REPR]
        if op == Op.BOOL:
            return bool(target)
        raise ValueError(f"unknown request {op!r}")

    def _new_files(self) -> dict:
        """The regular files the notebook created or changed in its folder since the last call
        (relative path -> bytes), within protocol's bounds; links and the rest are never sent."""
        found: dict[str, bytes] = {}
        left_out: list[str] = []
        for relative, stamp in _file_stamps(self.workdir).items():
            if self.files_seen.get(relative) == stamp:
                continue
            self.files_seen[relative] = stamp
            size = stamp[0]
            if (size > protocol.FILE_BYTES or len(found) >= protocol.FILES_COUNT
                    or self.files_sent + size > protocol.FILES_BYTES):
                left_out.append(relative)
                continue
            try:
                fd = os.open(os.path.join(self.workdir, relative), os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb") as handle:
                    found[relative] = handle.read(protocol.FILE_BYTES + 1)[:protocol.FILE_BYTES]
            except OSError:
                continue
            self.files_sent += len(found[relative])
        return {"files": found, "left_out": left_out[:100]}

    def _run_cell(self, source: str) -> dict:
        self.recorder.clear()
        try:
            self.shell.run_cell(source, store_history=True)
        except shell.CellTimeoutError:  # fired between run_cell's own handlers
            self.recorder.outputs.append(shell.timeout_error(self.shell_timeout))
        self.capture.drain(self.recorder)
        shell.mark_timeout(self.recorder, self.shell_timeout)
        outputs, self.recorder.outputs = self.recorder.outputs, []
        return {"cell_outputs": shell.bound_outputs(outputs), "count": self.shell.execution_count - 1}

    # ---- handles and mirrors

    def _object(self, handle: Any) -> Any:
        if handle not in self.objects:
            raise LookupError(f"no object with handle {handle!r}")
        return self.objects[handle]

    def _ref(self, obj: Any) -> dict:
        handle = self.ids.get(id(obj))
        if handle is None or self.objects.get(handle) is not obj:
            handle, self.next_id = self.next_id, self.next_id + 1
            self.objects[handle] = obj
            self.ids[id(obj)] = handle
        kind = type(obj)
        mro = [f"{c.__module__}.{c.__qualname__}" for c in getattr(kind, "__mro__", (kind,))]
        subject = obj if isinstance(obj, type) else None
        return {"$": "ref", "id": handle, "type": mro[0], "mro": mro[:30],
                "class_mro": ([f"{c.__module__}.{c.__qualname__}" for c in subject.__mro__][:30]
                              if subject is not None else None),
                "callable": callable(obj)}

    def _tensor_out(self, t: Any, encoder: codec.Encoder) -> dict | None:
        for mirror, held in self.mirrors.items():
            if held is t:  # the checker's own tensor; by value too, in case it let it go
                return dict(encoder.tensor(t), mirror=mirror)
        if t.device.type != "meta" and t.untyped_storage().data_ptr():
            pointer = t.untyped_storage().data_ptr()
            for mirror, held in self.mirrors.items():
                if held.device == t.device and held.untyped_storage().data_ptr() == pointer:
                    return dict(encoder.tensor(t), alias=mirror)  # a view of the checker's tensor
        return None

    def _encoder(self, blobs: list[bytes] | None = None) -> codec.Encoder:
        encoder = codec.Encoder(self._ref)
        encoder.tensor_hook = lambda t: self._tensor_out(t, encoder)
        if blobs:
            encoder.blobs = list(blobs)
            encoder.size = sum(map(len, blobs))
        return encoder

    def _decoder(self, blobs: list[bytes]) -> codec.Decoder:
        return codec.Decoder(blobs, self._resolve, self._tensor_in, memmap_dir="/tmp",
                            files_under="/tmp")

    def _resolve(self, tree: dict) -> Any:
        if tree.get("$") == "ref":
            return self._object(tree.get("id"))
        return CheckerObject(self, int(tree["id"]), bool(tree.get("callable")))

    def _tensor_in(self, tree: dict, tensor: Any) -> Any:
        mirror = tree.get("mirror")
        if mirror is None:
            return tensor
        held = self.mirrors.get(mirror)
        if held is None:
            self.mirrors[mirror] = tensor
            self.snapshots[mirror] = protocol.snapshot(tensor)
            return tensor
        protocol.assign(held, tensor)
        self.snapshots[mirror] = protocol.snapshot(held)
        return held

    def _apply_sync(self, message: dict, blobs: list[bytes]) -> None:
        decoder = self._decoder(blobs)
        for mirror, tree in protocol.sync_entries(message):
            decoder.decode(dict(tree, mirror=mirror))

    def _sync_out(self, encoder: codec.Encoder) -> protocol.Sync:
        sync = protocol.empty_sync()
        for mirror, held in self.mirrors.items():
            if not protocol.unchanged(held, self.snapshots.get(mirror)):
                self.snapshots[mirror] = protocol.snapshot(held)
                sync["ids"].append(mirror)
                sync["trees"].append(encoder.tensor(held))
        return sync

    # ---- calls back into the checker (a checker function the student's code calls)

    def request(self, op: str, **fields: Any) -> Any:
        request_id, self.next_request = self.next_request, self.next_request + 1
        encoder = self._encoder()
        header = {"kind": Kind.REQUEST, "id": request_id, "op": op}
        for key, value in fields.items():
            header[key] = value if key in protocol.RAW_FIELDS else encoder.encode(value)
        header["sync"] = self._sync_out(encoder)
        wire.send(self.sock, header, encoder.blobs)
        while True:
            reply, blobs = wire.recv(self.sock)
            if reply.get("kind") == Kind.REQUEST:  # the checker calls us back while it works
                self._answer(reply, blobs)
                continue
            if reply.get("kind") == Kind.EXITED:
                raise SystemExit(0)
            if reply.get("id") != request_id:
                continue
            self._apply_sync(reply, blobs)
            if "error" in reply:
                error = reply["error"]
                raise CheckerError(f"{error.get('type')}: {error.get('message')}")
            return self._decoder(blobs).decode(reply.get("value"))


class CheckerError(Exception):
    """A call into a checker-side object failed (its message says why)."""


class CheckerObject:
    """A checker-side object the checker passed in (a closure, a dataset that counts reads): the
    student's code may call it, index it, take its length, iterate it, read its public attributes."""

    __slots__ = ("_server", "_id", "_callable")

    def __init__(self, server: StudentServer, handle: int, is_callable: bool) -> None:
        object.__setattr__(self, "_server", server)
        object.__setattr__(self, "_id", handle)
        object.__setattr__(self, "_callable", is_callable)

    def __call__(self, *args, **kwargs):
        return self._server.request(Op.LOCAL_CALL, target=self._id, args=args, kwargs=kwargs)

    def __getitem__(self, key):
        return self._server.request(Op.LOCAL_GETITEM, target=self._id, key=key)

    def __len__(self):
        return self._server.request(Op.LOCAL_LEN, target=self._id)

    def __iter__(self):
        return iter(self._server.request(Op.LOCAL_ITER, target=self._id))

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._server.request(Op.LOCAL_GETATTR, target=self._id, name=name)

    def __repr__(self):
        return f"<grader object {self._id}>"


def _student_traceback(error: BaseException) -> list[str]:
    try:
        return traceback.format_exception(type(error), error, error.__traceback__)[-8:]
    except Exception:  # noqa: BLE001
        return []
