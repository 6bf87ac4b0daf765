"""The autograder's note on a graded submission (its *run record*): device, timings, why cells failed.

It is written in the staging folder with the autograded notebooks (so it changes with them, in the
same swap), then moved out of ``autograded/<student>/<assignment>/`` to
``autograded/<student>/.autograder/<assignment>.json``: nbgrader copies every file of the autograded
folder into the student's ``feedback/`` (``generate_feedback``), and a student must receive no file
nbgrader would not give them. nbgrader never looks into the dot-folder (its globs skip dot names).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

RUN_RECORD = "autograder.json"  # its name in the staging folder
RECORDS = ".autograder"  # the folder, per student, that holds the records out of nbgrader's way
# the record's key for the content digest of each submitted notebook that was graded: ``plan`` regrades
# a submission whose submitted notebooks no longer match it (a resubmission), without --force
DIGESTS = "submitted_sha256"


def run_record_path(final: Path) -> Path:
    """Where the run record of ``autograded/<student>/<assignment>`` (``final``) lives."""
    return final.parent / RECORDS / f"{final.name}.json"


def move_record_out(final: Path) -> None:
    """Move a run record left in the autograded folder (a fresh swap, or a run killed right after
    one) to its place beside it."""
    inside = final / RUN_RECORD
    if inside.is_file() and not inside.is_symlink():
        target = run_record_path(final)
        target.parent.mkdir(exist_ok=True)
        os.replace(inside, target)


def read_record(final: Path) -> dict[str, Any] | None:
    path = run_record_path(final)
    record: dict[str, Any] | None = json.loads(path.read_text()) if path.is_file() else None
    return record


def notebook_digests(submitted: Path) -> dict[str, str]:
    """notebook name -> SHA-256 of ``submitted/<student>/<assignment>/<name>.ipynb`` (regular files
    only, read without following a link)."""
    digests: dict[str, str] = {}
    if not submitted.is_dir():
        return digests
    for path in sorted(submitted.glob("*.ipynb")):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue  # a link or unreadable: not a notebook grading reads either
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue
            digest = hashlib.sha256()
            while chunk := handle.read(2**20):
                digest.update(chunk)
        digests[path.stem] = digest.hexdigest()
    return digests


def graded_digests(final: Path) -> dict[str, str] | None:
    """The digests recorded when ``final`` was graded (None: no record, or one written before digests
    were kept, or by nbgrader itself: then only nbgrader's timestamp rule applies)."""
    try:
        record = read_record(final)
    except (OSError, ValueError):
        return None
    digests = record.get(DIGESTS) if isinstance(record, dict) else None
    if not isinstance(digests, dict):
        return None
    return {str(k): str(v) for k, v in digests.items()}
