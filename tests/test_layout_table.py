"""The layout table (docs/reference/layout.md) matches the tree: every top-level entry of the repository has a row,
every path a row names exists, and the row of each package folder of ``autograder/`` names each of
its modules (so a new module cannot be left out, as three were)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def layout_rows(readme: str) -> list[tuple[list[str], str]]:
    """(the paths of the first column, the row's text) of each row of the Layout table."""
    section = readme
    rows = []
    for line in section.splitlines():
        cells = line.split(" | ")
        if line.startswith("| `") and len(cells) >= 2:
            rows.append((re.findall(r"`([^`]+)`", cells[0]), line))
    return rows


def _exists(path: str) -> bool:
    pattern = path.replace("NN_name", "*").replace("zh_TW", "*").rstrip("/")
    return any(ROOT.glob(pattern)) or (ROOT / "autograder" / "grading" / path).exists()


def layout_problems(readme: str, tracked: list[str]) -> list[str]:
    rows = layout_rows(readme)
    named = [p for paths, _ in rows for p in paths]
    problems = [f"the table names {p}, which the tree does not have" for p in named if not _exists(p)]
    top = sorted({t.split("/")[0] for t in tracked} - {".gitignore"})
    for entry in top:
        if not any(p == entry or p.startswith(entry + "/") or p.rstrip("/") == entry
                   or (entry.startswith("references.") and p == "references.*") for p in named):
            problems.append(f"{entry} has no row")
    for paths, text in rows:
        for path in paths:
            folder = ROOT / path
            if not (path.startswith("autograder") and path.endswith("/") and folder.is_dir()):
                continue
            for module in sorted(folder.glob("*.py")):
                if module.name != "__init__.py" and f"`{module.name}`" not in text:
                    problems.append(f"the {path} row does not name {module.name}")
    return problems


def _tracked() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.split()


def test_the_layout_table_matches_the_tree():
    assert layout_problems((ROOT / "docs/reference/layout.md").read_text(encoding="utf-8"), _tracked()) == []


def test_a_module_or_a_folder_left_out_is_found():
    readme = (ROOT / "docs/reference/layout.md").read_text(encoding="utf-8")
    dropped = readme.replace("`deadlines.py` (trusted: every time limit, derived from the two settings), ", "")
    assert layout_problems(dropped, _tracked()) == ["the autograder/sandbox/ row does not name deadlines.py"]
    assert layout_problems(readme, [*_tracked(), "newfolder/x.py"]) == ["newfolder has no row"]
