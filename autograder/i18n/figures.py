"""The texts the lecture pages' figures show, as one catalogue per language: ``locales/<lang>/figures.po``.

The English is read from the pages' code cells (their only source), never typed twice: in a cell that
draws text (``set_xlabel``, ``set_title``, ``suptitle``, ``text``, ``legend`` ...), the string
arguments of those calls and every ``label=``, an f-string becoming a pattern with ``{0}``, ``{1}`` ...
for its fields (``measured on {0}``), and the lower-case words listed in the cell's list, tuple and
dict literals (the legend entries of ``for field in ("sign", "exponent", "fraction")``); and, on a page
that draws a figure, every string of any of its cells that a figure may show through a variable: a
dict key, a list or tuple item, a subscript, either side of ``+`` or of ``x if c else y``, with an
English word in it (``"AdamW state": 8 * n`` drawn as a legend entry in a later cell, ``", 1 thread"``
added to a title). A text a figure shows without a translation is reported by ``_ext/figure_i18n.py``. An entry's
msgctxt is the hash of its English, as in the other catalogues; ``update`` keeps translations by it.
``_ext/figure_i18n.py`` draws the zh-TW figures with these translations (``{0}`` in a msgstr is the
text the field had).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import polib

from autograder.i18n import LOCALES_DIR
from autograder.i18n.catalogue import load
from autograder.i18n.segment import unit_hash

PAGES = "chapters/[0-9]*.md"
TEXT_CALLS = frozenset({"set_xlabel", "set_ylabel", "set_title", "suptitle", "supxlabel", "supylabel",
                        "xlabel", "ylabel", "title", "text", "annotate", "legend", "set_label"})
_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_WORDS = re.compile(r"[a-z][a-z ]*[a-z]")


def catalogue_path(language: str, root: Path = Path(".")) -> Path:
    return Path(root) / LOCALES_DIR / language / "figures.po"


def _text(node: ast.AST) -> str | None:
    """A string constant, or an f-string as a pattern (``{0}`` for each field); else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts, n = [], 0
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            else:
                parts.append(f"{{{n}}}")
                n += 1
        return "".join(parts)
    return None


def cell_texts(code: str) -> list[str]:
    """The figure texts of one code cell, in order (module docstring)."""
    lines = [line for line in code.split("\n") if not line.lstrip().startswith(("%", "!", ":"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    names = {getattr(c.func, "attr", getattr(c.func, "id", None)) for c in calls}
    if not names & TEXT_CALLS:
        return []
    found: list[str] = []
    for call in calls:
        if getattr(call.func, "attr", getattr(call.func, "id", None)) in TEXT_CALLS:
            found += [t for t in map(_text, call.args) if t]
        found += [t for k in call.keywords if k.arg == "label" and (t := _text(k.value))]
    options = {id(k.value) for c in calls for k in c.keywords}  # arrowprops={"lw": 1}: not a label
    for node in ast.walk(tree):
        items = node.elts if isinstance(node, ast.List | ast.Tuple) else \
            node.keys if isinstance(node, ast.Dict) and id(node) not in options else []
        found += [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)
                  and _WORDS.fullmatch(i.value)]
    return [t for t in dict.fromkeys(found) if re.search(r"[A-Za-z]{2}", t)]


_ENGLISH_WORD = re.compile(r"(?<![\w.])[a-z]{3,}(?![\w(])")  # "state", not float32 or cuda.synchronize(
_PHRASE = re.compile(r"[A-Za-z0-9)][ -]+[A-Za-z(]|^\W")  # words with a space or a hyphen, or a piece to add


def label_texts(code: str) -> list[str]:
    """The strings of one code cell a figure may show through a variable (module docstring)."""
    lines = [line for line in code.split("\n") if not line.lstrip().startswith(("%", "!", ":"))]
    try:
        tree = ast.parse("\n".join(lines))
    except SyntaxError:
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        items = node.elts if isinstance(node, ast.List | ast.Tuple | ast.Set) else \
            [k for k in node.keys if k is not None] if isinstance(node, ast.Dict) else \
            [node.slice] if isinstance(node, ast.Subscript) else \
            [node.left, node.right] if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) else \
            [node.body, node.orelse] if isinstance(node, ast.IfExp) else []
        texts = [t for t in map(_text, items) if t and _ENGLISH_WORD.search(t)]
        phrases = [t for t in texts if _PHRASE.search(t)]
        # a phrase ("AdamW state", ", 1 thread"); a single word only beside one (the roofline's
        # operations {"add": ..., "16 tokens x 8192² weight": ...}), not a dict of settings
        found += texts if phrases and isinstance(node, ast.Dict) else phrases
    return list(dict.fromkeys(found))


def figure_texts(root: Path = Path(".")) -> list[tuple[str, str, int]]:
    """``(text, page, line)`` for each figure text of the lecture pages, first occurrence only."""
    seen: dict[str, tuple[str, str, int]] = {}
    for page in sorted(Path(root).glob(PAGES)):
        source = page.read_text(encoding="utf-8")
        cells = [(m.group(1), source.count("\n", 0, m.start()) + 1) for m in _CELL.finditer(source)]
        for code, line in cells:
            for text in cell_texts(code):
                seen.setdefault(text, (text, page.relative_to(root).as_posix(), line))
        if any(cell_texts(code) for code, _ in cells):  # a page with a figure
            for code, line in cells:
                for text in label_texts(code):
                    seen.setdefault(text, (text, page.relative_to(root).as_posix(), line))
    return list(seen.values())


def update(language: str, root: Path = Path(".")) -> tuple[Path, int, int]:
    """Rewrite ``figures.po`` from the pages (translations kept by hash, unused ones obsolete);
    returns the path, the number of entries and of translated ones."""
    path = catalogue_path(language, root)
    old = load(path) if path.is_file() else polib.POFile(wrapwidth=100)
    by_key = {e.msgctxt: e for e in old}
    po = polib.POFile(wrapwidth=100)
    po.metadata = {"Project-Id-Version": "cs336-resource-accounting", "Language": language,
                   "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
                   "Content-Transfer-Encoding": "8bit"}
    keys = set()
    for text, page, line in figure_texts(root):
        key = unit_hash(text)
        keys.add(key)
        was = by_key.get(key)
        po.append(polib.POEntry(msgctxt=key, msgid=text, msgstr=was.msgstr if was else "",
                                occurrences=[(page, str(line))], comment="figure text",
                                tcomment=was.tcomment if was else ""))
    for entry in old:
        if entry.msgctxt not in keys and entry.msgstr.strip():
            entry.obsolete, entry.occurrences = True, []
            po.append(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != po.__unicode__():
        po.save(str(path))
    live = [e for e in po if not e.obsolete]
    return path, len(live), sum(bool(e.msgstr.strip()) for e in live)


def translations(language: str, root: Path = Path(".")) -> dict[str, str]:
    """English figure text -> its translation (translated, non-fuzzy entries)."""
    path = catalogue_path(language, root)
    if not path.is_file():
        return {}
    return {e.msgid: e.msgstr for e in load(path)
            if e.msgstr.strip() and not e.obsolete and "fuzzy" not in e.flags}
