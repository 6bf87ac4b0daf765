"""Hidden checks of the GPU exercises (04_adagrad, 05_get_batch, 06_mixed_precision), in plain Python.

The reference solution cells are executed straight from ``solutions/NN_name/NN_name.py`` and each
grade cell (visible tests and hidden-check call) runs as nbgrader would run it, so these tests see in
seconds what the nbgrader catalogue test (test_catalogue_nbgrader.py) sees in minutes:
- the reference and the correct alternatives pass every grade cell;
- every wrong catalogue entry fails exactly the grade cells its ``breaks`` names;
- the GPU rule: without CUDA a GPU check raises NeedsGPU, with AUTOGRADER_ALLOW_CPU=1 it prints one
  loud line and runs its CPU path; ``python -m autograder.tools.gpu_check`` refuses a CPU-only machine;
- on a CUDA machine (``@pytest.mark.gpu``) the GPU checks pass on the reference solutions.
"""

from __future__ import annotations

import contextlib
import io
import random
import runpy
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder.hidden import HiddenCheckFailed, NeedsGPU
from autograder.hidden import adagrad as adagrad_checks
from autograder.hidden import get_batch as get_batch_checks
from autograder.hidden import mixed_precision as mixed_checks
from autograder.sandbox.inside import drivers
from autograder.tools import gpu_check

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = tuple(dict.fromkeys(check.assignment for check in gpu_check.GPU_CHECKS))  # course.toml's
GPU_CHECKS = {  # assignment -> (check, reference object name), written out: the manifest is checked against it
    "04_adagrad": (adagrad_checks.check_adagrad_gpu, "AdaGrad"),
    "05_get_batch": (get_batch_checks.check_get_batch_gpu, "get_batch"),
    "06_mixed_precision": (mixed_checks.check_train_step_mixed_gpu, "train_step_mixed"),
}
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
needs_no_cuda = pytest.mark.skipif(torch.cuda.is_available(),
                                   reason="tests the CPU-only side of the GPU rule")


def test_every_gpu_exercise_of_the_manifest_is_tested_here():
    assert set(GPU_CHECKS) == set(ASSIGNMENTS), "add the new GPU exercise's check to GPU_CHECKS above"


def _catalogue(assignment: str) -> dict:
    return runpy.run_path(str(ROOT / "catalogue" / f"{assignment}.py"))


def _entries(kind: str) -> list:
    params = []
    for assignment in ASSIGNMENTS:
        for entry in _catalogue(assignment)[kind]:
            params.append(pytest.param(assignment, entry, id=f"{assignment}-{entry['name']}"))
    return params


def _grade_cells(assignment: str) -> list[gpu_check.SourceCell]:
    cells = gpu_check.read_source_cells(gpu_check.source_file(assignment, ROOT))
    return [cell for cell in cells if cell.meta.get("grade")]


def failing_cells(assignment: str, replace: dict[str, str] | None = None) -> dict[str, str]:
    """Run every grade cell of ``assignment`` after the (possibly replaced) reference solution cells;
    return grade_id -> the error of each cell that raised."""
    namespace = gpu_check.reference_namespace(assignment, course_root=ROOT, replace=replace)
    failures = {}
    for cell in _grade_cells(assignment):
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(cell.source, cell.grade_id, "exec"), namespace)  # noqa: S102
        except Exception as error:  # noqa: BLE001 - a failing cell is the data here
            failures[cell.grade_id] = f"{type(error).__name__}: {error}"
    return failures


@pytest.fixture
def allow_cpu(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_ALLOW_CPU", "1")


def _seed_for(name: str) -> str:
    return str(zlib.crc32(name.encode()) % 10**6)


# --------------------------------------------------------------------------- sources and points


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_source_has_ten_points_and_complete_metadata(assignment):
    cells = gpu_check.read_source_cells(gpu_check.source_file(assignment, ROOT))
    for cell in cells:
        missing = {"schema_version", "grade", "grade_id", "locked", "solution", "task"} - set(cell.meta)
        assert not missing, f"{assignment}/{cell.grade_id}: nbgrader metadata lacks {missing}"
    grade = [c for c in cells if c.meta["grade"]]
    assert sum(c.meta["points"] for c in grade) == 10
    assert all(c.grade_id.startswith("test_") for c in grade)
    gpu_cells = [c for c in grade if c.grade_id.endswith("_gpu")]
    assert len(gpu_cells) == 1, f"{assignment}: expected one GPU grade cell, got {[c.grade_id for c in gpu_cells]}"
    assert "chapters/" in cells[0].source, f"{assignment}: the introduction should link its chapter"
    for cell in grade:  # hidden regions only call checks; visible tests never import the grader
        visible = cell.source.split("### BEGIN HIDDEN TESTS")[0]
        assert "autograder" not in visible, f"{assignment}/{cell.grade_id}: visible tests import autograder"
        assert "### BEGIN HIDDEN TESTS" in cell.source and "_hidden.check_" in cell.source


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_hidden_calls_are_parsed_for_every_grade_cell(assignment):
    calls = gpu_check.hidden_calls(assignment, ROOT)
    assert len(calls) == len(_grade_cells(assignment))
    assert [c.function for c in calls if c.gpu] == [GPU_CHECKS[assignment][0].__name__]


def test_reading_a_source_without_metadata_names_the_file(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("# %%\nx = 1\n")
    with pytest.raises(ValueError, match="bad.py.*no nbgrader"):
        gpu_check.read_source_cells(bad)


# --------------------------------------------------------------------------- reference and catalogue


@pytest.mark.parametrize("seed", ["11", "12345"])
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_reference_passes_every_grade_cell(assignment, seed, allow_cpu, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SEED", seed)
    assert failing_cells(assignment) == {}


@pytest.mark.parametrize(("assignment", "entry"), _entries("WRONG"))
def test_wrong_entry_fails_exactly_its_cells(assignment, entry, allow_cpu, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SEED", _seed_for(entry["name"]))
    failures = failing_cells(assignment, entry["replace"])
    assert set(failures) == set(entry["breaks"]), (
        f"{entry['name']} ({entry['why']}): expected failures in {sorted(entry['breaks'])}, got {failures}")


@pytest.mark.parametrize(("assignment", "entry"), _entries("CORRECT"))
def test_correct_alternative_passes(assignment, entry, allow_cpu, monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SEED", _seed_for(entry["name"]))
    assert failing_cells(assignment, entry["replace"]) == {}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_catalogue_size(assignment):
    catalogue = _catalogue(assignment)
    assert len(catalogue["WRONG"]) >= 6 and len(catalogue["CORRECT"]) >= 1


def test_failure_message_names_the_seed_and_what_was_expected():
    namespace = gpu_check.reference_namespace(
        "04_adagrad", course_root=ROOT,
        replace={"AdaGrad": _catalogue("04_adagrad")["WRONG"][0]["replace"]["AdaGrad"]})
    with pytest.raises(HiddenCheckFailed) as caught:
        adagrad_checks.check_adagrad_step(namespace["AdaGrad"], seed=7)
    message = str(caught.value)
    assert message.endswith("[seed 7]")
    assert "differs from torch.optim.Adagrad" in message and "sqrt(G) + eps" in message
    assert caught.value._render_traceback_() == [f"HiddenCheckFailed: {message}"]


# --------------------------------------------------------------------------- the GPU rule


@needs_no_cuda
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_gpu_check_without_cuda_needs_a_gpu_runner(assignment, monkeypatch):
    monkeypatch.delenv("AUTOGRADER_ALLOW_CPU", raising=False)
    check, name = GPU_CHECKS[assignment]
    namespace = gpu_check.reference_namespace(assignment, course_root=ROOT)
    with pytest.raises(NeedsGPU, match="^Not run: this check needs a GPU") as caught:
        check(namespace[name], seed=1)
    assert "--" not in str(caught.value), "the student reads it: no grader flag"


@needs_no_cuda
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_gpu_check_on_cpu_when_allowed_says_so_loudly(assignment, allow_cpu, capsys):
    check, name = GPU_CHECKS[assignment]
    namespace = gpu_check.reference_namespace(assignment, course_root=ROOT)
    check(namespace[name], seed=2)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("GPU check ran on CPU")]
    assert len(lines) == 1 and "AUTOGRADER_ALLOW_CPU=1" in lines[0]


@needs_no_cuda
def test_gpu_check_script_refuses_a_cpu_machine(monkeypatch, capsys):
    monkeypatch.delenv("AUTOGRADER_ALLOW_CPU", raising=False)
    assert gpu_check.main(["--course-root", str(ROOT)]) == 2
    assert "no CUDA device" in capsys.readouterr().err


@needs_no_cuda
def test_gpu_check_script_runs_the_cpu_path_when_allowed(monkeypatch, capsys):
    monkeypatch.setenv("AUTOGRADER_ALLOW_CPU", "")  # main() sets it to 1; undone after the test
    assert gpu_check.main(["--course-root", str(ROOT), "--allow-cpu"]) == 0
    out = capsys.readouterr().out
    assert "--allow-cpu" in out and "say nothing about CUDA" in out
    table = [line for line in out.splitlines() if line.startswith("0")]
    assert len(table) == 3 and all("passed" in line and " cpu " in line for line in table), out


def test_gpu_check_script_reports_a_failing_check_without_crashing(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_ALLOW_CPU", "1")
    broken = gpu_check.Check("04_adagrad", "adagrad", "check_adagrad_gpu", "optimizer_state_numel", True)
    row = gpu_check.run_check(broken, ROOT, {})
    assert row.result.startswith("FAILED") and row.seconds >= 0


# --------------------------------------------------------------------------- pieces of the checks


def test_virtual_tokens_count_reads_and_refuse_whole_conversion():
    tokens = get_batch_checks._VirtualTokens(10**12, budget=100, needed=50)
    assert tokens[65535:65538].tolist() == [65535, 0, 1] and tokens.read == 3
    assert tokens[torch.tensor([[1, 2], [3, 4]])].shape == (2, 2) and tokens.read == 7
    with pytest.raises(AssertionError, match="converted the whole"):
        np.asarray(tokens)
    with pytest.raises(AssertionError, match="read 107"):
        tokens[:100]


def test_transfer_spy_restores_tensor_methods_even_after_an_error():
    before = {name: torch.Tensor.__dict__.get(name) for name in ("to", "cuda", "copy_", "pin_memory")}

    def fails():
        torch.ones(2).to("cpu")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        drivers.watch_transfers(fails)
    assert {name: torch.Tensor.__dict__.get(name) for name in before} == before


def test_transfer_spy_sees_copies_to_another_device():
    """The meta device stands in for CUDA here: .to and .copy_ from the CPU are recorded."""

    def copies():
        torch.ones(2).to("cpu")  # no transfer
        torch.ones(2).to("meta", non_blocking=True)
        torch.empty(2, device="meta").copy_(torch.ones(2))
        return "done"

    report = drivers.watch_transfers(copies)
    assert report == {"result": "done", "copies": [(False, True), (False, False)], "pinned": 0}


def test_get_batch_checks_leave_global_random_states_alone():
    namespace = gpu_check.reference_namespace("05_get_batch", course_root=ROOT)
    np.random.seed(3)
    random.seed(3)
    numpy_state, python_state = np.random.get_state()[1].copy(), random.getstate()
    get_batch_checks.check_get_batch_starts(namespace["get_batch"], seed=5)
    assert np.array_equal(np.random.get_state()[1], numpy_state) and random.getstate() == python_state


@pytest.mark.parametrize(("bits", "dtype", "ieee"), [
    ((11, 52), torch.float64, True), ((8, 23), torch.float32, True), ((5, 10), torch.float16, True),
    ((8, 7), torch.bfloat16, True), ((5, 2), torch.float8_e5m2, True), ((4, 3), torch.float8_e4m3fn, False),
])
def test_format_formula_agrees_with_torch(bits, dtype, ieee):
    """The formula the random cases use agrees with torch.finfo and with casting in that dtype."""
    formula = mixed_checks._formula(*bits, ieee)
    assert formula == mixed_checks._finfo(dtype)
    smallest = torch.tensor([formula["min_subnormal"], formula["min_subnormal"] / 2], dtype=torch.float64).to(dtype).double()
    assert smallest.tolist() == [formula["min_subnormal"], 0.0]  # representable; half rounds to zero


def test_adagrad_reference_numel_matches_torch():
    assert {name: adagrad_checks._torch_state_numel(name, 10)
            for name in adagrad_checks.OPTIMIZER_STATE_FACTORS} == {
        name: 10 * factor for name, factor in adagrad_checks.OPTIMIZER_STATE_FACTORS.items()}


def test_mixed_precision_check_leaves_torch_global_rng_alone(allow_cpu):
    namespace = gpu_check.reference_namespace("06_mixed_precision", course_root=ROOT)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    mixed_checks.check_train_step_mixed(namespace["train_step_mixed"], seed=4)
    assert torch.equal(torch.rand(3), expected)


# --------------------------------------------------------------------------- on a CUDA machine


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_gpu_check_passes_the_reference_on_cuda(assignment, monkeypatch, capsys):
    monkeypatch.delenv("AUTOGRADER_ALLOW_CPU", raising=False)
    check, name = GPU_CHECKS[assignment]
    namespace = gpu_check.reference_namespace(assignment, course_root=ROOT)
    check(namespace[name], seed=3)
    assert "GPU check ran on CPU" not in capsys.readouterr().out


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize(("assignment", "entry"), [
    p for p in _entries("WRONG") if any(cell.endswith("_gpu") for cell in p.values[1]["breaks"])])
def test_gpu_check_fails_wrong_entries_on_cuda(assignment, entry, monkeypatch):
    monkeypatch.delenv("AUTOGRADER_ALLOW_CPU", raising=False)
    check, name = GPU_CHECKS[assignment]
    namespace = gpu_check.reference_namespace(assignment, course_root=ROOT, replace=entry["replace"])
    with pytest.raises(HiddenCheckFailed):
        check(namespace[name], seed=4)


@pytest.mark.gpu
@needs_cuda
def test_gpu_check_script_on_cuda(monkeypatch, capsys):
    monkeypatch.delenv("AUTOGRADER_ALLOW_CPU", raising=False)
    assert gpu_check.main(["--course-root", str(ROOT)]) == 0
    assert "CUDA device" in capsys.readouterr().out
