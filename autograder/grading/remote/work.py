"""Work units and their result files, for any backend that grades on other machines (trusted side).

Both sides import this module (it imports neither nbformat nor nbgrader). The instructor's process
turns each prepared submission into a ``SubmissionWork`` (``handover.work_item``):
each notebook's ``NotebookProgram`` (cells, kinds, per-cell time limit, environments), the companion
files' bytes, the device decision and ``memory_limit_gb``. Its key, ``assignment/student/<digest>``,
names the exact inputs and the grading code: a result computed for other inputs is never reused.

A machine that executed a work unit writes one result file per submission into a results folder
both sides share (``write_result``: atomic, the key percent-quoted as the file name)::

    {"key": ..., "host": ..., "task": "<backend's task id>", "device": "cpu",
     "started": <epoch>, "ready": <epoch: first sandbox ready>,
     "notebooks": {"<name>": <NotebookOutcome.to_json()>}}
    {"key": ..., "error": "<why nothing ran>"}            (a machine that cannot grade the unit)

``handover.hand_over`` turns one such file into the submission's outcomes (the pipeline records
them, the only gradebook writer) and deletes it.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from autograder.grading.model import NotebookProgram

RESULTS_DIR = "results"
RESULT_SUFFIX = ".result"
PASSED_ENV = ("AUTOGRADER_SEED",)  # the instructor's settings the remote checkers must see too


@dataclass(frozen=True)
class NotebookWork:
    """One notebook to execute: its name and program (where it runs and its limits are the machine's)."""

    name: str
    program: NotebookProgram


@dataclass(frozen=True)
class SubmissionWork:
    """One submission, everything a machine needs to execute it (picklable; no path of this one)."""

    key: str  # assignment/student/digest of everything below and of the grading code
    student: str
    assignment: str
    notebooks: tuple[NotebookWork, ...]
    files: tuple[tuple[str, bytes], ...]  # companion files (relative path, bytes)
    device: str  # "cpu" or "cuda": decided by the instructor's process, checked where it runs
    memory_limit_gb: float | None
    sandboxed: bool
    workers: int | None  # notebooks at once on that machine (None: its CPUs)
    environ: tuple[tuple[str, str], ...] = ()  # PASSED_ENV as the instructor's process has them


def result_path(results_dir: Path | str, key: str) -> Path:
    """Where the result of item ``key`` lives (the key, percent-quoted, is the file name)."""
    if not key:
        raise ValueError("an item key must be a non-empty string")
    return Path(results_dir) / f"{quote(key, safe='')}{RESULT_SUFFIX}"


def write_result(results_dir: Path | str, key: str, data: bytes | str) -> Path:
    """Write item ``key``'s result atomically (a temporary file in the same folder, then
    ``os.replace``): a reader sees the whole file or none, even if the writer is killed mid-write."""
    final = result_path(results_dir, key)
    payload = data.encode() if isinstance(data, str) else data
    fd, temporary = tempfile.mkstemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, final)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return final


