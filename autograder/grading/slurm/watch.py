"""The Slurm job states the chunk runner watches (trusted side): what ``squeue`` and ``sacct`` say
of each job, and what those states mean here (waiting, running, or lost).

``job_states`` asks ``squeue`` first (while the controller remembers a finished job, ``MinJobAge``)
and ``sacct`` for the jobs it has forgotten, when the cluster has accounting; ``client`` runs one Slurm
client command and returns its output, or None when it fails (``doctor.py`` uses it for ``sinfo``).
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence

# Slurm job states (squeue %T, sacct State) and what they mean here.
WAITING = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "CONFIGURING",
           "RESIZING", "SUSPENDED", "STOPPED"}
RUNNING = {"RUNNING", "COMPLETING", "SIGNALING", "STAGE_OUT"}
LOST = "LOST"  # neither squeue nor sacct knows the job and it left no result pickle

logger = logging.getLogger("autograder.slurm")


def job_states(job_ids: Sequence[str]) -> dict[str, str] | None:
    """Slurm state of each job id ("123" or array task "123_4"): squeue first, sacct for those the
    controller has forgotten (absent: unknown to both). None when squeue itself does not answer."""
    wanted = set(job_ids)
    states: dict[str, str] = {}
    done = client("squeue", "--me", "--states=all", "--array", "--noheader", "--format=%i|%T")
    if done is None:
        return None
    for line in done.splitlines():
        job_id, _, state = line.strip().partition("|")
        if job_id in wanted:
            states[job_id] = state.split()[0] if state else ""
    rest = sorted({j.split("_")[0] for j in wanted - set(states)})
    if rest:
        done = client("sacct", "--noheader", "--parsable2", "--allocations",
                       "--format=JobID,State", "--jobs", ",".join(rest))
        for line in (done or "").splitlines():
            job_id, _, state = line.strip().partition("|")
            if job_id in wanted and job_id not in states:
                states[job_id] = state.split()[0] if state else ""
    return states


def client(*args: str, timeout: float = 60) -> str | None:
    """A Slurm client command's stdout, or None (logged) when it fails."""
    try:
        done = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as error:
        logger.debug("%s: %s", " ".join(args), error)
        return None
    if done.returncode != 0:
        logger.debug("%s exited %d: %s", " ".join(args), done.returncode, done.stderr.strip())
        return None
    return done.stdout
