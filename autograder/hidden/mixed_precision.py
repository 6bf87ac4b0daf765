"""Hidden checks for exercise 06_mixed_precision: number formats, sizes and a mixed-precision step.

- ``check_float_format`` / ``check_float_format_fn``: against ``torch.finfo`` (float64, float32, float16,
  bfloat16, float8_e5m2; float8_e4m3fn for the "fn" convention) and against the IEEE / "fn" formulas
  for random (exponent, mantissa) widths.
- ``check_bytes_for``: against ``element_size()`` of every dtype, float8 included.
- ``check_make_grad_scaler``: an enabled ``torch.amp.GradScaler`` for float16, None for bfloat16.
- ``check_train_step_mixed`` (bfloat16) and ``check_train_step_mixed_scaler`` (float16 + GradScaler):
  the student's step and a reference step run side by side on copies of one model; a forward hook
  sees the dtype autocast produced, spies see ``zero_grad`` and the scaler's ``update``; parameters and
  optimizer state must stay float32 and the loss come back as a Python float. An overflowing scale
  checks that the optimizer step goes through ``scaler.step`` (which skips steps with inf gradients).
- ``check_train_step_mixed_gpu`` (GPU rule): both on CUDA.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import torch
from torch import nn

from autograder.hidden._base import CheckRandom, expect, hidden_check, is_instance, student_module
from autograder.hidden._gpu import gpu_device

FORMAT_KEYS = ("max", "min_normal", "min_subnormal", "eps")
IEEE_DTYPES = {  # (exponent bits, mantissa bits) -> dtype whose torch.finfo is the reference
    (11, 52): torch.float64,
    (8, 23): torch.float32,
    (5, 10): torch.float16,
    (8, 7): torch.bfloat16,
    (5, 2): torch.float8_e5m2,
}


# --------------------------------------------------------------------------- number formats


def _formula(exponent_bits: int, mantissa_bits: int, ieee: bool) -> dict[str, float]:
    """The format's extremes from the bit widths (IEEE 754, or the float8 "fn" convention)."""
    bias = 2 ** (exponent_bits - 1) - 1
    if ieee:  # the all-ones exponent is reserved for inf/NaN
        largest = (2 - 2.0**-mantissa_bits) * 2.0 ** (2**exponent_bits - 2 - bias)
    else:  # no infinities; only all-ones exponent with all-ones mantissa is NaN
        largest = (2 - 2.0 ** (1 - mantissa_bits)) * 2.0 ** (2**exponent_bits - 1 - bias)
    return {"max": largest, "min_normal": 2.0 ** (1 - bias),
            "min_subnormal": 2.0 ** (1 - bias - mantissa_bits), "eps": 2.0**-mantissa_bits}


def _finfo(dtype: torch.dtype) -> dict[str, float]:
    info = torch.finfo(dtype)
    return {"max": float(info.max), "min_normal": float(info.smallest_normal),
            "min_subnormal": float(info.smallest_normal) * float(info.eps), "eps": float(info.eps)}


def _expect_format(got: Any, expected: dict[str, float], what: str) -> None:
    expect(isinstance(got, dict), f"{what} must return a dict, got {type(got).__name__}")
    expect(set(got) == set(FORMAT_KEYS), f"{what}: expected keys {list(FORMAT_KEYS)}, got {sorted(got)}")
    for key in FORMAT_KEYS:
        value = got[key]
        expect(isinstance(value, Real) and not isinstance(value, bool),
               f"{what}[{key!r}] must be a number, got {type(value).__name__}")
        expect(float(value) == expected[key],
               f"{what}[{key!r}]: expected {expected[key]!r}, got {float(value)!r}")


@hidden_check("float_format")
def check_float_format(float_format, *, rng: CheckRandom) -> None:
    """IEEE formats: torch.finfo for the real dtypes, the formula for random bit widths."""
    for (e, m), dtype in IEEE_DTYPES.items():
        _expect_format(float_format(e, m), _finfo(dtype), f"float_format({e}, {m}) (torch.{dtype})")
    for _ in range(5):
        e, m = rng.randint(2, 10), rng.randint(1, 30)
        _expect_format(float_format(e, m, ieee=True), _formula(e, m, True),
                       f"float_format({e}, {m}, ieee=True)")


@hidden_check("float_format fn convention")
def check_float_format_fn(float_format, *, rng: CheckRandom) -> None:
    """ieee=False: float8_e4m3fn's torch.finfo (max 448) and the formula for random bit widths."""
    expected = _finfo(torch.float8_e4m3fn)
    _expect_format(float_format(4, 3, ieee=False), expected, "float_format(4, 3, ieee=False) (float8_e4m3fn)")
    for _ in range(5):
        e, m = rng.randint(2, 9), rng.randint(1, 20)
        _expect_format(float_format(e, m, ieee=False), _formula(e, m, False),
                       f"float_format({e}, {m}, ieee=False)")


@hidden_check("bytes_for")
def check_bytes_for(bytes_for, *, rng: CheckRandom) -> None:
    dtypes = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
              torch.float8_e5m2, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
              torch.bool, torch.complex64]
    rng.shuffle(dtypes)
    for dtype in dtypes:
        n = rng.choice([0, 1, rng.randint(2, 1000), rng.randint(10**9, 10**13)])
        expected = n * torch.empty((), dtype=dtype).element_size()
        got = bytes_for(n, dtype)
        expect(isinstance(got, Integral) and not isinstance(got, bool),
               f"bytes_for({n}, {dtype}) must return an int, got {type(got).__name__} {got!r}")
        expect(int(got) == expected, f"bytes_for({n}, {dtype}): expected {expected}, got {got}")


@hidden_check("make_grad_scaler")
def check_make_grad_scaler(make_grad_scaler, *, rng: CheckRandom) -> None:
    device_types = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device_type in device_types:
        scaler = make_grad_scaler(device_type, torch.float16)
        what = f"make_grad_scaler({device_type!r}, torch.float16)"
        expect(is_instance(scaler, torch.amp.GradScaler),
               f"{what} should return a torch.amp.GradScaler (float16 gradients underflow without "
               f"loss scaling), got {type(scaler).__name__}")
        expect(scaler.is_enabled(), f"{what} returned a disabled GradScaler")
        device = getattr(scaler, "_device", device_type)
        expect(device == device_type, f"{what} returned a GradScaler for device {device!r}")
        got = make_grad_scaler(device_type, torch.bfloat16)
        expect(got is None,
               f"make_grad_scaler({device_type!r}, torch.bfloat16) should return None: bfloat16 has "
               f"float32's exponent range, so gradients do not underflow; got {type(got).__name__}")


# --------------------------------------------------------------------------- the training step


def _model(rng: CheckRandom, device: torch.device) -> tuple[nn.Sequential, int, int]:
    d_in, hidden, classes = rng.randint(8, 32), rng.randint(16, 64), rng.randint(3, 10)
    with torch.random.fork_rng(devices=[]):  # seeded initialization, global RNG left as it was
        torch.manual_seed(rng.getrandbits(62))
        model = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, classes))
    return model.to(device), d_in, classes


def _reference_step(model, optimizer, inputs, targets, loss_fn, autocast_dtype, scaler) -> float:
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=inputs.device.type, dtype=autocast_dtype):
        loss = loss_fn(model(inputs), targets)
    if scaler is None:
        loss.backward()
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return loss.item()


def _run_side_by_side(train_step_mixed: Callable, rng: CheckRandom, device: torch.device,
                      autocast_dtype: torch.dtype, scaler_kwargs: dict | None, steps: int,
                      what: str) -> tuple[dict, Any]:
    """Train one model with the student's step (next to the student's code, observed by
    ``drivers.train_steps``) and a copy with the reference step here; compare every step."""
    model, d_in, classes = _model(rng, torch.device("cpu"))
    sizes = (d_in, model[0].out_features, classes)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    ref_model = model.to(device)
    ref_optimizer = torch.optim.Adam(ref_model.parameters(), lr=1e-2)
    ref_scaler = torch.amp.GradScaler(device.type, **scaler_kwargs) if scaler_kwargs is not None \
        else None
    loss_fn = nn.functional.cross_entropy
    batch = rng.randint(4, 16)
    batches = [(rng.randn(batch, d_in), torch.randint(0, classes, (batch,), generator=rng.generator()))
               for _ in range(steps)]
    drivers = student_module(train_step_mixed, "drivers")
    report = drivers.train_steps(train_step_mixed, state=state, sizes=sizes, device=device.type,
                                 batches=batches, autocast_dtype=autocast_dtype,
                                 scaler_kwargs=scaler_kwargs)
    expect(isinstance(report, dict) and len(report.get("steps", [])) == steps,
           f"{what}: the training steps did not all run")
    low = str(autocast_dtype).removeprefix("torch.")
    for step, ((inputs, targets), got) in enumerate(zip(batches, report["steps"], strict=True), 1):
        want = _reference_step(ref_model, ref_optimizer, inputs.to(device), targets.to(device),
                               loss_fn, autocast_dtype, ref_scaler)
        where = f"{what}, step {step}"
        expect(bool(got["seen"]),
               f"{where}: the first Linear layer produced no output; under "
               f"torch.autocast(device_type={device.type!r}, dtype={autocast_dtype}) it produces "
               f"{autocast_dtype}. Run the forward pass and the loss inside torch.autocast for the "
               f"inputs' device type")
        expect(got["seen"] == low,
               f"{where}: the first Linear layer produced {got['seen']}; under "
               f"torch.autocast(device_type={device.type!r}, dtype={autocast_dtype}) it produces "
               f"{autocast_dtype}. Run the forward pass and the loss inside torch.autocast for the "
               f"inputs' device type")
        expect(got["loss_is_float"],
               f"{where}: train_step_mixed must return the loss as a Python float (loss.item()), "
               f"got {got['loss']}")
        expect(math.isclose(got["loss"], want, rel_tol=1e-3, abs_tol=1e-4),
               f"{where}: returned loss {got['loss']!r}, expected {want!r} (the unscaled loss of this step)")
        for name, dtype in got["param_dtypes"].items():
            expect(dtype == "torch.float32",
                   f"{where}: parameter {name} is {dtype}; autocast computes in low precision but the "
                   f"parameters (the master weights) must stay float32 (no model.half())")
        for dtype in got["state_dtypes"]:
            expect(dtype == "torch.float32", f"{where}: optimizer state is {dtype}, expected float32")
        calls = got["set_to_none"]
        expect(got["grads_cleared"] or (calls and all(calls)),
               f"{where}: clear the gradients with optimizer.zero_grad(set_to_none=True) every step "
               f"(zero_grad calls seen this step with set_to_none={calls})")
        for (name, q) in ref_model.named_parameters():
            p = got["params"][name]
            if not torch.allclose(p, q.detach().cpu(), rtol=1e-3, atol=1e-4):
                diff = (p - q.detach().cpu()).abs().max().item()
                expect(False,
                       f"{where}: parameter {name} differs from a reference mixed-precision step "
                       f"(max abs difference {diff:.3g}): forward+loss under autocast, backward, "
                       f"optimizer step (through the scaler when one is given), gradients cleared")
    return report, ref_scaler


def _check_bf16(train_step_mixed, rng: CheckRandom, device: torch.device) -> None:
    _run_side_by_side(train_step_mixed, rng, device, torch.bfloat16, None, steps=3,
                      what=f"train_step_mixed(..., autocast_dtype=torch.bfloat16) on {device.type}")


def _check_fp16_scaler(train_step_mixed, rng: CheckRandom, device: torch.device) -> None:
    what = f"train_step_mixed(..., autocast_dtype=torch.float16, scaler=GradScaler) on {device.type}"
    init = 2.0 ** rng.randint(4, 12)
    growing = {"init_scale": init, "growth_interval": 1}  # each update() without inf doubles it
    report, ref_scaler = _run_side_by_side(train_step_mixed, rng, device, torch.float16, growing,
                                           steps=2, what=what)
    expect(report["updates"] == 2,
           f"{what}: scaler.update() should run once per step, it ran {report['updates']} times in 2 steps")
    expect(report["scale"] == ref_scaler.get_scale(),
           f"{what}: after 2 steps the loss scale should be {ref_scaler.get_scale()}, got "
           f"{report['scale']} (call scaler.scale(loss).backward(), scaler.step(optimizer), "
           f"scaler.update())")

    overflowing = {"init_scale": 2.0**40, "growth_interval": 1000}  # float16 gradients overflow
    report, ref_scaler = _run_side_by_side(
        train_step_mixed, rng, device, torch.float16, overflowing, steps=1,
        what=f"{what} with a loss scale of 2**40 (float16 gradients overflow to inf; the step must "
             f"be skipped by scaler.step(optimizer))")
    expect(report["scale"] == ref_scaler.get_scale() < 2.0**40,
           f"{what}: after an overflowing step the scale should drop to {ref_scaler.get_scale()}, "
           f"got {report['scale']}")


@hidden_check("train_step_mixed (bfloat16)")
def check_train_step_mixed(train_step_mixed, *, rng: CheckRandom) -> None:
    _check_bf16(train_step_mixed, rng, torch.device("cpu"))


@hidden_check("train_step_mixed (float16 with a GradScaler)")
def check_train_step_mixed_scaler(train_step_mixed, *, rng: CheckRandom) -> None:
    _check_fp16_scaler(train_step_mixed, rng, torch.device("cpu"))


@hidden_check("train_step_mixed on the GPU")
def check_train_step_mixed_gpu(train_step_mixed, *, rng: CheckRandom) -> None:
    device = gpu_device("train_step_mixed under CUDA autocast (bfloat16, float16 with a GradScaler)")
    _check_bf16(train_step_mixed, rng, device)
    _check_fp16_scaler(train_step_mixed, rng, device)
