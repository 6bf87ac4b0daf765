"""Feedback preprocessor: remove hidden-test lines from the tracebacks shown to students.

IPython prints a few lines of context around the failing line of a cell, so a failed *visible* test
in a grade cell would show the lines of the hidden-test region below it. ``ClearHiddenTestTracebacks``
drops every traceback line that quotes a line of the cell's hidden-test region; it must run before
nbgrader's ``ClearHiddenTests`` (which removes the region from the cell source). See nbgrader_config.py.
"""

from __future__ import annotations

import re

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

BEGIN, END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# IPython context line: optional arrow, the line number, then the code as written in the cell
CONTEXT_LINE = re.compile(r"^\s*(?:-*>\s*)?\d+\s(?P<code>.*)$")


def hidden_lines(source: str) -> set[str]:
    """The non-blank lines (stripped) between the hidden-test markers of a cell, markers included."""
    found: set[str] = set()
    inside = False
    for line in source.split("\n"):
        if BEGIN in line:
            inside = True
        if inside and line.strip():
            found.add(line.strip())
        if END in line:
            inside = False
    return found


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


class ClearHiddenTestTracebacks(Preprocessor):
    """Drop traceback lines that quote a cell's hidden-test region (run before ClearHiddenTests)."""

    enabled = Bool(True, help="nbconvert skips preprocessors that are not enabled").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        hidden = hidden_lines(cell.source)
        if hidden:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = scrub_traceback(list(output.get("traceback", [])), hidden)
        return cell, resources
