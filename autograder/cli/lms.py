"""``autograder lms canvas`` and ``autograder lms csv``: the gradebook's scores into the LMS."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.cli.common import Register, Subparsers, plain
from autograder.course.settings import add_setting_arguments

if TYPE_CHECKING:
    from autograder.lms.canvas import SyncResult


def _add_lms(sub: Subparsers[argparse.ArgumentParser]) -> None:
    from autograder.lms.options import CanvasOptions

    p = sub.add_parser("lms", help="grades into the LMS: Canvas through its API, or Canvas's "
                                   "import CSV")
    p.set_defaults(run=_lms)
    lms = p.add_subparsers(dest="lms_command", required=True, metavar="LMS_COMMAND")
    p = lms.add_parser("canvas", help="preview (default) or --apply the gradebook's scores in a "
                                      "Canvas course (token: $CANVAS_API_TOKEN)")
    add_setting_arguments(p, CanvasOptions, ["url", "course_id", "match"])
    _lms_assignment_argument(p)
    p.add_argument("--scale", action="store_true",
                   help="post score / nbgrader maximum × Canvas's points_possible when they differ "
                        "(without it, differing scales are refused)")
    p.add_argument("--apply", action="store_true",
                   help="write the 'set' rows to Canvas, then read Canvas back to check "
                        "(default: a dry run that writes nothing)")
    _lms_posting_arguments(p)
    p = lms.add_parser("csv", help="Canvas's gradebook import CSV (for staff without a token)")
    p.add_argument("output", type=Path, metavar="OUT.csv")
    add_setting_arguments(p, CanvasOptions, ["match"])
    _lms_assignment_argument(p)
    _lms_posting_arguments(p)


SUBCOMMANDS: dict[str, Register] = {"lms": _add_lms}


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    for add in SUBCOMMANDS.values():
        add(sub)


def _lms_posting_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--all-assignments", action="store_true",
                   help="post every assignment, also one nobody has submitted whose due date has "
                        "not passed (its column is 0 for every student); default: only assignments "
                        "with a submission in the gradebook or past their nbgrader due date")
    p.add_argument("--include-unrun", action="store_true",
                   help="post an assignment with grade cells the grading machine did not run (no "
                        "GPU), those cells as 0; default: refuse it, naming it")


def _lms_assignment_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--assignment", dest="lms_assignments", action="append", default=[],
                   metavar="NAME[=CANVAS_ID]",
                   help="only this nbgrader assignment (repeatable), to this Canvas assignment id "
                        "(default: c.Autograder.canvas['assignments'], else every gradebook "
                        "assignment, each matched by name)")


def _lms(args: argparse.Namespace) -> int:
    from autograder.course.nbgrader import load_course
    from autograder.lms.options import CanvasOptions, token_from_environment

    course = load_course(args.course_root, db_url=args.db_url)
    given = {name: getattr(args, name, None) for name in ("url", "course_id", "match")}
    options = CanvasOptions.from_config(course.config, **given)
    if args.lms_assignments:
        options = options.with_assignments(args.lms_assignments)
    if args.lms_command == "csv":
        from autograder.lms.import_csv import write_import_csv

        written = write_import_csv(course, options, args.output,
                                   all_assignments=args.all_assignments,
                                   include_unrun=args.include_unrun)
        for line in written.left_out + written.notes:
            print(f"note: {plain(line)}", file=sys.stderr)
        print(f"wrote {written.path} ({', '.join(written.assignments)})")
        return 0
    from autograder.lms.canvas import sync

    result = sync(course, options, token=token_from_environment(), apply=args.apply,
                  scale=args.scale, all_assignments=args.all_assignments,
                  include_unrun=args.include_unrun)
    for line in result.left_out:
        print(f"note: {plain(line)}", file=sys.stderr)
    print_lms_result(result)
    return result.exit_code()


def print_lms_result(result: SyncResult) -> None:
    """The plan as a table, then warnings, retries and what was written."""
    print(f"{'student':<24} {'assignment':<20} {'Canvas':>8} {'gradebook':>9} {'posts':>7}  action")
    for row in result.rows:
        canvas = "—" if row.canvas_score is None else f"{row.canvas_score:g}"
        posted = "—" if row.posted is None else f"{row.posted:g}"
        print(f"{plain(row.student):<24} {row.assignment:<20} {canvas:>8} "
              f"{row.gradebook_score:>9g} {posted:>7}  {row.action}")
    for line in result.warnings:
        print(f"warning: {plain(line)}", file=sys.stderr)
    for line in result.retries:
        print(f"retried: {plain(line)}", file=sys.stderr)
    from autograder.lms.canvas import ACTIONS

    counts = {action: sum(row.action == action for row in result.rows) for action in ACTIONS}
    summary = ", ".join(f"{n} {action}" for action, n in counts.items())
    if not result.applied:
        print(f"dry run: {summary}; nothing was written (--apply writes the 'set' rows)")
        return
    for line in result.failed:
        print(f"failed: {plain(line)}", file=sys.stderr)
    for row in result.out_of_sync:
        print(f"not in sync after writing: {plain(row.student)} {row.assignment} "
              f"(wanted {row.posted:g})", file=sys.stderr)
    if result.not_in_canvas:
        print("not in Canvas (nothing written for them): "
              + ", ".join(plain(s) for s in result.not_in_canvas), file=sys.stderr)
    print(f"applied: {summary}; {result.writes} bulk update(s) sent; "
          f"{len(result.out_of_sync)} row(s) not in sync; log in reports/lms-canvas.log")
