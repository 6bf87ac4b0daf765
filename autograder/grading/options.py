"""Every grading setting and its default, in one place (trusted side: the instructor's process).

``GradeOptions`` is what ``autograder grade`` builds from its command line, what ``grade()`` takes as
keyword arguments, and what every executor reads. A setting keeps its name from here to where it is
applied: ``memory_limit_gb`` is ``ExecutionLimits.memory_limit_gb`` on the machine that runs the
notebook, and the sandbox's limits are derived from it there (``execute/limits.py``); the time limits
are derived in ``sandbox/deadlines.py``.

The settings a command line sets (``GRADING_SETTINGS``: the fields declared with ``setting``, see
``autograder/course/settings.py``) carry their flag and help here: ``add_grading_arguments`` generates
the flags of ``autograder grade`` and ``autograder serve`` from them, ``given_grading`` reads back what
was given, ``settings_json`` / ``from_settings_json`` carry them to the service's worker unchanged (no
process re-defaults them), and the README's tables of them and of ``SlurmOptions`` are generated
(``python -m autograder.tools.tables``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from autograder import ALLOW_CPU_ENV
from autograder.course.settings import (
    add_setting_arguments,
    config_settings,
    course_settings,
    given_settings,
    setting,
    setting_field,
    settings_of,
)
from autograder.errors import CourseError, GradingError
from autograder.grading.registry import EXECUTORS

log = logging.getLogger(__name__)
CONFIG_SECTION, CONFIG_KEY = "Autograder", "slurm"  # c.Autograder.slurm in nbgrader_config.py
DEVICES = ("auto", "cpu", "cuda")


@dataclass(frozen=True)
class GradeOptions:
    """How to grade. Each field is also a keyword argument of ``grade()``."""

    assignments: Sequence[str] | None = None  # default: every assignment with submissions
    students: Sequence[str] | None = None  # default: everyone who submitted
    course_root: Path = Path(".")
    db_url: str | None = None  # default: the course's gradebook
    workers: int | None = setting(
        None, "--workers", "notebooks at once (default: CPUs; with --executor slurm, per array task)",
        metavar="N")
    cpus: int | None = setting(
        None, "--cpus", "CPUs this run's notebooks share, for their torch threads (cpus / workers "
        "each; default: the CPUs this process may run on; give each worker its share when several "
        "share a machine)", metavar="N")
    device: str = setting("auto", "--device", "auto: CUDA when present", choices=DEVICES)
    allow_cpu: bool | None = setting(
        None, "--allow-cpu", "run GPU-only checks on CPU (default: AUTOGRADER_ALLOW_CPU of the process)")
    timeout: float | None = setting(
        None, "--timeout", "seconds per cell (default: the course's c.Execute.timeout, 60 in this "
        "course; 0: no limit). A cell that runs longer fails alone: it scores 0 and the cells "
        "after it still run, so a hang in one function costs only the checks that need it",
        metavar="S")
    notebook_timeout: float | None = setting(
        600.0, "--notebook-timeout", "seconds for a whole notebook (0: no limit). When it fires, "
        "the cell running then and every cell after it score 0: the same hang costs far more than "
        "under the per-cell limit, so keep it above what a whole notebook needs", metavar="S")
    memory_limit_gb: float | None = setting(
        4.0, "--memory-limit", "memory one notebook may use on top of the template (0: no limit)",
        metavar="GB")
    force: bool = False  # regrade submissions already graded
    notebook: str | None = None  # --notebook GLOB: only these notebooks (nbgrader's notebook_id)
    progress: bool = True  # a progress bar on stderr
    sandbox: bool = True  # False: --no-sandbox, debugging only
    executor: str = setting("local", "--executor", "where notebooks run: " + ", ".join(
        f"{name} ({entry.help})" for name, entry in EXECUTORS.items()), choices=tuple(EXECUTORS))
    slurm: SlurmOptions | None = None  # default: the course's c.Autograder.slurm
    slurm_folder: Path | None = None  # default: <course>/.slurm/grade (shared with the nodes)
    poll_s: float = 2.0  # slurm: seconds between looks at the results folder
    # more folders the checker must not see besides the course's (a --preview: the real course)
    hidden_folders: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.executor not in EXECUTORS:
            raise GradingError(f"the executor must be one of {', '.join(EXECUTORS)}, "
                               f"got {self.executor!r}")
        if self.device not in DEVICES:
            from autograder.errors import DeviceError

            raise DeviceError(f"--device must be auto, cpu or cuda, got {self.device!r}")
        if self.workers is not None and (type(self.workers) is not int or self.workers < 1):
            raise GradingError(f"--workers must be a positive integer, got {self.workers!r}")
        if self.cpus is not None and (type(self.cpus) is not int or self.cpus < 1):
            raise GradingError(f"--cpus must be a positive integer, got {self.cpus!r}")
        if self.cpus is not None and self.executor == "slurm":
            raise GradingError("--cpus is this machine's share; a Slurm array task has the CPUs "
                               "Slurm gives it (--cpus-per-task)")
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
    def cpu_count(self) -> int:
        """The CPUs the notebooks share: ``cpus``, else those this process may run on (its affinity:
        a container's or Slurm's CPU set, not the whole machine's)."""
        return self.cpus or len(os.sched_getaffinity(0)) or 1

    @property
    def worker_count(self) -> int:
        """Notebooks at once: ``workers``, else one per CPU."""
        return self.workers or self.cpu_count

    @property
    def memory_limit_bytes(self) -> int | None:
        return int(self.memory_limit_gb * 2**30) if self.memory_limit_gb else None


GRADING_SETTINGS: tuple[str, ...] = tuple(settings_of(GradeOptions))


def add_grading_arguments(parser: argparse.ArgumentParser,
                          names: Sequence[str] = GRADING_SETTINGS) -> None:
    """The flags of the grading settings ``names``, generated from their fields."""
    add_setting_arguments(parser, GradeOptions, names)


def given_grading(args: argparse.Namespace, names: Sequence[str] = GRADING_SETTINGS) -> dict[str, Any]:
    """The grading settings ``names`` the command line gave (the rest keep their defaults)."""
    return given_settings(args, GradeOptions, names)


def course_grading(config: Any, names: Sequence[str] = GRADING_SETTINGS) -> dict[str, Any]:
    """The grading settings the course's ``nbgrader_config.py`` sets, each as
    ``c.Autograder.<name>`` (``c.Autograder.notebook_timeout = 900``); checked, a wrong type is a
    ``CourseError`` naming the file, the setting and what it takes."""
    return config_settings(config, CONFIG_SECTION, GradeOptions, names)


def resolve_grading(course_root: Path | str, given: Mapping[str, Any],
                    names: Sequence[str] = GRADING_SETTINGS) -> dict[str, Any]:
    """The grading settings a command runs with: the course's ``c.Autograder.<name>``, then
    ``given`` (the command line's flags) on top; GradeOptions' defaults for the rest."""
    from autograder.course.nbgrader import load_course

    resolved = {**course_grading(load_course(course_root).config, names), **given}
    log.debug("grading settings: %s (nbgrader_config.py's c.Autograder, then the flags %s)",
              resolved, sorted(given))
    return resolved


def settings_json(settings: Mapping[str, Any]) -> str:
    """Grading settings for another process (the service's worker), checked here first."""
    for name in settings:
        setting_field(GradeOptions, name)
    GradeOptions.of(**settings)  # a wrong value is refused here, with its message, not in the child
    return json.dumps(dict(settings), sort_keys=True)


def from_settings_json(text: str) -> dict[str, Any]:
    """What ``settings_json`` wrote (unknown names are an error that names them)."""
    settings = json.loads(text)
    if not isinstance(settings, dict):
        raise TypeError(f"grading settings must be a JSON object, got {text[:200]!r}")
    for name in settings:
        setting_field(GradeOptions, name)
    return settings


@dataclass(frozen=True)
class SlurmOptions:
    """How the array jobs are requested. Defaults come from the course config
    (``c.Autograder.slurm = {"partition": "gpu", "gpus_per_task": 1, ...}`` in nbgrader_config.py, or
    one by one as ``c.Autograder.partition = "gpu"``; see ``load_slurm_options``); keyword overrides win over both."""

    partition: str | None = setting(None, "--partition", "partition (default: the cluster's)")
    gpus_per_task: int = setting(0, "--gpus-per-task", "GPUs per array task (CUDA grading when > 0)",
                                 metavar="N")
    time_min: int = setting(60, "--time", "time limit of one array task, minutes", metavar="MIN")
    account: str | None = setting(None, "--account", "account to charge")
    max_jobs: int = setting(16, "--max-jobs", "array tasks running at once (slurm_array_parallelism)",
                            metavar="K")
    chunk_size: int = setting(10, "--chunk-size", "submissions per array task", metavar="N")
    retries: int = setting(2, "--retries", "resubmissions of a failed chunk's missing submissions",
                           metavar="N")
    cpus_per_task: int = setting(4, "--cpus-per-task", "CPUs per array task", metavar="N")
    mem_gb: float | None = setting(16, "--mem-gb", "memory per array task (None in the config: the "
                                   "partition's default)", metavar="GB")

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
        raw = course_settings(config, CONFIG_SECTION, CONFIG_KEY, cls)
        one_by_one = config_settings(config, CONFIG_SECTION, cls)  # c.Autograder.partition = "gpu"
        both = sorted(set(raw) & set(one_by_one))
        if both:
            raise CourseError(f"nbgrader_config.py sets {', '.join(both)} twice: in "
                              f"c.{CONFIG_SECTION}.{CONFIG_KEY} and as c.{CONFIG_SECTION}.<setting>; "
                              "keep one")
        raw = {**one_by_one, **raw}
        names = {f.name for f in fields(cls)}
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
    from autograder.course.nbgrader import load_course

    return SlurmOptions.from_config(load_course(course_root).config, **overrides)
