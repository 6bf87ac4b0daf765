"""The JSON API's handlers (``web.py`` lists the routes and the API's table)."""

from __future__ import annotations

from tornado import httputil, web
from tornado.http1connection import HTTP1Connection

from autograder.service.handlers import JsonHandler, accept_off_the_loop, logged_in, own_submission
from autograder.service.intake import too_large
from autograder.service.policy import Refused, iso
from autograder.service.views import assignment_views, queue_view, submission_view


class ApiAssignments(JsonHandler):
    @logged_in
    def get(self) -> None:
        me = self.me()
        self.write_json({"assignments": assignment_views(self.service, self.store, me.name,
                                                         self.now())})


class ApiPolicy(JsonHandler):
    @logged_in
    def get(self, name: str) -> None:
        if name not in self.service.assignments():
            return self._error(404, f"no assignment {name!r} (known: "
                                    f"{', '.join(sorted(self.service.assignments()))})")
        self.write_json(self.service.policy(name).as_json())


@web.stream_request_body
class ApiSubmissions(JsonHandler):
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
        if length is not None and not (length.isascii() and length.isdigit()):
            self._error(400, f"Content-Length {ascii(length[:40])}: expected the body's size, a "
                             "number of bytes")
            return
        if length is not None and int(length) > cap:
            self._refuse_size(int(length))
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

    @logged_in
    def get(self) -> None:
        me = self.me()
        student = self.get_argument("student", None) if me.instructor else me.name
        rows = self.store.history(student, self.get_argument("assignment", None), limit=500)
        now = self.now()
        self.write_json({"submissions": [submission_view(r, self.service, self.store, now,
                                                         staff=me.instructor, language=self.language)
                                       for r in rows]})

    @logged_in
    async def post(self) -> None:
        if self._received > self._body_cap():
            return self._refuse_size(self._received)
        self.request.body = b"".join(self._chunks)
        self._chunks.clear()
        kind = self.request.headers.get("Content-Type", "")
        try:
            httputil.parse_body_arguments(kind, self.request.body, self.request.body_arguments,
                                          self.request.files, self.request.headers)
        except httputil.HTTPInputError as error:
            return self._error(400, f"malformed {kind.split(';')[0].strip() or 'request'} body "
                                    f"({error}): send the notebook as the request body with "
                                    "?filename=NN_name.ipynb, or as the form field 'notebook' of a "
                                    "multipart/form-data body with its boundary")
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


class ApiSubmission(JsonHandler):
    @logged_in
    def get(self, submission_id: str) -> None:
        row = own_submission(self, submission_id)
        if row is None:
            return self._error(404, f"no submission {submission_id} of yours")
        self.write_json(submission_view(row, self.service, self.store, self.now(),
                                        staff=self.me().instructor, language=self.language))


class ApiQueue(JsonHandler):
    @logged_in
    def get(self) -> None:
        if not self.me().instructor:
            return self._error(403, "the queue is for the course staff")
        self.write_json(queue_view(self.service, self.store))
