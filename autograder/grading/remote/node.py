"""What runs on another machine (trusted side, a node of any backend): execute a chunk of work.

``grade_chunk(chunk, results_dir, task=...)`` is what a backend runs there (the Slurm backend: in an
array task, with its ``SubmissionWork`` items). It executes the notebooks exactly as local
grading does (``execute/runner.py``: the warm checker template, a pool of bubblewrap sandboxes, one
checker child per notebook, limits measured on this machine) and writes one result per submission
to the shared results folder (``work.write_result``; the format is ``work.py``'s).

The backend says, through ``task`` (a picklable callable run on the node), which task this is, how
many CPUs it was given and which signals mean "the scheduler is stopping this task". It imports
neither nbformat nor nbgrader: checking, scoring and recording stay in the instructor's process,
the only gradebook writer.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from autograder.errors import GradingError
from autograder.grading.execute import forkserver
from autograder.grading.execute.limits import execution_limits, sandbox_memory_bytes
from autograder.grading.execute.runner import NotebookRunner, sandboxes, wait_for_a_sandbox
from autograder.grading.remote.work import NotebookWork, SubmissionWork, write_result
from autograder.sandbox.host import SandboxProcess

if TYPE_CHECKING:
    from types import FrameType

    _Handler: TypeAlias = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None

SETTLE_S = 1.0  # a run that ended abnormally is written this much later (see grade_chunk)


@dataclass(frozen=True)
class NodeTask:
    """What the backend knows about the task this chunk runs in (computed on the node)."""

    id: str  # the backend's name for the task (Slurm: "<array job>_<task>")
    cpus: int  # the CPUs the task was given
    stop_signals: tuple[int, ...] = ()  # signals by which the scheduler stops the task


def local_task() -> NodeTask:
    """A task outside any scheduler: this process's CPUs, SIGTERM stops it."""
    return NodeTask(id="", cpus=len(os.sched_getaffinity(0)), stop_signals=(signal.SIGTERM,))


def grade_chunk(chunk: list[SubmissionWork], results_dir: Path, *,
                task: Callable[[], NodeTask] = local_task) -> None:
    """Execute every notebook of ``chunk`` (runs inside one array task, on its node); write one
    result per submission with ``write_result`` as soon as its notebooks are done.

    Runs exactly as local grading does: a warm template, a pool of sandboxes, one checker child per
    notebook, limits measured here. The device decision comes with the items: a node without CUDA
    for a "cuda" chunk writes a failed result per submission (with the reason) and runs nothing.
    A notebook that ended abnormally (a crash, a kill) is written ``SETTLE_S`` later and only if
    the scheduler has not signalled this task meanwhile (``task().stop_signals``; Slurm's scancel,
    preemption and time-limit warning signal every process of the task): a student must not score
    0 for a task the scheduler stopped. A notebook whose cell timed out while the machine starved
    it of CPU runs again once, first; starved again, its result says so and the instructor's side
    fails the submission as a grader fault (``handover.hand_over``), as local grading does."""
    started = time.time()
    first = chunk[0]
    os.environ.update(dict(first.environ))
    host = socket.gethostname()
    this = task()
    forkserver.start_forkserver()
    pool = [SandboxProcess(sandboxed=first.sandboxed, gpu=first.device == "cuda",
                           memory_bytes=sandbox_memory_bytes(first.memory_limit_gb))
            for _ in range(max(1, min(first.workers or this.cpus,
                                     sum(len(work.notebooks) for work in chunk))))]
    with (_Stopping(this.stop_signals) as stopping, tempfile.TemporaryDirectory(prefix="autograder-node-") as scratch,
          sandboxes(pool)):  # the sandboxes import torch while the template does
        probe = forkserver.probe_forkserver()
        _log(f"{len(chunk)} submission(s) on {host}; warm template in {time.time() - started:.1f} s")
        if first.device == "cuda" and not probe.cuda_available:
            why = (f"node {host} has no CUDA device for this GPU-graded chunk (torch "
                   f"{probe.torch_version}, CUDA build {probe.cuda_version}); check --gpus-per-task "
                   "and the partition")
            for work in chunk:
                write_result(results_dir, work.key, json.dumps({"key": work.key, "error": why}))
            return
        limits = execution_limits(probe, memory_limit_gb=first.memory_limit_gb,
                                  device_used=first.device, workers=len(pool), cpus=this.cpus,
                                  confined=first.sandboxed,
                                  hidden=(os.path.realpath(results_dir),))
        wait_for_a_sandbox(pool)
        _log(f"{len(pool)} sandbox(es), the first ready after {time.time() - started:.1f} s")
        node = {"key": "", "host": host, "task": this.id, "device": first.device,
                "started": started, "ready": time.time()}
        queue: deque[tuple[SubmissionWork, NotebookWork, str]] = deque()
        for number, work in enumerate(chunk):
            folder = Path(scratch) / str(number)
            _write_files(folder, work.files)
            queue.extend((work, notebook, str(folder)) for notebook in work.notebooks)
        retry = {(item[0].key, item[1].name): item for item in queue}
        starved: set[tuple[str, str]] = set()  # run again once already: a timeout under starvation
        ran: dict[str, dict[str, dict[str, Any]]] = {work.key: {} for work in chunk}
        due: dict[str, float] = {}  # complete submissions -> when their result may be written
        runner = NotebookRunner(pool, limits=limits)
        try:
            while queue or runner.running or due:
                if stopping.signal:
                    raise GradingError(f"the scheduler stopped this task ({stopping.signal}); the "
                                       "results written before are kept")
                free = runner.free_sandboxes()
                while queue and free:
                    work, notebook, workdir = queue.popleft()
                    runner.start(free.pop(), (work, notebook.name), program=notebook.program,
                                 workdir=workdir, files=functools.partial(list, work.files))
                runner.wait(timeout=0.2)
                for (work, name), outcome in runner.finished():
                    if outcome.starved is not None and (work.key, name) not in starved:
                        starved.add((work.key, name))  # run again once, first; starved twice:
                        _log(f"{work.key} {name}.ipynb: {outcome.starved}; it runs again")
                        queue.appendleft(retry[(work.key, name)])  # the head fails it, never a score
                        continue
                    ran[work.key][name] = outcome.to_json()
                    later = time.monotonic() + (SETTLE_S if outcome.reason is not None else 0.0)
                    due[work.key] = max(due.get(work.key, 0.0), later)
                for work in chunk:
                    key = work.key
                    if (key in due and due[key] <= time.monotonic() and not stopping.signal
                            and len(ran[key]) == len(work.notebooks)):
                        write_result(results_dir, key, json.dumps(
                            dict(node, key=key, notebooks=ran.pop(key))))
                        del due[key]
                        _log(f"wrote {key}")
        finally:
            runner.close()


def _log(message: str) -> None:
    """One line in the task's log (its stderr, which the backend keeps), with the time."""
    print(f"autograder {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def _write_files(workdir: Path, files: Sequence[tuple[str, bytes]]) -> None:
    """The checker's working folder: the companion files, as the sandbox gets them."""
    workdir.mkdir(parents=True)
    for relative, data in files:
        target = (workdir / relative).resolve()
        if not target.is_relative_to(workdir.resolve()):
            raise GradingError(f"a companion file leaves its folder: {relative}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


class _Stopping:
    """Notices the scheduler stopping this task (``signals``) and passes each signal on to the
    handler it found (a backend's own, e.g. one that ends the task). Only the main thread can set handlers;
    elsewhere it watches nothing."""

    def __init__(self, signals: tuple[int, ...]) -> None:
        self.signals = signals
        self.signal: str | None = None
        self._previous: dict[int, _Handler] = {}

    def __enter__(self) -> _Stopping:
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.signal = signal.Signals(signum).name
        previous = self._previous.get(signum)
        if callable(previous):
            previous(signum, frame)

    def __exit__(self, *exc_info: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
