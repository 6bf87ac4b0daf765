"""``autograder similarity`` on a synthetic class of exercise 04 (issue 28).

Honest students write AdaGrad in their own styles (a loop over param groups, a functional helper, a
foreach update, a vectorised closure-first version); planted copies take one honest cell and rename
every variable, reformat it, reorder independent statements and add comments; blank students hand in
the release as it is; one student pastes torch's own implementation. Every planted pair must be
reported for the copied cell, no honest pair and no blank one, and the paste against ``(library)``.
"""

from __future__ import annotations

import csv

import nbformat
import pytest
from conftest import ROOT

from autograder.authoring import samples
from autograder.authoring.release import copy_course
from autograder.course.source import release_path
from autograder.reports.similarity import LIBRARY, similarity

LOOP = '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, eps = group["lr"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if len(st) == 0:
                    st["sum"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                st["sum"].addcmul_(p.grad, p.grad, value=1)
                std = st["sum"].sqrt().add_(eps)
                p.addcdiv_(p.grad, std, value=-lr)
        return loss
'''

FUNCTIONAL = '''
def _adagrad_update(param, grad, acc, lr, eps):
    """One AdaGrad update, in place."""
    acc += grad.square()
    param -= lr * grad / (acc.sqrt() + eps)


class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, eps=1e-10):
        defaults = dict(lr=lr, eps=eps)
        super(AdaGrad, self).__init__(params, defaults)

    def step(self, closure=None):
        result = closure() if closure is not None else None
        with torch.no_grad():
            for g in self.param_groups:
                for w in g["params"]:
                    if w.grad is not None:
                        state = self.state[w]
                        state.setdefault("sum", torch.zeros_like(w))
                        _adagrad_update(w, w.grad, state["sum"], g["lr"], g["eps"])
        return result
'''

FOREACH = '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-2, eps: float = 1e-10):
        if lr < 0:
            raise ValueError(f"bad lr {lr}")
        super().__init__(params, dict(lr=lr, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None if closure is None else torch.enable_grad()(closure)()
        for group in self.param_groups:
            params = [q for q in group["params"] if q.grad is not None]
            if not params:
                continue
            grads = [q.grad for q in params]
            sums = []
            for q in params:
                if "sum" not in self.state[q]:
                    self.state[q]["sum"] = torch.zeros_like(q)
                sums.append(self.state[q]["sum"])
            torch._foreach_addcmul_(sums, grads, grads)
            denominators = torch._foreach_add(torch._foreach_sqrt(sums), group["eps"])
            torch._foreach_addcdiv_(params, grads, denominators, value=-group["lr"])
        return loss
'''

ENUMERATED = '''
import math


class AdaGrad(torch.optim.Optimizer):
    """My AdaGrad."""

    def __init__(self, params, lr=1e-2, eps=1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    def step(self, closure=None):
        value = None
        if closure:
            with torch.enable_grad():
                value = closure()
        for index, group in enumerate(self.param_groups):
            rate, tiny = group["lr"], group["eps"]
            for tensor in filter(lambda t: t.grad is not None, group["params"]):
                memory = self.state[tensor].get("sum")
                if memory is None:
                    memory = self.state[tensor]["sum"] = tensor.detach().new_zeros(tensor.shape)
                with torch.no_grad():
                    memory.add_(tensor.grad.pow(2))
                    tensor.sub_(rate * tensor.grad.div(memory.sqrt().add(tiny)))
        return value
'''

# LOOP, copied: every name changed, lines reflowed, two independent statements swapped, comments
COPY_OF_LOOP = '''
class AdaGrad(torch.optim.Optimizer):
    # my optimizer
    def __init__(self, parameters, learning_rate=1e-2, epsilon=1e-10):
        super().__init__(parameters, {"lr": learning_rate,
                                      "eps": epsilon})

    @torch.no_grad()
    def step(self, closure=None):
        out = None
        if closure is not None:
            with torch.enable_grad():
                out = closure()  # evaluate the loss
        for grp in self.param_groups:
            epsilon, learning_rate = grp["eps"], grp["lr"]
            for param in grp["params"]:
                if param.grad is None:
                    continue
                s = self.state[param]
                if len(s) == 0:
                    s["sum"] = torch.zeros_like(param, memory_format=torch.preserve_format)
                s["sum"].addcmul_(param.grad, param.grad, value=1)
                denom = s["sum"].sqrt().add_(epsilon)
                param.addcdiv_(param.grad, denom, value=-learning_rate)  # the update
        return out
'''

COPY_OF_FUNCTIONAL = '''
def _update(p, g, s, lr, eps):
    # one step
    s += g.square()
    p -= lr * g / (s.sqrt() + eps)


class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, eps=1e-10):
        d = dict(lr=lr, eps=eps)
        super(AdaGrad, self).__init__(params, d)

    def step(self, closure=None):
        r = closure() if closure is not None else None
        with torch.no_grad():
            for grp in self.param_groups:
                for x in grp["params"]:
                    if x.grad is not None:
                        st = self.state[x]
                        st.setdefault("sum", torch.zeros_like(x))
                        _update(x, x.grad, st["sum"], grp["lr"], grp["eps"])
        return r
'''


def _library_paste() -> str:
    """torch's own single-tensor AdaGrad, pasted under the class the exercise asks for."""
    import inspect

    from torch.optim import adagrad

    return (inspect.getsource(adagrad._single_tensor_adagrad)
            + "\n\nclass AdaGrad(torch.optim.Adagrad):\n    pass\n")


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    root = copy_course(ROOT, tmp_path_factory.mktemp("similar") / "course")
    released = nbformat.read(release_path("04_adagrad", course_root=root), as_version=4)
    students = {"honest_loop": LOOP, "honest_functional": FUNCTIONAL, "honest_foreach": FOREACH,
                "honest_enumerated": ENUMERATED, "copies_loop": COPY_OF_LOOP,
                "copies_functional": COPY_OF_FUNCTIONAL, "pastes_torch": _library_paste(),
                "blank_one": None, "blank_two": None}
    for student, code in students.items():
        nb = nbformat.from_dict(released)
        for cell in nb.cells:
            if code is not None and cell.metadata.get("nbgrader", {}).get("grade_id") == "AdaGrad":
                cell.source = code.strip("\n")
        samples.write_submission(nb, course_root=root, student=student, assignment="04_adagrad")
    [result] = similarity(["04_adagrad"], course_root=root)
    return result


def _pairs(result) -> dict[frozenset, float]:
    return {frozenset((m.a.owner, m.b.owner)): m.similarity for m in result.matches
            if m.cell == "AdaGrad"}


def test_planted_copies_and_the_library_paste_are_reported_for_the_copied_cell(graded_class):
    pairs = _pairs(graded_class)
    assert frozenset(("copies_loop", "honest_loop")) in pairs, pairs
    assert frozenset(("copies_functional", "honest_functional")) in pairs, pairs
    assert frozenset(("pastes_torch", LIBRARY)) in pairs, pairs


def test_no_honest_pair_and_no_blank_notebook_is_reported(graded_class):
    planted = {frozenset(("copies_loop", "honest_loop")),
               frozenset(("copies_functional", "honest_functional")),
               frozenset(("pastes_torch", LIBRARY))}
    extra = {pair: s for pair, s in _pairs(graded_class).items() if pair not in planted}
    assert not extra, f"flagged beyond the planted pairs (cut-offs {graded_class.cutoffs}): {extra}"
    owners = {o for m in graded_class.matches for o in (m.a.owner, m.b.owner)}
    assert not owners & {"blank_one", "blank_two"}
    assert graded_class.compared["AdaGrad"] >= 8  # the references and the 7 filled-in cells
    assert "optimizer_state_numel" not in {m.cell for m in graded_class.matches}  # left as released


def test_the_csv_and_the_self_contained_html(graded_class):
    with open(graded_class.csv_path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and set(rows[0]) >= {"student_a", "student_b", "cell", "similarity",
                                     "shared_failures"}
    assert all(0 <= float(r["similarity"]) <= 1 and r["cell"] == "AdaGrad" for r in rows)
    assert len({frozenset((r["student_a"], r["student_b"], r["cell"])) for r in rows}) == len(rows)
    page = graded_class.html_path.read_text()
    assert "<mark>" in page and "copies_loop" in page and "(library)" in page
    # offline: nothing to fetch (code may quote a URL as text, escaped)
    assert "<script" not in page and "<link" not in page and "src=" not in page
    assert "href='http" not in page and 'href="http' not in page and "url(" not in page


def test_a_check_the_machine_did_not_run_is_never_failed_the_same_way(graded_class, tmp_path):
    """Issue 41 (M1): graded without a GPU, every notebook shows NeedsGPU in the GPU cell; a pair is
    ranked by the mistakes its students share, never by that."""
    root = graded_class.csv_path.parents[2]
    for student in ("honest_loop", "copies_loop"):
        nb = nbformat.read(root / "submitted" / student / "04_adagrad" / "04_adagrad.ipynb", as_version=4)
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id == "test_AdaGrad_gpu":
                cell.outputs = [nbformat.v4.new_output(
                    "error", ename="NeedsGPU", evalue="Not run: this check needs a GPU and the "
                    "grading machine had none; the course staff will grade it on a GPU.", traceback=[])]
            elif grade_id == "test_AdaGrad_step":
                cell.outputs = [nbformat.v4.new_output("error", ename="AssertionError",
                                                       evalue="step 2 differs", traceback=[])]
        folder = root / "autograded" / student / "04_adagrad"
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / "04_adagrad.ipynb")
    [again] = similarity(["04_adagrad"], course_root=root, output_dir=tmp_path)
    pair = [m for m in again.matches if {m.a.owner, m.b.owner} == {"honest_loop", "copies_loop"}]
    assert pair and all(m.shared_failures == ["test_AdaGrad_step"] for m in pair), \
        [(m.cell, m.shared_failures) for m in pair]
    assert again.matches[0] in pair  # a shared real mistake still ranks first


def test_what_the_machine_or_the_whole_class_fails_is_never_failed_the_same_way(graded_class, tmp_path):
    """Issue 44: the trial ranked pairs first on "failed the same way: test_AdaGrad_gpu", the machine's
    failure under another name than NeedsGPU ("no NVIDIA driver"); and a failure the whole class shows
    alike (the exercise's, or the machine's) is no mistake two students share. Only a mistake the pair
    shares apart from the class counts."""
    root = graded_class.csv_path.parents[2]
    five = ("honest_loop", "copies_loop", "honest_functional", "honest_foreach", "honest_enumerated")
    for student in five:
        nb = nbformat.read(root / "submitted" / student / "04_adagrad" / "04_adagrad.ipynb", as_version=4)
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            error = {"test_AdaGrad_gpu": ("RuntimeError", "Found no NVIDIA driver on your system."),
                     "test_AdaGrad_state_dict": ("AssertionError", "state_dict round trip differs")}.get(grade_id)
            if grade_id == "test_AdaGrad_step" and student in five[:2]:
                error = ("AssertionError", "step 2 differs")
            if error:
                cell.outputs = [nbformat.v4.new_output("error", ename=error[0], evalue=error[1], traceback=[])]
        folder = root / "autograded" / student / "04_adagrad"
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, folder / "04_adagrad.ipynb")
    [again] = similarity(["04_adagrad"], course_root=root, output_dir=tmp_path)
    pair = [m for m in again.matches if {m.a.owner, m.b.owner} == {"honest_loop", "copies_loop"}]
    assert pair and all(m.shared_failures == ["test_AdaGrad_step"] for m in pair), \
        [(m.cell, m.shared_failures) for m in pair]
    assert all("test_AdaGrad_gpu" not in m.shared_failures and "test_AdaGrad_state_dict" not in m.shared_failures
               for m in again.matches)
