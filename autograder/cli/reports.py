"""The staff's reports: ``feedback``, ``report`` and ``similarity``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.cli.common import Register, Subparsers, plain


def _add_feedback(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("feedback", help="HTML feedback per student (no hidden-check source)")
    p.set_defaults(run=_feedback)
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    p.add_argument("--student", dest="students", action="append", metavar="ID")


def _add_report(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="grades CSV and HTML report with figures")
    p.set_defaults(run=_report)
    p.add_argument("--output", type=Path, default=None, help="directory (default: reports/)")


def _add_similarity(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("similarity", help="pairs of submissions whose own cells are alike (for the "
                                          "course staff: it shows solution code)")
    p.set_defaults(run=_similarity)
    p.add_argument("assignments", nargs="+", metavar="ASSIGNMENT")
    p.add_argument("--threshold", type=float, default=None, metavar="T",
                   help="report every pair and cell at this similarity or more, in (0, 1] (default: "
                        "a cut-off per cell, for the pairs that stand out from that cell's own; "
                        "the page gives each cell's numbers)")
    p.add_argument("--output", type=Path, default=None,
                   help="directory (default: reports/similarity/)")


SUBCOMMANDS: dict[str, Register] = {
    "feedback": _add_feedback, "report": _add_report, "similarity": _add_similarity}


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    for add in SUBCOMMANDS.values():
        add(sub)


def _feedback(args: argparse.Namespace) -> int:
    from autograder.reports.feedback import feedback

    pages = feedback(assignments=args.assignments or None, students=args.students,
                     course_root=args.course_root, db_url=args.db_url)
    for page in pages:
        print(f"feedback {page}")
    for assignment, student, why in pages.failed:
        print(f"failed   {assignment}/{plain(student)}: {plain(why)}", file=sys.stderr)
    print(f"{len(pages)} feedback files, none showing hidden-check source; "
          f"{len(pages.failed)} student(s) failed")
    return 1 if pages.failed else 0  # the others' pages are written; a script still sees the failure


def _report(args: argparse.Namespace) -> int:
    from autograder.reports.report import report

    csv_path, html_path = report(course_root=args.course_root, db_url=args.db_url,
                                 output_dir=args.output,
                                 warn=lambda line: print(f"warning: {line}", file=sys.stderr))
    print(f"wrote {csv_path}\nwrote {html_path}")
    return 0


def _similarity(args: argparse.Namespace) -> int:
    from autograder.reports.similarity import similarity

    rule = "per-cell cut-off" if args.threshold is None else f"at {args.threshold:g} or more"
    for result in similarity(args.assignments, course_root=args.course_root, threshold=args.threshold,
                             output_dir=args.output):
        short = sum(len(owners) for owners in result.too_short.values())
        print(f"{result.assignment}: {len(result.matches)} pair(s) and cell(s) reported ({rule}); "
              f"{short} cell(s) too short to judge\nwrote {result.csv_path}\n"
              f"wrote {result.html_path}")
    return 0
