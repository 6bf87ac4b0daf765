"""Translation catalogues: one gettext ``.po`` per page or exercise, each entry keyed by its English unit.

    intro.md                          -> locales/<lang>/intro.po
    chapters/00_napkin_math.md        -> locales/<lang>/chapters/00_napkin_math.po
    solutions/01_strides/01_strides.py -> locales/<lang>/exercises/01_strides.po

An entry's ``msgctxt`` is ``segment.unit_hash`` of the English text, ``msgid`` the English text
(normalized, for review), ``msgstr`` the translation, ``#:`` the source file and line. ``update``
rewrites a catalogue from its source: entries are carried over by hash; when an English unit changed,
the closest old translation comes back ``#, fuzzy`` with ``#| msgid`` (the previous English), and
translations that match nothing stay as obsolete ``#~`` entries. Only a non-empty, non-fuzzy msgstr
counts as translated.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

import polib

from autograder.course.source import SOURCE_DIR, SOURCES_GLOB, read_source_cells, regions
from autograder.i18n import LOCALES_DIR
from autograder.i18n.segment import Piece, Unit, is_student_cell, split_myst, split_python, units

PAGES = ("intro.md", "chapters/[0-9]*.md", "references.md")
BOOK_FILES = {"_config.yml": ("title:", "author:"), "_toc.yml": ("- caption:",)}  # file -> the keys of its
# one-line units
EXERCISES = SOURCES_GLOB
FUZZY_CUTOFF = 0.6


def sources(root: Path = Path(".")) -> list[str]:
    """Every translated source, relative to ``root``: the book's title and captions, its pages, then
    the exercises."""
    root = Path(root)
    found = [root / name for name in BOOK_FILES if (root / name).is_file()]
    found += [p for pattern in PAGES for p in sorted(root.glob(pattern))]
    found += sorted(root.glob(EXERCISES))
    return [p.relative_to(root).as_posix() for p in found]


def catalogue_path(source: str, language: str, root: Path = Path(".")) -> Path:
    """Where the catalogue of ``source`` (a path relative to the course root) lives."""
    rel = Path(source)
    if rel.parts[0] == SOURCE_DIR:
        rel = Path("exercises") / rel.name
    return Path(root) / LOCALES_DIR / language / rel.with_suffix(".po")


# --- units of a source -----------------------------------------------------------------------------

def student_code(code: str) -> str:
    """A student cell as released: each solution region (markers included) removed."""
    return "\n".join(line for _, line, region in regions(code.split("\n")) if region != "solution")


def cell_pieces(meta: dict, kind: str, text: str, first_line: int = 1) -> list[Piece]:
    """The pieces of one exercise cell: markdown by the MyST rules, a student cell's docstrings and
    comments; any other cell (grade, locked code) is one verbatim piece."""
    if kind == "markdown":
        return split_myst(text, first_line=first_line)
    if is_student_cell(meta):
        return split_python(text, first_line=first_line)
    return [text]


def source_units(source: str, root: Path = Path(".")) -> list[Unit]:
    """The units of a source file, in order (duplicates included)."""
    text = (Path(root) / source).read_text(encoding="utf-8")  # pages and book files
    if source in BOOK_FILES:
        return _yaml_units(text, BOOK_FILES[source])
    if not source.endswith(".py"):
        return units(split_myst(text))
    found: list[Unit] = []
    for cell in read_source_cells(Path(root) / source):
        body = cell.source
        if cell.kind == "code" and is_student_cell(cell.meta):
            body = student_code(body)  # solution lines never reach the student
        found += units(cell_pieces(cell.meta, cell.kind, body, cell.line))
    return found


def _yaml_units(text: str, keys: tuple[str, ...]) -> list[Unit]:
    """One unit per ``key value`` line of a book file (the title and author, each part's caption)."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        key = next((k for k in keys if line.strip().startswith(k)), None)
        if key is not None:
            value = line.strip()[len(key):].strip().strip('"')
            found.append(Unit(value, number))
    return found


# --- the .po files ---------------------------------------------------------------------------------

def is_translated(entry: polib.POEntry) -> bool:
    return bool(entry.msgstr.strip()) and "fuzzy" not in entry.flags and not entry.obsolete


def load(path: Path) -> polib.POFile:
    return polib.pofile(str(path), wrapwidth=100)


def translations(path: Path) -> dict[str, str]:
    """``msgctxt -> msgstr`` of the translated entries of a catalogue (none if it does not exist)."""
    if not Path(path).is_file():
        return {}
    return {e.msgctxt: e.msgstr for e in load(path) if is_translated(e)}


@dataclass
class UpdateResult:
    path: Path
    entries: int = 0
    translated: int = 0
    fuzzy: list[str] = field(default_factory=list)  # msgctxt of entries marked stale by this update
    obsolete: int = 0


def update(source: str, language: str, root: Path = Path(".")) -> UpdateResult:
    """Rewrite the catalogue of ``source`` from its current English units (module docstring)."""
    root = Path(root)
    path = catalogue_path(source, language, root)
    old = load(path) if path.is_file() else polib.POFile(wrapwidth=100)
    by_key = {e.msgctxt: e for e in old if not e.obsolete}
    po = polib.POFile(wrapwidth=100)
    po.metadata = {"Project-Id-Version": "cs336-resource-accounting", "Language": language,
                   "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
                   "Content-Transfer-Encoding": "8bit"}
    result = UpdateResult(path)
    new_entries: dict[str, polib.POEntry] = {}
    for unit in source_units(source, root):
        where = (source, str(unit.line))
        if unit.key in new_entries:
            new_entries[unit.key].occurrences.append(where)
            continue
        was = by_key.get(unit.key)
        entry = polib.POEntry(msgctxt=unit.key, msgid=unit.english, msgstr=was.msgstr if was else "",
                              occurrences=[where], flags=list(was.flags) if was else [],
                              tcomment=was.tcomment if was else "",
                              previous_msgid=was.previous_msgid if was else None)
        if unit.kind != "prose":
            entry.comment = f"python {unit.kind}"
        new_entries[unit.key] = entry
    unused = [e for key, e in by_key.items() if key not in new_entries and e.msgstr.strip()]
    unused += [e for e in old if e.obsolete and e.msgstr.strip()]
    for key, entry in new_entries.items():
        if entry.msgstr or not unused:
            continue
        match = _closest(entry.msgid, unused)
        if match is not None:
            unused.remove(match)
            entry.msgstr, entry.tcomment = match.msgstr, match.tcomment
            entry.flags = ["fuzzy"]
            entry.previous_msgid = match.previous_msgid if "fuzzy" in match.flags and \
                match.previous_msgid else match.msgid
            result.fuzzy.append(key)
    for entry in new_entries.values():
        po.append(entry)
    for entry in unused:
        entry.obsolete, entry.occurrences = True, []
        po.append(entry)
    result.entries = len(new_entries)
    result.translated = sum(is_translated(e) for e in new_entries.values())
    result.obsolete = len(unused)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or _entries(old) != _entries(po):
        po.save(str(path))
    return result


def _entries(po: polib.POFile) -> list[tuple]:
    """What a catalogue says (a file that says the same is left alone, byte for byte)."""
    return [(e.msgctxt, e.msgid, e.msgstr, e.occurrences, e.flags, e.previous_msgid, e.obsolete,
             e.tcomment, e.comment) for e in po]


def _closest(english: str, candidates: list[polib.POEntry]) -> polib.POEntry | None:
    """The candidate whose English (previous English for a fuzzy one) is most like ``english``."""
    best, score = None, FUZZY_CUTOFF
    for entry in candidates:
        for text in (entry.msgid, entry.previous_msgid or ""):
            ratio = difflib.SequenceMatcher(None, english, text).ratio() if text else 0.0
            if ratio > score:
                best, score = entry, ratio
    return best
