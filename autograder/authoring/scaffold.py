"""``autograder new-exercise NN_name``: the files of a new exercise, ready to release and grade.

Writes, and refuses to overwrite any of them:

    solutions/NN_name/NN_name.py          the source: one solution cell and its grade cell (a start)
    autograder/hidden/<module>.py         its hidden check, against torch
    catalogue/NN_name.py                  one wrong implementation and one correct variant
    locales/<lang>/exercises/NN_name.po   each edition's catalogue, every unit still to translate
    locales/<lang>/_toc.po                 brought in step with the new outline

then adds the exercise to ``course.toml`` and writes ``_toc.yml`` from it. The starting exercise
(``numel``: count a shape's elements) is a placeholder to rewrite; it releases and grades as it is.
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

from autograder.course import manifest
from autograder.course.source import (
    CELL_MARKER,
    HIDDEN_CHECKS_DIR,
    HIDDEN_CHECKS_PACKAGE,
    HIDDEN_TEST_MARKERS,
    MARKDOWN_MARKER,
    SOLUTION_MARKERS,
    source_path,
)
from autograder.errors import AutograderError

CATALOGUE_DIR = Path("catalogue")  # autograder.authoring.samples.CATALOGUE_DIR


class ScaffoldError(AutograderError):
    """The new exercise's name is taken or malformed, or one of its files exists already."""


@dataclass(frozen=True)
class Scaffold:
    exercise: manifest.Exercise
    written: tuple[Path, ...]  # relative to the course root, in the order written


def _meta(grade_id: str, *, grade: bool = False, solution: bool = False, points: int | None = None) -> str:
    """A cell header's nbgrader metadata, as the sources write it."""
    fields: dict[str, object] = {"grade": grade, "grade_id": grade_id, "locked": not solution}
    if points is not None:
        fields["points"] = points
    return "nbgrader=" + json.dumps(fields | {"schema_version": 3, "solution": solution, "task": False})


def source_text(exercise: manifest.Exercise, title: str) -> str:
    """The starting source: py:percent, every cell header with its nbgrader metadata."""
    number = int(exercise.name[:2])
    (begin_solution, end_solution), (begin_hidden, end_hidden) = SOLUTION_MARKERS, HIDDEN_TEST_MARKERS
    cell, markdown = CELL_MARKER, MARKDOWN_MARKER
    return f'''# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

{markdown} {_meta("intro")}
# # Exercise {number}: {title}
#
# Background: [the chapter](../../{exercise.chapter}.md).
#
# Replace every `raise NotImplementedError()` with your code, then run the test cell below it; a test
# cell that finishes silently passed. Hidden tests check the same contract on random shapes.
#
# Points: `numel` 2.

{cell} {_meta("imports")}
import torch

{cell} {_meta("numel", solution=True)}
def numel(shape: tuple[int, ...]) -> int:
    """How many elements a tensor of ``shape`` holds (``torch.empty(shape).numel()``); 1 for ``()``."""
    {begin_solution}
    count = 1
    for size in shape:
        count *= size
    return count
    {end_solution}


{cell} {_meta("test_numel", grade=True, points=2)}
for shape in [(2, 3), (5,), (), (4, 0, 2)]:
    assert numel(shape) == torch.empty(shape).numel(), f"numel({{shape}}): expected {{torch.empty(shape).numel()}}"
{begin_hidden}
from {HIDDEN_CHECKS_PACKAGE} import {exercise.hidden} as _hidden

_hidden.check_numel(numel)
{end_hidden}
'''


def hidden_text(exercise: manifest.Exercise) -> str:
    return f'''"""Hidden checks for exercise {exercise.name}: element counts against torch's own."""

from __future__ import annotations

from collections.abc import Callable

import torch

from autograder.hidden._base import CheckRandom, expect_equal, hidden_check

ROUNDS = 30


@hidden_check("numel")
def check_numel(numel: Callable, *, rng: CheckRandom) -> None:
    for shape in [(), (0,), (1, 1)] + [rng.shape(max_dims=4, max_size=6, allow_zero=True) for _ in range(ROUNDS)]:
        expect_equal(numel(shape), torch.empty(shape).numel(), f"numel({{shape}})")
'''


def catalogue_text(exercise: manifest.Exercise) -> str:
    return f'''"""Catalogue for {exercise.name}: realistic wrong implementations (each one mistake) and correct variants.

Loaded by file path (autograder.authoring.samples.load_catalogue). ``replace`` code is appended to the solution
cell that defines the name; ``breaks`` lists the grade cells that must lose points (and only those);
``misconception`` is the mistake's name in ``autograder report`` (catalogue/misconceptions.json,
``python -m autograder.reports.misconceptions``).
"""

WRONG = [
    {{
        "name": "sums_the_sizes",
        "misconception": "sizes added, not multiplied",
        "why": "adds the dimensions instead of multiplying them",
        "replace": {{"numel": """
def numel(shape):
    return sum(shape)
"""}},
        "breaks": ["test_numel"],
    }},
]

CORRECT = [
    {{
        "name": "math_prod",
        "why": "the standard library's product (1 for an empty shape)",
        "replace": {{"numel": """
import math

def numel(shape):
    return math.prod(shape)
"""}},
    }},
]
'''


def _hidden_module(topic: str, course_root: Path) -> str:
    """``topic``, or ``topic_checks`` where ``topic`` would shadow an installed module or a hidden one."""
    taken = (course_root / HIDDEN_CHECKS_DIR / f"{topic}.py").exists() or \
        importlib.util.find_spec(topic) is not None
    return f"{topic}_checks" if taken else topic


def _manifest_entry(exercise: manifest.Exercise) -> str:
    return (f'\n[[exercise]]\nname = "{exercise.name}"\nhidden = "{exercise.hidden}"\n'
            f'chapter = "{exercise.chapter}"\n')


def new_exercise(name: str, *, course_root: Path = Path("."), chapter: str | None = None,
                 title: str | None = None) -> Scaffold:
    """Write the files of exercise ``name`` (module docstring) under ``course_root``."""
    from autograder.i18n import catalogue

    course_root = Path(course_root)
    if not manifest.EXERCISE_NAME.match(name):
        raise ScaffoldError(f"exercise name {name!r}: expected NN_name (two digits, an underscore, "
                            "lower-case letters, digits and underscores), e.g. 07_attention")
    course = manifest.load(course_root)
    if name in course.assignments:
        raise ScaffoldError(f"{manifest.MANIFEST_FILE} already has exercise {name}")
    chapter = chapter or course.chapters[-1]
    if chapter not in course.chapters:
        raise ScaffoldError(f"--chapter {chapter!r} is not a chapter of {manifest.MANIFEST_FILE} "
                            f"(one of: {', '.join(course.chapters)})")
    exercise = manifest.Exercise(name, _hidden_module(name[3:], course_root), chapter)
    files = {
        source_path(name): source_text(exercise, title or name[3:].replace("_", " ")),
        HIDDEN_CHECKS_DIR / f"{exercise.hidden}.py": hidden_text(exercise),
        CATALOGUE_DIR / f"{name}.py": catalogue_text(exercise),
    }
    existing = [str(p) for p in files if (course_root / p).exists()]
    if existing:
        raise ScaffoldError(f"exercise {name}: would overwrite {', '.join(existing)}")
    written = []
    for relative, text in files.items():
        (course_root / relative).parent.mkdir(parents=True, exist_ok=True)
        (course_root / relative).write_text(text, encoding="utf-8")
        written.append(relative)
    manifest_path = course_root / manifest.MANIFEST_FILE
    manifest_path.write_text(manifest_path.read_text(encoding="utf-8") + _manifest_entry(exercise),
                             encoding="utf-8")
    updated = manifest.load(course_root)  # the appended entry parses and fits
    (course_root / manifest.OUTLINE_FILE).write_text(manifest.outline_yaml(updated), encoding="utf-8")
    written += [Path(manifest.MANIFEST_FILE), Path(manifest.OUTLINE_FILE)]
    for language in updated.languages:  # the exercise's catalogue, and the outline's (its lines moved)
        for translated in (source_path(name).as_posix(), manifest.OUTLINE_FILE):
            catalogue.update(translated, language.gettext, course_root)
            written.append(catalogue.catalogue_path(translated, language.gettext))
    return Scaffold(exercise, tuple(written))
