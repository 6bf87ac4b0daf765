"""The batch display while grading (issue 41, M5): the progress display shows what is running and for how
long (a hung notebook is named while it holds the batch), the per-cell default is sized to the
exercises, and the settings' meaning text says how each of the two limits scores a hang."""

from __future__ import annotations

import io
from pathlib import Path

import autograder_toy as toy
import pytest

from autograder.course.nbgrader import load_course
from autograder.course.settings import setting_field
from autograder.grading.nbgrader_seam import execute_timeout
from autograder.grading.options import GradeOptions

ROOT = Path(__file__).resolve().parents[1]
HANG = "def square(x):\n    while True:\n        pass\n"


def test_the_running_notebooks_are_listed_longest_first_with_their_seconds():
    from rich.console import Console

    from autograder.grading.progress import SHOWN_RUNNING, ProgressBar

    now = [100.0]
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    with ProgressBar(True, label="grading on cpu", total=9, console=console,
                     clock=lambda: now[0]) as bar:
        bar.started(("01_strides", "ivan"), "01_strides/ivan")
        now[0] += 150
        for student in ("alice", "bob", "carol", "dave", "erin"):
            bar.started(("01_strides", student), f"01_strides/{student}")
        now[0] += 43
        bar.finished(("01_strides", "alice"))
        bar.advance()
        lines = bar.running_lines()
    assert lines[0] == "  running 01_strides/ivan  193 s"
    assert len(lines) == SHOWN_RUNNING + 1 and lines[-1] == "  and 1 more running"
    assert not any("alice" in line for line in lines)  # finished: never shown as the status
    assert "01_strides/ivan  193 s" in console.file.getvalue()


def test_a_hung_notebook_is_named_while_the_others_finish(tmp_path, monkeypatch):
    """Through the engine: while ivan's cell hangs (per-cell limit 4 s), the display taken when alice
    is recorded names ivan as running; ivan still gets the points of the cells after the hung one."""
    import autograder.grading.pipeline as pipeline
    from autograder.grading import grade
    from autograder.grading.progress import ProgressBar

    seen: list[list[str]] = []

    class Watched(ProgressBar):
        def advance(self, status=None):
            seen.append(self.running_lines())
            super().advance(status)

    monkeypatch.setattr(pipeline, "ProgressBar", Watched)
    root = toy.make_toy_course(tmp_path / "course")
    toy.submit(root, "alice")
    toy.submit(root, "ivan", square=HANG)
    summary = grade(assignments=["toy"], course_root=root, workers=2, timeout=4, allow_cpu=True,
                    progress=True)
    scores = {r.student: r.score for r in summary.results}
    assert scores == {"alice": 7.0, "ivan": 5.0}  # the per-cell limit fails the hung cell alone
    assert any("running toy/ivan" in line for line in seen[0]), seen


def test_the_per_cell_default_is_sized_to_the_exercises_and_the_limits_say_how_they_score():
    assert execute_timeout(load_course(ROOT)) == 60  # ≈ 0.5 s a notebook: minutes are not needed
    cell = setting_field(GradeOptions, "timeout").metadata["help"]
    whole = setting_field(GradeOptions, "notebook_timeout").metadata["help"]
    assert "fails alone" in cell and "cells after it still run" in cell
    assert "every cell after it score 0" in whole


@pytest.mark.parametrize("name", ["timeout", "notebook_timeout"])
def test_the_limits_meaning_reaches_the_generated_table(name):
    from autograder.course.settings import settings_table

    help_text = setting_field(GradeOptions, name).metadata["help"]
    assert help_text in settings_table(GradeOptions)
