"""A translated exercise notebook from its English release: prose and student-cell comments only.

Markdown cells are translated by the MyST rules, student cells (solution, neither graded nor locked)
in their docstrings and comments; every other cell (grade cells, locked code cells) is left exactly as
it is, metadata included, so one gradebook grades both editions. Works on plain notebook dicts.
"""

from __future__ import annotations

import copy

from autograder.i18n.render import Rendered, render
from autograder.i18n.segment import is_student_cell, split_myst, split_python


def translate_notebook(nb: dict, translations: dict[str, str], *, note: str = ""
                       ) -> tuple[dict, list[int], Rendered]:
    """``(translated copy, indices of the cells whose source changed, totals)``; ``note`` (the
    edition's own text, e.g. how test messages are shown) goes after the first cell's title."""
    out = copy.deepcopy(nb)
    changed: list[int] = []
    total = Rendered("")
    for index, cell in enumerate(out["cells"]):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "markdown":
            pieces = split_myst(_text(cell["source"]))
        elif cell["cell_type"] == "code" and is_student_cell(meta):
            pieces = split_python(_text(cell["source"]))
        else:
            continue
        done = render(pieces, translations)
        if note and index == 0 and cell["cell_type"] == "markdown":
            head, _, rest = done.text.partition("\n")
            done.text = f"{head}\n\n{note.strip()}\n{rest}"
        total.translated += done.translated
        total.untranslated += done.untranslated
        if done.text != _text(cell["source"]):
            cell["source"] = done.text
            changed.append(index)
    return out, changed, total


def _text(source: str | list[str]) -> str:
    return source if isinstance(source, str) else "".join(source)
