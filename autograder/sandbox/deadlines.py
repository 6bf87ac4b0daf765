"""Every time limit of one notebook, derived from its two settings and nested so that the innermost,
most graceful one fires first (trusted side: the checker, the grading parent, the sandbox template's launch).

The settings are ``timeout`` (seconds per cell) and ``notebook_timeout`` (seconds for the whole
notebook), ``GradeOptions``' fields. From them, for a cell that started at t = 0:

1. ``sandbox_alarm_s`` = timeout: the sandbox's SIGALRM (``inside/shell.CellClock``) interrupts the
   student's code, the cell ends with ``CellTimeoutError`` and loses its points, nothing else does;
2. ``channel_wait_s`` = timeout + CHANNEL_GRACE_S: the checker's channel stops waiting for an answer and
   kills the sandboxed process (code that caught or blocked the alarm);
3. ``checker_alarm_s`` = channel_wait_s + CHECKER_GRACE_S: the checker's own alarm around a grade cell,
   for a hidden check that hangs in the checker itself;
4. ``parent_kill_s`` = timeout + PARENT_GRACE_S: the grading parent SIGKILLs the checker, which has
   stopped reporting (``execute/forkserver.RunningNotebook``);
5. ``cpu_rlimit_s``: the student's process gets RLIMIT_CPU = timeout × cells × CPU_FACTOR + CPU_SLACK_S
   (threads count toward it: a last stop if every clock above failed).

The notebook as a whole: the parent kills the checker ``notebook_timeout`` seconds after it started.
A timeout of None or <= 0 means no per-cell limit (and no CPU rlimit).

A cell that times out while its sandbox got far less CPU than the wall time it was charged, because
it waited for one (``starved_timeout``: the machine's other load, a quota), did not have its time:
the machine's fault, a grader fault (retried once, then listed for review), never a score. A cell
that sleeps or waits for input gets little CPU too, but does not wait for one: its timeout counts.

The instructor's locked cells that run before any of the student's code (the imports) get at most
``SETUP_CELL_S`` (``set_up_timeout``): warm, they take milliseconds, and a hang there is the grading
machine's fault (``errors.GraderFault``: retried, never a score), so it is cut short.
"""

from __future__ import annotations

from dataclasses import dataclass

CHANNEL_GRACE_S = 2.0  # the sandbox's alarm gets this long to end the cell before the channel kills
CHECKER_GRACE_S = 1.0  # the checker's own alarm comes this long after the channel gives up
PARENT_GRACE_S = 5.0  # the parent's SIGKILL comes this long after the cell's limit
CPU_FACTOR = 4  # CPU seconds per wall second of the limit (a few threads at full speed)
CPU_SLACK_S = 60  # CPU seconds on top (imports, the template's own start)
SETUP_CELL_S = 60.0  # the most a set-up cell before the student's code may take
STARVED_CPU_SHARE = 0.25  # a timed-out cell that ran less than this share of one CPU ...
STARVED_WAIT_SHARE = 0.5  # ... and waited runnable at least this share of its time was starved


@dataclass(frozen=True)
class Deadlines:
    """The limits of one notebook (seconds; None: no limit)."""

    timeout: float | None  # per cell
    notebook_timeout: float | None = None
    cells: int = 1

    @property
    def cell_s(self) -> float | None:
        return self.timeout if self.timeout and self.timeout > 0 else None

    @property
    def sandbox_alarm_s(self) -> float | None:
        return self.cell_s

    @property
    def channel_wait_s(self) -> float | None:
        return None if self.cell_s is None else self.cell_s + CHANNEL_GRACE_S

    @property
    def checker_alarm_s(self) -> float | None:
        wait = self.channel_wait_s
        return None if wait is None else wait + CHECKER_GRACE_S

    @property
    def parent_kill_s(self) -> float | None:
        return None if self.cell_s is None else self.cell_s + PARENT_GRACE_S

    @property
    def cpu_rlimit_s(self) -> int | None:
        if self.cell_s is None:
            return None
        return int(self.cell_s * max(self.cells, 1) * CPU_FACTOR + CPU_SLACK_S)

    @property
    def notebook_s(self) -> float | None:
        return self.notebook_timeout if self.notebook_timeout and self.notebook_timeout > 0 else None


def set_up_timeout(timeout: float | None) -> float:
    """The per-cell limit of a set-up cell that runs before any of the student's code."""
    cell = Deadlines(timeout).cell_s
    return SETUP_CELL_S if cell is None else min(cell, SETUP_CELL_S)


def channel_wait_s(remaining: float | None) -> float | None:
    """How long the channel waits for a request that has ``remaining`` seconds (step 2 above)."""
    return Deadlines(remaining).channel_wait_s if remaining is not None else None


def starved_timeout(index: int, wall_s: float, ran_s: float, waited_s: float) -> str | None:
    """Why cell ``index``, timed out after ``wall_s`` seconds in which its sandbox's threads ran
    ``ran_s`` and waited runnable ``waited_s`` CPU seconds, was starved by the machine (None: it
    was not, the timeout counts)."""
    if wall_s <= 0 or ran_s >= STARVED_CPU_SHARE * wall_s or waited_s < STARVED_WAIT_SHARE * wall_s:
        return None
    return (f"cell {index} timed out after {wall_s:.1f} s in which the machine gave the notebook "
            f"{ran_s:.2f} s of CPU while it waited {waited_s:.1f} s for one: the grading "
            "machine was starved, not the notebook slow")
