"""English source + catalogue -> translated source. What is not translated shows as English, marked.

A unit whose hash has a translated entry becomes its ``msgstr``; any other unit (missing, empty or
fuzzy) keeps its English text behind ``UNTRANSLATED_MARK``, and is counted, so a stale translation is
never shown as current. Everything that is not a unit (code, math, labels, markers) is copied as is.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autograder.i18n.segment import Piece, Unit

UNTRANSLATED_MARK = "〔尚未翻譯〕"


@dataclass
class Rendered:
    text: str
    translated: int = 0
    untranslated: list[Unit] = field(default_factory=list)


def render(pieces: list[Piece], translations: dict[str, str], *, mark: str = UNTRANSLATED_MARK
           ) -> Rendered:
    """The text of ``pieces`` with each unit replaced by its translation (module docstring)."""
    out: list[str] = []
    done = Rendered("")
    for piece in pieces:
        if not isinstance(piece, Unit):
            out.append(piece)
        elif piece.key in translations:
            out.append(_one_line(translations[piece.key], piece))
            done.translated += 1
        else:
            out.append(f"{mark} {piece.text}" if mark else piece.text)
            done.untranslated.append(piece)
    done.text = "".join(out)
    return done


def _one_line(text: str, unit: Unit) -> str:
    """A translation as its unit's place needs it: prose and comments on one line, a docstring's lines at its indentation (a line break
    between two Chinese characters becomes nothing, elsewhere a space)."""
    if unit.kind == "docstring":
        lines = [line.strip() for line in text.strip().split("\n")]
        return ("\n" + unit.indent).join(lines)
    parts = [p.strip() for p in text.strip().split("\n")]
    joined = parts[0] if parts else ""
    for part in parts[1:]:
        wide = joined[-1:] > "\u2e7f" and part[:1] > "\u2e7f"
        joined += part if wide else " " + part
    return joined
