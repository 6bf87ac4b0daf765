"""A zh-TW notebook grades exactly as its English twin, through `autograder collect` and `grade`.

For every exercise four students hand in: the reference and the first wrong variant of its catalogue
(catalogue/), each once from the English release and once from the zh-TW release
(``NN_name.zh-TW.ipynb``, docstrings in Chinese). One gradebook grades them all; every grade cell must
score the same in both languages. Also: what collect does with an edition's file name.
"""

from __future__ import annotations

from pathlib import Path

import autograder_toy as toy
import nbformat
import pytest
from nbgrader.api import Gradebook

from autograder.authoring.release import copy_course, release
from autograder.authoring.samples import load_catalogue, reference_notebook, student_notebook
from autograder.cli import main
from autograder.course.source import ASSIGNMENTS, graded_notebook_name

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = "zh_TW"
STUDENTS = {"en-ref": (None, False), "zh-ref": (LANGUAGE, False),
            "en-wrong": (None, True), "zh-wrong": (LANGUAGE, True)}


def test_graded_notebook_name():
    assert graded_notebook_name("01_strides.zh-TW.ipynb") == "01_strides"
    assert graded_notebook_name("01_strides.ipynb") == "01_strides"
    assert graded_notebook_name("01_strides.bak.ipynb") == "01_strides.bak"  # not an edition


@pytest.fixture(scope="module")
def bilingual_course(tmp_path_factory):
    """A course copy with both editions of every exercise submitted, collected and graded."""
    tmp = tmp_path_factory.mktemp("bilingual")
    root = copy_course(ROOT, tmp / "course")
    release(course_root=root)
    inbox = tmp / "inbox"
    for assignment in ASSIGNMENTS:
        wrong = load_catalogue(assignment, course_root=ROOT)[0][0]["replace"]
        for student, (language, is_wrong) in STUDENTS.items():
            nb = student_notebook(assignment, wrong if is_wrong else None, course_root=root,
                                  language=language)
            name = f"{assignment}.zh-TW.ipynb" if language else f"{assignment}.ipynb"
            (inbox / student / assignment).mkdir(parents=True)
            nbformat.write(nb, inbox / student / assignment / name)
    assert main(["--course-root", str(root), "collect", str(inbox)]) == 0
    assert main(["--course-root", str(root), "grade", "--allow-cpu", "--no-progress"]) == 0
    scores = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for assignment in ASSIGNMENTS:
            for student in STUDENTS:
                notebook = gb.find_submission_notebook(assignment, assignment, student)
                scores[assignment, student] = {g.name: float(g.score) for g in notebook.grades}
    return root, scores


@pytest.mark.slow
def test_collect_stores_the_zh_tw_notebook_as_the_graded_one(bilingual_course):
    root, _ = bilingual_course
    for assignment in ASSIGNMENTS:
        folder = root / "submitted" / "zh-ref" / assignment
        assert sorted(p.name for p in folder.glob("*.ipynb")) == [f"{assignment}.ipynb"]
        assert "張量" in (folder / f"{assignment}.ipynb").read_text(encoding="utf-8") or \
            assignment != "01_strides"


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_zh_tw_grades_as_english(bilingual_course, assignment):
    _, scores = bilingual_course
    for kind in ("ref", "wrong"):
        english, chinese = scores[assignment, f"en-{kind}"], scores[assignment, f"zh-{kind}"]
        assert chinese == english, f"{assignment} {kind}: zh-TW {chinese} != English {english}"
    reference = release_points(assignment)
    assert sum(scores[assignment, "zh-ref"].values()) == reference
    assert sum(scores[assignment, "zh-wrong"].values()) < reference


def release_points(assignment: str) -> float:
    nb = reference_notebook(assignment, course_root=ROOT)
    return sum(float(c.metadata.nbgrader.get("points", 0)) for c in nb.cells
               if c.metadata.nbgrader.get("grade"))


@pytest.fixture(scope="module")
def toy_course(tmp_path_factory):
    return toy.make_toy_course(tmp_path_factory.mktemp("toy-i18n") / "course")


def test_collect_maps_an_edition_and_takes_the_one_worked_on(toy_course, tmp_path, capsys):
    """A hub fetch hands out every edition: of several in one offer, the edited one is taken; two
    edited editions are refused; two untouched ones give the English file."""
    release = nbformat.read(toy_course / "exercises" / "toy" / "toy.ipynb", as_version=4)
    worked = toy.student_notebook(toy_course, square="def square(x):\n    return x * x  # mine\n")
    offers = {"ana": {"toy.zh-TW.ipynb": worked},
              "ben": {"toy.ipynb": release, "toy.zh-TW.ipynb": worked},
              "cem": {"toy.ipynb": worked, "toy.zh-TW.ipynb": worked},
              "dan": {"toy.ipynb": release, "toy.zh-TW.ipynb": release}}
    inbox = tmp_path / "inbox"
    for student, files in offers.items():
        (inbox / student / "toy").mkdir(parents=True)
        for name, nb in files.items():
            nbformat.write(nb, inbox / student / "toy" / name)
    assert main(["--course-root", str(toy_course), "collect", str(inbox)]) == 0
    submitted = toy_course / "submitted"
    for student in ("ana", "ben", "dan"):
        assert sorted(p.name for p in (submitted / student / "toy").iterdir()) == [
            "timestamp.txt", "toy.ipynb"], student  # collect writes the submission time (issue 41)
    assert "# mine" in (submitted / "ben" / "toy" / "toy.ipynb").read_text(encoding="utf-8")
    assert "# mine" not in (submitted / "dan" / "toy" / "toy.ipynb").read_text(encoding="utf-8")
    assert not (submitted / "cem").exists()
    assert "worked on in two languages" in capsys.readouterr().err


@pytest.mark.parametrize("assignment", ["01_strides"])
def test_nbgrader_validate_accepts_the_zh_tw_release(assignment, tmp_path):
    """The translated markdown cells carry their own checksums: nbgrader validate sees no changed
    locked cell in the untouched zh-TW release, and passes the completed one."""
    import subprocess
    import sys

    from autograder.authoring.release import nbgrader_environment

    release = ROOT / "exercises" / assignment / f"{assignment}.zh-TW.ipynb"
    done = reference_notebook(assignment, course_root=ROOT, language=LANGUAGE)
    nbformat.write(done, tmp_path / "done.ipynb")
    (tmp_path / "stub.ipynb").write_bytes(release.read_bytes())
    env = nbgrader_environment({"AUTOGRADER_ALLOW_CPU": "1"})
    for name, verdict in (("stub.ipynb", "VALIDATION FAILED"), ("done.ipynb", "Success!")):
        out = subprocess.run([sys.executable, "-m", "nbgrader", "validate", name], cwd=tmp_path,
                             env=env, capture_output=True, text=True)
        text = out.stdout + out.stderr
        assert verdict in text and "HAVE CHANGED" not in text, f"{name}:\n{text[-2000:]}"
