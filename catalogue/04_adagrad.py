"""Catalogue for 04_adagrad: realistic wrong implementations (each one mistake) and correct variants.

Loaded by file path (autograder.authoring.samples.load_catalogue). ``replace`` code is appended to the solution
cell that defines the name; ``breaks`` lists the grade cells that must lose points (and only those).
Graded with AUTOGRADER_ALLOW_CPU=1, so ``test_AdaGrad_gpu`` runs its CPU path and breaks with the
trajectory.
"""

_ADAGRAD_TRAJECTORY_CELLS = ["test_AdaGrad_step", "test_AdaGrad_param_groups", "test_AdaGrad_state_dict",
                             "test_AdaGrad_gpu"]

WRONG = [
    {
        "name": "eps_inside_sqrt",
        "misconception": "eps inside the square root",
        "why": "divides by sqrt(G + eps) instead of sqrt(G) + eps",
        "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
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
                state = self.state[p]
                if "sum" not in state:
                    state["sum"] = torch.zeros_like(p)
                state["sum"] += p.grad ** 2
                p -= group["lr"] * p.grad / torch.sqrt(state["sum"] + group["eps"])
        return loss
'''},
        "breaks": _ADAGRAD_TRAJECTORY_CELLS,
    },
    {
        "name": "sum_not_accumulated",
        "misconception": "squared gradients not accumulated",
        "why": "stores only the latest squared gradient, G = g^2, instead of adding to G",
        "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
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
                self.state[p]["sum"] = p.grad * p.grad
                p -= group["lr"] * p.grad / (self.state[p]["sum"].sqrt() + group["eps"])
        return loss
'''},
        "breaks": _ADAGRAD_TRAJECTORY_CELLS,
    },
    {
        "name": "state_outside_self_state",
        "misconception": "state kept outside self.state",
        "why": "keeps G in a private dict, so state_dict() saves nothing and a resumed run restarts G",
        "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
        super().__init__(params, dict(lr=lr, eps=eps))
        self.sums = {}

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
                if p not in self.sums:
                    self.sums[p] = torch.zeros_like(p)
                self.sums[p] += p.grad * p.grad
                p -= group["lr"] * p.grad / (self.sums[p].sqrt() + group["eps"])
        return loss
'''},
        "breaks": ["test_AdaGrad_state_dict", "test_AdaGrad_gpu"],
    },
    {
        "name": "one_lr_for_all_groups",
        "misconception": "param groups' own lr ignored",
        "why": "uses self.defaults['lr'] and ['eps'], ignoring each param group's own values",
        "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
        super().__init__(params, dict(lr=lr, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        lr, eps = self.defaults["lr"], self.defaults["eps"]
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "sum" not in state:
                    state["sum"] = torch.zeros_like(p)
                state["sum"].add_(p.grad * p.grad)
                p.sub_(lr * p.grad / (state["sum"].sqrt() + eps))
        return loss
'''},
        "breaks": ["test_AdaGrad_param_groups", "test_AdaGrad_state_dict"],
    },
    {
        "name": "update_before_accumulating",
        "misconception": "update before accumulating",
        "why": "divides by the old G (0 on the first step) and only then adds g^2",
        "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
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
                state = self.state[p]
                if "sum" not in state:
                    state["sum"] = torch.zeros_like(p)
                p.addcdiv_(p.grad, state["sum"].sqrt() + group["eps"], value=-group["lr"])
                state["sum"].addcmul_(p.grad, p.grad)
        return loss
'''},
        "breaks": _ADAGRAD_TRAJECTORY_CELLS,
    },
    {
        "name": "none_grad_not_skipped",
        "misconception": "parameters without a gradient not skipped",
        "why": "assumes every parameter has a gradient and crashes on p.grad None",
        "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
        super().__init__(params, dict(lr=lr, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if "sum" not in state:
                    state["sum"] = torch.zeros_like(p)
                state["sum"] += p.grad * p.grad
                p -= group["lr"] * p.grad / (state["sum"].sqrt() + group["eps"])
        return loss
'''},
        "breaks": ["test_AdaGrad_step", "test_AdaGrad_state_dict", "test_AdaGrad_gpu"],
    },
    {
        "name": "one_accumulator_per_tensor",
        "misconception": "one accumulator per tensor",
        "why": "accumulates the sum of all squared gradient entries, one scalar G per tensor",
        "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
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
                state = self.state[p]
                state["sum"] = state.get("sum", 0.0) + (p.grad ** 2).sum()
                p -= group["lr"] * p.grad / (state["sum"].sqrt() + group["eps"])
        return loss
'''},
        "breaks": _ADAGRAD_TRAJECTORY_CELLS,
    },
    {
        "name": "adam_state_counted_once",
        "misconception": "Adam's second moment forgotten",
        "why": "counts one state value per parameter for Adam, forgetting the second moment",
        "replace": {"optimizer_state_numel": '''
def optimizer_state_numel(num_params, optimizer):
    if optimizer == "sgd":
        return 0
    return num_params
'''},
        "breaks": ["test_optimizer_state_numel", "test_training_memory_bytes"],
    },
    {
        "name": "memory_without_head",
        "misconception": "the head's parameters forgotten",
        "why": "counts only the square layers' parameters, forgetting the d x 1 head",
        "replace": {"training_memory_bytes": '''
def training_memory_bytes(d, num_layers, batch, optimizer="adagrad", bytes_per_value=4):
    params = d * d * num_layers
    return (2 * params + batch * d * num_layers
            + optimizer_state_numel(params, optimizer)) * bytes_per_value
'''},
        "breaks": ["test_training_memory_bytes"],
    },
    {
        "name": "memory_without_gradients",
        "misconception": "gradients' memory forgotten",
        "why": "forgets that every parameter also has a gradient",
        "replace": {"training_memory_bytes": '''
def training_memory_bytes(d, num_layers, batch, optimizer="adagrad", bytes_per_value=4):
    params = d * d * num_layers + d
    return (params + batch * d * num_layers
            + optimizer_state_numel(params, optimizer)) * bytes_per_value
'''},
        "breaks": ["test_training_memory_bytes"],
    },
    {
        "name": "closure_loss_not_returned",
        "misconception": "the closure's loss not returned",
        "why": "updates the parameters but step() returns None, never the loss the closure computed",
        "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            with torch.enable_grad():
                closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "sum" not in state:
                    state["sum"] = torch.zeros_like(p)
                state["sum"].addcmul_(p.grad, p.grad)
                p.addcdiv_(p.grad, state["sum"].sqrt().add_(group["eps"]), value=-group["lr"])
'''},
        "breaks": ["test_AdaGrad_step"],
    },
    {
        "name": "sqrt_forgotten",
        "misconception": "the square root of the accumulator forgotten",
        "why": "divides by G + eps instead of sqrt(G) + eps: steps shrink like 1/t, not 1/sqrt(t)",
        "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

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
                state = self.state[p]
                if "sum" not in state:
                    state["sum"] = torch.zeros_like(p)
                state["sum"].addcmul_(p.grad, p.grad)
                p.addcdiv_(p.grad, state["sum"] + group["eps"], value=-group["lr"])
        return loss
'''},
        "breaks": _ADAGRAD_TRAJECTORY_CELLS,
    },
    {
        "name": "momentum_state_not_counted",
        "misconception": "momentum's velocity not counted as optimizer state",
        "why": "counts SGD with momentum like plain SGD: its velocity buffer is one value per parameter",
        "replace": {"optimizer_state_numel": '''
def optimizer_state_numel(num_params, optimizer):
    per_param = {"sgd": 0, "momentum": 0, "adagrad": 1, "rmsprop": 1, "adam": 2}
    if optimizer not in per_param:
        raise ValueError(f"unknown optimizer {optimizer!r}")
    return per_param[optimizer] * num_params
'''},
        "breaks": ["test_optimizer_state_numel", "test_training_memory_bytes"],
    },
]

CORRECT = [
    {
        "name": "eager_state_and_plain_arithmetic",
        "replace": {"AdaGrad": '''
class AdaGrad(torch.optim.Optimizer):
    """State created for every parameter up front (as torch does); out-of-place arithmetic on .data."""

    def __init__(self, params, lr=1e-2, eps=1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["sum"] = torch.zeros_like(p)

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        with torch.no_grad():
            for group in self.param_groups:
                for p in [q for q in group["params"] if q.grad is not None]:
                    g = p.grad
                    self.state[p]["sum"] = self.state[p]["sum"] + g * g
                    p.data = p.data - group["lr"] * g / (torch.sqrt(self.state[p]["sum"]) + group["eps"])
        return loss
'''},
    },
    {
        "name": "table_lookup_and_single_expression",
        "replace": {
            "optimizer_state_numel": '''
def optimizer_state_numel(num_params, optimizer):
    if optimizer in ("momentum", "adagrad", "rmsprop"):
        return num_params
    if optimizer == "adam":
        return num_params + num_params
    if optimizer == "sgd":
        return 0
    raise ValueError(optimizer)
''',
            "training_memory_bytes": '''
def training_memory_bytes(d, num_layers, batch, optimizer="adagrad", bytes_per_value=4):
    n = d * (d * num_layers + 1)
    return bytes_per_value * (2 * n + optimizer_state_numel(n, optimizer) + num_layers * batch * d)
''',
        },
    },
]
