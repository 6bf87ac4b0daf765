"""``autograder demo``: a small class through collect -> grade -> feedback -> report, no configuration.

In a fresh directory (a new temporary one by default) it copies the course sources, releases a couple
of CPU exercises with nbgrader (creating the SQLite gradebook), writes an LMS-style zip per exercise
— the reference solution, a few wrong answers from the exercise catalogue, one submission that never
finishes (timeout) and one that kills its own process (crash) — and runs the four commands on it.
"""

from __future__ import annotations

import re
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.authoring import samples
from autograder.authoring.release import copy_course, release
from autograder.collect import CollectResult, collect
from autograder.errors import AutograderError
from autograder.grading import GradeSummary, grade
from autograder.reports.feedback import feedback
from autograder.reports.report import report

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_ASSIGNMENTS = ("01_strides", "03_flops")
DEMO_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class DemoResult:
    course_root: Path
    collected: dict[str, CollectResult]
    summary: GradeSummary
    feedback: list[Path]
    csv: Path
    html: Path


def _first_function(entry: dict) -> str:
    return next(iter(entry["replace"]))


def class_notebooks(assignment: str, *, wrong_count: int) -> dict[str, nbformat.NotebookNode]:
    """student id -> notebook: reference, ``wrong_count`` catalogue mistakes, a timeout, a crash."""
    wrong, _ = samples.load_catalogue(assignment, course_root=REPO_ROOT)
    if not wrong:
        raise AutograderError(f"{assignment}: its catalogue has no wrong answers to demo")
    students = {"reference": samples.reference_notebook(assignment, course_root=REPO_ROOT)}
    for entry in wrong[:wrong_count]:
        sid = "wrong-" + re.sub(r"[^A-Za-z0-9]+", "-", entry["name"]).strip("-")
        students[sid] = samples.student_notebook(assignment, entry["replace"], course_root=REPO_ROOT)
    name = _first_function(wrong[0])
    students["hangs-forever"] = samples.student_notebook(
        assignment, {name: f"def {name}(*args, **kwargs):\n    while True:\n        pass\n"},
        course_root=REPO_ROOT)
    students["crashes"] = samples.student_notebook(
        assignment, {name: f"def {name}(*args, **kwargs):\n    import os\n    os._exit(1)\n"},
        course_root=REPO_ROOT)
    return students


def write_lms_zip(assignment: str, notebooks: dict[str, nbformat.NotebookNode], path: Path) -> Path:
    """A zip as an LMS hands it out: ``<student>_<assignment>.ipynb`` per student."""
    with zipfile.ZipFile(path, "w") as zf:
        for student, nb in notebooks.items():
            zf.writestr(f"{student}_{assignment}.ipynb", nbformat.writes(nb))
    return path


def demo(*, directory: Path | None = None, assignments: Sequence[str] = DEMO_ASSIGNMENTS,
         wrong_count: int = 3, workers: int | None = None,
         progress: bool = True) -> DemoResult:
    """Build the demo class in ``directory`` (must be empty or absent; default a new temp dir)."""
    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="autograder-demo-"))
    if root.exists() and any(root.iterdir()):
        raise AutograderError(f"{root} is not empty; the demo needs a fresh directory")
    copy_course(REPO_ROOT, root)
    release(assignments=list(assignments), course_root=root)
    downloads = root / "downloads"
    downloads.mkdir()
    collected = {}
    for assignment in assignments:
        archive = write_lms_zip(assignment, class_notebooks(assignment, wrong_count=wrong_count),
                                downloads / f"{assignment}.zip")
        collected[assignment] = collect(source=archive, assignment=assignment, course_root=root)
    summary = grade(course_root=root, workers=workers, timeout=DEMO_TIMEOUT_S,
                    progress=progress)
    pages = feedback(course_root=root)
    csv_path, html_path = report(course_root=root)
    return DemoResult(course_root=root, collected=collected, summary=summary, feedback=pages,
                      csv=csv_path, html=html_path)
