"""Test-failure messages a zh-TW student can read (autograder.i18n.messages, locales/zh_TW/messages.po).

The templates come from the code (hidden checks, the grade cells' asserts) and every one is
translated; ``translate`` gives real failure messages (hidden checks run on wrong answers) in zh-TW,
their values and hints included, and leaves a message it does not know as it is; ``check`` flags
what is stale or broken. End to end: a zh-TW notebook with wrong answers shows zh-TW messages when a
test cell runs in its own kernel, in its nbgrader feedback page and in the service's result, and
scores what its English twin scores, cell for cell.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import nbformat
import polib
import pytest
from nbclient import NotebookClient
from nbgrader.api import Gradebook

from autograder.authoring import samples
from autograder.cli import main
from autograder.course.source import source_path
from autograder.hidden import HiddenCheckFailed
from autograder.i18n import messages
from autograder.i18n.messages import kernel_hook, templates, translate

ROOT = Path(__file__).resolve().parents[1]
LANGUAGE = "zh_TW"
CJK = re.compile(r"[\u4e00-\u9fff]")
ASSIGNMENT = "01_strides"
# one notebook, three wrong answers: two visible tests fail (Fortran-order strides, row-by-row
# gather) and one hidden check only (an empty tensor is not called contiguous)
WRONG = ("column_major", "contiguous_ignores_empty", "gather_view_row_major_positions")


def failure(check, *args, seed: int = 5) -> str:
    with pytest.raises(HiddenCheckFailed) as caught:
        check(*args, seed=seed)
    return str(caught.value)


# --- the catalogue -----------------------------------------------------------------------------------

def test_every_template_is_translated_and_the_catalogue_is_in_step():
    found = templates(ROOT)
    english = {t.english for t in found}
    assert len(found) > 150
    assert {"{what}: {message} [seed {used_seed}]", "{what}: expected {expected!r}, got {got!r}",
            "the offset is where element (0, 0) lives",  # a grade cell's assert
            "contiguous_strides({shape}): expected {want}, got {got}"} <= english
    assert "flat_index({index}, {stride}, offset={offset})" not in english  # code alone: no entry
    po = polib.pofile(str(messages.catalogue_path(LANGUAGE, ROOT)))
    live = {e.msgid: e for e in po if not e.obsolete}
    assert set(live) == english
    assert all(e.msgstr.strip() and e.msgctxt == messages.message_key(e.msgid) for e in live.values())
    assert messages.check(LANGUAGE, ROOT) == []


def test_check_flags_missing_stale_untranslated_and_placeholders(tmp_path):
    hidden = tmp_path / "autograder" / "hidden"
    hidden.mkdir(parents=True)
    (hidden / "toy.py").write_text(
        'expect(ok, f"{what}: value {got} is too large")\n'
        'expect(ok, "the result must be sorted")\n'
        'expect(ok, f"{what} should be a tensor, got {type(x).__name__}")\n'
        'expect(ok, "a new message nobody translated yet")\n', encoding="utf-8")
    path, entries, _ = messages.update(LANGUAGE, tmp_path)
    assert entries == 4
    po = polib.pofile(str(path))
    done = {"{what}: value {got} is too large": "{what}：數值 {got} 太大",
            "the result must be sorted": "the result must be sorted",  # the English kept
            "{what} should be a tensor, got {type(x).__name__}": "{what} 應該是張量，實際得到 {x}"}
    for entry in po:
        entry.msgstr = done.get(entry.msgid, "")
    po.append(polib.POEntry(msgctxt=messages.message_key("a removed message"), msgid="a removed message",
                            msgstr="一則已刪除的訊息"))
    po.save(str(path))
    kinds = {(where.split(" ", 1)[1].strip("'")[:20], kind) for where, kind, _ in
             messages.check(LANGUAGE, tmp_path)}
    assert kinds == {("the result must be s", "untranslated"), ("{what} should be a t", "placeholders"),
                     ("a new message nobody", "missing"), ("a removed message", "stale")}
    assert translate("x: value 7 is too large", LANGUAGE, tmp_path) == "x：數值 7 太大"


# --- translate -----------------------------------------------------------------------------------------

def test_real_hidden_check_failures_in_zh_tw():
    from autograder.hidden import strides

    def flat_index(index, stride, offset=0):  # forgets the offset
        return sum(i * s for i, s in zip(index, stride, strict=True))

    def contiguous_strides(shape):  # Fortran order
        out, step = [], 1
        for size in shape:
            out.append(step)
            step *= max(size, 1)
        return tuple(out)

    for check, wrong in ((strides.check_flat_index, flat_index),
                         (strides.check_contiguous_strides, contiguous_strides)):
        english = failure(check, wrong)
        shown = translate(english, LANGUAGE)
        assert CJK.search(shown) and "expected" not in shown and " got " not in shown, shown
        assert shown.endswith("〔種子 5〕") and re.findall(r"\d+", shown) == re.findall(r"\d+", english)
    english = failure(strides.check_flat_index, flat_index)
    assert translate(english, LANGUAGE).startswith("flat_index：")
    assert translate("flat_index: expected 12, got 11 [seed 5]", "zh-TW") == \
        "flat_index：預期 12，實際得到 11〔種子 5〕"
    raised = failure(strides.check_flat_index, lambda *a, **k: 1 / 0)
    assert translate(raised, LANGUAGE).startswith("flat_index：引發了 ZeroDivisionError：")


def test_a_hint_inside_a_message_is_translated():
    hidden = ("get_batch: get_batch(..., batch_size=4, context_length=8, 'cpu') changed Python's "
              "`random` state: draw the starts with torch.randint instead [seed 3]")
    assert translate(hidden, LANGUAGE) == ("get_batch：get_batch(..., batch_size=4, context_length=8, "
                                           "'cpu') 改變了 Python `random` 的狀態：請改用 torch.randint 抽起點"
                                           "〔種子 3〕")
    visible = ("with growth_interval=1 one successful step should double the scale 1024 -> 2048, got "
               "1024.0: call scaler.update() after scaler.step(optimizer)")
    assert translate(visible, LANGUAGE).endswith("請在 scaler.step(optimizer) 之後呼叫 scaler.update()")
    nested = "flat_index: flat_index((2, 1), (5, 2)) with the default offset: expected 12, got 7 [seed 1]"
    assert translate(nested, LANGUAGE) == "flat_index：flat_index((2, 1), (5, 2))，偏移量用預設值：預期 12，" \
                                          "實際得到 7〔種子 1〕"


@pytest.mark.parametrize("message", [
    "", "something unexpected happened", "my own assert: 3 != 4", "expected",
    "the offset is where element (0, 0) lives, or so",  # almost a template: not one
])
def test_an_unknown_message_comes_back_unchanged(message):
    assert translate(message, LANGUAGE) == message
    assert translate("the offset is where element (0, 0) lives", None) == \
        "the offset is where element (0, 0) lives"  # English (no language): as it is


def test_an_error_output_is_translated_where_it_shows():
    english = "the offset is where element (0, 0) lives"
    output = {"output_type": "error", "ename": "AssertionError", "evalue": english,
              "traceback": ["\x1b[0;31m---\x1b[0m", f"\x1b[0;31mAssertionError\x1b[0m: {english}"]}
    assert messages.translate_output(output, "zh-TW")
    assert output["evalue"] == "偏移量就是元素 (0, 0) 所在的位置"
    assert output["traceback"][-1].endswith(": 偏移量就是元素 (0, 0) 所在的位置")
    assert not messages.translate_output(dict(output, evalue="mine"), "zh-TW")


# --- the student's kernel (Validate, a test cell run in JupyterLab) -------------------------------------------

def test_the_kernel_hook_shows_a_visible_test_failure_in_zh_tw():
    """The zh-TW release's imports cell ends with the hook; run in a plain IPython kernel, a failing
    test cell's AssertionError reads in zh-TW (what Validate and JupyterLab show), other errors not."""
    hook = kernel_hook(source_path(ASSIGNMENT, course_root=ROOT), LANGUAGE, ROOT)
    assert hook and "autograder" not in hook.split("\n", 1)[1]  # no import of the course package
    release = nbformat.read(ROOT / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.zh-TW.ipynb", as_version=4)
    assert release.cells[1].source.endswith(hook)
    assert "[seed" not in hook and "check_" not in hook  # the hidden checks' messages stay out
    cells = [nbformat.v4.new_code_cell(release.cells[1].source),
             nbformat.v4.new_code_cell('got = (1, 2, 6)\nassert got == (12, 4, 1), '
                                       'f"contiguous_strides({(2, 3, 4)}): expected {(12, 4, 1)}, got {got}"'),
             nbformat.v4.new_code_cell('assert False, "my own message"'),
             nbformat.v4.new_code_cell("1 / 0")]
    nb = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": dict(release.metadata.kernelspec)})
    NotebookClient(nb, timeout=120, allow_errors=True, kernel_name="python3").execute()
    errors = [next(o for o in c.outputs if o.output_type == "error") for c in nb.cells[1:]]
    assert errors[0].evalue == "contiguous_strides((2, 3, 4))：預期 (12, 4, 1)，實際得到 (1, 2, 6)"
    assert errors[0].ename == "AssertionError" and errors[0].evalue in errors[0].traceback[-1]
    shown = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(errors[0].traceback))
    assert "Cell In[" in shown and "assert got == (12, 4, 1)" in shown  # the usual traceback
    assert errors[1].evalue == "my own message"
    assert errors[2].ename == "ZeroDivisionError"


# --- end to end: nbgrader feedback and the service -----------------------------------------------------------

def wrong_notebook(language: str | None) -> nbformat.NotebookNode:
    wrong = {e["name"]: e for e in samples.load_catalogue(ASSIGNMENT, course_root=ROOT)[0]}
    replace = {name: code for key in WRONG for name, code in wrong[key]["replace"].items()}
    return samples.student_notebook(ASSIGNMENT, replace, course_root=ROOT, language=language)


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """The English and the zh-TW notebook with the same wrong answers, collected, graded and given
    feedback through the real commands."""
    from service_course import make_course

    tmp = tmp_path_factory.mktemp("zh-messages")
    root = make_course(tmp / "course", students=("en", "zh", "svc"), assignments=(ASSIGNMENT,))
    inbox = tmp / "inbox"
    for student, language, name in (("en", None, f"{ASSIGNMENT}.ipynb"),
                                    ("zh", LANGUAGE, f"{ASSIGNMENT}.zh-TW.ipynb")):
        (inbox / student / ASSIGNMENT).mkdir(parents=True)
        nbformat.write(wrong_notebook(language), inbox / student / ASSIGNMENT / name)
    assert main(["--course-root", str(root), "collect", str(inbox)]) == 0
    assert main(["--course-root", str(root), "grade", "--allow-cpu", "--no-progress"]) == 0
    assert main(["--course-root", str(root), "feedback", ASSIGNMENT]) == 0
    return root


def grades(root: Path, student: str) -> dict[str, float]:
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student)
        return {g.name: float(g.score) for g in notebook.grades}


def failed_outputs(path: Path) -> dict[str, str]:
    nb = nbformat.read(path, as_version=4)
    return {c.metadata.nbgrader["grade_id"]: o.evalue for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if o.output_type == "error"}


@pytest.mark.slow
def test_zh_tw_scores_equal_the_english_twin_cell_for_cell(twins):
    english, chinese = grades(twins, "en"), grades(twins, "zh")
    assert chinese == english
    lost = {name for name, score in english.items() if score == 0}
    assert {"test_contiguous_strides", "test_is_contiguous", "test_gather_view"} <= lost
    autograded = twins / "autograded" / "zh" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert nbformat.read(autograded, as_version=4).metadata.course == {"language": "zh-TW"}
    # what was recorded is the English (grading never translates): the same failures in both
    en = failed_outputs(twins / "autograded" / "en" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    assert failed_outputs(autograded).keys() == en.keys() and not any(map(CJK.search, en.values()))


@pytest.mark.slow
def test_zh_tw_feedback_shows_the_messages_in_zh_tw(twins):
    pages = {s: html.unescape((twins / "feedback" / s / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text())
             for s in ("en", "zh")}
    english = failed_outputs(twins / "autograded" / "en" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    for grade_id, message in english.items():
        shown = translate(message, LANGUAGE)
        assert message in pages["en"] and CJK.search(shown), (grade_id, message)
        assert shown in pages["zh"] and message not in pages["zh"], (grade_id, message)
    hidden = english["test_is_contiguous"]
    assert "[seed" in hidden and "預期" in translate(hidden, LANGUAGE)  # a hidden check's message too
    assert "BEGIN HIDDEN TESTS" not in pages["zh"] and "autograder.hidden" not in pages["zh"]


@pytest.mark.slow
def test_the_service_shows_a_zh_tw_submissions_messages_in_zh_tw(twins):
    from service_course import Service, client, wait_graded

    running = Service(twins).start()
    try:
        token = running.tokens("svc")["svc"]
        with client(running, token) as http:
            reply = http.post("api/submissions", params={"filename": f"{ASSIGNMENT}.zh-TW.ipynb"},
                              content=nbformat.writes(wrong_notebook(LANGUAGE)).encode())
            assert reply.status_code == 202, reply.text
            status = wait_graded(http, reply.json()["id"])
    finally:
        running.stop()
    assert status["state"] == "done"
    assert {t["name"]: t["points"] for t in status["tests"]} == grades(twins, "en")
    failing = {t["name"]: t["message"] for t in status["tests"] if not t["passed"]}
    english = failed_outputs(twins / "autograded" / "en" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    assert failing.keys() == english.keys()
    for name, message in failing.items():
        shown = translate(english[name], LANGUAGE)
        assert CJK.search(shown) and shown in message and english[name] not in message, (name, message)
    assert "BEGIN HIDDEN TESTS" not in json.dumps(status, ensure_ascii=False)


@pytest.mark.slow
def test_nbgrader_validate_shows_the_zh_tw_message(tmp_path):
    """What a student sees after pressing Validate on a zh-TW notebook with a wrong answer."""
    import subprocess
    import sys

    from autograder.authoring.release import nbgrader_environment

    nbformat.write(wrong_notebook(LANGUAGE), tmp_path / f"{ASSIGNMENT}.zh-TW.ipynb")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "validate", f"{ASSIGNMENT}.zh-TW.ipynb"],
                          cwd=tmp_path, env=nbgrader_environment({"AUTOGRADER_ALLOW_CPU": "1"}),
                          capture_output=True, text=True, timeout=600)
    text = done.stdout + done.stderr
    assert "VALIDATION FAILED ON 2 CELL(S)!" in text, text[-3000:]
    assert "AssertionError: contiguous_strides((2, 3, 4))：預期 (12, 4, 1)，實際得到 (1, 2, 6)" in text
    assert "AssertionError: 形狀 (3, 2)、步幅 (1, 3)：預期" in text


# --- labels: what a helper, a check's name or an exercise's function puts into a message -------------------

def test_labels_passed_to_a_helper_and_check_names_are_templates(tmp_path):
    """A phrase passed to a function whose parameter is ``what`` (``_compare(got, want, "...")``) and
    a ``@hidden_check`` name head the student's message: each is an entry of its own. A name that is
    one identifier is code (no entry)."""
    hidden = tmp_path / "autograder" / "hidden"
    hidden.mkdir(parents=True)
    (hidden / "toy.py").write_text(
        'def _compare(got, want, what, *, rtol=1e-5):\n'
        '    expect(got == want, f"{what}: values differ")\n'
        'class Runner:\n'
        '    def run(self, steps, what):\n'
        '        expect(steps, f"{what}: nothing ran")\n'
        '@hidden_check("toy seeding")\n'
        '@hidden_check("patchify")\n'
        'def check(rng):\n'
        '    _compare(1, 2, "AdaGrad with small gradients")\n'
        '    _compare(1, 2, f"toy(x of shape {shape})")\n'
        '    Runner().run(3, "a run on the GPU")\n'
        '    _run(1, what=f"{device} with a loss scale")\n'
        'def _run(x, *, what):\n'
        '    expect(x, f"{what}: failed")\n', encoding="utf-8")
    english = {t.english for t in templates(tmp_path)}
    assert {"toy seeding", "AdaGrad with small gradients", "toy(x of shape {shape})",
            "a run on the GPU", "{device} with a loss scale"} <= english
    assert "patchify" not in english
    found = {t.english for t in templates(ROOT)}
    assert {"split_heads on a 2-D x", "patchify on a 3-D image", "AdaGrad on the GPU",
            "get_batch reads only what it needs", "train_step_mixed on the GPU",
            "AdaGrad(params, lr={lr:.3g}, eps={eps:.3g}) with small gradients",
            "train_step_mixed(..., autocast_dtype=torch.bfloat16) on {device.type}"} <= found
    assert not {"patchify", "mfu", "get_batch"} & found


def test_english_a_visible_message_shows_in_a_field_has_an_entry(tmp_path):
    """``{x or 'defaults'}`` and a function of the exercise whose result a message shows
    (``describe_scaler``: "disabled GradScaler"): each English text is a message of its own."""
    found = {t.english for t in templates(ROOT)}
    assert {"enabled GradScaler", "disabled GradScaler"} <= found
    assert any(e.startswith("AdaGrad(defaults) after {len(_grads)} steps") for e in found)
    assert translate("float16 needs an enabled torch.amp.GradScaler, got disabled GradScaler", LANGUAGE) \
        == "float16 需要一個啟用的 torch.amp.GradScaler，實際得到 GradScaler（已停用）"
    defaults = translate("AdaGrad(defaults) after 4 steps (one with .grad None): expected [1.0] like "
                         "torch.optim.Adagrad, got [2.0]. With eps=0.5 a wrong eps placement (inside "
                         "the square root) shows up clearly.", LANGUAGE)
    assert defaults.startswith("使用預設參數的 AdaGrad 經過 4 步") and "defaults" not in defaults
    hook = kernel_hook(source_path("06_mixed_precision", course_root=ROOT), LANGUAGE, ROOT)
    assert hook and "'GradScaler（已停用）'" in hook
    hook = kernel_hook(source_path("04_adagrad", course_root=ROOT), LANGUAGE, ROOT)
    assert hook and "使用預設參數的 AdaGrad" in hook


@pytest.mark.parametrize(("english", "chinese"), [
    ("get_batch reads only what it needs: get_batch(a 10**12-token memmap, 7, 62, 'cpu'): x should be "
     "int64 (what embedding layers and cross_entropy expect), got torch.int32 [seed 7]",
     "get_batch 只讀取需要的部分：get_batch(含 10**12 個詞元的 memmap, 7, 62, 'cpu')：x 應該是 int64"
     "（嵌入層與 cross_entropy 要求的型別），實際得到 torch.int32〔種子 7〕"),
    ("split_heads: split_heads on a 2-D x should raise jaxtyping's TypeCheckError (keep "
     "@jaxtyped(typechecker=beartype) and the annotations), but it returned a result [seed 1]",
     "split_heads：以 2 維的 x 呼叫 split_heads 應該引發 jaxtyping 的 TypeCheckError（請保留 "
     "@jaxtyped(typechecker=beartype) 與型別註記），它卻傳回了結果〔種子 1〕"),
    # a shape's commas inside the label: the fields keep their order and what lies between them
    ("split_heads: split_heads(x of shape (2, 5, 12), 3): shape: expected (2, 3, 5, 4), got (2, 5, 3, 4) "
     "[seed 1]",
     "split_heads：split_heads(x 的形狀為 (2, 5, 12), 3) 的形狀：預期 (2, 3, 5, 4)，實際得到 (2, 5, 3, 4)〔種子 1〕"),
    ("train_step_mixed (bfloat16): train_step_mixed(..., autocast_dtype=torch.bfloat16) on cpu, step 2: "
     "optimizer state is torch.bfloat16, expected float32 [seed 2]",
     "train_step_mixed (bfloat16)：train_step_mixed(..., autocast_dtype=torch.bfloat16)，裝置為 cpu，第 2 步："
     "最佳化器狀態是 torch.bfloat16，預期 float32〔種子 2〕"),
    # a label with brackets also fits "{what}[{key!r}]: expected ...": the reading that leaves no
    # English wins, and no space is left between the label's closing ） and 必須
    ("training_memory_bytes: training_memory_bytes(d=3, num_layers=2, batch=4, optimizer='adam', "
     "bytes_per_value=4) [parameters 10, activations 24, gradients 10, optimizer state 20 values]: "
     "expected 256, got 200 [seed 1]",
     "training_memory_bytes：training_memory_bytes(d=3, num_layers=2, batch=4, optimizer='adam', "
     "bytes_per_value=4)（參數 10 個、活化值 24 個、梯度 10 個、最佳化器狀態 20 個數值）：預期 256，實際得到 200〔種子 1〕"),
    ("training_memory_bytes: training_memory_bytes(d=3, num_layers=2, batch=4, optimizer='adam', "
     "bytes_per_value=4) [parameters 10, activations 24, gradients 10, optimizer state 20 values] must "
     "return an int, got float 256.0 [seed 1]",
     "training_memory_bytes：training_memory_bytes(d=3, num_layers=2, batch=4, optimizer='adam', "
     "bytes_per_value=4)（參數 10 個、活化值 24 個、梯度 10 個、最佳化器狀態 20 個數值）必須傳回 int，實際得到 float "
     "256.0〔種子 1〕"),
])
def test_a_label_in_a_hidden_failure_reads_in_zh_tw(english, chinese):
    assert translate(english, LANGUAGE) == chinese
