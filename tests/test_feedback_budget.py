"""Staff tools on student content have a budget (issue 46, class 6): `autograder feedback` renders a
hostile 5 MiB cell in bounded time (a size cap per cell, student markdown shown as escaped text, a
linear clean-up where nbconvert's bleach was quadratic), nothing of the student's reaches the page as
markup, and a student whose feedback hangs fails alone, named, with the reason.

The attacks are this file's own: deeply nested tags, a sea of ``<`` and ``&``, long unclosed tags,
comments and attributes, script in every place a notebook can carry it."""

from __future__ import annotations

import os
import re
import signal
import time
from html.parser import HTMLParser

import autograder_toy as toy
import nbformat
import pytest
from nbconvert import HTMLExporter
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output, new_raw_cell
from traitlets.config import Config

from autograder.cli import main
from autograder.reports import feedback as feedback_module
from autograder.reports.feedback import SanitizeStudentContent, feedback, feedback_config
from autograder.reports.feedback_budget import (
    CELL_CAP_BYTES,
    clean_html,
    escaped_block,
    run_limited,
    strict_clean,
    truncated,
)

MiB = 2**20
SCRIPT = "<script>window.__pwned = 1</script>"


def attacks(size: int) -> dict[str, str]:
    """Hostile student text of about ``size`` characters, each a different worst case."""
    return {
        "nested": "<div><span><b>" * (size // 14),
        "lt": "<" * size,
        "amp": "&" * size,
        "entities": "&lt;&#60;&#x3c;" * (size // 14),
        "unclosed_tag": "<a href='" + "x" * size,
        "unclosed_attrs": "<div " + 'a="1" ' * (size // 6),
        "unclosed_comment": "<!--" + "-" * size,
        "mixed": ("<a&<b>&amp;<!--<i " + SCRIPT) * (size // 52),
        "script": (SCRIPT + "<img src=x onerror=alert(1)><a href='javascript:alert(1)'>x</a>"
                   + "<svg onload=alert(1)>") * (size // 110),
    }


KEPT = {"a", "b", "blockquote", "br", "code", "div", "em", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
        "i", "li", "ol", "p", "pre", "span", "strong", "table", "tbody", "td", "th", "thead", "tr", "ul"}


class _Tags(HTMLParser):
    """Every start tag and attribute a browser would see (the stdlib's parser, close enough)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


def markup_of(text: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    parser = _Tags()
    parser.feed(text)
    parser.close()
    return parser.tags


def assert_inert(text: str) -> None:
    """No tag but the kept ones, no attribute but ``class``: nothing that runs or loads."""
    for tag, attrs in markup_of(text):
        assert tag in KEPT, tag
        assert all(name == "class" for name, _ in attrs), (tag, attrs)
    assert "<script" not in text.lower()


def timed(function, *args) -> float:
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


@pytest.mark.parametrize("attack", sorted(attacks(100)))
def test_the_clean_up_is_linear_and_leaves_nothing_that_runs(attack):
    """Doubling a hostile input at most about doubles the time (nbconvert's bleach: ×3.5 to ×4 on
    these, 10 s for a 117 KiB nested cell); 5 MiB of it in seconds; the result inert."""
    small, large = attacks(MiB // 2)[attack], attacks(MiB)[attack]
    first = min(timed(clean_html, small) for _ in range(2))
    second = min(timed(clean_html, large) for _ in range(2))
    assert second < 3.0 * first + 0.05, (attack, first, second)
    assert timed(clean_html, attacks(5 * MiB)[attack]) < 20.0
    assert_inert(clean_html(small))
    assert_inert(clean_html(escaped_block(small)))


def test_small_content_keeps_its_formatting_and_loses_its_script():
    assert clean_html('<b class="x">bold</b>') == '<b class="x">bold</b>'
    assert "<script" not in clean_html(f"<p>hi {SCRIPT}</p>")
    assert strict_clean('<span class="n">x</span>&lt;<i onclick="f()">') == \
        '<span class="n">x</span>&lt;&lt;i onclick="f()"&gt;'
    assert strict_clean("a & b <c>") == "a &amp; b &lt;c&gt;"


def test_a_cell_over_the_cap_says_how_much_was_cut():
    text = "é" * CELL_CAP_BYTES  # 2 bytes each
    cut = truncated(text)
    assert cut.endswith(f"[truncated: {CELL_CAP_BYTES} bytes over the cap of {CELL_CAP_BYTES} bytes]")
    assert len(cut.encode()) < CELL_CAP_BYTES + 100
    assert truncated("short") == "short"


def hostile_notebook(size: int) -> nbformat.NotebookNode:
    """Every place a notebook carries student text, each holding ``size`` characters of attack."""
    nb = new_notebook()
    for name, text in attacks(size).items():
        nb.cells.append(new_markdown_cell(f"# {name}\n{text}"))
        nb.cells.append(new_raw_cell(text))
        code = new_code_cell(f"x = '''{text}'''")
        code.outputs = [new_output("display_data", data={"text/html": text, "text/markdown": text,
                                                         "image/svg+xml": text, "text/plain": "x"}),
                        new_output("stream", name="stdout", text=text),
                        new_output("error", ename="E", evalue=text, traceback=[text, text])]
        nb.cells.append(code)
    return nb


def render(nb: nbformat.NotebookNode) -> str:
    """A notebook through the feedback configuration's exporter (nbconvert's classic template)."""
    config = feedback_config(Config())
    config.HTMLExporter.template_name = "classic"
    exporter = HTMLExporter(config=config)
    exporter.register_preprocessor(SanitizeStudentContent(config=config), enabled=True)
    return exporter.from_notebook_node(nb)[0]


def test_a_5_mib_hostile_notebook_renders_in_bounded_time_and_runs_nothing():
    """Each cell of attacks 5 MiB long, in every place: rendered under a time limit that the old
    sanitizer (hours for one such cell) could not meet, capped, inert."""
    [outcome] = run_limited(render, [("hostile", (hostile_notebook(5 * MiB),))], limit_s=120)
    assert outcome.error is None, outcome.error
    page = outcome.value
    assert "[truncated: " in page and " bytes over the cap of " in page
    assert not re.search(r"<script\b(?![^>]*\bsrc=)[^>]*>\s*window\.__pwned", page, re.I)
    body = page[page.index("<body"):]
    student = body.split('<div class="cell', 1)[1]
    assert "__pwned" not in re.sub(r"&lt;script&gt;window\.__pwned", "", student.replace("\n", ""))
    for tag, attrs in markup_of(student):
        assert tag not in ("script", "img", "svg", "iframe", "object", "embed"), tag
        assert not [name for name, _ in attrs if name.startswith("on") or name in ("href", "src")], \
            (tag, attrs)


def test_rendering_time_grows_linearly_with_the_hostile_cell():
    """The whole page (caps, escaping, the template's markdown and clean-up, pygments) on hostile
    cells of 128 and 256 KiB: about the same (the cap), never ×4."""
    first = timed(render, hostile_notebook(MiB // 8))
    second = timed(render, hostile_notebook(MiB // 4))
    assert second < 2.5 * first + 1.0, (first, second)


# --- one student's feedback fails alone --------------------------------------------------------

@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = toy.make_toy_course(tmp_path_factory.mktemp("budget") / "course")
    for student in ("fb_huge", "fb_hang", "fb_honest"):
        toy.submit(course, student)
    assert main(["--course-root", str(course), "grade", "toy", "--student", "fb_huge", "--student",
                 "fb_hang", "--student", "fb_honest", "--allow-cpu", "--no-progress"]) == 0
    for student, cells in (("fb_huge", [new_markdown_cell(attacks(5 * MiB)["nested"] + SCRIPT),
                                        new_markdown_cell(attacks(5 * MiB)["mixed"])]),
                           ("fb_hang", [new_markdown_cell("HANG-ME")])):
        path = course / "autograded" / student / "toy" / "toy.ipynb"
        nb = nbformat.read(path, as_version=4)
        nb.cells += cells
        nbformat.write(nb, path)
    return course


def test_a_hanging_student_fails_alone_and_the_others_get_their_feedback(graded, monkeypatch):
    """fb_hang's feedback never ends (the sanitizer made to hang on its cell); fb_huge carries two
    5 MiB hostile cells. fb_hang is stopped at the limit and named with the reason; fb_huge and
    fb_honest get their pages, script-free."""
    original = SanitizeStudentContent.preprocess_cell

    def hanging(self, cell, resources, index):
        if "HANG-ME" in cell.get("source", ""):
            time.sleep(3600)
        return original(self, cell, resources, index)

    monkeypatch.setattr(feedback_module.SanitizeStudentContent, "preprocess_cell", hanging)
    start = time.monotonic()
    pages = feedback(assignments=["toy"], course_root=graded, time_limit_s=30, processes=2)
    assert time.monotonic() - start < 100
    assert [(a, s) for a, s, _ in pages.failed] == [("toy", "fb_hang")]
    assert "stopped after 30 s" in pages.failed[0][2] and "feedback_time_limit_s" in pages.failed[0][2]
    assert sorted(p.parts[-3] for p in pages) == ["fb_honest", "fb_huge"]
    assert not (graded / "feedback" / "fb_hang" / "toy" / "toy.html").exists()
    huge = (graded / "feedback" / "fb_huge" / "toy" / "toy.html").read_text()
    assert "bytes over the cap of" in huge
    assert "window.__pwned" not in huge.replace("&lt;script&gt;window.__pwned", "")


def test_the_command_names_the_student_whose_feedback_process_died_and_why(graded, monkeypatch,
                                                                           capsys):
    """fb_hang's feedback process is killed (SIGKILL, as the kernel's OOM killer would): the
    command names fb_hang and the signal; fb_honest's page is written."""
    original = SanitizeStudentContent.preprocess_cell

    def dies(self, cell, resources, index):
        if "HANG-ME" in cell.get("source", ""):
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, cell, resources, index)

    monkeypatch.setattr(feedback_module.SanitizeStudentContent, "preprocess_cell", dies)
    assert main(["--course-root", str(graded), "feedback", "toy", "--student", "fb_hang",
                 "--student", "fb_honest"]) == 1  # the others' pages written, the failure seen
    captured = capsys.readouterr()
    assert "failed   toy/fb_hang: the feedback process died (killed by signal SIGKILL)" in captured.err
    assert "fb_honest" not in captured.err and "1 student(s) failed" in captured.out
    assert (graded / "feedback" / "fb_honest" / "toy" / "toy.html").exists()
