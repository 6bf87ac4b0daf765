"""Search a Taiwanese reader can rely on (issue 45): the zh-TW edition's Chinese search finds every
glossary term and every word of ``locales/zh_TW/search-terms.txt`` (technical words drawn from the
pages, 2-6 characters) on every page whose text contains it.

Sphinx's Chinese search segments with jieba, whose dictionary is Simplified: it cuts Traditional words
(捨入 -> 捨/入) and drops the single characters, and ``searchtools.js`` matches a query against whole
index terms (one of more than 2 characters also inside a longer term), so a word jieba cut is found
nowhere. ``_ext/language_switch.py`` indexes each word of the edition's dictionary
(``autograder.i18n.pages.search_words``: glossary, bold terms, search-terms.txt) wherever a text holds
it. The measurement that chose this over indexing every CJK n-gram is in the extension's docstring.

The index tests read the built site (``make site``; ``ZH_TW_HTML`` names another build of the zh-TW
edition's html folder); the splitter tests need only Sphinx and jieba.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from site_extensions import extension

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = "zh_TW"
ZH_HTML = Path(os.environ.get("ZH_TW_HTML", ROOT / "_build" / "html" / "zh-tw"))
CJK_WORD = re.compile(r"[\u3400-\u9fff]{2,6}")
# The words the native review (../shared/reviews/zh-tw-review.md, S1) searched for and did not find.
REVIEW_WORDS = ("捨入", "資源估算", "餐巾紙", "記憶體對映", "多頭注意力", "上下文長度", "記憶體頻寬",
                "配置器", "損失縮放", "因果遮罩")


def search_list() -> list[str]:
    """Every glossary term written in Chinese characters and every word of search-terms.txt."""
    from autograder.i18n.checks import glossary_path, read_terms

    locale = ROOT / "locales" / LANGUAGE
    words = [t.target for t in read_terms(glossary_path(LANGUAGE, ROOT))]
    words += [line.strip() for line in (locale / "search-terms.txt").read_text(encoding="utf-8").splitlines()
              if line.strip() and not line.startswith("#")]
    return [w for w in dict.fromkeys(words) if CJK_WORD.fullmatch(w)]


def test_the_search_list_is_long_and_has_the_review_words():
    words = search_list()
    assert len(words) >= 200, len(words)
    assert set(REVIEW_WORDS) <= set(words), set(REVIEW_WORDS) - set(words)


def _splitter(tmp_path: Path, words: list[str]):
    pytest.importorskip("jieba")
    search_language = extension("language_switch").search_language
    dictionary = tmp_path / "search-dictionary.txt"
    dictionary.write_text("".join(f"{w}\n" for w in words), encoding="utf-8")
    language = search_language()({"dict": str(dictionary)})
    return language


def test_the_splitter_keeps_the_dictionary_words_jieba_cuts(tmp_path):
    """Sentences as the pages have them (chapters 02 and 11). With these words in its user dictionary
    jieba still cuts 是非/同步 and 記憶體配置/器: the old rule (dictionary words only inside tokens
    longer than 3 characters) lost 非同步 and 配置器 there."""
    words = ["捨入", "記憶體對映", "權重衰減", "多頭注意力", "非同步", "配置器", "記憶體", "記憶體配置"]
    language = _splitter(tmp_path, words)
    tokens = set(language.split("GPU 呼叫是非同步的，所以計時器必須等待；cudaMalloc 與記憶體配置器在"
                                "每張 GPU 上。捨入到最接近的值，以記憶體對映讀取；解耦權重衰減與多頭注意力。"))
    assert {"非同步", "配置器", "捨入", "記憶體對映", "權重衰減", "多頭注意力"} <= tokens, sorted(tokens)


def test_the_splitter_indexes_no_word_outside_its_dictionary(tmp_path):
    """No n-grams: a word that is only part of another (元組 in 位元組) is not indexed."""
    language = _splitter(tmp_path, ["位元組"])
    assert "元組" not in language.split("每個參數佔 16 個位元組。")


def _search_index() -> dict:
    path = ZH_HTML / "searchindex.js"
    if not path.is_file():
        pytest.skip(f"no zh-TW build at {ZH_HTML}: run `make site` first")
    raw = path.read_text(encoding="utf-8")
    return json.loads(raw[raw.index("(") + 1: raw.rindex(")")])


def _article_text(docname: str) -> str:
    """The page's text as the index sees it: the article, without the code cells' show/hide buttons
    (顯示程式碼儲存格: the theme's, not the page's)."""
    text = (ZH_HTML / f"{docname}.html").read_text(encoding="utf-8")
    article = re.sub(r"<summary\b.*?</summary>", "", text[text.index("<article"):text.index("</article>")],
                     flags=re.DOTALL)
    return re.sub(r"<[^>]+>", "", article)


def found_by_search(index: dict, word: str) -> set[str]:
    """The pages ``searchtools.js`` (Sphinx 7.4) lists for a one-word query: the word as a term or a
    title term, and for a word of more than 2 characters every term that contains it."""
    def pages(hit) -> set[str]:
        return {index["docnames"][i] for i in ([hit] if isinstance(hit, int) else hit)}

    found: set[str] = set()
    for table in (index["terms"], index["titleterms"]):
        if word in table:
            found |= pages(table[word])
        elif len(word) > 2:
            for term, hit in table.items():
                if word in term:
                    found |= pages(hit)
    return found


def test_every_search_word_is_found_on_the_pages_that_contain_it():
    index = _search_index()
    texts = {d: _article_text(d) for d in index["docnames"]}
    missing = {}
    for word in search_list():
        containing = {d for d, text in texts.items() if word in text}
        lost = containing - found_by_search(index, word)
        if lost:
            missing[word] = sorted(lost)
    assert not missing, f"{len(missing)} words not found on pages that contain them: " + \
        "; ".join(f"{w}: {', '.join(p)}" for w, p in list(missing.items())[:20])
    for word in REVIEW_WORDS:
        assert found_by_search(index, word), f"{word!r} finds nothing"
