"""Evasion catalogue for 01_strides: each entry calls ``as_strided`` from ``gather_view`` by one route
(issue 46) that the rule's names miss: a reference saved before the check runs, a built string, an added
cell, a helper outside ``gather_view`` (the static review's ``within`` does not reach it).

Loaded by file path like ``catalogue/``. ``replace`` code is appended to the reference's solution cell that
defines the name (the later definition wins); ``added`` are cells the student added after it. Every entry
must fail the checks in ``breaks`` with the check's sentence (``gather_view must compute positions itself,
not call as_strided``), in the student's process as in the sandbox; ``HONEST`` entries (``as_strided``
outside ``gather_view`` is allowed) pass. Tested by ``tests/test_forbidden_runtime.py``.
"""

# a helper at top level (outside gather_view: the review's ``within`` does not reach it)
_HELPER = """
def _read(storage, shape, stride, offset):
    return {call}.clone()


def gather_view(storage, shape, stride, offset=0):
    return _read(storage, shape, stride, offset)
"""


def _through(saved: str, call: str = "_f(storage, shape, stride, offset)") -> str:
    return saved + "\n" + _HELPER.format(call=call)


_EVASIONS = {
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

_HONEST = {
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
    "in_a_device_context": (["""
def gather_view(storage, shape, stride, offset=0):
    with torch.device("cpu"):  # a function mode of torch's own, pushed and popped
        positions = torch.full(shape, offset, dtype=torch.long)
        for dim, (size, step) in enumerate(zip(shape, stride)):
            positions = positions + (torch.arange(size) * step).reshape(
                [size if d == dim else 1 for d in range(len(shape))])
    return storage.reshape(-1)[positions.reshape(-1)].reshape(shape)
"""], []),
    "as_strided_outside_gather_view": (["""
_demo = torch.arange(6).as_strided((2, 2), (1, 2))  # allowed: not in gather_view
"""], ["_other = torch.as_strided(torch.arange(4), (2,), (2,))"]),
}

_ROUTES = {
    "alias_at_top_level": "a reference saved at top level, called from a helper",
    "getattr_built_string": "getattr with a built string",
    "vars_of_torch": "vars(torch)[...]",
    "operator_attrgetter": "operator.attrgetter",
    "alias_in_an_added_cell": "a reference saved in a cell the student added",
    "tensor_method_in_helper": "the Tensor method, in a helper outside gather_view",
    "unbound_tensor_method": "torch.Tensor.as_strided saved unbound",
    "aten_operator": "torch.ops.aten.as_strided.default",
    "variable_functions": "torch._C._VariableFunctions",
    "as_strided_copy": "as_strided_copy by a built name",
    "observer_popped": "torch's function-mode stack popped first",
}


def _entry(name: str, cells: tuple[list[str], list[str]]) -> dict:
    code, added = cells
    return {"name": name, "replace": {"gather_view": "\n\n".join(c.strip("\n") for c in code)} if code else {},
            "added": added}


EVASIONS = [{**_entry(name, cells), "route": _ROUTES[name], "breaks": ["test_gather_view"]}
            for name, cells in _EVASIONS.items()]
HONEST = [_entry(name, cells) for name, cells in _HONEST.items()]
