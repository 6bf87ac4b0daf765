# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercise 6: mixed precision
#
# A floating-point format spends its bits on an exponent (range) and a mantissa (precision). Training in
# mixed precision computes matrix multiplications in a 16-bit format while the parameters, their updates
# and the optimizer state stay in float32. Background: [Mixed precision](../../chapters/10_mixed_precision.md).
#
# You first derive the extremes of a format from its bit widths and check them against `torch.finfo`,
# count bytes, and then write one mixed-precision training step with `torch.autocast` and, for float16,
# a gradient scaler. Each function's docstring states its contract. Replace every
# `raise NotImplementedError()` with your code, then run the test cell below it; a test cell that finishes
# silently passed. Hidden tests compare your step with a reference step on random models, and one of them
# runs on a GPU.
#
# Points: `float_format` 2 (IEEE) + 1 (float8 "fn"), `bytes_for` 1, `make_grad_scaler` 1,
# `train_step_mixed` 2 (bfloat16) + 1 (float16 with a scaler) + 2 (on a GPU) (10 in all).

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import torch
from torch import nn

# %% [markdown] nbgrader={"grade": false, "grade_id": "float_format_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Reading a format off its bit widths
#
# With `e` exponent bits the stored exponent runs from 0 to $2^e - 1$ and the bias is $2^{e-1} - 1$.
# A normal number is $(1 + \text{mantissa}/2^m) \cdot 2^{\text{exponent} - \text{bias}}$; the stored
# exponent 0 holds zero and the *subnormals* $(\text{mantissa}/2^m) \cdot 2^{1 - \text{bias}}$.
#
# - IEEE convention (float32, float16, bfloat16, float8_e5m2): the all-ones exponent is reserved for
#   infinities and NaN, so the largest exponent a finite number uses is $2^e - 2$.
# - "fn" convention (float8_e4m3fn: **f**inite only, with a special **N**aN encoding): there are no
#   infinities, every exponent holds finite numbers and only the all-ones exponent *with* the all-ones
#   mantissa is NaN, so the largest finite number has the all-ones exponent and mantissa `1...10`.
#
# `eps` is the gap between 1 and the next representable number.

# %% nbgrader={"grade": false, "grade_id": "float_format", "locked": false, "schema_version": 3, "solution": true, "task": false}
def float_format(exponent_bits: int, mantissa_bits: int, *, ieee: bool = True) -> dict[str, float]:
    """Extremes of a binary floating-point format with ``exponent_bits`` and ``mantissa_bits``.

    Returns ``{"max", "min_normal", "min_subnormal", "eps"}`` as floats: the largest finite value, the
    smallest positive normal, the smallest positive subnormal and the gap above 1. The bias is
    ``2**(exponent_bits - 1) - 1``. ``ieee=True``: the all-ones exponent is reserved for inf/NaN
    (matches ``torch.finfo`` of float32 (8, 23), float16 (5, 10), bfloat16 (8, 7), float8_e5m2 (5, 2)).
    ``ieee=False``: the float8 "fn" convention (no infinities, only the all-ones pattern is NaN), so
    (4, 3) gives max 448 like ``torch.finfo(torch.float8_e4m3fn)``.
    """
    ### BEGIN SOLUTION
    bias = 2 ** (exponent_bits - 1) - 1
    if ieee:
        top_exponent = (2**exponent_bits - 2) - bias  # all-ones exponent reserved for inf/NaN
        top_mantissa = 2 - 2.0**-mantissa_bits  # 1.11...1 in binary
    else:
        top_exponent = (2**exponent_bits - 1) - bias  # all exponents hold finite numbers
        top_mantissa = 2 - 2.0 ** (1 - mantissa_bits)  # 1.11...10: all-ones is NaN
    return {
        "max": top_mantissa * 2.0**top_exponent,
        "min_normal": 2.0 ** (1 - bias),
        "min_subnormal": 2.0 ** (1 - bias - mantissa_bits),
        "eps": 2.0**-mantissa_bits,
    }
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_float_format", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
for (_e, _m), _dtype in {(8, 23): torch.float32, (5, 10): torch.float16, (8, 7): torch.bfloat16}.items():
    _info = torch.finfo(_dtype)
    _got = float_format(_e, _m)
    for _key, _want in [("max", _info.max), ("min_normal", _info.smallest_normal), ("eps", _info.eps)]:
        assert _got[_key] == _want, f"float_format({_e}, {_m})[{_key!r}] should equal torch.finfo({_dtype}): expected {_want}, got {_got[_key]}"
assert float_format(5, 10)["min_subnormal"] == 2.0**-24, (
    f"float16's smallest subnormal is 2**-24, got {float_format(5, 10)['min_subnormal']}"
)
### BEGIN HIDDEN TESTS
from autograder.hidden import mixed_precision as _hidden

_hidden.check_float_format(float_format)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_float_format_fn", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_got = float_format(4, 3, ieee=False)
assert _got["max"] == 448.0, f"float8_e4m3fn's largest value is 448, got {_got['max']}"
assert _got["min_normal"] == 2.0**-6 and _got["eps"] == 0.125, f"float8_e4m3fn: got {_got}"
### BEGIN HIDDEN TESTS
from autograder.hidden import mixed_precision as _hidden

_hidden.check_float_format_fn(float_format)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "bytes_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Bytes and the gradient scaler
#
# float16 has only 5 exponent bits: its smallest positive value is the subnormal $2^{-24}$. Gradients at or
# below $2^{-25}$ (half of it) round to zero, and those between $2^{-25}$ and $2^{-24}$ round up to $2^{-24}$.
# A *gradient scaler* multiplies the loss by a large factor before `backward()`, divides the gradients by it
# before the optimizer step, skips steps whose gradients overflowed, and adapts the factor in `update()`.
# bfloat16 keeps float32's 8 exponent bits, so it needs no scaler.

# %% nbgrader={"grade": false, "grade_id": "bytes_for", "locked": false, "schema_version": 3, "solution": true, "task": false}
def bytes_for(num_values: int, dtype: torch.dtype) -> int:
    """Bytes taken by ``num_values`` values of ``dtype`` (any torch dtype, float8 included), as an int."""
    ### BEGIN SOLUTION
    return num_values * torch.empty((), dtype=dtype).element_size()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_bytes_for", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
for _dtype, _size in [(torch.float32, 4), (torch.bfloat16, 2), (torch.float8_e4m3fn, 1), (torch.int64, 8)]:
    _got = bytes_for(1000, _dtype)
    assert _got == 1000 * _size and isinstance(_got, int), f"bytes_for(1000, {_dtype}): expected {1000 * _size}, got {_got!r}"
### BEGIN HIDDEN TESTS
from autograder.hidden import mixed_precision as _hidden

_hidden.check_bytes_for(bytes_for)
### END HIDDEN TESTS

# %% nbgrader={"grade": false, "grade_id": "make_grad_scaler", "locked": false, "schema_version": 3, "solution": true, "task": false}
def make_grad_scaler(device_type: str, autocast_dtype: torch.dtype) -> torch.amp.GradScaler | None:
    """A ``torch.amp.GradScaler`` for ``device_type`` when computing in float16, None for bfloat16
    (and for any other dtype, which needs no loss scaling)."""
    ### BEGIN SOLUTION
    if autocast_dtype == torch.float16:
        return torch.amp.GradScaler(device_type)
    return None
    ### END SOLUTION


# %% nbgrader={"grade": false, "grade_id": "describe_scaler", "locked": true, "schema_version": 3, "solution": false, "task": false}
def describe_scaler(scaler):
    """Describe ``scaler``: "enabled GradScaler", "disabled GradScaler" or its type name."""
    if isinstance(scaler, torch.amp.GradScaler):
        return "enabled GradScaler" if scaler.is_enabled() else "disabled GradScaler"
    return type(scaler).__name__


# %% nbgrader={"grade": true, "grade_id": "test_make_grad_scaler", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert describe_scaler(make_grad_scaler("cpu", torch.float16)) == "enabled GradScaler", (
    f"float16 needs an enabled torch.amp.GradScaler, got {describe_scaler(make_grad_scaler('cpu', torch.float16))}"
)
assert make_grad_scaler("cpu", torch.bfloat16) is None, "bfloat16 needs no scaler: return None"
### BEGIN HIDDEN TESTS
from autograder.hidden import mixed_precision as _hidden

_hidden.check_make_grad_scaler(make_grad_scaler)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "train_step_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## One mixed-precision training step
#
# `torch.autocast(device_type, dtype)` runs matrix multiplications in `dtype` and casts the operations on
# its backend's float32 list up to float32: on CUDA softmax, layer_norm, sums and the losses; on the CPU
# the losses, some pooling and padding operations, linear algebra and FFTs, while a softmax of a bfloat16
# input stays bfloat16 (chapter 10 asks autocast on the backends of the build it runs on and prints the
# dtype each operation returns).
# The parameters stay float32 and so do their gradients and the optimizer state. Never call
# `model.half()`: that turns the master weights themselves into float16. Only the forward pass and the loss belong inside `autocast`; `backward()` follows the
# dtypes chosen in the forward pass. With a scaler, use `scaler.scale(loss).backward()`,
# `scaler.step(optimizer)` and `scaler.update()`.

# %% nbgrader={"grade": false, "grade_id": "train_step_mixed", "locked": false, "schema_version": 3, "solution": true, "task": false}
def train_step_mixed(model: nn.Module, optimizer: torch.optim.Optimizer, inputs: torch.Tensor,
                     targets: torch.Tensor, loss_fn, *, autocast_dtype: torch.dtype = torch.bfloat16,
                     scaler: torch.amp.GradScaler | None = None) -> float:
    """One training step in mixed precision; returns the (unscaled) loss as a Python float.

    The forward pass and ``loss_fn(model(inputs), targets)`` run under ``torch.autocast`` for
    ``inputs.device.type`` and ``autocast_dtype``. Then backward and the optimizer step, through
    ``scaler`` (``scale(loss).backward()``, ``step(optimizer)``, ``update()``) when one is given.
    Gradients are cleared with ``optimizer.zero_grad(set_to_none=True)`` every step; parameters and
    optimizer state stay float32.
    """
    ### BEGIN SOLUTION
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=inputs.device.type, dtype=autocast_dtype):
        outputs = model(inputs)
        loss = loss_fn(outputs, targets)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    return loss.item()
    ### END SOLUTION


# %% [markdown] nbgrader={"grade": false, "grade_id": "training_demo_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# The tests below run your step through `training_demo`: it trains a small classifier on one fixed batch
# and reports what happened as plain values (the losses, the dtype the first layer produced, the
# parameters' dtypes, the loss scale).

# %% nbgrader={"grade": false, "grade_id": "training_demo", "locked": true, "schema_version": 3, "solution": false, "task": false}
def training_demo(train_step, *, steps=20, autocast_dtype=torch.bfloat16, scaler_args=None,
                  device="cpu"):
    """Train a small classifier with ``train_step`` on one fixed batch; report what happened."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, targets = torch.randn(32, 8).to(device), torch.randint(0, 3, (32,)).to(device)
    scaler = None if scaler_args is None else torch.amp.GradScaler(device, **scaler_args)
    seen = []
    model[0].register_forward_hook(lambda module, args, output: seen.append(output.dtype))
    extra = {} if scaler is None else {"scaler": scaler}
    losses = [train_step(model, optimizer, inputs, targets, nn.functional.cross_entropy,
                         autocast_dtype=autocast_dtype, **extra) for _ in range(steps)]
    return {"losses": losses, "first_layer": seen[0] if seen else None,
            "param_dtypes": sorted({str(p.dtype) for p in model.parameters()}),
            "scale": None if scaler is None else scaler.get_scale()}


# %% nbgrader={"grade": true, "grade_id": "test_train_step_mixed", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_report = training_demo(train_step_mixed)
_losses = _report["losses"]
assert all(isinstance(_loss, float) for _loss in _losses), f"return loss.item(), a Python float; got {type(_losses[0])}"
assert _report["first_layer"] == torch.bfloat16, f"under autocast the first Linear layer should output bfloat16, got {_report['first_layer']}"
assert _report["param_dtypes"] == ["torch.float32"], f"the parameters must stay float32, got {_report['param_dtypes']}"
assert _losses[-1] < _losses[0], f"20 steps on one batch should lower the loss: {_losses[0]:.3f} -> {_losses[-1]:.3f}"
### BEGIN HIDDEN TESTS
from autograder.hidden import mixed_precision as _hidden

_hidden.check_train_step_mixed(train_step_mixed)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_train_step_mixed_scaler", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_report = training_demo(train_step_mixed, steps=1, autocast_dtype=torch.float16,
                        scaler_args={"init_scale": 1024.0, "growth_interval": 1})
assert _report["scale"] == 2048.0, (
    f"with growth_interval=1 one successful step should double the scale 1024 -> 2048, got "
    f"{_report['scale']}: call scaler.update() after scaler.step(optimizer)"
)
### BEGIN HIDDEN TESTS
from autograder.hidden import mixed_precision as _hidden

_hidden.check_train_step_mixed_scaler(train_step_mixed)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "gpu_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## On a GPU
#
# The grader runs the same comparisons with the model and the data on a CUDA device, where autocast must
# use `device_type="cuda"` (take it from `inputs.device.type` rather than writing it down).

# %% nbgrader={"grade": true, "grade_id": "test_train_step_mixed_gpu", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
if torch.cuda.is_available():
    _report = training_demo(train_step_mixed, steps=2, device="cuda")
    assert all(isinstance(_loss, float) for _loss in _report["losses"]), f"expected Python floats, got {_report['losses']}"
else:
    print("no GPU here: the grader runs this check on a GPU runner")
### BEGIN HIDDEN TESTS
from autograder.hidden import mixed_precision as _hidden

_hidden.check_train_step_mixed_gpu(train_step_mixed)
### END HIDDEN TESTS
