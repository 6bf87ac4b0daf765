"""The load benchmark's lean HTTP client (``benchmarks/lean_http.py``) against a real HTTP/1.1 server:
keep-alive reuse, bodies both ways, ``Connection: close``, and a chunked answer refused with an error."""

from __future__ import annotations

import asyncio
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from lean_http import LeanClient, LeanHTTPError  # noqa: E402

PEERS: set[int] = set()  # client ports seen: one per connection


class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self, body: bytes, *, close: bool = False, chunked: bool = False) -> None:
        PEERS.add(self.client_address[1])
        self.send_response(201 if self.command == "POST" else 200)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/base/chunked"):
            return self._answer(b"", chunked=True)
        self._answer(f'{{"path": "{self.path}", "auth": "{self.headers["Authorization"]}"}}'.encode(),
                     close=self.path.startswith("/base/close"))

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(body[::-1])


@pytest.fixture()
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    PEERS.clear()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/base/"
    httpd.shutdown()
    httpd.server_close()


def test_requests_reuse_one_connection_and_carry_bodies_both_ways(server):
    async def run():
        async with LeanClient(server, connections=1) as http:
            got = [await http.get("api/x", headers={"Authorization": "Bearer t"}, params={"a": "1 2"})
                   for _ in range(5)]
            posted = await http.post("api/up", content=b"abc" * 1000)
        return got, posted

    got, posted = asyncio.run(run())
    assert [r.status_code for r in got] == [200] * 5
    assert got[0].json() == {"path": "/base/api/x?a=1+2", "auth": "Bearer t"}
    assert (posted.status_code, posted.content) == (201, (b"abc" * 1000)[::-1])
    assert len(PEERS) == 1  # keep-alive: six requests, one connection


def test_connection_close_opens_a_new_one_and_chunked_is_refused(server):
    async def run():
        async with LeanClient(server, connections=2) as http:
            first = await http.get("close")
            second = await http.get("close")
            with pytest.raises(LeanHTTPError, match="chunked"):
                await http.get("chunked")
            return first.status_code, second.status_code, http.opened

    assert asyncio.run(run()) == (200, 200, 0)
    assert len(PEERS) == 3


def test_a_base_url_it_cannot_serve_is_refused():
    with pytest.raises(ValueError, match="http://host:port"):
        LeanClient("https://example.org/", connections=1)
