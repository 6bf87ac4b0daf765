"""Catalogue for 03_flops: realistic wrong implementations (each one mistake) and correct variants.

Loaded by file path (autograder.authoring.samples.load_catalogue). ``replace`` code is appended to the solution
cell that defines the name; ``breaks`` lists the grade cells that must lose points.
"""

WRONG = [
    {
        "name": "matmul_no_factor_two",
        "misconception": "multiply-accumulates counted, not FLOPs",
        "why": "counts multiply-accumulates, not FLOPs",
        "replace": {"matmul_flops": '''
def matmul_flops(m, k, n):
    return m * k * n
'''},
        "breaks": ["test_matmul_flops"],
    },
    {
        "name": "matmul_float_arithmetic",
        "misconception": "FLOPs computed in floating point",
        "why": "computes in floating point (e.g. via 2e0 or numpy) and rounds: wrong above 2**53",
        "replace": {"matmul_flops": '''
def matmul_flops(m, k, n):
    return int(2.0 * m * k * n)
'''},
        "breaks": ["test_matmul_flops"],
    },
    {
        "name": "forward_misses_last_layer",
        "misconception": "last layer missed (off by one)",
        "why": "off-by-one loop over the layers",
        "replace": {"forward_flops": '''
def forward_flops(batch, dims):
    total = 0
    for i in range(len(dims) - 2):
        total += 2 * batch * dims[i] * dims[i + 1]
    return total
'''},
        "breaks": ["test_forward_flops"],
    },
    {
        "name": "forward_square_layers",
        "misconception": "every layer assumed square",
        "why": "assumes every layer is dims[i] x dims[i]",
        "replace": {"forward_flops": '''
def forward_flops(batch, dims):
    return sum(2 * batch * d * d for d in dims[:-1])
'''},
        "breaks": ["test_forward_flops"],
    },
    {
        "name": "backward_counts_first_input_grad",
        "misconception": "first layer's input gradient counted",
        "why": "counts the input gradient of the first layer although x needs none",
        "replace": {"backward_flops": '''
def backward_flops(batch, dims, input_requires_grad=False):
    return sum(4 * batch * a * b for a, b in zip(dims, dims[1:]))
'''},
        "breaks": ["test_backward_flops"],
    },
    {
        "name": "backward_same_as_forward",
        "misconception": "one gradient matmul per layer",
        "why": "counts one gradient matmul per layer",
        "replace": {"backward_flops": '''
def backward_flops(batch, dims, input_requires_grad=False):
    return sum(2 * batch * a * b for a, b in zip(dims, dims[1:]))
'''},
        "breaks": ["test_backward_flops"],
    },
    {
        "name": "backward_ignores_input_flag",
        "misconception": "input gradient never counted",
        "why": "never counts the first layer's input gradient, even when x requires grad",
        "replace": {"backward_flops": '''
def backward_flops(batch, dims, input_requires_grad=False):
    pairs = list(zip(dims, dims[1:]))
    return sum(2 * batch * a * b for a, b in pairs) + sum(2 * batch * a * b for a, b in pairs[1:])
'''},
        "breaks": ["test_backward_flops"],
    },
    {
        "name": "training_2nd",
        "misconception": "2ND instead of 6ND",
        "why": "uses the forward-only 2ND instead of 6ND",
        "replace": {"training_flops": '''
def training_flops(num_tokens, num_params):
    return 2 * num_tokens * num_params
'''},
        "breaks": ["test_training_flops"],
    },
    {
        "name": "mfu_as_percent",
        "misconception": "MFU as a percentage",
        "why": "returns a percentage instead of a fraction",
        "replace": {"mfu": '''
def mfu(flops, seconds, peak_flop_per_sec):
    return 100 * flops / seconds / peak_flop_per_sec
'''},
        "breaks": ["test_mfu"],
    },
    {
        "name": "days_in_hours",
        "misconception": "hours instead of days",
        "why": "divides by 3600 (hours) instead of 86400 seconds per day",
        "replace": {"training_days": '''
def training_days(num_tokens, num_params, num_gpus, peak_flop_per_sec, mfu):
    return 6 * num_tokens * num_params / (num_gpus * peak_flop_per_sec * mfu) / 3600
'''},
        "breaks": ["test_training_days"],
    },
    {
        "name": "days_ignore_mfu",
        "misconception": "accelerators assumed at peak",
        "why": "assumes the accelerators run at peak",
        "replace": {"training_days": '''
def training_days(num_tokens, num_params, num_gpus, peak_flop_per_sec, mfu):
    return 6 * num_tokens * num_params / (num_gpus * peak_flop_per_sec) / 86400
'''},
        "breaks": ["test_training_days"],
    },
]

CORRECT = [
    {
        "name": "layer_loops_and_rates",
        "replace": {
            "matmul_flops": '''
import math
def matmul_flops(m, k, n):
    return math.prod((2, m, k, n))
''',
            "forward_flops": '''
def forward_flops(batch, dims):
    total = 0
    for i in range(1, len(dims)):
        total += 2 * batch * dims[i - 1] * dims[i]
    return total
''',
            "backward_flops": '''
def backward_flops(batch, dims, input_requires_grad=False):
    layers = [2 * batch * dims[i - 1] * dims[i] for i in range(1, len(dims))]
    if not layers:
        return 0
    return 2 * sum(layers) - (0 if input_requires_grad else layers[0])
''',
            "training_flops": '''
def training_flops(num_tokens, num_params):
    forward = 2 * num_params * num_tokens
    backward = 2 * forward
    return forward + backward
''',
            "mfu": '''
def mfu(flops, seconds, peak_flop_per_sec):
    achieved = flops / seconds
    return achieved / peak_flop_per_sec
''',
            "training_days": '''
def training_days(num_tokens, num_params, num_gpus, peak_flop_per_sec, mfu):
    cluster_flop_per_sec = num_gpus * peak_flop_per_sec * mfu
    hours = 6 * num_tokens * num_params / cluster_flop_per_sec / 3600
    return hours / 24
''',
        },
    },
]
