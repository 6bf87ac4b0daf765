"""Evasion catalogue for 04_adagrad: each entry reaches torch's AdaGrad by one route (issue 27).

Loaded by file path like ``catalogue/``. ``replace`` code is the whole solution cell that
defines the name (the rest of the notebook is the reference solution); ``companions`` are files
submitted next to the notebook (text, or a dict of zip members). A ``.py`` next to the notebook is never
staged in this course (``CourseDirectory.ignore`` has ``*.py``: the sources hold the solutions), so the
companion routes ship zips; the disarming of a ``.py`` copy is tested in ``tests/test_removal.py``. Graded with the real sandbox, every
entry must score no more than the blank notebook on ``breaks`` (the checks that go through the
optimizer), keep full marks elsewhere, and have the rule named in the feedback of each broken cell.
``HONEST`` entries (appended to the reference's cell) use nothing forbidden in their graded code and
keep full marks.
"""

_THROUGH_THE_OPTIMIZER = ["test_AdaGrad_step", "test_AdaGrad_param_groups", "test_AdaGrad_state_dict",
                          "test_AdaGrad_gpu"]

# the student's AdaGrad is torch's class, however ``_Torch`` was reached (each entry its own way)
_AROUND = """
class AdaGrad(_Torch):
    pass
"""

# a hand-written step that calls one of torch's functional forms, ``_step(params, grads, sums, steps, lr, eps)``
_FUNCTIONAL = '''
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
            ps = [p for p in group["params"] if p.grad is not None]
            for p in ps:
                if "sum" not in self.state[p]:
                    self.state[p]["sum"] = torch.zeros_like(p)
                    self.state[p]["step"] = torch.tensor(0.0)
            if ps:
                _step(ps, [p.grad for p in ps], [self.state[p]["sum"] for p in ps],
                      [self.state[p]["step"] for p in ps], group["lr"], group["eps"])
        return loss
'''

_KW = "lr_decay=0.0, weight_decay=0.0, maximize=False"

EVASIONS = [
    {"name": "subclass", "route": "a subclass of torch.optim.Adagrad",
     "replace": {"AdaGrad": "class AdaGrad(torch.optim.Adagrad):\n    pass\n"}},
    {"name": "alias_saved_early", "route": "an alias saved in another cell's code",
     "replace": {"AdaGrad": "_Torch = torch.optim.Adagrad\n" + _AROUND}},
    {"name": "computed_getattr", "route": "getattr with a computed name",
     "replace": {"AdaGrad": "_Torch = getattr(torch.optim, 'Ada' + 'grad'.lower())\n" + _AROUND}},
    {"name": "import_module", "route": "importlib.import_module",
     "replace": {"AdaGrad": "import importlib\n_Torch = importlib.import_module('torch.optim.' + "
                            "'adagrad').Adagrad\n" + _AROUND}},
    {"name": "reload", "route": "importlib.reload of torch's module",
     "replace": {"AdaGrad": "import importlib\nimport torch.optim.adagrad as _m\ntry:\n"
                            "    _m = importlib.reload(_m)\nexcept Exception:\n    pass\n"
                            "_Torch = _m.Adagrad\n" + _AROUND}},
    {"name": "dunder_import", "route": "__import__ with fromlist",
     "replace": {"AdaGrad": "_Torch = __import__('torch.optim.adagrad', fromlist=['x']).Adagrad\n" + _AROUND}},
    {"name": "sys_modules", "route": "sys.modules",
     "replace": {"AdaGrad": "import sys\n_Torch = sys.modules['torch.optim.adagrad'].Adagrad\n" + _AROUND}},
    {"name": "fresh_import", "route": "the module dropped from sys.modules and imported again",
     "replace": {"AdaGrad": "import sys, importlib\nsys.modules.pop('torch.optim.adagrad', None)\n"
                            "_Torch = importlib.import_module('torch.optim.adagrad').Adagrad\n" + _AROUND}},
    {"name": "subclasses_scan", "route": "Optimizer.__subclasses__()",
     "replace": {"AdaGrad": "_Torch = [c for c in torch.optim.Optimizer.__subclasses__() "
                            "if c.__name__.lower() == 'adagrad'][0]\n" + _AROUND}},
    {"name": "borrowed_methods", "route": "methods borrowed from the class",
     "replace": {"AdaGrad": '''
_T = vars(torch.optim)["Ada" "grad"]
class AdaGrad(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-2, eps=1e-10):
        super().__init__(params, dict(lr=lr, eps=eps, lr_decay=0, weight_decay=0,
                                      initial_accumulator_value=0, foreach=None, maximize=False,
                                      differentiable=False, fused=None))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["step"] = torch.tensor(0.0)
                self.state[p]["sum"] = torch.zeros_like(p)

    _init_group = _T._init_group
    step = _T.step
'''}},
    {"name": "gc_scan", "route": "the functional step found by gc",
     "replace": {"AdaGrad": "import gc\n_step0 = [f for f in gc.get_objects() if type(f).__name__ == "
                            "'function' and f.__name__ == '_single_tensor_adagrad'][0]\n"
                            "def _step(ps, gs, sums, steps, lr, eps):\n"
                            "    _step0(ps, gs, sums, steps, grad_scale=None, found_inf=None, lr=lr, "
                            f"eps=eps, {_KW}, has_sparse_grad=False, differentiable=False, "
                            "has_complex=False)\n" + _FUNCTIONAL}},
    {"name": "functional", "route": "torch.optim._functional.adagrad",
     "replace": {"AdaGrad": "from torch.optim import _functional as F\n"
                            "def _step(ps, gs, sums, steps, lr, eps):\n"
                            f"    F.adagrad(ps, gs, sums, steps, lr=lr, eps=eps, {_KW})\n" + _FUNCTIONAL}},
    {"name": "fused_op", "route": "torch._fused_adagrad_ (a kernel registered in C++)",
     "replace": {"AdaGrad": "def _step(ps, gs, sums, steps, lr, eps):\n"
                            "    for s in steps:\n        s += 1\n"
                            f"    torch._fused_adagrad_(ps, gs, sums, steps, lr=lr, eps=eps, {_KW})\n"
                            + _FUNCTIONAL}},
    {"name": "ops_namespace", "route": "torch.ops.aten._fused_adagrad (the functional overload)",
     "replace": {"AdaGrad": "def _step(ps, gs, sums, steps, lr, eps):\n"
                            "    for s in steps:\n        s += 1\n"
                            "    out = getattr(torch.ops.aten, '_fused_' + 'adagrad').default("
                            f"ps, gs, sums, steps, lr=lr, eps=eps, {_KW})\n"
                            "    for mine, new in zip(ps + sums, out[0] + out[2]):\n"
                            "        mine.copy_(new)\n" + _FUNCTIONAL}},
    {"name": "exec_source", "route": "exec of the module's source file",
     "replace": {"AdaGrad": "import torch.optim.adagrad as _m\n_ns = {'__name__': 'torch.optim.copy', '__package__': 'torch.optim'}\n"
                            "exec(compile(open(_m.__file__).read(), 'copy', 'exec'), _ns)\n_Torch = _ns['Adagrad']\n" + _AROUND}},
    {"name": "getsource", "route": "inspect.getsource, then exec",
     "replace": {"AdaGrad": "import inspect, torch.optim.adagrad as _m\n_ns = {'__name__': 'torch.optim.copy', '__package__': 'torch.optim'}\n"
                            "exec(inspect.getsource(_m), _ns)\n_Torch = _ns['Adagrad']\n" + _AROUND}},
    {"name": "marshal_bytecode", "route": "marshal of the cached bytecode",
     "replace": {"AdaGrad": "import importlib.util, marshal, types, torch.optim.adagrad as _m\n"
                            "_ns = {'__name__': 'torch.optim.copy', '__package__': 'torch.optim'}\ntry:\n"
                            "    _data = open(importlib.util.cache_from_source(_m.__file__), 'rb').read()\n"
                            "    exec(marshal.loads(_data[16:]), _ns)\n"
                            "except Exception:\n    _ns['Adagrad'] = torch.optim.Adagrad\n"
                            "_Torch = _ns['Adagrad']\n" + _AROUND}},
    {"name": "pickle", "route": "a pickle round trip of the class",
     "replace": {"AdaGrad": "import pickle\n_Torch = pickle.loads(pickle.dumps(torch.optim.Adagrad))\n"
                            + _AROUND}},
    {"name": "thread", "route": "torch's optimizer built and stepped in other threads",
     "replace": {"AdaGrad": '''
import threading
def _in_thread(fn, *args, **kwargs):
    out = {}
    def run():
        try:
            out["value"] = fn(*args, **kwargs)
        except BaseException as error:
            out["error"] = error
    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if "error" in out:
        raise out["error"]
    return out.get("value")

class AdaGrad(torch.optim.Adagrad):
    def __init__(self, *args, **kwargs):
        _in_thread(torch.optim.Adagrad.__init__, self, *args, **kwargs)

    def step(self, closure=None):
        return _in_thread(torch.optim.Adagrad.step, self, closure)
'''}},
    {"name": "fresh_interpreter", "route": "a new Python process that imports torch afresh",
     "replace": {"AdaGrad": '''
import io, subprocess, sys
_CHILD = """
import io, sys, torch
while True:
    size = sys.stdin.buffer.readline()
    if not size:
        break
    ps, gs, sums, steps, lr, eps = torch.load(io.BytesIO(sys.stdin.buffer.read(int(size))))
    torch._fused_adagrad_(ps, gs, sums, steps, lr=lr, eps=eps, lr_decay=0.0, weight_decay=0.0,
                          maximize=False)
    out = io.BytesIO()
    torch.save((ps, sums), out)
    sys.stdout.buffer.write(b"%d\\\\n" % len(out.getvalue()) + out.getvalue())
    sys.stdout.buffer.flush()
"""
_failure = []
_helper = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)

def _step(ps, gs, sums, steps, lr, eps):
    for s in steps:
        s += 1
    payload = io.BytesIO()
    torch.save(([p.detach() for p in ps], list(gs), list(sums), list(steps), lr, eps), payload)
    try:
        _helper.stdin.write(b"%d\\n" % len(payload.getvalue()) + payload.getvalue())
        _helper.stdin.flush()
        size = _helper.stdout.readline()
    except OSError:
        size = b""
    if not size:
        if not _failure:
            _failure.append(_helper.stderr.read().decode()[-400:])
        raise RuntimeError("the helper process failed: " + _failure[0])
    new_ps, new_sums = torch.load(io.BytesIO(_helper.stdout.read(int(size))))
    for mine, new in zip(ps + sums, new_ps + new_sums):
        mine.copy_(new)
''' + _FUNCTIONAL}},
    {"name": "unmount_in_own_namespace", "route": "a child in a user namespace of its own unmounts the cover",
     "replace": {"AdaGrad": '''
import subprocess, sys
import torch.optim.adagrad as _m
_READER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = os.getuid(), os.getgid()
if libc.unshare(0x10000000 | 0x20000) == 0:
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"0 {uid} 1"),
                       ("/proc/self/gid_map", f"0 {gid} 1")):
        try:
            open(path, "w").write(text)
        except OSError:
            pass
    libc.umount2(sys.argv[1].encode(), 2)
sys.stdout.write(open(sys.argv[1]).read())
"""
_source = subprocess.run([sys.executable, "-c", _READER, _m.__file__], capture_output=True,
                         text=True).stdout
_ns = {'__name__': 'torch.optim.copy', '__package__': 'torch.optim'}
exec(compile(_source, 'copy', 'exec'), _ns)
_Torch = _ns['Adagrad']
''' + _AROUND}},
    {"name": "companion_zip", "route": "a zip next to the notebook, put on sys.path",
     "replace": {"AdaGrad": "import sys\nsys.path.insert(0, 'extras.zip')\nfrom zipped_04 import AdaGrad\n"},
     "companions": {"extras.zip": {"zipped_04.py": "import torch\nAdaGrad = torch.optim.Adagrad\n"}}},
    {"name": "companion_copy", "route": "a copy of torch's adagrad.py shipped in a zip next to the notebook",
     "replace": {"AdaGrad": "import sys\nsys.path.insert(0, 'vendored.zip')\n"
                            "from adagrad_copy import Adagrad as AdaGrad\n"},
     "companions": {"vendored.zip": {"adagrad_copy.py": "<the library's source>"}}},
]
for _entry in EVASIONS:
    _entry.setdefault("breaks", _THROUGH_THE_OPTIMIZER)

HONEST = [
    {"name": "compares_with_torch", "why": "its own cell also calls torch's AdaGrad, to compare; the "
     "call fails there and the graded code is its own",
     "replace": {"AdaGrad": "\n_p = torch.nn.Parameter(torch.ones(2))\n_p.grad = torch.ones(2)\n"
                           "torch.optim.Adagrad([_p]).step()\n"}},
]
