"""Issue 41 m3: the feedback service's student pages speak the reader's language (Accept-Language,
or ``?lang=`` kept in a cookie): page chrome, states, refusals and dates from ``messages.po``."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import datetime

import httpx
import pytest
from service_course import make_course, web_app

from autograder.service import language
from autograder.service.store import Store
from tests.test_service_intake import settings_with

T0 = datetime(2026, 11, 2, 12, 0, 0)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    return make_course(tmp_path_factory.mktemp("service-language") / "course", students=("alice",))


@contextmanager
def serving(course, tmp_path, **policy):
    store = Store(f"sqlite:///{tmp_path / 'service.db'}")
    with web_app(settings_with(course, **policy), store, lambda: T0) as url:
        yield url, store


@pytest.mark.parametrize("header, expected", [
    ("zh-TW,zh;q=0.9,en;q=0.8", "zh_TW"), ("zh-Hant", "zh_TW"), ("zh-HK", "zh_TW"), ("zh", "zh_TW"),
    ("en-US,en;q=0.9", "en"), ("fr-FR", "en"), ("", "en"), (None, "en"),
    ("en;q=0.5, zh-TW;q=0.9", "zh_TW"), ("zh-CN", "en")])
def test_accept_language_picks_the_course_edition(header, expected):
    assert language.from_accept_language(header) == expected


def test_student_pages_speak_zh_tw_to_a_zh_tw_browser_and_english_otherwise(course, tmp_path):
    with serving(course, tmp_path, due="2026-12-04T23:59:00+00:00") as (url, store):
        token = store.issue_token("alice")
        auth = {"Authorization": f"Bearer {token}"}
        zh = httpx.get(url, headers={**auth, "Accept-Language": "zh-TW,zh;q=0.9,en;q=0.8"}, timeout=30)
        assert zh.status_code == 200
        assert '<html lang="zh-Hant-TW">' in zh.text
        for words in ("繳交練習", "你的繳交紀錄", "剩餘繳交次數", "截止時間", "2026 年 12 月 4 日 23:59 (UTC)",
                      "取最後一次", "尚無繳交。", "登出"):
            assert words in zh.text, words
        for english in ("Submit an exercise", "Your submissions", "Submissions left", "no due date",
                        "4 Dec 2026", "Log out", "None yet."):
            assert english not in zh.text, english
        en = httpx.get(url, headers={**auth, "Accept-Language": "en-US"}, timeout=30)
        assert '<html lang="en">' in en.text and "Submit an exercise" in en.text
        assert "4 Dec 2026, 23:59 UTC" in en.text and "繳交練習" not in en.text
        # ?lang= overrides the browser and is kept in a cookie
        chosen = httpx.get(url + "?lang=en", headers={**auth, "Accept-Language": "zh-TW"}, timeout=30)
        assert "Submit an exercise" in chosen.text and chosen.cookies.get(language.COOKIE) == "en"
        kept = httpx.get(url, headers={**auth, "Accept-Language": "zh-TW",
                                       "Cookie": f"{language.COOKIE}=en"}, timeout=30)
        assert "Submit an exercise" in kept.text
        # the login page and a refusal the web process writes itself
        login = httpx.get(url + "login", headers={"Accept-Language": "zh-Hant"}, timeout=30)
        assert "<h1>登入</h1>" in login.text and "Log in" not in login.text
        missing = httpx.get(url + "submissions/999", headers={**auth, "Accept-Language": "zh-TW"},
                            timeout=30)
        assert missing.status_code == 404 and "這裡沒有你的繳交 #999。" in missing.text
        # the submission page's script gets its strings in the reader's language
        assert '"queued": "排隊中"' in zh.text


def test_every_page_string_is_in_the_catalogue_and_translated():
    from autograder.i18n import messages

    table = language.catalogue("zh_TW")
    pages = messages.page_templates(messages.package_root())
    assert len(pages) > 40
    assert [t.english for t in pages if t.prose() and t.english not in table] == []
