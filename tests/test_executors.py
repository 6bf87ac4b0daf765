"""The executor registry (``grading/registry.py``) and the generic remote layer (``grading/remote/``):
every executor is an entry with a class that declares what it can do, and a remote backend is a thin
layer that tells the node which task it is."""

from __future__ import annotations

import inspect
import signal
from pathlib import Path

import pytest

from autograder.grading.executor import executor_class
from autograder.grading.options import GradeOptions
from autograder.grading.registry import EXECUTORS
from autograder.grading.remote.node import NodeTask, local_task
from autograder.grading.slurm.task import slurm_task

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", sorted(EXECUTORS))
def test_each_registered_executor_declares_what_it_can_do(name):
    cls = executor_class(name)
    assert cls.name == name
    assert isinstance(cls.streams, bool) and isinstance(cls.executes, bool)
    assert list(inspect.signature(cls).parameters) == ["options", "course"]
    assert callable(cls.probe) and callable(cls.execute) and callable(cls.close)


def test_only_the_local_executor_streams_and_only_as_submitted_does_not_execute():
    assert {n for n in EXECUTORS if executor_class(n).streams} == {"local"}
    assert {n for n in EXECUTORS if not executor_class(n).executes} == {"as-submitted"}


def test_an_unregistered_executor_is_refused_with_the_registered_names():
    with pytest.raises(Exception, match="local, slurm, as-submitted"):
        GradeOptions(executor="kubernetes")


def test_no_execute_is_the_as_submitted_executor(tmp_path, capsys):
    from autograder.cli import main

    code = main(["--course-root", str(tmp_path), "grade", "--no-execute", "--executor", "slurm"])
    assert code == 1 and "--no-execute runs no executor; drop --executor slurm" in capsys.readouterr().err


def test_a_slurm_task_reads_its_id_and_cpus_from_slurm(monkeypatch):
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "41")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "2")
    task = slurm_task()
    assert task == NodeTask(id="41_3", cpus=2, stop_signals=(signal.SIGTERM, signal.SIGUSR2))
    monkeypatch.delenv("SLURM_ARRAY_JOB_ID")
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "0")
    assert slurm_task().id == "77" and slurm_task().cpus >= 1


def test_outside_a_scheduler_a_node_task_is_this_process():
    task = local_task()
    assert task.id == "" and task.cpus >= 1 and task.stop_signals == (signal.SIGTERM,)


def test_the_remote_layer_names_no_backend():
    """A third backend reuses remote/ unchanged: nothing there mentions Slurm's own names."""
    for path in sorted((ROOT / "autograder" / "grading" / "remote").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for word in ("SLURM_", "submitit", "SIGUSR2", "slurm."):
            assert word not in text, f"{path.name} mentions {word}"


def _counting(monkeypatch) -> list[object]:
    from autograder.sandbox.host import SandboxProcess

    started: list[object] = []
    real = SandboxProcess.start

    def start(box):
        started.append(box)
        real(box)

    monkeypatch.setattr(SandboxProcess, "start", start)
    return started


@pytest.mark.parametrize("students", [1, 3])
def test_the_local_pool_starts_a_sandbox_per_notebook_it_has_at_most(tmp_path, monkeypatch, students):
    """Each sandbox imports torch as it starts: a one-notebook run starts one, not the whole pool;
    three notebooks on two workers start both."""
    from autograder_toy import make_toy_course, submit

    from autograder.grading import grade

    root = make_toy_course(tmp_path / "course")
    for n in range(students):
        submit(root, f"s{n}")
    started = _counting(monkeypatch)
    summary = grade(course_root=root, workers=2, allow_cpu=True, progress=False)
    assert [r.status for r in summary.results] == ["graded"] * students
    assert len(started) == min(students, 2)


def test_the_first_sandbox_starts_beside_the_template_before_the_probe(tmp_path, monkeypatch):
    """Both import torch, a core each: the sandbox does not wait for the template's probe."""
    from autograder_toy import make_toy_course

    from autograder.course.nbgrader import load_course
    from autograder.grading.execute import forkserver
    from autograder.grading.local import LocalExecutor

    root = make_toy_course(tmp_path / "course")
    started = _counting(monkeypatch)
    at_probe: list[int] = []
    real_probe = forkserver.probe_forkserver
    monkeypatch.setattr(forkserver, "probe_forkserver",
                        lambda: (at_probe.append(len(started)), real_probe())[1])
    executor = LocalExecutor(GradeOptions(course_root=root, allow_cpu=True), load_course(root))
    try:
        executor.probe()
        assert at_probe == [1] and started[0].state in ("starting", "ready")
    finally:
        executor.close()
    assert started[0].process.poll() is not None and started[0].control is None


def test_a_run_refused_after_the_executor_opened_leaves_no_sandbox_running(tmp_path, monkeypatch):
    from autograder_toy import make_toy_course, submit

    from autograder.grading import grade

    root = make_toy_course(tmp_path / "course")
    submit(root, "s0")
    started = _counting(monkeypatch)
    # an unknown assignment (or nothing to grade) is refused before any sandbox starts (issue 41, m6)
    with pytest.raises(Exception, match="no_such_assignment"):
        grade(course_root=root, assignments=["no_such_assignment"], allow_cpu=True, progress=False)
    assert started == []
    # a course setting refused once the executor is open (its first sandbox already starting)
    with (root / "nbgrader_config.py").open("a") as config:
        config.write('\nc.Autograder.extensions = {"toy": {"s0": "not a date"}}\n')
    with pytest.raises(Exception, match="not a date"):
        grade(course_root=root, assignments=["toy"], allow_cpu=True, progress=False)
    assert len(started) == 1
    assert all(box.process.poll() is not None for box in started)


def test_a_cpu_run_whose_first_sandbox_guessed_a_gpu_grades_in_one_without(tmp_path, monkeypatch):
    """The first sandbox's device access is a guess (a GPU device node is there); a run on CPU gets a
    fresh sandbox without the GPU's devices, and the guessed one is stopped."""
    from autograder_toy import make_toy_course, submit

    from autograder.grading import grade, local

    root = make_toy_course(tmp_path / "course")
    submit(root, "s0")
    monkeypatch.setattr(local, "_gpu_likely", lambda options: True)
    started = _counting(monkeypatch)
    summary = grade(course_root=root, workers=2, device="cpu", allow_cpu=True, progress=False)
    assert [r.status for r in summary.results] == ["graded"]
    assert [box.gpu for box in started] == [True, False]
    assert all(box.process.poll() is not None for box in started)


def test_a_one_sandbox_pool_starts_the_next_notebook_before_it_records_the_last(tmp_path,
                                                                                 monkeypatch):
    """The parent's record (nbgrader's steps, the gradebook) overlaps the next notebook's run: a
    worker with one sandbox keeps it busy instead of idle while it records."""
    from autograder_toy import make_toy_course, submit

    from autograder.grading import grade, record
    from autograder.sandbox.host import SandboxProcess

    root = make_toy_course(tmp_path / "course")
    for n in range(3):
        submit(root, f"s{n}")
    events: list[str] = []
    real_start, real_record = SandboxProcess.start_notebook, record.record

    def start_notebook(box, *args, **kwargs):
        events.append("start")
        return real_start(box, *args, **kwargs)

    def recorded(*args, **kwargs):
        events.append("record")
        return real_record(*args, **kwargs)

    monkeypatch.setattr(SandboxProcess, "start_notebook", start_notebook)
    monkeypatch.setattr(record, "record", recorded)
    summary = grade(course_root=root, workers=1, allow_cpu=True, progress=False)
    assert [r.status for r in summary.results] == ["graded"] * 3
    assert [r.score for r in summary.results] == [summary.results[0].score] * 3
    assert events == ["start", "start", "record", "start", "record", "record"]


@pytest.mark.parametrize(("cpus", "workers", "threads"), [(1, 1, 1), (2, 1, 2), (2, 3, 1)])
def test_each_notebook_gets_its_share_of_the_cpus_as_torch_threads(tmp_path, monkeypatch, cpus,
                                                                    workers, threads):
    """``--cpus`` / ``--workers`` torch threads per notebook, in the checker and the student's
    process: three workers of one CPU each on one machine do not start two threads each."""
    from autograder_toy import make_toy_course, submit

    from autograder.grading import grade, local

    root = make_toy_course(tmp_path / "course")
    submit(root, "s0")
    seen = []
    real = local.execution_limits

    def limits(*args, **kwargs):
        seen.append(real(*args, **kwargs))
        return seen[-1]

    monkeypatch.setattr(local, "execution_limits", limits)
    summary = grade(course_root=root, workers=workers, cpus=cpus, allow_cpu=True, progress=False)
    assert [r.status for r in summary.results] == ["graded"]
    assert [limit.threads for limit in seen] == [threads]
