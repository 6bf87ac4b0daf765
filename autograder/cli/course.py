"""The course's own commands: ``release``, ``collect``, ``publish``, ``leak-check``,
``new-exercise``, ``outline`` and ``regenerate``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder.cli.common import Register, Subparsers, plain


def _add_release(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("release", help="regenerate exercises/ from the sources in solutions/")
    p.set_defaults(run=_release)
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")


def _add_collect(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("collect", help="import submissions from a directory or zip into submitted/")
    p.set_defaults(run=_collect)
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


def _add_publish(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("publish", help="write the student edition (pages, releases; no solutions, "
                                       "hidden checks or tests) into DEST, leak-checked")
    p.set_defaults(run=_publish)
    p.add_argument("destination", type=Path, metavar="DEST",
                   help="new or empty folder, or an earlier student edition (it is updated)")


def _add_leak_check(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("leak-check", help="find solution, hidden-check or instructor-only text (and "
                                          "the course repository's URLs) in a student edition or site")
    p.set_defaults(run=_leak_check)
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH")


def _add_new_exercise(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("new-exercise", help="scaffold exercise NN_name: source, hidden check, catalogue, "
                                            "translation catalogues; add it to course.toml and _toc.yml")
    p.set_defaults(run=_new_exercise)
    p.add_argument("name", metavar="NN_name")
    p.add_argument("--chapter", default=None, metavar="DOCNAME",
                   help="the chapter that teaches it (default: the last one of course.toml)")
    p.add_argument("--title", default=None, help="the notebook's heading (default: from the name)")


def _add_outline(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("outline", help="write _toc.yml from course.toml (--check: exit 1 if it differs)")
    p.set_defaults(run=_outline)
    p.add_argument("--check", action="store_true")


def _add_regenerate(sub: Subparsers[argparse.ArgumentParser]) -> None:
    from autograder.tools.regenerate import BY_NAME

    p = sub.add_parser("regenerate", help="regenerate every generated artefact (_toc.yml, the docs' "
                                          "tables, exercises/, the .po files, ...); --check: exit 1 "
                                          "naming each stale one")
    p.set_defaults(run=_regenerate)
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 naming each stale artefact and its command")
    p.add_argument("--only", default="", help=f"comma-separated, of: {', '.join(BY_NAME)}")


SUBCOMMANDS: dict[str, Register] = {
    "release": _add_release, "collect": _add_collect, "publish": _add_publish,
    "leak-check": _add_leak_check, "new-exercise": _add_new_exercise, "outline": _add_outline,
    "regenerate": _add_regenerate}


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    for add in SUBCOMMANDS.values():
        add(sub)


def _release(args: argparse.Namespace) -> int:
    from autograder.authoring.release import release

    for path in release(assignments=args.assignments or None, course_root=args.course_root):
        print(f"released {path}")
    return 0


def _collect(args: argparse.Namespace) -> int:
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
    for message in result.flagged:
        print(f"flagged   {plain(message)}")
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


def _publish(args: argparse.Namespace) -> int:
    from autograder.authoring.publish import publish

    result = publish(destination=args.destination, course_root=args.course_root)
    for name in result.written:
        print(f"wrote   {name}")
    for name in result.removed:
        print(f"removed {name}")
    print(f"student edition in {result.destination}: {len(result.files)} files, "
          f"{len(result.written)} written, {len(result.removed)} removed, no leaks")
    return 0


def _leak_check(args: argparse.Namespace) -> int:
    from autograder.authoring.leaks import find_leaks
    from autograder.authoring.publish import git_remote_urls

    leaks = find_leaks(paths=args.paths, course_root=args.course_root,
                       extra_text=git_remote_urls(args.course_root))
    for leak in leaks:
        print(leak)
    where = ", ".join(str(p) for p in args.paths)
    print(f"{len(leaks)} leak(s) in {where}" if leaks else f"no leaks in {where}")
    return 1 if leaks else 0


def _new_exercise(args: argparse.Namespace) -> int:
    from autograder.authoring.scaffold import new_exercise

    made = new_exercise(args.name, course_root=args.course_root, chapter=args.chapter, title=args.title)
    for path in made.written:
        print(f"wrote   {path}")
    print(f"exercise {made.exercise.name} (hidden checks: autograder/hidden/{made.exercise.hidden}.py) "
          f"is in course.toml and _toc.yml; next: autograder release {made.exercise.name}")
    return 0


def _outline(args: argparse.Namespace) -> int:
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


def _regenerate(args: argparse.Namespace) -> int:
    from autograder.tools.regenerate import main as regenerate

    argv = ["--course-root", str(args.course_root)] + (["--check"] if args.check else [])
    return regenerate(argv + (["--only", args.only] if args.only else []))
