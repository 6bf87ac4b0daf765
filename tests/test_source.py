"""The exercise source format lives in one module (autograder.course.source): its reader reads every source as
jupytext does, its region rules are the ones nbgrader applies, and no other module keeps a copy."""

from __future__ import annotations

import ast
from pathlib import Path

import jupytext
import pytest

from autograder.course import source
from autograder.errors import AutograderError, ReleaseError, SampleError

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("assignment", source.ASSIGNMENTS)
def test_the_stdlib_reader_reads_each_source_as_jupytext_does(assignment):
    path = source.source_path(assignment, course_root=ROOT)
    expected = jupytext.read(path, fmt="py:percent").cells
    cells = source.read_source_cells(path)
    assert [(c.cell_type, c.source, dict(c.metadata["nbgrader"])) for c in expected] == \
        [(c.kind, c.source, c.meta) for c in cells]


def test_regions_and_hidden_lines():
    cell = ("def f(x):\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n"
            "assert f(1) == 2\n### BEGIN HIDDEN TESTS\nfrom autograder.hidden import x as _hidden\n"
            "_hidden.check_f(f)\n### END HIDDEN TESTS")
    kinds = {line.strip(): region for _, line, region in source.regions(cell.split("\n"))}
    assert kinds["return x + 1"] == "solution" and kinds["_hidden.check_f(f)"] == "hidden test"
    assert kinds["assert f(1) == 2"] is None and "### BEGIN SOLUTION" not in kinds
    assert "BEGIN SOLUTION" not in source.strip_solution_markers(cell)
    assert "return x + 1" in source.strip_solution_markers(cell)
    assert source.hidden_region(cell) == "from autograder.hidden import x as _hidden\n_hidden.check_f(f)"
    assert "_hidden.check_f(f)" in source.hidden_lines(cell)
    assert "assert f(1) == 2" not in source.hidden_lines(cell)
    assert source.shows_hidden_source("x = 1") is None
    assert source.shows_hidden_source("in autograder/hidden/x.py") == "autograder/hidden"


def test_errors_share_one_hierarchy_and_keep_their_old_bases():
    assert issubclass(ReleaseError, AutograderError) and issubclass(ReleaseError, RuntimeError)
    assert issubclass(SampleError, AutograderError) and issubclass(SampleError, ValueError)
    assert issubclass(source.SourceError, ReleaseError) and issubclass(source.SourceError, ValueError)
    from autograder.authoring.release import ReleaseError as from_release
    from autograder.authoring.samples import SampleError as from_samples

    assert from_release is ReleaseError and from_samples is SampleError


def test_the_format_is_defined_once():
    """No module but autograder/course/source.py spells a region marker or the sources' folder layout."""
    spelled = []
    for path in sorted((ROOT / "autograder").rglob("*.py")):
        if path.relative_to(ROOT).as_posix() == "autograder/course/source.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and id(node) not in docstrings and isinstance(node.value, str) and (
                    "BEGIN HIDDEN TESTS" in node.value or "BEGIN SOLUTION" in node.value
                    or node.value == "# %%"):
                spelled.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert spelled == []


def test_the_source_module_is_a_bottom_layer():
    tree = ast.parse((ROOT / "autograder" / "course" / "source.py").read_text(encoding="utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    packages = {"autograder", "autograder.course"}  # ``from autograder.course import manifest``: a module
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
                 and node.module not in packages}
    imported |= {f"{node.module}.{alias.name}" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and node.module in packages for alias in node.names}
    assert {name for name in imported if name.startswith("autograder")} == {"autograder.errors",
                                                                           "autograder.course.manifest"}
    import sys

    assert all(name in sys.stdlib_module_names or name.startswith("autograder") or name == "__future__"
               for name in {n.split(".")[0] for n in imported})
