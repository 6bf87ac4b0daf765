"""The one progress bar of grading (trusted side, the instructor's terminal): done of all, the ETA,
and a status line (the submission just graded, or the Slurm chunks by state). Nothing when disabled."""

from __future__ import annotations

from typing import Any


class ProgressBar:
    """``with ProgressBar(enabled, label="grading on cpu", total=n) as bar: bar.update(...)``."""

    def __init__(self, enabled: bool, *, label: str, total: int | None, done: int = 0) -> None:
        self.enabled, self.label, self.total, self.done = enabled, label, total, done
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self) -> ProgressBar:
        if self.enabled and self.total:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(TextColumn(self.label, markup=False), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                                 TimeRemainingColumn(), TextColumn("{task.description}", markup=False),
                                 console=Console(stderr=True))
            self._bar.start()
            self._task = self._bar.add_task("", total=self.total, completed=self.done)
        return self

    def advance(self, status: str = "") -> None:
        """One more done; ``status`` shown after the bar."""
        self.update(completed=self.done + 1, status=status)

    def update(self, *, completed: int | None = None, status: str = "") -> None:
        if completed is not None:
            self.done = completed
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, description=status)

    def __exit__(self, *exc_info: object) -> None:
        if self._bar is not None:
            self._bar.stop()
