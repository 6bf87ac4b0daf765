"""The local executor (trusted side): notebooks run on this machine, a pool of warm sandboxes.

Up to ``workers`` notebooks at once, one bubblewrap sandbox each, a checker child per notebook
(``execute/runner.py``). It asks the pipeline for the next submission only when a sandbox is about to
be free, so sanitizing and recording (the parent) overlap with execution (the children): when a
notebook finishes, the next queued one starts on its sandbox (once the sandbox reports its clean-up)
before the parent records the finished one, so even a run with one sandbox (``--workers 1``) keeps it busy.
A notebook whose cell timed out while the machine starved it of CPU (``NotebookOutcome.starved``) runs
once more, first in the queue; starved again, its submission fails as a grader fault, never a score
(a remote node does the same: ``remote/node.py``, ``remote/handover.py``).
"""

from __future__ import annotations

import enum
import functools
import glob
import itertools
import logging
import os
import time
from collections import deque
from collections.abc import Iterator
from typing import Final

from autograder.course.nbgrader import Course
from autograder.grading.execute import forkserver
from autograder.grading.execute.limits import (
    ForkserverProbe,
    execution_limits,
    sandbox_memory_bytes,
)
from autograder.grading.execute.runner import NotebookRunner, sandboxes, wait_for_a_sandbox
from autograder.grading.executor import Outcomes
from autograder.grading.model import NotebookRun, Submission, starved_twice
from autograder.grading.options import GradeOptions
from autograder.grading.prepare import DeviceProbe, companion_files
from autograder.grading.progress import ProgressBar
from autograder.sandbox.host import SandboxProcess


def trusted_folders(options: GradeOptions) -> tuple[str, ...]:
    """What the checker must not see: the course folder and, for a SQLite gradebook elsewhere, its
    folder."""
    folders = [os.path.realpath(options.course_root),
               *(os.path.realpath(folder) for folder in options.hidden_folders)]
    url = options.db_url or ""
    if url.startswith("sqlite:///"):
        folders.append(os.path.dirname(os.path.realpath(url.removeprefix("sqlite:///"))))
    return tuple(folders)


class _End(enum.Enum):
    END = enum.auto()


_END: Final = _End.END  # the end of ``work`` (None from a stream means "nothing now, ask again")
# how long a finished notebook's sandbox may take to report its clean-up (milliseconds, usually)
# before the parent records the notebook anyway; the next one then starts after the record
CLEAN_UP_WAIT_S: Final = 0.1


class LocalExecutor:
    """``executor="local"``: this machine's CPUs (and GPU), ``options.workers`` notebooks at once."""

    name = "local"
    streams = True  # work may yield None: nothing now (pipeline.grade_stream)
    executes = True

    def __init__(self, options: GradeOptions, course: Course) -> None:
        del course  # its folders reach the sandbox policy through options (trusted_folders)
        self.options = options
        self.workers = options.worker_count
        self._probe: ForkserverProbe | None = None
        forkserver.start_forkserver()  # its imports overlap with the course checks
        # the first sandbox imports torch beside the template (a core each) instead of after the
        # probe; its device access is a guess that execute() corrects (a CPU run on a GPU machine
        # gets a fresh sandbox without the GPU's device nodes)
        self._early: SandboxProcess | None = self._sandbox(gpu=_gpu_likely(options))
        self._early.start()

    def _sandbox(self, *, gpu: bool) -> SandboxProcess:
        return SandboxProcess(sandboxed=self.options.sandbox, gpu=gpu,
                              memory_bytes=sandbox_memory_bytes(self.options.memory_limit_gb))

    def close(self) -> None:
        """Stop the sandbox started in ``__init__`` if ``execute`` never took it."""
        if self._early is not None:
            self._early.close()
            self._early = None

    def probe(self) -> DeviceProbe:
        self._probe = forkserver.probe_forkserver()
        return DeviceProbe(cuda_available=self._probe.cuda_available,
                           torch_version=self._probe.torch_version,
                           cuda_version=self._probe.cuda_version)

    def execute(self, work: Iterator[Submission | None], outcomes: Outcomes, *, device_used: str,
                progress: ProgressBar, timings: dict[str, float]) -> None:
        started = time.monotonic()
        if not self.options.sandbox:
            logging.getLogger("autograder").warning(
                "GRADING WITHOUT A SANDBOX (--no-sandbox): submissions run with this process's "
                "rights; they can read the solutions, reach the network and change the gradebook")
        probe = self._probe or forkserver.probe_forkserver()
        limits = execution_limits(probe, memory_limit_gb=self.options.memory_limit_gb,
                                  device_used=device_used, workers=self.workers,
                                  cpus=self.options.cpu_count, confined=self.options.sandbox,
                                  hidden=trusted_folders(self.options))
        pool = [self._sandbox(gpu=device_used == "cuda") for _ in range(self.workers)]
        early, self._early = self._early, None
        if early is not None and early.gpu == pool[0].gpu:
            pool[0] = early  # already importing torch since __init__
        elif early is not None:
            early.close()
        queue: deque[tuple[Submission, NotebookRun]] = deque()
        # the first sandbox now (if __init__ has not); the others once there is work for them
        # (free_sandboxes(wanted)): a one-notebook run starts one sandbox, a batch the whole pool
        with sandboxes(pool, start=1):
            first = next(work, _END)
            if first is _END:
                return  # nothing to execute
            work, more = itertools.chain([first], work), True
            runner, waiting = NotebookRunner(pool, limits=limits), True
            starved: set[tuple[tuple[str, str], str]] = set()  # notebooks run again once already
            try:
                while more or queue or runner.running:
                    more = more and _sanitize_ahead(work, queue, self.workers)
                    free = runner.free_sandboxes(wanted=len(queue))
                    if waiting:  # the pool's other sandboxes are starting beside the first
                        wait_for_a_sandbox(pool)
                        timings["setup"] += time.monotonic() - started
                        free, waiting = runner.free_sandboxes(wanted=len(queue)), False
                    if _start_queued(runner, queue, free, outcomes):  # the next ones meanwhile
                        more = more and _sanitize_ahead(work, queue, self.workers)
                    runner.wait(timeout=0.2)
                    finished = runner.finished()
                    if finished and queue:  # the next notebooks first, then record these meanwhile
                        runner.await_clean_up(timeout=CLEAN_UP_WAIT_S)
                        _start_queued(runner, queue, runner.free_sandboxes(wanted=len(queue)),
                                      outcomes)
                    for (submission, name), outcome in finished:  # check, score, record
                        if outcome.starved is None:
                            outcomes.executed(submission, name, outcome)
                        else:
                            _starved(submission, name, outcome.starved, queue, starved, outcomes)
            finally:
                runner.close()


def _sanitize_ahead(work: Iterator[Submission | None],
                    queue: deque[tuple[Submission, NotebookRun]], workers: int) -> bool:
    """Take submissions from ``work`` (the pipeline sanitizes each as it is asked) until ``workers``
    notebooks wait in ``queue`` or a stream has nothing now; False once ``work`` has ended."""
    while len(queue) < workers:
        submission = next(work, _END)
        if submission is _END:
            return False
        if submission is None:  # a stream with nothing to run now
            break
        queue.extend((submission, nb_run) for nb_run in submission.notebooks)
    return True


def _starved(submission: Submission, name: str, why: str,
             queue: deque[tuple[Submission, NotebookRun]], starved: set[tuple[tuple[str, str], str]],
             outcomes: Outcomes) -> None:
    """A notebook the machine starved of CPU: queued first to run again, or, the second time, its
    submission failed as a grader fault (nothing recorded, never a score)."""
    log = logging.getLogger("autograder")
    if (submission.key, name) not in starved:
        starved.add((submission.key, name))
        log.warning("%s/%s %s.ipynb: %s; it runs again", submission.assignment,
                    submission.student, name, why)
        queue.extendleft((submission, run) for run in submission.notebooks if run.name == name)
        return
    outcomes.failed(submission, starved_twice(name, why))


def _start_queued(runner: NotebookRunner, queue: deque[tuple[Submission, NotebookRun]],
                  free: list[SandboxProcess], outcomes: Outcomes) -> int:
    """Execute queued notebooks on the free sandboxes, a checker child each; how many started."""
    count = 0
    while queue and free:
        submission, nb_run = queue.popleft()
        outcomes.starting(submission)
        runner.start(free.pop(), (submission, nb_run.name), program=nb_run.require_program(),
                     workdir=str(submission.stage),
                     files=functools.partial(companion_files, submission.stage))
        count += 1
    return count


def _gpu_likely(options: GradeOptions) -> bool:
    """Whether this run will grade on CUDA, before the probe says so: a device node is there."""
    return options.device != "cpu" and bool(glob.glob("/dev/nvidia[0-9]*"))
