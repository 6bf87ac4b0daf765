"""The built site in a real browser: headless Debian chromium over a local HTTP server.

Checks the landing page, that every page of _toc.yml is linked from the sidebar and loads, that math is
typeset by MathJax, that chapter pages show their executed outputs, that exercise pages offer the
.ipynb download and launch buttons, that no page logs a JavaScript error or reaches for the internet,
and that search finds "bfloat16". Screenshots go to test-artifacts/screenshots/site/.

Run after `make site`. SITE_HTML_DIR (default _build/html) and SITE_BOOK_ROOT (default the repository,
where _toc.yml and _config.yml live) point it at another build.
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import pytest
import yaml
from browser import (
    REPO_ROOT,
    screenshot,
    serve_directory,
    unavailable,
)

pytestmark = pytest.mark.browser

BOOK_ROOT = Path(os.environ.get("SITE_BOOK_ROOT", REPO_ROOT))
HTML_DIR = Path(os.environ.get("SITE_HTML_DIR", BOOK_ROOT / "_build" / "html"))
SIDEBAR_LINKS = "nav.bd-docs-nav a.reference.internal"
ARTICLE = "article.bd-article"


def toc_docnames(toc_path: Path) -> list[str]:
    """Every document named in a jb-book _toc.yml (root, parts, chapters, nested sections), in order."""
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    if not isinstance(toc, dict) or "root" not in toc:
        raise ValueError(f"{toc_path}: expected a jb-book table of contents with a 'root' key")
    names = [toc["root"]]

    def walk(entries) -> None:
        for entry in entries or []:
            if "file" in entry:
                names.append(str(entry["file"]))
            walk(entry.get("sections"))

    for part in toc.get("parts") or [{"chapters": toc.get("chapters")}]:
        walk(part.get("chapters"))
    return [re.sub(r"\.(md|ipynb|rst)$", "", n) for n in names]


def html_path(docname: str) -> str:
    """Where Sphinx writes a document: 'chapters/01_x' -> 'chapters/01_x.html'."""
    return f"{docname}.html"


DOCNAMES = toc_docnames(BOOK_ROOT / "_toc.yml")
BOOK_CONFIG = yaml.safe_load((BOOK_ROOT / "_config.yml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def site_url() -> str:
    """Base URL of the built site, served from a thread for the whole module."""
    if not (HTML_DIR / "index.html").is_file():
        unavailable(f"no built site at {HTML_DIR}/index.html: run `make site` first")
    with serve_directory(HTML_DIR) as url:
        yield url


def wait_for_mathjax(page) -> None:
    """Wait until MathJax (if the page loads it) has finished typesetting."""
    page.wait_for_load_state("load")
    # MathJax's script is deferred, so after "load" it either ran (startup exists) or failed to load.
    page.evaluate(
        """async () => {
            const mj = window.MathJax;
            if (mj && mj.startup && mj.startup.promise) await mj.startup.promise;
        }"""
    )


def open_landing(page, site_url: str):
    """Open the site's root URL and follow index.html's redirect to the root page of _toc.yml."""
    response = page.goto(site_url)
    assert response is not None and response.ok, (
        f"GET {site_url} answered {response and response.status}"
    )
    root_html = html_path(DOCNAMES[0])
    if not urlsplit(page.url).path.endswith(root_html):
        page.wait_for_url(f"**/{root_html}", timeout=10_000)
    wait_for_mathjax(page)
    return response


def assert_clean(page, what: str) -> None:
    """No console error, uncaught exception, failed request or internet request on this page."""
    problems = page.watch.problems()
    assert not problems, f"{what}: the browser reported problems:\n  " + "\n  ".join(problems)


def sidebar_hrefs(page) -> list[str]:
    """Absolute URLs of the sidebar's internal links, in order (without #fragments)."""
    hrefs = page.eval_on_selector_all(SIDEBAR_LINKS, "links => links.map(a => a.href)")
    return [h.split("#")[0] for h in hrefs]


def test_landing_page_loads(page, site_url):
    open_landing(page, site_url)
    title = BOOK_CONFIG.get("title", "")
    assert title and title in page.title(), f"landing page title {page.title()!r} lacks {title!r}"
    assert page.locator(f"{ARTICLE} h1").count() >= 1, "landing page has no <h1> heading"
    assert page.locator(SIDEBAR_LINKS).count() >= 1, "landing page has no sidebar links"
    screenshot(page, "site/landing")
    assert_clean(page, "landing page")


def test_sidebar_links_every_toc_page(page, site_url):
    open_landing(page, site_url)
    linked = {urlsplit(h).path.lstrip("/") for h in sidebar_hrefs(page)}
    wanted = {html_path(d) for d in DOCNAMES[1:]}  # the root page is the landing page itself
    missing = sorted(wanted - linked)
    unexpected = sorted(linked - wanted - {html_path(DOCNAMES[0]), ""})
    assert not missing, f"pages of _toc.yml absent from the sidebar: {missing}"
    assert not unexpected, f"sidebar links to pages that are not in _toc.yml: {unexpected}"


def visible_prose_problems(page) -> list[str]:
    """Raw TeX left in the page's prose (outside code, outputs and typeset math), and MathJax errors."""
    return page.evaluate(
        r"""(selector) => {
            const article = document.querySelector(selector);
            if (!article) return ['no article element'];
            const clone = article.cloneNode(true);
            clone.querySelectorAll('pre, code, .cell_output, .highlight, mjx-container, script, style')
                 .forEach(el => el.remove());
            const text = clone.innerText || clone.textContent;
            const found = [];
            for (const re of [/\$\$[^$]+\$\$/g, /(^|[^\\$])\$[^\s$][^$\n]*\$/g, /\\\(.+?\\\)/g, /\\\[.+?\\\]/gs]) {
                for (const m of text.matchAll(re)) found.push('raw TeX: ' + m[0].trim().slice(0, 80));
            }
            article.querySelectorAll('mjx-merror, mjx-container [data-mjx-error]').forEach(
                el => found.push('MathJax error: ' + (el.getAttribute('data-mjx-error') || el.textContent)));
            return found;
        }""",
        ARTICLE,
    )


def math_problems(page) -> list[str]:
    """Every math element Sphinx wrote (article, headings, page table of contents) holds MathJax
    output, no MathJax error is shown, and no raw TeX remains in the prose."""
    untypeset = page.evaluate(
        """() => [...document.querySelectorAll('.math')]
                 .filter(el => !el.querySelector('mjx-container'))
                 .map(el => el.textContent.trim().slice(0, 80))"""
    )
    problems = [f"math not typeset by MathJax: {tex}" for tex in untypeset]
    if untypeset and not page.evaluate("() => !!(window.MathJax && window.MathJax.startup)"):
        problems.append("MathJax is not running on this page (see the browser problems)")
    return problems + visible_prose_problems(page)


def output_problems(page) -> list[str]:
    """A chapter page executed at build time: its code cells show outputs, and none is an error
    unless the cell is tagged raises-exception."""
    cells = page.locator(f"{ARTICLE} div.cell").count()
    if cells == 0:
        return ["a chapter page with no code cells"]
    problems = []
    shown = page.eval_on_selector_all(
        f"{ARTICLE} .cell_output",
        "outs => outs.filter(o => o.innerText.trim() || o.querySelector('img, svg, table')).length",
    )
    if shown == 0:
        problems.append(f"{cells} code cells but no non-empty .cell_output (was it executed?)")
    errors = page.eval_on_selector_all(
        f"{ARTICLE} div.cell:not(.tag_raises-exception) .cell_output .output.traceback",
        "outs => outs.map(o => o.innerText.trim().split('\\n').slice(-1)[0])",
    )
    if errors:
        problems.append(f"cells show error tracebacks: {errors}")
    return problems


def check_exercise_buttons(page, site_url: str, docname: str) -> None:
    """An exercise page offers its notebook for download and launch buttons (hub, Colab)."""
    download = page.locator("a.btn-download-source-button[href$='.ipynb']")
    assert download.count() == 1, f"{docname}: no 'download .ipynb' button"
    href = urljoin(page.url, download.get_attribute("href"))
    with urllib.request.urlopen(href, timeout=10) as reply:
        nb = json.loads(reply.read())
    assert nb.get("nbformat") == 4 and nb.get("cells"), f"{docname}: {href} is not a notebook"
    offered = [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"]
    ]
    leaks = [
        m for m in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS") if any(m in src for src in offered)
    ]
    assert not leaks, f"{docname}: the downloadable notebook contains {leaks} regions"
    release = BOOK_ROOT / f"{docname}.ipynb"
    if release.is_file():
        committed = json.loads(release.read_text(encoding="utf-8"))
        expected = [
            "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in committed["cells"]
        ]
        assert offered == expected, (
            f"{docname}: the download differs from the committed {release.name}"
        )

    launch = BOOK_CONFIG.get("launch_buttons") or {}
    hub = (launch.get("jupyterhub_url") or "").rstrip("/")
    assert hub, "_config.yml sets no launch_buttons.jupyterhub_url"
    hub_links = page.eval_on_selector_all(
        f"a[href^='{hub}/hub/user-redirect/git-pull']", "links => links.map(a => a.href)"
    )
    assert hub_links, f"{docname}: no JupyterHub launch button"
    link = urlsplit(hub_links[0])
    query = parse_qs(link.query)
    assert hub_links[0].startswith(f"{hub}/hub/user-redirect/git-pull?"), (
        f"{docname}: hub link {hub_links[0]} is not an nbgitpuller link on {hub}"
    )
    assert query.get("urlpath", [""])[0].endswith(f"{docname}.ipynb"), (
        f"{docname}: hub link opens {query.get('urlpath')} instead of the exercise notebook"
    )
    colab_url = (launch.get("colab_url") or "").rstrip("/")
    if colab_url:
        colab = page.eval_on_selector_all(f"a[href^='{colab_url}/']", "ls => ls.map(a => a.href)")
        assert colab and colab[0].endswith(f"{docname}.ipynb"), f"{docname}: Colab link {colab}"


@pytest.mark.parametrize("docname", DOCNAMES)
def test_toc_page_via_sidebar(page, site_url, docname):
    """Follow the sidebar link to each page of _toc.yml and check what a reader sees there."""
    open_landing(page, site_url)
    if docname != DOCNAMES[0]:
        link = page.locator(f"{SIDEBAR_LINKS}[href$='{html_path(docname)}']").first
        assert link.count() == 1, f"{docname}: no sidebar link on the landing page"
        link_href = link.get_attribute("href")
        page.watch.clear()  # problems of the landing page are its own test's business
        with page.expect_navigation() as navigation:
            link.click()
        response = navigation.value
        assert response is not None and response.ok, (
            f"{docname}: the sidebar link {link_href} answered HTTP {response and response.status}"
        )
    assert urlsplit(page.url).path.endswith(html_path(docname)), (
        f"{docname}: the sidebar link led to {page.url}"
    )
    wait_for_mathjax(page)
    assert page.locator(f"{ARTICLE} h1").count() >= 1, f"{docname}: page has no <h1> heading"
    screenshot(page, f"site/{docname.replace('/', '__')}")

    # Every check runs, so one failure report lists everything wrong with the page.
    problems = page.watch.problems() + math_problems(page)
    if docname.startswith("chapters/"):
        problems += output_problems(page)
    assert not problems, f"{docname}:\n  " + "\n  ".join(problems)
    if docname.startswith("exercises/"):
        check_exercise_buttons(page, site_url, docname)


def test_search_finds_bfloat16(page, site_url):
    page.goto(urljoin(site_url, "search.html?q=bfloat16"))
    results = page.locator("#search-results ul.search li")
    results.first.wait_for(state="attached", timeout=30_000)
    titles = results.evaluate_all("items => items.map(li => li.innerText.split('\\n')[0])")
    assert titles, "search for bfloat16 returned no results"
    text = page.locator("#search-results").inner_text().lower()
    assert "bfloat16" in text, "search results show no 'bfloat16' context"
    screenshot(page, "site/search_bfloat16")
    assert_clean(page, "search page")
