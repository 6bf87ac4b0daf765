"""Hidden checks for exercise 05_get_batch: sampling language-modelling batches from a token file.

- ``check_get_batch``: shapes, int64, y is x shifted by one, values copied exactly from the dataset
  (uint16 ids above 32767 included), ``device`` given as a string or a ``torch.device``.
- ``check_get_batch_starts``: on a tiny ``np.arange`` dataset with many draws every start in
  [0, len - context_length - 1] occurs, roughly uniformly, and nothing starts later.
- ``check_get_batch_seed``: ``torch.manual_seed`` reproduces a batch, consecutive calls differ, and
  neither numpy's nor Python's global random state is touched.
- ``check_get_batch_reads``: a virtual dataset of 10**12 tokens (far more than memory) that counts
  every token read and refuses whole-array conversion; a batch may read only about the rows it needs.
- ``check_get_batch_device``: a device that does not exist raises instead of silently falling back.
- ``check_load_tokens``: a read-only ``np.memmap`` of a raw token file, any dtype.
- ``check_get_batch_gpu`` (GPU rule): on CUDA the batch lands on the GPU through pinned host memory
  and a ``non_blocking=True`` copy, observed by wrapping the tensor methods that copy to the device.
"""

from __future__ import annotations

import contextlib
import operator
import random
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from autograder.hidden._base import CheckRandom, expect, hidden_check, offered, student_module
from autograder.hidden._gpu import gpu_device
from autograder.sandbox.channel import sequence_only

# --------------------------------------------------------------------------- helpers


def _call(get_batch, dataset, batch_size: int, context_length: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    return _pair(get_batch(dataset, batch_size, context_length, device))


def _pair(result: Any) -> tuple[torch.Tensor, torch.Tensor]:
    expect(isinstance(result, tuple | list) and len(result) == 2,
           f"get_batch must return a pair (x, y), got {type(result).__name__}")
    x, y = result
    expect(isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor),
           f"x and y must be torch tensors, got {type(x).__name__} and {type(y).__name__}")
    return x, y


def _expect_layout(x: torch.Tensor, y: torch.Tensor, batch_size: int, context_length: int,
                   device_type: str, what: str) -> None:
    for name, t in (("x", x), ("y", y)):
        expect(tuple(t.shape) == (batch_size, context_length),
               f"{what}: {name} should have shape (batch_size, context_length) = "
               f"{(batch_size, context_length)}, got {tuple(t.shape)}")
        expect(t.dtype == torch.int64,
               f"{what}: {name} should be int64 (what embedding layers and cross_entropy expect), "
               f"got {t.dtype}")
        expect(t.device.type == device_type,
               f"{what}: {name} should be on device {device_type!r}, got {t.device}")


def _expect_rows_from(dataset: np.ndarray, x: torch.Tensor, y: torch.Tensor, what: str) -> None:
    """Each row of x must be dataset[s:s+C] for some valid s, and y must be dataset[s+1:s+C+1]."""
    data = dataset.astype(np.int64)
    context_length = x.shape[1]
    last_start = len(data) - context_length - 1
    xs, ys = x.cpu().numpy(), y.cpu().numpy()
    for row in range(xs.shape[0]):
        candidates = [s for s in np.flatnonzero(data[: last_start + 1] == xs[row, 0]).tolist()
                      if np.array_equal(data[s : s + context_length], xs[row])]
        expect(len(candidates) > 0,
               f"{what}: row {row} of x, {xs[row, :6].tolist()}..., is not a run of consecutive tokens "
               f"dataset[s:s+context_length] for any start s in [0, len(dataset) - context_length - 1]")
        expect(any(np.array_equal(data[s + 1 : s + context_length + 1], ys[row]) for s in candidates),
               f"{what}: y must be x shifted by one token (y[i] = dataset[s+1:s+1+context_length]); "
               f"row {row}: x starts {xs[row, :4].tolist()}, y starts {ys[row, :4].tolist()}")


def _random_tokens(rng: CheckRandom, length: int, dtype=np.uint16) -> np.ndarray:
    """Random token ids over the dtype's whole range (uint16 ids above 32767 included)."""
    high = min(int(np.iinfo(dtype).max), 2**31 - 1)
    return np.random.default_rng(rng.getrandbits(64)).integers(0, high, size=length, endpoint=True,
                                                               dtype=np.int64).astype(dtype)


def _token_file(rng: CheckRandom, directory: Path, length: int, dtype=np.uint16) -> tuple[Path, np.ndarray]:
    tokens = _random_tokens(rng, length, dtype)
    path = directory / f"tokens_{np.dtype(dtype).name}.bin"
    tokens.tofile(path)
    return path, tokens


# --------------------------------------------------------------------------- checks


@hidden_check("get_batch")
def check_get_batch(get_batch, *, rng: CheckRandom) -> None:
    """Layout and values on an np.ndarray and on an np.memmap of uint16 tokens."""
    with tempfile.TemporaryDirectory(prefix="get_batch_check_") as tmp:
        path, tokens = _token_file(rng, Path(tmp), rng.randint(20_000, 50_000))
        memmap = np.memmap(path, dtype=np.uint16, mode="r")
        for dataset, kind, device in ((tokens, "np.ndarray", "cpu"), (memmap, "np.memmap",
                                                                      torch.device("cpu"))):
            batch_size, context_length = rng.randint(1, 16), rng.randint(1, 64)
            what = (f"get_batch({kind} of {len(dataset)} uint16 tokens, batch_size={batch_size}, "
                    f"context_length={context_length}, device={device!r})")
            x, y = _call(get_batch, dataset, batch_size, context_length, device)
            _expect_layout(x, y, batch_size, context_length, "cpu", what)
            _expect_rows_from(tokens, x, y, what)
        del memmap


@hidden_check("get_batch start positions")
def check_get_batch_starts(get_batch, *, rng: CheckRandom) -> None:
    """Every start in [0, len - C - 1] occurs, about equally often; none lies outside."""
    context_length = rng.randint(1, 6)
    num_starts = rng.randint(2, 6)
    length = context_length + num_starts  # valid starts: 0 .. num_starts - 1
    dataset = np.arange(length, dtype=np.uint16)
    per_start = 400
    starts: list[int] = []
    for _ in range(4):
        x, y = _call(get_batch, dataset, per_start * num_starts // 4, context_length, "cpu")
        expect(tuple(x.shape) == (per_start * num_starts // 4, context_length) and y.shape == x.shape,
               f"get_batch on a dataset of {length} tokens with context_length={context_length} returned "
               f"shapes {tuple(x.shape)} and {tuple(y.shape)}")
        expect(torch.equal(y.cpu(), x.cpu() + 1),
               "y must be x shifted by one token; on np.arange tokens that is y == x + 1")
        starts += x[:, 0].tolist()
    counts = np.bincount(np.array(starts), minlength=length)
    valid = counts[:num_starts]
    expect(bool(counts[num_starts:].sum() == 0),
           f"on a dataset of {length} tokens with context_length={context_length}, starts must lie in "
           f"[0, {num_starts - 1}] (len(dataset) - context_length - 1); got starts "
           f"{sorted(set(starts) - set(range(num_starts)))}")
    expect(bool((valid > 0).all()),
           f"on a dataset of {length} tokens with context_length={context_length} the valid starts are "
           f"0..{num_starts - 1}, but in {len(starts)} draws these never occurred: "
           f"{np.flatnonzero(valid == 0).tolist()} (is the last start len(dataset) - context_length - 1 "
           f"excluded?)")
    expected = len(starts) / num_starts
    spread = 6 * np.sqrt(expected)  # six standard deviations: a uniform sampler never fails this
    expect(np.abs(valid - expected).max() <= spread,
           f"starts should be uniform over [0, {num_starts - 1}]: expected about {expected:.0f} draws "
           f"each, got counts {valid.tolist()}")


@contextlib.contextmanager
def _python_and_numpy_rng_untouched(get_batch, what: str) -> Iterator[None]:
    their_numpy = student_module(get_batch, "numpy").random
    their_random = student_module(get_batch, "random")
    numpy_state, python_state = their_numpy.get_state(), their_random.getstate()
    yield
    after = their_numpy.get_state()
    expect(all(np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
               for a, b in zip(numpy_state, after, strict=True)),
           f"{what} changed numpy's global random state: draw the starts with torch.randint (torch's "
           "global generator), so that torch.manual_seed reproduces a batch")
    expect(their_random.getstate() == python_state,
           f"{what} changed Python's `random` state: draw the starts with torch.randint instead")


@hidden_check("get_batch seeding")
def check_get_batch_seed(get_batch, *, rng: CheckRandom) -> None:
    """torch.manual_seed reproduces a batch; the global generator advances; no other RNG is used."""
    dataset = _random_tokens(rng, 100_000)
    batch_size, context_length = rng.randint(4, 16), rng.randint(4, 32)
    seed = rng.randint(0, 2**31 - 1)
    what = f"get_batch(..., batch_size={batch_size}, context_length={context_length}, 'cpu')"

    batches = []
    for numpy_seed in (1, 2):
        np.random.seed(numpy_seed)  # a numpy-based sampler would now draw differently
        random.seed(numpy_seed)
        torch.manual_seed(seed)
        with _python_and_numpy_rng_untouched(get_batch, what):
            batches.append(_call(get_batch, dataset, batch_size, context_length, "cpu"))
    (x1, y1), (x2, y2) = batches
    expect(torch.equal(x1, x2) and torch.equal(y1, y2),
           f"{what}: after torch.manual_seed({seed}) two calls must return the same batch; they differ "
           f"(use torch.randint, which draws from torch's global generator)")
    x3, _ = _call(get_batch, dataset, batch_size, context_length, "cpu")
    expect(not torch.equal(x1, x3),
           f"{what}: two consecutive calls after one torch.manual_seed returned the same batch; "
           "do not reseed inside get_batch")


class _VirtualTokens:
    """A read-only token sequence of ``length`` ids (id of position i = i mod 65536) that is never
    materialized: it counts every token read and fails when more than ``budget`` are read or when
    someone converts the whole of it (np.array, astype, iteration, torch.tensor)."""

    def __init__(self, length: int, budget: int, needed: int) -> None:
        self._length, self.budget, self.needed, self.read = length, budget, needed, 0
        self.dtype = np.dtype(np.uint16)
        self.shape, self.ndim, self.size = (length,), 1, length

    def __len__(self) -> int:
        return self._length

    # Each refusal is one whole message: messages.po translates whole messages, never a phrase joined
    # into another one at run time (autograder.i18n.messages.fragments).
    def _read_too_much(self) -> AssertionError:
        return AssertionError(
            f"get_batch read {self.read:,} tokens of a dataset of {self._length:,} tokens (a memmap far "
            f"larger than memory) to build one batch that needs {self.needed:,} tokens. Read only the "
            f"rows you need, e.g. dataset[start:start + context_length + 1] for each start")

    def __getitem__(self, key: Any) -> Any:
        positions: np.ndarray | np.int64
        if isinstance(key, slice):
            positions = np.arange(*key.indices(self._length), dtype=np.int64)
        else:
            try:
                positions = np.int64(operator.index(key))
            except TypeError:
                positions = np.asarray(key.cpu() if isinstance(key, torch.Tensor) else key)
                if positions.dtype == bool or not np.issubdtype(positions.dtype, np.integer):
                    raise IndexError(f"unsupported index {key!r} into the token dataset") from None
            positions = np.where(positions < 0, positions + self._length, positions)
            if np.any((positions < 0) | (positions >= self._length)):
                raise IndexError(f"index out of range for a dataset of {self._length} tokens")
        self.read += int(np.size(positions))
        if self.read > self.budget:
            raise self._read_too_much()
        return (positions % 65536).astype(np.uint16)

    def __array__(self, dtype=None, copy=None):
        raise AssertionError(
            f"get_batch converted the whole of a dataset of {self._length:,} tokens (a memmap far "
            f"larger than memory) to build one batch that needs {self.needed:,} tokens. Read only the "
            f"rows you need, e.g. dataset[start:start + context_length + 1] for each start")

    def __iter__(self):
        raise AssertionError(
            f"get_batch iterated over the whole of a dataset of {self._length:,} tokens (a memmap far "
            f"larger than memory) to build one batch that needs {self.needed:,} tokens. Read only the "
            f"rows you need, e.g. dataset[start:start + context_length + 1] for each start")

    def astype(self, *args, **kwargs):
        raise AssertionError(
            f"get_batch converted the whole of (astype) a dataset of {self._length:,} tokens (a memmap far "
            f"larger than memory) to build one batch that needs {self.needed:,} tokens. Read only the "
            f"rows you need, e.g. dataset[start:start + context_length + 1] for each start")

    def tolist(self):
        raise AssertionError(
            f"get_batch converted the whole of (tolist) a dataset of {self._length:,} tokens (a memmap far "
            f"larger than memory) to build one batch that needs {self.needed:,} tokens. Read only the "
            f"rows you need, e.g. dataset[start:start + context_length + 1] for each start")


@hidden_check("get_batch reads only what it needs")
def check_get_batch_reads(get_batch, *, rng: CheckRandom) -> None:
    """On 10**12 virtual tokens, a batch reads at most twice its own size and is still right."""
    batch_size, context_length = rng.randint(2, 16), rng.randint(2, 64)
    needed = batch_size * (context_length + 1)
    dataset = _VirtualTokens(10**12, budget=2 * needed + 16, needed=needed)
    offer = sequence_only(dataset, ("dtype", "shape", "ndim", "size"))
    x, y = _call(get_batch, offered(get_batch, offer), batch_size, context_length, "cpu")
    what = f"get_batch(a 10**12-token memmap, {batch_size}, {context_length}, 'cpu')"
    _expect_layout(x, y, batch_size, context_length, "cpu", what)
    steps = (x[:, 1:] - x[:, :-1]) % 65536
    expect(bool((steps == 1).all()) and bool(((y - x) % 65536 == 1).all()),
           f"{what}: rows must be consecutive tokens and y must be x shifted by one")


@hidden_check("get_batch on an unavailable device")
def check_get_batch_device(get_batch, *, rng: CheckRandom) -> None:
    """A CUDA device that does not exist raises (no silent fallback to the CPU)."""
    dataset = np.arange(1000, dtype=np.uint16)
    x, _ = _call(get_batch, dataset, 2, 8, "cpu")  # works where the device exists
    if torch.cuda.is_available():
        missing = f"cuda:{torch.cuda.device_count()}"
    else:
        missing = rng.choice(["cuda", "cuda:0"])
    try:
        x, _ = get_batch(dataset, 2, 8, missing)
    except Exception:  # noqa: BLE001 - any clear error is the right answer
        return
    raise AssertionError(
        f"get_batch(..., device={missing!r}) on a machine without that device returned tensors on "
        f"{x.device} instead of raising; an unavailable device must raise an error")


@hidden_check("load_tokens")
def check_load_tokens(load_tokens, *, rng: CheckRandom) -> None:
    """A read-only np.memmap with the right dtype, length and values; the file is unchanged."""
    with tempfile.TemporaryDirectory(prefix="load_tokens_check_") as tmp:
        for dtype, pass_dtype in ((np.uint16, False), (np.uint16, True), (np.uint32, True),
                                  (np.int32, True)):
            path, tokens = _token_file(rng, Path(tmp), rng.randint(1, 5000), dtype)
            before = path.read_bytes()
            arg = str(path) if rng.random() < 0.5 else path
            what = f"load_tokens({arg!r}" + (f", dtype=np.{np.dtype(dtype).name})" if pass_dtype else ")")
            got = load_tokens(arg, dtype=dtype) if pass_dtype else load_tokens(arg)
            expect(isinstance(got, np.memmap),
                   f"{what} should return an np.memmap (the file stays on disk), got {type(got).__name__}")
            expect(got.dtype == np.dtype(dtype), f"{what}: expected dtype {np.dtype(dtype)}, got {got.dtype}")
            expect(got.shape == tokens.shape,
                   f"{what}: a raw file of {path.stat().st_size} bytes holds {len(tokens)} tokens, "
                   f"got shape {got.shape} (no header: the whole file is tokens)")
            expect(np.array_equal(np.asarray(got), tokens), f"{what}: the values differ from the file's")
            expect(not got.flags.writeable,
                   f"{what} must be read-only (mode='r'): a writable memmap lets a bug overwrite the data")
            del got
            on_their_side = student_module(load_tokens, "pathlib").Path(str(path))
            expect(on_their_side.read_bytes() == before, f"{what} changed the token file")


@hidden_check("get_batch on the GPU")
def check_get_batch_gpu(get_batch, *, rng: CheckRandom) -> None:
    """On CUDA: tensors on the GPU, copied from pinned memory with non_blocking=True."""
    device = gpu_device("get_batch to a CUDA device with pinned memory and non_blocking copies")
    dataset = _random_tokens(rng, 50_000)
    for spelled in (device.type, device):
        batch_size, context_length = rng.randint(2, 32), rng.randint(2, 128)
        what = f"get_batch(..., {batch_size}, {context_length}, device={spelled!r})"
        watched = student_module(get_batch, "drivers").watch_transfers(
            get_batch, dataset, batch_size, context_length, spelled)
        x, y = _pair(watched["result"])
        copies, pinned = [tuple(c) for c in watched["copies"]], watched["pinned"]
        _expect_layout(x, y, batch_size, context_length, device.type, what)
        _expect_rows_from(dataset, x, y, what)
        if device.type == "cuda":
            expect(len(copies) > 0,
                   f"{what}: no host-to-device copy through .to/.cuda/.copy_ was seen; build the batch "
                   "on the CPU, pin it, then copy it with .to(device, non_blocking=True)")
            expect(all(was_pinned and non_blocking for was_pinned, non_blocking in copies),
                   f"{what}: every host-to-device copy must come from pinned memory (pin_memory()) "
                   f"with non_blocking=True; saw (pinned, non_blocking) = {copies}")
        else:
            expect(pinned == 0 and not copies,
                   f"{what}: on a CPU device nothing should be pinned or copied to another device "
                   "(pinning needs CUDA)")
