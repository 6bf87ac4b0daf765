"""No module of ``autograder/`` reads ``tests/``: the data the product uses (the catalogue of wrong
implementations, the evasions, the misconceptions table) lives in ``catalogue/``, and the test suite
may be left out of a course's copy. Read from the source with ``ast``: a string constant that is a
path under ``tests/``, or ``"tests"`` as a part of a path join (``root / "tests"``, ``Path("tests")``,
``os.path.join(root, "tests")``, ``.joinpath("tests")``). Docstrings and the word in a set of names
(``{"solutions", "tests", ...}``) are not paths and pass; the planted modules below show both."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "autograder"

_UNDER_TESTS = re.compile(r"^(\./)?tests[/\\]")
_JOINS = {"Path", "PurePath", "PosixPath", "joinpath", "join"}


def _is_tests(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == "tests"


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def paths_into_tests(source: str, name: str) -> list[str]:
    """``name:line what`` for each place ``source`` names a path under ``tests/``."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                and _UNDER_TESTS.match(node.value)):
            found.append(f"{name}:{node.lineno} the path {node.value!r}")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and (
                _is_tests(node.left) or _is_tests(node.right)):
            found.append(f"{name}:{node.lineno} a path joined with 'tests'")
        elif isinstance(node, ast.Call) and any(_is_tests(arg) for arg in node.args):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in _JOINS:
                found.append(f"{name}:{node.lineno} {called}(..., 'tests')")
    return sorted(found)


def test_no_product_module_names_a_path_under_tests():
    found = [hit for module in sorted(PACKAGE.rglob("*.py"))
             for hit in paths_into_tests(module.read_text(encoding="utf-8"), str(module.relative_to(ROOT)))]
    assert found == [], "product code must not read tests/ (its data belongs in catalogue/):\n" + "\n".join(found)


def test_a_planted_path_under_tests_is_found():
    planted = '''"""Reads tests/catalogue/ (a docstring: not a path)."""
import os
from pathlib import Path

NAMES = frozenset({"solutions", "tests"})
TABLE = Path("tests") / "catalogue" / "misconceptions.json"
ROOT = Path(__file__).parent


def evasions(root):
    """From tests/evasions/."""
    return root / "tests" / "evasions", os.path.join(root, "tests"), ROOT.joinpath("tests", "x")


GOLDEN = "tests/tamper_golden.json"
LEVEL = "tests" if NAMES else "score"
'''
    assert paths_into_tests(planted, "planted.py") == [
        "planted.py:12 a path joined with 'tests'",
        "planted.py:12 join(..., 'tests')",
        "planted.py:12 joinpath(..., 'tests')",
        "planted.py:15 the path 'tests/tamper_golden.json'",
        "planted.py:6 Path(..., 'tests')",
    ]
