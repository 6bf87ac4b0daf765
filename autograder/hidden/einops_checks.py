"""Hidden checks for exercise 02_einops: rearranges and einsums against plain torch reshapes.

Random shapes with distinct values, so a wrong order of factors cannot hide; each check also feeds one
argument whose shape contradicts the annotations and requires jaxtyping's ``TypeCheckError`` (the
function must stay decorated with ``@jaxtyped(typechecker=beartype)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from jaxtyping import TypeCheckError

from autograder.hidden._base import CheckRandom, expect, expect_equal, hidden_check

ROUNDS = 12


def _expect_close(got: object, want: torch.Tensor, what: str) -> None:
    expect(isinstance(got, torch.Tensor), f"{what} should return a tensor, got {type(got).__name__}")
    assert isinstance(got, torch.Tensor)
    expect_equal(tuple(got.shape), tuple(want.shape), f"{what}: shape")
    expect(torch.allclose(got, want, rtol=1e-5, atol=1e-5),
           f"{what}: values differ from the torch reference (largest difference "
           f"{(got - want).abs().max().item():.3g})")


def _expect_type_check_error(call: Callable[[], object], what: str) -> None:
    try:
        call()
    except TypeCheckError:
        return
    except Exception as error:  # noqa: BLE001 - the wrong kind of failure is the finding
        raise AssertionError(f"{what} should raise jaxtyping's TypeCheckError before computing "
                             f"(keep @jaxtyped(typechecker=beartype)); it raised {type(error).__name__}: {error}") from None
    raise AssertionError(f"{what} should raise jaxtyping's TypeCheckError (keep @jaxtyped(typechecker=beartype) "
                         "and the annotations), but it returned a result")


@hidden_check("split_heads")
def check_split_heads(split_heads: Callable, *, rng: CheckRandom) -> None:
    for _ in range(ROUNDS):
        batch, seq, heads, d_head = (rng.randint(1, 4), rng.randint(1, 6), rng.randint(1, 5), rng.randint(1, 6))
        x = rng.randn(batch, seq, heads * d_head)
        want = x.view(batch, seq, heads, d_head).permute(0, 2, 1, 3)  # (batch, heads, seq, d_head)
        _expect_close(split_heads(x, heads), want, f"split_heads(x of shape {tuple(x.shape)}, {heads})")
    _expect_type_check_error(lambda: split_heads(rng.randn(3, 8), 2), "split_heads on a 2-D x")


@hidden_check("merge_heads")
def check_merge_heads(merge_heads: Callable, *, rng: CheckRandom) -> None:
    for _ in range(ROUNDS):
        batch, heads, seq, d_head = (rng.randint(1, 4), rng.randint(1, 5), rng.randint(1, 6), rng.randint(1, 6))
        x = rng.randn(batch, heads, seq, d_head)
        want = x.permute(0, 2, 1, 3).reshape(batch, seq, heads * d_head)
        _expect_close(merge_heads(x), want, f"merge_heads(x of shape {tuple(x.shape)})")
    _expect_type_check_error(lambda: merge_heads(rng.randn(2, 3, 4)), "merge_heads on a 3-D x")


@hidden_check("attention_scores")
def check_attention_scores(attention_scores: Callable, *, rng: CheckRandom) -> None:
    for _ in range(ROUNDS):
        lead = rng.shape(min_dims=0, max_dims=2, max_size=3)
        seq_q, seq_k, d = rng.randint(1, 6), rng.randint(1, 6), rng.choice([1, 3, 4, 9, 16])
        q, k = rng.randn(*lead, seq_q, d), rng.randn(*lead, seq_k, d)
        want = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
        _expect_close(attention_scores(q, k), want,
                      f"attention_scores(q {tuple(q.shape)}, k {tuple(k.shape)})")
    # broadcastable but contradictory leading dimensions: plain matmul would silently broadcast
    _expect_type_check_error(lambda: attention_scores(rng.randn(1, 4, 8), rng.randn(3, 5, 8)),
                             "attention_scores with q (1, 4, 8) and k (3, 5, 8)")
    _expect_type_check_error(lambda: attention_scores(rng.randn(2, 4, 8), rng.randn(2, 5, 6)),
                             "attention_scores with feature sizes 8 and 6")


@hidden_check("per_head_linear")
def check_per_head_linear(per_head_linear: Callable, *, rng: CheckRandom) -> None:
    for _ in range(ROUNDS):
        lead = rng.shape(min_dims=0, max_dims=2, max_size=3)
        heads, d_in, d_out = rng.randint(1, 4), rng.randint(1, 5), rng.randint(1, 5)
        x, w = rng.randn(*lead, heads * d_in), rng.randn(d_in, d_out)
        want = (x.view(*lead, heads, d_in) @ w).reshape(*lead, heads * d_out)
        _expect_close(per_head_linear(x, w, heads), want,
                      f"per_head_linear(x {tuple(x.shape)}, w {tuple(w.shape)}, {heads})")
    _expect_type_check_error(lambda: per_head_linear(torch.ones(2, 6, dtype=torch.int64), rng.randn(3, 2), 2),
                             "per_head_linear on an integer x (annotated Float)")


@hidden_check("patchify")
def check_patchify(patchify: Callable, *, rng: CheckRandom) -> None:
    for _ in range(ROUNDS):
        patch = rng.randint(1, 4)
        batch, channels = rng.randint(1, 3), rng.randint(1, 4)
        rows, cols = rng.randint(1, 4), rng.randint(1, 4)
        if rows == cols:  # keep the grid rectangular most of the time: row/column mix-ups must show
            cols += 1
        images = rng.randn(batch, channels, rows * patch, cols * patch)
        want = (images.view(batch, channels, rows, patch, cols, patch)
                .permute(0, 2, 4, 3, 5, 1)  # (batch, rows, cols, ph, pw, channels)
                .reshape(batch, rows * cols, patch * patch * channels))
        _expect_close(patchify(images, patch), want, f"patchify(images {tuple(images.shape)}, {patch})")
    _expect_type_check_error(lambda: patchify(rng.randn(3, 4, 4), 2), "patchify on a 3-D image")
