"""Leak check: nothing students must not see in a folder they are shown (a student edition, a built site).

    autograder leak-check PATH...        (secrets read from --course-root; exit status 1 on any finding)

What counts as a leak, and where it comes from (the course root's own files):

- a line of a solution block (``### BEGIN SOLUTION`` .. ``### END SOLUTION``) of ``solutions/*/*.py``;
- a line of a hidden-test region (``### BEGIN HIDDEN TESTS`` .. ``### END HIDDEN TESTS``) there;
- a source line of a hidden check, ``autograder/hidden/*.py``;
- instructor-only names: a file or folder such as ``solutions/``, ``autograder/``, ``tests/``,
  ``gradebook.db``, ``nbgrader_config.py`` or ``submitted/``; in text, the region markers, the hidden
  checks' module path (``autograder.hidden``), the marks of the class reports (``autograder.authoring.staff_only``:
  a similarity or misconceptions CSV's header, the staff pages' opening sentence) and ``extra_text``
  (publish passes the instructor repository's URLs).

Public lines never count: trivial ones (``is_trivial``: blank, comment-only, shorter than
``MIN_CHARS`` characters once whitespace is collapsed such as ``return x``, ``pass``, ``)``, ``else:``,
and imports of public packages), lines the exercise sources show students outside their secret
regions, and lines the lecture pages themselves teach (``LECTURE_GLOBS``: chapter 09 writes its own
AdaGrad loop, ``for p in group["params"]:`` and all; a lecture page is public by the instructor's
choice, so the check guards the way material is published, not what the lecture decides to show).

Translations (``find_translation_leaks``): every msgstr of the catalogues ``locales/*/**/*.po`` is
searched for a secret line anywhere inside it (a translation is prose, where code sits mid-line) that
its English does not show, and for the instructor-only text; the pages and notebooks generated from them are also checked as files.

Where it looks: every file under each PATH, ``.git`` folders excepted. Notebooks and JSON are read
line by line with each JSON string decoded; HTML with its tags stripped (code blocks keep one source
line per HTML line); binary files only by name. Each finding names the file and line.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from autograder.authoring.staff_only import MARKS as STAFF_ONLY_MARKS
from autograder.course.source import (
    HIDDEN_CHECKS_DIR,
    HIDDEN_SOURCE_TEXT,
    SOLUTION_MARKERS,
    SOURCES_GLOB,
    regions,
)
from autograder.errors import PublishError

LECTURE_GLOBS = ("intro.md", "chapters/*.md", "chapters/*.py")  # the pages and their helpers

# Shorter than this (whitespace collapsed) is generic code: `return x`, `pass`, `)`, `n = len(xs)`.
MIN_CHARS = 16
# Text that only the instructor's material holds (region markers, the hidden checks' import path).
INSTRUCTOR_ONLY_TEXT = (
    *(m.removeprefix("### ") for m in SOLUTION_MARKERS), *HIDDEN_SOURCE_TEXT, "catalogue/",
    *STAFF_ONLY_MARKS,  # a class report copied out of reports/ (autograder.authoring.staff_only)
)
# File or folder names that belong to the instructor's repository only (any path component).
INSTRUCTOR_ONLY_NAMES = frozenset({
    "solutions", "autograder", "tests", "catalogue", "benchmarks", ".ci",
    "nbgrader_config.py", "gradebook.db", "grade-gpu.yml", "requirements.lock",
    "submitted", "autograded", "feedback", "reports",
})
SKIPPED_DIRS = frozenset({".git"})

_IMPORT = re.compile(r"^(from\s+[\w.]+\s+)?import\s")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")
_JSON_STRING = re.compile(r'^\s*("(?:[^"\\]|\\.)*")\s*[,:]?\s*$')


@dataclass(frozen=True)
class Secret:
    """A line students must not see: its kind and where the course holds it (``file:line``)."""

    kind: str  # "solution", "hidden test" or "hidden check"
    origin: str


@dataclass(frozen=True)
class Leak:
    """One finding: the file, the line (0 for a file that must not be there at all) and what it is."""

    path: Path
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}" if self.line else f"{self.path}: {self.what}"


def normalize(line: str) -> str:
    """A line as it is compared: ANSI colours dropped, outer whitespace stripped, inner runs collapsed."""
    return _SPACE.sub(" ", _ANSI.sub("", line)).strip()


def is_trivial(text: str) -> bool:
    """True for a normalized line that gives nothing away (see the module docstring)."""
    return (len(text) < MIN_CHARS or text.startswith("#")
            or (_IMPORT.match(text) is not None and "autograder" not in text))


def course_secrets(course_root: Path = Path(".")) -> dict[str, Secret]:
    """Normalized secret line -> its first origin, for every line of the course's solution blocks,
    hidden-test regions and hidden-check modules that is not public (see the module docstring)."""
    root = Path(course_root)
    secrets: dict[str, Secret] = {}
    shown: set[str] = set()  # what the exercise sources show students anyway (outside the regions)

    def add(text: str, kind: str, origin: str) -> None:
        if not is_trivial(text) and text not in secrets:
            secrets[text] = Secret(kind, origin)

    sources = sorted(root.glob(SOURCES_GLOB))
    if not sources:
        raise PublishError(f"{root.resolve()}: no exercise sources ({SOURCES_GLOB}) to take the "
                           "secrets from; pass the course root")
    for source in sources:
        for index, raw, region in regions(source.read_text(encoding="utf-8").splitlines()):
            text = normalize(raw)
            if region:
                add(text, region, f"{source.relative_to(root)}:{index + 1}")
            else:
                shown.add(text)
    for module in sorted((root / HIDDEN_CHECKS_DIR).glob("*.py")):
        for number, raw in enumerate(module.read_text(encoding="utf-8").splitlines(), start=1):
            add(normalize(raw), "hidden check", f"{module.relative_to(root)}:{number}")
    for pattern in LECTURE_GLOBS:
        for page in sorted(root.glob(pattern)):
            shown.update(normalize(line) for line in page.read_text(encoding="utf-8").splitlines())
    return {text: secret for text, secret in secrets.items() if text not in shown}


def find_leaks(*, paths: Sequence[Path], course_root: Path = Path("."),
               extra_text: Iterable[str] = ()) -> list[Leak]:
    """Every leak under ``paths`` (folders or files), in path order, then line order.

    ``extra_text``: further strings that must not appear (e.g. the instructor repository's URL; a
    match must end where a name ends, so ``.../course`` does not match ``.../course-student``).
    """
    secrets = course_secrets(course_root)
    forbidden = [(text, re.compile(re.escape(text) + r"(?![\w-])"))
                 for text in (*INSTRUCTOR_ONLY_TEXT, *(t for t in extra_text if t))]
    leaks: list[Leak] = []
    for top in paths:
        top = Path(top)
        if not top.exists():
            raise PublishError(f"leak check: {top} does not exist")
        for path in _files(top):
            relative = path.relative_to(top).parts if top.is_dir() else ()
            named = [part for part in relative if part in INSTRUCTOR_ONLY_NAMES]
            if named:
                leaks.append(Leak(path, 0, f"instructor-only file name {named[0]!r}"))
            leaks += _leaks_in_file(path, secrets, forbidden)
    return leaks


def find_translation_leaks(*, course_root: Path = Path(".")) -> list[Leak]:
    """Every msgstr of the course's catalogues that holds a secret line or instructor-only text."""
    import polib

    from autograder.i18n import LOCALES_DIR

    root = Path(course_root)
    secrets = course_secrets(root)
    leaks: list[Leak] = []
    for path in sorted((root / LOCALES_DIR).rglob("*.po")):
        for entry in polib.pofile(str(path)):
            translated, english = normalize(entry.msgstr), normalize(entry.msgid)
            if not translated:
                continue
            found = [f"instructor-only text {t!r}" for t in INSTRUCTOR_ONLY_TEXT if t in translated]
            found += [f"{secret.kind} line from {secret.origin}: {text!r}"  # unless the English shows it
                      for text, secret in secrets.items() if text in translated and text not in english]
            leaks += [Leak(path, entry.linenum, what) for what in found]
    return leaks


def _files(top: Path) -> Iterator[Path]:
    """Files under ``top`` (or ``top`` itself) in a fixed order, skipping .git folders."""
    if top.is_file():
        yield top
        return
    for path in sorted(top.rglob("*")):
        if path.is_file() and not SKIPPED_DIRS.intersection(path.relative_to(top).parts):
            yield path


def _leaks_in_file(path: Path, secrets: dict[str, Secret],
                   forbidden: list[tuple[str, re.Pattern[str]]]) -> list[Leak]:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return []  # binary: judged by its name only
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    suffix = path.suffix.lower()
    leaks = []
    for number, raw in enumerate(text.splitlines(), start=1):
        for piece in _readable(raw, suffix):
            for text, pattern in forbidden:
                if pattern.search(piece):
                    leaks.append(Leak(path, number, f"instructor-only text {text!r}"))
            for line in piece.split("\n"):
                secret = secrets.get(normalize(line))
                if secret is not None:
                    leaks.append(Leak(path, number, f"{secret.kind} line from {secret.origin}: "
                                                    f"{normalize(line)!r}"))
    return list(dict.fromkeys(leaks))  # one report per finding, even if a line decodes twice


def _readable(raw: str, suffix: str) -> list[str]:
    """What a reader sees of one line of a file: the line itself, its URL-decoded form (links), and
    for HTML its text without tags, for notebooks/JSON the decoded string it holds."""
    pieces = [raw]
    if "%" in raw:
        pieces.append(unquote(raw))
    if suffix in {".html", ".htm"}:
        pieces.append(html.unescape(_TAG.sub("", raw)))
    elif suffix in {".ipynb", ".json"}:
        match = _JSON_STRING.match(raw)
        if match:
            try:
                pieces.append(json.loads(match.group(1)))
            except json.JSONDecodeError:
                pass
    return pieces
