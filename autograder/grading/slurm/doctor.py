"""``autograder doctor --executor slurm``: can the chunk runner work on this cluster (trusted side)?

``doctor_slurm`` answers in rows of (check, ok, detail): the controller answers ``sinfo``, the
partition exists and has GPUs when they are asked for, accounting is there (for information), and a
tiny job submitted through submitit comes back from a compute node.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from autograder.grading.options import SlurmOptions
from autograder.grading.slurm.watch import LOST, RUNNING, WAITING, client, job_states


def doctor_slurm(options: SlurmOptions, *, folder: Path | str | None = None,
                 timeout_s: float = 300) -> list[tuple[str, bool, str]]:
    """Can ``run_chunks`` work here with ``options``? Rows of (check, ok, detail): the controller
    answers ``sinfo``, the partition exists, it has GPUs when ``gpus_per_task`` > 0, accounting (for
    information), and a tiny job through submitit comes back within ``timeout_s``. ``folder`` (default
    ``./.slurm/doctor``) must be shared with the compute nodes, like ``run_chunks``'s."""
    rows: list[tuple[str, bool, str]] = []
    version = client("sinfo", "--version")
    partitions = client("sinfo", "--noheader", "--format=%P|%a|%D|%G")
    if version is None or partitions is None:
        rows.append(("sinfo", False, "sinfo is not installed or the controller does not answer "
                     "(SLURM_CONF, munge?)"))
        return rows
    found: dict[str, dict[str, Any]] = {}
    for line in partitions.splitlines():
        name, avail, nodes, gres = (line.split("|") + ["", "", ""])[:4]
        entry = found.setdefault(name.rstrip("*"), {"default": name.endswith("*"), "avail": avail,
                                                   "nodes": 0, "gres": set()})
        entry["nodes"] += int(nodes) if nodes.isdigit() else 0
        entry["gres"].update(g for g in gres.split(",") if g and g != "(null)")
    rows.append(("sinfo", True, f"{version.strip()}; partitions {', '.join(sorted(found))}"))
    wanted = options.partition or next((n for n, e in found.items() if e["default"]), None)
    part = found.get(wanted) if wanted else None
    if part is None:
        rows.append(("partition", False, f"{options.partition!r} not found" if options.partition
                     else "no partition given and the cluster has no default"))
    else:
        rows.append(("partition", part["avail"] == "up",
                     f"{wanted}: {part['avail']}, {part['nodes']} node(s)"
                     + ("" if options.partition else " (the cluster's default)")))
    if options.gpus_per_task:
        gpus = sorted(g for g in (part or {}).get("gres", ()) if g.startswith("gpu"))
        rows.append(("GPU gres", bool(gpus), ", ".join(gpus) if gpus
                     else f"no gpu gres on {wanted}, but gpus_per_task={options.gpus_per_task}"))
    else:
        rows.append(("GPU gres", True, "not needed (gpus_per_task=0)"))
    accounting = client("sacct", "--noheader", "--parsable2", "--format=JobID", "--starttime=now")
    rows.append(("accounting (sacct)", True, "available" if accounting is not None else
                 "disabled: states of finished jobs come from squeue while the controller keeps them"
                 " (MinJobAge)"))
    rows.append(_test_job(options, Path(folder) if folder else Path(".slurm") / "doctor", timeout_s))
    return rows


def _probe() -> str:
    import platform
    import socket

    return f"{socket.gethostname()}, python {platform.python_version()}"


def _test_job(options: SlurmOptions, folder: Path, timeout_s: float) -> tuple[str, bool, str]:
    import submitit

    small = replace(options, time_min=min(options.time_min, 5), cpus_per_task=1,
                    mem_gb=min(options.mem_gb or 1, 1))
    started = time.monotonic()
    try:
        executor = submitit.AutoExecutor(folder=folder.resolve() / "%j", cluster="slurm")
        executor.update_parameters(**small.executor_parameters())
        job = executor.submit(_probe)
    except Exception as error:  # noqa: BLE001 - the row says why
        return ("test job", False, f"could not submit: {error}")
    ended = None
    while not job.paths.result_pickle.exists():
        state = (job_states([job.job_id]) or {}).get(job.job_id, LOST)
        if state not in WAITING and state not in RUNNING:
            ended = ended or time.monotonic()
            if time.monotonic() - ended > 10:  # give a shared file system time to show the pickle
                return ("test job", False, f"job {job.job_id} ended {state} without a result; is "
                        f"{folder} shared with the compute nodes? log: {job.paths.stderr}")
        if time.monotonic() - started > timeout_s:
            job.cancel(check=False)
            return ("test job", False, f"job {job.job_id} not done after {timeout_s:.0f} s "
                    f"(state {state}); cancelled")
        time.sleep(1)
    try:
        where = job.result()
    except Exception as error:  # noqa: BLE001
        return ("test job", False, f"job {job.job_id} raised: {str(error).strip().splitlines()[-1]}")
    return ("test job", True, f"job {job.job_id} ran on {where} in {time.monotonic() - started:.1f} s")
