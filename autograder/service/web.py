"""The service's web process (tornado): the student and instructor pages and the JSON API they use.

It never runs student code and never imports the grading engine (an import-linter contract): it reads
and writes the queue (``store.py``) and lands accepted notebooks (``intake.py``). Who is asking:

* **hub mode** (``autograder serve --hub``, started by JupyterHub as a service): the hub's OAuth
  (``HubOAuthenticated``); API clients send ``Authorization: token <hub API token>``;
* **standalone**: course tokens (``autograder tokens issue``): the login form sets a signed cookie
  holding the token's SHA-256; API clients send ``Authorization: Bearer <token>``.

Every form and every cookie-authenticated API call carries the XSRF token; nothing secret is ever in a
URL. A student sees only their own submissions (another's is "not found", 404); instructors (listed
in ``c.AutograderService.instructors``, members of its ``instructor_group``, or hub admins) see all.
API (JSON; errors are ``{"error": message}`` with the HTTP status):

    GET  api/assignments                  assignments, dates, policy, submissions left
    GET  api/assignments/<name>/policy    one assignment's policy
    POST api/submissions?filename=F[&assignment=A]   body: the notebook  -> 202 {"id", "state"}
    GET  api/submissions                  your history (instructors: ?student=ID, or everyone's)
    GET  api/submissions/<id>             state, queue position, feedback as the policy allows
    GET  api/queue                        instructors: queue length, running, counts, scores
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import logging
import multiprocessing
import os
import re
import secrets
import signal
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tornado import httputil, web
from tornado.http1connection import HTTP1Connection
from tornado.log import access_log

from autograder.reports.figures import score_distribution
from autograder.service import language
from autograder.service.intake import (
    Accepted,
    Refused,
    check_upload,
    enqueue,
    identify,
    no_grader,
    too_large,
)
from autograder.service.lifetime import die_with_parent
from autograder.service.policy import human_time, iso
from autograder.service.settings import ServiceSettings
from autograder.service.store import Store, SubmissionRow, as_utc, digest, utcnow

HERE = Path(__file__).parent
STATES = ("queued", "running", "done", "failed", "error")
COOKIE = "autograder-session"
POLL_SHARE = 0.8  # poll_after_s: of the time until a submission's turn, how much a page waits
MAX_ID = 2**62  # larger ids in a URL are "not found", never an integer overflow in the database
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
    """A submission id from a URL, or None when it cannot be one."""
    return int(text) if text.isdigit() and len(text) <= 19 and int(text) < MAX_ID else None


@dataclass(frozen=True)
class Identity:
    name: str
    instructor: bool


class _Base(web.RequestHandler):
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
        """Who is asking, in a handler behind ``_logged_in`` (it lets no anonymous request in)."""
        found = self.identity()
        if found is None:
            raise RuntimeError(f"{type(self).__name__}: no user behind _logged_in")
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
                "test": _("Test"), "kind": _("Kind"), "points": _("Points"), "result": _("Result"),
                "both": _("visible + hidden"), "visible": _("visible"),
                "passed": _("passed"), "failed_test": _("failed"),
                "no_load": _("Could not load: {error}", error="{error}")}


if TYPE_CHECKING:  # a mixin of the handlers (make_app): typed as one, a plain class at run time
    _TokenAuthBase = _Base
else:
    _TokenAuthBase = object


class _TokenAuth(_TokenAuthBase):
    """Standalone mode: ``Authorization: Bearer <token>``, or the login cookie (its SHA-256)."""

    def get_current_user(self) -> Identity | None:
        header = self.request.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            self._token_authenticated = True
            found = self.store.token_user_by_digest(digest(header[len("Bearer "):].strip()))
        else:
            cookie = self.get_secure_cookie(COOKIE, max_age_days=14)
            found = self.store.token_user_by_digest(cookie.decode()) if cookie else None
        return None if found is None else Identity(found[0], found[1])

    def check_xsrf_cookie(self) -> None:
        if getattr(self, "_token_authenticated", False) or \
                self.request.headers.get("Authorization", "").startswith("Bearer "):
            return  # a header token is not ambient: no cross-site request can send it
        if not isinstance(self, LoginPage) and self.get_cookie(COOKIE) is None:
            return  # no credential at all: nothing to forge; _logged_in answers 401 / the login page
        super().check_xsrf_cookie()

    def get_login_url(self) -> str:
        return self.url("login")


def _logged_in(method: Callable[..., Awaitable[None] | None]
               ) -> Callable[..., Awaitable[None] | None]:
    """``tornado.web.authenticated``, but an API request gets 401 JSON, never a redirect."""
    pages = web.authenticated(method)

    # ``self``: a page or an API handler; only API handlers (``_Json``) serve api/ paths
    def wrapper(self: _Json, *args: Any, **kwargs: Any) -> Awaitable[None] | None:
        if self.request.path.startswith(self.url("api/")) and self.current_user is None:
            self._error(401, "not logged in: send Authorization: Bearer <course token> "
                             "(or token <hub API token>)")
            return None
        return pages(self, *args, **kwargs)
    return wrapper


class _Json(_Base):
    def write_json(self, value: Any, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=utf-8")
        self.finish(json.dumps(value))

    def _error(self, status: int, message: str, **extra: Any) -> None:
        self.write_json({"error": message, **extra}, status)

    def write_error(self, status_code: int, **kwargs: Any) -> None:
        error = kwargs.get("exc_info", (None, None))[1]
        message = error.log_message if isinstance(error, web.HTTPError) and error.log_message \
            else self._reason
        self._error(status_code, message)


# -- views of the queue ------------------------------------------------------------------------

def poll_after_s(position: int | None, pace_s: float | None = None) -> float:
    """When a page should ask again about a submission not yet graded, 1 to 30 s. With the queue's
    pace (seconds per graded submission, ``Store.pace_s``): 80% of the time until its turn, so each
    question finds the place about five times shorter and the last one comes about a second after the
    grade; before there is a pace, 1 s plus a tenth of a second per submission ahead."""
    places = position or 0
    wait = POLL_SHARE * places * pace_s if pace_s is not None else 1.0 + 0.1 * places
    return round(min(30.0, max(1.0, wait)), 1)


GRADER_ERROR = "grader error: the course staff have been told (not your notebook's fault)"
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~])/(?:[^\s'\"/:,;()]+/)+[^\s'\"/:,;()]*")


def redact_paths(text: str) -> str:
    """``text`` without the server's absolute paths (each becomes its last part: a file name)."""
    return _ABSOLUTE_PATH.sub(lambda m: m.group(0).rstrip("/").rsplit("/", 1)[-1] or "…", text)


def student_reason(row: SubmissionRow) -> str | None:
    """The reason a student is shown: their notebook's own (no server path in it), or for a fault
    of the grader only that it was one (the detail is the staff's, on their page and in the log)."""
    if row.state == "error" or (row.state == "queued" and row.reason):
        return GRADER_ERROR + ("; it is being graded again" if row.state == "queued" else "")
    return redact_paths(row.reason) if row.reason else None


def submission_view(row: SubmissionRow, settings: ServiceSettings, store: Store,
                    now: datetime, *, staff: bool = False,
                    shown: Callable[[datetime | None], str | None] = human_time) -> dict[str, Any]:
    """What a student may see of one submission now (the policy's feedback level decides);
    ``staff``: also the grader's own words about a fault."""
    view: dict[str, Any] = {
        "id": row.id, "assignment": row.assignment, "notebook": row.notebook,
        "student": row.student, "received_at": as_utc(row.received_at),
        "received": shown(row.received_at), "late": row.late,
        "state": row.state, "finished_at": as_utc(row.finished_at), "counted": row.landed}
    if row.state == "queued":
        view["position"] = store.position(row)
        waiting = no_grader(store, row.assignment, queued=True)
        if waiting is not None:  # parked, visibly: the page and `submit` say why, not "0 ahead"
            view["waiting"] = waiting
    if row.state in ("queued", "running"):
        view["poll_after_s"] = poll_after_s(view.get("position"),
                                             store.pace_s() if view.get("position") else None)
    if row.state in ("failed", "error") or (row.state == "queued" and row.reason):
        # "error": the grader's; queued with a reason: being retried
        view["reason"] = row.reason if staff else student_reason(row)
    if row.state == "done":
        level = settings.policy(row.assignment).feedback_level(now)
        view["feedback_level"] = level
        if level in ("tests", "score"):
            view["score"], view["max_score"] = row.score, row.max_score
        if level == "tests" and row.feedback:
            feedback = json.loads(row.feedback)
            view["tests"], view["notices"] = feedback["tests"], feedback["notices"]
    return view


def assignment_views(settings: ServiceSettings, store: Store, student: str | None,
                     now: datetime, shown: Callable[[datetime | None], str | None] = human_time
                     ) -> list[dict[str, Any]]:
    views = []
    for name, notebooks in sorted(settings.assignments().items()):
        policy = settings.policy(name)
        earlier = store.received_since(student, name, datetime.min) if student else []
        views.append({**policy.as_json(), "notebooks": [f"{nb}.ipynb" for nb in notebooks],
                      "open": (policy.opens is None or now >= policy.opens)
                      and (policy.due is None or now <= policy.due or policy.late),
                      "not_yet_open": policy.opens is not None and now < policy.opens,
                      "opens_shown": shown(policy.opens), "due_shown": shown(policy.due),
                      "submissions_left": policy.left(now, earlier) if student else None,
                      "submitted": len(earlier)})
    return views


def queue_view(settings: ServiceSettings, store: Store, *, figure: bool = False) -> dict[str, Any]:
    """Queue length, running jobs, per assignment: submissions, students, each student's latest
    score (and, with ``figure``, their distribution as the report draws it, a base64 PNG)."""
    counts = store.counts()
    per_assignment: dict[str, dict[str, Any]] = {}
    top: dict[str, float] = {}
    for row in store.history():  # newest first: the first score seen is a student's latest
        entry = per_assignment.setdefault(row.assignment, {"submissions": 0, "students": set(),
                                                           "latest": {}})
        entry["submissions"] += 1
        entry["students"].add(row.student)
        if row.state == "done" and row.score is not None:
            entry["latest"].setdefault(row.student, row.score)
            top[row.assignment] = max(top.get(row.assignment, 0.0), row.max_score or 0.0)
    for entry in per_assignment.values():
        entry["scores"] = list(entry.pop("latest").values())
    graders = store.graders()
    waiting = {}
    for name in sorted({row.assignment for row in store.history() if row.state == "queued"}):
        if not any(grader.grades(name) for grader in graders):
            waiting[name] = ("no running worker grades it: start one with a GPU (`autograder "
                             "worker --gpu`, or `serve --gpu`), or one that runs GPU checks on "
                             "CPU (`--allow-cpu`)" if graders else "no worker is running: start "
                             "`autograder serve` (with its worker) or `autograder worker`")
    view: dict[str, Any] = {
        "waiting": waiting,
        "workers": [{"id": g.id, "host": g.host, "gpu": g.gpu, "leaves": list(g.skip),
                     "probe": g.probe or "running"} for g in graders],
        "queued": counts["queued"], "running": counts["running"], "done": counts["done"],
        "failed": counts["failed"], "error": counts["error"],
        "grader_errors": [{"id": r.id, "student": r.student, "assignment": r.assignment,
                           "reason": r.reason} for r in store.history() if r.state == "error"][:200],
        "assignments": {name: {"submissions": e["submissions"], "students": len(e["students"]),
                               "scores": sorted(e["scores"])}
                        for name, e in sorted(per_assignment.items())}}
    if figure:
        view["figure"] = score_distribution(
            {name: e["scores"] for name, e in sorted(per_assignment.items())}, top)
    return view


# -- API ---------------------------------------------------------------------------------------

class ApiAssignments(_Json):
    @_logged_in
    def get(self) -> None:
        me = self.me()
        self.write_json({"assignments": assignment_views(self.service, self.store, me.name,
                                                         self.now())})


class ApiPolicy(_Json):
    @_logged_in
    def get(self, name: str) -> None:
        if name not in self.service.assignments():
            return self._error(404, f"no assignment {name!r} (known: "
                                    f"{', '.join(sorted(self.service.assignments()))})")
        self.write_json(self.service.policy(name).as_json())


@web.stream_request_body
class ApiSubmissions(_Json):
    """Uploads are streamed: who is asking and the size are decided on the headers (401 / 413
    before the body is read), a chunked body is counted as it comes and never kept past the cap."""

    def prepare(self) -> None:
        self._chunks: list[bytes] = []
        self._received = 0
        if self.request.method != "POST":
            return
        cap = self._body_cap()
        if self.current_user is None:
            self._error(401, "not logged in: send Authorization: Bearer <course token> "
                             "(or token <hub API token>)")
            return
        length = self.request.headers.get("Content-Length")
        if length is not None and (not length.isdigit() or int(length) > cap):
            self._refuse_size(int(length) if length.isdigit() else cap + 1)
            return
        connection = self.request.connection
        if isinstance(connection, HTTP1Connection):
            connection.set_max_body_size(2**40)  # counted here instead, chunked or not

    def _body_cap(self) -> int:
        """The notebook cap, and room for a multipart form's envelope around it."""
        return self.service.max_upload_bytes + 2**16

    def _refuse_size(self, size: int) -> None:
        name = self.get_argument("filename", None) or "the upload"
        self._error(413, too_large(name, size, self.service.max_upload_bytes))

    def data_received(self, chunk: bytes) -> None:
        self._received += len(chunk)
        if self._received <= self._body_cap():
            self._chunks.append(chunk)
        else:
            self._chunks.clear()  # read to the end (the reply needs it), kept no further

    @_logged_in
    def get(self) -> None:
        me = self.me()
        student = self.get_argument("student", None) if me.instructor else me.name
        rows = self.store.history(student, self.get_argument("assignment", None), limit=500)
        now = self.now()
        self.write_json({"submissions": [submission_view(r, self.service, self.store, now,
                                                         staff=me.instructor) for r in rows]})

    @_logged_in
    async def post(self) -> None:
        if self._received > self._body_cap():
            return self._refuse_size(self._received)
        self.request.body = b"".join(self._chunks)
        self._chunks.clear()
        httputil.parse_body_arguments(self.request.headers.get("Content-Type", ""),
                                      self.request.body, self.request.body_arguments,
                                      self.request.files, self.request.headers)
        me = self.me()
        filename = self.get_argument("filename", None)
        content = self.request.body
        if self.request.files.get("notebook"):
            upload = self.request.files["notebook"][0]
            filename, content = upload["filename"], upload["body"]
        if not filename:
            return self._error(400, "no notebook: send it as the request body with "
                                    "?filename=NN_name.ipynb, or as the form field 'notebook'")
        try:
            accepted = await accept_off_the_loop(
                self, student=me.name, filename=filename, content=content,
                assignment=self.get_argument("assignment", None) or None)
        except Refused as refused:
            if refused.retry_after is not None:
                self.set_header("Retry-After", str(max(1, int(
                    (refused.retry_after - self.now()).total_seconds()))))
            return self._error(refused.status, refused.message,
                               retry_after=iso(refused.retry_after))
        self.set_header("Location", self.url(f"api/submissions/{accepted.id}"))
        self.write_json({"id": accepted.id, "state": "queued", "assignment": accepted.assignment,
                         "late": accepted.late, "page": self.url(f"submissions/{accepted.id}")},
                        202)


class ApiSubmission(_Json):
    @_logged_in
    def get(self, submission_id: str) -> None:
        row = _own(self, submission_id)
        if row is None:
            return self._error(404, f"no submission {submission_id} of yours")
        self.write_json(submission_view(row, self.service, self.store, self.now(),
                                        staff=self.me().instructor))


class ApiQueue(_Json):
    @_logged_in
    def get(self) -> None:
        if not self.me().instructor:
            return self._error(403, "the queue is for the course staff")
        self.write_json(queue_view(self.service, self.store))


async def accept_off_the_loop(handler: _Base, *, student: str, filename: str, content: bytes,
                              assignment: str | None) -> Accepted:
    """``intake.accept`` with its notebook parsing in the examiner process."""
    upload = check_upload(handler.service, student=student, filename=filename, content=content,
                          assignment=assignment)
    found = await asyncio.get_running_loop().run_in_executor(examiner(), identify, upload)
    if isinstance(found, str):
        raise Refused(400, found)
    return enqueue(handler.service, handler.store, found, now=handler.now(), require_grader=True)


def _own(handler: _Base, submission_id: str) -> SubmissionRow | None:
    """The submission if the user may see it (their own, or any for instructors)."""
    number = submission_number(submission_id)
    row = None if number is None else handler.store.get(number)
    me = handler.me()
    if row is None or (row.student != me.name and not me.instructor):
        return None
    return row


# -- pages -------------------------------------------------------------------------------------

class IndexPage(_Base):
    @_logged_in
    def get(self) -> None:
        self._show()

    def _show(self, status: int = 200, error: str | None = None) -> None:
        me = self.me()
        now = self.now()
        rows = self.store.history(me.name, limit=200)
        self.page("index.html", status, error=error,
                  assignments=assignment_views(self.service, self.store, me.name, now, self.shown),
                  history=[submission_view(r, self.service, self.store, now, staff=me.instructor,
                                           shown=self.shown) for r in rows],
                  max_mb=self.service.max_upload_bytes / 2**20)

    @_logged_in
    async def post(self) -> None:  # the upload form
        me = self.me()
        uploads = self.request.files.get("notebook") or []
        if not uploads:
            return self._show(400, self._("Choose a notebook file to upload."))
        try:
            accepted = await accept_off_the_loop(
                self, student=me.name, filename=uploads[0]["filename"], content=uploads[0]["body"],
                assignment=self.get_argument("assignment", None) or None)
        except Refused as refused:
            return self._show(refused.status, refused.message)
        self.redirect(self.url(f"submissions/{accepted.id}"), status=303)


class SubmissionPage(_Base):
    @_logged_in
    def get(self, submission_id: str) -> None:
        row = _own(self, submission_id)
        if row is None:
            return self.page("missing.html", 404,
                             what=self._("There is no submission {id} for you here.",
                                         id=submission_id))
        self.page("submission.html",
                  submission=submission_view(row, self.service, self.store, self.now(),
                                             staff=self.me().instructor, shown=self.shown))


class InstructorPage(_Base):
    @_logged_in
    def get(self) -> None:
        if not self.me().instructor:
            return self.page("missing.html", 403,
                             what=self._("There is no instructor view for you here."))
        self.page("instructor.html", queue=queue_view(self.service, self.store, figure=True))


class RequeuePage(_Base):
    """Staff: grade a grader error (or a failed submission) again (``Store.requeue``)."""

    @_logged_in
    def post(self) -> None:
        if not self.me().instructor:
            return self.page("missing.html", 403,
                             what=self._("There is no instructor view for you here."))
        number = submission_number(self.get_body_argument("id", ""))
        everything = self.get_body_argument("all", "") == "1"
        if number is None and not everything:
            return self.page("missing.html", 404,
                             what=self._("There is no such submission for you here."))
        self.store.requeue([] if number is None else [number], failed=everything)
        self.redirect(self.url("instructor"), status=303)


class ScoresCsv(_Base):
    @_logged_in
    def get(self) -> None:
        if not self.me().instructor:
            raise web.HTTPError(403)
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["id", "student", "assignment", "received_at", "late", "state", "score",
                         "max_score", "counted"])
        for row in reversed(self.store.history()):
            writer.writerow([row.id, row.student, row.assignment, as_utc(row.received_at),
                             row.late, row.state, row.score, row.max_score, row.landed])
        self.set_header("Content-Type", "text/csv; charset=utf-8")
        self.set_header("Content-Disposition", 'attachment; filename="service-scores.csv"')
        self.finish(out.getvalue())


class LoginPage(_Base):
    """Standalone mode: paste the course token once; the cookie holds its SHA-256, signed."""

    def get(self) -> None:
        self.page("login.html", error=None)

    def post(self) -> None:
        token = self.get_body_argument("token", "").strip()
        found = self.store.token_user_by_digest(digest(token)) if token else None
        if found is None:
            return self.page("login.html", 403,
                             error=self._("That token is not valid for this course."))
        self.set_secure_cookie(COOKIE, digest(token), expires_days=14, httponly=True,
                               samesite="Strict", secure=self.request.protocol == "https")
        self.redirect(self.url(), status=303)


class LogoutPage(_Base):
    def post(self) -> None:
        self.clear_cookie(COOKIE)
        self.redirect(self.url("login"), status=303)


# -- the application ---------------------------------------------------------------------------

class StaticFiles(web.StaticFileHandler):
    """tornado's, but a path no file can have (a NUL byte) is 404, not a 500 with a traceback."""

    @classmethod
    def get_absolute_path(cls, root: str, path: str) -> str:
        if "\x00" in path:
            raise web.HTTPError(404)
        return super().get_absolute_path(root, path)


def _log_request(handler: web.RequestHandler) -> None:
    """Errors and slow requests only: 300 pages polling would drown the log in 200s."""
    status, took = handler.get_status(), 1000.0 * handler.request.request_time()
    if status >= 400 or took > 500:
        level = logging.WARNING if status >= 500 or took > 500 else logging.INFO
        access_log.log(level, "%d %s %.1f ms", status, handler._request_summary(), took)


def make_app(*, store: Store, settings: ServiceSettings, hub: bool, prefix: str = "/",
             cookie_secret: bytes | None = None, clock: Callable[[], datetime] = utcnow,
             title: str = "Autograder feedback") -> web.Application:
    """The tornado application (``serve.py`` runs it; tests build it with a frozen ``clock``)."""
    prefix = prefix if prefix.endswith("/") else prefix + "/"
    routes: list[tuple[str, type]] = [
        ("", IndexPage), ("submissions/([0-9]+)", SubmissionPage),
        ("instructor", InstructorPage), ("instructor/scores.csv", ScoresCsv),
        ("instructor/requeue", RequeuePage),
        ("api/assignments", ApiAssignments), ("api/assignments/([^/]+)/policy", ApiPolicy),
        ("api/submissions", ApiSubmissions), ("api/submissions/([0-9]+)", ApiSubmission),
        ("api/queue", ApiQueue)]
    extra: dict[str, Any] = {}
    if hub:
        from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler, HubOAuthenticated

        mixin: type = HubOAuthenticated
        extra["hub_auth"] = HubOAuth(api_token=os.environ["JUPYTERHUB_API_TOKEN"],
                                     cache_max_age=60)
        handlers = [(prefix + "oauth_callback", HubOAuthCallbackHandler)]
    else:
        mixin = _TokenAuth
        routes += [("login", LoginPage), ("logout", LogoutPage)]
        handlers = []
    for path, handler in routes:
        handlers.append((prefix + path + "$", type(handler.__name__, (mixin, handler), {})))
    return web.Application(
        handlers, log_function=_log_request, store=store, service=settings, clock=clock, prefix=prefix, hub=hub, title=title,
        template_path=str(HERE / "templates"), static_path=str(HERE / "static"),
        static_url_prefix=prefix + "static/", static_handler_class=StaticFiles, xsrf_cookies=True,
        cookie_secret=cookie_secret or secrets.token_bytes(32), **extra)
