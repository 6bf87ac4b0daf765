"""Forbidden APIs observed where the work happens (issue 46, class 3): 01's ``gather_view`` must not call
``as_strided``, and the check sees the call at torch's function dispatch while the student's function runs,
whatever name, saved reference, helper or cell it came through.

Each evasion of ``catalogue/evasions/01_strides.py`` scored 2/2 on ``test_gather_view`` when the check only wrapped the names
``torch.as_strided``/``torch.Tensor.as_strided`` (a reference saved before the check runs is the original
function) and, with ``as_strided`` outside ``gather_view``'s body, drew no finding from the static review
(``forbidden.review``, rule ``within: gather_view``). Each is run twice: in this process (the hidden region
in the solution's namespace) and in the real sandbox (cells run there, the check in this process calling
the student's function through its handle), as the grader does.
"""

from __future__ import annotations

import importlib.util
import time

import pytest
import torch
from conftest import ROOT

from autograder import forbidden
from autograder.authoring import samples
from autograder.hidden import HiddenCheckFailed, strides

ASSIGNMENT = "01_strides"
MESSAGE = "not call as_strided"


def _catalogue() -> tuple[list[dict], list[dict]]:
    spec = importlib.util.spec_from_file_location("evasions_01", ROOT / "catalogue" / "evasions" / f"{ASSIGNMENT}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.EVASIONS, module.HONEST


EVASIONS, HONEST = _catalogue()
CASES = [pytest.param(entry, kind == "evades", id=f"{kind}-{entry['name']}")
         for kind, entries in (("evades", EVASIONS), ("honest", HONEST)) for entry in entries]


@pytest.fixture(autouse=True)
def _cpu_allowed(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_ALLOW_CPU", "1")


def test_the_static_review_does_not_see_them():
    """The routes are real: the cell review finds no forbidden use in them (one pops torch's mode stack
    and then calls ``torch.as_strided`` by name, to test the observer's own removal)."""
    rules = forbidden.rules(ASSIGNMENT, course_root=ROOT)
    seen = {}
    for entry in EVASIONS:
        cells = [*(("gather_view", code) for code in entry["replace"].values()),
                 *((f"cell {40 + n}", code) for n, code in enumerate(entry["added"]))]
        seen[entry["name"]] = [f.what for f in forbidden.review(cells, rules, ["import torch"])
                               if f.kind == forbidden.FORBIDDEN]
    assert {name for name, found in seen.items() if found} == {"observer_popped"}, seen


@pytest.mark.parametrize(("entry", "evades"), CASES)
def test_in_process(entry, evades, monkeypatch):
    namespace = samples.solution_namespace(ASSIGNMENT, entry["replace"], course_root=ROOT)
    for cell in entry["added"]:
        exec(compile(cell, "<added cell>", "exec"), namespace)
    depth = torch._C._len_torch_function_stack()
    for seed in (1, 2):
        monkeypatch.setenv("AUTOGRADER_SEED", str(seed))
        if evades:
            with pytest.raises(HiddenCheckFailed, match=MESSAGE):
                samples.run_hidden_region(ASSIGNMENT, "test_gather_view", dict(namespace), course_root=ROOT)
        else:
            samples.run_hidden_region(ASSIGNMENT, "test_gather_view", dict(namespace), course_root=ROOT)
        assert torch._C._len_torch_function_stack() == depth  # the observer leaves nothing behind
    assert torch.as_strided is torch._C._VariableFunctions.as_strided  # the names are restored too


def test_a_mode_the_code_leaves_behind_stays_and_is_no_call():
    """A function mode the student's code pushes and keeps (``torch.set_default_device`` does) is not
    a call; the observer comes off from under it."""
    from torch.overrides import TorchFunctionMode

    from autograder.sandbox.inside import drivers

    class Passes(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    kept = Passes()
    depth = torch._C._len_torch_function_stack()

    def pushes(storage):
        torch.overrides._push_mode(kept)
        return storage[torch.arange(2)]

    try:
        watched = drivers.call_watching(pushes, (torch.arange(4),), ["torch.as_strided"])
        assert watched["called"] == [] and torch.equal(watched["result"], torch.arange(2))
        assert torch._C._len_torch_function_stack() == depth + 1
        assert torch._C._get_function_stack_at(depth) is kept
    finally:
        while torch._C._len_torch_function_stack() > depth:
            torch._C._pop_torch_function_stack()


# --------------------------------------------------------------------------- in the real sandbox


@pytest.fixture(scope="module")
def box():
    from autograder.sandbox.host import SandboxProcess

    sandbox = SandboxProcess()
    sandbox.start()
    sandbox.wait_ready()
    yield sandbox
    sandbox.close()


def _notebook(box, cells: list[str]):
    """A fresh notebook in ``box`` that ran ``cells``; its channel."""
    from autograder.sandbox import channel

    deadline = time.monotonic() + 30
    while box.state == "busy" and time.monotonic() < deadline:
        time.sleep(0.05)
        box.pump()
    data, kill = box.start_notebook({"id": 0, "env": {}, "threads": 1, "student_rss_bytes": None,
                                     "rlimits": {}}, [])
    sandbox = channel.SandboxChannel(data, kill, memmap_dir="/tmp")
    for cell in cells:
        outputs, _ = sandbox.run_cell(cell, 60)
        assert not [o for o in outputs if o.get("output_type") == "error"], outputs
    return sandbox


@pytest.mark.parametrize(("entry", "evades"), CASES)
def test_in_the_sandbox(box, entry, evades):
    reference = samples.reference_solutions(ASSIGNMENT, course_root=ROOT)["gather_view"]
    sandbox = _notebook(box, ["import torch", reference, *entry["replace"].values(), *entry["added"]])
    try:
        gather_view = sandbox.lookup(["gather_view"])["gather_view"]
        for seed in (1, 2):
            if evades:
                with pytest.raises(HiddenCheckFailed, match=MESSAGE):
                    strides.check_gather_view(gather_view, seed=seed)
            else:
                strides.check_gather_view(gather_view, seed=seed)
    finally:
        sandbox.kill("done")


# --------------------------------------------------------------------------- graded, as a class is


GRADED = ("alias_at_top_level", "alias_in_an_added_cell", "operator_attrgetter")


def test_graded_the_routes_earn_nothing_on_gather_view_and_honest_work_keeps_its_points(tmp_path):
    """``autograder grade`` on the reference, the blank release and a few routes, the added cell a real
    cell the student added after ``gather_view``'s: each route scores the blank's 0 on
    ``test_gather_view``, keeps every other point, and its feedback says why."""
    import nbformat
    from nbgrader.api import Gradebook

    from autograder.authoring.release import copy_course, release
    from autograder.grading import grade

    root = copy_course(ROOT, tmp_path / "course")
    release(assignments=[ASSIGNMENT], course_root=root)
    samples.write_submission(samples.reference_notebook(ASSIGNMENT, course_root=root),
                             course_root=root, student="reference", assignment=ASSIGNMENT)
    blank = nbformat.read(root / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    samples.write_submission(blank, course_root=root, student="blank", assignment=ASSIGNMENT)
    entries = {entry["name"]: entry for entry in EVASIONS}
    for name in GRADED:
        entry = entries[name]
        nb = samples.student_notebook(ASSIGNMENT, entry["replace"], course_root=root)
        at = next(n for n, cell in enumerate(nb.cells)
                  if cell.metadata.get("nbgrader", {}).get("grade_id") == "gather_view") + 1
        for offset, code in enumerate(entry["added"]):
            nb.cells.insert(at + offset, nbformat.v4.new_code_cell(code))
        samples.write_submission(nb, course_root=root, student=name.replace("_", "-"), assignment=ASSIGNMENT)
    grade(course_root=root, allow_cpu=True, progress=False)
    scores, said = {}, {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student in ["reference", "blank", *(name.replace("_", "-") for name in GRADED)]:
            notebook = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student)
            scores[student] = {g.name: g.score for g in notebook.grades}
            graded = nbformat.read(root / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
                                   as_version=4)
            said[student] = "\n".join(str(o.get("evalue")) for cell in graded.cells
                                      if cell.metadata.get("nbgrader", {}).get("grade_id") == "test_gather_view"
                                      for o in cell.get("outputs", []) if o.get("output_type") == "error")
    full = scores["reference"]
    assert full["test_gather_view"] == 2 and scores["blank"]["test_gather_view"] == 0, scores
    for name in GRADED:
        student = name.replace("_", "-")
        assert scores[student]["test_gather_view"] == 0, (name, scores[student])
        assert {cell: s for cell, s in scores[student].items() if cell != "test_gather_view"} == \
            {cell: s for cell, s in full.items() if cell != "test_gather_view"}, (name, scores[student])
        assert MESSAGE in said[student], (name, said[student])


def test_what_turns_the_observer_off_is_listed_for_review():
    """Code can step out of torch's function dispatch for a while (and back before the check looks);
    the cell review lists each way as *needs review*, whatever function it is in."""
    cells = [("cell 30", "from torch._C import DisableTorchFunction\n"),
             ("gather_view", "def helper(x):\n    with torch._C.DisableTorchFunctionSubclass():\n"
                             "        torch.overrides._pop_mode_temporarily()\n"
                             "        torch._C._pop_torch_function_stack()\n")]
    found = [(f.cell, f.line, f.kind) for f in forbidden.review(cells, forbidden.rules(ASSIGNMENT, course_root=ROOT),
                                                               ["import torch"])]
    assert found == [("cell 30", 1, forbidden.DYNAMIC), ("gather_view", 2, forbidden.DYNAMIC),
                     ("gather_view", 3, forbidden.DYNAMIC), ("gather_view", 4, forbidden.DYNAMIC)], found
