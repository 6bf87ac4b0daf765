"""The student pages' language: the reader's (``Accept-Language``, or ``?lang=`` kept in a cookie),
their fixed strings from ``locales/<lang>/messages.po`` (``autograder.i18n.messages`` extracts every
``_("...")`` of ``handlers.py``, ``pages.py`` and the templates into it; whole sentences, ``{field}`` placeholders filled
in after the translation), and dates as that language writes them.

English, or the course's zh-TW edition for ``zh-TW``, ``zh-Hant``, ``zh-HK``, ``zh-MO`` and a bare
``zh``. The web process reads the catalogue with ``polib`` only (no grading engine, no i18n pipeline).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import polib

ENGLISH = "en"
CHINESE = "zh_TW"
LANGUAGES = {ENGLISH: "en", CHINESE: "zh-Hant-TW"}  # gettext code -> <html lang>
COOKIE = "autograder-lang"
_CHINESE_TAGS = ("zh-tw", "zh-hant", "zh-hk", "zh-mo", "zh")
ROOT = Path(__file__).resolve().parents[2]


def _tag_language(tag: str) -> str | None:
    tag = tag.strip().lower().replace("_", "-")
    if tag in ("zh-cn", "zh-sg", "zh-hans") or tag.startswith(("zh-hans-", "zh-cn-")):
        return None  # Simplified: the course has no such edition
    if tag == "zh" or tag.startswith(_CHINESE_TAGS[:-1]) or tag.startswith("zh-"):
        return CHINESE
    if tag == "en" or tag.startswith("en-"):
        return ENGLISH
    return None


def from_accept_language(header: str | None) -> str:
    """The first language of ``Accept-Language`` (by q, then order) the pages have; else English."""
    ranked: list[tuple[float, int, str]] = []
    for place, item in enumerate((header or "").split(",")):
        tag, _, params = item.partition(";")
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if tag.strip() and q > 0:
            ranked.append((-q, place, tag))
    for _, _, tag in sorted(ranked):
        found = _tag_language(tag)
        if found is not None:
            return found
    return ENGLISH


def chosen(query: str | None, header: str | None) -> str | None:
    """A language named by ``?lang=`` (or the cookie it set), or None when it names none."""
    if not query:
        return None
    query = query.strip()
    if query in LANGUAGES:
        return query
    return _tag_language(query)


@functools.lru_cache(maxsize=4)
def catalogue(language: str, root: Path = ROOT) -> dict[str, str]:
    """English -> translation, the translated live entries of the language's ``messages.po``."""
    path = root / "locales" / language / "messages.po"
    if language == ENGLISH or not path.is_file():
        return {}
    return {e.msgid: e.msgstr for e in polib.pofile(str(path))
            if not e.obsolete and e.msgstr.strip() and "fuzzy" not in e.flags}


def translator(language: str) -> Callable[..., str]:
    """``_(english, **fields)``: the sentence in ``language``, its ``{field}`` filled in."""
    table = catalogue(language)

    def _(english: str, **fields: object) -> str:
        text = table.get(english, english)
        return text.format(**fields) if fields else text
    return _


def shown_time(when: datetime | None, language: str) -> str | None:
    """A stored time (naive UTC) as the language writes it: ``4 Dec 2026, 23:59 UTC`` or
    ``2026 年 12 月 4 日 23:59 (UTC)``."""
    if when is None:
        return None
    if language == CHINESE:
        return f"{when.year} 年 {when.month} 月 {when.day} 日 {when:%H:%M} (UTC)"
    return f"{when.day} {when:%b %Y, %H:%M} UTC"


REASONS_JOINED = "; "  # how the worker stores a submission's several reasons (worker.py)
_JOINED_SHOWN = {CHINESE: "；"}
# a time as ``policy.human_time`` writes it into a reason ("15 Oct 2026, 23:59 UTC")
_ENGLISH_TIME = re.compile(r"\b(\d{1,2}) (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (\d{4}), "
                           r"(\d{2}):(\d{2}) UTC\b")


def reason(text: str | None, language: str | None) -> str | None:
    """A reason the service stored or made in English (a refused upload, why a submission waits or
    was not graded, a notice beside its grade) in ``language``: matched against the reason templates
    of ``messages.po`` by ``autograder.i18n.messages.translate`` (``REASON_SOURCES``); as it is where
    none matches. Several reasons stored as one (joined by ``"; "``, though a reason may hold one
    too) are cut where that leaves the fewest English words, each part translated whole; a time
    in it is written as ``shown_time`` writes it."""
    if not text or language in (None, ENGLISH) or language not in LANGUAGES:
        return text
    from autograder.i18n.messages import _english_words, translate

    pieces = text.split(REASONS_JOINED)
    # best[i]: (English words left, parts) for the first i pieces
    best: list[tuple[int, list[str]]] = [(0, [])]
    for end in range(1, len(pieces) + 1):
        options = []
        for start in range(end):
            shown = translate(REASONS_JOINED.join(pieces[start:end]), language)
            words, parts = best[start]
            options.append((words + _english_words(shown), len(parts) + 1, parts + [shown]))
        words, _, parts = min(options, key=lambda option: option[:2])
        best.append((words, parts))
    joined = _JOINED_SHOWN.get(language, REASONS_JOINED).join(best[-1][1])
    return _ENGLISH_TIME.sub(lambda m: shown_time(datetime.strptime(m.group(0), "%d %b %Y, %H:%M UTC"),
                                                  language) or m.group(0), joined)
