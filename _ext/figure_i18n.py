"""Sphinx extension: the figures of a translated edition with their labels in its language.

The zh-TW pages' code cells are the English ones (every page comes from the English build's execution
cache), so their figures are the English PNGs. Two halves make them Chinese without executing anything
again:

1. **Capture** (the English build, the only one that executes pages): every kernel it starts runs
   ``KERNEL_STARTUP`` (an IPython startup file in ``_build/ipython``, through ``IPYTHONDIR``), which
   wraps IPython's PNG formatter: each matplotlib figure a page displays is pickled to
   ``_build/figures/<sha256 of its PNG>.pickle`` (myst-nb names the image file by the same hash of
   the decoded bytes),
   with the keyword arguments it was printed with. Nothing changes in what the page shows; any
   failure only means no capture.
2. **Translate** (a translated edition, at ``build-finished``): for each ``_images/<hash>.png`` whose
   capture exists, the figure is unpickled, every text (titles, axis labels, legend entries, text
   labels) is looked up in ``figure_translations`` (``figure-translations.json``, written by
   ``autograder.i18n.pages`` from ``locales/<lang>/figures.po``; ``{0}`` matches any text in an
   f-string label), drawn with a CJK font (``make system-deps`` installs fonts-noto-cjk) and saved
   over the English PNG, the texts it shows in the PNG's ``Description``. Without a capture or a CJK
   font the English figure stays, and the build log says how many were translated.

The count is honest: a figure is translated when no text it shows keeps an English word (a lower-case
word of 3 or more letters outside ``$...$``: "AdamW state", not "AdamW", "ZeRO-3" or "$2^{10}$"). A
text with no entry, or a field of an f-string entry whose value has none, is English left: listed in
the PNG's ``English`` metadata and in the build log ("figures: 13 drawn, 11 translated, English left
in 2: ..."), which ``tests/test_i18n_review5.py`` reads. A field's value of one word is a name the
code passes (GPT-2 "small", "float32"), not English left. A field's value is translated when it has an
entry of its own, and an entry that begins with punctuation (``", 1 thread"``, a piece the code adds
to a title) is replaced inside a field's value.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
CAPTURE_ENV = "COURSE_FIGURE_CAPTURES"

KERNEL_STARTUP = '''\
# Written by _ext/figure_i18n.py: pickle each matplotlib figure a page displays (for the zh-TW labels).
def _course_figure_capture():
    import hashlib, os, pickle
    from pathlib import Path
    from IPython.core.formatters import PNGFormatter
    folder = Path(os.environ["COURSE_FIGURE_CAPTURES"])
    original = PNGFormatter.__call__

    def call(self, obj):
        data = original(self, obj)
        try:
            from matplotlib.figure import Figure
            if isinstance(obj, Figure) and isinstance(data, bytes | str):
                import base64
                raw = base64.b64decode(data) if isinstance(data, str) else data  # as myst-nb decodes it
                printer = self.lookup(obj)
                kwargs = dict(getattr(printer, "keywords", {}))
                folder.mkdir(parents=True, exist_ok=True)
                key = hashlib.sha256(raw).hexdigest()
                (folder / f"{key}.pickle").write_bytes(pickle.dumps((obj, kwargs)))
        except Exception:  # a figure that cannot be pickled keeps its English labels
            pass
        return data

    PNGFormatter.__call__ = call

if "COURSE_FIGURE_CAPTURES" in __import__("os").environ:
    _course_figure_capture()
del _course_figure_capture
'''


def enable_capture(app, config) -> None:
    """English build: kernels started from now on capture their figures (module docstring)."""
    if not (config.language or "en").startswith("en"):
        return
    build = Path(app.outdir).parent  # _build/html -> _build
    startup = build / "ipython" / "profile_default" / "startup" / "00-figure-capture.py"
    startup.parent.mkdir(parents=True, exist_ok=True)
    if not startup.is_file() or startup.read_text(encoding="utf-8") != KERNEL_STARTUP:
        startup.write_text(KERNEL_STARTUP, encoding="utf-8")
    os.environ["IPYTHONDIR"] = str(startup.parents[2])
    os.environ[CAPTURE_ENV] = str(build / "figures")


def _pattern(english: str) -> re.Pattern:
    parts = re.split(r"\{\d+\}", english)
    return re.compile("(.*)".join(re.escape(p) for p in parts) + r"\Z", re.DOTALL)  # greedy: "{0} ({1} FLOP/B)"


ENGLISH_WORD = re.compile(r"(?<![\w.])[a-z]{3,}(?![\w(])")  # prose: "state", not float32 or AdamW


def english_words(text: str) -> list[str]:
    """The English prose words of a figure text (math ``$...$`` aside)."""
    return ENGLISH_WORD.findall(re.sub(r"\$[^$]*\$", " ", text))


def translator(translations: dict[str, str]):
    """``text -> translation or None``: an exact entry, or one whose ``{n}`` match any text (each
    field's value translated by its own entry, or by the entries that begin with punctuation found
    inside it). ``translate.left(text)``: the English words the translation keeps that its entries
    did not choose to keep (module docstring)."""
    patterns = [(_pattern(en), zh) for en, zh in translations.items() if re.search(r"\{\d+\}", en)]
    pieces = sorted(((en, zh) for en, zh in translations.items() if re.match(r"\W", en) and en.strip()),
                    key=lambda pair: -len(pair[0]))

    def field(value: str) -> tuple[str, list[str]]:
        if value in translations:
            return translations[value], []
        for en, zh in pieces:
            value = value.replace(en, zh)
        # one word is a name the code passes (GPT-2 "small", "float32", "autocast"); words are prose
        return value, english_words(value) if re.search(r"\s", value.strip()) else []

    def match(text: str) -> tuple[str | None, list[str]]:
        if text in translations:
            return translations[text], []
        for pattern, zh in patterns:
            found = pattern.match(text)
            if found:
                fields = [field(value) for value in found.groups()]
                shown = re.sub(r"\{(\d+)\}", lambda m, fields=fields: fields[int(m.group(1))][0], zh)
                return shown, [w for _, left in fields for w in left]
        return None, english_words(text)

    def translate(text: str) -> str | None:
        return match(text)[0]

    translate.left = lambda text: match(text)[1]
    return translate


def cjk_font() -> str | None:
    """The family name of a CJK font matplotlib can use (added from the system's fonts), or None."""
    from matplotlib import font_manager

    names = [f.name for f in font_manager.fontManager.ttflist if "CJK" in f.name]
    if not names:
        for path in font_manager.findSystemFonts():
            if "cjk" in Path(path).name.lower():
                try:
                    font_manager.fontManager.addfont(path)
                except Exception:  # noqa: S112 - a font matplotlib cannot read is no candidate
                    continue
        names = [f.name for f in font_manager.fontManager.ttflist if "CJK" in f.name]
    for preferred in ("Noto Sans CJK TC", "Noto Sans CJK JP"):
        if preferred in names:
            return preferred
    return names[0] if names else None


def translate_figure(capture: bytes, translate, font: str) -> tuple[bytes, list[str]]:
    """The PNG of a pickled figure with its texts translated, and the texts it shows.

    Tick labels are made by the axis's formatter at each draw (a categorical axis names its ticks
    from the data: ``ax.bar(["fp32 + recompute"], ...)``), so setting their text would be undone by
    ``savefig``: each axis's formatter is wrapped to translate what it makes. What counts as shown
    (and as English left) is read after the figure is drawn, from what the PNG holds."""
    import io
    import pickle

    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    figure, kwargs = pickle.loads(capture)  # noqa: S301 - our own build's files
    FigureCanvasAgg(figure)
    left: list[str] = []
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            for which in ("major", "minor"):
                _translate_formatter(axis, which, translate, left)
    for text in figure.findobj(Text):
        english = text.get_text()
        zh = translate(english) if english else None
        if english and getattr(translate, "left", None):
            left += [english] if translate.left(english) else []
        if zh is not None:
            text.set_text(zh)
    for text in figure.findobj(Text):
        text.set_fontfamily([font, "DejaVu Sans"])
    figure.canvas.draw()  # tick labels made now, as savefig will make them
    shown = [text.get_text() for text in figure.findobj(Text) if text.get_visible() and text.get_text()]
    out = io.BytesIO()
    options = {"format": "png", "facecolor": figure.get_facecolor(), "edgecolor": figure.get_edgecolor(),
               "dpi": figure.dpi, "bbox_inches": kwargs.get("bbox_inches", "tight")}
    left = list(dict.fromkeys(left))
    figure.savefig(out, metadata={"Description": "\n".join(shown), "English": "\n".join(left)}, **options)
    return out.getvalue(), shown


def _translate_formatter(axis, which: str, translate, left: list[str]) -> None:
    """``axis``'s ``which`` formatter made to translate each label it makes (and to add the English
    ones no entry translates to ``left``)."""
    from matplotlib.ticker import Formatter

    inner = axis.get_major_formatter() if which == "major" else axis.get_minor_formatter()

    class Translated(Formatter):
        def __call__(self, x, pos=None):
            return self._one(inner(x, pos))

        def format_ticks(self, values):
            inner.set_locs(values)
            return [self._one(label) for label in inner.format_ticks(values)]

        def set_locs(self, locs):
            inner.set_locs(locs)

        def get_offset(self):
            return inner.get_offset()

        @staticmethod
        def _one(label):
            zh = translate(label) if label else None
            if label and getattr(translate, "left", None) and translate.left(label):
                left.append(label)
            return label if zh is None else zh

    formatter = Translated()
    (axis.set_major_formatter if which == "major" else axis.set_minor_formatter)(formatter)
    inner.set_axis(axis)


def english_left(png: bytes) -> list[str]:
    """The texts a redrawn figure shows in English (its PNG's ``English`` metadata)."""
    import io

    from PIL import Image

    return [t for t in Image.open(io.BytesIO(png)).text.get("English", "").split("\n") if t]


def translate_images(app, exception) -> None:
    """Translated edition: each captured figure of ``_images/`` redrawn with translated texts."""
    if exception is not None or (app.config.language or "en").startswith("en"):
        return
    captures = Path(app.config.figure_captures or "")
    table = Path(app.srcdir) / (app.config.figure_translations or "")
    if not captures.is_dir() or not table.is_file():
        LOGGER.info("figures: no captures or translations, the figures keep their English labels")
        return
    font = cjk_font()
    if font is None:
        LOGGER.info("figures: no CJK font (make system-deps installs fonts-noto-cjk): English labels")
        return
    translate = translator(json.loads(table.read_text(encoding="utf-8")))
    done, english = 0, {}
    images = sorted(Path(app.outdir, "_images").glob("*.png"))
    for image in images:
        capture = captures / f"{image.stem.split('.')[0]}.pickle"
        if capture.is_file():
            try:
                data, _ = translate_figure(capture.read_bytes(), translate, font)
            except Exception as error:  # noqa: BLE001 - the English figure stays
                LOGGER.info(f"figures: {image.name} keeps its English labels ({error})")
                continue
            image.write_bytes(data)
            done += 1
            left = english_left(data)
            if left:
                english[image.name] = left
    left = "".join(f"; {name}: {', '.join(map(repr, texts[:4]))}" for name, texts in english.items())
    LOGGER.info(f"figures: {done} of {len(images)} drawn again, {done - len(english)} translated "
                f"({font}), English left in {len(english)}{left}")


def setup(app):
    app.add_config_value("figure_captures", "", "html")
    app.add_config_value("figure_translations", "", "html")
    app.connect("config-inited", enable_capture)
    app.connect("build-finished", translate_images)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
