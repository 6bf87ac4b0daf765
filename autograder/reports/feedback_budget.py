"""Budgets for feedback pages built from student content (issue 46, class 6): what one notebook can
cost the staff's ``autograder feedback`` is bounded in size, in time per byte, and in time per student.

- **A size cap per cell**: a cell's source and each of its outputs' texts keep at most
  ``CELL_CAP_BYTES`` (UTF-8); what is cut off is named in the page: ``[truncated: N bytes over the cap
  of CELL_CAP_BYTES bytes]``. An image over ``IMAGE_CAP_BYTES`` is replaced by that line.
- **Linear rendering**: a student's markdown (every markdown cell that is not an instructor's) is shown
  as plain escaped text (``escaped_block``), never parsed as markdown or HTML. Only small rich content
  (``rich_enough``: at most ``RICH_CAP_BYTES`` and ``RICH_MAX_MARKUP`` ``<`` and ``&``) is rendered
  (markdown) and cleaned by nbconvert's sanitizer (bleach, quadratic in nesting, bounded by those
  limits); anything larger passes ``strict_clean``: one linear scan that keeps a fixed set of tags
  with at most a ``class`` of plain characters, and well-formed entities, and escapes every other
  ``<``, ``>`` and ``&``. ``clean_html`` is the page template's ``clean_html`` filter.
- **A time limit per student** (``run_limited``): each student's feedback is made in a process of its
  own, stopped after ``c.Autograder.feedback_time_limit_s`` (default ``TIME_LIMIT_S``); that student
  fails alone, with the reason, and every other student's page is written.
"""

from __future__ import annotations

import html
import multiprocessing
import os
import re
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from nbconvert.filters import clean_html as _bleach_clean_html

from autograder.errors import CourseError

CELL_CAP_BYTES = 100_000  # a cell's source, and each output's text (a released cell: well under 10 kB)
IMAGE_CAP_BYTES = 4 * 2**20  # one image output, base64
RICH_CAP_BYTES = 32 * 1024  # rendered as markdown / cleaned by bleach only up to this size...
RICH_MAX_MARKUP = 1000  # ...and with at most this many '<' and as many '&'
TIME_LIMIT_S = 300.0  # one student's feedback (all their notebooks of one assignment)
TIME_LIMIT_SETTING = "feedback_time_limit_s"  # c.Autograder.<TIME_LIMIT_SETTING>
STUDENT_TEXT_CLASS = "student-text"
STUDENT_TEXT_STYLE = f"<style>div.{STUDENT_TEXT_CLASS} {{white-space: pre-wrap;}}</style>"


def truncated(text: str, cap: int = CELL_CAP_BYTES) -> str:
    """``text`` cut to ``cap`` bytes of UTF-8, with a line saying how much was cut; else itself."""
    if len(text) <= cap // 4:  # no UTF-8 character is longer than 4 bytes
        return text
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= cap:
        return text
    kept = data[:cap].decode("utf-8", "ignore")
    return f"{kept}\n[truncated: {len(data) - cap} bytes over the cap of {cap} bytes]"


def escaped_block(text: str) -> str:
    """Student-written text as the page shows it: escaped, on one line (so the template's markdown
    pass sees one HTML block and leaves it be), nothing in it parsed; its line breaks kept by
    ``STUDENT_TEXT_STYLE`` (a ``div``, not a ``pre``: MathJax typesets the student's math)."""
    body = html.escape(text, quote=False).replace("\r", "").replace("\n", "&#10;")
    return f'<div class="{STUDENT_TEXT_CLASS}">{body}</div>'


def with_student_text_style(page: str) -> str:
    """``page`` with ``STUDENT_TEXT_STYLE`` in its head where it shows student text."""
    if f'class="{STUDENT_TEXT_CLASS}"' not in page or STUDENT_TEXT_STYLE in page:
        return page
    return page.replace("</head>", f"{STUDENT_TEXT_STYLE}\n</head>", 1)


def rich_enough(text: str) -> bool:
    """Small enough, with few enough tags and entities, for markdown and bleach (bounded cost)."""
    return (len(text) <= RICH_CAP_BYTES and text.count("<") <= RICH_MAX_MARKUP
            and text.count("&") <= RICH_MAX_MARKUP)


_KEPT_TAGS = ("a|b|blockquote|br|code|div|em|h[1-6]|hr|i|li|ol|p|pre|span|strong|table|tbody|td|th|"
              "thead|tr|ul")
# a kept tag (attributes: at most a class of plain characters) or a well-formed entity; every
# quantifier bounded, so each '<' or '&' costs at most a constant: one linear scan in all
_KEPT = re.compile(rf'<(/?)({_KEPT_TAGS})(?: class="([A-Za-z0-9_ -]{{0,200}})")?\s{{0,4}}(/?)>'
                   r"|&(?:[A-Za-z][A-Za-z0-9]{0,31}|#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6});")


def strict_clean(text: str) -> str:
    """Linear-time HTML clean-up: the tags of ``_KEPT_TAGS`` (a ``class`` of letters, digits, ``_ -``
    their only attribute) and well-formed entities are kept; every other ``<``, ``>``, ``&`` escaped."""
    out: list[str] = []
    position = 0
    for match in _KEPT.finditer(text):
        out.append(html.escape(text[position:match.start()], quote=False))
        out.append(match.group(0))
        position = match.end()
    out.append(html.escape(text[position:], quote=False))
    return "".join(out)


def clean_html(element: Any) -> str:
    """The page template's ``clean_html``: nbconvert's (bleach) where ``rich_enough``, else
    ``strict_clean`` (linear)."""
    text = element.decode() if isinstance(element, bytes) else str(element)
    return _bleach_clean_html(text) if rich_enough(text) else strict_clean(text)


def time_limit(course_config: Any) -> float:
    """``c.Autograder.feedback_time_limit_s`` (default ``TIME_LIMIT_S``), checked."""
    value = course_config.get("Autograder", {}).get(TIME_LIMIT_SETTING, TIME_LIMIT_S)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise CourseError(f"nbgrader_config.py: c.Autograder.{TIME_LIMIT_SETTING} must be a number "
                          f"of seconds > 0 (one student's feedback), got {value!r}")
    return float(value)


@dataclass
class Outcome:
    """What one limited call came to: ``value`` (its return value) or ``error`` (why not)."""

    key: Any
    value: Any = None
    error: str | None = None


def _child(connection: Connection, task: Callable[..., Any], args: tuple[Any, ...]) -> None:
    try:
        result: tuple[str, Any] = ("ok", task(*args))
    except BaseException as error:  # reported to the parent, which decides
        result = ("raised", f"{type(error).__name__}: {error}"[:2000])
    try:
        connection.send(result)
    finally:
        connection.close()


def run_limited(task: Callable[..., Any], calls: Sequence[tuple[Any, tuple[Any, ...]]], *,
                limit_s: float, processes: int = 1) -> list[Outcome]:
    """``task(*args)`` for each ``(key, args)`` of ``calls``, each in a forked process of its own
    (``processes`` at a time), stopped (SIGKILL) after ``limit_s`` seconds; one ``Outcome`` per call, in
    order. A call that overruns, dies or raises has an ``error`` naming why; the others are
    unaffected. ``task``'s return value must be picklable."""
    context = multiprocessing.get_context("fork")
    outcomes = [Outcome(key) for key, _ in calls]
    pending = list(range(len(calls)))[::-1]
    running: dict[Connection, tuple[int, Any, float]] = {}  # pipe -> (index, process, deadline)
    while pending or running:
        while pending and len(running) < max(1, processes):
            index = pending.pop()
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=_child, args=(send, task, calls[index][1]), daemon=True)
            process.start()
            send.close()
            running[receive] = (index, process, time.monotonic() + limit_s)
        soonest = min(deadline for _, _, deadline in running.values())
        for ready in wait(list(running), timeout=max(0.0, soonest - time.monotonic())):
            assert isinstance(ready, Connection)
            index, process, _ = running.pop(ready)
            try:
                kind, value = ready.recv()
            except (EOFError, OSError):
                process.join(5)
                code = process.exitcode
                why = (f"killed by signal {signal.Signals(-code).name}" if code is not None and code < 0
                       and -code in signal.valid_signals() else f"exit status {code}")
                outcomes[index].error = f"the feedback process died ({why})"
            else:
                if kind == "ok":
                    outcomes[index].value = value
                else:
                    outcomes[index].error = value
                process.join(5)
            ready.close()
        now = time.monotonic()
        for pipe, (index, process, deadline) in list(running.items()):
            if now >= deadline and not pipe.poll():
                process.kill()
                process.join(5)
                pipe.close()
                del running[pipe]
                outcomes[index].error = (f"stopped after {limit_s:g} s, the time limit for one "
                                         f"student's feedback (c.Autograder.{TIME_LIMIT_SETTING})")
    return outcomes


def default_processes() -> int:
    """Students whose feedback is made at once: the CPUs this process may use, at most 4."""
    return max(1, min(4, len(os.sched_getaffinity(0))))
