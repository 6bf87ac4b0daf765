"""Sphinx extension: links on every page to the same page in the other languages' editions, and what
a translated edition needs from the theme and the search.

The editions share page names (same _toc.yml), so each link is the page's own path under another
edition's root; ``href`` is that root relative to this edition's (``zh-tw/`` from the English site,
``../`` from the zh-TW one). Also writes ``<link rel="alternate" hreflang=...>`` for each. A page that
only this edition has (``language_switch_own_pages``, e.g. the zh-TW 中英術語對照) gets no switch.

For a translated edition (``language`` other than English) it also
- adds ``_ext/locales/<language>/LC_MESSAGES/booktheme.po`` (compiled here, with Babel) to the
  theme's message catalogue: the theme strings its own catalogue lacks ("Repository", "Open issue");
- resolves a relative ``html_search_options["dict"]`` (the jieba user dictionary the Chinese search
  segments with) against the book's folder, so the build works from any working directory;
- replaces Sphinx's Chinese search language by one that also indexes each dictionary word found
  inside a longer token: jieba's ``cut_for_search`` gives the 2- and 3-character words inside a long
  one, never a 4-character one, so 權重衰減 inside 解耦權重衰減 would not be found.

Enable in _config.yml: ``sphinx: {local_extensions: {language_switch: _ext}}``: the editions are
``course.toml``'s (``autograder.course.manifest.language_switch``). A book built without the course (the
translated edition's, the student edition's) is given them as ``sphinx: {config: {language_switch:
[{href: "zh-tw/", label: "繁體中文", lang: "zh-TW"}]}}``.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

HERE = Path(__file__).resolve().parent
THEME_CATALOGUE = "booktheme"


def other_edition_url(pagename: str, href: str) -> str:
    """The URL, relative to page ``pagename``, of the same page in the edition rooted at ``href``."""
    return "../" * pagename.count("/") + href + pagename + ".html"


def add_switch(app, pagename, templatename, context, doctree):
    if pagename in app.config.language_switch_own_pages:
        return
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


def compile_theme_catalogue(language: str, into: Path) -> Path | None:
    """``into``/<language>/LC_MESSAGES/booktheme.mo from this folder's .po (None if there is none)."""
    source = HERE / "locales" / language / "LC_MESSAGES" / f"{THEME_CATALOGUE}.po"
    if not source.is_file():
        return None
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    target = into / language / "LC_MESSAGES" / f"{THEME_CATALOGUE}.mo"
    target.parent.mkdir(parents=True, exist_ok=True)
    with source.open("rb") as po, target.open("wb") as mo:
        write_mo(mo, read_po(po, locale=language))
    return into


def translated_edition(app, config):
    if config.language_switch is None:  # the course's own build: its editions are course.toml's
        from autograder.course import manifest

        config.language_switch = manifest.language_switch(manifest.course())
    language = config.language or "en"
    if language.startswith("en"):
        return
    compiled = compile_theme_catalogue(language, Path(app.doctreedir) / "theme-locales")
    if compiled is not None:
        app.add_message_catalog(THEME_CATALOGUE, str(compiled))
    options = dict(config.html_search_options or {})
    if options.get("dict") and not Path(options["dict"]).is_absolute():
        options["dict"] = str(Path(app.srcdir) / options["dict"])
        config.html_search_options = options


def search_language():
    """Sphinx's ``SearchChinese`` that also indexes the user dictionary's words inside longer tokens."""
    from sphinx.search.zh import SearchChinese

    class SearchChineseCompounds(SearchChinese):
        words: frozenset[str] = frozenset()

        def init(self, options):
            super().init(options)
            path = options.get("dict")
            if path and Path(path).is_file():
                self.words = frozenset(line.split()[0] for line in
                                       Path(path).read_text(encoding="utf-8").splitlines() if line.strip())

        def split(self, input):
            tokens = super().split(input)
            inner = [w for t in tokens if len(t) > 3 for w in self.words if w != t and w in t]
            return tokens + inner

    return SearchChineseCompounds


def setup(app):
    try:
        app.add_search_language(search_language())
    except ImportError:  # no jieba or an older Sphinx: its own Chinese search
        pass
    app.add_config_value("language_switch", None, "html")
    app.add_config_value("language_switch_own_pages", [], "html")
    app.connect("config-inited", translated_edition)
    app.connect("html-page-context", add_switch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
