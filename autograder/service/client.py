#!/usr/bin/env python3
"""Submit a notebook to the course's feedback service and print its feedback.

    AUTOGRADER_TOKEN=<your course token> python submit.py NN_name.ipynb --url <the service's address>

The address comes from ``--url`` or ``AUTOGRADER_URL``; the credential from ``AUTOGRADER_TOKEN`` (a
course token: ``Authorization: Bearer``), inside the course's JupyterHub from ``JUPYTERHUB_API_TOKEN``
(``Authorization: token``), else it is asked for (never on the command line, where other users of the
machine could read it). Waits for the feedback unless ``--no-wait``; stops, saying why, when the
service says nothing will grade the notebook now. In Chinese (Taiwan) with ``--lang zh-TW``, or when
``AUTOGRADER_LANG``, ``LC_ALL``, ``LC_MESSAGES`` or ``LANG`` names it (``zh_TW.UTF-8``): the service
is asked for its reasons in that language (``Accept-Language``) and the lines around them follow
(``ZH_TW``: the course catalogue's translations of this file's ``_("...")``, copied here because the
student edition's ``submit.py`` is one file; ``tests/test_service_reasons.py`` holds them equal). Exit status: 0 graded, 1 refused, not graded or a
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
ENGLISH, CHINESE = "en", "zh-TW"
LANGUAGE_VARIABLES = ("AUTOGRADER_LANG", "LC_ALL", "LC_MESSAGES", "LANG")
# this file's sentences in zh-TW: locales/zh_TW/messages.po's (module docstring)
ZH_TW = {
    "{name}: refused ({status}): {error}": "{name}：未受理（{status}）：{error}",
    "submitted {name} as #{id} ({assignment}); feedback page: {page}":
        "已繳交 {name}，編號 #{id}（{assignment}）；回饋頁面：{page}",
    "#{id}: the service answered {status}: {error}": "#{id}：服務回應 {status}：{error}",
    "#{id} was not graded within {seconds} s; see {page} later":
        "#{id} 在 {seconds} 秒內沒有評分完成；請稍後再開啟 {page}",
    "not graded: {reason}": "未評分：{reason}",
    "{reason} (not counted against you)": "{reason}；這次不計入你的繳交次數",
    "grader error": "評分程式錯誤",
    "not graded yet: {reason}": "尚未評分：{reason}",
    "not graded yet ({state})": "尚未評分（{state}）",
    "its page: {page}": "繳交頁面：{page}",
    "score: {score}/{max_score}": "分數：{score}/{max_score}",
    "graded; the course shows scores later": "已評分；本課程稍後才公佈分數",
    "graded; the course does not show the score of this submission":
        "已評分；本課程不公佈這份繳交的分數",
    "passed": "通過",
    "FAILED": "未通過",
    "queued": "排隊中",
    "running": "評分中",
    "done": "已評分",
    "failed": "失敗",
    "{prog}: error: {error}": "{prog}：錯誤：{error}",
}


def reader_language(name: str | None = None) -> str:
    """``CHINESE`` when ``name`` (``--lang``) or the first of ``LANGUAGE_VARIABLES`` that is set names
    Traditional Chinese (zh-TW, zh_TW.UTF-8, zh-Hant, zh-HK), else ``ENGLISH``."""
    for value in (name, *(os.environ.get(v) for v in LANGUAGE_VARIABLES)):
        if value:
            tag = value.split(".")[0].split("@")[0].replace("_", "-").lower()
            return CHINESE if tag in ("zh", "zh-tw", "zh-hant", "zh-hk", "zh-mo") or \
                tag.startswith(("zh-hant-", "zh-tw-")) else ENGLISH
    return ENGLISH


def _(english: str, language: str = ENGLISH, **fields: object) -> str:
    """One of this file's sentences in ``language``, its ``{field}`` filled in."""
    text = ZH_TW.get(english, english) if language == CHINESE else english
    return text.format(**fields) if fields else text


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


def call(url: str, headers: dict[str, str], data: bytes | None = None,
         language: str = ENGLISH) -> tuple[int, dict[str, Any]]:
    """One request to the service's JSON API: (HTTP status, the JSON body); its reasons in
    ``language`` (``Accept-Language``)."""
    request = urllib.request.Request(url, data=data, headers={
        **headers, "Accept": "application/json", "Accept-Language": language,
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
           echo: Callable[[str], object] = print, language: str | None = None) -> dict[str, Any]:
    """Upload ``path``; return the submission as the API shows it: after grading when ``wait``,
    or as soon as the service says it waits for a grader that is not running (its reasons in
    ``language``; by default the environment's, ``reader_language``)."""
    language = language or reader_language()
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
    status, body = call(f"{base}api/submissions?{query}", headers, path.read_bytes(), language)
    if status != 202:
        raise SubmitError(_("{name}: refused ({status}): {error}", language, name=path.name,
                            status=status, error=body.get("error")))
    page = f"{base}submissions/{body['id']}"
    echo(_("submitted {name} as #{id} ({assignment}); feedback page: {page}", language,
           name=path.name, id=body["id"], assignment=body["assignment"], page=page))
    if not wait:
        return body
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        status, seen = call(f"{base}api/submissions/{body['id']}", headers, language=language)
        if status != 200:
            raise SubmitError(_("#{id}: the service answered {status}: {error}", language,
                                id=body["id"], status=status, error=seen.get("error")))
        if seen.get("state") != last:
            echo(f"  {_(str(seen.get('state')), language)}")
            last = seen.get("state")
        if seen.get("state") in FINAL or seen.get("waiting"):
            return {**seen, "page": page}
        time.sleep(float(seen.get("poll_after_s") or 3.0))  # when the service says, as the page
    raise SubmitError(_("#{id} was not graded within {seconds} s; see {page} later", language,
                        id=body["id"], seconds=f"{timeout_s:g}", page=page))


def summary_lines(status: dict[str, Any], language: str | None = None) -> list[str]:
    """What a terminal shows of a submission's outcome (the reasons as the service gave them, in
    the language it was asked for; the lines around them in ``language``, by default the
    environment's: ``reader_language``)."""
    language = language or reader_language()
    if status.get("state") == "failed":
        return [_("not graded: {reason}", language, reason=status.get("reason"))]
    if status.get("state") == "error":
        return [_("{reason} (not counted against you)", language,
                  reason=status.get("reason") or _("grader error", language))]
    if status.get("state") not in FINAL:
        waiting = status.get("waiting")
        return [_("not graded yet: {reason}", language, reason=waiting) if waiting else
                _("not graded yet ({state})", language, state=_(str(status.get("state")), language)),
                _("its page: {page}", language, page=status.get("page", ""))]
    lines = []
    if "score" in status:
        lines.append(_("score: {score}/{max_score}", language, score=f"{status['score']:g}",
                       max_score=f"{status['max_score']:g}"))
    else:
        lines.append(_("graded; the course shows scores later", language) if status.get("score_later")
                     else _("graded; the course does not show the score of this submission", language))
    lines += [f"  {notice}" for notice in status.get("notices", [])]  # late, a limit, no GPU...
    for test in status.get("tests", []):
        mark = _("passed", language) if test["passed"] else _("FAILED", language)
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
    parser.add_argument("--lang", default=None, metavar="zh-TW",
                        help="the language of the reasons and the lines around them (default: "
                        "$AUTOGRADER_LANG, $LC_ALL, $LC_MESSAGES or $LANG; else English)")
    return parser


def main(argv: list[str] | None = None, prog: str = "submit.py") -> int:
    args = command_line(prog).parse_args(argv)
    language = reader_language(args.lang)
    try:
        status = submit(args.notebook, url=args.url, wait=not args.no_wait, language=language)
    except SubmitError as error:
        print(_("{prog}: error: {error}", language, prog=prog, error=error), file=sys.stderr)
        return 1
    if args.no_wait:
        return 0
    for line in summary_lines(status, language):
        print(line)
    return exit_status(status)


if __name__ == "__main__":
    sys.exit(main())
