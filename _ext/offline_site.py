"""Sphinx extension: a built site that works with no internet and a clean browser console.

Three fixes, each found by tests/test_site_browser.py in headless chromium:

1. MathJax is served from the site itself (`_static/mathjax/`), copied from the PyPI package
   django-static-mathjax (MathJax 3.2.2, no dependencies), instead of a CDN: offline readers, CI and
   air-gapped course servers still get typeset math.
2. Inline <script> bodies are written once. Sphinx 7.4 writes those added after builder init twice
   (fixed upstream in Sphinx 8.2, sphinx-doc/sphinx#13402; jupyter-book 1.x needs sphinx 7), which
   makes every page throw "Identifier 'THEBE_JS_URL' has already been declared".
3. pydata-sphinx-theme's colour mode defaults to "auto": without html_context["default_mode"] a
   first visit logs "Got invalid theme mode: ." as a console error.

Enable in _config.yml:  sphinx: {local_extensions: {offline_site: _ext}}.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.errors import ExtensionError

MATHJAX_ENTRY = "tex-mml-chtml.js"
# What tex-mml-chtml.js loads at run time: TeX extensions (autoload), CHTML fonts, menu, a11y.
MATHJAX_PARTS = (MATHJAX_ENTRY, "input", "output/chtml", "ui", "a11y", "sre")


def mathjax_es5_dir() -> Path:
    """The MathJax 3 `es5` folder shipped by django-static-mathjax, or a clear error."""
    try:
        import mathjax  # the django-static-mathjax distribution's package
    except ImportError as exc:
        raise ExtensionError(
            "offline_site: MathJax is not installed; `pip install django-static-mathjax` "
            "(it is in requirements.lock)"
        ) from exc
    es5 = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    if not (es5 / MATHJAX_ENTRY).is_file():
        raise ExtensionError(f"offline_site: expected MathJax at {es5 / MATHJAX_ENTRY}, not found")
    return es5


def use_local_mathjax(app, config) -> None:
    """Point Sphinx's MathJax at the copy under _static/ and default the colour mode."""
    mathjax_es5_dir()  # fail early, before any page is read
    config.mathjax_path = f"mathjax/{MATHJAX_ENTRY}"
    config.html_context = {"default_mode": "auto", **(config.html_context or {})}


def copy_mathjax(app, exception) -> None:
    """After an HTML build, copy the MathJax files the pages load into _static/mathjax/."""
    if exception is not None or app.builder.format != "html":
        return
    source = mathjax_es5_dir()
    target = Path(app.outdir) / "_static" / "mathjax"
    for part in MATHJAX_PARTS:
        src, dst = source / part, target / part
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)


def drop_duplicate_scripts(app, pagename, templatename, context, doctree) -> None:
    """Keep the first of identical <script> entries (same src, same inline body and attributes)."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        key = (script.filename or "", tuple(sorted(script.attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    scripts[:] = unique


def setup(app):
    app.connect("config-inited", use_local_mathjax)
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    app.connect("build-finished", copy_mathjax)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
