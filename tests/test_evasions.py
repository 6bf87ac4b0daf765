"""Forbidden APIs that hold (issue 27): the evasion catalogue graded with the real sandbox.

Every entry of ``catalogue/evasions/<assignment>.py`` reaches torch's AdaGrad by one route (an alias, a
computed ``getattr``, ``importlib``, ``sys.modules``, ``gc``, a thread, a pickle, a fresh interpreter,
the source read back, a companion file...). The class is graded twice, as the course setting allows:

- rules off (``c.Autograder.forbidden_apis = False``): each route works, full marks (the entry is a
  real evasion, not a broken notebook);
- rules on (the default): each entry scores no more than the blank notebook on the checks that go
  through the optimizer, keeps its points elsewhere, and the feedback of each of those checks names
  the rule; the honest entries (and the reference) keep full marks.
"""

from __future__ import annotations

import importlib.util
import io
import re
import zipfile
from pathlib import Path

import nbformat
import pytest
from conftest import ROOT

from autograder.authoring import samples

ASSIGNMENT = "04_adagrad"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")


def _catalogue() -> tuple[list[dict], list[dict]]:
    spec = importlib.util.spec_from_file_location("evasions_04", ROOT / "catalogue" / "evasions" / f"{ASSIGNMENT}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EVASIONS, module.HONEST


EVASIONS, HONEST = _catalogue()


def _library_copy() -> str:
    """torch's own adagrad.py, its relative imports made absolute (as a student shipping it would)."""
    origin = importlib.util.find_spec("torch").submodule_search_locations[0]
    text = (Path(origin) / "optim" / "adagrad.py").read_text()
    return re.sub(r"^from \.(\w+)", r"from torch.optim.\1", text, flags=re.MULTILINE)


def _text(content: str) -> str:
    return _library_copy() if content == "<the library's source>" else content


def _write_companions(folder: Path, companions: dict) -> None:
    for name, content in companions.items():
        if isinstance(content, dict):  # a zip of these members
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w") as archive:
                for member, text in content.items():
                    archive.writestr(member, _text(text))
            (folder / name).write_bytes(buffer.getvalue())
        else:
            (folder / name).write_text(_text(content))


def _grade_class(tmp_path: Path, *, rules_on: bool) -> dict[str, dict[str, tuple[float, float, str]]]:
    """Grade the reference, the blank release, every evasion and every honest entry; return
    student -> grade cell -> (score, max score, what the student reads there: the cell's error in the
    feedback notebook, and the submission's problems)."""
    from nbgrader.api import Gradebook

    from autograder.authoring.release import copy_course, release
    from autograder.grading import grade
    from autograder.grading.run_record import read_record

    root = copy_course(ROOT, tmp_path / "course")
    if not rules_on:
        with open(root / "nbgrader_config.py", "a") as config:
            config.write("\nc.Autograder.forbidden_apis = False\n")
    release(assignments=[ASSIGNMENT], course_root=root)
    samples.write_submission(samples.reference_notebook(ASSIGNMENT, course_root=root),
                             course_root=root, student="reference", assignment=ASSIGNMENT)
    blank = nbformat.read(root / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    samples.write_submission(blank, course_root=root, student="blank", assignment=ASSIGNMENT)
    for kind, entries in (("evades", EVASIONS), ("honest", HONEST)):
        for entry in entries:
            student = f"{kind}-{entry['name'].replace('_', '-')}"
            if kind == "honest":
                nb = samples.student_notebook(ASSIGNMENT, entry["replace"], course_root=root)
            else:  # the whole cell: nothing of the reference's class is left to fall back on
                nb = samples.reference_notebook(ASSIGNMENT, course_root=root)
                for cell in nb.cells:
                    if cell.metadata.get("nbgrader", {}).get("grade_id") in entry["replace"]:
                        cell.source = entry["replace"][cell.metadata.nbgrader.grade_id]
            path = samples.write_submission(nb, course_root=root, student=student, assignment=ASSIGNMENT)
            _write_companions(path.parent, entry.get("companions", {}))
    grade(course_root=root, allow_cpu=True, progress=False)
    results: dict[str, dict[str, tuple[float, float, str]]] = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student in sorted(p.name for p in (root / "submitted").iterdir()):
            graded = root / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
            errors = {}
            for cell in nbformat.read(graded, as_version=4).cells:
                grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
                errors[grade_id] = "\n".join(f"{o.get('ename')}: {o.get('evalue')}"
                                             for o in cell.get("outputs", []) if o.get("output_type") == "error")
            # what the student is told about the whole submission (a disarmed companion file)
            told = "\n".join((read_record(root / "autograded" / student / ASSIGNMENT) or {}).get("problems", []))
            notebook = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student)
            results[student] = {g.name: (g.score, g.max_score, "\n".join(filter(None, [errors.get(g.name, ""), told])))
                                for g in notebook.grades}
    return results


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[bool, dict]:
    return {on: _grade_class(tmp_path_factory.mktemp(f"rules-{'on' if on else 'off'}"), rules_on=on)
            for on in (True, False)}


def test_each_route_works_when_the_rules_are_off(graded):
    off = graded[False]
    full = {cell: max_score for cell, (_, max_score, _) in off["reference"].items()}
    broken = {student: {cell: (score, why) for cell, (score, _, why) in cells.items() if score < full[cell]}
              for student, cells in off.items() if student.startswith("evades-")}
    assert not any(broken.values()), broken
    assert len(broken) == len(EVASIONS)


def test_no_route_earns_more_than_the_blank_notebook_and_the_rule_is_named(graded):
    on = graded[True]
    blank = {cell: score for cell, (score, _, _) in on["blank"].items()}
    full = {cell: max_score for cell, (_, max_score, _) in on["reference"].items()}
    problems = []
    for entry in EVASIONS:
        student = f"evades-{entry['name'].replace('_', '-')}"
        for cell, (score, _, why) in on[student].items():
            if cell in entry["breaks"]:
                if score > blank[cell]:
                    problems.append(f"{entry['name']} ({entry['route']}): {cell} scored {score}")
                elif "is not allowed in this exercise" not in why:
                    problems.append(f"{entry['name']}: {cell} does not name the rule: {why[:300]!r}")
            elif score < full[cell]:
                problems.append(f"{entry['name']}: {cell} lost points it earned ({score}): {why[:200]!r}")
    assert not problems, "\n".join(problems)


def test_honest_work_keeps_full_marks(graded):
    on = graded[True]
    for student in ["reference", *(f"honest-{e['name'].replace('_', '-')}" for e in HONEST)]:
        lost = {cell: why for cell, (score, max_score, why) in on[student].items() if score < max_score}
        assert not lost, (student, lost)
