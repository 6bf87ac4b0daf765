"""Sphinx extension: a link on every page to the same page in the other language's edition.

The editions share page names (same _toc.yml), so the link is the page's own path under the other
edition's root: ``language_switch_href`` is that root relative to this edition's (``zh-tw/`` from the
English site, ``../`` from the zh-TW one). Also writes ``<link rel="alternate" hreflang=...>``.

Enable in _config.yml: ``sphinx: {local_extensions: {language_switch: _ext}, config:
{language_switch_href: "zh-tw/", language_switch_label: "繁體中文", language_switch_lang: "zh-TW"}}``.
"""

from __future__ import annotations

from html import escape


def other_edition_url(pagename: str, href: str) -> str:
    """The URL, relative to page ``pagename``, of the same page in the edition rooted at ``href``."""
    return "../" * pagename.count("/") + href + pagename + ".html"


def add_switch(app, pagename, templatename, context, doctree):
    href = app.config.language_switch_href
    if not href:
        return
    url = escape(other_edition_url(pagename, href))
    lang = escape(app.config.language_switch_lang)
    label = escape(app.config.language_switch_label)
    link = f'<a class="language-switch" href="{url}" hreflang="{lang}" lang="{lang}">{label}</a>'
    context["metatags"] = context.get("metatags", "") + \
        f'\n<link rel="alternate" hreflang="{lang}" href="{url}" />'
    if "body" in context:
        context["body"] = f'<p class="language-switch-bar">{link}</p>\n' + context["body"]


def setup(app):
    app.add_config_value("language_switch_href", "", "html")
    app.add_config_value("language_switch_label", "", "html")
    app.add_config_value("language_switch_lang", "", "html")
    app.connect("html-page-context", add_switch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
