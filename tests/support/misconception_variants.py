"""Wrong implementations the signature table never saw: the catalogue's mistakes, written again in
other styles (other loops, other library calls, other names), for tests/test_misconceptions.py.

Each variant names the catalogue entry whose mistake it makes (``same_as``); ``replace`` is appended
to the solution cell defining the name, as in the catalogue. None of them is in
catalogue/misconceptions.json: naming them is the held-out test of ``autograder.reports.misconceptions``.
"""

VARIANTS = {
    "01_strides": [
        {"same_as": "column_major", "replace": {"contiguous_strides": '''
import itertools, operator
def contiguous_strides(shape):
    return tuple(itertools.accumulate([1, *shape[:-1]], operator.mul))
'''}},
        {"same_as": "flat_index_ignores_offset", "replace": {"flat_index": '''
def flat_index(index, stride, offset=0):
    position = 0
    for axis in range(len(index)):
        position += index[axis] * stride[axis]
    return position
'''}},
        {"same_as": "transpose_swaps_shape_only", "replace": {"transpose_metadata": '''
def transpose_metadata(shape, stride, dim0, dim1):
    sizes = [s for s in shape]
    sizes[dim0], sizes[dim1] = sizes[dim1], sizes[dim0]
    return (tuple(sizes), tuple(s for s in stride))
'''}},
        {"same_as": "select_keeps_dimension", "replace": {"select_metadata": '''
def select_metadata(shape, stride, offset, dim, index):
    d = dim if dim >= 0 else dim + len(shape)
    i = index if index >= 0 else index + shape[d]
    sizes = tuple(1 if axis == d else size for axis, size in enumerate(shape))
    return sizes, tuple(stride), offset + stride[d] * i
'''}},
    ],
    "02_einops": [
        {"same_as": "missing_sqrt_d", "replace": {"attention_scores": '''
@jaxtyped(typechecker=beartype)
def attention_scores(q: Float[Tensor, "*batch seq_q d"], k: Float[Tensor, "*batch seq_k d"]) -> Float[Tensor, "*batch seq_q seq_k"]:
    return q @ k.transpose(-2, -1)
'''}},
        {"same_as": "scores_already_softmaxed", "replace": {"attention_scores": '''
@jaxtyped(typechecker=beartype)
def attention_scores(q: Float[Tensor, "*batch seq_q d"], k: Float[Tensor, "*batch seq_k d"]) -> Float[Tensor, "*batch seq_q seq_k"]:
    raw = torch.matmul(q, k.transpose(-1, -2)) * q.shape[-1] ** -0.5
    return torch.softmax(raw, -1)
'''}},
    ],
    "03_flops": [
        {"same_as": "matmul_no_factor_two", "replace": {"matmul_flops": '''
def matmul_flops(m, k, n):
    macs = m * n
    return macs * k
'''}},
        {"same_as": "forward_square_layers", "replace": {"forward_flops": '''
def forward_flops(batch, dims):
    total = 0
    for width in dims[:-1]:
        total = total + 2 * batch * width ** 2
    return total
'''}},
        {"same_as": "training_2nd", "replace": {"training_flops": '''
def training_flops(num_tokens, num_params):
    forward = 2 * num_params
    return forward * num_tokens
'''}},
        {"same_as": "mfu_as_percent", "replace": {"mfu": '''
def mfu(flops, seconds, peak_flop_per_sec):
    fraction = (flops / seconds) / peak_flop_per_sec
    return round(fraction * 100, 12)
'''}},
        {"same_as": "days_in_hours", "replace": {"training_days": '''
def training_days(num_tokens, num_params, num_gpus, peak_flop_per_sec, mfu):
    seconds = 6 * num_tokens * num_params / (num_gpus * peak_flop_per_sec * mfu)
    return seconds / 60 / 60
'''}},
    ],
    "04_adagrad": [
        {"same_as": "eps_inside_sqrt", "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, eps=1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        with torch.no_grad():
            for group in self.param_groups:
                for param in (q for q in group["params"] if q.grad is not None):
                    st = self.state[param]
                    st.setdefault("sum", torch.zeros_like(param))
                    st["sum"].addcmul_(param.grad, param.grad)
                    param.addcdiv_(param.grad, (st["sum"] + group["eps"]).sqrt(), value=-group["lr"])
        return loss
'''}},
        {"same_as": "sum_not_accumulated", "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, eps=1e-10):
        super().__init__(params, dict(lr=lr, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                self.state[p]["sum"] = g.square()
                p.sub_(group["lr"] * g / (torch.sqrt(self.state[p]["sum"]) + group["eps"]))
        return loss
'''}},
        {"same_as": "state_outside_self_state", "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, eps=1e-10):
        super().__init__(params, dict(lr=lr, eps=eps))
        self._accumulators = {}

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                acc = self._accumulators.setdefault(id(p), torch.zeros_like(p))
                acc.add_(p.grad ** 2)
                p.add_(-group["lr"] * p.grad / (acc.sqrt() + group["eps"]))
        return loss
'''}},
        {"same_as": "one_lr_for_all_groups", "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, eps=1e-10):
        super().__init__(params, dict(lr=lr, eps=eps))
        self.lr, self.eps = lr, eps

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                s = self.state[p].setdefault("sum", torch.zeros_like(p))
                s += p.grad * p.grad
                p -= self.lr * p.grad / (s.sqrt() + self.eps)
        return loss
'''}},
        {"same_as": "none_grad_not_skipped", "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, eps=1e-10):
        super().__init__(params, dict(lr=lr, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                grad = p.grad
                state = self.state[p]
                state["sum"] = state.get("sum", torch.zeros_like(p)) + grad * grad
                p.data -= group["lr"] * grad / (state["sum"].sqrt() + group["eps"])
        return loss
'''}},
        {"same_as": "adam_state_counted_once", "replace": {"optimizer_state_numel": '''
def optimizer_state_numel(num_params, optimizer):
    per_value = {"sgd": 0, "momentum": 1, "adagrad": 1, "rmsprop": 1, "adam": 1}
    return per_value[optimizer] * num_params
'''}},
        {"same_as": "memory_without_gradients", "replace": {"training_memory_bytes": '''
def training_memory_bytes(d, num_layers, batch, optimizer="adagrad", bytes_per_value=4):
    weights = num_layers * d * d + d * 1
    activations = num_layers * batch * d
    state = optimizer_state_numel(weights, optimizer)
    return bytes_per_value * (weights + activations + state)
'''}},
    ],
    "05_get_batch": [
        {"same_as": "y_not_shifted", "replace": {"get_batch": '''
def get_batch(dataset, batch_size, context_length, device):
    idx = torch.randint(len(dataset) - context_length, (batch_size,))
    x = torch.stack([torch.from_numpy(dataset[i : i + context_length].astype(np.int64)) for i in idx])
    return x.to(device), x.to(device)
'''}},
        {"same_as": "int32_tokens", "replace": {"get_batch": '''
def get_batch(dataset, batch_size, context_length, device):
    idx = torch.randint(len(dataset) - context_length, (batch_size,))
    window = torch.stack([torch.tensor(dataset[i : i + context_length + 1].astype(np.int32)) for i in idx])
    return window[:, :-1].to(device), window[:, 1:].to(device)
'''}},
        {"same_as": "load_tokens_reads_file", "replace": {"load_tokens": '''
def load_tokens(path, dtype=np.uint16):
    with open(path, "rb") as handle:
        return np.frombuffer(handle.read(), dtype=dtype)
'''}},
    ],
    "06_mixed_precision": [
        {"same_as": "bytes_from_finfo_bits", "replace": {"bytes_for": '''
def bytes_for(num_values, dtype):
    bits = torch.finfo(dtype).bits
    return bits // 8 * num_values
'''}},
        {"same_as": "scaler_for_bfloat16", "replace": {"make_grad_scaler": '''
def make_grad_scaler(device_type, autocast_dtype):
    scaler = torch.amp.GradScaler(device=device_type)
    return scaler
'''}},
        {"same_as": "gradients_not_cleared", "replace": {"train_step_mixed": '''
def train_step_mixed(model, optimizer, inputs, targets, loss_fn, *, autocast_dtype=torch.bfloat16, scaler=None):
    with torch.autocast(inputs.device.type, dtype=autocast_dtype):
        out = model(inputs)
        loss = loss_fn(out, targets)
    if scaler is None:
        loss.backward()
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    return loss.item()
'''}},
    ],
}
