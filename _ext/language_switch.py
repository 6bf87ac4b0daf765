"""Sphinx extension: links on every page to the same page in the other languages' editions, and what
a translated edition needs from the theme and the search.

The editions share page names (same _toc.yml), so each link is the page's own path under another
edition's root; ``href`` is that root relative to this edition's (``zh-tw/`` from the English site,
``../`` from the zh-TW one). Also writes ``<link rel="alternate" hreflang=...>`` for each. A page that
only this edition has (``language_switch_own_pages``, e.g. the zh-TW 中英術語對照) gets no switch.

For a translated edition (``language`` other than English) it also
- adds ``_ext/locales/<language>/LC_MESSAGES/booktheme.po`` (compiled here, with Babel) to the
  theme's message catalogue: the theme strings its own catalogue lacks ("Repository", "Open issue");
- puts ``_ext/locales/<language>/LC_MESSAGES/sphinx.po`` ahead of pydata-sphinx-theme's entries
  ("On this page": its zh catalogue is Simplified; "Color mode": it has none);
- sets the strings that are settings rather than catalogue entries (``THEME_SETTINGS``): the search
  box's "Search this book..." (Jupyter Book's ``search_bar_text``), myst-nb's "Show code cell
  content" / "Hide code cell content" buttons and sphinx-togglebutton's "Click to show" / "Click to
  hide" hints;
- translates the attributes written in English with no catalogue behind them (``HARD_CODED``): the
  sidebar toggles' tooltips (sphinx-book-theme's ``components/toggle-*-sidebar.html``), the
  ``aria-label`` of the two tables of contents (its ``sbt-sidebar-nav.html`` and ``layout.html``) and
  of myst-nb's hidden-cell ``<summary>``, the launch buttons' logo ``alt``. Each page's HTML is
  rewritten as the builder renders it (exact ``attribute="English"``, so no prose is touched);
  overriding the templates instead would copy them and drift from the theme's next version.
- resolves a relative ``html_search_options["dict"]`` (the jieba user dictionary the Chinese search
  segments with) against the book's folder, so the build works from any working directory;
- replaces Sphinx's Chinese search language by one that also indexes each dictionary word wherever
  the text contains it: jieba's ``cut_for_search`` gives the 2- and 3-character words inside a long
  token, never a 4-character one (權重衰減 inside 解耦權重衰減), and a Simplified-trained jieba can
  cut across a Traditional word (捨入 -> 捨/入 when it is not in the user dictionary, 是非/同步 and
  記憶體配置/器 even with 非同步 and 配置器 in it). ``searchtools.js`` matches a query against whole index terms (a query of more
  than 2 characters also inside longer ones), so a dictionary word not in the index is found nowhere.
  Measured against indexing every CJK n-gram of 2-6 characters (issue 45; 230 words of the 24 pages
  on 1,255 word-page pairs): n-grams find all 1,255 and also 30 pages for words that are only part
  of another there (元組 and 位元 in 位元組, 數量 in 參數量); the dictionary finds 1,242 (all but
  位元's, a word kept out of it) and none of those, with 13x fewer index terms (6,654 against 87,623).

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
# Strings a translated edition shows that are settings, not messages: html_theme_options' search box
# text, myst-nb's code-cell toggles ("Show code cell {type}": {type} is source/outputs/content, an
# English word, so the edition's text has none)
THEME_SETTINGS = {
    "zh_TW": {"search_bar_text": "搜尋本書……", "nb_code_prompt_show": "顯示程式碼儲存格",
              "nb_code_prompt_hide": "隱藏程式碼儲存格", "togglebutton_hint": "點選以顯示",
              "togglebutton_hint_hide": "點選以隱藏"},
}
# (attribute, English) -> the edition's text, for what the themes write into each page hard-coded: a
# screen reader's labels and the tooltips, never a catalogue's message (module docstring)
HARD_CODED = {
    "zh_TW": {
        ("title", "Toggle primary sidebar"): "顯示或隱藏網站導覽",
        ("title", "Toggle secondary sidebar"): "顯示或隱藏本頁目錄",
        ("aria-label", "Main"): "主要導覽",
        ("aria-label", "Page"): "本頁目錄",
        ("aria-label", "Toggle hidden content"): "顯示或隱藏內容",
        ("alt", "JupyterHub logo"): "JupyterHub 標誌",
        ("alt", "Colab logo"): "Colab 標誌",
    },
}


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


def compile_theme_catalogue(language: str, into: Path, catalogue: str = THEME_CATALOGUE) -> Path | None:
    """``into``/<language>/LC_MESSAGES/<catalogue>.mo from this folder's .po (None if there is none)."""
    source = HERE / "locales" / language / "LC_MESSAGES" / f"{catalogue}.po"
    if not source.is_file():
        return None
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    target = into / language / "LC_MESSAGES" / f"{catalogue}.mo"
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
    settings = THEME_SETTINGS.get(language, {})
    if "search_bar_text" in settings:
        config.html_theme_options = {**(config.html_theme_options or {}),
                                     "search_bar_text": settings["search_bar_text"]}
    for name in ("nb_code_prompt_show", "nb_code_prompt_hide", "togglebutton_hint", "togglebutton_hint_hide"):
        if name in settings and name in config:
            setattr(config, name, settings[name])
    if not config.language_switch_hard_coded:
        config.language_switch_hard_coded = dict(hard_coded_replacements(language))
    compiled = compile_theme_catalogue(language, Path(app.doctreedir) / "theme-locales")
    if compiled is not None:
        app.add_message_catalog(THEME_CATALOGUE, str(compiled))
    options = dict(config.html_search_options or {})
    if options.get("dict") and not Path(options["dict"]).is_absolute():
        options["dict"] = str(Path(app.srcdir) / options["dict"])
        config.html_search_options = options


def prefer_edition_strings(app) -> None:
    """A translated edition: ``_ext/locales/<language>/LC_MESSAGES/sphinx.po`` ahead of the themes'
    own entries in the "sphinx" catalogue the page templates translate with. pydata-sphinx-theme
    adds its catalogue after Sphinx's, and for zh_TW gettext falls back to its "zh" one, Simplified
    (当前页面); a catalogue added later only fills gaps, so these entries go into the templates'
    translator itself (its ``_catalog``: the one seam on gettext's internals, here)."""
    language = app.config.language or "en"
    if language.startswith("en"):
        return
    compiled = compile_theme_catalogue(language, Path(app.doctreedir) / "theme-locales", "sphinx")
    if compiled is None:
        return
    from gettext import translation

    from sphinx import locale

    ours = translation("sphinx", localedir=str(compiled), languages=[language])
    for translator in {id(t): t for t in (app.translator, locale.translators.get(("general", "sphinx")))
                       if t is not None}.values():
        if hasattr(translator, "_catalog"):
            translator._catalog.update({k: v for k, v in ours._catalog.items() if k})  # noqa: SLF001


def hard_coded_replacements(language: str) -> list[tuple[str, str]]:
    """``attribute="English"`` -> ``attribute="text"`` for each of the edition's ``HARD_CODED``."""
    return [(f'{attribute}="{escape(english)}"', f'{attribute}="{escape(text)}"')
            for (attribute, english), text in HARD_CODED.get(language, {}).items()]


def translate_hard_coded(app) -> None:
    """A translated edition: each page the HTML builder renders, with ``HARD_CODED`` translated (the
    config value ``language_switch_hard_coded``, so a changed table re-renders every page)."""
    replacements = list(app.config.language_switch_hard_coded.items())
    templates = getattr(app.builder, "templates", None)
    if not replacements or templates is None:
        return
    render = templates.render

    def render_translated(template: str, context: dict) -> str:
        output = render(template, context)
        for english, text in replacements:
            output = output.replace(english, text)
        return output

    templates.render = render_translated


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
            return tokens + [w for w in self.words if w in input]

    return SearchChineseCompounds


def setup(app):
    try:
        app.add_search_language(search_language())
    except ImportError:  # no jieba or an older Sphinx: its own Chinese search
        pass
    app.add_config_value("language_switch", None, "html")
    app.add_config_value("language_switch_own_pages", [], "html")
    app.add_config_value("language_switch_hard_coded", {}, "html")  # HARD_CODED, as attribute="..." pairs
    # before sphinx-togglebutton's own config-inited handler, which writes its hints into the pages' JS
    app.connect("config-inited", translated_edition, priority=400)
    app.connect("builder-inited", prefer_edition_strings)
    app.connect("builder-inited", translate_hard_coded)
    app.connect("html-page-context", add_switch)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
