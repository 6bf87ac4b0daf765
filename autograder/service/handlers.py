"""What every handler of the web process shares (``web.py`` wires them): who is asking, the store,
the clock, the reader's language, JSON errors; the examiner process that parses uploads, and the
upload's way into the queue (``accept_off_the_loop``) that the upload form and the API both take."""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import os
import signal
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tornado import web

from autograder.service import language
from autograder.service.intake import Accepted, Upload, check_upload, enqueue, identify
from autograder.service.lifetime import die_with_parent
from autograder.service.policy import Refused
from autograder.service.schema import SubmissionRow
from autograder.service.settings import ServiceSettings
from autograder.service.store import Store

STATES = ("queued", "running", "done", "failed", "error")
COOKIE = "autograder-session"
MAX_ID = 2**62  # larger ids in a URL are "not found", never an integer overflow in the database

log = logging.getLogger("autograder.service")
_EXAMINER: ProcessPoolExecutor | None = None


def examiner() -> ProcessPoolExecutor:
    """The process that parses uploads (``intake.examine``): a notebook of 100,000 cells holds it,
    never the event loop that answers everyone else."""
    global _EXAMINER
    if _EXAMINER is None:
        # its processes end with this one, even after a kill -9 (and then so does the pool's
        # resource tracker: the last writer of its pipe is gone)
        _EXAMINER = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"),
                                        initializer=die_with_parent,
                                        initargs=(signal.SIGKILL, os.getpid()))
    return _EXAMINER


def submission_number(text: str) -> int | None:
    """A submission id from a URL or a form, or None when it cannot be one (ASCII digits only:
    ``"²".isdigit()`` holds, ``int("²")`` fails)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 19 \
        and int(text) < MAX_ID else None


MAX_NAME_BYTES = 255  # a file name's length on every file system the course runs on


def file_name_problem(filename: str) -> str | None:
    """Why ``filename`` (as a client sent it) cannot name an uploaded notebook, or None: no control
    character or NUL, no path (a browser sends the file's name alone), valid Unicode, at most
    ``MAX_NAME_BYTES`` bytes."""
    shown = ascii(filename[:80]) + ("…" if len(filename) > 80 else "")
    then = "send the notebook's own file name, e.g. 01_strides.ipynb"
    try:
        size = len(filename.encode("utf-8"))
    except UnicodeEncodeError:
        return f"the file name {shown} is not valid Unicode: {then}"
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in filename):
        return f"the file name {shown} holds control characters (a NUL, a newline…): {then}"
    if "/" in filename or "\\" in filename:
        return f"the file name {shown} is a path, not a file name: {then}"
    if size > MAX_NAME_BYTES:
        return f"the file name is {size} bytes long, over {MAX_NAME_BYTES}: {then}"
    return None


def examined(upload: Upload) -> Upload | str:
    """``intake.identify`` in the examiner, with what a malformed file makes the JSON parser or a
    validator raise (a body nested 100,000 deep: RecursionError) as the reason it is refused."""
    try:
        return identify(upload)
    except RecursionError:
        return (f"{upload.name}: not a Jupyter notebook: its JSON nests deeper than a notebook "
                "does; upload the .ipynb file as Jupyter saved it")
    except (ValueError, TypeError, KeyError, MemoryError) as error:
        return (f"{upload.name}: not a Jupyter notebook ({type(error).__name__}: "
                f"{str(error)[:120]}); upload the .ipynb file as Jupyter saved it")


@dataclass(frozen=True)
class Identity:
    name: str
    instructor: bool


class Handler(web.RequestHandler):
    """What every handler shares: who is asking, the store, the clock, JSON errors."""

    @property
    def store(self) -> Store:
        store: Store = self.settings["store"]
        return store

    @property
    def service(self) -> ServiceSettings:
        service: ServiceSettings = self.settings["service"]
        return service

    def now(self) -> datetime:
        clock: Callable[[], datetime] = self.settings["clock"]
        return clock()

    def set_default_headers(self) -> None:
        self.set_header("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'self'; "
                        "form-action 'self'; base-uri 'none'; object-src 'none'")
        self.set_header("X-Content-Type-Options", "nosniff")
        self.set_header("Referrer-Policy", "same-origin")
        self.set_header("Cache-Control", "no-store")

    def identity(self) -> Identity | None:
        user = self.current_user
        if user is None:
            return None
        if isinstance(user, Identity):
            return user
        name = user["name"]  # a hub user model
        groups = user.get("groups") or []
        return Identity(name, bool(user.get("admin")) or name in self.service.instructors
                        or self.service.instructor_group in groups)

    def me(self) -> Identity:
        """Who is asking, in a handler behind ``logged_in`` (it lets no anonymous request in)."""
        found = self.identity()
        if found is None:
            raise RuntimeError(f"{type(self).__name__}: no user behind logged_in")
        return found

    def url(self, path: str = "") -> str:
        prefix: str = self.settings["prefix"]
        return prefix + path

    @property
    def language(self) -> str:
        """The reader's: ``?lang=`` (kept in a cookie), else ``Accept-Language``; else English."""
        if not hasattr(self, "_language"):
            query = self.get_query_argument("lang", None)
            picked = language.chosen(query, None)
            if picked is not None:
                self.set_cookie(language.COOKIE, picked, expires_days=365, samesite="Lax",
                                path=self.url())
            else:
                picked = language.chosen(self.get_cookie(language.COOKIE), None)
            self._language = picked or language.from_accept_language(
                self.request.headers.get("Accept-Language"))
        return self._language

    def _(self, english: str, **fields: object) -> str:
        """A fixed string of the pages in the reader's language (``locales/<lang>/messages.po``)."""
        return language.translator(self.language)(english, **fields)

    def shown(self, when: datetime | None) -> str | None:
        return language.shown_time(when, self.language)

    def page(self, template: str, status: int = 200, **values: Any) -> None:
        self.set_status(status)
        self.add_header("Vary", "Accept-Language")
        reader = self.language
        strings = self.script_strings()
        self.render(template, me=self.identity(), url=self.url, hub=self.settings["hub"],
                    title=self.settings["title"], _=language.translator(reader),
                    html_lang=language.LANGUAGES[reader], language=reader,
                    states={state: strings[state] for state in STATES},
                    script_strings=json.dumps(strings, ensure_ascii=False)
                    .replace("</", "<\\/"), **values)

    def script_strings(self) -> dict[str, str]:
        """What ``app.js`` writes, in the reader's language (a JSON data block of the page)."""
        _ = self._
        return {"queued": _("queued"), "running": _("running"), "done": _("done"),
                "failed": _("failed"), "error": _("grader error"),
                "waiting": _("(waiting: {reason})", reason="{reason}"),
                "ahead": _("({count} ahead of you)", count="{count}"),
                "not_graded": _("Not graded: {reason}", reason="{reason}"),
                "unknown": _("unknown reason"),
                "score": _("Score: {score} / {max_score}", score="{score}", max_score="{max_score}"),
                "later": _("Graded. The course shows scores after the due date."),
                "never": _("Graded. The course does not show the score of this submission."),
                "test": _("Test"), "kind": _("Kind"), "points": _("Points"), "result": _("Result"),
                "both": _("visible + hidden"), "visible": _("visible"),
                "passed": _("passed"), "failed_test": _("failed"),
                "no_load": _("Could not load: {error}", error="{error}")}


def logged_in(method: Callable[..., Awaitable[None] | None]
               ) -> Callable[..., Awaitable[None] | None]:
    """``tornado.web.authenticated``, but an API request gets 401 JSON, never a redirect."""
    pages = web.authenticated(method)

    # ``self``: a page or an API handler; only API handlers (``JsonHandler``) serve api/ paths
    def wrapper(self: JsonHandler, *args: Any, **kwargs: Any) -> Awaitable[None] | None:
        if self.request.path.startswith(self.url("api/")) and self.current_user is None:
            self._error(401, "not logged in: send Authorization: Bearer <course token> "
                             "(or token <hub API token>)")
            return None
        return pages(self, *args, **kwargs)
    return wrapper


class JsonHandler(Handler):
    def write_json(self, value: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps(value))

    def _error(self, status: int, message: str, **extra: Any) -> None:
        """A JSON error, its message (a reason: ``language.reason``) in the reader's language."""
        self.write_json({"error": language.reason(message, self.language), **extra}, status)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = kwargs.get("exc_info", (None, None))[1]
        message = error.log_message if isinstance(error, web.HTTPError) and error.log_message \
            else self._reason
        self._error(status_code, message)


async def accept_off_the_loop(handler: Handler, *, student: str, filename: str, content: bytes,
                              assignment: str | None) -> Accepted:
    """``intake.accept`` with its notebook parsing in the examiner process; a file name that cannot
    be one (``file_name_problem``) is refused first."""
    problem = file_name_problem(filename)
    if problem is not None:
        raise Refused(400, problem)
    upload = check_upload(handler.service, student=student, filename=filename, content=content,
                          assignment=assignment)
    found = await _examine(upload)
    if isinstance(found, str):
        raise Refused(400, found)
    return enqueue(handler.service, handler.store, found, now=handler.now(), require_grader=True)


async def _examine(upload: Any) -> Any:
    """``examined(upload)`` in the examiner. A pool whose process died (this upload stopped the
    parser, or an earlier one did) is replaced and the upload tried once more in a fresh one; an
    upload that stops that one too is refused, saying so — never a 500 for the next student."""
    global _EXAMINER
    for attempt in range(2):
        try:
            return await asyncio.get_running_loop().run_in_executor(examiner(), examined, upload)
        except BrokenProcessPool:
            broken, _EXAMINER = _EXAMINER, None
            if broken is not None:
                broken.shutdown(wait=False, cancel_futures=True)
            log.warning("the examiner process died (attempt %d); a fresh one is started", attempt + 1)
    raise Refused(400, "this file stopped the notebook reader twice: nothing was submitted; "
                       "upload the assignment's .ipynb file as saved by JupyterLab")


def own_submission(handler: Handler, submission_id: str) -> SubmissionRow | None:
    """The submission if the user may see it (their own, or any for instructors)."""
    number = submission_number(submission_id)
    row = None if number is None else handler.store.get(number)
    me = handler.me()
    if row is None or (row.student != me.name and not me.instructor):
        return None
    return row
