"""``doctor`` (this machine, and with --executor slurm the cluster) and ``demo`` (a sample class)."""

from __future__ import annotations

import argparse
from pathlib import Path

from autograder.cli.common import Register, Subparsers, executor_arguments, slurm_settings
from autograder.cli.grade import print_summary
from autograder.grading.options import add_grading_arguments


def _add_doctor(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("doctor", help="device, torch/CUDA versions, which GPU checks can run; "
                                      "with --executor slurm, the cluster too")
    p.set_defaults(run=_doctor)
    executor_arguments(p)


def _add_demo(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="sample class through collect -> grade -> feedback -> report")
    p.set_defaults(run=_demo)
    p.add_argument("directory", nargs="?", type=Path, default=None,
                   help="fresh directory for the demo course (default: a new temporary one)")
    add_grading_arguments(p, ("workers",))


SUBCOMMANDS: dict[str, Register] = {"doctor": _add_doctor, "demo": _add_demo}


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    for add in SUBCOMMANDS.values():
        add(sub)


def _doctor(args: argparse.Namespace) -> int:
    from autograder.tools.doctor import diagnose, diagnose_slurm, render

    options = slurm_settings(args)
    print(render(diagnose(course_root=args.course_root, db_url=args.db_url)))
    if options is None:
        return 0
    rows = diagnose_slurm(options, course_root=args.course_root)
    width = max(len(check) for check, _, _ in rows)
    print("\nSlurm (--executor slurm)")
    for check, ok, detail in rows:
        print(f"{check:<{width}}  {'ok  ' if ok else 'FAIL'}  {detail}")
    return 0 if all(ok for _, ok, _ in rows) else 1


def _demo(args: argparse.Namespace) -> int:
    from autograder.tools.demo import demo

    result = demo(directory=args.directory, workers=args.workers)
    for assignment, collected in result.collected.items():
        print(f"collect {assignment}: {len(collected.collected)} submissions")
    print_summary(result.summary)
    print(f"course    {result.course_root}\nfeedback  {len(result.feedback)} HTML files under "
          f"{result.course_root / 'feedback'}\nreport    {result.csv}\n          {result.html}")
    return 0
