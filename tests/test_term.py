"""The instructor guide is the test (issue 41): a scripted term of 30 students over the six exercises runs
the guide's own command blocks in order (``tests/support/term.py``), with a real nbgrader exchange, LMS zips, the
feedback service standalone, a fake Canvas, a late submission, an extension, resubmissions through every
channel, the GPU exercises on a machine without a GPU, and a grade cell fixed mid-term with a regrade
preview; the gradebook is checked against the expected grade of record after every step. Once as root,
once as an unprivileged user (``nobody``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from fake_canvas import FakeCanvas, canvas_user
from term import STUDENTS, Term, _grade_points, exported_names, guide_blocks, play

ASSIGNMENTS = ("01_strides", "02_einops", "03_flops", "04_adagrad", "05_get_batch", "06_mixed_precision")


@pytest.fixture
def canvas():
    users = {student: 100 + number for number, student in enumerate(STUDENTS)}
    ids = {name: 900 + number for number, name in enumerate(ASSIGNMENTS)}
    fake = FakeCanvas(course_id=4321, token="term-token", page_size=50,
                      users=[canvas_user(uid, student) for student, uid in users.items()],
                      assignments=[{"id": aid, "name": name, "points_possible": sum(_grade_points(name).values()),
                                    "post_manually": True} for name, aid in ids.items()])
    fake.start()
    yield fake, ids, users
    fake.stop()


def _term(tmp_path, canvas, *, plain_user: bool) -> None:
    fake, ids, users = canvas
    # pytest's tmp_path is private to root at three levels; the plain user's term lives in its own folder
    base = Path(tempfile.mkdtemp(prefix="term-")) if plain_user else tmp_path
    base.chmod(0o755)
    term = Term(base / "term", plain_user=plain_user)
    try:
        play(term, fake, ids, users)
    finally:
        term.stop()
        if plain_user:
            shutil.rmtree(base, ignore_errors=True)


def _can_switch_users() -> str | None:
    missing = [tool for tool in ("unshare", "setpriv") if shutil.which(tool) is None]
    if missing:
        return f"needs {', '.join(missing)} (util-linux)"
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="the root half of the term needs root (CI runs as root)")
def test_a_term_as_root_follows_the_guide(tmp_path, canvas):
    _term(tmp_path, canvas, plain_user=False)


def test_a_term_as_an_unprivileged_user_follows_the_guide(tmp_path, canvas):
    """As root: the term runs as ``nobody``; as any other user: as that user."""
    if os.geteuid() == 0 and (reason := _can_switch_users()):
        pytest.fail(reason)
    _term(tmp_path, canvas, plain_user=os.geteuid() == 0)


def test_every_block_is_one_the_term_knows_how_to_run():
    """The guide's marked blocks parse, are named once, and the set-up's exports are all ones the term
    gives a value (a new block or variable without its place in the term fails here first)."""
    blocks = guide_blocks()
    assert {"env", "doctor", "roster", "release", "collect-lms", "grade", "lms", "regrade-preview",
            "student-submit"} <= set(blocks)
    assert set(exported_names(blocks["env"])) == {"EXCHANGE", "STUDENT_EDITION", "CANVAS_URL",
                                                  "CANVAS_COURSE", "CANVAS_API_TOKEN"}
    for block in blocks.values():
        if block.kind in ("run", "background"):
            checked = subprocess.run(["bash", "-n", "-c", block.code], capture_output=True, text=True)
            assert checked.returncode == 0, f"{block.page}: {block.name}: {checked.stderr}"

