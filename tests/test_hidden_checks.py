"""Hidden checks, fast and in-process: they pass on the reference and fail on every wrong catalogue entry.

The reference functions come from executing the solution cells of each source; each grade cell's
hidden-test region is executed as written in the source (so the test exercises the real hook). Every
case runs under three fixed seeds (AUTOGRADER_SEED), so a check that catches a mistake only by luck
fails here. GPU checks run on their CPU path (AUTOGRADER_ALLOW_CPU=1).
"""

from __future__ import annotations

import pytest
import torch
from conftest import ROOT, assignments_with_catalogue
from hypothesis import given, settings
from hypothesis import strategies as st

from autograder.authoring import samples
from autograder.hidden import HiddenCheckFailed, NeedsGPU, _gpu, hidden_check
from autograder.hidden._base import CheckRandom, expect_equal
from autograder.hidden._feedback import hidden_lines, scrub_traceback

ASSIGNMENTS = assignments_with_catalogue()
SEEDS = (11, 222, 3333)


@pytest.fixture(autouse=True)
def _cpu_allowed(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_ALLOW_CPU", "1")


def _region_cases() -> list[tuple[str, str]]:
    return [(a, gid) for a in ASSIGNMENTS for gid in samples.hidden_regions(a, course_root=ROOT)]


def _catalogue_cases(kind: str) -> list:
    cases = []
    for assignment in ASSIGNMENTS:
        wrong, correct = samples.load_catalogue(assignment, course_root=ROOT)
        for entry in wrong if kind == "wrong" else correct:
            cases.append(pytest.param(assignment, entry, id=f"{assignment}-{entry['name']}"))
    return cases


def _run_region(assignment: str, grade_id: str, namespace: dict, seed: int, monkeypatch) -> None:
    monkeypatch.setenv("AUTOGRADER_SEED", str(seed))
    samples.run_hidden_region(assignment, grade_id, dict(namespace), course_root=ROOT)


@pytest.mark.parametrize(("assignment", "grade_id"), _region_cases())
def test_reference_passes_hidden_check(assignment, grade_id, monkeypatch):
    namespace = samples.solution_namespace(assignment, course_root=ROOT)
    for seed in SEEDS:
        _run_region(assignment, grade_id, namespace, seed, monkeypatch)


@pytest.mark.parametrize(("assignment", "entry"), _catalogue_cases("correct"))
def test_correct_alternative_passes_every_hidden_check(assignment, entry, monkeypatch):
    namespace = samples.solution_namespace(assignment, entry["replace"], course_root=ROOT)
    for grade_id in samples.hidden_regions(assignment, course_root=ROOT):
        for seed in SEEDS:
            _run_region(assignment, grade_id, namespace, seed, monkeypatch)


@pytest.mark.parametrize(("assignment", "entry"), _catalogue_cases("wrong"))
def test_wrong_entry_fails_the_hidden_checks_it_breaks(assignment, entry, monkeypatch):
    namespace = samples.solution_namespace(assignment, entry["replace"], course_root=ROOT)
    regions = samples.hidden_regions(assignment, course_root=ROOT)
    for grade_id in entry["breaks"]:
        assert grade_id in regions, f"{entry['name']}: breaks {grade_id!r}, which has no hidden-test region"
        for seed in SEEDS:
            with pytest.raises(AssertionError) as caught:
                _run_region(assignment, grade_id, namespace, seed, monkeypatch)
            assert f"[seed {seed}]" in str(caught.value), "the failure message must print the seed"


def test_catalogues_are_big_enough():
    for assignment in ASSIGNMENTS:
        wrong, correct = samples.load_catalogue(assignment, course_root=ROOT)
        assert len(wrong) >= 6 and len(correct) >= 1, f"{assignment}: {len(wrong)} wrong, {len(correct)} correct"


# --- the shared machinery --------------------------------------------------------------------------

@hidden_check("demo")
def _demo_check(fn, *, rng: CheckRandom):
    value = rng.randint(0, 10**6)
    expect_equal(fn(value), value, f"fn({value})")


def test_hidden_check_reports_seed_and_is_reproducible():
    with pytest.raises(HiddenCheckFailed) as first:
        _demo_check(lambda v: v + 1, seed=5)
    with pytest.raises(HiddenCheckFailed) as second:
        _demo_check(lambda v: v + 1, seed=5)
    assert str(first.value) == str(second.value)
    assert str(first.value).startswith("demo: fn(") and str(first.value).endswith("[seed 5]")
    _demo_check(lambda v: v, seed=5)


def test_student_exceptions_become_short_failures():
    def broken(value):
        raise KeyError("oops")

    with pytest.raises(HiddenCheckFailed, match=r"demo: raised KeyError: 'oops' \[seed 7\]") as caught:
        _demo_check(broken, seed=7)
    assert caught.value._render_traceback_() == [f"HiddenCheckFailed: {caught.value}"]
    assert caught.value.__suppress_context__, "the check's own frames must not be chained into the report"


def test_seed_comes_from_environment(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SEED", "42")
    with pytest.raises(HiddenCheckFailed, match=r"\[seed 42\]"):
        _demo_check(lambda v: -1)
    monkeypatch.setenv("AUTOGRADER_SEED", "forty-two")
    with pytest.raises(ValueError, match="AUTOGRADER_SEED must be an integer"):
        _demo_check(lambda v: v)


def test_expect_equal_does_not_accept_bool_for_int_or_wrong_tensors():
    with pytest.raises(AssertionError):
        expect_equal(True, 1, "bool for int")
    with pytest.raises(AssertionError):
        expect_equal(torch.zeros(2), torch.zeros(3), "shape")
    with pytest.raises(AssertionError):
        expect_equal([1, 2], (1, 2, 3), "length")
    expect_equal([1, 2], (1, 2), "list for tuple is fine")


def test_gpu_rule_on_cpu(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("AUTOGRADER_ALLOW_CPU")
    with pytest.raises(NeedsGPU, match="^Not run: this check needs a GPU") as caught:
        _gpu.gpu_device("pinned copies")
    assert caught.value.what == "pinned copies" and "--" not in str(caught.value)  # no grader flag
    monkeypatch.setenv("AUTOGRADER_ALLOW_CPU", "0")
    with pytest.raises(NeedsGPU):
        _gpu.gpu_device("pinned copies")
    monkeypatch.setenv("AUTOGRADER_ALLOW_CPU", "1")
    assert _gpu.gpu_device("pinned copies") == torch.device("cpu")
    assert capsys.readouterr().out == "GPU check ran on CPU (AUTOGRADER_ALLOW_CPU=1): pinned copies\n"


def test_gpu_rule_prefers_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("AUTOGRADER_ALLOW_CPU")
    assert _gpu.gpu_device("anything") == torch.device("cuda")


def test_needs_gpu_passes_through_hidden_check(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("AUTOGRADER_ALLOW_CPU")

    @hidden_check("gpu demo")
    def check(fn, *, rng):
        fn(_gpu.gpu_device("gpu demo"))

    with pytest.raises(NeedsGPU) as caught:
        check(lambda device: None, seed=1)
    assert caught.value._render_traceback_()[0].startswith("NeedsGPU: Not run: this check needs a GPU")


def test_feedback_scrub_removes_quoted_hidden_lines():
    source = "assert f(1) == 2\n### BEGIN HIDDEN TESTS\nfrom autograder.hidden import x as _hidden\n" \
             "_hidden.check_f(f)\n### END HIDDEN TESTS"
    frame = ("\x1b[36mCell In[3], line 1\x1b[39m\n\x1b[32m----> \x1b[39m\x1b[32m1\x1b[39m assert f(1) == 2\n"
             "\x1b[32m      2\x1b[39m \x1b[38;5;66;03m### BEGIN HIDDEN TESTS\x1b[39;00m\n"
             "\x1b[32m      3\x1b[39m \x1b[38;5;28;01mfrom\x1b[39;00m autograder.hidden \x1b[38;5;28;01mimport\x1b[39;00m x "
             "\x1b[38;5;28;01mas\x1b[39;00m _hidden\n")
    cleaned = scrub_traceback(["AssertionError   Traceback", frame], hidden_lines(source))
    assert "assert f(1) == 2" in cleaned[1]
    assert "HIDDEN" not in cleaned[1] and "autograder" not in cleaned[1]
    assert cleaned[0] == "AssertionError   Traceback"


# --- 01_strides: the reference agrees with torch on arbitrary layouts (hypothesis) -----------------

@st.composite
def layouts(draw):
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=4)))
    stride = tuple(draw(st.lists(st.integers(0, 12), min_size=len(shape), max_size=len(shape))))
    return shape, stride, draw(st.integers(0, 5))


@pytest.fixture(scope="module")
def strides_ref():
    return samples.solution_namespace("01_strides", course_root=ROOT)


@settings(max_examples=150, deadline=None)
@given(layout=layouts())
def test_strides_reference_matches_torch(strides_ref, layout):
    shape, stride, offset = layout
    size = offset + 1 + sum((n - 1) * s for n, s in zip(shape, stride, strict=True) if n > 0)
    storage = torch.arange(float(size))
    view = storage.as_strided(shape, stride, offset)
    assert strides_ref["contiguous_strides"](shape) == torch.empty(shape).stride()
    assert strides_ref["is_contiguous"](shape, stride) == torch.empty_strided(shape, stride).is_contiguous()
    assert torch.equal(strides_ref["gather_view"](storage, shape, stride, offset), view)
    if view.numel():
        index = tuple(n - 1 for n in shape)
        assert strides_ref["flat_index"](index, stride, offset) == int(view[index])
    if shape:
        t = view.transpose(0, -1)
        assert strides_ref["transpose_metadata"](shape, stride, 0, -1) == (tuple(t.shape), t.stride())
        if shape[-1]:
            s = view.select(-1, -1)
            assert strides_ref["select_metadata"](shape, stride, offset, -1, -1) == \
                (tuple(s.shape), s.stride(), s.storage_offset())


# --- 03_flops: the reference agrees with FlopCounterMode on any chain (hypothesis) -----------------

@pytest.fixture(scope="module")
def flops_ref():
    return samples.solution_namespace("03_flops", course_root=ROOT)


@settings(max_examples=60, deadline=None)
@given(batch=st.integers(1, 10**7), dims=st.lists(st.integers(1, 10**7), min_size=1, max_size=5),
       input_requires_grad=st.booleans())
def test_flops_reference_matches_flop_counter(flops_ref, batch, dims, input_requires_grad):
    from autograder.hidden.flops import counted_chain_flops

    if len(dims) == 1:
        assert flops_ref["forward_flops"](batch, dims) == 0
        return
    forward, backward = counted_chain_flops(batch, dims, input_requires_grad=input_requires_grad)
    assert flops_ref["forward_flops"](batch, dims) == forward
    assert flops_ref["backward_flops"](batch, dims, input_requires_grad) == backward
    assert flops_ref["matmul_flops"](batch, dims[0], dims[1]) == counted_chain_flops(batch, dims[:2])[0]


# --- 02_einops: merge_heads inverts split_heads (hypothesis) -----------------------------------------

@pytest.fixture(scope="module")
def einops_ref():
    return samples.solution_namespace("02_einops", course_root=ROOT)


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 3), seq=st.integers(1, 5), heads=st.integers(1, 4), d_head=st.integers(1, 4))
def test_einops_reference_merge_inverts_split(einops_ref, batch, seq, heads, d_head):
    ref = einops_ref
    x = torch.randn(batch, seq, heads * d_head)
    assert torch.equal(ref["merge_heads"](ref["split_heads"](x, heads)), x)
