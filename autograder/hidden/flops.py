"""Hidden checks for exercise 03_flops: FLOP counts against torch's own FlopCounterMode.

Matmul chains run on the ``meta`` device, so FlopCounterMode counts huge sizes (beyond 2**53, where a
float-based count goes wrong) without allocating or computing anything.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch.utils.flop_counter import FlopCounterMode

from autograder.hidden._base import CheckRandom, expect, expect_equal, hidden_check

ROUNDS = 25
SECONDS_PER_DAY = 86_400


def counted_chain_flops(batch: int, dims: Sequence[int], *, input_requires_grad: bool = False) -> tuple[int, int]:
    """(forward, backward) FLOPs of ``x @ W1 @ ... @ W_L`` as FlopCounterMode reports them (meta device)."""
    x = torch.empty(batch, dims[0], device="meta", requires_grad=input_requires_grad)
    weights = [torch.empty(d_in, d_out, device="meta", requires_grad=True) for d_in, d_out in zip(dims[:-1], dims[1:], strict=True)]
    with FlopCounterMode(display=False) as forward:
        h = x
        for w in weights:
            h = h @ w
    loss = h.sum()
    with FlopCounterMode(display=False) as backward:
        loss.backward()
    return forward.get_total_flops(), backward.get_total_flops()


def _size(rng: CheckRandom) -> int:
    """Small sizes mostly, sometimes above 10**6 so that products exceed float precision."""
    return rng.randint(1, 64) if rng.random() < 0.5 else rng.randint(10**6, 10**7)


def _expect_int(got: object, what: str) -> None:
    expect(type(got) is int, f"{what} should be a Python int (exact count), got {type(got).__name__} {got!r}")


def _expect_close(got: object, want: float, what: str) -> None:
    expect(isinstance(got, (int, float)) and not isinstance(got, bool),
           f"{what} should be a number, got {type(got).__name__}")
    expect(math.isclose(float(got), want, rel_tol=1e-9), f"{what}: expected {want!r}, got {got!r}")  # type: ignore[arg-type]


@hidden_check("matmul_flops")
def check_matmul_flops(matmul_flops: Callable, *, rng: CheckRandom) -> None:
    huge = (10**7 + 19, 10**7 + 79, 10**7 + 103)  # 2*m*k*n above 2**53: only exact ints get it right
    for m, k, n in [huge] + [(_size(rng), _size(rng), _size(rng)) for _ in range(ROUNDS)]:
        want, _ = counted_chain_flops(m, [k, n])
        got = matmul_flops(m, k, n)
        _expect_int(got, f"matmul_flops({m}, {k}, {n})")
        expect_equal(got, want, f"matmul_flops({m}, {k}, {n})")


@hidden_check("forward_flops")
def check_forward_flops(forward_flops: Callable, *, rng: CheckRandom) -> None:
    expect_equal(forward_flops(3, [5]), 0, "forward_flops(3, [5]) (no layer)")
    for _ in range(ROUNDS):
        batch, dims = _size(rng), [_size(rng) for _ in range(rng.randint(2, 6))]
        want, _ = counted_chain_flops(batch, dims)
        got = forward_flops(batch, list(dims))
        _expect_int(got, f"forward_flops({batch}, {dims})")
        expect_equal(got, want, f"forward_flops({batch}, {dims})")


@hidden_check("backward_flops")
def check_backward_flops(backward_flops: Callable, *, rng: CheckRandom) -> None:
    for round_number in range(ROUNDS):
        batch, dims = _size(rng), [_size(rng) for _ in range(rng.randint(2, 6))]
        flag = bool(round_number % 2)
        _, want = counted_chain_flops(batch, dims, input_requires_grad=flag)
        got = backward_flops(batch, list(dims), input_requires_grad=flag)
        what = f"backward_flops({batch}, {dims}, input_requires_grad={flag})"
        _expect_int(got, what)
        expect_equal(got, want, what)
    _, want = counted_chain_flops(7, [3, 11])
    expect_equal(backward_flops(7, [3, 11]), want, "backward_flops(7, [3, 11]) with the default flag")


@hidden_check("training_flops")
def check_training_flops(training_flops: Callable, *, rng: CheckRandom) -> None:
    for _ in range(ROUNDS):
        tokens, params = rng.randint(1, 10**13), rng.randint(1, 10**12)
        got = training_flops(tokens, params)
        _expect_int(got, f"training_flops({tokens}, {params})")
        expect_equal(got, 6 * tokens * params, f"training_flops({tokens}, {params})")


@hidden_check("mfu")
def check_mfu(mfu: Callable, *, rng: CheckRandom) -> None:
    for _ in range(ROUNDS):
        peak = rng.choice([312e12, 989e12, 1979e12, 2.25e15]) * rng.uniform(0.5, 1.5)
        fraction, seconds = rng.uniform(0.01, 0.9), rng.uniform(1e-3, 1e4)
        flops = fraction * peak * seconds
        _expect_close(mfu(flops, seconds, peak), flops / seconds / peak,
                      f"mfu({flops:.6g}, {seconds:.6g}, {peak:.6g})")


@hidden_check("training_days")
def check_training_days(training_days: Callable, *, rng: CheckRandom) -> None:
    for _ in range(ROUNDS):
        tokens, params = rng.randint(10**9, 10**13), rng.randint(10**6, 10**12)
        gpus, peak, utilization = rng.randint(1, 4096), rng.uniform(1e13, 3e15), rng.uniform(0.05, 0.8)
        want = 6 * tokens * params / (gpus * peak * utilization) / SECONDS_PER_DAY
        _expect_close(training_days(tokens, params, gpus, peak, utilization), want,
                      f"training_days({tokens}, {params}, {gpus}, {peak:.6g}, {utilization:.4g})")
