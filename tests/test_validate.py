"""`nbgrader validate`, as a student runs it, on every released exercise.

With the stubs as released, validate must report the failing cells and exit normally (no crash of
nbgrader itself); with the reference solution pasted into the solution cells it must report success.
Releases carry no hidden tests, so only the visible tests run here. The notebooks are copied to a
temporary folder without the course's nbgrader_config.py, as on a student's laptop.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.authoring import samples
from autograder.authoring.release import ASSIGNMENTS, nbgrader_environment, release_path

ROOT = Path(__file__).resolve().parents[1]
FAILED_HEADER = re.compile(r"^VALIDATION FAILED ON (\d+) CELL\(S\)!", re.MULTILINE)
FAILED_BLOCK = "The following cell failed:"
SUCCESS = "Success! Your notebook passes all the tests."

pytestmark = pytest.mark.slow


def release_or_skip(assignment: str) -> Path:
    """The committed release notebook; missing is a failure in CI and a skip elsewhere."""
    path = release_path(assignment, course_root=ROOT)
    if not path.is_file():
        reason = f"{assignment}: no release at {path.relative_to(ROOT)} (run `autograder release`)"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def nbgrader_validate(notebook: Path) -> subprocess.CompletedProcess[str]:
    """`nbgrader validate <notebook>` run from the notebook's folder, as a student would."""
    # Visible tests never touch the GPU rule, but set it as graders do so 04-06 behave the same here.
    env = nbgrader_environment({"AUTOGRADER_ALLOW_CPU": "1"})
    for _attempt in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "nbgrader", "validate", notebook.name],
            cwd=notebook.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        # jupyter_client picks free TCP ports before the kernel binds them; on a busy machine another
        # process can take one first ("Address already in use"). That race is the machine's, not the
        # notebook's: start once more. Any other failure is reported as it is.
        if done.returncode == 0 or "Address already in use" not in done.stderr:
            break
    return done


def grade_cell_ids(nb: nbformat.NotebookNode) -> list[str]:
    return [
        c.metadata["nbgrader"]["grade_id"]
        for c in nb.cells
        if c.cell_type == "code"
        and c.metadata.get("nbgrader", {}).get("grade")
        and c.source.strip()
    ]


def no_crash(done: subprocess.CompletedProcess[str], what: str) -> None:
    """nbgrader exited 0 and logged no exception of its own."""
    assert done.returncode == 0, (
        f"{what}: nbgrader validate exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    )
    assert "[ValidateApp | ERROR]" not in done.stderr, (
        f"{what}: nbgrader logged an error:\n{done.stderr[-3000:]}"
    )


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_validate_reports_failures_on_stubs(assignment, tmp_path):
    release = release_or_skip(assignment)
    nb = nbformat.read(release, as_version=4)
    notebook = tmp_path / release.name
    nbformat.write(nb, notebook)

    done = nbgrader_validate(notebook)
    no_crash(done, f"{assignment} (stubs)")
    header = FAILED_HEADER.search(done.stdout)
    assert header, (
        f"{assignment}: stubs should fail validation, nbgrader said:\n{done.stdout[-3000:]}"
    )
    failed = int(header.group(1))
    blocks = done.stdout.split(FAILED_BLOCK)[1:]
    graded = grade_cell_ids(nb)
    assert failed == len(blocks), (
        f"{assignment}: header says {failed} failed cells, {len(blocks)} shown"
    )
    assert 1 <= failed <= len(graded), (
        f"{assignment}: {failed} failed cells for {len(graded)} grade cells"
    )
    stub_errors = [b for b in blocks if "NotImplementedError" in b]
    assert len(stub_errors) == failed, (
        f"{assignment}: every failure on the stubs should come from a stub (NotImplementedError); "
        f"other errors:\n" + "\n".join(b[:1500] for b in blocks if "NotImplementedError" not in b)
    )
    assert SUCCESS not in done.stdout


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_validate_passes_with_reference_solution(assignment, tmp_path):
    release = release_or_skip(assignment)
    completed = samples.reference_notebook(assignment, course_root=ROOT)
    assert grade_cell_ids(completed), f"{assignment}: the release has no grade cells"
    notebook = tmp_path / release.name
    nbformat.write(completed, notebook)

    done = nbgrader_validate(notebook)
    no_crash(done, f"{assignment} (reference solution)")
    assert SUCCESS in done.stdout, (
        f"{assignment}: the reference solution should pass validation, nbgrader said:\n"
        f"{done.stdout[-4000:]}{done.stderr[-2000:]}"
    )
    assert not FAILED_HEADER.search(done.stdout)
