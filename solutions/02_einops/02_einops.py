# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercise 2: einops and jaxtyping
#
# Named dimensions make tensor code say what it means: `rearrange(x, "b s (h d) -> b h s d", h=heads)`
# documents the layout and checks it at the same time, and `einsum` contracts dimensions by name instead
# of by position. Background: [einops and jaxtyping](../../chapters/04_einops_jaxtyping.md).
#
# Every function below is annotated with jaxtyping shapes and decorated with
# `@jaxtyped(typechecker=beartype)`, so an argument whose shape contradicts the annotations (for example
# `q` and `k` with different leading dimensions) raises a `TypeCheckError` **before** any computation.
# Keep the signatures and decorators as given; write the bodies with `einops.rearrange` and
# `einops.einsum`. Each docstring states the contract; hidden tests draw random shapes and compare with
# plain torch.
#
# Points: 2 per function (10 in all).

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import math

import torch
from beartype import beartype
from einops import einsum, rearrange
from jaxtyping import Float, TypeCheckError, jaxtyped
from torch import Tensor

# %% [markdown] nbgrader={"grade": false, "grade_id": "split_heads_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Splitting heads
#
# Multi-head attention stores all heads side by side in the last dimension: features
# `0 .. d_head-1` belong to head 0, the next `d_head` to head 1, and so on (heads is the **outer** factor).

# %% nbgrader={"grade": false, "grade_id": "split_heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
@jaxtyped(typechecker=beartype)
def split_heads(x: Float[Tensor, "batch seq model"], num_heads: int) -> Float[Tensor, "batch heads seq d_head"]:
    """Reshape ``x`` of shape (batch, seq, heads·d_head) to (batch, heads, seq, d_head), where head ``h``
    holds features ``h*d_head .. (h+1)*d_head - 1`` of the last dimension."""
    ### BEGIN SOLUTION
    return rearrange(x, "batch seq (heads d_head) -> batch heads seq d_head", heads=num_heads)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_split_heads", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
x = torch.arange(2 * 3 * 8, dtype=torch.float32).reshape(2, 3, 8)
y = split_heads(x, num_heads=4)
assert y.shape == (2, 4, 3, 2), f"expected shape (2, 4, 3, 2), got {tuple(y.shape)}"
assert torch.equal(y[1, 2, 0], x[1, 0, 4:6]), f"head 2 of token 0 should be features 4:6, i.e. {x[1, 0, 4:6]}, got {y[1, 2, 0]}"
try:
    split_heads(torch.zeros(3, 8), num_heads=4)
    raise AssertionError("a 2-D input contradicts the annotation (batch, seq, model) and should raise TypeCheckError")
except TypeCheckError:
    pass
### BEGIN HIDDEN TESTS
from autograder.hidden import einops_checks as _hidden

_hidden.check_split_heads(split_heads)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "merge_heads_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Merging heads
#
# The inverse: put the heads back side by side. The return annotation `heads*d_head` makes jaxtyping
# check the output size against the input's dimensions.

# %% nbgrader={"grade": false, "grade_id": "merge_heads", "locked": false, "schema_version": 3, "solution": true, "task": false}
@jaxtyped(typechecker=beartype)
def merge_heads(x: Float[Tensor, "batch heads seq d_head"]) -> Float[Tensor, "batch seq heads*d_head"]:
    """Reshape ``x`` of shape (batch, heads, seq, d_head) to (batch, seq, heads·d_head); the inverse of
    ``split_heads`` (``merge_heads(split_heads(x, h)) == x``)."""
    ### BEGIN SOLUTION
    return rearrange(x, "batch heads seq d_head -> batch seq (heads d_head)")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_merge_heads", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
heads = torch.arange(2 * 4 * 3 * 2, dtype=torch.float32).reshape(2, 4, 3, 2)
merged = merge_heads(heads)
assert merged.shape == (2, 3, 8), f"expected shape (2, 3, 8), got {tuple(merged.shape)}"
assert torch.equal(merged[0, 1, 2:4], heads[0, 1, 1]), f"features 2:4 of token 1 should be head 1's, {heads[0, 1, 1]}, got {merged[0, 1, 2:4]}"
### BEGIN HIDDEN TESTS
from autograder.hidden import einops_checks as _hidden

_hidden.check_merge_heads(merge_heads)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "attention_scores_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Attention scores
#
# Scaled dot-product scores before the softmax: `q · kᵀ / √d` for every pair of query and key positions.
# The leading dimensions (`*batch`, e.g. batch and heads) must be the same for `q` and `k`.

# %% nbgrader={"grade": false, "grade_id": "attention_scores", "locked": false, "schema_version": 3, "solution": true, "task": false}
@jaxtyped(typechecker=beartype)
def attention_scores(
    q: Float[Tensor, "*batch seq_q d"], k: Float[Tensor, "*batch seq_k d"]
) -> Float[Tensor, "*batch seq_q seq_k"]:
    """Scores ``q @ kᵀ / sqrt(d)`` of shape (..., seq_q, seq_k), computed with ``einsum``; no softmax."""
    ### BEGIN SOLUTION
    d = q.shape[-1]
    return einsum(q, k, "... seq_q d, ... seq_k d -> ... seq_q seq_k") / math.sqrt(d)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_attention_scores", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
q = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
k = torch.tensor([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 4.0], [1.0, 1.0, 1.0, 1.0]])
want = torch.tensor([[1.0, 0.0, 0.5], [1.0, 2.0, 2.0]])  # dot products divided by sqrt(4) = 2
got = attention_scores(q, k)
assert torch.allclose(got, want), f"expected\n{want}\ngot\n{got}"
try:
    attention_scores(torch.zeros(2, 5, 4), torch.zeros(3, 5, 4))
    raise AssertionError("q and k with different leading dimensions should raise TypeCheckError")
except TypeCheckError:
    pass
### BEGIN HIDDEN TESTS
from autograder.hidden import einops_checks as _hidden

_hidden.check_attention_scores(attention_scores)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "per_head_linear_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## One linear map per head
#
# The lecture's pattern: rearrange so the heads get their own dimension, `einsum` with the weight, and
# rearrange back. Every head's slice of `d_in` features goes through the same `w`.

# %% nbgrader={"grade": false, "grade_id": "per_head_linear", "locked": false, "schema_version": 3, "solution": true, "task": false}
@jaxtyped(typechecker=beartype)
def per_head_linear(
    x: Float[Tensor, "*batch model_in"], w: Float[Tensor, "d_in d_out"], num_heads: int
) -> Float[Tensor, "*batch model_out"]:
    """Split the last dimension of ``x`` (heads·d_in, heads outer) into ``num_heads`` slices, multiply
    each slice by ``w`` (d_in, d_out) and put the results side by side: shape (..., heads·d_out)."""
    ### BEGIN SOLUTION
    per_head = rearrange(x, "... (heads d_in) -> ... heads d_in", heads=num_heads)
    projected = einsum(per_head, w, "... heads d_in, d_in d_out -> ... heads d_out")
    return rearrange(projected, "... heads d_out -> ... (heads d_out)")
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_per_head_linear", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
x = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]])  # two heads of three features
w = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])  # (d_in=3, d_out=2)
want = torch.tensor([[4.0, 5.0, 10.0, 11.0]])  # head 0: [1+3, 2+3], head 1: [4+6, 5+6]
got = per_head_linear(x, w, num_heads=2)
assert torch.allclose(got, want), f"expected {want}, got {got}"
### BEGIN HIDDEN TESTS
from autograder.hidden import einops_checks as _hidden

_hidden.check_per_head_linear(per_head_linear)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "patchify_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Patches of an image
#
# A vision transformer cuts an image into `patch_size × patch_size` patches and flattens each one.
# Patches are numbered row by row over the grid; inside a patch the order is (row, column, channel):
# `"b c (h ph) (w pw) -> b (h w) (ph pw c)"`.

# %% nbgrader={"grade": false, "grade_id": "patchify", "locked": false, "schema_version": 3, "solution": true, "task": false}
@jaxtyped(typechecker=beartype)
def patchify(
    images: Float[Tensor, "batch channels height width"], patch_size: int
) -> Float[Tensor, "batch num_patches patch_dim"]:
    """Cut ``images`` into non-overlapping ``patch_size``² patches: shape (batch, num_patches,
    patch_size²·channels), patches in row-major grid order, each flattened in (row, column, channel)
    order. Height and width must be multiples of ``patch_size``."""
    ### BEGIN SOLUTION
    return rearrange(images, "b c (h ph) (w pw) -> b (h w) (ph pw c)", ph=patch_size, pw=patch_size)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_patchify", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
images = torch.arange(2 * 4 * 6, dtype=torch.float32).reshape(1, 2, 4, 6)  # 1 image, 2 channels, 4x6
patches = patchify(images, patch_size=2)
assert patches.shape == (1, 6, 8), f"a 4x6 image has 2x3 patches of 2*2*2 values: expected (1, 6, 8), got {tuple(patches.shape)}"
want = torch.tensor([2.0, 26.0, 3.0, 27.0, 8.0, 32.0, 9.0, 33.0])  # patch 1 = grid row 0, column 1
assert torch.equal(patches[0, 1], want), f"patch 1 in (row, column, channel) order: expected {want}, got {patches[0, 1]}"
### BEGIN HIDDEN TESTS
from autograder.hidden import einops_checks as _hidden

_hidden.check_patchify(patchify)
### END HIDDEN TESTS
