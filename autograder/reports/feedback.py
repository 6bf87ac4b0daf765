"""Per-student HTML feedback through nbgrader's GenerateFeedback: no hidden-check source, no student script.

nbgrader's converter writes ``feedback/<student>/<assignment>/<notebook>.html`` as usual. Its
preprocessor list is the course's, with four guarantees and one option added if the config lacks them:

- ``ClearHiddenTestTracebacks`` (autograder.hidden._feedback: tracebacks neither quote a hidden-test
  line nor name the hidden checks) and nbgrader's ``ClearHiddenTests`` (drops the
  ``### BEGIN/END HIDDEN TESTS`` region of each grade or locked cell: ``ClearInstructorHiddenTests``),
  in that order;
- ``TranslateTestMessages`` (right after it): a translated edition's failure messages shown in its
  language (``autograder.i18n.messages``; the scores are the gradebook's, untouched);
- ``SanitizeStudentContent``: a submission's outputs and markdown are the student's, so nothing in them
  may run in the feedback page, or cost more than its size (``feedback_budget``). Outputs keep only the
  MIME types in ``SAFE_OUTPUT_TYPES`` (no ``application/javascript``, no widget views or widget state),
  each capped (``CELL_CAP_BYTES``); HTML/SVG/markdown outputs pass the template's sanitizer
  (``HTMLExporter.sanitize_html``, its ``clean_html`` the linear one of ``feedback_budget``) when small,
  else are shown as text; a student's markdown and raw cells are shown as escaped text
  (``escaped_block``); an instructor's markdown holding raw HTML is rendered and sanitized here;
- ``NameMisconception`` (before the last): with ``c.Autograder.feedback_names_misconception = True``
  (default False) the page opens with one sentence naming the misconception the submission looks like
  (``autograder.reports.feedback_misconception``: a name only, in the notebook's language);
- ``CheckNoHiddenSource`` (last): instructor-derived text — the source and error outputs of grade and
  locked cells — must show no hidden-check source (``autograder.course.source.HIDDEN_SOURCE_TEXT``: the
  hidden-test markers, the checks' module path); a student's own cell printing ``BEGIN HIDDEN TESTS``
  is the student's text and never counts.

MathJax never comes from a CDN (nbgrader's feedback template hard-codes cdnjs, so a page read offline,
or where cdnjs is blocked, showed raw TeX): after nbgrader writes a page, ``local_mathjax`` takes the
CDN's script out. A page with no math loads no MathJax at all; a page with math carries MathJax 3
inline (``tex-svg-full.js`` of django-static-mathjax, the package the site serves its own copy from:
SVG output, no font files, ~2.3 MB), since ``nbgrader release_feedback`` hands back the HTML file
alone. ``c.Autograder.feedback_mathjax_url = "https://<site>/_static/mathjax/tex-mml-chtml.js"``
points the pages at the course site's copy instead (small pages, but the reader needs that site).

A student whose feedback fails (a leak, an unreadable notebook, any exception, a process that dies or
runs past ``c.Autograder.feedback_time_limit_s``: each student's feedback is made in a forked process
of its own, ``feedback_budget.run_limited``) fails alone: that student's page is removed, the others are
written, and ``feedback`` returns the pages with a ``failed`` list of ``(assignment, student, reason)``.
"""

from __future__ import annotations

import copy
import glob
import html
import os
import re
from collections.abc import Sequence
from pathlib import Path

from nbconvert.filters import markdown2html
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor, Preprocessor
from nbformat.v4 import new_output
from nbgrader.converters import GenerateFeedback
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import ClearHiddenTests, GetGrades
from traitlets import Bool
from traitlets.config import Config

from autograder.course.nbgrader import load_course
from autograder.course.source import HIDDEN_SOURCE_TEXT, shows_hidden_source
from autograder.errors import AutograderError, CourseError
from autograder.hidden._feedback import ClearHiddenTestTracebacks
from autograder.i18n.messages import language_code, notebook_language, translate_output
from autograder.reports.feedback_budget import (
    CELL_CAP_BYTES,
    IMAGE_CAP_BYTES,
    clean_html,
    default_processes,
    escaped_block,
    rich_enough,
    run_limited,
    time_limit,
    truncated,
    with_student_text_style,
)
from autograder.reports.feedback_misconception import NameMisconception, named_students
from autograder.reports.feedback_misconception import enabled as names_misconceptions

HIDDEN_MARKERS = HIDDEN_SOURCE_TEXT  # what feedback must never show (autograder.course.source)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# What a feedback page may render from a student's output (each is escaped or sanitized by nbconvert).
SAFE_OUTPUT_TYPES = frozenset({"text/plain", "text/html", "text/markdown", "text/latex",
                               "image/png", "image/jpeg", "image/svg+xml"})
MAX_OUTPUTS = 100  # per code cell; the rest is one line saying how many were left out


MATHJAX_SETTING = "feedback_mathjax_url"  # c.Autograder.<MATHJAX_SETTING> in nbgrader_config.py
MATHJAX_FILE = "tex-svg-full.js"  # self-contained: every TeX package, SVG output (no font files)
# nbgrader's feedback template: base/mathjax.html.j2's block, with its cdnjs URL
_MATHJAX_BLOCK = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)
_CDN_SCRIPT = re.compile(r"<script[^>]*\bsrc=[\"']https://cdnjs\.cloudflare\.com/[^\"']*mathjax[^\"']*[\"']"
                         r"[^>]*>\s*</script>", re.I)
_SCRIPT_OR_STYLE = re.compile(r"<(script|style)\b.*?</\1>", re.S | re.I)
_MATH = re.compile(r"\$|\\\(|\\\[|\\begin\{")
_MATHJAX_CONFIG = ("<script>window.MathJax = {tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], "
                   "displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']], processEscapes: true, "
                   "processEnvironments: true}, options: {ignoreHtmlClass: 'tex2jax_ignore', "
                   "processHtmlClass: 'tex2jax_process'}, loader: {load: []}};</script>")


def mathjax_script(url: str | None = None) -> str:
    """The MathJax 3 a feedback page loads: from ``url``, or inline (module docstring)."""
    if url:
        return f"{_MATHJAX_CONFIG}\n<script src=\"{html.escape(url, quote=True)}\"></script>"
    try:
        import mathjax  # type: ignore[import-untyped]  # django-static-mathjax, as _ext/offline_site.py
    except ImportError:
        raise CourseError("feedback pages need MathJax and it is not installed: pip install "
                          f"django-static-mathjax, or set c.Autograder.{MATHJAX_SETTING}") from None
    path = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5" / MATHJAX_FILE
    if not path.is_file():
        raise CourseError(f"expected MathJax at {path}, not found: reinstall django-static-mathjax "
                          f"or set c.Autograder.{MATHJAX_SETTING}")
    code = path.read_text(encoding="utf-8").replace("</script", "<\\/script")
    return f"{_MATHJAX_CONFIG}\n<script>{code}</script>"


def has_math(page: str) -> bool:
    """Whether a feedback page's text (scripts and styles left out) holds TeX delimiters."""
    return bool(_MATH.search(_SCRIPT_OR_STYLE.sub("", _MATHJAX_BLOCK.sub("", page))))


def local_mathjax(page: str, url: str | None = None) -> str:
    """``page`` (nbgrader's feedback HTML) without the CDN's MathJax: none where it has no math,
    else ``mathjax_script(url)`` in its place."""
    stripped = _CDN_SCRIPT.sub("", _MATHJAX_BLOCK.sub("", page))
    if stripped == page or not has_math(stripped):
        return stripped
    script = mathjax_script(url)
    return stripped.replace("</head>", f"{script}\n</head>", 1) if "</head>" in stripped \
        else script + stripped


def mathjax_url(course) -> str | None:
    """``c.Autograder.feedback_mathjax_url`` (None: inline)."""
    value = course.config.get("Autograder", {}).get(MATHJAX_SETTING)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise CourseError(f"nbgrader_config.py: c.Autograder.{MATHJAX_SETTING} must be a URL of "
                          f"MathJax 3 (e.g. https://<site>/_static/mathjax/tex-mml-chtml.js), got "
                          f"{value!r}")
    return value.strip() if value else None


class FeedbackLeak(AutograderError):
    """A feedback file would show hidden-check source to a student."""


class FeedbackPages(list):
    """The feedback HTML files written (a list of paths), plus ``failed``: one
    ``(assignment, student, reason)`` for each student whose feedback could not be written."""

    def __init__(self, pages=(), failed=()):
        super().__init__(pages)
        self.failed: list[tuple[str, str, str]] = list(failed)


def _instructor_cell(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return isinstance(meta, dict) and bool(meta.get("grade") or (meta.get("locked")
                                                                 and not meta.get("solution")))


def _instructor_text(cell) -> bool:
    """A markdown or raw cell the instructor wrote (locked, not a solution, or a task); every other
    one — a written answer, a cell the student added — is student-written."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return isinstance(meta, dict) and bool(meta.get("task") or (meta.get("locked")
                                                                and not meta.get("solution")))


def _text(value) -> str:
    return "".join(map(str, value)) if isinstance(value, list) else str(value)


def _bound_output(output) -> None:
    """One output within the budget (``feedback_budget``): the safe MIME types only, each text
    capped, rich content too large to render linearly shown as its text, escaped."""
    if "data" in output:
        data = {}
        for key, value in output["data"].items():
            if key not in SAFE_OUTPUT_TYPES:
                continue
            text = _text(value)
            if key in ("image/png", "image/jpeg"):
                if len(text) <= IMAGE_CAP_BYTES:
                    data[key] = text
                else:
                    data.setdefault("text/plain", f"[an image of {len(text)} bytes, over the cap "
                                                  f"of {IMAGE_CAP_BYTES} bytes: not shown]")
            elif key == "text/plain":
                data[key] = truncated(text)
            elif rich_enough(text):
                data[key] = text
            else:  # too large to render in bounded time: shown as text, escaped
                data.setdefault("text/plain", truncated(text))
        if "text/plain" in output["data"] and "text/plain" in data:
            data["text/plain"] = truncated(_text(output["data"]["text/plain"]))
        output["data"] = data
    if "text" in output:
        output["text"] = truncated(_text(output["text"]))
    if "evalue" in output:
        output["evalue"] = truncated(str(output["evalue"]))
    if isinstance(output.get("traceback"), list):
        kept, size = [], 0
        for line in map(str, output["traceback"]):
            size += len(line.encode("utf-8", "surrogatepass")) + 1
            if size > CELL_CAP_BYTES:
                kept.append(truncated(line, max(0, CELL_CAP_BYTES - (size - len(line) - 1))))
                break
            kept.append(line)
        output["traceback"] = kept
    output["metadata"] = {}


class SanitizeStudentContent(Preprocessor):
    """Nothing from a submission runs in its feedback page, and nothing in it costs more than its
    size allows (see the module docstring and ``autograder.reports.feedback_budget``)."""

    enabled = Bool(True, help="nbconvert skips preprocessors that are not enabled").tag(config=True)

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        cell.pop("attachments", None)
        source = truncated(_text(cell.get("source", "")))
        if cell.cell_type == "code":
            cell.source = source
            outputs = cell.get("outputs", [])
            if len(outputs) > MAX_OUTPUTS:
                dropped = len(outputs) - MAX_OUTPUTS
                outputs[MAX_OUTPUTS:] = [new_output("stream", name="stdout", text=(
                    f"[truncated: {dropped} more outputs, over the cap of {MAX_OUTPUTS} outputs "
                    "per cell]"))]
            for output in outputs:
                _bound_output(output)
        elif cell.cell_type == "markdown":
            if not _instructor_text(cell) or not rich_enough(source):
                cell.source = escaped_block(source)  # the student's words, as they wrote them
            elif "<" in source or "javascript:" in source.lower():
                # rendered and sanitized here, kept on one line so the template's markdown pass
                # leaves it be
                cleaned = clean_html(markdown2html(source)).replace("\n", "&#10;")
                cell.source = f"<div>{cleaned}</div>"
            else:
                cell.source = source
        else:  # raw, or any other
            cell.metadata.pop("raw_mimetype", None)
            cell.metadata.pop("format", None)
            cell.source = escaped_block(source)
        return cell, resources


class TranslateTestMessages(Preprocessor):
    """A translated edition's failure messages in its language (``autograder.i18n.messages``): the
    error outputs of a notebook whose ``metadata.course.language`` is a course language other than
    English. Only what a message shows changes; scores are the gradebook's. Run after
    ClearHiddenTestTracebacks."""

    enabled = Bool(True, help="nbconvert skips preprocessors that are not enabled").tag(config=True)

    def preprocess(self, nb, resources):
        self._language = language_code(notebook_language(nb))
        if self._language is None:
            return nb, resources
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code":
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    translate_output(output, self._language)
        return cell, resources


class CheckNoHiddenSource(Preprocessor):
    """Raise FeedbackLeak when instructor-derived text (source and error outputs of grade and locked
    cells) still shows hidden-check source; run after ClearHiddenTests."""

    enabled = Bool(True, help="nbconvert skips preprocessors that are not enabled").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if not _instructor_cell(cell):
            return cell, resources
        texts = [cell.get("source", "")]
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                texts += [str(output.get("evalue", "")), *map(str, output.get("traceback", []))]
        found = shows_hidden_source(_ANSI.sub("", "\n".join(texts)))
        if found:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", index)
            raise FeedbackLeak(f"cell {grade_id!r} would show hidden-check source ({found!r})")
        return cell, resources


class ClearInstructorHiddenTests(ClearHiddenTests):
    """nbgrader's ClearHiddenTests on grade and locked cells only: a student's own cell that prints
    ``BEGIN HIDDEN TESTS`` is the student's text (nbgrader would fail on its missing end marker)."""

    def preprocess_cell(self, cell, resources, cell_index):
        if not _instructor_cell(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)


class _GenerateFeedback(GenerateFeedback):
    """nbgrader's converter, remembering which student's notebook failed and why (it logs the
    traceback, removes that student's feedback and goes on with the others, then raises)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.failures: list[tuple[str, str, str]] = []
        self._current = ("?", "?")

    def init_destination(self, assignment_id, student_id):
        self._current = (assignment_id, student_id)
        try:
            return super().init_destination(assignment_id, student_id)
        except Exception as error:
            self._fail(error)
            raise

    def convert_single_notebook(self, notebook_filename):
        try:
            super().convert_single_notebook(notebook_filename)
        except Exception as error:
            self._fail(error, Path(notebook_filename).name)
            raise

    def _fail(self, error: BaseException, notebook: str | None = None) -> None:
        where = f"{notebook}: " if notebook else ""
        self.failures.append((*self._current, f"{where}{type(error).__name__}: {error}"[:500]))


def feedback_config(base: Config) -> Config:
    """The course config with GenerateFeedback guaranteed to hide hidden tests and student script."""
    config = copy.deepcopy(base)
    configured = list(config.GenerateFeedback.get(
        "preprocessors", [GetGrades, CSSHTMLHeaderPreprocessor]))
    if ClearHiddenTests in configured:  # on instructor cells only (ClearInstructorHiddenTests)
        configured[configured.index(ClearHiddenTests)] = ClearInstructorHiddenTests
    if ClearInstructorHiddenTests not in configured:
        configured.insert(1, ClearInstructorHiddenTests)
    if ClearHiddenTestTracebacks not in configured:
        configured.insert(configured.index(ClearInstructorHiddenTests), ClearHiddenTestTracebacks)
    if TranslateTestMessages not in configured:
        configured.insert(configured.index(ClearHiddenTestTracebacks) + 1, TranslateTestMessages)
    if SanitizeStudentContent not in configured:
        configured.insert(0, SanitizeStudentContent)
    for last in (NameMisconception, CheckNoHiddenSource):
        if last in configured:
            configured.remove(last)
        configured.append(last)
    config.GenerateFeedback.preprocessors = configured
    config.ClearHiddenTests.enforce_metadata = False  # feedback is not a release: don't re-validate
    config.HTMLExporter.sanitize_html = True  # student HTML, SVG and markdown outputs: no script
    # the template's sanitizer in bounded time: bleach on small content only (feedback_budget)
    config.HTMLExporter.filters = {**config.HTMLExporter.get("filters", {}), "clean_html": clean_html}
    return config


def _student_feedback(base: Config, name: str, student: str, named: dict,
                      force: bool) -> tuple[str, object]:
    """One student's feedback for ``name`` (run in a process of its own, ``run_limited``):
    ``("ok", failures)``, or ``("fatal", message)`` when nbgrader could not run at all."""
    config = feedback_config(base)
    config.NameMisconception.names = named
    config.CourseDirectory.assignment_id = name
    config.CourseDirectory.student_id = student
    converter = _GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    converter.force = force
    try:
        converter.start()
    except Exception as error:  # nbgrader raises NbGraderException after logging
        if not converter.failures:  # not one student's: the run itself cannot go on
            return "fatal", (f"nbgrader generate_feedback {name} (student {student}) failed: "
                             f"{error}")
    return "ok", converter.failures


def _remove_pages(course, name: str, student: str) -> None:
    """A student whose feedback was stopped has no page (as nbgrader leaves one that failed)."""
    folder = course.coursedir.format_path(course.coursedir.feedback_directory, student, name)
    for page in glob.glob(os.path.join(folder, "*.html")):
        os.unlink(page)


def feedback(*, assignments: Sequence[str] | None = None, students: Sequence[str] | None = None,
             course_root: Path = Path("."), db_url: str | None = None,
             force: bool = True, time_limit_s: float | None = None,
             processes: int | None = None) -> FeedbackPages:
    """Write HTML feedback for autograded submissions; return the HTML files of those assignments
    (``.failed`` lists the students whose feedback failed, with why; the others are written).

    ``assignments``: default every assignment with autograded submissions; ``students``: default all.
    Each student's feedback is made in a process of its own (``processes`` at once, default
    ``feedback_budget.default_processes()``), stopped after ``time_limit_s`` (default
    ``c.Autograder.feedback_time_limit_s``, else 300 s): that student fails alone.
    """
    course = load_course(course_root, db_url=db_url)
    limit = time_limit(course.config) if time_limit_s is None else time_limit_s
    names = list(assignments) if assignments else _autograded_assignments(course)
    written: list[Path] = []
    failed: list[tuple[str, str, str]] = []
    for name in names:
        course.require_assignment(name)
        chosen = list(students) if students else _autograded_students(course, name)
        named = named_students(course, name, students or course.submitted_students(name)) \
            if names_misconceptions(course) else {}
        outcomes = run_limited(_student_feedback,
                               [(student, (course.config, name, student, named, force))
                                for student in chosen],
                               limit_s=limit, processes=processes or default_processes())
        for outcome in outcomes:
            if outcome.error is not None:
                failed.append((name, outcome.key, outcome.error))
                _remove_pages(course, name, outcome.key)
                continue
            kind, detail = outcome.value
            if kind == "fatal":
                raise AutograderError(str(detail))
            failed += detail
        pattern = course.coursedir.format_path(course.coursedir.feedback_directory, "*", name)
        written += sorted(Path(p) for p in glob.glob(os.path.join(pattern, "*.html")))
    if students:
        written = [p for p in written if any(f"/{s}/" in str(p) for s in students)]
    url = mathjax_url(course)
    for page in written:
        text = page.read_text(encoding="utf-8")
        served = local_mathjax(with_student_text_style(text), url)
        if served != text:
            page.write_text(served, encoding="utf-8")
    return FeedbackPages(written, failed)


def _autograded_students(course, name: str) -> list[str]:
    """The students with an autograded submission of ``name`` (each gets feedback on their own)."""
    pattern = course.coursedir.format_path(course.coursedir.autograded_directory, "*", name)
    prefix, _, suffix = pattern.partition("*")
    found = []
    for folder in glob.glob(pattern):
        if os.path.isdir(folder) and folder.startswith(prefix) and folder.endswith(suffix):
            found.append(folder[len(prefix):len(folder) - len(suffix)])
    return sorted(found)


def _autograded_assignments(course) -> list[str]:
    known = course.gradebook_assignments()
    return [a for a in known if glob.glob(course.coursedir.format_path(
        course.coursedir.autograded_directory, "*", a))]
