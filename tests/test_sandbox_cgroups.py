"""A notebook's memory and CPU counted the way the kernel charges them (issue 46, items 2 and 8).

- The template's memory watchdog counts each page once (proportional set sizes), not the summed RSS
  of the sandbox's processes: a pool of forks sharing a buffer copy-on-write is not a hog; a pool of
  forks that really allocates still is.
- Each sandbox is in a cgroup with a CPU weight (``host.CpuShare``): processes in many sessions buy
  no more CPU than one.
- A sandbox that does not start in time is restarted, and the batch goes on without it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from autograder.grading.execute.forkserver import RunningNotebook, wait_any
from autograder.grading.execute.limits import ExecutionLimits, launch_message
from autograder.grading.model import STUDENT, NotebookProgram
from autograder.sandbox.host import SandboxProcess

LIMIT = 1536 * 2**20  # the watchdog's limit: a fresh child's footprint (a few hundred MB) + 1 GiB

# 50 children that keep (never write) a 100 MB buffer their parent filled: copy-on-write, one copy
SHARED_POOL = """
import os, time
buffer = bytearray(100 * 2**20)
buffer[::4096] = b'1' * len(buffer[::4096])
children = []
for _ in range(50):
    pid = os.fork()
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
pool_done = True
"""

# 6 children that each really allocate (and touch) 400 MB: 2.4 GB in all, past the limit
ALLOCATING_POOL = """
import os, time
children = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        mine = bytearray(400 * 2**20)
        mine[::4096] = b'2' * len(mine[::4096])
        time.sleep(20)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
pool_done = True
"""


@pytest.fixture(scope="module")
def sandbox():
    box = SandboxProcess()
    box.start()
    box.wait_ready()
    yield box
    box.close()


def _run(cells: list[str], box: SandboxProcess, tmp_path: Path, *, rss_limit: int) -> RunningNotebook:
    program = NotebookProgram(cells=[(i, code, [], STUDENT) for i, code in enumerate(cells)],
                              timeout=60)
    limits = ExecutionLimits(memory_limit_gb=None, student_address_space_bytes=None,
                             student_rss_bytes=rss_limit, checker_rss_bytes=None, threads=1)
    run = RunningNotebook(key="t", program=program, limits=limits, workdir=str(tmp_path))
    run.sockets = box.start_notebook(launch_message(program, limits), [])
    run.start()
    deadline = time.monotonic() + 90
    while not run.finished and time.monotonic() < deadline:
        wait_any([run], timeout=0.2)
        run.pump()
    run.close()
    assert run.finished
    deadline = time.monotonic() + 30
    while box.state == "busy" and time.monotonic() < deadline:
        time.sleep(0.05)
        box.pump()
    assert box.state == "ready", box.state
    return run


def test_forks_sharing_pages_copy_on_write_are_counted_once(tmp_path, sandbox):
    """50 forks of a notebook holding 100 MB: summed RSS says more than 5 GB, the kernel charges a
    few hundred MB; the notebook is not stopped (the old watchdog stopped it)."""
    run = _run([SHARED_POOL, "after = 1"], sandbox, tmp_path, rss_limit=LIMIT)
    assert run.reason is None, run.reason
    assert 1 in run.outputs


def test_forks_that_really_allocate_past_the_limit_are_stopped(tmp_path, sandbox):
    run = _run(["before = 1", ALLOCATING_POOL, "after = 1"], sandbox, tmp_path, rss_limit=LIMIT)
    assert run.failed_ename == "MemoryLimitExceeded" and "memory use" in run.reason, run.reason
    assert run.running_cell == 1 and 2 not in run.outputs
