"""The one progress bar of grading (trusted side, the instructor's terminal): done of all, the ETA,
a status (the Slurm chunks by state) and, below the bar, what is running now and for how long.

A hung notebook must be visible while it holds the batch: each submission whose notebook started in
a sandbox (``started``) is listed until it is recorded (``finished``), the longest-running first
(``SHOWN_RUNNING`` of them, then "and N more"), each with its seconds so far — never the name of the
submission that finished last. Nothing when disabled.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any

SHOWN_RUNNING = 4  # running submissions listed below the bar (the longest-running ones)


class ProgressBar:
    """``with ProgressBar(enabled, label="grading on cpu", total=n) as bar: bar.update(...)``.

    ``console``: where to draw (default: a rich Console on stderr); ``clock``: seconds, for tests."""

    def __init__(self, enabled: bool, *, label: str, total: int | None, done: int = 0,
                 console: Any = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled, self.label, self.total, self.done = enabled, label, total, done
        self.status = ""
        self._console, self._clock = console, clock
        self._running: dict[Hashable, tuple[str, float]] = {}  # key -> (label, started at)
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> ProgressBar:
        if self.enabled and self.total:
            from rich.console import Console, RenderableType
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.text import Text

            owner = self

            class _WithRunning(Progress):
                def get_renderables(self) -> Iterable[RenderableType]:
                    yield self.make_tasks_table(self.tasks)
                    lines = owner.running_lines()
                    if lines:
                        yield Text("\n".join(lines))

            self._bar = _WithRunning(TextColumn(self.label, markup=False), BarColumn(),
                                     MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                                     TimeRemainingColumn(),
                                     TextColumn("{task.description}", markup=False),
                                     console=self._console or Console(stderr=True))
            self._bar.start()
            self._task = self._bar.add_task("", total=self.total, completed=self.done)
        return self

    def started(self, key: Hashable, label: str) -> None:
        """A notebook of ``key`` (shown as ``label``, e.g. ``01_strides/ivan``) started to run; its
        clock starts at its first notebook."""
        self._running.setdefault(key, (label, self._clock()))
        self.refresh()

    def finished(self, key: Hashable) -> None:
        """``key`` is recorded (or failed): no longer running."""
        self._running.pop(key, None)

    def running_lines(self) -> list[str]:
        """``running  01_strides/ivan  193 s`` per running submission, the longest-running first."""
        now = self._clock()
        running = sorted(self._running.values(), key=lambda item: item[1])
        lines = [f"  running {label}  {now - since:.0f} s" for label, since in running[:SHOWN_RUNNING]]
        if len(running) > SHOWN_RUNNING:
            lines.append(f"  and {len(running) - SHOWN_RUNNING} more running")
        return lines

    def advance(self, status: str | None = None) -> None:
        """One more done; ``status`` (when given) shown after the bar."""
        self.update(completed=self.done + 1, status=status)

    def update(self, *, completed: int | None = None, status: str | None = None) -> None:
        if completed is not None:
            self.done = completed
        if status is not None:
            self.status = status
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, description=self.status)

    def refresh(self) -> None:
        if self._bar is not None:
            self._bar.refresh()

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.stop()
