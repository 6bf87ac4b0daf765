"""Regenerate the golden results: every scenario graded by the real ``nbgrader autograde``.

    make parity-golden            # = PYTHONPATH=tests .venv/bin/python -m parity.regenerate
    PYTHONPATH=tests .venv/bin/python -m parity.regenerate grade force   # only these scenarios

Each course is built as the parity test builds it (``harness.build_course``) and graded step by step
(``harness.NbgraderGrader``); ``golden/<scenario>.json`` gets one snapshot per step, with the
scenario's digest and nbgrader's version. Courses go under a temporary directory, removed after.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from .harness import NbgraderGrader, build_course, courses, run_course, write_golden
from .scenarios import SCENARIOS


def regenerate(names: list[str] | None = None) -> list[Path]:
    wanted = [s for s in SCENARIOS if not names or s.name in names]
    unknown = set(names or ()) - {s.name for s in SCENARIOS}
    if unknown:
        raise SystemExit(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    written = []
    with tempfile.TemporaryDirectory(prefix="parity-golden-") as tmp:
        for course, group in courses(wanted).items():
            started = time.monotonic()
            grader = NbgraderGrader()
            results = run_course(build_course(Path(tmp) / course, group), group, grader)
            for s in group:
                written.append(write_golden(s, results[s.name]))
            print(f"{course}: {len(group)} scenario(s), {len(grader.log)} nbgrader run(s), "
                  f"{time.monotonic() - started:.0f} s", flush=True)
    return written


if __name__ == "__main__":
    for path in regenerate(sys.argv[1:] or None):
        print(path)
