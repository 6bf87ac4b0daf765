"""The signature table of ``autograder.reports.misconceptions``: ``python -m autograder.reports.misconception_table``.

Grades every wrong implementation of the catalogue (``catalogue/<assignment>.py``) in this
process, the whole source top to bottom as a kernel would (``samples.grade_in_process``), under each
of ``misconceptions.SEEDS``, and writes what each grade cell showed to
``catalogue/misconceptions.json`` with the digest of its inputs (``--check``: exit 1 when the
committed file was built from other inputs; it grades nothing).
Trusted code only (the catalogue is the instructor's); about 30 s for the six exercises. Kept apart
from ``autograder.reports.misconceptions`` so that the report never imports the sample machinery.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from autograder.authoring import samples
from autograder.course.source import ASSIGNMENTS, release_path, source_path
from autograder.reports.misconceptions import SEEDS, TABLE, human_name, signature_of, write_table

#: What the table is computed from besides each exercise's files: the hidden checks (the package's
#: ``autograder/hidden/``) and the code that grades in process and reads signatures (this module's
#: loop over them is left out: a change there is found by the full regrade of ``make test``).
CODE = ("autograder/authoring/samples.py", "autograder/reports/misconceptions.py")


def inputs_digest(assignments: Iterable[str], *, course_root: Path = Path("."),
                  seeds: Sequence[int] = SEEDS) -> str:
    """sha256 of what the table is built from: each exercise's catalogue, source and release, the hidden
    checks, the grading and signature code, torch's version and the seeds. ``--check`` compares it
    and regrades nothing (a full regrade: ``tests/test_misconceptions.py``, in ``make test``)."""
    code_root = Path(__file__).resolve().parents[2]  # where the package is (a checkout or site-packages)
    files = [code_root / name for name in CODE] + sorted((code_root / "autograder" / "hidden").glob("*.py"))
    for assignment in sorted(assignments):
        files += [course_root / samples.CATALOGUE_DIR / f"{assignment}.py",
                  source_path(assignment, course_root=course_root),
                  release_path(assignment, course_root=course_root)]
    digest = hashlib.sha256(f"torch {_version('torch')} seeds {list(seeds)}".encode())
    for path in files:
        digest.update(path.name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"(none)"))
    return digest.hexdigest()


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def build_table(assignments: Iterable[str], *, course_root: Path = Path("."),
                seeds: Sequence[int] = SEEDS) -> dict[str, Any]:
    """Grade every wrong catalogue entry in process under ``seeds``; the table as JSON data."""
    os.environ.setdefault("AUTOGRADER_ALLOW_CPU", "1")  # the GPU cells' CPU path, as the tests grade
    assignments = list(assignments)
    table: dict[str, Any] = {"seeds": list(seeds), "inputs": inputs_digest(assignments, course_root=course_root,
                                                                          seeds=seeds),
                             "assignments": {}}
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



def catalogued(root: Path) -> list[str]:
    """The assignments with a catalogue under ``root``."""
    return [a for a in ASSIGNMENTS if (root / samples.CATALOGUE_DIR / f"{a}.py").is_file()]


def is_current(root: Path) -> bool:
    """Whether the committed table was built from the inputs under ``root`` (by their digest: nothing
    is graded)."""
    path = root / TABLE
    committed = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    return bool(committed.get("inputs") == inputs_digest(catalogued(root), course_root=root))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m autograder.reports.misconception_table [--check]``: (re)write the table, or check it is current."""
    parser = argparse.ArgumentParser(prog="python -m autograder.reports.misconception_table", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--course-root", type=Path, default=Path("."))
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed table is stale")
    args = parser.parse_args(argv)
    root = args.course_root
    path = root / TABLE
    if args.check:
        current = is_current(root)
        print(f"{path}: {'current' if current else 'stale: run make misconceptions'}")
        return 0 if current else 1
    table = build_table(catalogued(root), course_root=root)
    write_table(table, path)
    print(f"{path}: {sum(len(rows) for rows in table['assignments'].values())} wrong implementations")
    return 0


if __name__ == "__main__":
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main())
