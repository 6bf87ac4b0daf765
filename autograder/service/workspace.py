"""The worker's private course: where the service grades, so the course gradebook stays untouched.

``<state>/workspace/`` holds an ``nbgrader_config.py`` that loads the course's own (same settings,
preprocessors, hidden-check plugins) and points nbgrader at this folder and at its own gradebook, into
which the course's assignment definitions (notebooks, grade cells with their points, locked cells with
their checksums) are mirrored. ``autograder grade`` runs here exactly as it runs on the course, so a
score the service shows is the score the instructor's grading gives (the test asserts it).
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path

from nbgrader.api import Gradebook

from autograder.course.nbgrader import Course, load_course
from autograder.course.source import SOURCES_GLOB

CONFIG = '''\
"""Written by `autograder serve` (never edit): the course's settings, this workspace's folders."""
c = get_config()  # noqa: F821
load_subconfig("nbgrader_config.py", path={course!r})  # noqa: F821
c.CourseDirectory.root = {root!r}
c.CourseDirectory.db_url = {db_url!r}
'''


class Workspace:
    """``<folder>/``: a course root whose submissions are the service's, graded in its own gradebook."""

    def __init__(self, course: Course, folder: Path) -> None:
        self.course = course
        self.root = Path(folder).resolve()
        self.db_url = f"sqlite:///{self.root / 'gradebook.db'}"
        self._fingerprint: str | None = None

    def prepare(self) -> None:
        """Write the config and mirror the assignments (again when the course's have changed)."""
        self.root.mkdir(parents=True, exist_ok=True)
        config = CONFIG.format(course=str(self.course.root), root=str(self.root), db_url=self.db_url)
        path = self.root / "nbgrader_config.py"
        if not path.exists() or path.read_text() != config:
            path.write_text(config)
        for source in sorted(self.course.root.glob(SOURCES_GLOB)):  # their rules (forbidden APIs)
            copy = self.root / source.relative_to(self.course.root)
            copy.parent.mkdir(parents=True, exist_ok=True)
            if not copy.is_file() or copy.read_bytes() != source.read_bytes():
                shutil.copyfile(source, copy)
        fingerprint = definitions_fingerprint(self.course)
        if fingerprint != self._fingerprint:
            (self.root / "gradebook.db").unlink(missing_ok=True)
            mirror_assignments(self.course.db_url, self.db_url, self.course.course_id)
            self._fingerprint = fingerprint

    def load(self) -> Course:
        return load_course(self.root, db_url=self.db_url)

    def stage(self, submissions: Sequence[tuple[str, str, str, bytes, str]]) -> None:
        """A fresh ``submitted/`` holding exactly ``(student, assignment, notebook, content,
        timestamp)`` — nothing of an earlier batch is graded again."""
        for step in ("submitted", "autograded"):
            shutil.rmtree(self.root / step, ignore_errors=True)
        for submission in submissions:
            self.put(*submission)

    def put(self, student: str, assignment: str, notebook: str, content: bytes,
            timestamp: str) -> None:
        """One submission into ``submitted/`` (a stream: the others stay), replacing the last."""
        folder = self.root / "submitted" / student / assignment
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / notebook).write_bytes(content)
        (folder / "timestamp.txt").write_text(timestamp)

    def autograded(self, student: str, assignment: str, notebook: str) -> Path:
        return self.root / "autograded" / student / assignment / notebook


def definitions_fingerprint(course: Course) -> str:
    """A hash of what grading depends on in the course gradebook: assignments, notebooks, cells."""
    digest = hashlib.sha256()
    with course.gradebook() as gb:
        for assignment in sorted(gb.assignments, key=lambda a: a.name):
            digest.update(f"A{assignment.name}|{assignment.duedate}".encode())
            for nb in sorted(assignment.notebooks, key=lambda n: n.name):
                digest.update(f"N{nb.name}".encode())
                for cell in sorted(nb.grade_cells, key=lambda c: c.name):
                    digest.update(f"G{cell.name}|{cell.max_score}|{cell.cell_type}".encode())
                for cell in sorted(nb.source_cells, key=lambda c: c.name):
                    digest.update(f"S{cell.name}|{cell.checksum}|{cell.locked}".encode())
    return digest.hexdigest()


def mirror_assignments(source_url: str, dest_url: str, course_id: str) -> None:
    """Copy every assignment's definition (not its submissions) from one gradebook to another."""
    with Gradebook(source_url, course_id) as src, Gradebook(dest_url, course_id) as dst:
        for assignment in src.assignments:
            dst.update_or_create_assignment(assignment.name, duedate=assignment.duedate)
            for nb in assignment.notebooks:
                dst.update_or_create_notebook(nb.name, assignment.name)
                for cell in nb.grade_cells:
                    dst.update_or_create_grade_cell(cell.name, nb.name, assignment.name,
                                                    max_score=cell.max_score,
                                                    cell_type=cell.cell_type)
                for cell in nb.solution_cells:
                    dst.update_or_create_solution_cell(cell.name, nb.name, assignment.name)
                for cell in nb.task_cells:
                    dst.update_or_create_task_cell(cell.name, nb.name, assignment.name,
                                                   max_score=cell.max_score,
                                                   cell_type=cell.cell_type)
                for cell in nb.source_cells:
                    dst.update_or_create_source_cell(cell.name, nb.name, assignment.name,
                                                     cell_type=cell.cell_type, locked=cell.locked,
                                                     source=cell.source, checksum=cell.checksum)
