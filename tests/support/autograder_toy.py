"""A tiny nbgrader course for the autograder's robustness tests (seconds to release, quick to grade).

``make_toy_course(root)`` writes nbgrader_config.py (the project's, so the layout is the real one) and a
source notebook ``solutions/toy/toy.ipynb`` with two solution cells and four grade cells (2 + 3 + 1 + 1
points: ``test_torch_sum`` imports torch, ``test_total_gpu`` is a GPU-only check), then runs ``nbgrader generate_assignment toy``.
``submit(root, student, square=..., total=...)`` writes a submission whose solution cells hold the given
code (the reference by default).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder.authoring.release import nbgrader_environment

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = "toy"
SQUARE = "def square(x):\n    return x * x\n"
TOTAL = "def total(values):\n    return sum(values)\n"
POINTS = {"test_square": 2.0, "test_total": 3.0, "test_torch_sum": 1.0, "test_total_gpu": 1.0}
# code that exists only in the hidden-test regions (feedback must never show it)
HIDDEN_CODE = ("square(-4)", "total([])", "torch.arange(4)", "gpu_device")
# a GPU-only check following the GPU rule (README: "The GPU rule"), through the real autograder.hidden._gpu
GPU_CHECK = (
    "from autograder.hidden._gpu import gpu_device\n"
    "assert total(torch.ones(3, device=gpu_device('toy total')).tolist()) == 3\n"
)


def _meta(grade_id: str, *, grade=False, solution=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def _solution(grade_id: str, code: str) -> nbformat.NotebookNode:
    cell = new_code_cell("### BEGIN SOLUTION\n" + code + "### END SOLUTION\n",
                         metadata=_meta(grade_id, solution=True))
    cell.id = grade_id
    return cell


def _grade(grade_id: str, visible: str, hidden: str) -> nbformat.NotebookNode:
    source = visible + "### BEGIN HIDDEN TESTS\n" + hidden + "### END HIDDEN TESTS\n"
    cell = new_code_cell(source, metadata=_meta(grade_id, grade=True, locked=True,
                                                points=POINTS[grade_id]))
    cell.id = grade_id
    return cell


def source_notebook(setup: str | None = None) -> nbformat.NotebookNode:
    """``setup``: the source of a locked instructor code cell ("setup") before the student's cells."""
    intro = new_markdown_cell("# Toy assignment\nSquare a number, add a list.",
                              metadata=_meta("intro", locked=True))
    intro.id = "intro"
    setup_cells = []
    if setup is not None:
        setup_cells = [new_code_cell(setup, metadata=_meta("setup", locked=True))]
        setup_cells[0].id = "setup"
    cells = [
        intro,
        *setup_cells,
        _solution("square_impl", SQUARE),
        _grade("test_square", "assert square(3) == 9, 'square(3) should be 9'\n",
               "assert square(-4) == 16, 'a negative number squared is positive'\n"),
        _solution("total_impl", TOTAL),
        _grade("test_total", "assert total([1, 2]) == 3\n",
               "assert total([]) == 0, 'the total of nothing is 0'\n"),
        _grade("test_torch_sum", "import torch\n",
               "assert total(torch.arange(4).tolist()) == 6, 'total of 0..3'\n"),
        _grade("test_total_gpu", "import torch\n", GPU_CHECK),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata = {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                  "name": "python3"},
                   "language_info": {"name": "python"}}
    return nb


def run_nbgrader(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, capture_output=True,
                          text=True, env=nbgrader_environment({"AUTOGRADER_ALLOW_CPU": "1"}))
    assert done.returncode == 0, f"nbgrader {args} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return done


def make_toy_course(root: Path, *, setup: str | None = None) -> Path:
    """Create and release the toy course in ``root`` (gradebook.db knows assignment ``toy``);
    ``setup``: a locked set-up cell's source (``source_notebook``)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    source = root / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    source.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(source_notebook(setup), source)
    run_nbgrader(root, "generate_assignment", ASSIGNMENT, "--force")
    return root


def student_notebook(root: Path, *, square: str = SQUARE, total: str = TOTAL) -> nbformat.NotebookNode:
    """The release notebook of the course in ``root`` with the two solution cells replaced."""
    nb = nbformat.read(root / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id == "square_impl":
            cell.source = square
        elif grade_id == "total_impl":
            cell.source = total
    return nb


def submit(root: Path, student: str, **code: str) -> Path:
    """Write ``submitted/<student>/toy/toy.ipynb`` with the given solution code."""
    path = root / "submitted" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(student_notebook(root, **code), path)
    return path
