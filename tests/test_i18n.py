"""The translation catalogues (locales/<lang>/*.po) and the mechanism that keeps them honest.

- every catalogue is in step with its English source (``update`` would not change it);
- **complete**: 0 missing or fuzzy (stale) entries per catalogue. These tests fail, one per catalogue
  with its counts, until the translators have filled that catalogue; they stay in the suite and go
  green as catalogues fill (``python -m autograder.i18n check --summary`` shows the same counts);
- every translated entry keeps its numbers, code spans/roles/math, glossary terms, no Simplified;
- the stale detection itself: an English paragraph changed in a temporary copy makes ``check`` fail
  and name it, and the generated page shows that paragraph in English, marked;
- code cells of the generated pages and notebooks are the English ones (read back by jupytext / ast);
- ``check`` runs with polib and opencc only (no torch, nbgrader, nbformat or yaml).
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import jupytext
import nbformat
import polib
import pytest
from site_extensions import extension

from autograder.course.source import ASSIGNMENTS, EDITION_TAGS, release_path, source_path
from autograder.i18n import LANGUAGES, LOCALES_DIR
from autograder.i18n.__main__ import main as i18n_main
from autograder.i18n.catalogue import catalogue_path, sources, update
from autograder.i18n.checks import (
    Term,
    check_catalogue,
    check_catalogues,
    check_entry,
    glossary_path,
    inconsistent_terms,
    read_glossary,
    read_terms,
    read_usage,
    usage_path,
)
from autograder.i18n.messages import kernel_hook
from autograder.i18n.notebook import translate_notebook
from autograder.i18n.pages import book_files, translated_notebook
from autograder.i18n.render import UNTRANSLATED_MARK, render
from autograder.i18n.segment import join, split_myst, split_python, unit_hash

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = "zh_TW"
SOURCES = sources(ROOT)
GLOSSARY = read_glossary(glossary_path(LANGUAGE, ROOT))
TERMS = read_terms(glossary_path(LANGUAGE, ROOT))
USAGE = read_usage(usage_path(LANGUAGE, ROOT))


def _name(source: str) -> str:
    return catalogue_path(source, LANGUAGE).relative_to(Path(LOCALES_DIR) / LANGUAGE).as_posix()


def test_sources_and_languages():
    assert len([s for s in SOURCES if s.startswith("chapters/")]) == 15   # issue 43: chapter 11 in three pages
    assert [s for s in SOURCES if s.startswith("solutions/")] == \
        [f"solutions/{a}/{a}.py" for a in ASSIGNMENTS]
    assert sorted(info["tag"] for info in LANGUAGES.values()) == sorted(EDITION_TAGS)


@pytest.mark.parametrize("source", SOURCES, ids=_name)
def test_segmentation_gives_back_the_source(source):
    text = (ROOT / source).read_text(encoding="utf-8")
    if source.endswith(".md"):
        assert join(split_myst(text)) == text


def test_catalogues_are_in_step_with_the_english(tmp_path):
    """`update` on a copy changes no catalogue: every English unit has its entry, nothing is left over."""
    copy = _course_copy(tmp_path)

    def entries(path: Path) -> list[tuple]:
        return [(e.msgctxt, e.msgid, e.msgstr, e.occurrences, e.flags, e.previous_msgid, e.obsolete)
                for e in polib.pofile(str(path))]

    behind = [_name(source) for source in SOURCES
              if entries(update(source, LANGUAGE, copy).path)
              != entries(catalogue_path(source, LANGUAGE, ROOT))]
    assert not behind, f"out of step with their English: {behind}; run `python -m autograder.i18n update`"


@pytest.mark.parametrize("source", SOURCES, ids=_name)
def test_catalogue_fully_translated(source):
    """0 missing, 0 fuzzy. Fails until this catalogue's translation is finished (expected)."""
    problems = check_catalogue(catalogue_path(source, LANGUAGE, ROOT), GLOSSARY)
    missing = sum(p.kind == "missing" for p in problems)
    fuzzy = sum(p.kind == "fuzzy" for p in problems)
    assert missing == fuzzy == 0, (f"{_name(source)}: {missing} missing, {fuzzy} fuzzy entries "
                                   "(translation not finished yet)")


@pytest.mark.parametrize("source", SOURCES, ids=_name)
def test_translations_keep_numbers_code_glossary_and_no_simplified(source):
    problems = [p for p in check_catalogue(catalogue_path(source, LANGUAGE, ROOT), TERMS, usage=USAGE)
                if p.kind not in ("missing", "fuzzy", "warning")]
    assert not problems, "\n".join(map(str, problems))


def test_glossary_has_the_course_terms():
    for english, target in {"tensor": "張量", "memory": "記憶體", "gradient": "梯度",
                            "optimizer": "最佳化器", "checkpoint": "檢查點", "mixed precision": "混合精度",
                            "GPU": "GPU", "kernel": "kernel", "core": "核心", "copy": "副本",
                            "pinned": "鎖頁", "Check yourself": "自我檢測"}.items():
        assert GLOSSARY[english] == target
    assert "throughput" not in GLOSSARY  # the review's dead entry: no page says it
    terms = {t.english: t for t in read_terms(glossary_path(LANGUAGE, ROOT))}
    assert terms["kernel"].first == "核函式" and "核心" in terms["kernel"].retired
    assert terms["core"].reserved
    lines = glossary_path(LANGUAGE, ROOT).read_text(encoding="utf-8").splitlines()
    for line in lines:
        assert line.startswith("#") or line.count("\t") in (1, 2), f"not 'term<TAB>term[<TAB>options]': {line!r}"


@pytest.mark.parametrize(("english", "translation", "kind"), [
    ("A float32 value takes 4 bytes.", "一個 float32 值佔 8 個位元組。", "numbers"),
    ("A float32 value takes 4 bytes.", "一個 float32 值佔 4 個位元組，共 2 個。", "numbers"),
    ("Call `torch.float16` here.", "在這裡呼叫 `torch.half`。", "code"),
    ("See {doc}`chapters/01_memory_accounting`.", "見 {doc}`chapters/01_memory`。", "code"),
    ("It is $2^{10}$ large.", "它大到 $2^{11}$。", "code"),
    ("Every tensor has a dtype.", "每個陣列都有 dtype。", "glossary"),
    ("Every tensor has a dtype.", "每个张量都有 dtype。", "simplified"),
    ("Memory is finite.", "内存是有限的。", "simplified"),
])
def test_entry_checks_catch(english, translation, kind):
    entry = polib.POEntry(msgctxt=unit_hash(english), msgid=english, msgstr=translation)
    assert kind in {k for k, _ in check_entry(entry, GLOSSARY)}


def test_entry_checks_pass_a_good_translation():
    entry = polib.POEntry(msgid="A float32 tensor takes 4 bytes per value, see {doc}`Storage "
                                "<ch-storage>` and `x.element_size()`.",
                          msgstr="float32 張量的每個值佔 4 個位元組，見 {doc}`儲存區 <ch-storage>` 與 "
                                 "`x.element_size()`。")
    assert check_entry(entry, GLOSSARY) == []


def test_glossary_exemption_is_per_entry():
    entry = polib.POEntry(msgid="Shape (batch, seq).", msgstr="形狀為 (batch, seq)。")
    assert {k for k, _ in check_entry(entry, GLOSSARY)} == {"glossary"}
    entry.tcomment = "glossary-ok: batch"
    assert check_entry(entry, GLOSSARY) == []


def test_changed_english_paragraph_is_stale_and_named(tmp_path, capsys):
    """The stale detection, tested: change one English paragraph of a fully translated exercise in a
    copy; `update` keeps the old translation as fuzzy with the previous English, `check` fails and
    names the paragraph, the generated notebook shows it in English behind the mark."""
    copy = _course_copy(tmp_path)
    source = copy / "solutions/01_strides/01_strides.py"
    old = "You implement that metadata arithmetic with plain Python integers."
    new = "You implement that metadata arithmetic with nothing but Python integers."
    source.write_text(source.read_text(encoding="utf-8").replace(old, new), encoding="utf-8")
    po = catalogue_path("solutions/01_strides/01_strides.py", LANGUAGE, copy)
    assert i18n_main(["check", str(po)]) == 0
    capsys.readouterr()
    result = update("solutions/01_strides/01_strides.py", LANGUAGE, copy)
    assert len(result.fuzzy) == 1
    entry = next(e for e in polib.pofile(str(po)) if "fuzzy" in e.flags)
    assert entry.msgid.startswith(new) and entry.previous_msgid.startswith(old)
    assert entry.msgstr.startswith("你要用一般的 Python 整數")  # kept for the translator to revise
    assert i18n_main(["check", str(po)]) == 1
    out = capsys.readouterr().out
    [(path, line)] = entry.occurrences  # where the paragraph starts in the source
    assert path == "solutions/01_strides/01_strides.py"
    assert "1 fuzzy" in out and f"{path}:{line}" in out and new[:40] in out
    # the stale paragraph is shown in English, marked, and counted
    from autograder.i18n.catalogue import translations
    english = nbformat.read(release_path("01_strides", course_root=ROOT), as_version=4)
    intro = english.cells[0].source.replace(old, new)
    english.cells[0].source = intro
    _, _, done = translate_notebook(english, translations(po))
    assert [u.english[:40] for u in done.untranslated] == [new[:40]]


def test_a_reworded_line_break_is_not_a_change(tmp_path):
    """The hash is over whitespace-normalized text: rewrapping English keeps translations current."""
    copy = _course_copy(tmp_path)
    page = copy / "chapters/00_napkin_math.md"
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("Both\ncan be answered", "Both can\nbe answered"), encoding="utf-8")
    before = catalogue_path("chapters/00_napkin_math.md", LANGUAGE, copy).read_text(encoding="utf-8")
    update("chapters/00_napkin_math.md", LANGUAGE, copy)
    after = catalogue_path("chapters/00_napkin_math.md", LANGUAGE, copy).read_text(encoding="utf-8")
    assert [line for line in after.splitlines() if not line.startswith("#:")] == \
        [line for line in before.splitlines() if not line.startswith("#:")]


def test_untranslated_units_show_english_marked():
    pieces = split_myst("# Title\n\nSome *prose* with `code`.\n\n```{code-cell} ipython3\nx = 1\n```\n")
    done = render(pieces, {unit_hash("Title"): "標題"})
    assert done.text == (f"# 標題\n\n{UNTRANSLATED_MARK} Some *prose* with `code`.\n\n"
                         "```{code-cell} ipython3\nx = 1\n```\n")
    assert done.translated == 1 and len(done.untranslated) == 1


def test_generated_pages_have_the_english_code_cells():
    files, _ = book_files(LANGUAGE, ROOT, cache="_build/.jupyter_cache")
    for source in (s for s in SOURCES if s.startswith("chapters/")):
        def code(text: str) -> list[tuple[str, str]]:
            nb = jupytext.reads(text, fmt="myst")
            return [(c.source, str(c.metadata)) for c in nb.cells if c.cell_type == "code"]
        english = code((ROOT / source).read_text(encoding="utf-8"))
        assert english and code(files[source].decode("utf-8")) == english, source


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_translated_release_keeps_every_cell_but_the_prose(assignment):
    english = nbformat.read(release_path(assignment, course_root=ROOT), as_version=4)
    path = release_path(assignment, course_root=ROOT).with_name(translated_notebook(assignment, LANGUAGE))
    chinese = nbformat.read(path, as_version=4)
    assert len(chinese.cells) == len(english.cells)
    assert chinese.metadata.course == {"language": LANGUAGES[LANGUAGE]["tag"]}
    assert "course" not in english.metadata
    for en, zh in zip(english.cells, chinese.cells, strict=True):
        meta = en.metadata.nbgrader
        assert (zh.id, zh.cell_type) == (en.id, en.cell_type)
        assert {k: v for k, v in zh.metadata.nbgrader.items() if k != "checksum"} == \
            {k: v for k, v in meta.items() if k != "checksum"}
        if en.cell_type == "code" and en.id == "imports":  # + the messages' kernel hook, at its end
            hook = kernel_hook(source_path(assignment, course_root=ROOT), LANGUAGE, ROOT)
            assert hook and zh.source == f"{en.source}\n\n\n{hook}", f"{assignment}: imports cell"
            assert {k: v for k, v in zh.metadata.items() if k != "nbgrader"} == \
                {k: v for k, v in en.metadata.items() if k != "nbgrader"}
            assert (zh.outputs, zh.execution_count) == (en.outputs, en.execution_count)
        elif en.cell_type == "code" and (meta["grade"] or meta["locked"]):
            assert zh == en, f"{assignment} {en.id}: a grade or locked cell differs"
        elif en.cell_type == "code":
            assert _without_docstrings(zh.source) == _without_docstrings(en.source), en.id
            assert _code_lines(zh.source) == _code_lines(en.source), en.id


def _without_docstrings(code: str) -> str:
    tree = ast.parse(code)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[0].value.value = ""
    return ast.dump(tree)


def _code_lines(code: str) -> list[str]:
    """The lines of ``code`` that are neither docstring nor comment-only (what split_python keeps)."""
    return [p for p in join([x if isinstance(x, str) else "" for x in split_python(code)]).splitlines()
            if p.strip() and not p.strip().startswith(("#", '"""'))]


def test_check_needs_only_polib_and_opencc():
    script = ("import sys\n"
              "for name in ('torch', 'nbgrader', 'nbformat', 'yaml', 'jupytext'):\n"
              "    sys.modules[name] = None\n"
              "from autograder.i18n.__main__ import main\n"
              "sys.exit(main(['check', '--summary', 'locales/zh_TW/exercises/01_strides.po']))\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "01_strides.po: complete" in done.stdout


def _course_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "course"
    for name in ("intro.md", "references.md", "_config.yml", "_toc.yml"):
        shutil.copy2(ROOT / name, copy / name) if copy.exists() else \
            (copy.mkdir(), shutil.copy2(ROOT / name, copy / name))
    shutil.copytree(ROOT / "chapters", copy / "chapters", ignore=shutil.ignore_patterns("_*"))
    shutil.copytree(ROOT / "solutions", copy / "solutions", ignore=shutil.ignore_patterns("*.ipynb"))
    shutil.copytree(ROOT / LOCALES_DIR, copy / LOCALES_DIR)
    return copy


def test_leak_check_covers_the_translations(tmp_path):
    """A solution line or the hidden checks' module path in a msgstr is a leak (and the generated
    notebook carrying it fails the file leak check too); the committed catalogues have none."""
    from autograder.authoring.leaks import find_leaks, find_translation_leaks

    assert find_translation_leaks(course_root=ROOT) == []
    copy = _course_copy(tmp_path)
    shutil.copytree(ROOT / "autograder" / "hidden", copy / "autograder" / "hidden")
    po_path = catalogue_path("solutions/01_strides/01_strides.py", LANGUAGE, copy)
    po = polib.pofile(str(po_path))
    entry = next(e for e in po if e.msgid.startswith("Strides of a row-major"))
    entry.msgstr += "\nreturn offset + sum(i * s for i, s in zip(index, stride))"
    po.save(str(po_path))
    found = find_translation_leaks(course_root=copy)
    assert [leak.path for leak in found] == [po_path] and "solution line" in found[0].what
    from autograder.i18n.catalogue import translations
    english = nbformat.read(release_path("01_strides", course_root=ROOT), as_version=4)
    leaked, _, _ = translate_notebook(english, translations(po_path))
    out = tmp_path / "01_strides.zh-TW.ipynb"
    nbformat.write(nbformat.from_dict(leaked), out)
    assert any("solution line" in leak.what for leak in find_leaks(paths=[out], course_root=copy))


# --- the checks that catch the classes of the zh-TW review (issue 31) -------------------------------

def _kinds(english: str, translation: str, **comment) -> set[str]:
    entry = polib.POEntry(msgid=english, msgstr=translation, tcomment=comment.get("tcomment", ""))
    return {k for k, _ in check_entry(entry, TERMS, USAGE)}


# Units as the catalogues had them before the review was fixed (commit e611895): each must fail.
@pytest.mark.parametrize(("english", "translation", "kind"), [
    ("PyTorch's CPU kernel computes $1/\\sqrt{x}$ in two rounded steps.",
     "PyTorch 的 CPU 核心分兩個捨入步驟計算 $1/\\sqrt{x}$。", "reserved"),
    ("Even with every seed fixed, some GPU kernels are not bit-for-bit deterministic.",
     "即使固定了所有種子，有些 GPU 核心也不是逐位元確定性的。", "retired"),
    ("The bf16 copy is kept.", "保留 bf16 複本。", "retired"),
    ("Check yourself", "自我檢查", "retired"),
    ("Next: {doc}`08_data_loading` feeds batches.", "下一步：{doc}`08_data_loading` 會餵入批次。", "retired"),
    ("the driver stages it through a pinned buffer.", "驅動程式得先透過固定緩衝區中轉。", "glossary"),
    ("PyTorch has both as storage dtypes.", "PyTorch 兩種都有，可作為張量儲存區的 dtype。", "glossary"),
    ("the copy would wait, or hold up the compute.", "複製要麼得等，要麼會擋住計算。", "usage"),
    ("an unknown GPU is an error.", "遇到未知的 GPU 會直接報錯。", "usage"),
    ("each rounded up to 512-byte blocks.", "每個都向上取整到 512 位元組的區塊。", "usage"),
    ("The napkin rounds in two places.", "這張餐巾紙在兩個地方做了取整。", "usage"),
    ("It costs $6 \\times \\text{tokens}$ FLOPs.", "它要花 $6 \\times \\text{tokens} \\times 2$ 個 FLOP。", "code"),
])
def test_the_new_checks_catch_the_old_renderings(english, translation, kind):
    assert kind in _kinds(english, translation)


@pytest.mark.parametrize(("english", "translation"), [
    ("PyTorch's CPU kernel computes it; one core runs it.", "PyTorch 的 CPU kernel 計算它；由一個核心執行。"),
    ("It costs $6 \\times \\text{tokens} \\times \\text{parameters}$ FLOPs.",
     "它要花 $6 \\times \\text{詞元數} \\times \\text{參數量}$ 個 FLOP。"),  # \text{} bodies may be translated
    ("bf16 matmuls run at the tensor-core rate.", "bf16 矩陣乘法以張量核心的速率執行。"),
    ("Take whole rows with `x[1:3]`.", "以 `x[1:3]` 取整列。"),  # 取整列 is "whole rows", not rounding
    ("The napkin rounds in two places.", "這個粗估在兩個地方做了四捨五入（取整數）。"),
])
def test_the_new_checks_pass_good_renderings(english, translation):
    assert _kinds(english, translation) <= {"warning"}


def test_returning_is_a_warning_and_an_exemption_is_per_entry():
    assert _kinds("The call returns at once.", "這個呼叫會立刻返回。") == {"warning"}
    assert _kinds("The call returns at once.", "這個呼叫會立刻返回。", tcomment="usage-ok: 返回") == set()


def _po(tmp_path: Path, name: str, pairs: list[tuple[str, str]]) -> Path:
    po = polib.POFile()
    for n, (english, translation) in enumerate(pairs):
        po.append(polib.POEntry(msgctxt=unit_hash(english), msgid=english, msgstr=translation,
                                occurrences=[(name, str(n + 1))]))
    path = tmp_path / f"{name}.po"
    po.save(str(path))
    return path


def test_first_use_per_page_and_one_translation_per_unit(tmp_path):
    terms = [Term("tensor", "張量", first="tensor"), Term("kernel", "kernel", first="核函式"),
             Term("copy", "副本", soft=True, retired=("複本",))]
    a = _po(tmp_path, "a", [("Tensors", "張量"),  # a heading: not running text
                            ("A tensor has a kernel.", "一個張量有一個 kernel，就這樣。"),
                            ("Check yourself", "自我檢查"), ("A copy.", "一份副本，沒錯。")])
    b = _po(tmp_path, "b", [("A tensor core and a tensor.", "張量（tensor）很多，kernel（核函式）也是。"),
                            ("Check yourself", "自我檢測"), ("A copy.", "一份複本，沒錯。")])
    report = check_catalogues([a, b], terms)
    first_a = [p.message for p in report.problems[str(a)] if p.kind == "first-use"]
    assert len(first_a) == 2 and "「張量（tensor）」" in first_a[0] and "「kernel（核函式）」" in first_a[1]
    assert not [p for p in report.problems[str(b)] if p.kind == "first-use"]
    assert {p.where.split()[1] for p in report.problems[str(a)] if p.kind == "inconsistent"} == \
        {"'Check", "'A"}
    assert inconsistent_terms(report) == {"copy": Counter({"副本": 1, "複本": 1})}


def test_an_unused_glossary_term_is_reported(tmp_path):
    page = _po(tmp_path, "a", [("A tensor.", "一個張量（tensor），好。")])
    terms = [Term("tensor", "張量", first="tensor"), Term("throughput", "吞吐量")]
    report = check_catalogues([page], terms, every=True)
    assert [p.where for p in report.problems["glossary.tsv"]] == ["throughput"]


def test_the_review_findings_stay_fixed():
    """Spot checks over the committed catalogues: no GPU-kernel unit renders kernel as bare 核心, one
    rendering of "Check yourself", none of the mainland forms, the seven core terms glossed on first
    use, and `check` (all catalogues, every check) reports no problems."""
    from autograder.i18n.checks import prose

    entries = [(path, e) for path in sorted((ROOT / LOCALES_DIR / LANGUAGE).rglob("*.po"))
               for e in polib.pofile(str(path)) if not e.obsolete]
    for path, e in entries:
        if "kernel" in e.msgid.lower() and "core" not in e.msgid.lower():
            assert "核心" not in prose(e.msgstr), f"{path.name}: {e.msgid[:60]!r} renders kernel as 核心"
        for form in ("要麼", "報錯", "向上取整", "固定緩衝區", "偏差值", "偏差項", "資源盤點"):
            assert form not in e.msgstr, f"{path.name}: {form} in {e.msgstr[:60]!r}"
    assert {e.msgstr for _, e in entries if e.msgid == "Check yourself"} == {"自我檢測"}
    report = check_catalogues(sorted((ROOT / LOCALES_DIR / LANGUAGE).rglob("*.po")), TERMS, usage=USAGE,
                              every=True)
    problems = [p for found in report.problems.values() for p in found if p.kind != "warning"]
    assert not problems, "\n".join(map(str, problems[:20]))
    assert inconsistent_terms(report) == {}


def test_search_dictionary_and_terminology_page():
    from autograder.i18n.pages import SEARCH_DICTIONARY, TERMINOLOGY, search_words, terminology_page

    words = search_words(LANGUAGE, ROOT)
    for compound in ("最佳化器", "前向傳播", "隱藏測試", "混合精度", "鎖頁記憶體", "權重衰減"):
        assert compound in words
    assert all(" " not in w and not w.isascii() for w in words)
    page = terminology_page(LANGUAGE, ROOT)
    assert page.startswith("# 中英術語對照\n")
    for term in TERMS:  # a page label (glossary option label) is held to one rendering, not listed
        assert (f"| {term.english} | {term.target} |" in page) is not term.label, term.english
    files, _ = book_files(LANGUAGE, ROOT, cache="_build/.jupyter_cache")
    assert f"{TERMINOLOGY}.md" in files and files[SEARCH_DICTIONARY].decode("utf-8").split() == words
    assert f"- file: {TERMINOLOGY}" in files["_toc.yml"].decode("utf-8").splitlines()[-1]
    import yaml

    config = yaml.safe_load(files["_config.yml"])
    assert config["sphinx"]["config"]["html_search_options"]["dict"] == SEARCH_DICTIONARY
    assert config["author"] != yaml.safe_load((ROOT / "_config.yml").read_text())["author"]


# --- the figures' texts (figures.po, _ext/figure_i18n.py) ----------------------------------------

def test_figure_texts_come_from_the_code_cells(tmp_path):
    from autograder.i18n import figures

    texts = {text for text, _, _ in figures.figure_texts(ROOT)}
    assert {"bit layout", "sign", "exponent", "fraction", "measured on {0}", "achieved FLOP/s",
            "Memory of one training step", "optimizer state"} <= texts
    assert "arrowstyle" not in texts and "lower right" not in texts  # options, not labels
    assert figures.cell_texts('ax.set_title(f"{n} layer{s}")\nax.plot(x, label="loss")') == \
        ["{0} layer{1}", "loss"]
    assert figures.cell_texts('x = ["not", "a figure"]') == []
    copy = _course_copy(tmp_path)
    before = figures.catalogue_path(LANGUAGE, copy).read_bytes()
    _, entries, translated = figures.update(LANGUAGE, copy)
    assert figures.catalogue_path(LANGUAGE, copy).read_bytes() == before, "figures.po is out of step: " \
        "run `python -m autograder.i18n update`"
    assert entries == translated == len(texts)


def _figure_i18n():
    return extension("figure_i18n")


def test_figure_translator_fills_fields():
    translate = _figure_i18n().translator({"measured on {0}": "量測於 {0}", "bits": "位元",
                                           "{0}: peak {1} MiB": "{0}：峰值 {1} MiB"})
    assert translate("bits") == "位元" and translate("bit") is None
    assert translate("measured on NVIDIA H100") == "量測於 NVIDIA H100"
    assert translate("Adam: peak 12.5 MiB") == "Adam：峰值 12.5 MiB"


def test_a_captured_figure_is_redrawn_with_translated_labels():
    import pickle

    import matplotlib
    from browser import in_ci

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    module = _figure_i18n()
    font = module.cjk_font()
    if font is None:
        message = "no CJK font: `make system-deps` installs fonts-noto-cjk"
        pytest.fail(message) if in_ci() else pytest.skip(message)
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4], label="parameters")
    ax.set_title("measured on CPU")
    ax.legend()
    capture = pickle.dumps((fig, {"bbox_inches": "tight"}))
    plt.close(fig)
    png, shown = module.translate_figure(capture, module.translator(
        {"parameters": "參數", "measured on {0}": "量測於 {0}"}), font)
    assert "參數" in shown and "量測於 CPU" in shown and "parameters" not in shown
    import io

    assert Image.open(io.BytesIO(png)).text["Description"].split("\n") == shown
