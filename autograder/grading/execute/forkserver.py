"""Warm workers, parent side (trusted): fork one checker per notebook from a template that has imported torch.

The template is multiprocessing's *forkserver*: a separate process, started once per grading run, that
imports the heavy libraries (``warm.py``: torch, numpy, einops, jaxtyping, beartype, IPython, and the
modules FlopCounterMode loads on first use) — and never touches CUDA, so every forked child can still
initialise its own CUDA context. Forking it costs tens of
milliseconds instead of the seconds a fresh kernel plus ``import torch`` costs.

``RunningNotebook`` watches one child: it drains the child's per-cell messages, and kills the child when
a cell runs past its time limit plus the grace of ``sandbox/deadlines.py`` (where every limit is
derived and how they nest is written down) or when the child's
resident memory passes the limit. As root it also puts the child in a memory cgroup of its own
(``limits.checker_memory_bytes``): what the child holds or writes to its private tmpfs for the student's
values is bounded by the kernel, and past it the notebook fails with a clear message (the batch goes
on). When the child is gone it reports what happened as data: the finished cells' outputs, the cell
that was running, a reason if the run did not complete, and whether a cell that timed out was starved
of CPU by the machine (``starved``: a grader fault, never a score).
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing import spawn
from multiprocessing.connection import Connection, wait
from typing import Any
from unittest import mock

from autograder.grading.execute.checker import Event, run_notebook
from autograder.grading.execute.limits import ExecutionLimits, ForkserverProbe
from autograder.grading.execute.outputs import KeptFilesBudget
from autograder.grading.model import NotebookOutcome, NotebookProgram
from autograder.sandbox.cgroups import MemoryLimit
from autograder.sandbox.deadlines import Deadlines, starved_timeout
from autograder.sandbox.inside.protocol import Failure

PRELOAD = ["autograder.grading.execute.warm", "autograder.grading.execute.checker"]
_PAGE = os.sysconf("SC_PAGE_SIZE")


def _context() -> multiprocessing.context.ForkServerContext:
    ctx = multiprocessing.get_context("forkserver")
    # torch.cuda.is_available() in the template must not create a CUDA context (fork safety)
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def _without_main(get_preparation_data: Callable[[str], dict[str, Any]]
                  ) -> Callable[[str], dict[str, Any]]:
    """multiprocessing re-imports the parent's ``__main__`` in every forkserver child (pytest, a user
    script, ...): wasted time per notebook, and harmful for unguarded scripts. The child only needs
    ``autograder.grading.execute.checker``, so drop that step from the preparation data."""

    def prepare(name: str) -> dict[str, Any]:
        data = get_preparation_data(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    return prepare


def _start(process: multiprocessing.process.BaseProcess) -> None:
    with mock.patch.object(spawn, "get_preparation_data",
                           _without_main(spawn.get_preparation_data)):
        process.start()


def start_forkserver() -> None:
    """Start the template process now (imports take a second or two) rather than at the first fork."""
    _context()
    from multiprocessing import forkserver

    forkserver.ensure_running()


def probe_forkserver() -> ForkserverProbe:
    """Fork one child from the template and ask it (waits for the template's imports)."""
    ctx = _context()
    parent_end, child_end = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_report_probe, args=(child_end,), daemon=True)
    _start(process)
    child_end.close()
    probe: ForkserverProbe = parent_end.recv()
    process.join()
    return probe


def _report_probe(conn: Connection) -> None:
    import torch

    with open("/proc/self/statm") as handle:
        size, resident = (int(x) * _PAGE for x in handle.read().split()[:2])
    # NVML-based check (PYTORCH_NVML_BASED_CUDA_CHECK=1): no CUDA context is created. Plain str:
    # torch.__version__ is a TorchVersion, and unpickling one imports torch in the parent (1.4 s)
    cuda = torch.version.cuda
    conn.send(ForkserverProbe(size, resident, torch.cuda.is_available(), str(torch.__version__),
                              None if cuda is None else str(cuda)))
    conn.close()


def resident_bytes(pid: int) -> int | None:
    """Resident set size of ``pid`` (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as handle:
            return int(handle.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class RunningNotebook:
    """One child executing one notebook, and everything it has reported so far."""

    key: Any
    program: NotebookProgram
    limits: ExecutionLimits
    workdir: str
    # the checker's ends of the sandbox's data and kill sockets
    sockets: tuple[socket.socket, socket.socket] | None = None
    process: multiprocessing.process.BaseProcess | None = None
    conn: Connection | None = None
    outputs: dict[int, tuple[list[dict[str, Any]], int | None]] = field(default_factory=dict)
    running_cell: int | None = None
    cell_started: float = 0.0
    cell_seconds: dict[int, float] = field(default_factory=dict)  # each finished cell's run time
    completed: set[int] = field(default_factory=set)  # cells the checker ran to completion
    started: float = 0.0
    done: bool = False
    exited: bool = False
    reason: str | None = None  # why the run did not complete (None: it did)
    scratch: str | None = None  # the checker's temporary folder
    files: dict[str, bytes] = field(default_factory=dict)  # what the notebook wrote next to itself
    kept: KeptFilesBudget = field(default_factory=KeptFilesBudget)
    failed_ename: str = Failure.KERNEL_DIED
    # the sandbox's CPU so far, seconds (run, waited for a CPU): ``cgroups.CpuShare.usage``; None: unknown
    cpu_usage: Callable[[], tuple[float, float] | None] | None = None
    cpu_at_start: tuple[float, float] | None = None  # cpu_usage() when the running cell started
    starved: str | None = None  # a cell timed out while the machine starved it of CPU: why
    memory: MemoryLimit | None = None  # the checker's memory cgroup

    def start(self) -> None:
        ctx = _context()
        parent_end, child_end = ctx.Pipe(duplex=False)
        if self.sockets is None:
            raise RuntimeError("the sandbox's sockets are not set (start_notebook first)")
        data, kill = self.sockets
        # the checker's temporary folder is this process's: removed in close(), whatever the checker did
        self.scratch = tempfile.mkdtemp(prefix="autograder-checker-")
        self.memory = MemoryLimit(self.limits.checker_memory_bytes, kind="checkers")
        group = None if self.memory.path is None else str(self.memory.path)
        self.process = ctx.Process(target=run_notebook,
                                   args=(self.program, self.limits, self.workdir, self.scratch,
                                         child_end, data, kill, group), daemon=True)
        self.started = time.monotonic()
        _start(self.process)
        child_end.close()
        data.close()  # the checker holds its own copies now
        kill.close()
        self.conn = parent_end

    def waitables(self) -> list[Connection | int]:
        return [self._pipe(), self._child().sentinel] if not self.finished else []

    def _child(self) -> multiprocessing.process.BaseProcess:
        if self.process is None:
            raise RuntimeError("the notebook's checker was never started")
        return self.process

    def _pipe(self) -> Connection:
        if self.conn is None:
            raise RuntimeError("the notebook's checker was never started")
        return self.conn

    def _pid(self) -> int:
        pid = self._child().pid
        if pid is None:
            raise RuntimeError("the notebook's checker was never started")
        return pid

    @property
    def never_started(self) -> bool:
        return self.process is None

    @property
    def finished(self) -> bool:
        return self.done or self.exited

    def _drain(self) -> None:
        while not self.done and not self.exited:
            try:
                if not self._pipe().poll():
                    return
                message = self._pipe().recv()
            except (EOFError, OSError):  # the child is gone and its pipe is empty
                return
            kind = message[0]
            if kind == Event.START:
                self.running_cell, self.cell_started = message[1], time.monotonic()
                self.cpu_at_start = self.cpu_usage() if self.cpu_usage is not None else None
            elif kind == Event.CELL:
                _, index, outputs, count, completed = message
                self.outputs[index] = (outputs, count)
                if completed:
                    self.completed.add(index)
                if self.running_cell == index:
                    self.cell_seconds[index] = time.monotonic() - self.cell_started
                self.running_cell = None
                if any(o.get("ename") == Failure.CELL_TIMEOUT for o in outputs):
                    self._judge_timeout(index)
            elif kind == Event.DIED:  # the student's process is gone; the checker stops here
                _, index, ename, reason = message
                self.running_cell, self.failed_ename, self.reason = index, ename, reason
                if ename == Failure.CELL_TIMEOUT and index is not None:
                    self._judge_timeout(index)
            elif kind == Event.FILE:  # counted again here: the checker talks to the sandbox
                if self.kept.admit(str(message[1]), len(message[2])):
                    self.files[message[1]] = message[2]
            elif kind == Event.DONE:
                self.done = True

    def pump(self) -> None:
        """Read every message available, notice the child's exit, enforce the time and memory limits."""
        if self.never_started:
            return
        self._drain()
        process = self._child()
        if self.done:
            process.join(timeout=5)
            return
        if process.exitcode is not None:
            self._drain()  # what it wrote just before exiting
            self.exited = True
            if not self.done and self.reason is None:
                self.reason = _death_reason(process.exitcode, self.running_cell)
                if self.memory is not None and self.memory.oom_kills():
                    limit = (self.limits.checker_memory_bytes or 0) / 2**30
                    cell = self.running_cell
                    self.failed_ename = Failure.MEMORY
                    # whole sentences (a zh-TW student reads each as one catalogue entry)
                    self.reason = (
                        f"the checker passed its memory limit of {limit:.2f} GiB (twice "
                        f"--memory-limit, plus its own footprint) in cell {cell}, holding or "
                        "writing what the notebook's values asked for; the grading process was "
                        "killed" if cell is not None else
                        f"the checker passed its memory limit of {limit:.2f} GiB (twice "
                        "--memory-limit, plus its own footprint) between cells, holding or "
                        "writing what the notebook's values asked for; the grading process was "
                        "killed")
            return
        if self.running_cell is not None and self.cpu_usage is not None:
            self.cpu_usage()  # a thread that ends before the cell does still counts
        self._enforce_limits()

    def _enforce_limits(self) -> None:
        limits = Deadlines(self.program.timeout, self.program.notebook_timeout)
        whole = limits.notebook_s
        if whole and time.monotonic() - self.started > whole:
            self._kill(Failure.NOTEBOOK_TIMEOUT,
                       f"the notebook ran past its {whole:g} s limit (all cells together); the "
                       "grading process was killed")
            return
        timeout, kill_after = limits.cell_s, limits.parent_kill_s
        if timeout and kill_after and self.running_cell is not None:
            if time.monotonic() - self.cell_started > kill_after:
                self._judge_timeout(self.running_cell)
                if not self.exited:
                    self._kill(Failure.CELL_TIMEOUT,
                               f"cell ran past the {timeout:g} s time limit and did not stop when "
                               f"interrupted; the grading process was killed")
                return
        limit = self.limits.checker_rss_bytes
        if limit is not None:
            rss = resident_bytes(self._pid())
            if rss is not None and rss > limit:
                self._kill(Failure.MEMORY,
                           f"memory use {rss / 2**30:.2f} GiB passed the limit of "
                           f"{limit / 2**30:.2f} GiB; the grading process was killed")

    def _judge_timeout(self, index: int) -> None:
        """Cell ``index`` timed out: was it the machine's fault (``deadlines.starved_timeout``)?
        Then the rest of the run is worth nothing (it runs again): the checker is stopped now."""
        now = self.cpu_usage() if self.cpu_usage is not None else None
        if self.starved is None and now is not None and self.cpu_at_start is not None:
            self.starved = starved_timeout(index, time.monotonic() - self.cell_started,
                                           now[0] - self.cpu_at_start[0],
                                           now[1] - self.cpu_at_start[1])
            if self.starved is not None:
                self.running_cell = index
                self._kill(Failure.GRADER, self.starved)

    def _kill(self, ename: str, reason: str) -> None:
        self.failed_ename, self.reason = ename, reason
        try:
            os.kill(self._pid(), signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._child().join(timeout=5)
        self.exited = True

    def outcome(self, seconds: float) -> NotebookOutcome:
        """What this run produced, as the one result type of execution."""
        return NotebookOutcome(outputs=dict(self.outputs), reason=self.reason,
                               running_cell=self.running_cell, failed_ename=self.failed_ename,
                               seconds=seconds, files=dict(self.files),
                               cell_seconds=dict(self.cell_seconds), completed=set(self.completed),
                               starved=self.starved)

    def close(self) -> None:
        if self.sockets is not None and self.process is None:
            for end in self.sockets:
                end.close()
        if self.process is not None and self.process.exitcode is None:
            self._kill(self.failed_ename, self.reason or "grading stopped")
        if self.conn is not None:
            self.conn.close()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
        if self.memory is not None:
            self.memory.remove()


def _death_reason(exitcode: int, running_cell: int | None) -> str:
    """Why the grading process ended, one whole sentence per case (each a catalogue entry)."""
    cell = running_cell
    if exitcode == -signal.SIGKILL:
        reason = (f"the grading process was killed by SIGKILL (often the system running out of "
                  f"memory) while running cell {cell}" if cell is not None else
                  "the grading process was killed by SIGKILL (often the system running out of "
                  "memory) between cells")
    elif exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        reason = (f"the grading process was killed by {name} while running cell {cell}"
                  if cell is not None else f"the grading process was killed by {name} between cells")
    else:
        reason = (f"the grading process exited with code {exitcode} while running cell {cell}"
                  if cell is not None else
                  f"the grading process exited with code {exitcode} between cells")
    return reason
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return (f"the grading process was killed by {name} while running cell {cell}"
                if cell is not None else f"the grading process was killed by {name} between cells")
    return (f"the grading process exited with code {exitcode} while running cell {cell}"
            if cell is not None else f"the grading process exited with code {exitcode} between cells")


def wait_any(running: list[RunningNotebook], timeout: float,
             extra: list[socket.socket] | None = None) -> None:
    """Block until one of ``running`` has a message or exits (or one of ``extra`` is readable), or
    ``timeout`` seconds pass."""
    objects: list[Connection | socket.socket | int] = [w for r in running for w in r.waitables()]
    objects += list(extra or [])
    if objects:
        wait(objects, timeout=timeout)
    else:
        time.sleep(min(timeout, 0.01))
