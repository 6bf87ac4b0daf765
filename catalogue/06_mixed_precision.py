"""Catalogue for 06_mixed_precision: realistic wrong implementations (each one mistake) and correct variants.

Loaded by file path (autograder.authoring.samples.load_catalogue). ``replace`` code is appended to the solution
cell that defines the name; ``breaks`` lists the grade cells that must lose points (and only those).
Graded with AUTOGRADER_ALLOW_CPU=1, so ``test_train_step_mixed_gpu`` runs its CPU path.
"""

_STEP_CELLS = ["test_train_step_mixed", "test_train_step_mixed_scaler", "test_train_step_mixed_gpu"]
_SCALER_CELLS = ["test_train_step_mixed_scaler", "test_train_step_mixed_gpu"]

WRONG = [
    {
        "name": "bias_off_by_one",
        "misconception": "exponent bias off by one",
        "why": "uses 2**(e-1) as the exponent bias instead of 2**(e-1) - 1",
        "replace": {"float_format": '''
def float_format(exponent_bits, mantissa_bits, *, ieee=True):
    bias = 2 ** (exponent_bits - 1)
    top = 2**exponent_bits - (2 if ieee else 1) - bias
    mantissa = 2 - 2.0**-mantissa_bits if ieee else 2 - 2.0 ** (1 - mantissa_bits)
    return {"max": mantissa * 2.0**top, "min_normal": 2.0 ** (1 - bias),
            "min_subnormal": 2.0 ** (1 - bias - mantissa_bits), "eps": 2.0**-mantissa_bits}
'''},
        "breaks": ["test_float_format", "test_float_format_fn"],
    },
    {
        "name": "inf_exponent_not_reserved",
        "misconception": "all-ones exponent not reserved for inf/NaN",
        "why": "lets IEEE finite numbers use the all-ones exponent, which is reserved for inf and NaN",
        "replace": {"float_format": '''
def float_format(exponent_bits, mantissa_bits, *, ieee=True):
    bias = 2 ** (exponent_bits - 1) - 1
    top = 2**exponent_bits - 1 - bias
    mantissa = 2 - 2.0**-mantissa_bits if ieee else 2 - 2.0 ** (1 - mantissa_bits)
    return {"max": mantissa * 2.0**top, "min_normal": 2.0 ** (1 - bias),
            "min_subnormal": 2.0 ** (1 - bias - mantissa_bits), "eps": 2.0**-mantissa_bits}
'''},
        "breaks": ["test_float_format"],
    },
    {
        "name": "fn_max_uses_nan_pattern",
        "misconception": "fn format's max uses the NaN pattern",
        "why": "in the fn convention takes the all-ones mantissa too (480 for e4m3), but that pattern is NaN",
        "replace": {"float_format": '''
def float_format(exponent_bits, mantissa_bits, *, ieee=True):
    bias = 2 ** (exponent_bits - 1) - 1
    top = 2**exponent_bits - (2 if ieee else 1) - bias
    return {"max": (2 - 2.0**-mantissa_bits) * 2.0**top, "min_normal": 2.0 ** (1 - bias),
            "min_subnormal": 2.0 ** (1 - bias - mantissa_bits), "eps": 2.0**-mantissa_bits}
'''},
        "breaks": ["test_float_format_fn"],
    },
    {
        "name": "no_subnormals",
        "misconception": "subnormals forgotten",
        "why": "forgets subnormals: reports the smallest normal as the smallest positive value",
        "replace": {"float_format": '''
def float_format(exponent_bits, mantissa_bits, *, ieee=True):
    bias = 2 ** (exponent_bits - 1) - 1
    top = 2**exponent_bits - (2 if ieee else 1) - bias
    mantissa = 2 - 2.0**-mantissa_bits if ieee else 2 - 2.0 ** (1 - mantissa_bits)
    return {"max": mantissa * 2.0**top, "min_normal": 2.0 ** (1 - bias),
            "min_subnormal": 2.0 ** (1 - bias), "eps": 2.0**-mantissa_bits}
'''},
        "breaks": ["test_float_format", "test_float_format_fn"],
    },
    {
        "name": "eps_is_unit_roundoff",
        "misconception": "eps taken as the unit roundoff",
        "why": "gives half the gap above 1 (the rounding error bound 2**-(m+1)) as eps",
        "replace": {"float_format": '''
def float_format(exponent_bits, mantissa_bits, *, ieee=True):
    bias = 2 ** (exponent_bits - 1) - 1
    top = 2**exponent_bits - (2 if ieee else 1) - bias
    mantissa = 2 - 2.0**-mantissa_bits if ieee else 2 - 2.0 ** (1 - mantissa_bits)
    return {"max": mantissa * 2.0**top, "min_normal": 2.0 ** (1 - bias),
            "min_subnormal": 2.0 ** (1 - bias - mantissa_bits), "eps": 2.0 ** -(mantissa_bits + 1)}
'''},
        "breaks": ["test_float_format", "test_float_format_fn"],
    },
    {
        "name": "bytes_from_finfo_bits",
        "misconception": "bytes from finfo(dtype).bits",
        "why": "divides torch.finfo(dtype).bits by 8: a float, and no answer for integer or bool dtypes",
        "replace": {"bytes_for": '''
def bytes_for(num_values, dtype):
    return num_values * torch.finfo(dtype).bits / 8
'''},
        "breaks": ["test_bytes_for"],
    },
    {
        "name": "scaler_for_bfloat16",
        "misconception": "a GradScaler for bfloat16",
        "why": "returns a GradScaler for bfloat16 too (it has float32's range and needs none)",
        "replace": {"make_grad_scaler": '''
def make_grad_scaler(device_type, autocast_dtype):
    return torch.amp.GradScaler(device_type)
'''},
        "breaks": ["test_make_grad_scaler"],
    },
    {
        "name": "scaler_hardcoded_cuda",
        "misconception": "GradScaler hard-coded to CUDA",
        "why": "always builds a CUDA GradScaler, which disables itself on any other device",
        "replace": {"make_grad_scaler": '''
def make_grad_scaler(device_type, autocast_dtype):
    import warnings
    if autocast_dtype == torch.float16:
        with warnings.catch_warnings():  # on a CPU machine the CUDA scaler warns and disables itself
            warnings.simplefilter("ignore")
            return torch.amp.GradScaler("cuda")
    return None
'''},
        "breaks": ["test_make_grad_scaler"],
    },
    {
        "name": "no_autocast",
        "misconception": "no autocast",
        "why": "runs the forward pass in float32: autocast_dtype is ignored",
        "replace": {"train_step_mixed": '''
def train_step_mixed(model, optimizer, inputs, targets, loss_fn, *, autocast_dtype=torch.bfloat16, scaler=None):
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(inputs), targets)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    return loss.item()
'''},
        "breaks": _STEP_CELLS,
    },
    {
        "name": "model_half",
        "misconception": "model cast to low precision (no float32 master weights)",
        "why": "casts the model itself to the low-precision dtype, losing the float32 master weights",
        "replace": {"train_step_mixed": '''
def train_step_mixed(model, optimizer, inputs, targets, loss_fn, *, autocast_dtype=torch.bfloat16, scaler=None):
    model.to(autocast_dtype)
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(inputs.to(autocast_dtype)), targets)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    return loss.item()
'''},
        "breaks": _STEP_CELLS,
    },
    {
        "name": "autocast_device_hardcoded_cuda",
        "misconception": "autocast hard-coded to CUDA",
        "why": "writes torch.autocast('cuda', ...), which does nothing for tensors on another device",
        "replace": {"train_step_mixed": '''
def train_step_mixed(model, optimizer, inputs, targets, loss_fn, *, autocast_dtype=torch.bfloat16, scaler=None):
    import warnings
    optimizer.zero_grad(set_to_none=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autocast("cuda", dtype=autocast_dtype):
            loss = loss_fn(model(inputs), targets)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    return loss.item()
'''},
        "breaks": _STEP_CELLS,
    },
    {
        "name": "scaler_never_updates",
        "misconception": "scaler.update() never called",
        "why": "scales and steps but never calls scaler.update(), so the scale never adapts",
        "replace": {"train_step_mixed": '''
def train_step_mixed(model, optimizer, inputs, targets, loss_fn, *, autocast_dtype=torch.bfloat16, scaler=None):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=inputs.device.type, dtype=autocast_dtype):
        loss = loss_fn(model(inputs), targets)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
    else:
        loss.backward()
        optimizer.step()
    return loss.item()
'''},
        "breaks": _SCALER_CELLS,
    },
    {
        "name": "optimizer_step_bypasses_scaler",
        "misconception": "optimizer.step() bypasses the scaler",
        "why": "calls optimizer.step() on the scaled gradients instead of scaler.step(optimizer)",
        "replace": {"train_step_mixed": '''
def train_step_mixed(model, optimizer, inputs, targets, loss_fn, *, autocast_dtype=torch.bfloat16, scaler=None):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=inputs.device.type, dtype=autocast_dtype):
        loss = loss_fn(model(inputs), targets)
    if scaler is not None:
        scaler.scale(loss).backward()
    else:
        loss.backward()
    optimizer.step()
    return loss.item()
'''},
        "breaks": _SCALER_CELLS,
    },
    {
        "name": "gradients_not_cleared",
        "misconception": "gradients never cleared",
        "why": "never clears the gradients, so each step adds the previous steps' gradients",
        "replace": {"train_step_mixed": '''
def train_step_mixed(model, optimizer, inputs, targets, loss_fn, *, autocast_dtype=torch.bfloat16, scaler=None):
    with torch.autocast(device_type=inputs.device.type, dtype=autocast_dtype):
        loss = loss_fn(model(inputs), targets)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    return loss.item()
'''},
        "breaks": _STEP_CELLS,
    },
    {
        "name": "finfo_for_integer_dtypes",
        "misconception": "bytes from finfo(dtype).bits",
        "why": "torch.finfo(dtype).bits // 8: right for floating dtypes, raises TypeError for integer and bool ones",
        "replace": {"bytes_for": '''
def bytes_for(num_values, dtype):
    return num_values * (torch.finfo(dtype).bits // 8)
'''},
        "breaks": ["test_bytes_for"],
    },
    {
        "name": "loss_tensor_returned",
        "misconception": "the loss tensor returned, not its value",
        "why": "returns the loss tensor (holding the graph) where a Python float, loss.item(), is asked for",
        "replace": {"train_step_mixed": '''
def train_step_mixed(model, optimizer, inputs, targets, loss_fn, *, autocast_dtype=torch.bfloat16, scaler=None):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=inputs.device.type, dtype=autocast_dtype):
        loss = loss_fn(model(inputs), targets)
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
    return loss
'''},
        "breaks": _STEP_CELLS,
    },
    {
        "name": "loss_not_scaled",
        "misconception": "backward on the unscaled loss with a GradScaler",
        "why": "calls loss.backward() and then scaler.step(): the gradients were never scaled, so the scaler refuses the step",
        "replace": {"train_step_mixed": '''
def train_step_mixed(model, optimizer, inputs, targets, loss_fn, *, autocast_dtype=torch.bfloat16, scaler=None):
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=inputs.device.type, dtype=autocast_dtype):
        loss = loss_fn(model(inputs), targets)
    loss.backward()
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    return loss.item()
'''},
        "breaks": _SCALER_CELLS,
    },
]

CORRECT = [
    {
        "name": "ldexp_and_clear_after_step",
        "replace": {
            "float_format": '''
import math

def float_format(exponent_bits, mantissa_bits, *, ieee=True):
    bias = (1 << (exponent_bits - 1)) - 1
    max_exponent = (1 << exponent_bits) - 1 - bias - (1 if ieee else 0)
    max_mantissa = (1 << (mantissa_bits + 1)) - (1 if ieee else 2)   # integer significand 1.xxx * 2**m
    return {
        "max": math.ldexp(max_mantissa, max_exponent - mantissa_bits),
        "min_normal": math.ldexp(1.0, 1 - bias),
        "min_subnormal": math.ldexp(1.0, 1 - bias - mantissa_bits),
        "eps": math.ldexp(1.0, -mantissa_bits),
    }
''',
            "bytes_for": '''
def bytes_for(num_values, dtype):
    return int(num_values) * dtype.itemsize
''',
            "make_grad_scaler": '''
def make_grad_scaler(device_type, autocast_dtype):
    return torch.amp.GradScaler(device=device_type) if autocast_dtype is torch.float16 else None
''',
            "train_step_mixed": '''
def train_step_mixed(model, optimizer, inputs, targets, loss_fn, *, autocast_dtype=torch.bfloat16, scaler=None):
    with torch.autocast(inputs.device.type, autocast_dtype):
        loss = loss_fn(model(inputs), targets)
    (scaler.scale(loss) if scaler else loss).backward()
    if scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss.detach())
''',
        },
    },
]
