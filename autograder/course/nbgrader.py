"""The nbgrader course an autograder command works on: its config, directories and gradebook.

Everything is read from ``<course_root>/nbgrader_config.py`` through nbgrader's own classes, so paths
(``submitted/``, ``autograded/``, ``feedback/``) and the gradebook URL are exactly what ``nbgrader``
itself would use from the same directory.
"""

from __future__ import annotations

import difflib
import glob
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.coursedir import CourseDirectory
from traitlets.config import Config, PyFileConfigLoader

from autograder.errors import CourseError

CONFIG_FILE = "nbgrader_config.py"


@dataclass(frozen=True)
class Course:
    """An nbgrader course rooted at ``root``, with its loaded config."""

    root: Path
    config: Config
    coursedir: CourseDirectory

    @property
    def db_url(self) -> str:
        return self.coursedir.db_url

    @property
    def course_id(self) -> str:
        return self.coursedir.course_id

    def gradebook(self) -> Gradebook:
        """A new connection to the course gradebook (use as a context manager)."""
        return Gradebook(self.db_url, self.course_id)

    def step_dir(self, step: str, student: str, assignment: str) -> Path:
        """nbgrader's directory for ``step`` ("submitted", "autograded", "feedback") of one submission."""
        name = getattr(self.coursedir, f"{step}_directory")
        return Path(self.coursedir.format_path(name, student, assignment))

    def submitted_students(self, assignment: str) -> list[str]:
        """Students with a ``submitted/<student>/<assignment>/`` directory, sorted."""
        pattern = self.coursedir.format_path(self.coursedir.submitted_directory, "*", assignment)
        found = []
        for path in glob.glob(pattern):
            if os.path.isdir(path):
                parts = Path(path).relative_to(self.root).parts
                structure = self.coursedir.directory_structure.split("/")
                found.append(parts[structure.index("{student_id}")])
        return sorted(found)

    def submitted_assignments(self) -> list[str]:
        """Assignments that have at least one submission, sorted."""
        pattern = self.coursedir.format_path(self.coursedir.submitted_directory, "*", "*")
        structure = self.coursedir.directory_structure.split("/")
        names = {
            Path(p).relative_to(self.root).parts[structure.index("{assignment_id}")]
            for p in glob.glob(pattern)
            if os.path.isdir(p)
        }
        return sorted(names)

    def gradebook_assignments(self) -> list[str]:
        """Assignments known to the gradebook (created by ``nbgrader generate_assignment``), sorted."""
        with self.gradebook() as gb:
            return sorted(a.name for a in gb.assignments)

    def require_assignment(self, assignment: str) -> None:
        """Raise CourseError unless the gradebook knows ``assignment``: "did you mean ...?" for a
        name close to one it knows, else how to add it (only when its source exists)."""
        with self.gradebook() as gb:
            try:
                gb.find_assignment(assignment)
                return
            except MissingEntry:
                known = sorted(a.name for a in gb.assignments)
        close = difflib.get_close_matches(assignment, known, n=1, cutoff=0.6)
        if close:
            raise CourseError(f"no assignment {assignment!r} in the gradebook; did you mean "
                              f"{close[0]}?")
        source = Path(self.coursedir.format_path(self.coursedir.source_directory, ".", assignment))
        if source.is_dir():
            raise CourseError(
                f"assignment {assignment!r} is not in the gradebook {self.db_url}; "
                f"run `autograder release {assignment}` (nbgrader generate_assignment) first")
        raise CourseError(f"assignment {assignment!r} is not in the gradebook, nor in "
                          f"{self.coursedir.source_directory}/ (the gradebook has "
                          f"{', '.join(known) or 'none yet'})")


def _put_interpreter_on_path() -> None:
    """nbgrader's Gradebook may run the ``alembic`` executable: find this environment's."""
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])


def load_course(course_root: Path | str = ".", *, db_url: str | None = None) -> Course:
    """Load ``course_root/nbgrader_config.py`` (required) the way nbgrader does; ``db_url`` overrides
    the gradebook (any SQLAlchemy URL nbgrader accepts)."""
    root = Path(course_root).resolve()
    _put_interpreter_on_path()
    config_path = root / CONFIG_FILE
    if not config_path.is_file():
        raise CourseError(f"{root} is not a course root: no {CONFIG_FILE} there")
    config = PyFileConfigLoader(CONFIG_FILE, path=str(root)).load_config()
    config.CourseDirectory.root = str(root)
    if db_url is not None:
        config.CourseDirectory.db_url = db_url
    coursedir = CourseDirectory(config=config)
    if str(root) not in sys.path:  # as nbgrader's init_syspath: course-local plugins import
        sys.path.insert(0, str(root))
    return Course(root=root, config=config, coursedir=coursedir)
