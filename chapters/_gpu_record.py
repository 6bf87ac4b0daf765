"""GPU measurements recorded by `make gpu-measure`, read back for the pages.

A page built on a CPU cannot measure a GPU. Where the lecture's numbers need one, the page prints
`not_on_this_build(...)` next to its own CPU figures and then `recorded_figures(...)`: every recording in
data/gpu/ with its provenance (device, driver, CUDA, torch, date, file) and each figure's method, or a
notice that no recording exists yet. A page built on a GPU measures the same figures live, with the same
functions (chapters/_measure.py), and shows the recordings beside them.

Only real measurements belong in data/gpu/: each file is written by benchmarks/gpu_measure.py on the
machine it describes, never by hand. The format is described in data/gpu/README.md.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

RECORD_DIR = Path(__file__).resolve().parent.parent / "data" / "gpu"
SCHEMA = 1
DEVICE_KEYS = ("name", "slug", "driver", "cuda", "torch")
FIGURE_KEYS = ("label", "value", "unit", "method")
UNITS = ("FLOP/s", "B/s", "s", "B", "fraction", "count")

NOT_ON_THIS_BUILD = "not on this build"
NO_RECORDING = (
    "No GPU recording exists yet: data/gpu/ holds no measurement. "
    "Run `make gpu-measure` on a machine with a CUDA GPU to add one."
)


class RecordingError(ValueError):
    """A file in data/gpu/ is not a recording in the format gpu_measure.py writes."""


@dataclass(frozen=True)
class Figure:
    """One measured number and how it was measured."""

    name: str
    label: str
    value: float
    unit: str
    method: str

    def formatted(self) -> str:
        """The value in the unit a reader expects (TFLOP/s, GB/s, ms, GiB, %)."""
        v = self.value
        if self.unit == "FLOP/s":
            return f"{v / 1e12:,.1f} TFLOP/s" if v >= 1e11 else f"{v / 1e9:,.2f} GFLOP/s"
        if self.unit == "B/s":
            return f"{v / 1e9:,.1f} GB/s"
        if self.unit == "s":
            return f"{v * 1e3:,.3f} ms"
        if self.unit == "B":
            return f"{v / 2**30:,.2f} GiB ({v / 2**20:,.0f} MiB, {v / 1e9:,.2f} GB)"
        if self.unit == "fraction":
            return f"{v:.1%}"
        return f"{v:g}"


@dataclass(frozen=True)
class Recording:
    """One run of benchmarks/gpu_measure.py on one GPU."""

    path: Path
    device: str
    driver: str
    cuda: str
    torch: str
    date: str
    figures: dict[str, Figure]

    def provenance(self) -> str:
        where = f"data/gpu/{self.path.name}" if self.path.parent == RECORD_DIR else str(self.path)
        return (
            f"{self.device} (driver {self.driver}, CUDA {self.cuda}, torch {self.torch}, "
            f"measured {self.date}; {where})"
        )

    def value(self, name: str) -> float:
        """The value of one figure; RecordingError if the recording lacks it."""
        if name not in self.figures:
            raise RecordingError(f"{self.path}: no figure {name!r} (has {sorted(self.figures)})")
        return self.figures[name].value


def _require(mapping: object, keys: Sequence[str], where: str, path: Path) -> dict:
    if not isinstance(mapping, dict):
        raise RecordingError(f"{path}: {where} must be a JSON object, found {type(mapping).__name__}")
    missing = [k for k in keys if k not in mapping]
    if missing:
        raise RecordingError(f"{path}: {where} lacks {missing}")
    return mapping


def parse_recording(data: object, path: Path) -> Recording:
    """A Recording from the JSON object gpu_measure.py wrote; RecordingError naming the file otherwise."""
    top = _require(data, ("schema", "device", "date", "figures"), "the file", path)
    if top["schema"] != SCHEMA:
        raise RecordingError(f"{path}: schema {top['schema']!r}, this loader reads schema {SCHEMA}")
    device = _require(top["device"], DEVICE_KEYS, "'device'", path)
    figures_raw = top["figures"]
    if not isinstance(figures_raw, dict) or not figures_raw:
        raise RecordingError(f"{path}: 'figures' must be a non-empty JSON object")
    figures = {}
    for name, raw in figures_raw.items():
        fig = _require(raw, FIGURE_KEYS, f"figure {name!r}", path)
        if fig["unit"] not in UNITS:
            raise RecordingError(f"{path}: figure {name!r} has unit {fig['unit']!r}, expected one of {UNITS}")
        if not isinstance(fig["value"], int | float) or isinstance(fig["value"], bool):
            raise RecordingError(f"{path}: figure {name!r} has a non-numeric value {fig['value']!r}")
        if not str(fig["method"]).strip():
            raise RecordingError(f"{path}: figure {name!r} does not say how it was measured")
        figures[name] = Figure(name, str(fig["label"]), float(fig["value"]), fig["unit"], str(fig["method"]))
    return Recording(
        path=path,
        device=str(device["name"]),
        driver=str(device["driver"]),
        cuda=str(device["cuda"]),
        torch=str(device["torch"]),
        date=str(top["date"]),
        figures=figures,
    )


def load_recordings(directory: Path = RECORD_DIR) -> list[Recording]:
    """Every recording in `directory` (*.json), sorted by file name; an empty list when there is none."""
    recordings = []
    for path in sorted(Path(directory).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise RecordingError(f"{path}: not valid JSON ({error})") from error
        recordings.append(parse_recording(data, path))
    return recordings


def not_on_this_build(what: str) -> str:
    """The line a CPU-built page prints where a figure needs a GPU."""
    return f"{NOT_ON_THIS_BUILD}: {what} needs a CUDA GPU, and this page was built on CPU."


def recorded_figures(names: Sequence[str], directory: Path = RECORD_DIR) -> str:
    """The recorded values of the named figures, each recording with its provenance, or NO_RECORDING."""
    recordings = load_recordings(directory)
    if not recordings:
        return NO_RECORDING
    lines = []
    for recording in recordings:
        lines.append(f"Recorded on {recording.provenance()}:")
        present = [recording.figures[n] for n in names if n in recording.figures]
        if not present:
            lines.append("  (this recording has none of these figures)")
        for figure in present:
            lines.append(f"  {figure.label}: {figure.formatted()}")
            lines.append(f"      method: {figure.method}")
    return "\n".join(lines)
