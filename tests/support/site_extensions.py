"""The site's Sphinx extensions (``_ext/``, not a package) imported by name for the tests."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

EXT = Path(__file__).resolve().parents[2] / "_ext"


def extension(name: str) -> ModuleType:
    """``_ext/<name>.py`` as a module (``_ext`` on ``sys.path`` only while it is imported)."""
    sys.path.insert(0, str(EXT))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(EXT))
