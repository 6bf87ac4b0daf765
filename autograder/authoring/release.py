"""Release exercises: jupytext sources in solutions/ -> nbgrader source notebooks -> student releases.

    solutions/NN_name/NN_name.py   (py:percent, nbgrader metadata on each cell header; the truth)
      -> solutions/NN_name/NN_name.ipynb   (generated here, gitignored; nbgrader's "source")
      -> exercises/NN_name/NN_name.ipynb   (`nbgrader generate_assignment --force`; committed)
    -> exercises/NN_name/NN_name.zh-TW.ipynb  (the same release, prose translated from
       locales/zh_TW/exercises/NN_name.po; grade cells untouched, locked code cells too but for the
       imports cell's message hook, autograder.i18n.messages; committed)

The conversion is deterministic (cell ids are the grade ids, no jupytext or timestamp metadata), so
regenerating a release gives the same bytes; ``check_release_drift`` regenerates in a temporary copy of
the course and lists every difference from the committed exercises/.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from autograder.course.source import (
    ASSIGNMENTS,
    RELEASE_DIR,
    SOURCE_DIR,
    read_source_cells,
    release_path,
    source_path,
)
from autograder.errors import ReleaseError
from autograder.i18n import LANGUAGES, LOCALES_DIR
from autograder.i18n.catalogue import catalogue_path, translations
from autograder.i18n.messages import NOTEBOOK_KEY, kernel_hook
from autograder.i18n.notebook import translate_notebook
from autograder.i18n.pages import NOTES_DIR, translated_notebook

NBGRADER_KEYS = ("grade", "grade_id", "locked", "schema_version", "solution", "task")
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3"}


def available_assignments(course_root: Path = Path(".")) -> list[str]:
    """The known assignments whose jupytext source exists under ``course_root/solutions``."""
    return [a for a in ASSIGNMENTS if source_path(a, course_root=course_root).is_file()]


def source_notebook(assignment: str, *, course_root: Path = Path(".")) -> NotebookNode:
    """Read the jupytext source of ``assignment`` into a normalized, validated nbgrader notebook
    (``autograder.course.source.read_source_cells`` reads it as jupytext does; a test holds them equal)."""
    path = source_path(assignment, course_root=course_root)
    if not path.is_file():
        raise ReleaseError(f"{assignment}: no source at {path} (expected a jupytext py:percent file)")
    new_cell = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell}
    nb = nbformat.v4.new_notebook(cells=[new_cell[cell.kind](cell.source, metadata={"nbgrader": cell.meta})
                                         for cell in read_source_cells(path)])
    return _normalize(nb, path)


def _normalize(nb: NotebookNode, path: Path) -> NotebookNode:
    """Deterministic notebook: ids from grade ids, fixed kernelspec, no jupytext metadata, no outputs."""
    seen: set[str] = set()
    for number, cell in enumerate(nb.cells, start=1):
        meta = cell.metadata.get("nbgrader")
        where = f"{path}, cell {number} ({cell.cell_type}, starts {cell.source[:40]!r})"
        if meta is None:
            raise ReleaseError(f"{where}: no nbgrader metadata on the cell header")
        missing = [key for key in NBGRADER_KEYS if key not in meta]
        if missing:
            raise ReleaseError(f"{where}: nbgrader metadata lacks {missing}")
        if meta["schema_version"] != 3:
            raise ReleaseError(f"{where}: schema_version must be 3, got {meta['schema_version']!r}")
        if meta["grade"] and "points" not in meta:
            raise ReleaseError(f"{where}: grade cell {meta['grade_id']!r} has no points")
        grade_id = meta["grade_id"]
        if grade_id in seen:
            raise ReleaseError(f"{where}: duplicate grade_id {grade_id!r}")
        seen.add(grade_id)
        cell.id = grade_id
        cell.metadata = NotebookNode({"nbgrader": meta})
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata = NotebookNode(
        {"kernelspec": dict(KERNELSPEC), "language_info": dict(LANGUAGE_INFO)}
    )
    nb.nbformat, nb.nbformat_minor = 4, 5
    nbformat.validate(nb)
    return nb


def write_source_notebook(assignment: str, *, course_root: Path = Path(".")) -> Path:
    """Convert the jupytext source to ``solutions/<a>/<a>.ipynb`` (what nbgrader reads); return its path."""
    nb = source_notebook(assignment, course_root=course_root)
    out = source_path(assignment, course_root=course_root).with_suffix(".ipynb")
    nbformat.write(nb, out)
    return out


def release(*, assignments: Sequence[str] | None = None, course_root: Path = Path(".")) -> list[Path]:
    """Regenerate the student release of each assignment (default: every one with a source).

    Converts each source with jupytext, then runs ``nbgrader generate_assignment <a> --force`` in
    ``course_root`` (which must hold the project's nbgrader_config.py). Returns the release notebooks.
    """
    course_root = Path(course_root).resolve()
    if not (course_root / "nbgrader_config.py").is_file():
        raise ReleaseError(f"{course_root} has no nbgrader_config.py; pass the course root directory")
    names = list(assignments) if assignments is not None else available_assignments(course_root)
    unknown = [a for a in names if a not in ASSIGNMENTS]
    if unknown:
        raise ReleaseError(f"unknown assignment(s) {unknown}; expected some of {list(ASSIGNMENTS)}")
    released = []
    for assignment in names:
        write_source_notebook(assignment, course_root=course_root)
        run_nbgrader(["generate_assignment", assignment, "--force"], course_root)
        out = release_path(assignment, course_root=course_root)
        if not out.is_file():
            raise ReleaseError(f"{assignment}: nbgrader reported success but wrote no {out}")
        _strip_release(out)
        released.append(out)
        released += write_translated_releases(assignment, course_root=course_root)
    return released


def write_translated_releases(assignment: str, *, course_root: Path = Path(".")) -> list[Path]:
    """Write ``exercises/<a>/<a>.<tag>.ipynb`` for every language with a catalogue of ``assignment``.

    Translated markdown cells and student cells get nbgrader's checksum of their new source (so
    ``nbgrader validate`` accepts the untouched notebook); grade cells and locked code cells are the
    English release's, byte for byte, but for the first locked code cell (the imports), which also
    shows the visible tests' failure messages in the edition's language (``_add_message_hook``).
    A unit without a current translation shows in English, marked. The notebook's
    ``metadata.course.language`` names the edition (feedback and the service translate by it)."""
    from nbgrader.utils import compute_checksum

    english = release_path(assignment, course_root=course_root)
    nb = nbformat.read(english, as_version=4)
    written = []
    for language in LANGUAGES:
        source = f"{SOURCE_DIR}/{assignment}/{assignment}.py"
        po = catalogue_path(source, language, course_root)
        if not po.is_file():
            continue
        note = course_root / LOCALES_DIR / language / NOTES_DIR / "exercises.md"
        translated, changed, _ = translate_notebook(
            nb, translations(po), note=note.read_text(encoding="utf-8") if note.is_file() else "")
        translated = nbformat.from_dict(translated)
        translated.metadata[NOTEBOOK_KEY] = {"language": LANGUAGES[language]["tag"]}
        changed += _add_message_hook(translated, course_root / source, language, course_root)
        for index in changed:
            cell = translated.cells[index]
            if "checksum" in cell.metadata.get("nbgrader", {}):
                cell.metadata.nbgrader.checksum = compute_checksum(cell)
        out = english.with_name(translated_notebook(assignment, language))
        nbformat.write(translated, out)
        written.append(out)
    return written


def _add_message_hook(nb: NotebookNode, source: Path, language: str, course_root: Path) -> list[int]:
    """Append ``autograder.i18n.messages.kernel_hook`` (the visible tests' messages in ``language``,
    shown by the student's own kernel) to the first locked code cell (the imports); return its index.
    Grading never runs it: a locked cell's source is the gradebook's (the English)."""
    hook = kernel_hook(source, language, course_root)
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata.get("nbgrader", {})
        if hook and cell.cell_type == "code" and meta.get("locked") and not meta.get("grade") \
                and not meta.get("solution"):
            cell.source = f"{cell.source}\n\n\n{hook}"
            return [index]
    return []


def _strip_release(path: Path) -> None:
    """Rewrite a release with nbformat's canonical layout and no outputs (the committed form)."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nbformat.write(nb, path)


def nbgrader_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """``os.environ`` with this interpreter's bin directory first on PATH (nbgrader's Gradebook runs
    the ``alembic`` executable, and kernels should be this environment's), plus ``extra``."""
    env = dict(os.environ)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", "")])
    env.update(extra or {})
    return env


def run_nbgrader(args: list[str], course_root: Path, *, env: dict[str, str] | None = None
                 ) -> subprocess.CompletedProcess[str]:
    """Run ``nbgrader <args>`` in ``course_root`` with this interpreter; raise ReleaseError on failure."""
    command = [sys.executable, "-m", "nbgrader", *args]
    done = subprocess.run(command, cwd=course_root, capture_output=True, text=True,
                          env=env or nbgrader_environment())
    if done.returncode != 0:
        raise ReleaseError(
            f"`nbgrader {' '.join(args)}` failed in {course_root} (exit {done.returncode}):\n"
            f"{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return done


def copy_course(course_root: Path, destination: Path, *, include: Iterable[str] = ()) -> Path:
    """Copy what a release needs (config, solutions/, exercises/, locales/ and ``include``) into
    ``destination``."""
    course_root, destination = Path(course_root), Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    shutil.copy2(course_root / "nbgrader_config.py", destination / "nbgrader_config.py")
    ignore = shutil.ignore_patterns("*.ipynb_checkpoints", "__pycache__")
    for name in (SOURCE_DIR, RELEASE_DIR, LOCALES_DIR, *include):
        if (course_root / name).is_dir():
            shutil.copytree(course_root / name, destination / name, ignore=ignore, dirs_exist_ok=True)
        elif (course_root / name).is_file():
            shutil.copy2(course_root / name, destination / name)
    return destination


def check_release_drift(
    *, assignments: Sequence[str] | None = None, course_root: Path = Path(".")
) -> list[str]:
    """Regenerate releases in a temporary copy of the course; describe every difference from the
    committed ``exercises/`` (missing, extra or changed files). An empty list means no drift."""
    course_root = Path(course_root).resolve()
    names = list(assignments) if assignments is not None else available_assignments(course_root)
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="release-drift-") as tmp:
        copy = copy_course(course_root, Path(tmp) / "course")
        for assignment in names:
            shutil.rmtree(copy / RELEASE_DIR / assignment, ignore_errors=True)
        release(assignments=names, course_root=copy)
        for assignment in names:
            committed = course_root / RELEASE_DIR / assignment
            fresh = copy / RELEASE_DIR / assignment
            problems += _compare_trees(committed, fresh, label=f"{RELEASE_DIR}/{assignment}")
    return problems


def _compare_trees(committed: Path, fresh: Path, *, label: str) -> list[str]:
    if not committed.is_dir():
        return [f"{label}: not committed (run `autograder release`)"]
    files_committed = {p.relative_to(committed) for p in committed.rglob("*") if p.is_file()}
    files_fresh = {p.relative_to(fresh) for p in fresh.rglob("*") if p.is_file()}
    problems = [f"{label}/{p}: committed but not produced by the release" for p in sorted(files_committed - files_fresh)]
    problems += [f"{label}/{p}: produced by the release but not committed" for p in sorted(files_fresh - files_committed)]
    for rel in sorted(files_committed & files_fresh):
        if not filecmp.cmp(committed / rel, fresh / rel, shallow=False):
            problems.append(f"{label}/{rel}: differs from a fresh release (run `autograder release`)")
    return problems
