"""Grading on a Slurm cluster: the notebooks run as a job array, this process records every grade.

``autograder grade --executor slurm`` (``grade(executor="slurm")``) is local grading with the execute
step moved to the cluster's nodes, through the generic chunk layer of ``autograder/slurm.py``:

1. **plan + sanitize** (this process, as locally: ``pipeline._plan``, ``pipeline._sanitize``): one work
   item per submission, ``SubmissionWork``: each notebook's ``ExecutionJob`` (cells, kinds, per-cell
   time limit, environments), the companion files' bytes, the device decision and the memory limit.
   Its key, ``assignment/student/<digest>``, names the exact inputs (and the grading code): a result
   computed for other inputs is never reused.
2. **execute** (an array task on a node, ``node.grade_chunk``): the same warm template, sandbox pool and
   per-notebook loop as local grading (``runner.NotebookRunner``), limits measured on the node; one
   JSON result per submission (outputs per cell, reasons, timings) written atomically to the shared
   results folder as soon as its notebooks are done.
3. **check + score + record** (this process, the only gradebook writer): each result, as it lands,
   goes through ``record.record_submission`` — nbgrader's post-execute preprocessors, ONE transaction
   per submission — exactly as a local run records it; then the result file is deleted.

Faults are ``run_chunks``'s: a chunk that fails, times out or is preempted is resubmitted with its
missing submissions (``retries`` times), then those are reported ``failed`` with the reason. A rerun
after this process was killed records the results already on disk, adopts chunks still in Slurm and
submits only the rest; ``scancel`` loses nothing already written. A node never writes a result for a
notebook that Slurm's own signals cut short (scancel, preemption, the time-limit warning): such a
submission has no result and is graded again, never recorded as a failure of the student's code.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import autograder
from autograder import ALLOW_CPU_ENV
from autograder.course import load_course
from autograder.errors import DeviceError, GradingError
from autograder.grading import record, workers
from autograder.grading.node import NotebookWork, SubmissionWork, grade_chunk
from autograder.grading.pipeline import (
    GradeSummary,
    NotebookRun,
    Submission,
    SubmissionResult,
    _checker_env,
    _job,
    _plan,
    _record,
    _resolve_device,
    _sandbox_env,
    _sanitize,
)
from autograder.grading.sandbox import companion_files
from autograder.grading.steps import autograde_steps, execute_timeout
from autograder.slurm import MANIFEST, RESULT_SUFFIX, RESULTS_DIR, SlurmOptions, run_chunks

SLURM_FOLDER = Path(".slurm") / "grade"  # under the course root, shared with the nodes
PASSED_ENV = ("AUTOGRADER_SEED",)  # the instructor's settings a node's checkers must see too


@dataclass
class NodeRun:
    """A notebook's execution as its node reported it: what ``record.executed_notebook`` reads."""

    outputs: dict[int, tuple[list[dict], int | None]]
    reason: str | None
    running_cell: int | None
    failed_ename: str = "KernelDied"


def grade_on_slurm(
    *,
    assignments: Sequence[str] | None = None,
    students: Sequence[str] | None = None,
    course_root: Path = Path("."),
    db_url: str | None = None,
    options: SlurmOptions | None = None,
    folder: Path | None = None,
    workers_count: int | None = None,
    device: str = "auto",
    allow_cpu: bool | None = None,
    timeout: float | None = None,
    memory_limit_gb: float | None = 4.0,
    force: bool = False,
    progress: bool = True,
    sandbox: bool = True,
    poll_s: float = 2.0,
) -> GradeSummary:
    """Autograde submissions on Slurm; the arguments are ``grade()``'s (see there).

    ``options``: the job array's settings (default: the course's ``c.Autograder.slurm``).
    ``folder``: where chunks, logs and results live, shared with the nodes (default
    ``<course>/.slurm/grade``); reuse it to resume. ``device``: "auto" means CUDA when the tasks ask
    for GPUs (``options.gpus_per_task``), else CPU — this machine's own devices do not matter.
    ``workers_count``: notebooks at once in each array task (default: the task's CPUs)."""
    started = time.monotonic()
    course = load_course(course_root, db_url=db_url)
    options = options or SlurmOptions.from_config(course.config)
    names = list(assignments) if assignments else course.submitted_assignments()
    for name in names:
        course.require_assignment(name)
    if allow_cpu is None:
        allow_cpu = os.environ.get(ALLOW_CPU_ENV) == "1"
    device_used = _nodes_device(course, names, device=device, allow_cpu=allow_cpu, options=options)
    timeout = execute_timeout(course) if timeout is None else (timeout if timeout > 0 else None)
    env = _checker_env(allow_cpu=allow_cpu, device_used=device_used)
    sandbox_env = _sandbox_env(device_used=device_used)
    folder = Path(folder) if folder else course.root / SLURM_FOLDER
    steps = autograde_steps(course)
    nb_logger = logging.getLogger("autograder.nbgrader")
    timings = {"setup": 0.0, "sanitize": 0.0, "record": 0.0, "execute": 0.0, "slurm": 0.0}
    code = _code_digest()
    environ = tuple((k, os.environ[k]) for k in PASSED_ENV if k in os.environ)

    with course.gradebook() as gb:
        results, todo = _plan(course, gb, names, students=students, force=force)
        _drop_recorded_results(folder, [(r.assignment, r.student) for r in results])
        prepared: dict[str, Submission] = {}
        items: list[SubmissionWork] = []
        timings["setup"] = time.monotonic() - started
        try:
            for student, name in todo:  # sanitize and stage, as locally; build the work items
                clock = time.monotonic()
                try:
                    submission = _sanitize(course, steps, gb, student=student, assignment=name,
                                           logger=nb_logger)
                except Exception as error:  # noqa: BLE001 - one bad submission never stops a batch
                    results.append(SubmissionResult(student, name, "failed",
                                                    reasons=(f"could not prepare: {error}",)))
                    continue
                finally:
                    timings["sanitize"] += time.monotonic() - clock
                if not submission.notebooks:  # nothing to execute: recorded now, as locally
                    results.append(_record(course, steps, gb, submission, nb_logger, device_used,
                                           timings))
                    continue
                try:
                    files = tuple(companion_files(submission.stage))
                except GradingError as error:
                    shutil.rmtree(submission.stage, ignore_errors=True)
                    results.append(SubmissionResult(student, name, "failed",
                                                    reasons=(f"could not prepare: {error}",)))
                    continue
                notebooks = tuple(
                    NotebookWork(nb_run.name, _job(nb_run, Path("."), timeout=timeout, env=env,
                                                   sandbox_env=sandbox_env, address_space=None,
                                                   threads=1, sandbox_rss=None))
                    for nb_run in submission.notebooks)
                work = SubmissionWork(
                    key="", student=student, assignment=name, notebooks=notebooks, files=files,
                    device=device_used, memory_limit_gb=memory_limit_gb, sandboxed=sandbox,
                    workers=workers_count, environ=environ)
                work = dataclasses.replace(work, key=f"{name}/{student}/{_digest(work, code)}")
                prepared[work.key] = submission
                items.append(work)

            recorder = _Recorder(course=course, steps=steps, gb=gb, prepared=prepared,
                                 device=device_used, force=force, logger=nb_logger, timings=timings)
            if items:
                report = run_chunks(items, grade_chunk, folder=folder, options=options,
                                    on_result=recorder, progress=progress, poll_s=poll_s)
                timings["slurm"] = report.seconds
                results += recorder.results
                for key, reason in report.failed.items():  # never silently full or zero
                    submission = prepared[key]
                    results.append(SubmissionResult(submission.student, submission.assignment,
                                                    "failed",
                                                    reasons=(f"not graded on Slurm: {reason}",)))
                timings.update(recorder.chunk_timings(folder / MANIFEST))
        finally:
            for submission in prepared.values():  # what was not recorded leaves no stage behind
                shutil.rmtree(submission.stage, ignore_errors=True)
    return GradeSummary(results=tuple(results), device=device_used,
                        seconds=time.monotonic() - started, timings=timings)


def _nodes_device(course, names: Sequence[str], *, device: str, allow_cpu: bool,
                  options: SlurmOptions) -> str:
    """The GPU rule, for the nodes: CUDA is there when the array tasks ask for GPUs."""
    if device == "cuda" and not options.gpus_per_task:
        raise DeviceError("--device cuda on Slurm needs GPUs for the array tasks: --gpus-per-task N "
                          "(or gpus_per_task in c.Autograder.slurm)")
    nodes = workers.TemplateProbe(virtual_bytes=0, resident_bytes=0,
                                  cuda_available=options.gpus_per_task > 0,
                                  torch_version="of the Slurm nodes", cuda_version=None)
    return _resolve_device(course, names, device=device, allow_cpu=allow_cpu, probe=nodes)


def _drop_recorded_results(folder: Path, graded: Sequence[tuple[str, str]]) -> None:
    """Delete result files of submissions the gradebook already holds (a run killed between its
    commit and deleting the file leaves one behind)."""
    results = folder / RESULTS_DIR
    if not graded or not results.is_dir():
        return
    prefixes = tuple(quote(f"{assignment}/{student}/", safe="") for assignment, student in graded)
    for path in results.iterdir():
        if path.name.startswith(prefixes) and path.name.endswith(RESULT_SUFFIX):
            path.unlink(missing_ok=True)


def _code_digest() -> str:
    """A digest of the grading code (this package: checker, sandbox, hidden checks)."""
    root = Path(autograder.__file__).resolve().parent
    digest = hashlib.sha256(autograder.__version__.encode())
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _digest(work: SubmissionWork, code: str) -> str:
    """16 hex digits naming a work item's inputs and the code that grades it."""
    inputs = dataclasses.asdict(dataclasses.replace(work, key="", files=()))
    inputs["files"] = [(path, hashlib.sha256(data).hexdigest()) for path, data in work.files]
    inputs["code"] = code
    return hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass
class _Recorder:
    """``on_result`` for ``run_chunks``: one result file -> one gradebook transaction (never raises)."""

    course: object
    steps: object
    gb: object
    prepared: dict[str, Submission]
    device: str
    force: bool
    logger: logging.Logger
    timings: dict[str, float]
    results: list[SubmissionResult] = field(default_factory=list)
    tasks: dict[str, tuple[float, float]] = field(default_factory=dict)  # task -> (started, ready)

    def __call__(self, key: str, path: Path) -> None:
        submission = self.prepared[key]
        try:
            self.results.append(self._record(submission, json.loads(path.read_text())))
        except Exception as error:  # noqa: BLE001 - reported, the run goes on
            self.results.append(SubmissionResult(submission.student, submission.assignment,
                                                 "failed", reasons=(f"not graded: {error}",)))
        finally:
            shutil.rmtree(submission.stage, ignore_errors=True)  # recorded: moved; else: dropped
            path.unlink(missing_ok=True)  # consumed: a rerun recomputes what was not recorded

    def _record(self, submission: Submission, data: dict) -> SubmissionResult:
        student, assignment = submission.student, submission.assignment
        if not self.force and record.is_graded(self.gb, self.course, student=student,
                                               assignment=assignment):
            return SubmissionResult(student, assignment, "skipped")  # another run recorded it
        if data.get("task"):
            self.tasks.setdefault(data["task"], (data["started"], data["ready"]))
        if data.get("error"):
            return SubmissionResult(student, assignment, "failed",
                                    reasons=(f"not graded: {data['error']}",))
        ran = data["notebooks"]
        if sorted(ran) != sorted(nb_run.name for nb_run in submission.notebooks):
            raise GradingError(f"the result holds notebooks {sorted(ran)}, not this submission's")
        for nb_run in submission.notebooks:
            _fill(nb_run, ran[nb_run.name])
            self.timings["execute"] += nb_run.seconds
        return _record(self.course, self.steps, self.gb, submission, self.logger, self.device,
                       self.timings)

    def chunk_timings(self, manifest: Path) -> dict[str, float]:
        """Over the array tasks that reported ("chunks", how many): "queue", summed (submitted ->
        started on its node, waiting for free CPUs included), "queue first", the shortest such wait
        (Slurm's own latency), and "node setup", summed (started -> first sandbox ready)."""
        submitted = {}
        if manifest.is_file():
            for line in manifest.read_text().splitlines():
                entry = json.loads(line) if line.strip() else {}
                if "job_id" in entry:
                    submitted[entry["job_id"]] = entry["submitted"]
        queue = [started - submitted[task] for task, (started, _) in self.tasks.items()
                 if task in submitted]
        return {"chunks": float(len(self.tasks)), "queue": max(0.0, sum(queue)),
                "queue first": max(0.0, min(queue, default=0.0)),
                "node setup": sum(ready - started for started, ready in self.tasks.values())}


def _fill(nb_run: NotebookRun, ran: dict) -> None:
    nb_run.run = NodeRun(outputs={int(i): (outputs, count)
                                  for i, (outputs, count) in ran["outputs"].items()},
                         reason=ran["reason"], running_cell=ran["running_cell"],
                         failed_ename=ran["failed_ename"])
    nb_run.seconds = float(ran["seconds"])
