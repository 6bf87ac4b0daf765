"""The execute loop (trusted side): notebooks on a pool of warm sandboxes, a checker child each.

Shared by the local executor (``grading/local.py``) and by an array task on a Slurm node
(``grading/slurm/node.py``), so a notebook runs the same way wherever it runs: the same sandbox, the
same limits (``execution_limits``, from the warm template's footprint on that machine), the same device
rule. The caller owns the queue and decides what a finished notebook means::

    limits = execution_limits(forkserver.probe_forkserver(), memory_limit_gb=4, ...)
    with sandboxes(pool):                          # start every sandbox now, close them at the end
        wait_for_a_sandbox(pool)
        runner = NotebookRunner(pool, limits=limits)
        while queue or runner.running:
            free = runner.free_sandboxes()        # read the sandboxes' reports, restart dead ones
            while queue and free:
                tag, program, workdir, files = queue.popleft()
                runner.start(free.pop(), tag, program=program, workdir=workdir, files=files)
            runner.wait(0.2)                       # a message, an exit, or a sandbox report
            for tag, outcome in runner.finished():
                ...                                # a NotebookOutcome (``starved``: run it again)

This module imports neither nbformat nor nbgrader: an array task pays only for what executes.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autograder.errors import GradingError
from autograder.grading.execute import forkserver
from autograder.grading.execute.limits import ExecutionLimits, launch_message
from autograder.grading.model import NotebookOutcome, NotebookProgram
from autograder.sandbox.host import SandboxProcess

CLEAN_UP_S = 15.0  # a sandbox must report its clean-up this soon after its notebook's checker ended
LOG_WAIT_S = 2.0  # a notebook that did not complete: how long its sandbox may take to log its end


@dataclass
class _Slot:
    tag: Any  # the caller's handle for this notebook
    run: forkserver.RunningNotebook
    box: SandboxProcess
    log_from: int = 0  # where the sandbox's log stood when this notebook started
    log: str | None = None  # its part of the log, read before a dead sandbox is restarted


class NotebookRunner:
    """Starts one checker child per notebook beside a free sandbox of ``pool``, watches it (time and
    memory limits: ``forkserver.RunningNotebook``) and hands back each run once it is finished.

    ``start_sandbox(box)`` starts (or restarts) one sandbox of the pool; default ``box.start()``."""

    def __init__(self, pool: list[SandboxProcess], *, limits: ExecutionLimits,
                 start_sandbox: Callable[[SandboxProcess], None] | None = None) -> None:
        self.pool = pool
        self.limits = limits
        self.start_sandbox = start_sandbox or SandboxProcess.start
        self.running: list[_Slot] = []

    def free_sandboxes(self, wanted: int | None = None) -> list[SandboxProcess]:
        """Read every sandbox's reports ("ready", "done"), restart dead ones; return the ready ones
        that no running notebook holds. With ``wanted``, a sandbox not running yet is started only
        while fewer than ``wanted`` are free or starting (one notebook to grade starts one sandbox,
        not the whole pool; each imports torch)."""
        for box in self.pool:
            box.pump()
            if (box.state == "busy" and box.finished_at is not None
                    and time.monotonic() - box.finished_at > CLEAN_UP_S):
                box.close()  # it never reported its clean-up: stopped, or stuck; never reused
                box.state = "dead"
            if box.state == "dead":
                for slot in self.running:  # its log goes with the restart: keep their part now
                    if slot.box is box and slot.log is None:
                        slot.log = box.log_since(slot.log_from)
                box.state = "new"
        if all(box.state == "failed" for box in self.pool):
            raise _none_started(self.pool)
        held = {id(slot.box) for slot in self.running}
        coming = sum(box.state in ("ready", "starting") and id(box) not in held for box in self.pool)
        for box in self.pool:
            if box.state == "new" and (wanted is None or coming < wanted):
                self.start_sandbox(box)
                coming += 1
        return [box for box in self.pool if box.state == "ready" and id(box) not in held]

    def start(self, box: SandboxProcess, tag: Any, *, program: NotebookProgram, workdir: str,
              files: Callable[[], list[tuple[str, bytes]]]) -> forkserver.RunningNotebook:
        """Hand one notebook to ``box`` and fork its checker in ``workdir``. ``files()``: the
        companion files the student's process gets. A sandbox that cannot take the program makes a run
        that is already finished, with the reason (it ran no cell: nothing is recorded from it)."""
        run = forkserver.RunningNotebook(key=tag, program=program, limits=self.limits, workdir=workdir,
                                         cpu_usage=None if box.cpu is None else box.cpu.usage)
        self.running.append(_Slot(tag, run, box, log_from=box.log_size()))
        try:
            run.sockets = box.start_notebook(launch_message(program, self.limits), files())
        except GradingError as error:  # the sandbox died between jobs: this notebook's run fails
            run.exited, run.reason = True, f"the sandbox could not take it ({error})"
            run.started = time.monotonic()
            return run
        run.start()
        return run

    def wait(self, timeout: float = 0.2) -> None:
        """Block until a checker or a sandbox has something to say, or ``timeout`` seconds pass."""
        forkserver.wait_any([slot.run for slot in self.running], timeout=timeout,
                         extra=[box.control for box in self.pool if box.control is not None])

    def await_clean_up(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the sandboxes whose notebook has just finished to
        report their clean-up ("done", milliseconds after the checker's end): the caller can start
        the next notebooks before it records the finished ones."""
        deadline = time.monotonic() + timeout
        while True:
            cleaning = [box for box in self.pool if box.control is not None and box.state == "busy"
                        and box.finished_at is not None]
            left = deadline - time.monotonic()
            if not cleaning or left <= 0:
                return
            select.select(cleaning, [], [], left)
            for box in cleaning:
                box.pump()

    def finished(self) -> list[tuple[Any, NotebookOutcome]]:
        """Enforce the limits of the running notebooks; return ``(tag, outcome)`` of each one that
        has finished since the last call (its checker is closed)."""
        done, still = [], []
        for slot in self.running:
            slot.run.pump()
            if not slot.run.finished:
                still.append(slot)
                continue
            seconds = time.monotonic() - slot.run.started
            slot.run.close()
            slot.box.finished_at = time.monotonic()
            outcome = slot.run.outcome(seconds)
            if outcome.reason is not None:  # did not complete: its sandbox's log, for the staff
                if slot.log is None:
                    self._await_done(slot.box, LOG_WAIT_S)  # the template's last line about it
                outcome.sandbox_log = slot.log if slot.log is not None \
                    else slot.box.log_since(slot.log_from)
            done.append((slot.tag, outcome))
        self.running = still
        return done

    @staticmethod
    def _await_done(box: SandboxProcess, timeout: float) -> None:
        """Up to ``timeout`` seconds for ``box`` to report its notebook's end (its log's last line)."""
        deadline = time.monotonic() + timeout
        while box.control is not None and box.state == "busy" and time.monotonic() < deadline:
            select.select([box.control], [], [], max(0.0, deadline - time.monotonic()))
            box.pump()

    def close(self) -> None:
        """Kill every checker still running (the sandboxes are the pool owner's to close)."""
        for slot in self.running:
            slot.run.close()
        self.running = []


class sandboxes:
    """Start the first ``start`` sandboxes of the pool now (default all: they import torch while the
    rest starts; the others wait for ``free_sandboxes(wanted=...)``); close them all at the end,
    whatever happens."""

    def __init__(self, pool: list[SandboxProcess], *, start: int | None = None) -> None:
        self.pool = pool
        self.start = len(pool) if start is None else start

    def __enter__(self) -> list[SandboxProcess]:
        for box in self.pool[:self.start]:
            if box.state == "new":  # one started earlier (the local executor's first) is kept
                box.start()
        return self.pool

    def __exit__(self, *exc_info: object) -> None:
        for box in self.pool:
            box.close()


def wait_for_a_sandbox(pool: list[SandboxProcess]) -> None:
    """Block until one sandbox of the pool is ready. One that does not start in time (or ends while
    starting) is killed and restarted, ``START_TRIES`` times in a row at most, then left out (the
    pool shrinks); a sandbox not started yet is started while none is starting. Grading stops, with
    the log, only when no sandbox of the pool can start."""
    while True:
        for box in pool:
            box.pump()
        if any(box.state == "ready" for box in pool):
            return
        for box in pool:
            if box.state == "dead":  # a failed start, to be tried again
                box.start()
        if not any(box.state == "starting" for box in pool):
            waiting = [box for box in pool if box.state == "new"]
            if not waiting:
                raise _none_started(pool)
            waiting[0].start()
        select.select([box.control for box in pool if box.control is not None], [], [], 0.2)


def _none_started(pool: list[SandboxProcess]) -> GradingError:
    failures = [box.failure for box in pool if box.failure]
    return GradingError(f"no sandbox of the pool of {len(pool)} could start; the last: "
                        f"{failures[-1] if failures else '(no log)'}")
