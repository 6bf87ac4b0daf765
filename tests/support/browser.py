"""Shared plumbing for the real-browser tests: headless Debian chromium driven by Playwright.

What lives here: finding chromium (fail in CI, skip elsewhere), serving a folder over local HTTP in a
thread, launching chromium with a fresh profile, and a watcher that records console errors, page
errors, failed requests and every attempt to reach a host other than the local server.

Used by tests/test_site_browser.py (the built site) and tests/test_lab_browser.py (JupyterLab).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO_ROOT / "test-artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def in_ci() -> bool:
    """True when the CI environment variable says so (CI=true, as set by .ci/run's caller)."""
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def unavailable(reason: str) -> None:
    """Fail in CI (a browser test must never be skipped there); skip with the reason elsewhere."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: browser tests are never skipped in CI)", pytrace=False)
    pytest.skip(reason)


def require_chromium() -> str:
    """The chromium executable and a working Playwright, or fail (CI) / skip (locally) saying why."""
    path = shutil.which(CHROMIUM) or (CHROMIUM if os.access(CHROMIUM, os.X_OK) else None)
    if path is None:
        unavailable(
            f"chromium not found at {CHROMIUM!r}: install Debian's package "
            "(`make system-deps`, i.e. apt-get install chromium) or set CHROMIUM=/path/to/chromium"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError as exc:
        unavailable(f"Playwright for Python is not installed ({exc}); run `make env`")
    return path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Static file handler that keeps the test log clean."""

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (stdlib signature)
        pass


@contextlib.contextmanager
def serve_directory(directory: Path) -> Iterator[str]:
    """Serve `directory` on a free local port from a background thread; yield its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="site-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def launch_chromium(playwright, user_data_dir: Path, *, viewport=(1280, 900)):
    """A persistent chromium context with a fresh profile in `user_data_dir` (headless, offline-safe)."""
    return playwright.chromium.launch_persistent_context(
        str(user_data_dir),
        executable_path=require_chromium(),
        headless=True,
        args=CHROMIUM_ARGS,
        viewport={"width": viewport[0], "height": viewport[1]},
    )


@dataclass
class PageWatch:
    """Everything that went wrong while a page was in use: console errors, uncaught exceptions,
    failed or erroring requests, and requests to hosts other than the local server (blocked, so a
    page that needs the internet fails the same way with or without a network)."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    external_requests: list[str] = field(default_factory=list)

    def clear(self) -> None:
        for bucket in (
            self.console_errors,
            self.page_errors,
            self.failed_requests,
            self.external_requests,
        ):
            bucket.clear()

    def problems(self) -> list[str]:
        """Human-readable lines, one per problem; empty when the page was clean."""
        return (
            [
                f"external request blocked (page needs the internet): {u}"
                for u in self.external_requests
            ]
            + [f"console error: {m}" for m in self.console_errors]
            + [f"uncaught JavaScript error: {m}" for m in self.page_errors]
            + [f"request failed: {m}" for m in self.failed_requests]
        )


def watch(page) -> PageWatch:
    """Attach a PageWatch to a Playwright page; requests leaving 127.0.0.1/localhost are aborted."""
    seen = PageWatch()

    def on_console(msg) -> None:
        if msg.type == "error" and "ERR_BLOCKED_BY_CLIENT" not in msg.text:  # reported as external
            loc = msg.location or {}
            where = f" ({loc.get('url', '')}:{loc.get('lineNumber', '')})" if loc.get("url") else ""
            seen.console_errors.append(f"{msg.text}{where}")

    def on_response(response) -> None:
        if response.status >= 400:
            seen.failed_requests.append(f"HTTP {response.status} {response.url}")

    def on_request_failed(request) -> None:
        if request.url not in seen.external_requests:
            seen.failed_requests.append(f"{request.failure} {request.url}")

    def route(route_) -> None:
        url = route_.request.url
        host = urlsplit(url).hostname
        if url.startswith(("data:", "blob:", "about:")) or host in LOCAL_HOSTS:
            route_.continue_()
        else:
            seen.external_requests.append(url)
            route_.abort("blockedbyclient")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: seen.page_errors.append(str(exc)))
    page.on("response", on_response)
    page.on("requestfailed", on_request_failed)
    page.route("**/*", route)
    return seen


def screenshot(page, relative: str, *, full_page: bool = True) -> Path:
    """Save a PNG under test-artifacts/screenshots/<relative>.png and return its path."""
    path = SCREENSHOTS / f"{relative}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=full_page)
    return path


# Sphinx's search page appends each result only after fetching that page's text for its summary, and
# writes "found N" once the last one is queued: the list is whole when it holds N items.
_SEARCH_FINISHED = """() => {
  const summary = document.querySelector('#search-results p.search-summary');
  const count = summary && summary.textContent.match(/\\d+/);
  return count && document.querySelectorAll('#search-results ul.search li').length >= Number(count[0]);
}"""


def search_result_links(page, url: str, *, timeout_ms: int = 30_000) -> list[str]:
    """Open a search page at `url` and return the address of every result, once all are shown."""
    page.goto(url)
    page.wait_for_function(_SEARCH_FINISHED, timeout=timeout_ms)
    return page.eval_on_selector_all("#search-results ul.search li a", "as => as.map(a => a.href)")
