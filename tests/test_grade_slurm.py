"""``autograder grade --executor slurm`` on the real one-node cluster of ``tests/support/slurm_cluster.py``.

The whole exercise catalogue (the reference and every wrong or alternative implementation of the six
exercises) is graded twice from identical copies: locally (the session fixture
``autograded_catalogue_course``), and on Slurm through the command line with the course's
``c.Autograder.slurm`` settings. The Slurm run is hurt on purpose: its instructor process
is SIGKILLed after its first recorded grade, results keep landing from the still-running array, then
the array is ``scancel``-ed; a rerun must record the results already on disk without re-running them,
submit only what is missing, and end with every submission graded exactly once — with every grade cell
scoring as local grading scored it. A toy course then checks that an array task killed by Slurm's time
limit is retried and its submission recorded once, and ``doctor --executor slurm`` passes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import unquote

import autograder_toy as toy
import nbformat
import pytest
from conftest import ungraded_copy
from nbformat.v4 import new_code_cell
from nbgrader.api import Gradebook, MissingEntry

from autograder.authoring import samples
from autograder.cli import main as cli_main
from autograder.errors import DeviceError
from autograder.grading import grade
from autograder.grading.options import SlurmOptions
from autograder.grading.remote.work import RESULT_SUFFIX, RESULTS_DIR
from autograder.grading.slurm.chunks import MANIFEST
from autograder.grading.slurm.executor import SLURM_FOLDER

ROOT = Path(__file__).resolve().parents[1]
# two array tasks at once on the 2-core CI machine; 83 submissions in 4 chunks
SLURM_CONFIG = {"partition": "debug", "cpus_per_task": 1, "mem_gb": 2, "time_min": 5,
                "max_jobs": 2, "chunk_size": 21, "retries": 2}


def _set_slurm_config(root: Path, **changes) -> None:
    settings = {**SLURM_CONFIG, **changes}
    with open(root / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.Autograder.slurm = {settings!r}\n")


def _grade_cells(root: Path, pairs) -> dict[tuple[str, str], dict[str, float]]:
    scores = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for assignment, student in pairs:
            nb = gb.find_submission_notebook(assignment, assignment, student)
            scores[(assignment, student)] = {g.name: float(g.score) for g in nb.grades}
    return scores


def _recorded(root: Path, pairs) -> set[tuple[str, str]]:
    if not (root / "gradebook.db").exists():
        return set()
    found = set()
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for assignment, student in pairs:
            try:
                gb.find_submission(assignment, student)
            except MissingEntry:
                continue
            found.add((assignment, student))
    return found


def _run_record_mtime(root: Path, assignment: str, student: str) -> int:
    return (root / "autograded" / student / ".autograder" / f"{assignment}.json").stat().st_mtime_ns


def _results_on_disk(folder: Path) -> set[str]:
    results = folder / RESULTS_DIR
    if not results.is_dir():
        return set()
    return {unquote(p.name[:-len(RESULT_SUFFIX)]) for p in results.iterdir()
            if p.name.endswith(RESULT_SUFFIX)}


def _remove_when_retried(folder: Path, flag: Path, timeout_s: float = 600) -> None:
    """Remove ``flag`` as soon as the chunk manifest shows a second attempt."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if any(entry.get("attempt", 1) > 1 for entry in _manifest(folder)):
                flag.unlink(missing_ok=True)
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.1)


def _manifest(folder: Path) -> list[dict]:
    path = folder / MANIFEST
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _wait_for(what: str, ready, timeout: float = 120, process=None) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert process is None or process.poll() is None, f"the instructor exited before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def catalogue_class(autograded_catalogue_course, tmp_path_factory):
    """The catalogue graded locally (the session fixture) and an ungraded copy of the same class."""
    source, local, summary = autograded_catalogue_course
    assert {r.status for r in summary.results} == {"graded"}, summary.results
    on_slurm = ungraded_copy(source, tmp_path_factory.mktemp("slurm-grade") / "course")
    _set_slurm_config(on_slurm)
    pairs = sorted((a, s) for a in source.assignments for s in source.students[a])
    return local, on_slurm, pairs


@pytest.fixture(scope="module")
def faulty_slurm_run(slurm_cluster, catalogue_class):
    """The catalogue on Slurm: instructor SIGKILLed, then scancel, then a rerun (see the docstring)."""
    local, root, pairs = catalogue_class
    folder = root / SLURM_FOLDER
    began = time.monotonic()
    command = [sys.executable, "-m", "autograder.cli", "--course-root", str(root), "grade",
               "--executor", "slurm", "--allow-cpu", "--no-progress"]
    instructor = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  start_new_session=True)
    try:
        _wait_for("a first recorded grade", lambda: _recorded(root, pairs), process=instructor)
    finally:
        os.killpg(instructor.pid, signal.SIGKILL)
        instructor.wait(timeout=30)
    recorded_by_killed = _recorded(root, pairs)
    stamps = {pair: _run_record_mtime(root, *pair) for pair in recorded_by_killed}
    # the array runs on without its instructor: results land on disk, nobody records them
    _wait_for("results written after the kill", lambda: len(_results_on_disk(folder)) >= 2)
    arrays = sorted({entry["job_id"].split("_")[0] for entry in _manifest(folder)})
    slurm_cluster.run("scancel", *arrays)
    _wait_for("the cancelled array to leave the queue",
              lambda: not slurm_cluster.run("squeue", "-h", "-o", "%i").stdout.strip(), timeout=60)
    on_disk = _results_on_disk(folder)
    chunks_before = len(_manifest(folder))

    started = time.monotonic()
    summary = grade(executor="slurm", course_root=root, allow_cpu=True, progress=False, poll_s=0.5)
    rerun_s = time.monotonic() - started
    resubmitted = [key for entry in _manifest(folder)[chunks_before:] for key in entry["keys"]]
    return {"local": local, "root": root, "pairs": pairs, "summary": summary, "folder": folder,
            "recorded_by_killed": recorded_by_killed, "stamps": stamps, "on_disk": on_disk,
            "resubmitted": resubmitted, "rerun_s": rerun_s, "slurm_s": time.monotonic() - began}


@pytest.mark.slurm
def test_catalogue_scores_on_slurm_are_identical_to_local_grading(faulty_slurm_run):
    run = faulty_slurm_run
    local = _grade_cells(run["local"], run["pairs"])
    on_slurm = _grade_cells(run["root"], run["pairs"])
    differences = [f"{pair}: local {local[pair]} slurm {on_slurm[pair]}" for pair in run["pairs"]
                   if local[pair] != on_slurm[pair]]
    assert not differences, "\n".join(differences)
    assert len({tuple(sorted(cells.items())) for cells in on_slurm.values()}) > 20  # not all alike
    record = json.loads((run["root"] / "autograded" / samples.REFERENCE_STUDENT / ".autograder"
                         / "01_strides.json").read_text())
    assert record["device"] == "cpu" and record["problems"] == []


@pytest.mark.slurm
def test_killed_instructor_and_scancel_then_a_rerun_grade_each_submission_once(faulty_slurm_run):
    run = faulty_slurm_run
    root, pairs, summary = run["root"], run["pairs"], run["summary"]
    before = run["recorded_by_killed"]
    on_disk = {tuple(key.split("/")[:2]) for key in run["on_disk"]} - before  # not yet recorded
    assert before and on_disk, (before, on_disk)
    assert len(before) + len(on_disk) < len(pairs), "the scancel did not land mid-run"
    status = {(r.assignment, r.student): r.status for r in summary.results}
    assert sorted(status) == pairs  # every submission exactly once in the rerun's summary
    assert {p for p, s in status.items() if s == "skipped"} == before
    assert {s for p, s in status.items() if p not in before} == {"graded"}, summary.results
    # results already on disk were recorded, never re-run; only the rest was submitted again
    resubmitted = set(run["resubmitted"])
    assert not {tuple(key.split("/")[:2]) for key in resubmitted} & on_disk
    assert {tuple(k.split("/")[:2]) for k in resubmitted} == set(pairs) - before - on_disk
    for pair, stamp in run["stamps"].items():  # what the killed run recorded was not redone
        assert _run_record_mtime(root, *pair) == stamp, pair
    assert _recorded(root, pairs) == set(pairs)
    assert not _results_on_disk(run["folder"]), "every result is consumed once recorded"
    assert not list((root / "autograded").glob("*/.grading-*")), "staging directories left behind"
    print(f"\nSlurm: killed run + scancel + rerun {run['slurm_s']:.1f} s, of which the rerun of "
          f"{len(pairs) - len(before)} submissions {run['rerun_s']:.1f} s; {summary.timings}")


HANG_ONCE = """\
import os, time
while os.path.exists({marker!r}):  # the first execution outlives the array task's time limit
    time.sleep(1)
"""


@pytest.fixture(scope="module")
def hang_once_course(tmp_path_factory):
    """The toy course plus a grade cell that hangs while a flag file exists. The cell runs in the
    checker, which can write nothing outside its own folders (``confine.py``) but reads the machine:
    the flag lies in /var/tmp (the checker's /tmp is its own) and the test removes it once the
    first attempt has been given up (``_remove_when_retried``)."""
    base = tmp_path_factory.mktemp("hang-once")
    root, marker = base / "course", Path("/var/tmp") / f"autograder-hang-{os.getpid()}-{base.name}"
    marker.write_text("hang")
    root.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    nb = toy.source_notebook()
    cell = new_code_cell(HANG_ONCE.format(marker=str(marker)), metadata={"nbgrader": {
        "grade": True, "grade_id": "test_once", "locked": True, "points": 1.0,
        "schema_version": 3, "solution": False, "task": False}})
    cell.id = "test_once"
    nb.cells.append(cell)
    source = root / "solutions" / toy.ASSIGNMENT / f"{toy.ASSIGNMENT}.ipynb"
    source.parent.mkdir(parents=True)
    nbformat.write(nb, source)
    toy.run_nbgrader(root, "generate_assignment", toy.ASSIGNMENT, "--force")
    toy.submit(root, "patient")
    yield root, marker
    marker.unlink(missing_ok=True)


@pytest.mark.slurm
def test_a_task_killed_by_its_time_limit_is_retried_and_recorded_once(slurm_cluster,
                                                                      hang_once_course):
    root, marker = hang_once_course
    # 2 minutes, the shortest that leaves the retry time: submitit asks for its warning signal
    # min(90, 30 * minutes) s before the end, and Slurm, which looks every 30 s, sends it as much as
    # 30 s earlier still (with 1 minute, any time after the start)
    options = SlurmOptions(**{**SLURM_CONFIG, "time_min": 2, "chunk_size": 1})
    import threading

    threading.Thread(target=_remove_when_retried, args=(root / SLURM_FOLDER, marker),
                     daemon=True).start()
    summary = grade(executor="slurm", course_root=root, slurm=options, allow_cpu=True,
                    timeout=600, progress=False, poll_s=0.5)
    [result] = summary.results
    assert (result.student, result.status) == ("patient", "graded"), result
    assert result.score == result.max_score == sum(toy.POINTS.values()) + 1, result
    assert not marker.exists()  # hung on the first attempt, ran on the second
    chunks = _manifest(root / SLURM_FOLDER)
    assert [entry["attempt"] for entry in chunks] == [1, 2], chunks
    assert chunks[0]["keys"] == chunks[1]["keys"]
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert [s.student.id for s in gb.find_assignment(toy.ASSIGNMENT).submissions] == ["patient"]


@pytest.mark.slurm
def test_doctor_checks_the_cluster(slurm_cluster, hang_once_course, capsys):
    root, _ = hang_once_course
    status = cli_main(["--course-root", str(root), "doctor", "--executor", "slurm",
                       "--partition", "debug"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "Slurm (--executor slurm)" in out and "ran on" in out
    assert cli_main(["--course-root", str(root), "doctor", "--executor", "slurm",
                     "--partition", "nope"]) == 1


def test_the_gpu_rule_on_slurm_needs_gpus_per_task_for_cuda(hang_once_course):
    root, _ = hang_once_course
    with pytest.raises(DeviceError, match="--gpus-per-task"):
        grade(course_root=root, executor="slurm", device="cuda", progress=False,
              slurm=SlurmOptions(gpus_per_task=0))
    with pytest.raises(DeviceError, match="--allow-cpu"):  # the toy has a GPU-only check
        grade(course_root=root, executor="slurm", device="cpu", allow_cpu=False, progress=False,
              slurm=SlurmOptions())


def test_slurm_options_without_the_slurm_executor_are_refused(hang_once_course, capsys):
    root, _ = hang_once_course
    assert cli_main(["--course-root", str(root), "grade", "--partition", "debug"]) == 1
    assert "need --executor slurm" in capsys.readouterr().err
