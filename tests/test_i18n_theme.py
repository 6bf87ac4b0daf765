"""What the zh-TW edition's theme writes around the pages (report-figures-site.md, S6 and S7, the
site-level leftovers): the hard-coded English attributes no catalogue reaches, the 中英術語對照 page's
header and page labels, and the search words of 4-6 characters jieba split.

The built-site tests read ``make site``'s output (``ZH_TW_HTML`` names another build of the zh-TW
edition's html folder) and skip without one; they build nothing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from site_extensions import extension

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = "zh_TW"
ZH_HTML = Path(os.environ.get("ZH_TW_HTML", ROOT / "_build" / "html" / "zh-tw"))
EN_HTML = ZH_HTML.parent
# Written by sphinx-book-theme (components/toggle-*-sidebar.html, sbt-sidebar-nav.html, layout.html, the
# launch buttons), myst-nb (the hidden cell's <summary>) and sphinx-togglebutton (its JS hints), in
# English with no catalogue behind them; the review found each on the zh-TW pages.
HARD_CODED_ENGLISH = ('title="Toggle primary sidebar"', 'title="Toggle secondary sidebar"',
                      'aria-label="Main"', 'aria-label="Page"', 'aria-label="Toggle hidden content"',
                      'alt="JupyterHub logo"', 'alt="Colab logo"',
                      "toggleHintShow = 'Click to show'", "toggleHintHide = 'Click to hide'")


def _extension():
    return extension("language_switch")


def _pages(html: Path) -> dict[str, str]:
    """Every page of one edition's build (the zh-TW folder left out of the English one's; index.html,
    a redirect, is no page)."""
    if not (ZH_HTML / "intro.html").is_file():
        pytest.skip(f"no zh-TW build at {ZH_HTML}: run `make site` first")
    pages = {str(p.relative_to(html)): p.read_text(encoding="utf-8") for p in sorted(html.rglob("*.html"))
             if not p.relative_to(html).parts[0].startswith("_") and
             (html != EN_HTML or not p.is_relative_to(ZH_HTML))}
    return {page: text for page, text in pages.items() if "<html" in text}


def test_the_built_zh_tw_pages_keep_no_hard_coded_english():
    """The tooltips, screen-reader labels and alt texts of every zh-TW page in Chinese, as many as
    the English twin has in English (the old build: title="Toggle primary sidebar" on 26 pages)."""
    replacements = dict(_extension().hard_coded_replacements(LANGUAGE))
    chinese, english = _pages(ZH_HTML), _pages(EN_HTML)
    left, lost = [], []
    for page, text in chinese.items():
        left += [f"{page}: {s}" for s in HARD_CODED_ENGLISH if s in text]
        for source, target in replacements.items():
            if page in english and english[page].count(source) != text.count(target):
                lost.append(f"{page}: {english[page].count(source)} x {source}, {text.count(target)} x {target}")
    assert not left, f"{len(left)} English strings on zh-TW pages:\n" + "\n".join(left[:20])
    assert not lost, "\n".join(lost[:20])
    assert "let toggleHintShow = '點選以顯示';" in chinese["intro.html"]


def test_the_english_pages_keep_their_english():
    """The English build is untouched: every string is still there, none of the translations is."""
    english = _pages(EN_HTML)
    texts = "\n".join(english.values())
    for source in HARD_CODED_ENGLISH:
        assert source in texts, f"{source} gone from the English pages"
    assert all('title="Toggle primary sidebar"' in text for text in english.values())
    for target in dict(_extension().hard_coded_replacements(LANGUAGE)).values():
        assert target not in texts, target


def test_each_hard_coded_string_is_an_exact_attribute():
    """Only whole attributes are replaced (no prose word such as "Main" or "Page" is touched), and
    each has a translation without ASCII letters but the product names."""
    pairs = _extension().hard_coded_replacements(LANGUAGE)
    assert {source for source, _ in pairs} == {s for s in HARD_CODED_ENGLISH if "=" in s and "Hint" not in s}
    for source, target in pairs:
        assert re.fullmatch(r'[a-z-]+="[^"]+"', source) and target.split("=")[0] == source.split("=")[0]
        assert not re.sub(r"JupyterHub|Colab", "", target.split("=", 1)[1]).isascii(), target
    assert _extension().hard_coded_replacements("en") == []


# --- the 中英術語對照 page ---------------------------------------------------------------------------

GLOSSARY = """# a comment
tensor\t張量\tfirst
Check yourself\t自我檢測\tretired=自我檢查; label
Next:\t下一頁：\tlabel; retired=下一步：
notebook\tnotebook\tretired=筆記本
"""


def test_the_terminology_page_has_a_chinese_header_and_leaves_the_labels_out(tmp_path):
    """A glossary line with the option ``label`` (a page label, not a term a reader looks up) is not
    on the page; its other options still hold for the checks (the parsed term keeps them)."""
    from autograder.i18n.pages import _glossary, _glossary_lines, terminology_page

    glossary = tmp_path / "locales" / LANGUAGE / "glossary.tsv"
    glossary.parent.mkdir(parents=True)
    glossary.write_text(GLOSSARY, encoding="utf-8")
    page = terminology_page(LANGUAGE, tmp_path)
    assert "| 英文 | 本版用語 | 首次出現 |" in page and "| English |" not in page
    assert "| tensor | 張量 | 張量（tensor） |" in page and "| notebook | notebook |  |" in page
    assert "Check yourself" not in page and "Next:" not in page
    lines = _glossary_lines(LANGUAGE, tmp_path)
    assert [(t.english, label) for t, label in lines] == [
        ("tensor", False), ("Check yourself", True), ("Next:", True), ("notebook", False)]
    assert lines[1][0].retired == ("自我檢查",) and lines[2][0].retired == ("下一步：",)
    assert [t.english for t in _glossary(LANGUAGE, tmp_path)] == [t.english for t, _ in lines]


def test_the_course_glossary_reads_as_before():
    """The page reads the checks' terms, one row each but for the labels ("Check yourself", "Next:")."""
    from autograder.i18n.checks import glossary_path, read_terms
    from autograder.i18n.pages import _glossary_lines, terminology_page

    lines = _glossary_lines(LANGUAGE, ROOT)
    assert [t for t, _ in lines] == read_terms(glossary_path(LANGUAGE, ROOT))
    assert {t.english for t, label in lines if label} == {"Check yourself", "Next:"}
    page = terminology_page(LANGUAGE, ROOT)
    assert page.startswith("# 中英術語對照") and "| 英文 | 本版用語 | 首次出現 |" in page
    for term, label in lines:
        assert (f"\n| {term.english} | {term.target} |" in page) is not label, term.english


# --- search: the 4-6 character words the review searched for ----------------------------------------

@pytest.mark.parametrize("word", ["標稱容量", "分塊交叉熵", "逐元素運算", "混合精度訓練", "記憶體估算"])
def test_a_whole_word_finds_every_page_that_holds_it(word):
    """標稱容量 was indexed only as 標稱 + 容量 and 分塊交叉熵 as 分塊 + 交叉熵: the whole word found
    no page (tests/test_i18n_search.py's replay of searchtools.js)."""
    from test_i18n_search import _article_text, _search_index, found_by_search

    index = _search_index()
    holding = {d for d in index["docnames"] if word in _article_text(d)}
    assert holding, f"no page holds {word}"
    assert holding <= found_by_search(index, word), sorted(holding - found_by_search(index, word))
