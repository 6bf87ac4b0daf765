"""The real nbgrader flow on every assignment: generate -> submitted/ -> autograde -> gradebook -> feedback/export.

The reference and the correct alternatives must score full marks; every wrong catalogue entry must lose
points on exactly the grade cells listed in its ``breaks`` (a wrong function costs its own cell, and only
that). Grading happens once per session in the ``graded_catalogue_course`` fixture (conftest.py).
"""

from __future__ import annotations

import csv

import pytest
from conftest import assignments_with_catalogue

pytestmark = pytest.mark.slow

ASSIGNMENTS = assignments_with_catalogue()
POINTS_PER_ASSIGNMENT = 10.0


def _cases(kind: str) -> list[tuple[str, str]]:
    from autograder.authoring import samples

    cases = []
    for assignment in ASSIGNMENTS:
        wrong, correct = samples.load_catalogue(assignment)
        if kind == "reference":
            cases.append((assignment, samples.REFERENCE_STUDENT))
        else:
            for entry in wrong if kind == "wrong" else correct:
                cases.append((assignment, samples.student_id(kind, entry["name"])))
    return cases


@pytest.mark.parametrize(("assignment", "student"), _cases("reference") + _cases("correct"))
def test_full_marks(graded_catalogue_course, assignment, student):
    scores = graded_catalogue_course.scores[assignment][student]
    lost = {gid: s for gid, s in scores.items() if s[0] != s[1]}
    assert not lost, f"{assignment}/{student} should score full marks; cells that lost points: {lost}"
    assert graded_catalogue_course.total(assignment, student) == (POINTS_PER_ASSIGNMENT, POINTS_PER_ASSIGNMENT)


@pytest.mark.parametrize(("assignment", "student"), _cases("wrong"))
def test_wrong_loses_points_on_its_own_cells(graded_catalogue_course, assignment, student):
    entry = graded_catalogue_course.students[assignment][student]["entry"]
    scores = graded_catalogue_course.scores[assignment][student]
    unknown = set(entry["breaks"]) - set(scores)
    assert not unknown, f"{assignment}/{entry['name']}: breaks names unknown grade cells {unknown}"
    lost = {gid for gid, (score, max_score) in scores.items() if score < max_score}
    assert lost == set(entry["breaks"]), (
        f"{assignment}/{entry['name']} ({entry['why']}): expected to lose points on {sorted(entry['breaks'])}, "
        f"lost on {sorted(lost)}")


def test_every_assignment_is_worth_ten_points(graded_catalogue_course):
    for assignment in graded_catalogue_course.assignments:
        _, max_total = graded_catalogue_course.total(assignment, "reference")
        assert max_total == POINTS_PER_ASSIGNMENT, f"{assignment}: {max_total} points, expected 10"


def test_reference_scores_sixty_when_all_six_exist(graded_catalogue_course):
    got = sum(graded_catalogue_course.total(a, "reference")[0] for a in graded_catalogue_course.assignments)
    assert got == POINTS_PER_ASSIGNMENT * len(graded_catalogue_course.assignments)
    print(f"reference total: {got:g}/{POINTS_PER_ASSIGNMENT * len(graded_catalogue_course.assignments):g}; "
          f"autograde seconds: { {a: round(t, 1) for a, t in graded_catalogue_course.autograde_seconds.items()} }")


@pytest.fixture(scope="session")
def feedback_course(graded_catalogue_course):
    """The graded course after `nbgrader generate_feedback` for every assignment."""
    from concurrent.futures import ThreadPoolExecutor

    from conftest import catalogue_jobs

    with ThreadPoolExecutor(max_workers=catalogue_jobs()) as pool:
        list(pool.map(lambda a: graded_catalogue_course.nbgrader("generate_feedback", a, "--force"),
                      graded_catalogue_course.assignments))
    return graded_catalogue_course


def test_feedback_has_no_hidden_check_source(feedback_course):
    pages = sorted((feedback_course.root / "feedback").rglob("*.html"))
    for assignment in feedback_course.assignments:
        for student in feedback_course.students[assignment]:
            page = feedback_course.root / "feedback" / student / assignment / f"{assignment}.html"
            assert page in pages, f"no feedback page for {assignment}/{student}"
    leaks = ("autograder.hidden", "_hidden.", "BEGIN HIDDEN TESTS", "hidden_check", "expect_equal", "def check_")
    for page in pages:
        html = page.read_text(encoding="utf-8")
        found = [marker for marker in leaks if marker in html]
        assert not found, f"{page.relative_to(feedback_course.root)} leaks hidden-check text: {found}"


def test_failed_hidden_checks_show_only_their_message(feedback_course):
    """A failed hidden check renders as one line, "HiddenCheckFailed: <what>: <message> [seed N]", in the
    graded notebook and in the student's feedback page: no frames, no check source."""
    import html as html_lib

    import nbformat

    for assignment in feedback_course.assignments:
        shown = 0
        for student in feedback_course.students[assignment]:
            graded = feedback_course.root / "autograded" / student / assignment / f"{assignment}.ipynb"
            page = (feedback_course.root / "feedback" / student / assignment / f"{assignment}.html").read_text()
            for cell in nbformat.read(graded, as_version=4).cells:
                for output in cell.get("outputs", []):
                    if output.get("output_type") == "error" and output["ename"] == "HiddenCheckFailed":
                        assert output["traceback"] == [f"HiddenCheckFailed: {output['evalue']}"], output["traceback"]
                        assert "[seed " in output["evalue"]
                        assert html_lib.escape(output["evalue"], quote=False).split("\n")[0] in page
                        shown += 1
        assert shown, f"{assignment}: no wrong submission failed a hidden check with HiddenCheckFailed"


def test_export_writes_every_submission(feedback_course):
    feedback_course.nbgrader("export", "--to", str(feedback_course.root / "grades.csv"))
    with open(feedback_course.root / "grades.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for assignment in feedback_course.assignments:
        for student in feedback_course.students[assignment]:
            row = next((r for r in rows if r["assignment"] == assignment and r["student_id"] == student), None)
            assert row is not None, f"export lacks {assignment}/{student}"
            assert float(row["score"]) == feedback_course.total(assignment, student)[0]


# --- the GPU rule through real nbgrader (this machine has no CUDA) ----------------------------------

no_cuda = pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the rule for CPU-only machines")


def _gpu_probe_course(tmp_path):
    """A one-cell course whose grade cell's hidden region asks for a GPU, released by nbgrader."""
    import shutil

    import nbformat
    from conftest import ROOT
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    def meta(grade_id, *, grade=False, solution=False, points=None):
        m = {"grade": grade, "grade_id": grade_id, "locked": not solution, "schema_version": 3,
             "solution": solution, "task": False}
        if points is not None:
            m["points"] = points
        return {"nbgrader": m}

    nb = new_notebook(cells=[
        new_markdown_cell("# GPU probe", metadata=meta("intro")),
        new_code_cell("def answer():\n    ### BEGIN SOLUTION\n    return 42\n    ### END SOLUTION",
                      metadata=meta("answer", solution=True)),
        new_code_cell("assert answer() == 42\n### BEGIN HIDDEN TESTS\nfrom autograder.hidden._gpu import gpu_device\n"
                      "gpu_device('probe check')\n### END HIDDEN TESTS",
                      metadata=meta("test_answer_gpu", grade=True, points=3)),
    ])
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    root = tmp_path / "course"
    (root / "solutions" / "gpu_probe").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    nbformat.write(nb, root / "solutions" / "gpu_probe" / "gpu_probe.ipynb")
    return root, nb


@no_cuda
def test_gpu_cell_scores_zero_without_allow_cpu_and_full_with_it(tmp_path):
    import nbformat
    from conftest import GradedCourse, read_scores

    root, source = _gpu_probe_course(tmp_path)
    course = GradedCourse(root=root, assignments=["gpu_probe"])
    course.nbgrader("generate_assignment", "gpu_probe", "--force")
    submission = nbformat.read(root / "exercises" / "gpu_probe" / "gpu_probe.ipynb", as_version=4)
    submission.cells[1].source = "def answer():\n    return 42"
    for student in ("cpu_only", "allow_cpu"):
        (root / "submitted" / student / "gpu_probe").mkdir(parents=True)
        nbformat.write(submission, root / "submitted" / student / "gpu_probe" / "gpu_probe.ipynb")
    course.nbgrader("autograde", "gpu_probe", "--student", "cpu_only", allow_cpu=False)
    course.nbgrader("autograde", "gpu_probe", "--student", "allow_cpu", allow_cpu=True)
    scores = read_scores(course.db_url, "gpu_probe", ["cpu_only", "allow_cpu"])
    assert scores["cpu_only"]["test_answer_gpu"] == (0.0, 3.0), "a GPU check must never pass silently on CPU"
    assert scores["allow_cpu"]["test_answer_gpu"] == (3.0, 3.0)

    def grade_cell_output(student):
        graded = nbformat.read(root / "autograded" / student / "gpu_probe" / "gpu_probe.ipynb", as_version=4)
        return graded.cells[2].outputs

    refused = [o for o in grade_cell_output("cpu_only") if o.output_type == "error"]
    assert refused and refused[0].ename == "NeedsGPU" and "needs a GPU" in refused[0].evalue
    assert refused[0].traceback == [f"NeedsGPU: {refused[0].evalue}"], "the reason alone, no frames"
    printed = "".join(o.get("text", "") for o in grade_cell_output("allow_cpu"))
    assert "GPU check ran on CPU (AUTOGRADER_ALLOW_CPU=1): probe check" in printed


def _gpu_cells(assignment):
    from conftest import ROOT

    from autograder.authoring.release import source_notebook

    return [c.metadata["nbgrader"]["grade_id"] for c in source_notebook(assignment, course_root=ROOT).cells
            if c.metadata["nbgrader"]["grade"] and c.metadata["nbgrader"]["grade_id"].endswith("_gpu")]


GPU_ASSIGNMENTS = [a for a in ASSIGNMENTS if _gpu_cells(a)]


@no_cuda
@pytest.mark.parametrize("assignment", GPU_ASSIGNMENTS or [pytest.param(None, marks=pytest.mark.skip(
    reason="no released assignment has a *_gpu grade cell yet"))])
def test_reference_without_allow_cpu_loses_exactly_its_gpu_cells(graded_catalogue_course, assignment):
    from conftest import read_scores

    from autograder.authoring import samples

    course = graded_catalogue_course
    samples.write_submission(samples.reference_notebook(assignment, course_root=course.root), course_root=course.root,
                             student="reference_cpu_only", assignment=assignment)
    course.nbgrader("autograde", assignment, "--student", "reference_cpu_only", "--force", allow_cpu=False)
    scores = read_scores(course.db_url, assignment, ["reference_cpu_only"])["reference_cpu_only"]
    lost = {gid for gid, (score, max_score) in scores.items() if score < max_score}
    assert lost == set(_gpu_cells(assignment)), f"{assignment}: without --allow-cpu only the GPU cells may fail"
