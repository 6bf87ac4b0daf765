# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   autograder:
#     library: torch/optim/adagrad.py
#     forbidden:
#     - rule: torch's own AdaGrad (torch.optim.Adagrad, its functional and fused forms)
#       why: the exercise is to implement AdaGrad yourself
#       names: [torch.optim.Adagrad, torch.optim.adagrad, torch.optim._functional.adagrad,
#               torch.optim._multi_tensor, torch._fused_adagrad_, torch.ops.aten._fused_adagrad_]
#       attributes: [Adagrad, _fused_adagrad_, _fused_adagrad, _single_tensor_adagrad,
#                    _multi_tensor_adagrad]
#       remove: [torch.optim.adagrad, aten::_fused_adagrad_, aten::_fused_adagrad]
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercise 4: AdaGrad and the memory of training
#
# An optimizer is a rule that turns gradients into parameter updates, and most rules keep per-parameter
# *state* between steps. AdaGrad keeps one running sum of squared gradients per parameter value, so the
# optimizer state costs as much memory as the parameters themselves. Background:
# [Optimizers and training](../../chapters/09_optimizers_and_training.md).
#
# You write AdaGrad as a real `torch.optim.Optimizer` subclass (so `state_dict()`, param groups and
# `zero_grad()` come for free when the state lives where torch expects it), then count the memory a
# training step needs. Each function's docstring states its contract. Replace every
# `raise NotImplementedError()` with your code, then run the test cell below it; a test cell that finishes
# silently passed. Hidden tests compare your optimizer step by step with `torch.optim.Adagrad` on random
# parameters, and one of them runs on a GPU.
#
# Your own code may not call torch's AdaGrad (`torch.optim.Adagrad`, `torch.optim.adagrad`, its functional
# and fused forms such as `torch._fused_adagrad_`): the exercise is to implement it yourself. Where your
# notebook is graded, torch's AdaGrad is removed: a call to it, by any route, raises `ForbiddenAPI` and
# the tests that go through it fail. The grader also lists every use in your cells for the course staff.
#
# Points: `AdaGrad.step` 3, param groups 1, `state_dict` round trip 2, `optimizer_state_numel` 1,
# `training_memory_bytes` 1, AdaGrad on a GPU 2 (10 in all).

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import copy

import torch

# %% [markdown] nbgrader={"grade": false, "grade_id": "adagrad_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## AdaGrad
#
# For every parameter tensor `p` with gradient `g`, AdaGrad accumulates the squared gradient and divides
# the step by its square root, element by element:
#
# $$G \leftarrow G + g^2, \qquad p \leftarrow p - \mathrm{lr}\cdot \frac{g}{\sqrt{G} + \varepsilon}.$$
#
# Note where $\varepsilon$ goes: outside the square root. Keep `G` in `self.state[p]["sum"]` (the name
# `torch.optim.Adagrad` uses); `self.state` is what `state_dict()` saves and `load_state_dict()` restores.
# Read `lr` and `eps` from each entry of `self.param_groups`, since every group may have its own values.

# %% nbgrader={"grade": false, "grade_id": "AdaGrad", "locked": false, "schema_version": 3, "solution": true, "task": false}
class AdaGrad(torch.optim.Optimizer):
    """AdaGrad: ``G <- G + g**2``, ``p <- p - lr * g / (sqrt(G) + eps)``.

    ``AdaGrad(params, lr=1e-2, eps=1e-10)`` takes parameters or param groups like any torch optimizer.
    ``step(closure=None)`` updates every parameter whose ``.grad`` is not None (others are skipped),
    using its group's ``lr`` and ``eps``, and returns the closure's loss (None without a closure; call
    the closure under ``torch.enable_grad()``, since ``step`` itself runs under ``no_grad``). The
    trajectory equals ``torch.optim.Adagrad(params, lr=lr, eps=eps)``. Per-parameter state lives in
    ``self.state[p]["sum"]`` (same shape, dtype and device as ``p``), so ``state_dict()`` and
    ``load_state_dict()`` resume training exactly.
    """

    def __init__(self, params, lr: float = 1e-2, eps: float = 1e-10):
        ### BEGIN SOLUTION
        if lr < 0:
            raise ValueError(f"AdaGrad: lr must be >= 0, got {lr}")
        if eps < 0:
            raise ValueError(f"AdaGrad: eps must be >= 0, got {eps}")
        super().__init__(params, {"lr": lr, "eps": eps})
        ### END SOLUTION

    @torch.no_grad()
    def step(self, closure=None):
        ### BEGIN SOLUTION
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, eps = group["lr"], group["eps"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "sum" not in state:
                    state["sum"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                grad = p.grad
                state["sum"].addcmul_(grad, grad)  # G <- G + g^2
                p.addcdiv_(grad, state["sum"].sqrt().add_(eps), value=-lr)
        return loss
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_AdaGrad_step", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def _run_steps(optimizer_class, grads, **kwargs):
    """Apply the list of gradients ``grads`` with a fresh optimizer; return the final parameter."""
    p = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    optimizer = optimizer_class([p], **kwargs)
    for g in grads:
        p.grad = None if g is None else torch.tensor(g)
        optimizer.step()
    return p.detach()


_grads = [[0.1, 0.2, -0.3], None, [0.3, -0.1, 0.05], [0.2, 0.2, 0.2]]
# where torch.optim.Adagrad ends after these steps, recorded from it once (where your code is graded,
# torch's AdaGrad is removed)
_recorded = [({}, [0.97516793, -2.01219463, 3.00286174]),
             ({"lr": 0.1, "eps": 0.5}, [0.92369998, -2.03975177, 3.00813389])]
for _kwargs, _values in _recorded:
    _want = torch.tensor(_values)
    _got = _run_steps(AdaGrad, _grads, **_kwargs)
    assert torch.allclose(_got, _want, atol=1e-6), (
        f"AdaGrad({_kwargs or 'defaults'}) after {len(_grads)} steps (one with .grad None): "
        f"expected {_want.tolist()} like torch.optim.Adagrad, got {_got.tolist()}. "
        "With eps=0.5 a wrong eps placement (inside the square root) shows up clearly."
    )
_p = torch.tensor([1.0, -1.0], requires_grad=True)
_optimizer = AdaGrad([_p], lr=0.1)


def _closure():
    _optimizer.zero_grad()
    _loss = (_p**2).sum()
    _loss.backward()
    return _loss


_returned = _optimizer.step(_closure)
assert isinstance(_returned, torch.Tensor) and _returned.item() == 2.0, (
    f"step(closure) should evaluate the closure (loss 2.0 here) and return its loss, got {_returned!r}"
)
### BEGIN HIDDEN TESTS
from autograder.hidden import adagrad as _hidden

_hidden.check_adagrad_step(AdaGrad)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_AdaGrad_param_groups", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_a = torch.ones(2, requires_grad=True)
_b = torch.ones(2, requires_grad=True)
_optimizer = AdaGrad([{"params": [_a]}, {"params": [_b], "lr": 0.5}], lr=0.1)
_a.grad, _b.grad = torch.ones(2), torch.ones(2)
_optimizer.step()
# First step: G = g^2 = 1, so each value moves by lr * 1 / (1 + eps), i.e. by that group's lr.
assert torch.allclose(_a, torch.full((2,), 0.9)) and torch.allclose(_b, torch.full((2,), 0.5)), (
    f"the group with lr=0.1 should reach 0.9 and the group with lr=0.5 should reach 0.5, "
    f"got {_a.tolist()} and {_b.tolist()}: read group['lr'] inside the loop over self.param_groups"
)
### BEGIN HIDDEN TESTS
from autograder.hidden import adagrad as _hidden

_hidden.check_adagrad_param_groups(AdaGrad)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_AdaGrad_state_dict", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_p = torch.tensor([1.0, 2.0], requires_grad=True)
_optimizer = AdaGrad([_p], lr=0.1)
_p.grad = torch.tensor([0.5, -1.0])
_optimizer.step()
assert "sum" in _optimizer.state[_p], (
    f"expected the running sum in optimizer.state[p]['sum'], found keys {list(_optimizer.state[_p])}"
)
assert torch.allclose(_optimizer.state[_p]["sum"], torch.tensor([0.25, 1.0])), (
    f"after one step G should be g^2 = [0.25, 1.0], got {_optimizer.state[_p]['sum'].tolist()}"
)
_saved = copy.deepcopy(_optimizer.state_dict())
_q = _p.detach().clone().requires_grad_(True)
_restored = AdaGrad([_q], lr=0.1)
_restored.load_state_dict(_saved)
for _param, _opt in [(_p, _optimizer), (_q, _restored)]:
    _param.grad = torch.tensor([0.5, -1.0])
    _opt.step()
assert torch.allclose(_p, _q), (
    f"after load_state_dict the restored optimizer should continue exactly like the original: "
    f"expected {_p.tolist()}, got {_q.tolist()}"
)
### BEGIN HIDDEN TESTS
from autograder.hidden import adagrad as _hidden

_hidden.check_adagrad_state_dict(AdaGrad)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "memory_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Counting the memory of a training step
#
# While training, memory holds the parameters, their gradients, the optimizer state and the activations
# saved for the backward pass. Plain SGD keeps no state; SGD with momentum, AdaGrad and RMSprop keep one
# value per parameter; Adam keeps two (first and second moments).
#
# The model is the lecture's deep linear network: `num_layers` square `d × d` layers without bias, then a
# head `d × 1`, applied to a batch of `batch` vectors. Count `d·d·num_layers + d` parameters and
# `batch·d·num_layers` activations (one `batch × d` output saved per layer; the head's `batch` outputs,
# which chapter 9 measures as well, are left out here to keep the count to the layers).

# %% nbgrader={"grade": false, "grade_id": "optimizer_state_numel", "locked": false, "schema_version": 3, "solution": true, "task": false}
def optimizer_state_numel(num_params: int, optimizer: str) -> int:
    """Number of optimizer-state values kept for ``num_params`` parameter values, as an int:
    ``"sgd"`` 0, ``"momentum"`` / ``"adagrad"`` / ``"rmsprop"`` num_params, ``"adam"`` 2·num_params
    (scalar step counters are not counted). Raises ValueError for any other optimizer name."""
    ### BEGIN SOLUTION
    per_param = {"sgd": 0, "momentum": 1, "adagrad": 1, "rmsprop": 1, "adam": 2}
    if optimizer not in per_param:
        raise ValueError(f"unknown optimizer {optimizer!r}; expected one of {sorted(per_param)}")
    return per_param[optimizer] * num_params
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_optimizer_state_numel", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
for _name, _factor in [("sgd", 0), ("momentum", 1), ("adagrad", 1), ("rmsprop", 1), ("adam", 2)]:
    _got = optimizer_state_numel(1000, _name)
    assert _got == _factor * 1000 and isinstance(_got, int), (
        f"optimizer_state_numel(1000, {_name!r}): expected the int {_factor * 1000}, got {_got!r}"
    )
### BEGIN HIDDEN TESTS
from autograder.hidden import adagrad as _hidden

_hidden.check_optimizer_state_numel(optimizer_state_numel)
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "training_memory_bytes", "locked": false, "schema_version": 3, "solution": true, "task": false}
def training_memory_bytes(d: int, num_layers: int, batch: int, optimizer: str = "adagrad",
                          bytes_per_value: int = 4) -> int:
    """Bytes to train the deep linear model (``num_layers`` d×d layers plus a d×1 head) on ``batch``
    inputs: parameters (d·d·num_layers + d) + activations (batch·d·num_layers) + gradients (one per
    parameter) + optimizer state (``optimizer_state_numel``), every value taking ``bytes_per_value``."""
    ### BEGIN SOLUTION
    num_params = d * d * num_layers + d
    activations = batch * d * num_layers
    gradients = num_params
    state = optimizer_state_numel(num_params, optimizer)
    return (num_params + activations + gradients + state) * bytes_per_value
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_training_memory_bytes", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
# d=4, 2 layers, batch 3: parameters 4*4*2 + 4 = 36, activations 3*4*2 = 24, gradients 36, AdaGrad 36.
_got = training_memory_bytes(4, 2, 3)
assert _got == (36 + 24 + 36 + 36) * 4, (
    f"training_memory_bytes(4, 2, 3): expected {(36 + 24 + 36 + 36) * 4} bytes "
    f"(parameters 36, activations 24, gradients 36, AdaGrad state 36, 4 bytes each), got {_got}"
)
_got = training_memory_bytes(4, 2, 3, optimizer="adam", bytes_per_value=2)
assert _got == (36 + 24 + 36 + 72) * 2, (
    f"training_memory_bytes(4, 2, 3, optimizer='adam', bytes_per_value=2): expected "
    f"{(36 + 24 + 36 + 72) * 2}, got {_got}"
)
### BEGIN HIDDEN TESTS
from autograder.hidden import adagrad as _hidden

_hidden.check_training_memory_bytes(training_memory_bytes)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "gpu_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## On a GPU
#
# The grader also runs your optimizer on a CUDA device: the trajectory must still match
# `torch.optim.Adagrad`, the state must sit on the parameter's device with its dtype, and the GPU memory
# the state takes must be one value per parameter, as `optimizer_state_numel` says. Without a GPU this
# cell checks what it can; on your machine it passes if the code above is right.

# %% nbgrader={"grade": true, "grade_id": "test_AdaGrad_gpu", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
_p = torch.randn(256, device=_device, requires_grad=True)
_p.grad = torch.randn(256, device=_device)
_optimizer = AdaGrad([_p])
_optimizer.step()
_sum = _optimizer.state[_p]["sum"]
assert _sum.device == _p.device and _sum.dtype == _p.dtype, (
    f"the state must live with its parameter ({_p.device}, {_p.dtype}), got {_sum.device}, {_sum.dtype}"
)
print(f"AdaGrad state checked on {_device}")
### BEGIN HIDDEN TESTS
from autograder.hidden import adagrad as _hidden

_hidden.check_adagrad_gpu(AdaGrad)
### END HIDDEN TESTS
