"""The pages an instructor and a student look at after grading — the HTML report and a feedback page —
opened in headless chromium: figures load, nothing reaches the network (MathJax included: a feedback
page typesets its math offline), no console errors."""

from __future__ import annotations

import autograder_toy as toy
import nbformat
import pytest
from browser import launch_chromium, screenshot, serve_directory, watch

from autograder.cli import main

pytestmark = pytest.mark.browser
MATH = "My note: $G \\leftarrow G + g^2$ and $$\\frac{g}{\\sqrt{G} + \\varepsilon}$$"


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    """The toy course with a full and a partly wrong submission, graded, with feedback and report."""
    root = toy.make_toy_course(tmp_path_factory.mktemp("report") / "course")
    toy.submit(root, "alice")
    bob = toy.submit(root, "bob", total="def total(values):\n    return 0\n")
    nb = nbformat.read(bob, as_version=4)  # a student's note with math: typeset offline in feedback
    nb.cells.append(nbformat.v4.new_markdown_cell(MATH))
    nbformat.write(nb, bob)
    for args in (["grade", "toy", "--allow-cpu", "--no-progress"], ["feedback", "toy"],
                 ["report", "--output", str(root / "reports")]):
        assert main(["--course-root", str(root), *args]) == 0, args
    return root


def open_page(tmp_path, root, relative: str, name: str, *, math: bool = False):
    """Serve `root` locally, load `relative` in chromium; return (image sizes, visible text, problems)
    (``math``: wait for MathJax to typeset, and return the number of typeset formulas instead of
    the image sizes)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p, serve_directory(root) as base:
        context = launch_chromium(p, tmp_path / f"profile-{name}")
        page = context.new_page()
        seen = watch(page)
        page.goto(base + relative, wait_until="load")
        if math:
            page.wait_for_selector("mjx-container svg", timeout=30_000)
            sizes = page.locator("mjx-container").count()
        else:
            sizes = page.eval_on_selector_all(
                "img", "els => els.map(e => [e.naturalWidth, e.naturalHeight])")
        text = page.inner_text("body")
        screenshot(page, f"grading/{name}")
        context.close()
    return sizes, text, seen.problems()


def test_report_renders_its_figures(graded_course, tmp_path):
    sizes, text, problems = open_page(tmp_path, graded_course, "reports/report.html", "report")
    assert problems == []
    assert sizes and all(w > 100 and h > 100 for w, h in sizes), f"figures did not render: {sizes}"
    assert "toy/test_total" in text  # the most-failed cell is named


def test_feedback_page_shows_the_failure_not_the_hidden_check(graded_course, tmp_path):
    typeset, text, problems = open_page(tmp_path, graded_course, "feedback/bob/toy/toy.html",
                                        "feedback", math=True)
    # MathJax comes with the page (m14, issue 41): no request leaves the machine, not even to a CDN
    assert problems == []
    assert typeset == 2, f"{typeset} formulas typeset, expected the note's 2"
    assert "AssertionError" in text
    assert not [code for code in toy.HIDDEN_CODE if code in text]
