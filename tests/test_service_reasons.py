"""The service's reasons in the reader's language: a zh-TW student reads every reason in Chinese
(a refused upload, why a submission waits or was not graded, the notices beside a grade: a late
notice, a timed-out notebook, a grader error), on the JSON API the page is drawn from and in what
``submit`` prints; the English stays the stored form, the English student's view is unchanged and
the staff read the grader's own words. The reasons are whole-sentence entries of
``locales/zh_TW/messages.po`` (``autograder.i18n.messages.REASON_SOURCES``), matched at display
(``autograder.service.language.reason``)."""

from __future__ import annotations

import re
import signal
from datetime import datetime

import httpx
import polib
import pytest
from service_course import make_course, right_notebook, web_app

from autograder.grading.execute.forkserver import _death_reason
from autograder.grading.record import NEEDS_REVIEW, late_notice, not_run_problem
from autograder.i18n import messages
from autograder.machine_limits import NOT_RUN_REASON
from autograder.service import client, language
from autograder.service.store import Store
from autograder.service.views import GRADER_ERROR, GRADER_ERROR_AGAIN, submission_view
from tests.test_service_intake import settings_with

T0 = datetime(2026, 11, 2, 12, 0, 0)
ZH = {"Accept-Language": "zh-TW,zh;q=0.9,en;q=0.8"}
EN = {"Accept-Language": "en-US,en;q=0.9"}
# reasons as the grader stores them (forkserver.py, record.py)
TIMED_OUT = ("01_strides.ipynb: the notebook ran past its 600 s limit (all cells together); the "
             "grading process was killed")
LATE = late_notice(2 * 3600, 0.0, 8.0, 10.0)
LATE_PENALTY = late_notice(30 * 60, 2.0, 8.0, 10.0)
NOT_RUN = not_run_problem(3)


def english_sentences(text: str) -> list[str]:
    """Runs of two or more English words in ``text``: identifiers (``01_strides.ipynb``,
    ``'notes.txt'``, ``http://...``), numbers and units left out."""
    text = re.sub(r"https?://\S+|'[^']*'|\S*[\d_./#]\S*", " ", text)
    return [m.group(0) for m in re.finditer(r"[A-Za-z]{2,}(?:[ ,]+[A-Za-z]{2,})+", text)]


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return make_course(tmp_path_factory.mktemp("service-reasons") / "course", students=("alice",))


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(f"sqlite:///{tmp_path / 'service.db'}")


def _graded(store: Store, notices: list[str]) -> int:
    job = store.add(student="alice", assignment="01_strides", notebook="01_strides.ipynb",
                    content=b"{}", received_at=T0, late=True)
    [claimed] = store.claim("w", 1)
    store.finish(claimed.id, claimed.lease, score=8, max_score=10,
                 feedback={"tests": [], "notices": notices})
    return job


def _failed(store: Store, reason: str) -> int:
    job = store.add(student="alice", assignment="01_strides", notebook="01_strides.ipynb",
                    content=b"{}", received_at=T0, late=False)
    [claimed] = store.claim("w", 1)
    store.started(job, claimed.lease)
    store.fail(job, claimed.lease, reason)
    return job


def _grader_error(store: Store, times: int) -> int:
    job = store.add(student="alice", assignment="01_strides", notebook="01_strides.ipynb",
                    content=b"{}", received_at=T0, late=False)
    for _ in range(times):
        [claimed] = store.claim("w", 1)
        store.started(job, claimed.lease)
        store.fault(job, claimed.lease, "[Errno 13] Permission denied: '/srv/course/x'")
    return job


def test_the_reasons_are_whole_sentence_entries_of_the_catalogue():
    found = {t.english: t for t in messages.templates() if t.kind == "service reason"}
    for english in ("{name!r} is not a notebook: upload the assignment's .ipynb file (one of {expected})",
                    "late by {hours:.1f} h: no penalty",
                    "late by {minutes:.0f} min: late penalty {penalty:g} (grade of record "
                    "{record:g}/{max_score:g})",
                    "the notebook ran past its {whole:g} s limit (all cells together); the grading "
                    "process was killed", GRADER_ERROR, GRADER_ERROR_AGAIN,
                    "not run: no GPU ({cells} checks)", "not run: no GPU (1 check)"):
        assert english in found, english
    table = language.catalogue("zh_TW")
    assert [e for e in found if e not in table] == []
    # no fragment: no reason template is a field and a word or two ("{x} min", "check{'s'...}")
    assert [e for e in found if re.fullmatch(r"\{[^{}]+\} ?[a-z]+", e) or "{'s'" in e] == []
    # the wording the grader stored before stays (staff pages, logs, the gradebook's problems)
    assert LATE == "late by 2.0 h: no penalty"
    assert LATE_PENALTY == "late by 30 min: late penalty 2 (grade of record 6/10)"
    assert late_notice(3 * 86400, 0.0, 1, 2) == "late by 3.0 days: no penalty"
    assert NOT_RUN == f"{NOT_RUN_REASON} (3 checks)" and not_run_problem(1) == f"{NOT_RUN_REASON} (1 check)"
    assert NEEDS_REVIEW == "needs review"


@pytest.mark.parametrize("stored, chinese", [
    (LATE, "遲交 2.0 小時：不扣分"),
    (LATE_PENALTY, "遲交 30 分鐘：扣 2 分（正式成績 6/10）"),
    (TIMED_OUT, "01_strides.ipynb：notebook 的執行時間超過 600 秒的上限（所有儲存格合計）；評分行程已被終止"),
    (NOT_RUN, "未執行：沒有 GPU（3 項檢查）"),
    ("01_strides.ipynb: not submitted (0 points); late by 2.0 h: no penalty",
     "01_strides.ipynb：未繳交（0 分）；遲交 2.0 小時：不扣分"),
    ("01_strides was due at 15 Oct 2026, 23:59 UTC and late submissions are not accepted; nothing "
     "was submitted", "01_strides 已於 2026 年 10 月 15 日 23:59 (UTC) 截止，且不接受遲交；這次沒有繳交任何檔案"),
    # the forkserver's death reasons, whole sentences per case (before: "… {what} {where}" glued)
    (_death_reason(-signal.SIGKILL, 4), "評分行程在執行第 4 個儲存格時被 SIGKILL 終止（通常是系統記憶體不足）"),
    (_death_reason(-signal.SIGSEGV, None), "評分行程在兩個儲存格之間被 SIGSEGV 終止"),
    (_death_reason(3, 2), "評分行程在執行第 2 個儲存格時結束，結束狀態為 3"),
    ("the file name 'a/b.ipynb' is a path, not a file name: send the notebook's own file name, e.g. "
     "01_strides.ipynb", "檔名 'a/b.ipynb' 是路徑，不是檔名：請傳送 notebook 本身的檔名，例如 01_strides.ipynb"),
])
def test_a_stored_reason_reads_in_chinese_and_stays_english_for_english(stored, chinese):
    assert language.reason(stored, "zh_TW") == chinese
    assert language.reason(stored, "en") == stored and language.reason(stored, None) == stored
    assert language.reason("an unknown reason; another", "zh_TW") == "an unknown reason; another"


def test_a_zh_tw_student_reads_every_reason_in_chinese_on_the_api_and_the_english_one_as_before(
        course, store):
    settings = settings_with(course)
    late = _graded(store, [LATE, TIMED_OUT, NOT_RUN])
    failed = _failed(store, f"not run: {TIMED_OUT}")
    errored = _grader_error(store, 2)
    retried = _grader_error(store, 1)  # last: it is queued again
    with web_app(settings, store, lambda: T0) as url:
        auth = {"Authorization": f"Bearer {store.issue_token('alice')}"}

        def api(job: int, headers: dict[str, str]) -> dict:
            reply = httpx.get(f"{url}api/submissions/{job}", headers={**auth, **headers}, timeout=30)
            assert reply.status_code == 200, reply.text
            return reply.json()

        zh = {job: api(job, ZH) for job in (late, failed, retried, errored)}
        en = {job: api(job, EN) for job in (late, failed, retried, errored)}
        # a refused upload (not a notebook), on the API and as submit prints it
        refused = httpx.post(f"{url}api/submissions", params={"filename": "notes.txt"},
                             content=b"{}", headers={**auth, **ZH}, timeout=30)
        refused_en = httpx.post(f"{url}api/submissions", params={"filename": "notes.txt"},
                                content=b"{}", headers={**auth, **EN}, timeout=30)
        # the browser's page asks the same API with its cookie: ?lang=zh-TW is kept
        cookie = httpx.get(f"{url}?lang=zh-TW", headers={**auth, **EN}, timeout=30).cookies
        by_cookie = httpx.get(f"{url}api/submissions/{errored}", headers={**auth, **EN},
                              cookies=cookie, timeout=30).json()
        staff = httpx.get(f"{url}api/submissions/{errored}", timeout=30, headers={
            **ZH, "Authorization": f"Bearer {store.issue_token('teacher', instructor=True)}"}).json()
    assert zh[late]["notices"] == ["遲交 2.0 小時：不扣分", language.reason(TIMED_OUT, "zh_TW"),
                                   "未執行：沒有 GPU（3 項檢查）"]
    assert zh[failed]["reason"] == ("未執行：01_strides.ipynb：notebook 的執行時間超過 600 秒的上限"
                                    "（所有儲存格合計）；評分行程已被終止")
    assert zh[retried]["reason"] == "評分程式錯誤：已通知課程助教（不是你的 notebook 的問題）；正在重新評分"
    assert zh[errored]["reason"] == "評分程式錯誤：已通知課程助教（不是你的 notebook 的問題）"
    assert by_cookie["reason"] == zh[errored]["reason"]
    assert refused.status_code == 400 and refused.json()["error"] == (
        "'notes.txt' 不是 notebook：請上傳作業的 .ipynb 檔案（01_strides.ipynb, 02_einops.ipynb 其中之一）")
    shown = [*zh[late]["notices"], zh[failed]["reason"], zh[retried]["reason"], zh[errored]["reason"],
             refused.json()["error"]]
    assert [s for s in shown if english_sentences(s)] == []
    # English: the stored words, as before
    assert en[late]["notices"] == [LATE, TIMED_OUT, NOT_RUN]
    assert en[failed]["reason"] == f"not run: {TIMED_OUT}"
    assert en[retried]["reason"] == GRADER_ERROR_AGAIN
    assert en[retried]["reason"] == GRADER_ERROR + "; it is being graded again"
    assert en[errored]["reason"] == GRADER_ERROR
    assert refused_en.json()["error"] == ("'notes.txt' is not a notebook: upload the assignment's "
                                          ".ipynb file (one of 01_strides.ipynb, 02_einops.ipynb)")
    # the staff read the grader's own words, whatever their language
    assert staff["reason"] == ("the grader failed 2 times on this submission ([Errno 13] Permission "
                               "denied: '/srv/course/x'); not your notebook's fault, and not counted: "
                               "the course staff can grade it again")
    for job in (late, failed, retried, errored):
        row = store.get(job)
        assert submission_view(row, settings, store, T0, language="en") == \
            submission_view(row, settings, store, T0) == en[job] | {"id": job}


def test_what_waits_for_a_gpu_worker_says_why_in_chinese(course, store):
    job = store.add(student="alice", assignment="01_strides", notebook="01_strides.ipynb",
                    content=b"{}", received_at=T0, late=False)
    settings = settings_with(course)
    zh = submission_view(store.get(job), settings, store, T0, language="zh_TW")
    en = submission_view(store.get(job), settings, store, T0)
    assert en["waiting"] == ("no grader is running now: it stays in the queue and is graded when one "
                             "starts (the course staff see why on their page)")
    assert zh["waiting"] == ("目前沒有評分程式在執行：這份繳交會留在佇列中，等評分程式啟動後再評分"
                             "（課程助教可在他們的頁面上看到原因）")


def test_submit_prints_the_reasons_in_chinese_for_a_zh_tw_student(course, store, tmp_path, capsys):
    notebook = tmp_path / "notes.txt"
    notebook.write_bytes(right_notebook(course))
    late = _graded(store, [LATE, TIMED_OUT])
    errored = _grader_error(store, 2)
    with web_app(settings_with(course), store, lambda: T0) as url:
        token = store.issue_token("alice")
        with pytest.raises(client.SubmitError) as refused:
            client.submit(notebook, url=url, token=token, wait=False, language=client.CHINESE)
        with pytest.raises(client.SubmitError) as refused_en:
            client.submit(notebook, url=url, token=token, wait=False, language=client.ENGLISH)
        seen = {job: client.call(f"{url}api/submissions/{job}", {"Authorization": f"Bearer {token}"},
                                 language=client.CHINESE)[1] for job in (late, errored)}
        seen_en = {job: client.call(f"{url}api/submissions/{job}", {"Authorization": f"Bearer {token}"},
                                    language=client.ENGLISH)[1] for job in (late, errored)}
    assert str(refused.value) == ("notes.txt：未受理（400）：'notes.txt' 不是 notebook：請上傳作業的 "
                                  ".ipynb 檔案（01_strides.ipynb, 02_einops.ipynb 其中之一）")
    assert str(refused_en.value) == ("notes.txt: refused (400): 'notes.txt' is not a notebook: upload "
                                     "the assignment's .ipynb file (one of 01_strides.ipynb, "
                                     "02_einops.ipynb)")
    printed = client.summary_lines(seen[late], client.CHINESE) + \
        client.summary_lines(seen[errored], client.CHINESE)
    assert printed == ["分數：8/10", "  遲交 2.0 小時：不扣分", f"  {language.reason(TIMED_OUT, 'zh_TW')}",
                       "評分程式錯誤：已通知課程助教（不是你的 notebook 的問題）；這次不計入你的繳交次數"]
    assert [line for line in printed + [str(refused.value)] if english_sentences(line)] == []
    failed = client.summary_lines({"state": "failed", "reason": language.reason(TIMED_OUT, "zh_TW")},
                                  client.CHINESE)
    assert failed == [f"未評分：{language.reason(TIMED_OUT, 'zh_TW')}"]
    # English, as before
    assert client.summary_lines(seen_en[errored], client.ENGLISH) == \
        [f"{GRADER_ERROR} (not counted against you)"]
    assert client.summary_lines(seen_en[late], client.ENGLISH) == ["score: 8/10", f"  {LATE}",
                                                                    f"  {TIMED_OUT}"]
    assert client.summary_lines({"state": "failed", "reason": TIMED_OUT}, client.ENGLISH) == \
        [f"not graded: {TIMED_OUT}"]
    assert client.summary_lines({"state": "queued", "waiting": "x", "page": "p"}, client.ENGLISH) == \
        ["not graded yet: x", "its page: p"]


@pytest.mark.parametrize("variables, expected", [
    ({"LANG": "zh_TW.UTF-8"}, "zh-TW"), ({"LC_ALL": "zh_HK.UTF-8", "LANG": "en_US.UTF-8"}, "zh-TW"),
    ({"AUTOGRADER_LANG": "zh-Hant"}, "zh-TW"), ({"LANG": "en_US.UTF-8"}, "en"), ({}, "en"),
    ({"LANG": "zh_CN.UTF-8"}, "en"), ({"LANG": "C.UTF-8"}, "en")])
def test_submit_takes_its_language_from_the_environment(monkeypatch, variables, expected):
    for name in client.LANGUAGE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert client.reader_language() == expected
    assert client.reader_language("zh-TW") == "zh-TW"


def test_submit_py_carries_the_catalogue_translations_of_its_own_sentences():
    """``submit.py`` is one standalone file: its ``ZH_TW`` copy equals ``messages.po``."""
    path = messages.catalogue_path("zh_TW")
    done = {e.msgid: e.msgstr for e in polib.pofile(str(path)) if not e.obsolete}
    assert {english: done.get(english) for english in client.ZH_TW} == client.ZH_TW
    own = [t.english for t in messages.page_templates(messages.package_root())
           if t.where[0] == "autograder/service/client.py" and t.prose()]
    assert own and [english for english in own if english not in client.ZH_TW] == []
