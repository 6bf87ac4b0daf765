"""The report's histograms (m5, issue 41): a small class gets whole-number ticks, never half a student
(0.5, 1.5) or half a point."""

from __future__ import annotations

import pytest

from autograder.reports import figures


@pytest.mark.parametrize("scores", [[3.0, 7.0], [10.0], [0.0, 4.0, 4.0, 9.0, 10.0]])
def test_histogram_ticks_are_whole_numbers(monkeypatch, scores):
    drawn = []
    monkeypatch.setattr(figures, "png", lambda fig: drawn.append(fig) or "png")
    assert figures.score_distribution({"01_strides": scores}, {"01_strides": 10.0}) == "png"
    (ax,) = [a for a in drawn[0].axes if a.get_visible() and a.has_data()]
    lo, hi = ax.get_ylim()
    students = [t for t in ax.get_yticks() if lo <= t <= hi]
    points = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert students and all(float(t).is_integer() for t in students), students
    assert points and all(float(t).is_integer() for t in points), points
