"""``autograder similarity``: which students' own cells are alike, one solution cell at a time.

For each solution cell of an assignment (by its grade id), and for the cells a student added to the
notebook (all of a student's added code cells together, ``ADDED``), every pair of submissions is
compared with copydetect's winnowing over tokens (identifiers and literals normalised, so renamed
variables, reformatting and comments do not hide a copy). What everyone was given never counts: the
released cell is subtracted as boilerplate, and a cell left as released is not compared. Two
references join the class: the instructor's solution, ``(solution)``, and the library code the
exercise re-implements, ``(library)`` (named in the exercise source's header:
``jupyter.autograder.library``, a file of an installed package, e.g. ``torch/optim/adagrad.py``).

Which pairs are reported adapts to each cell (``autograder.reports.similarity_rule``): a pair that
stands out from that cell's own pairs, above an absolute floor; pairs with a reference by a rule of
their own. ``--threshold`` replaces it with one fixed cut-off.

Pairs are ranked by what they fail together first: two notebooks that fail the same grade cells with
the same messages share a mistake, which honest students rarely do; then by similarity. What the
grading machine caused is no mistake of anyone's and is never "failed the same way": a grade cell it
did not run (a GPU check without a GPU, ``autograder.machine_limits``), a message that says the
machine lacks a GPU, and a failure most of the class shows the same way. Output:
``reports/similarity/<assignment>.csv`` (every reported pair and cell) and a self-contained
``.html`` that summarises by cell (students who copy one another shown once, as a group) and by
student, with the rest collapsed (``autograder.reports.similarity_html``). For the course staff only:
it shows solution code. A flag is a reason to look, never a verdict.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import itertools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.authoring.staff_only import SIMILARITY_COLUMNS
from autograder.course.nbgrader import Course, load_course
from autograder.course.source import read_source_cells, release_path, source_path
from autograder.errors import AutograderError
from autograder.forbidden import header
from autograder.machine_limits import is_not_run_output
from autograder.reports import similarity_rule
from autograder.reports.similarity_rule import LIBRARY, SOLUTION, Cutoff

DEFAULT_THRESHOLD = None  # None: the adaptive rule (similarity_rule); a number: that fixed cut-off
OLD_THRESHOLD = 0.7  # the fixed cut-off before the adaptive rule (issue 44), kept for comparison
K = 20  # characters per fingerprint (copydetect's noise threshold, on its filtered code)
WINDOW = 1  # winnowing window: every fingerprint kept (cells are short)
MIN_TOKENS = 60  # a cell with fewer fingerprinted characters is too short to judge (similarity_html.MIN_TOKENS)
ADDED = "(added cells)"  # the cells a student added to the notebook, compared as one
COMMON = 0.5  # a failure shown the same way by more than this share of the graded class is no shared mistake
COMMON_MIN = 4  # ... in a class of at least this many graded students
MACHINE = re.compile(r"NeedsGPU|no (?:gpu|cuda)|cuda (?:is )?not available|no nvidia driver|"
                     r"found no nvidia|torch not compiled with cuda|skipped", re.IGNORECASE)


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
    slices: tuple | None = None  # copydetect's matched regions in a's and b's code (None: not computed)
    shared_failures: list[str] = field(default_factory=list)  # grade ids both fail the same way

    @property
    def key(self) -> tuple:
        return (-len(self.shared_failures), -self.similarity, self.cell, self.a.owner, self.b.owner)

    def regions(self) -> tuple:
        """copydetect's matched regions (computed on first use: only the pairs shown need them)."""
        if self.slices is None:
            from copydetect import compare_files

            self.slices = compare_files(self.a.fingerprint, self.b.fingerprint)[2]
        return self.slices


@dataclass
class Result:
    assignment: str
    matches: list[Match]
    too_short: dict[str, list[str]]  # grade id -> owners whose cell was too short to judge
    compared: dict[str, int]  # grade id -> how many cells took part
    csv_path: Path
    html_path: Path
    cutoffs: dict[str, dict[str, Cutoff]] = field(default_factory=dict)  # cell -> "students"/reference -> cut-off
    threshold: float | None = None  # the fixed cut-off asked for, or None (adaptive)


def similarity(assignments: Sequence[str], *, course_root: Path = Path("."),
               threshold: float | None = DEFAULT_THRESHOLD, output_dir: Path | None = None) -> list[Result]:
    """Compare every pair of submissions of each assignment; write the CSV and HTML reports.
    ``threshold``: one fixed cut-off for every pair instead of the adaptive rule."""
    if threshold is not None and not 0 < threshold <= 1:
        raise AutograderError(f"--threshold must be in (0, 1], got {threshold:g}")
    course = load_course(course_root)
    out = Path(output_dir) if output_dir is not None else course.root / "reports" / "similarity"
    out.mkdir(parents=True, exist_ok=True)
    return [_assignment(course, a, threshold, out) for a in assignments]


def _fingerprint(code: str, boilerplate: Iterable[int] = ()) -> object:
    from copydetect import CodeFingerprint

    return CodeFingerprint("cell.py", K, WINDOW, boilerplate=list(boilerplate), fp=io.StringIO(code))


def _assignment(course: Course, assignment: str, threshold: float | None, out: Path) -> Result:
    from autograder.reports.similarity_html import write_html

    source = source_path(assignment, course_root=course.root)
    if not source.is_file():
        raise AutograderError(f"similarity {assignment}: no exercise source at {source}")
    solutions = {c.grade_id: c.source for c in read_source_cells(source)
                 if c.kind == "code" and c.meta.get("solution")}
    release = release_path(assignment, course_root=course.root)
    released = _cells(release, solutions)
    released_code = _released_code(release)
    library = _library_code(source)
    graded = sum(course.step_dir("autograded", s, assignment).is_dir()
                 for s in course.submitted_students(assignment))
    failures = _shared_mistakes(_failures(course, assignment), graded)
    submissions = _submissions(course, assignment, solutions, released_code)
    matches: list[Match] = []
    too_short: dict[str, list[str]] = {}
    compared: dict[str, int] = {}
    cutoffs: dict[str, dict[str, Cutoff]] = {}
    groups = [(grade_id, reference, released.get(grade_id, "")) for grade_id, reference in solutions.items()]
    groups.append((ADDED, "\n\n".join(solutions.values()), "\n\n".join(released_code)))
    for grade_id, reference, given in groups:
        boilerplate: set[int] = getattr(_fingerprint(given), "hashes", set()) if given.strip() else set()
        cells = [Cell(SOLUTION, reference, None)] + \
            [Cell(student, code, None) for student, nb in submissions.items()
             if (code := nb.get(grade_id)) is not None and code.strip() != given.strip()]
        if len(cells) == 1:
            continue  # no student wrote anything here
        if library is not None:
            cells.append(Cell(LIBRARY, library, None))
        judged = []
        for cell in cells:
            cell.fingerprint = _fingerprint(cell.code, boilerplate)
            if getattr(cell.fingerprint, "token_coverage", 0) < MIN_TOKENS:
                too_short.setdefault(grade_id, []).append(cell.owner)
            else:
                judged.append(cell)
        compared[grade_id] = len(judged)
        found, cutoffs[grade_id] = _judge(grade_id, judged, threshold)
        for match in found:
            match.shared_failures = sorted(
                cell for cell, why in failures.get(match.a.owner, {}).items()
                if failures.get(match.b.owner, {}).get(cell) == why)
        matches += found
    matches.sort(key=lambda m: m.key)
    csv_path = _write_csv(matches, out / f"{assignment}.csv")
    html_path = write_html(assignment, matches, too_short, compared, cutoffs, threshold,
                           out / f"{assignment}.html")
    return Result(assignment, matches, too_short, compared, csv_path, html_path, cutoffs, threshold)


def scores(grade_id: str, judged: Sequence[Cell]) -> list[Match]:
    """Every pair of ``judged`` (the student first; two references are not compared), scored.
    Cells whose code is the same after copydetect's normalising are compared once."""
    from copydetect import compare_files

    cache: dict[tuple[str, str], float] = {}
    pairs = []
    for a, b in itertools.combinations(judged, 2):
        if a.owner in (SOLUTION, LIBRARY) and b.owner in (SOLUTION, LIBRARY):
            continue
        if a.owner in (SOLUTION, LIBRARY):
            a, b = b, a  # the student first
        key = (getattr(a.fingerprint, "filtered_code", a.code), getattr(b.fingerprint, "filtered_code", b.code))
        if key not in cache:
            _, (share_a, share_b), _ = compare_files(a.fingerprint, b.fingerprint)
            cache[key] = cache[key[::-1]] = round(float(max(share_a, share_b)), 3)
        pairs.append(Match(grade_id, a, b, cache[key]))
    return pairs


def _judge(grade_id: str, judged: Sequence[Cell], threshold: float | None) -> tuple[list[Match], dict[str, Cutoff]]:
    """The pairs of one cell that are reported, and the cut-offs that chose them."""
    pairs = scores(grade_id, judged)
    students = sum(c.owner not in (SOLUTION, LIBRARY) for c in judged)
    by_group: dict[str, list[Match]] = {}
    for m in pairs:
        by_group.setdefault(m.b.owner if m.b.owner in (SOLUTION, LIBRARY) else "students", []).append(m)
    cutoffs = {}
    reported = []
    for group, members in by_group.items():
        values = [m.similarity for m in members]
        if threshold is not None:
            cutoff = similarity_rule.fixed(values, threshold)
        elif group == "students":
            cutoff = similarity_rule.student_cutoff(values, students)
        else:
            cutoff = similarity_rule.reference_cutoff(values, group, students)
        cutoffs[group] = cutoff
        reported += [m for m in members if m.similarity >= cutoff.value]
    return reported, cutoffs


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


def _released_code(path: Path) -> list[str]:
    """The code cells of the released notebook at ``path`` (what an added cell is not)."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - no release: nothing was given
        return []
    return [str(c.get("source", "")) for c in nb.cells if c.get("cell_type") == "code"]


def _added(path: Path, released_code: Sequence[str]) -> str | None:
    """The code cells of the notebook at ``path`` that the student added (no grade id of the
    exercise's and a source that is no released cell's), joined; None if there are none."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception:  # noqa: BLE001 - an unreadable notebook has nothing to compare
        return None
    given = {code.strip() for code in released_code}
    added = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader")
        source = str(cell.get("source", ""))
        if cell.get("cell_type") != "code" or not source.strip() or source.strip() in given:
            continue
        if isinstance(meta, dict) and (meta.get("solution") or meta.get("grade") or meta.get("locked")):
            continue  # a cell of the exercise's (its grade id compared, or restored by the grader)
        added.append(source)
    return "\n\n".join(added) if added else None


def _submissions(course: Course, assignment: str, solutions: dict[str, str],
                 released_code: Sequence[str] = ()) -> dict[str, dict[str, str]]:
    """student -> grade id (or ``ADDED``) -> code of their submitted notebook(s) of ``assignment``."""
    out: dict[str, dict[str, str]] = {}
    for student in course.submitted_students(assignment):
        folder = course.step_dir("submitted", student, assignment)
        cells: dict[str, str] = {}
        added = []
        for path in sorted(folder.glob("*.ipynb")):
            if not path.is_symlink():
                cells.update(_cells(path, solutions))
                if (code := _added(path, released_code)) is not None:
                    added.append(code)
        if added:
            cells[ADDED] = "\n\n".join(added)
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
                if grade_id and errors and not MACHINE.search("\n".join(errors)):
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


def _shared_mistakes(failures: dict[str, dict[str, str]], graded: int) -> dict[str, dict[str, str]]:
    """``failures`` less what more than ``COMMON`` of a class of ``graded`` students (``COMMON_MIN``
    or more) show the same way: the machine's doing, or the exercise's, no mistake two share alone."""
    if graded < COMMON_MIN:
        return failures
    seen = Counter((cell, why) for cells in failures.values() for cell, why in cells.items())
    common = {key for key, n in seen.items() if n > COMMON * graded}
    return {student: {cell: why for cell, why in cells.items() if (cell, why) not in common}
            for student, cells in failures.items()}
