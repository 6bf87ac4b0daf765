#!/usr/bin/env python3
"""Submit a notebook to the course's feedback service and print its feedback.

    AUTOGRADER_TOKEN=<your course token> python submit.py NN_name.ipynb --url <the service's address>

The address comes from ``--url`` or ``AUTOGRADER_URL``; the credential from ``AUTOGRADER_TOKEN`` (a
course token: ``Authorization: Bearer``), inside the course's JupyterHub from ``JUPYTERHUB_API_TOKEN``
(``Authorization: token``), else it is asked for (never on the command line, where other users of the
machine could read it). Waits for the feedback unless ``--no-wait``; stops, saying why, when the
service says nothing will grade the notebook now. Exit status: 0 graded, 1 refused, not graded or a
grader error, 2 not graded yet (waiting, or the time ran out).

Python's standard library only, one file: the course package runs it as ``autograder submit``
(``autograder/service/client.py``) and the student edition ships the same file as ``submit.py``
(written by ``autograder publish``; edit the course package's, never the copy).
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

FINAL = ("done", "failed", "error")
TIMEOUT_S = 900.0  # how long to wait for the feedback


class SubmitError(Exception):
    """The submission did not go through (or could not be followed): the message says why."""


def credential(token: str | None = None) -> dict[str, str]:
    """The ``Authorization`` header: ``token``, ``AUTOGRADER_TOKEN``, the hub's API token, or asked."""
    token = token or os.environ.get("AUTOGRADER_TOKEN")
    if not token and os.environ.get("JUPYTERHUB_API_TOKEN"):
        return {"Authorization": f"token {os.environ['JUPYTERHUB_API_TOKEN']}"}
    if not token and sys.stdin.isatty():
        token = getpass.getpass("course token (from your course staff): ").strip()
    if not token:
        raise SubmitError("no credential: set AUTOGRADER_TOKEN to your course token (or run this "
                          "inside the course's JupyterHub, which sets JUPYTERHUB_API_TOKEN)")
    return {"Authorization": f"Bearer {token}"}


def call(url: str, headers: dict[str, str], data: bytes | None = None) -> tuple[int, dict[str, Any]]:
    """One request to the service's JSON API: (HTTP status, the JSON body)."""
    request = urllib.request.Request(url, data=data, headers={
        **headers, "Accept": "application/json",
        **({"Content-Type": "application/x-ipynb+json"} if data is not None else {})},
        method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:  # noqa: S310 - the user's URL
            status, body = reply.status, reply.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise SubmitError(f"cannot reach the service at {url.split('/api/')[0]}/ ({reason}); "
                          "check the address (--url or AUTOGRADER_URL)") from None
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):  # a proxy's HTML page, or nothing
        parsed = None
    if not isinstance(parsed, dict):
        raise SubmitError(f"the service answered {status} without JSON; is "
                          f"{url.split('/api/')[0]}/ the feedback service's address?")
    return status, parsed


def submit(path: Path | str, *, url: str | None = None, token: str | None = None,
           wait: bool = True, timeout_s: float = TIMEOUT_S,
           echo: Callable[[str], object] = print) -> dict[str, Any]:
    """Upload ``path``; return the submission as the API shows it: after grading when ``wait``,
    or as soon as the service says it waits for a grader that is not running."""
    base = (url or os.environ.get("AUTOGRADER_URL") or "").strip().rstrip("/") + "/"
    if base == "/":
        raise SubmitError("no service address: pass --url or set AUTOGRADER_URL")
    if not base.startswith(("http://", "https://")):
        raise SubmitError(f"{base}: not a web address (expected http://... or https://...)")
    path = Path(path)
    if not path.is_file():
        raise SubmitError(f"{path}: no such file (expected the exercise notebook, NN_name.ipynb)")
    headers = credential(token)
    query = urllib.parse.urlencode({"filename": path.name})
    status, body = call(f"{base}api/submissions?{query}", headers, path.read_bytes())
    if status != 202:
        raise SubmitError(f"{path.name}: refused ({status}): {body.get('error')}")
    page = f"{base}submissions/{body['id']}"
    echo(f"submitted {path.name} as #{body['id']} ({body['assignment']}); feedback page: {page}")
    if not wait:
        return body
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        status, seen = call(f"{base}api/submissions/{body['id']}", headers)
        if status != 200:
            raise SubmitError(f"#{body['id']}: the service answered {status}: {seen.get('error')}")
        if seen.get("state") != last:
            echo(f"  {seen.get('state')}")
            last = seen.get("state")
        if seen.get("state") in FINAL or seen.get("waiting"):
            return {**seen, "page": page}
        time.sleep(float(seen.get("poll_after_s") or 3.0))  # when the service says, as the page
    raise SubmitError(f"#{body['id']} was not graded within {timeout_s:g} s; see {page} later")


def summary_lines(status: dict[str, Any]) -> list[str]:
    """What a terminal shows of a submission's outcome."""
    if status.get("state") == "failed":
        return [f"not graded: {status.get('reason')}"]
    if status.get("state") == "error":
        return [f"{status.get('reason') or 'grader error'} (not counted against you)"]
    if status.get("state") not in FINAL:
        waiting = status.get("waiting")
        return [f"not graded yet: {waiting}" if waiting else f"not graded yet ({status.get('state')})",
                f"its page: {status.get('page', '')}"]
    lines = []
    if "score" in status:
        lines.append(f"score: {status['score']:g}/{status['max_score']:g}")
    else:
        lines.append("graded; the course shows scores later" if status.get("score_later")
                     else "graded; the course does not show the score of this submission")
    for test in status.get("tests", []):
        mark = "passed" if test["passed"] else "FAILED"
        lines.append(f"  {mark:6} {test['name']} ({test['points']:g}/{test['max_points']:g})")
        if not test["passed"] and test.get("message"):
            lines += ["      " + line for line in test["message"].splitlines()[-6:]]
    return lines


def exit_status(status: dict[str, Any]) -> int:
    """0 graded, 1 not graded (the notebook) or a grader error, 2 not graded yet."""
    state = status.get("state")
    return 0 if state == "done" else 1 if state in ("failed", "error") else 2


def command_line(prog: str = "submit.py") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Submit an exercise notebook to the course's feedback service and "
        "print its feedback. Your course token: AUTOGRADER_TOKEN (asked for when unset).")
    parser.add_argument("notebook", type=Path, metavar="NN_name.ipynb")
    parser.add_argument("--url", default=None,
                        help="the service's address (default: $AUTOGRADER_URL)")
    parser.add_argument("--no-wait", action="store_true", help="do not wait for the feedback")
    return parser


def main(argv: list[str] | None = None, prog: str = "submit.py") -> int:
    args = command_line(prog).parse_args(argv)
    try:
        status = submit(args.notebook, url=args.url, wait=not args.no_wait)
    except SubmitError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 1
    if args.no_wait:
        return 0
    for line in summary_lines(status):
        print(line)
    return exit_status(status)


if __name__ == "__main__":
    sys.exit(main())
