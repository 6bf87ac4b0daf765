"""The framing of the values-only channel between the trusted checker and the sandboxed student process.

Both sides import this file: the checker as ``autograder.sandbox.inside.wire``, the sandbox as a
top-level module (only this folder is visible inside it). It needs the standard library only.

A message is a JSON header plus raw byte blobs (the safetensors idea: metadata as JSON, data as bytes;
nothing is ever unpickled or evaluated). It travels over a ``SOCK_SEQPACKET`` socket as packets that
start with one tag byte, ``H`` (the JSON header) or ``B`` (a piece of a blob), so a half-written message
from a process that died cannot be mistaken for the next one. What a value becomes as a tree and
blobs — which values cross by value, which as handles — is ``codec.py``; the errors both share are
here.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any

HEADER, BLOB = b"H", b"B"

PACKET = 64 * 1024  # payload bytes per packet (well under the default socket buffer)
MAX_MESSAGE = 512 * 2**20  # a message larger than this is refused (a flood, not an answer)
MAX_HEADER = 32 * 2**20
POLL_GRACE_S = 1.0  # after a poll found a header, how long the rest of its message may take


class WireError(Exception):
    """A message that breaks the protocol (too big, malformed, wrong type of packet)."""


class ChannelClosed(WireError):
    """The other end is gone."""


class NotPlainData(WireError):
    """A value that must cross by value is not plain data."""


# --------------------------------------------------------------------------- framing


def send(sock: socket.socket, header: Mapping[str, Any], blobs: Sequence[bytes] = ()) -> None:
    """Send one message: the JSON header, then each blob cut into packets."""
    head = dict(header)
    head["blobs"] = [len(b) for b in blobs]
    data = json.dumps(head, separators=(",", ":"), allow_nan=False).encode()
    if len(data) > MAX_HEADER or sum(head["blobs"]) > MAX_MESSAGE:
        raise WireError(f"message too large ({len(data) + sum(head['blobs'])} bytes)")
    try:
        sock.sendall(HEADER + data) if len(data) < PACKET else _send_big_header(sock, data)
        for blob in blobs:
            view = memoryview(blob)
            for start in range(0, len(view), PACKET):
                sock.sendall(BLOB + bytes(view[start:start + PACKET]))
    except (BrokenPipeError, ConnectionResetError, OSError) as error:
        raise ChannelClosed(f"channel closed while sending ({error})") from None


def _send_big_header(sock: socket.socket, data: bytes) -> None:
    # a long header goes as "H" + its length, then blob packets holding the JSON text
    sock.sendall(HEADER + json.dumps({"long_header": len(data)}).encode())
    for start in range(0, len(data), PACKET):
        sock.sendall(BLOB + data[start:start + PACKET])


def recv(sock: socket.socket, timeout: float | None = None) -> tuple[dict, list[bytes]]:
    """Receive one message. Stray blob packets before a header (a dead writer's leftovers) are dropped.
    Raises ``TimeoutError`` after ``timeout`` seconds without a complete message: the deadline is
    the whole message's, so a writer that drips packets cannot hold the reader."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            packet = _recv_packet(sock, deadline)
            if packet[:1] == HEADER:
                break
        if timeout is not None and timeout <= 0:  # a poll: the rest of a started message may follow
            deadline = time.monotonic() + POLL_GRACE_S
        header = _load_header(sock, packet[1:], deadline)
        sizes = header.get("blobs", [])
        if not isinstance(sizes, list) or any(type(s) is not int or s < 0 for s in sizes) \
                or sum(sizes) > MAX_MESSAGE:
            raise WireError("malformed blob list")
        blobs = [_read_exact(sock, size, deadline) for size in sizes]
        return header, blobs
    finally:
        sock.settimeout(None)


def _recv_packet(sock: socket.socket, deadline: float | None) -> bytes:
    if deadline is not None:
        remaining = deadline - time.monotonic()
        if remaining <= 0 and sock.gettimeout() == 0.0:
            pass  # a poll (timeout 0): one non-blocking try, BlockingIOError when nothing is there
        elif remaining <= 0:
            raise TimeoutError("no complete message before the deadline")
        else:
            sock.settimeout(remaining)
    else:
        sock.settimeout(None)
    try:
        packet = sock.recv(PACKET + 1)
    except (TimeoutError, BlockingIOError):
        raise
    except (ConnectionResetError, OSError) as error:
        raise ChannelClosed(f"channel closed ({error})") from None
    if not packet:
        raise ChannelClosed("channel closed")
    return packet


def _load_header(sock: socket.socket, data: bytes, deadline: float | None) -> dict:
    try:
        header = json.loads(data)
    except (ValueError, RecursionError):  # RecursionError: a nesting bomb
        raise WireError("header is not JSON (or nested too deeply)") from None
    if not isinstance(header, dict):
        raise WireError("header is not an object")
    if "long_header" in header:
        size = header["long_header"]
        if not isinstance(size, int) or not 0 < size <= MAX_HEADER:
            raise WireError("bad long header")
        return _load_header(sock, _read_exact(sock, size, deadline), deadline)
    return header


def _read_exact(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    parts, got = [], 0
    while got < size:
        packet = _recv_packet(sock, deadline)
        if packet[:1] != BLOB:
            raise WireError("a new message started inside a blob")
        parts.append(packet[1:])
        got += len(packet) - 1
    data = b"".join(parts)
    if len(data) != size:
        raise WireError("blob longer than announced")
    return data
