"""Hidden checks for exercise 01_strides: stride arithmetic against torch's own views.

Every check draws random shapes (zero-size and size-1 dimensions included), random non-contiguous
strides and offsets, builds the same view with ``torch.as_strided`` / ``empty_strided`` and compares.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from autograder.hidden._base import CheckRandom, expect, expect_equal, hidden_check, student_module

ROUNDS = 40


def _layout(rng: CheckRandom, *, allow_zero: bool = True, min_dims: int = 0) -> tuple[tuple, tuple, int]:
    """A random (shape, stride, offset): a permuted, padded or broadcast layout, or a contiguous one."""
    shape = rng.shape(min_dims=min_dims, max_dims=4, max_size=5, allow_zero=allow_zero and rng.random() < 0.2)
    kind = rng.choice(["contiguous", "permuted", "padded", "broadcast"])
    strides = list(torch.empty(shape).stride())
    if kind == "permuted" and len(shape) > 1:
        order = list(range(len(shape)))
        rng.shuffle(order)
        permuted = torch.empty([shape[i] for i in order]).permute(*_inverse(order))
        strides = list(permuted.stride())
    elif kind == "padded":
        strides = [s * rng.randint(1, 3) + rng.randint(0, 2) for s in strides]
    elif kind == "broadcast" and shape:
        strides[rng.randrange(len(shape))] = 0
    return tuple(shape), tuple(strides), rng.randint(0, 7)


def _inverse(order: list[int]) -> list[int]:
    inverse = [0] * len(order)
    for position, dim in enumerate(order):
        inverse[dim] = position
    return inverse


def _storage_for(shape: tuple, stride: tuple, offset: int) -> int:
    """Smallest storage length that holds every element of the layout."""
    if any(size == 0 for size in shape):
        return offset + 1
    return offset + sum((size - 1) * step for size, step in zip(shape, stride, strict=True)) + 1


def _as_tuple(value: object, what: str) -> tuple:
    expect(isinstance(value, (tuple, list)), f"{what} should be a tuple of ints, got {value!r}")
    return tuple(value)  # type: ignore[arg-type]


@hidden_check("contiguous_strides")
def check_contiguous_strides(contiguous_strides: Callable, *, rng: CheckRandom) -> None:
    fixed = [(), (0,), (1,), (2, 0, 3), (4, 1, 1, 3), (1, 1)]
    for shape in fixed + [rng.shape(max_dims=5, max_size=7, allow_zero=rng.random() < 0.3) for _ in range(ROUNDS)]:
        got = contiguous_strides(shape)
        expect_equal(_as_tuple(got, f"contiguous_strides({shape})"), torch.empty(shape).stride(),
                     f"contiguous_strides({shape})")
        expect(all(type(s) is int for s in got), f"contiguous_strides({shape}) should hold Python ints, got {got!r}")


@hidden_check("flat_index")
def check_flat_index(flat_index: Callable, *, rng: CheckRandom) -> None:
    for _ in range(ROUNDS):
        shape, stride, offset = _layout(rng, allow_zero=False)
        storage = torch.arange(_storage_for(shape, stride, offset))
        view = storage.as_strided(shape, stride, offset)
        index = tuple(rng.randrange(size) for size in shape)
        expect_equal(flat_index(index, stride, offset), int(view[index]),
                     f"flat_index({index}, {stride}, offset={offset})")
    expect_equal(flat_index((2, 1), (5, 2)), 12, "flat_index((2, 1), (5, 2)) with the default offset")


@hidden_check("transpose_metadata")
def check_transpose_metadata(transpose_metadata: Callable, *, rng: CheckRandom) -> None:
    for _ in range(ROUNDS):
        shape, stride, _ = _layout(rng, min_dims=1)
        ndim = len(shape)
        dim0, dim1 = rng.randint(-ndim, ndim - 1), rng.randint(-ndim, ndim - 1)
        view = torch.empty_strided(shape, stride).transpose(dim0, dim1)
        got = transpose_metadata(shape, stride, dim0, dim1)
        what = f"transpose_metadata({shape}, {stride}, {dim0}, {dim1})"
        expect(isinstance(got, (tuple, list)) and len(got) == 2, f"{what} should return (shape, stride), got {got!r}")
        expect_equal((_as_tuple(got[0], what), _as_tuple(got[1], what)), (tuple(view.shape), view.stride()), what)


@hidden_check("select_metadata")
def check_select_metadata(select_metadata: Callable, *, rng: CheckRandom) -> None:
    for _ in range(ROUNDS):
        shape, stride, offset = _layout(rng, allow_zero=False, min_dims=1)
        ndim = len(shape)
        dim = rng.randint(-ndim, ndim - 1)
        index = rng.randint(-shape[dim], shape[dim] - 1)
        storage = torch.empty(_storage_for(shape, stride, offset))
        view = storage.as_strided(shape, stride, offset).select(dim, index)
        got = select_metadata(shape, stride, offset, dim, index)
        what = f"select_metadata({shape}, {stride}, {offset}, dim={dim}, index={index})"
        expect(isinstance(got, (tuple, list)) and len(got) == 3, f"{what} should return (shape, stride, offset), got {got!r}")
        expect_equal((_as_tuple(got[0], what), _as_tuple(got[1], what), got[2]),
                     (tuple(view.shape), view.stride(), view.storage_offset()), what)


@hidden_check("is_contiguous")
def check_is_contiguous(is_contiguous: Callable, *, rng: CheckRandom) -> None:
    fixed = [((2, 1, 3), (3, 7, 1)), ((1, 4), (1, 1)), ((2, 0, 3), (1, 5, 9)), ((3, 2), (1, 3)),
             ((), ()), ((4,), (2,)), ((1,), (5,)), ((2, 3), (4, 1))]
    cases = fixed + [_layout(rng)[:2] for _ in range(ROUNDS)]
    # size-1 dimensions with arbitrary strides: the case torch ignores on purpose
    for _ in range(ROUNDS // 2):
        shape = tuple(rng.choice([1, 1, 2, 3]) for _ in range(rng.randint(1, 4)))
        stride = tuple(s if size != 1 else rng.randint(0, 9) for size, s in zip(shape, torch.empty(shape).stride(), strict=True))
        cases.append((shape, stride))
    for shape, stride in cases:
        want = torch.empty_strided(shape, stride).is_contiguous()
        got = is_contiguous(shape, stride)
        expect(isinstance(got, bool), f"is_contiguous({shape}, {stride}) should return a bool, got {got!r}")
        expect_equal(got, want, f"is_contiguous({shape}, {stride})")


@hidden_check("gather_view")
def check_gather_view(gather_view: Callable, *, rng: CheckRandom) -> None:
    for round_number in range(ROUNDS):
        shape, stride, offset = _layout(rng)
        dtype = torch.float32 if round_number % 2 else torch.int64
        storage = (torch.randn(_storage_for(shape, stride, offset), generator=rng.generator()) * 100).to(dtype)
        want = storage.as_strided(shape, stride, offset).clone()
        before = storage.clone()
        what = f"gather_view(storage of {storage.numel()} {dtype}, {shape}, {stride}, offset={offset})"
        # the exercise forbids as_strided: watched next to the student's code, decided here
        watched = student_module(gather_view, "drivers").call_watching(
            gather_view, (storage, shape, stride, offset),
            ["torch.as_strided", "torch.Tensor.as_strided"])
        expect(not watched["called"],
               "gather_view must compute positions itself, not call as_strided")
        got = watched["result"]
        expect(isinstance(got, torch.Tensor), f"{what} should return a tensor, got {type(got).__name__}")
        expect_equal(tuple(got.shape), shape, f"{what}: shape")
        expect_equal(got.dtype, dtype, f"{what}: dtype")
        expect(torch.equal(got, want), f"{what}: values differ from storage.as_strided(...)\nexpected {want}\ngot {got}")
        expect(got.is_contiguous(), f"{what}: the result is not contiguous")
        if got.numel():
            got.view(-1)[0] += 1
            expect(torch.equal(storage, before), f"{what}: writing to the result changed the storage (return a copy)")
