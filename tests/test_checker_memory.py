"""The checker's memory in a cgroup of its own, sized from ``--memory-limit`` (issue 46, item 5).

The decode budget (``codec.DecodeBudget``) is the first line against a notebook whose values make the
checker hold gigabytes; this is the second: what the checker allocates, and writes to its private tmpfs
``/tmp`` (which its resident memory does not show), for the student's values is counted by the kernel
and bounded. Past it the notebook fails with a clear message; the sandbox and the batch go on.
"""

from __future__ import annotations

import os
import time

import pytest

from autograder.grading.execute import forkserver
from autograder.grading.execute.forkserver import RunningNotebook, wait_any
from autograder.grading.execute.limits import (
    CHECKER_ALLOWANCE,
    ExecutionLimits,
    launch_message,
)
from autograder.grading.model import GRADE, STUDENT, NotebookProgram
from autograder.sandbox.cgroups import MemoryLimit, memory_cgroup_root

LIMIT_GB = 0.25  # --memory-limit: the checker's cgroup is 2 x 0.25 GiB + CHECKER_ALLOWANCE = 1.5 GiB
CHECKER_BYTES = int(2 * LIMIT_GB * 2**30) + CHECKER_ALLOWANCE

# the student's value asks a grade cell for 900 MiB in the checker's /tmp and 900 MiB of heap: never
# decoded (the decode budget does not see it), and a resident size well under the cgroup's limit
STUDENT_CELL = "n = 900 * 2**20\n"
GRADE_CELL = """
with open('/tmp/expected', 'wb') as out:
    for _ in range(n // 2**20):
        out.write(b'x' * 2**20)
held = bytearray(n)
held[::4096] = b'1' * len(held[::4096])
print('held', len(held))
"""


def test_a_checker_that_holds_too_much_for_the_notebooks_values_is_stopped_by_its_cgroup(
        tmp_path, sandbox):
    if os.geteuid() != 0 or memory_cgroup_root() is None:
        pytest.skip("needs root and a writable memory cgroup (cgroup v1 or v2)")
    made: list[MemoryLimit] = []
    real = forkserver.MemoryLimit

    def watched(limit, **kwargs):
        made.append(real(limit, **kwargs))
        return made[-1]

    forkserver.MemoryLimit = watched  # type: ignore[misc]
    try:
        program = NotebookProgram(cells=[(0, STUDENT_CELL, [], STUDENT), (1, GRADE_CELL, [], GRADE),
                                         (2, "after = 1", [], STUDENT)], timeout=60)
        # the parent's RSS watchdog at the cgroup's size too: it never sees the tmpfs
        limits = ExecutionLimits(memory_limit_gb=LIMIT_GB, student_address_space_bytes=None,
                                 student_rss_bytes=None, checker_rss_bytes=CHECKER_BYTES,
                                 checker_memory_bytes=CHECKER_BYTES, threads=1)
        run = RunningNotebook(key="t", program=program, limits=limits, workdir=str(tmp_path))
        run.sockets = sandbox.start_notebook(launch_message(program, limits), [])
        run.start()
        deadline = time.monotonic() + 120
        while not run.finished and time.monotonic() < deadline:
            wait_any([run], timeout=0.2)
            run.pump()
        assert run.finished
        group = made[0].path
        assert group is not None and made[0].limit == CHECKER_BYTES
        assert group.parent.name == f"autograder-checkers-{os.getpid()}"
        run.close()
    finally:
        forkserver.MemoryLimit = real  # type: ignore[misc]
    assert run.failed_ename == "MemoryLimitExceeded", (run.reason, run.outputs)
    assert "the checker passed its memory limit of 1.50 GiB" in run.reason, run.reason
    assert run.running_cell == 1 and 1 not in run.completed and 2 not in run.outputs
    assert not group.exists()  # removed with the checker
    deadline = time.monotonic() + 30
    while sandbox.state == "busy" and time.monotonic() < deadline:
        time.sleep(0.05)
        sandbox.pump()
    assert sandbox.state == "ready"  # the student's side goes on: the next notebook gets it
