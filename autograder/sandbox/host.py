"""The host side of the sandbox (trusted): the bubblewrap policy, process limits, the warm sandboxes.

One ``SandboxProcess`` per notebook graded at once (``--workers N``): ``bwrap`` around
``inside/template.py``, a template that imports torch once and forks one child per notebook (see that
file). The policy is one function,
``bwrap_command``, readable as a list:

- every namespace unshared (user, PID, network, IPC, UTS, cgroup): no network at all — a connection
  to 127.0.0.1 reaches the sandbox's own empty loopback — and no view of or signal to the grader;
- read-only: the Python installation, the virtual environment, system libraries, and ``inside/``
  (the only part of this package the sandbox sees); writable: a size-capped ``/work`` and ``/tmp``; nothing else — no course
  folder, no ``solutions/``, no ``autograder/hidden/``, no gradebook, no other submission, no home;
- ``--die-with-parent``, ``--new-session``, all capabilities dropped;
- a seccomp filter (``--seccomp``) refusing the kernel interfaces no namespace isolates — the kernel
  keyring first of all (``seccomp.py``, the one reviewed list), and, as a second line, a fresh empty
  session keyring for the sandbox's process (``join_fresh_session_keyring``): nothing of the
  grading session's keyring is reachable from it;
- cgroups per sandbox, as root, all under one parent group of this process per hierarchy
  (``autograder-sandboxes-PID``): ``pids`` (``ProcessLimit``), ``memory`` (``MemoryLimit``; the
  checkers get one each too, under ``autograder-checkers-PID``) and ``cpu`` (``CpuShare``: every
  sandbox the same weight, so a notebook's processes in many sessions buy no more CPU than one busy
  loop, and all sandboxes together one ordinary process's weight against the grader's side);
- on a GPU runner, the NVIDIA device nodes (and ``/sys`` read-only, which the driver reads).

``--no-sandbox`` runs the same template without bubblewrap (a loudly printed opt-out for debugging).
"""

from __future__ import annotations

import errno
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.errors import GradingError
from autograder.sandbox import seccomp
from autograder.sandbox.cgroups import SANDBOX_PROCESSES, CpuShare, MemoryLimit, ProcessLimit
from autograder.sandbox.inside import isolation, protocol, wire
from autograder.sandbox.inside.protocol import Kind

INSIDE_SOURCE = Path(__file__).resolve().parent / "inside"  # all that bubblewrap mounts of this package
INSIDE_DIR = "/opt/autograder-sandbox"
WORK_MB, TMP_MB = 512, 512
START_TIMEOUT_S = 120.0
START_TRIES = 3  # starts of one sandbox in a row that may fail before the pool goes on without it
LOG_KEPT_BYTES = 64 * 2**10  # of a failed notebook's sandbox log, kept beside its run record
SANDBOX_UID = 65534  # "nobody" inside the sandbox's own user namespace, and outside it as root

_SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
_ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
              "/etc/alternatives", "/etc/fonts", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group")


def python_dirs() -> list[str]:
    """The folders the interpreter and its packages live in (installation and virtual environment)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        paths.add(sysconfig.get_paths()[key])
    # package folders a .pth file or PYTHONPATH added (a venv that links to another's packages)
    paths |= {p for p in sys.path if os.path.basename(p.rstrip(os.sep)) in ("site-packages",
                                                                        "dist-packages")}
    kept = sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)})
    # keep only the outermost folders (a venv inside the prefix needs no second bind)
    return [p for p in kept if not any(p != q and p.startswith(q + os.sep) for q in kept)]


def bwrap_command(*, bwrap: str = "bwrap", gpu: bool = False, work_mb: int = WORK_MB,
                  tmp_mb: int = TMP_MB, seccomp_fd: int | None = None) -> list[str]:
    """The bubblewrap command line of the sandbox (everything after it is the program to run).
    ``seccomp_fd``: an inherited descriptor bubblewrap reads the seccomp filter from
    (``seccomp_pipe``); bubblewrap installs it just before it execs the program."""
    args = [bwrap, "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID),
            "--gid", str(SANDBOX_UID), "--hostname", "sandbox", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", "--clearenv"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    # the private tmpfs first: bubblewrap applies mounts in order, so a bind below (a virtual
    # environment under /tmp, a course on a tmpfs) lands on top of it instead of being hidden by it
    args += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(tmp_mb * 2**20), "--tmpfs", "/tmp",
             "--size", str(work_mb * 2**20), "--tmpfs", "/sandbox-work"]
    for path in _SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in _ETC_FILES:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    for path in python_dirs():
        args += ["--ro-bind", path, path]
    venv_python = os.path.join(sys.prefix, "bin")
    if os.path.isdir(venv_python) and not any(venv_python.startswith(p + os.sep)
                                              for p in python_dirs()):
        args += ["--ro-bind", venv_python, venv_python]
    args += ["--ro-bind", str(INSIDE_SOURCE), INSIDE_DIR, "--chdir", "/sandbox-work"]
    if gpu:
        for node in sorted(glob.glob("/dev/nvidia*")):
            args += ["--dev-bind", node, node]
        if os.path.isdir("/dev/dri"):
            args += ["--dev-bind", "/dev/dri", "/dev/dri"]
        args += ["--ro-bind", "/sys", "/sys"]
        for folder in _driver_library_dirs():  # libcuda outside /usr (container runtimes)
            args += ["--ro-bind", folder, folder]
    env = {"PATH": "/usr/bin:/bin", "HOME": "/sandbox-work", "LANG": "C.UTF-8", "TMPDIR": "/tmp",
           "MPLCONFIGDIR": "/tmp/matplotlib", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTORCH_NVML_BASED_CUDA_CHECK": "1"}
    for key, value in sorted(env.items()):
        args += ["--setenv", key, value]
    return args


def _driver_library_dirs() -> list[str]:
    """Folders outside /usr that hold the NVIDIA driver's user-space libraries (libcuda.so)."""
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        listing = ""
    folders = {os.path.dirname(line.rsplit("=>", 1)[1].strip()) for line in listing.splitlines()
               if "libcuda.so" in line and "=>" in line}
    folders |= {p for p in ("/usr/local/nvidia", "/usr/local/cuda") if os.path.isdir(p)}
    return sorted(f for f in folders if f and not f.startswith("/usr/"))


def seccomp_pipe() -> int:
    """A descriptor to read the sandbox's seccomp filter from (its write end already closed),
    inheritable: the program bubblewrap's ``--seccomp`` loads. The caller closes it once bubblewrap
    has started."""
    try:
        program = seccomp.program()
    except ValueError as error:
        raise GradingError(f"{error}; --no-sandbox grades without one (debugging only)") from None
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: far below a pipe's buffer
    finally:
        os.close(write)
    os.set_inheritable(read, True)
    return read


def join_fresh_session_keyring() -> None:
    """Make this process's session keyring a new, empty one (``keyctl(KEYCTL_JOIN_SESSION_KEYRING,
    NULL)``), so that nothing of the grading session's keyring is reachable from what it execs.
    Where the kernel refuses keyrings to this process already (a container's own seccomp filter:
    EPERM or ENOSYS), there is nothing to reach; any other failure is raised."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    keyctl, join_session_keyring = seccomp.syscall_number("keyctl"), 1
    if libc.syscall(ctypes.c_long(keyctl), ctypes.c_long(join_session_keyring), None) < 0:
        error = ctypes.get_errno()
        if error not in (errno.EPERM, errno.ENOSYS):
            raise OSError(error, f"keyctl(KEYCTL_JOIN_SESSION_KEYRING): {os.strerror(error)}")


def template_command(*, sandboxed: bool, gpu: bool, control_fd: int,
                     seccomp_fd: int | None = None) -> list[str]:
    """The full command that starts one sandbox template (``control_fd``: its end of the control
    socket, inherited; ``seccomp_fd``, sandboxed: the filter's descriptor, ``seccomp_pipe``)."""
    script = f"{INSIDE_DIR}/template.py" if sandboxed else str(INSIDE_SOURCE / "template.py")
    program = [sys.executable, "-I", script, str(control_fd)]
    if not sandboxed:
        return program
    program.append("--sandboxed")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise GradingError("bubblewrap (bwrap) is not installed: grading runs student code in a "
                           "bubblewrap sandbox (Debian: apt-get install bubblewrap). "
                           "`autograder doctor` checks it; --no-sandbox grades without one "
                           "(debugging only: submissions can then read and change the course)")
    if seccomp_fd is None:
        raise ValueError("a sandboxed template needs its seccomp filter (seccomp_fd)")
    return bwrap_command(bwrap=bwrap, gpu=gpu, seccomp_fd=seccomp_fd) + program


def sandbox_code_folders() -> list[str]:
    """What bubblewrap binds from this machine that lies outside the system folders."""
    folders = [*python_dirs(), str(INSIDE_SOURCE), os.path.join(sys.prefix, "bin")]
    return sorted({os.path.realpath(f) for f in folders if os.path.isdir(f)})


@dataclass
class SandboxProcess:
    """One warm sandbox: a template inside bubblewrap that runs one notebook at a time."""

    sandboxed: bool = True
    gpu: bool = False
    process: subprocess.Popen[bytes] | None = None
    control: socket.socket | None = None
    # new -> starting -> ready <-> busy; "dead" when it must be restarted; "failed" when it did not
    # start START_TRIES times in a row: the pool goes on without it
    state: str = "new"
    start_failures: int = 0  # starts in a row that did not reach "ready"
    failure: str | None = None  # why the last start failed (with its log)
    info: dict[str, Any] = field(default_factory=dict)
    launches: int = 0  # notebooks handed to the template so far (the last one's id)
    started: float = 0.0
    stderr_path: str | None = None
    processes: ProcessLimit | None = None
    memory_bytes: int | None = None  # the sandbox's memory cgroup limit (None: no cgroup)
    memory: MemoryLimit | None = None
    cpu: CpuShare | None = None
    finished_at: float | None = None  # when its current notebook's checker finished

    def start(self) -> None:
        self._remove_log()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fd = theirs.fileno()
        os.set_inheritable(fd, True)
        import tempfile

        log = tempfile.NamedTemporaryFile(prefix="autograder-sandbox-", suffix=".log", delete=False)
        self.stderr_path = log.name
        if self.sandboxed:
            if self.processes is None:
                self.processes = ProcessLimit()
            if self.memory is None:
                self.memory = MemoryLimit(self.memory_bytes, unified_group=self.processes.path)
            if self.cpu is None:  # cgroup v2: the group the sandbox is in already, if any
                self.cpu = CpuShare(unified_group=self.processes.path or (
                    self.memory.path if self.memory.version == "v2" else None))
        filter_fd = seccomp_pipe() if self.sandboxed else None
        try:
            self.process = subprocess.Popen(
                template_command(sandboxed=self.sandboxed, gpu=self.gpu, control_fd=fd,
                                 seccomp_fd=filter_fd),
                pass_fds=(fd,) if filter_fd is None else (fd, filter_fd),
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True, env=_template_env(),
                preexec_fn=self._before_exec if self.sandboxed else None)
        finally:
            log.close()
            theirs.close()
            if filter_fd is not None:
                os.close(filter_fd)
        self.control, self.state, self.started = ours, "starting", time.monotonic()

    def _before_exec(self) -> None:
        """In the sandbox's process, before it execs bubblewrap (``preexec_fn``): a fresh, empty
        session keyring (``join_fresh_session_keyring``), its cgroups, then, grading as root, an
        unprivileged uid — the sandbox's processes are ``SANDBOX_UID`` outside their user namespace
        too, never root (``isolation.become``)."""
        join_fresh_session_keyring()
        for cgroup in (self.processes, self.memory, self.cpu):
            if cgroup is not None:
                cgroup.enter()
        if os.geteuid() == 0:
            isolation.become(SANDBOX_UID, sandbox_code_folders())

    def fileno(self) -> int:
        return self._control().fileno()

    def _control(self) -> socket.socket:
        if self.control is None:
            raise RuntimeError("the sandbox is not running (it has no control socket)")
        return self.control

    def pump(self) -> None:
        """Read control messages (ready, done) without blocking; notice a dead template."""
        while self.control is not None and self.state in ("starting", "busy", "ready"):
            try:
                self.control.setblocking(False)
                try:
                    header, _ = wire.recv(self.control, timeout=0)
                finally:
                    if self.control is not None:
                        self.control.setblocking(True)
            except (BlockingIOError, TimeoutError):
                break
            except wire.WireError:
                if self.state == "starting":
                    self._start_failed("ended before it was ready")
                else:
                    self._mark_dead()
                break
            if header.get("kind") == Kind.READY:
                self.info, self.state, self.start_failures = header, "ready", 0
            elif header.get("kind") == Kind.DONE and header.get("launch") == self.launches:
                self.state, self.finished_at = "ready", None
        if self.state == "starting" and time.monotonic() - self.started > START_TIMEOUT_S:
            self._start_failed(f"did not start in {START_TIMEOUT_S:.0f} s")

    def _start_failed(self, why: str) -> None:
        """A start that did not reach "ready": the sandbox is killed, to be restarted ("dead"), or,
        the START_TRIES-th time in a row, given up ("failed"); never the end of the batch by itself
        (``runner.wait_for_a_sandbox``: only when no sandbox of the pool can start)."""
        self.start_failures += 1
        self.failure = f"the sandbox {why} (start {self.start_failures} of {START_TRIES}); " \
                       f"its log: {self.log_tail()}"
        import logging

        logging.getLogger("autograder").warning(
            "%s; %s", self.failure, "the pool goes on without it"
            if self.start_failures >= START_TRIES else "it is restarted")
        self._mark_dead()
        if self.start_failures >= START_TRIES:
            self.state = "failed"

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while self.state == "starting" and time.monotonic() < deadline:
            import select

            select.select([self._control()], [], [], 0.2)
            self.pump()
        if self.state != "ready":
            raise GradingError(self.failure or f"the sandbox could not start: {self.log_tail()}")

    def log_tail(self) -> str:
        if self.stderr_path is None:
            return "(no log)"
        try:
            return Path(self.stderr_path).read_text(errors="replace")[-2000:].strip() or "(no output)"
        except (OSError, TypeError):
            return "(no log)"

    def log_size(self) -> int:
        """How far the log has been written (``log_since`` reads what comes after)."""
        try:
            return os.stat(self.stderr_path).st_size if self.stderr_path else 0
        except OSError:
            return 0

    def log_since(self, offset: int, *, limit: int = LOG_KEPT_BYTES) -> str:
        """What the sandbox wrote to its log after ``offset`` (one notebook's part: its template
        serves one notebook at a time), the last ``limit`` bytes of it."""
        if self.stderr_path is None:
            return ""
        try:
            with open(self.stderr_path, "rb") as log:
                end = log.seek(0, os.SEEK_END)
                log.seek(max(offset, end - limit))
                return log.read(limit).decode(errors="replace")
        except OSError:
            return ""

    def _mark_dead(self) -> None:
        self.state = "dead"
        self.close(keep_log=True)

    def start_notebook(self, launch: protocol.NotebookLaunch,
                  files: list[tuple[str, bytes]]) -> tuple[socket.socket, socket.socket]:
        """Hand one notebook to the template (``launch["id"]`` is set here); return the checker's ends of
        the data and kill sockets."""
        data_ours, data_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        kill_ours, kill_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.launches += 1
        launch = {**launch, "id": self.launches}
        if self.processes is not None:
            self.processes.allow(int(launch.get("rlimits", {}).get("nproc") or SANDBOX_PROCESSES))
        try:
            socket.send_fds(self._control(), [json.dumps(launch).encode()],
                            [data_theirs.fileno(), kill_theirs.fileno()])
            wire.send(self._control(), {"paths": [p for p, _ in files]}, [b for _, b in files])
        except (OSError, wire.WireError) as error:
            self._mark_dead()
            raise GradingError(f"the sandbox is gone ({error})") from None
        finally:
            data_theirs.close()
            kill_theirs.close()
        self.state, self.finished_at = "busy", None
        return data_ours, kill_ours

    def close(self, *, keep_log: bool = False) -> None:
        if self.control is not None:
            self.control.close()
            self.control = None
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self.process.wait(timeout=10)
        if not keep_log:
            self._remove_log()
            for cgroup in (self.memory, self.cpu, self.processes):
                if cgroup is not None:
                    cgroup.remove()

    def _remove_log(self) -> None:
        if self.stderr_path:
            try:
                os.unlink(self.stderr_path)
            except OSError:
                pass
            self.stderr_path = None


def _template_env() -> dict[str, str]:
    """The template's environment when it runs without bubblewrap (bubblewrap clears it anyway)."""
    keep = ("PATH", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env.update({"PYTHONDONTWRITEBYTECODE": "1", "PYTORCH_NVML_BASED_CUDA_CHECK": "1"})
    return env
