"""Generate a translated edition's book sources under ``_build/i18n/<lang>/book/`` (never in git).

The generated book is the English book with every prose unit translated from its catalogue: same
``_toc.yml`` (captions translated), same code cells byte for byte (so the English build's jupyter-cache
answers every page: ``execute.cache`` points at it), the release's translated notebooks as the exercise
pages, ``language`` set for Sphinx (its Chinese search, the theme's strings) and the language switch
pointing back to the English edition. ``make site`` builds it into ``_build/html/<folder>/``.

Files only this edition has: ``figure-translations.json`` (``figures.po`` as a table: the zh-TW labels
``_ext/figure_i18n.py`` draws the figures with), and two generated from ``locales/<lang>/glossary.tsv``:

- ``terminology.md``, the 中英術語對照 page (last in the Reference part; no language switch);
- ``search-dictionary.txt``, the jieba user dictionary Sphinx's Chinese search segments the pages with
  (``html_search_options["dict"]``): the glossary's terms, the terms the catalogues set in bold
  (**鎖頁**, **屋頂線**) and ``locales/<lang>/search-terms.txt``. Without it jieba's
  Simplified-trained dictionary splits 最佳化器 into 最佳/化器, and a reader who types the glossary's
  own word finds nothing (``_ext/language_switch.py`` also indexes a word inside a longer one).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import polib
import yaml

from autograder.course.source import ASSIGNMENTS
from autograder.i18n import LANGUAGES, figures
from autograder.i18n.catalogue import catalogue_path, sources, translations
from autograder.i18n.render import render
from autograder.i18n.segment import split_myst

BUILD_DIR = Path("_build") / "i18n"
COPIED = ("_ext", "references.bib", "data")
NOTES_DIR = "notes"  # locales/<lang>/notes/<page>.md: text of this edition only (after the page's title)
TERMINOLOGY = "terminology"  # the glossary as a page of this edition only
SEARCH_DICTIONARY = "search-dictionary.txt"
FIGURE_TRANSLATIONS = "figure-translations.json"  # figures.po as a table for _ext/figure_i18n.py
SEARCH_TERMS = "search-terms.txt"  # locales/<lang>/: compounds to keep whole that no rule above finds
LINK_QUOTES = {"zh_TW": "〈〉"}  # a {doc} link in a sentence is a title: 這正是〈先在餐巾紙上算一算〉一開始用的數字
_CJK = "\u3400-\u9fff"
_BOLD = re.compile(rf"\*\*([{_CJK}]{{2,5}})\*\*")  # a term set in bold, not a phrase


@dataclass
class EditionReport:
    book: Path
    translated: int = 0
    untranslated: dict[str, int] = field(default_factory=dict)  # page -> units shown in English

    @property
    def missing(self) -> int:
        return sum(self.untranslated.values())


def book_dir(language: str, root: Path = Path(".")) -> Path:
    return Path(root) / BUILD_DIR / language / "book"


def translated_notebook(assignment: str, language: str) -> str:
    """The release file name of an exercise's translated notebook (``01_strides.zh-TW.ipynb``)."""
    return f"{assignment}.{LANGUAGES[language]['tag']}.ipynb"


def write_book(language: str, root: Path = Path(".")) -> EditionReport:
    """Write the translated book of ``language`` into ``book_dir``: files whose bytes changed are
    rewritten, files no longer generated removed, the others left alone (so Sphinx rebuilds only what
    changed)."""
    root = Path(root).resolve()
    book = book_dir(language, root)
    files, report = book_files(language, root, cache=root / "_build" / ".jupyter_cache")
    old = {p.relative_to(book).as_posix() for p in book.rglob("*") if p.is_file()} if book.is_dir() \
        else set()
    for name in sorted(old - set(files)):
        (book / name).unlink()
    for name, data in files.items():
        path = book / name
        if not path.is_file() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    report.book = book
    return report


def book_files(language: str, root: Path, *, cache: Path | str) -> tuple[dict[str, bytes], EditionReport]:
    """Relative path -> bytes of every file of the translated book, and what it left untranslated.
    ``cache``: the English build's jupyter-cache, as the book's ``execute.cache`` names it."""
    root = Path(root)
    files: dict[str, bytes] = {}
    report = EditionReport(Path())
    for name in COPIED:
        path = root / name
        found = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else \
            [path] if path.is_file() else []
        for item in found:
            if "__pycache__" not in item.parts:
                files[item.relative_to(root).as_posix()] = item.read_bytes()
    for helper in sorted((root / "chapters").glob("_*.py")):
        files[f"chapters/{helper.name}"] = helper.read_bytes()
    for page in (s for s in sources(root) if s.endswith(".md")):
        pieces = split_myst((root / page).read_text(encoding="utf-8"))
        done = render(pieces, translations(catalogue_path(page, language, root)),
                      link_quotes=LINK_QUOTES.get(language, ""))
        text = _with_note(done.text, root / "locales" / language / NOTES_DIR / page)
        files[page] = text.encode("utf-8")
        report.translated += done.translated
        if done.untranslated:
            report.untranslated[page] = len(done.untranslated)
    for assignment in ASSIGNMENTS:
        released = root / "exercises" / assignment / translated_notebook(assignment, language)
        if released.is_file():
            files[f"exercises/{assignment}/{assignment}.ipynb"] = released.read_bytes()
    files[f"{TERMINOLOGY}.md"] = terminology_page(language, root).encode("utf-8")
    files[SEARCH_DICTIONARY] = "".join(f"{word}\n" for word in search_words(language, root)).encode("utf-8")
    files[FIGURE_TRANSLATIONS] = json.dumps(figures.translations(language, root), ensure_ascii=False,
                                            indent=0, sort_keys=True).encode("utf-8")
    files["_toc.yml"] = _translated_toc(language, root).encode("utf-8")
    config = book_config(language, root)
    config["execute"]["cache"] = str(cache)
    # the English build's figure captures, beside its cache (_ext/figure_i18n.py)
    config["sphinx"]["config"]["figure_captures"] = str(Path(cache).parent / "figures")
    config["sphinx"]["config"]["figure_translations"] = FIGURE_TRANSLATIONS
    # the dictionary's hash in the config: a changed dictionary makes Sphinx re-index every page
    config["sphinx"]["config"]["html_search_options"]["dict_sha256"] = \
        hashlib.sha256(files[SEARCH_DICTIONARY]).hexdigest()[:16]
    files["_config.yml"] = yaml.safe_dump(config, allow_unicode=True, sort_keys=False).encode("utf-8")
    return dict(sorted(files.items())), report


def book_config(language: str, root: Path) -> dict:
    """The English ``_config.yml`` with this edition's language, title, switch and place in the
    student repository (``<folder>/``, where ``autograder publish`` writes this book)."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    info = LANGUAGES[language]
    title = translations(catalogue_path("_config.yml", language, root))
    config["title"] = _translated_line(config["title"], title)
    if config.get("author"):
        config["author"] = _translated_line(config["author"], title)
    config.setdefault("execute", {})
    repository = config.setdefault("repository", {})  # its launch buttons open the edition's own files
    repository["path_to_book"] = "/".join(p for p in (repository.get("path_to_book"), info["folder"]) if p)
    sphinx = config.setdefault("sphinx", {}).setdefault("config", {})
    sphinx["language"] = info["sphinx"]
    sphinx["language_switch"] = [{"href": "../", "label": "English", "lang": "en"}] + [
        {"href": f"../{other['folder']}/", "label": other["name"], "lang": other["tag"]}
        for code, other in LANGUAGES.items() if code != language]
    sphinx["language_switch_own_pages"] = [TERMINOLOGY]
    sphinx["html_search_options"] = {"dict": SEARCH_DICTIONARY}  # _ext/language_switch.py resolves it
    return config


def _translated_line(english: str, found: dict[str, str]) -> str:
    from autograder.i18n.segment import unit_hash

    return found.get(unit_hash(english), english)


def _translated_toc(language: str, root: Path) -> str:
    """The English ``_toc.yml`` with each part's caption translated (same files, same order)."""
    prefix = "- caption: "
    found = translations(catalogue_path("_toc.yml", language, root))
    lines = (root / "_toc.yml").read_text(encoding="utf-8").splitlines(keepends=True)
    for n, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped.startswith(prefix):
            english = stripped[len(prefix):].strip()
            lines[n] = f"{line[: len(line) - len(stripped)]}{prefix}{_translated_line(english, found)}\n"
    last = len(lines) - 1 - next(n for n, line in enumerate(reversed(lines)) if "- file:" in line)
    indent = lines[last][: len(lines[last]) - len(lines[last].lstrip())]
    lines.insert(last + 1, f"{indent}- file: {TERMINOLOGY}\n")  # the glossary, last in the Reference part
    return "".join(lines)


def _glossary(language: str, root: Path) -> list:
    """The glossary's terms (none for a course without this language's glossary)."""
    return [term for term, _ in _glossary_lines(language, root)]


def _glossary_lines(language: str, root: Path) -> list[tuple]:
    """Each glossary term and whether its line carries the option ``label``: a label of the pages (a
    heading, a link's lead-in such as "Check yourself" or "Next:") that the checks hold to one
    rendering but that is no term a reader looks up, so the 中英術語對照 page leaves it out."""
    from autograder.i18n.checks import Term, glossary_path

    path = glossary_path(language, root)
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    terms = [Term.parse(line) for line in lines if line.strip() and not line.startswith("#")]
    return [(term, term.label) for term in terms]


def search_words(language: str, root: Path) -> list[str]:
    """The words jieba must keep whole (module docstring), sorted, each once."""
    locale = Path(root) / "locales" / language
    words = {t.target for t in _glossary(language, root)}
    for path in sorted(locale.rglob("*.po")):
        for entry in polib.pofile(str(path)):
            if entry.msgstr and not entry.obsolete:
                words.update(_BOLD.findall(entry.msgstr))
    extra = locale / SEARCH_TERMS
    if extra.is_file():
        words.update(line.strip() for line in extra.read_text(encoding="utf-8").splitlines()
                     if line.strip() and not line.startswith("#"))
    cjk = re.compile(rf"[{_CJK}]{{2,}}")
    return sorted(w for w in words if cjk.fullmatch(w) and "的" not in w)


def terminology_page(language: str, root: Path) -> str:
    """The 中英術語對照 page, written for a reader: one row per glossary term, the English, the word
    this edition uses and, where there is one, the form its first use on a page takes (the renderings
    a term replaced are for maintainers: they stay in ``glossary.tsv``; so do the page labels, lines
    with the option ``label``)."""
    rows = []
    terms = [term for term, label in _glossary_lines(language, root) if not label]
    for term in sorted(terms, key=lambda t: t.english.lower()):
        first = f"{term.target}（{term.first}）" if term.first else ""
        rows.append(f"| {term.english} | {term.target} | {first} |")
    return "\n".join([
        "# 中英術語對照", "",
        "讀英文資料、論文或 PyTorch 文件時，可以用這張表找到本書中文用語對應的英文。每個術語在所有頁面與練習中"
        "只用一種譯法；標有「首次出現」寫法的術語，在每一頁第一次出現時都附上英文（或中文說明）。"
        "程式碼中的識別字一律不翻譯。", "",
        "| 英文 | 本版用語 | 首次出現 |", "| --- | --- | --- |", *rows, ""])


def _with_note(text: str, note: Path) -> str:
    """``text`` with the edition's own note (if any) inserted after the page's first ``# `` title."""
    if not note.is_file():
        return text
    lines = text.splitlines(keepends=True)
    at = next((n for n, line in enumerate(lines) if line.startswith("# ")), -1) + 1
    return "".join([*lines[:at], "\n", note.read_text(encoding="utf-8").rstrip("\n") + "\n", *lines[at:]])
