"""What several command groups share: safe terminal text, the executor and Slurm flags, and the
type of a subcommand table."""

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
