"""The execute step, child side: run one notebook's code cells in-process and report each cell's outputs.

This module runs inside a child forked from the warm template process (see ``workers.py``), which has
already imported torch, numpy, einops, jaxtyping and beartype. The child applies the submission's
limits (environment, working directory, address-space limit, threads), creates a fresh IPython
``InteractiveShell`` — the same shell class an ipykernel kernel uses, so tracebacks, ``_render_traceback_``
and warnings behave as in ``nbgrader autograde`` — and executes the code cells in order, the way
nbclient does (empty cells and ``skip-execution`` cells are skipped; errors do not stop the run).

Outputs are captured in nbformat form (stream / display_data / execute_result / error) and sent to the
parent one cell at a time over a pipe: ``("start", index)`` before a cell, ``("cell", index, outputs,
execution_count)`` after it, ``("done", info)`` at the end. If the child dies or is killed, the parent
still holds every finished cell and knows which one was running.
"""

from __future__ import annotations

import ctypes
import io
import os
import resource
import signal
import sys
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

SKIP_TAG = "skip-execution"  # nbclient's default skip_cells_with_tag


@dataclass(frozen=True)
class ExecutionJob:
    """What a child needs to execute one notebook (picklable, small)."""

    cells: list[tuple[int, str, list[str]]]  # (index, source, tags) of every code cell
    workdir: str
    timeout: float | None  # seconds per cell (None: no limit)
    address_space_bytes: int | None  # RLIMIT_AS for the child (None: no limit)
    threads: int
    env: dict[str, str] = field(default_factory=dict)


class CellTimeoutError(BaseException):
    """Raised inside a cell that ran past the per-cell time limit (a BaseException, like nbgrader's
    KeyboardInterrupt, so a student's ``except Exception`` cannot swallow it)."""


class _Recorder:
    """Collects the current cell's outputs in nbformat v4 form."""

    def __init__(self) -> None:
        self.outputs: list[dict[str, Any]] = []

    def stream(self, name: str, text: str) -> None:
        if not text:
            return
        last = self.outputs[-1] if self.outputs else None
        if last is not None and last["output_type"] == "stream" and last["name"] == name:
            last["text"] += text
        else:
            self.outputs.append({"output_type": "stream", "name": name, "text": text})

    def display(self, data: dict, metadata: dict | None) -> None:
        self.outputs.append({"output_type": "display_data", "data": dict(data),
                             "metadata": dict(metadata or {})})

    def result(self, data: dict, metadata: dict | None, count: int | None) -> None:
        self.outputs.append({"output_type": "execute_result", "data": dict(data),
                             "metadata": dict(metadata or {}), "execution_count": count})

    def error(self, ename: str, evalue: str, traceback: list[str]) -> None:
        self.outputs.append({"output_type": "error", "ename": ename, "evalue": evalue,
                             "traceback": list(traceback)})

    def clear(self) -> None:
        self.outputs = []


class _CellStream(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr`` replacement that records stream outputs."""

    def __init__(self, recorder: _Recorder, name: str) -> None:
        self._recorder, self.name = recorder, name

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._recorder.stream(self.name, text)
        return len(text)

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


def _make_shell(recorder: _Recorder):
    """An InteractiveShell whose tracebacks, displays and results land in ``recorder``."""
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    class RecordingDisplayHook(DisplayHook):
        def write_output_prompt(self) -> None:
            pass

        def write_format_data(self, format_dict, md_dict=None) -> None:
            recorder.result(format_dict, md_dict, self.prompt_count)

        def finish_displayhook(self) -> None:
            pass

    class RecordingDisplayPublisher(DisplayPublisher):
        def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
            recorder.display(data, metadata)

        def clear_output(self, wait=False):
            recorder.clear()

    class RecordingShell(InteractiveShell):
        displayhook_class = RecordingDisplayHook
        display_pub_class = RecordingDisplayPublisher

        def _showtraceback(self, etype, evalue, stb):
            sys.stdout.flush()
            sys.stderr.flush()
            recorder.error(str(etype.__name__), str(evalue), stb)

    config = Config()
    config.HistoryManager.hist_file = ":memory:"  # as nbgrader's Execute passes to its kernels
    return RecordingShell.instance(config=config)


class _FdCapture:
    """Sends what C code writes to file descriptors 1 and 2 into the cell's stream outputs
    (ipykernel does the same), read back after each cell."""

    def __init__(self, workdir: str) -> None:
        self._files = {}
        for fd, name in ((1, "stdout"), (2, "stderr")):
            path = os.path.join(workdir, f".autograder-fd{fd}-{os.getpid()}")
            handle = open(path, "w+b")  # noqa: SIM115 - lives as long as the child
            os.unlink(path)
            os.dup2(handle.fileno(), fd)
            self._files[name] = [handle, 0]
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        try:
            self._libc = ctypes.CDLL(None)
        except OSError:  # pragma: no cover - non-glibc platforms
            self._libc = None

    def drain(self, recorder: _Recorder) -> None:
        if self._libc is not None:
            self._libc.fflush(None)
        for name, entry in self._files.items():
            handle, offset = entry
            handle.seek(offset)
            data = handle.read()
            entry[1] = offset + len(data)
            if data:
                recorder.stream(name, data.decode("utf-8", errors="replace"))


def _apply_limits(job: ExecutionJob) -> None:
    try:  # die with the template (which dies with the grading process): no orphans after SIGKILL
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - non-Linux
        pass
    os.environ.update(job.env)
    os.chdir(job.workdir)
    sys.path.insert(0, job.workdir)  # as a kernel started in the notebook's directory
    if job.address_space_bytes is not None:
        resource.setrlimit(resource.RLIMIT_AS, (job.address_space_bytes, job.address_space_bytes))
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(max(1, job.threads))


def _on_alarm(signum, frame):
    raise CellTimeoutError("cell ran past the time limit")


def run_notebook(job: ExecutionJob, conn: Connection) -> None:
    """Child entry point: execute ``job.cells`` in order, streaming results to ``conn``."""
    _apply_limits(job)
    fd_capture = _FdCapture(job.workdir)
    recorder = _Recorder()
    sys.stdout = _CellStream(recorder, "stdout")
    sys.stderr = _CellStream(recorder, "stderr")
    shell = _make_shell(recorder)
    signal.signal(signal.SIGALRM, _on_alarm)
    for index, source, tags in job.cells:
        if not source.strip() or SKIP_TAG in tags:
            continue
        conn.send(("start", index))
        recorder.clear()
        try:
            if job.timeout:
                signal.setitimer(signal.ITIMER_REAL, job.timeout)
            try:
                shell.run_cell(source, store_history=True)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        except CellTimeoutError:  # fired between run_cell's own handlers
            recorder.error("CellTimeoutError", f"cell ran past the {job.timeout:g} s time limit", [
                f"CellTimeoutError: cell ran past the {job.timeout:g} s time limit"])
        fd_capture.drain(recorder)
        _mark_timeout(recorder, job.timeout)
        conn.send(("cell", index, recorder.outputs, shell.execution_count - 1))
    conn.send(("done", {"pid": os.getpid()}))
    conn.close()
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown (atexit of the template's libraries)


def _mark_timeout(recorder: _Recorder, timeout: float | None) -> None:
    """Give a timed-out cell nbgrader's wording: a ``CellTimeoutError`` error output."""
    for output in recorder.outputs:
        if output["output_type"] == "error" and output["ename"] == "CellTimeoutError":
            output["evalue"] = f"cell ran past the {timeout:g} s time limit"
            output["traceback"] = [f"\x1b[0;31mCellTimeoutError\x1b[0m: {output['evalue']}"]
