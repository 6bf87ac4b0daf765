"""Split English sources into verbatim pieces and translatable units (the catalogue's segmentation).

A MyST page becomes a list of pieces whose concatenation is the page, byte for byte. A ``Unit`` is one
translatable piece of prose: a paragraph, a heading's text, one list item, one table cell, a directive's
title, a ``$$`` formula with English words in a ``\text{}`` (kind ``math``: the checks let only those
words change); everything else (front matter, code cells and other code fences, other math, labels, ``+++``
markers, directive options, list markers, the ``#`` of a heading) is a ``str`` kept verbatim. Prose
inside a directive (``{dropdown}``, ``{note}``, ...) is split the same way, recursively.

An exercise source gives the units of its markdown cells (the same MyST rules) and of its student
cells' docstrings (one unit per paragraph) and comments; grade cells and locked code cells give none.
"""

from __future__ import annotations

import hashlib
import io
import re
import tokenize
from dataclasses import dataclass

from autograder.course.source import marker

# Directives whose body is prose (translated); any other fenced block is kept verbatim.
PROSE_DIRECTIVES = frozenset({
    "dropdown", "note", "tip", "hint", "important", "warning", "caution", "attention", "danger",
    "error", "seealso", "admonition", "margin", "sidebar", "topic",
})
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,}|:{3,})(.*)$")
_DIRECTIVE = re.compile(r"^\{([\w-]+)\}\s*(.*)$")
_OPTION = re.compile(r"^:[\w-]+:")
_HEADING = re.compile(r"^(#{1,6}[ \t]+)(.*?)([ \t]*)$")
_LABEL = re.compile(r"^\([^)\s]+\)=\s*$")
_ITEM = re.compile(r"^(\s*(?:[-*+]|\d+[.)])[ \t]+)")
_TABLE_SEPARATOR = re.compile(r"^\|?[\s:|-]+\|?$")
_LETTER = re.compile(r"[^\W\d_]")
_IDENTIFIER = re.compile(r"[A-Za-z_]*\d[\w.]*")
_STUB_COMMENT = "YOUR CODE HERE"  # nbgrader's stub in a released solution region
# a ``$$`` formula with English words in a \text{} (a unit of kind "math": only those words translate)
_MATH_WORDS = re.compile(r"\\text\{[^{}]*[A-Za-z]{2}[^{}]*\}")


def normalize(text: str) -> str:
    """``text`` with every run of whitespace one space, stripped (what the hash and msgid use)."""
    return " ".join(text.split())


def unit_hash(text: str) -> str:
    """The catalogue key of an English unit: first 16 hex digits of sha256 of its normalized text."""
    return hashlib.sha256(normalize(text).encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Unit:
    """A translatable piece: its English text as written, and the source line it starts on."""

    text: str
    line: int
    kind: str = "prose"  # "prose" (MyST), "docstring", "comment", "math" (a $$ formula with words)
    indent: str = ""  # a docstring paragraph's indentation (its translated lines get the same)

    @property
    def key(self) -> str:
        return unit_hash(self.text)

    @property
    def english(self) -> str:
        return normalize(self.text)


Piece = str | Unit


# --- MyST pages ------------------------------------------------------------------------------------

def split_myst(text: str, *, first_line: int = 1) -> list[Piece]:
    """The pieces of a MyST page (or of a markdown cell); ``"".join`` of their texts is ``text``."""
    lines = text.splitlines(keepends=True)
    pieces: list[Piece] = []
    i = 0
    if lines and lines[0].rstrip("\n") == "---" and first_line == 1:  # front matter
        end = next((j for j in range(1, len(lines)) if lines[j].rstrip("\n") == "---"), None)
        if end is not None:
            pieces.append("".join(lines[: end + 1]))
            i = end + 1
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line.rstrip("\n"))
        if not line.strip():
            pieces.append(line)
            i += 1
        elif fence:
            i = _fenced(lines, i, fence, pieces, first_line)
        elif line.startswith("$$"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip().endswith("$$")), i)
            if line.strip() != "$$" and line.rstrip().endswith("$$") and len(line.strip()) > 2:
                end = i
            block = "".join(lines[i : end + 1])
            if _MATH_WORDS.search(block):  # words in a formula (\text{model FLOPs}): the reader's language
                core = block.strip()
                pieces += [Unit(core, first_line + i, kind="math"), block[len(core):]]
            else:
                pieces.append(block)
            i = end + 1
        else:
            end = i
            while end < len(lines) and lines[end].strip() and not _FENCE.match(lines[end].rstrip("\n")) \
                    and not lines[end].startswith("$$"):
                end += 1
            pieces += _block(lines[i:end], first_line + i)
            i = end
    return pieces


def _fenced(lines: list[str], i: int, fence: re.Match, pieces: list[Piece], first_line: int) -> int:
    """Append the pieces of the fenced block opening at ``i``; return the index after it."""
    indent, marks, info = fence.groups()
    close = re.compile(rf"^ {{0,3}}{re.escape(marks[0])}{{{len(marks)},}}\s*$")
    end = next((j for j in range(i + 1, len(lines)) if close.match(lines[j].rstrip("\n"))), len(lines) - 1)
    directive = _DIRECTIVE.match(info.strip())
    if not directive or directive.group(1) not in PROSE_DIRECTIVES:
        pieces.append("".join(lines[i : end + 1]))
        return end + 1
    title = directive.group(2)
    if title:
        head = lines[i]
        start = head.index(title, len(indent) + len(marks))
        pieces += [head[:start], Unit(title, first_line + i), head[start + len(title):]]
    else:
        pieces.append(lines[i])
    body = i + 1
    while body < end and _OPTION.match(lines[body]):
        pieces.append(lines[body])
        body += 1
    pieces += split_myst("".join(lines[body:end]), first_line=first_line + body)
    if end > i:
        pieces.append(lines[end])
    return end + 1


def _block(lines: list[str], first_line: int) -> list[Piece]:
    """The pieces of a run of non-blank lines outside fences."""
    pieces: list[Piece] = []
    prose: list[str] = []
    prose_start = 0

    def flush() -> None:
        nonlocal prose
        if prose:
            pieces.extend(_unit_with_ends("".join(prose), first_line + prose_start))
        prose = []

    for n, line in enumerate(lines):
        bare = line.rstrip("\n")
        heading = _HEADING.match(bare)
        item = _ITEM.match(line)
        if _LABEL.match(bare) or bare.strip() == "+++" or bare.lstrip().startswith("<!--"):
            flush()
            pieces.append(line)
        elif heading:
            flush()
            pieces += [heading.group(1), Unit(heading.group(2), first_line + n),
                       heading.group(3) + line[len(bare):]]
        elif bare.lstrip().startswith("|"):
            flush()
            pieces += _table_row(line, first_line + n)
        elif item:
            flush()
            pieces.append(item.group(1))
            prose, prose_start = [line[item.end():]], n
        else:
            if not prose:
                prose_start = n
            prose.append(line)
    flush()
    return pieces


def _unit_with_ends(text: str, line: int) -> list[Piece]:
    """``text`` as [leading whitespace, Unit, trailing whitespace] (the unit without them)."""
    core = text.strip()
    if not core:
        return [text]
    start = text.index(core)
    return [p for p in (text[:start], Unit(core, line), text[start + len(core):]) if p != ""]


def _table_row(line: str, line_no: int) -> list[Piece]:
    """A table row: each cell with a letter in it is a unit; pipes, padding and separators verbatim."""
    if _TABLE_SEPARATOR.match(line.strip()):
        return [line]
    pieces: list[Piece] = []
    for cell in re.split(r"(?<!\\)(\|)", line):
        if cell == "|" or not _translatable(cell):
            pieces.append(cell)
        else:
            pieces += _unit_with_ends(cell, line_no)
    return pieces


def _translatable(text: str) -> bool:
    """True when ``text`` holds a letter outside inline code and is not one identifier such as
    ``float32`` (a cell of only code or a dtype name stays verbatim)."""
    text = re.sub(r"`[^`]*`", "", text).strip()
    return bool(_LETTER.search(text)) and not _IDENTIFIER.fullmatch(text)


# --- exercise sources ------------------------------------------------------------------------------

def is_student_cell(meta: dict) -> bool:
    """An nbgrader cell the student writes in (a solution cell that is neither graded nor locked)."""
    return bool(meta.get("solution")) and not meta.get("grade") and not meta.get("locked")


def split_python(code: str, *, first_line: int = 1) -> list[Piece]:
    """The pieces of a student cell: docstring paragraphs and comments are units, the rest verbatim.

    Marker comments (``### BEGIN SOLUTION`` ...) and nbgrader's ``# YOUR CODE HERE`` stay verbatim.
    Code that does not tokenize is kept whole (nothing of it is translated)."""
    lines = code.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    spans: list[tuple[int, int, list[Piece]]] = []
    previous = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            start = offsets[token.start[0] - 1] + token.start[1]
            end = offsets[token.end[0] - 1] + token.end[1]
            if token.type == tokenize.COMMENT and marker(token.string) is None \
                    and _STUB_COMMENT not in token.string:
                body = token.string.lstrip("#").strip()
                if _translatable(body):
                    lead = token.string[: token.string.index(body)]
                    spans.append((start, end, [lead, Unit(body, first_line + token.start[0] - 1,
                                                          "comment")]))
            elif token.type == tokenize.STRING and previous in (tokenize.INDENT, tokenize.NEWLINE, None) \
                    and token.string.endswith(('"""', "'''")):
                indent = " " * token.start[1]
                spans.append((start, end, _docstring(token.string, first_line + token.start[0] - 1,
                                                     indent)))
            if token.type not in (tokenize.NL, tokenize.COMMENT):
                previous = token.type
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return [code]
    pieces: list[Piece] = []
    at = 0
    for start, end, inner in spans:
        pieces += [code[at:start], *inner]
        at = end
    pieces.append(code[at:])
    return [p for p in pieces if p != ""]


def _docstring(literal: str, line: int, indent: str) -> list[Piece]:
    """A triple-quoted literal: quotes and blank lines verbatim, each paragraph a unit."""
    quote = literal[-3:]
    head = literal[: literal.index(quote) + 3]
    inner = literal[len(head) : -3]
    pieces: list[Piece] = [head]
    at = line
    for part in re.split(r"(\n[ \t]*\n)", inner):
        if re.fullmatch(r"\n[ \t]*\n", part) or not part.strip():
            pieces.append(part)
        else:
            core = part.strip()
            start = part.index(core)
            pieces += [part[:start], Unit(core, at + part[:start].count("\n"), "docstring", indent),
                       part[start + len(core):]]
        at += part.count("\n")
    pieces.append(quote)
    return [p for p in pieces if p != ""]


def units(pieces: list[Piece]) -> list[Unit]:
    """The units among ``pieces``, in order."""
    return [p for p in pieces if isinstance(p, Unit)]


def join(pieces: list[Piece]) -> str:
    """The text the pieces came from."""
    return "".join(p.text if isinstance(p, Unit) else p for p in pieces)
