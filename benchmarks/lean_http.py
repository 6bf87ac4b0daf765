"""A lean HTTP/1.1 keep-alive client for load generation (``service_load.py``'s simulated pages).

The simulated browsers run on the grading machine itself, where every millisecond of their CPU is
taken from the workers that batch grading has to itself. httpx's asyncio client spends about 4 ms of
CPU per request here; this one writes the request and reads a ``Content-Length`` answer (what tornado
sends) on a pool of at most ``connections`` sockets, about a tenth of that. Not a general client: no
TLS, no redirects, no chunked answers (refused with an error), no cookies.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import Any


class LeanHTTPError(Exception):
    """The connection failed or the answer was not one this client reads."""


class LeanResponse:
    def __init__(self, status_code: int, content: bytes) -> None:
        self.status_code, self.content = status_code, content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class LeanClient:
    def __init__(self, base_url: str, *, connections: int, timeout_s: float = 120.0) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"base_url must be http://host:port/..., got {base_url!r}")
        self.host, self.port = parts.hostname, parts.port
        self.prefix = parts.path if parts.path.endswith("/") else parts.path + "/"
        self.limit, self.timeout_s = connections, timeout_s
        self.opened = 0
        self.idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
        self.all: list[asyncio.StreamWriter] = []

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.idle.empty() and self.opened < self.limit:
            self.opened += 1
            try:
                reader, writer = await asyncio.open_connection(self.host, self.port)
            except OSError as error:
                self.opened -= 1
                raise LeanHTTPError(f"connect: {error}") from error
            self.all.append(writer)
            return reader, writer
        return await self.idle.get()

    async def request(self, method: str, path: str, *, headers: dict[str, str] | None = None,
                      params: dict[str, str] | None = None, content: bytes = b"") -> LeanResponse:
        target = self.prefix + path + (f"?{urllib.parse.urlencode(params)}" if params else "")
        head = [f"{method} {target} HTTP/1.1", f"Host: {self.host}:{self.port}",
                f"Content-Length: {len(content)}"]
        head += [f"{name}: {value}" for name, value in (headers or {}).items()]
        reader, writer = await self._connection()
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + content)
            status, close, data = await asyncio.wait_for(self._answer(reader), self.timeout_s)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as error:
            self._drop(writer)
            raise LeanHTTPError(f"{method} {path}: {type(error).__name__}: {error}") from error
        if close:
            self._drop(writer)
        else:
            self.idle.put_nowait((reader, writer))
        return LeanResponse(status, data)

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[int, bool, bytes]:
        status = int((await reader.readline()).split()[1])
        length, close = 0, False
        while True:
            line = await reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.lower() == "close":
                close = True
            elif name == "transfer-encoding":
                raise ValueError(f"a {value} answer (this client reads Content-Length only)")
        return status, close, await reader.readexactly(length)

    def _drop(self, writer: asyncio.StreamWriter) -> None:
        self.opened -= 1
        writer.close()

    async def get(self, path: str, **kwargs: Any) -> LeanResponse:
        return await self.request("GET", path, **kwargs)

    async def post(self, path: str, **kwargs: Any) -> LeanResponse:
        return await self.request("POST", path, **kwargs)

    async def __aenter__(self) -> LeanClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for writer in self.all:
            writer.close()
