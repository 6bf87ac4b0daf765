"""Sphinx extension: offer Colab only where Colab can open the page.

sphinx-book-theme builds one set of launch buttons for every notebook page. Colab opens `.ipynb` files
only, so on the lecture pages (MyST Markdown notebooks) its button would lead to an error page. This runs
after the theme's own handler and drops the Colab entry there; the exercise pages (.ipynb) keep it, and
the JupyterHub (nbgitpuller) button stays everywhere.

Enable in _config.yml:  sphinx: {local_extensions: {launch_links: _ext}}.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

NOTEBOOK_ONLY_PROVIDERS = {"Colab"}


def drop_unusable_launch_buttons(app, pagename: str, templatename: str, context: dict[str, Any], doctree):
    """Remove launch providers that cannot open a non-.ipynb source."""
    if Path(app.env.doc2path(pagename)).suffix == ".ipynb":
        return
    for group in context.get("header_buttons", []):
        if group.get("label") == "launch-buttons":
            group["buttons"] = [b for b in group["buttons"] if b.get("text") not in NOTEBOOK_ONLY_PROVIDERS]


def setup(app):
    # sphinx-book-theme adds its launch buttons at priority 501; run after it.
    app.connect("html-page-context", drop_unusable_launch_buttons, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
