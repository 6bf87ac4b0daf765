"""Running notebook code cells in an IPython shell and capturing their outputs in nbformat form.

Used on both sides of the trust boundary: inside the sandbox for the student's cells, and in the
trusted checker for grade cells. Standard library and IPython only (the sandbox imports this file as a
top-level module).

The shell is IPython's ``InteractiveShell`` — the class an ipykernel kernel uses — so tracebacks,
``_render_traceback_`` and warnings look as they do under ``nbgrader autograde``.
"""

from __future__ import annotations

import ctypes
import io
import os
import signal
import sys
from typing import Any

SKIP_TAG = "skip-execution"  # nbclient's default skip_cells_with_tag


class CellTimeoutError(BaseException):
    """Raised inside a cell that ran past the per-cell time limit (a BaseException, like nbgrader's
    KeyboardInterrupt, so a student's ``except Exception`` cannot swallow it)."""


class Recorder:
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


class CellStream(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr`` replacement that records stream outputs."""

    def __init__(self, recorder: Recorder, name: str) -> None:
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


def warm_up() -> None:
    """Pay once, in a template that forks notebook processes, what each one's first shell and first
    traceback would pay again: IPython's completer and history modules, stack_data, pygments' lexer
    tables and formatter, ``inspect``'s module-file map (a scan of every loaded module). Starts no
    thread and leaves no shell behind."""
    import sqlite3  # noqa: F401  (the shell's HistoryManager, even for ":memory:")

    import IPython.core.completer  # noqa: F401
    from IPython.core import ultratb
    from IPython.core.interactiveshell import InteractiveShell

    formatter = ultratb.AutoFormattedTB(mode=InteractiveShell.xmode.default_value,
                                        theme_name=InteractiveShell.colors.default_value,
                                        tb_offset=1)
    try:
        raise AssertionError("warm-up")
    except AssertionError:
        formatter.structured_traceback(*sys.exc_info())


def make_shell(recorder: Recorder):
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


class FdCapture:
    """Sends what C code writes to file descriptors 1 and 2 into the cell's stream outputs
    (ipykernel does the same), read back after each cell."""

    def __init__(self, workdir: str) -> None:
        self._files: dict[str, list[Any]] = {}  # name -> [its file, the bytes read back so far]
        for fd, name in ((1, "stdout"), (2, "stderr")):
            path = os.path.join(workdir, f".autograder-fd{fd}-{os.getpid()}")
            handle = open(path, "w+b")  # noqa: SIM115 - lives as long as the child
            os.unlink(path)
            os.dup2(handle.fileno(), fd)
            self._files[name] = [handle, 0]
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        try:
            self._libc: ctypes.CDLL | None = ctypes.CDLL(None)
        except OSError:  # pragma: no cover - non-glibc platforms
            self._libc = None

    def drain(self, recorder: Recorder) -> None:
        if self._libc is not None:
            self._libc.fflush(None)
        for name, entry in self._files.items():
            handle, offset = entry
            handle.seek(offset)
            data = handle.read()
            entry[1] = offset + len(data)
            if data:
                recorder.stream(name, data.decode("utf-8", errors="replace"))


def _on_alarm(signum, frame):
    raise CellTimeoutError("cell ran past the time limit")


class CellClock:
    """A per-cell alarm that raises ``CellTimeoutError`` in whatever code runs when it fires."""

    def __init__(self) -> None:
        signal.signal(signal.SIGALRM, _on_alarm)

    @staticmethod
    def start(seconds: float | None) -> None:
        if seconds:
            signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))

    @staticmethod
    def stop() -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)


def timeout_error(timeout: float | None) -> dict[str, Any]:
    """The error output of a cell that ran past ``timeout`` seconds (nbgrader's wording)."""
    evalue = f"cell ran past the {timeout or 0:g} s time limit"
    name = CellTimeoutError.__name__  # protocol.Failure.CELL_TIMEOUT
    return {"output_type": "error", "ename": name, "evalue": evalue,
            "traceback": [f"\x1b[0;31m{name}\x1b[0m: {evalue}"]}


def mark_timeout(recorder: Recorder, timeout: float | None) -> None:
    """Give a timed-out cell nbgrader's wording: a ``CellTimeoutError`` error output."""
    for index, output in enumerate(recorder.outputs):
        if output["output_type"] == "error" and output["ename"] == CellTimeoutError.__name__:
            recorder.outputs[index] = timeout_error(timeout)


REPLY_OUTPUT_CHARS = 4 * 2**20  # output text one reply carries (JSON-escaped, well under wire's header cap)


def bound_outputs(outputs: list[dict[str, Any]], limit: int = REPLY_OUTPUT_CHARS) -> list[dict[str, Any]]:
    """The outputs that fit in ``limit`` characters, in order (a stream cut at the limit), and a note
    saying how much was dropped: a flood of output costs its own cell, never the channel."""
    kept: list[dict[str, Any]] = []
    used = dropped = 0
    for output in outputs[:1000]:
        size = sum(len(str(v)) for v in output.values())
        if used + size <= limit:
            kept.append(output)
            used += size
        elif output.get("output_type") == "stream" and used < limit:
            kept.append(dict(output, text=str(output.get("text", ""))[:limit - used]))
            dropped += size - (limit - used)
            used = limit
        else:
            dropped += size
    dropped += sum(sum(len(str(v)) for v in o.values()) for o in outputs[1000:])
    if dropped:
        kept.append({"output_type": "stream", "name": "stderr",
                     "text": f"\n[output truncated by the grader: {dropped} more characters]\n"})
    return kept
