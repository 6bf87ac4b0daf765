"""The pages' handlers: a student's (the assignments and the upload form, one submission), the
staff's (the instructor page, grading again, the scores as CSV) and, standalone, login and logout."""

from __future__ import annotations

import csv
import io

from tornado import web

from autograder.service import language
from autograder.service.handlers import (
    COOKIE,
    Handler,
    accept_off_the_loop,
    logged_in,
    own_submission,
    submission_number,
)
from autograder.service.policy import Refused, iso
from autograder.service.schema import digest
from autograder.service.views import assignment_views, queue_view, submission_view


class IndexPage(Handler):
    @logged_in
    def get(self) -> None:
        self._show()

    def _show(self, status: int = 200, error: str | None = None) -> None:
        me = self.me()
        now = self.now()
        rows = self.store.history(me.name, limit=200)
        self.page("index.html", status, error=error,
                  assignments=assignment_views(self.service, self.store, me.name, now, self.shown),
                  history=[submission_view(r, self.service, self.store, now, staff=me.instructor,
                                           shown=self.shown, language=self.language) for r in rows],
                  max_mb=self.service.max_upload_bytes / 2**20)

    @logged_in
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
            return self._show(refused.status, language.reason(refused.message, self.language))
        self.redirect(self.url(f"submissions/{accepted.id}"), status=303)


class SubmissionPage(Handler):
    @logged_in
    def get(self, submission_id: str) -> None:
        row = own_submission(self, submission_id)
        if row is None:
            return self.page("missing.html", 404,
                             what=self._("There is no submission {id} for you here.",
                                         id=submission_id))
        self.page("submission.html",
                  submission=submission_view(row, self.service, self.store, self.now(),
                                             staff=self.me().instructor, shown=self.shown,
                                             language=self.language))


class InstructorPage(Handler):
    @logged_in
    def get(self) -> None:
        if not self.me().instructor:
            return self.page("missing.html", 403,
                             what=self._("There is no instructor view for you here."))
        self.page("instructor.html", queue=queue_view(self.service, self.store, figure=True))


class RequeuePage(Handler):
    """Staff: grade a grader error (or a failed submission) again (``Store.requeue``)."""

    @logged_in
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


class ScoresCsv(Handler):
    @logged_in
    def get(self) -> None:
        if not self.me().instructor:
            raise web.HTTPError(403)
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(["id", "student", "assignment", "received_at", "late", "state", "score",
                         "max_score", "counted"])
        for row in reversed(self.store.history()):
            writer.writerow([row.id, row.student, row.assignment, iso(row.received_at),
                             row.late, row.state, row.score, row.max_score, row.landed])
        self.set_header("Content-Type", "text/csv; charset=utf-8")
        self.set_header("Content-Disposition", 'attachment; filename="service-scores.csv"')
        self.finish(out.getvalue())


class LoginPage(Handler):
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


class LogoutPage(Handler):
    def post(self) -> None:
        self.clear_cookie(COOKIE)
        self.redirect(self.url("login"), status=303)
