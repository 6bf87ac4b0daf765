"""Feedback preprocessor: no traceback shown to a student quotes or names the hidden checks.

IPython prints a few lines of context around the failing line of a cell, so a failed *visible* test
in a grade cell would show the lines of the hidden-test region below it, and a failed hidden check
names its module. ``ClearHiddenTestTracebacks`` is the one preprocessor for this (one parser:
``autograder.source.hidden_lines``). For every error output of a code cell it

1. drops each traceback line that quotes a line of the cell's hidden-test region, then
2. collapses to its last line (``ename: evalue``) a traceback that still shows hidden-check source
   (a marker, ``autograder.hidden``, or a hidden line quoted elsewhere, e.g. a check's own frame).

It must run before nbgrader's ``ClearHiddenTests`` (which removes the region from the cell source).
See nbgrader_config.py and autograder.feedback.
"""

from __future__ import annotations

import re

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

from autograder.source import hidden_lines, shows_hidden_source

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# IPython context line: optional arrow, the line number, then the code as written in the cell
CONTEXT_LINE = re.compile(r"^\s*(?:-*>\s*)?\d+\s(?P<code>.*)$")

__all__ = ["ClearHiddenTestTracebacks", "hidden_lines", "scrub_traceback"]


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


def hide_hidden_source(output: dict, hidden: set[str]) -> None:
    """Steps 1 and 2 of the module docstring on one error output, in place."""
    frames = scrub_traceback(list(output.get("traceback", [])), hidden) if hidden else \
        list(output.get("traceback", []))
    if shows_hidden_source(ANSI.sub("", "\n".join(frames)), hidden):
        frames = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
    output["traceback"] = frames


class ClearHiddenTestTracebacks(Preprocessor):
    """Keep hidden-check source out of tracebacks (run before ClearHiddenTests; module docstring)."""

    enabled = Bool(True, help="nbconvert skips preprocessors that are not enabled").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        hidden = hidden_lines(cell.source)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                hide_hidden_source(output, hidden)
        return cell, resources
