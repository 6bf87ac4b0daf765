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

Here: the application (``make_app``, its routes) and standalone mode's authentication. The
handlers: ``handlers.py`` (what they share), ``pages.py`` (the pages), ``api.py`` (the JSON API);
what they show of the queue: ``views.py``.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tornado import web
from tornado.log import access_log

from autograder.service.api import (
    ApiAssignments,
    ApiPolicy,
    ApiQueue,
    ApiSubmission,
    ApiSubmissions,
)
from autograder.service.handlers import COOKIE, Handler, Identity
from autograder.service.pages import (
    IndexPage,
    InstructorPage,
    LoginPage,
    LogoutPage,
    RequeuePage,
    ScoresCsv,
    SubmissionPage,
)
from autograder.service.schema import digest, utcnow
from autograder.service.settings import ServiceSettings
from autograder.service.store import Store

HERE = Path(__file__).parent


if TYPE_CHECKING:  # a mixin of the handlers (make_app): typed as one, a plain class at run time
    _TokenAuthBase = Handler
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
            return  # no credential at all: nothing to forge; logged_in answers 401 / the login page
        super().check_xsrf_cookie()

    def get_login_url(self) -> str:
        return self.url("login")


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
