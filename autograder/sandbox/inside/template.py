"""The student side of grading: runs inside the sandbox, executes the submission's cells, answers the
checker's requests with plain values.

Started once per grading worker as ``python -I template.py <control-fd>`` (inside bubblewrap; see
``autograder/sandbox/host.py``), it is a *template*: it imports torch and friends once, makes itself
non-dumpable (no ptrace, no /proc/<pid>/mem from its children), then for every notebook

1. receives a job on the control socket: limits, environment, the notebook's companion files, and two
   sockets — the *data* socket to the checker and the *kill* socket the checker uses to stop it;
2. forks a child that applies the limits, writes the companion files into a fresh working folder and
   serves the checker (``Kernel.serve``) until the checker is done or the child dies;
3. kills every process left in the sandbox's PID namespace (``kill(-1, SIGKILL)``: a daemon that
   forked twice and called setsid is gone), wipes the working folder and /tmp, tells the checker how
   the child ended and reports "done" on the control socket.

The checker never runs student code and this process never decides a verdict: it only executes
cells and calls, and sends back values (``wire.py``). Objects that are not plain data stay here and
cross as handles the checker drives by request (call, getattr, getitem, ...).
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import resource
import secrets
import select
import shutil
import signal
import socket
import stat
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

if TYPE_CHECKING:  # the same files, under the names mypy checks them by (this package's)
    from . import drivers, isolation, protocol, removal, shell, wire
    from .protocol import Kind, Op
else:
    import drivers  # noqa: E402  - loaded from this read-only folder, never from a job's folder
    import isolation  # noqa: E402
    import protocol  # noqa: E402
    import removal  # noqa: E402
    import shell  # noqa: E402
    import wire  # noqa: E402
    from protocol import Kind, Op  # noqa: E402

WORK = "/sandbox-work"  # the sandbox's private writable folder (a tmpfs); see main() without one
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
_PAGE = os.sysconf("SC_PAGE_SIZE")
MAX_REPR = 2000
MAX_ITER = 100_000
CLEAN_UP_S = 10.0  # how long the processes a notebook left may take to die


# --------------------------------------------------------------------------- the template


def _warm_imports() -> dict:
    """Import what the exercises use (never initialising CUDA); report versions."""
    import beartype  # noqa: F401
    import einops  # noqa: F401
    import jaxtyping  # noqa: F401
    import numpy  # noqa: F401
    import torch
    from IPython.core.interactiveshell import InteractiveShell  # noqa: F401
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False):  # first use imports sympy and more
        torch.ones(2, 3, device="meta") @ torch.ones(3, 4, device="meta")
    shell.warm_up()  # a failing cell's first traceback
    return {"torch": torch.__version__, "cuda_build": torch.version.cuda}


def template(control: socket.socket) -> None:
    info = _warm_imports()
    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    global ISOLATED
    ISOLATED = SANDBOXED and _probe_isolation()
    wire.send(control, {"kind": Kind.READY, "pid": os.getpid(), "isolated": ISOLATED, **info})
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 1 << 16, 2)
        except OSError:
            return
        if not message:
            return  # the grader is gone
        header, blobs = wire.recv(control)  # the job's files
        job = json.loads(message)
        data, kill = (socket.socket(fileno=fd) for fd in fds)
        removal.find_ahead(list(job.get("removed") or []))  # once per template, not per notebook
        status = _run_job(job, header, blobs, data, kill)
        _clean_up(status.pop("pid"))
        try:
            wire.send(data, {"kind": Kind.EXITED, "status": status})
        except wire.WireError:
            pass
        data.close()
        kill.close()
        wire.send(control, {"kind": Kind.DONE, "job": job.get("id"), "status": status})


def _run_job(job: dict, files: dict, blobs: list[bytes], data: socket.socket,
             kill: socket.socket) -> dict:
    # a fresh, unpredictable folder per job: nothing a notebook leaves can be waiting for the next
    workdir = os.path.join(WORK, f"job-{secrets.token_hex(8)}")
    pid = os.fork()
    if pid == 0:  # the child: never returns
        kill.close()
        try:
            _close_inherited(keep=data.fileno())
            _child(job, workdir, data, files.get("paths", []), blobs)
        finally:
            os._exit(70)
    started = time.monotonic()
    status: dict[str, Any] = {"how": protocol.ExitHow.EXITED, "code": None}
    rss_limit = job.get("student_rss_bytes")
    # second line behind the pids cgroup (a grader without one, as root, where RLIMIT_NPROC does
    # not bind): the template counts the tasks in the sandbox and stops the notebook past the limit
    task_limit = (job.get("rlimits", {}).get("nproc") or 0) + 64 if SANDBOXED else None
    pidfd = os.pidfd_open(pid)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(kill.fileno(), select.POLLIN)
    while True:
        events = dict(poller.poll(200))
        if pidfd in events:
            break
        if kill.fileno() in events:  # the checker asked (or died): stop the child now
            status = {"how": protocol.ExitHow.KILLED, "why": "stopped by the checker"}
            os.kill(pid, signal.SIGKILL)
            break
        if rss_limit or task_limit:
            used, tasks = _sandbox_usage(pid)
            if rss_limit and used > rss_limit:
                status = {"how": protocol.ExitHow.MEMORY, "rss": used, "limit": rss_limit}
            elif task_limit and tasks > task_limit:
                status = {"how": protocol.ExitHow.PROCESSES, "count": tasks, "limit": task_limit}
            else:
                continue
            os.kill(pid, signal.SIGKILL)
            break
    _, wait_status = os.waitpid(pid, 0)
    os.close(pidfd)
    if status["how"] == protocol.ExitHow.EXITED:
        if os.WIFSIGNALED(wait_status):
            status = {"how": protocol.ExitHow.SIGNAL, "signal": os.WTERMSIG(wait_status)}
        else:
            status = {"how": protocol.ExitHow.EXITED, "code": os.WEXITSTATUS(wait_status)}
    status["seconds"] = round(time.monotonic() - started, 3)
    status["pid"] = pid
    return status


def _file_stamps(folder: str) -> dict[str, tuple[int, int]]:
    """Relative path -> (size, mtime) of the regular files below ``folder`` (links not followed;
    the kernel's own output captures left out)."""
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


def _close_inherited(*, keep: int) -> None:
    """Close every descriptor the child inherited from the template but its own data socket (and
    0-2): the template's control socket above all, through which jobs and their sockets arrive."""
    limit = os.sysconf("SC_OPEN_MAX")
    os.closerange(3, keep)
    os.closerange(keep + 1, limit if limit > 0 else 65536)


def _sandbox_usage(child: int) -> tuple[int, int]:
    """Resident memory and tasks (processes and threads) of every process in this PID namespace
    but the template and bwrap's init; without a sandbox, of the child alone."""
    total = tasks = 0
    me = os.getpid()
    pids = [e for e in os.listdir("/proc") if e.isdigit()] if SANDBOXED else [str(child)]
    for entry in pids:
        if int(entry) in (1, me):
            continue
        try:
            with open(f"/proc/{entry}/statm") as handle:
                total += int(handle.read().split()[1]) * _PAGE
            tasks += len(os.listdir(f"/proc/{entry}/task"))
        except (OSError, IndexError, ValueError):
            pass
    return total, tasks


def _clean_up(child: int) -> None:
    """Kill everything the job left running, reap it, empty the writable folders. Inside the
    sandbox that is every process of its PID namespace; without one (``--no-sandbox``) only the
    child's session, and only the job's own folder is emptied (the machine's /tmp is not ours)."""
    if not SANDBOXED:
        try:
            os.killpg(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for name in os.listdir(WORK):
            shutil.rmtree(os.path.join(WORK, name), ignore_errors=True)
        return
    deadline = time.monotonic() + CLEAN_UP_S
    while True:  # until nothing of the notebook's is left: the next one must not see its processes
        try:
            os.kill(-1, signal.SIGKILL)  # every process we may signal but ourselves (and PID 1)
        except ProcessLookupError:
            pass
        _reap()
        if not _others():
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"processes of the last notebook outlived it by {CLEAN_UP_S:.0f} s; "
                             "the sandbox must be restarted")
        time.sleep(0.01)
    mounts = _mount_points()
    for folder in (WORK, "/tmp"):
        _empty(folder, mounts)
        if any(os.path.join(folder, name) not in mounts.ancestors
               for name in os.listdir(folder)):  # the notebook left what cannot be removed
            raise SystemExit(f"could not empty {folder} after a job; the sandbox must be restarted")


def _reap() -> None:
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                return
        except ChildProcessError:
            return


def _others() -> list[str]:
    """The processes of this sandbox but bubblewrap's init and the template (the notebook's own PID
    namespaces are nested in the sandbox's: their processes are listed here too)."""
    keep = {"1", str(os.getpid())}
    return [entry for entry in os.listdir("/proc") if entry.isdigit() and entry not in keep]


class _Mounts:
    """The sandbox's mount points (a virtual environment bound below /tmp is one) and every folder
    on the way to one: cleaning a folder never touches them."""

    def __init__(self, points: set[str]) -> None:
        self.points = points
        self.ancestors = set(points)
        for point in points:
            while point not in ("/", ""):
                point = os.path.dirname(point)
                self.ancestors.add(point)


def _mount_points() -> _Mounts:
    points = set()
    try:
        with open("/proc/self/mountinfo") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) > 4:  # the mount point, octal escapes (\040 for a space) undone
                    points.add(fields[4].encode().decode("unicode_escape"))
    except OSError:
        pass
    return _Mounts(points)


def _empty(folder: str, mounts: _Mounts) -> None:
    """Remove everything in ``folder`` but mount points (and the folders leading to them), first
    making read-only folders writable again (a notebook may chmod what it created; it cannot make
    anything the template cannot change back)."""
    if folder not in mounts.ancestors or folder in ("/tmp", WORK):
        try:
            os.chmod(folder, 0o1777 if folder == "/tmp" else 0o700)
        except OSError:
            pass
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        if path in mounts.points:
            continue
        if path in mounts.ancestors:
            _empty(path, mounts)  # a folder on the way to a bound one: clean around it
            continue
        if os.path.isdir(path) and not os.path.islink(path):
            try:
                os.chmod(path, 0o700)
            except OSError:
                pass
            for root, dirs, _ in os.walk(path):  # top-down: each folder is opened after its chmod
                for sub in dirs:
                    try:
                        os.chmod(os.path.join(root, sub), 0o700)
                    except OSError:
                        pass
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except OSError:
                pass


def _probe_isolation() -> bool:
    """Can a notebook get namespaces of its own here (``isolation.py``)? One throwaway fork."""
    pid = os.fork()
    if pid == 0:
        try:
            ok = isolation.enter_own_namespaces(dict.fromkeys(protocol.NOTEBOOK_TMPFS_BYTES, 2**20)) \
                and os.getpid() == 1
            os._exit(0 if ok else 3)
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def _write_companions(workdir: str, paths: list[str], blobs: list[bytes]) -> None:
    """The notebook's folder with the files that come with it (the submission's other files)."""
    os.makedirs(workdir)
    for path, index in zip(paths, range(len(blobs)), strict=False):
        target = os.path.normpath(os.path.join(workdir, str(path)))
        if target.startswith(workdir + os.sep):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as out:
                out.write(blobs[index])


def _child(job: dict, workdir: str, data: socket.socket, paths: list[str],
           blobs: list[bytes]) -> None:
    libc = ctypes.CDLL(None)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    fresh = job.get("tmpfs") or protocol.NOTEBOOK_TMPFS_BYTES
    removals = list(job.get("removed") or [])  # the exercise's forbidden implementations
    cover = removal.files_to_cover(removals) if removals and ISOLATED else None
    if ISOLATED and not isolation.enter_own_namespaces(fresh, cover):  # from here on: PID 1 of its own
        raise SystemExit("the notebook's own namespaces could not be made")
    removal.remove(removals)
    _write_companions(workdir, paths, blobs)
    try:  # the sandbox's memory cgroup stops the notebook, not the template that runs the next one
        with open("/proc/self/oom_score_adj", "w") as handle:
            handle.write("1000")
    except OSError:
        pass
    os.setsid()
    os.environ.update({str(k): str(v) for k, v in job.get("env", {}).items()})
    os.chdir(workdir)
    sys.path.insert(0, workdir)  # as a kernel started in the notebook's folder
    for name, value in job.get("rlimits", {}).items():
        which = getattr(resource, f"RLIMIT_{name.upper()}", None)
        if which is not None and value is not None:
            resource.setrlimit(which, (int(value), int(value)))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(max(1, int(job.get("threads", 1))))
    Kernel(data, workdir).serve()
    os._exit(0)


# --------------------------------------------------------------------------- the kernel


class Kernel:
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
        self.files_seen = _file_stamps(workdir)  # the companion files, as the job wrote them
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
                     "error": wire.exception_record(error, _student_traceback(error))}
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

    def _tensor_out(self, t: Any, encoder: wire.Encoder) -> dict | None:
        for mirror, held in self.mirrors.items():
            if held is t:  # the checker's own tensor; by value too, in case it let it go
                return dict(encoder.tensor(t), mirror=mirror)
        if t.device.type != "meta" and t.untyped_storage().data_ptr():
            pointer = t.untyped_storage().data_ptr()
            for mirror, held in self.mirrors.items():
                if held.device == t.device and held.untyped_storage().data_ptr() == pointer:
                    return dict(encoder.tensor(t), alias=mirror)  # a view of the checker's tensor
        return None

    def _encoder(self, blobs: list[bytes] | None = None) -> wire.Encoder:
        encoder = wire.Encoder(self._ref)
        encoder.tensor_hook = lambda t: self._tensor_out(t, encoder)
        if blobs:
            encoder.blobs = list(blobs)
            encoder.size = sum(map(len, blobs))
        return encoder

    def _decoder(self, blobs: list[bytes]) -> wire.Decoder:
        return wire.Decoder(blobs, self._resolve, self._tensor_in, memmap_dir="/tmp",
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

    def _sync_out(self, encoder: wire.Encoder) -> protocol.Sync:
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

    __slots__ = ("_kernel", "_id", "_callable")

    def __init__(self, kernel: Kernel, handle: int, is_callable: bool) -> None:
        object.__setattr__(self, "_kernel", kernel)
        object.__setattr__(self, "_id", handle)
        object.__setattr__(self, "_callable", is_callable)

    def __call__(self, *args, **kwargs):
        return self._kernel.request(Op.LOCAL_CALL, target=self._id, args=args, kwargs=kwargs)

    def __getitem__(self, key):
        return self._kernel.request(Op.LOCAL_GETITEM, target=self._id, key=key)

    def __len__(self):
        return self._kernel.request(Op.LOCAL_LEN, target=self._id)

    def __iter__(self):
        return iter(self._kernel.request(Op.LOCAL_ITER, target=self._id))

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return self._kernel.request(Op.LOCAL_GETATTR, target=self._id, name=name)

    def __repr__(self):
        return f"<grader object {self._id}>"


def _student_traceback(error: BaseException) -> list[str]:
    try:
        return traceback.format_exception(type(error), error, error.__traceback__)[-8:]
    except Exception:  # noqa: BLE001
        return []


SANDBOXED = False
ISOLATED = False  # each notebook in its own user + PID namespace (isolation.py)


def main() -> None:
    """``template.py <control-fd> --sandboxed`` inside bubblewrap; without ``--sandboxed`` (the
    grader's ``--no-sandbox``) it never signals or deletes anything outside its own jobs."""
    global SANDBOXED, WORK
    SANDBOXED = "--sandboxed" in sys.argv[2:]
    if not SANDBOXED:
        import tempfile

        WORK = tempfile.mkdtemp(prefix="autograder-unsandboxed-")
    control = socket.socket(fileno=int(sys.argv[1]))
    try:
        template(control)
    except wire.ChannelClosed:
        pass


if __name__ == "__main__":
    main()
