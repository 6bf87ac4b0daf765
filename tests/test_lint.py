"""The project's Python passes ruff with the settings in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINTED = ["autograder", "tests", "benchmarks", "solutions", "_ext", "catalogue"]


def test_ruff_is_clean():
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--output-format", "concise", *LINTED],
        cwd=ROOT, capture_output=True, text=True,
    )
    assert result.returncode == 0, f"ruff found problems:\n{result.stdout}{result.stderr}"
