"""A graded submission as the student may see it: score per test, each failure's message, no hidden code.

Read from the worker's workspace after ``autograder grade`` recorded it: points from its gradebook,
messages from the autograded notebook's error outputs, scrubbed by the same rule as nbgrader feedback
(``autograder.hidden._feedback.hide_hidden_source``) and shown in the notebook's language (a zh-TW
release's messages in zh-TW: ``autograder.i18n.messages``), then checked once more as a whole: nothing that
``autograder.course.source.shows_hidden_source`` recognizes may be stored. A test is "hidden" when its grade
cell has a hidden-test region; its code is never part of the result, only its name and message.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.api import Gradebook, MissingEntry

from autograder.course.source import hidden_lines, hidden_region, shows_hidden_source
from autograder.hidden._feedback import hide_hidden_source
from autograder.i18n.messages import notebook_language, translate_output

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MESSAGE_CHARS = 4000  # of one test's message


def graded_feedback(gb: Gradebook, *, student: str, assignment: str, notebooks: dict[str, Path],
                    reasons: tuple[str, ...] = ()) -> dict[str, Any]:
    """``{"score", "max_score", "tests": [...], "notices": [...]}`` of one graded submission.

    ``gb``: the workspace's gradebook, kept open by its caller (a new one per submission compiles
    every query again: 12-24 ms); each call reads in a session of its own, so it sees what was
    recorded since, and ends it (no read transaction is left open on the workspace's SQLite file)."""
    gb.db.remove()  # nothing loaded before is handed back unchanged
    try:
        return _feedback(gb, student=student, assignment=assignment, notebooks=notebooks,
                         reasons=reasons)
    finally:
        gb.db.remove()


def _feedback(gb: Gradebook, *, student: str, assignment: str, notebooks: dict[str, Path],
              reasons: tuple[str, ...]) -> dict[str, Any]:
    tests: list[dict[str, Any]] = []
    hidden_text: set[str] = set()
    score = max_score = 0.0
    for notebook, path in notebooks.items():
        cells, language = _grade_cells(path)
        for source_cell in cells.values():
            hidden_text |= hidden_lines(source_cell.source)
        try:
            graded = gb.find_submission_notebook(notebook, assignment, student)
        except MissingEntry:
            continue
        for grade in sorted(graded.grades, key=lambda g: _order(cells, g.name)):
            points = float(grade.score or 0.0)
            top = float(grade.max_score or 0.0)
            cell = cells.get(grade.name)
            tests.append({"name": grade.name, "notebook": notebook, "points": points,
                          "max_points": top, "passed": points >= top,
                          "hidden": bool(cell is not None and hidden_region(cell.source)),
                          "message": _message(cell, language) if points < top else None})
            score += points
            max_score += top
    result: dict[str, Any] = {"score": score, "max_score": max_score, "tests": tests,
                              "notices": [_clip(r) for r in reasons]}
    return _without_hidden_source(result, hidden_text)


def _grade_cells(path: Path) -> tuple[dict[str, nbformat.NotebookNode], str | None]:
    """The grade cells of an autograded notebook by grade id, and the language it was released in."""
    if not path.is_file():
        return {}, None
    nb = nbformat.read(path, as_version=4)
    cells: dict[str, nbformat.NotebookNode] = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade") and isinstance(meta.get("grade_id"), str):
            cells[meta["grade_id"]] = cell
    return cells, notebook_language(nb)


def _order(cells: dict[str, nbformat.NotebookNode], name: str) -> tuple[int, str]:
    names = list(cells)
    return (names.index(name) if name in names else len(names), name)


def _message(cell: nbformat.NotebookNode | None, language: str | None = None) -> str:
    """The failure as the student would read it under the cell (hidden lines removed; in the
    notebook's language, ``autograder.i18n.messages``)."""
    if cell is None:
        return "this test's cell is missing from the notebook"
    hidden = hidden_lines(cell.source)
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            shown = dict(output)
            hide_hidden_source(shown, hidden)
            translate_output(shown, language)
            text = ANSI.sub("", "\n".join(shown.get("traceback", [])))
            return _clip(text or f"{output.get('ename', 'Error')}: {output.get('evalue', '')}")
    return "failed (no error message: the cell did not run, or its points were not given)"


def _clip(text: str) -> str:
    text = str(text)
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + " … (cut)"


def _without_hidden_source(result: dict[str, Any], hidden: set[str]) -> dict[str, Any]:
    """Last guard: a message still quoting hidden-check source is cut to its exception line, and a
    line that still does is replaced by a notice."""
    for test in result["tests"]:
        message = test["message"]
        if message and shows_hidden_source(message, hidden):
            last = message.strip().split("\n")[-1]
            test["message"] = last if not shows_hidden_source(last, hidden) else \
                "failed (the message quoted the hidden test and is not shown)"
    result["notices"] = [n if not shows_hidden_source(n, hidden) else
                         "a notice quoted the hidden test and is not shown" for n in result["notices"]]
    return result
