"""Grade submissions into nbgrader's gradebook: plan -> sanitize -> execute -> check -> score -> record.

Trusted side, the instructor's process: the only writer of the gradebook and of ``autograded/``. Read
top to bottom, one run goes through:

1. **plan** (``prepare.plan``): which submissions to grade; those already graded are skipped;
2. **sanitize** (``prepare.sanitize``): stage a submission's files next to its ``autograded/`` home,
   run nbgrader's sanitize preprocessors, give each notebook its ``NotebookProgram``. A submission that
   cannot be prepared fails alone, with its reason;
3. **execute** (an executor, ``executor.EXECUTORS``: ``local.py`` on this machine, ``slurm/`` on a
   cluster through ``remote/``, ``as_submitted.py`` for --no-execute): every notebook runs in a
   checker beside a bubblewrap sandbox and comes back as a ``NotebookOutcome``;
4. **check + score + record** (``record.py``): once ALL notebooks of a submission have their outcome,
   nbgrader's post-execute preprocessors run in ONE gradebook transaction — exactly once per
   submission, whatever the executor.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from autograder.course.nbgrader import Course, load_course
from autograder.errors import GradingError
from autograder.grading import late, prepare, record
from autograder.grading.executor import Executor, open_executor
from autograder.grading.model import GradeSummary, NotebookOutcome, Submission, SubmissionResult
from autograder.grading.nbgrader_seam import AutogradeSteps, autograde_steps, execute_timeout
from autograder.grading.options import GradeOptions
from autograder.grading.progress import ProgressBar

if TYPE_CHECKING:
    from nbgrader.api import Gradebook


def grade(options: GradeOptions | None = None, /, **settings: Any) -> GradeSummary:
    """Autograde submissions into the course gradebook, with scores identical to ``nbgrader autograde``.

    Takes a ``GradeOptions`` and/or its fields as keyword arguments (``grade(assignments=["01_strides"],
    workers=2)``); see ``options.py`` for every setting and its default. ``executor="slurm"`` runs the
    notebooks as a Slurm job array (``slurm/``); this process still records every grade.
    """
    options = GradeOptions.of(options, **settings)
    with _Run.start(options, every_assignment=False) as run, run.course.gradebook() as gb:
        planned = prepare.plan(run.course, gb, run.names, students=options.students,
                               force=options.force, notebook=options.notebook)
        batch = run.batch(gb)
        batch.results += [SubmissionResult(student, name, "skipped", reasons=(why,) if why else ())
                          for student, name, why in planned.skipped]
        batch.results += [SubmissionResult(student, name, "failed", reasons=(why,))
                          for student, name, why in planned.refused]
        run.execute(batch, planned.todo, total=len(planned.todo))
    return run.summary(batch, changed=planned.changed)


def grade_stream(options: GradeOptions, requests: Iterator[tuple[str, str] | None],
                 settled: Callable[[SubmissionResult], None], *,
                 started: Callable[[str, str], None] | None = None) -> GradeSummary:
    """Grade submissions as they arrive, on sandboxes kept warm between them (the service's worker).

    ``requests`` yields ``(student, assignment)`` once its ``submitted/`` folder is written, or None
    when there is nothing now (it should wait a little before it does); each one is graded (again,
    whatever is recorded: ``force``) and recorded as by ``grade``, then passed to ``settled``. Ends
    when ``requests`` ends and the notebooks running then are recorded. Local executor only.
    ``started(student, assignment)``: a notebook of that submission starts in a sandbox.
    """
    options = GradeOptions.of(options, force=True, progress=False)
    with _Run.start(options, every_assignment=True) as run, run.course.gradebook() as gb:
        if not run.executor.streams:
            raise GradingError(f"the {run.executor.name} executor grades batches, not a stream; "
                               "grade each batch with grade()")
        batch = run.batch(gb, settled=settled, on_start=started)

        def todo() -> Iterator[tuple[str, str] | None]:
            for request in requests:
                if request is None:
                    yield None
                    continue
                student, name = request
                planned = prepare.plan(run.course, gb, [name], students=[student], force=True,
                                       notebook=options.notebook)
                for s, n, why in planned.skipped:
                    batch._settle(SubmissionResult(s, n, "skipped", reasons=(why,) if why else ()))
                for s, n, why in planned.refused:
                    batch._settle(SubmissionResult(s, n, "failed", reasons=(why,)))
                yield from planned.todo

        run.execute(batch, todo(), total=None)
    return run.summary(batch)


def _require_submissions(course: Course, options: GradeOptions) -> None:
    """Raise unless the assignments asked for exist and one of them has a submission (of the
    students asked for): ``grade 02_einops`` with an empty submitted/ says so and starts nothing."""
    names = list(options.assignments or course.submitted_assignments())
    for name in names:
        course.require_assignment(name)
    folder = f"{course.coursedir.submitted_directory}/"
    if not names:
        raise GradingError(f"no submissions in {folder} (autograder collect puts them there)")
    wanted = set(options.students or ())
    if any(not wanted or wanted & set(course.submitted_students(name)) for name in names
           if course.submitted_students(name)):
        return
    by = f" by {', '.join(sorted(wanted))}" if wanted else ""
    raise GradingError(f"no submissions of {', '.join(names)}{by} in {folder} (autograder collect "
                       "puts them there)")


@dataclass
class _Run:
    """What one grading run sets up before its first submission: course, executor, device, timeout."""

    options: GradeOptions
    course: Course
    executor: Executor
    names: list[str]
    device: str
    timeout: float | None
    timings: dict[str, float]
    started: float

    @classmethod
    def start(cls, options: GradeOptions, *, every_assignment: bool) -> _Run:
        """``every_assignment``: the gradebook's (a stream may bring any); otherwise those asked
        for, or every assignment with submissions."""
        started = time.monotonic()
        course = load_course(options.course_root, db_url=options.db_url)
        if not every_assignment:  # before any sandbox starts: nothing to grade is an error
            _require_submissions(course, options)
        executor = open_executor(options, course)  # the local one starts its template now
        try:
            return cls._set_up(options, course, executor, started, every_assignment=every_assignment)
        except BaseException:
            executor.close()
            raise

    @classmethod
    def _set_up(cls, options: GradeOptions, course: Course, executor: Executor, started: float, *,
                every_assignment: bool) -> _Run:
        if not executor.executes:  # nbgrader's --no-execute: neither clear nor execute
            course.config.Execute.enabled = False
            course.config.ClearOutput.enabled = False
        if options.assignments:
            names = list(options.assignments)
        else:
            names = course.gradebook_assignments() if every_assignment \
                else course.submitted_assignments()
        for name in names:
            course.require_assignment(name)
        late.check_course(course.config)  # extensions nbgrader would ignore: refused up front
        device = prepare.resolve_device(course, names, device=options.device,
                                        allow_cpu=options.cpu_allowed, probe=executor.probe())
        timeout = execute_timeout(course) if options.timeout is None else (
            options.timeout if options.timeout > 0 else None)
        timings = {"setup": time.monotonic() - started, "sanitize": 0.0, "record": 0.0,
                   "execute": 0.0}
        return cls(options, course, executor, names, device, timeout, timings, started)

    def __enter__(self) -> _Run:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.executor.close()

    def batch(self, gb: Gradebook, *, settled: Callable[[SubmissionResult], None] | None = None,
              on_start: Callable[[str, str], None] | None = None) -> _Batch:
        o = self.options
        return _Batch(course=self.course, steps=autograde_steps(self.course), gb=gb,
                      device=self.device, timeout=self.timeout,
                      notebook_timeout=o.notebook_timeout, notebook=o.notebook,
                      allow_cpu=o.cpu_allowed, force=o.force, timings=self.timings,
                      settled=settled, on_start=on_start)

    def execute(self, batch: _Batch, todo: Iterable[tuple[str, str] | None], *,
                total: int | None) -> None:
        with ProgressBar(self.options.progress, label=f"grading on {self.device}",
                         total=total) as bar:
            batch.progress = bar
            try:
                self.executor.execute(batch.prepared(todo), batch, device_used=self.device,
                                      progress=bar, timings=self.timings)
            finally:
                batch.drop_unrecorded()

    def summary(self, batch: _Batch, *, changed: Iterable[tuple[str, str]] = ()) -> GradeSummary:
        return GradeSummary(results=tuple(batch.results), device=self.device,
                            seconds=time.monotonic() - self.started, timings=self.timings,
                            changed=tuple(changed))


@dataclass
class _Batch:
    """The pipeline's side of a run: hands prepared submissions to the executor, records each one
    once its notebooks are all executed (``executor.Outcomes``)."""

    course: Course
    steps: AutogradeSteps
    gb: Gradebook  # nbgrader is untyped (Any to mypy); the name says what it is
    device: str
    timeout: float | None
    notebook_timeout: float | None
    notebook: str | None
    allow_cpu: bool
    force: bool
    timings: dict[str, float]
    settled: Callable[[SubmissionResult], None] | None = None  # a stream: each result, as recorded
    on_start: Callable[[str, str], None] | None = None  # (student, assignment): a notebook starts
    results: list[SubmissionResult] = field(default_factory=list)
    progress: ProgressBar | None = None
    pending: dict[tuple[str, str], Submission] = field(default_factory=dict)

    def prepared(self, todo: Iterable[tuple[str, str] | None]) -> Iterator[Submission | None]:
        """Sanitize each submission as the executor asks for the next one; those that fail or have
        nothing to execute are settled here and never reach the executor."""
        for item in todo:
            if item is None:  # a stream with nothing now
                yield None
                continue
            student, name = item
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
            prepare.discard_stage(submission.stage)
            self._settle(SubmissionResult(submission.student, submission.assignment, "failed",
                                          reasons=(reason,), grader_fault=True))

    def starting(self, submission: Submission) -> None:
        if self.progress is not None and submission.key in self.pending:
            self.progress.started(submission.key, f"{submission.assignment}/{submission.student}")
        if self.on_start is not None and submission.key in self.pending:
            self.on_start(submission.student, submission.assignment)

    def _record(self, submission: Submission) -> SubmissionResult:
        if not self.force and submission.only is None and prepare.is_graded(
                self.gb, self.course, student=submission.student, assignment=submission.assignment):
            prepare.discard_stage(submission.stage)  # another run recorded it meanwhile
            return SubmissionResult(submission.student, submission.assignment, "skipped")
        return record.record(self.course, self.steps, self.gb, submission, device=self.device,
                             timings=self.timings)

    def _settle(self, result: SubmissionResult) -> None:
        if self.settled is not None:  # a stream keeps no list: it would grow for ever
            self.settled(result)
        else:
            self.results.append(result)
        if self.progress is not None:  # what runs is listed below the bar, not who finished last
            self.progress.finished((result.assignment, result.student))
            self.progress.advance()

    def drop_unrecorded(self) -> None:
        """What was not recorded (the run was stopped) leaves no stage behind."""
        for submission in self.pending.values():
            prepare.discard_stage(submission.stage)
        self.pending.clear()
