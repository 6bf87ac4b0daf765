"""Student releases: generated from solutions/, identical on regeneration, and free of answers."""

from __future__ import annotations

import re

import nbformat
import pytest
from conftest import ROOT

from autograder.authoring.release import (
    NBGRADER_KEYS,
    ReleaseError,
    available_assignments,
    check_release_drift,
    release_path,
    source_notebook,
)

ASSIGNMENTS = available_assignments(ROOT)
FORBIDDEN_IN_RELEASE = ("### BEGIN SOLUTION", "### END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
                        "autograder.hidden", "_hidden.")


def test_there_are_releases_to_check():
    assert "01_strides" in ASSIGNMENTS, "expected at least solutions/01_strides/01_strides.py"


@pytest.mark.slow
def test_regenerating_releases_gives_no_diff():
    problems = check_release_drift(assignments=ASSIGNMENTS, course_root=ROOT)
    assert not problems, "exercises/ is stale:\n" + "\n".join(problems)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_holds_no_solution_or_hidden_test_text(assignment):
    release = nbformat.read(release_path(assignment, course_root=ROOT), as_version=4)
    text = "\n".join(cell.source for cell in release.cells)
    leaks = [marker for marker in FORBIDDEN_IN_RELEASE if marker in text]
    assert not leaks, f"{assignment} release contains {leaks}"
    source = source_notebook(assignment, course_root=ROOT)
    for cell in source.cells:
        meta = cell.metadata["nbgrader"]
        if not meta["solution"]:
            continue
        answer = re.search(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", cell.source, re.S)
        assert answer, f"{assignment}: solution cell {meta['grade_id']} has no solution region"
        answer_lines = [line.strip() for line in answer.group(1).split("\n")
                        if line.strip() and not line.strip().startswith("#")]
        released = next(c for c in release.cells if c.metadata["nbgrader"]["grade_id"] == meta["grade_id"])
        # every answer line is gone, unless the same line also appears outside the answer (e.g. "return x")
        outside = cell.source.replace(answer.group(0), "")
        visible = [line for line in answer_lines if line in released.source and line not in outside]
        assert not visible, f"{assignment}/{meta['grade_id']}: reference code reaches the release: {visible}"
        assert "raise NotImplementedError()" in released.source


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_metadata_and_no_outputs(assignment):
    release = nbformat.read(release_path(assignment, course_root=ROOT), as_version=4)
    nbformat.validate(release)
    first = release.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("# "), \
        f"{assignment}: a release starts with a markdown title cell ('# ...'), the book shows it as a page"
    assert "../../chapters/" in first.source, f"{assignment}: the introduction links its chapter"
    points = 0.0
    for cell in release.cells:
        meta = cell.metadata.get("nbgrader")
        assert meta is not None, f"{assignment}: cell {cell.get('id')} has no nbgrader metadata"
        missing = [key for key in NBGRADER_KEYS if key not in meta]
        assert not missing, f"{assignment}/{meta.get('grade_id')}: nbgrader metadata lacks {missing}"
        assert meta["schema_version"] == 3
        if meta["grade"]:
            assert meta["locked"] and "points" in meta, f"{assignment}/{meta['grade_id']}: grade cell"
            assert meta["grade_id"].startswith("test_"), f"grade ids are test_<function>: {meta['grade_id']}"
            points += meta["points"]
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{assignment}: outputs in the release"
    assert points == 10, f"{assignment}: grade cells add up to {points} points, expected 10"
    assert set(release.metadata) <= {"kernelspec", "language_info"}, "no jupytext or tool metadata"


def test_source_errors_name_the_file_and_cell(tmp_path):
    bad = tmp_path / "solutions" / "01_strides"
    bad.mkdir(parents=True)
    (bad / "01_strides.py").write_text(
        '# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, '
        '"solution": false, "task": false}\n# # Title\n\n# %%\nx = 1\n')
    with pytest.raises(ReleaseError, match=r"01_strides\.py, cell 2 .*no nbgrader metadata"):
        source_notebook("01_strides", course_root=tmp_path)


def test_unknown_assignment_is_refused():
    from autograder.authoring.release import release

    with pytest.raises(ReleaseError, match="unknown assignment"):
        release(assignments=["07_nonexistent"], course_root=ROOT)
