"""Hidden checks for exercise 04_adagrad: the AdaGrad optimizer and the memory of training.

The reference is ``torch.optim.Adagrad`` itself: the student's optimizer and torch's run side by side
on clones of the same random parameters and gradients, and their parameters must agree after every
step. Large ``eps`` values and small gradients make "eps inside the square root" visible; gradients
that are None on some steps, several param groups and a ``state_dict`` round trip cover the rest.
The GPU check runs the same trajectory on CUDA and measures the optimizer state's memory there.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from numbers import Integral
from typing import Any

import torch
from torch import nn

from autograder.hidden._base import (
    CheckRandom,
    expect,
    hidden_check,
    is_subclass,
    offered,
    student_module,
)
from autograder.hidden._gpu import gpu_device
from autograder.sandbox.channel import call_only

OPTIMIZER_STATE_FACTORS = {"sgd": 0, "momentum": 1, "adagrad": 1, "rmsprop": 1, "adam": 2}

# A grads plan: for each step, for each parameter, a gradient tensor or None (no gradient that step).
GradPlan = list[list[torch.Tensor | None]]


# --------------------------------------------------------------------------- helpers


def _random_params(rng: CheckRandom, count: int, *, numel_multiple: int = 1) -> list[torch.Tensor]:
    params = []
    for _ in range(count):
        shape = rng.shape(min_dims=1, max_dims=3, max_size=5)
        if numel_multiple > 1:  # keep each tensor a whole number of 512-byte allocator blocks
            shape = (*shape, numel_multiple)
        params.append(rng.randn(*shape))
    return params


def _grad_plan(rng: CheckRandom, params: Sequence[torch.Tensor], steps: int, scale: float,
               with_none: bool = True) -> GradPlan:
    """Random gradients. ``with_none``: parameter 0 gets None on step 1, the last parameter never gets
    one and the others miss a step now and then."""
    plan: GradPlan = []
    last = len(params) - 1
    for step in range(steps):
        grads: list[torch.Tensor | None] = []
        for index, p in enumerate(params):
            skip = with_none and ((index == last) or (index == 0 and step == 1)
                                  or (0 < index < last and rng.random() < 0.25))
            grads.append(None if skip else scale * rng.randn(*p.shape))
        plan.append(grads)
    return plan


def _run(make_optimizer: Callable[[list[torch.Tensor]], Any] | None, params: Sequence[torch.Tensor],
         plan: GradPlan, device: torch.device, *, optimizer=None, live=None):
    """Step an optimizer through ``plan``; returns (parameter values after each step, optimizer, params)."""
    if live is None:
        live = [p.detach().clone().to(device).requires_grad_(True) for p in params]
    if optimizer is None:
        if make_optimizer is None:
            raise ValueError("_run needs make_optimizer or optimizer")
        optimizer = make_optimizer(live)
    history = []
    for grads in plan:
        for p, g in zip(live, grads, strict=True):
            p.grad = None if g is None else g.clone().to(device)
        optimizer.step()
        history.append([p.detach().clone() for p in live])
    return history, optimizer, live


def _compare(got_history, want_history, what: str, *, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    for step, (got_step, want_step) in enumerate(zip(got_history, want_history, strict=True), 1):
        for index, (got, want) in enumerate(zip(got_step, want_step, strict=True)):
            expect(got.dtype == want.dtype and got.shape == want.shape,
                   f"{what}: after step {step}, parameter {index} changed to dtype {got.dtype} shape "
                   f"{tuple(got.shape)} (expected {want.dtype} {tuple(want.shape)})")
            if not torch.allclose(got, want, rtol=rtol, atol=atol):
                diff = (got - want).abs().max().item()
                expect(False,
                       f"{what}: after step {step}, parameter {index} differs from torch.optim.Adagrad "
                       f"(max abs difference {diff:.3g}; expected e.g. {want.flatten()[:3].tolist()}, "
                       f"got {got.flatten()[:3].tolist()}). The update is G <- G + g^2, "
                       f"p <- p - lr * g / (sqrt(G) + eps), skipping parameters whose .grad is None")


def _check_trajectory(AdaGrad, rng: CheckRandom, device: torch.device) -> None:
    """Default arguments, then a large eps with small gradients; several steps, some grads None."""
    params = _random_params(rng, rng.randint(3, 5))
    plan = _grad_plan(rng, params, steps=rng.randint(3, 5), scale=1.0)
    got, _, _ = _run(lambda ps: AdaGrad(ps), params, plan, device)
    want, _, _ = _run(lambda ps: torch.optim.Adagrad(ps), params, plan, device)
    _compare(got, want, "AdaGrad(params) with the default lr=1e-2, eps=1e-10")

    lr, eps = rng.uniform(0.05, 0.5), rng.uniform(0.1, 1.0)
    plan = _grad_plan(rng, params, steps=rng.randint(3, 5), scale=rng.uniform(0.05, 0.3))
    got, _, _ = _run(lambda ps: AdaGrad(ps, lr=lr, eps=eps), params, plan, device)
    want, _, _ = _run(lambda ps: torch.optim.Adagrad(ps, lr=lr, eps=eps), params, plan, device)
    _compare(got, want, f"AdaGrad(params, lr={lr:.3g}, eps={eps:.3g}) with small gradients")


# --------------------------------------------------------------------------- checks


@hidden_check("AdaGrad.step")
def check_adagrad_step(AdaGrad, *, rng: CheckRandom) -> None:
    """Trajectory equals torch.optim.Adagrad; grads that are None are skipped; closure is honoured."""
    expect(is_subclass(AdaGrad, torch.optim.Optimizer),
           f"AdaGrad must be a subclass of torch.optim.Optimizer, got {AdaGrad!r}")
    _check_trajectory(AdaGrad, rng, torch.device("cpu"))

    p = rng.randn(4).requires_grad_(True)
    optimizer = AdaGrad([p], lr=0.1)
    losses = []

    def closure():
        optimizer.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        losses.append(loss)
        return loss

    result = optimizer.step(offered(AdaGrad, call_only(closure)))  # the closure crosses call-only
    expect(len(losses) == 1,
           f"step(closure) must call the closure once, it was called {len(losses)} times")
    expect(isinstance(result, torch.Tensor) and torch.equal(result.detach(), losses[0].detach()),
           f"step(closure) must return the closure's loss {losses[0].item():.6g}, got {result!r}")


@hidden_check("AdaGrad param groups")
def check_adagrad_param_groups(AdaGrad, *, rng: CheckRandom) -> None:
    """Each param group uses its own lr (and eps); the trajectory equals torch.optim.Adagrad's."""
    params = _random_params(rng, 6)
    plan = _grad_plan(rng, params, steps=3, scale=rng.uniform(0.1, 1.0), with_none=False)
    lrs = [rng.uniform(0.01, 0.5) for _ in range(3)]
    eps = rng.uniform(0.1, 0.5)

    def groups(ps):
        return [{"params": ps[0:2]}, {"params": ps[2:4], "lr": lrs[1]},
                {"params": ps[4:6], "lr": lrs[2], "eps": eps}]

    got, _, _ = _run(lambda ps: AdaGrad(groups(ps), lr=lrs[0]), params, plan, torch.device("cpu"))
    want, _, _ = _run(lambda ps: torch.optim.Adagrad(groups(ps), lr=lrs[0]), params, plan,
                      torch.device("cpu"))
    _compare(got, want, f"three param groups with lr={[round(x, 3) for x in lrs]} (the last with "
                        f"eps={eps:.3g}); each group must use its own group['lr'] and group['eps']")


@hidden_check("AdaGrad state_dict")
def check_adagrad_state_dict(AdaGrad, *, rng: CheckRandom) -> None:
    """State lives in self.state[p]['sum'] and a state_dict round trip resumes training exactly."""
    device = torch.device("cpu")
    lr, eps = rng.uniform(0.05, 0.5), rng.uniform(0.01, 0.5)
    params = _random_params(rng, 4)
    first = _grad_plan(rng, params, steps=3, scale=0.5)
    then = _grad_plan(rng, params, steps=3, scale=0.5)

    _, mine, live = _run(lambda ps: AdaGrad(ps, lr=lr, eps=eps), params, first, device)
    _, ref, ref_live = _run(lambda ps: torch.optim.Adagrad(ps, lr=lr, eps=eps), params, first, device)
    for index, (p, q) in enumerate(zip(live, ref_live, strict=True)):
        if all(grads[index] is None for grads in first):
            continue  # never had a gradient: torch keeps a zero sum, a lazy optimizer keeps nothing
        state = mine.state.get(p, {})
        expect("sum" in state,
               f"after 3 steps, optimizer.state[p] for parameter {index} has keys {sorted(state)}; "
               f"keep the running sum of squared gradients in self.state[p]['sum']")
        expect(torch.allclose(state["sum"], ref.state[q]["sum"], rtol=1e-5, atol=1e-7),
               f"self.state[p]['sum'] of parameter {index} differs from torch.optim.Adagrad's sum "
               f"(expected e.g. {ref.state[q]['sum'].flatten()[:3].tolist()}, got "
               f"{state['sum'].flatten()[:3].tolist()})")

    saved = copy.deepcopy(mine.state_dict())
    resumed_params = [p.detach().clone().requires_grad_(True) for p in live]
    resumed = AdaGrad(resumed_params, lr=0.5 * lr, eps=2 * eps + 1)  # the state_dict restores both
    resumed.load_state_dict(saved)
    got, _, _ = _run(None, params, then, device, optimizer=resumed, live=resumed_params)
    want, _, _ = _run(None, params, then, device, optimizer=ref, live=ref_live)
    _compare(got, want, "a fresh AdaGrad after load_state_dict(state_dict()) from 3 steps of training "
                        "(resuming must continue exactly; state kept outside self.state is lost)")


@hidden_check("AdaGrad on the GPU")
def check_adagrad_gpu(AdaGrad, *, rng: CheckRandom) -> None:
    """Trajectory on the GPU, state on the parameter's device, state memory = one float per parameter."""
    device = gpu_device("AdaGrad trajectory and optimizer-state memory on CUDA")
    _check_trajectory(AdaGrad, rng, device)

    params = [p.to(device).requires_grad_(True) for p in _random_params(rng, 3, numel_multiple=128)]
    for p in params:
        p.grad = rng.randn(*p.shape, device=device)
    expected_bytes = sum(p.numel() * p.element_size() for p in params)
    # the student's process measures its own allocator; the parameters reach it first (len() is a
    # cheap call that takes them), so only what the optimizer adds is counted
    their_torch = student_module(AdaGrad, "torch")
    student_module(AdaGrad, "builtins").len(params)
    if device.type == "cuda":
        their_torch.cuda.synchronize(device)
        before = their_torch.cuda.memory_allocated(device)
    optimizer = AdaGrad(params, lr=0.1)
    optimizer.step()
    for index, p in enumerate(params):
        state = optimizer.state.get(p, {})
        expect("sum" in state, f"no self.state[p]['sum'] for parameter {index} on {device.type}")
        total = state["sum"]
        expect(total.device == p.device and total.dtype == p.dtype and total.shape == p.shape,
               f"self.state[p]['sum'] must match its parameter (device {p.device}, dtype {p.dtype}, "
               f"shape {tuple(p.shape)}); got device {total.device}, dtype {total.dtype}, "
               f"shape {tuple(total.shape)}")
    if device.type == "cuda":
        their_torch.cuda.synchronize(device)
        grown = their_torch.cuda.memory_allocated(device) - before
        slack = 512 * len(params)  # room for a small per-parameter step counter
        expect(expected_bytes <= grown <= expected_bytes + slack,
               f"AdaGrad's state should take one float per parameter: {expected_bytes} bytes for "
               f"{expected_bytes // 4} float32 values, but GPU memory grew by {grown} bytes")
    else:
        state_bytes = sum(t.numel() * t.element_size() for s in optimizer.state.values()
                          for t in s.values() if isinstance(t, torch.Tensor) and t.dim() > 0)
        expect(state_bytes == expected_bytes,
               f"AdaGrad's state should take one float per parameter ({expected_bytes} bytes), "
               f"its tensors take {state_bytes} bytes")


def _torch_state_numel(name: str, n: int) -> int:
    """Count the optimizer-state elements torch itself allocates for ``n`` parameters."""
    p = nn.Parameter(torch.zeros(n))
    make = {
        "sgd": lambda: torch.optim.SGD([p], lr=0.1),
        "momentum": lambda: torch.optim.SGD([p], lr=0.1, momentum=0.9),
        "adagrad": lambda: torch.optim.Adagrad([p]),
        "rmsprop": lambda: torch.optim.RMSprop([p]),
        "adam": lambda: torch.optim.Adam([p]),
    }[name]
    optimizer = make()
    p.grad = torch.ones(n)
    optimizer.step()
    return sum(t.numel() for t in optimizer.state[p].values()
               if isinstance(t, torch.Tensor) and t.shape == p.shape)


def _expect_int(value: Any, expected: int, what: str) -> None:
    expect(isinstance(value, Integral) and not isinstance(value, bool),
           f"{what} must return an int, got {type(value).__name__} {value!r}")
    expect(int(value) == expected, f"{what}: expected {expected}, got {value}")


@hidden_check("optimizer_state_numel")
def check_optimizer_state_numel(optimizer_state_numel, *, rng: CheckRandom) -> None:
    """The number of state values torch's own optimizers keep (scalar step counters excluded)."""
    for name in OPTIMIZER_STATE_FACTORS:
        n = rng.randint(1, 50)
        expected = _torch_state_numel(name, n)
        _expect_int(optimizer_state_numel(n, name), expected, f"optimizer_state_numel({n}, {name!r})")
        big = rng.randint(10**8, 10**11)
        _expect_int(optimizer_state_numel(big, name), expected // n * big,
                    f"optimizer_state_numel({big}, {name!r})")


@hidden_check("training_memory_bytes")
def check_training_memory_bytes(training_memory_bytes, *, rng: CheckRandom) -> None:
    """Parameters (counted on torch's meta device), activations, gradients and optimizer state."""
    for name in OPTIMIZER_STATE_FACTORS:
        d, layers, batch = rng.randint(2, 4096), rng.randint(1, 12), rng.randint(1, 512)
        bytes_per_value = rng.choice([2, 4, 8])
        with torch.device("meta"):
            model = nn.Sequential(*[nn.Linear(d, d, bias=False) for _ in range(layers)],
                                  nn.Linear(d, 1, bias=False))
        num_params = sum(p.numel() for p in model.parameters())
        values = (num_params + batch * d * layers + num_params
                  + OPTIMIZER_STATE_FACTORS[name] * num_params)
        what = (f"training_memory_bytes(d={d}, num_layers={layers}, batch={batch}, "
                f"optimizer={name!r}, bytes_per_value={bytes_per_value})")
        _expect_int(training_memory_bytes(d, layers, batch, optimizer=name,
                                          bytes_per_value=bytes_per_value),
                    values * bytes_per_value,
                    f"{what} [parameters {num_params}, activations {batch * d * layers}, gradients "
                    f"{num_params}, optimizer state {OPTIMIZER_STATE_FACTORS[name] * num_params} values]")
    d, layers, batch = rng.randint(2, 64), rng.randint(1, 4), rng.randint(1, 8)
    default = training_memory_bytes(d, layers, batch)
    explicit = training_memory_bytes(d, layers, batch, optimizer="adagrad", bytes_per_value=4)
    _expect_int(default, int(explicit),
                f"training_memory_bytes({d}, {layers}, {batch}) must default to optimizer='adagrad', "
                f"bytes_per_value=4")
