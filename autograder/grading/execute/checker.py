"""The checker (trusted side): one notebook, student cells in the sandbox, grade cells here.

This module runs in a child forked from the warm template process (see ``forkserver.py``); the child is the
*checker*, and it never runs student code. For each code cell in order:

- a **student** cell (a solution cell, or any cell the student added) is sent to the sandboxed student
  process (``autograder/sandbox/inside/template.py``) and its outputs come back as data;
- a **trusted** cell (locked, not graded: the instructor's imports and helpers, restored from the
  gradebook by nbgrader's sanitize step) runs in the sandbox; its top-level imports also run here, so
  grade cells use the checker's own ``torch``, ``np``, ``TypeCheckError``, which the student cannot
  touch. What else it defines (a helper that drives the student's code) is fetched like a student name;
- a **grade** cell (visible tests and hidden-test region) runs here, in an IPython shell, after the
  names it reads from the student's namespace are fetched: plain data by value, everything else as a
  handle (``autograder/sandbox/channel.py``). Its verdict — an error output or none — is decided here.

Progress goes to the parent one cell at a time as ``Event`` s: ``start`` (a cell began), ``cell`` (its
outputs and execution count), ``died`` (the student's process is gone; the remaining cells are not run)
and ``done``.
"""

from __future__ import annotations

import ast
import builtins
import ctypes
import os
import signal
import socket
import sys
import tempfile
import time
from enum import StrEnum
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from autograder.grading.execute.confine import confine
from autograder.grading.execute.limits import ExecutionLimits
from autograder.grading.execute.outputs import KeptFilesBudget, OutputBudget, as_text
from autograder.grading.model import GRADE, TRUSTED, NotebookProgram
from autograder.sandbox import channel
from autograder.sandbox.deadlines import Deadlines, set_up_timeout
from autograder.sandbox.inside import shell
from autograder.sandbox.inside.protocol import Failure

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

class Event(StrEnum):
    """What the checker tells the parent (``(event, *fields)`` over a pipe)."""

    START = "start"  # (index)
    CELL = "cell"  # (index, outputs, execution count, ran to completion)
    DIED = "died"  # (index or None, ename, reason)
    FILE = "file"  # (relative path, bytes): a file the notebook wrote next to itself
    DONE = "done"  # (info)


def run_notebook(program: NotebookProgram, limits: ExecutionLimits, workdir: str, scratch: str,
                 conn: Connection, data: socket.socket, kill: socket.socket,
                 memory_group: str | None = None) -> None:
    """Checker entry point: execute ``program.cells`` in order in ``workdir``, streaming ``Event`` s to
    ``conn``. ``scratch``: the checker's temporary folder (the parent made it and removes it);
    ``memory_group``: the checker's memory cgroup, joined first, while it may still write there."""
    if memory_group is not None:
        with open(os.path.join(memory_group, "cgroup.procs"), "w") as procs:
            procs.write(str(os.getpid()))
    _apply_limits(program, limits, workdir)
    if limits.confined:
        try:
            confine(workdir=workdir, scratch=scratch, hidden=limits.hidden)
        except OSError as error:  # the machine's fault, never a score: nothing is run
            conn.send((Event.DIED, None, Failure.GRADER,
                       f"the checker could not get its own view of the machine ({error})"))
            conn.send((Event.DONE, {"pid": os.getpid()}))
            os._exit(0)
    os.environ.update(HOME=scratch, IPYTHONDIR=os.path.join(scratch, ".ipython"),
                      MPLCONFIGDIR=os.path.join(scratch, "matplotlib"))
    recorder = shell.Recorder()
    sys.stdout = shell.CellStream(recorder, "stdout")
    sys.stderr = shell.CellStream(recorder, "stderr")
    checker_shell = shell.make_shell(recorder)
    shell.CellClock()
    # the checker's temporary files live in the parent's fresh folder: a path into it that a grade
    # cell passes to the student's code travels with the file's bytes (the sandbox has its own /tmp)
    tempfile.tempdir = scratch
    os.environ["TMPDIR"] = scratch
    sandbox = channel.SandboxChannel(data, kill, memmap_dir=scratch, decode_bytes=int(
        limits.memory_limit_gb * 2**30) if limits.memory_limit_gb else None)
    sandbox.on_outputs = lambda outputs: _merge(recorder, outputs)
    budget = OutputBudget()
    kept = _KeptFiles(workdir)
    channel.mirror_seeding(sandbox)
    names = _Names(checker_shell.user_ns)
    sandbox.before_request = lambda: _sync_names(sandbox, names)
    count: int | None = 0
    set_up = True  # nothing of the student's has run yet (deadlines.set_up_timeout)
    for index, source, tags, kind in program.cells:
        if not source.strip() or shell.SKIP_TAG in tags:
            continue
        set_up = set_up and kind == TRUSTED
        timeout = set_up_timeout(program.timeout) if set_up else program.timeout
        conn.send((Event.START, index))
        recorder.clear()
        try:
            completed = True  # a student or trusted cell's outputs are its outcome
            if kind == GRADE:
                completed = _run_grade_cell(checker_shell, recorder, sandbox, names, source,
                                            program.timeout)
                outputs, count = recorder.outputs, checker_shell.execution_count - 1
            else:
                outputs, count = sandbox.run_cell(source, timeout)
                kept.take(sandbox, conn)
                if kind == TRUSTED:
                    _run_quietly(checker_shell, recorder, _imports_only(source), timeout)
                    names.mark_trusted()
                    names.mark_own()
        except channel.SandboxDied as died:
            conn.send((Event.DIED, index, died.ename, died.reason))
            break
        conn.send((Event.CELL, index, budget.bound(outputs), count, completed))
        if sandbox.dead is not None:
            conn.send((Event.DIED, None, sandbox.dead.ename, sandbox.dead.reason))
            break
    sandbox.kill("the notebook is finished")
    conn.send((Event.DONE, {"pid": os.getpid()}))
    conn.close()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (atexit of the template's libraries)


_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_SHELL_NAMES = {"In", "Out", "get_ipython", "exit", "quit"}


def _plain(value: object, depth: int = 0) -> bool:
    """Plain data a grade cell may hand to the student's namespace by value: numbers, strings, bytes,
    tensors and arrays, and tuples/lists/dicts of them (never a module, function, class or object)."""
    if type(value) in _PLAIN:
        return True
    if type(value).__module__.split(".")[0] in ("torch", "numpy"):
        return type(value).__name__ in ("Tensor", "Parameter", "ndarray")
    if (type(value) is tuple or type(value) is list) and depth < 4 and len(value) <= 1000:
        return all(_plain(v, depth + 1) for v in value)
    if type(value) is dict and depth < 4 and len(value) <= 1000:
        return all(type(k) is str and _plain(v, depth + 1) for k, v in value.items())
    return False


class _KeptFiles:
    """Files the notebook's code writes next to itself (a figure, a saved array), as nbgrader keeps
    them in ``autograded/``: after each of its cells they come over from the sandbox, are written in
    this checker's folder (so a grade cell reads them) and go to the parent. Never over a file that
    was there before the notebook ran (the instructor's, the submission's), never a notebook, never
    past the notebook's ``KeptFilesBudget`` (the parent counts again)."""

    def __init__(self, workdir: str) -> None:
        self.workdir = os.path.realpath(workdir)
        self.before = {os.path.relpath(os.path.join(root, name), self.workdir)
                       for root, _, names in os.walk(self.workdir) for name in names}
        self.budget = KeptFilesBudget()  # per notebook, across its cells

    def take(self, sandbox: channel.SandboxChannel, conn: Connection) -> None:
        files, _ = sandbox.new_files()
        for relative, data in files.items():
            path = os.path.normpath(relative)
            if (path.startswith(("..", "/")) or path in self.before or path.endswith(".ipynb")
                    or not os.path.realpath(os.path.join(self.workdir, path)).startswith(
                        self.workdir + os.sep) or not self.budget.admit(path, len(data))):
                continue
            target = os.path.join(self.workdir, path)
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            except OSError:
                continue
            conn.send((Event.FILE, path, data))


class _Names:
    """Which names of the checker's namespace are its own (trusted cells, grade-cell bindings) and
    which were read from the student's namespace (refreshed before every grade cell).

    One namespace, as in a single kernel, for the names a grade cell *reads* from the student: if the
    cell deletes such a name, or rebinds it to plain data (or to one of the student's own objects, a
    handle that resolves in the sandbox), the student's namespace follows through the channel before
    the cell's next request reaches the student's code (``changes``). Nothing else is ever pushed:
    not a name the cell binds before reading it (its own ``… as _hidden``), not a module, function,
    class or object of the checker, not a name starting with ``_``."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.namespace = namespace
        self.fetched: dict[str, object] = {}
        self.trusted: set[str] = set(namespace)
        self.gone: set[str] = set()  # the student's names a grade cell deleted
        self.mark_own()

    def mark_trusted(self) -> None:
        """The names instructor cells defined here (their imports): never the student's business."""
        self.trusted |= {name for name in self.namespace if name not in self.fetched}

    def changes(self) -> tuple[list[str], dict[str, object]]:
        """What to delete in and set into the student's namespace now; afterwards the names count
        as synced."""
        deleted = [name for name in self.fetched if name not in self.namespace]
        for name in deleted:
            self.fetched.pop(name)
            self.gone.add(name)  # still the student's name: binding it again goes back there
        bound = {name: value for name, value in self.namespace.items()
                 if ((name in self.fetched and self.fetched[name] is not value) or name in self.gone)
                 and not name.startswith("_") and (_plain(value) or type(value) is channel.Remote)}
        self.gone -= set(bound)
        self.fetched.update(bound)
        return deleted, bound

    def mark_own(self) -> None:
        self.own = {name for name, value in self.namespace.items()
                    if not (name in self.fetched and self.fetched[name] is value)}

    def wanted(self, source: str) -> list[str]:
        """Names a grade cell reads (or deletes) before it binds them, and the checker does not
        define itself: those come from the student's namespace."""
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return []
        return sorted(_read_before_bound(tree) - self.own - set(dir(builtins)))


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp,
           ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _read_before_bound(tree: ast.Module) -> set[str]:
    """The names a cell reads (or deletes) at a point where the cell itself has not bound them yet,
    statement by statement; names read inside a function or comprehension count as read when the
    cell has not bound them before that statement."""
    bound: set[str] = set()
    read: set[str] = set()
    for statement in tree.body:
        read |= {node.id for node in ast.walk(statement) if isinstance(node, ast.Name)
                 and isinstance(node.ctx, ast.Load | ast.Del)} - bound
        bound |= _bound_by(statement)
    return read


def _bound_by(statement: ast.stmt) -> set[str]:
    """The names one top-level statement binds in the cell's namespace (not inside its scopes)."""
    names: set[str] = set()
    pending: list[ast.AST] = [statement]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        if isinstance(node, _SCOPES) and node is not statement:
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            pending.extend(node.decorator_list)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return names


def _run_grade_cell(checker_shell: InteractiveShell, recorder: shell.Recorder,
                    sandbox: channel.SandboxChannel, names: _Names, source: str,
                    timeout: float | None) -> bool:
    """Run one grade cell here; True when it ran to completion (its verdict, an error output or
    none, is decided). Only such a cell can earn points (``Event.CELL``'s last field; the record
    gives every other grade cell an error output). The student's process dying while its names are
    read is that process's death in this cell (``channel.SandboxDied`` goes up: ``Event.DIED``)."""
    sandbox.deadline = None if not timeout else time.monotonic() + timeout
    shell.CellClock.start(Deadlines(timeout).checker_alarm_s)
    completed = False
    try:
        wanted = names.wanted(source)
        try:
            found = sandbox.lookup(wanted) if wanted else {}
        except (channel.SandboxDied, shell.CellTimeoutError):
            raise
        except BaseException as error:  # noqa: BLE001 - the cell cannot run: it fails, saying why
            recorder.error("NameLookupError", "could not read the submission's names: "
                           f"{type(error).__name__}: {error}", [])
            return False
        for name in wanted:
            if name in found:
                names.namespace[name] = found[name]
                names.fetched[name] = found[name]
            elif name in names.fetched:  # the student deleted it since
                names.namespace.pop(name, None)
                names.fetched.pop(name, None)
        checker_shell.run_cell(source, store_history=True)
        completed = True  # the verdict is in the outputs now
        _sync_names(sandbox, names)  # what the cell's last lines did, before the next cell runs
    except shell.CellTimeoutError:  # fired between run_cell's own handlers: an error output
        checker_shell.showtraceback()
        completed = True
    except channel.SandboxDied:
        if not completed:
            raise  # died before the cell ran: Event.DIED names this cell
        # died after the verdict (applying the cell's rebindings): the next step reports it
    finally:
        shell.CellClock.stop()
        sandbox.deadline = None
    names.mark_own()
    shell.mark_timeout(recorder, timeout)
    return completed


def _sync_names(sandbox: channel.SandboxChannel, names: _Names) -> None:
    """Apply a grade cell's deletions and rebindings to the student's namespace (see ``_Names``)."""
    if sandbox.dead is not None:
        return
    deleted, bound = names.changes()
    if deleted or bound:
        try:
            sandbox.bind_names(deleted, bound)
        except (channel.SandboxDied, shell.CellTimeoutError):
            raise
        except Exception as error:  # noqa: BLE001 - shown in the grade cell, like any error
            print(f"could not update the submission's names: {type(error).__name__}: {error}",
                  file=sys.stderr)


def _run_quietly(checker_shell: InteractiveShell, recorder: shell.Recorder, source: str,
                 timeout: float | None) -> None:
    """Run instructor code in the checker too; the cell's outputs are the sandbox's, not these."""
    if not source:
        return
    saved = recorder.outputs
    recorder.outputs = []
    shell.CellClock.start(timeout)
    try:
        checker_shell.run_cell(source, store_history=False)
    except shell.CellTimeoutError:
        pass
    finally:
        shell.CellClock.stop()
        recorder.outputs = saved


def _imports_only(source: str) -> str:
    """The top-level import statements of a cell (what the checker runs of an instructor cell)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    kept: list[ast.stmt] = [node for node in tree.body
                            if isinstance(node, ast.Import | ast.ImportFrom)]
    return ast.unparse(ast.Module(body=kept, type_ignores=[])) if kept else ""


def _merge(recorder: shell.Recorder, outputs: list[dict[str, Any]]) -> None:
    """What the student's code printed while a grade cell called it goes into that cell's outputs,
    as text only: its displays, results and errors never count as the grade cell's own."""
    for output in outputs:
        text = as_text(output)
        recorder.stream(text["name"], text["text"])


def _apply_limits(program: NotebookProgram, limits: ExecutionLimits, workdir: str) -> None:
    try:  # die with the template (which dies with the grading process): no orphans after SIGKILL
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - non-Linux
        pass
    os.environ.update(program.env)
    os.chdir(workdir)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(max(1, limits.threads))
