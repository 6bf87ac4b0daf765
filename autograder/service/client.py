"""``autograder submit NN_name.ipynb``: submit from a terminal through the service's JSON API.

The service's address comes from ``--url`` or ``AUTOGRADER_URL``; the credential from
``AUTOGRADER_TOKEN`` (a course token: ``Authorization: Bearer``) or, inside a JupyterHub server,
``JUPYTERHUB_API_TOKEN`` (``Authorization: token``). Waits for the feedback unless ``--no-wait``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from autograder.errors import AutograderError


class SubmitError(AutograderError):
    pass


def _headers() -> dict[str, str]:
    if os.environ.get("AUTOGRADER_TOKEN"):
        return {"Authorization": f"Bearer {os.environ['AUTOGRADER_TOKEN']}"}
    if os.environ.get("JUPYTERHUB_API_TOKEN"):
        return {"Authorization": f"token {os.environ['JUPYTERHUB_API_TOKEN']}"}
    raise SubmitError("no credential: set AUTOGRADER_TOKEN to your course token (or run this inside "
                      "the course's JupyterHub, which sets JUPYTERHUB_API_TOKEN)")


def submit(path: Path, *, url: str | None, wait: bool = True, timeout_s: float = 900.0,
           echo: Callable[[str], object] = print) -> dict[str, Any]:
    """Upload ``path``; return the submission as the API shows it (after grading when ``wait``)."""
    base = (url or os.environ.get("AUTOGRADER_URL") or "").rstrip("/") + "/"
    if base == "/":
        raise SubmitError("no service address: pass --url or set AUTOGRADER_URL")
    path = Path(path)
    if not path.is_file():
        raise SubmitError(f"{path}: no such file (expected the exercise notebook, NN_name.ipynb)")
    with httpx.Client(base_url=base, headers=_headers(), timeout=60.0) as client:
        reply = client.post("api/submissions", params={"filename": path.name},
                            content=path.read_bytes())
        body = _json(reply)
        if reply.status_code != 202:
            raise SubmitError(f"{path.name}: refused ({reply.status_code}): {body.get('error')}")
        echo(f"submitted {path.name} as #{body['id']} ({body['assignment']}); "
             f"feedback page: {base}submissions/{body['id']}")
        if not wait:
            return body
        deadline = time.monotonic() + timeout_s
        last = None
        while time.monotonic() < deadline:
            status = _json(client.get(f"api/submissions/{body['id']}"))
            if status.get("state") != last:
                echo(f"  {status.get('state')}")
                last = status.get("state")
            if status.get("state") in ("done", "failed", "error"):
                return status
            time.sleep(float(status.get("poll_after_s") or 3.0))  # when the service says, as the page
    raise SubmitError(f"#{body['id']} was not graded within {timeout_s:g} s; see its page later")


def _json(reply: httpx.Response) -> dict[str, Any]:
    try:
        body: dict[str, Any] = reply.json()
        return body
    except ValueError:
        raise SubmitError(f"the service answered {reply.status_code} without JSON; is the URL "
                          "the service's?") from None


def summary_lines(status: dict[str, Any]) -> list[str]:
    if status.get("state") == "failed":
        return [f"not graded: {status.get('reason')}"]
    if status.get("state") == "error":
        return [f"the grader failed, not counted against you: {status.get('reason')}"]
    lines = []
    if "score" in status:
        lines.append(f"score: {status['score']:g} / {status['max_score']:g}")
    for test in status.get("tests", []):
        mark = "passed" if test["passed"] else "FAILED"
        lines.append(f"  {mark:6} {test['name']} ({test['points']:g}/{test['max_points']:g})")
        if not test["passed"] and test.get("message"):
            lines += ["      " + line for line in test["message"].splitlines()[-6:]]
    return lines
