"""The feedback service on hostile HTTP input (issue 46, class 10): no malformed request gets a 5xx,
each a 4xx whose message says what was expected, and the server's log holds no traceback.

A held-out client found a deeply nested JSON body, a multipart body without a boundary and a NUL in
an uploaded file's name each answered 500, with tracebacks in the log. This battery is this file's
own: every place the web process parses what a client sends (the body as JSON, multipart forms and
their file names, query and form arguments, path ids, headers, methods, lengths). The real web
application runs in a thread on SQLite, as in tests/test_service_intake.py; some requests go over a
raw socket, since an HTTP client will not send them."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import socket
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from service_course import make_course, web_app

from autograder.course.nbgrader import load_course
from autograder.service.settings import ServiceSettings
from autograder.service.store import Store

T0 = datetime(2026, 11, 2, 12, 0, 0)
NB = "01_strides.ipynb"


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return make_course(tmp_path_factory.mktemp("service-hostile") / "course",
                       students=("alice", "bob"))


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def app(course, tmp_path_factory):
    """The web application on a free port, clock frozen at T0; yields (url, store, log records)."""
    settings = ServiceSettings.of(load_course(course))
    settings = dataclasses.replace(settings, instructors=["prof"], _cache=None)
    store = Store(f"sqlite:///{tmp_path_factory.mktemp('hostile-db') / 'service.db'}")
    records = _Records()
    root = logging.getLogger()
    root.addHandler(records)
    try:
        with web_app(settings, store, lambda: T0, max_header_size=64 * 1024) as url:
            yield url, store, records
    finally:
        root.removeHandler(records)


@pytest.fixture(scope="module")
def tokens(app) -> dict[str, str]:
    _, store, _ = app
    return {"alice": store.issue_token("alice"), "prof": store.issue_token("prof", instructor=True)}


def multipart(filename: str, body: bytes, boundary: str = "XyZ") -> tuple[bytes, str]:
    head = (f'--{boundary}\r\nContent-Disposition: form-data; name="notebook"; filename="{filename}"'
            f"\r\nContent-Type: application/octet-stream\r\n\r\n").encode("utf-8", "surrogateescape")
    return head + body + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


DEEP_ARRAY = b"[" * 100_000
DEEP_OBJECT = b'{"a":' * 100_000
# deep enough for the JSON parser, not for a validator walking it
DEEP_INSIDE = (b'{"cells": [], "metadata": {"x": ' + b"[" * 900 + b"]" * 900
               + b'}, "nbformat": 4, "nbformat_minor": 5}')


def _api_cases() -> list[tuple[str, dict]]:
    """(name, request) over httpx: method, path, params, content, headers, who."""
    cases: list[tuple[str, dict]] = [
        ("nested JSON array 100k deep", dict(params={"filename": NB}, content=DEEP_ARRAY)),
        ("nested JSON object 100k deep", dict(params={"filename": NB}, content=DEEP_OBJECT)),
        ("JSON 900 deep inside a notebook", dict(params={"filename": NB}, content=DEEP_INSIDE)),
        ("nested JSON, renamed file", dict(params={"filename": "Copy of x.ipynb"}, content=DEEP_ARRAY)),
        ("non-UTF-8 body", dict(params={"filename": NB}, content=b"\xff\xfe\xfa{\x00\x80")),
        ("UTF-16 body", dict(params={"filename": NB}, content='{"cells": 1}'.encode("utf-16"))),
        ("a 10,000-digit number", dict(params={"filename": NB}, content=b"9" * 10_000)),
        ("empty body", dict(params={"filename": NB}, content=b"")),
        ("no file name", dict(content=b"{}")),
        ("NUL in the query's file name", dict(params={"filename": "01_strides\x00.ipynb"}, content=b"{}")),
        ("invalid UTF-8 in the query", dict(path="api/submissions?filename=%ff%fe.ipynb", content=b"{}")),
        ("a 10k-character file name", dict(params={"filename": "a" * 10_000 + ".ipynb"}, content=b"{}")),
        ("unknown assignment", dict(params={"filename": NB, "assignment": "../../etc"}, content=b"{}")),
        ("multipart without a boundary", dict(content=b"--x\r\n\r\njunk",
                                              headers={"Content-Type": "multipart/form-data"})),
        ("multipart, empty boundary", dict(content=b"junk",
                                           headers={"Content-Type": "multipart/form-data; boundary="})),
        ("multipart, body not in its boundary", dict(content=b"no parts at all",
                                                     headers={"Content-Type": "multipart/form-data; boundary=q"})),
        ("multipart, part without headers end", dict(content=b"--q\r\nContent-Disposition: form-data",
                                                     headers={"Content-Type": "multipart/form-data; boundary=q"})),
        ("form-urlencoded junk", dict(content=b"%%%&&&=\xff\xfe=",
                                      headers={"Content-Type": "application/x-www-form-urlencoded"})),
        ("wrong content type", dict(params={"filename": NB}, content=b"<html>",
                                    headers={"Content-Type": "text/html; charset=klingon"})),
        ("chunked nested JSON", dict(params={"filename": NB},
                                     content=iter([DEEP_ARRAY[:50_000], DEEP_ARRAY[50_000:]]))),
    ]
    for label, filename in (("NUL", "01_strides\x00.ipynb"), ("NUL first", "\x00"),
                            ("control characters", "\x1b[31m01_strides\x07.ipynb"),
                            ("path traversal", "../../../etc/01_strides.ipynb"),
                            ("a Windows path", "C:\\Users\\a\\..\\01_strides.ipynb"),
                            ("only a separator", "/"), ("a newline", "01_strides\r\n.ipynb"),
                            ("lone surrogate", "01_strides\udcff.ipynb")):
        body, kind = multipart(filename, DEEP_ARRAY)
        cases.append((f"multipart file name with {label}", dict(content=body,
                                                                 headers={"Content-Type": kind})))
    body, kind = multipart(NB, b"\xff\xfe not JSON")
    cases.append(("multipart non-UTF-8 notebook", dict(content=body, headers={"Content-Type": kind})))
    # the upload form (IndexPage), the same through tornado's own body parsing
    for label, filename in (("NUL", "01_strides\x00.ipynb"), ("path traversal", "../../01_strides.ipynb")):
        body, kind = multipart(filename, DEEP_OBJECT)
        cases.append((f"upload form: file name with {label}", dict(path="", content=body,
                                                                    headers={"Content-Type": kind})))
    cases.append(("upload form: multipart without a boundary",
                  dict(path="", content=b"junk", headers={"Content-Type": "multipart/form-data"})))
    cases += [
        ("GET a path-traversal id", dict(method="GET", path="api/submissions/..%2F..%2Fetc%2Fpasswd")),
        ("GET an absurd id", dict(method="GET", path="api/submissions/" + "9" * 40)),
        ("GET a NUL policy", dict(method="GET", path="api/assignments/%00/policy")),
        ("GET a traversal policy", dict(method="GET", path="api/assignments/..%2F..%2Fetc/policy")),
        ("GET a page with a non-ASCII-digit id", dict(method="GET", path="submissions/%C2%B2")),
        ("GET history for a NUL student", dict(method="GET", path="api/submissions",
                                               params={"student": "\x00", "assignment": "\x00"},
                                               who="prof")),
        ("GET with a garbage language", dict(method="GET", path="", params={"lang": "\x00zz"},
                                             headers={"Accept-Language": "en;q=abc, *;q=1e999, "
                                                      "zz-ZZZZZZZZZ;q=-1, ;;;q=,,," + "x" * 4000})),
        ("GET static with a NUL", dict(method="GET", path="static/%00")),
        ("GET static traversal", dict(method="GET", path="static/..%2F..%2F..%2Fetc%2Fpasswd")),
        ("requeue a superscript id", dict(path="instructor/requeue", data={"id": "\u00b2"}, who="prof")),
        ("requeue an absurd id", dict(path="instructor/requeue", data={"id": "9" * 400}, who="prof")),
        ("login with a NUL token", dict(path="login", data={"token": "\x00" * 100}, who=None)),
        ("a forged cookie", dict(method="GET", path="api/queue", who=None,
                                 headers={"Cookie": "autograder-session=2|1:0|10:x|y; _xsrf=\x01"})),
        ("PUT", dict(method="PUT", content=b"{}")), ("DELETE", dict(method="DELETE")),
        ("PATCH a submission", dict(method="PATCH", path="api/submissions/1", content=b"{}")),
    ]
    return cases


API_CASES = _api_cases()


def _send(url: str, tokens: dict[str, str], request: dict) -> httpx.Response:
    request = dict(request)
    who = request.pop("who", "alice")
    headers = {"Authorization": f"Bearer {tokens[who]}"} if who else {}
    headers.update(request.pop("headers", {}))
    method = request.pop("method", "POST")
    path = request.pop("path", "api/submissions")
    with httpx.Client(timeout=60) as client:
        return client.request(method, url + path, headers=headers, **request)


def assert_no_traceback(records: list[logging.LogRecord], since: int, what: str) -> None:
    bad = [r for r in records[since:] if r.exc_info or "Traceback" in r.getMessage()
           or r.levelno >= logging.ERROR]
    assert not bad, f"{what}: the log holds {[(r.name, r.getMessage()[:200]) for r in bad]}"


@pytest.mark.parametrize("name,request_", API_CASES, ids=[name for name, _ in API_CASES])
def test_a_malformed_request_gets_a_4xx_that_says_what_was_expected(app, tokens, name, request_):
    url, _, records = app
    since = len(records.records)
    reply = _send(url, tokens, request_)
    assert 400 <= reply.status_code < 500 or reply.status_code in (200, 303), \
        (name, reply.status_code, reply.text[-500:])
    if reply.status_code >= 400 and reply.headers.get("Content-Type", "").startswith("application/json"):
        assert reply.json()["error"], name
    assert_no_traceback(records.records, since, name)


RAW_CASES = [
    ("a 100 KiB header", b"GET /api/queue HTTP/1.1\r\nHost: x\r\nX-Junk: " + b"a" * 100_000 + b"\r\n\r\n"),
    ("an unknown method", b"FROB /api/queue HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("a negative Content-Length", b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"),
    ("an absurd Content-Length", b"POST /api/submissions?filename=01_strides.ipynb HTTP/1.1\r\nHost: x\r\n"
                                 b"Authorization: Bearer TOKEN\r\nContent-Length: " + b"9" * 30 + b"\r\n\r\n"),
    ("a non-ASCII digit Content-Length", b"POST /api/submissions HTTP/1.1\r\nHost: x\r\n"
                                         b"Authorization: Bearer TOKEN\r\nContent-Length: \xb2\r\n\r\n"),
    ("two Content-Lengths", b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer TOKEN"
                            b"\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"),
    ("a bad chunk size", b"POST /api/submissions?filename=01_strides.ipynb HTTP/1.1\r\nHost: x\r\n"
                         b"Authorization: Bearer TOKEN\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
    ("a token of control bytes", b"GET /api/queue HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \x7f\xff\x01"
                                 b"\r\n\r\n"),
    ("a cookie of control bytes", b"GET / HTTP/1.1\r\nHost: x\r\nCookie: autograder-session=\xff\x01|2|"
                                  b"\r\nAccept-Language: \xff\xfe;q=\x00\r\n\r\n"),
    ("a header without a colon", b"GET /api/queue HTTP/1.1\r\nHost: x\r\nnonsense\r\n\r\n"),
    ("a NUL in the path", b"GET /api/submissions/\x00 HTTP/1.1\r\nHost: x\r\n\r\n"),
    ("a non-UTF-8 path", b"GET /api/assignments/\xff\xfe/policy HTTP/1.1\r\nHost: x\r\n"
                         b"Authorization: Bearer TOKEN\r\n\r\n"),
    ("not HTTP at all", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64 + b"\r\n\r\n"),
]


@pytest.mark.parametrize("name,raw", RAW_CASES, ids=[name for name, _ in RAW_CASES])
def test_a_request_no_client_would_send_gets_a_4xx_or_is_closed(app, tokens, name, raw):
    url, _, records = app
    since = len(records.records)
    port = int(url.rsplit(":", 1)[1].rstrip("/"))
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(raw.replace(b"TOKEN", tokens["alice"].encode()))
        with contextlib.suppress(ConnectionResetError, TimeoutError, socket.timeout):
            connection.shutdown(socket.SHUT_WR)
            while chunk := connection.recv(65536):
                data += chunk
    if data:  # tornado may close a connection it cannot read: no answer, never a 5xx
        status = int(data.split(b" ", 2)[1])
        assert 400 <= status < 500, (name, data[:300])
    assert_no_traceback(records.records, since, name)
