"""What a translation must keep from its English unit, checked entry by entry of a catalogue.

- **complete**: every entry has a msgstr and none is ``#, fuzzy`` (stale);
- **numbers**: the set of numbers of the msgstr is the set of numbers of the msgid (NFKC, so full-width
  digits count; ``1,024`` is ``1024``), code spans and math aside (they are compared whole);
- **code**: inline code, MyST roles (role name and target; a role's shown title may be translated),
  ``$...$`` math and link targets occur in the msgstr exactly as in the msgid;
- **glossary**: an English glossary term in the msgid (word, plural too, outside code) needs its Taiwan
  term in the msgstr; a translator comment ``glossary-ok: <term>`` exempts one entry from one term;
- **Simplified**: OpenCC ``s2twp`` leaves the msgstr unchanged, once the glossary's own terms (the
  course's chosen vocabulary, e.g. 參數, which s2twp's phrase table rewrites) are set aside.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import polib

from autograder.i18n import LOCALES_DIR

_ROLE = re.compile(r"\{([\w:.-]+)\}(`+)(.+?)\2")
_CODE = re.compile(r"(?<!\})(`+)(.+?)\1")
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\s](?:[^$]*?[^$\s])?\$")
_LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
_EXEMPT = re.compile(r"glossary-ok:\s*([^\n;]+)")


@dataclass(frozen=True)
class Problem:
    """One finding: the catalogue, the entry's English (shortened) and its source line, what is wrong."""

    path: str
    where: str
    kind: str  # "missing", "fuzzy", "numbers", "code", "glossary", "simplified"
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.where}: {self.kind}: {self.message}"


def glossary_path(language: str, root: Path = Path(".")) -> Path:
    return Path(root) / LOCALES_DIR / language / "glossary.tsv"


def read_glossary(path: Path) -> dict[str, str]:
    """English term -> target-language term, from a TAB-separated file (``#`` lines are comments)."""
    terms: dict[str, str] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            english, target = line.split("\t")[:2]
            terms[english.strip()] = target.strip()
    return terms


def protected(text: str) -> Counter[str]:
    """What must come through untouched: code spans, roles (name and target), math, link targets."""
    found: Counter[str] = Counter()
    rest = text
    for match in _ROLE.finditer(text):
        content = match.group(3)
        target = re.search(r"<([^>]+)>\s*$", content)
        found[f"{{{match.group(1)}}}{target.group(1) if target else content}"] += 1
    rest = _ROLE.sub(" ", rest)
    for pattern in (_CODE, _MATH, _LINK_TARGET):
        found.update(m.group(0) for m in pattern.finditer(rest))
        rest = pattern.sub(" ", rest)
    return found


def prose(text: str) -> str:
    """``text`` without what ``protected`` finds (numbers and words inside code are not prose)."""
    for pattern in (_ROLE, _CODE, _MATH, _LINK_TARGET):
        text = pattern.sub(" ", text)
    return text


def numbers(text: str) -> set[str]:
    """The numbers of the prose of ``text`` (NFKC-normalized, thousands separators dropped)."""
    plain = unicodedata.normalize("NFKC", prose(text))
    return {m.group(0).replace(",", "") for m in _NUMBER.finditer(plain)}


def _term(english: str) -> re.Pattern:
    return re.compile(rf"(?<![\w-]){re.escape(english)}(?:s|es)?(?![\w-])", re.IGNORECASE)


@cache
def _converter():
    import opencc

    return opencc.OpenCC("s2twp")


def simplified(text: str, glossary: dict[str, str]) -> str | None:
    """What OpenCC ``s2twp`` would change in ``text`` (None when nothing), glossary terms set aside."""
    plain = prose(text)
    for target in sorted(set(glossary.values()), key=len, reverse=True):
        plain = plain.replace(target, "\u3000")
    converted = _converter().convert(plain)
    if converted == plain:
        return None
    changed = [f"{a}->{b}" for a, b in zip(plain, converted, strict=False) if a != b]
    return ", ".join(changed[:5]) or f"{plain!r} -> {converted!r}"


def check_entry(entry: polib.POEntry, glossary: dict[str, str]) -> list[tuple[str, str]]:
    """``(kind, message)`` for each problem of one entry (module docstring)."""
    if not entry.msgstr.strip():
        return [("missing", "no translation")]
    found: list[tuple[str, str]] = []
    if "fuzzy" in entry.flags:
        found.append(("fuzzy", "the English changed since this was translated (see #| msgid)"))
    en, zh = entry.msgid, entry.msgstr
    if numbers(en) != numbers(zh):
        found.append(("numbers", f"English has {sorted(numbers(en))}, translation {sorted(numbers(zh))}"))
    lost, added = protected(en) - protected(zh), protected(zh) - protected(en)
    if lost or added:
        found.append(("code", f"not byte-identical: missing {sorted(lost)}, extra {sorted(added)}"))
    exempt = {t.strip().lower() for m in _EXEMPT.finditer(entry.tcomment or "") for t in
              m.group(1).split(",")}
    for english, target in glossary.items():
        if english.lower() in exempt or not _term(english).search(prose(en)):
            continue
        if target not in zh:
            found.append(("glossary", f"{english!r} is {target!r} in the glossary"))
    change = simplified(zh, glossary)
    if change:
        found.append(("simplified", f"OpenCC s2twp would change {change}"))
    return found


def check_catalogue(path: Path, glossary: dict[str, str], *, shown: str | None = None) -> list[Problem]:
    """Every problem of the live (non-obsolete) entries of one ``.po`` file."""
    po = polib.pofile(str(path))
    problems = []
    for entry in po:
        if entry.obsolete:
            continue
        ref = ":".join(entry.occurrences[0]) if entry.occurrences else entry.msgctxt
        where = f"{ref} {entry.msgid[:50]!r}"
        problems += [Problem(shown or str(path), where, kind, message)
                     for kind, message in check_entry(entry, glossary)]
    return problems
