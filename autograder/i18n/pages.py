"""Generate a translated edition's book sources under ``_build/i18n/<lang>/book/`` (never in git).

The generated book is the English book with every prose unit translated from its catalogue: same
``_toc.yml`` (captions translated), same code cells byte for byte (so the English build's jupyter-cache
answers every page: ``execute.cache`` points at it), the release's translated notebooks as the exercise
pages, ``language`` set for Sphinx (its Chinese search, the theme's strings) and the language switch
pointing back to the English edition. ``make site`` builds it into ``_build/html/<folder>/``.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from autograder.i18n import LANGUAGES
from autograder.i18n.catalogue import catalogue_path, sources, translations
from autograder.i18n.render import render
from autograder.i18n.segment import split_myst
from autograder.source import ASSIGNMENTS

BUILD_DIR = Path("_build") / "i18n"
COPIED = ("_ext", "references.bib", "data")
NOTES_DIR = "notes"  # locales/<lang>/notes/<page>.md: text of this edition only (after the page's title)


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
    """Write the translated book of ``language`` from the English sources and catalogues."""
    root = Path(root).resolve()
    book = book_dir(language, root)
    if book.exists():
        shutil.rmtree(book)
    book.mkdir(parents=True)
    report = EditionReport(book)
    for name in COPIED:
        if (root / name).is_dir():
            shutil.copytree(root / name, book / name, ignore=shutil.ignore_patterns("__pycache__"))
        elif (root / name).is_file():
            shutil.copy2(root / name, book / name)
    (book / "chapters").mkdir()
    for helper in (root / "chapters").glob("_*.py"):
        shutil.copy2(helper, book / "chapters" / helper.name)
    for page in (s for s in sources(root) if s.endswith(".md")):
        pieces = split_myst((root / page).read_text(encoding="utf-8"))
        done = render(pieces, translations(catalogue_path(page, language, root)))
        text = _with_note(done.text, root / "locales" / language / NOTES_DIR / page)
        (book / page).parent.mkdir(parents=True, exist_ok=True)
        (book / page).write_text(text, encoding="utf-8")
        report.translated += done.translated
        if done.untranslated:
            report.untranslated[page] = len(done.untranslated)
    for assignment in ASSIGNMENTS:
        released = root / "exercises" / assignment / translated_notebook(assignment, language)
        if released.is_file():
            (book / "exercises" / assignment).mkdir(parents=True)
            shutil.copy2(released, book / "exercises" / assignment / f"{assignment}.ipynb")
    shutil.copy2(root / "_toc.yml", book / "_toc.yml")
    _translate_yaml_lines(book / "_toc.yml", "- caption: ", language, root, "_toc.yml")
    (book / "_config.yml").write_text(yaml.safe_dump(book_config(language, root), allow_unicode=True,
                                                     sort_keys=False), encoding="utf-8")
    return report


def book_config(language: str, root: Path) -> dict:
    """The English ``_config.yml`` with this edition's language, title, cache and switch."""
    config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
    info = LANGUAGES[language]
    title = translations(catalogue_path("_config.yml", language, root))
    config["title"] = _translated_line(config["title"], title)
    config.setdefault("execute", {})["cache"] = str(root / "_build" / ".jupyter_cache")
    sphinx = config.setdefault("sphinx", {}).setdefault("config", {})
    sphinx["language"] = info["sphinx"]
    sphinx["language_switch_href"] = "../"
    sphinx["language_switch_label"] = "English"
    sphinx["language_switch_lang"] = "en"
    return config


def _translated_line(english: str, found: dict[str, str]) -> str:
    from autograder.i18n.segment import unit_hash

    return found.get(unit_hash(english), english)


def _translate_yaml_lines(path: Path, prefix: str, language: str, root: Path, source: str) -> None:
    found = translations(catalogue_path(source, language, root))
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    for n, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped.startswith(prefix):
            english = stripped[len(prefix):].strip()
            indent = line[: len(line) - len(stripped)]
            lines[n] = f"{indent}{prefix}{_translated_line(english, found)}\n"
    path.write_text("".join(lines), encoding="utf-8")


def _with_note(text: str, note: Path) -> str:
    """``text`` with the edition's own note (if any) inserted after the page's first ``# `` title."""
    if not note.is_file():
        return text
    lines = text.splitlines(keepends=True)
    at = next((n for n, line in enumerate(lines) if line.startswith("# ")), -1) + 1
    return "".join([*lines[:at], "\n", note.read_text(encoding="utf-8").rstrip("\n") + "\n", *lines[at:]])
