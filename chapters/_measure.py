"""How each hardware figure of the lecture is measured, written once.

The pages call these functions for their live figures (on whatever device builds them), and
benchmarks/gpu_measure.py calls the same functions to record GPU figures into data/gpu/. Every function
returns plain numbers; the method strings say exactly what was timed, and they travel into the recording.

Timing: `best_seconds` uses torch.utils.benchmark.Timer.blocked_autorange, which repeats the call in blocks
and, when CUDA is available, synchronizes the device before reading the clock. The fastest block is kept:
it is the one least disturbed by other work on the machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
import torch.utils.benchmark as benchmark

MiB = 2**20


def best_seconds(fn: Callable[[], object], *, threads: int = 1, min_run_time: float = 0.2) -> float:
    """Wall-clock seconds of one call of fn(), in the fastest block of blocked_autorange."""
    timer = benchmark.Timer("fn()", globals={"fn": fn}, num_threads=threads)
    return min(timer.blocked_autorange(min_run_time=min_run_time).times)


def _threads(device: torch.device) -> int:
    """One CPU thread for CPU timings (reproducible on a shared machine); all of them to drive a GPU."""
    return torch.get_num_threads() if device.type == "cuda" else 1


@contextmanager
def float32_matmul_precision(precision: str) -> Iterator[None]:
    """Temporarily set torch.set_float32_matmul_precision: "highest" is true float32, "high" allows TF32."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(previous)


MATMUL_METHOD = (
    "torch.mm of two random ({n}, {n}) {dtype} matrices into a preallocated output on {device}"
    "{precision}; per-call time of the fastest block of torch.utils.benchmark.Timer.blocked_autorange "
    "(synchronized); FLOPs = 2 n^3"
)


def matmul_seconds(n: int, dtype: torch.dtype, device: torch.device, *, precision: str = "highest") -> float:
    """Seconds of one (n, n) @ (n, n) matmul; `precision` is torch's float32 matmul precision."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    out = torch.empty(n, n, device=device, dtype=dtype)
    with float32_matmul_precision(precision):
        torch.mm(a, b, out=out)  # warm-up: library initialization and kernel selection
        return best_seconds(lambda: torch.mm(a, b, out=out), threads=_threads(device))


def matmul_flop_per_s(n: int, dtype: torch.dtype, device: torch.device, *, precision: str = "highest") -> float:
    """Achieved FLOP/s of an (n, n) @ (n, n) matmul."""
    return 2 * n**3 / matmul_seconds(n, dtype, device, precision=precision)


def matmul_method(n: int, dtype: torch.dtype, device: torch.device, precision: str = "highest") -> str:
    note = ""
    if dtype == torch.float32:
        note = f", torch.set_float32_matmul_precision({precision!r})"
    return MATMUL_METHOD.format(n=n, dtype=str(dtype).removeprefix("torch."), device=device.type, precision=note)


def elementwise_add_rates(numel: int, dtype: torch.dtype, device: torch.device) -> tuple[float, float]:
    """(bytes/s, FLOP/s) achieved by torch.add(x, y, out=z): 3 tensors of `numel` values move, 1 FLOP each."""
    x = torch.randn(numel, device=device).to(dtype)
    y = torch.randn(numel, device=device).to(dtype)
    z = torch.empty_like(x)
    torch.add(x, y, out=z)
    seconds = best_seconds(lambda: torch.add(x, y, out=z), threads=_threads(device))
    return 3 * numel * x.element_size() / seconds, numel / seconds


def elementwise_method(numel: int, dtype: torch.dtype, device: torch.device) -> str:
    return (
        f"torch.add(x, y, out=z) on {numel:,} {str(dtype).removeprefix('torch.')} values on {device.type}; "
        "bytes = 3 x numel x element size (two reads, one write), FLOPs = numel; fastest block of "
        "blocked_autorange"
    )


def narrow_layer_seconds(tokens: int, width: int, dtype: torch.dtype, device: torch.device) -> tuple[float, float]:
    """(matmul, elementwise) seconds of one narrow layer: h @ w, (tokens, width) @ (width, 4 width), and then
    gelu(z + bias) on its (tokens, 4 width) output, which FlopCounterMode counts as zero FLOPs."""
    generator = torch.Generator(device=device).manual_seed(0)
    h = torch.randn(tokens, width, device=device, generator=generator).to(dtype)
    w = torch.randn(width, 4 * width, device=device, generator=generator).to(dtype)
    bias = torch.randn(4 * width, device=device, generator=generator).to(dtype)
    z = torch.empty(tokens, 4 * width, device=device, dtype=dtype)
    torch.mm(h, w, out=z)
    threads = _threads(device)
    matmul = lambda: torch.mm(h, w, out=z)  # noqa: E731
    elementwise = lambda: F.gelu(z + bias)  # noqa: E731
    rounds = [(best_seconds(matmul, threads=threads, min_run_time=0.1),
               best_seconds(elementwise, threads=threads, min_run_time=0.1)) for _ in range(4)]
    # Interleaved rounds, the fastest of each: a burst of load on a shared machine cannot land on one side only.
    return min(m for m, _ in rounds), min(e for _, e in rounds)


# ---- host <-> GPU copies: CUDA only -------------------------------------------------------------------------


def host_to_device_bytes_per_s(n_bytes: int, *, pinned: bool, device: torch.device) -> float:
    """Bytes/s of copying `n_bytes` of host memory (pinned or pageable) into a preallocated GPU tensor."""
    host = torch.ones(n_bytes // 4, dtype=torch.float32)  # ones, not empty: every page is really there
    if pinned:
        host = host.pin_memory()
    target = torch.empty_like(host, device=device)
    target.copy_(host)
    seconds = best_seconds(lambda: target.copy_(host, non_blocking=pinned), threads=_threads(device))
    return n_bytes / seconds


def host_to_device_method(n_bytes: int, pinned: bool) -> str:
    kind = "pinned (page-locked), non_blocking=True" if pinned else "pageable, non_blocking=False"
    return (
        f"target.copy_(host) of {n_bytes // MiB} MiB float32 from {kind} host memory into a preallocated "
        "GPU tensor; fastest block of blocked_autorange (synchronized)"
    )


def copy_compute_overlap(device: torch.device, *, n_bytes: int = 256 * MiB, matmul_n: int = 4096) -> dict[str, float]:
    """Does a host->GPU copy overlap with matmuls? Seconds of: the copy alone, the matmuls alone, the copy
    then the matmuls on the default stream, the copy on a side stream beside the matmuls, and the host
    time to enqueue one non_blocking copy. The number of matmuls is chosen so that they take about as long
    as the copy, where overlap would save the most."""
    host = torch.ones(n_bytes // 4, dtype=torch.float32).pin_memory()
    target = torch.empty_like(host, device=device)
    a = torch.randn(matmul_n, matmul_n, device=device, dtype=torch.bfloat16)
    b = torch.randn(matmul_n, matmul_n, device=device, dtype=torch.bfloat16)
    out = torch.empty_like(a)
    threads = _threads(device)

    def copy() -> None:
        target.copy_(host, non_blocking=True)

    copy_s = best_seconds(copy, threads=threads)
    one_matmul_s = best_seconds(lambda: torch.mm(a, b, out=out), threads=threads)
    matmuls = max(1, round(copy_s / one_matmul_s))

    def compute() -> None:
        for _ in range(matmuls):
            torch.mm(a, b, out=out)

    def same_stream() -> None:
        copy()  # non_blocking: the CPU moves on, but the default stream runs the copy, then the matmuls
        compute()

    side = torch.cuda.Stream(device=device)
    main = torch.cuda.current_stream(device)

    def side_stream() -> None:
        side.wait_stream(main)  # the previous matmuls are done with whatever `target` held
        with torch.cuda.stream(side):
            copy()  # runs on the copy engine while the default stream computes
        compute()
        main.wait_stream(side)  # later work on the default stream sees the copied data

    compute_s = best_seconds(compute, threads=threads)
    same_s = best_seconds(same_stream, threads=threads)
    side_s = best_seconds(side_stream, threads=threads)

    issue_s = float("inf")
    for _attempt in range(5):  # best of five
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        copy()
        issue_s = min(issue_s, time.perf_counter() - start)
        torch.cuda.synchronize(device)
    return {
        "copy_s": copy_s,
        "compute_s": compute_s,
        "same_stream_s": same_s,
        "side_stream_s": side_s,
        "issue_s": issue_s,
        "matmuls": float(matmuls),
        "n_bytes": float(n_bytes),
        "matmul_n": float(matmul_n),
    }


def overlap_method(n_bytes: int, matmul_n: int) -> str:
    return (
        f"{n_bytes // MiB} MiB pinned host->GPU copy_(non_blocking=True) and k bf16 ({matmul_n}, {matmul_n}) "
        "matmuls (k chosen so both take about as long); same stream: copy then matmuls on the default "
        "stream; side stream: copy inside torch.cuda.stream(side) with side.wait_stream(main) before and "
        "main.wait_stream(side) after; fastest block of blocked_autorange (synchronized)"
    )
