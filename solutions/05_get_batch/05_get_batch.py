# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercise 5: sampling training batches from a token file
#
# A language model trains on windows of consecutive tokens: the input `x` is `context_length` tokens and
# the target `y` is the same window moved one token to the right, so position `t` of `y` is the token that
# follows position `t` of `x`. A tokenized corpus is one long file of token ids, often far larger than
# memory, so it is opened as a memory map and each batch reads only the rows it needs. Background:
# [Data loading](../../chapters/08_data_loading.md).
#
# Each function's docstring states its contract. Replace every `raise NotImplementedError()` with your
# code, then run the test cell below it; a test cell that finishes silently passed. Hidden tests draw
# many batches from tiny datasets (do the start positions cover exactly the valid range?), reseed torch,
# hand you a dataset of a trillion tokens, and on a GPU runner watch how the batch is copied to the device.
#
# Points: `get_batch` 2, start positions 2, seeding 1, reading only what is needed 1, unavailable device 1,
# `load_tokens` 1, `get_batch` on a GPU 2 (10 in all).

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import tempfile
from pathlib import Path

import numpy as np
import torch
from jaxtyping import Int

# %% [markdown] nbgrader={"grade": false, "grade_id": "get_batch_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## `get_batch`
#
# A dataset of `n` tokens has `n - context_length` windows of `context_length + 1` tokens, starting at
# `0, 1, ..., n - context_length - 1`. Draw each row's start uniformly from that range with `torch.randint`
# (torch's global generator, so `torch.manual_seed` reproduces a batch), slice the window, and split it
# into `x` (all but the last token) and `y` (all but the first).
#
# For a CUDA device, build the batch on the CPU, put it in *pinned* (page-locked) host memory with
# `.pin_memory()` and copy it with `.to(device, non_blocking=True)`: the call then only queues the copy
# and returns, so the CPU can prepare the next batch meanwhile. It is asynchronous with respect to the host
# only: on the current stream the copy still waits for the kernels queued before it (overlapping it with
# compute needs a side stream, as chapter 08 shows). Pinning needs CUDA, so do it only for a CUDA device.

# %% nbgrader={"grade": false, "grade_id": "get_batch", "locked": false, "schema_version": 3, "solution": true, "task": false}
def get_batch(dataset, batch_size: int, context_length: int, device: str | torch.device
              ) -> tuple[Int[torch.Tensor, "batch seq"], Int[torch.Tensor, "batch seq"]]:
    """Sample a language-modelling batch ``(x, y)`` from a 1-D sequence of token ids.

    ``dataset`` is a 1-D ``np.ndarray`` or ``np.memmap`` of integer token ids (possibly far larger than
    memory): use only ``len(dataset)`` and slicing/indexing on it, never a whole-array conversion such as
    ``np.array(dataset)``, ``dataset.astype(...)`` or ``torch.tensor(dataset)``.
    Each of the ``batch_size`` rows starts at a position ``s`` drawn uniformly from
    ``[0, len(dataset) - context_length - 1]`` with torch's global generator (``torch.randint``);
    ``x[i] = dataset[s : s + context_length]`` and ``y[i] = dataset[s + 1 : s + context_length + 1]``.
    Returns two int64 tensors of shape ``(batch_size, context_length)`` on ``device`` (a string or a
    ``torch.device``). On a CUDA device the batch goes through pinned host memory and is copied with
    ``non_blocking=True``. A device that is not available raises an error.
    """
    ### BEGIN SOLUTION
    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else 0
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            raise RuntimeError(f"get_batch: device {device} is not available on this machine")
    if len(dataset) < context_length + 1:
        raise ValueError(f"get_batch: a dataset of {len(dataset)} tokens is too short for "
                         f"context_length={context_length} (needs at least {context_length + 1})")
    starts = torch.randint(0, len(dataset) - context_length, (batch_size,))
    windows = np.stack([np.asarray(dataset[s : s + context_length + 1]) for s in starts.tolist()])
    tokens = torch.from_numpy(windows.astype(np.int64))  # (batch, context_length + 1)
    if device.type == "cuda":
        tokens = tokens.pin_memory().to(device, non_blocking=True)
    else:
        tokens = tokens.to(device)
    return tokens[:, :-1], tokens[:, 1:]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_get_batch", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
_data = np.arange(100, 50_100, dtype=np.uint16)  # token ids 100, 101, ..., 50099
_x, _y = get_batch(_data, 4, 8, "cpu")
assert _x.shape == (4, 8) and _y.shape == (4, 8), f"expected shapes (4, 8), got {_x.shape} and {_y.shape}"
assert _x.dtype == torch.int64 and _y.dtype == torch.int64, f"expected int64, got {_x.dtype} and {_y.dtype}"
assert torch.equal(_x[:, 1:] - _x[:, :-1], torch.ones(4, 7, dtype=torch.int64)), (
    f"each row of x should be consecutive tokens of the dataset, got {_x.tolist()}"
)
assert torch.equal(_y, _x + 1), f"y should be x shifted by one token: x={_x.tolist()}, y={_y.tolist()}"
### BEGIN HIDDEN TESTS
from autograder.hidden import get_batch as _hidden

_hidden.check_get_batch(get_batch)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_get_batch_starts", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
# 10 tokens and context_length 7: the windows start at 0, 1 or 2 (= 10 - 7 - 1).
_x, _ = get_batch(np.arange(10, dtype=np.uint16), 600, 7, "cpu")
_starts = sorted(set(_x[:, 0].tolist()))
assert _starts == [0, 1, 2], (
    f"with 10 tokens and context_length=7 every start in [0, 2] should occur in 600 draws and none "
    f"other; got starts {_starts}"
)
### BEGIN HIDDEN TESTS
from autograder.hidden import get_batch as _hidden

_hidden.check_get_batch_starts(get_batch)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_get_batch_seed", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_data = np.arange(10_000, dtype=np.uint16)
torch.manual_seed(0)
_first = get_batch(_data, 4, 16, "cpu")
torch.manual_seed(0)
_second = get_batch(_data, 4, 16, "cpu")
assert torch.equal(_first[0], _second[0]), (
    "after torch.manual_seed(0) the same call should give the same batch: draw the starts with torch.randint"
)
### BEGIN HIDDEN TESTS
from autograder.hidden import get_batch as _hidden

_hidden.check_get_batch_seed(get_batch)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_get_batch_reads", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
with tempfile.TemporaryDirectory() as _tmp:
    _path = Path(_tmp) / "tokens.bin"
    np.arange(1_000_000, dtype=np.uint32).tofile(_path)  # 4 MB on disk
    _tokens = np.memmap(_path, dtype=np.uint32, mode="r")
    _x, _y = get_batch(_tokens, 8, 32, "cpu")
    assert torch.equal(_y, _x + 1), "get_batch should work on a read-only np.memmap"
    del _tokens
### BEGIN HIDDEN TESTS
from autograder.hidden import get_batch as _hidden

_hidden.check_get_batch_reads(get_batch)
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_get_batch_device", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
_missing = f"cuda:{torch.cuda.device_count()}"  # one past the last GPU ("cuda:0" on a CPU-only machine)
try:
    get_batch(np.arange(100, dtype=np.uint16), 2, 4, _missing)
except Exception as _error:  # noqa: BLE001
    print(f"unavailable device {_missing!r} raised {type(_error).__name__}: {_error}")
else:
    raise AssertionError(f"get_batch(..., device={_missing!r}) should raise: that device does not exist here")
### BEGIN HIDDEN TESTS
from autograder.hidden import get_batch as _hidden

_hidden.check_get_batch_device(get_batch)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "load_tokens_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## `load_tokens`
#
# A tokenizer writes token ids as a raw binary file: no header, just `len × itemsize` bytes. `np.memmap`
# maps such a file into memory without reading it; pages are read from disk only when touched.

# %% nbgrader={"grade": false, "grade_id": "load_tokens", "locked": false, "schema_version": 3, "solution": true, "task": false}
def load_tokens(path: str | Path, dtype=np.uint16) -> np.memmap:
    """Open the raw token file at ``path`` (no header; every byte belongs to a token id of ``dtype``)
    as a read-only 1-D ``np.memmap`` of ``dtype``, without reading it into memory."""
    ### BEGIN SOLUTION
    return np.memmap(path, dtype=dtype, mode="r")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_load_tokens", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
with tempfile.TemporaryDirectory() as _tmp:
    _path = Path(_tmp) / "tokens.bin"
    np.array([5, 60000, 7], dtype=np.uint16).tofile(_path)
    _tokens = load_tokens(_path)
    assert isinstance(_tokens, np.memmap), f"expected an np.memmap, got {type(_tokens).__name__}"
    assert _tokens.tolist() == [5, 60000, 7], f"expected [5, 60000, 7], got {_tokens.tolist()}"
    assert not _tokens.flags.writeable, "the memmap should be read-only (mode='r')"
    del _tokens
### BEGIN HIDDEN TESTS
from autograder.hidden import get_batch as _hidden

_hidden.check_load_tokens(load_tokens)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "gpu_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## On a GPU
#
# The grader calls `get_batch(..., "cuda")` on a GPU runner and watches the copy: the tensors must arrive
# on the GPU, and every host-to-device copy must come from pinned memory with `non_blocking=True`.

# %% nbgrader={"grade": true, "grade_id": "test_get_batch_gpu", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
if torch.cuda.is_available():
    _x, _y = get_batch(np.arange(1000, dtype=np.uint16), 4, 16, "cuda")
    assert _x.is_cuda and _y.is_cuda, f"expected tensors on the GPU, got {_x.device} and {_y.device}"
else:
    print("no GPU here: the grader runs this check on a GPU runner")
### BEGIN HIDDEN TESTS
from autograder.hidden import get_batch as _hidden

_hidden.check_get_batch_gpu(get_batch)
### END HIDDEN TESTS
