"""The course manifest, ``course.toml``: the chapters, the exercises and the language editions.

Every list of them in the project is read from here (``source.ASSIGNMENTS``, ``gpu_check.GPU_CHECKS``,
the warm template's imports, ``i18n.LANGUAGES``, the Makefile's editions, the site's language switch)
or generated from it (``_toc.yml``: ``outline_yaml``). Standard library only: it is the bottom layer,
read on a bare GPU box too.

    python -m autograder.course.manifest assignments|languages|hidden-modules|fonts   one per line (Makefile)
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from autograder.errors import AutograderError

MANIFEST_FILE = "course.toml"
OUTLINE_FILE = "_toc.yml"
COURSE_ROOT = Path(__file__).resolve().parents[2]  # the course's checkout, where the package lives
EXERCISE_NAME = re.compile(r"^\d\d_[a-z][a-z0-9_]*$")
IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")  # a module name
PYTHON_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ManifestError(AutograderError):
    """``course.toml`` is missing or does not say what the course needs (the message names the entry)."""


@dataclass(frozen=True)
class GpuCheck:
    function: str  # a function of the exercise's hidden module, named check_..._gpu
    target: str  # the name of the notebook object it checks


@dataclass(frozen=True)
class Exercise:
    name: str  # NN_name: solutions/<name>/<name>.py, exercises/<name>/<name>.ipynb
    hidden: str  # its module of autograder/hidden/
    chapter: str  # the page that teaches it, a docname of the outline
    gpu_checks: tuple[GpuCheck, ...] = ()

    @property
    def docname(self) -> str:
        """The exercise's page in the site (its student release)."""
        return f"exercises/{self.name}/{self.name}"


@dataclass(frozen=True)
class Language:
    gettext: str  # locales/<gettext>/, Sphinx's language
    tag: str  # BCP 47: notebook editions NN_name.<tag>.ipynb, the pages' lang attribute
    folder: str  # the site folder of the edition, _build/html/<folder>/
    label: str  # the language switch's text, in that language
    fontconfig: str = ""  # fontconfig's name of the language (``fc-list :lang=...``)
    font_package: str = ""  # the Debian package of a font that draws it


@dataclass(frozen=True)
class Manifest:
    root: str
    chapters: tuple[str, ...]
    reference: tuple[str, ...]
    exercises: tuple[Exercise, ...]
    languages: tuple[Language, ...]

    @property
    def assignments(self) -> tuple[str, ...]:
        return tuple(exercise.name for exercise in self.exercises)

    def exercise(self, name: str) -> Exercise:
        for exercise in self.exercises:
            if exercise.name == name:
                return exercise
        raise ManifestError(f"{MANIFEST_FILE}: no exercise {name!r} (known: {', '.join(self.assignments)})")


def _text(table: dict[str, Any], key: str, where: str, pattern: re.Pattern[str] | None = None) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        raise ManifestError(f"{where}: {key!r} must be a non-empty string, got {value!r}")
    if pattern is not None and not pattern.match(value):
        raise ManifestError(f"{where}: {key} = {value!r} does not match {pattern.pattern}")
    return value


def _texts(table: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ManifestError(f"{where}: {key!r} must be a list of non-empty strings, got {value!r}")
    return tuple(value)


def _exercise(table: Any, where: str) -> Exercise:
    if not isinstance(table, dict):
        raise ManifestError(f"{where}: expected a table, got {table!r}")
    name = _text(table, "name", where, EXERCISE_NAME)
    where = f"{where} ({name})"
    checks = table.get("gpu_checks", [])
    if not isinstance(checks, list):
        raise ManifestError(f"{where}: 'gpu_checks' must be a list of tables")
    gpu_checks = []
    for index, check in enumerate(checks):
        at = f"{where} gpu_checks[{index}]"
        if not isinstance(check, dict):
            raise ManifestError(f"{at}: expected {{ function = ..., target = ... }}, got {check!r}")
        function = _text(check, "function", at, re.compile(r"^check_[a-z0-9_]*_gpu$"))
        gpu_checks.append(GpuCheck(function, _text(check, "target", at, PYTHON_NAME)))
    unknown = set(table) - {"name", "hidden", "chapter", "gpu_checks"}
    if unknown:
        raise ManifestError(f"{where}: unknown keys {sorted(unknown)}")
    return Exercise(name, _text(table, "hidden", where, IDENTIFIER), _text(table, "chapter", where),
                    tuple(gpu_checks))


def _language(table: Any, where: str) -> Language:
    if not isinstance(table, dict):
        raise ManifestError(f"{where}: expected a table, got {table!r}")
    fonts = table.get("fonts", {})
    if not isinstance(fonts, dict) or set(fonts) - {"fontconfig", "debian"}:
        raise ManifestError(f"{where}: 'fonts' must be {{ fontconfig = ..., debian = ... }}, got {fonts!r}")
    unknown = set(table) - {"gettext", "tag", "folder", "label", "fonts"}
    if unknown:
        raise ManifestError(f"{where}: unknown keys {sorted(unknown)}")
    return Language(_text(table, "gettext", where, re.compile(r"^[a-z]{2,3}(_[A-Z][A-Za-z]+)?$")),
                    _text(table, "tag", where, re.compile(r"^[a-z]{2,3}(-[A-Z][A-Za-z]+)?$")),
                    _text(table, "folder", where, re.compile(r"^[a-z][a-z-]*$")),
                    _text(table, "label", where),
                    _text(fonts, "fontconfig", f"{where} fonts") if fonts else "",
                    _text(fonts, "debian", f"{where} fonts", re.compile(r"^[a-z0-9][a-z0-9.+-]+$"))
                    if fonts else "")


def parse(text: str, where: str = MANIFEST_FILE) -> Manifest:
    """The manifest in ``text``; ``where`` names it in errors."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ManifestError(f"{where}: not valid TOML: {error}") from None
    outline = data.get("outline")
    if not isinstance(outline, dict):
        raise ManifestError(f"{where}: needs an [outline] table (root, chapters, reference)")
    exercises = tuple(_exercise(t, f"{where} [[exercise]] #{i + 1}")
                      for i, t in enumerate(data.get("exercise", [])))
    languages = tuple(_language(t, f"{where} [[language]] #{i + 1}")
                      for i, t in enumerate(data.get("language", [])))
    manifest = Manifest(_text(outline, "root", f"{where} [outline]"),
                        _texts(outline, "chapters", f"{where} [outline]"),
                        _texts(outline, "reference", f"{where} [outline]"), exercises, languages)
    for label, values in (("exercise name", manifest.assignments),
                          ("hidden module", [e.hidden for e in exercises]),
                          ("language gettext", [lang.gettext for lang in languages]),
                          ("language tag", [lang.tag for lang in languages]),
                          ("language folder", [lang.folder for lang in languages])):
        repeated = sorted({v for v in values if list(values).count(v) > 1})
        if repeated:
            raise ManifestError(f"{where}: {label} used twice: {', '.join(repeated)}")
    for exercise in exercises:
        if exercise.chapter not in manifest.chapters:
            raise ManifestError(f"{where} [[exercise]] {exercise.name}: chapter {exercise.chapter!r} "
                                f"is not in [outline] chapters")
    return manifest


def load(course_root: Path = COURSE_ROOT) -> Manifest:
    """``<course_root>/course.toml``, parsed and checked."""
    path = Path(course_root) / MANIFEST_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(f"{path}: no course manifest (the autograder runs from the course's "
                            f"checkout, beside its {MANIFEST_FILE})") from None
    return parse(text, str(path))


@cache
def course() -> Manifest:
    """The manifest of the course this package belongs to (read once per process)."""
    return load(COURSE_ROOT)


def language_switch(manifest: Manifest) -> list[dict[str, str]]:
    """The English edition's links to the others (``_ext/language_switch.py``'s ``language_switch``)."""
    return [{"href": f"{language.folder}/", "label": language.label, "lang": language.tag}
            for language in manifest.languages]


def outline_yaml(manifest: Manifest) -> str:
    """``_toc.yml``'s text: the sidebar is the course outline (Lecture, Exercises, Reference)."""
    def part(caption: str, files: tuple[str, ...]) -> list[str]:
        return [f"  - caption: {caption}", "    chapters:", *(f"      - file: {f}" for f in files)]

    lines = [f"# Generated from {MANIFEST_FILE} by `autograder outline`: edit that file, not this one.",
             "# The sidebar is the course outline: Lecture, Exercises, Reference.",
             "format: jb-book", f"root: {manifest.root}", "parts:",
             *part("Lecture", manifest.chapters),
             *part("Exercises", tuple(e.docname for e in manifest.exercises)),
             *part("Reference", manifest.reference)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    lists = {"assignments": lambda m: m.assignments,
             "languages": lambda m: [lang.gettext for lang in m.languages],
             "hidden-modules": lambda m: [e.hidden for e in m.exercises],
             "fonts": lambda m: [f"{lang.fontconfig}:{lang.font_package}" for lang in m.languages
                                 if lang.font_package]}
    if len(args) != 1 or args[0] not in lists:
        print(f"usage: python -m autograder.course.manifest {'|'.join(lists)}", file=sys.stderr)
        return 2
    print("\n".join(lists[args[0]](course())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
