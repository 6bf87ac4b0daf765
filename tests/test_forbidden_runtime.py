"""Forbidden APIs observed where the work happens (issue 46, class 3): 01's ``gather_view`` must not call
``as_strided``, and the check sees the call at torch's function dispatch while the student's function runs,
whatever name, saved reference, helper or cell it came through.

Each evasion below scored 2/2 on ``test_gather_view`` when the check only wrapped the names
``torch.as_strided``/``torch.Tensor.as_strided`` (a reference saved before the check runs is the original
function) and, with ``as_strided`` outside ``gather_view``'s body, drew no finding from the static review
(``forbidden.review``, rule ``within: gather_view``). Each is run twice: in this process (the hidden region
in the solution's namespace) and in the real sandbox (cells run there, the check in this process calling
the student's function through its handle), as the grader does.
"""

from __future__ import annotations

import time

import pytest
import torch
from conftest import ROOT

from autograder.authoring import samples
from autograder.hidden import HiddenCheckFailed, strides

ASSIGNMENT = "01_strides"
MESSAGE = "not call as_strided"

# a helper at top level (outside gather_view: the review's ``within`` does not reach it)
_HELPER = """
def _read(storage, shape, stride, offset):
    return {call}.clone()


def gather_view(storage, shape, stride, offset=0):
    return _read(storage, shape, stride, offset)
"""


def _through(saved: str, call: str = "_f(storage, shape, stride, offset)") -> str:
    return saved + "\n" + _HELPER.format(call=call)


#: name -> (cells appended to gather_view's cell, cells the student added after it)
EVASIONS = {
    "alias_at_top_level": ([_through("_f = torch.as_strided")], []),
    "getattr_built_string": ([_through('_f = getattr(torch, "as_" + "strided")')], []),
    "vars_of_torch": ([_through('_f = vars(torch)["as_" "strided"]')], []),
    "operator_attrgetter": ([_through('import operator\n_f = operator.attrgetter("as_strided")(torch)')], []),
    "alias_in_an_added_cell": ([_HELPER.format(call="_f(storage, shape, stride, offset)")],
                               ["_f = torch.as_strided"]),
    "tensor_method_in_helper": ([_HELPER.format(call="storage.as_strided(shape, stride, offset)")], []),
    "unbound_tensor_method": ([_through("_f = torch.Tensor.as_strided")], []),
    "aten_operator": ([_through('_f = getattr(torch.ops.aten, "as_" + "strided").default')], []),
    "variable_functions": ([_through('_f = getattr(torch._C._VariableFunctions, "as_strided")')], []),
    "as_strided_copy": ([_through('_f = getattr(torch, "as_strided" + "_copy")')], []),
    "observer_popped": (["""
def gather_view(storage, shape, stride, offset=0):
    torch._C._pop_torch_function_stack()
    return torch.as_strided(storage, shape, stride, offset).clone()
"""], []),
}

#: gather_view without as_strided (as_strided elsewhere in the notebook is allowed)
HONEST = {
    "reference": ([], []),
    "take_of_positions": (["""
def gather_view(storage, shape, stride, offset=0):
    positions = torch.full(shape, offset, dtype=torch.long)
    for dim, (size, step) in enumerate(zip(shape, stride)):
        along = [1] * len(shape)
        along[dim] = size
        positions = positions + torch.arange(size).mul(step).view(along)
    return torch.take(storage, positions).contiguous()
"""], []),
    "python_loops_and_views": (["""
import itertools
def gather_view(storage, shape, stride, offset=0):
    flat = [storage[offset + sum(i * s for i, s in zip(index, stride))].item()
            for index in itertools.product(*(range(n) for n in shape))]
    return torch.tensor(flat, dtype=storage.dtype).reshape(-1)[0:].unsqueeze(0)[0].reshape(shape).clone()
"""], []),
    "as_strided_outside_gather_view": (["""
_demo = torch.arange(6).as_strided((2, 2), (1, 2))  # allowed: not in gather_view
"""], ["_other = torch.as_strided(torch.arange(4), (2,), (2,))"]),
}

CASES = [pytest.param(name, cells, added, name in EVASIONS, id=name)
         for name, (cells, added) in {**EVASIONS, **HONEST}.items()]


@pytest.fixture(autouse=True)
def _cpu_allowed(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_ALLOW_CPU", "1")


def _code(cells: list[str]) -> str:
    return "\n\n".join(cell.strip("\n") for cell in cells)


@pytest.mark.parametrize(("name", "cells", "added", "evades"), CASES)
def test_in_process(name, cells, added, evades, monkeypatch):
    namespace = samples.solution_namespace(ASSIGNMENT, {"gather_view": _code(cells)} if cells else None,
                                           course_root=ROOT)
    for cell in added:
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


@pytest.mark.parametrize(("name", "cells", "added", "evades"), CASES)
def test_in_the_sandbox(box, name, cells, added, evades):
    reference = samples.reference_solutions(ASSIGNMENT, course_root=ROOT)["gather_view"]
    sandbox = _notebook(box, ["import torch", reference, *cells, *added])
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
