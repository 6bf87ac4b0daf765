"""Settings that document themselves: a dataclass field declared with ``setting`` carries its flag
(or none) and its help, and the command-line flags and README tables are generated from it.

Used by the grading settings (``GradeOptions``) and the Slurm array's (``SlurmOptions``) in
``grading/options.py``, and by the service's per-assignment policy (``service/policy.py``); the
README's tables are written by ``python -m autograder.tools.tables`` (a test keeps them equal).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import MISSING, Field, field, fields
from typing import Any

from autograder.errors import CourseError


def setting(default: Any, flag: str | None, help: str, *, metavar: str | None = None,
            choices: Sequence[str] | None = None) -> Any:
    """A dataclass field that is a documented setting (``flag`` None: no command-line flag)."""
    return field(default=default, metadata={"flag": flag, "help": help, "metavar": metavar,
                                            "choices": tuple(choices) if choices else None})


def settings_of(cls: type) -> dict[str, Field[Any]]:
    """The fields of ``cls`` declared with ``setting``, by name, in declaration order."""
    return {f.name: f for f in fields(cls) if "help" in f.metadata}


def setting_field(cls: type, name: str) -> Field[Any]:
    """The field ``name`` of ``cls``; a ``TypeError`` naming the valid ones if it is not a setting."""
    found = settings_of(cls)
    if name not in found:
        raise TypeError(f"{name!r} is not a setting of {cls.__name__} (one of {', '.join(found)})")
    return found[name]


def kind(f: Field[Any]) -> type:
    """The Python type a flag's value is parsed as."""
    text = str(f.type)
    return bool if "bool" in text else int if "int" in text else float if "float" in text else str


def default_text(f: Field[Any]) -> str:
    """The default as the help and the tables show it ("" for None)."""
    default = f.default if f.default is not MISSING else None
    return "" if default is None else f"{default:g}" if isinstance(default, float) else str(default)


def add_setting_arguments(parser: argparse._ActionsContainer, cls: type,
                          names: Sequence[str] | None = None) -> None:
    """The flags of ``cls``'s settings ``names`` (default: every one with a flag); an absent flag
    leaves the field's default (``given_settings`` reads only what was given)."""
    for name in names if names is not None else list(settings_of(cls)):
        f = setting_field(cls, name)
        meta, default = f.metadata, default_text(f)
        if meta["flag"] is None:
            continue
        help_text = meta["help"] + (f" (default: {default})" if default else "")
        if kind(f) is bool:
            parser.add_argument(meta["flag"], dest=name, action="store_true", default=None,
                                help=help_text)
        else:
            parser.add_argument(meta["flag"], dest=name, type=kind(f), default=None,
                                metavar=meta["metavar"], choices=meta["choices"], help=help_text)


def given_settings(args: argparse.Namespace, cls: type,
                   names: Sequence[str] | None = None) -> dict[str, Any]:
    """The settings of ``cls`` (``names``, default all) the command line gave."""
    chosen = names if names is not None else list(settings_of(cls))
    return {name: getattr(args, name) for name in chosen if getattr(args, name, None) is not None}


def settings_table(cls: type, names: Sequence[str] | None = None, *, key: str = "setting") -> str:
    """A Markdown table of ``cls``'s settings: flag (when any has one), name (``key`` heads its
    column), default, meaning."""
    chosen = [setting_field(cls, name) for name in
              (names if names is not None else list(settings_of(cls)))]
    flags = any(f.metadata["flag"] for f in chosen)
    head = ["flag"] * flags + [f"{key} (`{cls.__name__}`)", "default", "meaning"]
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for f in chosen:
        meta = f.metadata
        choices = f" ({' / '.join(meta['choices'])})" if meta["choices"] else ""
        flag = "—" if meta["flag"] is None else \
            f"`{meta['flag']}" + (f" {meta['metavar']}" if meta["metavar"] else "") + "`"
        cells = [flag] * flags + [f"`{f.name}`", default_text(f) or "—", meta["help"] + choices]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def course_settings(config: Any, section: str, key: str, cls: type) -> dict[str, Any]:
    """``c.<section>.<key>`` of a loaded traitlets config as a dict (empty when unset); a key that
    is not a field of ``cls`` is a ``CourseError`` naming it and the valid ones."""
    found = config.get(section) if hasattr(config, "get") else None
    raw = dict((found.get(key) if found else None) or {})
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise CourseError(f"c.{section}.{key} has unknown key(s) {unknown}; valid: {sorted(names)}")
    return raw


def config_settings(config: Any, section: str, cls: type,
                    names: Sequence[str] | None = None) -> dict[str, Any]:
    """The settings of ``cls`` (``names``, default all) that ``nbgrader_config.py`` sets one by one,
    as ``c.<section>.<name> = value``, checked against each field's type: a wrong one is a
    ``CourseError`` naming the file, the setting and what it takes."""
    found = config.get(section) if hasattr(config, "get") else None
    if not found:
        return {}
    chosen = names if names is not None else list(settings_of(cls))
    given: dict[str, Any] = {}
    for name in chosen:
        if name not in found:
            continue
        f, value = setting_field(cls, name), found[name]
        given[name] = _checked(f, value, f"nbgrader_config.py: c.{section}.{name}")
    return given


def _checked(f: Field[Any], value: Any, where: str) -> Any:
    """``value`` as field ``f`` takes it (an int for a float field is a float), or a CourseError."""
    optional = "None" in str(f.type)
    if value is None and optional:
        return None
    expected = kind(f)
    choices = f.metadata.get("choices")
    ok = (isinstance(value, bool) if expected is bool else
          isinstance(value, int) and not isinstance(value, bool) if expected is int else
          isinstance(value, int | float) and not isinstance(value, bool) if expected is float else
          isinstance(value, str) and (not choices or value in choices))
    if not ok:
        what = {bool: "True or False", int: "an integer", float: "a number (seconds, GB, ...)"}.get(
            expected, "one of " + ", ".join(map(repr, choices)) if choices else "a string")
        raise CourseError(f"{where} must be {what}{' or None' if optional else ''}, got {value!r}")
    return float(value) if expected is float else value
