"""The grading engine on a tiny course: scores, limits, crashes, reruns, the GPU rule, SIGKILL safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import autograder_toy as toy
import pytest
import torch
from nbgrader.api import Gradebook, MissingEntry

from autograder.errors import DeviceError
from autograder.grading import grade
from autograder.grading.execute.forkserver import RunningNotebook, wait_any
from autograder.grading.execute.limits import ExecutionLimits, launch_message
from autograder.grading.model import GRADE, STUDENT, NotebookProgram
from autograder.grading.record import read_run_record
from autograder.sandbox.host import SandboxProcess

WRONG_SQUARE = "def square(x):\n    return 2 * x\n"  # fails the visible test of test_square
HANGS = "import time\nwhile True:\n    time.sleep(0.05)\n"
CRASHES = "import os\nos._exit(3)\n"
# a value whose pages are gone: reading it for the grade cell kills the student's process (SIGBUS)
SIGBUS = ("import os\nimport numpy as np\nwith open('trap.bin', 'wb') as f:\n    f.write(bytes(2**20))\n"
          "square = np.memmap('trap.bin', dtype=np.uint8, mode='r', shape=(2**20,))\n"
          "os.truncate('trap.bin', 0)\n")
SHOUTS = "import os\nos.write(2, b'to the cell, not the log\\n')\nos._exit(4)\n"  # dies after stderr
# asks for far more than the 0.5 GB limit at once: refused by the child's address-space limit
# (a hog that grows page by page is stopped by the parent's watchdog, tested further down)
HOGS = "buffer = bytearray(4 * 2**30)\n"


def _cell_scores(root: Path, student: str) -> dict[str, float]:
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(toy.ASSIGNMENT, toy.ASSIGNMENT, student)
        return {g.name: float(g.score) for g in nb.grades}


@pytest.fixture(scope="module")
def graded_toy(tmp_path_factory):
    """One batch with a reference, a wrong answer, a hang, a crash and a memory hog (2 workers)."""
    root = toy.make_toy_course(tmp_path_factory.mktemp("toy") / "course")
    toy.submit(root, "ref")
    toy.submit(root, "wrong", square=WRONG_SQUARE)
    toy.submit(root, "hangs", total=HANGS)
    toy.submit(root, "crashes", total=CRASHES)
    toy.submit(root, "hogs", total=HOGS)
    toy.submit(root, "shouts", total=SHOUTS)
    toy.submit(root, "sigbus", square=SIGBUS)
    # device="cpu": the address-space limit applies (on CUDA only the RSS watchdog does)
    summary = grade(course_root=root, workers=2, timeout=3, memory_limit_gb=0.5,
                    device="cpu", allow_cpu=True, progress=False)
    return root, {r.student: r for r in summary.results}


def test_reference_and_wrong_answer_scores(graded_toy):
    root, results = graded_toy
    assert results["ref"].score == sum(toy.POINTS.values()) == results["ref"].max_score
    assert _cell_scores(root, "wrong") == {"test_square": 0.0, "test_total": 3.0,
                                           "test_torch_sum": 1.0, "test_total_gpu": 1.0}
    assert results["ref"].reasons == () and results["wrong"].reasons == ()


@pytest.mark.parametrize("student, reason", [
    ("hangs", "CellTimeoutError"),
    ("crashes", "exited with code 3"),
    ("hogs", "MemoryError"),
])
def test_failures_score_zero_after_the_failure_and_keep_earlier_points(graded_toy, student, reason):
    root, results = graded_toy
    assert results[student].status == "graded"
    # square was defined before the failing cell: its grade cell keeps its points; everything that
    # needed `total` (or ran after the crash) scores 0, never the full marks of an unexecuted cell
    assert _cell_scores(root, student) == {"test_square": 2.0, "test_total": 0.0,
                                           "test_torch_sum": 0.0, "test_total_gpu": 0.0}
    assert any(reason in why for why in results[student].reasons), results[student].reasons
    record = read_run_record(_course(root), student=student, assignment=toy.ASSIGNMENT)
    assert any(reason in why for why in record["problems"])


def test_a_dying_kernel_reaches_the_instructor_as_nbgrader_does(graded_toy):
    """nbgrader leaves the grade cells of a notebook whose kernel died in formgrader's manual-grade
    queue; the autograder does so for the grade cells the dead process never ran (0 points until an
    instructor decides), keeps the scores of those that ran, and says "needs review". A time or memory
    limit is the limit's verdict: no review."""
    root, results = graded_toy
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        def flagged(student):
            nb = gb.find_submission_notebook(toy.ASSIGNMENT, toy.ASSIGNMENT, student)
            return sorted(g.name for g in nb.grades if g.needs_manual_grade)
        assert flagged("crashes") == ["test_torch_sum", "test_total", "test_total_gpu"]
        assert flagged("hangs") == flagged("hogs") == flagged("ref") == []
    assert any("needs review" in why and "test_total" in why for why in results["crashes"].reasons)
    assert not any("needs review" in why for why in results["hangs"].reasons)


def test_a_grade_cell_not_run_to_completion_earns_nothing(graded_toy):
    """The verdict fails closed: the student's process dies while the checker reads the names a
    grade cell needs; that cell got no output from the checker, and counts as the death's cell (0 or
    manual review, never its points); the cells before keep theirs."""
    root, results = graded_toy
    scores = _cell_scores(root, "sigbus")
    assert scores["test_square"] == 0.0 and sum(scores.values()) == 0.0, scores
    cells = {c["cell"]: c for c in read_run_record_of(root, "sigbus")["notebooks"][toy.ASSIGNMENT]["cells"]}
    assert cells["test_square"]["status"] != "ok" and cells["square_impl"]["status"] == "ok", cells


def test_the_record_gives_a_grade_cell_the_checker_did_not_complete_an_error():
    """The invariant, over every way a grade cell can come back without its verdict (no outputs, only
    a stream, a run that stopped, a checker that died): only a cell in ``completed`` keeps its
    outputs as they are; every other one gets an error output that names why."""
    from autograder.grading.model import NotebookOutcome
    from autograder.grading.record import executed_notebook

    nb = toy.source_notebook()
    kinds = {i: (GRADE if c.metadata.get("nbgrader", {}).get("grade") else STUDENT)
             for i, c in enumerate(nb.cells) if c.cell_type == "code"}
    grade_cells = [i for i, kind in kinds.items() if kind == GRADE]
    student_cells = [i for i, kind in kinds.items() if kind == STUDENT]
    stream = [{"output_type": "stream", "name": "stdout", "text": "looks fine\n"}]
    every = dict.fromkeys(kinds, ([], 1))
    for outputs, reason in (({**every}, None), ({**every, grade_cells[0]: (stream, 1)}, None),
                            ({**every}, "the checker died")):
        run = NotebookOutcome(outputs=outputs, reason=reason, completed=set(student_cells))
        done, _ = executed_notebook(toy.source_notebook(), run, kinds)
        for index in grade_cells:
            errors = [o for o in done.cells[index].outputs if o.output_type == "error"]
            assert errors and "not run to completion" in errors[-1].evalue, (index, reason)
            assert reason is None or reason in errors[-1].evalue
    run = NotebookOutcome(outputs={**every}, completed=set(kinds))
    done, _ = executed_notebook(toy.source_notebook(), run, kinds)
    assert all(not done.cells[i].outputs for i in grade_cells)  # completed, no error: its points


def _course(root):
    from autograder.course.nbgrader import load_course

    return load_course(root)


def test_autograded_notebooks_where_nbgrader_puts_them(graded_toy):
    root, results = graded_toy
    for student in results:
        assert (root / "autograded" / student / toy.ASSIGNMENT / f"{toy.ASSIGNMENT}.ipynb").is_file()
    assert not list((root / "autograded").glob("*/.grading-*")), "staging directories left behind"


def test_the_run_record_keeps_each_cells_outcome_and_a_failed_notebooks_sandbox_log(graded_toy):
    """Why a hidden test failed, without a rerun: each code cell's status, seconds and the limit that
    fired are in the run record; a notebook that did not complete has its sandbox's log (what it wrote
    while this notebook ran) kept beside the record, and the record names the file."""
    root, _ = graded_toy

    def notebook(student: str) -> dict:
        return read_run_record_of(root, student)["notebooks"][toy.ASSIGNMENT]

    def by_cell(student: str) -> dict[str, dict]:
        return {c["cell"]: c for c in notebook(student)["cells"]}

    ref = by_cell("ref")
    assert set(ref) >= {"square_impl", "total_impl", *toy.POINTS} and ref["test_square"]["kind"] == GRADE
    assert all(c["status"] == "ok" and c["seconds"] >= 0 for c in ref.values()), ref
    assert notebook("ref")["sandbox_log"] is None
    hangs = by_cell("hangs")
    assert (hangs["total_impl"]["status"], hangs["total_impl"]["limit"]) == ("limit", "CellTimeoutError")
    assert hangs["square_impl"]["status"] == "ok" and hangs["test_square"]["status"] == "ok"
    wrong = by_cell("wrong")
    assert (wrong["test_square"]["status"], wrong["test_square"]["error"]) == ("error", "AssertionError")
    shouts = by_cell("shouts")
    assert (shouts["total_impl"]["status"], shouts["total_impl"]["error"], shouts["total_impl"]["seconds"]) == (
        "error", "KernelDied", None)
    assert {shouts[g]["status"] for g in toy.POINTS if g != "test_square"} == {"not run"}
    named = notebook("shouts")["sandbox_log"]
    log = root / "autograded" / "shouts" / ".autograder" / named
    assert named == f"{toy.ASSIGNMENT}.{toy.ASSIGNMENT}.sandbox.log"
    kept = log.read_text()  # this notebook's part only: the template served others before it
    assert "to the cell, not the log" not in kept
    assert kept.count("launch ") == 1 and "the notebook's process ended" in kept and '"code": 4' in kept
    assert not (root / "autograded" / "ref" / ".autograder" / named).exists()


def read_run_record_of(root: Path, student: str) -> dict:
    from autograder.grading.run_record import read_record

    found = read_record(root / "autograded" / student / toy.ASSIGNMENT)
    assert found is not None, f"no run record for {student}"
    return found


def test_rerun_skips_graded_and_force_regrades(graded_toy):
    root, _ = graded_toy
    again = grade(course_root=root, students=["ref", "wrong"], allow_cpu=True, progress=False)
    assert {(r.student, r.status) for r in again.results} == {("ref", "skipped"), ("wrong", "skipped")}
    forced = grade(course_root=root, students=["wrong"], force=True, allow_cpu=True, progress=False)
    assert [(r.student, r.status, r.score) for r in forced.results] == [("wrong", "graded", 5.0)]


def test_gpu_rule(tmp_path):
    root = toy.make_toy_course(tmp_path / "course")
    toy.submit(root, "ref")
    with pytest.raises(DeviceError, match="--allow-cpu"):
        grade(course_root=root, device="cpu", allow_cpu=False, progress=False)
    grade(course_root=root, device="auto", allow_cpu=False, progress=False)
    nb = (root / "autograded/ref/toy/toy.ipynb").read_text()
    if torch.cuda.is_available():  # a GPU runner: the check runs on CUDA
        assert _cell_scores(root, "ref")["test_total_gpu"] == 1.0 and "NeedsGPU" not in nb
    else:  # without --allow-cpu the GPU cell scores 0 with the NeedsGPU reason ...
        assert _cell_scores(root, "ref")["test_total_gpu"] == 0.0
        assert "NeedsGPU" in nb and "this check needs a GPU" in nb
    # ... and with it, the check runs its CPU path in the child and says so
    grade(course_root=root, device="cpu", allow_cpu=True, force=True, progress=False)
    assert _cell_scores(root, "ref")["test_total_gpu"] == 1.0
    assert "GPU check ran on CPU" in (root / "autograded/ref/toy/toy.ipynb").read_text()


def _wait_done(box: SandboxProcess) -> None:
    deadline = time.monotonic() + 30
    while box.state == "busy" and time.monotonic() < deadline:
        time.sleep(0.05)
        box.pump()
    assert box.state == "ready", box.state


def _watch(job: NotebookProgram, box: SandboxProcess, *, workdir: Path,
           student_rss_bytes: int | None = None, memory_limit_gb: float | None = None) -> RunningNotebook:
    limits = ExecutionLimits(memory_limit_gb=memory_limit_gb, student_address_space_bytes=None,
                             student_rss_bytes=student_rss_bytes, checker_rss_bytes=None, threads=1)
    run = RunningNotebook(key="t", program=job, limits=limits, workdir=str(workdir))
    run.sockets = box.start_notebook(launch_message(job, limits), [])
    run.start()
    deadline = time.monotonic() + 60
    while not run.finished and time.monotonic() < deadline:
        wait_any([run], timeout=0.2)
        run.pump()
    run.close()
    assert run.finished
    _wait_done(box)
    return run


def test_what_the_checker_decodes_for_the_student_has_a_budget(tmp_path, sandbox):
    """A few bytes from the student's process must not make the checker hold gigabytes: a stride-0
    view standing for 2 GiB (or a memmap filling the checker's disk) is refused against the
    notebook's memory limit, and the grade cell that reads it fails saying so; a small value passes."""
    from autograder.sandbox.inside.codec import DecodeBudget
    from autograder.sandbox.inside.wire import WireError

    huge = "import torch\nsquare = torch.zeros(1).expand(2**29)\nsmall = torch.zeros(3)\n"
    job = NotebookProgram(cells=[(0, huge, [], STUDENT), (1, "print(small.shape)", [], GRADE),
                                 (2, "print(square.shape)", [], GRADE)], timeout=30)
    run = _watch(job, sandbox, workdir=tmp_path, memory_limit_gb=0.5)
    assert run.reason is None and 1 in run.completed and 2 not in run.completed  # fails closed
    small, big = run.outputs[1][0], run.outputs[2][0]
    assert not [o for o in small if o["output_type"] == "error"], small
    errors = [o for o in big if o["output_type"] == "error"]
    assert errors and errors[0]["ename"] == "NameLookupError" and "stands for 2147483648 bytes" in \
        errors[0]["evalue"], big
    budget = DecodeBudget(None, 100)
    budget.spend_disk(60)
    with pytest.raises(WireError, match="more than 100 bytes to the checker's disk"):
        budget.spend_disk(41)


def test_resident_memory_watchdog_kills_a_hog(tmp_path, sandbox):
    """Without an address-space limit (as on CUDA) the sandbox's RSS watchdog stops the student."""
    touch = "x = bytearray(1500 * 2**20)\nx[::4096] = b'1' * len(x[::4096])\nimport time\ntime.sleep(30)\n"
    job = NotebookProgram(cells=[(0, "a = 1", [], STUDENT), (1, touch, [], STUDENT),
                              (2, "b = 2", [], STUDENT)], timeout=60)
    run = _watch(job, sandbox, workdir=tmp_path, student_rss_bytes=1 << 30)
    assert 0 in run.outputs and 2 not in run.outputs
    assert run.failed_ename == "MemoryLimitExceeded" and "memory use" in run.reason
    assert run.running_cell == 1


def test_cell_that_swallows_the_timeout_is_killed(tmp_path, sandbox):
    stubborn = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass\n"
    job = NotebookProgram(cells=[(0, stubborn, [], STUDENT), (1, "x = 1", [], STUDENT)], timeout=1)
    run = _watch(job, sandbox, workdir=tmp_path)
    assert run.failed_ename == "CellTimeoutError" and "killed" in run.reason
    assert run.outputs == {} and run.running_cell == 0


def test_sigkill_mid_run_then_rerun_records_every_grade_exactly_once(tmp_path):
    root = toy.make_toy_course(tmp_path / "course")
    students = [f"s{i:02d}" for i in range(8)]
    for student in students:  # each takes about a second, so the kill lands mid-batch
        toy.submit(root, student, square="import time\ntime.sleep(1.0)\n" + toy.SQUARE)
    command = [sys.executable, "-m", "autograder.cli", "--course-root", str(root), "grade",
               "--workers", "1", "--allow-cpu", "--no-progress"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(_graded(root, students)) < 2:
            time.sleep(0.1)
        before = _graded(root, students)
        assert 2 <= len(before) < len(students), f"kill did not land mid-run ({len(before)} graded)"
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    graded_before_kill = _graded(root, students)
    assert graded_before_kill >= before  # nothing written before the kill was lost
    stamps = {s: _record_mtime(root, s) for s in graded_before_kill}
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        submissions = gb.find_assignment(toy.ASSIGNMENT).submissions
        assert sorted(s.student.id for s in submissions) == students  # exactly once each
        for submission in submissions:
            grades = [g for nb in submission.notebooks for g in nb.grades]
            assert sorted(g.name for g in grades) == sorted(toy.POINTS)
            assert all(g.auto_score is not None for g in grades)
            assert float(submission.score) == sum(toy.POINTS.values())
    for student in graded_before_kill:  # the rerun skipped what was already recorded
        assert _record_mtime(root, student) == stamps[student]
    assert not list((root / "autograded").glob("*/.grading-*"))


def _graded(root: Path, students: list[str]) -> set[str]:
    if not (root / "gradebook.db").exists():
        return set()
    found = set()
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student in students:
            try:
                gb.find_submission(toy.ASSIGNMENT, student)
            except MissingEntry:
                continue
            found.add(student)
    return found


def _record_mtime(root: Path, student: str) -> float:
    return (root / "autograded" / student / ".autograder" / f"{toy.ASSIGNMENT}.json").stat().st_mtime


def test_a_child_that_cannot_start_is_not_a_zero(tmp_path, sandbox):
    """A grading-machine failure before the first cell records nothing (the student keeps no 0)."""
    from autograder.errors import GradingError
    from autograder.grading.record import executed_notebook

    job = NotebookProgram(cells=[(0, "x = 1", [], STUDENT)], timeout=5)
    run = _watch(job, sandbox, workdir=tmp_path / "missing")
    assert run.reason and run.outputs == {} and run.running_cell is None
    nb = toy.source_notebook()
    with pytest.raises(GradingError, match="before running any cell"):
        executed_notebook(nb, run)


def test_a_set_up_cell_that_hangs_is_the_graders_fault_never_a_score(tmp_path):
    """An instructor's locked cell that times out before any student code ran (the service saw an
    `imports` cell hang): nothing is recorded, the result says the grader failed; a student whose own
    cell hangs after it is scored as before (that one is theirs)."""
    root = toy.make_toy_course(tmp_path / "course", setup="import pathlib, time\n"
                               "time.sleep(30) if pathlib.Path('hang').exists() else None\n")
    toy.submit(root, "ref")
    (root / "submitted" / "ref" / "toy" / "hang").write_text("")  # this one's set-up hangs
    toy.submit(root, "own-hang", total=HANGS)
    summary = grade(course_root=root, workers=2, timeout=2, allow_cpu=True, progress=False)
    results = {r.student: r for r in summary.results}
    ref = results["ref"]
    assert (ref.status, ref.grader_fault, ref.score) == ("failed", True, None), ref
    assert "set-up cell setup failed before any of the student" in ref.reasons[0]
    assert "CellTimeoutError" in ref.reasons[0]
    assert not (root / "autograded" / "ref").exists()
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb, pytest.raises(MissingEntry):
        gb.find_submission(toy.ASSIGNMENT, "ref")
    own = results["own-hang"]
    assert (own.status, own.grader_fault) == ("graded", False) and own.score < sum(toy.POINTS.values())


STOPS_ITS_TEMPLATE = (
    "import os, signal\n"
    "for pid in [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:\n"
    "    try:\n"
    "        if b'template.py' in open(f'/proc/{pid}/cmdline', 'rb').read():\n"
    "            os.kill(int(pid), signal.SIGSTOP)\n"
    "    except OSError:\n"
    "        pass\n"
    "os.kill(os.getppid(), signal.SIGSTOP) if os.getppid() > 1 else None\n" + toy.SQUARE)


def test_slow_cells_meet_the_notebook_limit_and_a_stopped_template_is_replaced(tmp_path):
    """Cells that each stay under the per-cell limit still meet the whole notebook's; a notebook
    that tries to stop its sandbox's template reaches nothing (and a stuck sandbox would be
    replaced): every student after it on the same single worker is graded normally."""
    root = toy.make_toy_course(tmp_path / "course")
    toy.submit(root, "a-slow", square="import time\ntime.sleep(1.6)\n" + toy.SQUARE,
               total="import time\ntime.sleep(1.6)\n" + toy.TOTAL)
    toy.submit(root, "b-stopper", square=STOPS_ITS_TEMPLATE)
    for student in ("c-ref", "d-ref"):
        toy.submit(root, student)
    summary = grade(course_root=root, workers=1, timeout=2, notebook_timeout=2.5,
                    allow_cpu=True, progress=False)
    results = {r.student: r for r in summary.results}
    assert {r.status for r in results.values()} == {"graded"}, results
    assert any("all cells together" in reason for reason in results["a-slow"].reasons)
    assert _cell_scores(root, "a-slow")["test_total"] == 0.0
    full = sum(toy.POINTS.values())
    assert results["b-stopper"].score == results["c-ref"].score == results["d-ref"].score == full


def test_a_grade_cell_acts_on_the_students_namespace(tmp_path, sandbox):
    """nbgrader's own example: a grade cell deletes the student's helper and expects the student's
    function to fail without it, then puts it back; a setting of the student's it reads and rebinds
    to plain data reaches the student. A name the grade cell only assigns stays the checker's."""
    student = ("def squares(n):\n    return [i * i for i in range(1, n + 1)]\n"
               "def sum_of_squares(n):\n    return sum(squares(n)) * SCALE\nSCALE = 1\n")
    grade_cell = ("assert sum_of_squares(3) == 14\n"
                  "saved = squares\n"
                  "del squares\n"
                  "try:\n    sum_of_squares(1)\nexcept NameError:\n    pass\n"
                  "else:\n    raise AssertionError('sum_of_squares does not use squares')\n"
                  "squares = saved\n"
                  "SCALE = SCALE * 2\n"
                  "assert sum_of_squares(3) == 28\n"
                  "expected = 14\n")
    job = NotebookProgram(cells=[(0, student, [], STUDENT), (1, grade_cell, [], GRADE),
                              (2, "print(sum_of_squares(2), SCALE, 'expected' in globals())", [],
                               STUDENT)], timeout=20)
    run = _watch(job, sandbox, workdir=tmp_path)
    assert run.reason is None, run.reason
    assert [o for o in run.outputs[1][0] if o["output_type"] == "error"] == [], run.outputs[1]
    printed = "".join(o.get("text", "") for o in run.outputs[2][0])
    assert printed.strip() == "10 2 False", run.outputs[2]


def test_a_kill_between_the_commit_and_the_folder_swap_leaves_it_to_be_regraded(tmp_path,
                                                                                monkeypatch):
    """The old autograded folder is set aside before the commit and the new one moved in after it:
    a run killed in between leaves new grades and no folder, which the next run (without --force)
    grades again, so a resubmission is never skipped as graded with the old notebook in place."""
    from autograder.grading import record

    root = toy.make_toy_course(tmp_path / "course")
    folder = root / "autograded" / "ann" / toy.ASSIGNMENT
    toy.submit(root, "ann")
    (root / "submitted" / "ann" / toy.ASSIGNMENT / "timestamp.txt").write_text(
        "2026-12-01 10:00:00.000000 UTC")
    grade(course_root=root, allow_cpu=True, progress=False)
    assert folder.is_dir()
    toy.submit(root, "ann", square=WRONG_SQUARE)  # a resubmission, an hour later
    (root / "submitted" / "ann" / toy.ASSIGNMENT / "timestamp.txt").write_text(
        "2026-12-01 11:00:00.000000 UTC")

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed between the commit and the swap")

    monkeypatch.setattr(record, "_swap_in", killed)
    with pytest.raises(KeyboardInterrupt):
        grade(course_root=root, allow_cpu=True, progress=False)
    monkeypatch.undo()
    assert _cell_scores(root, "ann")["test_square"] == 0  # committed
    assert not folder.exists(), "new grades with the old notebook in autograded/"
    rerun = grade(course_root=root, allow_cpu=True, progress=False)
    assert [(r.student, r.status) for r in rerun.results] == [("ann", "graded")]
    assert "2 * x" in (folder / f"{toy.ASSIGNMENT}.ipynb").read_text()
    assert (folder / "timestamp.txt").read_text().startswith("2026-12-01 11")
    assert not list(folder.parent.glob(f"{toy.ASSIGNMENT}.old-*"))


def test_a_submission_with_old_nbgrader_metadata_leaves_no_autograded_folder(tmp_path):
    """nbgrader refuses a notebook whose nbgrader metadata is of an old schema version; so does the
    autograder, and (its one documented rule) an ungradable submission leaves no gradebook row and no
    ``autograded/<student>/`` folder."""
    root = toy.make_toy_course(tmp_path / "course")
    path = toy.submit(root, "old")
    nb = __import__("nbformat").read(path, as_version=4)
    for cell in nb.cells:
        if "nbgrader" in cell.metadata:
            cell.metadata.nbgrader["schema_version"] = 1
    __import__("nbformat").write(nb, path)
    summary = grade(course_root=root, allow_cpu=True, progress=False)
    result = next(r for r in summary.results if r.student == "old")
    assert result.status == "failed" and "Outdated schema version" in " ".join(
        result.reasons), result
    assert not (root / "autograded" / "old").exists()
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        with pytest.raises(MissingEntry):
            gb.find_submission(toy.ASSIGNMENT, "old")
