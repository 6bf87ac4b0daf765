"""The signature table of ``autograder.reports.misconceptions``: ``python -m autograder.reports.misconception_table``.

Grades every wrong implementation of the catalogue (``catalogue/<assignment>.py``) in this
process, the whole source top to bottom as a kernel would (``samples.grade_in_process``), under each
of ``misconceptions.SEEDS``, and writes what each grade cell showed to
``catalogue/misconceptions.json`` (``--check``: exit 1 when the committed file differs).
Trusted code only (the catalogue is the instructor's); about 30 s for the six exercises. Kept apart
from ``autograder.reports.misconceptions`` so that the report never imports the sample machinery.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from autograder.authoring import samples
from autograder.course.source import ASSIGNMENTS
from autograder.reports.misconceptions import SEEDS, TABLE, human_name, signature_of, write_table


def build_table(assignments: Iterable[str], *, course_root: Path = Path("."),
                seeds: Sequence[int] = SEEDS) -> dict[str, Any]:
    """Grade every wrong catalogue entry in process under ``seeds``; the table as JSON data."""
    os.environ.setdefault("AUTOGRADER_ALLOW_CPU", "1")  # the GPU cells' CPU path, as the tests grade
    table: dict[str, Any] = {"seeds": list(seeds), "assignments": {}}
    for assignment in assignments:
        wrong, _ = samples.load_catalogue(assignment, course_root=course_root)
        rows = []
        for entry in wrong:
            runs = [signature_of(samples.grade_in_process(assignment, entry["replace"], seed=seed,
                                                          course_root=course_root)) for seed in seeds]
            cells = {}
            for cell in sorted({c for run in runs for c in run}):
                seen = [run.get(cell) for run in runs]
                kinds = sorted({k for f in seen if f is not None for k in f.kinds})
                values = {f.value for f in seen if f is not None}
                cells[cell] = {"kinds": kinds,
                               "value": values.pop() if len(values) == 1 and None not in seen else None,
                               "always": None not in seen}
            rows.append({"name": entry["name"], "misconception": human_name(entry), "cells": cells})
        table["assignments"][assignment] = rows
    return table



def main(argv: Sequence[str] | None = None) -> int:
    """``python -m autograder.reports.misconception_table [--check]``: (re)write the table, or check it is current."""
    parser = argparse.ArgumentParser(prog="python -m autograder.reports.misconception_table", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--course-root", type=Path, default=Path("."))
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed table is stale")
    args = parser.parse_args(argv)
    root = args.course_root
    assignments = [a for a in ASSIGNMENTS if (root / samples.CATALOGUE_DIR / f"{a}.py").is_file()]
    table = build_table(assignments, course_root=root)
    path = root / TABLE
    if args.check:
        current = path.is_file() and json.loads(path.read_text(encoding="utf-8")) == table
        print(f"{path}: {'current' if current else 'stale: run make misconceptions'}")
        return 0 if current else 1
    write_table(table, path)
    print(f"{path}: {sum(len(rows) for rows in table['assignments'].values())} wrong implementations")
    return 0


if __name__ == "__main__":
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main())
