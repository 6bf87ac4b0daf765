"""Run every GPU check of the reference solutions on a CUDA machine and print a table.

    python -m autograder.tools.gpu_check              # needs CUDA; exits 2 with a clear message without it
    python -m autograder.tools.gpu_check --allow-cpu  # runs the CPU path of the same checks, and says so
    python -m autograder.tools.gpu_check --all        # also every other hidden check of all six references

The reference solutions are read straight from ``solutions/NN_name/NN_name.py`` (py:percent text, no
jupytext or nbgrader needed, so this runs on a bare GPU box with torch, numpy, einops and jaxtyping):
the imports and solution cells are executed, then each check is called on the reference objects.
Exit status: 0 when every check passed, 1 when one failed, 2 when there is no CUDA device and
``--allow-cpu`` was not given.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from autograder import ALLOW_CPU_ENV
from autograder.course import manifest
from autograder.course.source import (
    ASSIGNMENTS,
    HIDDEN_CHECKS_PACKAGE,
    SourceCell,
    read_source_cells,
    source_path,
)
from autograder.grading.options import add_grading_arguments

# SourceCell and read_source_cells are autograder.course.source's (the one py:percent reader), named here too.
__all__ = ["GPU_CHECKS", "Check", "SourceCell", "hidden_calls", "main", "read_source_cells",
           "reference_namespace", "run_check", "source_file"]



def source_file(assignment: str, course_root: Path) -> Path:
    """The exercise source of ``assignment`` (``autograder.course.source.source_path``)."""
    return source_path(assignment, course_root=course_root)


def reference_namespace(assignment: str, *, course_root: Path = Path("."),
                        replace: dict[str, str] | None = None) -> dict[str, Any]:
    """Execute the non-grade code cells (imports, reference solutions) of ``assignment``.

    ``replace`` maps a function/class name to code run right after the cell that defines it, as a
    catalogue entry does (autograder.authoring.samples.student_notebook appends it to that cell)."""
    path = source_file(assignment, course_root)
    namespace: dict[str, Any] = {"__name__": f"reference_{assignment}"}
    pending = dict(replace or {})
    for cell in read_source_cells(path):
        if cell.kind != "code" or cell.meta.get("grade"):
            continue
        exec(compile(cell.source, f"{path}:{cell.grade_id}", "exec"), namespace)  # noqa: S102
        for name in [n for n in pending if _defines(cell.source, n)]:
            exec(compile(pending.pop(name), f"<variant of {name}>", "exec"), namespace)  # noqa: S102
    if pending:
        raise ValueError(f"{path}: no solution cell defines {sorted(pending)}")
    return namespace


def _defines(source: str, name: str) -> bool:
    return any(line.startswith((f"def {name}(", f"class {name}(", f"class {name}:"))
               for line in source.splitlines())


@dataclass(frozen=True)
class Check:
    """A hidden check to run on a reference object: ``module.function(namespace[target])``."""

    assignment: str
    module: str
    function: str
    target: str
    gpu: bool


GPU_CHECKS: tuple[Check, ...] = tuple(  # course.toml's gpu_checks
    Check(exercise.name, exercise.hidden, check.function, check.target, True)
    for exercise in manifest.course().exercises for check in exercise.gpu_checks)


def hidden_calls(assignment: str, course_root: Path) -> list[Check]:
    """Every ``_hidden.check_x(obj)`` call in the hidden regions of ``assignment``'s grade cells."""
    checks = []
    for cell in read_source_cells(source_file(assignment, course_root)):
        if not cell.meta.get("grade"):
            continue
        module = None
        for line in cell.source.splitlines():
            line = line.strip()
            if line.startswith(f"from {HIDDEN_CHECKS_PACKAGE} import ") and " as _hidden" in line:
                module = line.split("import ", 1)[1].split(" as ")[0].strip()
            elif line.startswith("_hidden.check_") and module:
                function, rest = line[len("_hidden."):].split("(", 1)
                target = rest.split(")", 1)[0].split(",")[0].strip()
                checks.append(Check(assignment, module, function, target, function.endswith("_gpu")))
    return checks


@dataclass
class Row:
    check: str
    device: str
    result: str
    seconds: float


def run_check(check: Check, course_root: Path, namespaces: dict[str, dict[str, Any]]) -> Row:
    """Run one check on the reference solution; a failure becomes a row, never a crash."""
    name = f"{check.assignment}: {check.function}"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    started = time.perf_counter()
    try:
        if check.assignment not in namespaces:
            namespaces[check.assignment] = reference_namespace(check.assignment, course_root=course_root)
        target = namespaces[check.assignment][check.target]
        check_function = getattr(importlib.import_module(f"{HIDDEN_CHECKS_PACKAGE}.{check.module}"), check.function)
        started = time.perf_counter()  # time the check itself, not loading the reference
        check_function(target)
        result = "passed"
    except ModuleNotFoundError as error:
        result = f"skipped: missing module {error.name!r}"
    except BaseException as error:  # noqa: BLE001 - report every failure as a row
        if isinstance(error, KeyboardInterrupt):
            raise
        result = f"FAILED: {type(error).__name__}: {error}"
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return Row(name, device if check.gpu else "cpu", result, time.perf_counter() - started)


def format_table(rows: Sequence[Row]) -> str:
    headers = ("check", "device", "result", "seconds")
    cells = [(r.check, r.device, r.result, f"{r.seconds:.2f}") for r in rows]
    widths = [max(len(h), *(len(c[i][:100]) for c in cells)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c[i][:100].ljust(widths[i]) for i in range(4)) for c in cells]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.tools.gpu_check", description=__doc__.split("\n")[0])
    add_grading_arguments(parser, ("allow_cpu",))  # without CUDA: the CPU path, reported as such
    parser.add_argument("--all", action="store_true",
                        help="also run every non-GPU hidden check of the six reference solutions")
    parser.add_argument("--course-root", type=Path, default=Path("."), help="repository root")
    args = parser.parse_args(argv)

    if not all(source_file(check.assignment, args.course_root).is_file() for check in GPU_CHECKS):
        print(f"gpu_check: no solutions/ under {args.course_root.resolve()}; pass --course-root",
              file=sys.stderr)
        return 2
    if torch.cuda.is_available():
        print(f"gpu_check: CUDA device {torch.cuda.get_device_name()} (torch {torch.__version__})")
    elif args.allow_cpu:
        os.environ[ALLOW_CPU_ENV] = "1"
        print(f"gpu_check: no CUDA device; --allow-cpu: running the CPU path of every GPU check "
              f"(torch {torch.__version__}). These results say nothing about CUDA.")
    else:
        print("gpu_check: no CUDA device (torch.cuda.is_available() is False). Run this on a GPU "
              "runner, or pass --allow-cpu to run the CPU path of the same checks.", file=sys.stderr)
        return 2

    checks = list(GPU_CHECKS)
    if args.all:
        for assignment in ASSIGNMENTS:
            if source_file(assignment, args.course_root).is_file():
                checks += [c for c in hidden_calls(assignment, args.course_root) if not c.gpu]
    namespaces: dict[str, dict[str, Any]] = {}
    started = time.perf_counter()
    rows = [run_check(check, args.course_root, namespaces) for check in checks]
    print(format_table(rows))
    failed = [r for r in rows if r.result.startswith("FAILED")]
    print(f"{len(rows) - len(failed)}/{len(rows)} checks without failure in "
          f"{time.perf_counter() - started:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
