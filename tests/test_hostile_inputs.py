"""Hostile input is normal input (issue 15, classes 3-5): `collect` copies only regular files inside
what it is offered, bounds every zip, trusts an exchange folder's owner over its name and takes a
student's newest offer; `feedback` runs no student script and fails only the student whose page
would show hidden-check source. Every offer or student fails alone, with a reason."""

from __future__ import annotations

import os
import pwd
import re
import stat
import zipfile
from pathlib import Path

import autograder_toy as toy
import nbformat
import pytest

from autograder.cli import main
from autograder.collect import MAX_MEMBER_BYTES, MAX_MEMBERS, collect
from autograder.errors import CollectError
from autograder.reports.feedback import feedback

SECRET = "the gradebook's secret 8c1f"
TS = "2026-11-30 10:00:00.000000 UTC"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return toy.make_toy_course(tmp_path_factory.mktemp("hostile") / "course")


@pytest.fixture(scope="module")
def secret(tmp_path_factory):
    path = tmp_path_factory.mktemp("outside") / "gradebook.db"
    path.write_text(SECRET)
    return path


def _good() -> str:
    return nbformat.writes(toy.student_notebook(_good.course))


@pytest.fixture(autouse=True)
def _remember(course):
    _good.course = course


def _submitted(course: Path, student: str) -> Path:
    return course / "submitted" / student / "toy"


def _no_secret_under(folder: Path) -> None:
    for path in folder.rglob("*"):
        assert not path.is_symlink(), path
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


# --- collect: files are never followed ----------------------------------------------------------

def test_an_exchange_folder_with_a_symlink_to_a_secret_is_refused(course, secret, tmp_path):
    exchange = tmp_path / "exchange"
    bad, good = exchange / f"ann+toy+{TS}", exchange / f"ben+toy+{TS}"
    for folder in (bad, good):
        folder.mkdir(parents=True)
        (folder / "toy.ipynb").write_text(_good())
    (bad / "notes.txt").symlink_to(secret)
    (exchange / f"cid+toy+{TS}").symlink_to(bad, target_is_directory=True)
    result = collect(source=exchange, course_root=course)
    assert ("ben", "toy") in result.collected
    assert any("notes.txt: a symbolic link" in m for m in result.refused), result.refused
    assert any(f"cid+toy+{TS}: a symbolic link" in m for m in result.refused), result.refused
    assert not _submitted(course, "ann").exists() and not _submitted(course, "cid").exists()
    _no_secret_under(course / "submitted")


def test_a_fifo_in_an_offer_is_refused_by_name(course, tmp_path):
    folder = tmp_path / "exchange" / f"dot+toy+{TS}"
    folder.mkdir(parents=True)
    (folder / "toy.ipynb").write_text(_good())
    os.mkfifo(folder / "pipe")
    result = collect(source=folder.parent, course_root=course)
    assert any("pipe: a FIFO" in m for m in result.refused), result.refused
    assert not _submitted(course, "dot").exists()


def _zip(path: Path, members: list[tuple[zipfile.ZipInfo | str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for info, data in members:
            zf.writestr(info, data)
    return path


def test_a_zip_with_a_symlink_member_unpacks_no_link(course, secret, tmp_path):
    link = zipfile.ZipInfo("eve_toy.ipynb")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    archive = _zip(tmp_path / "lms.zip", [(link, str(secret).encode()),
                                          ("fay_toy.ipynb", _good().encode())])
    result = collect(source=archive, assignment="toy", course_root=course)
    assert ("fay", "toy") in result.collected
    assert any("eve_toy.ipynb: a symbolic link" in m for m in result.refused), result.refused
    assert not _submitted(course, "eve").exists()
    _no_secret_under(course / "submitted")


def test_a_zip_member_outside_the_archive_is_refused(course, tmp_path):
    archive = _zip(tmp_path / "lms.zip", [("../gus_toy.ipynb", _good().encode()),
                                          ("hal_toy.ipynb", _good().encode())])
    result = collect(source=archive, assignment="toy", course_root=course)
    assert ("hal", "toy") in result.collected
    assert any("'..'" in m for m in result.refused), result.refused
    assert not (tmp_path / "gus_toy.ipynb").exists() and not _submitted(course, "gus").exists()


def test_a_zip_bomb_is_refused_and_the_rest_collected(course, tmp_path):
    huge = b"\0" * (MAX_MEMBER_BYTES + 1)  # past the per-member limit, ~65 KiB compressed
    dense = b"\0" * (2 * 2**20)  # 2 MiB that compress ~1000x: past the ratio limit
    archive = _zip(tmp_path / "bomb.zip", [("ida_toy.ipynb", huge), ("jon_toy.ipynb", dense),
                                           ("kim_toy.ipynb", _good().encode())])
    assert archive.stat().st_size < 2**20
    result = collect(source=archive, assignment="toy", course_root=course)
    assert result.collected == [("kim", "toy")]
    assert any("ida_toy.ipynb" in m and "more than the limit" in m for m in result.refused)
    assert any("jon_toy.ipynb" in m and "expands" in m for m in result.refused), result.refused


def test_a_zip_with_too_many_members_is_refused_whole(course, tmp_path):
    archive = _zip(tmp_path / "many.zip", [(f"s{i}_toy.ipynb", b"") for i in range(MAX_MEMBERS + 1)])
    with pytest.raises(CollectError, match=f"more than the {MAX_MEMBERS}"):
        collect(source=archive, assignment="toy", course_root=course)
    assert main(["--course-root", str(course), "collect", str(archive), "--assignment", "toy"]) == 1


# --- collect: an exchange folder is its owner's, the newest offer wins ------------------------------

@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root (CI runs as root)")
def test_an_exchange_offer_owned_by_another_user_is_refused(course, tmp_path):
    nobody = pwd.getpwnam("nobody")
    exchange = tmp_path / "exchange"
    forged, own = exchange / f"max+toy+{TS}", exchange / f"nobody+toy+{TS}"
    for folder in (forged, own):
        folder.mkdir(parents=True)
        (folder / "toy.ipynb").write_text(_good())
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
    result = collect(source=exchange, course_root=course)
    assert ("nobody", "toy") in result.collected
    assert any("'max'" in m and "owned by 'nobody'" in m for m in result.refused), result.refused
    assert not _submitted(course, "max").exists()
    assert ("max", "toy") in collect(source=exchange, course_root=course, check_owner=False).collected


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root (CI runs as root)")
def test_an_exchange_time_the_student_wrote_earlier_than_its_files_is_not_believed(course, tmp_path):
    """Lateness from a time the student cannot write: the folder's name says before the deadline, the
    kernel's ctime of its files says now; ``timestamp.txt`` gets the later one and the offer is
    flagged. An honest name (seconds before its files) and the collector's own copy keep theirs."""
    from datetime import UTC, datetime, timedelta

    from autograder.collect import format_timestamp

    nobody = pwd.getpwnam("nobody")
    now = datetime.now(UTC).replace(tzinfo=None)
    backdated = format_timestamp(now - timedelta(days=3)).replace(" UTC", "")
    honest = format_timestamp(now - timedelta(seconds=5)).replace(" UTC", "")
    for name, claim, owner in (("nobody", backdated, nobody), ("max", backdated, None)):
        exchange = tmp_path / name / "exchange"
        folder = exchange / f"{name}+toy+{claim}"
        folder.mkdir(parents=True)
        (folder / "toy.ipynb").write_text(_good())
        if owner is not None:
            os.chown(folder, owner.pw_uid, owner.pw_gid)
        result = collect(source=exchange, course_root=course, force=True)
        assert result.collected == [(name, "toy")], result
        stamp = datetime.strptime((_submitted(course, name) / "timestamp.txt").read_text().strip(),
                                  "%Y-%m-%d %H:%M:%S.%f %Z")
        if owner is not None:  # the student's folder: the claim is three days before its files
            assert abs((stamp - now).total_seconds()) < 60, stamp
            assert len(result.flagged) == 1 and "the claim is not believed" in result.flagged[0]
        else:  # the collector's own copy of the exchange (copied later by the staff): as named
            assert stamp < now - timedelta(days=2) and result.flagged == []
    exchange = tmp_path / "honest" / "exchange"
    folder = exchange / f"nobody+toy+{honest}"
    folder.mkdir(parents=True)
    (folder / "toy.ipynb").write_text(_good())
    os.chown(folder, nobody.pw_uid, nobody.pw_gid)
    result = collect(source=exchange, course_root=course, force=True)
    assert result.collected == [("nobody", "toy")] and result.flagged == [], result
    assert (_submitted(course, "nobody") / "timestamp.txt").read_text().startswith(honest[:19])


def test_a_nested_folder_in_an_exchange_inbound_neither_vetoes_nor_supplies(course, tmp_path):
    """Anyone can make <victim>/<assignment>/ in nbgrader's 0733 inbound: it is not an inbound name,
    so it is ignored with a note — the victim's real offer is taken, and a student who never
    submitted gets nothing from it."""
    nobody = pwd.getpwnam("nobody")
    exchange = tmp_path / "exchange"
    real = exchange / f"nobody+toy+{TS}"
    real.mkdir(parents=True)
    (real / "toy.ipynb").write_text(_good())
    os.chown(real, nobody.pw_uid, nobody.pw_gid)
    for victim in ("nobody", "never-submitted"):
        planted = exchange / victim / "toy"
        planted.mkdir(parents=True)
        (planted / "toy.ipynb").write_text(nbformat.writes(toy.student_notebook(
            course, square="def square(x):\n    return 0  # planted\n")))
    result = collect(source=exchange, course_root=course, force=True)
    assert result.collected == [("nobody", "toy")], result
    assert "# planted" not in (_submitted(course, "nobody") / "toy.ipynb").read_text()
    assert not _submitted(course, "never-submitted").exists()
    assert sum("not an exchange inbound folder" in m for m in result.refused) == 2, result.refused


def test_an_extra_notebook_in_an_offer_is_left_out_not_a_refusal(course, tmp_path):
    exchange = tmp_path / "exchange"
    folder = exchange / f"sue+toy+{TS}"
    folder.mkdir(parents=True)
    (folder / "toy.ipynb").write_text(_good())
    (folder / "toy-Copy1.ipynb").write_text(_good())
    result = collect(source=exchange, course_root=course)
    assert result.collected == [("sue", "toy")], result
    assert any("toy-Copy1.ipynb" in m and "left out" in m for m in result.ignored), result.ignored
    assert not (_submitted(course, "sue") / "toy-Copy1.ipynb").exists()


def test_of_two_offers_of_one_student_the_newer_wins(course, tmp_path):
    exchange = tmp_path / "exchange"
    for when, answer in (("2026-11-30 09:00:00.000000 UTC", "old"),
                         ("2026-12-01 08:00:00.000000 UTC", "new")):
        folder = exchange / f"ned+toy+{when}+r4nd"
        folder.mkdir(parents=True)
        nb = toy.student_notebook(course, square=f"def square(x):\n    return x * x  # {answer}\n")
        nbformat.write(nb, folder / "toy.ipynb")
    result = collect(source=exchange, course_root=course)
    assert result.collected == [("ned", "toy")] and len(result.superseded) == 1
    assert "# new" in (_submitted(course, "ned") / "toy.ipynb").read_text()
    assert (_submitted(course, "ned") / "timestamp.txt").read_text().startswith("2026-12-01")


def test_a_malformed_notebook_fails_only_its_offer(course, tmp_path):
    exchange = tmp_path / "exchange"
    bad = toy.student_notebook(course)
    bad.cells[1].metadata["nbgrader"] = 5  # metadata of the wrong type
    offers = {"oli": nbformat.writes(bad), "pam": '{"cells": 5, "nbformat": 4}',
              "quy": "not json", "ray": _good()}
    for student, text in offers.items():
        folder = exchange / f"{student}+toy+{TS}"
        folder.mkdir(parents=True)
        (folder / "toy.ipynb").write_text(text)
    result = collect(source=exchange, course_root=course)
    assert ("ray", "toy") in result.collected
    for student in ("pam", "quy"):
        assert any(f"{student}+toy" in m and "not a Jupyter notebook" in m for m in result.refused)
    assert ("oli", "toy") in result.collected or any("oli+toy" in m for m in result.refused)


# --- feedback: no student script, hidden source judged on instructor text only ------------------------

SCRIPT = "<script>window.__pwned = 1; document.title = 'pwned';</script>"


@pytest.fixture(scope="module")
def graded(course):
    toy.submit(course, "fb_script", square=(
        "from IPython.display import HTML, Javascript, display\n"
        f"display(HTML({SCRIPT!r}))\n"
        "display(Javascript('window.__pwned = 2'))\n"
        "def square(x):\n    return x * x\n"))
    toy.submit(course, "fb_marker", square=(
        "print('### BEGIN HIDDEN TESTS from autograder.hidden import everything')\n"
        "def square(x):\n    return x * x\n"))
    toy.submit(course, "fb_honest")
    path = course / "submitted" / "fb_script" / "toy" / "toy.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(f"My notes {SCRIPT}"))
    nb.cells.append(nbformat.v4.new_raw_cell(SCRIPT))
    nbformat.write(nb, path)
    assert main(["--course-root", str(course), "grade", "toy", "--student", "fb_script", "--student",
                 "fb_marker", "--student", "fb_honest", "--allow-cpu", "--no-progress"]) == 0
    return course


def test_a_student_printing_hidden_markers_gets_feedback_like_everyone(graded):
    pages = feedback(assignments=["toy"], students=["fb_script", "fb_marker", "fb_honest"],
                     course_root=graded)
    assert pages.failed == []
    assert sorted(p.parts[-3] for p in pages) == ["fb_honest", "fb_marker", "fb_script"]


def test_feedback_runs_no_student_script(graded):
    feedback(assignments=["toy"], students=["fb_script"], course_root=graded)
    page = graded / "feedback" / "fb_script" / "toy" / "toy.html"
    text = page.read_text()
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script\s*>", text, flags=re.S | re.I)
    assert not [s for s in scripts if "__pwned" in s]  # nbconvert's own scripts only (none without math)
    assert not re.search(r"<script\b[^>]*>\s*window\.__pwned", text, flags=re.I)
    from browser import require_chromium

    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=require_chromium(), headless=True,
                                             args=["--no-sandbox"])
        tab = browser.new_page()
        tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith("file:")
                  else route.abort())
        tab.goto(page.as_uri(), wait_until="load")
        pwned, title = tab.evaluate("[window.__pwned === undefined ? null : window.__pwned, document.title]")
        browser.close()
    assert pwned is None and title != "pwned"


def test_feedback_that_would_show_hidden_source_fails_that_student_only(graded):
    path = graded / "autograded" / "fb_honest" / "toy" / "toy.ipynb"
    nb = nbformat.read(path, as_version=4)
    grade = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_square")
    grade.source += "\n# from autograder.hidden import toy_check"  # outside the hidden region
    nbformat.write(nb, path)
    pages = feedback(assignments=["toy"], students=["fb_script", "fb_marker", "fb_honest"],
                     course_root=graded)
    assert [(a, s) for a, s, _ in pages.failed] == [("toy", "fb_honest")]
    assert "hidden-check source" in pages.failed[0][2]
    assert sorted(p.parts[-3] for p in pages) == ["fb_marker", "fb_script"]
    assert not (graded / "feedback" / "fb_honest" / "toy" / "toy.html").exists()


def test_a_nested_offer_from_a_folder_others_can_write_must_be_its_students(course, tmp_path):
    """A <student>/<assignment>/ dump read from a world-writable folder: each offer's owner is
    checked as an exchange folder's is (one made by another user for a victim is refused)."""
    nobody = pwd.getpwnam("nobody")
    dump = tmp_path / "dump"
    dump.mkdir()
    dump.chmod(0o1777)
    for student in ("nobody", "vic"):
        folder = dump / student / "toy"
        folder.mkdir(parents=True)
        (folder / "toy.ipynb").write_text(_good())
        for path in (folder.parent, folder):
            os.chown(path, nobody.pw_uid, nobody.pw_gid)
    result = collect(source=dump, course_root=course, force=True)
    assert ("nobody", "toy") in result.collected
    assert ("vic", "toy") not in result.collected
    assert any("'vic'" in m and "owned by 'nobody'" in m for m in result.refused), result.refused
