"""Named misconceptions: which catalogue mistake a failing submission's grade cells look like.

Every wrong implementation of the catalogue (``catalogue/<assignment>.py``) carries a
``misconception``, a short human name ("eps inside the square root"). Graded, each one leaves a
*signature*: for every grade cell it fails, the error it shows there, read two ways,

- its **kind**: the message with every number replaced by ``#`` and the seed dropped
  (``AdaGrad.step: ... after step #, parameter # differs ...``): which check failed, and how;
- its **value**: the message with its numbers kept (floats to three significant digits): the wrong
  value itself, which a visible test's fixed inputs reproduce exactly and a hidden check's random
  ones do not (the table keeps a value only where it is the same under every seed).

The *signature table* (``catalogue/misconceptions.json``, generated: ``make misconceptions``,
checked current by tests/test_misconceptions.py) holds each wrong entry's signature, graded in
process under ``SEEDS``. At report time a failing submission's signature, read from its autograded
notebook, is compared with every entry of its assignment's table:

    similarity = sum of points won / sum of points at stake, over the grade cells that fail on
                 either side (a cell the entry fails only under some seeds counts when it fails here)
    a cell failing on one side only:  0 of FAIL + KIND + VALUE points
    a cell failing on both:           FAIL, + KIND if the kinds are equal, + VALUE if the values are
                                      (KIND, VALUE at stake only where the table knows them)

The nearest entry names the misconception when its similarity is at least ``MIN_SIMILARITY``; entries
tied at the top are named together ("a or b"); below it, nothing is named. A submission that lost no
points is never named. The hidden checks' messages are values only (never check source), so nothing
here reveals a hidden test. The names go to the course staff's report, and to the students'
feedback only where the course turns it on (``autograder.reports.feedback_misconception``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from autograder.course.nbgrader import Course
from autograder.machine_limits import is_not_run_output, not_run_in_notebooks

TABLE = Path("catalogue") / "misconceptions.json"
SEEDS = (11, 222, 3333)
FAIL, KIND, VALUE = 1.0, 1.0, 2.0  # points per failing cell (module docstring)
MIN_SIMILARITY = 0.5  # below it nothing is named (tests/test_misconceptions.py: held-out variants)
TIED = " or "  # joins the names of entries tied at the top
MESSAGE_CHARS = 400  # what of a message is compared (long tensors print differently, not differ)

_SEED = re.compile(r"\s*\[seed \d+\]")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?(?!\w)")
_RUN = re.compile(r"#(?:,\s*#)*")  # a shape or a list of numbers: its length may vary with the seed


@dataclass(frozen=True)
class Failure:
    """What one grade cell shows: the kinds of its message (a submission's: one; a catalogue entry's:
    each one it showed under ``SEEDS``) and its value (None: not the same every time); ``always``:
    False where a catalogue entry fails the cell only under some seeds."""

    kinds: tuple[str, ...]
    value: str | None
    always: bool = True


Signature = dict[str, Failure]  # grade id -> its failure; cells that passed are absent


def normalise(ename: str, evalue: str) -> tuple[str, str]:
    """``(kind, value)`` of an error (module docstring)."""
    text = _ADDRESS.sub("0x#", _SEED.sub("", f"{ename}: {evalue}").strip())
    kind = _RUN.sub("#", _NUMBER.sub("#", text))[:MESSAGE_CHARS]

    def rounded(match: re.Match[str]) -> str:
        number = match.group()
        if not any(c in number for c in ".eE"):
            return number
        return f"{float(number):.3g}"

    return kind, _NUMBER.sub(rounded, text)[:MESSAGE_CHARS]


def signature_of(errors: Mapping[str, tuple[str, str] | None]) -> Signature:
    """grade id -> ``(ename, evalue)`` or None (passed) as a signature."""
    signature = {}
    for cell, error in errors.items():
        if error is not None:
            kind, value = normalise(*error)
            signature[cell] = Failure((kind,), value)
    return signature


def notebook_errors(path: Path) -> dict[str, tuple[str, str] | None]:
    """grade id -> the first error output of that grade cell in an executed notebook (None: none);
    a grade cell the grading machine did not run (``autograder.machine_limits``) is left out: it is
    evidence of nothing."""
    nb = nbformat.read(path, as_version=4)
    found: dict[str, tuple[str, str] | None] = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("grade"):
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if any(is_not_run_output(o) for o in errors):
            continue
        found[meta["grade_id"]] = ((str(errors[0].get("ename", "")), str(errors[0].get("evalue", "")))
                                   if errors else None)
    return found


def similarity(observed: Signature, known: Signature) -> float:
    """How much ``observed`` looks like ``known`` (module docstring), in [0, 1]."""
    won = at_stake = 0.0
    for cell in sorted(set(observed) | set(known)):
        mine, theirs = observed.get(cell), known.get(cell)
        if mine is None and theirs is not None and not theirs.always:
            continue  # the entry fails this cell only sometimes: no evidence either way
        stake = FAIL + KIND + (VALUE if theirs is None or theirs.value is not None else 0.0)
        at_stake += stake
        if mine is None or theirs is None:
            continue
        won += FAIL
        won += KIND if set(mine.kinds) & set(theirs.kinds) else 0.0
        won += VALUE if theirs.value is not None and theirs.value == mine.value else 0.0
    return won / at_stake if at_stake else 0.0


@dataclass(frozen=True)
class Entry:
    """One wrong implementation of the catalogue in the table."""

    name: str  # the catalogue entry's name
    misconception: str  # its human name
    signature: Signature


def nearest(observed: Signature, entries: Sequence[Entry], *,
            minimum: float = MIN_SIMILARITY) -> tuple[str, float]:
    """``(misconception, similarity)`` of the nearest entries (tied names joined by " or "), or
    ``("", best)`` when none reaches ``minimum`` or nothing failed."""
    if not observed or not entries:
        return "", 0.0
    scored = [(similarity(observed, e.signature), e.misconception) for e in entries]
    best = max(score for score, _ in scored)
    if best < minimum:
        return "", best
    names = sorted({name for score, name in scored if score >= best - 1e-9})
    return TIED.join(names), best


def human_name(entry: Mapping[str, Any]) -> str:
    """A catalogue entry's ``misconception`` (its name with spaces where it has none)."""
    return str(entry.get("misconception") or str(entry["name"]).replace("_", " "))


# --------------------------------------------------------------------------- the table


def write_table(table: Mapping[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def load_table(course_root: Path) -> dict[str, list[Entry]]:
    """assignment -> its entries, from ``<course>/catalogue/misconceptions.json`` ({} if none)."""
    path = Path(course_root) / TABLE
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return {assignment: [Entry(row["name"], row["misconception"],
                               {cell: Failure(tuple(f["kinds"]), f["value"], f["always"])
                                for cell, f in row["cells"].items()}) for row in rows]
            for assignment, rows in data["assignments"].items()}


# --------------------------------------------------------------------------- the class


@dataclass(frozen=True)
class Named:
    """A graded submission and what it looks like."""

    assignment: str
    student: str
    misconception: str  # "" when nothing matched, or the submission lost no points
    failed: tuple[str, ...]  # its grade cells that show an error


def name_submissions(course: Course, submissions: Iterable[tuple[str, str]], *,
                     passed: Iterable[tuple[str, str]] = (),
                     table: Mapping[str, Sequence[Entry]] | None = None) -> list[Named]:
    """Each ``(student, assignment)`` with an autograded notebook, named. ``passed``: submissions that
    lost no points (never named, whatever their notebooks show)."""
    table = load_table(course.root) if table is None else table
    full = set(passed)
    named = []
    for student, assignment in sorted(submissions):
        folder = course.step_dir("autograded", student, assignment)
        errors: dict[str, tuple[str, str] | None] = {}
        for path in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
            try:
                errors.update(notebook_errors(path))
            except Exception:  # noqa: BLE001 - an unreadable notebook: nothing to name
                continue
        observed = signature_of(errors)
        entries = table.get(assignment, ())
        unrun = set(not_run_in_notebooks(sorted(folder.glob("*.ipynb")))) if folder.is_dir() else set()
        if unrun:  # compared on the cells that ran only
            entries = [Entry(e.name, e.misconception, {cell: f for cell, f in e.signature.items()
                                                       if cell not in unrun}) for e in entries]
        name = "" if (student, assignment) in full else nearest(observed, entries)[0]
        named.append(Named(assignment, student, name, tuple(sorted(observed))))
    return named
