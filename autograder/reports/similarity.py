"""``autograder similarity``: which students' own cells are alike, one solution cell at a time.

For each solution cell of an assignment (by its grade id) every pair of submissions is compared with
copydetect's winnowing over tokens (identifiers and literals normalised, so renamed variables,
reformatting and comments do not hide a copy). What everyone was given never counts: the released
cell is subtracted as boilerplate, and a cell left as released is not compared. Two references join
the class: the instructor's solution, ``(solution)``, and the library code the exercise re-implements,
``(library)`` (named in the exercise source's header: ``jupyter.autograder.library``, a file of an
installed package, e.g. ``torch/optim/adagrad.py``).

Pairs are ranked by what they fail together first: two notebooks that fail the same grade cells with
the same messages share a mistake, which honest students rarely do; then by similarity. A grade cell the
grading machine did not run (a GPU check without a GPU, ``autograder.machine_limits``) is no mistake
of anyone's and is never "failed the same way". Output:
``reports/similarity/<assignment>.csv`` (one row per pair and cell at or above the threshold) and a
self-contained ``.html`` with the two cells side by side, the matched regions marked. For the course
staff only: it shows solution code. A flag is a reason to look, never a verdict.
"""

from __future__ import annotations

import csv
import html
import importlib.util
import io
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.authoring.staff_only import PAGE_MARK, SIMILARITY_COLUMNS
from autograder.course.nbgrader import Course, load_course
from autograder.course.source import read_source_cells, release_path, source_path
from autograder.errors import AutograderError
from autograder.forbidden import header
from autograder.machine_limits import is_not_run_output

DEFAULT_THRESHOLD = 0.7  # tests/test_similarity.py's class: copies >= 0.94, honest pairs <= 0.43,
#                         an honest cell that converged on the instructor's solution 0.63 (README)
K = 20  # characters per fingerprint (copydetect's noise threshold, on its filtered code)
WINDOW = 1  # winnowing window: every fingerprint kept (cells are short)
MIN_TOKENS = 60  # a cell with fewer fingerprinted characters is too short to judge
SHOWN = 200  # pairs shown side by side in the HTML (the CSV holds every row)
SOLUTION, LIBRARY = "(solution)", "(library)"


@dataclass
class Cell:
    owner: str  # a student id, SOLUTION or LIBRARY
    code: str
    fingerprint: object  # copydetect.CodeFingerprint


@dataclass
class Match:
    cell: str
    a: Cell
    b: Cell
    similarity: float
    slices: tuple  # copydetect's matched regions in a's and b's code
    shared_failures: list[str] = field(default_factory=list)  # grade ids both fail the same way

    @property
    def key(self) -> tuple:
        return (-len(self.shared_failures), -self.similarity, self.cell, self.a.owner, self.b.owner)


@dataclass
class Result:
    assignment: str
    matches: list[Match]
    too_short: dict[str, list[str]]  # grade id -> owners whose cell was too short to judge
    compared: dict[str, int]  # grade id -> how many cells took part
    csv_path: Path
    html_path: Path


def similarity(assignments: Sequence[str], *, course_root: Path = Path("."),
               threshold: float = DEFAULT_THRESHOLD, output_dir: Path | None = None) -> list[Result]:
    """Compare every pair of submissions of each assignment; write the CSV and HTML reports."""
    if not 0 < threshold <= 1:
        raise AutograderError(f"--threshold must be in (0, 1], got {threshold:g}")
    course = load_course(course_root)
    out = Path(output_dir) if output_dir is not None else course.root / "reports" / "similarity"
    out.mkdir(parents=True, exist_ok=True)
    return [_assignment(course, a, threshold, out) for a in assignments]


def _assignment(course: Course, assignment: str, threshold: float, out: Path) -> Result:
    from copydetect import CodeFingerprint

    def fingerprint(code: str, boilerplate: Iterable[int] = ()) -> object:
        return CodeFingerprint("cell.py", K, WINDOW, boilerplate=list(boilerplate),
                               fp=io.StringIO(code))

    source = source_path(assignment, course_root=course.root)
    if not source.is_file():
        raise AutograderError(f"similarity {assignment}: no exercise source at {source}")
    solutions = {c.grade_id: c.source for c in read_source_cells(source)
                 if c.kind == "code" and c.meta.get("solution")}
    released = _cells(release_path(assignment, course_root=course.root), solutions)
    library = _library_code(source)
    failures = _failures(course, assignment)
    matches: list[Match] = []
    too_short: dict[str, list[str]] = {}
    compared: dict[str, int] = {}
    submissions = _submissions(course, assignment, solutions)
    for grade_id, reference in solutions.items():
        given = released.get(grade_id, "")
        boilerplate: set[int] = getattr(fingerprint(given), "hashes", set()) if given.strip() else set()
        cells = [Cell(SOLUTION, reference, None)] + \
            [Cell(student, code, None) for student, nb in submissions.items()
             if (code := nb.get(grade_id)) is not None and code.strip() != given.strip()]
        if library is not None:
            cells.append(Cell(LIBRARY, library, None))
        judged = []
        for cell in cells:
            cell.fingerprint = fingerprint(cell.code, boilerplate)
            if getattr(cell.fingerprint, "token_coverage", 0) < MIN_TOKENS:
                too_short.setdefault(grade_id, []).append(cell.owner)
            else:
                judged.append(cell)
        compared[grade_id] = len(judged)
        for a, b in itertools.combinations(judged, 2):
            if a.owner in (SOLUTION, LIBRARY) and b.owner in (SOLUTION, LIBRARY):
                continue
            if a.owner in (SOLUTION, LIBRARY):
                a, b = b, a  # the student first
            match = _compare(grade_id, a, b)
            if match.similarity >= threshold:
                match.shared_failures = sorted(
                    cell for cell, why in failures.get(a.owner, {}).items()
                    if failures.get(b.owner, {}).get(cell) == why)
                matches.append(match)
    matches.sort(key=lambda m: m.key)
    csv_path = _write_csv(matches, out / f"{assignment}.csv")
    html_path = _write_html(assignment, matches, too_short, compared, threshold,
                            out / f"{assignment}.html")
    return Result(assignment, matches, too_short, compared, csv_path, html_path)


def _compare(grade_id: str, a: Cell, b: Cell) -> Match:
    from copydetect import compare_files

    _, (share_a, share_b), slices = compare_files(a.fingerprint, b.fingerprint)
    return Match(grade_id, a, b, round(float(max(share_a, share_b)), 3), slices)


def _cells(path: Path, wanted: dict[str, str]) -> dict[str, str]:
    """grade id -> source of the code cells of the notebook at ``path`` that ``wanted`` names (a
    grade id held by two cells: neither, it cannot be told which is the student's)."""
    if not path.is_file():
        return {}
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - an unreadable notebook has nothing to compare
        return {}
    found: dict[str, list[str]] = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        grade_id = meta.get("grade_id") if isinstance(meta, dict) else None
        if cell.get("cell_type") == "code" and grade_id in wanted:
            found.setdefault(grade_id, []).append(str(cell.get("source", "")))
    return {grade_id: sources[0] for grade_id, sources in found.items() if len(sources) == 1}


def _submissions(course: Course, assignment: str, solutions: dict[str, str]) -> dict[str, dict[str, str]]:
    """student -> grade id -> code of their submitted notebook(s) of ``assignment``."""
    out: dict[str, dict[str, str]] = {}
    for student in course.submitted_students(assignment):
        folder = course.step_dir("submitted", student, assignment)
        cells: dict[str, str] = {}
        for path in sorted(folder.glob("*.ipynb")):
            if not path.is_symlink():
                cells.update(_cells(path, solutions))
        out[student] = cells
    return out


def _library_code(source: Path) -> str | None:
    """The library file the exercise re-implements (``jupyter.autograder.library``), if it names one."""
    jupyter = header(source).get("jupyter") or {}
    named = (jupyter.get("autograder") or {}).get("library") if isinstance(jupyter, dict) else None
    if named is None:
        return None
    if not isinstance(named, str) or "/" not in named:
        raise AutograderError(f"{source}: jupyter.autograder.library must be a path inside an "
                              f"installed package, like torch/optim/adagrad.py (got {named!r})")
    package, rest = named.split("/", 1)
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise AutograderError(f"{source}: the library {named} is not installed here")
    path = Path(list(spec.submodule_search_locations)[0]) / rest
    if not path.is_file():
        raise AutograderError(f"{source}: {path} does not exist in the installed {package}")
    return path.read_text(encoding="utf-8")


def _failures(course: Course, assignment: str) -> dict[str, dict[str, str]]:
    """student -> grade id -> the error their autograded notebook shows there (``ename: evalue``,
    seeds and addresses left in: the same wrong value gives the same text)."""
    out: dict[str, dict[str, str]] = {}
    for student in course.submitted_students(assignment):
        folder = course.step_dir("autograded", student, assignment)
        for path in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
            try:
                nb = nbformat.read(path, as_version=4)
            except Exception:  # noqa: BLE001 - not graded yet: no failures to share
                continue
            for cell in nb.cells:
                grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
                outputs = cell.get("outputs", [])
                if any(is_not_run_output(o) for o in outputs):
                    continue  # the machine's failure, shared by everyone graded there
                errors = [f"{o.get('ename')}: {o.get('evalue')}" for o in outputs
                          if o.get("output_type") == "error"]
                if grade_id and errors:
                    out.setdefault(student, {})[grade_id] = "\n".join(errors)
    return out


def _write_csv(matches: list[Match], path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(SIMILARITY_COLUMNS)
        for m in matches:
            writer.writerow([m.a.owner, m.b.owner, m.cell, f"{m.similarity:.3f}",
                             len(m.shared_failures), " ".join(m.shared_failures)])
    return path


def _marked(code: str, region: object) -> str:
    """``code`` as escaped HTML with copydetect's matched regions (a 2 x N array of starts and
    ends, or an empty one) in ``<mark>``."""
    import numpy as np

    array = np.asarray(region)
    pairs = sorted(zip(array[0].tolist(), array[1].tolist(), strict=True)) if array.ndim == 2 else []
    out, at = [], 0
    for start, end in pairs:
        start, end = max(int(start), at), min(int(end), len(code))
        if start >= end:
            continue
        out += [html.escape(code[at:start]), "<mark>", html.escape(code[start:end]), "</mark>"]
        at = end
    out.append(html.escape(code[at:]))
    return "".join(out)


STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:90em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em}pre{background:#f6f6f6;padding:.6em;
overflow-x:auto;font-size:.85em}mark{background:#ffd54f}h3{margin-top:2em}"""


def _write_html(assignment: str, matches: list[Match], too_short: dict[str, list[str]],
                compared: dict[str, int], threshold: float, path: Path) -> Path:
    esc = html.escape
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Similarity: "
             f"{esc(assignment)}</title><style>{STYLE}</style></head><body>",
             f"<h1>Similarity of the students' own cells: {esc(assignment)}</h1>",
             f"<p>{PAGE_MARK} (it shows solution code). Each row is a reason to look at "
             "two notebooks side by side, never a verdict: students taught from the same notes write "
             "alike, and short cells say little. What everyone was given is not counted.</p>",
             f"<p>Threshold {threshold:g}; cells compared: "
             + ", ".join(f"{esc(c)} {n}" for c, n in compared.items()) + ".</p>"]
    if too_short:
        parts.append("<p>Too short to judge (fewer than "
                     f"{MIN_TOKENS} characters of code after normalising): "
                     + "; ".join(f"{esc(c)}: {esc(', '.join(o))}" for c, o in too_short.items())
                     + ".</p>")
    parts.append("<table><tr><th>#</th><th>student</th><th>with</th><th>cell</th><th>similarity</th>"
                 "<th>failed the same way</th></tr>")
    parts += [f"<tr><td>{f'<a href=#m{n}>{n}</a>' if n <= SHOWN else n}</td><td>{esc(m.a.owner)}</td><td>{esc(m.b.owner)}</td>"
              f"<td>{esc(m.cell)}</td><td>{m.similarity:.2f}</td>"
              f"<td>{esc(' '.join(m.shared_failures)) or '—'}</td></tr>"
              for n, m in enumerate(matches, start=1)]
    parts.append("</table>")
    if not matches:
        parts.append("<p>No pair at or above the threshold.</p>")
    if len(matches) > SHOWN:
        parts.append(f"<p>The first {SHOWN} of {len(matches)} rows are shown side by side below; "
                     "the CSV holds them all.</p>")
    for n, m in enumerate(matches[:SHOWN], start=1):
        parts.append(f"<h3 id='m{n}'>{n}. {esc(m.a.owner)} and {esc(m.b.owner)}: {esc(m.cell)}, "
                     f"{m.similarity:.2f}</h3><div class='pair'>"
                     f"<pre>{_marked(m.a.code, m.slices[0])}</pre>"
                     f"<pre>{_marked(m.b.code, m.slices[1])}</pre></div>")
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
