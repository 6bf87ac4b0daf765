"""Record the lecture's GPU figures on this machine into data/gpu/<device-slug>.json.

    make gpu-measure                                  # the same as the next line, in the project's venv
    python benchmarks/gpu_measure.py                  # needs CUDA; exits 2 without it and writes nothing
    python benchmarks/gpu_measure.py --quick --output-dir /tmp/x   # smaller sizes (a smoke test)

Measures what a CPU build of the site cannot: achieved matmul FLOP/s in bf16, float32 and TF32, and the MFU
of the bf16 one against the dense peak in chapters/_runtime.py; pinned and pageable host->GPU bandwidth;
whether a non_blocking copy overlaps with compute on the default stream and on a side stream; the
bandwidth of an elementwise op against a matmul's FLOP/s; the GPU's total memory. The methods are the
functions of chapters/_measure.py, which the pages also use when a GPU builds them, and each figure carries
its method string into the file, with the device name, driver, CUDA, torch version and date.

After recording, rebuild the pages that show the figures from scratch (`rm -rf _build && make site`): the
build's cache keys pages by their source, not by data/gpu/.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "chapters"))

import _gpu_record  # noqa: E402  (chapters/ is not a package; the pages import these modules the same way)
import _measure  # noqa: E402
import _runtime  # noqa: E402

EXIT_NO_CUDA = 2


def device_slug(name: str) -> str:
    """A file name for a GPU name: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug:
        raise ValueError(f"cannot make a file name from the device name {name!r}")
    return slug


def driver_version() -> str:
    """The NVIDIA driver version from nvidia-smi, or a note saying why it is unknown."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return "unknown (nvidia-smi not found)"
    try:
        out = subprocess.run(
            [smi, "--query-gpu=driver_version", "--format=csv,noheader"],
            check=True, capture_output=True, text=True, timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError) as error:
        return f"unknown (nvidia-smi failed: {error})"
    return out.strip().splitlines()[0] if out.strip() else "unknown (nvidia-smi printed nothing)"


def git_commit() -> str | None:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True, timeout=30
        ).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def figure(label: str, value: float, unit: str, method: str) -> dict:
    return {"label": label, "value": float(value), "unit": unit, "method": method}


def measure(device: torch.device, *, quick: bool) -> dict[str, dict]:
    """Every figure, measured on `device` (a CUDA device)."""
    n = 2048 if quick else 8192
    copy_bytes = (32 if quick else 256) * _measure.MiB
    add_numel = (8 if quick else 64) * 2**20
    figures: dict[str, dict] = {}

    print(f"matmuls ({n} x {n}) ...", flush=True)
    bf16 = _measure.matmul_flop_per_s(n, torch.bfloat16, device)
    fp32 = _measure.matmul_flop_per_s(n, torch.float32, device, precision="highest")
    tf32 = _measure.matmul_flop_per_s(n, torch.float32, device, precision="high")
    figures["matmul_bf16_flop_per_s"] = figure(
        f"bf16 matmul ({n} x {n})", bf16, "FLOP/s", _measure.matmul_method(n, torch.bfloat16, device))
    figures["matmul_fp32_flop_per_s"] = figure(
        f"float32 matmul ({n} x {n}), TF32 off", fp32, "FLOP/s",
        _measure.matmul_method(n, torch.float32, device, "highest"))
    figures["matmul_tf32_flop_per_s"] = figure(
        f"float32 matmul ({n} x {n}), TF32 on", tf32, "FLOP/s",
        _measure.matmul_method(n, torch.float32, device, "high"))
    try:
        accelerator = _runtime.lookup_accelerator(torch.cuda.get_device_name(device))
    except _runtime.UnknownAcceleratorError as error:
        print(f"no MFU recorded: {error}", flush=True)
    else:
        figures["mfu_bf16_matmul"] = figure(
            f"MFU of the bf16 matmul against the {accelerator.label} dense bf16 peak", bf16 / accelerator.bf16_dense,
            "fraction", f"matmul_bf16_flop_per_s / {accelerator.bf16_dense:.4g} FLOP/s ({accelerator.source})")

    print("host -> GPU copies ...", flush=True)
    for pinned, key, label in ((False, "h2d_pageable_bytes_per_s", "pageable"),
                               (True, "h2d_pinned_bytes_per_s", "pinned")):
        rate = _measure.host_to_device_bytes_per_s(copy_bytes, pinned=pinned, device=device)
        figures[key] = figure(f"host -> GPU copy from {label} memory", rate, "B/s",
                              _measure.host_to_device_method(copy_bytes, pinned))

    print("copy / compute overlap ...", flush=True)
    matmul_n = 2048 if quick else 4096
    overlap = _measure.copy_compute_overlap(device, n_bytes=copy_bytes, matmul_n=matmul_n)
    method = _measure.overlap_method(copy_bytes, matmul_n) + f"; k = {overlap['matmuls']:.0f}"
    for key, label in (("copy_s", "copy alone"), ("compute_s", "matmuls alone"),
                       ("same_stream_s", "copy then matmuls, default stream"),
                       ("side_stream_s", "copy on a side stream beside the matmuls")):
        figures[f"overlap_{key}"] = figure(f"overlap: {label}", overlap[key], "s", method)
    figures["overlap_issue_s"] = figure(
        "host time to enqueue one non_blocking copy", overlap["issue_s"], "s",
        "time.perf_counter around target.copy_(pinned_host, non_blocking=True), synchronized before and "
        "after (not inside); fastest of 5")

    print("elementwise vs matmul ...", flush=True)
    add_bytes, add_flops = _measure.elementwise_add_rates(add_numel, torch.bfloat16, device)
    add_method = _measure.elementwise_method(add_numel, torch.bfloat16, device)
    figures["elementwise_add_bytes_per_s"] = figure("bf16 elementwise add, bandwidth", add_bytes, "B/s", add_method)
    figures["elementwise_add_flop_per_s"] = figure("bf16 elementwise add, FLOP/s", add_flops, "FLOP/s", add_method)
    tokens, width = (2**16 if quick else 2**18), 64
    matmul_s, elementwise_s = _measure.narrow_layer_seconds(tokens, width, torch.bfloat16, device)
    layer_method = (f"({tokens}, {width}) @ ({width}, {4 * width}) bf16 matmul, then gelu(z + bias) on its output; "
                    "fastest block of blocked_autorange each")
    figures["narrow_layer_matmul_s"] = figure("narrow layer: matmul", matmul_s, "s", layer_method)
    figures["narrow_layer_elementwise_s"] = figure("narrow layer: bias + GELU", elementwise_s, "s", layer_method)

    figures["memory_total_bytes"] = figure(
        "GPU memory that CUDA reports", torch.cuda.get_device_properties(device).total_memory, "B",
        "torch.cuda.get_device_properties(device).total_memory")
    return figures


def record(*, output_dir: Path, quick: bool = False) -> Path:
    """Measure on the first CUDA device and write the recording; returns its path."""
    if not torch.cuda.is_available():
        raise RuntimeError("gpu_measure.record needs a CUDA GPU")
    device = torch.device("cuda", 0)
    name = torch.cuda.get_device_name(device)
    props = torch.cuda.get_device_properties(device)
    print(f"recording on {name}", flush=True)
    figures = measure(device, quick=quick)
    data = {
        "schema": _gpu_record.SCHEMA,
        "device": {
            "name": name,
            "slug": device_slug(name),
            "driver": driver_version(),
            "cuda": str(torch.version.cuda),
            "torch": torch.__version__,
            "compute_capability": f"{props.major}.{props.minor}",
            "multiprocessors": props.multi_processor_count,
        },
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "quick": quick,
        "commit": git_commit(),
        "command": "python benchmarks/gpu_measure.py" + (" --quick" if quick else ""),
        "figures": figures,
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    path = output_dir / f"{device_slug(name)}.json"
    _gpu_record.parse_recording(data, path)  # what the pages will read must parse
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=_gpu_record.RECORD_DIR,
                        help="where to write <device-slug>.json (default: data/gpu/)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes: a smoke test, not a recording")
    args = parser.parse_args(argv)
    if args.quick and args.output_dir.resolve() == _gpu_record.RECORD_DIR.resolve():
        parser.error("--quick is a smoke test, not a recording for the pages: give --output-dir elsewhere")
    if not torch.cuda.is_available():
        print("gpu_measure: needs a CUDA GPU, and torch.cuda.is_available() is False on this machine "
              f"(torch {torch.__version__}). Nothing was written.", file=sys.stderr)
        return EXIT_NO_CUDA
    path = record(output_dir=args.output_dir, quick=args.quick)
    print(f"wrote {path}")
    print("Rebuild the site from scratch to show it: rm -rf _build && make site")
    return 0


if __name__ == "__main__":
    sys.exit(main())
