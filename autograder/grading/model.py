"""The grading engine's data: what a submission is on its way through, and what comes out.

Trusted side. Plain dataclasses, no I/O: every other module of ``grading`` imports these, none of
them imports back. ``NotebookOutcome`` is the one result type of execution — what every executor
(local, Slurm, a service's queue) hands back for one notebook — and it travels as JSON
(``to_json``/``from_json``) when the notebook ran on another machine.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder.sandbox.inside.protocol import Failure

if TYPE_CHECKING:
    from nbformat import NotebookNode

STUDENT, TRUSTED, GRADE = "student", "trusted", "grade"  # where a code cell runs (see prepare)


@dataclass(frozen=True)
class NotebookProgram:
    """What the checker needs to execute one notebook, whatever machine runs it (picklable, small):
    where it runs (a working folder) and its limits (``ExecutionLimits``) are that machine's own."""

    cells: list[tuple[int, str, list[str], str]]  # (index, source, tags, kind) of every code cell
    timeout: float | None  # seconds per cell (None: no limit)
    env: dict[str, str] = field(default_factory=dict)  # the checker's environment additions
    sandbox_env: dict[str, str] = field(default_factory=dict)  # the student process's
    notebook_timeout: float | None = None  # seconds for the whole notebook (None: no limit)
    removed: list[dict[str, Any]] = field(default_factory=list)  # forbidden code (protocol.Removal)


@dataclass
class NotebookOutcome:
    """How one notebook's execution ended: the outputs of each cell that finished (code cell index ->
    (outputs as nbformat dicts, execution count)), and, when the run did not complete, why (``reason``),
    the cell that was running (``running_cell``) and the error name to show there."""

    outputs: dict[int, tuple[list[dict[str, Any]], int | None]] = field(default_factory=dict)
    reason: str | None = None
    running_cell: int | None = None
    failed_ename: str = Failure.KERNEL_DIED
    seconds: float = 0.0
    files: dict[str, bytes] = field(default_factory=dict)  # written next to the notebook (bounded)
    executed: bool = True  # False: --no-execute, the outputs are the submission's own
    cell_seconds: dict[int, float] = field(default_factory=dict)  # code cell index -> its run time
    # the cells the checker ran to completion: only a grade cell among them can earn points
    completed: set[int] = field(default_factory=set)
    # a notebook that did not complete: what its sandbox wrote (stderr) while it ran, the tail
    sandbox_log: str = ""
    # a cell timed out while the machine starved the notebook of CPU (``deadlines.starved_timeout``):
    # why; the executor runs it again, then reports a grader fault (never a score)
    starved: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"outputs": {str(i): [list(o), c] for i, (o, c) in self.outputs.items()},
                "reason": self.reason, "running_cell": self.running_cell,
                "failed_ename": self.failed_ename, "seconds": round(self.seconds, 3),
                "files": {path: base64.b64encode(data).decode() for path, data in self.files.items()},
                "cell_seconds": {str(i): round(s, 3) for i, s in self.cell_seconds.items()},
                "sandbox_log": self.sandbox_log, "completed": sorted(self.completed),
                "starved": self.starved}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NotebookOutcome:
        """Read back ``to_json`` (from a result file another machine wrote); a malformed one raises
        ``ValueError`` naming what is wrong."""
        try:
            outputs = {int(i): ([dict(o) for o in entry[0]],
                                None if entry[1] is None else int(entry[1]))
                       for i, entry in dict(data["outputs"]).items()}
            running = data.get("running_cell")
            return cls(outputs=outputs, reason=None if data.get("reason") is None
                       else str(data["reason"]),
                       running_cell=None if running is None else int(running),
                       failed_ename=str(data.get("failed_ename", Failure.KERNEL_DIED)),
                       seconds=float(data.get("seconds", 0.0)),
                       files={str(p): base64.b64decode(b, validate=True)
                              for p, b in dict(data.get("files", {})).items()},
                       cell_seconds={int(i): float(s)
                                     for i, s in dict(data.get("cell_seconds", {})).items()},
                       sandbox_log=str(data.get("sandbox_log", "")),
                       completed={int(i) for i in data.get("completed", ())},
                       starved=None if data.get("starved") is None else str(data["starved"]))
        except (KeyError, TypeError, ValueError, IndexError, binascii.Error) as error:
            raise ValueError(f"not a notebook outcome ({type(error).__name__}: {error})") from None


def starved_twice(notebook: str, why: str) -> str:
    """The reason a submission fails when ``notebook`` was starved of CPU on both of its runs."""
    return (f"not graded: {notebook}.ipynb was starved of CPU twice ({why}); a grader fault, not "
            "the notebook's: grade it again when the machine has CPU to spare")


@dataclass
class NotebookRun:
    """One notebook of a submission: its sanitized form, where each code cell runs, its program, and
    (once executed) its outcome."""

    name: str
    nb: NotebookNode
    kinds: dict[int, str] = field(default_factory=dict)  # code cell index -> STUDENT/TRUSTED/GRADE
    program: NotebookProgram | None = None
    outcome: NotebookOutcome | None = None

    def require_program(self) -> NotebookProgram:
        """Its program, for the executors (``prepare.sanitize`` gives every notebook one before)."""
        if self.program is None:
            raise ValueError(f"{self.name}.ipynb has no program (not sanitized)")
        return self.program

    def require_outcome(self) -> NotebookOutcome:
        """Its outcome, for recording (a submission is recorded once all its notebooks have run)."""
        if self.outcome is None:
            raise ValueError(f"{self.name}.ipynb has not run yet (no outcome)")
        return self.outcome


@dataclass
class Submission:
    """One student's submission of one assignment, on its way through the pipeline."""

    student: str
    assignment: str
    submitted: Path
    final: Path  # autograded/<student>/<assignment>/
    stage: Path  # where it is built, next to final; moved into place when recorded
    notebooks: list[NotebookRun] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)  # nbgrader's warnings about it
    refused: list[str] = field(default_factory=list)  # files of the submission not copied, and why
    only: list[str] | None = None  # --notebook: the notebooks graded this time (others are kept)
    digests: dict[str, str] = field(default_factory=dict)  # submitted notebook -> SHA-256, as read

    @property
    def key(self) -> tuple[str, str]:
        return (self.assignment, self.student)

    @property
    def executed(self) -> bool:
        return all(nb_run.outcome is not None for nb_run in self.notebooks)


@dataclass(frozen=True)
class SubmissionResult:
    """What grading one submission produced (also returned for skipped or failed ones)."""

    student: str
    assignment: str
    status: str  # "graded", "skipped" (already graded, or nothing to grade), "failed" (see reasons)
    score: float | None = None
    max_score: float | None = None
    seconds: float = 0.0
    reasons: tuple[str, ...] = ()
    # "failed" because the grading machine failed, not the notebook (``errors.GraderFault``, a
    # submission an executor could not run): grading it again may succeed
    grader_fault: bool = False
    # grade cells the grading machine did not run (no GPU: ``machine_limits``), scored 0 for now
    not_run: int = 0
    # nbgrader's late-submission penalty, in the gradebook beside ``score`` (the points the tests
    # gave): what ``nbgrader export`` reports is ``score_of_record``
    late_penalty: float = 0.0

    @property
    def score_of_record(self) -> float | None:
        """The grade the course keeps: the tests' points less the late penalty."""
        return None if self.score is None else self.score - self.late_penalty


@dataclass(frozen=True)
class GradeSummary:
    results: tuple[SubmissionResult, ...]
    device: str
    seconds: float
    # where the time went (seconds): "setup" (course, torch, template start), "sanitize" and
    # "record" (parent, summed), "execute" (children's wall time, summed over parallel workers);
    # on Slurm also "slurm", "chunks", "queue", "queue first", "node setup"
    timings: dict[str, float] = field(default_factory=dict)
    # (student, assignment) regraded without --force because the submitted notebook changed
    changed: tuple[tuple[str, str], ...] = ()

    def regraded(self) -> int:
        """How many of the graded submissions were regraded because their notebook changed."""
        changed = set(self.changed)
        return sum(r.status == "graded" and (r.student, r.assignment) in changed for r in self.results)

    def not_run_line(self) -> str | None:
        """The summary's last line when grade cells were not run (None when every cell ran)."""
        unrun = [r.not_run for r in self.results if r.not_run]
        if not unrun:
            return None
        cells, submissions = sum(unrun), len(unrun)
        return (f"{cells} grade cell{'s' if cells != 1 else ''} of {submissions} "
                f"submission{'s' if submissions != 1 else ''} {'were' if cells != 1 else 'was'} not "
                "run: no GPU here; grade them on a GPU machine (or --allow-cpu)")

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)
