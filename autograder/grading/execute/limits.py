"""The limits of one notebook's run on this machine (trusted side), derived from ``memory_limit_gb``.

``memory_limit_gb`` (``GradeOptions``, ``--memory-limit``) is the memory one notebook may use beyond
what a fresh child of the warm template uses here. On the machine that runs the notebook (this one, or
a Slurm node) it becomes, under names that say what each applies to:

- ``student_address_space_bytes``: RLIMIT_AS of the student's process (not on CUDA: the driver
  reserves address space it never touches), baseline + limit + slack;
- ``student_rss_bytes``: the sandbox template's watchdog on the student's resident memory;
- ``checker_rss_bytes``: the parent's watchdog on the checker, a backstop above the limit so the
  student's own MemoryError (a graceful 0 for that cell) comes first;
- ``checker_memory_bytes``: the checker's memory cgroup (``cgroups.MemoryLimit``, as root), counting
  what its resident memory does not show (its private tmpfs ``/tmp``): twice the limit (what the
  decode budget lets it decode and write for the student's values) plus ``CHECKER_ALLOWANCE``.

``launch_message`` puts them into the sandbox's ``protocol.NotebookLaunch``; nothing renames them on the way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from autograder.grading.model import NotebookProgram
from autograder.sandbox.deadlines import Deadlines

if TYPE_CHECKING:
    from autograder.sandbox.inside.protocol import NotebookLaunch


@dataclass(frozen=True)
class ForkserverProbe:
    """What a fresh child of the template sees: its footprint (the baseline the per-submission memory
    limit is added to) and the torch build, so the parent never has to import torch itself."""

    virtual_bytes: int
    resident_bytes: int
    cuda_available: bool
    torch_version: str
    cuda_version: str | None


ADDRESS_SPACE_SLACK = 1 << 30  # threads and allocator arenas reserve address space they never touch
FILE_SIZE_BYTES = 256 * 2**20  # RLIMIT_FSIZE of the student's process
STUDENT_PROCESSES = 512  # processes and threads of the student's process (RLIMIT_NPROC)


@dataclass(frozen=True)
class ExecutionLimits:
    """Memory and thread limits of one notebook's run on this machine."""

    memory_limit_gb: float | None  # as given (None or 0: no memory limit)
    student_address_space_bytes: int | None
    student_rss_bytes: int | None
    checker_rss_bytes: int | None
    threads: int  # torch threads of the checker and of the student's process
    checker_memory_bytes: int | None = None  # the checker's memory cgroup (None: none)
    confined: bool = True  # the checker gets its own view of the machine (``confine.py``)
    hidden: tuple[str, ...] = ()  # folders the checker must not see (the course, the gradebook's)


TEMPLATE_ALLOWANCE = 2 * 2**30  # the template and a fresh child's footprint, with room to spare
CHECKER_ALLOWANCE = 2**30  # the checker's own: its shell, the reference computations, companion files


def sandbox_memory_bytes(memory_limit_gb: float | None) -> int | None:
    """The memory cgroup of one sandbox (``cgroups.MemoryLimit``): the notebook's limit, plus the
    template and the notebook's tmpfs (whose pages the RSS watchdog does not see); None: no limit."""
    if not memory_limit_gb:
        return None
    from autograder.sandbox.inside.protocol import NOTEBOOK_TMPFS_BYTES

    return int(memory_limit_gb * 2**30) + TEMPLATE_ALLOWANCE + sum(NOTEBOOK_TMPFS_BYTES.values())


def execution_limits(probe: ForkserverProbe, *, memory_limit_gb: float | None, device_used: str,
                     workers: int, cpus: int, confined: bool = True,
                     hidden: tuple[str, ...] = ()) -> ExecutionLimits:
    """``memory_limit_gb`` on top of what a fresh child of the template uses (``probe``); ``cpus``
    shared by ``workers`` notebooks at once."""
    vm, rss = probe.virtual_bytes, probe.resident_bytes
    limit = int(memory_limit_gb * 2**30) if memory_limit_gb else None
    address_space = (vm + limit + ADDRESS_SPACE_SLACK) if limit and device_used != "cuda" else None
    # where no address-space limit can be set (CUDA) the checker's watchdog is the limit itself
    checker_rss = (rss + limit + (2 * ADDRESS_SPACE_SLACK if address_space else 0)) if limit else None
    return ExecutionLimits(memory_limit_gb=memory_limit_gb,
                           student_address_space_bytes=address_space,
                           student_rss_bytes=(rss + limit) if limit else None,
                           checker_rss_bytes=checker_rss,
                           checker_memory_bytes=(2 * limit + CHECKER_ALLOWANCE) if limit else None,
                           threads=max(1, cpus // max(1, workers)),
                           confined=confined, hidden=tuple(hidden))


def launch_message(program: NotebookProgram, limits: ExecutionLimits) -> NotebookLaunch:
    """What the sandbox template applies to the student's process for ``program`` (its id is the
    sandbox's to set)."""
    cpu = Deadlines(program.timeout, cells=len(program.cells)).cpu_rlimit_s  # sandbox/deadlines.py, step 5
    return {"id": 0, "env": dict(program.sandbox_env), "threads": limits.threads,
            "removed": [dict(r) for r in program.removed],  # type: ignore[misc]
            "student_rss_bytes": limits.student_rss_bytes,
            "rlimits": {"as": limits.student_address_space_bytes, "fsize": FILE_SIZE_BYTES,
                        "nproc": STUDENT_PROCESSES, "cpu": cpu, "core": 0}}
