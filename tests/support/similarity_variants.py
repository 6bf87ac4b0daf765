"""A class ``autograder similarity`` has never seen: exercise 04 cells that are not the ones its threshold
was chosen from (tests/test_similarity.py).

Honest students (``HONEST``) write AdaGrad in styles that class does not have: index loops with
out-of-place arithmetic, helper methods, gathered lists walked with ``zip``, a closure-first version
with a dict of defaults, one that keeps its update in a ``staticmethod``. Planted copies (``COPIES``)
take one of them and disguise it in ways the threshold's copies did not: methods moved, helpers
inlined into one line or split over several, docstrings and type hints added, dead code and prints
inserted, a guard turned around. Each planted copy names the student it copied and the cell. A
second paste of the library (``library_paste``) copies torch's ``Adagrad.__init__``, ``step`` and
``_init_group`` out of the installed torch (the threshold's class pasted ``_single_tensor_adagrad``).
"""

from __future__ import annotations

import inspect
import textwrap

INDEXED = '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-2, eps: float = 1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for i in range(len(self.param_groups)):
            group = self.param_groups[i]
            n = len(group["params"])
            for j in range(n):
                w = group["params"][j]
                if w.grad is None:
                    continue
                if "sum" not in self.state[w]:
                    self.state[w]["sum"] = torch.zeros_like(w)
                total = self.state[w]["sum"] + w.grad * w.grad
                self.state[w]["sum"].copy_(total)
                w.copy_(w - group["lr"] * w.grad / (torch.sqrt(total) + group["eps"]))
        return loss
'''

HELPERS = '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
        super().__init__(params, dict(lr=lr, eps=eps))

    def _accumulator(self, param):
        state = self.state[param]
        if "sum" not in state:
            state["sum"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        return state["sum"]

    def _apply(self, param, lr, eps):
        acc = self._accumulator(param)
        acc.add_(param.grad ** 2)
        param.sub_(lr * param.grad / acc.sqrt().add(eps))

    @torch.no_grad()
    def step(self, closure=None):
        with torch.enable_grad():
            loss = closure() if closure else None
        for group in self.param_groups:
            for param in (p for p in group["params"] if p.grad is not None):
                self._apply(param, group["lr"], group["eps"])
        return loss
'''

ZIPPED = '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=0.01, eps=1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            live = [p for p in group["params"] if p.grad is not None]
            for p in live:
                self.state[p].setdefault("sum", p.new_zeros(p.shape))
            accumulators = [self.state[p]["sum"] for p in live]
            for p, g, acc in zip(live, [p.grad for p in live], accumulators):
                acc.addcmul_(g, g)
                p.addcdiv_(g, acc.sqrt() + group["eps"], value=-group["lr"])
        return loss
'''

STATIC = '''
class AdaGrad(torch.optim.Optimizer):
    """AdaGrad with the rule written once."""

    @staticmethod
    def rule(x, dx, history, lr, eps):
        history.add_(dx.mul(dx))
        x.add_(-lr * dx / (history.sqrt() + eps))

    def __init__(self, params, lr=1e-2, eps=1e-10):
        if eps < 0 or lr < 0:
            raise ValueError("lr and eps must be non-negative")
        defaults = {"eps": eps, "lr": lr}
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = torch.enable_grad()(closure)() if callable(closure) else None
        with torch.no_grad():
            for group in self.param_groups:
                for x in group["params"]:
                    if x.grad is None:
                        continue
                    history = self.state[x].get("sum")
                    if history is None:
                        history = torch.zeros_like(x)
                        self.state[x]["sum"] = history
                    AdaGrad.rule(x, x.grad, history, group["lr"], group["eps"])
        return loss
'''

WHILE = '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    def step(self, closure=None):
        """Update each parameter once."""
        if closure is None:
            objective = None
        else:
            with torch.enable_grad():
                objective = closure()
        with torch.no_grad():
            pending = [(g, p) for g in self.param_groups for p in g["params"]]
            while pending:
                settings, tensor = pending.pop()
                if tensor.grad is None:
                    continue
                slot = self.state[tensor]
                slot["sum"] = slot.get("sum", torch.zeros_like(tensor)) + tensor.grad.square()
                scale = settings["lr"] / (slot["sum"].sqrt() + settings["eps"])
                tensor -= scale * tensor.grad
        return objective
'''

HONEST = {"honest_indexed": INDEXED, "honest_helpers": HELPERS, "honest_zipped": ZIPPED,
          "honest_static": STATIC, "honest_while": WHILE}

# HELPERS, copied: step moved first, one helper inlined, names changed, docstrings and a print added
COPY_OF_HELPERS = '''
class AdaGrad(torch.optim.Optimizer):
    """Adaptive gradient optimizer."""

    @torch.no_grad()
    def step(self, closure=None):
        """Take one step."""
        with torch.enable_grad():
            result = closure() if closure else None
        for grp in self.param_groups:
            for weight in (q for q in grp["params"] if q.grad is not None):
                self._apply(weight, grp["lr"], grp["eps"])
        return result

    def __init__(self, params, lr=1e-2, eps=1e-10):
        super().__init__(params, dict(lr=lr, eps=eps))

    def _apply(self, weight, rate, tiny):
        st = self.state[weight]
        if "sum" not in st:
            st["sum"] = torch.zeros_like(weight, memory_format=torch.preserve_format)
        sq = st["sum"]
        sq.add_(weight.grad ** 2)
        weight.sub_(rate * weight.grad / sq.sqrt().add(tiny))
'''

# ZIPPED, copied: type hints, blank lines and a guard turned around, dead code, renamed
COPY_OF_ZIPPED = '''
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 0.01, eps: float = 1e-10) -> None:
        super().__init__(params, {"lr": lr, "eps": eps})
        self.debug = False

    @torch.no_grad()
    def step(self, closure=None):
        objective = None
        if closure is not None:
            with torch.enable_grad():
                objective = closure()

        for settings in self.param_groups:
            active = [t for t in settings["params"] if t.grad is not None]

            for t in active:
                self.state[t].setdefault("sum", t.new_zeros(t.shape))

            sums = [self.state[t]["sum"] for t in active]

            for t, grad, running in zip(active, [t.grad for t in active], sums):
                running.addcmul_(grad, grad)
                t.addcdiv_(grad, running.sqrt() + settings["eps"], value=-settings["lr"])
                if self.debug:
                    print("updated", t.shape)
        return objective
'''

# STATIC, copied: the rule moved to a module-level function, its lines wrapped, comments
COPY_OF_STATIC = '''
def rule(x, dx, history, lr, eps):  # the AdaGrad rule
    history.add_(dx.mul(dx))
    x.add_(-lr * dx / (history.sqrt()
                       + eps))


class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
        if eps < 0 or lr < 0:
            raise ValueError("lr and eps must be non-negative")
        defaults = {"eps": eps, "lr": lr}
        super().__init__(params, defaults)

    def step(self, closure=None):
        # evaluate the loss first
        loss = torch.enable_grad()(closure)() if callable(closure) else None
        with torch.no_grad():
            for group in self.param_groups:
                for x in group["params"]:
                    if x.grad is None:
                        continue
                    history = self.state[x].get("sum")
                    if history is None:
                        history = torch.zeros_like(x)
                        self.state[x]["sum"] = history
                    rule(x, x.grad, history,
                         group["lr"], group["eps"])
        return loss
'''

# student -> (the student copied, the cell, the code)
COPIES = {"copies_helpers": ("honest_helpers", "AdaGrad", COPY_OF_HELPERS),
          "copies_zipped": ("honest_zipped", "AdaGrad", COPY_OF_ZIPPED),
          "copies_static": ("honest_static", "AdaGrad", COPY_OF_STATIC)}


def _method(source: str) -> str:
    """A method's source, indented for a class body."""
    return textwrap.indent(textwrap.dedent(source), "    ")


def library_paste() -> str:
    """torch's own ``Adagrad.__init__``, ``_init_group`` and ``step``, pasted into the exercise's class
    (the functions they call left for torch to provide)."""
    from torch.optim import adagrad

    methods = [adagrad.Adagrad.__init__, adagrad.Adagrad._init_group, adagrad.Adagrad.step]
    return ("from torch.optim.adagrad import *\n\n\nclass AdaGrad(torch.optim.Optimizer):\n"
            + "\n".join(_method(inspect.getsource(m)) for m in methods))
