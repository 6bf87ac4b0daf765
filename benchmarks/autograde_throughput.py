"""Throughput of `autograder grade` against plain `nbgrader autograde`, on the same submissions.

    python benchmarks/autograde_throughput.py [--students N] [--workers W] [--timeout S]

Builds a temporary course with N synthetic students x the six assignments: student 0 submits the
reference solution, the others cycle through each exercise's catalogue of wrong (and alternative
correct) implementations, and student 1's first assignment never finishes (a timeout). Two identical
copies are graded: one by `nbgrader autograde <assignment>` (one call per assignment, as an instructor
runs it), one by `autograder grade` (sandboxed; a third copy once more with `--no-sandbox` to price the
sandbox). Prints notebooks/minute for both, the ratio, where the time goes, and checks that every grade cell has the same score in both gradebooks (exit status 1 if not).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nbgrader.api import Gradebook

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from autograder.authoring import samples  # noqa: E402
from autograder.authoring.release import (  # noqa: E402
    available_assignments,
    copy_course,
    nbgrader_environment,
    release,
    run_nbgrader,
)


def build_class(root: Path, assignments: list[str], students: int) -> int:
    """Write the submissions; return how many notebooks there are."""
    count = 0
    for number, assignment in enumerate(assignments):
        wrong, correct = samples.load_catalogue(assignment, course_root=REPO)
        variants = [None] + [e["replace"] for e in wrong] + [e["replace"] for e in correct]
        for index in range(students):
            replace = variants[index % len(variants)]
            if index == 1 and number == 0:  # the timeout: the first graded function never returns
                name = next(iter(wrong[0]["replace"]))
                replace = {name: f"def {name}(*args, **kwargs):\n    while True:\n        pass\n"}
            nb = samples.student_notebook(assignment, replace, course_root=REPO)
            samples.write_submission(nb, course_root=root, student=f"s{index:03d}",
                                     assignment=assignment)
            count += 1
    return count


def scores(root: Path, assignments: list[str]) -> dict[tuple[str, str, str], float]:
    found = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for assignment in assignments:
            for submission in gb.find_assignment(assignment).submissions:
                for nb in submission.notebooks:
                    for grade in nb.grades:
                        found[(assignment, submission.student.id, grade.name)] = float(grade.score)
    return found


def kernel_costs() -> dict[str, float]:
    """What plain nbgrader pays per notebook before any cell of the exercise runs."""
    from jupyter_client.manager import start_new_kernel

    env = nbgrader_environment()
    started = time.perf_counter()
    manager, client = start_new_kernel(kernel_name="python3", env=env, stderr=subprocess.DEVNULL)
    ready = time.perf_counter()
    client.execute_interactive("import torch, numpy, einops, jaxtyping, beartype", timeout=120)
    imported = time.perf_counter()
    client.execute_interactive(
        "from torch.utils.flop_counter import FlopCounterMode\n"
        "with FlopCounterMode(display=False):\n    torch.ones(2, 3) @ torch.ones(3, 4)", timeout=120)
    flop_counter = time.perf_counter()
    client.stop_channels()
    manager.shutdown_kernel(now=True)
    return {"kernel start": ready - started, "import torch & co": imported - ready,
            "first FlopCounterMode": flop_counter - imported}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=4)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds per cell, both graders")
    parser.add_argument("--keep", type=Path, default=None, help="keep the courses in this directory")
    args = parser.parse_args()

    assignments = available_assignments(REPO)
    base = Path(args.keep or tempfile.mkdtemp(prefix="autograde-bench-"))
    plain_root, fast_root, open_root = base / "nbgrader", base / "autograder", base / "no-sandbox"
    for root in (plain_root, fast_root, open_root):
        if root.exists():
            shutil.rmtree(root)
    copy_course(REPO, plain_root)
    release(assignments=assignments, course_root=plain_root)
    notebooks = build_class(plain_root, assignments, args.students)
    shutil.copytree(plain_root, fast_root)
    shutil.copytree(plain_root, open_root)
    print(f"{args.students} students x {len(assignments)} assignments = {notebooks} notebooks; "
          f"{os.cpu_count()} CPUs; per-cell timeout {args.timeout:g} s; courses in {base}")

    env = nbgrader_environment({"AUTOGRADER_ALLOW_CPU": "1"})
    started = time.perf_counter()
    for assignment in assignments:
        run_nbgrader(["autograde", assignment, "--force", f"--Execute.timeout={int(args.timeout)}"],
                     plain_root, env=env)
    plain = time.perf_counter() - started

    from autograder.grading import grade

    os.environ["AUTOGRADER_ALLOW_CPU"] = "1"
    started = time.perf_counter()
    summary = grade(course_root=fast_root, workers=args.workers, timeout=args.timeout,
                    allow_cpu=True, progress=False)
    fast = time.perf_counter() - started
    started = time.perf_counter()
    grade(course_root=open_root, workers=args.workers, timeout=args.timeout, allow_cpu=True,
          progress=False, sandbox=False)
    unsandboxed = time.perf_counter() - started

    plain_scores, fast_scores = scores(plain_root, assignments), scores(fast_root, assignments)
    differences = sorted(k for k in plain_scores.keys() | fast_scores.keys()
                         if plain_scores.get(k) != fast_scores.get(k))
    per_min_plain, per_min_fast = 60 * notebooks / plain, 60 * notebooks / fast
    print(f"\nplain nbgrader autograde : {plain:7.1f} s  {per_min_plain:6.1f} notebooks/minute "
          f"({plain / notebooks:.2f} s/notebook)")
    print(f"autograder grade ({args.workers} workers): {fast:7.1f} s  {per_min_fast:6.1f} "
          f"notebooks/minute ({fast / notebooks:.2f} s/notebook)")
    print(f"ratio                     : {plain / fast:.1f}x")
    print(f"same, --no-sandbox        : {unsandboxed:7.1f} s; the sandbox (bubblewrap, values-only "
          f"channel) costs {(fast - unsandboxed) / notebooks * 1000:+.0f} ms per notebook")
    print(f"identical scores          : {'yes' if not differences else 'NO'} "
          f"({len(plain_scores)} grade cells compared)")
    for key in differences[:20]:
        print(f"  differs {key}: nbgrader {plain_scores.get(key)} autograder {fast_scores.get(key)}")

    print("\nwhere the time goes")
    costs = kernel_costs()
    for what, seconds in costs.items():
        print(f"  nbgrader, per notebook  {what:<22} {seconds:6.2f} s")
    print(f"  nbgrader, per notebook  {'everything':<22} {plain / notebooks:6.2f} s")
    timings = summary.timings
    print(f"  autograder, once        {'setup + warm template':<22} {timings['setup']:6.2f} s")
    for key in ("sanitize", "record"):
        print(f"  autograder, per notebook {key + ' (parent)':<21} {timings[key] / notebooks:6.3f} s")
    print(f"  autograder, per notebook {'execute (child wall)':<21} "
          f"{timings['execute'] / notebooks:6.3f} s  (runs {args.workers} at a time)")
    slowest = max(summary.results, key=lambda r: r.seconds)
    print(f"  slowest submission: {slowest.assignment}/{slowest.student} {slowest.seconds:.1f} s "
          f"{'; '.join(slowest.reasons)}")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
