"""Accepted notebooks into nbgrader's ``submitted/<student>/<assignment>/``, as an LMS collect would.

The folder holds the notebook and ``timestamp.txt`` (nbgrader's format, the time the service received
it), so the instructor's ``autograder grade``, late penalties and export work unchanged. It is replaced
whole: the new folder is written beside it and renamed into place, so grading never reads half of one.
"""

from __future__ import annotations

import secrets
import shutil
from datetime import datetime
from pathlib import Path

from autograder.course.nbgrader import Course


def nbgrader_timestamp(when: datetime) -> str:
    """``when`` (naive UTC) as nbgrader writes ``timestamp.txt``."""
    return when.strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"


def land(course: Course, *, student: str, assignment: str, notebook: str, content: bytes,
         received_at: datetime) -> Path:
    """Replace ``submitted/<student>/<assignment>/`` with this one notebook; its path."""
    dest = course.step_dir("submitted", student, assignment)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tag = secrets.token_hex(4)
    incoming = dest.parent / f".{assignment}.incoming-{tag}"
    incoming.mkdir()
    (incoming / notebook).write_bytes(content)
    (incoming / "timestamp.txt").write_text(nbgrader_timestamp(received_at))
    old = dest.parent / f".{assignment}.old-{tag}"
    if dest.is_symlink() or dest.is_file():
        dest.unlink()
    elif dest.exists():
        dest.rename(old)
    incoming.rename(dest)
    shutil.rmtree(old, ignore_errors=True)
    return dest / notebook
