"""Committed notebooks carry no outputs, execution counts or per-cell timing metadata."""

from __future__ import annotations

import subprocess
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]


def committed_notebooks() -> list[Path]:
    """Every .ipynb tracked by git (or, outside a git checkout, every .ipynb in the source dirs)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--", "*.ipynb"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout
        paths = [ROOT / p for p in out.split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        paths = [p for d in ("chapters", "exercises") for p in (ROOT / d).rglob("*.ipynb")]
    return sorted(p for p in paths if p.exists())


def hygiene_problems(path: Path) -> list[str]:
    """What is wrong with one notebook, as readable strings (empty when clean)."""
    nb = nbformat.read(path, as_version=4)
    name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        if cell.get("outputs"):
            problems.append(f"{name} cell {i}: has {len(cell.outputs)} output(s)")
        if cell.get("execution_count") is not None:
            problems.append(f"{name} cell {i}: execution_count={cell.execution_count}")
        if "execution" in cell.get("metadata", {}):
            problems.append(f"{name} cell {i}: per-cell execution timestamps")
    return problems


def test_committed_notebooks_exist():
    assert committed_notebooks() or not (ROOT / ".git").exists(), "no notebook is tracked by git"


@pytest.mark.parametrize("path", committed_notebooks(), ids=lambda p: str(p.relative_to(ROOT)))
def test_notebook_has_no_outputs(path):
    assert hygiene_problems(path) == []


def test_hygiene_check_catches_outputs(tmp_path):
    """The check itself can fail: a notebook with an output and a count is reported."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("1 + 1", execution_count=3)
    cell.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "2"}, execution_count=3)]
    nb.cells.append(cell)
    bad = tmp_path / "outputs.ipynb"
    nbformat.write(nb, bad)
    problems = hygiene_problems(bad)
    assert any("output" in p for p in problems) and any("execution_count=3" in p for p in problems)
