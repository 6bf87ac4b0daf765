"""When ``autograder similarity`` reports a pair: a cut-off that adapts to each cell of each class.

A fixed threshold is wrong in both directions: a short cell (five lines of a loop) makes honest pairs
score high and a disguised copy score lower than 0.7, while a cell that everyone writes alike (a class
of near-identical notebooks) puts every pair above it. What marks a copy is that the pair stands out
from **that cell's own pairs**. Per cell:

- **student pairs** (two students' cells; similarity: the larger of the two shares matched): with
  ``m`` the median of the cell's pair scores and ``s`` their spread (1.4826 x the median absolute
  deviation, at least ``MIN_SPREAD``), the robust cut-off is ``m + SPREADS * s``. A clear gap in the
  sorted scores may lower it: where a step between consecutive scores above ``m`` is at least
  ``MIN_GAP`` wide and ``GAP_RATIO`` times the median step, the scores above the lowest such step
  (its upper side at least ``FLOOR``) stand out as a group of their own, and the cut-off is that
  group's lowest score if lower. Never below ``FLOOR``: a pair at 0.4 is not a copy, however the rest
  score (short cells, where most pairs share nothing and the spread is 0, are judged by it); never above ``CAP``: cells alike at 95% are worth a
  look even in a class where every pair is alike. With fewer than ``MIN_STUDENTS`` students in a cell there
  is no distribution to stand out from: the cut-off is ``SMALL_CLASS``.
- **reference pairs** (a student against ``(solution)`` or ``(library)``; similarity as for students,
  which for a paste is the share of the *student's* cell found in the reference — a paste is short
  beside a library file, the library's own share is small): the same robust
  rule over that reference's scores in the cell, never below the reference's own floor
  (``REFERENCE_FLOOR``) nor above ``CAP``: a pasted library function scores far above anything honest, while honest
  students converge on the instructor's (simple, canonical) solution, so the solution's floor is
  higher.

``--threshold T`` replaces all of it with one fixed cut-off for every pair. Calibration (the synthetic
classes of tests/test_similarity*.py, two seeds of tests/test_similarity_seeded.py, 22 tried): see
docs/reference/commands.md ("Who wrote alike").
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

SOLUTION, LIBRARY = "(solution)", "(library)"
FLOOR = 0.52  # no student pair below this is reported, whatever the cell
SPREADS = 3.0  # how many spreads above the median a pair must score
MIN_SPREAD = 0.05  # a cell whose pairs all score alike still needs this much to stand out
MIN_GAP = 0.15  # the narrowest step in the sorted scores that separates a group of its own
GAP_RATIO = 3.0  # ... and how much wider than the median step above the median it must be
MIN_STUDENTS = 4  # fewer students in a cell: no distribution, SMALL_CLASS is the cut-off
SMALL_CLASS = 0.7
REFERENCE_FLOOR = {LIBRARY: 0.5, SOLUTION: 0.8}
CAP = 0.95  # a cut-off never above this: cells alike at 95% are worth a look, however alike the class


@dataclass(frozen=True)
class Cutoff:
    """The cut-off of one group of pairs (a cell's student pairs, or its pairs with one reference)."""

    pairs: int  # how many scores it was computed from
    median: float
    mad: float  # median absolute deviation (unscaled)
    value: float  # report a pair at this score or more
    how: str  # "fixed", "small class", "median + k*spread", "gap", "floor"

    def describe(self) -> str:
        if self.how == "fixed":
            return f"{self.value:.2f} (fixed, --threshold)"
        return f"{self.value:.2f} ({self.how})"


def fixed(scores: Sequence[float], threshold: float) -> Cutoff:
    median, mad = _median_mad(scores)
    return Cutoff(len(scores), median, mad, threshold, "fixed")


def student_cutoff(scores: Sequence[float], students: int) -> Cutoff:
    """The cut-off for the student pairs of one cell with ``students`` students judged."""
    median, mad = _median_mad(scores)
    if students < MIN_STUDENTS:
        return Cutoff(len(scores), median, mad, SMALL_CLASS, "small class")
    value, how = median + SPREADS * max(1.4826 * mad, MIN_SPREAD), "median + 3 spreads"
    gap = _gap(scores, median)
    if gap is not None and gap < value:
        value, how = gap, "gap"
    if value < FLOOR:
        value, how = FLOOR, "floor"
    if value > CAP:
        value, how = CAP, "cap"
    return Cutoff(len(scores), median, mad, round(value, 3), how)


def reference_cutoff(scores: Sequence[float], reference: str, students: int) -> Cutoff:
    """The cut-off for the pairs of one cell's students with ``reference``."""
    median, mad = _median_mad(scores)
    floor = REFERENCE_FLOOR.get(reference, SMALL_CLASS)
    if students < MIN_STUDENTS:
        return Cutoff(len(scores), median, mad, floor, "reference floor")
    robust = median + SPREADS * max(1.4826 * mad, MIN_SPREAD)
    if robust > max(floor, CAP):
        return Cutoff(len(scores), median, mad, max(floor, CAP), "cap")
    if robust > floor:
        return Cutoff(len(scores), median, mad, round(robust, 3), "median + 3 spreads")
    return Cutoff(len(scores), median, mad, floor, "reference floor")


def _median_mad(scores: Sequence[float]) -> tuple[float, float]:
    if not scores:
        return 0.0, 0.0
    median = statistics.median(scores)
    return median, statistics.median(abs(s - median) for s in scores)


def _gap(scores: Sequence[float], median: float) -> float | None:
    """The lowest score above the lowest clear gap of the sorted scores (above the median) whose
    upper side is at least ``FLOOR``; None where there is none (module docstring)."""
    above = sorted(s for s in scores if s > median)
    steps = [(above[i + 1] - above[i], above[i + 1]) for i in range(len(above) - 1)]
    if not steps:
        return None
    typical = statistics.median(step for step, _ in steps)
    for step, upper in steps:
        if upper >= FLOOR and step >= MIN_GAP and step >= GAP_RATIO * typical:
            return upper
    return None
