"""A local fake Canvas for the LMS tests: an HTTP server on 127.0.0.1 implementing exactly the
endpoints ``autograder lms canvas`` reaches through canvasapi, with ``Link`` pagination, Bearer
tokens, Progress objects, and faults to inject (429, 403 "Rate Limit Exceeded", 5xx, 401).

    GET  /api/v1/courses/:id
    GET  /api/v1/courses/:id/search_users (and /users)  (enrollment_type[]=student, include[]=email)
    GET  /api/v1/courses/:id/assignments
    GET  /api/v1/courses/:id/assignments/:aid/submissions
    POST /api/v1/courses/:id/assignments/:aid/submissions/update_grades   -> Progress
    GET  /api/v1/progress/:id

Every request is recorded (method, path, form), so a test can say "no write was sent".
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit


@dataclass
class Fault:
    """Answer the next ``times`` requests whose method and path match with ``status``."""

    method: str
    path: str  # a regex searched in the path
    status: int
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    times: int = 1


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    form: list[tuple[str, str]]


@dataclass
class FakeCanvas:
    """State of one Canvas course (users, assignments, scores) and its server."""

    course_id: int = 101
    token: str = "fake-token"
    page_size: int = 10  # the most per page whatever per_page asks
    users: list[dict[str, Any]] = field(default_factory=list)
    assignments: list[dict[str, Any]] = field(default_factory=list)
    scores: dict[tuple[int, int], float | None] = field(default_factory=dict)  # (assignment, user)
    hidden_fields: set[str] = field(default_factory=set)  # user fields this token cannot see
    excused: set[tuple[int, int]] = field(default_factory=set)  # (assignment, user)
    progress_polls: int = 2  # queries a Progress answers "running" before it completes
    fail_progress: bool = False
    faults: list[Fault] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    _progress: dict[int, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- the server ----------------------------------------------------------------------------
    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

            def do_PUT(self) -> None:
                fake._handle(self, "PUT")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        return self.url

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def writes(self) -> list[Recorded]:
        return [r for r in self.requests if r.method in ("POST", "PUT", "DELETE")]

    # --- requests ------------------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length).decode() if length else ""
        form = parse_qsl(body, keep_blank_values=True)
        with self._lock:
            self.requests.append(Recorded(method, parts.path, parse_qs(parts.query), form))
            fault = next((f for f in self.faults if f.times > 0 and f.method == method
                          and re.search(f.path, parts.path)), None)
            if fault is not None:
                fault.times -= 1
        if fault is not None:
            return self._send(handler, fault.status, fault.body, fault.headers)
        if handler.headers.get("Authorization") != f"Bearer {self.token}":
            return self._send(handler, 401, json.dumps(
                {"errors": [{"message": "Invalid access token."}]}),
                {"WWW-Authenticate": 'Bearer realm="canvas-lms"'})
        try:
            status, payload, headers = self._route(method, parts.path, parse_qs(parts.query), form)
        except LookupError:
            status, payload, headers = 404, {"errors": [{"message": "The specified resource "
                                                                     "does not exist."}]}, {}
        self._send(handler, status, json.dumps(payload), headers)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, body: str,
              headers: dict[str, str]) -> None:
        data = body.encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)

    def _route(self, method: str, path: str, query: dict[str, list[str]],
               form: list[tuple[str, str]]) -> tuple[int, Any, dict[str, str]]:
        course = rf"/api/v1/courses/{self.course_id}"
        if method == "GET" and path == course:
            return 200, {"id": self.course_id, "name": "CS336", "course_code": "CS336"}, {}
        if method == "GET" and path in (f"{course}/users", f"{course}/search_users"):
            include = query.get("include[]", [])
            return self._page(path, query, [self._user(u, include) for u in self.users])
        if method == "GET" and path == f"{course}/assignments":
            return self._page(path, query, [{**a, "course_id": self.course_id}
                                            for a in self.assignments])
        found = re.fullmatch(rf"{course}/assignments/(\d+)/submissions", path)
        if method == "GET" and found:
            aid = self._assignment(int(found.group(1)))["id"]
            return self._page(path, query, [self._submission(aid, u["id"]) for u in self.users])
        found = re.fullmatch(rf"{course}/assignments/(\d+)/submissions/update_grades", path)
        if method == "POST" and found:
            return 200, self._bulk(self._assignment(int(found.group(1)))["id"], form), {}
        found = re.fullmatch(r"/api/v1/progress/(\d+)", path)
        if method == "GET" and found:
            return 200, self._poll(int(found.group(1))), {}
        raise LookupError(path)

    def _page(self, path: str, query: dict[str, list[str]],
              items: list[Any]) -> tuple[int, Any, dict[str, str]]:
        per_page = min(self.page_size, int(query.get("per_page", ["10"])[0]))
        page = int(query.get("page", ["1"])[0])
        chunk = items[(page - 1) * per_page: page * per_page]
        links = []
        flat = [(k, v) for k, values in query.items() for v in values if k != "page"]
        for rel, number in (("current", page), ("next", page + 1), ("first", 1)):
            if rel == "next" and page * per_page >= len(items):
                continue
            links.append(f'<{self.url}{path}?{urlencode(flat + [("page", number)])}>; rel="{rel}"')
        return 200, chunk, {"Link": ", ".join(links)}

    def _user(self, user: dict[str, Any], include: list[str]) -> dict[str, Any]:
        shown = {k: v for k, v in user.items() if k not in self.hidden_fields}
        if "email" not in include:
            shown.pop("email", None)
        return shown

    def _assignment(self, aid: int) -> dict[str, Any]:
        for assignment in self.assignments:
            if assignment["id"] == aid:
                return assignment
        raise LookupError(aid)

    def _submission(self, aid: int, uid: int) -> dict[str, Any]:
        score = self.scores.get((aid, uid))
        return {"id": aid * 100000 + uid, "assignment_id": aid, "user_id": uid,
                "score": score, "entered_score": score,
                "grade": None if score is None else f"{score:g}",
                "excused": (aid, uid) in self.excused,
                "workflow_state": "unsubmitted" if score is None else "graded"}

    def _bulk(self, aid: int, form: list[tuple[str, str]]) -> dict[str, Any]:
        grades = {}
        for key, value in form:
            found = re.fullmatch(r"grade_data\[(\d+)\]\[posted_grade\]", key)
            if not found:
                raise AssertionError(f"unexpected bulk-update field {key!r}")
            grades[int(found.group(1))] = float(value)
        known = {u["id"] for u in self.users}
        unknown = set(grades) - known
        if unknown:
            raise AssertionError(f"grades posted for users not in the course: {sorted(unknown)}")
        pid = 9000 + len(self._progress) + 1
        self._progress[pid] = {"id": pid, "context_id": aid, "tag": "submissions_update",
                               "workflow_state": "queued", "completion": 0, "message": None,
                               "url": f"{self.url}/api/v1/progress/{pid}", "_grades": grades,
                               "_polls": 0}
        return self._public(self._progress[pid])

    def _poll(self, pid: int) -> dict[str, Any]:
        progress = self._progress[pid]
        progress["_polls"] += 1
        if progress["workflow_state"] in ("queued", "running"):
            if progress["_polls"] < self.progress_polls:
                progress["workflow_state"], progress["completion"] = "running", 50
            elif self.fail_progress:
                progress["workflow_state"], progress["message"] = "failed", "a fake failure"
            else:
                for uid, score in progress["_grades"].items():
                    self.scores[(progress["context_id"], uid)] = score
                progress["workflow_state"], progress["completion"] = "completed", 100
        return self._public(progress)

    @staticmethod
    def _public(progress: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in progress.items() if not k.startswith("_")}


def canvas_user(uid: int, sis: str | None, *, login: str | None = None,
                email: str | None = None, name: str = "") -> dict[str, Any]:
    """A user as Canvas lists it."""
    return {"id": uid, "name": name or f"Student {uid}", "sortable_name": name or f"{uid}, Student",
            "sis_user_id": sis, "login_id": login or sis, "email": email}
