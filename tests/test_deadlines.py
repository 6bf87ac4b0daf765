"""One owner for every time limit of a notebook (autograder/sandbox/deadlines.py): they nest, the
innermost first, and the enforcers read them from there and nowhere else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autograder.grading.execute.limits import ExecutionLimits, launch_message
from autograder.grading.model import GRADE, NotebookProgram
from autograder.sandbox.deadlines import SETUP_CELL_S, Deadlines, set_up_timeout

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("timeout", [0.5, 1, 30, 300, 3600])
def test_the_limits_nest_innermost_first(timeout):
    d = Deadlines(timeout, notebook_timeout=600)
    assert timeout == d.sandbox_alarm_s < d.channel_wait_s < d.checker_alarm_s < d.parent_kill_s
    assert d.notebook_s == 600


@pytest.mark.parametrize("timeout", [None, 0, -1])
def test_no_timeout_means_no_limit_and_no_cpu_rlimit(timeout):
    d = Deadlines(timeout, notebook_timeout=0)
    assert (d.sandbox_alarm_s, d.channel_wait_s, d.checker_alarm_s, d.parent_kill_s, d.cpu_rlimit_s,
            d.notebook_s) == (None,) * 6


def test_the_sandbox_gets_the_documented_cpu_rlimit():
    """RLIMIT_CPU = timeout x cells x 4 + 60 (the module's step 5), as the template receives it."""
    cells = [(index, "pass", [], GRADE) for index in range(3)]
    job = NotebookProgram(cells=cells, timeout=10.0, notebook_timeout=600.0)
    limits = ExecutionLimits(memory_limit_gb=None, student_address_space_bytes=None,
                             student_rss_bytes=None, checker_rss_bytes=None, threads=1)
    message = launch_message(job, limits)
    assert message["rlimits"]["cpu"] == 10 * 3 * 4 + 60


def test_no_other_module_keeps_a_grace_of_its_own():
    """The graces and the CPU formula are deadlines.py's: no enforcer adds its own seconds."""
    enforcers = ["autograder/sandbox/channel.py", "autograder/grading/execute/checker.py",
                 "autograder/grading/execute/forkserver.py", "autograder/grading/execute/limits.py"]
    for name in enforcers:
        text = (ROOT / name).read_text(encoding="utf-8")
        assert not re.search(r"^[A-Z_]*GRACE[A-Z_]* = ", text, re.M), f"{name} defines a grace"
        assert not re.search(r"timeout \+ \w|timeout \* ", text), f"{name} computes a deadline itself"


@pytest.mark.parametrize(("timeout", "expected"), [(None, SETUP_CELL_S), (0, SETUP_CELL_S),
                                                   (5, 5), (300, SETUP_CELL_S)])
def test_a_set_up_cell_before_the_students_code_gets_a_short_limit(timeout, expected):
    assert set_up_timeout(timeout) == expected

