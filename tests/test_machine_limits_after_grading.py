"""Issue 41, after grading: a check the grading machine did not run (a GPU check graded without a GPU and
without --allow-cpu: ``NeedsGPU``) is never a silent score, and the other after-grading rough edges.

One toy course (tests/support/autograder_toy.py: four grade cells, ``test_total_gpu`` a GPU-only check) is
graded for real by ``autograder grade`` with CUDA hidden and no ``--allow-cpu``:

- alice and bob: the reference (bob a copy of alice, written longer so similarity can judge it);
- carol: ``total`` wrong; dave: ``square`` still as released (``raise NotImplementedError()``),
  with a markdown cell of math (the feedback page must typeset it without a CDN).

The gradebook also knows ``later`` (nobody submitted, due next year) and ``past`` (nobody submitted,
due last year). Then ``report``, ``feedback``, ``similarity`` and ``lms csv`` are run as an
instructor would, and what they say is checked.
"""

from __future__ import annotations

import csv
import datetime as dt
import os
from pathlib import Path

import autograder_toy as toy
import nbformat
import pytest
import torch

from autograder.cli import main
from autograder.course.nbgrader import load_course

GPU_CELL = "test_total_gpu"
NOT_RUN = "not run: no GPU"  # autograder.machine_limits.NOT_RUN_REASON, spelled out: what staff read
LONG_TOTAL = ("def total(values):\n    running_sum = 0\n    for position, value in enumerate(values):\n"
              "        running_sum = running_sum + value * 1 + 0 * position\n"
              "    return running_sum if len(values) > 0 else sum(values)\n")
BLANK_SQUARE = "def square(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
MATH = "Where $\\varepsilon$ goes: $$G \\leftarrow G + g^2$$"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = toy.make_toy_course(tmp_path_factory.mktemp("limits") / "course")
    toy.submit(root, "alice", total=LONG_TOTAL)
    toy.submit(root, "bob", total=LONG_TOTAL)
    toy.submit(root, "carol", total="def total(values):\n    return 0\n")
    dave = toy.submit(root, "dave", square=BLANK_SQUARE)
    nb = nbformat.read(dave, as_version=4)
    nb.cells.append(nbformat.v4.new_markdown_cell(MATH))
    nbformat.write(nb, dave)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    with load_course(root).gradebook() as gb:
        gb.update_or_create_assignment("later", duedate=now + dt.timedelta(days=365))
        gb.update_or_create_assignment("past", duedate=now - dt.timedelta(days=365))
    saved = {k: os.environ.pop(k, None) for k in ("AUTOGRADER_ALLOW_CPU", "CUDA_VISIBLE_DEVICES")}
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # no GPU for the grading children either
    try:
        assert main(["--course-root", str(root), "grade", "toy", "--no-progress"]) == 0
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None)
            if value is not None:
                os.environ[key] = value
    if "NeedsGPU" not in (root / "autograded/alice/toy/toy.ipynb").read_text():
        pytest.skip("the GPU check ran on this machine (a CUDA device was visible to grading)")
    return root


def run(root: Path, *args: str) -> int:
    return main(["--course-root", str(root), *args])


# --- the report -----------------------------------------------------------------------------------

def test_the_report_warns_and_leaves_unrun_cells_out_of_the_failures(course, capsys):
    assert run(course, "report", "--output", str(course / "reports")) == 0
    err = capsys.readouterr().err
    assert "toy: 4 grade cells in 4 submissions were not run: no GPU" in err
    page = (course / "reports/report.html").read_text()
    assert "4 grade cells in 4 submissions were not run: no GPU" in page
    # the failure-rate table names what the students failed, never the machine's cell
    table = page.split("Grade cells by failure rate", 1)[1].split("</table>", 1)[0]
    assert "toy/test_total<" in table and f"toy/{GPU_CELL}" not in table, table
    # an assignment nobody submitted is not "graded on nbgrader"
    later = page.split("<td>later</td>", 1)[1].split("</tr>", 1)[0]
    assert "no submissions yet" in later and "nbgrader" not in later, later
    rows = {row["student"]: row for row in csv.DictReader((course / "reports/grades.csv").open())}
    assert {rows[s][f"toy/{GPU_CELL}"] for s in ("alice", "bob", "carol", "dave")} == {NOT_RUN}
    assert rows["alice"]["toy"] == "6" and rows["carol"]["toy/test_total"] == "0"


def test_misconceptions_compare_only_cells_that_ran(course):
    from autograder.reports import misconceptions
    from autograder.reports.misconceptions import Entry, Failure
    from autograder.reports.report import passed, read_grades

    c = load_course(course)
    grades = read_grades(c)
    assert ("alice", "toy") in passed(grades) and ("carol", "toy") not in passed(grades)
    carol = misconceptions.signature_of(misconceptions.notebook_errors(
        course / "autograded/carol/toy/toy.ipynb"))
    assert set(carol) == {"test_total", "test_torch_sum"}  # the GPU cell is no evidence
    machine = misconceptions.normalise("NeedsGPU", "Not run")[0]
    table = {"toy": [Entry("machine", "looks like the machine", {GPU_CELL: Failure((machine,), None)}),
                     Entry("sum", "total returns 0",
                           {**carol, GPU_CELL: Failure(("AssertionError: ",), None)})]}
    named = {n.student: n for n in misconceptions.name_submissions(
        c, grades.score, passed=passed(grades), table=table)}
    assert named["alice"].misconception == "" and GPU_CELL not in named["alice"].failed
    assert named["carol"].misconception == "total returns 0"
    assert set(named["carol"].failed) == set(carol)


# --- similarity -----------------------------------------------------------------------------------

def test_similarity_never_counts_a_machine_failure_as_failing_the_same_way(course):
    # the toy course has no .py exercise source to compare cells against, so this reads the failures
    # similarity ranks pairs by (``shared_failures`` is their intersection)
    from autograder.reports.similarity import _failures

    failures = _failures(load_course(course), "toy")
    assert all(GPU_CELL not in cells for cells in failures.values()), failures
    assert "alice" not in failures and "bob" not in failures  # the reference fails nothing of its own
    assert set(failures["carol"]) == {"test_total", "test_torch_sum"}


# --- feedback -------------------------------------------------------------------------------------

def test_feedback_says_not_run_in_the_students_words_and_names_what_is_unfinished(course):
    assert run(course, "feedback", "toy") == 0
    alice = (course / "feedback/alice/toy/toy.html").read_text()
    assert "Not run: this check needs a GPU and the grading machine had none" in alice
    assert "--allow-cpu" not in alice and "NeedsGPU" not in alice
    dave = (course / "feedback/dave/toy/toy.html").read_text()
    assert "NotImplementedError: not implemented yet: square (replace" in dave
    # MathJax: none from a CDN; a page without math loads none, one with math carries it inline
    assert "cdnjs" not in alice and "cdnjs" not in dave
    assert "window.MathJax" not in alice and "window.MathJax" in dave


def test_the_not_run_message_is_translated_and_names_no_flag(monkeypatch):
    from autograder.hidden import NeedsGPU, _gpu
    from autograder.i18n.messages import translate

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("AUTOGRADER_ALLOW_CPU", raising=False)
    with pytest.raises(NeedsGPU) as caught:
        _gpu.gpu_device("toy")
    english = str(caught.value)
    assert "--" not in english and "course staff will grade it on a GPU" in english
    shown = translate(english, "zh_TW")
    assert shown != english and "GPU" in shown and "staff" not in shown


def test_an_empty_not_implemented_error_names_the_function():
    from autograder.hidden._feedback import hide_hidden_source

    output = {"output_type": "error", "ename": "NotImplementedError", "evalue": "",
              "traceback": ["NotImplementedError: "]}
    hide_hidden_source(output, set(), unfinished=["flat_index"])
    assert output["evalue"].startswith("not implemented yet: flat_index")
    assert output["traceback"] == [f"NotImplementedError: {output['evalue']}"]
    from autograder.i18n.messages import translate

    assert translate(output["evalue"], "zh_TW").startswith("尚未實作：flat_index")  # the zh-TW edition
    anonymous = {"output_type": "error", "ename": "NotImplementedError", "evalue": "", "traceback": []}
    hide_hidden_source(anonymous, set())
    assert "not implemented yet" in anonymous["evalue"]
    kept = {"output_type": "error", "ename": "NotImplementedError", "evalue": "their own words",
            "traceback": ["x"]}
    hide_hidden_source(kept, set())
    assert kept["evalue"] == "their own words"


# --- the LMS --------------------------------------------------------------------------------------

def test_lms_csv_refuses_unrun_checks_and_leaves_out_what_nobody_handed_in(course, capsys, tmp_path):
    out = tmp_path / "canvas.csv"
    assert run(course, "lms", "csv", str(out)) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("autograder lms: error: refusing to post toy")
    assert "--include-unrun" in err and "no GPU" in err and not out.exists()

    assert run(course, "lms", "csv", str(out), "--include-unrun") == 0
    err = capsys.readouterr().err
    header = next(csv.reader(out.open()))
    assert header[5:] == ["past", "toy"]  # "later": nobody submitted and not due yet
    assert "later: left out" in err and "--all-assignments" in err

    assert run(course, "lms", "csv", str(out), "--include-unrun", "--all-assignments") == 0
    assert next(csv.reader(out.open()))[5:] == ["later", "past", "toy"]


def test_lms_canvas_refuses_unrun_checks_before_reaching_canvas(course, capsys, monkeypatch):
    monkeypatch.setenv("CANVAS_API_TOKEN", "t")
    # an address nothing listens on: the refusal must come before any request
    assert run(course, "lms", "canvas", "--url", "http://127.0.0.1:9", "--course", "1") == 1
    err = capsys.readouterr().err
    assert "refusing to post toy" in err and "cannot reach" not in err
