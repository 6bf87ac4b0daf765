"""The execute step's loop: notebooks on a pool of warm sandboxes, a checker child each, until finished.

Shared by local grading (``pipeline._Batch``) and by an array task on a Slurm node
(``cluster.grade_chunk``), so a notebook runs the same way wherever it runs: the same sandbox, the same
limits, the same device rule. The caller owns the queue and decides what a finished notebook means::

    runner = NotebookRunner(pool, rss_limit_bytes=limit)
    while queue or runner.running:
        free = runner.free_sandboxes()            # read the sandboxes' reports, restart dead ones
        while queue and free:
            tag, job, files = queue.popleft()
            runner.start(free.pop(), tag, key=..., job=job, files=files)
        runner.wait(0.2)                           # a message, an exit, or a sandbox report
        for tag, run, seconds in runner.finished():
            ...                                    # run.outputs, .reason, .running_cell, .failed_ename
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autograder.errors import GradingError
from autograder.grading import workers
from autograder.grading.execute import ExecutionJob
from autograder.grading.sandbox import SandboxProcess


@dataclass
class _Slot:
    tag: Any  # the caller's handle for this notebook
    run: workers.RunningNotebook
    box: SandboxProcess


class NotebookRunner:
    """Starts one checker child per notebook beside a free sandbox of ``pool``, watches it (time and
    memory limits: ``workers.RunningNotebook``) and hands back each run once it is finished.

    ``start_sandbox(box)`` starts (or restarts) one sandbox of the pool; default ``box.start()``."""

    def __init__(self, pool: list[SandboxProcess], *, rss_limit_bytes: int | None,
                 start_sandbox: Callable[[SandboxProcess], None] | None = None) -> None:
        self.pool = pool
        self.rss_limit_bytes = rss_limit_bytes
        self.start_sandbox = start_sandbox or SandboxProcess.start
        self.running: list[_Slot] = []

    def free_sandboxes(self) -> list[SandboxProcess]:
        """Read every sandbox's reports ("ready", "done"), restart dead ones; return the ready ones
        that no running notebook holds."""
        for box in self.pool:
            box.pump()
            if box.state == "dead":
                box.state = "new"
            if box.state == "new":
                self.start_sandbox(box)
        held = {id(slot.box) for slot in self.running}
        return [box for box in self.pool if box.state == "ready" and id(box) not in held]

    def start(self, box: SandboxProcess, tag: Any, *, key: Any, job: ExecutionJob,
              files: Callable[[], list[tuple[str, bytes]]]) -> workers.RunningNotebook:
        """Hand one notebook to ``box`` and fork its checker. ``files()``: the companion files the
        student's process gets. A sandbox that cannot take the job makes a run that is already
        finished, with the reason (it ran no cell: nothing is recorded from it)."""
        run = workers.RunningNotebook(key=key, job=job, rss_limit_bytes=self.rss_limit_bytes)
        self.running.append(_Slot(tag, run, box))
        try:
            run.sockets = box.start_job(job.sandbox_job(), files())
        except GradingError as error:  # the sandbox died between jobs: this notebook's run fails
            run.exited, run.reason = True, f"the sandbox could not take it ({error})"
            run.started = time.monotonic()
            return run
        run.start()
        return run

    def wait(self, timeout: float = 0.2) -> None:
        """Block until a checker or a sandbox has something to say, or ``timeout`` seconds pass."""
        workers.wait_any([slot.run for slot in self.running], timeout=timeout,
                         extra=[box.control for box in self.pool if box.control is not None])

    def finished(self) -> list[tuple[Any, workers.RunningNotebook, float]]:
        """Enforce the limits of the running notebooks; return ``(tag, run, seconds)`` of each one
        that has finished since the last call (its checker is closed)."""
        done, still = [], []
        for slot in self.running:
            slot.run.pump()
            if not slot.run.finished:
                still.append(slot)
                continue
            seconds = time.monotonic() - slot.run.started
            slot.run.close()
            done.append((slot.tag, slot.run, seconds))
        self.running = still
        return done

    def close(self) -> None:
        """Kill every checker still running (the sandboxes are the pool owner's to close)."""
        for slot in self.running:
            slot.run.close()
        self.running = []
