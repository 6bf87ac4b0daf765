"""``autograder.grading.slurm.chunks`` against a real one-node Slurm cluster (the ``slurm_cluster`` fixture).

The work function squares numbers and writes JSON results; every execution of an item leaves a marker
file, so a test can prove which items were (re)computed. The cluster tests are marked ``slurm``; the
options and file-format tests at the end need no cluster.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import cloudpickle
import pytest

from autograder.errors import CourseError
from autograder.grading.options import SlurmOptions, load_slurm_options
from autograder.grading.remote.work import RESULTS_DIR, result_path, write_result
from autograder.grading.slurm.chunks import run_chunks
from autograder.grading.slurm.doctor import doctor_slurm

ROOT = Path(__file__).resolve().parents[1]

# The array tasks cannot import this test module (pytest put tests/ on sys.path, the job's python
# has no such entry): ship its functions and classes by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

FAST = dict(partition="debug", cpus_per_task=1, mem_gb=0.5, time_min=5, max_jobs=4, chunk_size=5,
            retries=2)


@dataclass(frozen=True)
class Number:
    key: str
    value: int
    markers: str  # folder for one marker file per execution
    sleep_s: float = 0.0
    hang_first_time: bool = False  # the first execution sleeps past any time limit


def square_chunk(chunk: list[Number], results_dir: Path) -> None:
    """The work function: square each number, one JSON result per item."""
    for item in chunk:
        marker = Path(item.markers) / f"{item.key}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        marker.write_text(os.environ.get("SLURM_JOB_ID", ""))
        if item.hang_first_time and len(executions(Path(item.markers), item.key)) == 1:
            time.sleep(3600)
        time.sleep(item.sleep_s)
        write_result(results_dir, item.key, json.dumps({"value": item.value,
                                                        "square": item.value ** 2}))


def executions(markers: Path, key: str) -> list[Path]:
    return sorted(markers.glob(f"{key}.*"))


def numbers(markers: Path, count: int, *, sleep_s=lambda i: 0.0, hang=()) -> list[Number]:
    markers.mkdir(exist_ok=True)
    return [Number(key=f"n{i:02d}", value=i, markers=str(markers), sleep_s=sleep_s(i),
                   hang_first_time=f"n{i:02d}" in hang) for i in range(count)]


class Recorder:
    """An idempotent ``on_result``, as the grading engine will write it: a key is recorded once,
    however often it is handed over; ``calls`` counts every hand-over of this run."""

    def __init__(self, recorded: dict[str, dict] | None = None) -> None:
        self.recorded = recorded if recorded is not None else {}
        self.calls: list[str] = []

    def __call__(self, key: str, path: Path) -> None:
        self.calls.append(key)
        if key not in self.recorded:
            self.recorded[key] = json.loads(path.read_text())


def assert_all_squares(recorded: dict[str, dict], items: list[Number]) -> None:
    assert recorded == {n.key: {"value": n.value, "square": n.value ** 2} for n in items}


def array_ids(report) -> set[str]:
    return {a.job_id.split("_")[0] for a in report.attempts}


@pytest.mark.slurm
def test_every_result_is_handed_over_exactly_once(slurm_cluster, tmp_path):
    items = numbers(tmp_path / "markers", 20)
    recorder = Recorder()
    report = run_chunks(items, square_chunk, folder=tmp_path / "run", options=SlurmOptions(**FAST),
                        on_result=recorder, progress=False, poll_s=0.3)
    assert sorted(recorder.calls) == [n.key for n in items]  # each key once
    assert_all_squares(recorder.recorded, items)
    assert report.failed == {} and report.resumed == ()
    assert len(report.attempts) == 4 and len(array_ids(report)) == 1  # 4 chunks, ONE job array
    assert [a.keys for a in report.attempts] == [tuple(n.key for n in items[i:i + 5])
                                                for i in range(0, 20, 5)]
    assert all(a.state == "done" and a.attempt == 1 for a in report.attempts)
    assert all(len(executions(tmp_path / "markers", n.key)) == 1 for n in items)


@pytest.mark.slurm
def test_scancel_mid_run_keeps_results_and_a_rerun_completes_the_rest(slurm_cluster, tmp_path):
    markers, folder = tmp_path / "markers", tmp_path / "run"
    # the first chunk is slow (2 s an item), so scancel (at its first result; the cluster's KillWait
    # is 2 s and srun waits 2 s more) catches it half done
    items = numbers(markers, 20, sleep_s=lambda i: 2.0 if i < 5 else 0.1)
    recorded: dict[str, dict] = {}
    cancelled = []

    def cancel_after_first(key: str, path: Path) -> None:
        Recorder(recorded)(key, path)
        if not cancelled:
            first = json.loads((folder / "chunks.jsonl").read_text().splitlines()[0])
            cancelled.append(first["job_id"].split("_")[0])
            subprocess.run(["scancel", cancelled[0]], check=True)

    first = run_chunks(items, square_chunk, folder=folder, options=SlurmOptions(**FAST),
                       on_result=cancel_after_first, progress=False, poll_s=0.3)
    had_result = {k for k in recorded}
    assert 0 < len(had_result) < 20, had_result
    assert set(first.failed) == {n.key for n in items} - had_result
    assert all("cancelled" in reason for reason in first.failed.values()), first.failed
    assert all(a.attempt == 1 for a in first.attempts)  # a scancel is not retried
    # a chunk caught half done: some of its items have results, the others do not
    assert any(0 < sum(k in had_result for k in a.keys) < len(a.keys) for a in first.attempts), (sorted(had_result), first.attempts)
    files = {k: result_path(folder / RESULTS_DIR, k).stat() for k in had_result}

    recorder = Recorder(recorded)
    second = run_chunks(items, square_chunk, folder=folder, options=SlurmOptions(**FAST),
                        on_result=recorder, progress=False, poll_s=0.3)
    assert set(second.resumed) == had_result
    assert sorted(recorder.calls) == [n.key for n in items]  # once per key in this run
    assert second.failed == {}
    assert_all_squares(recorded, items)
    submitted = {k for a in second.attempts for k in a.keys}
    assert submitted == {n.key for n in items} - had_result  # only the missing ones
    for key, before in files.items():  # never recomputed, never rewritten
        assert len(executions(markers, key)) == 1, key
        after = result_path(folder / RESULTS_DIR, key).stat()
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), key


@pytest.mark.slurm
def test_a_chunk_past_its_time_limit_is_retried_with_its_missing_items(slurm_cluster, tmp_path):
    markers = tmp_path / "markers"
    items = numbers(markers, 4, hang={"n01"})  # chunks (n00, n01) and (n02, n03); n01 hangs once
    recorder = Recorder()
    options = SlurmOptions(**{**FAST, "chunk_size": 2, "time_min": 1})
    report = run_chunks(items, square_chunk, folder=tmp_path / "run", options=options,
                        on_result=recorder, progress=False, poll_s=0.5)
    assert sorted(recorder.calls) == [n.key for n in items]
    assert_all_squares(recorder.recorded, items)
    assert report.failed == {}
    timed_out = [a for a in report.attempts if a.state == "failed"]
    assert len(timed_out) == 1 and timed_out[0].keys == ("n00", "n01"), report.attempts
    # Slurm's time-limit warning (USR2, submitit ends the task) or its kill, whichever came first
    assert "timed-out" in timed_out[0].reason or "time limit" in timed_out[0].reason, timed_out
    retried = [a for a in report.attempts if a.attempt == 2]
    assert [(a.keys, a.state) for a in retried] == [(("n01",), "done")]
    assert len(executions(markers, "n00")) == 1 and len(executions(markers, "n01")) == 2


KILLED_INSTRUCTOR = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import test_slurm
from autograder.grading.options import SlurmOptions
from autograder.grading.slurm.chunks import run_chunks
items = test_slurm.numbers(Path({markers!r}), 12, sleep_s=lambda i: 0.5)
run_chunks(items, test_slurm.square_chunk, folder={folder!r}, on_result=lambda k, p: None,
           options=SlurmOptions(**test_slurm.FAST), progress=False, poll_s=0.3)
"""


@pytest.mark.slurm
def test_a_rerun_after_the_instructor_was_killed_adopts_its_running_jobs(slurm_cluster, tmp_path):
    markers, folder = tmp_path / "markers", tmp_path / "run"
    script = tmp_path / "instructor.py"
    script.write_text(textwrap.dedent(KILLED_INSTRUCTOR.format(
        tests=str(ROOT / "tests"), markers=str(markers), folder=str(folder))))
    instructor = subprocess.Popen([sys.executable, str(script)], cwd=ROOT)
    results = folder / RESULTS_DIR
    deadline = time.monotonic() + 60
    while not (results.is_dir() and any(results.glob("*.result"))):
        assert instructor.poll() is None and time.monotonic() < deadline, "no result came"
        time.sleep(0.1)
    instructor.send_signal(signal.SIGKILL)
    instructor.wait()
    old_array = json.loads((folder / "chunks.jsonl").read_text().splitlines()[0])["job_id"]

    items = numbers(markers, 12, sleep_s=lambda i: 0.5)
    recorder = Recorder()
    report = run_chunks(items, square_chunk, folder=folder, options=SlurmOptions(**FAST),
                        on_result=recorder, progress=False, poll_s=0.3)
    assert sorted(recorder.calls) == [n.key for n in items] and report.failed == {}
    assert_all_squares(recorder.recorded, items)
    assert old_array.split("_")[0] in array_ids(report)  # adopted, not resubmitted
    assert all(len(executions(markers, n.key)) == 1 for n in items)  # nothing computed twice


@pytest.mark.slurm
def test_doctor_passes_on_the_cluster_and_names_a_missing_gpu(slurm_cluster, tmp_path):
    rows = doctor_slurm(SlurmOptions(**FAST), folder=tmp_path / "doctor", timeout_s=60)
    assert [check for check, _, _ in rows] == ["sinfo", "partition", "GPU gres",
                                               "accounting (sacct)", "test job"]
    assert all(ok for _, ok, _ in rows), rows
    assert "ran on" in rows[-1][2], rows[-1]

    rows = dict((check, (ok, detail)) for check, ok, detail in
                doctor_slurm(SlurmOptions(**{**FAST, "gpus_per_task": 1}),
                             folder=tmp_path / "doctor-gpu", timeout_s=30))
    assert rows["GPU gres"] == (False, "no gpu gres on debug, but gpus_per_task=1")
    assert rows["test job"][0] is False
    wrong = dict((c, ok) for c, ok, _ in doctor_slurm(SlurmOptions(partition="nope"),
                                                      folder=tmp_path / "x", timeout_s=10))
    assert wrong["partition"] is False


# --- no cluster needed ----------------------------------------------------------------------------

def test_options_come_from_the_course_config_and_overrides_win(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(textwrap.dedent("""
        c = get_config()
        c.CourseDirectory.course_id = "demo"
        c.Autograder.slurm = {"partition": "gpu", "gpus_per_task": 1, "chunk_size": 8}
    """))
    options = load_slurm_options(tmp_path, chunk_size=4)
    assert (options.partition, options.gpus_per_task, options.chunk_size) == ("gpu", 1, 4)
    assert options.retries == SlurmOptions().retries
    params = options.executor_parameters()
    assert params["slurm_partition"] == "gpu" and params["slurm_gpus_per_task"] == 1
    assert params["slurm_array_parallelism"] == options.max_jobs
    assert params["timeout_min"] == options.time_min


def test_unknown_or_invalid_options_are_refused(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\nc.Autograder.slurm = {'partion': 'gpu'}\n")
    with pytest.raises(CourseError, match="partion"):
        load_slurm_options(tmp_path)
    with pytest.raises(ValueError, match="chunk_size"):
        SlurmOptions(chunk_size=0)
    with pytest.raises(ValueError, match="mem_gb"):
        SlurmOptions(mem_gb=-1)


def test_results_are_written_atomically_under_a_quoted_key(tmp_path):
    path = write_result(tmp_path, "01_strides/alice smith", '{"score": 1}')
    assert path == result_path(tmp_path, "01_strides/alice smith") and path.parent == tmp_path
    assert path.name == "01_strides%2Falice%20smith.result"
    assert path.read_text() == '{"score": 1}'
    write_result(tmp_path, "01_strides/alice smith", b"again")
    assert path.read_bytes() == b"again"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary file left
    with pytest.raises(ValueError):
        result_path(tmp_path, "")


class FakeJob:
    """What ``_update`` reads of a submitit job: its log path and the exception it pickled."""

    def __init__(self, error: str | None = None) -> None:
        self.job_id, self.error = "7_1", error
        self.paths = type("Paths", (), {"stderr": Path("/logs/7_1_0_log.err")})()

    def exception(self):
        return None if self.error is None else Exception(
            f"Job (task=0) failed during processing with trace:\n{'-' * 22}\nTraceback ...\n"
            f"{self.error}\n{'-' * 22}\nYou can check full logs ... at paths:\n  - /a\n  - /b")


@pytest.mark.parametrize("state, pickled_error, retryable, says", [
    ("TIMEOUT", None, True, "reached its time limit (Slurm state TIMEOUT)"),
    ("FAILED", "submitit.core.utils.UncompletedJobError: Job not requeued because: timed-out and "
               "not checkpointable.", True, "reached its time limit (Slurm's warning signal"),
    ("FAILED", "ZeroDivisionError: division by zero", True, "raised ZeroDivisionError: division by"),
    ("PREEMPTED", None, True, "was preempted"),
    ("NODE_FAIL", None, True, "lost its node"),
    ("OUT_OF_MEMORY", None, True, "ran out of memory"),
    (None, None, True, "Slurm no longer knows its job"),
    ("CANCELLED", None, False, "was cancelled"),
    ("COMPLETED", None, False, "finished without a result"),
])
def test_a_finished_chunk_without_all_results_fails_after_settling(state, pickled_error, retryable,
                                                                   says):
    from autograder.grading.slurm.chunks import _Chunk, _update

    chunk = _Chunk(job=FakeJob(pickled_error), keys=("a", "b"), attempt=1)
    pickled = pickled_error is not None
    _update(chunk, {"b"}, state, pickled)
    assert chunk.status == "pending"  # one look is not enough: results may still be on their way
    _update(chunk, {"b"}, state, pickled)
    assert (chunk.status, chunk.retryable) == ("failed", retryable)
    assert says in chunk.reason and "/logs/7_1_0_log.err" in chunk.reason, chunk.reason
    _update(running := _Chunk(job=FakeJob(), keys=("a",), attempt=1), {"a"}, "RUNNING", False)
    assert running.status == "running"
    _update(running, set(), state, pickled)
    assert running.status == "done"  # every result is in, whatever the job does next


def test_keys_must_be_unique(tmp_path):
    items = [Number("a", 1, str(tmp_path)), Number("a", 2, str(tmp_path))]
    with pytest.raises(ValueError, match="unique"):
        run_chunks(items, square_chunk, folder=tmp_path, options=SlurmOptions(),
                   on_result=lambda k, p: None, progress=False)
