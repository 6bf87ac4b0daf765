"""The HTTP under canvasapi: every request gets a timeout, and a throttled or failed one is sent again.

Canvas throttles with 429, or with a 403 whose body says "Rate Limit Exceeded"; either means wait
(``Retry-After`` when given, otherwise exponential back-off) and send the same request again. A 5xx
or a dropped connection is retried the same bounded number of times. Re-sending a grade write is
safe: the same grade gives the same result. canvasapi then sees only the last response. A host name that
does not resolve is not retried (a typo in the URL does not get better by waiting); ``unreachable``
says why a request never reached Canvas, in one line.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import HTTPError as Urllib3Error
from urllib3.exceptions import MaxRetryError, NameResolutionError

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
                if last or does_not_resolve(error):
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


def _causes(error: BaseException) -> list[BaseException]:
    """``error`` and what it wraps (requests' first argument, urllib3's ``reason``, ``__cause__``)."""
    chain: list[BaseException] = []
    todo: list[Any] = [error]
    while todo:
        item = todo.pop(0)
        if not isinstance(item, BaseException) or item in chain or len(chain) > 8:
            continue
        chain.append(item)
        todo += [*(a for a in item.args[:1] if isinstance(a, BaseException)),
                 getattr(item, "reason", None), item.__cause__, item.__context__]
    return chain


def does_not_resolve(error: BaseException) -> bool:
    """Whether ``error`` is a host name that does not resolve (DNS)."""
    return any(isinstance(cause, NameResolutionError) for cause in _causes(error))


def unreachable(error: BaseException) -> str:
    """Why a request never reached the server, in one line (urllib3's innermost reason, without its
    connection-pool prefix)."""
    inner = [c for c in _causes(error)
             if isinstance(c, Urllib3Error) and not isinstance(c, MaxRetryError)]
    text = str(inner[-1] if inner else error)
    text = text.split("): ", 1)[1] if "): " in text else text
    return " ".join(text.split())[:300] or type(error).__name__
