"""The GPT-2 style Transformer of chapters/11_transformer_accounting.md and its counting functions, for the
pages that build on it (chapters/11b_fitting_a_batch.md, chapters/11c_time_and_inference.md).

The code is written once, on that page, where the reader sees it explained cell by cell. This module takes it
from there instead of keeping a copy: it reads the page's code cells and runs only their imports, their
`def` and `class` statements, and the assignments of the constants named in SHARED_CONSTANTS (the tiny and
GPT-2 configurations, the per-tensor table of saved activations, the four training modes, the GPU
capacities). Nothing else of the page runs here: no measurement, figure or assert. A later page imports what
it needs (`from _transformer import GPT, GPTConfig, ...`) and so runs on its own, with the same definitions
the page shows; an edit to a function on the page reaches every page that uses it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

PAGE = Path(__file__).resolve().with_name("11_transformer_accounting.md")
SHARED_CONSTANTS = ("TINY", "GPT2", "BLOCK_SAVES", "SCORE_ROWS", "MODES", "GiB", "GPU_MEMORY", "USABLE_MEMORY")
_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def code_cells(text: str) -> list[str]:
    """The source of each code cell of a MyST page, without its `:option:` lines."""
    return ["".join(line for line in body.splitlines(keepends=True) if not re.match(r"^:\w+:", line))
            for body in _CELL.findall(text)]


def shared_statements(text: str) -> list[ast.stmt]:
    """The top-level statements of the page's cells that define something later pages use."""
    chosen: list[ast.stmt] = []
    for source in code_cells(text):
        for node in ast.parse(source).body:
            if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
                chosen.append(node)
            elif isinstance(node, ast.Assign) and any(
                    isinstance(target, ast.Name) and target.id in SHARED_CONSTANTS for target in node.targets):
                chosen.append(node)
    return chosen


def _load() -> None:
    module = ast.Module(body=shared_statements(PAGE.read_text(encoding="utf-8")), type_ignores=[])
    exec(compile(module, str(PAGE), "exec"), globals())
    missing = [name for name in SHARED_CONSTANTS if name not in globals()]
    if missing:
        raise ImportError(f"{PAGE.name} no longer defines {missing} (_transformer.SHARED_CONSTANTS)")


_load()
