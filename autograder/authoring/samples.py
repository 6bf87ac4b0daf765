"""Sample submissions: the reference solution and the catalogue of wrong/correct variants as students.

- ``reference_notebook(a)``: the committed release with every solution cell holding the reference code
  (solution markers removed), i.e. what a perfect student hands in; ``language="zh_TW"``: the same
  from the translated release, the reference code's docstrings and comments translated as there.
- ``student_notebook(a, replace)``: the same with extra code appended to the solution cell that defines
  each replaced function or class (so it overrides the reference definition).
- ``load_catalogue(a)``: ``(WRONG, CORRECT)`` from ``catalogue/<a>.py`` (loaded by file path);
  each wrong entry names its ``misconception`` (what ``autograder report`` calls it).
- ``grade_in_process(a, replace, seed=...)``: the whole source run as a kernel would, without nbgrader:
  each grade cell's error or None (the signature table of ``autograder.reports.misconceptions``).
- ``write_submission`` / ``write_catalogue_submissions``: put notebooks into nbgrader's
  ``submitted/<student>/<assignment>/<assignment>.ipynb`` layout.

Used by the tests, the autograder's demo and its benchmark.
"""

from __future__ import annotations

import re
import runpy
from pathlib import Path
from typing import Any

import nbformat
from nbformat import NotebookNode

from autograder.authoring.release import source_notebook
from autograder.course.source import (
    ASSIGNMENTS,
    hidden_region,
    release_path,
    source_path,
    strip_solution_markers,
)
from autograder.errors import SampleError
from autograder.i18n.catalogue import catalogue_path, translations
from autograder.i18n.pages import translated_notebook
from autograder.i18n.render import render
from autograder.i18n.segment import split_python

CATALOGUE_DIR = Path("catalogue")  # product data: the course's catalogue, beside solutions/
REFERENCE_STUDENT = "reference"


def _check_assignment(assignment: str) -> None:
    if assignment not in ASSIGNMENTS:
        raise SampleError(f"unknown assignment {assignment!r}; expected one of {list(ASSIGNMENTS)}")


def reference_solutions(assignment: str, *, course_root: Path = Path(".")) -> dict[str, str]:
    """grade_id -> reference code (markers removed) for every solution cell of the source."""
    _check_assignment(assignment)
    nb = source_notebook(assignment, course_root=course_root)
    return {
        cell.metadata["nbgrader"]["grade_id"]: strip_solution_markers(cell.source)
        for cell in nb.cells
        if cell.cell_type == "code" and cell.metadata["nbgrader"].get("solution")
    }


def reference_notebook(assignment: str, *, course_root: Path = Path("."), language: str | None = None
                       ) -> NotebookNode:
    """The committed release of ``assignment`` (of its ``language`` edition, if given) with every
    solution cell filled with the reference code."""
    path = release_path(assignment, course_root=course_root)
    if language is not None:
        path = path.with_name(translated_notebook(assignment, language))
    if not path.is_file():
        raise SampleError(f"{assignment}: no release at {path} (run `autograder release` first)")
    nb = nbformat.read(path, as_version=4)
    solutions = reference_solutions(assignment, course_root=course_root)
    if language is not None:
        po = catalogue_path(source_path(assignment).as_posix(), language, course_root)
        found = translations(po)
        solutions = {k: render(split_python(v), found, mark="").text for k, v in solutions.items()}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            if meta["grade_id"] not in solutions:
                raise SampleError(f"{path}: solution cell {meta['grade_id']!r} is not in the source (stale release?)")
            cell.source = solutions[meta["grade_id"]]
    return nb


def student_notebook(
    assignment: str, replace: dict[str, str] | None = None, *, course_root: Path = Path("."),
    language: str | None = None,
) -> NotebookNode:
    """The reference notebook with ``replace[name]`` appended to the solution cell that defines ``name``."""
    nb = reference_notebook(assignment, course_root=course_root, language=language)
    for name, code in (replace or {}).items():
        cell = _defining_cell(nb, name)
        if cell is None:
            raise SampleError(f"{assignment}: no solution cell defines {name!r} (replace keys must be "
                              "function or class names defined in solution cells)")
        cell.source = cell.source.rstrip("\n") + "\n\n\n# --- student variant ---\n" + code.strip("\n") + "\n"
    return nb


def _defining_cell(nb: NotebookNode, name: str) -> NotebookNode | None:
    pattern = re.compile(rf"^(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b", re.MULTILINE)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            if pattern.search(cell.source):
                return cell
    return None


def load_catalogue(assignment: str, *, course_root: Path = Path(".")) -> tuple[list[dict], list[dict]]:
    """``(WRONG, CORRECT)`` from ``catalogue/<assignment>.py``, checked for the documented shape."""
    _check_assignment(assignment)
    path = Path(course_root) / CATALOGUE_DIR / f"{assignment}.py"
    if not path.is_file():
        raise SampleError(f"{assignment}: no catalogue at {path}")
    namespace = runpy.run_path(str(path))
    wrong, correct = namespace.get("WRONG"), namespace.get("CORRECT")
    if not isinstance(wrong, list) or not isinstance(correct, list):
        raise SampleError(f"{path}: must define lists WRONG and CORRECT")
    seen: set[str] = set()
    for kind, entries, keys in (("WRONG", wrong, ("name", "misconception", "why", "replace", "breaks")),
                                ("CORRECT", correct, ("name", "replace"))):
        for number, entry in enumerate(entries):
            where = f"{path}: {kind}[{number}]"
            missing = [key for key in keys if key not in entry]
            if missing:
                raise SampleError(f"{where} lacks {missing}")
            if not re.fullmatch(r"[a-z0-9_]+", entry["name"]):
                raise SampleError(f"{where}: name {entry['name']!r} must be lower_snake_case")
            if entry["name"] in seen:
                raise SampleError(f"{where}: duplicate name {entry['name']!r}")
            seen.add(entry["name"])
            if not isinstance(entry["replace"], dict) or not entry["replace"]:
                raise SampleError(f"{where}: replace must be a non-empty dict name -> code")
            if kind == "WRONG" and (not isinstance(entry["misconception"], str)
                                    or not entry["misconception"].strip()):
                raise SampleError(f"{where}: misconception must be a non-empty text (its name in the "
                                  "report)")
            if kind == "WRONG" and (not isinstance(entry["breaks"], list) or not entry["breaks"]):
                raise SampleError(f"{where}: breaks must be a non-empty list of grade ids")
    return wrong, correct


def student_id(kind: str, name: str) -> str:
    """nbgrader student id of a catalogue entry: ``wrong-<name>`` or ``correct-<name>``."""
    if kind not in ("wrong", "correct"):
        raise SampleError(f"kind must be 'wrong' or 'correct', got {kind!r}")
    return f"{kind}-{name}"


def write_submission(nb: NotebookNode, *, course_root: Path, student: str, assignment: str) -> Path:
    """Write ``nb`` as ``submitted/<student>/<assignment>/<assignment>.ipynb``; return the path."""
    _check_assignment(assignment)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", student):
        raise SampleError(f"student id {student!r} may hold only letters, digits, '_', '.', '-'")
    path = Path(course_root) / "submitted" / student / assignment / f"{assignment}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def write_catalogue_submissions(
    assignment: str, *, course_root: Path, catalogue_root: Path | None = None
) -> dict[str, dict[str, Any]]:
    """Submit the reference and every catalogue entry of ``assignment`` into ``course_root/submitted``.

    The notebooks are built from the source and release inside ``course_root``; the catalogue is read
    from ``catalogue_root/catalogue`` (default ``course_root``), e.g. the repository when
    ``course_root`` is a temporary copy of the course.
    Returns student id -> ``{"kind": "reference" | "wrong" | "correct", "entry": <catalogue dict or None>}``.
    """
    catalogue_root = Path(catalogue_root or course_root)
    wrong, correct = load_catalogue(assignment, course_root=catalogue_root)
    students: dict[str, dict[str, Any]] = {}
    write_submission(reference_notebook(assignment, course_root=course_root), course_root=course_root,
                     student=REFERENCE_STUDENT, assignment=assignment)
    students[REFERENCE_STUDENT] = {"kind": "reference", "entry": None}
    for kind, entries in (("wrong", wrong), ("correct", correct)):
        for entry in entries:
            sid = student_id(kind, entry["name"])
            nb = student_notebook(assignment, entry["replace"], course_root=course_root)
            write_submission(nb, course_root=course_root, student=sid, assignment=assignment)
            students[sid] = {"kind": kind, "entry": entry}
    return students


# --- running hidden checks in-process (no nbgrader, no kernel) -------------------------------------

def hidden_regions(assignment: str, *, course_root: Path = Path(".")) -> dict[str, str]:
    """grade_id -> code of the hidden-test region of each grade cell of the source (in order)."""
    _check_assignment(assignment)
    regions = {}
    for cell in source_notebook(assignment, course_root=course_root).cells:
        meta = cell.metadata["nbgrader"]
        if cell.cell_type == "code" and meta.get("grade"):
            region = hidden_region(cell.source)
            if region is not None:
                regions[meta["grade_id"]] = region
    return regions


def solution_namespace(
    assignment: str, replace: dict[str, str] | None = None, *, course_root: Path = Path(".")
) -> dict[str, Any]:
    """Execute the source's non-grade code cells (reference code, plus ``replace`` appended to the
    defining cells as in ``student_notebook``) and return the resulting globals."""
    _check_assignment(assignment)
    nb = source_notebook(assignment, course_root=course_root)
    cells = [c for c in nb.cells if c.cell_type == "code" and not c.metadata["nbgrader"].get("grade")]
    for cell in cells:
        cell.source = strip_solution_markers(cell.source)
    for name, code in (replace or {}).items():
        target = _defining_cell(nbformat.v4.new_notebook(cells=cells), name)
        if target is None:
            raise SampleError(f"{assignment}: no solution cell defines {name!r}")
        target.source = target.source.rstrip("\n") + "\n\n\n" + code.strip("\n") + "\n"
    namespace: dict[str, Any] = {"__name__": f"{assignment}_solution"}
    for cell in cells:
        exec(compile(cell.source, f"<{assignment}:{cell.metadata['nbgrader']['grade_id']}>", "exec"), namespace)
    return namespace


def run_hidden_region(assignment: str, grade_id: str, namespace: dict[str, Any], *,
                      course_root: Path = Path(".")) -> None:
    """Execute the hidden-test region of ``grade_id`` in ``namespace``; raises what the check raises."""
    regions = hidden_regions(assignment, course_root=course_root)
    if grade_id not in regions:
        raise SampleError(f"{assignment}: grade cell {grade_id!r} has no hidden-test region "
                          f"(cells with one: {sorted(regions)})")
    exec(compile(regions[grade_id], f"<{assignment}:{grade_id} hidden>", "exec"), namespace)


def grade_in_process(assignment: str, replace: dict[str, str] | None = None, *, seed: int,
                     course_root: Path = Path(".")) -> dict[str, tuple[str, str] | None]:
    """Run the whole source (hidden tests included, markers removed) top to bottom in one namespace,
    as a kernel would, with ``replace`` appended to the defining cells and ``AUTOGRADER_SEED=seed``:
    grade id -> ``(ename, evalue)`` of the error its grade cell raised, or None when it passed.
    A non-grade cell that raises is passed over (nbgrader grades on: the grade cells then fail).
    What the cells print is discarded. Trusted code only (the catalogue): nothing is sandboxed."""
    import contextlib
    import io
    import os

    from autograder.course.source import marker

    _check_assignment(assignment)
    nb = source_notebook(assignment, course_root=course_root)
    cells = [c for c in nb.cells if c.cell_type == "code"]
    for cell in cells:
        cell.source = "\n".join(line for line in cell.source.split("\n") if marker(line) is None)
    solutions = nbformat.v4.new_notebook(cells=[c for c in cells if not c.metadata["nbgrader"].get("grade")])
    for name, code in (replace or {}).items():
        target = _defining_cell(solutions, name)
        if target is None:
            raise SampleError(f"{assignment}: no solution cell defines {name!r}")
        target.source = target.source.rstrip("\n") + "\n\n\n" + code.strip("\n") + "\n"
    namespace: dict[str, Any] = {"__name__": f"{assignment}_solution"}
    results: dict[str, tuple[str, str] | None] = {}
    before = os.environ.get("AUTOGRADER_SEED")
    os.environ["AUTOGRADER_SEED"] = str(seed)
    try:
        for cell in cells:
            meta = cell.metadata["nbgrader"]
            compiled = compile(cell.source, f"<{assignment}:{meta['grade_id']}>", "exec")
            try:
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                    exec(compiled, namespace)
            except Exception as error:  # noqa: BLE001 - recorded as the cell's verdict
                if meta.get("grade"):
                    results[meta["grade_id"]] = (type(error).__name__, str(error))
                continue
            if meta.get("grade"):
                results[meta["grade_id"]] = None
    finally:
        if before is None:
            os.environ.pop("AUTOGRADER_SEED", None)
        else:
            os.environ["AUTOGRADER_SEED"] = before
    return results
