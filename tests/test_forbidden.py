"""Forbidden APIs (issue 27): the rules read from the exercise sources and the static review.

The review reads the student's own cells before they run: each route to a forbidden API that names it
(an alias, ``from ... import ... as``, an assignment saved early, ``getattr`` with a literal) is
"forbidden" with its rule; each dynamic access that could reach one without naming it is "needs
review". No reference solution and no right catalogue answer may be flagged (the false-positive guard).
A submission that delegates to torch's AdaGrad, graded for real, has its findings in the run record
and the instructor's report.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import ROOT, assignments_with_catalogue

from autograder import forbidden
from autograder.authoring import samples
from autograder.course.source import SourceError

ADAGRAD = forbidden.rules("04_adagrad", course_root=ROOT)
STRIDES = forbidden.rules("01_strides", course_root=ROOT)
IMPORTS = "import numpy as np\nimport torch\nfrom torch import nn\n"  # what the locked cells import


def found(code: str, rules=ADAGRAD) -> list[tuple[str, str]]:
    return [(f.kind, f.what) for f in forbidden.review([("solution", textwrap.dedent(code))], rules,
                                                       context=[IMPORTS])]


@pytest.mark.parametrize(("code", "what"), [
    ("AdaGrad = torch.optim.Adagrad", "torch.optim.Adagrad"),
    ("from torch.optim import Adagrad as Mine", "torch.optim.Adagrad"),
    ("import torch.optim as o\nclass AdaGrad(o.Adagrad): pass", "torch.optim.Adagrad"),
    ("def step(ps): return getattr(torch.optim, 'Adagrad')(ps)", "torch.optim.Adagrad"),
    ("from torch.optim._functional import adagrad", "torch.optim._functional.adagrad"),
    ("from torch.optim.adagrad import _single_tensor_adagrad", "torch.optim.adagrad._single_tensor_adagrad"),
    ("def f(p, g, s): torch._fused_adagrad_([p], [g], [s], [])", "torch._fused_adagrad_"),
    ("op = torch.ops.aten._fused_adagrad_.default", "torch.ops.aten._fused_adagrad_.default"),
    ("optim = torch.optim\nA = optim.Adagrad", "torch.optim.Adagrad"),
])
def test_every_named_route_to_torchs_adagrad_is_forbidden(code, what):
    assert ("forbidden", what) in found(code), found(code)


@pytest.mark.parametrize(("code", "what"), [
    ("cls = getattr(torch.optim, 'Ada' + 'grad')", "getattr with a computed name"),
    ("m = __import__('torch.optim')", "__import__"),
    ("import importlib\nm = importlib.import_module('torch.optim')", "import of importlib"),
    ("exec(open('x.py').read())", "exec"),
    ("import sys\nm = sys.modules['torch.optim']", ".modules"),
    ("import gc\nxs = gc.get_objects()", "import of gc"),
    ("import inspect\nt = inspect.getsource(torch.optim)", "import of inspect"),
    ("import ctypes", "import of ctypes"),
    ("k = torch.optim.Optimizer.__subclasses__()", ".__subclasses__"),
    ("name = 'Adagrad'", "the text 'Adagrad' in a string (torch's own AdaGrad (torch.optim.Adagrad, "
                         "its functional and fused forms))"),
])
def test_dynamic_access_needs_review(code, what):
    assert ("needs review", what) in found(code), found(code)


def test_a_rule_within_a_function_holds_there_only_and_follows_a_reference_saved_early():
    saved_early = """
    _view = torch.as_strided  # at the top of the cell: not inside gather_view
    def strided_index(shape, stride, offset, index):
        return torch.arange(24).as_strided(shape, stride, offset)  # allowed here
    def gather_view(storage, shape, stride, offset=0):
        return _view(storage, shape, stride, offset).contiguous()
    """
    assert found(saved_early, STRIDES) == [("forbidden", "torch.as_strided")]
    method = "def gather_view(storage, shape, stride, offset=0):\n    return storage.as_strided(shape, stride)\n"
    assert found(method, STRIDES) == [("forbidden", "storage.as_strided")]
    numpy = "def gather_view(s, shape, stride, offset=0):\n    return np.lib.stride_tricks.as_strided(s)\n"
    assert ("forbidden", "numpy.lib.stride_tricks.as_strided") in found(numpy, STRIDES)


def test_magics_and_broken_cells_are_read_or_left_alone():
    assert found("%time x = torch.optim.Adagrad") == [("forbidden", "torch.optim.Adagrad")]
    assert found("def broken(:\n    torch.optim.Adagrad") == []  # it fails when it runs


@pytest.mark.parametrize("code", ["x = " + "1+" * 200_000 + "1", "y = a" + ".a" * 50_000,
                                  "z = " + "f(" * 150 + ")" * 150])
def test_a_hostile_cell_is_flagged_never_a_crash(code):
    assert set(found(code)) <= {("needs review", "a cell nested too deeply to read")}
    assert found(code + "\n") == found(code)  # and the same every time


@pytest.mark.parametrize("assignment", assignments_with_catalogue())
def test_no_reference_and_no_right_answer_is_flagged(assignment):
    rules = forbidden.rules(assignment, course_root=ROOT)
    _, right = samples.load_catalogue(assignment, course_root=ROOT)
    for name, nb in [("reference", samples.reference_notebook(assignment, course_root=ROOT))] + [
            (entry["name"], samples.student_notebook(assignment, entry["replace"], course_root=ROOT))
            for entry in right]:
        cells = [(c.metadata["nbgrader"]["grade_id"], c.source) for c in nb.cells
                 if c.cell_type == "code" and c.metadata["nbgrader"].get("solution")]
        context = [c.source for c in nb.cells
                   if c.cell_type == "code" and not c.metadata["nbgrader"].get("solution")]
        assert forbidden.review(cells, rules, context) == [], (assignment, name)


def test_rules_are_read_from_the_source_and_bad_ones_are_refused_by_name(tmp_path):
    assert [r.rule for r in ADAGRAD] and ADAGRAD[0].forbids("torch.optim.Adagrad")
    assert STRIDES[0].within == "gather_view" and forbidden.rules("02_einops", course_root=ROOT) == ()
    source = tmp_path / "solutions" / "02_einops" / "02_einops.py"
    source.parent.mkdir(parents=True)
    body = (ROOT / "solutions" / "02_einops" / "02_einops.py").read_text().split("# ---\n", 2)[2]
    for rule, message in [("- rule: x\n#       why: y\n", "needs names or attributes"),
                          ("- rule: x\n#       why: y\n#       names: torch.as_strided\n",
                           "'names' must be a list"),
                          ("- rule: x\n#       why: y\n#       names: [a]\n#       within: 1x\n",
                           "'within' must be the name"),
                          ("- rule: x\n#       names: [a]\n", "'why' must be a non-empty text"),
                          ("- rule: x\n#       why: y\n#       names: [a]\n#       then: z\n",
                           "unknown keys")]:
        source.write_text(f"# ---\n# jupyter:\n#   autograder:\n#     forbidden:\n#     {rule}# ---\n{body}")
        with pytest.raises(SourceError, match=message) as raised:
            forbidden.rules("02_einops", course_root=tmp_path)
        assert "02_einops.py: jupyter.autograder.forbidden[0]" in str(raised.value)


def test_a_submission_that_delegates_is_flagged_in_its_run_record_and_the_report(tmp_path):
    from autograder.authoring.release import copy_course, release
    from autograder.grading import grade
    from autograder.grading.run_record import read_record
    from autograder.reports.report import report

    root = copy_course(ROOT, tmp_path / "course")
    release(assignments=["04_adagrad"], course_root=root)
    delegating = samples.student_notebook("04_adagrad", {"AdaGrad": (
        "class AdaGrad(torch.optim.Adagrad):\n    pass\n")}, course_root=root)
    samples.write_submission(delegating, course_root=root, student="delegates", assignment="04_adagrad")
    samples.write_submission(samples.reference_notebook("04_adagrad", course_root=root),
                             course_root=root, student="honest", assignment="04_adagrad")
    grade(course_root=root, allow_cpu=True, progress=False)
    records = {s: read_record(root / "autograded" / s / "04_adagrad") for s in ("delegates", "honest")}
    assert records["honest"]["review"] == []
    flagged = records["delegates"]["review"]
    assert [(f["cell"], f["kind"], f["what"]) for f in flagged] == [
        ("AdaGrad", "forbidden", "torch.optim.Adagrad")], flagged
    assert "is not allowed in this exercise" in flagged[0]["rule"]
    assert not any("forbidden" in why for why in records["delegates"]["problems"])  # staff only
    _, html_path = report(course_root=root)
    html = html_path.read_text()
    assert "Needs review" in html and "delegates" in html and "torch.optim.Adagrad" in html
    assert "honest" not in html.split("Needs review", 1)[1].split("Grading problems", 1)[0]


@pytest.mark.parametrize("assignment", ["01_strides", "04_adagrad"])
def test_the_release_tells_the_rule_in_every_edition(assignment):
    """Each rule's first name (or attribute) appears as code in the notebook's instructions, in the
    English release and in every translated edition, next to the words that forbid it."""
    import nbformat

    from autograder.course.source import release_path

    english = release_path(assignment, course_root=ROOT)
    editions = [english, *sorted(english.parent.glob(f"{assignment}.*.ipynb"))]
    assert len(editions) >= 2, editions
    for rule in forbidden.rules(assignment, course_root=ROOT):
        api = (rule.names or rule.attributes)[0].rsplit(".", 1)[-1] if rule.within else \
            (rule.names or rule.attributes)[0]
        for path in editions:
            prose = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                              if c.cell_type == "markdown")
            assert f"`{api}" in prose, f"{path.name} does not name {api} for the rule {rule.rule!r}"
            assert any(word in prose for word in ("may not", "Do not", "不可", "不要", "別")), path.name
