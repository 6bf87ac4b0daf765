"""The engine's shape as rules the build enforces: import-linter's contracts and no import cycles.

The contracts live in ``pyproject.toml`` (``[tool.importlinter]``): layers never import upward
(siblings joined by ``|`` never import each other); outside the engine only its public names are used;
the service's web process never reaches the engine, the sandbox or the hidden checks (only its worker
does); the executors are siblings. The trust boundary has its own test, which reads every import
(tests/test_trust_boundary.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def _cycles(graph: grimp.ImportGraph, modules: set[str]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start) & modules)))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)
                                                & modules))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_import_cycle_in_autograder():
    graph = grimp.build_graph("autograder", cache_dir=None)
    # a package's __init__ that lazily re-exports its modules is not a cycle of the code's shape
    modules = {m for m in graph.modules if m not in ("autograder.grading",)}
    assert _cycles(graph, modules) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    """The check above can fail: two modules that import each other are reported."""
    package = tmp_path / "cyclic_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic_pkg import b\n")
    (package / "b.py").write_text("from cyclic_pkg import a\n")
    (package / "c.py").write_text("from cyclic_pkg import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("cyclic_pkg", cache_dir=None)
    assert _cycles(graph, set(graph.modules)) == [["cyclic_pkg.a", "cyclic_pkg.b"]]


def module_renames(package_root: Path) -> list[str]:
    """``import autograder.x.y as z`` or ``from autograder.x import y as z`` where ``y`` is a module of
    the package and ``z`` is not ``y``: a reader searching for ``z.`` finds no ``z.py``."""
    import ast

    found = []
    for path in sorted(package_root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                pairs = [(a.name, a.asname) for a in node.names if a.name.startswith("autograder.")]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autograder"):
                pairs = [(f"{node.module}.{a.name}", a.asname) for a in node.names]
            else:
                continue
            for dotted, alias in pairs:
                parts = dotted.split(".")
                target = package_root.parent.joinpath(*parts)
                is_module = target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()
                if alias and is_module and alias != parts[-1]:
                    found.append(f"{path.relative_to(package_root.parent)}:{node.lineno} "
                                 f"{dotted} as {alias}")
    return found


def test_no_import_renames_a_module_of_the_package():
    assert module_renames(ROOT / "autograder") == []


def test_a_renamed_module_is_found(tmp_path):
    package = tmp_path / "autograder"
    (package / "sandbox").mkdir(parents=True)
    for name in ("__init__.py", "sandbox/__init__.py", "sandbox/channel.py"):
        (package / name).write_text("")
    (package / "checker.py").write_text("from autograder.sandbox import channel as remote\n"
                                        "from autograder.sandbox import channel\n")
    assert module_renames(package) == ["autograder/checker.py:1 autograder.sandbox.channel as remote"]


def test_failure_names_are_spelled_once():
    """The names of a cell's or a notebook's failure live in protocol.Failure, nowhere else."""
    from autograder.sandbox.inside.protocol import Failure

    spelled = []
    for path in sorted((ROOT / "autograder").rglob("*.py")):
        if path.name == "protocol.py":
            continue
        text = path.read_text(encoding="utf-8")
        spelled += [f"{path.relative_to(ROOT)}: {f.value}" for f in Failure if f'"{f.value}"' in text]
    assert spelled == []


SIZE_CAPPED = ("grading", "sandbox", "service", "cli")  # the packages whose files stay readable whole
MAX_LINES = 500
FLAT_MODULES_MAX = 8  # modules flat in autograder/, beside its groups


def oversized(package_root: Path) -> list[str]:
    """Files of the size-capped packages (and their subpackages) over ``MAX_LINES`` lines, and the
    flat modules of the package past ``FLAT_MODULES_MAX``: what the re-cut (issue 42) split."""
    found = [f"{path.relative_to(package_root.parent)}: {n} lines"
             for group in SIZE_CAPPED for path in sorted((package_root / group).rglob("*.py"))
             if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES]
    flat = sorted(p.name for p in package_root.glob("*.py") if p.name != "__init__.py")
    if len(flat) > FLAT_MODULES_MAX:
        found.append(f"{len(flat)} flat modules in {package_root.name}/: {', '.join(flat)}")
    return found


def test_no_file_of_the_engine_the_sandbox_the_service_or_the_cli_is_over_500_lines():
    assert oversized(ROOT / "autograder") == []


def test_an_oversized_file_and_too_many_flat_modules_are_found(tmp_path):
    package = tmp_path / "autograder"
    (package / "sandbox").mkdir(parents=True)
    (package / "sandbox" / "host.py").write_text("x = 1\n" * (MAX_LINES + 1))
    (package / "sandbox" / "seccomp.py").write_text("x = 1\n" * MAX_LINES)
    for i in range(FLAT_MODULES_MAX + 1):
        (package / f"m{i}.py").write_text("")
    flat = ", ".join(sorted(f"m{i}.py" for i in range(FLAT_MODULES_MAX + 1)))
    assert oversized(package) == [f"autograder/sandbox/host.py: {MAX_LINES + 1} lines",
                                  f"{FLAT_MODULES_MAX + 1} flat modules in autograder/: {flat}"]
