"""The trust boundary as a rule read from the source, every import included.

- Nothing under ``autograder/sandbox/inside/`` imports ``autograder`` beyond that folder: not by
  ``import``, ``from … import``, a relative import that climbs out, or ``importlib.import_module`` /
  ``__import__`` with a literal name.
- The trusted side imports from that folder only its shared modules, and each only where
  ``autograder.sandbox.inside.SHARED`` says; nothing trusted imports ``template.py``.

The first rule replaces an import-linter contract that enumerated the forbidden modules (a new module
of ``autograder`` was allowed until someone added it to the list).
"""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass
from pathlib import Path

from autograder.sandbox.inside import SHARED

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "autograder"
INSIDE = "autograder.sandbox.inside"


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # the imported module, absolute and dotted (a name of it for ``from X import n``)
    line: int


def _module_name(path: Path, package_root: Path) -> str:
    parts = list(path.relative_to(package_root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    if not level:
        return name or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(base) - 1:
        return "<beyond the top>." + (name or "")
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def imports_of(path: Path, package_root: Path) -> list[Import]:
    """Every module ``path`` imports, as absolute dotted names (``from X import a`` gives ``X.a``)."""
    module = _module_name(path, package_root)
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(module, is_package, node.level, node.module)
            found += [Import(module, f"{source}.{alias.name}", node.lineno) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if called in ("import_module", "__import__"):
                found.append(Import(module, node.args[0].value, node.lineno))
    return found


def inside_violations(package_root: Path) -> list[str]:
    """Imports from inside the sandbox's folder that reach ``autograder`` beyond it."""
    inside = package_root / "sandbox" / "inside"
    own = {p.stem for p in inside.glob("*.py")}
    problems = []
    for path in sorted(inside.rglob("*.py")):
        for imp in imports_of(path, package_root):
            top = imp.target.split(".")[0]
            if imp.target.startswith("<beyond"):
                problems.append(f"{path.name}:{imp.line} climbs out of the package ({imp.target})")
            elif top == "autograder" and not (imp.target + ".").startswith(INSIDE + "."):
                problems.append(f"{path.name}:{imp.line} imports {imp.target}")
            elif top not in own and (inside / top).exists():
                problems.append(f"{path.name}:{imp.line} imports {imp.target}")
    return problems


def trusted_violations(package_root: Path, shared: dict[str, tuple[str, ...]]) -> list[str]:
    """Imports of the sandbox's folder from the trusted side that ``shared`` does not allow."""
    inside = package_root / "sandbox" / "inside"
    problems = []
    for path in sorted(package_root.rglob("*.py")):
        if inside in path.parents:
            continue
        for imp in imports_of(path, package_root):
            if not (imp.target + ".").startswith(INSIDE + "."):
                continue
            rest = imp.target.removeprefix(INSIDE + ".").split(".")
            allowed = shared.get(rest[0], ())
            if not any(imp.module == a or imp.module.startswith(a + ".") for a in allowed):
                problems.append(f"{imp.module}:{imp.line} imports {imp.target} "
                                f"(SHARED allows {rest[0]!r} for: {', '.join(allowed) or 'no one'})")
    return problems


def test_nothing_inside_the_sandbox_imports_the_rest_of_autograder():
    assert inside_violations(PACKAGE) == []


def test_the_trusted_side_imports_only_the_shared_modules_where_allowed():
    assert trusted_violations(PACKAGE, SHARED) == []


def test_every_shared_module_exists_and_the_template_is_not_shared():
    inside = PACKAGE / "sandbox" / "inside"
    assert all((inside / f"{name}.py").is_file() for name in SHARED), sorted(SHARED)
    assert (inside / "template.py").is_file() and "template" not in SHARED


PLANTS = {
    "plain import": "import autograder.reports.figures\n",
    "from import": "from autograder import figures\n",
    "relative climb": "from ... import figures\n",
    "dynamic": "import importlib\nimportlib.import_module('autograder.reports.figures')\n",
    "dunder": "__import__('autograder.grading')\n",
}


def _copy_package(tmp_path: Path) -> Path:
    copy = tmp_path / "autograder"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_a_planted_import_inside_is_found(tmp_path):
    """The rule can fail: each way of planting ``autograder.reports.figures`` into isolation.py is reported."""
    copy = _copy_package(tmp_path)
    isolation = copy / "sandbox" / "inside" / "isolation.py"
    original = isolation.read_text(encoding="utf-8")
    for how, plant in PLANTS.items():
        isolation.write_text(original + "\n" + plant, encoding="utf-8")
        found = inside_violations(copy)
        assert len(found) == 1 and found[0].startswith("isolation.py:"), (how, found)


def test_a_trusted_import_of_the_sandbox_template_is_found(tmp_path):
    copy = _copy_package(tmp_path)
    report = copy / "reports" / "report.py"
    report.write_text(report.read_text(encoding="utf-8")
                      + "\nfrom autograder.sandbox.inside import template\n", encoding="utf-8")
    found = trusted_violations(copy, SHARED)
    assert len(found) == 1 and "autograder.reports.report" in found[0] and "template" in found[0], found
