"""Every grading setting and its default, in one place (trusted side: the instructor's process).

``GradeOptions`` is what ``autograder grade`` builds from its command line, what ``grade()`` takes as
keyword arguments, and what every executor reads. A setting keeps its name from here to where it is
applied: ``memory_limit_gb`` is ``ExecutionLimits.memory_limit_gb`` on the machine that runs the
notebook, and the sandbox's limits are derived from it there (``execute/limits.py``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from autograder import ALLOW_CPU_ENV
from autograder.errors import CourseError, GradingError

CONFIG_SECTION, CONFIG_KEY = "Autograder", "slurm"  # c.Autograder.slurm in nbgrader_config.py
EXECUTORS = ("local", "slurm")
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class GradeOptions:
    """How to grade. Each field is also a keyword argument of ``grade()``."""

    assignments: Sequence[str] | None = None  # default: every assignment with submissions
    students: Sequence[str] | None = None  # default: everyone who submitted
    course_root: Path = Path(".")
    db_url: str | None = None  # default: the course's gradebook
    workers: int | None = None  # notebooks at once (default: CPUs; on Slurm: per array task)
    device: str = "auto"  # "auto" (CUDA when present), "cpu" or "cuda"
    allow_cpu: bool | None = None  # GPU checks on CPU; None: AUTOGRADER_ALLOW_CPU of this process
    timeout: float | None = None  # seconds per cell; None: the course's Execute.timeout; <= 0: none
    notebook_timeout: float | None = 600.0  # seconds for a whole notebook; 0/None: none
    memory_limit_gb: float | None = 4.0  # memory one notebook may use beyond the template; 0/None: none
    force: bool = False  # regrade submissions already graded
    execute: bool = True  # False: --no-execute, score the outputs as submitted (nbgrader's flag)
    notebook: str | None = None  # --notebook GLOB: only these notebooks (nbgrader's notebook_id)
    progress: bool = True  # a progress bar on stderr
    sandbox: bool = True  # False: --no-sandbox, debugging only
    executor: str = "local"  # "local" or "slurm"
    slurm: SlurmOptions | None = None  # default: the course's c.Autograder.slurm
    slurm_folder: Path | None = None  # default: <course>/.slurm/grade (shared with the nodes)
    poll_s: float = 2.0  # slurm: seconds between looks at the results folder

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise GradingError(f"the executor must be 'local' or 'slurm', got {self.executor!r}")
        if self.device not in DEVICES:
            from autograder.errors import DeviceError

            raise DeviceError(f"--device must be auto, cpu or cuda, got {self.device!r}")
        if self.workers is not None and (type(self.workers) is not int or self.workers < 1):
            raise GradingError(f"--workers must be a positive integer, got {self.workers!r}")
        if self.memory_limit_gb is not None and self.memory_limit_gb < 0:
            raise GradingError(f"--memory-limit must be >= 0 GB, got {self.memory_limit_gb!r}")

    @classmethod
    def of(cls, options: GradeOptions | None = None, **settings: Any) -> GradeOptions:
        """``options`` with ``settings`` on top (unknown names are an error that names them)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise TypeError(f"unknown grading option(s) {unknown}; valid: {sorted(known)}")
        base = {f.name: getattr(options, f.name) for f in fields(cls)} if options else {}
        return cls(**{**base, **settings})

    @property
    def cpu_allowed(self) -> bool:
        """Whether GPU checks may run their CPU path (the flag, else this process's environment)."""
        if self.allow_cpu is not None:
            return self.allow_cpu
        return os.environ.get(ALLOW_CPU_ENV) == "1"

    @property
    def memory_limit_bytes(self) -> int | None:
        return int(self.memory_limit_gb * 2**30) if self.memory_limit_gb else None


@dataclass(frozen=True)
class SlurmOptions:
    """How the array jobs are requested. Defaults come from the course config
    (``c.Autograder.slurm = {"partition": "gpu", "gpus_per_task": 1, ...}`` in nbgrader_config.py,
    see ``load_slurm_options``); keyword overrides win over both."""

    partition: str | None = None  # None: the cluster's default partition
    gpus_per_task: int = 0
    time_min: int = 60  # time limit of one chunk's job, minutes
    account: str | None = None
    max_jobs: int = 16  # array tasks running at once (slurm_array_parallelism)
    chunk_size: int = 10  # items per array task
    retries: int = 2  # resubmissions of a failed chunk's missing items
    cpus_per_task: int = 4
    mem_gb: float | None = 16  # None: the partition's default

    def __post_init__(self) -> None:
        for name, least in (("gpus_per_task", 0), ("time_min", 1), ("max_jobs", 1),
                            ("chunk_size", 1), ("retries", 0), ("cpus_per_task", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"SlurmOptions.{name} must be an integer >= {least}, got {value!r}")
        if self.mem_gb is not None and not (isinstance(self.mem_gb, int | float) and self.mem_gb > 0):
            raise ValueError(f"SlurmOptions.mem_gb must be a positive number or None, got {self.mem_gb!r}")

    @classmethod
    def from_config(cls, config: Any, **overrides: Any) -> SlurmOptions:
        """Options from a loaded traitlets config (``c.Autograder.slurm``), then ``overrides``."""
        section = config.get(CONFIG_SECTION) if hasattr(config, "get") else None
        raw = dict((section.get(CONFIG_KEY) if section else None) or {})
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - names)
        if unknown:
            raise CourseError(f"c.{CONFIG_SECTION}.{CONFIG_KEY} has unknown option(s) {unknown}; "
                              f"valid: {sorted(names)}")
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(f"unknown SlurmOptions field(s) {unknown}")
        return cls(**{**raw, **overrides})

    def executor_parameters(self) -> dict[str, Any]:
        """``update_parameters`` arguments for a ``submitit.AutoExecutor`` on Slurm."""
        params: dict[str, Any] = {
            "name": "autograder",
            "timeout_min": self.time_min,
            "cpus_per_task": self.cpus_per_task,
            "slurm_array_parallelism": self.max_jobs,
            # submitit's USR2 warning before the time limit ends a chunk cleanly; Slurm checks limits
            # about every 30 s, so the warning must come well before the end of a short job
            "slurm_signal_delay_s": min(90, self.time_min * 30),
        }
        if self.mem_gb is not None:
            params["mem_gb"] = self.mem_gb
        if self.partition:
            params["slurm_partition"] = self.partition
        if self.account:
            params["slurm_account"] = self.account
        if self.gpus_per_task:
            params["slurm_gpus_per_task"] = self.gpus_per_task
        return params


def load_slurm_options(course_root: Path | str = ".", **overrides: Any) -> SlurmOptions:
    """``SlurmOptions`` from ``<course_root>/nbgrader_config.py`` (``c.Autograder.slurm``), then
    ``overrides`` (for example the command line's)."""
    from autograder.course import load_course

    return SlurmOptions.from_config(load_course(course_root).config, **overrides)
