"""The fifth zh-TW review (issue 45; ../shared/reviews/zh-tw-review.md): each class of finding has a
check that fails on the text the review read, and the committed catalogues pass it."""

from __future__ import annotations

from pathlib import Path

import polib
import pytest
from site_extensions import extension

from autograder.i18n.checks import (
    check_catalogues,
    check_entry,
    glossary_path,
    inconsistent_terms,
    read_terms,
)

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = "zh_TW"
LOCALE = ROOT / "locales" / LANGUAGE
TERMS = read_terms(glossary_path(LANGUAGE, ROOT))


def _kinds(english: str, translation: str, tcomment: str = "") -> set[str]:
    return {k for k, _ in check_entry(polib.POEntry(msgid=english, msgstr=translation, tcomment=tcomment), TERMS)}


# Units as the review read them (commit e52732a): each fails a check now.
@pytest.mark.parametrize(("english", "translation", "kind"), [
    # M3: 偏置 is a layer's bias; the exponent bias is 偏移值 (exercise 06)
    ("exponent bias off by one", "指數的偏置差一", "glossary"),
    # I11-I15: one word for "scale"
    ("one successful step should double the scale", "應該讓縮放係數加倍", "retired"),
    ("blocks of 2048 values that each keep one float32 scale", "每塊保留一個 float32 縮放因子", "retired"),
    # I16, I17, U1: English or a second word left in a message
    ("bfloat16 needs no scaler: return None", "bfloat16 不需要 scaler：請傳回 None", "retired"),
    ("param groups' own lr ignored", "忽略了各參數組自己的 lr", "retired"),
    ("{what}: {message} [seed {used_seed}]", "{what}：{message} [seed {used_seed}]", "retired"),
])
def test_the_review_renderings_fail(english, translation, kind):
    assert kind in _kinds(english, translation)


@pytest.mark.parametrize(("english", "translation"), [
    ("exponent bias off by one", "指數偏移值（bias）差一"),
    ("one successful step should double the scale", "應該讓縮放倍數加倍"),
    ("bfloat16 needs no scaler: return None", "bfloat16 不需要縮放器：請傳回 None"),
    ("as chapter 08 shows", "如第 8 章〈資料載入〉所示"),  # A17: 第 08 章 is not how a reader writes it
    ("call `scaler.update()` once per step", "每一步呼叫一次 `scaler.update()`"),  # code is not prose
])
def test_the_fixed_renderings_pass(english, translation):
    assert _kinds(english, translation) == set()


def test_a_leading_zero_is_the_same_number_a_different_number_is_not():
    assert "numbers" not in _kinds("as chapter 08 shows", "如第 8 章所示")
    assert "numbers" in _kinds("as chapter 08 shows", "如第 9 章所示")


def _po(tmp_path: Path, name: str, pairs: list[tuple[str, str]]) -> Path:
    from autograder.i18n.segment import unit_hash

    po = polib.POFile()
    for n, (english, translation) in enumerate(pairs):
        po.append(polib.POEntry(msgctxt=unit_hash(english), msgid=english, msgstr=translation,
                                occurrences=[(name, str(n + 1))]))
    path = tmp_path / name
    po.save(str(path))
    return path


def test_the_consistency_report_reads_prose_not_code(tmp_path):
    """`scaler.step()` in code is not the word "scaler" left in English."""
    page = _po(tmp_path, "a.po", [("With a scaler, call `scaler.step(optimizer)`.",
                                   "使用縮放器時，請呼叫 `scaler.step(optimizer)`。")])
    assert inconsistent_terms(check_catalogues([page], TERMS)) == {}


def test_the_committed_catalogues_have_the_review_fixes():
    """Spot checks: the two ch. 12 number slips, the doubled wordings, the two colons in a row, the
    English of messages.po; `check` over every catalogue, messages.po and figures.po included."""
    def msgstrs(name: str) -> str:
        return "\n".join(e.msgstr for e in polib.pofile(str(LOCALE / name)) if not e.obsolete)

    ch12 = msgstrs("chapters/12_more_than_one_gpu.po")
    assert "多 1.5 倍" not in ch12 and "每個參數多出 4 位元組" not in ch12  # M1, M2
    assert "ZeRO-3 的流量是這些位元組的 1.5 倍" in ch12 and "比 4 位元組多出的那一點點" in ch12
    assert "存放用 dtype，storage dtype" not in msgstrs("chapters/10_mixed_precision.po")  # A10
    assert "剛好在正中間時" not in msgstrs("chapters/01_memory_accounting.po")  # A2
    assert "佔了主導：" not in msgstrs("chapters/05_compute_accounting.po")  # A7
    messages = msgstrs("messages.po")
    for english in ("[seed", "device {p.device}", "個 patch", "patch 1", "head 1", "scaler：", "縮放係數", "參數組",
                    "指數的偏置"):
        assert english not in messages, english
    paths = sorted(LOCALE.rglob("*.po"))
    report = check_catalogues(paths, TERMS, every=True)
    problems = [p for found in report.problems.values() for p in found if p.kind != "warning"]
    assert not problems, "\n".join(map(str, problems[:20]))
    assert inconsistent_terms(report) == {}


# --- cross-references in a sentence (A19-A23, issue 45 item 5) ------------------------------------

@pytest.mark.parametrize(("translation", "shown"), [
    ("這正是 {doc}`00_napkin_math` 一開始用的數字。", "這正是〈{doc}`00_napkin_math`〉一開始用的數字。"),
    ("（{doc}`12_more_than_one_gpu` 會計算這些位元組及其代價）", "（〈{doc}`12_more_than_one_gpu`〉會計算這些位元組及其代價）"),
    ("這正是〈{doc}`00_napkin_math`〉一頁一開始用的數字。", "這正是〈{doc}`00_napkin_math`〉一頁一開始用的數字。"),
    ("下一頁：{doc}`08_data_loading` 會餵入批次。", "下一頁：〈{doc}`08_data_loading`〉會餵入批次。"),
])
def test_a_cross_reference_in_a_sentence_reads_as_a_title(translation, shown):
    from autograder.i18n.render import render
    from autograder.i18n.segment import split_myst

    pieces = split_myst("Some English text.\n")
    key = next(p.key for p in pieces if not isinstance(p, str))
    assert render(pieces, {key: translation}, link_quotes="〈〉").text.strip() == shown


def test_the_zh_tw_pages_set_every_cross_reference_as_a_title():
    from autograder.i18n.pages import book_files

    files, _ = book_files(LANGUAGE, ROOT, cache="_build/.jupyter_cache")
    import re

    for name, data in files.items():
        if name.startswith("chapters/") and name.endswith(".md"):
            text = data.decode("utf-8")
            prose = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
            bare = re.findall(r"(?<!〈)\{doc\}`[^`]+`", prose)
            assert not bare, f"{name}: {bare[:3]} not set as 〈title〉"


# --- messages assembled from whole sentences (A24-A26, U3; issue 45 item 3) -------------------------

OLD_GET_BATCH = '''
class Tokens:
    def _too_much(self, how):
        return AssertionError(f"get_batch {how} a dataset of {self.n:,} tokens to build one batch")

    def __iter__(self):
        raise self._too_much("iterated over the whole of")
'''
OLD_AUTOCAST = '''
expect(seen == low, f"{where}: the first Linear layer produced {seen or 'nothing'}; run it")
'''
SUBJECT = '''
def must_raise(call, what):
    expect(raised(call), f"{what} should raise jaxtyping's TypeCheckError")

must_raise(lambda: 1, "split_heads on a 2-D x")
'''


def test_a_message_joined_from_fragments_is_reported():
    from autograder.i18n.messages import fragments

    found = fragments(OLD_GET_BATCH, "get_batch.py")
    assert len(found) == 1 and found[0][0] == "get_batch.py:7", found
    assert found[0][1].startswith("'iterated over the whole of' is joined into 'get_batch {how} a dataset")
    assert "English inside a placeholder ('nothing'" in fragments(OLD_AUTOCAST, "mp.py")[0][1]
    assert fragments(SUBJECT, "einops.py") == []  # a noun phrase as the subject translates whole


def test_the_hidden_checks_make_whole_sentences():
    from autograder.i18n import messages

    problems = [p for p in messages.check(LANGUAGE, ROOT) if p[1] == "fragment"]
    assert not problems, problems
    shown = messages.translate(
        "get_batch iterated over the whole of a dataset of 1,000,000,000,000 tokens (a memmap far larger "
        "than memory) to build one batch that needs 36 tokens. Read only the rows you need, e.g. "
        "dataset[start:start + context_length + 1] for each start", LANGUAGE)
    assert shown.startswith("get_batch 逐一走訪了一個有 1,000,000,000,000 個詞元的資料集"), shown
    assert "whole" not in shown and "nothing" not in messages.translate(
        "train_step_mixed(...), step 1: the first Linear layer produced no output; under "
        "torch.autocast(device_type='cpu', dtype=torch.bfloat16) it produces torch.bfloat16. Run the "
        "forward pass and the loss inside torch.autocast for the inputs' device type", LANGUAGE)


# --- words inside display math (S4; issue 45 item 4) --------------------------------------------------

MFU = "Then\n\n$$\n\\text{MFU} = \\frac{\\text{model FLOPs}}{\\text{peak FLOP/s}} .\n$$\n\nafter.\n"


def test_a_formula_with_words_is_a_unit_and_only_its_words_translate():
    from autograder.i18n.render import render
    from autograder.i18n.segment import split_myst

    pieces = split_myst(MFU)
    assert "".join(p if isinstance(p, str) else p.text for p in pieces) == MFU
    math = [p for p in pieces if not isinstance(p, str) and p.kind == "math"]
    assert [m.english for m in math] == ["$$ \\text{MFU} = \\frac{\\text{model FLOPs}}{\\text{peak FLOP/s}} . $$"]
    good = "$$ \\text{MFU} = \\frac{\\text{模型 FLOP}}{\\text{峰值 FLOP/s}} . $$"
    assert _kinds(math[0].english, good) == set()
    assert "code" in _kinds(math[0].english, good.replace("\\frac", "\\dfrac"))  # the formula itself
    shown = render(pieces, {math[0].key: good}, mark="").text
    assert "\n$$\n\\text{MFU} = \\frac{\\text{模型 FLOP}}{\\text{峰值 FLOP/s}} .\n$$\n" in shown
    assert split_myst("$$\na + b\n$$\n") == ["$$\na + b\n$$\n"]  # no words: verbatim


def test_the_zh_tw_formulas_have_no_english_words():
    """MFU's definition and the other 12 formulas the review found (05, 11, 11b, 12, ...)."""
    import re

    from autograder.i18n.pages import book_files

    files, _ = book_files(LANGUAGE, ROOT, cache="_build/.jupyter_cache")
    for name, data in files.items():
        if name.startswith("chapters/") and name.endswith(".md"):
            for formula in re.findall(r"^\$\$\n(.*?)\n\$\$$", data.decode("utf-8"), re.DOTALL | re.MULTILINE):
                words = [w for w in re.findall(r"\\text\{([^{}]*)\}", formula)
                         if re.search(r"[a-z]{3}", w) and w.strip() not in ("FLOP/s",)]
                assert not words, f"{name}: {words} in {formula[:60]!r}"


# --- figures: English left is counted (S2; issue 45 item 4) -------------------------------------------

def _capture() -> bytes:
    import pickle

    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots()
    for name in ("AdamW state", "parameters"):
        ax.bar([name], [1], label=name)
    ax.set_title("measured on Intel Xeon, 1 thread")
    ax.legend()
    data = pickle.dumps((figure, {}))
    plt.close(figure)
    return data


def _figure_i18n():
    return extension("figure_i18n")


def test_a_figure_that_keeps_english_says_so():
    """Before: a legend entry drawn from a dict key ("AdamW state") stayed English and the figure
    counted as translated. Now the PNG lists it under ``English`` and the build log counts it."""
    ext = _figure_i18n()
    partial = ext.translator({"parameters": "參數", "measured on {0}": "量測於 {0}"})
    data, _ = ext.translate_figure(_capture(), partial, "DejaVu Sans")
    assert set(ext.english_left(data)) == {"AdamW state", "measured on Intel Xeon, 1 thread"}
    whole = ext.translator({"parameters": "參數", "measured on {0}": "量測於 {0}", "AdamW state": "AdamW 狀態",
                            ", 1 thread": "，1 個執行緒"})
    data, shown = ext.translate_figure(_capture(), whole, "DejaVu Sans")
    assert ext.english_left(data) == [] and "量測於 Intel Xeon，1 個執行緒" in shown


def _categorical_capture() -> bytes:
    """Chapter 11's memory budget in small: bars named by their categories, no other words."""
    import pickle

    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    figure, ax = plt.subplots()
    ax.bar(["fp32 + recompute", "autocast + recompute"], [3, 2])
    figure.canvas.draw()  # as IPython's PNG formatter has drawn it before the capture
    data = pickle.dumps((figure, {}))
    plt.close(figure)
    return data


def test_a_categorical_axis_is_drawn_translated_and_english_left_is_what_the_png_shows():
    """Before: the tick labels of a categorical axis were set to Chinese, then made again from the
    category names when the figure was saved, so the PNG kept "fp32 + recompute" while its
    metadata said Chinese and no English left (chapter 11's memory budget)."""
    import io

    from PIL import Image

    ext = _figure_i18n()
    font = ext.cjk_font() or "DejaVu Sans"
    pixels = lambda png: Image.open(io.BytesIO(png)).convert("RGB").tobytes()  # noqa: E731
    english, _ = ext.translate_figure(_categorical_capture(), ext.translator({}), font)
    assert set(ext.english_left(english)) == {"fp32 + recompute", "autocast + recompute"}
    both = {"fp32 + recompute": "fp32 + 重新計算", "autocast + recompute": "autocast + 重新計算"}
    chinese, shown = ext.translate_figure(_categorical_capture(), ext.translator(both), font)
    same = pixels(chinese) == pixels(english)
    assert not same, "the saved figure still draws the English ticks"
    assert ext.english_left(chinese) == [] and {"fp32 + 重新計算", "autocast + 重新計算"} <= set(shown)
    one = {"fp32 + recompute": "fp32 + 重新計算"}
    partial, shown = ext.translate_figure(_categorical_capture(), ext.translator(one), font)
    assert ext.english_left(partial) == ["autocast + recompute"] and "fp32 + 重新計算" in shown


def test_the_figure_texts_include_what_a_figure_shows_through_a_variable():
    from autograder.i18n.figures import figure_texts, translations

    texts = {text for text, _, _ in figure_texts(ROOT)}
    for english in ("AdamW state", "bf16 weight copies", "attention probabilities", "other activations",
                    "fp32 + recompute", "full cross-entropy", "chunks of 64 tokens", "16 tokens x 8192² weight",
                    "matrix-vector 8192²", "add", ", 1 thread"):
        assert english in texts, english
    assert texts <= set(translations(LANGUAGE, ROOT))


def test_the_built_zh_tw_figures_keep_no_english():
    """Every figure of a built zh-TW chapter page was drawn again and shows no English left (run
    `make site`; the English build captures the figures the zh-TW build redraws)."""
    import os
    import re

    from PIL import Image

    html = Path(os.environ.get("ZH_TW_HTML", ROOT / "_build" / "html" / "zh-tw"))
    pages = sorted((html / "chapters").glob("*.html"))
    if not pages:
        pytest.skip(f"no zh-TW build at {html}: run `make site` first")
    problems = []
    for page in pages:
        for src in re.findall(r'<img[^>]+src="([^"]+_images/[^"]+\.png)"', page.read_text(encoding="utf-8")):
            meta = Image.open(page.parent / src).text
            if "English" not in meta:
                problems.append(f"{page.stem}: {Path(src).name} not drawn again (English labels)")
            elif meta["English"]:
                problems.append(f"{page.stem}: {Path(src).name} keeps {meta['English'].splitlines()[:3]}")
    assert not problems, "\n".join(problems)


# --- a test cell's print() lines in the zh-TW notebooks (S3; issue 45 item 4) -------------------------

def test_a_test_cells_print_line_shows_in_chinese():
    """Grade cells stay byte-identical to the English ones; the zh-TW notebook's message hook shows
    their print() lines ("no GPU here: ...") in Chinese, and any other line as it is."""
    import builtins
    import contextlib
    import io

    from autograder.i18n.messages import kernel_hook

    hook = kernel_hook(ROOT / "solutions" / "05_get_batch" / "05_get_batch.py", LANGUAGE, ROOT)
    assert hook is not None
    printed = builtins.print
    out = io.StringIO()
    try:
        exec(compile(hook, "hook", "exec"), {})  # noqa: S102 - the hook the notebook runs
        with contextlib.redirect_stdout(out):
            print("no GPU here: the grader runs this check on a GPU runner")
            print("unavailable device 'cuda:0' raised RuntimeError: no CUDA")
            print("a student's own line")
    finally:
        builtins.print = printed
    assert out.getvalue().splitlines() == [
        "這裡沒有 GPU：評分程式會在有 GPU 的機器上執行這項檢查",
        "指定無法使用的裝置 'cuda:0' 時引發了 RuntimeError：no CUDA",
        "a student's own line"]


def test_the_theme_settings_are_chinese_on_the_built_site():
    """The search box and the code cells' show/hide buttons (settings, not catalogue entries:
    _ext/language_switch.py THEME_SETTINGS) and the theme's own strings (_ext/locales/zh_TW/.../sphinx.po)."""
    import os

    html = Path(os.environ.get("ZH_TW_HTML", ROOT / "_build" / "html" / "zh-tw"))
    page = html / "chapters" / "00_napkin_math.html"
    if not page.is_file():
        pytest.skip(f"no zh-TW build at {html}: run `make site` first")
    text = page.read_text(encoding="utf-8")
    for english in ("Search this book", "Show code cell", "Hide code cell", "Color mode", "System Settings",
                    "当前页面", "网页导航"):  # the last two: pydata-sphinx-theme's Simplified "zh" catalogue
        assert english not in text, english
    assert "搜尋本書" in text and "顯示程式碼儲存格" in text and "本頁內容" in text and "色彩模式" in text


def test_the_terminology_page_speaks_to_a_reader():
    """S7: the 中英術語對照 page was written for maintainers (file names, the check command, a column
    of retired renderings)."""
    from autograder.i18n.pages import terminology_page

    page = terminology_page(LANGUAGE, ROOT)
    for maintainers in ("glossary.tsv", "python -m", "不再使用"):
        assert maintainers not in page, maintainers
    assert "| 張量（tensor） |" in page.replace("| tensor | 張量 | 張量（tensor） |", "| 張量（tensor） |")
