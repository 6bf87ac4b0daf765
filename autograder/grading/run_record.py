"""The autograder's note on a graded submission (its *run record*): device, timings, why cells failed.

It is written in the staging folder with the autograded notebooks (so it changes with them, in the
same swap), then moved out of ``autograded/<student>/<assignment>/`` to
``autograded/<student>/.autograder/<assignment>.json``: nbgrader copies every file of the autograded
folder into the student's ``feedback/`` (``generate_feedback``), and a student must receive no file
nbgrader would not give them. nbgrader never looks into the dot-folder (its globs skip dot names).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

RUN_RECORD = "autograder.json"  # its name in the staging folder
RECORDS = ".autograder"  # the folder, per student, that holds the records out of nbgrader's way


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
