"""Where a page was executed (device and software, shown at the top of every chapter), and the table of
accelerator peaks that turns a measured FLOP/s into an MFU.

The pages import this module; so does `benchmarks/gpu_measure.py`, so a recorded MFU and a live one use the
same peak. The compute-accounting page shows the table's code with `literalinclude`.
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass

import torch


def cpu_model() -> str:
    """The CPU's marketing name from /proc/cpuinfo, or platform's best guess."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name() -> str:
    """The GPU's name when CUDA is usable, else 'CPU: <model>' (never a pretend GPU)."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU: {cpu_model()}"


def describe_runtime() -> str:
    """One line for the top of a page: device, torch version, and whether CUDA was used."""
    cuda = f"CUDA {torch.version.cuda}" if torch.cuda.is_available() else "no CUDA (CPU build)"
    return f"Executed on {device_name()} · torch {torch.__version__} · {cuda}"


# --- accelerator table: start ---
@dataclass(frozen=True)
class Accelerator:
    """Datasheet peaks of one GPU model, in FLOP/s. Dense figures unless the name says sparse."""

    label: str
    model: str  # matched as a whole word in torch.cuda.get_device_name()
    bf16_dense: float  # bf16 tensor-core matmul: the peak an MFU is measured against
    bf16_sparse: float  # NVIDIA's headline figure, with 2:4 sparsity: never use it for MFU
    fp8_dense: float | None  # FP8 (E4M3/E5M2) tensor-core matmul, dense; None: no FP8 tensor cores
    tf32_dense: float  # float32 matmul on tensor cores, inputs rounded to TF32
    fp32: float  # float32 on the ordinary (non-tensor) cores
    memory_bandwidth: float  # HBM bytes/s, from the product datasheet (BANDWIDTH_SOURCES)
    source: str

    @property
    def ridge_point(self) -> float:
        """FLOP per byte above which a kernel can reach the dense bf16 peak: peak / memory bandwidth."""
        return self.bf16_dense / self.memory_bandwidth


HOPPER_WHITEPAPER = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (2022), H100 SXM5 column"
HALVED = "tensor-core figures quoted with sparsity, halved"
SAME_AS_H100_SXM = f"same GPU and clocks as the H100 SXM: {HOPPER_WHITEPAPER}"

# Memory bandwidths come from the product datasheets, not from the architecture whitepaper (which gives the
# H100 SXM5 3 TB/s, before the datasheet's 3.35 TB/s). One figure per row, for the variant named here.
BANDWIDTH_SOURCES = {
    "A100 SXM4 80GB": "NVIDIA A100 datasheet: A100 80GB SXM, 2,039 GB/s",
    "A100 PCIe 80GB": "NVIDIA A100 datasheet: A100 80GB PCIe, 1,935 GB/s",
    "A100 SXM4 40GB": "NVIDIA A100 datasheet: A100 40GB SXM, 1,555 GB/s",
    "A100 PCIe 40GB": "NVIDIA A100 datasheet: A100 40GB PCIe, 1,555 GB/s",
    "H100 PCIe": "NVIDIA H100 datasheet: 2 TB/s",
    "H100 NVL": "NVIDIA H100 datasheet: 3.9 TB/s",
    "H100 SXM": "NVIDIA H100 datasheet: 3.35 TB/s",
    "GH200 144G HBM3e": "NVIDIA GH200 datasheet: 4.9 TB/s with 144 GB HBM3e",
    "GH200": "NVIDIA GH200 datasheet: 4 TB/s with 96 GB HBM3",
    "H200 NVL": "NVIDIA H200 datasheet: 4.8 TB/s",
    "H200 SXM": "NVIDIA H200 datasheet: 4.8 TB/s",
    "B200 (HGX)": "NVIDIA HGX B200 specifications: 8 TB/s per GPU",
    "GB200": "NVIDIA GB200 NVL72 specifications: 8 TB/s per GPU",
}

# FP8 dense: NVIDIA publishes FP8 with sparsity (H100 SXM and H200 SXM 3,958, H100 PCIe 3,026, H100 and H200
# NVL 3,341 TFLOP/s; B200 9 and GB200 10 PFLOP/s per GPU), halved here; the Hopper whitepaper gives 1978.9 dense.
# The A100 has no FP8 tensor cores (FP8 needs compute capability 8.9 or newer).
# Most specific names first: "H100 PCIe" must be tried before "H100". The four A100s have the same compute and
# three memory bandwidths, so each is matched by its full name; an A100 under any other name is refused.
DEVICE_TABLE = [
    Accelerator("A100 SXM4 80GB", "A100-SXM4-80GB", bf16_dense=312e12, bf16_sparse=624e12,
                fp8_dense=None, tf32_dense=156e12, fp32=19.5e12, memory_bandwidth=2.039e12,
                source="NVIDIA A100 datasheet"),
    Accelerator("A100 PCIe 80GB", "A100 80GB PCIe", bf16_dense=312e12, bf16_sparse=624e12,
                fp8_dense=None, tf32_dense=156e12, fp32=19.5e12, memory_bandwidth=1.935e12,
                source="NVIDIA A100 datasheet"),
    Accelerator("A100 SXM4 40GB", "A100-SXM4-40GB", bf16_dense=312e12, bf16_sparse=624e12,
                fp8_dense=None, tf32_dense=156e12, fp32=19.5e12, memory_bandwidth=1.555e12,
                source="NVIDIA A100 datasheet"),
    Accelerator("A100 PCIe 40GB", "A100-PCIE-40GB", bf16_dense=312e12, bf16_sparse=624e12,
                fp8_dense=None, tf32_dense=156e12, fp32=19.5e12, memory_bandwidth=1.555e12,
                source="NVIDIA A100 datasheet"),
    Accelerator("H100 PCIe", "H100 PCIe", bf16_dense=756.5e12, bf16_sparse=1513e12,
                fp8_dense=1513e12, tf32_dense=378e12, fp32=51e12, memory_bandwidth=2.0e12,
                source=f"NVIDIA H100 datasheet ({HALVED})"),
    Accelerator("H100 NVL", "H100 NVL", bf16_dense=835.5e12, bf16_sparse=1671e12,
                fp8_dense=1670.5e12, tf32_dense=417.5e12, fp32=60e12, memory_bandwidth=3.9e12,
                source=f"NVIDIA H100 datasheet ({HALVED})"),
    Accelerator("H100 SXM", "H100", bf16_dense=989.4e12, bf16_sparse=1978.9e12,
                fp8_dense=1978.9e12, tf32_dense=494.7e12, fp32=66.9e12, memory_bandwidth=3.35e12,
                source=HOPPER_WHITEPAPER),
    Accelerator("GH200 144G HBM3e", "GH200 144G HBM3e", bf16_dense=989.4e12, bf16_sparse=1978.9e12,
                fp8_dense=1978.9e12, tf32_dense=494.7e12, fp32=66.9e12, memory_bandwidth=4.9e12,
                source=SAME_AS_H100_SXM),
    Accelerator("GH200", "GH200 480GB", bf16_dense=989.4e12, bf16_sparse=1978.9e12,
                fp8_dense=1978.9e12, tf32_dense=494.7e12, fp32=66.9e12, memory_bandwidth=4.0e12,
                source=SAME_AS_H100_SXM),
    Accelerator("H200 NVL", "H200 NVL", bf16_dense=835.5e12, bf16_sparse=1671e12,
                fp8_dense=1670.5e12, tf32_dense=417.5e12, fp32=60e12, memory_bandwidth=4.8e12,
                source=f"NVIDIA H200 datasheet ({HALVED})"),
    Accelerator("H200 SXM", "H200", bf16_dense=989.4e12, bf16_sparse=1978.9e12,
                fp8_dense=1978.9e12, tf32_dense=494.7e12, fp32=66.9e12, memory_bandwidth=4.8e12,
                source=SAME_AS_H100_SXM),
    Accelerator("B200 (HGX)", "B200", bf16_dense=2.25e15, bf16_sparse=4.5e15,
                fp8_dense=4.5e15, tf32_dense=1.1e15, fp32=75e12, memory_bandwidth=8e12,
                source=f"NVIDIA HGX B200 specifications, per GPU ({HALVED})"),
    Accelerator("GB200", "GB200", bf16_dense=2.5e15, bf16_sparse=5e15,
                fp8_dense=5e15, tf32_dense=1.25e15, fp32=80e12, memory_bandwidth=8e12,
                source=f"NVIDIA GB200 NVL72 specifications, per GPU ({HALVED})"),
]


class UnknownAcceleratorError(LookupError):
    """The GPU is not in DEVICE_TABLE, so no honest peak FLOP/s is known for it."""


def names_model(device_name: str, model: str) -> bool:
    """True if `model` appears in `device_name` as a whole word: "B200" is not found in "NVIDIA GB200"."""
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(model)}(?![A-Za-z0-9])", device_name) is not None


def lookup_accelerator(device_name: str) -> Accelerator:
    """The table entry for a GPU name as reported by torch.cuda.get_device_name()."""
    for entry in DEVICE_TABLE:
        if names_model(device_name, entry.model):
            return entry
    known = ", ".join(entry.label for entry in DEVICE_TABLE)
    raise UnknownAcceleratorError(
        f"no peak FLOP/s known for GPU {device_name!r}. Add its dense datasheet figures to DEVICE_TABLE "
        f"in chapters/_runtime.py (known: {known})."
    )
# --- accelerator table: end ---
