"""The Slurm executor (trusted side, the instructor's process): notebooks run as a job array.

``autograder grade --executor slurm`` (``grade(executor="slurm")``) is local grading with the execute
step moved to the cluster's nodes, a thin backend over the generic remote layer (``grading/remote/``)
and the job-array layer of ``chunks.py``:

1. **plan + sanitize** (the pipeline, as locally); each prepared submission becomes one work unit
   (``remote.handover.work_item``), keyed by its inputs and the grading code;
2. **execute** (an array task on a node, ``remote.node.grade_chunk`` told by ``task.slurm_task``
   what the task is): the same warm template, sandbox pool and per-notebook loop as local grading;
   one JSON result per submission written atomically to the shared results folder;
3. **check + score + record** (the pipeline, the only gradebook writer): each result, as it lands,
   becomes the submission's outcomes (``remote.handover.hand_over``); then the file is deleted.

Faults are ``run_chunks``'s: a chunk that fails, times out or is preempted is resubmitted with its
missing submissions (``retries`` times), then those are reported ``failed`` with the reason. A rerun
after this process was killed records the results already on disk, adopts chunks still in Slurm and
submits only the rest; ``scancel`` loses nothing already written. A node never writes a result for a
notebook that Slurm's own signals cut short (scancel, preemption, the time-limit warning): such a
submission has no result and is graded again, never recorded as a failure of the student's code.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from autograder.course.nbgrader import Course
from autograder.errors import DeviceError, GradingError
from autograder.grading.executor import Outcomes
from autograder.grading.model import Submission
from autograder.grading.options import GradeOptions, SlurmOptions
from autograder.grading.prepare import DeviceProbe
from autograder.grading.progress import ProgressBar
from autograder.grading.remote.handover import (
    code_digest,
    drop_recorded_results,
    hand_over,
    work_item,
)
from autograder.grading.remote.node import grade_chunk
from autograder.grading.remote.work import RESULTS_DIR, SubmissionWork
from autograder.grading.slurm.chunks import MANIFEST, run_chunks
from autograder.grading.slurm.task import slurm_task

SLURM_FOLDER = Path(".slurm") / "grade"  # under the course root, shared with the nodes


class SlurmExecutor:
    """``executor="slurm"``: every prepared submission becomes a work item of one job array.

    ``options.slurm``: the array's settings (default: the course's ``c.Autograder.slurm``).
    ``options.slurm_folder``: where chunks, logs and results live, shared with the nodes (default
    ``<course>/.slurm/grade``); reuse it to resume. ``device="auto"`` means CUDA when the tasks ask
    for GPUs (``gpus_per_task``), else CPU — this machine's own devices do not matter.
    ``options.workers``: notebooks at once in each array task (default: the task's CPUs)."""

    name = "slurm"
    streams = False
    executes = True

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
        drop_recorded_results(self.course, self.folder / RESULTS_DIR)
        code = code_digest()
        prepared: dict[str, Submission] = {}
        items: list[SubmissionWork] = []
        for submission in work:
            if submission is None:  # streams = False: the pipeline never hands this one a stream
                raise GradingError("the Slurm executor grades batches, not a stream")
            try:
                item = work_item(submission, self.options, device=device_used, code=code)
            except GradingError as error:
                outcomes.failed(submission, f"could not prepare: {error}")
                continue
            prepared[item.key] = submission
            items.append(item)
        if not items:
            return
        tasks = _TaskClock()
        report = run_chunks(items, functools.partial(grade_chunk, task=slurm_task),
                            folder=self.folder, options=self.slurm,
                            on_result=lambda key, path: hand_over(prepared[key], path, outcomes,
                                                                  tasks.seen),
                            progress=progress, poll_s=self.options.poll_s)
        timings["slurm"] = report.seconds
        for key, reason in report.failed.items():  # never silently full or zero
            outcomes.failed(prepared[key], f"not graded on Slurm: {reason}")
        timings.update(tasks.chunk_timings(self.folder / MANIFEST))

    def close(self) -> None:
        """Nothing to release: the array's jobs end with ``run_chunks``."""


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
