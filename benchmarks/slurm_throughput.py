"""Throughput of `autograder grade --executor slurm` against local grading, on the same class.

    python benchmarks/slurm_throughput.py [--students N] [--chunk-size C] [--cpus-per-task K]
                                          [--partition P] [--existing-cluster]

Builds the class of ``autograde_throughput.py`` (N students x the six assignments: the reference, the
catalogue's mistakes, one notebook that never finishes) and grades two identical copies: locally with
one worker per CPU, and on Slurm in chunks of C submissions, K CPUs per array task. Prints
notebooks/minute for both, their ratio, and what each chunk costs on top of its notebooks: the
queueing (submitted -> started on its node) and the node's setup (started -> first sandbox ready: the
warm template and the sandboxes import torch). Checks that every grade cell scores the same in both
gradebooks (exit status 1 if not).

Without ``--existing-cluster`` it starts the one-node test cluster of ``tests/support/slurm_cluster.py`` on
this machine (root, Debian's slurm-wlm and munge) and stops it at the end; the ratio then measures the
queueing and per-chunk set-up cost only, since both runs share the same CPUs. With it, it uses the
cluster that ``sinfo`` reaches (the class must sit on a file system the nodes share: ``--keep DIR``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests" / "support"))

from autograde_throughput import build_class, scores  # noqa: E402

from autograder.authoring.release import available_assignments, copy_course, release  # noqa: E402
from autograder.grading.options import SlurmOptions  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=8)
    parser.add_argument("--chunk-size", type=int, default=12, help="submissions per array task")
    parser.add_argument("--cpus-per-task", type=int, default=1)
    parser.add_argument("--max-jobs", type=int, default=16)
    parser.add_argument("--partition", default=None)
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per cell, both runs")
    parser.add_argument("--existing-cluster", action="store_true",
                        help="use the cluster sinfo reaches instead of starting the test cluster")
    parser.add_argument("--keep", type=Path, default=None, help="build the courses in this directory")
    args = parser.parse_args()
    os.environ.setdefault("AUTOGRADER_SEED", "336")
    os.environ["AUTOGRADER_ALLOW_CPU"] = "1"

    cluster = None
    if not args.existing_cluster:
        import slurm_cluster

        root = Path(tempfile.mkdtemp(prefix="slurm-"))
        cluster = slurm_cluster.SlurmCluster(root=root, conf=root / "slurm.conf")
        started = time.perf_counter()
        slurm_cluster.start_cluster(cluster)
        os.environ["SLURM_CONF"] = str(cluster.conf)
        args.partition = args.partition or cluster.partition
        print(f"started the one-node test cluster in {time.perf_counter() - started:.1f} s "
              f"({cluster.cpus} CPUs)")
    try:
        return run(args, cluster.cpus if cluster is not None else args.max_jobs * args.cpus_per_task)
    finally:
        if cluster is not None:
            left = slurm_cluster.stop_cluster(cluster)
            shutil.rmtree(cluster.root, ignore_errors=True)
            if left:
                print(f"processes left by the test cluster: {left}", file=sys.stderr)


def run(args, cluster_cpus: int) -> int:
    from autograder.grading import grade

    assignments = available_assignments(REPO)
    base = Path(args.keep or tempfile.mkdtemp(prefix="slurm-bench-"))
    local_root, slurm_root = base / "local", base / "slurm"
    for root in (local_root, slurm_root):
        if root.exists():
            shutil.rmtree(root)
    copy_course(REPO, local_root)
    release(assignments=assignments, course_root=local_root)
    notebooks = build_class(local_root, assignments, args.students)
    shutil.copytree(local_root, slurm_root)
    cpus = os.cpu_count() or 1
    options = SlurmOptions(partition=args.partition, cpus_per_task=args.cpus_per_task, mem_gb=2,
                           time_min=10, max_jobs=args.max_jobs, chunk_size=args.chunk_size)
    submissions = notebooks  # one notebook per assignment
    chunks = -(-submissions // args.chunk_size)
    print(f"{args.students} students x {len(assignments)} assignments = {notebooks} notebooks; "
          f"{cpus} CPUs here; per-cell timeout {args.timeout:g} s; courses in {base}")

    started = time.perf_counter()
    local = grade(course_root=local_root, workers=cpus, timeout=args.timeout, allow_cpu=True,
                  progress=False)
    local_s = time.perf_counter() - started
    started = time.perf_counter()
    on_slurm = grade(executor="slurm", course_root=slurm_root, slurm=options, timeout=args.timeout,
                     allow_cpu=True, progress=False, poll_s=0.5)
    slurm_s = time.perf_counter() - started

    graded = {summary.count("graded") for summary in (local, on_slurm)}
    local_scores, slurm_scores = scores(local_root, assignments), scores(slurm_root, assignments)
    differences = sorted(k for k in local_scores.keys() | slurm_scores.keys()
                         if local_scores.get(k) != slurm_scores.get(k))
    t = on_slurm.timings
    reported = max(1.0, t.get("chunks", 0.0))
    print(f"\nlocal ({cpus} workers)          : {local_s:7.1f} s  {60 * notebooks / local_s:6.1f} "
          "notebooks/minute")
    print(f"slurm ({chunks} chunks of {args.chunk_size}, "
          f"{args.cpus_per_task} CPU each): {slurm_s:7.1f} s  {60 * notebooks / slurm_s:6.1f} "
          "notebooks/minute")
    print(f"ratio local/slurm               : {local_s / slurm_s:.2f}")
    print(f"graded                          : {sorted(graded)} of {submissions}")
    print(f"identical scores                : {'yes' if not differences else 'NO'} "
          f"({len(local_scores)} grade cells compared)")
    for key in differences[:20]:
        print(f"  differs {key}: local {local_scores.get(key)} slurm {slurm_scores.get(key)}")
    slots = max(1, min(chunks, args.max_jobs, cluster_cpus // args.cpus_per_task))
    print(f"\nper chunk, on top of its notebooks ({int(reported)} array tasks, {slots} at a time)")
    print(f"  Slurm's latency (submitted -> started, first)  {t.get('queue first', 0):6.2f} s")
    print(f"  queueing incl. waiting for CPUs (mean)         {t.get('queue', 0) / reported:6.2f} s")
    print(f"  node setup (started -> first sandbox ready)    "
          f"{t.get('node setup', 0) / reported:6.2f} s")
    print(f"  wall time beyond local, per chunk              "
          f"{(slurm_s - local_s) * slots / chunks:6.2f} s  ((slurm - local) x {slots} / {chunks})")
    print(f"  executing, per notebook (child wall, summed)   {t['execute'] / notebooks:6.3f} s "
          f"(local: {local.timings['execute'] / notebooks:.3f} s)")
    print(f"  instructor: sanitize {t['sanitize']:.1f} s, record {t['record']:.1f} s, "
          f"setup {t['setup']:.1f} s")
    return 1 if differences or len(graded) != 1 else 0


if __name__ == "__main__":
    sys.exit(main())
