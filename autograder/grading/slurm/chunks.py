"""Run work items on a Slurm cluster in chunks, as one submitit job array, and hand back per-item results.

A generic layer: it knows nothing about notebooks. The grading engine gives it picklable work items
(one per submission, each with a stable string key) and a function that processes a chunk of them on a
compute node; this module cuts, submits, watches, retries and resumes. ``autograder grade --executor
slurm`` is built on it like this::

    import json
    from dataclasses import dataclass
    from pathlib import Path

    from autograder.grading.remote.work import write_result
    from autograder.grading.options import load_slurm_options
    from autograder.grading.slurm.chunks import run_chunks

    @dataclass(frozen=True)
    class Work:                      # picklable; `key` is stable across runs
        key: str                     # "01_strides/alice"
        student: str
        assignment: str

    def grade_chunk(chunk: list[Work], results_dir: Path) -> None:
        # runs inside one array task on a compute node (module-level, importable there)
        for work in chunk:
            outcome = execute_and_check(work)         # sandbox + trusted checker: values only
            write_result(results_dir, work.key, json.dumps(outcome))   # atomic, one file per item

    def record(key: str, path: Path) -> None:
        # runs in the instructor process, once per item per run_chunks call
        if not already_recorded(key):                # the caller's duty: see "Resume" below
            record_outcome(key, json.loads(path.read_text()))

    report = run_chunks(works, grade_chunk, folder=course.root / ".slurm" / "grade",
                        options=load_slurm_options(course.root, partition="gpu"), on_result=record)
    for key, reason in report.failed.items():        # a failure is data: a reason per item
        ...

How it runs. ``run_chunks`` writes nothing but this folder (``folder`` must be on a file system the
compute nodes share)::

    <folder>/results/<quoted key>.result   one file per item, written by ``fn`` via ``write_result``
    <folder>/submitit/<job id>/            submitit's pickles and the array tasks' stdout/stderr
    <folder>/chunks.jsonl                  one line per submitted chunk: job id, attempt, keys
    <folder>/.lock                         one run at a time per folder

1. Items whose result file already exists are handed to ``on_result`` at once and never submitted.
2. The rest are cut into chunks of ``options.chunk_size`` and submitted as ONE job array
   (``slurm_array_parallelism=options.max_jobs``); each array task runs ``fn(chunk, results_dir)`` on
   the chunk's items that still have no result.
3. The instructor process polls: each new result file goes to ``on_result(key, path)`` exactly once
   per call; a rich progress bar shows chunks pending / running / done / failed, items done and the ETA.
4. A chunk whose job ends without all its results (it failed, timed out, was preempted, ran out of
   memory, its node died, or Slurm forgot it) is resubmitted with only its missing items, at most
   ``options.retries`` times; then those items are reported failed with the reason (submitit's
   exception, or the Slurm state). A chunk that was ``scancel``-ed is not resubmitted: an operator
   stopped it. A chunk whose job succeeded but skipped items is a bug in ``fn``: reported, not retried.

Resume. Kill the instructor process, ``scancel`` the array, or let a run end with failures, then call
``run_chunks`` again with the same ``folder``: every item with a result file is handed to ``on_result``
again (without being recomputed), chunks of the previous run that are still pending or running in
Slurm are adopted rather than resubmitted, and only the other items are submitted. So ``on_result``
must be idempotent across calls — the caller records a grade only if it has not recorded it yet (the
gradebook knows); within one call it is never given the same key twice. Retries are counted per call.

Job states come from ``watch.py`` (``squeue``, and ``sacct`` when the cluster has accounting);
submitit's result pickle tells success from an exception. Whether this can work on a cluster at all:
``doctor.py`` (``autograder doctor --executor slurm``).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from autograder.errors import SlurmError
from autograder.grading.options import SlurmOptions
from autograder.grading.progress import ProgressBar
from autograder.grading.remote.work import RESULT_SUFFIX, RESULTS_DIR, result_path
from autograder.grading.slurm.watch import LOST, RUNNING, WAITING, job_states

if TYPE_CHECKING:
    import submitit

T = TypeVar("T")

SUBMITIT_DIR = "submitit"
MANIFEST = "chunks.jsonl"

SETTLE_POLLS = 2  # a job must look finished this many polls in a row before its chunk fails

logger = logging.getLogger("autograder.slurm")


@dataclass(frozen=True)
class ChunkAttempt:
    """One submitted (or adopted) chunk: its Slurm job, the attempt within this call, its keys, and
    how it ended: ``state`` "done" (every item has a result) or "failed" (``reason`` says why)."""

    job_id: str
    attempt: int
    keys: tuple[str, ...]
    state: str
    reason: str = ""


@dataclass(frozen=True)
class ChunkRunReport:
    """What ``run_chunks`` did. ``handed`` lists the keys given to ``on_result`` (in that order),
    ``resumed`` those among them that had a result before this call, ``failed`` maps each item
    without a result to the reason."""

    handed: tuple[str, ...]
    resumed: tuple[str, ...]
    failed: dict[str, str]
    attempts: tuple[ChunkAttempt, ...]
    seconds: float


@dataclass(frozen=True)
class _ChunkTask:
    """What one array task runs: ``fn`` on the chunk's items that still have no result (a requeued
    or resubmitted task never recomputes an item that has one)."""

    fn: Callable[[list[Any], Path], Any]
    key: Callable[[Any], str]
    results_dir: str

    def __call__(self, chunk: list[Any]) -> int:
        todo = [item for item in chunk if not result_path(self.results_dir, self.key(item)).exists()]
        if todo:
            self.fn(todo, Path(self.results_dir))
        return len(todo)


@dataclass
class _Chunk:
    job: Any  # submitit.slurm.slurm.SlurmJob
    keys: tuple[str, ...]
    attempt: int
    status: str = "pending"  # pending, running, done, failed
    state: str = "PENDING"
    final_polls: int = 0
    reason: str = ""
    retryable: bool = False

    @property
    def job_id(self) -> str:
        return str(self.job.job_id)


def run_chunks(
    items: Sequence[T],
    fn: Callable[[list[T], Path], Any],
    *,
    folder: Path | str,
    options: SlurmOptions,
    on_result: Callable[[str, Path], Any],
    key: Callable[[T], str] = attrgetter("key"),
    progress: bool | ProgressBar = True,
    poll_s: float = 2.0,
) -> ChunkRunReport:
    """Process ``items`` on Slurm with ``fn`` in chunks of one job array; hand each result to
    ``on_result(key, path)`` as it appears. See the module docstring for the whole story.

    ``items``: picklable work items; ``key(item)`` (default ``item.key``) is a stable, unique string.
    ``fn(chunk, results_dir)``: runs on a compute node (module-level, importable there); writes one
    result per item with ``write_result(results_dir, key, data)``; an item it cannot process should
    still get a result that says so (an exception fails, and retries, the chunk's remaining items).
    ``folder``: on a file system the compute nodes share; reuse it to resume. ``on_result``: called in
    this process, once per key per call, also for results found from earlier runs (make it idempotent).
    ``poll_s``: seconds between looks at the result folder and the queue. ``progress``: a bar of its
    own (True), none (False), or the caller's ``ProgressBar`` (its status line shows the chunks).

    An exception from ``on_result`` (or Ctrl-C) ends the call at once; the jobs keep running in
    Slurm and a later call with the same ``folder`` adopts them. Each resubmission round is its own
    array with ``max_jobs`` parallelism, so retries can briefly run beside the first array.
    """
    import submitit

    started = time.monotonic()
    folder = Path(folder).resolve()
    results_dir = folder / RESULTS_DIR
    results_dir.mkdir(parents=True, exist_ok=True)
    keys = [key(item) for item in items]
    by_key = dict(zip(keys, items, strict=True))
    if len(by_key) != len(keys):
        twice = sorted(k for k, count in Counter(keys).items() if count > 1)
        raise ValueError(f"item keys must be unique; repeated: {twice[:5]}")
    paths = {k: result_path(results_dir, k) for k in keys}
    names = {p.name: k for k, p in paths.items()}
    order = {k: i for i, k in enumerate(keys)}

    with _folder_lock(folder):
        handed: list[str] = []
        pending = set(keys)

        def collect() -> None:
            new = sorted((names[n] for n in _listdir(results_dir) if names.get(n) in pending),
                         key=order.__getitem__)
            for found in new:
                pending.discard(found)
                handed.append(found)
                on_result(found, paths[found])

        collect()
        resumed = tuple(handed)
        executor = submitit.AutoExecutor(folder=folder / SUBMITIT_DIR / "%j", cluster="slurm")
        executor.update_parameters(**options.executor_parameters())
        task = _ChunkTask(fn=fn, key=key, results_dir=str(results_dir))
        chunks = _adopt(folder, pending)
        claimed = {k for chunk in chunks for k in chunk.keys}
        todo = [k for k in keys if k in pending and k not in claimed]
        cut = [tuple(todo[i:i + options.chunk_size]) for i in range(0, len(todo), options.chunk_size)]
        chunks += _submit(executor, task, folder, by_key, cut, attempt=1)
        failed: dict[str, str] = {}
        own_bar = not isinstance(progress, ProgressBar)
        bar = progress if isinstance(progress, ProgressBar) \
            else ProgressBar(bool(progress), label="slurm", total=len(keys), done=len(handed))
        with bar if own_bar else contextlib.nullcontext(bar):
            while True:
                active = [c for c in chunks if c.status in ("pending", "running")]
                states = job_states([c.job_id for c in active]) if active else {}
                pickled = {c.job_id: c.job.paths.result_pickle.exists() for c in active}
                collect()  # after the states: a job seen finished wrote its results before
                retry: list[tuple[int, tuple[str, ...]]] = []
                for chunk in active:
                    if states is None:  # squeue did not answer: judge nothing but the results
                        if not any(k in pending for k in chunk.keys):
                            chunk.status = "done"
                        continue
                    _update(chunk, pending, states.get(chunk.job_id), pickled[chunk.job_id])
                    if chunk.status != "failed":
                        continue
                    missing = tuple(k for k in chunk.keys if k in pending)
                    if chunk.retryable and chunk.attempt <= options.retries:
                        logger.warning("chunk %s (attempt %d) %s; resubmitting its %d missing item(s)",
                                       chunk.job_id, chunk.attempt, chunk.reason, len(missing))
                        retry.append((chunk.attempt + 1, missing))
                    else:
                        failed.update((k, f"job {chunk.job_id} (attempt {chunk.attempt}): "
                                          f"{chunk.reason}") for k in missing)
                for attempt in sorted({a for a, _ in retry}):
                    chunks += _submit(executor, task, folder, by_key,
                                      [m for a, m in retry if a == attempt], attempt=attempt)
                bar.update(completed=len(handed) if own_bar else None, status=_chunk_status(chunks))
                if not any(c.status in ("pending", "running") for c in chunks):
                    break
                time.sleep(poll_s)
        collect()  # results that landed after their chunk was given up (a cancelled job's last items)
        for k in handed:
            failed.pop(k, None)
    attempts = tuple(ChunkAttempt(job_id=c.job_id, attempt=c.attempt, keys=c.keys,
                                  state=c.status, reason=c.reason) for c in chunks)
    return ChunkRunReport(handed=tuple(handed), resumed=resumed, failed=failed, attempts=attempts,
                          seconds=time.monotonic() - started)


def _update(chunk: _Chunk, pending: set[str], state: str | None, pickled: bool) -> None:
    """Move one chunk on from what this poll saw: its Slurm state, whether submitit's result pickle
    exists, which of its items still have no result."""
    if state:
        chunk.state = state
    elif not pickled:
        chunk.state = LOST
    if not any(k in pending for k in chunk.keys):
        chunk.status = "done"
        return
    if not pickled and (chunk.state in WAITING or chunk.state in RUNNING):
        chunk.status = "pending" if chunk.state in WAITING else "running"
        chunk.final_polls = 0
        return
    chunk.final_polls += 1  # finished (or forgotten) without every result: settle, then give up
    if chunk.final_polls >= SETTLE_POLLS:
        chunk.status = "failed"
        chunk.reason, chunk.retryable = _failure(chunk, pickled)


def _failure(chunk: _Chunk, pickled: bool) -> tuple[str, bool]:
    """Why a finished chunk lacks results, and whether resubmitting its missing items can help."""
    log = chunk.job.paths.stderr
    if chunk.state == "CANCELLED":
        return f"was cancelled (scancel; Slurm state CANCELLED); log: {log}", False
    if pickled:
        try:
            error = chunk.job.exception()  # reads the pickle submitit wrote; no scheduler call
        except Exception as unreadable:  # noqa: BLE001 - a broken pickle is a reason, not a crash
            return f"its result pickle could not be read ({unreadable}); log: {log}", True
        if error is None:
            return "its job returned without a result for these items (a bug in fn)", False
        last = _last_exception_line(str(error)) or type(error).__name__
        if "UncompletedJobError" in last and "timed-out" in last:  # submitit's USR2 handler
            return f"reached its time limit (Slurm's warning signal; {last}); log: {log}", True
        return f"raised {last}; log: {log}", True
    if chunk.state == LOST:
        return f"Slurm no longer knows its job and it left no result; log: {log}", True
    what = {"TIMEOUT": "reached its time limit", "PREEMPTED": "was preempted",
            "NODE_FAIL": "lost its node", "OUT_OF_MEMORY": "ran out of memory", "FAILED": "failed",
            "COMPLETED": "finished without a result for these items"}.get(chunk.state, "ended")
    return f"{what} (Slurm state {chunk.state}); log: {log}", chunk.state != "COMPLETED"


def _last_exception_line(message: str) -> str:
    """The ``Type: message`` line of the traceback inside submitit's FailedJobError message (the
    trace sits between two lines of dashes)."""
    parts = message.split("-" * 22 + "\n")
    trace = parts[1] if len(parts) >= 3 else message
    lines = [line.strip() for line in trace.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _submit(executor: submitit.AutoExecutor, task: _ChunkTask, folder: Path, by_key: dict[str, Any],
            cuts: list[tuple[str, ...]], *, attempt: int) -> list[_Chunk]:
    """Submit ``cuts`` (lists of keys) as one job array; record each chunk in the manifest."""
    if not cuts:
        return []
    try:
        jobs = executor.map_array(task, [[by_key[k] for k in cut] for cut in cuts])
    except Exception as error:
        raise SlurmError(f"could not submit {len(cuts)} chunk(s) to Slurm: {error}") from error
    chunks = [_Chunk(job=job, keys=cut, attempt=attempt) for job, cut in zip(jobs, cuts, strict=True)]
    with open(folder / MANIFEST, "a") as manifest:
        for chunk in chunks:
            manifest.write(json.dumps({"job_id": chunk.job_id, "attempt": attempt,
                                       "keys": list(chunk.keys), "submitted": time.time()}) + "\n")
    logger.info("submitted %d chunk(s) as job array %s (attempt %d)", len(chunks),
                chunks[0].job_id.split("_")[0], attempt)
    return chunks


def _adopt(folder: Path, pending: set[str]) -> list[_Chunk]:
    """Chunks an earlier run submitted that Slurm still has queued or running: watched, not redone."""
    manifest = folder / MANIFEST
    if not manifest.is_file():
        return []
    from submitit.slurm.slurm import SlurmJob

    entries = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    states = job_states([e["job_id"] for e in entries])
    if states is None:
        raise SlurmError("squeue does not answer: cannot tell which jobs of the earlier run still "
                         "run (is the Slurm controller up? SLURM_CONF?)")
    adopted: list[_Chunk] = []
    claimed: set[str] = set()
    for entry in reversed(entries):  # newest first
        state = states.get(entry["job_id"], "")
        keys = tuple(k for k in entry["keys"] if k in pending and k not in claimed)
        if keys and (state in WAITING or state in RUNNING):
            job: SlurmJob[int] = SlurmJob(folder=folder / SUBMITIT_DIR / "%j",
                                          job_id=entry["job_id"])
            adopted.append(_Chunk(job=job, keys=keys, attempt=1, state=state,  # retries: per call
                                  status="pending" if state in WAITING else "running"))
            claimed.update(keys)
    if adopted:
        logger.info("adopted %d chunk(s) still queued or running from an earlier run", len(adopted))
    return adopted


def _listdir(path: Path) -> list[str]:
    with os.scandir(path) as entries:
        return [e.name for e in entries if e.name.endswith(RESULT_SUFFIX)]


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    with open(folder / ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SlurmError(f"another run is using {folder} (it holds {folder / '.lock'})") from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _chunk_status(chunks: list[_Chunk]) -> str:
    count = {s: sum(c.status == s for c in chunks) for s in ("pending", "running", "done", "failed")}
    return (f"chunks: {count['pending']} pending, {count['running']} running, {count['done']} done, "
            f"{count['failed']} failed")
