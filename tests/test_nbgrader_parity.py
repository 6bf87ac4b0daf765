"""Parity with ``nbgrader autograde`` on nbgrader's own scenarios (issue 16).

Every test of nbgrader's ``nbgrader/tests/apps/test_nbgrader_autograde.py`` is ported as a scenario
(``tests/parity/scenarios.py``) and graded on twin courses: by plain ``nbgrader autograde`` and by
``autograder grade`` in the real bubblewrap sandbox. The two must agree on the exit status of every
run (zero or not), the gradebook (per grade cell auto_score, manual_score, needs_manual_grade; per
comment auto_comment; per submission timestamp, seconds late and per notebook late penalty) and the
files under ``autograded/`` (which exist; notebooks by their cells' sources, nbgrader metadata and
outputs) and ``submitted/``. The autograder's run record ``autograded/<student>/.autograder/<assignment>.json``
(outside the autograded folder, so feedback never carries it) is the one extra file
it may write (``test_autograder_writes_its_run_record``).

nbgrader's side is read from golden results (``tests/parity/golden/``, ``make parity-golden``);
``test_golden_results_match_live_nbgrader`` re-runs a few scenarios through real nbgrader to prove
them current. The autograder's side runs live: one ``autograder grade`` command per step for all the
scenarios of a course that share its arguments and config, two courses at a time.

A scenario where the autograder differs today is ``xfail(strict=True)`` with what differs
(``Scenario.differs``): once the engine is fixed it XPASSes, which fails the suite, and ``differs``
must be cleared.
"""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from parity import harness
from parity.scenarios import BY_NAME, LIVE_CHECK, SCENARIOS

LANES = 2  # courses graded at once: one command leaves a core idle about half its time


@dataclass
class Runs:
    """The autograder's snapshots per scenario, and its command logs per course."""
    results: dict[str, list[dict]]
    logs: dict[str, list[str]]

    def log_of(self, scenario: harness.Scenario) -> str:
        entries = [e for e in self.logs[scenario.course]
                   if any(f" {a} " in e.split("\n", 1)[0] for a in assignment_names(scenario))]
        return "\n".join(entries)[-6000:]


def assignment_names(scenario: harness.Scenario) -> set[str]:
    return {step.assignment_name(scenario) for step in scenario.steps}


def selected_scenarios(items) -> list[harness.Scenario]:
    """The scenarios the collected test ``items`` need graded: those of the selected parity tests,
    and ``grade`` for the run-record test (``-k grade_cell_deleted`` grades two, not all)."""
    names = {item.callspec.params["scenario"].name for item in items
             if "scenario" in getattr(getattr(item, "callspec", None), "params", {})}
    if any(item.name == "test_autograder_writes_its_run_record" for item in items):
        names.add("grade")
    return [s for s in SCENARIOS if s.name in names]


@pytest.fixture(scope="module")
def autograder_runs(request, tmp_path_factory) -> Runs:
    """The selected scenarios' courses built and graded by ``autograder grade`` (LANES courses at
    once)."""
    parent = tmp_path_factory.mktemp("parity")
    groups = harness.courses(selected_scenarios(request.session.items))

    def grade(course: str) -> tuple[str, dict[str, list[dict]], list[str]]:
        grader = harness.AutograderGrader()
        root = harness.build_course(parent / course, groups[course])
        return course, harness.run_course(root, groups[course], grader), grader.log

    results, logs = {}, {}
    with ThreadPoolExecutor(max_workers=LANES) as pool:
        for course, result, log in pool.map(grade, sorted(groups, key=lambda c: -len(groups[c]))):
            results.update(result)
            logs[course] = log
    return Runs(results, logs)


def _param(scenario: harness.Scenario):
    # raises=AssertionError: a difference is an xfail, a harness error stays an error
    marks = [pytest.mark.xfail(strict=True, raises=AssertionError,
                               reason=f"issue 16: {scenario.differs}")] if scenario.differs else []
    return pytest.param(scenario, id=scenario.name, marks=marks)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", [_param(s) for s in SCENARIOS])
def test_autograder_agrees_with_nbgrader(scenario: harness.Scenario, autograder_runs: Runs):
    golden = harness.read_golden(scenario)
    differences = harness.compare_steps(golden["steps"], autograder_runs.results[scenario.name])
    assert not differences, (f"{scenario.name}: the autograder differs from nbgrader "
                             f"{golden['nbgrader']}:\n  " + "\n  ".join(differences)
                             + "\n--- autograder commands ---\n" + autograder_runs.log_of(scenario))


def test_golden_results_are_current():
    """Each golden file was written by the installed nbgrader for the scenario as it is now (its
    digest: the scenario, its fixtures, nbgrader's version), and nbgrader failed exactly the runs
    the original test expects to fail (``retcode=1``)."""
    import nbgrader

    stale, wrong_status = [], []
    for s in SCENARIOS:
        path = harness.golden_path(s)
        if not path.is_file():
            stale.append(f"{s.name}: no {path.name}")
            continue
        golden = harness.read_golden(s)
        if golden["digest"] != s.digest() or golden["nbgrader"] != nbgrader.__version__:
            stale.append(f"{s.name}: written by nbgrader {golden['nbgrader']} for another scenario "
                         "definition")
        statuses = [step["status"] for step in golden["steps"]]
        expected = ["failed" if step.nbgrader_fails else "ok" for step in s.steps]
        if statuses != expected:
            wrong_status.append(f"{s.name}: nbgrader {statuses}, the original test {expected}")
    assert not stale, "golden results are stale; run `make parity-golden`:\n" + "\n".join(stale)
    assert not wrong_status, "\n".join(wrong_status)
    extra = {p.stem for p in harness.GOLDEN.glob("*.json")} - set(BY_NAME)
    assert not extra, f"golden results of no scenario: {sorted(extra)}"


@pytest.mark.slow
def test_golden_results_match_live_nbgrader(tmp_path):
    """A few scenarios (``LIVE_CHECK``) through the real ``nbgrader autograde`` now, in one course:
    the same snapshots as the golden files, step for step."""
    scenarios = [BY_NAME[name] for name in LIVE_CHECK]
    for s in scenarios:  # one course, as for the golden runs (they share the plain course config)
        assert s.config == scenarios[0].config
    grouped = [harness.Scenario(**{**s.__dict__, "course": "live"}) for s in scenarios]

    def differing(folder: str) -> tuple[harness.NbgraderGrader, dict[str, list[str]]]:
        grader = harness.NbgraderGrader()
        live = harness.run_course(harness.build_course(tmp_path / folder, grouped), grouped, grader)
        return grader, {s.name: harness.diff(harness.read_golden(s)["steps"], live[s.name])
                        for s in scenarios}

    grader, found = differing("live")
    if any(found.values()):  # plain nbgrader's own kernel can fail on a loaded machine: once more
        grader, found = differing("live-again")
    for s in scenarios:
        differences = found[s.name]
        assert not differences, (f"{s.name}: live nbgrader differs from its golden result (run "
                                 "`make parity-golden`):\n  " + "\n  ".join(differences)
                                 + "\n" + "\n".join(grader.log)[-4000:])


def test_autograder_writes_its_run_record(autograder_runs: Runs):
    """The one file the comparison lets the autograder add: a run record per graded submission
    (device, timings, why cells failed), beside its autograded folder, never inside it."""
    _, found = harness.without_run_record(autograder_runs.results["grade"])
    assert found == ["step 1/bar", "step 1/foo"]


def test_help():
    """test_help: the grading command's help displays without error."""
    for command in ([sys.executable, "-m", "nbgrader", "autograde", "--help-all"],
                    [str(harness.BIN / "autograder"), "grade", "--help"]):
        done = subprocess.run(command, capture_output=True, text=True, env=harness.environment(),
                              cwd=Path(__file__).parent, timeout=120)
        assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"


def test_comparison_catches_differences():
    """The instrument can fail: a changed score, a missing file, another exit status or another
    outcome of a cell is reported; a different error message or an extra run record is not."""
    golden = harness.read_golden(BY_NAME["grade"])["steps"]
    assert harness.compare_steps(golden, golden) == []

    def changed(edit) -> list[str]:
        steps = harness.json.loads(harness.json.dumps(golden))
        edit(steps[0])
        return harness.compare_steps(golden, steps)

    def score(step):
        step["gradebook"]["bar"]["notebooks"]["p1"]["grades"]["foo"]["auto_score"] = 0.0

    def message(step):
        step["autograded"]["foo"]["p1.ipynb"]["cells"][2]["outputs"][0]["evalue"] = "other"

    def outcome(step):
        step["autograded"]["foo"]["p1.ipynb"]["cells"][1]["outputs"] = [{"error": "E", "evalue": ""}]

    assert changed(score) == ["step 1/gradebook/bar/notebooks/p1/grades/foo/auto_score: "
                              "nbgrader=1.0 autograder=0.0"]
    assert changed(lambda step: step.update(status="failed")) == [
        'step 1/status: nbgrader="ok" autograder="failed"']
    assert changed(lambda step: step["autograded"]["foo"].pop("p1.ipynb"))[0].startswith(
        "step 1/autograded/foo/p1.ipynb: only nbgrader has it")
    assert changed(outcome) == ['step 1/autograded/foo/p1.ipynb/cells[1]/outcome: '
                                'nbgrader="ok" autograder="error"']
    assert changed(message) == []
    assert changed(lambda step: step.update({harness.RUN_RECORDS: ["foo"]})) == []
    assert changed(lambda step: step["autograded"]["foo"].update(  # it would reach feedback/
        {harness.RUN_RECORD: {"type": "file", "text": "{}"}}))[0].startswith(
        "step 1/autograded/foo/autograder.json: only the autograder has it")


def test_the_documented_decision_drops_only_ungraded_rows_the_autograder_lacks():
    """``harness.DECISION`` can hide nothing else: a graded row, or one the autograder also has,
    still counts."""
    ungraded = {"notebooks": {"p1": {"grades": {}, "comments": {}}}, "timestamp": None}
    graded = {"notebooks": {"p1": {"grades": {"q": {"auto_score": 1.0}}}}, "timestamp": None}
    expected = [{"status": "failed", "gradebook": {"bar": ungraded, "foo": graded}}]
    assert harness.compare_steps(expected, [{"status": "failed", "gradebook": {"foo": graded}}]) == []
    assert harness.compare_steps(expected, [{"status": "failed", "gradebook": {}}])  # foo missing
    assert harness.compare_steps(expected, [{"status": "failed", "gradebook": {
        "foo": graded, "bar": graded}}])  # a row both have is compared
    folders = [{"status": "failed", "autograded": {"foo": harness.EMPTY_FOLDER,
                                                   "bar": {".": {"type": "dir"}, "p1.ipynb": {}}}}]
    assert harness.compare_steps(folders, [{"status": "failed", "autograded": {
        "bar": {".": {"type": "dir"}, "p1.ipynb": {}}}}]) == []
    assert harness.compare_steps(folders, [{"status": "failed", "autograded": {}}])  # bar's files


def test_only_the_selected_scenarios_are_graded():
    """``-k`` narrows what the module fixture grades: the selected scenarios, plus ``grade`` for the
    run-record test, in the suite's order."""
    from types import SimpleNamespace as Item

    items = [Item(name="test_autograder_agrees_with_nbgrader[force]",
                  callspec=Item(params={"scenario": BY_NAME["force"]})),
             Item(name="test_autograder_writes_its_run_record"), Item(name="test_help")]
    assert [s.name for s in selected_scenarios(items)] == ["grade", "force"]
    assert selected_scenarios(items[2:]) == []


def test_only_nbgraders_added_back_text_is_kept_on_a_grade_cell(tmp_path):
    """``cell_kinds`` keeps a locked grade cell's source only when it is the gradebook's or, with
    ``c.OverwriteCells.add_missing_cells``, exactly the text nbgrader's ``missing_cell_transform``
    gives the cell it adds back; anything else is reset to the gradebook's."""
    from nbformat.v4 import new_code_cell, new_notebook
    from nbgrader.api import Gradebook
    from traitlets.config import Config

    from autograder.grading.prepare import cell_kinds

    added = ("# This cell (id:bar) was missing from the submission. It was added back by nbgrader."
             "\n\nassert a == 1")
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        gb.add_assignment("ps1")
        gb.add_notebook("p1", "ps1")
        gb.add_grade_cell("bar", "p1", "ps1", max_score=1, cell_type="code")
        gb.add_source_cell("bar", "p1", "ps1", cell_type="code", locked=True, source="assert a == 1",
                           checksum="x")
        on = Config()
        on.OverwriteCells.add_missing_cells = True

        def kept(source: str, config: Config | None) -> str:
            nb = new_notebook(cells=[new_code_cell(source, metadata={"nbgrader": {"grade_id": "bar"}})])
            assert cell_kinds(gb, nb, notebook="p1", assignment="ps1", config=config) == {0: "grade"}
            return nb.cells[0].source

        assert kept(added, on) == added
        assert kept(added, None) == kept(added, Config()) == "assert a == 1"
        assert kept(added + "\nimport os", on) == "assert a == 1"
        assert kept("pass", on) == "assert a == 1"
