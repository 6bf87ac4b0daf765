"""The project's Python type-checks: ``mypy`` (no arguments) is clean with the settings in pyproject.toml.

The configuration is ``[tool.mypy]`` in ``pyproject.toml``: every module of ``autograder`` is checked
(function bodies included); the engine (``autograder.grading``), the sandbox's host side and channel
(``autograder.sandbox.host``, ``autograder.sandbox.channel``), the service (``autograder.service``)
and the command line (``autograder.cli``) with every flag ``mypy --strict`` turns on, spelled out
in an override because ``strict = true`` there would turn them on for every module (python/mypy#11401). Third-party packages without type
information are listed by name (``ignore_missing_imports``).

Besides the real run: the strict flags are those of ``--strict``, the check fails on a module
with a type error (so a clean run means something), and a wrong call into the engine's public API
(``autograder.grading``, lazy at run time) is one.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
STRICT_MODULES = ["autograder.grading", "autograder.grading.*", "autograder.sandbox.host",
                  "autograder.sandbox.cgroups", "autograder.sandbox.channel", "autograder.sandbox.handles", "autograder.service",
                  "autograder.service.*", "autograder.lms", "autograder.lms.*", "autograder.cli",
                  "autograder.cli.*"]


def _mypy(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_mypy_is_clean():
    result = _mypy(cwd=ROOT)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"mypy found problems:\n{output[-6000:]}"
    assert "Success" in result.stdout


def test_the_strict_modules_get_every_flag_of_strict():
    from mypy.main import process_options

    _, plain = process_options(["--config-file", "", "x.py"])
    _, strict = process_options(["--config-file", "", "--strict", "x.py"])
    names = [n for n in dir(strict) if not n.startswith("_") and not callable(getattr(strict, n))]
    turned_on = {n: getattr(strict, n) for n in names if getattr(plain, n) != getattr(strict, n)}
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["mypy"]
    override = next(o for o in config["overrides"] if o["module"] == STRICT_MODULES)
    settings = {**{k: v for k, v in config.items() if k in turned_on}, **override}
    assert {n: settings.get(n) for n in turned_on} == turned_on, \
        "the strict override (or the global section) lacks a flag --strict turns on"
    assert "strict" not in override, "strict = true in an override turns it on for every module"


def test_mypy_reports_a_type_error(tmp_path):
    """A module that calls ``len`` on an Optional and leaves a function unannotated, once under the
    strict override (both are errors) and once outside it (only the first is)."""
    code = ("def half(n):\n    return n / 2\n\n\n"
            "def length(name: str | None) -> int:\n    return len(name)\n")
    (tmp_path / "autograder" / "grading").mkdir(parents=True)
    for package in ("autograder", "autograder/grading"):
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "autograder" / "grading" / "typo.py").write_text(code)
    (tmp_path / "autograder" / "typo.py").write_text(code)
    result = _mypy("--config-file", str(PYPROJECT), "--no-incremental",
                   "autograder/grading/typo.py", "autograder/typo.py", cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "autograder/grading/typo.py:1: error: Function is missing a type annotation" in output
    assert "autograder/grading/typo.py:6: error: Argument 1 to \"len\" has incompatible type" in output
    assert "autograder/typo.py:6: error: Argument 1 to \"len\" has incompatible type" in output
    assert "autograder/typo.py:1:" not in output, "only the strict modules need annotations"


def test_the_engine_api_is_typed_for_its_callers(tmp_path):
    """``autograder.grading``'s public names load lazily at run time, yet mypy sees their types (real
    imports under ``TYPE_CHECKING``): a wrong call into the engine is an error, a right one is not."""
    (tmp_path / "wrong.py").write_text(
        "from autograder.grading import GradeOptions, GradeSummary, grade\n\n"
        "x: int = GradeOptions.of(workers=2)\n"
        "options = GradeOptions(workers=\"many\")\n"
        "summary: str = grade(options)\n")
    (tmp_path / "right.py").write_text(
        "from autograder.grading import GradeOptions, GradeSummary, grade\n\n"
        "options: GradeOptions = GradeOptions.of(workers=2, notebook_timeout=900.0)\n"
        "summary: GradeSummary = grade(options)\n"
        "count: int = summary.count(\"graded\")\n")
    result = _mypy("--config-file", str(PYPROJECT), "--follow-imports", "silent",
                   str(tmp_path / "wrong.py"), cwd=ROOT)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "wrong.py:3: error: Incompatible types in assignment" in output, output
    assert "wrong.py:4: error: Argument \"workers\" to \"GradeOptions\" has incompatible type" in output, output
    assert "wrong.py:5: error: Incompatible types in assignment" in output, output
    result = _mypy("--config-file", str(PYPROJECT), "--follow-imports", "silent",
                   str(tmp_path / "right.py"), cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
