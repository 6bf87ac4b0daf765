"""``autograder`` command line: a thin layer over the Python API (each subcommand calls one function).

    autograder release [ASSIGNMENT...]                      autograder.authoring.release.release
    autograder collect PATH [--assignment A] [--pattern RE]  autograder.collect.collect
    autograder grade [ASSIGNMENT...] [--student ID...] ...   autograder.grading.grade
    autograder feedback [ASSIGNMENT...]                     autograder.reports.feedback.feedback
    autograder report [--output DIR]                        autograder.reports.report.report
    autograder doctor [--executor slurm ...]                autograder.tools.doctor.diagnose(_slurm)
    autograder demo [DIR]                                   autograder.tools.demo.demo
    autograder publish DEST                                 autograder.authoring.publish.publish
    autograder leak-check PATH...                           autograder.authoring.leaks.find_leaks
    autograder serve [--hub] [--port N] ...                 autograder.service.serve.serve
    autograder serve requeue ID...|--failed                 autograder.service.store.Store.requeue
    autograder worker --service-db URL --state DIR ...      autograder.service.worker.main
    autograder tokens issue|revoke STUDENT...               autograder.service.store.Store
    autograder submit NN_name.ipynb [--url URL]             autograder.service.client.submit
    autograder lms canvas [--apply] ...                     autograder.lms.canvas.sync
    autograder lms csv OUT.csv                              autograder.lms.import_csv.write_import_csv

Run from the course root (or pass --course-root). Errors an instructor can fix print one message and
exit with status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from autograder.course.settings import add_setting_arguments, given_settings
from autograder.errors import AutograderError
from autograder.grading.options import (
    GRADING_SETTINGS,
    SlurmOptions,
    add_grading_arguments,
    given_grading,
)


def plain(text: str) -> str:
    """Untrusted text made safe for a terminal: control characters (escape sequences that set the
    window title or the clipboard, carriage returns that overwrite a line) shown escaped."""
    return "".join(c if c.isprintable() or c in "\t" else repr(c)[1:-1] for c in str(text))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autograder",
        description="Release, collect, grade, give feedback on and report the course exercises "
                    "(nbgrader underneath: its gradebook stays the system of record).")
    parser.add_argument("--course-root", type=Path, default=Path("."),
                        help="course directory holding nbgrader_config.py (default: .)")
    parser.add_argument("--db", dest="db_url", default=None,
                        help="gradebook SQLAlchemy URL (default: the course's, sqlite gradebook.db)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("release", help="regenerate exercises/ from the sources in solutions/")
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")

    p = sub.add_parser("collect", help="import submissions from a directory or zip into submitted/")
    p.add_argument("source", type=Path, metavar="PATH")
    p.add_argument("--assignment", help="assignment of an LMS download (one notebook per student)")
    p.add_argument("--pattern", default=None,
                   help="regex with a (?P<student>...) group, matched against LMS file names")
    p.add_argument("--force", action="store_true",
                   help="replace submissions already collected whatever their times (default: only "
                        "by a newer, different one)")
    p.add_argument("--no-check-owner", action="store_true",
                   help="accept exchange folders whatever user owns them")
    p.add_argument("--zip-time", choices=("utc", "local"), default="utc",
                   help="how an LMS zip's member times (the submission time written to "
                        "timestamp.txt; a zip records no time zone) are read: utc (default) or this "
                        "machine's local time. Check one student's timestamp.txt against the LMS's "
                        "submission time once per LMS")

    p = sub.add_parser("grade", help="autograde submissions into the gradebook")
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
    _executor_arguments(p)
    p.add_argument("--slurm-folder", type=Path, default=None, metavar="DIR",
                   help="slurm: chunks, logs and results, shared with the nodes "
                        "(default: .slurm/grade in the course)")

    p = sub.add_parser("feedback", help="HTML feedback per student (no hidden-check source)")
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    p.add_argument("--student", dest="students", action="append", metavar="ID")

    p = sub.add_parser("report", help="grades CSV and HTML report with figures")
    p.add_argument("--output", type=Path, default=None, help="directory (default: reports/)")

    p = sub.add_parser("similarity", help="pairs of submissions whose own cells are alike (for the "
                                          "course staff: it shows solution code)")
    p.add_argument("assignments", nargs="+", metavar="ASSIGNMENT")
    p.add_argument("--threshold", type=float, default=None, metavar="T",
                   help="report a pair and cell at this similarity or more, in (0, 1] (default "
                        "0.7: in the test class copies score 0.94 or more, honest pairs 0.63 or less)")
    p.add_argument("--output", type=Path, default=None,
                   help="directory (default: reports/similarity/)")

    _lms_parser(sub)

    p = sub.add_parser("doctor", help="device, torch/CUDA versions, which GPU checks can run; "
                                      "with --executor slurm, the cluster too")
    _executor_arguments(p)

    p = sub.add_parser("demo", help="sample class through collect -> grade -> feedback -> report")
    p.add_argument("directory", nargs="?", type=Path, default=None,
                   help="fresh directory for the demo course (default: a new temporary one)")
    add_grading_arguments(p, ("workers",))

    p = sub.add_parser("publish", help="write the student edition (pages, releases; no solutions, "
                                       "hidden checks or tests) into DEST, leak-checked")
    p.add_argument("destination", type=Path, metavar="DEST",
                   help="new or empty folder, or an earlier student edition (it is updated)")

    p = sub.add_parser("leak-check", help="find solution, hidden-check or instructor-only text (and "
                                          "the course repository's URLs) in a student edition or site")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")

    p = sub.add_parser("serve", help="autograde on submit: the feedback web service (JupyterHub "
                                     "service with --hub, or standalone with course tokens)")
    p.add_argument("--hub", action="store_true",
                   help="run as a JupyterHub service (address, prefix and OAuth from the hub)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8750)
    p.add_argument("--prefix", default="/", help="URL prefix (standalone; the hub sets its own)")
    p.add_argument("--state", type=Path, default=None, metavar="DIR",
                   help="the service's database, workspace and secret (default: <course>/.service)")
    p.add_argument("--service-db", default=None, metavar="URL",
                   help="SQLAlchemy URL of the service's database (default: sqlite in --state)")
    p.add_argument("requeue", nargs="*", metavar="requeue ID",
                   help="`serve requeue ID...`: grade those submissions again (grader errors, failed "
                        "ones), then exit; with --failed every one of them")
    p.add_argument("--failed", action="store_true", help="with requeue: every failed or errored one")
    _worker_arguments(p)
    p.add_argument("--no-worker", action="store_true",
                   help="start no worker: `autograder worker` processes, here or on other machines "
                        "that reach --service-db, grade")
    add_grading_arguments(p)  # every grading setting `grade` takes, for the service's worker

    p = sub.add_parser("worker", help="a grading worker of the feedback service, on any machine that "
                                      "reaches its database (several may run at once)")
    p.add_argument("--service-db", required=True, metavar="URL",
                   help="the service's SQLAlchemy URL (postgresql://... for workers on several machines)")
    p.add_argument("--state", type=Path, required=True, metavar="DIR",
                   help="this worker's own folder: its mirror of the course, where it grades")
    _worker_arguments(p)
    add_grading_arguments(p)

    p = sub.add_parser("new-exercise", help="scaffold exercise NN_name: source, hidden check, catalogue, "
                                            "translation catalogues; add it to course.toml and _toc.yml")
    p.add_argument("name", metavar="NN_name")
    p.add_argument("--chapter", default=None, metavar="DOCNAME",
                   help="the chapter that teaches it (default: the last one of course.toml)")
    p.add_argument("--title", default=None, help="the notebook's heading (default: from the name)")

    p = sub.add_parser("outline", help="write _toc.yml from course.toml (--check: exit 1 if it differs)")
    p.add_argument("--check", action="store_true")

    p = sub.add_parser("tokens", help="standalone service: issue or revoke course tokens")
    p.add_argument("action", choices=("issue", "revoke"))
    p.add_argument("users", nargs="+", metavar="USER")
    p.add_argument("--instructor", action="store_true", help="tokens that see the instructor view")
    p.add_argument("--state", type=Path, default=None, metavar="DIR")
    p.add_argument("--service-db", default=None, metavar="URL")

    p = sub.add_parser("submit", help="submit a notebook to the feedback service and wait for it")
    p.add_argument("notebook", type=Path, metavar="NN_name.ipynb")
    p.add_argument("--url", default=None, help="the service (default: $AUTOGRADER_URL)")
    p.add_argument("--no-wait", action="store_true", help="do not wait for the feedback")
    return parser


def _lms_parser(sub: argparse._SubParsersAction) -> None:
    from autograder.lms.options import CanvasOptions

    p = sub.add_parser("lms", help="grades into the LMS: Canvas through its API, or Canvas's "
                                   "import CSV")
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


def _worker_arguments(p: argparse.ArgumentParser) -> None:
    from autograder.service.store import LEASE_S

    p.add_argument("--lease-s", type=float, default=LEASE_S, metavar="S",
                   help="a claim a worker does not renew for S seconds (it died, froze or lost the "
                        f"database) goes back to the queue (default {LEASE_S:g}; renewed every S/4)")
    p.add_argument("--gpu", action="store_true",
                   help="the worker's machine has a CUDA device (checked at start): it grades the "
                        "exercises with GPU-only checks too; without it, and without --allow-cpu, "
                        "those wait in the queue for a worker that has one")


def _executor_arguments(p: argparse.ArgumentParser) -> None:
    """--executor and the Slurm array's settings (defaults: c.Autograder.slurm in nbgrader_config.py)."""
    add_grading_arguments(p, ("executor",))
    slurm = p.add_argument_group("with --executor slurm (override c.Autograder.slurm)")
    add_setting_arguments(slurm, SlurmOptions)


def _slurm_options(args):
    """SlurmOptions from the course config, then the command line's overrides (None when local)."""
    overrides = given_settings(args, SlurmOptions)
    if args.executor != "slurm":
        if overrides or getattr(args, "slurm_folder", None) is not None:
            flags = [SlurmOptions.__dataclass_fields__[name].metadata["flag"] for name in overrides]
            raise AutograderError(f"the Slurm options ({', '.join(flags) or '--slurm-folder'}) "
                                  "need --executor slurm")
        return None
    from autograder.grading.slurm.chunks import load_slurm_options

    try:
        return load_slurm_options(args.course_root, **overrides)
    except ValueError as error:
        raise AutograderError(str(error)) from None


def _release(args) -> int:
    from autograder.authoring.release import release

    for path in release(assignments=args.assignments or None, course_root=args.course_root):
        print(f"released {path}")
    return 0


def _collect(args) -> int:
    from autograder.collect import DEFAULT_PATTERN, collect

    result = collect(source=args.source, assignment=args.assignment, course_root=args.course_root,
                     db_url=args.db_url, pattern=args.pattern or DEFAULT_PATTERN, force=args.force,
                     check_owner=not args.no_check_owner, zip_time=args.zip_time)
    for student, assignment in result.collected:
        print(f"collected {assignment}/{student}")
    differing = {(student, assignment): why for student, assignment, why in result.differing}
    for student, assignment in result.existing:
        why = differing.get((student, assignment))
        why = f"the offered one differs, but {why}: --force takes it" if why else "the same notebook"
        print(f"kept      {assignment}/{student}: already collected ({plain(why)})")
    for message in result.superseded:
        print(f"superseded {plain(message)}")
    if result.editions_left_out:
        print(f"left out  {result.editions_left_out} unchanged language edition(s) (a hub fetch hands "
              "out every edition; the one worked on was taken)")
    for line in result.replaced_lines():
        print(plain(line))
    for message in result.ignored:
        print(f"ignored   {plain(message)}")
    for message in result.refused:
        print(f"refused   {plain(message)}", file=sys.stderr)
    print(f"{len(result.collected)} collected ({len(result.replaced)} replacing an earlier "
          f"submission), {len(result.existing)} kept, {len(result.refused)} refused")
    return 0  # a refused offer is that offer's problem, listed with its reason; the run succeeded


def _grade(args) -> int:
    from autograder.grading import grade

    if args.no_sandbox:
        print("!" * 78 + "\nGRADING WITHOUT A SANDBOX (--no-sandbox): every submission runs with this "
              "process's rights.\nIt can read the solutions and hidden checks, reach the network "
              "and rewrite the gradebook.\nUse this only to debug the grader, never for real "
              "grades.\n" + "!" * 78, file=sys.stderr)

    settings = given_grading(args)
    if args.no_execute:
        if settings.get("executor", "as-submitted") != "as-submitted":
            raise AutograderError(f"--no-execute runs no executor; drop --executor {settings['executor']}")
        settings["executor"] = "as-submitted"
    slurm_options = _slurm_options(args)
    if args.preview:
        return _preview(args, settings, slurm_options)
    summary = grade(assignments=args.assignments or None, students=args.students,
                    course_root=args.course_root, db_url=args.db_url, force=args.force,
                    progress=not args.no_progress, slurm=slurm_options, slurm_folder=args.slurm_folder,
                    sandbox=not args.no_sandbox, notebook=args.notebook, **settings)
    print_summary(summary)
    return 1 if summary.count("failed") else 0


def _preview(args, settings, slurm_options) -> int:
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


def print_summary(summary) -> None:
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


def _feedback(args) -> int:
    from autograder.reports.feedback import feedback

    pages = feedback(assignments=args.assignments or None, students=args.students,
                     course_root=args.course_root, db_url=args.db_url)
    for page in pages:
        print(f"feedback {page}")
    for assignment, student, why in pages.failed:
        print(f"failed   {assignment}/{plain(student)}: {plain(why)}", file=sys.stderr)
    print(f"{len(pages)} feedback files, none showing hidden-check source; "
          f"{len(pages.failed)} student(s) failed")
    return 0


def _report(args) -> int:
    from autograder.reports.report import report

    csv_path, html_path = report(course_root=args.course_root, db_url=args.db_url,
                                 output_dir=args.output,
                                 warn=lambda line: print(f"warning: {line}", file=sys.stderr))
    print(f"wrote {csv_path}\nwrote {html_path}")
    return 0


def _similarity(args) -> int:
    from autograder.reports.similarity import DEFAULT_THRESHOLD, similarity

    threshold = DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    for result in similarity(args.assignments, course_root=args.course_root, threshold=threshold,
                             output_dir=args.output):
        short = sum(len(owners) for owners in result.too_short.values())
        print(f"{result.assignment}: {len(result.matches)} pair(s) and cell(s) at {threshold:g} or "
              f"more; {short} cell(s) too short to judge\nwrote {result.csv_path}\n"
              f"wrote {result.html_path}")
    return 0


def _lms(args) -> int:
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


def print_lms_result(result) -> None:
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


def _doctor(args) -> int:
    from autograder.tools.doctor import diagnose, diagnose_slurm, render

    options = _slurm_options(args)
    print(render(diagnose(course_root=args.course_root, db_url=args.db_url)))
    if options is None:
        return 0
    rows = diagnose_slurm(options, course_root=args.course_root)
    width = max(len(check) for check, _, _ in rows)
    print("\nSlurm (--executor slurm)")
    for check, ok, detail in rows:
        print(f"{check:<{width}}  {'ok  ' if ok else 'FAIL'}  {detail}")
    return 0 if all(ok for _, ok, _ in rows) else 1


def _demo(args) -> int:
    from autograder.tools.demo import demo

    result = demo(directory=args.directory, workers=args.workers)
    for assignment, collected in result.collected.items():
        print(f"collect {assignment}: {len(collected.collected)} submissions")
    print_summary(result.summary)
    print(f"course    {result.course_root}\nfeedback  {len(result.feedback)} HTML files under "
          f"{result.course_root / 'feedback'}\nreport    {result.csv}\n          {result.html}")
    return 0


COMMANDS = {"release": _release, "collect": _collect, "grade": _grade, "feedback": _feedback,
            "report": _report, "doctor": _doctor, "demo": _demo, "similarity": _similarity,
            "lms": _lms}


def _publish(args) -> int:
    from autograder.authoring.publish import publish

    result = publish(destination=args.destination, course_root=args.course_root)
    for name in result.written:
        print(f"wrote   {name}")
    for name in result.removed:
        print(f"removed {name}")
    print(f"student edition in {result.destination}: {len(result.files)} files, "
          f"{len(result.written)} written, {len(result.removed)} removed, no leaks")
    return 0


def _leak_check(args) -> int:
    from autograder.authoring.leaks import find_leaks
    from autograder.authoring.publish import git_remote_urls

    leaks = find_leaks(paths=args.paths, course_root=args.course_root,
                       extra_text=git_remote_urls(args.course_root))
    for leak in leaks:
        print(leak)
    where = ", ".join(str(p) for p in args.paths)
    print(f"{len(leaks)} leak(s) in {where}" if leaks else f"no leaks in {where}")
    return 1 if leaks else 0


def _new_exercise(args) -> int:
    from autograder.authoring.scaffold import new_exercise

    made = new_exercise(args.name, course_root=args.course_root, chapter=args.chapter, title=args.title)
    for path in made.written:
        print(f"wrote   {path}")
    print(f"exercise {made.exercise.name} (hidden checks: autograder/hidden/{made.exercise.hidden}.py) "
          f"is in course.toml and _toc.yml; next: autograder release {made.exercise.name}")
    return 0


def _outline(args) -> int:
    from autograder.course import manifest

    path = Path(args.course_root) / manifest.OUTLINE_FILE
    text = manifest.outline_yaml(manifest.load(args.course_root))
    current = path.read_text(encoding="utf-8") if path.is_file() else ""
    if args.check:
        print(f"{path}: {'matches' if current == text else 'differs from'} {manifest.MANIFEST_FILE}")
        return 0 if current == text else 1
    if current != text:
        path.write_text(text, encoding="utf-8")
    print(f"{path}: written from {manifest.MANIFEST_FILE}" if current != text else f"{path}: up to date")
    return 0


COMMANDS.update({"publish": _publish, "leak-check": _leak_check, "new-exercise": _new_exercise,
                 "outline": _outline})


def _serve(args) -> int:
    from autograder.service.serve import ServeOptions, serve

    if args.requeue or args.failed:
        return _requeue(args)
    serve(ServeOptions(course_root=args.course_root, state_dir=args.state, db_url=args.service_db,
                       hub=args.hub, host=args.host, port=args.port, prefix=args.prefix,
                       grading=given_grading(args), lease_s=args.lease_s,
                       worker=not args.no_worker, gpu=args.gpu))
    return 0


def _requeue(args) -> int:
    """``serve requeue ID...`` / ``serve requeue --failed``: back to the queue, attempts reset."""
    from autograder.service.serve import ServeOptions, state_folder
    from autograder.service.store import Store, default_url

    words = list(args.requeue)
    if not words or words[0] != "requeue":
        raise AutograderError(f"`autograder serve {' '.join(map(plain, words))}`: the only action is "
                              "`requeue ID...` or `requeue --failed`")
    try:
        ids = [int(word) for word in words[1:]]
    except ValueError:
        raise AutograderError(f"serve requeue: submission ids are numbers, got "
                              f"{' '.join(map(plain, words[1:]))}") from None
    if not ids and not args.failed:
        raise AutograderError("serve requeue: give the submission ids, or --failed for all of them")
    folder = state_folder(ServeOptions(course_root=args.course_root, state_dir=args.state))
    store = Store(args.service_db or default_url(folder))
    done = store.requeue(ids, failed=args.failed)
    for number in sorted(set(ids) - set(done)):
        print(f"submission {number}: not failed and not a grader error; left as it is")
    print(f"{len(done)} submission(s) queued again" + (f": {', '.join(map(str, done))}" if done else ""))
    return 0 if done or args.failed else 1


def _worker(args) -> int:
    from autograder.grading.options import settings_json
    from autograder.service.worker import main

    argv = ["--course-root", str(args.course_root), "--state", str(args.state),
            "--db", args.service_db, "--grading", settings_json(given_grading(args)),
            "--lease-s", str(args.lease_s), *(["--gpu"] if args.gpu else [])]
    return main(argv)


def _tokens(args) -> int:
    from autograder.course.nbgrader import load_course
    from autograder.service.serve import ServeOptions, state_folder
    from autograder.service.settings import ServiceSettings
    from autograder.service.store import Store, default_url

    folder = state_folder(ServeOptions(course_root=args.course_root, state_dir=args.state))
    store = Store(args.service_db or default_url(folder))
    if args.action == "revoke":
        for user in args.users:
            print(f"{plain(user)}\t{store.revoke_tokens(user)} token(s) revoked")
        return 0
    settings = ServiceSettings.of(load_course(args.course_root))
    unknown = [u for u in args.users if not args.instructor and not settings.is_student(u)]
    if unknown:
        raise AutograderError(f"not students of the course: {', '.join(map(plain, unknown))} "
                              "(add them to the gradebook: nbgrader db student add ID)")
    for user in args.users:  # the only time a token is shown: hand it to its student
        print(f"{user}\t{store.issue_token(user, instructor=args.instructor)}")
    return 0


def _submit(args) -> int:
    """The student edition's ``submit.py`` is this same module (``autograder publish`` copies it)."""
    from autograder.service.client import SubmitError, exit_status, submit, summary_lines

    try:
        status = submit(args.notebook, url=args.url, wait=not args.no_wait)
    except SubmitError as error:
        raise AutograderError(str(error)) from None
    if args.no_wait:
        return 0
    for line in summary_lines(status):
        print(plain(line))
    return exit_status(status)


COMMANDS.update({"serve": _serve, "tokens": _tokens, "submit": _submit, "worker": _worker})


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except AutograderError as error:
        print(f"autograder {args.command}: error: {plain(str(error))}", file=sys.stderr)
        return 1


