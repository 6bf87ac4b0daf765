"""The lecture pages: executed without stray errors, covering every topic of the syllabus, ending well.

Runs after `make site`. The executed notebooks come from the build's jupyter-cache (`_build/.jupyter_cache`),
matched to the current page source the way myst-nb matches them, so a page edited since the last build fails
with "rebuild the site". (Not from `_build/jupyter_execute/*.ipynb`: myst-nb 1.4 writes those without outputs
when a page comes from the cache.) Set BOOK_BUILD_DIR to read another build directory.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml
from jupyter_cache import get_cache
from myst_nb.core.read import read_myst_markdown_notebook

ROOT = Path(__file__).resolve().parents[1]
BUILD_DIR = Path(os.environ.get("BOOK_BUILD_DIR", ROOT / "_build"))
CACHE_DIR = BUILD_DIR / ".jupyter_cache"
RAISES_TAG = "raises-exception"


@dataclass(frozen=True)
class Topic:
    """One topic of the syllabus (issue 3): the page that teaches it and what that page must contain."""

    page: str  # path without suffix, as in _toc.yml
    key_terms: tuple[str, ...]  # each must appear in the page source (case-insensitive)
    # the exercise the page must link after its check-yourself questions
    exercise: str | None = None
    # pages that continue the topic (issue 43 cut chapter 11 in three), each with the terms it must contain
    continued: tuple[Topic, ...] = ()


# fmt: off
KEY_TERMS: dict[int, Topic] = {
    0: Topic(
        "chapters/00_napkin_math",
        (
            "70B", "15T", "1024", "H100", "MFU", "AdamW", "80 GB", "master copy", "activations", "6 * n_params",
            "989.4", "whitepaper", "81920 MiB", "GiB", "PaLM", "Llama 3", "weight decay", "torch.autocast",
        ),
        exercise="exercises/03_flops/03_flops",
    ),
    1: Topic(
        "chapters/01_memory_accounting",
        (
            "parameters", "gradients", "optimizer state", "activations", "float32", "float16", "bfloat16",
            "E4M3", "E5M2", "torch.finfo", "448", "57344", "1e-8", "12288", "2.4 GB", "2.25 GiB",
            "2^{-25}", "81920 MiB", "total_memory", "_gpu_record",
        ),
        exercise="exercises/06_mixed_precision/06_mixed_precision",
    ),
    2: Topic(
        "chapters/02_tensors_on_gpu",
        (
            "device", ".to(", "torch.cuda.memory_allocated", "torch.cuda.is_available", "this build ran on CPU",
            "PCIe", "pin_memory", "non_blocking", "torch.cuda.synchronize", "default stream", "torch.cuda.Stream",
            "0-dimensional", "_gpu_record",
        ),
    ),
    3: Topic(
        "chapters/03_storage_and_strides",
        (
            "stride", "storage_offset", "x[0]", "x[:, 1]", ".view(", "transpose", "is_contiguous", ".contiguous()",
            "raises-exception", "RuntimeError", "triu", "rsqrt", "torch.as_strided", "@ weight",
            "correctly rounded", "ulp",
        ),
        exercise="exercises/01_strides/01_strides",
    ),
    4: Topic(
        "chapters/04_einops_jaxtyping",
        (
            "einsum", "...", "reduce", '"sum"', '"mean"', ".mean(", "rearrange", "(heads hidden1)", "jaxtyping",
            "Float[torch.Tensor", "@jaxtyped(typechecker=beartype)",
        ),
        exercise="exercises/02_einops/02_einops",
    ),
    5: Topic(
        "chapters/05_compute_accounting",
        (
            "FLOPs", "FLOP/s", "3.14", "2e25", "A100", "H100", "H200", "B200", "sparsity", "2 * m * n * p",
            "FlopCounterMode", "MFU", "get_device_name", "UnknownAcceleratorError", "8 H100s",
            "989.4", "TF32", "GB200", "flop_registry", "memory-bound", "elementwise", "_gpu_record",
            # issue 19: the roofline against the device table's memory bandwidth
            "roofline", "arithmetic intensity", "ridge point", "memory_bandwidth", "BANDWIDTH_SOURCES",
            "3.35 TB/s", "williams2009roofline", "nvidia2022h100datasheet", "LayerNorm", "softmax",
            # issue 30: the FP8 dense peak
            "fp8_dense", "FP8_SPARSE_DATASHEET", "torch.compile", "TorchInductor",
            # issue 30 (review nits 9, 10): the vector units' ridge; the CPU layer against its FLOP share
            "vector_ridge", "flop_share",
        ),
        exercise="exercises/03_flops/03_flops",
    ),
    6: Topic(
        "chapters/06_gradients_backward_flops",
        (
            "requires_grad", "loss.backward", "0.5 * (pred_y - 5) ** 2", "h1", "h2", "weight gradient",
            "input gradient", "first layer", "FlopCounterMode", "6 * B * params", "parameter sharing", "attention",
            "is_leaf", "retain_grad", "embedding", "heads", "MLP",
        ),
        exercise="exercises/03_flops/03_flops",
    ),
    7: Topic(
        "chapters/07_models_and_randomness",
        (
            "nn.Parameter", "1 / math.sqrt(d_in)", "trunc_normal_", "[-3, 3]", "nn.Module", "nn.ModuleList",
            ".to(device)", "torch.manual_seed", "np.random.seed", "random.seed", "torch.Generator",
            "LeCun", "xavier_normal_",
            # issue 30 (review nit 18): deterministic cuBLAS needs its workspace setting
            "CUBLAS_WORKSPACE_CONFIG",
        ),
    ),
    8: Topic(
        "chapters/08_data_loading",
        (
            "tofile", ".npy", "raises-exception", "np.memmap", "get_batch", "targets", "pin_memory", "non_blocking",
            "tempfile", "per-row loop", "vectorized gather", "np.save", "magic", "uint32", "torch.cuda.Stream",
            "wait_stream", "record_stream", "_gpu_record",
            # issue 19: a DataLoader in front of the side-stream copy; pinning as torch behaves without CUDA
            "DataLoader", "num_workers", "is_pinned()", "no accelerator is found", "RandomSampler",
        ),
        exercise="exercises/05_get_batch/05_get_batch",
    ),
    9: Topic(
        "chapters/09_optimizers_and_training",
        (
            "SGD", "momentum", "AdaGrad", "RMSProp", "Adam", "torch.optim.Optimizer", "torch.optim.Adagrad",
            "eps", "optimizer state", "activations", "gradients", "ax.bar", "6 * B * num_params", "state_dict",
            "load_state_dict", "torch.save", "AdamW", "weight decay", "set_to_none=True", "jumps_above",
            # issue 30: the optimizer step's own traffic; low-precision optimizer state
            "foreach", "fused=True", "TorchDispatchMode", "bfloat16 moments", "8-bit",
            "dettmers2022optimizers", "deepseek2024v3",
        ),
        exercise="exercises/04_adagrad/04_adagrad",
    ),
    10: Topic(
        "chapters/10_mixed_precision",
        (
            "torch.autocast", "GradScaler", "float16", "bfloat16", "master copy", "underflow", "float8_e4m3fn",
            "float8_e5m2", "Transformer Engine", "micikevicius2018mixed", "peng2023fp8lm", "quantiz",
            "this build ran on CPU", "2^{-25}", "saved_tensors_hooks", "TF32", "set_float32_matmul_precision",
            "57344", "_gpu_record",
            # issue 30 (review nit 13): the promote category; the CPU's float32 list beyond the losses
            "promote", "CPU_FLOAT32_EXTRAS", "dettmers2022optimizers",
        ),
        exercise="exercises/06_mixed_precision/06_mixed_precision",
    ),
    11: Topic(
        "chapters/11_transformer_accounting",
        (
            "pre-norm", "tie_embeddings", "12 * d * d + 13 * d", "124_439_808", "1_557_611_200", "meta",
            "FlopCounterMode", "4 * L * seq * d", "saved_tensors_hooks", "untyped_storage", "korthikanti2022reducing",
            "34", "recompute", "AdamW", "torch.autocast", "80 * GiB", "141 * GiB", "81920 MiB", "MFU",
            "radford2019language", "_gpu_record",
            # issue 19: usable capacity and the backward peak; fused attention and MFU conventions
            "total_memory", "79.11", "139.80", "backward_temporaries", "scaled_dot_product_attention",
            "is_causal=True", "log-sum-exp", "chowdhery2022palm", "12\\,L\\,H\\,Q\\,T", "1/\\sqrt{2L}",
            "thamada/nvidia-smi", "unverified",
            # issue 43: the two pages that continue it
            "11b_fitting_a_batch", "11c_time_and_inference",
        ),
        exercise="exercises/03_flops/03_flops",
        continued=(
            Topic(
                "chapters/11b_fitting_a_batch",
                (
                    # issue 19: the peak of a training step, counted live, and chunked cross-entropy
                    "Peak memory of a training step", "TorchDispatchMode", "weakref.finalize", "untyped_storage",
                    "saved_for_backward", "chunked cross-entropy", "torch.utils.checkpoint", "_record_memory_history",
                    "torch.cuda.memory_allocated", "79.11", "_transformer",
                    # issue 30: when the batch does not fit, per-block checkpointing and gradient accumulation
                    "It does not fit", "use_reentrant=False", "context_fn", "set_checkpoint_early_stop", "HFU",
                    "gradient accumulation", "micro-batch", "no_sync", "meta_step",
                    "GPT-2 XL at batch 64 on one H100", "lookup_accelerator",
                    "expandable_segments:True", "memory_reserved", "fragmentation",
                ),
            ),
            Topic(
                "chapters/11c_time_and_inference",
                (
                    "989.4e12", "MFU", "lookup_accelerator", "_transformer",
                    # issue 30: compute-optimal tokens; inference accounting with a real cached decoding step
                    "hoffmann2022chinchilla", "CHINCHILLA_TABLE_3", "KV cache", "prefill", "decode_step",
                    # issue 43: GQA, decode overhead, GPU-hours and money
                    "enable_gqa=True", "TorchDispatchMode", "CUDAGraph", "PRICE_PER_GPU_HOUR",
                ),
                exercise="exercises/03_flops/03_flops",
            ),
        ),
    ),
    # issue 19: more than one GPU, measured on a real gloo process group
    12: Topic(
        "chapters/12_more_than_one_gpu",
        (
            "DistributedDataParallel", "ZeRO-1", "ZeRO-2", "ZeRO-3", "FSDP", "fully_shard", "gloo",
            "register_comm_hook", "ZeroRedundancyOptimizer", "ring all-reduce", "2 * (n - 1) / n",
            "reduce-scatter", "all-gather", "NVLink", "InfiniBand", "rajbhandari2020zero", "_distributed",
            # issue 30: DDP's buckets, the α–β model, the chunk rule
            "gradient_as_bucket_view", "α–β model", "tree", "math.ceil(rows / n)", "558 ms",
            # issue 30: communication measured by collective, the batch that hides it, tensor and pipeline parallelism
            "CollectiveLog", "TorchDispatchMode", "reshard_after_forward", "MixedPrecisionPolicy", "critical batch",
            "bf16_compress_hook", "parallelize_module", "ColwiseParallel", "RowwiseParallel", "shoeybi2019megatron",
            "bubble", "GPipe", "1F1B", "micro-batches", "isend", "dubey2024llama3", "Three axes at once",
        ),
        exercise="exercises/03_flops/03_flops",
    ),
}
# fmt: on


# --------------------------------------------------------------------------------------------------------------
# Helpers: pure functions over notebooks, unit-tested below so the checks are known to be able to fail.


def lecture_pages() -> list[str]:
    """Page paths (no suffix) of the Lecture part of _toc.yml, in order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    for part in toc.get("parts", []):
        if part.get("caption") == "Lecture":
            return [entry["file"] for entry in part["chapters"]]
    raise AssertionError("_toc.yml has no part with caption 'Lecture'")


def toc_files() -> set[str]:
    """Every file listed anywhere in _toc.yml."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return {entry["file"] for part in toc.get("parts", []) for entry in part["chapters"]}


def error_problems(nb: nbformat.NotebookNode, label: str) -> list[str]:
    """Problems with error outputs: an untagged cell that raised, or a raises-exception cell that did not."""
    problems = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        raised = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        tagged = RAISES_TAG in cell.get("metadata", {}).get("tags", [])
        first_line = cell.source.strip().splitlines()[0] if cell.source.strip() else "<empty>"
        if raised and not tagged:
            problems.append(
                f"{label}, cell {index} ({first_line!r}) raised {raised[0].get('ename')}: "
                f"{raised[0].get('evalue', '')[:200]} but is not tagged {RAISES_TAG}"
            )
        if tagged and not raised:
            problems.append(
                f"{label}, cell {index} ({first_line!r}) is tagged {RAISES_TAG} but did not raise"
            )
    return problems


def unexecuted_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of non-empty code cells that carry no execution count (the page was not really executed)."""
    return [
        i
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "code" and cell.source.strip() and cell.get("execution_count") is None
    ]


def ending_problems(nb: nbformat.NotebookNode, label: str, exercise: str | None) -> list[str]:
    """Problems with how a page ends: a last section 'Check yourself' with questions, then the exercise link."""
    headings = [
        (i, line)
        for i, cell in enumerate(nb.cells)
        if cell.cell_type == "markdown"
        for line in cell.source.splitlines()
        if re.match(r"^##\s", line)
    ]
    if not headings or not re.match(r"^##\s+check yourself\s*$", headings[-1][1], re.IGNORECASE):
        last = headings[-1][1] if headings else "<no ## heading>"
        return [f"{label}: the last section must be '## Check yourself', found {last!r}"]
    start = headings[-1][0]
    tail = "\n".join(cell.source for cell in nb.cells[start:] if cell.cell_type == "markdown")
    problems = []
    questions = re.findall(r"^\d+\.\s", tail.split("```")[0], re.MULTILINE)
    if len(questions) < 2:
        problems.append(
            f"{label}: 'Check yourself' has {len(questions)} numbered questions, expected at least 2"
        )
    if exercise is not None:
        link = f"{{doc}}`../{exercise.removeprefix('chapters/').removeprefix('../')}`"
        if link not in tail:
            problems.append(f"{label}: expected the exercise link {link} after 'Check yourself'")
    return problems


def assert_count(nb: nbformat.NotebookNode) -> int:
    """Number of assert statements in the page's code cells."""
    return sum(
        len(re.findall(r"^\s*assert\b", c.source, re.MULTILINE))
        for c in nb.cells
        if c.cell_type == "code"
    )


def read_source(page: str) -> nbformat.NotebookNode:
    """The page's MyST source as a notebook (via jupytext)."""
    path = ROOT / f"{page}.md"
    assert path.is_file(), f"{page}: listed in _toc.yml but {path} does not exist"
    return jupytext.read(path)


def read_executed(page: str) -> nbformat.NotebookNode:
    """The page as Jupyter Book executed it: the current source with the outputs cached for exactly that source."""
    if not CACHE_DIR.is_dir():
        pytest.fail(f"no jupyter-cache at {CACHE_DIR}. Build the site first (`make site`).")
    source = read_myst_markdown_notebook((ROOT / f"{page}.md").read_text(encoding="utf-8"))
    try:
        _, executed = get_cache(CACHE_DIR).merge_match_into_notebook(source)
    except KeyError:
        pytest.fail(
            f"{page}: no executed notebook in {CACHE_DIR} matches the current source. Rebuild (`make site`)."
        )
    return executed


# --------------------------------------------------------------------------------------------------------------
# The checks can fail: each helper on a small notebook that violates it.


def _notebook(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    return nb


def _code(source: str, *, error: bool = False, tags: tuple[str, ...] = (), count: int | None = 1):
    cell = nbformat.v4.new_code_cell(source, execution_count=count)
    cell.metadata["tags"] = list(tags)
    if error:
        cell.outputs = [
            nbformat.v4.new_output("error", ename="ValueError", evalue="boom", traceback=[])
        ]
    return cell


def test_error_check_flags_untagged_error_and_tagged_cell_that_did_not_raise():
    nb = _notebook(_code("1/0", error=True), _code("x = 1", tags=(RAISES_TAG,)), _code("ok = 1"))
    problems = error_problems(nb, "demo")
    assert len(problems) == 2
    assert "cell 0" in problems[0] and "not tagged" in problems[0]
    assert "cell 1" in problems[1] and "did not raise" in problems[1]
    assert error_problems(_notebook(_code("1/0", error=True, tags=(RAISES_TAG,))), "demo") == []


def test_unexecuted_cells_are_found():
    assert unexecuted_cells(_notebook(_code("a = 1", count=None), _code("b = 2"))) == [0]


def test_ending_check_flags_missing_section_questions_and_link():
    md = nbformat.v4.new_markdown_cell
    good = _notebook(
        md("## Topic\ntext"), md("## Check yourself\n\n1. a?\n2. b?\n\n{doc}`../exercises/x/x`")
    )
    assert ending_problems(good, "demo", "exercises/x/x") == []
    no_section = _notebook(md("## Topic\n\n1. a?\n2. b?"))
    assert "last section" in ending_problems(no_section, "demo", None)[0]
    later_section = _notebook(md("## Check yourself\n\n1. a?\n2. b?"), md("## Appendix"))
    assert "'## Appendix'" in ending_problems(later_section, "demo", None)[0]
    one_question = _notebook(md("## Check yourself\n\n1. a?\n\n{doc}`../exercises/x/x`"))
    assert "1 numbered questions" in ending_problems(one_question, "demo", "exercises/x/x")[0]
    no_link = _notebook(md("## Check yourself\n\n1. a?\n2. b?"))
    assert "exercise link" in ending_problems(no_link, "demo", "exercises/x/x")[0]


def test_assert_count_counts_statements_not_words():
    nb = _notebook(
        _code("assert x == 1\n# the word assert in a comment\ny = 'assert'\n    assert y")
    )
    assert assert_count(nb) == 2


# --------------------------------------------------------------------------------------------------------------
# The real pages.


def test_every_topic_has_a_page_in_the_lecture_part():
    pages = lecture_pages()
    assert sorted(KEY_TERMS) == list(range(13)), (
        f"KEY_TERMS must list topics 0-12 of the chapters issues; it has {sorted(KEY_TERMS)}"
    )
    for number, topic in KEY_TERMS.items():
        for part in (topic, *topic.continued):
            assert part.page in pages, (
                f"topic {number}: page {part.page} is not in the Lecture part of _toc.yml"
            )
            if part.exercise is not None:
                assert part.exercise in toc_files(), (
                    f"topic {number}: exercise {part.exercise} is not in _toc.yml"
                )


@pytest.mark.parametrize("number", sorted(KEY_TERMS))
def test_topic_page_contains_its_key_terms(number):
    for topic in (KEY_TERMS[number], *KEY_TERMS[number].continued):
        text = (ROOT / f"{topic.page}.md").read_text(encoding="utf-8").lower()
        missing = [term for term in topic.key_terms if term.lower() not in text]
        assert not missing, f"topic {number} ({topic.page}.md) lacks key terms: {missing}"


@pytest.mark.parametrize("page", lecture_pages())
def test_page_source_checks_its_numbers_and_ends_with_questions(page):
    nb = read_source(page)
    assert assert_count(nb) >= 1, (
        f"{page}.md has no assert: every number it states must be checked in a cell"
    )
    exercises = {t.exercise for topic in KEY_TERMS.values() for t in (topic, *topic.continued)
                 if t.page == page} - {None}
    assert len(exercises) <= 1, (
        f"{page}: KEY_TERMS names several exercises for one page: {exercises}"
    )
    problems = ending_problems(nb, f"{page}.md", next(iter(exercises), None))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", lecture_pages())
def test_page_starts_by_showing_where_it_ran(page):
    nb = read_executed(page)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert "describe_runtime()" in first.source, (
        f"{page}: the first code cell must print _runtime.describe_runtime()"
    )
    text = "".join(
        o.get("text", "") for o in first.get("outputs", []) if o.get("output_type") == "stream"
    )
    assert re.search(r"Executed on .+ · torch \d", text), f"{page}: first cell printed {text!r}"


@pytest.mark.parametrize("page", lecture_pages())
def test_executed_page_has_errors_only_where_tagged(page):
    nb = read_executed(page)
    assert not unexecuted_cells(nb), f"{page}: code cells {unexecuted_cells(nb)} were not executed"
    problems = error_problems(nb, page)
    assert not problems, "\n".join(problems)


# Issue 19's additions compare a measurement with a formula: each of these must be part of an assert statement
# on its page (not only mentioned in the prose), so that deleting or weakening the check fails here.
REQUIRED_ASSERTS: dict[str, tuple[str, ...]] = {
    "chapters/05_compute_accounting": (
        "round(h100.ridge_point) == 295", "matmul_intensity(m, n, p)", 'intensity["add"] == 1 / 6',
        "achieved[name] < 1.05 * roof",
        # issue 30: one row per A100 variant; the 40 GB rows against a deviceQuery reading
        "[153, 161, 201, 201]", "device_query_40gb",
        # issue 30: the FP8 dense column against the datasheets' sparse figures and twice bf16
        "fp8_rows[gpu].fp8_dense / 1e12 - sparse / 2", "entry.fp8_dense / entry.bf16_dense - 2",
        # issue 30: the eager elementwise chain counted kernel by kernel (torch.compile timed on a GPU build)
        "eager_count.kernels == 9", "eager_count.bytes == 80 * values + bias_chain.nbytes",
    ),
    "chapters/08_data_loading": ("all(pinned)", "not any(pinned)", "no accelerator is found"),
    # issue 30: AdamW's step counted kernel by kernel; optimizer state in fewer bytes, read from real tensors
    "chapters/09_optimizers_and_training": (
        "fused.read == 16 * mlp_params", "loop.kernels == mlp_tensors * foreach.kernels",
        "(loop.read, loop.written) == (foreach.read, foreach.written)", "xl_params == 1_557_611_200",
        'layouts["8-bit moments"] == 2 * n + 4 * blocks_per_moment', "worst <= 0.5 / 127",
    ),
    # issue 30: chapter 12's communication, counted from what each collective is given and from the run's schedule
    "chapters/12_more_than_one_gpu": (
        'own == result["zero1"]["state_bytes"] // 2', "abs(found[p][k] - b) <= 0.01 * b",
        "0 <= gap <= 2 * bucket_s", 'tp["output_close"]', 'reduces == {"forward": [4 * b * s * d]',
        "found == bubble(p, m)", 'all(stage["grads_close"]', "sum(stage_params) * tp_size",
    ),
    "chapters/11_transformer_accounting": ("peak_bytes(xl, b, *flags) <= capacity",),
    "chapters/11b_fitting_a_batch": (
        "full.start == predicted_start", 'full_saved["activations"]', "backward_temporaries(PEAK_CFG, b, s)",
        "peak_bytes(PEAK_CFG, b, False, False)", "chunked_saving(c)", "2 * b * s * V * d",
        "(mem.peak() - mem.start)",
        # issue 30: checkpointing and accumulation, each against the shapes or another measurement
        'ckpt_saved == block_inputs + terms["head"]', 'terms["tied head gradient"] + 8',
        "checkpointed_peak_bytes(xl, b) + xl_extra", "h100_usable < xl_measured[ckpt_largest + 1]",
        "blocks_forward_flops(CKPT_CFG", "recomputed_flops(CKPT_CFG", "recomputed_flops(xl, xl.context)",
        "atol=4 * R", "acc_peaks[ACC_BATCH, ACC_STEPS] == acc_peaks[micro, 1]", "peak_bytes(CKPT_CFG, micro",
        # issue 43: the largest batches of chapter 11's table, recomputed from its functions on this page
        '[row["H100 (80 GiB)"] for row in largest.values()] == [5, 10, 5, 16]',
    ),
    "chapters/11c_time_and_inference": (
        # issue 30: Chinchilla against the paper's table; prefill and decode against a real cache and FlopCounterMode
        "abs(chinchilla_tokens / table_tokens - 1) < 0.02", "6 * n * tokens / flops",
        "decode_counter.get_total_flops() == 2 * forward_flops_per_token(TINY, 17)",
        "sum(k.nbytes + v.nbytes for k, v in cache) == kv_cache_bytes(TINY, 17",
        "prefill_intensity > max(", "i < ACCELERATORS[\"H200 SXM\"].ridge_point",
        # issue 43: the KV cache of the check-yourself answer, with grouped key/value heads
        "kv_cache_bytes(xl, xl.context, kv_heads=5)",
    ),
}


def assert_statements(nb: nbformat.NotebookNode) -> list[str]:
    """Every assert statement of the page's code cells, with its continuation lines joined."""
    statements = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines = cell.source.splitlines()
        for i, line in enumerate(lines):
            if re.match(r"^\s*assert\b", line):
                statement = line
                indent = len(line) - len(line.lstrip())
                for nxt in lines[i + 1 :]:   # a statement continued on deeper-indented lines
                    if nxt.strip() and len(nxt) - len(nxt.lstrip()) > indent and not nxt.lstrip().startswith("assert"):
                        statement += " " + nxt.strip()
                    else:
                        break
                statements.append(statement)
    return statements


def missing_asserts(nb: nbformat.NotebookNode, required: tuple[str, ...]) -> list[str]:
    statements = assert_statements(nb)
    return [needle for needle in required if not any(needle in statement for statement in statements)]


def test_missing_asserts_can_fail():
    nb = _notebook(_code("x = f(1)  # f(1) is mentioned, not asserted\nassert y == 2\n"))
    assert missing_asserts(nb, ("f(1)", "y == 2")) == ["f(1)"]


@pytest.mark.parametrize("page", sorted(REQUIRED_ASSERTS))
def test_issue19_additions_assert_measurement_against_formula(page):
    assert page in lecture_pages()
    missing = missing_asserts(read_source(page), REQUIRED_ASSERTS[page])
    assert not missing, f"{page}.md: these checks are no longer asserted: {missing}"


# --------------------------------------------------------------------------------------------------------------
# Recorded GPU measurements: data/gpu/, the loader the pages use, the recording script, and what pages print.

GPU_RECORD_DIR = ROOT / "data" / "gpu"
# Pages that need a GPU for some of the lecture's numbers (issue 12): achieved matmul FLOP/s and MFU (05),
# bf16 vs float32 speed (10), pinned vs pageable bandwidth and copy/compute overlap (02, 08), memory size (01).
GPU_FIGURE_PAGES = (
    "chapters/01_memory_accounting", "chapters/02_tensors_on_gpu", "chapters/05_compute_accounting",
    "chapters/08_data_loading", "chapters/10_mixed_precision", "chapters/11_transformer_accounting",
)


def gpu_record_module():
    """chapters/_gpu_record.py, imported by path (chapters/ is not a package)."""
    if "_gpu_record" in sys.modules:
        return sys.modules["_gpu_record"]
    spec = importlib.util.spec_from_file_location("_gpu_record", ROOT / "chapters" / "_gpu_record.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["_gpu_record"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def stream_text(nb: nbformat.NotebookNode) -> str:
    """Everything the page's code cells printed."""
    return "".join(
        o.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream"
    )


def _recording(**figure_overrides) -> dict:
    figure = {"label": "bf16 matmul (8192 x 8192)", "value": 7.1e14, "unit": "FLOP/s",
              "method": "torch.mm, fastest block of blocked_autorange"}
    figure.update(figure_overrides)
    return {
        "schema": 1,
        "device": {"name": "NVIDIA H100 80GB HBM3", "slug": "nvidia-h100-80gb-hbm3", "driver": "550.54.15",
                   "cuda": "12.4", "torch": "2.11.0"},
        "date": "2026-01-01T00:00:00Z",
        "figures": {"matmul_bf16_flop_per_s": figure},
    }


def test_gpu_record_loader_reads_a_recording_with_its_provenance(tmp_path):
    gr = gpu_record_module()
    assert gr.recorded_figures(["matmul_bf16_flop_per_s"], tmp_path) == gr.NO_RECORDING
    (tmp_path / "nvidia-h100-80gb-hbm3.json").write_text(json.dumps(_recording()), encoding="utf-8")
    [recording] = gr.load_recordings(tmp_path)
    assert recording.value("matmul_bf16_flop_per_s") == 7.1e14
    text = gr.recorded_figures(["matmul_bf16_flop_per_s", "absent"], tmp_path)
    for part in ("NVIDIA H100 80GB HBM3", "driver 550.54.15", "CUDA 12.4", "torch 2.11.0", "2026-01-01",
                 "nvidia-h100-80gb-hbm3.json", "710.0 TFLOP/s", "method: torch.mm"):
        assert part in text, f"{part!r} missing from {text!r}"
    assert gr.not_on_this_build("x").startswith(gr.NOT_ON_THIS_BUILD)


@pytest.mark.parametrize("change, message", [
    ({"method": " "}, "does not say how it was measured"),
    ({"unit": "furlongs"}, "unit"),
    ({"value": "fast"}, "non-numeric"),
])
def test_gpu_record_loader_rejects_a_bad_figure_naming_the_file(tmp_path, change, message):
    gr = gpu_record_module()
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_recording(**change)), encoding="utf-8")
    with pytest.raises(gr.RecordingError) as caught:
        gr.load_recordings(tmp_path)
    assert message in str(caught.value) and "bad.json" in str(caught.value)


def test_data_gpu_holds_only_recordings_the_loader_accepts():
    gr = gpu_record_module()
    stray = [p.name for p in GPU_RECORD_DIR.iterdir() if p.suffix != ".json" and p.name != "README.md"]
    assert not stray, f"data/gpu/ holds files that are not recordings: {stray}"
    for recording in gr.load_recordings(GPU_RECORD_DIR):  # raises RecordingError on a malformed file
        data = json.loads(recording.path.read_text(encoding="utf-8"))
        assert recording.path.stem == data["device"]["slug"], f"{recording.path.name}: name is not the slug"
        assert data.get("quick") is False, f"{recording.path.name}: a --quick smoke test is not a recording"


@pytest.mark.parametrize("page", GPU_FIGURE_PAGES)
def test_page_says_where_gpu_figures_come_from(page):
    """Built on CPU: "not on this build" and the recordings (or the notice that none exists). On a GPU: live."""
    gr = gpu_record_module()
    assert page in lecture_pages()
    nb = read_executed(page)
    text = stream_text(nb)
    recordings = gr.load_recordings(GPU_RECORD_DIR)
    if "no CUDA (CPU build)" in text:
        assert gr.NOT_ON_THIS_BUILD in text, f"{page}: built on CPU but never says '{gr.NOT_ON_THIS_BUILD}'"
    else:
        assert gr.NOT_ON_THIS_BUILD not in text, f"{page}: built on a GPU but says '{gr.NOT_ON_THIS_BUILD}'"
    if recordings:
        for recording in recordings:
            assert f"Recorded on {recording.device}" in text, f"{page}: recording {recording.path.name} not shown"
    else:
        assert gr.NO_RECORDING in text, f"{page}: does not say that no GPU recording exists yet"


def test_gpu_measure_refuses_a_quick_run_into_data_gpu():
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_measure.py"), "--quick"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 2 and "--quick is a smoke test" in result.stderr


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="the rule for machines without CUDA")
def test_gpu_measure_without_cuda_writes_nothing(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu_measure.py"), "--output-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert "needs a CUDA GPU" in result.stderr and "Nothing was written" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
def test_gpu_measure_quick_run_writes_a_recording_the_pages_can_read(tmp_path):
    spec = importlib.util.spec_from_file_location("gpu_measure", ROOT / "benchmarks" / "gpu_measure.py")
    gpu_measure = importlib.util.module_from_spec(spec)
    sys.modules["gpu_measure"] = gpu_measure
    spec.loader.exec_module(gpu_measure)
    path = gpu_measure.record(output_dir=tmp_path, quick=True)
    [recording] = gpu_record_module().load_recordings(tmp_path)
    assert recording.path == path
    assert recording.value("matmul_bf16_flop_per_s") > recording.value("matmul_fp32_flop_per_s") > 0
    assert recording.value("h2d_pinned_bytes_per_s") > 0


# --------------------------------------------------------------------------------------------------------------
# Issue 19: statements an expert found wrong or misleading. Each is fixed by a cell that would fail on it, and
# none may come back on any page or exercise source (several were fixed on one page but stayed on another).

RETIRED_STATEMENTS = {
    "below $2^{-24}$ loses precision": "float16 loses precision below 2^-14 (finfo.tiny), not 2^-24",
    "the $s^2$ term is the larger one: $a \\cdot s": "in float32 the s² and h terms of GPT-2 XL are equal",
    "calls a well-tuned run": "50% MFU is the napkin's round figure; well-tuned runs report 38-46%",
    "runs asynchronously\n# while the GPU keeps working": "a non_blocking copy is asynchronous to the host only",
    "to half their bytes; {doc}": "autocast does not halve a Transformer's activations",
    "saves close to half of the activation memory": "autocast can raise a Transformer's activations",
    "Autocast saves activation memory instead.": "autocast also keeps 2-byte bf16 weight copies",
    "(softmax, losses) in float32": "that is CUDA autocast's list; on the CPU softmax stays bf16",
    "(losses, reductions) are kept in": "that is CUDA autocast's list; on the CPU sum stays bf16",
    "but only if the copy\n   overlaps with compute": "0.27 ms is negligible even serialized",
    "$24.05 \\cdot 50 / 40": "24.036 days, asserted as 24.0",
    "not with the number of parameters, and": "activations grow with L·h and L·a·s, just not in proportion to N",
    "# what nvidia-smi reports for an": "81920 MiB == 80 GiB is arithmetic, not a reading",
    # issue 30: a fresh expert audit's errata
    "`torch.chunk`: the first ranks get": "torch.chunk gives ceil(rows/n) per rank; the last get the rest or nothing",
    "most of those are the attention probabilities": "in float32 they are 49% of the activations (71% under autocast)",
    "almost always a **ring all-reduce**": "NCCL picks ring, tree or NVLS per message size and scale",
    "independent of $n$: adding GPUs": "only the bandwidth term is; the ring's 2(n-1) latency steps grow with n",
    "ZeRO-1 and ZeRO-2 move the same bytes": "ZeroRedundancyOptimizer over DDP all-reduces and broadcasts, ~1.5x DDP",
    "### Measured on a real process group": "the ring's bytes are the page's own count, only the sum is gloo's",
    "it fails for eight GPUs spread over servers": "the IB all-reduce (218 ms) can hide behind a 227 ms backward",
    "DDP saves nothing: 24.9 GB on each of the eight GPUs, as on one. ZeRO": "DDP's default buckets add 4N (31.2 GB)",
    "which leaves the rest of an 80 GB card to activations": "FSDP also holds the gathered unit's parameters",
    "at the same MFU it trains in the same time": "43% more bandwidth lifts the MFU of memory-bound work",
    "For comparison, a copy of 64 MiB into newly allocated": "that measured page faults, not host memory bandwidth",
    "bf16 matmuls run at the tensor-core rate": "TF32 runs on the tensor cores too, at half the bf16 rate",
    "than without ({doc}`10_mixed_precision` explains why)": "chapter 11 computes the XL figure, it measures a tiny model",
    "The CPU's holds mainly the losses": "the CPU float32 list also has pooling, padding, linear algebra, FFT",
    "At a realistic size the parameters and their companions dominate": "true for this model, not for a Transformer",
    "between a loader that keeps up with the GPU and one that does not": "both keep up with a 200 ms GPT-2 small step",
    "Each number the prose states is computed": "datasheet and citation figures are cited, not computed",
    "so $6N + 6Lsd$ for training, the causal half": "the causal reading is ours, not the scaling-laws paper's",
    "On the CPU there is no allocator to ask": "profile_memory=True records CPU allocations",
    "1024 sequences of 2048 int64 token ids": "GPT-2 small's context is 1024",
    "≈ 63 GB/s in each direction;": "63 GB/s is PCIe 5.0's line rate, an upper bound (50-55 achieved)",
    "- **Stays float32**:": "8-bit and bf16 optimizer moments exist",
    "The table has one A100 row": "one row per A100 variant: 1.555 TB/s (40GB), 1.935 (80GB PCIe), 2.039 (80GB SXM)",
    'GPU_MEMORY["H100 (80 GiB)"] == 81920 * 2**20': "80 GiB == 81920 MiB is arithmetic, not a reading",
    "because the driver first stages it through a pinned buffer and the host waits for that":
        "a pageable cudaMemcpyAsync first synchronizes the stream",
    "chapter 10 prints both lists": "chapter 10 probes six ops on this build's backends, no lists",
    "activations (one `batch × d` output saved per layer).":
        "chapter 9 also counts the head's batch outputs: say why the exercise leaves them out",
    "# mainly the losses (there a softmax": "exercise 06 too: the CPU float32 list has pooling, padding, linalg, FFT",
    "the elementwise part a handful, yet it takes longer:": "on a CPU (d = 16) it is 32 FLOPs against 10",
    "a large share of the time, a quarter or more:": "a quarter is its share of the FLOPs at d = 16; compare with that",
    "As in GPT-2,\nweights start": "GPT-2's released code used 0.01 for wpe; 1/sqrt(2L) is the paper's (and nanoGPT's)",
    # issue 43: the errata of the turn-5 audit
    "The cheapest plan that fits is autocast with the attention scores recomputed":
        "autocast alone fits at 4 x 16 with no extra FLOPs; recomputation costs 3.1%",
    "clear it\nby 4%, the thin margin found above.": "only with gradient_as_bucket_view=True; default buckets: 14 fit",
    "whether training tolerates that is a question":
        "a linear absmax code zeroes small second moments; 8-bit Adam needs a non-linear code",
    "### Fragmentation: memory the allocator holds but cannot use":
        "wholly free segments are released before an OOM; fragmentation is free space beside live blocks",
    "del blocks                                    # 800 MiB freed":
        "freeing whole segments shows cached memory, not fragmentation",
    "the bandwidth ratio, since nothing else limits": "a batch-1 decode of GPT-2 XL is launch-bound in eager PyTorch",
    "so it runs at the compute peak, which\nthe two GPUs share":
        "right of the ridge the peak is a bound; the H200 speeds up the memory-bound parts",
    "Host DRAM copy of 64 MiB, one thread": "copy_ ran on torch's default thread count",
    "1. Only the matmul input.": "Adam's moments can be bfloat16 (ch09, DeepSeek-V3)",
    "8-way tensor parallelism spends": "GPT-2 XL's 25 heads do not divide by 8",
    "Each of these all-reduces sits on the critical path: the next layer needs the summed output, so nothing":
        "Megatron-LM and async TP overlap part of these all-reduces",
    "pays its latency only $\\log_2 n$ times": "the tree's latency term is 2 log2(n) alpha",
    "AdamW's step allocates a\nfew temporaries of its own": "foreach AdamW (the CUDA default) allocates 4N bytes",
    "each of their eight lines reads what the\nprevious one wrote": "about 80 B of traffic; lerp_ reads m and g",
    "What a program can allocate is what CUDA reports": "the CUDA context comes out of total_memory",
    "lets a program allocate about 79.1 GiB": "79.1 GiB is the total CUDA reports; the context takes a part",
    "== 307 == round(2 * 48 * 1600 * 2 / 1e3)": "the formula re-typed is no check",
    "== round(bandwidth_gain, 2) == 1.43": "the same bytes over two bandwidths: the ratio by construction",
    "2 * t_star[link, \"DDP, bfloat16 gradients\"]": "bf16 bytes typed by hand: the halving cannot fail",
    "assert rows[0][4] == 2 / 3": "follows algebraically from the count asserted above it",
}


def retired_statement_hits(texts: dict[str, str]) -> list[str]:
    """'file: statement (why)' for each retired statement found in the given texts."""
    return [
        f"{name}: {old!r} ({why})"
        for name, text in texts.items()
        for old, why in RETIRED_STATEMENTS.items()
        if old in text
    ]


def test_retired_statement_check_can_fail():
    assert retired_statement_hits({"x.md": "and a well-tuned run"}) == []
    [hit] = retired_statement_hits({"x.md": "which chapter 5 calls a well-tuned run."})
    assert hit.startswith("x.md: 'calls a well-tuned run'")


def test_no_page_or_exercise_repeats_a_retired_statement():
    paths = [*(ROOT / "chapters").glob("*.md"), ROOT / "intro.md", *(ROOT / "solutions").glob("*/*.py")]
    texts = {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in paths}
    hits = retired_statement_hits(texts)
    assert not hits, "retired statements (issues 19, 30) are back:\n" + "\n".join(hits)


# --------------------------------------------------------------------------------------------------------------
# Issue 30: every paper a page cites is an entry of references.bib, cited with the {cite} role, so that it is
# listed (with its authors, title, year and venue or address) on the references page and links back to the page.

CITE_ROLE = re.compile(r"\{cite(?::[a-z]+)?\}`([^`]+)`")
INLINE_PAPER_LINK = re.compile(
    r"\]\(https?://(?:www\.)?(?:arxiv\.org|doi\.org|openreview\.net|proceedings\.|papers\.nips\.cc|aclanthology)"
)


def cited_keys(text: str) -> set[str]:
    return {key.strip() for keys in CITE_ROLE.findall(text) for key in keys.split(",")}


def inline_paper_links(texts: dict[str, str]) -> list[str]:
    """'file:line: link' for each Markdown link to a paper instead of a citation."""
    return [
        f"{name}:{number}: {line.strip()}"
        for name, text in texts.items()
        for number, line in enumerate(text.splitlines(), 1)
        if INLINE_PAPER_LINK.search(line)
    ]


def lecture_sources() -> dict[str, str]:
    paths = [*(ROOT / "chapters").glob("*.md"), ROOT / "intro.md"]
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in paths}


def test_citation_checks_can_fail():
    old = "blocks ([Dettmers et al., 2022](https://arxiv.org/abs/2110.02861)), about 10"
    assert inline_paper_links({"x.md": old}) == [f"x.md:1: {old}"]
    assert inline_paper_links({"x.md": "blocks {cite:p}`dettmers2022optimizers`, about 10"}) == []
    assert cited_keys("{cite:t}`a` and {cite}`b, c` and {cite:p}`d`") == {"a", "b", "c", "d"}


def test_pages_cite_papers_through_the_bibliography():
    texts = lecture_sources()
    links = inline_paper_links(texts)
    assert not links, "cite these from references.bib with {cite}, not as links:\n" + "\n".join(links)


def test_every_cited_key_is_a_bibliography_entry_with_its_metadata():
    from pybtex.database import parse_file

    with open(ROOT / "_config.yml", encoding="utf-8") as config:
        bibfiles = yaml.safe_load(config)["bibtex_bibfiles"]
    entries = {key: entry for bibfile in bibfiles for key, entry in parse_file(ROOT / bibfile).entries.items()}
    used = {key for text in lecture_sources().values() for key in cited_keys(text)}
    assert {"dettmers2022optimizers", "deepseek2024v3"} <= used  # chapter 09's low-precision optimizer state
    missing = sorted(used - set(entries))
    assert not missing, f"cited but not in references.bib: {missing}"
    for key in sorted(used):
        entry = entries[key]
        assert entry.persons.get("author"), f"{key}: no author"
        assert entry.fields.get("title") and entry.fields.get("year", "").isdigit(), f"{key}: no title or year"
        venue = {"booktitle", "journal", "institution", "url", "eprint"} & set(entry.fields)
        assert venue, f"{key}: neither a venue nor an address"
