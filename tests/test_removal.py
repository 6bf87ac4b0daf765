"""Forbidden implementations removed in the student's process (issue 27, ``sandbox/inside/removal.py``).

The removal runs in a fresh interpreter here (it would disarm this test process's own torch): every
route in the script must raise ``ForbiddenAPI`` naming the rule, no function of torch's module keeps
its code, the rest of torch still works, and the stub text stands in for the module's file. The rules'
``remove`` key is checked, and the trusted side's detection of a copy of the library shipped next to
the notebook.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT

from autograder import forbidden
from autograder.authoring import samples
from autograder.course.source import SourceError

ADAGRAD = forbidden.rules("04_adagrad", course_root=ROOT)
INSIDE = ROOT / "autograder" / "sandbox" / "inside"

SCRIPT = textwrap.dedent('''
    import gc, importlib, json, pickle, sys, threading, time, types
    sys.path.insert(0, sys.argv[1])
    import torch
    import removal
    removals = json.loads(sys.argv[2])
    module = sys.modules["torch.optim.adagrad"]
    stub = removal.stub_source(module, removals[0])
    saved, saved_step = torch.optim.Adagrad, torch.optim.Adagrad.step
    started = time.perf_counter()
    removal.remove(removals)
    seconds = time.perf_counter() - started
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    def in_thread():
        out = {}
        def run():
            try:
                torch.optim.Adagrad([p])
            except Exception as error:
                out["error"] = error
        t = threading.Thread(target=run); t.start(); t.join()
        raise out["error"]
    state = [torch.zeros(3)], [torch.zeros(())]
    kw = dict(lr=0.1, lr_decay=0.0, weight_decay=0.0, eps=1e-10, maximize=False)
    routes = {
        "saved alias": lambda: saved([p]),
        "computed getattr": lambda: getattr(torch.optim, "Ada" + "grad")([p]),
        "borrowed step": lambda: saved_step(torch.optim.SGD([p], lr=0.1)),
        "subclass": lambda: type("Mine", (torch.optim.Adagrad,), {})([p]),
        "__subclasses__": lambda: [c for c in torch.optim.Optimizer.__subclasses__()
                                   if c.__name__ == "Adagrad"][0]([p]),
        "pickle": lambda: pickle.loads(pickle.dumps(torch.optim.Adagrad))([p]),
        "functional": lambda: torch.optim._functional.adagrad([p], [p.grad], *state, **kw),
        "fused op": lambda: torch._fused_adagrad_([p], [p.grad], *state, **kw),
        "ops namespace": lambda: torch.ops.aten._fused_adagrad.default([p], [p.grad], *state, **kw),
        "redispatch": lambda: torch.ops.aten._fused_adagrad_.default.redispatch(
            torch._C.DispatchKeySet("CPU"), [p], [p.grad], *state, **kw),
        "thread": in_thread,
    }
    outcomes = {}
    for name, route in routes.items():
        try:
            route()
            outcomes[name] = "ran"
        except Exception as error:
            outcomes[name] = f"{type(error).__name__}: {error}"
    left = [f.__qualname__ for f in gc.get_objects() if type(f) is types.FunctionType
            and f.__code__.co_filename == module.__file__]
    adam = torch.optim.Adam([p], lr=0.1)
    adam.step()
    namespace = {}
    exec(compile(stub, "stub", "exec"), namespace)
    print(json.dumps({"outcomes": outcomes, "left": left, "seconds": seconds, "adam": p.tolist(),
                      "stub_names": sorted(n for n in namespace if not n.startswith("__")),
                      "doc": torch.optim.Adagrad.__doc__}))
''')


@pytest.fixture(scope="module")
def removed() -> dict:
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(INSIDE),
                             json.dumps(forbidden.removals(ADAGRAD))],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_every_route_in_the_process_lands_on_the_stub_and_names_the_rule(removed):
    wrong = {route: how for route, how in removed["outcomes"].items()
             if not how.startswith("ForbiddenAPI: ") or "is not allowed in this exercise" not in how}
    assert not wrong, wrong
    assert len(removed["outcomes"]) == 11


def test_no_function_keeps_torchs_code_and_the_rest_of_torch_works(removed):
    assert removed["left"] == []
    assert removed["adam"] != [1.0, 1.0, 1.0]  # Adam stepped: the optimizers around it are intact
    assert "is not allowed" in removed["doc"]  # the docstring with the algorithm is gone too
    print(f"removal took {removed['seconds'] * 1000:.0f} ms")


def test_the_stub_text_keeps_every_name_other_modules_import(removed):
    import torch.optim.adagrad as module

    own = {name for name, value in vars(module).items() if getattr(value, "__module__", "") == module.__name__}
    assert own <= set(removed["stub_names"]), own - set(removed["stub_names"])
    assert {"ForbiddenAPI", "_make_sparse", "adagrad", "Adagrad"} <= set(removed["stub_names"])


def test_the_removal_of_04_is_declared_in_its_source():
    [rule] = [r for r in ADAGRAD if r.remove]
    assert forbidden.removals(ADAGRAD) == [{
        "message": f"{rule.message()} ({forbidden.REMOVED})", "modules": ["torch.optim.adagrad"],
        "ops": ["aten::_fused_adagrad_", "aten::_fused_adagrad"]}]
    assert not any(r.remove for r in forbidden.rules("01_strides", course_root=ROOT))  # as_strided stays


def test_a_bad_remove_entry_is_refused_naming_the_file_and_key(tmp_path):
    source = ROOT / "solutions" / "02_einops" / "02_einops.py"
    target = tmp_path / "solutions" / "02_einops" / "02_einops.py"
    target.parent.mkdir(parents=True)
    text = source.read_text()
    header = ("#   autograder:\n#     forbidden:\n#     - rule: x\n#       why: y\n#       names: [a.b]\n"
              "#       remove: [\"os; rm -rf /\"]\n")
    target.write_text(text.replace("# jupyter:\n", "# jupyter:\n" + header, 1))
    with pytest.raises(SourceError) as raised:
        forbidden.rules("02_einops", course_root=tmp_path)
    assert "'remove'" in str(raised.value) and "02_einops.py" in str(raised.value)


def test_a_copy_of_the_library_is_told_from_an_own_implementation():
    library = forbidden.module_source("torch.optim.adagrad")
    assert library and "class Adagrad" in library
    assert forbidden.copied_share(library, library) == 1.0
    own = "\n".join(samples.reference_solutions("04_adagrad", course_root=ROOT).values())
    assert forbidden.copied_share(own, library) < 0.1
    reformatted = "\n".join("    " + line.strip() for line in library.splitlines())
    assert forbidden.copied_share(reformatted, library) >= forbidden.COPY_SHARE


def test_shipped_copies_are_disarmed_alone_and_in_a_zip(tmp_path):
    import io
    import zipfile

    library = forbidden.module_source("torch.optim.adagrad")
    (tmp_path / "mine.py").write_text("def helper():\n    return 1\n")
    (tmp_path / "copy.py").write_text(library)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("inner/adagrad.py", library)
        archive.writestr("inner/ok.py", "x = 1\n")
    (tmp_path / "extras.zip").write_bytes(buffer.getvalue())
    said = forbidden.disarm_library_copies(tmp_path, ADAGRAD)
    assert [line.split(":")[0] for line in said] == ["copy.py", "extras.zip"], said
    assert all("is not allowed in this exercise" in line for line in said)
    assert (tmp_path / "mine.py").read_text() == "def helper():\n    return 1\n"
    assert "raise ForbiddenAPI(" in (tmp_path / "copy.py").read_text()
    with zipfile.ZipFile(tmp_path / "extras.zip") as archive:
        assert "raise ForbiddenAPI(" in archive.read("inner/adagrad.py").decode()
        assert archive.read("inner/ok.py") == b"x = 1\n"
    assert forbidden.disarm_library_copies(tmp_path, forbidden.rules("02_einops", course_root=ROOT)) == []
    assert Path(tmp_path / "copy.py").exists()


def test_the_sentence_a_zh_tw_student_reads_is_in_zh_tw():
    from autograder.i18n.messages import translate

    [removal] = forbidden.removals(ADAGRAD)
    assert removal["message"].endswith(f"({forbidden.REMOVED})")
    shown = translate(f"AdaGrad.step: raised ForbiddenAPI: {removal['message']} [seed 5]", "zh-TW")
    assert "不允許" in shown and "is not allowed" not in shown and shown.endswith("〔種子 5〕"), shown


AHEAD = textwrap.dedent('''
    import gc, json, os, sys, types
    sys.path.insert(0, sys.argv[1])
    import torch
    import removal
    removals = json.loads(sys.argv[2])
    removal.find_ahead(removals)  # the template, before it forks a notebook
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the notebook's process: the walk must not happen again here
        walk = gc.get_objects
        gc.get_objects = lambda *a: (_ for _ in ()).throw(AssertionError("walked again"))
        removal.remove(removals)
        gc.get_objects = walk
        p = torch.nn.Parameter(torch.ones(3))
        try:
            torch.optim.Adagrad([p])
            outcome = "ran"
        except Exception as error:
            outcome = type(error).__name__
        file = sys.modules["torch.optim.adagrad"].__file__
        left = [f.__qualname__ for f in gc.get_objects() if type(f) is types.FunctionType
                and f.__code__.co_filename == file]
        os.write(write, json.dumps({"outcome": outcome, "left": left}).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = json.loads(os.read(read, 1 << 16))
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.ones(3)
    torch.optim.Adagrad([p], lr=0.1).step()  # the template's own torch is untouched
    print(json.dumps({"child": child, "parent": p.tolist()}))
''')


def test_functions_found_ahead_in_the_template_are_removed_in_the_fork_only():
    """``find_ahead`` walks the template's objects once; a forked notebook's ``remove`` changes those
    same functions without walking again, and the template keeps torch's AdaGrad."""
    result = subprocess.run([sys.executable, "-c", AHEAD, str(INSIDE),
                             json.dumps(forbidden.removals(ADAGRAD))],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["child"] == {"outcome": "ForbiddenAPI", "left": []}
    assert found["parent"] != [1.0, 1.0, 1.0]
