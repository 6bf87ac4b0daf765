"""The Slurm executor (trusted side, the instructor's process): notebooks run as a job array.

``autograder grade --executor slurm`` (``grade(executor="slurm")``) is local grading with the execute
step moved to the cluster's nodes, through the generic chunk layer of ``chunks.py``:

1. **plan + sanitize** (the pipeline, as locally): this executor turns each prepared submission into
   one work item, ``SubmissionWork``: each notebook's ``ExecutionJob`` (cells, kinds, per-cell time
   limit, environments), the companion files' bytes, the device decision and ``memory_limit_gb``.
   Its key, ``assignment/student/<digest>``, names the exact inputs (and the grading code): a result
   computed for other inputs is never reused.
2. **execute** (an array task on a node, ``node.grade_chunk``): the same warm template, sandbox pool and
   per-notebook loop as local grading (``execute/runner.py``), limits measured on the node; one
   JSON result per submission (a ``NotebookOutcome`` per notebook) written atomically to the shared
   results folder as soon as its notebooks are done.
3. **check + score + record** (the pipeline, the only gradebook writer): each result, as it lands,
   becomes the submission's outcomes, recorded exactly as a local run records them; then the result
   file is deleted.

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
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import autograder
from autograder.course import Course
from autograder.errors import DeviceError, GradingError
from autograder.grading.executor import Outcomes
from autograder.grading.model import NotebookOutcome, Submission
from autograder.grading.options import GradeOptions
from autograder.grading.prepare import DeviceProbe, companion_files, is_graded
from autograder.grading.progress import ProgressBar
from autograder.grading.slurm.chunks import (
    MANIFEST,
    RESULT_SUFFIX,
    RESULTS_DIR,
    SlurmOptions,
    run_chunks,
)
from autograder.grading.slurm.node import NotebookWork, SubmissionWork, grade_chunk

SLURM_FOLDER = Path(".slurm") / "grade"  # under the course root, shared with the nodes
PASSED_ENV = ("AUTOGRADER_SEED",)  # the instructor's settings a node's checkers must see too


class SlurmExecutor:
    """``executor="slurm"``: every prepared submission becomes a work item of one job array.

    ``options.slurm``: the array's settings (default: the course's ``c.Autograder.slurm``).
    ``options.slurm_folder``: where chunks, logs and results live, shared with the nodes (default
    ``<course>/.slurm/grade``); reuse it to resume. ``device="auto"`` means CUDA when the tasks ask
    for GPUs (``gpus_per_task``), else CPU — this machine's own devices do not matter.
    ``options.workers``: notebooks at once in each array task (default: the task's CPUs)."""

    name = "slurm"

    def __init__(self, options: GradeOptions, course: Course) -> None:
        self.options, self.course = options, course
        self.slurm = options.slurm or SlurmOptions.from_config(course.config)
        self.folder = Path(options.slurm_folder) if options.slurm_folder \
            else course.root / SLURM_FOLDER
        if options.device == "cuda" and not self.slurm.gpus_per_task:
            raise DeviceError("--device cuda on Slurm needs GPUs for the array tasks: --gpus-per-task "
                              "N (or gpus_per_task in c.Autograder.slurm)")

    def probe(self) -> DeviceProbe:
        """The GPU rule, for the nodes: CUDA is there when the array tasks ask for GPUs."""
        return DeviceProbe(cuda_available=self.slurm.gpus_per_task > 0,
                           torch_version="of the Slurm nodes", cuda_version=None)

    def execute(self, work: Iterator[Submission | None], outcomes: Outcomes, *, device_used: str,
                progress: ProgressBar, timings: dict[str, float]) -> None:
        _drop_recorded_results(self.course, self.folder)
        code = _code_digest()
        environ = tuple((k, os.environ[k]) for k in PASSED_ENV if k in os.environ)
        prepared: dict[str, Submission] = {}
        items: list[SubmissionWork] = []
        for submission in work:
            if submission is None:  # only a streaming executor is handed a stream
                raise GradingError("the Slurm executor grades batches, not a stream")
            try:
                files = tuple(companion_files(submission.stage))
            except GradingError as error:
                outcomes.failed(submission, f"could not prepare: {error}")
                continue
            item = SubmissionWork(
                key="", student=submission.student, assignment=submission.assignment,
                notebooks=tuple(NotebookWork(nb_run.name, nb_run.require_job())
                                for nb_run in submission.notebooks),
                files=files, device=device_used, memory_limit_gb=self.options.memory_limit_gb,
                sandboxed=self.options.sandbox, workers=self.options.workers, environ=environ)
            item = dataclasses.replace(
                item, key=f"{submission.assignment}/{submission.student}/{_digest(item, code)}")
            prepared[item.key] = submission
            items.append(item)
        if not items:
            return
        tasks = _TaskClock()
        report = run_chunks(items, grade_chunk, folder=self.folder, options=self.slurm,
                            on_result=lambda key, path: _hand_over(prepared[key], path, outcomes,
                                                                   tasks),
                            progress=progress, poll_s=self.options.poll_s)
        timings["slurm"] = report.seconds
        for key, reason in report.failed.items():  # never silently full or zero
            outcomes.failed(prepared[key], f"not graded on Slurm: {reason}")
        timings.update(tasks.chunk_timings(self.folder / MANIFEST))


def _hand_over(submission: Submission, path: Path, outcomes: Outcomes, tasks: _TaskClock) -> None:
    """``on_result`` for ``run_chunks``: one result file -> the submission's outcomes (never raises);
    the file is consumed whatever happens (a rerun recomputes what was not recorded)."""
    try:
        data = json.loads(path.read_text())
        if data.get("task"):
            tasks.seen(str(data["task"]), float(data["started"]), float(data["ready"]))
        if data.get("error"):
            outcomes.failed(submission, f"not graded: {data['error']}")
            return
        ran = data["notebooks"]
        if sorted(ran) != sorted(nb_run.name for nb_run in submission.notebooks):
            raise GradingError(f"the result holds notebooks {sorted(ran)}, not this submission's")
        for nb_run in submission.notebooks:
            outcomes.executed(submission, nb_run.name, NotebookOutcome.from_json(ran[nb_run.name]))
    except Exception as error:  # noqa: BLE001 - reported, the run goes on
        outcomes.failed(submission, f"not graded: {error}")
    finally:
        path.unlink(missing_ok=True)


def _drop_recorded_results(course: Course, folder: Path) -> None:
    """Delete result files of submissions the gradebook already holds (a run killed between its
    commit and deleting the file leaves one behind)."""
    results = folder / RESULTS_DIR
    if not results.is_dir():
        return
    with course.gradebook() as gb:
        for path in results.iterdir():
            parts = unquote(path.name.removesuffix(RESULT_SUFFIX)).split("/")
            if path.name.endswith(RESULT_SUFFIX) and len(parts) == 3 and is_graded(
                    gb, course, student=parts[1], assignment=parts[0]):
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
class _TaskClock:
    """When each array task that reported started and had its first sandbox ready."""

    tasks: dict[str, tuple[float, float]] = field(default_factory=dict)  # task -> (started, ready)

    def seen(self, task: str, started: float, ready: float) -> None:
        self.tasks.setdefault(task, (started, ready))

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
