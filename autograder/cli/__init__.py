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
    autograder regenerate [--check] [--only NAME,...]       autograder.tools.regenerate.main

Run from the course root (or pass --course-root). Errors an instructor can fix print one message and
exit with status 1. ``--log-level`` (DEBUG, INFO, WARNING, ERROR) sets what the ``autograder`` loggers
print on stderr.

One module per command group, each with the table ``SUBCOMMANDS`` (name -> the function that adds its
parser, whose ``run`` default is the handler) and ``register(subparsers)``: ``course.py`` (release,
collect, publish, leak-check, new-exercise, outline, regenerate), ``grade.py``, ``reports.py``
(feedback, report, similarity), ``lms.py``, ``service.py`` (serve, worker, tokens, submit) and
``tools.py`` (doctor, demo); ``common.py`` what they share.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from autograder.cli import course, grade, lms, reports, service, tools
from autograder.cli.common import Handler, Register, plain
from autograder.errors import AutograderError

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

_GROUPS = (course, grade, reports, lms, service, tools)
# the order `autograder --help` lists them in
ORDER = ("release", "collect", "grade", "feedback", "report", "similarity", "lms", "doctor", "demo",
         "publish", "leak-check", "serve", "worker", "new-exercise", "outline", "regenerate", "tokens",
         "submit")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autograder",
        description="Release, collect, grade, give feedback on and report the course exercises "
                    "(nbgrader underneath: its gradebook stays the system of record).")
    parser.add_argument("--course-root", type=Path, default=Path("."),
                        help="course directory holding nbgrader_config.py (default: .)")
    parser.add_argument("--db", dest="db_url", default=None,
                        help="gradebook SQLAlchemy URL (default: the course's, sqlite gradebook.db)")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default=None, type=str.upper,
                        help="what the autograder's log prints on stderr (default: warnings and "
                             "errors, unformatted)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    adders: dict[str, Register] = {}
    for group in _GROUPS:
        adders.update(group.SUBCOMMANDS)
    assert sorted(adders) == sorted(ORDER), "every subcommand is in ORDER once"
    for name in ORDER:
        adders[name](sub)
    return parser


def _configure_logging(level: str | None) -> None:
    if level is not None:
        logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _configure_logging(args.log_level)
    run: Handler = args.run
    try:
        return run(args)
    except AutograderError as error:
        print(f"autograder {args.command}: error: {plain(str(error))}", file=sys.stderr)
        return 1
