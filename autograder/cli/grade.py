"""``autograder grade``: autograde submissions into the gradebook (``--preview``: whose total a
regrade would change), and the summary table ``demo`` prints too."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder.cli.common import Register, Subparsers, executor_arguments, plain, slurm_settings
from autograder.errors import AutograderError
from autograder.grading.options import (
    GRADING_SETTINGS,
    SlurmOptions,
    add_grading_arguments,
    given_grading,
    resolve_grading,
)

if TYPE_CHECKING:
    from autograder.grading import GradeSummary


def _add_grade(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("grade", help="autograde submissions into the gradebook")
    p.set_defaults(run=_grade)
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT",
                   help="default: every assignment with submissions")
    p.add_argument("--student", dest="students", action="append", metavar="ID",
                   help="grade only this student (repeatable)")
    add_grading_arguments(p, [name for name in GRADING_SETTINGS if name != "executor"])
    p.add_argument("-f", "--force", action="store_true", help="regrade submissions already graded")
    p.add_argument("--preview", action="store_true",
                   help="regrade every submission in a scratch copy of the course and list whose "
                        "total would change (old -> new); the gradebook and autograded/ are not "
                        "touched. After a hidden-test fix: --preview, then --force")
    p.add_argument("--notebook", default=None, metavar="GLOB",
                   help="grade only these notebooks of the assignment (nbgrader's --notebook)")
    p.add_argument("--no-execute", action="store_true",
                   help="do not execute: score the outputs as submitted (nbgrader's --no-execute; "
                        "the same as --executor as-submitted)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-sandbox", action="store_true",
                   help="DEBUGGING ONLY: run submissions without the bubblewrap sandbox (they can then "
                        "read the solutions, reach the network and change the gradebook)")
    executor_arguments(p)
    p.add_argument("--slurm-folder", type=Path, default=None, metavar="DIR",
                   help="slurm: chunks, logs and results, shared with the nodes "
                        "(default: .slurm/grade in the course)")


SUBCOMMANDS: dict[str, Register] = {"grade": _add_grade}


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    for add in SUBCOMMANDS.values():
        add(sub)


def _grade(args: argparse.Namespace) -> int:
    from autograder.grading import grade

    if args.no_sandbox:
        print("!" * 78 + "\nGRADING WITHOUT A SANDBOX (--no-sandbox): every submission runs with this "
              "process's rights.\nIt can read the solutions and hidden checks, reach the network "
              "and rewrite the gradebook.\nUse this only to debug the grader, never for real "
              "grades.\n" + "!" * 78, file=sys.stderr)

    given = given_grading(args)
    if args.no_execute:
        if given.get("executor", "as-submitted") != "as-submitted":
            raise AutograderError(f"--no-execute runs no executor; drop --executor {given['executor']}")
        given["executor"] = "as-submitted"
    settings = resolve_grading(args.course_root, given)  # c.Autograder.<name>, then the flags
    slurm_options = slurm_settings(args)
    if args.preview:
        return _preview(args, settings, slurm_options)
    summary = grade(assignments=args.assignments or None, students=args.students,
                    course_root=args.course_root, db_url=args.db_url, force=args.force,
                    progress=not args.no_progress, slurm=slurm_options, slurm_folder=args.slurm_folder,
                    sandbox=not args.no_sandbox, notebook=args.notebook, **settings)
    print_summary(summary)
    return 1 if summary.count("failed") else 0


def _preview(args: argparse.Namespace, settings: dict[str, Any], slurm_options: SlurmOptions | None) -> int:
    from autograder.grading import preview_regrade

    if args.notebook:
        raise AutograderError("--preview regrades whole submissions; drop --notebook")
    result = preview_regrade(assignments=args.assignments or None, students=args.students,
                             course_root=args.course_root, db_url=args.db_url,
                             progress=not args.no_progress, slurm=slurm_options,
                             slurm_folder=args.slurm_folder, sandbox=not args.no_sandbox,
                             **settings)
    failed = [r for r in result.summary.results if r.status == "failed"]
    for r in failed:
        print(f"failed    {r.assignment}/{plain(r.student)}: {plain('; '.join(r.reasons))}",
              file=sys.stderr)
    if result.changes:
        print("would change (student, assignment: gradebook -> regrade):")
    for change in result.changes:
        old = "not graded" if change.old is None else f"{change.old:g}"
        new = "failed" if change.new is None else f"{change.new:g}"
        of = "" if change.max_score is None else f" of {change.max_score:g}"
        print(f"  {plain(change.student)} {change.assignment}: {old} -> {new}{of}")
    names = " ".join(args.assignments) if args.assignments else ""
    print(f"preview: {len(result.changes)} total(s) would change, {result.unchanged} unchanged, "
          f"{len(failed)} failed; nothing was recorded (the gradebook and autograded/ are as they "
          f"were). To record the regrade: autograder grade {names + ' ' if names else ''}--force")
    line = result.summary.not_run_line()
    if line:
        print(line)
    return 1 if failed else 0


def print_summary(summary: GradeSummary) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    graded = [r for r in summary.results if r.status != "skipped" or r.reasons]
    if graded:
        from rich.table import Column

        # ids and scores are never cut or wrapped in a narrow terminal; the problems wrap
        table = Table(Column("assignment", no_wrap=True), Column("student", no_wrap=True),
                      Column("score", no_wrap=True), "seconds", "problems")
        for r in sorted(graded, key=lambda r: (r.assignment, r.student)):
            score = f"{r.score:g}/{r.max_score:g}" if r.score is not None else r.status
            # a student's text is plain text: no markup, no terminal control sequences
            table.add_row(*(Text(plain(cell)) for cell in (
                r.assignment, r.student, score, f"{r.seconds:.1f}", "; ".join(r.reasons))))
        Console().print(table)
    over = [r for r in summary.results if r.score is not None and r.max_score is not None
            and r.score > r.max_score]
    for r in over:
        print(f"WARNING {r.assignment}/{plain(r.student)}: score {r.score:g} is above the maximum "
              f"{r.max_score:g} (extra credit in the gradebook?)", file=sys.stderr)
    count = summary.count("graded")
    rate = 60 * count / summary.seconds if summary.seconds and count else 0.0
    regraded = summary.regraded()
    again = f", of them regraded {regraded} (submission changed)" if regraded else ""
    print(f"graded {count}{again}, skipped {summary.count('skipped')} (already graded; --force "
          f"regrades), failed {summary.count('failed')} on {summary.device} in "
          f"{summary.seconds:.1f} s ({rate:.0f} submissions/minute)")
    not_run = summary.not_run_line()
    if not_run:
        print(not_run)
