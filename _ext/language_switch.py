"""Sphinx extension: links on every page to the same page in the other languages' editions.

The editions share page names (same _toc.yml), so each link is the page's own path under another
edition's root; ``href`` is that root relative to this edition's (``zh-tw/`` from the English site,
``../`` from the zh-TW one). Also writes ``<link rel="alternate" hreflang=...>`` for each.

Enable in _config.yml: ``sphinx: {local_extensions: {language_switch: _ext}, config:
{language_switch: [{href: "zh-tw/", label: "繁體中文", lang: "zh-TW"}]}}``.
"""

from __future__ import annotations

from html import escape


def other_edition_url(pagename: str, href: str) -> str:
    """The URL, relative to page ``pagename``, of the same page in the edition rooted at ``href``."""
    return "../" * pagename.count("/") + href + pagename + ".html"


def add_switch(app, pagename, templatename, context, doctree):
    links = []
    for edition in app.config.language_switch:
        url = escape(other_edition_url(pagename, edition["href"]))
        lang, label = escape(edition["lang"]), escape(edition["label"])
        links.append(f'<a class="language-switch" href="{url}" hreflang="{lang}" lang="{lang}">'
                     f'{label}</a>')
        context["metatags"] = context.get("metatags", "") + \
            f'\n<link rel="alternate" hreflang="{lang}" href="{url}" />'
    if links and "body" in context:
        context["body"] = f'<p class="language-switch-bar">{" · ".join(links)}</p>\n' + context["body"]


def setup(app):
    app.add_config_value("language_switch", [], "html")
    app.connect("html-page-context", add_switch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
