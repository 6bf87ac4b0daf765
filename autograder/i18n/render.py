"""English source + catalogue -> translated source. What is not translated shows as English, marked.

A unit whose hash has a translated entry becomes its ``msgstr``; any other unit (missing, empty or
fuzzy) keeps its English text behind ``UNTRANSLATED_MARK``, and is counted, so a stale translation is
never shown as current. Everything that is not a unit (code, math, labels, markers) is copied as is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autograder.i18n.segment import Piece, Unit

UNTRANSLATED_MARK = "〔尚未翻譯〕"


@dataclass
class Rendered:
    text: str
    translated: int = 0
    untranslated: list[Unit] = field(default_factory=list)


_DOC = re.compile(r"( ?)(〈?)(\{doc\}`[^`]+`)(〉?)( ?)")


def quote_cross_references(text: str, quotes: str) -> str:
    """``text`` with each ``{doc}`` link between ``quotes`` (「〈」「〉」: a page's title in a Chinese
    sentence is a title, 〈先在餐巾紙上算一算〉, not a clause of the sentence), the spaces between it
    and wide text dropped; a link already quoted is left as it is."""
    opening, closing = quotes[0], quotes[1]

    def quoted(m: re.Match) -> str:
        before, after = text[:m.start()][-1:], text[m.end():][:1]
        if m.group(2) or m.group(4):
            return m.group(0)
        space_before = "" if before > "\u2e7f" or not m.group(1) else " "
        space_after = "" if after > "\u2e7f" or not m.group(5) else " "
        return f"{space_before}{opening}{m.group(3)}{closing}{space_after}"

    return _DOC.sub(quoted, text)


def render(pieces: list[Piece], translations: dict[str, str], *, mark: str = UNTRANSLATED_MARK,
           link_quotes: str = "") -> Rendered:
    """The text of ``pieces`` with each unit replaced by its translation (module docstring);
    ``link_quotes`` (``"〈〉"``): the pair a translated unit's ``{doc}`` links are set between."""
    out: list[str] = []
    done = Rendered("")
    for piece in pieces:
        if not isinstance(piece, Unit):
            out.append(piece)
        elif piece.key in translations:
            text = _one_line(translations[piece.key], piece)
            out.append(quote_cross_references(text, link_quotes) if link_quotes else text)
            done.translated += 1
        else:
            out.append(f"{mark} {piece.text}" if mark else piece.text)
            done.untranslated.append(piece)
    done.text = "".join(out)
    return done


def _one_line(text: str, unit: Unit) -> str:
    """A translation as its unit's place needs it: prose and comments on one line, a docstring's lines at its indentation (a line break
    between two Chinese characters becomes nothing, elsewhere a space)."""
    if unit.kind == "math":  # $$ on lines of their own, the formula between them
        body = text.strip().removeprefix("$$").removesuffix("$$").strip()
        return f"$$\n{body}\n$$"
    if unit.kind == "docstring":
        lines = [line.strip() for line in text.strip().split("\n")]
        return ("\n" + unit.indent).join(lines)
    parts = [p.strip() for p in text.strip().split("\n")]
    joined = parts[0] if parts else ""
    for part in parts[1:]:
        wide = joined[-1:] > "\u2e7f" and part[:1] > "\u2e7f"
        joined += part if wide else " " + part
    return joined
