"""A timeout under CPU starvation is the grading machine's fault, never a score (issue 46, item 2).

Starvation is made deterministic with a CPU quota on the sandbox's cgroup (1% of one CPU): an honest
cell that needs half a second of CPU cannot finish in its time. Its sandbox's threads ran far less than
the wall time they were charged while they waited for a CPU (``deadlines.starved_timeout``): the run is
stopped at once and says why (``starved``), the local executor runs the notebook again, and starved
twice the submission fails as a grader fault — where the old code scored the cell 0 for its timeout.
A cell that sleeps through its limit gets little CPU too, but never waited for one: its timeout counts.
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

HONEST = "import time\nstart = time.process_time()\nwhile time.process_time() - start < 0.5:\n    pass\n"
SLEEPY = "import time\ntime.sleep(60)\n"

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or cpu_cgroup_root() is None,
                                reason="needs root and a writable cpu cgroup (v1 or v2)")


def _quota(box: SandboxProcess, cores: float | None) -> None:
    """At most ``cores`` CPUs for the sandbox (None: no quota)."""
    assert box.cpu is not None and box.cpu.path is not None
    if box.cpu.version == "v2":
        (box.cpu.path / "cpu.max").write_text("max 100000" if cores is None
                                              else f"{int(cores * 100_000)} 100000")
    else:
        (box.cpu.path / "cpu.cfs_quota_us").write_text("-1" if cores is None
                                                       else str(int(cores * 100_000)))


def _run(box: SandboxProcess, cell: str, tmp_path: Path, cores: float | None) -> RunningNotebook:
    """``["ready = 1", cell, "after = 1"]`` with a 3 s limit per cell, the sandbox at ``cores`` CPUs
    from the end of the first cell until the run is over."""
    program = NotebookProgram(cells=[(0, "ready = 1", [], STUDENT), (1, cell, [], STUDENT),
                                     (2, "after = 1", [], STUDENT)], timeout=3)
    limits = ExecutionLimits(memory_limit_gb=None, student_address_space_bytes=None,
                             student_rss_bytes=None, checker_rss_bytes=None, threads=1)
    run = RunningNotebook(key="t", program=program, limits=limits, workdir=str(tmp_path),
                          cpu_usage=None if box.cpu is None else box.cpu.usage)
    run.sockets = box.start_notebook(launch_message(program, limits), [])
    run.start()
    throttled, deadline = False, time.monotonic() + 60
    try:
        while not run.finished and time.monotonic() < deadline:
            wait_any([run], timeout=0.05)
            run.pump()
            if not throttled and 0 in run.outputs:
                _quota(box, cores)
                throttled = True
    finally:
        _quota(box, None)
    run.close()
    assert run.finished and throttled
    deadline = time.monotonic() + 30
    while box.state == "busy" and time.monotonic() < deadline:
        time.sleep(0.05)
        box.pump()
    assert box.state == "ready", box.state
    return run


def test_a_cell_that_times_out_while_its_sandbox_waits_for_a_cpu_is_starved_not_slow(
        tmp_path, sandbox):
    run = _run(sandbox, HONEST, tmp_path, 0.01)
    outcome = run.outcome(1.0)
    assert outcome.starved is not None and "cell 1 timed out" in outcome.starved, \
        (outcome.starved, outcome.reason, outcome.outputs)
    assert "the grading machine was starved" in outcome.starved
    assert outcome.failed_ename == "GraderError" and 2 not in outcome.outputs  # stopped at once


def test_a_cell_that_sleeps_through_its_limit_still_times_out(tmp_path, sandbox):
    """It ran almost no CPU, but never waited for one: the notebook's own timeout (0 for the cell)."""
    run = _run(sandbox, SLEEPY, tmp_path, None)
    outcome = run.outcome(1.0)
    assert outcome.starved is None
    errors = [o for o in outcome.outputs[1][0] if o["output_type"] == "error"]
    assert errors and errors[0]["ename"] == "CellTimeoutError", outcome.outputs
    assert outcome.reason is None and 2 in outcome.outputs


def test_a_starved_notebook_is_run_again_then_failed_as_a_grader_fault_never_scored(
        tmp_path, monkeypatch):
    """The whole batch on a machine that starves every sandbox from each notebook's start: the
    notebook runs twice, then its submission is "failed" as a grader fault with the reason (the
    old code recorded it, each timed-out cell at 0)."""
    import autograder_toy as toy

    from autograder.grading import grade
    from autograder.grading.execute.runner import NotebookRunner

    real_start, real_finished = NotebookRunner.start, NotebookRunner.finished
    starts: list[str] = []

    def start(self, box, tag, **kwargs):
        starts.append(tag[1])
        _quota(box, 0.01)
        return real_start(self, box, tag, **kwargs)

    def finished(self):
        done = real_finished(self)
        held = {id(slot.box) for slot in self.running}
        for box in self.pool:
            if id(box) not in held and box.cpu is not None and box.cpu.path is not None:
                _quota(box, None)
        return done

    monkeypatch.setattr(NotebookRunner, "start", start)
    monkeypatch.setattr(NotebookRunner, "finished", finished)
    root = toy.make_toy_course(tmp_path / "course")
    toy.submit(root, "s1", square=toy.SQUARE + HONEST)  # half a second of CPU at the top level
    summary = grade(course_root=root, workers=1, timeout=3, device="cpu", allow_cpu=True,
                    progress=False)
    [result] = summary.results
    assert result.status == "failed" and result.grader_fault and result.score is None, result
    assert "starved of CPU twice" in result.reasons[0], result.reasons
    assert starts == ["toy", "toy"], starts
    assert not (root / "autograded" / "s1").exists()  # nothing recorded


def test_on_a_remote_node_a_starved_notebook_runs_again_and_the_head_fails_it(tmp_path, monkeypatch):
    """The same on a node of a remote backend (Slurm's array task): ``grade_chunk`` runs the starved
    notebook once more, writes its result still starved, and ``hand_over`` fails the submission as
    a grader fault (the old code recorded it, the timed-out cell at 0)."""
    import json
    from types import SimpleNamespace

    from autograder.grading.execute.runner import NotebookRunner
    from autograder.grading.remote import handover, node
    from autograder.grading.remote.work import NotebookWork, SubmissionWork

    real_start = NotebookRunner.start
    starts: list[str] = []

    def start(self, box, tag, **kwargs):
        starts.append(tag[1])
        _quota(box, 0.01)  # a clean-up after the run lifts it (below) before the next start
        return real_start(self, box, tag, **kwargs)

    real_finished = NotebookRunner.finished

    def finished(self):
        done = real_finished(self)
        for box in self.pool:
            if box.cpu is not None and box.cpu.path is not None and done:
                _quota(box, None)
        return done

    monkeypatch.setattr(NotebookRunner, "start", start)
    monkeypatch.setattr(NotebookRunner, "finished", finished)
    program = NotebookProgram(cells=[(0, "ready = 1", [], STUDENT), (1, HONEST, [], STUDENT)],
                              timeout=3)
    work = SubmissionWork(key="toy/s1/x", student="s1", assignment="toy",
                          notebooks=(NotebookWork("toy", program),), files=(), device="cpu",
                          memory_limit_gb=None, sandboxed=True, workers=1)
    results = tmp_path / "results"
    results.mkdir()
    node.grade_chunk([work], results)
    assert starts == ["toy", "toy"], starts
    [path] = results.iterdir()
    assert json.loads(path.read_text())["notebooks"]["toy"]["starved"]

    heard: list[tuple[str, str]] = []
    outcomes = SimpleNamespace(failed=lambda _, reason: heard.append(("failed", reason)),
                               executed=lambda _, name, outcome: heard.append(("executed", name)))
    handover.hand_over(SimpleNamespace(notebooks=[SimpleNamespace(name="toy")]), path, outcomes)
    [(what, reason)] = heard
    assert what == "failed" and "starved of CPU twice" in reason, heard
