"""Shared fixtures for the test suite.

Fixtures (all session-scoped unless noted):
- ``course_root``: the repository root (holds nbgrader_config.py, solutions/, exercises/, catalogue/).
- ``assignments``: the assignments that have a source, a committed release and a catalogue.
- ``graded_catalogue_course``: a temporary copy of the course where every assignment in ``assignments``
  was released, the reference solution and every catalogue entry submitted as a student, and ONE
  ``nbgrader autograde <assignment>`` run per assignment with AUTOGRADER_ALLOW_CPU=1 (CATALOGUE_JOBS of
  them at once, default 2, all on one gradebook). Yields a
  ``GradedCourse`` (see its docstring): the course directory (with gradebook.db, submitted/, autograded/),
  the students per assignment and their scores per grade cell read from nbgrader's Gradebook.
  Other tests (feedback, export, the autograder's own tests) can reuse the graded directory read-only or
  run further nbgrader commands in it.
- ``autograded_catalogue_course``: ``ungraded_copy`` of ``graded_catalogue_course`` (its submissions
  removed from the gradebook, no autograded/ folder) graded by the autograder on this machine
  (``grade(allow_cpu=True)``): ``(source, root, summary)``. The identity test compares it with nbgrader,
  the Slurm grading test with a run on the cluster.
- ``browser_context`` / ``page`` (module / function scope): headless chromium with a fresh profile, and
  a fresh tab with its problems watched, for modules that define a ``site_url`` fixture.
- ``slurm_cluster``: a real one-node Slurm cluster on localhost (``tests/support/slurm_cluster.py``), started
  on first use and torn down, with no daemon left, at the end of the session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import tiers
from browser import launch_chromium, require_chromium, watch
from nbgrader.api import Gradebook
from slurm_cluster import slurm_cluster  # noqa: F401  (the fixture, for any test)

from autograder.authoring import samples
from autograder.authoring.release import (
    available_assignments,
    copy_course,
    nbgrader_environment,
    release,
)

ROOT = Path(__file__).resolve().parents[1]

# nbgrader's Gradebook runs the `alembic` executable; make this environment's bin directory visible
# to in-process Gradebook use in tests, whichever way pytest was started.
os.environ["PATH"] = nbgrader_environment()["PATH"]

# One seed for every hidden check the suite runs in a kernel or worker (plain nbgrader and the
# autograder alike), so a CI run is reproducible and the two graders see the same random inputs.
# Tests that study seeds set their own with monkeypatch.
os.environ.setdefault("AUTOGRADER_SEED", "336")


@pytest.fixture(scope="session")
def course_root() -> Path:
    """The repository root."""
    return ROOT


def assignments_with_catalogue(root: Path = ROOT) -> list[str]:
    """Assignments with a source, a committed release and a catalogue (usable for parametrization)."""
    return [a for a in available_assignments(root)
            if (root / "exercises" / a / f"{a}.ipynb").is_file()
            and (root / samples.CATALOGUE_DIR / f"{a}.py").is_file()]


@pytest.fixture(scope="session")
def assignments() -> list[str]:
    return assignments_with_catalogue()


@dataclass
class GradedCourse:
    """A temporary course graded by real nbgrader.

    root: course directory (nbgrader_config.py, gradebook.db, solutions/, exercises/, submitted/, autograded/).
    assignments: the graded assignments.
    students: assignment -> student id -> {"kind": "reference" | "wrong" | "correct", "entry": catalogue dict}.
    scores: assignment -> student id -> grade_id -> (score, max_score), from nbgrader's Gradebook.
    autograde_seconds: assignment -> wall time of its single `nbgrader autograde` call.
    """

    root: Path
    assignments: list[str]
    students: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    scores: dict[str, dict[str, dict[str, tuple[float, float]]]] = field(default_factory=dict)
    autograde_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.root / 'gradebook.db'}"

    def total(self, assignment: str, student: str) -> tuple[float, float]:
        cells = self.scores[assignment][student].values()
        return sum(s for s, _ in cells), sum(m for _, m in cells)

    def nbgrader(self, *args: str, allow_cpu: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``nbgrader <args>`` in the course directory (failing the test on a non-zero exit)."""
        env = nbgrader_environment({"AUTOGRADER_ALLOW_CPU": "1"} if allow_cpu else None)
        if not allow_cpu:
            env.pop("AUTOGRADER_ALLOW_CPU", None)
        done = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=self.root, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stdout[-4000:]}{done.stderr[-4000:]}"
        return done


def read_scores(db_url: str, assignment: str, students: list[str]) -> dict[str, dict[str, tuple[float, float]]]:
    """student -> grade_id -> (score, max_score) for ``assignment`` from the gradebook."""
    scores: dict[str, dict[str, tuple[float, float]]] = {}
    with Gradebook(db_url) as gb:
        for student in students:
            notebook = gb.find_submission_notebook(assignment, assignment, student)
            scores[student] = {g.name: (float(g.score), float(g.max_score)) for g in notebook.grades}
    return scores


def catalogue_jobs() -> int:
    """How many `nbgrader autograde` runs (one per assignment) go at once: CATALOGUE_JOBS, default 2."""
    value = os.environ.get("CATALOGUE_JOBS", "2")
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"CATALOGUE_JOBS must be a positive integer, got {value!r}")
    return int(value)


@pytest.fixture(scope="session")
def graded_catalogue_course(tmp_path_factory: pytest.TempPathFactory, assignments: list[str]) -> GradedCourse:
    """See the module docstring. Grades every catalogue once per session (minutes, not seconds).

    The per-assignment autograde runs share one gradebook; students are created up front so that
    concurrent runs (CATALOGUE_JOBS) never race to insert the same student row.
    """
    root = copy_course(ROOT, tmp_path_factory.mktemp("graded") / "course")
    course = GradedCourse(root=root, assignments=list(assignments))
    release(assignments=assignments, course_root=root)
    for assignment in assignments:
        course.students[assignment] = samples.write_catalogue_submissions(
            assignment, course_root=root, catalogue_root=ROOT)
    with Gradebook(course.db_url) as gb:
        for student in sorted({s for students in course.students.values() for s in students}):
            gb.update_or_create_student(student)

    def autograde(assignment: str) -> None:
        started = time.perf_counter()
        course.nbgrader("autograde", assignment, "--force")
        course.autograde_seconds[assignment] = time.perf_counter() - started

    with ThreadPoolExecutor(max_workers=catalogue_jobs()) as pool:
        list(pool.map(autograde, assignments))  # list() re-raises the first failure
    for assignment in assignments:
        course.scores[assignment] = read_scores(course.db_url, assignment, list(course.students[assignment]))
    return course


def ungraded_copy(source: GradedCourse, root: Path) -> Path:
    """Copy ``source``'s course to ``root`` without its grades: every catalogue submission removed
    from the gradebook, no autograded/ or feedback/ folder (the submissions stay in submitted/).
    Submissions other tests added to the shared course (not in the catalogue) are left out."""
    shutil.copytree(source.root, root, ignore=shutil.ignore_patterns("autograded", "feedback"))
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for assignment in source.assignments:
            for student in source.students[assignment]:
                gb.remove_submission(assignment, student)
            for folder in sorted((root / "submitted").glob(f"*/{assignment}")):
                student = folder.parent.name
                if student not in source.students[assignment]:
                    shutil.rmtree(folder)
                    try:
                        gb.remove_submission(assignment, student)
                    except Exception:  # noqa: BLE001 - never graded there
                        pass
    return root


@pytest.fixture(scope="session")
def autograded_catalogue_course(graded_catalogue_course, tmp_path_factory):
    """See the module docstring."""
    from autograder.grading import grade

    root = ungraded_copy(graded_catalogue_course, tmp_path_factory.mktemp("regraded") / "course")
    summary = grade(course_root=root, allow_cpu=True, progress=False)
    return graded_catalogue_course, root, summary


# -- a real browser on a module's ``site_url`` (tests/test_site_browser.py, tests/test_i18n_site.py) --

@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    """One headless chromium (fresh profile) shared by the tests of a module."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = launch_chromium(p, tmp_path_factory.mktemp("chromium-profile"))
        context.set_default_timeout(30_000)
        try:
            yield context
        finally:
            context.close()


@pytest.fixture
def page(site_url, browser_context):
    """A fresh tab on the module's ``site_url`` fixture, with its problems recorded in page.watch."""
    tab = browser_context.new_page()
    tab.watch = watch(tab)
    yield tab
    tab.close()


# -- two CPUs (``make test`` runs ``pytest -n 2 --dist loadscope``, pytest-xdist) -------------------

#: Modules that share a session fixture run on one xdist worker, so the fixture is built once: the
#: graded catalogue (identity, plain nbgrader, Slurm grading) and the one-node Slurm cluster.
SHARED_WORKER = {module: "catalogue+slurm" for module in (
    "test_autograder_identity", "test_catalogue_nbgrader", "test_grade_slurm", "test_slurm",
    "test_service_slurm")}
#: The longest units go first, so that neither worker is left with one of them at the end
#: (figures from ``--durations``; every other module follows in file order).
LONGEST_FIRST = ("catalogue+slurm", "test_term", "test_nbgrader_parity", "test_publish", "test_service",
                 "test_tamper", "test_service_workers", "test_autograder_robustness", "test_i18n_grading")


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: its module, or its module's ``SHARED_WORKER`` group."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    return SHARED_WORKER.get(module, module)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The fast tier marked (``tests/support/tiers.py``); the longest units of work first (stable:
    file order otherwise)."""
    for item in items:
        module = item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
        if tiers.is_fast(module, getattr(item, "originalname", item.name)):
            item.add_marker(pytest.mark.fast)
    rank = {name: position for position, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(work_unit(item.nodeid), len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadscope``: whole units of work per worker (each module's fixtures built once, the
    ``SHARED_WORKER`` modules together), in the order collected."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return ByWorkUnit(config, log)


# -- one warm sandbox shared by the tests of a module (the cgroup, starvation and robustness tests) --

@pytest.fixture(scope="module")
def sandbox():
    """A started ``SandboxProcess``, ready for ``start_notebook``; closed after the module."""
    from autograder.sandbox.host import SandboxProcess

    box = SandboxProcess()
    box.start()
    box.wait_ready()
    yield box
    box.close()
