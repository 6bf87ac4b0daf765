"""What a Slurm array task is, seen from its node (trusted side): ``remote.node.grade_chunk``'s
``task`` for this backend."""

from __future__ import annotations

import os
import signal

from autograder.grading.remote.node import NodeTask

# scancel and preemption send SIGTERM; submitit's time-limit warning is SIGUSR2
STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR2)


def slurm_task() -> NodeTask:
    """This array task: submitit's id ("<array job>_<task>", or the plain job id), the CPUs Slurm
    gave it (all this process may use when run outside Slurm), and Slurm's stop signals."""
    array, index = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    task_id = f"{array}_{index}" if array and index else os.environ.get("SLURM_JOB_ID", "")
    given = os.environ.get("SLURM_CPUS_PER_TASK", "")
    cpus = int(given) if given.isdigit() and int(given) > 0 else len(os.sched_getaffinity(0))
    return NodeTask(id=task_id, cpus=cpus, stop_signals=STOP_SIGNALS)
