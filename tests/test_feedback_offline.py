"""Feedback pages load nothing from a CDN (m14, issue 41): nbgrader's feedback template hard-codes
MathJax 2 from cdnjs; ``autograder.reports.feedback.local_mathjax`` takes it out, and adds MathJax 3 (inline, or
from ``c.Autograder.feedback_mathjax_url``) only where the page has math. The real pages, in chromium
offline: tests/test_report_browser.py."""

from __future__ import annotations

import pytest

from autograder.errors import CourseError
from autograder.reports.feedback import local_mathjax, mathjax_url

CDN_BLOCK = ("<!-- Load mathjax -->\n    <script src=\"https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/"
             "latest.js?config=TeX-AMS_CHTML-full,Safe\"> </script>\n<script type=\"text/x-mathjax-config\">"
             "MathJax.Hub.Config({tex2jax: {inlineMath: [ ['$','$'], [\"\\\\(\",\"\\\\)\"] ]}});</script>\n"
             "    <!-- End of mathjax configuration -->")


def page(body: str) -> str:
    return f"<html><head><style>.x{{}}</style>{CDN_BLOCK}</head><body>{body}</body></html>"


def test_a_page_without_math_loads_no_mathjax():
    served = local_mathjax(page("<p>AssertionError: expected 3, got 0</p>"))
    assert "cdnjs" not in served and "MathJax" not in served and "<script" not in served
    assert "expected 3, got 0" in served


def test_a_page_with_math_carries_mathjax_3_inline():
    served = local_mathjax(page("<p>where $\\varepsilon$ goes</p>"))
    assert "cdnjs" not in served and served.count("<script") == 2
    assert "window.MathJax" in served and len(served) > 1_000_000  # MathJax itself, inline
    assert served.index("window.MathJax") < served.index("</head>") < served.index("<p>where")


def test_a_course_can_point_at_its_sites_copy():
    url = "https://course.example.edu/_static/mathjax/tex-mml-chtml.js"
    served = local_mathjax(page("<p>\\(x^2\\)</p>"), url)
    assert f'<script src="{url}"></script>' in served and "cdnjs" not in served
    assert len(served) < 10_000


class _Course:
    def __init__(self, value):
        self.config = {"Autograder": {"feedback_mathjax_url": value}} if value is not None else {}


def test_the_mathjax_setting_is_checked():
    assert mathjax_url(_Course(None)) is None
    assert mathjax_url(_Course(" https://x/mj.js ")) == "https://x/mj.js"
    with pytest.raises(CourseError, match="feedback_mathjax_url must be a URL"):
        mathjax_url(_Course(3))
