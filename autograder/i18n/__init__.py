"""The zh-TW edition's mechanism: English sources + gettext catalogues -> generated translated sources.

    segment.py    English text -> pieces: verbatim (code, math, labels, markers) and translatable units
    catalogue.py  one .po per page/exercise under locales/<lang>/, keyed by the English unit's hash
    checks.py     what a translation must keep: numbers, code spans/roles/math, glossary, no Simplified
    render.py     English source + catalogue -> translated source (a stale unit shows English, marked)
    __main__.py   ``python -m autograder.i18n update|check|pages``

Standard library, ``polib`` and ``opencc`` only (``check`` runs without torch or nbgrader).
"""

LANGUAGES = {"zh_TW": {"tag": "zh-TW", "sphinx": "zh_TW", "folder": "zh-tw", "name": "繁體中文"}}
DEFAULT_LANGUAGE = "zh_TW"
LOCALES_DIR = "locales"
