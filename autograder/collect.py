"""Collect submissions into nbgrader's ``submitted/<student>/<assignment>/`` from a directory or a zip.

Two layouts are recognised:

- **nbgrader layout** — ``<student>/<assignment>/<notebook>.ipynb`` (what ``nbgrader collect`` leaves in
  ``submitted/``, other files such as ``timestamp.txt`` included), or the exchange's inbound folders
  ``<student>+<assignment>+<timestamp>[+<random>]/``.
- **LMS download** — notebooks side by side (any depth), one per student; the student id comes from the
  file name through ``pattern``, a regular expression with a ``student`` group (and optionally an
  ``assignment`` group; otherwise ``assignment`` must be given).

Every notebook is checked before it is copied: it must be valid nbformat JSON and carry at least one
grade id of the assignment's notebook in the gradebook. A file that fails is refused with a message
naming it and why; the rest are collected. An existing submission is never overwritten without ``force``.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.course import Course, load_course
from autograder.errors import CollectError

# Canvas/Moodle-style names start with the student's login: "jdoe_12345_67890_01_strides.ipynb"
DEFAULT_PATTERN = r"^(?P<student>[A-Za-z0-9][A-Za-z0-9.\-]*)[_\-]"
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
INBOUND = re.compile(r"^(?P<student>[^+]+)\+(?P<assignment>[^+]+)\+(?P<timestamp>[^+]+)(\+.*)?$")


@dataclass
class CollectResult:
    """What ``collect`` did: submissions written, offers refused (with why), ones left alone."""

    collected: list[tuple[str, str]] = field(default_factory=list)  # (student, assignment)
    refused: list[str] = field(default_factory=list)  # messages naming the file
    existing: list[tuple[str, str]] = field(default_factory=list)  # kept: already collected


@dataclass(frozen=True)
class _Offer:
    """One student's submission as found in the source: files to copy into submitted/."""

    student: str
    assignment: str
    files: dict[str, Path]  # name in submitted/<student>/<assignment>/ -> source file
    timestamp: str | None = None


def collect(*, source: Path, assignment: str | None = None, course_root: Path = Path("."),
            db_url: str | None = None, pattern: str = DEFAULT_PATTERN,
            force: bool = False) -> CollectResult:
    """Import the submissions in ``source`` (a directory or a .zip) into the course's ``submitted/``."""
    course = load_course(course_root, db_url=db_url)
    source = Path(source)
    if not source.exists():
        raise CollectError(f"{source}: no such file or directory")
    try:
        regex = re.compile(pattern)
    except re.error as error:
        raise CollectError(f"--pattern {pattern!r} is not a regular expression: {error}") from None
    if "student" not in regex.groupindex:
        raise CollectError(f"--pattern {pattern!r} needs a (?P<student>...) group")
    if assignment is not None:
        course.require_assignment(assignment)
    with tempfile.TemporaryDirectory(prefix="autograder-collect-") as tmp:
        root = _unpack(source, Path(tmp)) if source.is_file() else source
        result = CollectResult()
        def shown(path: Path) -> str:
            return _shown(path, root, source)

        offers = _find_offers(root, course, assignment=assignment, regex=regex, result=result,
                              shown=shown)
        expected = {name: _grade_ids(course, name) for name in {o.assignment for o in offers}}
        for offer in offers:
            _take(course, offer, expected[offer.assignment], force=force, result=result,
                  shown=shown)
    return result


def _unpack(archive: Path, into: Path) -> Path:
    if not zipfile.is_zipfile(archive):
        raise CollectError(f"{archive}: not a directory or a zip archive")
    with zipfile.ZipFile(archive) as zf:
        for member in zf.namelist():
            target = (into / member).resolve()
            if not str(target).startswith(str(into.resolve())):
                raise CollectError(f"{archive}: member {member!r} would unpack outside the archive")
        zf.extractall(into)
    return into


def _shown(path: Path, root: Path, source: Path) -> str:
    """How to name a file in messages: inside the zip, or the path on disk."""
    if source.is_file():
        return f"{source.name}:{path.relative_to(root)}"
    return str(path)


def _find_offers(root: Path, course: Course, *, assignment: str | None, regex: re.Pattern,
                 result: CollectResult, shown) -> list[_Offer]:
    known = set(course.gradebook_assignments())
    offers: list[_Offer] = []
    nested = [p for p in root.glob("*/*") if p.is_dir() and p.name in known]
    inbound = [p for p in root.iterdir() if p.is_dir() and INBOUND.match(p.name)]
    if nested or inbound:  # nbgrader layouts
        for folder in nested:
            offers.append(_Offer(folder.parent.name, folder.name, _files_in(folder)))
        for folder in inbound:
            match = INBOUND.match(folder.name)
            offers.append(_Offer(match["student"], match["assignment"], _files_in(folder),
                                 timestamp=match["timestamp"]))
        if assignment is not None:
            offers = [o for o in offers if o.assignment == assignment]
        for offer in offers:
            if offer.assignment not in known:
                result.refused.append(f"{offer.student}/{offer.assignment}: unknown assignment")
        return [o for o in offers if o.assignment in known]
    for path in sorted(p for p in root.rglob("*") if p.is_file() and not _junk(p)):
        if path.suffix != ".ipynb":
            result.refused.append(f"{shown(path)}: not a notebook (expected a .ipynb file)")
            continue
        match = regex.search(path.name)
        if match is None:
            result.refused.append(f"{shown(path)}: the file name does not match the "
                                  f"student-id pattern {regex.pattern!r}")
            continue
        name = match.groupdict().get("assignment") or assignment
        if name is None:
            raise CollectError("an LMS download needs --assignment (or an (?P<assignment>...) "
                               "group in --pattern)")
        notebooks = course_notebooks(course, name)
        if len(notebooks) != 1:
            raise CollectError(f"{name} has {len(notebooks)} notebooks; an LMS download carries "
                               "one notebook per student")
        offers.append(_Offer(match["student"], name, {f"{notebooks[0]}.ipynb": path}))
    return offers


def _junk(path: Path) -> bool:
    return any(part.startswith((".", "__MACOSX")) for part in path.parts) or path.name == "Thumbs.db"


def _files_in(folder: Path) -> dict[str, Path]:
    return {str(p.relative_to(folder)): p for p in folder.rglob("*")
            if p.is_file() and ".ipynb_checkpoints" not in p.parts}


def course_notebooks(course: Course, assignment: str) -> list[str]:
    with course.gradebook() as gb:
        return sorted(nb.name for nb in gb.find_assignment(assignment).notebooks)


def _grade_ids(course: Course, assignment: str) -> dict[str, set[str]]:
    """notebook name -> grade ids of its cells (what a notebook of this assignment carries)."""
    with course.gradebook() as gb:
        return {nb.name: {cell.name for cell in nb.source_cells}
                for nb in gb.find_assignment(assignment).notebooks}


def _take(course: Course, offer: _Offer, expected: dict[str, set[str]], *, force: bool,
          result: CollectResult, shown) -> None:
    if not STUDENT_ID.match(offer.student):
        result.refused.append(f"{shown(next(iter(offer.files.values())))}: student id "
                              f"{offer.student!r} may hold only letters, digits, '_', '.', '-'")
        return
    for name, path in offer.files.items():
        if not name.endswith(".ipynb"):
            continue
        problem = _notebook_problem(path, Path(name).stem, offer.assignment, expected)
        if problem:
            result.refused.append(f"{shown(path)}: {problem}")
            return
    dest = course.step_dir("submitted", offer.student, offer.assignment)
    if dest.exists() and not force:
        result.existing.append((offer.student, offer.assignment))
        return
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name, path in offer.files.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest / name)
    if offer.timestamp and not (dest / "timestamp.txt").exists():
        (dest / "timestamp.txt").write_text(offer.timestamp)
    result.collected.append((offer.student, offer.assignment))


def _notebook_problem(path: Path, notebook: str, assignment: str,
                      expected: dict[str, set[str]]) -> str | None:
    """Why ``path`` is not a notebook of ``assignment`` (None when it is)."""
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as error:  # noqa: BLE001 - any parse failure is a refusal
        return f"not a Jupyter notebook ({type(error).__name__}: {str(error)[:120]})"
    if notebook not in expected:
        return (f"{assignment} has no notebook named {notebook!r} "
                f"(expected {', '.join(sorted(expected))})")
    ids = {cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells} - {None}
    if not ids & expected[notebook]:
        sample = ", ".join(sorted(expected[notebook])[:3])
        return (f"not a notebook of {assignment}: none of its cells carries a grade id of "
                f"{assignment} (expected e.g. {sample})")
    return None
