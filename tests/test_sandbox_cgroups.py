"""A notebook's memory and CPU counted the way the kernel charges them (issue 46, items 2 and 8).

- The template's memory watchdog counts each page once (proportional set sizes), not the summed RSS
  of the sandbox's processes: a pool of forks sharing a buffer copy-on-write is not a hog; a pool of
  forks that really allocates still is.
- Each sandbox is in a cgroup with a CPU weight (``cgroups.CpuShare``): processes in many sessions buy
  no more CPU than one; all sandboxes together weigh as one ordinary process against the grader's side.
- A sandbox that does not start in time is restarted, and the batch goes on without it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from autograder.grading.execute.forkserver import RunningNotebook, wait_any
from autograder.grading.execute.limits import ExecutionLimits, launch_message
from autograder.grading.model import STUDENT, NotebookProgram
from autograder.sandbox.cgroups import cpu_cgroup_root
from autograder.sandbox.host import SandboxProcess

LIMIT = 1536 * 2**20  # the watchdog's limit: a fresh child's footprint (a few hundred MB) + 1 GiB

# 50 children that keep (never write) a 100 MB buffer their parent filled: copy-on-write, one copy
SHARED_POOL = """
import os, time
buffer = bytearray(100 * 2**20)
buffer[::4096] = b'1' * len(buffer[::4096])
children = []
for _ in range(50):
    pid = os.fork()
    if pid == 0:
        time.sleep(3)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
pool_done = True
"""

# 6 children that each really allocate (and touch) 400 MB: 2.4 GB in all, past the limit
ALLOCATING_POOL = """
import os, time
children = []
for _ in range(6):
    pid = os.fork()
    if pid == 0:
        mine = bytearray(400 * 2**20)
        mine[::4096] = b'2' * len(mine[::4096])
        time.sleep(20)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
pool_done = True
"""


def _run(cells: list[str], box: SandboxProcess, tmp_path: Path, *, rss_limit: int) -> RunningNotebook:
    program = NotebookProgram(cells=[(i, code, [], STUDENT) for i, code in enumerate(cells)],
                              timeout=60)
    limits = ExecutionLimits(memory_limit_gb=None, student_address_space_bytes=None,
                             student_rss_bytes=rss_limit, checker_rss_bytes=None, threads=1)
    run = RunningNotebook(key="t", program=program, limits=limits, workdir=str(tmp_path))
    run.sockets = box.start_notebook(launch_message(program, limits), [])
    run.start()
    deadline = time.monotonic() + 90
    while not run.finished and time.monotonic() < deadline:
        wait_any([run], timeout=0.2)
        run.pump()
    run.close()
    assert run.finished
    deadline = time.monotonic() + 30
    while box.state == "busy" and time.monotonic() < deadline:
        time.sleep(0.05)
        box.pump()
    assert box.state == "ready", box.state
    return run


def test_forks_sharing_pages_copy_on_write_are_counted_once(tmp_path, sandbox):
    """50 forks of a notebook holding 100 MB: summed RSS says more than 5 GB, the kernel charges a
    few hundred MB; the notebook is not stopped (the old watchdog stopped it)."""
    run = _run([SHARED_POOL, "after = 1"], sandbox, tmp_path, rss_limit=LIMIT)
    assert run.reason is None, run.reason
    assert 1 in run.outputs


def test_forks_that_really_allocate_past_the_limit_are_stopped(tmp_path, sandbox):
    run = _run(["before = 1", ALLOCATING_POOL, "after = 1"], sandbox, tmp_path, rss_limit=LIMIT)
    assert run.failed_ename == "MemoryLimitExceeded" and "memory use" in run.reason, run.reason
    assert run.running_cell == 1 and 2 not in run.outputs


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        found.append(here)
        try:
            for task in Path(f"/proc/{here}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _cpu_group(pid: int) -> str | None:
    """The cpu cgroup ``pid`` is in, as a path under the hierarchy's root ("/..." ; None: gone)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(","):  # v1's cpu hierarchy
            return path
    return next((line.split(":", 2)[2] for line in lines if line.startswith("0::")), None)


def test_every_process_of_a_sandbox_is_in_its_cpu_cgroup_with_the_sandboxes_weight(sandbox):
    from autograder.sandbox.cgroups import CPU_WEIGHT, SANDBOXES_WEIGHT, cpu_cgroup_root

    if os.geteuid() != 0 or cpu_cgroup_root() is None:
        pytest.skip("no writable cgroup cpu controller here (not root, or no delegation): the "
                    "sandboxes share the CPU as the kernel's sessions do")
    assert sandbox.cpu is not None and sandbox.cpu.path is not None and sandbox.process is not None
    group = sandbox.cpu.path
    root = cpu_cgroup_root()[0]  # type: ignore[index]
    # all sandboxes in one parent group that weighs as one ordinary process against the grader's
    # side (the grading process, its checkers, the web process): their share is protected
    parent = group.parent
    assert parent.parent == root and parent.name == f"autograder-sandboxes-{os.getpid()}"
    if sandbox.cpu.version == "v2":
        assert "cpu" in (root / "cgroup.subtree_control").read_text().split()
        assert int((group / "cpu.weight").read_text()) == CPU_WEIGHT
        assert int((parent / "cpu.weight").read_text()) == SANDBOXES_WEIGHT
    else:
        assert int((group / "cpu.shares").read_text()) == CPU_WEIGHT * 1024 // 100
        assert int((parent / "cpu.shares").read_text()) == SANDBOXES_WEIGHT * 1024 // 100
    processes = _descendants(sandbox.process.pid)
    assert len(processes) >= 3  # bubblewrap, its init, the template
    expected = "/" + str(group.relative_to(root))
    assert {_cpu_group(pid) for pid in processes} - {None} == {expected}


BUSY_S = 3.0
START_AFTER_S = 8.0  # both notebooks are launched and waiting well before the busy window opens
# 20 processes, each in a session of its own (setsid: an autogroup each), busy from START (the wall
# clock both sandboxes share) for BUSY_S seconds; prints the CPU seconds they used in all, and
# whether the notebook began after START (then the two did not compete for the whole window)
MANY_SESSIONS = """
import os, time
start = {start!r}
late = time.time() > start
children = []
for _ in range(20):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        while time.time() < start:
            time.sleep(0.005)
        while time.time() < start + {busy!r}:
            pass
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
times = os.times()
print(times.children_user + times.children_system, late)
"""
HONEST = """
import time
start = {start!r}
late = time.time() > start
while time.time() < start:
    time.sleep(0.005)
before = time.process_time()
while time.time() < start + {busy!r}:
    pass
print(time.process_time() - before, late)
"""


def test_a_notebooks_processes_in_many_sessions_get_one_sandboxes_share_of_the_cpu(tmp_path,
                                                                                   sandbox):
    """Two sandboxes side by side: 20 busy processes in 20 sessions, and one honest busy loop.
    Each sandbox gets the same weight, so the honest one gets about half of the CPU the two use
    (without a cgroup per sandbox: about 1/21, each session an autogroup). Both are busy in the same
    window of the wall clock, opened once both have started (before: under load the second could
    start after the first had finished, and each had the machine to itself), and the share is
    measured between the two, so other load on the machine slows both alike."""
    from autograder.sandbox.cgroups import cpu_cgroup_root

    if os.geteuid() != 0 or cpu_cgroup_root() is None or (os.cpu_count() or 1) > 8:
        pytest.skip("no writable cgroup cpu controller here, or too many cores to crowd")
    other = SandboxProcess()
    other.start()
    try:
        other.wait_ready()
        limits = ExecutionLimits(memory_limit_gb=None, student_address_space_bytes=None,
                                 student_rss_bytes=None, checker_rss_bytes=None, threads=1)
        runs = []
        start = time.time() + START_AFTER_S
        for box, code, folder in ((sandbox, MANY_SESSIONS, "many"), (other, HONEST, "honest")):
            code = code.format(start=start, busy=BUSY_S)
            program = NotebookProgram(cells=[(0, code, [], STUDENT)], timeout=60)
            (tmp_path / folder).mkdir()
            run = RunningNotebook(key=folder, program=program, limits=limits,
                                  workdir=str(tmp_path / folder))
            run.sockets = box.start_notebook(launch_message(program, limits), [])
            run.start()
            runs.append(run)
        deadline = time.monotonic() + 60
        while not all(run.finished for run in runs) and time.monotonic() < deadline:
            wait_any(runs, timeout=0.2)
            for run in runs:
                run.pump()
        seconds = []
        for run in runs:
            run.close()
            assert run.reason is None, run.reason
            used, late = "".join(o.get("text", "") for o in run.outputs[0][0]).split()
            assert late == "False", f"{run.key} began after the busy window opened"
            seconds.append(float(used))
        many, honest = seconds
        assert honest >= 0.35 * (many + honest), (many, honest)
    finally:
        other.close()
        deadline = time.monotonic() + 30
        while sandbox.state == "busy" and time.monotonic() < deadline:
            time.sleep(0.05)
            sandbox.pump()


def _never_starting(monkeypatch, cursed) -> list[bool]:
    """Sandboxes for which ``cursed(box)`` holds run a command that never reports ready, started as
    if START_TIMEOUT_S were 1 s (the real ones keep the real timeout: they import torch). Returns
    the starts so far, True for each cursed one."""
    from autograder.sandbox import host

    real_start, real_command = host.SandboxProcess.start, host.template_command
    starts: list[bool] = []

    def start(box: SandboxProcess) -> None:
        starts.append(bool(cursed(box)))
        if not starts[-1]:
            real_start(box)
            return
        monkeypatch.setattr(host, "template_command", lambda **_: ["/bin/sleep", "600"])
        try:
            real_start(box)
        finally:
            monkeypatch.setattr(host, "template_command", real_command)
        box.started -= host.START_TIMEOUT_S - 1

    monkeypatch.setattr(host.SandboxProcess, "start", start)
    return starts


def test_a_sandbox_that_does_not_start_is_restarted_then_left_out_and_the_batch_grades(
        tmp_path, monkeypatch):
    """The first sandbox of a pool of 2 never starts: it is tried START_TRIES times, then the batch
    goes on with the other (the old code ended grading: "the sandbox did not start in 120 s")."""
    import autograder_toy as toy

    from autograder.grading import grade
    from autograder.sandbox.host import START_TRIES

    first: list[SandboxProcess] = []
    starts = _never_starting(monkeypatch, lambda box: (first or first.append(box) or True)
                             and box is first[0])
    root = toy.make_toy_course(tmp_path / "course")
    students = ["s1", "s2", "s3"]
    for student in students:
        toy.submit(root, student)
    summary = grade(course_root=root, workers=2, timeout=30, device="cpu", allow_cpu=True,
                    progress=False)
    results = {r.student: r for r in summary.results}
    assert sorted(results) == students
    for student in students:
        assert results[student].score == toy.POINTS["test_square"] + toy.POINTS["test_total"] \
            + toy.POINTS["test_torch_sum"] + toy.POINTS["test_total_gpu"], results[student]
    assert starts.count(True) == START_TRIES and starts.count(False) >= 1, starts


def test_grading_stops_only_when_no_sandbox_of_the_pool_can_start(tmp_path, monkeypatch):
    import autograder_toy as toy

    from autograder.errors import GradingError
    from autograder.grading import grade
    from autograder.sandbox.host import START_TRIES

    starts = _never_starting(monkeypatch, lambda box: True)
    root = toy.make_toy_course(tmp_path / "course")
    for student in ("s1", "s2"):
        toy.submit(root, student)
    with pytest.raises(GradingError, match="no sandbox of the pool of 2 could start.*did not start"):
        grade(course_root=root, workers=2, timeout=30, device="cpu", allow_cpu=True, progress=False)
    assert len(starts) == 2 * START_TRIES, starts


def test_doctor_says_whether_seccomp_and_the_per_sandbox_cgroups_are_in_force(tmp_path):
    from autograder.tools.doctor import Diagnosis, _check_sandbox

    result = Diagnosis()
    assert _check_sandbox(result, course_root=tmp_path)
    found = dict(result.lines)
    assert found["sandbox seccomp"].startswith("in force (a filter refusing"), found
    if os.geteuid() == 0 and cpu_cgroup_root() is not None:
        assert found["sandbox cpu"].startswith("a cpu cgroup per sandbox"), found
        assert "grader fault" in found["sandbox cpu"]
    else:
        assert found["sandbox cpu"].startswith("NONE"), found
    assert "memory" in found["sandbox memory"]
