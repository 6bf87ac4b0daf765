# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercise 3: counting FLOPs
#
# Almost all the arithmetic of training a transformer is matrix multiplication, so counting matmul FLOPs
# predicts the cost of a run: forward, backward (about twice the forward) and the whole training run by
# the 6·tokens·parameters rule. Background: [Compute accounting](../../chapters/05_compute_accounting.md)
# and [Gradients and backward FLOPs](../../chapters/06_gradients_backward_flops.md).
# [Accounting for a Transformer](../../chapters/11_transformer_accounting.md) applies the same counts to a
# whole GPT-2, attention included.
#
# Counts are Python **integers**, exactly what `torch.utils.flop_counter.FlopCounterMode` reports (it
# counts 2 FLOPs, a multiply and an add, per multiply-accumulate). Use it to check yourself:
#
# ```python
# from torch.utils.flop_counter import FlopCounterMode
# with FlopCounterMode(display=False) as counter:
#     torch.randn(8, 16) @ torch.randn(16, 4)
# counter.get_total_flops()  # 1024
# ```
#
# Points: `matmul_flops` 1, `forward_flops` 2, `backward_flops` 3, `training_flops` 1, `mfu` 1,
# `training_days` 2 (10 in all).

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import torch
from torch.utils.flop_counter import FlopCounterMode

# %% [markdown] nbgrader={"grade": false, "grade_id": "matmul_flops_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## One matrix multiplication

# %% nbgrader={"grade": false, "grade_id": "matmul_flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
def matmul_flops(m: int, k: int, n: int) -> int:
    """FLOPs of ``(m, k) @ (k, n)``, an exact int as FlopCounterMode reports it (also for huge sizes)."""
    ### BEGIN SOLUTION
    return 2 * m * k * n  # one multiply and one add per (row, column, inner) triple
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_matmul_flops", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
with FlopCounterMode(display=False) as counter:
    torch.randn(8, 16) @ torch.randn(16, 4)
assert matmul_flops(8, 16, 4) == counter.get_total_flops(), f"expected {counter.get_total_flops()}, got {matmul_flops(8, 16, 4)}"
assert isinstance(matmul_flops(8, 16, 4), int), f"FLOP counts are ints, got {type(matmul_flops(8, 16, 4)).__name__}"
### BEGIN HIDDEN TESTS
from autograder.hidden import flops as _hidden

_hidden.check_matmul_flops(matmul_flops)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "forward_flops_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## The forward pass of a deep linear network
#
# The chain `x @ W1 @ W2 @ ... @ W_L` without biases: `x` is (batch, dims[0]) and `W_i` is
# (dims[i-1], dims[i]).

# %% nbgrader={"grade": false, "grade_id": "forward_flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
def forward_flops(batch: int, dims: list[int]) -> int:
    """Matmul FLOPs of the forward chain ``x (batch, dims[0]) @ W1 (dims[0], dims[1]) @ ... @ W_L``
    (L = len(dims) - 1 layers; 0 when there is no layer)."""
    ### BEGIN SOLUTION
    return sum(2 * batch * d_in * d_out for d_in, d_out in zip(dims[:-1], dims[1:]))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_forward_flops", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
x, w1, w2 = torch.randn(4, 3), torch.randn(3, 5), torch.randn(5, 7)
with FlopCounterMode(display=False) as counter:
    x @ w1 @ w2
assert forward_flops(4, [3, 5, 7]) == counter.get_total_flops(), f"expected {counter.get_total_flops()}, got {forward_flops(4, [3, 5, 7])}"
assert forward_flops(4, [3]) == 0, "no layer, no FLOPs"
### BEGIN HIDDEN TESTS
from autograder.hidden import flops as _hidden

_hidden.check_forward_flops(forward_flops)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "backward_flops_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## The backward pass
#
# For each layer `h_out = h_in @ W`, the backward pass computes the weight gradient `h_inᵀ @ grad_out`
# and, when something before the layer needs it, the input gradient `grad_out @ Wᵀ`. Every `W`
# requires grad; the network input `x` needs a gradient only when `input_requires_grad`.

# %% nbgrader={"grade": false, "grade_id": "backward_flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
def backward_flops(batch: int, dims: list[int], input_requires_grad: bool = False) -> int:
    """Matmul FLOPs of the backward pass of the chain of ``forward_flops`` when every weight requires
    grad; the first layer computes an input gradient only if ``input_requires_grad``."""
    ### BEGIN SOLUTION
    total = 0
    for layer, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
        total += 2 * batch * d_in * d_out  # weight gradient: h_in^T @ grad_out
        if layer > 0 or input_requires_grad:
            total += 2 * batch * d_out * d_in  # input gradient: grad_out @ W^T
    return total
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_backward_flops", "locked": true, "points": 3, "schema_version": 3, "solution": false, "task": false}
def measured_backward(batch, dims, input_requires_grad):
    x = torch.randn(batch, dims[0], requires_grad=input_requires_grad)
    h = x
    for d_in, d_out in zip(dims[:-1], dims[1:]):
        h = h @ torch.randn(d_in, d_out, requires_grad=True)
    loss = h.sum()
    with FlopCounterMode(display=False) as counter:
        loss.backward()
    return counter.get_total_flops()


for flag in (False, True):
    want = measured_backward(4, [3, 5, 7], flag)
    got = backward_flops(4, [3, 5, 7], input_requires_grad=flag)
    assert got == want, f"backward_flops(4, [3, 5, 7], input_requires_grad={flag}): FlopCounterMode says {want}, got {got}"
### BEGIN HIDDEN TESTS
from autograder.hidden import flops as _hidden

_hidden.check_backward_flops(backward_flops)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "training_flops_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## The 6ND rule
#
# Per token, a forward pass costs about 2 FLOPs per parameter and the backward about 4.

# %% nbgrader={"grade": false, "grade_id": "training_flops", "locked": false, "schema_version": 3, "solution": true, "task": false}
def training_flops(num_tokens: int, num_params: int) -> int:
    """Training FLOPs by the rule 6 × tokens × parameters, as an int."""
    ### BEGIN SOLUTION
    return 6 * num_tokens * num_params  # 2 forward + 4 backward per parameter per token
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_training_flops", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert training_flops(1000, 10) == 60_000, f"6 * 1000 * 10 = 60000, got {training_flops(1000, 10)}"
### BEGIN HIDDEN TESTS
from autograder.hidden import flops as _hidden

_hidden.check_training_flops(training_flops)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "mfu_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Model FLOPs utilization
#
# MFU compares the FLOP/s a run achieves with the accelerator's peak: a fraction between 0 and 1
# (0.5 is very good).

# %% nbgrader={"grade": false, "grade_id": "mfu", "locked": false, "schema_version": 3, "solution": true, "task": false}
def mfu(flops: float, seconds: float, peak_flop_per_sec: float) -> float:
    """Model FLOPs utilization: achieved FLOP/s (``flops / seconds``) as a fraction of the peak."""
    ### BEGIN SOLUTION
    return flops / seconds / peak_flop_per_sec
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_mfu", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
got = mfu(flops=4e15, seconds=20.0, peak_flop_per_sec=1e15)
assert abs(got - 0.2) < 1e-12, f"4e15 FLOPs in 20 s is 2e14 FLOP/s, 0.2 of a 1e15 peak; got {got}"
### BEGIN HIDDEN TESTS
from autograder.hidden import flops as _hidden

_hidden.check_mfu(mfu)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "training_days_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## How long will it take?

# %% nbgrader={"grade": false, "grade_id": "training_days", "locked": false, "schema_version": 3, "solution": true, "task": false}
def training_days(
    num_tokens: int, num_params: int, num_gpus: int, peak_flop_per_sec: float, mfu: float
) -> float:
    """Wall-clock days to train ``num_params`` parameters on ``num_tokens`` tokens by the 6ND rule,
    on ``num_gpus`` accelerators of ``peak_flop_per_sec`` each, running at utilization ``mfu``."""
    ### BEGIN SOLUTION
    seconds = 6 * num_tokens * num_params / (num_gpus * peak_flop_per_sec * mfu)
    return seconds / 86_400  # seconds per day
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_training_days", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
got = training_days(num_tokens=864_000, num_params=1_000, num_gpus=2, peak_flop_per_sec=10.0, mfu=0.5)
assert abs(got - 6000.0) < 1e-9, f"6 * 864000 * 1000 FLOPs at 2 * 10 * 0.5 = 10 FLOP/s take 5.184e8 s, i.e. 6000 days; got {got}"
### BEGIN HIDDEN TESTS
from autograder.hidden import flops as _hidden

_hidden.check_training_days(training_days)
### END HIDDEN TESTS
