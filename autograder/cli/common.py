"""What several command groups share: safe terminal text, the executor and Slurm flags, the worker's
flags, and the type of a subcommand table."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from autograder.course.settings import add_setting_arguments, given_settings
from autograder.errors import AutograderError
from autograder.grading.options import SlurmOptions, add_grading_arguments, load_slurm_options

Subparsers = argparse._SubParsersAction  # the `autograder COMMAND` choices
Handler = Callable[[argparse.Namespace], int]  # one subcommand: its parsed flags -> exit status
Register = Callable[["Subparsers[argparse.ArgumentParser]"], None]  # adds one subcommand's parser

def plain(text: str) -> str:
    """Untrusted text made safe for a terminal: control characters (escape sequences that set the
    window title or the clipboard, carriage returns that overwrite a line) shown escaped."""
    return "".join(c if c.isprintable() or c in "\t" else repr(c)[1:-1] for c in str(text))


def worker_arguments(p: argparse.ArgumentParser) -> None:
    from autograder.service.store import LEASE_S

    p.add_argument("--lease-s", type=float, default=LEASE_S, metavar="S",
                   help="a claim a worker does not renew for S seconds (it died, froze or lost the "
                        f"database) goes back to the queue (default {LEASE_S:g}; renewed every S/4)")
    p.add_argument("--gpu", action="store_true",
                   help="the worker's machine has a CUDA device (checked at start): it grades the "
                        "exercises with GPU-only checks too; without it, and without --allow-cpu, "
                        "those wait in the queue for a worker that has one")


def executor_arguments(p: argparse.ArgumentParser) -> None:
    """--executor and the Slurm array's settings (defaults: c.Autograder.slurm in nbgrader_config.py)."""
    add_grading_arguments(p, ("executor",))
    slurm = p.add_argument_group("with --executor slurm (override c.Autograder.slurm)")
    add_setting_arguments(slurm, SlurmOptions)


def slurm_settings(args: argparse.Namespace) -> SlurmOptions | None:
    """SlurmOptions from the course config, then the command line's overrides (None when local)."""
    overrides = given_settings(args, SlurmOptions)
    if args.executor != "slurm":
        if overrides or getattr(args, "slurm_folder", None) is not None:
            flags = [SlurmOptions.__dataclass_fields__[name].metadata["flag"] for name in overrides]
            raise AutograderError(f"the Slurm options ({', '.join(flags) or '--slurm-folder'}) "
                                  "need --executor slurm")
        return None
    try:
        return load_slurm_options(args.course_root, **overrides)
    except ValueError as error:
        raise AutograderError(str(error)) from None
