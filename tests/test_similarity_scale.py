"""``autograder similarity``'s page at 300 students of near-identical notebooks (issue 44).

A trial class of 200 near-identical notebooks gave 113,227 rows and an 11 MB page that took 6.8 s to
open. Here 300 students of 04_adagrad write AdaGrad from four of the test class's styles, each with
names of their own and some with a statement of their own (so the class is a few big groups of cells
alike after normalising), and the worst case is asked for: ``--threshold 0.01``, every pair reported.
The CSV keeps every row; the HTML summarises by group and student, collapses the rest, stays under
1 MB and opens in chromium in under a second (the navigation's own timing: load event end).
"""

from __future__ import annotations

import csv
import random
import time

import nbformat
import pytest
import test_similarity as styles
from browser import launch_chromium, serve_directory, watch
from conftest import ROOT

from autograder.authoring.release import copy_course
from autograder.course.source import release_path
from autograder.reports.similarity import similarity

pytestmark = pytest.mark.browser
STUDENTS = 300
OWN = ["        checked = 0", "        print('step')", "        assert closure is None or callable(closure)", ""]


@pytest.fixture(scope="module")
def big_class(tmp_path_factory):
    root = copy_course(ROOT, tmp_path_factory.mktemp("big") / "course")
    released = nbformat.read(release_path("04_adagrad", course_root=root), as_version=4)
    rng = random.Random(300)
    templates = [styles.LOOP, styles.FUNCTIONAL, styles.FOREACH, styles.ENUMERATED]
    for n in range(STUDENTS):
        code = rng.choice(templates).strip("\n").replace("closure", f"closure_{n}")  # names of their own
        lines = code.split("\n")
        at = next(i for i, line in enumerate(lines) if "def step" in line) + 1
        lines.insert(at + 1, rng.choice(OWN).replace("closure", f"closure_{n}"))
        nb = nbformat.from_dict(released)
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") == "AdaGrad":
                cell.source = "\n".join(lines)
        path = root / "submitted" / f"student{n:03d}" / "04_adagrad" / "04_adagrad.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    started = time.monotonic()
    [result] = similarity(["04_adagrad"], course_root=root, threshold=0.01)
    return root, result, time.monotonic() - started


def test_the_csv_keeps_every_row_and_the_page_stays_small(big_class):
    _, result, seconds = big_class
    with open(result.csv_path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    pairs = STUDENTS * (STUDENTS - 1) // 2
    assert len(rows) == len(result.matches) >= pairs  # every pair of students (and some with references)
    size = result.html_path.stat().st_size
    print(f"\nsimilarity at {STUDENTS} students: {len(rows)} rows, {seconds:.1f} s, HTML {size / 1e6:.2f} MB")
    assert size < 1_000_000, f"{size} bytes"
    page = result.html_path.read_text(encoding="utf-8")
    assert "<details>" in page and "the CSV holds them all" in page
    assert page.count("<tr><td>student") <= STUDENTS + 10  # each student once in "By student"


def test_the_page_opens_in_chromium_in_under_a_second(big_class, tmp_path):
    from playwright.sync_api import sync_playwright

    root, result, _ = big_class
    relative = result.html_path.relative_to(root).as_posix()
    with sync_playwright() as p, serve_directory(root) as base:
        context = launch_chromium(p, tmp_path / "profile")
        page = context.new_page()
        seen = watch(page)
        page.goto(base + relative, wait_until="load")
        timing = page.evaluate("() => { const n = performance.getEntriesByType('navigation')[0];"
                               " return [n.loadEventEnd - n.startTime, n.domContentLoadedEventEnd - n.startTime]; }")
        text = page.inner_text("body")
        context.close()
    load_ms, dom_ms = timing
    print(f"\nsimilarity page at {STUDENTS} students: load {load_ms:.0f} ms (DOM ready {dom_ms:.0f} ms)")
    assert seen.problems() == []
    assert "Groups, by cell" in text and "By student" in text
    assert 0 < load_ms < 1000, f"the page took {load_ms:.0f} ms to load"


def test_copiers_are_one_group_shown_once_and_the_per_cell_rule_stays_small(big_class, tmp_path):
    """Every pair reported at 0.01 connects the whole class: one group, its strongest pair side by side
    once. The default per-cell rule on the same class reports the pairs that stand out from that cell's
    pairs (same style, same statement of their own: about 0.93 here): a few groups, its page as small."""
    from autograder.reports.similarity_html import SHOWN, groups

    root, result, _ = big_class
    assert len(groups(result.matches)) == 1
    page = result.html_path.read_text(encoding="utf-8")
    assert page.count("<div class='pair'>") == 1 <= SHOWN
    [adaptive] = similarity(["04_adagrad"], course_root=root, output_dir=tmp_path)
    cutoff = adaptive.cutoffs["AdaGrad"]["students"]
    assert adaptive.matches and all(m.similarity >= cutoff.value for m in adaptive.matches)
    found = groups(adaptive.matches)
    print(f"\nper-cell rule at {STUDENTS} students: cut-off {cutoff.describe()}, {len(adaptive.matches)} rows, "
          f"{len(found)} groups, HTML {adaptive.html_path.stat().st_size / 1e6:.2f} MB")
    assert len(found) <= 2 * len(OWN) * 4  # a group per style and statement of their own at most
    assert adaptive.html_path.stat().st_size < 1_000_000
    assert f"<td>{cutoff.describe()}</td>" in adaptive.html_path.read_text(encoding="utf-8")
