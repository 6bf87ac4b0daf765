"""Forbidden implementations taken out of a notebook's process (untrusted side, before student code).

An exercise may forbid a library's implementation of what it asks for (04: torch's AdaGrad). Reading
the student's cells for it is the trusted grader's static review (``autograder/forbidden.py``); here
the implementation is removed, so that every route to it lands on a stub that raises ``ForbiddenAPI``
naming the rule: an alias, ``getattr`` with a computed name, ``importlib`` (``import_module``,
``reload``), ``__import__``, ``sys.modules``, a subclass, a method borrowed from the class, an object
found by ``gc``, a thread, a pickle, a fresh interpreter started by the notebook, and the source read
back with ``inspect.getsource``, ``open`` + ``exec`` or ``marshal`` of the cached bytecode.

- ``stub_source``: the text that stands in for a removed module: every name it defined (so the
  packages that import it still import), each raising ``ForbiddenAPI``; importing it also gives the
  named dispatcher operators (a fused kernel registered in C++) a raising kernel on every backend.
- ``files_to_cover``: where that text goes, for ``isolation.cover_files`` (read-only binds over the
  module's source file and its cached bytecode, in the notebook's own mount namespace).
- ``remove``: in the running process (torch was imported by the template before the fork), every
  function whose code comes from a removed module's file is given the stub's code in place, so every
  reference to it, wherever it is kept, now raises; the classes lose their docstrings, ``linecache``
  forgets the file, and the operators get their raising kernels.

The registration handles of those kernels are kept alive by a reference count only: nothing in Python
reaches them, so nothing can unregister them. The checker, a separate process, keeps the real
implementation for its reference. Standard library and torch only.
"""

from __future__ import annotations

import gc
import glob
import linecache
import os
import sys
import types
import warnings
from typing import Any

BACKENDS = ("CPU", "CUDA", "Meta", "CompositeExplicitAutograd")
_CLASS_MARK = "<the ForbiddenAPI class>"  # a constant of the stub code, replaced by the class


class ForbiddenAPI(RuntimeError):
    """A forbidden implementation was called: the exercise asks for your own."""


def message(removal: dict[str, Any]) -> str:
    """What the student reads (written by the trusted side: ``forbidden.removals``)."""
    return str(removal["message"])


def stub_source(module: types.ModuleType, removal: dict[str, Any]) -> str:
    """The text of ``module`` as removed: its own functions and classes, each raising; its operators
    overridden on import."""
    text = message(removal)
    lines = [f'"""{module.__name__}, removed by the course\'s grader: {text}"""', "",
             "class ForbiddenAPI(RuntimeError):",
             '    """A forbidden implementation was called: the exercise asks for your own."""', "",
             "def _removed(*args, **kwargs):", f"    raise ForbiddenAPI({text!r})", ""]
    for name, value in sorted(vars(module).items()):
        if getattr(value, "__module__", None) != module.__name__ or not name.isidentifier():
            continue
        if isinstance(value, type):
            lines += [f"class {name}:", f"    {text!r}", "    def __init__(self, *args, **kwargs):",
                      "        _removed()", ""]
        elif callable(value):
            lines.append(f"{name} = _removed")
    if isinstance(getattr(module, "__all__", None), (list, tuple)):
        lines.append(f"__all__ = {[str(n) for n in module.__all__]!r}")
    if removal.get("ops"):
        lines += ["", "def _override_operators():", "    import ctypes, warnings, torch",
                  f"    ops, backends = {_op_names(removal['ops'])!r}, {list(BACKENDS)!r}",
                  "    handle = torch._C._dispatch_library('IMPL', 'aten', '')",
                  "    with warnings.catch_warnings():",
                  "        warnings.simplefilter('ignore')",
                  "        for op in ops:", "            for key in backends:",
                  "                try:",
                  "                    handle.impl(op, getattr(torch._C.DispatchKey, key), _removed)",
                  "                except Exception:", "                    pass",
                  "    ctypes.pythonapi.Py_IncRef(ctypes.py_object(handle))", "",
                  "try:", "    _override_operators()", "except Exception:", "    pass",
                  "del _override_operators"]
    return "\n".join(lines) + "\n"


def files_to_cover(removals: list[dict[str, Any]]) -> dict[str, bytes]:
    """Path -> what covers it: each removed module's source file gets its stub text, its cached
    bytecode (any optimisation level) an empty file, which the import system skips."""
    cover: dict[str, bytes] = {}
    for removal in removals:
        for name in removal.get("modules", []):
            module = _loaded(name)
            path = getattr(module, "__file__", None) if module else None
            if module is None or not path or not os.path.isfile(path):
                continue
            cover[os.path.realpath(path)] = stub_source(module, removal).encode()
            stem = os.path.splitext(os.path.basename(path))[0]
            for cached in glob.glob(os.path.join(os.path.dirname(path), "__pycache__", stem + ".*")):
                cover[os.path.realpath(cached)] = b""
    return cover


def remove(removals: list[dict[str, Any]]) -> list[str]:
    """Take the removed modules' code out of this process (see the module docstring); returns the
    modules removed."""
    done = []
    for removal in removals:
        text = message(removal)
        files = _module_files(removal)
        for name in files.values():
            for value in vars(sys.modules[name]).values():
                if isinstance(value, type) and value.__module__ == name:
                    _set_doc(value, text)
            done.append(name)
        functions = _FOUND.get(tuple(files)) if files else []
        if functions is None:  # not found ahead in the template: walk this process's objects
            functions = _functions_from(files)
        stubs: dict[int, types.CodeType] = {}
        for obj in functions:
            count = len(obj.__code__.co_freevars)
            if count not in stubs:
                stubs[count] = _stub_code(count, text)
            obj.__code__ = stubs[count].replace(co_name=obj.__code__.co_name,
                                                co_qualname=obj.__code__.co_qualname)
        for path in files:
            linecache.cache.pop(path, None)
        if removal.get("ops"):
            _override_operators(_op_names(removal["ops"]), text)
    return done


# module files -> their functions, found by the template before it forks a notebook (find_ahead)
_FOUND: dict[tuple[str, ...], list[types.FunctionType]] = {}


def find_ahead(removals: list[dict[str, Any]]) -> None:
    """In the template, before it forks a notebook: find the removed modules' functions once (a walk
    of every object, a tenth of a second with torch loaded), not in every notebook's process. The
    notebook's process is a fork: ``remove`` then changes the same objects there, and only there."""
    for removal in removals:
        files = _module_files(removal)
        if files and tuple(files) not in _FOUND:
            _FOUND[tuple(files)] = _functions_from(files)


def _module_files(removal: dict[str, Any]) -> dict[str, str]:
    """The removed modules' source files (real paths) -> module names, for those that load."""
    files = {}
    for name in removal.get("modules", []):
        module = _loaded(name)
        path = getattr(module, "__file__", None) if module else None
        if module is not None and path:
            files[os.path.realpath(path)] = name
    return files


def _functions_from(files: dict[str, str]) -> list[types.FunctionType]:
    """Every function of this process whose code comes from one of ``files``."""
    where: dict[str, bool] = {}  # a code file name -> whether it is one of ``files``
    found = []
    function = types.FunctionType
    for obj in gc.get_objects():
        if type(obj) is not function:  # type(), not isinstance(): no __class__ property runs
            continue
        filename = obj.__code__.co_filename
        if filename not in where:
            where[filename] = _realpath(filename) in files
        if where[filename]:
            found.append(obj)
    return found


def _loaded(name: str) -> types.ModuleType | None:
    module = sys.modules.get(name)
    if module is None:
        try:
            __import__(name)
        except Exception:
            return None
        module = sys.modules.get(name)
    return module


def _realpath(path: str) -> str:
    return os.path.realpath(path) if path and not path.startswith("<") else path


def _set_doc(cls: type, text: str) -> None:
    try:
        cls.__doc__ = text
    except (AttributeError, TypeError):
        pass


def _stub_code(freevars: int, text: str) -> types.CodeType:
    """Code that raises ``ForbiddenAPI(text)`` with ``freevars`` free variables (a function's code can
    only be replaced by code with as many), looking up no global name of the function it goes into."""
    names = [f"_free{index}" for index in range(freevars)]
    source = ["def _outer():", *[f"    {name} = None" for name in names],
              "    def _removed(*args, **kwargs):",
              *([f"        ({', '.join(names)},)"] if names else []),
              f"        raise ({_CLASS_MARK!r})({text!r})", "    return _removed"]
    namespace: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "'str' object is not callable": it will be the class
        exec(compile("\n".join(source), "<removed by the grader>", "exec"), namespace)
    code = namespace["_outer"]().__code__
    return code.replace(co_consts=tuple(ForbiddenAPI if c == _CLASS_MARK else c
                                        for c in code.co_consts))


def _op_names(ops: list[str]) -> list[str]:
    """``aten::_fused_adagrad_`` -> every overload's name as the dispatcher's ``impl`` takes it."""
    import torch

    names = []
    for op in ops:
        base = op.split("::", 1)[-1]
        packet = getattr(torch.ops.aten, base, None)
        overloads = packet.overloads() if packet is not None else ["default"]
        names += [base if overload == "default" else f"{base}.{overload}" for overload in overloads]
    return names


def _override_operators(names: list[str], text: str) -> None:
    import ctypes

    import torch

    def removed(*args, **kwargs):
        raise ForbiddenAPI(text)

    handle = torch._C._dispatch_library("IMPL", "aten", "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
        for name in names:
            for key in BACKENDS:
                try:
                    handle.impl(name, getattr(torch._C.DispatchKey, key), removed)
                except Exception:  # no such overload or key on this build
                    pass
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(handle))  # alive for good, reachable by nothing
