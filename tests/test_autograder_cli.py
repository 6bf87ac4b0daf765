"""The `autograder` command line end to end on a tiny course: collect -> grade -> feedback -> report,
plus doctor, the refusals of collect, and the GPU workflow file."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import autograder_toy as toy
import nbformat
import pytest
import yaml
from nbgrader.api import Gradebook

from autograder.cli import main

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "grade-gpu.yml"


def _run(root: Path, *args: str) -> int:
    return main(["--course-root", str(root), *args])


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return toy.make_toy_course(tmp_path_factory.mktemp("cli") / "course")


@pytest.fixture(scope="module")
def lms_zip(course, tmp_path_factory):
    """An LMS download: three students, a stray PDF, and a notebook of some other assignment."""
    path = tmp_path_factory.mktemp("lms") / "download.zip"
    other = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("alice_toy.ipynb", nbformat.writes(toy.student_notebook(course)))
        zf.writestr("bob_toy.ipynb", nbformat.writes(toy.student_notebook(
            course, square="def square(x):\n    return x * abs(x)\n")))  # fails only hidden tests
        zf.writestr("carol_toy.ipynb", nbformat.writes(toy.student_notebook(
            course, total="def total(values):\n    return 0\n")))
        zf.writestr("dave_report.pdf", b"%PDF-1.4")
        zf.writestr("erin_toy.ipynb", nbformat.writes(other))
    return path


def test_collect_refuses_bad_files_by_name(course, lms_zip, capsys):
    assert _run(course, "collect", str(lms_zip), "--assignment", "toy") == 0  # refusals are listed
    out, err = capsys.readouterr()
    assert "dave_report.pdf: not a notebook" in err
    assert "erin_toy.ipynb: not a notebook of toy" in err
    for student in ("alice", "bob", "carol"):
        assert (course / "submitted" / student / "toy" / "toy.ipynb").is_file()
    assert not (course / "submitted" / "erin").exists()


def test_collect_never_overwrites_without_force(course, lms_zip, capsys):
    marker = course / "submitted" / "alice" / "toy" / "toy.ipynb"
    marker.write_text(marker.read_text().replace("return x * x", "return x * x  # kept"))
    _run(course, "collect", str(lms_zip), "--assignment", "toy")
    assert "# kept" in marker.read_text()
    assert "already collected" in capsys.readouterr().out
    _run(course, "collect", str(lms_zip), "--assignment", "toy", "--force")
    assert "# kept" not in marker.read_text()


def test_collect_nbgrader_layout_directory(course, tmp_path):
    exchange = tmp_path / "exchange"
    folder = exchange / "frank+toy+2026-11-30 10:00:00.000000 UTC"
    folder.mkdir(parents=True)
    nbformat.write(toy.student_notebook(course), folder / "toy.ipynb")
    assert _run(course, "collect", str(exchange)) == 0
    assert (course / "submitted/frank/toy/timestamp.txt").read_text().startswith("2026-11-30")


def test_grade_feedback_report_end_to_end(course, capsys):
    assert _run(course, "grade", "toy", "--allow-cpu", "--workers", "2", "--no-progress") == 0
    out = capsys.readouterr().out
    assert "graded 4" in out
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s.student.id: float(s.score) for s in gb.find_assignment("toy").submissions}
    assert scores == {"alice": 7.0, "bob": 5.0, "carol": 2.0, "frank": 7.0}

    assert _run(course, "feedback", "toy") == 0
    pages = sorted((course / "feedback").glob("*/toy/toy.html"))
    assert [p.parts[-3] for p in pages] == ["alice", "bob", "carol", "frank"]
    bob = (course / "feedback/bob/toy/toy.html").read_text()
    assert "AssertionError" in bob and "a negative number squared is positive" in bob
    for page in pages:
        text = page.read_text()
        assert not [code for code in toy.HIDDEN_CODE if code in text], page
        assert "HIDDEN TESTS" not in text
    # students receive no file nbgrader would not give them: the run record stays with the instructor
    assert (course / "autograded/bob/.autograder/toy.json").is_file()
    assert not list((course / "autograded").glob("*/toy/autograder.json"))
    from autograder.authoring.release import nbgrader_environment

    subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", "toy", "--force"],
                   cwd=course, env=nbgrader_environment({}), check=True, capture_output=True,
                   timeout=300)
    # nbgrader's own feedback carries the submission's timestamp.txt (collect writes one), nothing else
    assert sorted(p.name for p in (course / "feedback/bob/toy").iterdir()) == ["timestamp.txt",
                                                                               "toy.html"]

    assert _run(course, "report", "--output", str(course / "out")) == 0
    rows = {r["student"]: r for r in csv.DictReader((course / "out/grades.csv").open())}
    assert {s: float(r["total"]) for s, r in rows.items()} == scores
    assert rows["bob"]["toy/test_square"] == "0" and rows["bob"]["toy/test_total"] == "3"
    html = (course / "out/report.html").read_text()
    assert "data:image/png;base64," in html and "test_square" in html
    assert "over-maximum" not in html


def test_report_flags_a_score_above_the_maximum(course, tmp_path, capsys):
    """Extra credit someone wrote into the gradebook is listed, not silently averaged in."""
    import shutil

    copy = tmp_path / "course"
    shutil.copytree(course, copy)
    _run(copy, "grade", "toy", "--allow-cpu", "--no-progress")
    with Gradebook(f"sqlite:///{copy / 'gradebook.db'}") as gb:
        grade = gb.find_grade("test_square", "toy", "toy", "alice")
        grade.extra_credit = 30
        gb.db.commit()
    assert _run(copy, "report", "--output", str(copy / "out")) == 0
    html = (copy / "out/report.html").read_text()
    assert "id='over-maximum'" in html
    table = html.split("id='over-maximum'")[1].split("</table>")[0]
    assert "<td>alice</td><td>toy</td><td>37</td><td>7</td>" in table and "bob" not in table


def test_doctor_reports_device_and_gpu_checks(course, capsys):
    assert _run(course, "doctor") == 0
    out = capsys.readouterr().out
    import torch

    assert torch.__version__ in out
    assert "GPU checks of toy" in out and "test_total_gpu" in out
    assert ("run on CUDA" in out) == torch.cuda.is_available()
    assert "works: bubblewrap" in out.split("\nsandbox ")[1].splitlines()[0]
    assert "closed" in out.split("sandbox network")[1].splitlines()[0]
    assert "course folder hidden" in out


def test_grading_without_a_working_sandbox_stops_unless_no_sandbox(course, tmp_path, monkeypatch,
                                                                    capsys):
    import shutil

    copy = tmp_path / "course"
    shutil.copytree(course, copy, ignore=shutil.ignore_patterns("autograded"))
    from autograder.sandbox import host as sandbox

    which = sandbox.shutil.which
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None if name == "bwrap" else which(name))
    assert _run(copy, "grade", "toy", "--allow-cpu", "--no-progress", "--force") == 1
    err = capsys.readouterr().err
    assert "bubblewrap (bwrap) is not installed" in err and "--no-sandbox" in err
    assert _run(copy, "grade", "toy", "--allow-cpu", "--no-progress", "--force",
                "--no-sandbox") == 0
    captured = capsys.readouterr()
    assert "graded 4" in captured.out and "WITHOUT A SANDBOX" in captured.err


def test_errors_name_the_problem(course, tmp_path, capsys):
    assert main(["--course-root", str(tmp_path), "grade"]) == 1
    assert "no nbgrader_config.py" in capsys.readouterr().err
    assert _run(course, "grade", "no_such_assignment") == 1
    assert "'no_such_assignment' is not in the gradebook" in capsys.readouterr().err
    assert _run(course, "collect", str(tmp_path / "missing.zip")) == 1
    assert "missing.zip: no such file" in capsys.readouterr().err


def test_gpu_workflow_is_valid_and_grades_on_gpu_runner():
    text = WORKFLOW.read_text()
    workflow = yaml.safe_load(text)
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert "workflow_dispatch" in triggers
    inputs = triggers["workflow_dispatch"]["inputs"]
    assert {"submissions_path", "submissions_artifact"} <= set(inputs)
    job = workflow["jobs"]["grade"]
    assert job["runs-on"] == ["self-hosted", "gpu"]
    steps = job["steps"]
    for step in steps:
        assert ("run" in step) != ("uses" in step), step
        assert "name" in step
    commands = "\n".join(step.get("run", "") for step in steps)
    for command in ("autograder doctor", "autograder collect", "autograder grade --device cuda",
                    "autograder feedback", "autograder report"):
        assert command in commands
    uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    uploaded = "\n".join(s["with"]["path"] for s in uploads)
    assert "reports/grades.csv" in uploaded and "reports/report.html" in uploaded
    for expression in [line for line in text.splitlines() if "${{" in line]:
        assert expression.count("${{") == expression.count("}}"), expression
    json.dumps(workflow, default=str)  # plain data all the way down


def test_regenerate_is_a_subcommand(tmp_path, monkeypatch, capsys):
    """``autograder regenerate`` is ``python -m autograder.tools.regenerate``: its --help works and
    its flags (and --course-root) reach that module's main."""
    with pytest.raises(SystemExit) as exit_:
        main(["regenerate", "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "usage: autograder regenerate" in out and "--check" in out and "--only" in out
    seen: list[list[str]] = []
    monkeypatch.setattr("autograder.tools.regenerate.main", lambda argv: seen.append(argv) or 0)
    assert _run(tmp_path, "regenerate", "--check", "--only", "outline,tables") == 0
    assert _run(tmp_path, "regenerate") == 0
    assert seen == [["--course-root", str(tmp_path), "--check", "--only", "outline,tables"],
                    ["--course-root", str(tmp_path)]]


def test_log_level_configures_logging(tmp_path, monkeypatch):
    """``--log-level`` (any case) sets the root logger's level; without it logging is left alone; a
    level that is not DEBUG, INFO, WARNING or ERROR is refused by the parser."""
    import logging

    calls: list[dict[str, object]] = []
    monkeypatch.setattr(logging, "basicConfig", lambda **kw: calls.append(kw))
    (tmp_path / "_toc.yml").write_text("", encoding="utf-8")
    monkeypatch.setattr("autograder.cli.course._outline", lambda args: 0)
    assert main(["--course-root", str(tmp_path), "outline"]) == 0
    assert calls == []
    assert main(["--course-root", str(tmp_path), "--log-level", "debug", "outline"]) == 0
    assert [call["level"] for call in calls] == ["DEBUG"]
    with pytest.raises(SystemExit):
        main(["--log-level", "LOUD", "outline"])
