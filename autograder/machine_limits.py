"""Checks the grading machine could not run: one vocabulary for every step after grading.

A GPU-only hidden check graded where there is no CUDA device (and ``--allow-cpu`` was not given) raises
``NeedsGPU`` (``autograder/hidden/_gpu.py``); its grade cell scores 0, but that 0 says nothing about the
student. Every reader of a graded notebook (summary, run record, report, feedback, similarity, lms) asks
this module which cells were *not run* instead of spelling the exception's name again. Torch-free.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

NOT_RUN_ERROR = "NeedsGPU"  # the exception's name in a grade cell's error output
NOT_RUN_REASON = "not run: no GPU"  # how staff pages and tables say it


def is_not_run_output(output: Mapping[str, Any]) -> bool:
    """True for a cell output that is the machine's ``NeedsGPU`` error."""
    return output.get("output_type") == "error" and output.get("ename") == NOT_RUN_ERROR


def not_run_cells(cells: Iterable[Mapping[str, Any]]) -> list[str]:
    """The grade ids of the grade cells among ``cells`` (a graded notebook's) that the machine did not run."""
    found = []
    for cell in cells:
        nbgrader = (cell.get("metadata") or {}).get("nbgrader") or {}
        if not nbgrader.get("grade"):
            continue
        if any(is_not_run_output(o) for o in cell.get("outputs") or ()):
            found.append(str(nbgrader.get("grade_id")))
    return found


def is_not_run_message(message: str) -> bool:
    """True for a failure message (``"NeedsGPU: ..."``) that names the machine, not the student."""
    return message.lstrip().startswith(NOT_RUN_ERROR)


def not_run_in_notebooks(paths: Iterable[Path]) -> list[str]:
    """The grade ids not run in the graded notebook files ``paths`` (an unreadable file adds none)."""
    found: list[str] = []
    for path in paths:
        try:
            nb = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found += [cell for cell in not_run_cells(nb.get("cells") or ()) if cell not in found]
    return found


def not_run_summary(cells_by_submission: Mapping[Any, Iterable[str]]) -> str | None:
    """``"N grade cells in K submissions were not run: no GPU"`` (None when every cell ran)."""
    counts = [len(list(cells)) for cells in cells_by_submission.values()]
    cells, submissions = sum(counts), sum(1 for n in counts if n)
    if not cells:
        return None
    return (f"{cells} grade cell{'s' if cells != 1 else ''} in {submissions} "
            f"submission{'s' if submissions != 1 else ''} {'were' if cells != 1 else 'was'} "
            f"{NOT_RUN_REASON}")
