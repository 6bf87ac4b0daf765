"""The student side of grading: runs inside the sandbox, executes the submission's cells, answers the
checker's requests with plain values.

Started once per sandbox (``host.SandboxProcess``) as ``python -I template.py <control-fd>`` (inside bubblewrap; see
``autograder/sandbox/host.py``), it is a *template*: it imports torch and friends once, makes itself
non-dumpable (no ptrace, no /proc/<pid>/mem from its children), then for every notebook

1. receives a launch (``protocol.NotebookLaunch``) on the control socket: limits, environment, the
   notebook's companion files, and two sockets — the *data* socket to the checker and the *kill* socket the checker uses to stop it;
2. forks a child that applies the limits, writes the companion files into a fresh working folder and
   serves the checker (``student_server.StudentServer``) until the checker is done or the child dies;
3. kills every process left in the sandbox's PID namespace (``kill(-1, SIGKILL)``: a daemon that
   forked twice and called setsid is gone), wipes the working folder and /tmp, tells the checker how
   the child ended and reports "done" on the control socket.

The checker never runs student code and this process never decides a verdict: it only executes
cells and calls, and sends back values (``codec.py``). Objects that are not plain data stay here and
cross as handles the checker drives by request (call, getattr, getitem, ...).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import secrets
import select
import shutil
import signal
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

if TYPE_CHECKING:  # the same files, under the names mypy checks them by (this package's)
    from . import isolation, protocol, removal, shell, student_server, wire
    from .protocol import Kind
else:
    import isolation  # noqa: E402  - loaded from this read-only folder, never from a notebook's
    import protocol  # noqa: E402
    import removal  # noqa: E402
    import shell  # noqa: E402
    import student_server  # noqa: E402
    import wire  # noqa: E402
    from protocol import Kind  # noqa: E402

WORK = "/sandbox-work"  # the sandbox's private writable folder (a tmpfs); see main() without one
_PAGE = os.sysconf("SC_PAGE_SIZE")
PRECISE_EVERY_S = 2.0  # the watchdog's measure by page (``_charged``): at least this often
LEFTOVERS_DIE_S = 10.0  # how long the processes a notebook left may take to die (the checker's side
# waits longer for the template's report: grading/execute/runner.py's CLEAN_UP_S)


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
    libc.prctl(isolation.PR_SET_DUMPABLE, 0, 0, 0, 0)
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
        header, blobs = wire.recv(control)  # the launch's files
        launch = json.loads(message)
        data, kill = (socket.socket(fileno=fd) for fd in fds)
        removal.find_ahead(list(launch.get("removed") or []))  # once per template, not per notebook
        status = _run_notebook(launch, header, blobs, data, kill)
        _clean_up(status.pop("pid"))
        # its log (the host keeps a failed notebook's part of it beside the run record)
        print(f"launch {launch.get('id')}: the notebook's process ended: {json.dumps(status)}",
              file=sys.stderr, flush=True)
        try:
            wire.send(data, {"kind": Kind.EXITED, "status": status})
        except wire.WireError:
            pass
        data.close()
        kill.close()
        wire.send(control, {"kind": Kind.DONE, "launch": launch.get("id"), "status": status})


def _run_notebook(launch: dict, files: dict, blobs: list[bytes], data: socket.socket,
             kill: socket.socket) -> dict:
    # a fresh, unpredictable folder per notebook: nothing a notebook leaves can be waiting for the next
    workdir = os.path.join(WORK, f"job-{secrets.token_hex(8)}")
    pid = os.fork()
    if pid == 0:  # the child: never returns
        kill.close()
        try:
            _close_inherited(keep=data.fileno())
            _child(launch, workdir, data, files.get("paths", []), blobs)
        finally:
            os._exit(70)
    started = time.monotonic()
    status: dict[str, Any] = {"how": protocol.ExitHow.EXITED, "code": None}
    rss_limit = launch.get("student_rss_bytes")
    # second line behind the pids cgroup (a grader without one, as root, where RLIMIT_NPROC does
    # not bind): the template counts the tasks in the sandbox and stops the notebook past the limit
    task_limit = (launch.get("rlimits", {}).get("nproc") or 0) + 64 if SANDBOXED else None
    precise: tuple[float, int] | None = None  # the last measure by page (``_charged``)
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
            if rss_limit and used > rss_limit:  # summed RSS counts a page once per process
                used, precise = _charged(pid, used, precise)  # mapping it: count each page once
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



def _close_inherited(*, keep: int) -> None:
    """Close every descriptor the child inherited from the template but its own data socket (and
    0-2): the template's control socket above all, through which launches and their sockets arrive."""
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


def _charged(child: int, rss: int, last: tuple[float, int] | None) -> tuple[int, tuple[float, int]]:
    """The notebook's memory counted page by page (``_unique_memory``), measured again once due:
    walking page tables costs milliseconds a process (50 forks of a torch process: about a second on
    a busy machine), so again after four times what the last measure cost (one process: every
    poll), at most ``PRECISE_EVERY_S`` later; in between, the last measure stands (growth is seen that much later: the memory cgroup and the address-space limit stand
    behind). ``last``: (next measure due, measured bytes)."""
    now = time.monotonic()
    if last is not None and now < last[0]:
        return last[1], last
    unique = _unique_memory(child, rss)
    cost = time.monotonic() - now
    return unique, (time.monotonic() + min(PRECISE_EVERY_S, 4 * cost), unique)


def _unique_memory(child: int, rss: int) -> int:
    """The memory the notebook's processes hold, each page counted once, as the kernel charges it:
    the sum of their proportional set sizes (``Pss`` of /proc/PID/smaps_rollup: a page shared by n
    processes counts 1/n in each), so the copy-on-write pages of a pool of forks are counted once,
    not once per child. Pages shared with the template count only their share. Called only when
    the summed RSS (``rss``, cheap) passes the limit: smaps_rollup walks page tables. A process
    whose smaps_rollup cannot be read (gone, or one that hides from us) counts its full RSS."""
    total = 0
    me = os.getpid()
    pids = [e for e in os.listdir("/proc") if e.isdigit()] if SANDBOXED else [str(child)]
    for entry in pids:
        if int(entry) in (1, me):
            continue
        try:
            total += _pss_bytes(entry)
        except (OSError, ValueError):
            try:
                with open(f"/proc/{entry}/statm") as handle:
                    total += int(handle.read().split()[1]) * _PAGE
            except (OSError, IndexError, ValueError):
                pass  # gone since
    return min(total, rss) if total else rss


def _pss_bytes(pid: str) -> int:
    with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
        for line in handle:
            if line.startswith(b"Pss:"):
                return int(line.split()[1]) * 1024
    raise ValueError(f"no Pss line for process {pid}")


def _clean_up(child: int) -> None:
    """Kill everything the notebook left running, reap it, empty the writable folders. Inside the
    sandbox that is every process of its PID namespace; without one (``--no-sandbox``) only the
    child's session, and only the notebook's own folder is emptied (the machine's /tmp is not ours)."""
    if not SANDBOXED:
        try:
            os.killpg(child, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for name in os.listdir(WORK):
            shutil.rmtree(os.path.join(WORK, name), ignore_errors=True)
        return
    deadline = time.monotonic() + LEFTOVERS_DIE_S
    while True:  # until nothing of the notebook's is left: the next one must not see its processes
        try:
            os.kill(-1, signal.SIGKILL)  # every process we may signal but ourselves (and PID 1)
        except ProcessLookupError:
            pass
        _reap()
        if not _others():
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"processes of the last notebook outlived it by {LEFTOVERS_DIE_S:.0f} s; "
                             "the sandbox must be restarted")
        time.sleep(0.01)
    mounts = _mount_points()
    for folder in (WORK, "/tmp"):
        _empty(folder, mounts)
        if any(os.path.join(folder, name) not in mounts.ancestors
               for name in os.listdir(folder)):  # the notebook left what cannot be removed
            raise SystemExit(f"could not empty {folder} after a notebook; the sandbox must be restarted")


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


def _child(launch: dict, workdir: str, data: socket.socket, paths: list[str],
           blobs: list[bytes]) -> None:
    libc = ctypes.CDLL(None)
    libc.prctl(isolation.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # dumpable again (the template is not): the watchdog reads its processes' smaps_rollup, which
    # the kernel refuses for a non-dumpable process to a reader without CAP_SYS_PTRACE
    libc.prctl(isolation.PR_SET_DUMPABLE, 1, 0, 0, 0)
    fresh = launch.get("tmpfs") or protocol.NOTEBOOK_TMPFS_BYTES
    removals = list(launch.get("removed") or [])  # the exercise's forbidden implementations
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
    os.environ.update({str(k): str(v) for k, v in launch.get("env", {}).items()})
    os.chdir(workdir)
    sys.path.insert(0, workdir)  # as a kernel started in the notebook's folder
    for name, value in launch.get("rlimits", {}).items():
        which = getattr(resource, f"RLIMIT_{name.upper()}", None)
        if which is not None and value is not None:
            resource.setrlimit(which, (int(value), int(value)))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(max(1, int(launch.get("threads", 1))))
    student_server.StudentServer(data, workdir).serve()
    os._exit(0)


SANDBOXED = False
ISOLATED = False  # each notebook in its own user + PID namespace (isolation.py)


def main() -> None:
    """``template.py <control-fd> --sandboxed`` inside bubblewrap; without ``--sandboxed`` (the
    grader's ``--no-sandbox``) it never signals or deletes anything outside its own notebooks' folders."""
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
