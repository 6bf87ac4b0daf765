"""The feedback service: ``serve`` (and ``serve requeue``), ``worker``, ``tokens`` and ``submit``."""

from __future__ import annotations

import argparse
from pathlib import Path

from autograder.cli.common import Register, Subparsers, plain
from autograder.course.settings import add_setting_arguments, given_settings
from autograder.errors import AutograderError
from autograder.grading.options import add_grading_arguments, given_grading, resolve_grading
from autograder.service.options import ServiceOptions, resolve_service


def _add_serve(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="autograde on submit: the feedback web service (JupyterHub "
                                     "service with --hub, or standalone with course tokens)")
    p.set_defaults(run=_serve)
    p.add_argument("--hub", action="store_true",
                   help="run as a JupyterHub service (address, prefix and OAuth from the hub)")
    add_setting_arguments(p, ServiceOptions, ["host", "port", "prefix"])
    p.add_argument("--state", type=Path, default=None, metavar="DIR",
                   help="the service's database, workspace and secret (default: <course>/.service)")
    p.add_argument("--service-db", default=None, metavar="URL",
                   help="SQLAlchemy URL of the service's database (default: sqlite in --state)")
    p.add_argument("requeue", nargs="*", metavar="requeue ID",
                   help="`serve requeue ID...`: grade those submissions again (grader errors, failed "
                        "ones), then exit; with --failed every one of them")
    p.add_argument("--failed", action="store_true", help="with requeue: every failed or errored one")
    add_setting_arguments(p, ServiceOptions, ["lease_s", "gpu"])
    p.add_argument("--no-worker", action="store_true",
                   help="start no worker: `autograder worker` processes, here or on other machines "
                        "that reach --service-db, grade")
    add_grading_arguments(p)  # every grading setting `grade` takes, for the service's worker


def _add_worker(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("worker", help="a grading worker of the feedback service, on any machine that "
                                      "reaches its database (several may run at once)")
    p.set_defaults(run=_worker)
    p.add_argument("--service-db", required=True, metavar="URL",
                   help="the service's SQLAlchemy URL (postgresql://... for workers on several machines)")
    p.add_argument("--state", type=Path, required=True, metavar="DIR",
                   help="this worker's own folder: its mirror of the course, where it grades")
    add_setting_arguments(p, ServiceOptions, ["lease_s", "gpu"])
    add_grading_arguments(p)


def _add_tokens(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tokens", help="standalone service: issue or revoke course tokens")
    p.set_defaults(run=_tokens)
    p.add_argument("action", choices=("issue", "revoke"))
    p.add_argument("users", nargs="+", metavar="USER")
    p.add_argument("--instructor", action="store_true", help="tokens that see the instructor view")
    p.add_argument("--state", type=Path, default=None, metavar="DIR")
    p.add_argument("--service-db", default=None, metavar="URL")


def _add_submit(sub: Subparsers[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("submit", help="submit a notebook to the feedback service and wait for it")
    p.set_defaults(run=_submit)
    p.add_argument("notebook", type=Path, metavar="NN_name.ipynb")
    p.add_argument("--url", default=None, help="the service (default: $AUTOGRADER_URL)")
    p.add_argument("--no-wait", action="store_true", help="do not wait for the feedback")


SUBCOMMANDS: dict[str, Register] = {
    "serve": _add_serve, "worker": _add_worker, "tokens": _add_tokens, "submit": _add_submit}


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    for add in SUBCOMMANDS.values():
        add(sub)


def _serve(args: argparse.Namespace) -> int:
    from autograder.service.serve import serve

    if args.requeue or args.failed:
        return _requeue(args)
    serve(_service_options(args, hub=args.hub, worker=not args.no_worker))
    return 0


def _service_options(args: argparse.Namespace, **more: object) -> ServiceOptions:
    """The course's ``c.AutograderService.<setting>`` and ``c.Autograder.<setting>``, the flags on top."""
    return ServiceOptions(course_root=args.course_root, state_dir=args.state, db_url=args.service_db,
                          grading=resolve_grading(args.course_root, given_grading(args)),
                          **resolve_service(args.course_root, given_settings(args, ServiceOptions)),
                          **more)  # type: ignore[arg-type]


def _requeue(args: argparse.Namespace) -> int:
    """``serve requeue ID...`` / ``serve requeue --failed``: back to the queue, attempts reset."""
    from autograder.service.serve import state_folder
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
    folder = state_folder(ServiceOptions(course_root=args.course_root, state_dir=args.state))
    store = Store(args.service_db or default_url(folder))
    done = store.requeue(ids, failed=args.failed)
    for number in sorted(set(ids) - set(done)):
        print(f"submission {number}: not failed and not a grader error; left as it is")
    print(f"{len(done)} submission(s) queued again" + (f": {', '.join(map(str, done))}" if done else ""))
    return 0 if done or args.failed else 1


def _worker(args: argparse.Namespace) -> int:
    from autograder.grading.options import settings_json
    from autograder.service.worker import run_worker

    options = _service_options(args)
    settings_json(options.grading)  # a wrong grading setting is refused here, with its message
    return run_worker(options)


def _tokens(args: argparse.Namespace) -> int:
    from autograder.course.nbgrader import load_course
    from autograder.service.serve import state_folder
    from autograder.service.settings import ServiceSettings
    from autograder.service.store import Store, default_url

    folder = state_folder(ServiceOptions(course_root=args.course_root, state_dir=args.state))
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


def _submit(args: argparse.Namespace) -> int:
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
