"""The autograder's note on a graded submission (its *run record*): device, timings, why cells failed,
each code cell's outcome (``cell_outcomes``), and, for a notebook that did not complete, its sandbox's
log in a file beside the record (``write_sandbox_logs``).

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
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from autograder.sandbox.inside.protocol import Failure

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


def sandbox_log_path(final: Path, notebook: str) -> Path:
    """Where a failed notebook's sandbox log lies, beside the run record of ``final``."""
    return final.parent / RECORDS / f"{final.name}.{notebook}.sandbox.log"


def write_sandbox_logs(final: Path, logs: dict[str, str]) -> None:
    """Each graded notebook's sandbox log (notebook -> text; "" where it completed: an earlier run's
    log of it is removed, it no longer describes this grade)."""
    for notebook, text in logs.items():
        path = sandbox_log_path(final, notebook)
        if text:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text, encoding="utf-8")
        else:
            path.unlink(missing_ok=True)


LIMITS = frozenset({Failure.CELL_TIMEOUT, Failure.NOTEBOOK_TIMEOUT, Failure.MEMORY, "MemoryError"})


def cell_outcomes(cells: Sequence[Mapping[str, Any]], kinds: Mapping[int, str],
                  seconds: Mapping[int, float], not_run: Collection[str]) -> list[dict[str, Any]]:
    """Each code cell with code of a graded notebook, as it ended: ``status`` "ok", "error" (its
    ``error`` names it), "limit" (a time or memory limit fired: ``limit`` names it), "not run" (after
    the notebook stopped) or "not run by this machine" (a GPU check on a CPU machine); ``seconds`` it
    ran (None: it did not finish)."""
    found = []
    for index, cell in enumerate(cells):
        if cell.get("cell_type") != "code" or not str(cell.get("source", "")).strip():
            continue
        grade_id = ((cell.get("metadata") or {}).get("nbgrader") or {}).get("grade_id")
        errors = [o for o in cell.get("outputs") or () if o.get("output_type") == "error"]
        ename = str(errors[0].get("ename")) if errors else None
        status = ("ok" if ename is None else
                  "not run by this machine" if grade_id in not_run else
                  "not run" if ename == "NotExecuted" else
                  "limit" if ename in LIMITS else "error")
        found.append({"cell": grade_id or f"cell {index}", "index": index,
                      "kind": kinds.get(index, "student"), "status": status,
                      "seconds": seconds.get(index), "error": ename,
                      "limit": ename if status == "limit" else None})
    return found


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
