"""Where a page was executed: the device and the software, shown at the top of every chapter."""

from __future__ import annotations

import platform

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
