"""The zh-TW edition's mechanism: English sources + gettext catalogues -> generated translated sources.

    segment.py    English text -> pieces: verbatim (code, math, labels, markers) and translatable units
    catalogue.py  one .po per page/exercise under locales/<lang>/, keyed by the English unit's hash
    checks.py     what a translation must keep: numbers, code spans/roles/math, glossary, no Simplified
    render.py     English source + catalogue -> translated source (a stale unit shows English, marked)
    __main__.py   ``python -m autograder.i18n update|check|pages``

Standard library, ``polib`` and ``opencc`` only (``check`` runs without torch or nbgrader).
"""

from autograder.course import manifest

# course.toml's editions, by gettext code; the first is the default of ``python -m autograder.i18n``
LANGUAGES = {language.gettext: {"tag": language.tag, "sphinx": language.gettext,
                                "folder": language.folder, "name": language.label}
             for language in manifest.course().languages}
DEFAULT_LANGUAGE = next(iter(LANGUAGES), "")
LOCALES_DIR = "locales"
