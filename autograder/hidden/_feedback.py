"""Feedback preprocessor: no traceback shown to a student quotes or names the hidden checks.

IPython prints a few lines of context around the failing line of a cell, so a failed *visible* test
in a grade cell would show the lines of the hidden-test region below it, and a failed hidden check
names its module. ``ClearHiddenTestTracebacks`` is the one preprocessor for this (one parser:
``autograder.course.source.hidden_lines``). For every error output of a code cell it

1. drops each traceback line that quotes a line of the cell's hidden-test region, then
2. collapses to its last line (``ename: evalue``) a traceback that still shows hidden-check source
   (a marker, ``autograder.hidden``, or a hidden line quoted elsewhere, e.g. a check's own frame), then
3. says in the student's words what an error that is no failure of theirs, or has no message, means
   (``in_student_words``): a check the grading machine did not run (``NeedsGPU``,
   ``autograder.machine_limits``) shows its sentence alone; a ``NotImplementedError`` without a
   message (a function still as released) says which function is not implemented yet.

The feedback pages (``autograder.reports.feedback``) and the service's results (``autograder.service.results``)
both call ``hide_hidden_source``, so both show the same words, translated afterwards
(``autograder.i18n.messages``: the messages below are templates of ``messages.po``).

It must run before nbgrader's ``ClearHiddenTests`` (which removes the region from the cell source).
See nbgrader_config.py and autograder.reports.feedback.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

from autograder.course.source import hidden_lines, shows_hidden_source
from autograder.machine_limits import is_not_run_output

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# IPython context line: optional arrow, the line number, then the code as written in the cell
CONTEXT_LINE = re.compile(r"^\s*(?:-*>\s*)?\d+\s(?P<code>.*)$")

__all__ = ["ClearHiddenTestTracebacks", "hidden_lines", "in_student_words", "scrub_traceback",
           "unfinished_functions"]
NOT_IMPLEMENTED = "NotImplementedError"


def scrub_traceback(frames: list[str], hidden: set[str]) -> list[str]:
    """``frames`` (IPython traceback entries, with ANSI colours) without lines quoting ``hidden``."""
    cleaned = []
    for frame in frames:
        kept = []
        for line in frame.split("\n"):
            match = CONTEXT_LINE.match(ANSI.sub("", line))
            if match and match["code"].strip() in hidden:
                continue
            kept.append(line)
        cleaned.append("\n".join(kept))
    return cleaned


def hide_hidden_source(output: dict, hidden: set[str], *, unfinished: Sequence[str] = ()) -> None:
    """Steps 1 to 3 of the module docstring on one error output, in place (``unfinished``: the
    functions of the cell's notebook still as released, ``unfinished_functions``)."""
    frames = scrub_traceback(list(output.get("traceback", [])), hidden) if hidden else \
        list(output.get("traceback", []))
    if shows_hidden_source(ANSI.sub("", "\n".join(frames)), hidden):
        frames = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
    output["traceback"] = frames
    in_student_words(output, unfinished)


def in_student_words(output: dict, unfinished: Sequence[str] = ()) -> None:
    """Step 3 of the module docstring on one error output, in place."""
    if is_not_run_output(output):  # the machine's limit: its sentence, no exception name
        output["traceback"] = [str(output.get("evalue", ""))]
        return
    if output.get("ename") != NOT_IMPLEMENTED or str(output.get("evalue", "")).strip():
        return
    if unfinished:
        names = ", ".join(unfinished)
        message = (f"not implemented yet: {names} (replace `raise NotImplementedError()` "
                   "with your code)")
    else:
        message = ("not implemented yet: a function this test calls (replace "
                   "`raise NotImplementedError()` with your code)")
    output["evalue"] = message
    output["traceback"] = [f"{NOT_IMPLEMENTED}: {message}"]


def _raises_not_implemented(function: ast.AST) -> bool:
    for node in ast.walk(function):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(exc, ast.Name) and exc.id == NOT_IMPLEMENTED:
                return True
    return False


def unfinished_functions(sources: Iterable[str]) -> dict[str, list[str]]:
    """The functions (``name``, methods as ``Class.name``) of ``sources`` (the student's cells) that
    still raise ``NotImplementedError``, by the top-level name a test would call them through."""
    found: dict[str, list[str]] = {}
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _raises_not_implemented(node):
                found.setdefault(node.name, []).append(node.name)
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) \
                            and _raises_not_implemented(item):
                        found.setdefault(node.name, []).append(f"{node.name}.{item.name}")
    return found


def called_unfinished(source: str, unfinished: dict[str, list[str]]) -> list[str]:
    """Of ``unfinished`` (``unfinished_functions``), those a test cell's ``source`` names."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source))
    return [name for top in sorted(unfinished) if top in words for name in unfinished[top]]


class ClearHiddenTestTracebacks(Preprocessor):
    """Keep hidden-check source out of tracebacks (run before ClearHiddenTests; module docstring)."""

    enabled = Bool(True, help="nbconvert skips preprocessors that are not enabled").tag(config=True)

    def preprocess(self, nb, resources):
        self._unfinished = unfinished_functions(
            cell.source for cell in nb.cells
            if cell.cell_type == "code" and (cell.metadata.get("nbgrader") or {}).get("solution"))
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        hidden = hidden_lines(cell.source)
        unfinished = called_unfinished(cell.source, getattr(self, "_unfinished", {}))
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                hide_hidden_source(output, hidden, unfinished=unfinished)
        return cell, resources
