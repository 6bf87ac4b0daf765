"""The HTTP under canvasapi: every request gets a timeout, and a throttled or failed one is sent again.

Canvas throttles with 429, or with a 403 whose body says "Rate Limit Exceeded"; either means wait
(``Retry-After`` when given, otherwise exponential back-off) and send the same request again. A 5xx
or a dropped connection is retried the same bounded number of times. Re-sending a grade write is
safe: the same grade gives the same result. canvasapi then sees only the last response.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from typing import Any

import requests
from requests.adapters import HTTPAdapter

TRANSIENT = frozenset({500, 502, 503, 504})
MAX_WAIT_S = 60.0


def throttled(response: requests.Response) -> bool:
    """Canvas's rate limit, in either of its two forms."""
    return response.status_code == 429 or (
        response.status_code == 403 and b"rate limit exceeded" in (response.content or b"").lower())


def retry_after(response: requests.Response) -> float | None:
    """Seconds ``Retry-After`` asks for (a number or an HTTP date), or None."""
    value = response.headers.get("Retry-After", "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):  # neither a number nor a date: back off as without one
        return None
    return max(0.0, when.timestamp() - time.time())


class PatientAdapter(HTTPAdapter):
    """An ``HTTPAdapter`` that waits out throttling and retries transient failures."""

    def __init__(self, *, retries: int, timeout_s: float, backoff_s: float = 0.5,
                 sleep: Callable[[float], None] = time.sleep,
                 on_retry: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.retries, self.timeout_s, self.backoff_s = retries, timeout_s, backoff_s
        self.sleep, self.on_retry = sleep, on_retry or (lambda line: None)

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        kwargs["timeout"] = kwargs.get("timeout") or self.timeout_s
        what = f"{request.method} {(request.path_url or '').split('?')[0]}"
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = super().send(request, **kwargs)
            except (requests.ConnectionError, requests.Timeout) as error:
                if last:
                    raise
                wait, why = self._backoff(attempt), f"{type(error).__name__}"
            else:
                if last or not (throttled(response) or response.status_code in TRANSIENT):
                    return response
                asked = retry_after(response)
                wait = min(MAX_WAIT_S, asked) if asked is not None else self._backoff(attempt)
                why = "throttled" if throttled(response) else f"HTTP {response.status_code}"
                response.close()
            self.on_retry(f"{what}: {why}, sent again after {wait:.1f} s "
                          f"(retry {attempt + 1} of {self.retries})")
            self.sleep(wait)
        raise AssertionError("unreachable")  # the last attempt returns or raises

    def _backoff(self, attempt: int) -> float:
        return float(min(MAX_WAIT_S, self.backoff_s * 2 ** attempt))


def make_patient(session: requests.Session, adapter: PatientAdapter) -> None:
    """Route every request of ``session`` through ``adapter``."""
    session.mount("https://", adapter)
    session.mount("http://", adapter)
