"""Catalogue for 01_strides: realistic wrong implementations (each one mistake) and correct variants.

Loaded by file path (autograder.authoring.samples.load_catalogue). ``replace`` code is appended to the solution
cell that defines the name; ``breaks`` lists the grade cells that must lose points (and only those).
"""

WRONG = [
    {
        "name": "column_major",
        "misconception": "strides in column-major (Fortran) order",
        "why": "strides built from the first dimension (Fortran order)",
        "replace": {"contiguous_strides": '''
def contiguous_strides(shape):
    strides, running = [], 1
    for size in shape:
        strides.append(running)
        running *= size
    return tuple(strides)
'''},
        "breaks": ["test_contiguous_strides"],
    },
    {
        "name": "zero_size_dims_zero_strides",
        "misconception": "a zero-size dimension zeroes the strides before it",
        "why": "multiplies by a zero size, so every dimension before it gets stride 0",
        "replace": {"contiguous_strides": '''
def contiguous_strides(shape):
    strides, running = [], 1
    for size in reversed(shape):
        strides.append(running)
        running *= size
    return tuple(reversed(strides))
'''},
        "breaks": ["test_contiguous_strides"],
    },
    {
        "name": "flat_index_ignores_offset",
        "misconception": "storage offset forgotten",
        "why": "forgets the storage offset",
        "replace": {"flat_index": '''
def flat_index(index, stride, offset=0):
    return sum(i * s for i, s in zip(index, stride))
'''},
        "breaks": ["test_flat_index"],
    },
    {
        "name": "flat_index_strides_reversed",
        "misconception": "indices paired with the strides in reverse",
        "why": "pairs the first index with the last stride",
        "replace": {"flat_index": '''
def flat_index(index, stride, offset=0):
    return offset + sum(i * s for i, s in zip(index, reversed(stride)))
'''},
        "breaks": ["test_flat_index"],
    },
    {
        "name": "transpose_swaps_shape_only",
        "misconception": "transpose swaps the sizes but not the strides",
        "why": "swaps the sizes but leaves the strides, i.e. a reshape, not a transpose",
        "replace": {"transpose_metadata": '''
def transpose_metadata(shape, stride, dim0, dim1):
    new_shape = list(shape)
    new_shape[dim0], new_shape[dim1] = shape[dim1], shape[dim0]
    return tuple(new_shape), tuple(stride)
'''},
        "breaks": ["test_transpose_metadata"],
    },
    {
        "name": "select_negative_index_not_wrapped",
        "misconception": "negative index not wrapped",
        "why": "uses a negative index directly, moving the offset backwards",
        "replace": {"select_metadata": '''
def select_metadata(shape, stride, offset, dim, index):
    dim = dim % len(shape)
    return (tuple(shape[:dim] + shape[dim + 1:]), tuple(stride[:dim] + stride[dim + 1:]),
            offset + index * stride[dim])
'''},
        "breaks": ["test_select_metadata"],
    },
    {
        "name": "select_keeps_dimension",
        "misconception": "select keeps the selected dimension",
        "why": "keeps the selected dimension with size 1 (what x[:, i:i+1] gives, not x[:, i])",
        "replace": {"select_metadata": '''
def select_metadata(shape, stride, offset, dim, index):
    dim = dim % len(shape)
    index = index % shape[dim]
    new_shape = list(shape)
    new_shape[dim] = 1
    return tuple(new_shape), tuple(stride), offset + index * stride[dim]
'''},
        "breaks": ["test_select_metadata"],
    },
    {
        "name": "contiguous_compares_size_one_strides",
        "misconception": "size-1 dimensions' strides compared",
        "why": "compares every stride with the contiguous strides, including size-1 dimensions",
        "replace": {"is_contiguous": '''
def is_contiguous(shape, stride):
    expected, running = [], 1
    for size in reversed(shape):
        expected.append(running)
        running *= max(size, 1)
    return tuple(stride) == tuple(reversed(expected))
'''},
        "breaks": ["test_is_contiguous"],
    },
    {
        "name": "contiguous_only_checks_order",
        "misconception": "decreasing strides taken for contiguous",
        "why": "accepts any decreasing strides, so padded rows count as contiguous",
        "replace": {"is_contiguous": '''
def is_contiguous(shape, stride):
    dims = [s for size, s in zip(shape, stride) if size != 1]
    return all(a > b for a, b in zip(dims, dims[1:])) and (not dims or dims[-1] == 1)
'''},
        "breaks": ["test_is_contiguous"],
    },
    {
        "name": "contiguous_ignores_empty",
        "misconception": "an empty tensor not taken as contiguous",
        "why": "forgets that a tensor with no elements is always contiguous",
        "replace": {"is_contiguous": '''
def is_contiguous(shape, stride):
    expected = 1
    for size, step in zip(reversed(shape), reversed(stride)):
        if size != 1 and step != expected:
            return False
        expected *= size
    return True
'''},
        "breaks": ["test_is_contiguous"],
    },
    {
        "name": "gather_view_uses_as_strided",
        "misconception": "as_strided used instead of index arithmetic",
        "why": "calls as_strided, which the exercise asks to replace by index arithmetic",
        "replace": {"gather_view": '''
def gather_view(storage, shape, stride, offset=0):
    return storage.as_strided(shape, stride, offset).contiguous().clone()
'''},
        "breaks": ["test_gather_view"],
    },
    {
        "name": "gather_view_row_major_positions",
        "misconception": "strides ignored, storage read row by row",
        "why": "ignores the given strides and reads the storage row by row from the offset",
        "replace": {"gather_view": '''
import math
def gather_view(storage, shape, stride, offset=0):
    count = math.prod(shape)
    return storage[offset:offset + count].clone().reshape(shape)
'''},
        "breaks": ["test_gather_view"],
    },
    {
        "name": "select_offset_not_moved",
        "misconception": "select leaves the storage offset where it was",
        "why": "drops the dimension but returns the old offset: every slice reads the first one",
        "replace": {"select_metadata": '''
def select_metadata(shape, stride, offset, dim, index):
    dim = dim % len(shape)
    if not -shape[dim] <= index < shape[dim]:
        raise IndexError(f"index {index} out of range for size {shape[dim]}")
    return tuple(shape[:dim] + shape[dim + 1:]), tuple(stride[:dim] + stride[dim + 1:]), offset
'''},
        "breaks": ["test_select_metadata"],
    },
    {
        "name": "gather_view_default_dtype",
        "misconception": "the gathered tensor in the default dtype, not the storage's",
        "why": "fills torch.zeros(shape) (float32) element by element: an integer or float64 storage changes dtype",
        "replace": {"gather_view": '''
def gather_view(storage, shape, stride, offset=0):
    import itertools

    out = torch.zeros(shape)
    for idx in itertools.product(*(range(size) for size in shape)):
        out[idx] = storage[offset + sum(i * s for i, s in zip(idx, stride))]
    return out
'''},
        "breaks": ["test_gather_view"],
    },
]

CORRECT = [
    {
        "name": "product_and_unravel",
        "replace": {
            "contiguous_strides": '''
import math
def contiguous_strides(shape):
    return tuple(math.prod(max(s, 1) for s in shape[d + 1:]) for d in range(len(shape)))
''',
            "flat_index": '''
def flat_index(index, stride, offset=0):
    position = offset
    for d in range(len(index)):
        position += index[d] * stride[d]
    return position
''',
            "transpose_metadata": '''
def transpose_metadata(shape, stride, dim0, dim1):
    n = len(shape)
    dim0, dim1 = (dim0 + n) % n, (dim1 + n) % n
    order = list(range(n))
    order[dim0], order[dim1] = order[dim1], order[dim0]
    return tuple(shape[d] for d in order), tuple(stride[d] for d in order)
''',
            "select_metadata": '''
def select_metadata(shape, stride, offset, dim, index):
    if dim < 0:
        dim += len(shape)
    if index < 0:
        index += shape[dim]
    keep = [d for d in range(len(shape)) if d != dim]
    return (tuple(shape[d] for d in keep), tuple(stride[d] for d in keep), offset + index * stride[dim])
''',
            "is_contiguous": '''
def is_contiguous(shape, stride):
    if 0 in shape:
        return True
    running = 1
    for d in range(len(shape) - 1, -1, -1):
        if shape[d] == 1:
            continue
        if stride[d] != running:
            return False
        running *= shape[d]
    return True
''',
            "gather_view": '''
import itertools
def gather_view(storage, shape, stride, offset=0):
    positions = [offset + sum(i * s for i, s in zip(index, stride))
                 for index in itertools.product(*(range(n) for n in shape))]
    return storage[torch.tensor(positions, dtype=torch.long)].reshape(shape)
''',
        },
    },
]
