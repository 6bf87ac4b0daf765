"""The zh-TW edition of the built site: same pages, Sphinx language zh_TW, language switch both ways,
outputs from the English build's execution cache, and, in headless chromium, every zh-TW page opened,
the switch followed both ways and a page found by a Chinese search term.

Run after `make site` (it builds both editions; the zh-TW build's log is _build/i18n/zh_TW/build.log).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from browser import (
    REPO_ROOT,
    screenshot,
    search_result_links,
    serve_directory,
    unavailable,
)
from test_site_browser import DOCNAMES, html_path, wait_for_mathjax

from autograder.i18n import LANGUAGES
from autograder.i18n.pages import book_dir

LANGUAGE = "zh_TW"
FOLDER = LANGUAGES[LANGUAGE]["folder"]
HTML = REPO_ROOT / "_build" / "html"
ZH_HTML = HTML / FOLDER
BUILD_LOG = REPO_ROOT / "_build" / "i18n" / LANGUAGE / "build.log"
SWITCH = "a.language-switch"
# A term of a translated page (exercise 1's title and text) and the page search must find with it.
SEARCH_TERM, SEARCH_PAGE = "步幅", "exercises/01_strides/01_strides.html"
# Four-character compounds jieba's own dictionary splits (最佳/化器): the search dictionary built from
# the glossary keeps them whole, so every page that contains one is found (issue 31).
COMPOUNDS = ("最佳化器", "前向傳播", "隱藏測試", "混合精度")


def require_build() -> None:
    if not (ZH_HTML / "intro.html").is_file():
        unavailable(f"no zh-TW build at {ZH_HTML}: run `make site` first")


def test_every_page_has_its_zh_tw_twin_with_a_switch():
    require_build()
    for docname in DOCNAMES:
        english, chinese = HTML / html_path(docname), ZH_HTML / html_path(docname)
        assert chinese.is_file(), f"{docname}: no zh-TW page"
        text = chinese.read_text(encoding="utf-8")
        assert '<html lang="zh-TW"' in text, f"{docname}: the zh-TW page is not marked zh-TW"
        for page, other in ((chinese, english), (english, chinese)):
            hrefs = re.findall(r'<a class="language-switch" href="([^"]+)"', page.read_text(encoding="utf-8"))
            assert len(hrefs) == 1, f"{page}: expected one language switch, found {hrefs}"
            assert (page.parent / hrefs[0]).resolve() == other.resolve(), f"{page}: switch -> {hrefs[0]}"


def test_zh_tw_pages_came_from_the_english_execution_cache():
    """Each generated zh-TW page is a hit in the English build's jupyter-cache (its code cells are the
    English ones), and the zh-TW build executed nothing."""
    require_build()
    from jupyter_cache import get_cache
    from myst_nb.core.read import read_myst_markdown_notebook

    cache = get_cache(str(REPO_ROOT / "_build" / ".jupyter_cache"))
    book = book_dir(LANGUAGE, REPO_ROOT)
    for docname in (d for d in DOCNAMES if d.startswith("chapters/")):
        nb = read_myst_markdown_notebook((book / f"{docname}.md").read_text(encoding="utf-8"))
        try:
            cache.match_cache_notebook(nb)
        except KeyError:
            pytest.fail(f"{docname}: the zh-TW page is not in the English execution cache")
    assert "Executing notebook" not in BUILD_LOG.read_text(encoding="utf-8"), \
        "the zh-TW build executed a page"


def test_generated_sources_stay_out_of_git():
    book = book_dir(LANGUAGE, REPO_ROOT)
    assert book.is_relative_to(REPO_ROOT / "_build")  # _build/ is ignored by git
    assert not (REPO_ROOT / FOLDER).exists()


@pytest.fixture(scope="module")
def site_url():
    require_build()
    with serve_directory(HTML) as url:
        yield url


def _settle(page) -> None:
    """Wait until MathJax has typeset and its fonts have arrived (leaving earlier aborts them)."""
    wait_for_mathjax(page)
    page.wait_for_load_state("networkidle")


def _path(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


@pytest.mark.browser
@pytest.mark.slow
def test_every_zh_tw_page_opens_and_switches_both_ways(page, site_url):
    """Every zh-TW page renders cleanly and its switch leads to its English twin, whose switch leads
    back (the links are followed over HTTP; the first page's are clicked, as a reader would)."""
    for index, docname in enumerate(DOCNAMES):
        zh_url = urljoin(site_url, f"{FOLDER}/{html_path(docname)}")
        response = page.goto(zh_url)
        assert response is not None and response.ok, f"{zh_url}: {response and response.status}"
        _settle(page)
        assert page.locator("html").get_attribute("lang") == "zh-TW"
        assert page.locator("article.bd-article h1").count() >= 1, f"{docname}: no title"
        english = page.locator(SWITCH).first.evaluate("a => a.href")
        assert _path(english) == html_path(docname), f"{docname}: zh-TW -> English links {english}"
        twin = page.request.get(english)
        assert twin.ok, f"{docname}: the English twin {english} answers {twin.status}"
        back = re.search(r'class="language-switch" href="([^"]+)"', twin.text())
        assert back and _path(urljoin(english, back.group(1))) == f"{FOLDER}/{html_path(docname)}", \
            f"{docname}: the English page's switch leads to {back and back.group(1)}"
        if index == 0:  # once, as a reader: click there and back
            page.locator(SWITCH).first.click()
            _settle(page)
            assert _path(page.url) == html_path(docname)
            page.locator(SWITCH).first.click()
            _settle(page)
            assert _path(page.url) == f"{FOLDER}/{html_path(docname)}"
        problems = page.watch.problems()
        assert not problems, f"{docname}: " + "\n  ".join(problems)
    screenshot(page, "site/zh-tw_last_page")


@pytest.mark.browser
def test_chinese_search_finds_a_page(page, site_url):
    links = search_result_links(page, urljoin(site_url, f"{FOLDER}/search.html?q={SEARCH_TERM}"))
    assert any(_path(link.split("#")[0]) == f"{FOLDER}/{SEARCH_PAGE}" for link in links), \
        f"search for {SEARCH_TERM!r} did not find {SEARCH_PAGE}: {links}"
    screenshot(page, "site/zh-tw_search")


def _search_index() -> dict:
    import json

    raw = (ZH_HTML / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(raw[raw.index("(") + 1: raw.rindex(")")])


def _article_text(docname: str) -> str:
    text = (ZH_HTML / f"{docname}.html").read_text(encoding="utf-8")
    return re.sub(r"<[^>]+>", "", text[text.index("<article"):text.index("</article>")])


def pages_containing(term: str) -> set[str]:
    return {d for d in _search_index()["docnames"] if term in _article_text(d)}


@pytest.mark.parametrize("term", COMPOUNDS)
def test_search_index_has_the_compound_terms(term):
    """The zh-TW search index holds each compound whole, for every page whose text contains it
    (before the dictionary: 最佳化器 was on 10 pages and in the index of none)."""
    require_build()
    index = _search_index()
    assert term in index["terms"], f"{term!r} is not a term of the zh-TW search index"
    found = index["terms"][term]
    found = {index["docnames"][i] for i in ([found] if isinstance(found, int) else found)}
    title = index["titleterms"].get(term, [])
    found |= {index["docnames"][i] for i in ([title] if isinstance(title, int) else title)}
    containing = pages_containing(term)
    assert len(containing) >= 2 and containing <= found, f"{term!r}: not found on {containing - found}"


@pytest.mark.browser
@pytest.mark.parametrize("term", COMPOUNDS)
def test_chinese_search_finds_the_compound_terms(page, site_url, term):
    links = search_result_links(page, urljoin(site_url, f"{FOLDER}/search.html?q={term}"))
    found = {_path(link.split("#")[0]).removeprefix(f"{FOLDER}/").removesuffix(".html") for link in links}
    missing = pages_containing(term) - found
    assert not missing, f"search for {term!r} did not find {sorted(missing)}"
    if term == COMPOUNDS[0]:
        screenshot(page, "site/zh-tw_search_compound")


def test_theme_strings_terminology_page_and_footer_are_chinese():
    """The theme's buttons and footer in zh-TW; the 中英術語對照 page generated from the glossary, in the
    sidebar, without a switch to an English page that does not exist."""
    require_build()
    from autograder.i18n.pages import TERMINOLOGY, _glossary_lines

    text = (ZH_HTML / "chapters" / "05_compute_accounting.html").read_text(encoding="utf-8")
    for english in ("Repository", "Open issue", "CS336 course kit contributors"):
        assert english not in text, f"{english!r} left in English on a zh-TW page"
    assert "儲存庫" in text and "回報問題" in text
    terminology = (ZH_HTML / f"{TERMINOLOGY}.html").read_text(encoding="utf-8")
    assert "中英術語對照" in terminology and 'class="language-switch"' not in terminology
    for term, label in _glossary_lines(LANGUAGE, REPO_ROOT):  # a page label (option label) is no term
        assert (f"<td><p>{term.english}</p></td>" in terminology) is not label, term.english
    assert f'href="{TERMINOLOGY}.html"' in (ZH_HTML / "intro.html").read_text(encoding="utf-8")
    assert not (HTML / f"{TERMINOLOGY}.html").exists()


# The characters of ``text`` that the page's own font stack draws narrower than full width: a CJK font
# draws every ideograph one em wide; without one chromium draws a narrow hex box (measured: 12 px at
# 32 px against 32 px with fonts-noto-cjk).
_DRAWN_AS_BOXES = r"""(text) => {
  const font = getComputedStyle(document.querySelector("article.bd-article section p")).fontFamily;
  const ctx = document.createElement("canvas").getContext("2d");
  ctx.font = `32px ${font}`;
  return Array.from(text).filter((c) => ctx.measureText(c).width < 0.9 * 32);
}"""


@pytest.mark.browser
def test_a_zh_tw_page_with_a_figure_is_seen_in_chinese(page, site_url):
    """What a reader sees, not only what the HTML holds: on a zh-TW page with a figure, every Chinese
    character of the title and the first paragraphs is drawn with a real glyph (make installs
    fonts-noto-cjk: Makefile SYSTEM_FONTS), and the page is kept as a screenshot."""
    page.goto(urljoin(site_url, f"{FOLDER}/chapters/01_memory_accounting.html"))
    _settle(page)
    assert page.locator("article.bd-article img").count() >= 1, "the page has no figure"
    title = page.locator("article.bd-article h1").first.inner_text()
    paragraphs = " ".join(page.locator("article.bd-article section p").all_inner_texts()[:3])
    chinese = "".join(dict.fromkeys(c for c in title + paragraphs if "\u4e00" <= c <= "\u9fff"))
    assert len(chinese) > 20, f"not a Chinese page: {title!r}"
    boxes = page.evaluate(_DRAWN_AS_BOXES, chinese)
    assert not boxes, (f"chromium draws {''.join(boxes)!r} as boxes: no CJK font (run `make system-deps`, "
                       "which installs fonts-noto-cjk)")
    page.locator("article.bd-article img").first.scroll_into_view_if_needed()
    screenshot(page, "site/zh-tw_page_with_figure", full_page=False)


def _figures(html: Path, docname: str) -> list[Path]:
    text = (html / f"{docname}.html").read_text(encoding="utf-8")
    found = re.findall(r'<img[^>]+src="([^"]+_images/[^"]+\.png)"', text)
    return [(html / docname).parent / src for src in found]


@pytest.mark.parametrize(("docname", "labels"), [
    ("chapters/01_memory_accounting", {"位元配置", "符號", "指數", "小數", "範圍"}),
    ("chapters/09_optimizers_and_training", {"一個訓練步驟的記憶體", "參數", "活化值", "最佳化器狀態"}),
])
def test_zh_tw_figures_show_zh_tw_labels(docname, labels):
    """The figure files of a zh-TW page are the English figures redrawn with their labels from
    figures.po (_ext/figure_i18n.py): the texts each PNG shows are in its Description."""
    require_build()
    from PIL import Image

    english, chinese = _figures(HTML, docname), _figures(ZH_HTML, docname)
    assert chinese and len(chinese) == len(english), f"{docname}: {len(chinese)} zh-TW figures"
    shown = set()
    for en, zh in zip(english, chinese, strict=True):
        assert en.read_bytes() != zh.read_bytes(), (
            f"{zh.name}: still the English figure (figures are captured when a page executes: a build "
            "from an older cache has none; the zh-TW build log says `figures: ...`)")
        shown |= set(Image.open(zh).text.get("Description", "").split("\n"))
    assert labels <= shown, f"{docname}: missing {labels - shown} (shown: {sorted(shown)[:12]})"


def test_untranslated_units_are_marked_and_translated_ones_shown():
    """A page with units not yet translated shows the mark in its article; a fully translated page
    (the exercises) shows none; the sidebar's captions are translated."""
    require_build()
    from autograder.i18n.pages import book_files
    from autograder.i18n.render import UNTRANSLATED_MARK

    _, report = book_files(LANGUAGE, REPO_ROOT, cache="_build/.jupyter_cache")
    for docname in DOCNAMES:
        text = (ZH_HTML / html_path(docname)).read_text(encoding="utf-8")
        article = text[text.index("<article"):text.index("</article>")]
        quoted = f"「{UNTRANSLATED_MARK}」"  # the zh-TW introduction names the mark, in quotes
        marked = UNTRANSLATED_MARK in article.replace(quoted, "")
        assert marked == (f"{docname}.md" in report.untranslated), f"{docname}: mark {marked}"
    intro = (ZH_HTML / "intro.html").read_text(encoding="utf-8")
    assert "講義" in intro and "練習" in intro, "the sidebar's captions are not translated"
