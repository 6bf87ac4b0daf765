"""Observers that run next to the student's code and report what they saw as plain values.

Some checks need to watch the student's code from the inside: which host-to-device copies it makes,
which dtype autocast produced in a layer, whether it cleared the gradients. Such observers live here,
a file the sandbox can read (nothing secret: no reference, no expected value). A hidden check calls
them through ``student_module(student, "drivers")`` and compares their report with its own reference,
computed in the checker. A student who patches these observers can only misreport their own work.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode


@contextlib.contextmanager
def _watching_copies(copies: list, pinned: list) -> Iterator[None]:
    """Wrap Tensor.to / .cuda / .copy_ / .pin_memory to record host-to-device copies."""
    names = ("to", "cuda", "copy_", "pin_memory")
    saved = {name: torch.Tensor.__dict__.get(name) for name in names}
    originals = {name: getattr(torch.Tensor, name) for name in names}

    def blocking_flag(args, kwargs) -> bool:
        return bool(kwargs.get("non_blocking", False) or any(a is True for a in args))

    def to(self, *args, **kwargs):
        out = originals["to"](self, *args, **kwargs)
        if self.device.type == "cpu" and out.device.type != "cpu":
            copies.append((self.is_pinned(), blocking_flag(args, kwargs)))
        return out

    def cuda(self, *args, **kwargs):
        if self.device.type == "cpu":
            copies.append((self.is_pinned(), blocking_flag(args, kwargs)))
        return originals["cuda"](self, *args, **kwargs)

    def copy_(self, src, *args, **kwargs):
        if self.device.type != "cpu" and isinstance(src, torch.Tensor) and src.device.type == "cpu":
            copies.append((src.is_pinned(), blocking_flag(args, kwargs)))
        return originals["copy_"](self, src, *args, **kwargs)

    def pin_memory(self, *args, **kwargs):
        pinned.append(1)
        return originals["pin_memory"](self, *args, **kwargs)

    wrappers = {"to": to, "cuda": cuda, "copy_": copy_, "pin_memory": pin_memory}
    try:
        for name, wrapper in wrappers.items():
            setattr(torch.Tensor, name, wrapper)
        yield
    finally:
        for name, original in saved.items():
            if original is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, original)


def watch_transfers(fn: Callable, *args: Any) -> dict:
    """Call ``fn(*args)``; report its result, the host-to-device copies it made as
    (source pinned, non_blocking) pairs, and how often it pinned memory."""
    copies: list[tuple[bool, bool]] = []
    pinned: list[int] = []
    with _watching_copies(copies, pinned):
        result = fn(*args)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return {"result": result, "copies": copies, "pinned": len(pinned)}


def train_steps(train_step_mixed: Callable, *, state: dict, sizes: tuple[int, int, int],
                device: str, batches: list, autocast_dtype: torch.dtype,
                scaler_kwargs: dict | None) -> dict:
    """Build the check's model (from ``state``), an Adam optimizer and, when ``scaler_kwargs`` is
    given, a GradScaler; run the student's step on each (inputs, targets) of ``batches``; report per
    step the returned loss, the dtype the first layer produced, the zero_grad calls, the parameters,
    whether gradients were cleared, the optimizer-state dtypes and the loss scale."""
    d_in, hidden, classes = sizes
    # built on the meta device (no random initialization: the global generators stay as they were)
    model = nn.Sequential(nn.Linear(d_in, hidden, device="meta"), nn.GELU(),
                          nn.Linear(hidden, classes, device="meta")).to_empty(device=device)
    model.load_state_dict(state)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler(device, **scaler_kwargs) if scaler_kwargs is not None else None
    seen: list[torch.dtype] = []
    model[0].register_forward_hook(lambda module, args, output: seen.append(output.dtype))
    calls: list[bool] = []
    updates = [0]
    for owner in (model, optimizer):
        original = owner.zero_grad

        def zero_grad(*args, _original=original, **kwargs):
            calls.append(bool(kwargs.get("set_to_none", args[0] if args else True)))
            return _original(*args, **kwargs)

        # this instance only (setattr: mypy refuses assigning to a method)
        setattr(owner, "zero_grad", zero_grad)  # noqa: B010
    if scaler is not None:
        original_update = scaler.update

        def update(*args, **kwargs):
            updates[0] += 1
            return original_update(*args, **kwargs)

        setattr(scaler, "update", update)  # noqa: B010 - as zero_grad above
    steps = []
    for inputs, targets in batches:
        before = len(calls)
        kwargs: dict[str, Any] = {"autocast_dtype": autocast_dtype}
        if scaler is not None:
            kwargs["scaler"] = scaler
        loss = train_step_mixed(model, optimizer, inputs.to(device), targets.to(device),
                                nn.functional.cross_entropy, **kwargs)
        steps.append({
            "loss": loss if type(loss) is float else repr(type(loss).__name__),
            "loss_is_float": type(loss) is float,
            "seen": str(seen[-1]).removeprefix("torch.") if seen else None,
            "set_to_none": calls[before:],
            "grads_cleared": all(p.grad is None for p in model.parameters()),
            "params": {name: p.detach().cpu().clone() for name, p in model.named_parameters()},
            "param_dtypes": {name: str(p.dtype) for name, p in model.named_parameters()},
            "state_dtypes": sorted({str(v.dtype) for s in optimizer.state.values()
                                    for v in s.values()
                                    if isinstance(v, torch.Tensor) and v.dim() > 0}),
        })
    return {"steps": steps, "updates": updates[0],
            "scale": float(scaler.get_scale()) if scaler is not None else None}


#: What ``call_watching`` can watch: dotted name -> (owner, attribute); the operator is the attribute.
_WATCHABLE = {"torch.as_strided": (torch, "as_strided"),
              "torch.Tensor.as_strided": (torch.Tensor, "as_strided")}
#: The variants of an operator that do its work too: a name watches them all (``as_strided_copy``...).
_VARIANTS = ("", "_", "_copy", "_scatter")


class _Calls(TorchFunctionMode):
    """Sees every torch function the code calls at Python level, whatever name, alias, saved reference,
    ``getattr`` string or cell it came through (``torch.as_strided``, ``Tensor.as_strided``,
    ``torch.ops.aten.as_strided``, ``torch._C._VariableFunctions.as_strided`` all reach it as the same
    operator); records those whose operator name is in ``operators``. While it handles one call it is off
    the stack, so what torch does inside that call (a view built on ``as_strided``) is not the code's."""

    def __init__(self, operators: frozenset[str], called: list[str]) -> None:
        super().__init__()
        self.operators, self.called = operators, called

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = str(getattr(func, "__name__", "")).split(".")[0]  # OpOverload: "as_strided.default"
        if name in self.operators:
            self.called.append(name)
        return func(*args, **(kwargs or {}))


def _operator(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def call_watching(fn: Callable, args: tuple, names: list[str]) -> dict:
    """Call ``fn(*args)`` and report the result and which of the functions ``names`` (from a fixed list;
    each with its ``_VARIANTS``) it called: observed at torch's function dispatch (``_Calls``, this
    thread) and, for a thread the code starts, at the names themselves (wrapped while it runs). An
    observer that the code took off the stack is reported as a call (honest code has no reason to)."""
    called: list[str] = []
    saved = {}
    for name in names:
        owner, attribute = _WATCHABLE[name]
        original = getattr(owner, attribute)
        saved[name] = (owner, attribute, original)

        def watcher(*a, _name=name, _original=original, **k):
            called.append(_name)
            return _original(*a, **k)

        setattr(owner, attribute, watcher)
    mode = _Calls(frozenset(_operator(name) + variant for name in names for variant in _VARIANTS), called)
    depth = torch._C._len_torch_function_stack()
    try:
        torch.overrides._push_mode(mode)
        try:
            result = fn(*args)
        finally:
            if not _in_place(mode, depth):
                called.append("torch's function mode stack changed")
            _remove(mode, depth)
    finally:
        for owner, attribute, original in saved.values():
            setattr(owner, attribute, original)
    return {"result": result, "called": sorted({_operator(name) for name in called})}


def _in_place(mode: TorchFunctionMode, depth: int) -> bool:
    """Whether ``mode`` is still where it was pushed (modes the code left above it change nothing:
    ``torch.set_default_device`` pushes one)."""
    return torch._C._len_torch_function_stack() > depth and torch._C._get_function_stack_at(depth) is mode


def _remove(mode: TorchFunctionMode, depth: int) -> None:
    """Take ``mode`` off the stack; the modes the code pushed above it stay, the stack below it as it was."""
    above = []
    while torch._C._len_torch_function_stack() > depth:
        top = torch._C._pop_torch_function_stack()
        if top is mode:
            break
        above.append(top)
    for kept in reversed(above):
        torch.overrides._push_mode(kept)
