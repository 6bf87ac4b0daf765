# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   autograder:
#     forbidden:
#     - rule: as_strided inside gather_view
#       why: gather_view computes the view's elements by index arithmetic
#       names: [torch.as_strided, torch.ops.aten.as_strided, numpy.lib.stride_tricks]
#       attributes: [as_strided, as_strided_, as_strided_copy, as_strided_scatter]
#       within: gather_view
# ---

# %% [markdown] nbgrader={"grade": false, "grade_id": "intro", "locked": true, "schema_version": 3, "solution": false, "task": false}
# # Exercise 1: storage and strides
#
# A tensor is a view: a flat block of storage plus metadata (shape, stride, storage offset) that says
# where each element lives. Element `x[i0, i1, ...]` sits at position `offset + i0*stride[0] + i1*stride[1] + ...`
# of the storage, and operations such as `transpose` or `select` only rewrite that metadata.
# Background: [Storage and strides](../../chapters/03_storage_and_strides.md).
#
# You implement that metadata arithmetic with plain Python integers. Shapes and strides are tuples of
# ints, and strides count **elements**, not bytes. Each function's docstring states its contract.
# Replace every `raise NotImplementedError()` with your code, then run the test cell below it; a test
# cell that finishes silently passed. Hidden tests check the same contracts on random shapes
# (zero-size and size-1 dimensions, negative dimensions and indices), with torch as the reference.
#
# Points: `contiguous_strides` 2, `flat_index` 1, `transpose_metadata` 1, `select_metadata` 2,
# `is_contiguous` 2, `gather_view` 2 (10 in all).

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false, "task": false}
import torch

# %% [markdown] nbgrader={"grade": false, "grade_id": "contiguous_strides_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Contiguous strides
#
# In a row-major (C-order) contiguous tensor the last dimension is adjacent in memory and each earlier
# dimension jumps over everything after it. PyTorch treats a zero-size dimension as size 1 when it
# computes the strides of the dimensions before it (`torch.empty(2, 0, 3).stride() == (3, 3, 1)`).

# %% nbgrader={"grade": false, "grade_id": "contiguous_strides", "locked": false, "schema_version": 3, "solution": true, "task": false}
def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of a row-major contiguous tensor of ``shape``.

    Returns a tuple of ints equal to ``torch.empty(shape).stride()`` for every shape, including
    zero-size and size-1 dimensions and the empty shape ``()`` (which has strides ``()``).
    """
    ### BEGIN SOLUTION
    strides = []
    running = 1
    for size in reversed(shape):
        strides.append(running)
        running *= max(size, 1)
    return tuple(reversed(strides))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_contiguous_strides", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
for shape in [(2, 3, 4), (5,), (), (3, 1, 2), (2, 0, 3)]:
    got = contiguous_strides(shape)
    want = torch.empty(shape).stride()
    assert tuple(got) == want, f"contiguous_strides({shape}): expected {want}, got {got}"
### BEGIN HIDDEN TESTS
from autograder.hidden import strides as _hidden

_hidden.check_contiguous_strides(contiguous_strides)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "flat_index_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## From an index to a storage position

# %% nbgrader={"grade": false, "grade_id": "flat_index", "locked": false, "schema_version": 3, "solution": true, "task": false}
def flat_index(index: tuple[int, ...], stride: tuple[int, ...], offset: int = 0) -> int:
    """Position in storage of the element at ``index`` (one non-negative int per dimension) of a
    tensor with ``stride`` and storage offset ``offset``; the same element as
    ``storage.as_strided(shape, stride, offset)[index]``. Raises ValueError if ``index`` and
    ``stride`` have different lengths."""
    ### BEGIN SOLUTION
    if len(index) != len(stride):
        raise ValueError(f"index {index} has {len(index)} entries but stride {stride} has {len(stride)}")
    return offset + sum(i * s for i, s in zip(index, stride))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_flat_index", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
assert flat_index((1, 2), (3, 1)) == 5, f"row 1, column 2 of a contiguous (2, 3) tensor is storage[5], got {flat_index((1, 2), (3, 1))}"
assert flat_index((1, 2), (1, 2)) == 5, f"with strides (1, 2) the element (1, 2) is storage[1 + 4], got {flat_index((1, 2), (1, 2))}"
assert flat_index((0, 0), (3, 1), offset=7) == 7, "the offset is where element (0, 0) lives"
### BEGIN HIDDEN TESTS
from autograder.hidden import strides as _hidden

_hidden.check_flat_index(flat_index)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "transpose_metadata_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Transpose is metadata only
#
# `x.transpose(dim0, dim1)` shares storage with `x`; only the shape and stride change.

# %% nbgrader={"grade": false, "grade_id": "transpose_metadata", "locked": false, "schema_version": 3, "solution": true, "task": false}
def transpose_metadata(
    shape: tuple[int, ...], stride: tuple[int, ...], dim0: int, dim1: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(shape, stride)`` of ``x.transpose(dim0, dim1)`` for a tensor ``x`` with this shape and
    stride (the offset does not change). Negative dims count from the end, as in torch."""
    ### BEGIN SOLUTION
    ndim = len(shape)
    d0, d1 = dim0 % ndim, dim1 % ndim
    new_shape, new_stride = list(shape), list(stride)
    new_shape[d0], new_shape[d1] = shape[d1], shape[d0]
    new_stride[d0], new_stride[d1] = stride[d1], stride[d0]
    return tuple(new_shape), tuple(new_stride)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_transpose_metadata", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false}
got = transpose_metadata((2, 3, 4), (12, 4, 1), 0, 2)
assert tuple(map(tuple, got)) == ((4, 3, 2), (1, 4, 12)), f"transpose(0, 2) of a contiguous (2, 3, 4): expected ((4, 3, 2), (1, 4, 12)), got {got}"
x = torch.empty(2, 3, 4).transpose(-1, 1)
got = transpose_metadata((2, 3, 4), (12, 4, 1), -1, 1)
assert tuple(map(tuple, got)) == (tuple(x.shape), x.stride()), f"transpose(-1, 1): expected {(tuple(x.shape), x.stride())}, got {got}"
### BEGIN HIDDEN TESTS
from autograder.hidden import strides as _hidden

_hidden.check_transpose_metadata(transpose_metadata)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "select_metadata_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Selecting one slice
#
# `x.select(dim, index)` (what `x[:, i]` does for `dim=1`) removes a dimension and moves the offset.

# %% nbgrader={"grade": false, "grade_id": "select_metadata", "locked": false, "schema_version": 3, "solution": true, "task": false}
def select_metadata(
    shape: tuple[int, ...], stride: tuple[int, ...], offset: int, dim: int, index: int
) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """``(shape, stride, offset)`` of ``x.select(dim, index)`` for a tensor ``x`` with this shape,
    stride and storage offset. Negative ``dim`` and ``index`` count from the end, as in torch;
    an index outside ``[-shape[dim], shape[dim])`` raises IndexError."""
    ### BEGIN SOLUTION
    dim = dim % len(shape)
    size = shape[dim]
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of range for dimension {dim} of size {size}")
    index = index % size
    new_shape = shape[:dim] + shape[dim + 1 :]
    new_stride = stride[:dim] + stride[dim + 1 :]
    return tuple(new_shape), tuple(new_stride), offset + index * stride[dim]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_select_metadata", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
got = select_metadata((2, 3), (3, 1), 0, 1, 2)
assert tuple(got[0]) == (2,) and tuple(got[1]) == (3,) and got[2] == 2, f"x[:, 2] of a contiguous (2, 3): expected ((2,), (3,), 2), got {got}"
got = select_metadata((2, 3), (3, 1), 10, 0, -1)
assert tuple(got[0]) == (3,) and tuple(got[1]) == (1,) and got[2] == 13, f"x[-1] with offset 10: expected ((3,), (1,), 13), got {got}"
### BEGIN HIDDEN TESTS
from autograder.hidden import strides as _hidden

_hidden.check_select_metadata(select_metadata)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "is_contiguous_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## When is a tensor contiguous?
#
# `Tensor.is_contiguous()` asks whether the elements, read in row-major order, sit one after another in
# storage. Think about what a dimension of size 1 and a tensor with no elements mean for that question.

# %% nbgrader={"grade": false, "grade_id": "is_contiguous", "locked": false, "schema_version": 3, "solution": true, "task": false}
def is_contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    """The answer ``Tensor.is_contiguous()`` gives for a tensor with this shape and stride."""
    ### BEGIN SOLUTION
    if any(size == 0 for size in shape):
        return True  # no element sits anywhere, so every layout is contiguous
    expected = 1
    for size, step in zip(reversed(shape), reversed(stride)):
        if size != 1 and step != expected:  # the stride of a size-1 dimension is never used
            return False
        expected *= size
    return True
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_is_contiguous", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
assert is_contiguous((2, 3), (3, 1)) is True, "a freshly allocated (2, 3) tensor is contiguous"
assert is_contiguous((3, 2), (1, 3)) is False, "the transpose of a (2, 3) tensor is not contiguous"
assert is_contiguous((2, 1, 3), (3, 100, 1)) is True, "the stride of a size-1 dimension never matters"
### BEGIN HIDDEN TESTS
from autograder.hidden import strides as _hidden

_hidden.check_is_contiguous(is_contiguous)
### END HIDDEN TESTS

# %% [markdown] nbgrader={"grade": false, "grade_id": "gather_view_md", "locked": true, "schema_version": 3, "solution": false, "task": false}
# ## Reading a view out of storage
#
# Finally, materialize a view yourself: build the storage position of every element with tensor index
# arithmetic (`torch.arange`, broadcasting) and gather them. Do not call `as_strided`.

# %% nbgrader={"grade": false, "grade_id": "gather_view", "locked": false, "schema_version": 3, "solution": true, "task": false}
def gather_view(
    storage: torch.Tensor, shape: tuple[int, ...], stride: tuple[int, ...], offset: int = 0
) -> torch.Tensor:
    """A new contiguous tensor equal to ``storage.as_strided(shape, stride, offset)`` for a 1-D
    ``storage``, with the dtype of ``storage``, computed by index arithmetic without ``as_strided``.
    Writing to the result must not change ``storage``."""
    ### BEGIN SOLUTION
    positions = torch.full(shape, offset, dtype=torch.long)
    for dim, (size, step) in enumerate(zip(shape, stride)):
        view_shape = [1] * len(shape)
        view_shape[dim] = size
        positions = positions + (torch.arange(size) * step).reshape(view_shape)  # broadcast over dim
    # indexing with a 1-D index tensor copies (a 0-dim index would give a view for shape ())
    return storage[positions.reshape(-1)].reshape(shape)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "test_gather_view", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false}
storage = torch.arange(12.0)
got = gather_view(storage, (3, 2), (1, 3), offset=0)
want = torch.tensor([[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])
assert torch.equal(got, want), f"shape (3, 2), stride (1, 3): expected\n{want}\ngot\n{got}"
got = gather_view(storage, (2, 2), (4, 1), offset=5)
want = torch.tensor([[5.0, 6.0], [9.0, 10.0]])
assert torch.equal(got, want), f"offset 5: expected\n{want}\ngot\n{got}"
assert got.is_contiguous(), "the result should be a new contiguous tensor"
### BEGIN HIDDEN TESTS
from autograder.hidden import strides as _hidden

_hidden.check_gather_view(gather_view)
### END HIDDEN TESTS
