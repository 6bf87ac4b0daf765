"""Grade submissions into nbgrader's gradebook: plan -> sanitize -> execute -> check -> score -> record.

Trusted side, the instructor's process: the only writer of the gradebook and of ``autograded/``. Read
top to bottom, one run goes through:

1. **plan** (``prepare.plan``): which submissions to grade; those already graded are skipped;
2. **sanitize** (``prepare.sanitize``): stage a submission's files next to its ``autograded/`` home,
   run nbgrader's sanitize preprocessors, give each notebook its ``ExecutionJob``. A submission that
   cannot be prepared fails alone, with its reason;
3. **execute** (an executor: ``local.py`` on this machine, ``slurm/`` on a cluster): every notebook
   runs in a checker beside a bubblewrap sandbox and comes back as a ``NotebookOutcome``;
4. **check + score + record** (``record.py``): once ALL notebooks of a submission have their outcome,
   nbgrader's post-execute preprocessors run in ONE gradebook transaction — exactly once per
   submission, whatever the executor.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from autograder.course import Course, load_course
from autograder.grading import prepare, record
from autograder.grading.executor import Executor
from autograder.grading.model import GradeSummary, NotebookOutcome, Submission, SubmissionResult
from autograder.grading.nbgrader_seam import AutogradeSteps, autograde_steps, execute_timeout
from autograder.grading.options import GradeOptions
from autograder.grading.progress import ProgressBar


def grade(options: GradeOptions | None = None, /, **settings) -> GradeSummary:
    """Autograde submissions into the course gradebook, with scores identical to ``nbgrader autograde``.

    Takes a ``GradeOptions`` and/or its fields as keyword arguments (``grade(assignments=["01_strides"],
    workers=2)``); see ``options.py`` for every setting and its default. ``executor="slurm"`` runs the
    notebooks as a Slurm job array (``slurm/``); this process still records every grade.
    """
    options = GradeOptions.of(options, **settings)
    started = time.monotonic()
    course = load_course(options.course_root, db_url=options.db_url)
    if not options.execute:  # nbgrader's --no-execute: neither clear nor execute
        course.config.Execute.enabled = False
        course.config.ClearOutput.enabled = False
    executor = _executor(options, course)  # the local one starts its template now: imports overlap
    names = list(options.assignments) if options.assignments else course.submitted_assignments()
    for name in names:
        course.require_assignment(name)
    allow_cpu = options.cpu_allowed
    device_used = prepare.resolve_device(course, names, device=options.device, allow_cpu=allow_cpu,
                                         probe=executor.probe())
    timeout = execute_timeout(course) if options.timeout is None else (
        options.timeout if options.timeout > 0 else None)
    timings = {"setup": time.monotonic() - started, "sanitize": 0.0, "record": 0.0, "execute": 0.0}
    with course.gradebook() as gb:
        planned = prepare.plan(course, gb, names, students=options.students, force=options.force,
                               notebook=options.notebook)
        todo = planned.todo
        batch = _Batch(course=course, steps=autograde_steps(course), gb=gb, device=device_used,
                       timeout=timeout, notebook_timeout=options.notebook_timeout,
                       notebook=options.notebook,
                       allow_cpu=allow_cpu, force=options.force, timings=timings)
        batch.results += [SubmissionResult(student, name, "skipped", reasons=(why,) if why else ())
                          for student, name, why in planned.skipped]
        batch.results += [SubmissionResult(student, name, "failed", reasons=(why,))
                          for student, name, why in planned.refused]
        with ProgressBar(options.progress, label=f"grading on {device_used}",
                         total=len(todo)) as bar:
            batch.progress = bar
            try:
                executor.execute(batch.prepared(todo), batch, device_used=device_used,
                                 progress=bar, timings=timings)
            finally:
                batch.drop_unrecorded()
    return GradeSummary(results=tuple(batch.results), device=device_used,
                        seconds=time.monotonic() - started, timings=timings)


def _executor(options: GradeOptions, course: Course) -> Executor:
    if not options.execute:
        return _AsSubmitted()
    if options.executor == "slurm":
        from autograder.grading.slurm.executor import SlurmExecutor

        return SlurmExecutor(options, course)
    from autograder.grading.local import LocalExecutor

    return LocalExecutor(options)


class _AsSubmitted:
    """``--no-execute``: each notebook's outcome is the outputs it was submitted with."""

    name = "none"

    def probe(self) -> prepare.DeviceProbe:
        return prepare.DeviceProbe(cuda_available=False, torch_version="(not executed)",
                                   cuda_version=None)

    def execute(self, work, outcomes, *, device_used, progress, timings) -> None:
        for submission in work:
            for nb_run in submission.notebooks:
                outputs = {i: ([dict(o) for o in cell.outputs], cell.execution_count)
                           for i, cell in enumerate(nb_run.nb.cells) if cell.cell_type == "code"}
                outcomes.executed(submission, nb_run.name,
                                  NotebookOutcome(outputs=outputs, executed=False))


@dataclass
class _Batch:
    """The pipeline's side of a run: hands prepared submissions to the executor, records each one
    once its notebooks are all executed (``executor.Outcomes``)."""

    course: Course
    steps: AutogradeSteps
    gb: object
    device: str
    timeout: float | None
    notebook_timeout: float | None
    notebook: str | None
    allow_cpu: bool
    force: bool
    timings: dict[str, float]
    results: list[SubmissionResult] = field(default_factory=list)
    progress: ProgressBar | None = None
    pending: dict[tuple[str, str], Submission] = field(default_factory=dict)

    def prepared(self, todo: list[tuple[str, str]]) -> Iterator[Submission]:
        """Sanitize each submission as the executor asks for the next one; those that fail or have
        nothing to execute are settled here and never reach the executor."""
        for student, name in todo:
            clock = time.monotonic()
            try:
                submission = prepare.sanitize(self.course, self.steps, self.gb, student=student,
                                              assignment=name, timeout=self.timeout,
                                              notebook_timeout=self.notebook_timeout,
                                              device_used=self.device, allow_cpu=self.allow_cpu,
                                              notebook=self.notebook)
            except Exception as error:  # noqa: BLE001 - one bad submission never stops a batch
                self._settle(SubmissionResult(student, name, "failed",
                                              reasons=(f"could not prepare: {error}",)))
                continue
            finally:
                self.timings["sanitize"] += time.monotonic() - clock
            if not submission.notebooks:
                self._settle(record.record(self.course, self.steps, self.gb, submission,
                                           device=self.device, timings=self.timings))
                continue
            self.pending[submission.key] = submission
            yield submission

    def executed(self, submission: Submission, notebook: str, outcome: NotebookOutcome) -> None:
        if self.pending.get(submission.key) is not submission:
            return  # already recorded or failed: a late or repeated outcome changes nothing
        for nb_run in submission.notebooks:
            if nb_run.name == notebook and nb_run.outcome is None:
                nb_run.outcome = outcome
                self.timings["execute"] += outcome.seconds
        if submission.executed:
            del self.pending[submission.key]
            self._settle(self._record(submission))

    def failed(self, submission: Submission, reason: str) -> None:
        if self.pending.pop(submission.key, None) is submission:
            shutil.rmtree(submission.stage, ignore_errors=True)
            self._settle(SubmissionResult(submission.student, submission.assignment, "failed",
                                          reasons=(reason,)))

    def _record(self, submission: Submission) -> SubmissionResult:
        if not self.force and submission.only is None and prepare.is_graded(
                self.gb, self.course, student=submission.student, assignment=submission.assignment):
            shutil.rmtree(submission.stage, ignore_errors=True)  # another run recorded it meanwhile
            return SubmissionResult(submission.student, submission.assignment, "skipped")
        return record.record(self.course, self.steps, self.gb, submission, device=self.device,
                             timings=self.timings)

    def _settle(self, result: SubmissionResult) -> None:
        self.results.append(result)
        if self.progress is not None:
            self.progress.advance(f"{result.assignment}/{result.student}")

    def drop_unrecorded(self) -> None:
        """What was not recorded (the run was stopped) leaves no stage behind."""
        for submission in self.pending.values():
            shutil.rmtree(submission.stage, ignore_errors=True)
        self.pending.clear()
