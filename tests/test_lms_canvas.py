"""``autograder lms canvas`` and ``autograder lms csv`` against a local fake Canvas (tests/support/fake_canvas.py),
through the real canvasapi and a real nbgrader gradebook: a dry run writes nothing, apply makes Canvas
equal the gradebook and a second apply writes nothing, throttling and 5xx are waited out, and every
refusal (token, scale, the matching field, the assignment mapping) comes before any write."""

from __future__ import annotations

import csv
import textwrap
from pathlib import Path

import pytest
from fake_canvas import FakeCanvas, Fault, canvas_user

from autograder.cli import main
from autograder.course.nbgrader import Course, load_course
from autograder.errors import CourseError
from autograder.lms.canvas import EXCUSED, NOT_IN_CANVAS, SET, UNCHANGED, sync
from autograder.lms.options import CanvasOptions

# gradebook: student id -> (first, last, email, {assignment: (score of cell a, score of cell b)})
CLASS = {
    "s01": ("Ada", "Lovelace", "ada@uni.edu", {"01_strides": (6, 4), "04_adagrad": (3, 2)}),
    "s02": ("Alan", "Turing", "alan@uni.edu", {"01_strides": (2, 1.5)}),
    "s03": ("Grace", "Hopper", "grace@uni.edu", {"01_strides": (0, 0), "04_adagrad": (5, 5)}),
    "s04": ("Edsger", "Dijkstra", "edsger@uni.edu", {"04_adagrad": (1, 0)}),
    "ghost": ("Gone", "Missing", "ghost@uni.edu", {"01_strides": (6, 4)}),  # not in Canvas
}
MAXIMA = {"01_strides": (6, 4), "04_adagrad": (5, 5)}


def make_course(root: Path, canvas: dict | None = None, klass: dict = CLASS) -> Course:
    root.mkdir(parents=True, exist_ok=True)
    (root / "nbgrader_config.py").write_text(textwrap.dedent(f"""\
        c = get_config()
        c.CourseDirectory.course_id = "lms-test"
        c.CourseDirectory.db_url = "sqlite:///{root / 'gradebook.db'}"
        c.Autograder.canvas = {canvas or {}!r}
        """))
    course = load_course(root)
    with course.gradebook() as gb:
        for name, (a, b) in MAXIMA.items():
            gb.add_assignment(name)
            gb.add_notebook(name, name)
            gb.add_grade_cell("a", name, name, max_score=a, cell_type="code")
            gb.add_grade_cell("b", name, name, max_score=b, cell_type="code")
        for sid, (first, last, email, work) in klass.items():
            gb.add_student(sid, first_name=first, last_name=last, email=email)
            for name, cells in work.items():
                gb.add_submission(name, sid)
                for cell, score in zip("ab", cells, strict=True):
                    gb.find_grade(cell, name, name, sid).auto_score = score
        gb.db.commit()
    return course


def gradebook_total(sid: str, assignment: str, klass: dict = CLASS) -> float:
    return float(sum(klass[sid][3].get(assignment, (0, 0))))


@pytest.fixture
def fake() -> FakeCanvas:
    canvas = FakeCanvas(course_id=101, page_size=2, users=[
        canvas_user(11, "s01", email="ada@uni.edu"),
        canvas_user(12, "s02", email="alan@uni.edu"),
        canvas_user(13, "s03", email="grace@uni.edu"),
        canvas_user(14, "s04", email="edsger@uni.edu"),
        canvas_user(15, "canvas-only", email="x@uni.edu"),
    ], assignments=[
        {"id": 501, "name": "01_strides", "points_possible": 10, "post_manually": True},
        {"id": 504, "name": "04_adagrad", "points_possible": 10, "post_manually": True},
        {"id": 599, "name": "Participation", "points_possible": 5, "post_manually": False},
    ], scores={(501, 11): 10.0, (501, 15): 7.0, (504, 15): 3.0})
    canvas.start()
    yield canvas
    canvas.stop()


def options_for(fake: FakeCanvas, **more) -> CanvasOptions:
    return CanvasOptions(url=fake.url, course_id=fake.course_id, **more)


def test_a_dry_run_writes_nothing_and_says_what_it_would_do(tmp_path, fake):
    course = make_course(tmp_path / "course")
    result = sync(course, options_for(fake), token=fake.token)
    assert fake.writes == [] and not (course.root / "reports" / "lms-canvas.log").exists()
    actions = {(r.student, r.assignment): r.action for r in result.rows}
    assert actions[("s01", "01_strides")] == UNCHANGED  # Canvas already has 10
    assert actions[("s02", "01_strides")] == SET
    assert actions[("s04", "01_strides")] == SET  # no submission: nbgrader's export gives 0
    assert actions[("ghost", "01_strides")] == NOT_IN_CANVAS
    assert {r.student for r in result.rows} == set(CLASS)  # the Canvas-only student has no row
    assert result.exit_code() == 0 and result.not_in_canvas == ["ghost"]


def test_apply_makes_canvas_equal_the_gradebook_and_a_second_apply_writes_nothing(tmp_path, fake):
    course = make_course(tmp_path / "course")
    first = sync(course, options_for(fake), token=fake.token, apply=True)
    for sid, uid in (("s01", 11), ("s02", 12), ("s03", 13), ("s04", 14)):
        for aid, name in ((501, "01_strides"), (504, "04_adagrad")):
            assert fake.scores[(aid, uid)] == pytest.approx(gradebook_total(sid, name))
    assert fake.scores[(501, 15)] == 7.0 and fake.scores[(504, 15)] == 3.0  # Canvas-only: untouched
    assert first.writes == 2 and first.out_of_sync == [] and first.failed == []
    assert first.exit_code() == 1  # ghost is not in Canvas: reported after everyone else is written
    log = (course.root / "reports" / "lms-canvas.log").read_text()
    assert "student s02 (Canvas user 12): None -> 3.5" in log and fake.token not in log
    sent = len(fake.writes)
    second = sync(course, options_for(fake), token=fake.token, apply=True)
    assert len(fake.writes) == sent and second.writes == 0
    assert {r.action for r in second.rows} == {UNCHANGED, NOT_IN_CANVAS}


def test_throttling_and_server_errors_are_waited_out(tmp_path, fake):
    course = make_course(tmp_path / "course")
    fake.faults += [
        Fault("GET", r"users$", 403, "403 Forbidden (Rate Limit Exceeded)"),
        Fault("GET", r"/submissions$", 500, "Internal Server Error"),
        Fault("POST", r"update_grades$", 429, "", {"Retry-After": "1"}),
        Fault("POST", r"update_grades$", 503, "busy"),
        Fault("GET", r"/progress/", 502, "bad gateway"),
    ]
    result = sync(course, options_for(fake), token=fake.token, apply=True)
    assert all(f.times == 0 for f in fake.faults)
    assert result.out_of_sync == [] and result.failed == []
    assert fake.scores[(504, 13)] == 10.0
    kinds = " | ".join(result.retries)
    assert "throttled" in kinds and "HTTP 500" in kinds and "HTTP 503" in kinds, kinds


def test_a_wrong_token_is_refused_before_anything_is_written(tmp_path, fake, monkeypatch, capsys):
    course = make_course(tmp_path / "course", canvas={"url": fake.url, "course_id": 101})
    monkeypatch.setenv("CANVAS_API_TOKEN", "not-the-token")
    assert main(["--course-root", str(course.root), "lms", "canvas", "--apply"]) == 1
    err = capsys.readouterr().err
    assert "Canvas refused the token" in err and "CANVAS_API_TOKEN" in err and "not-the-token" not in err
    assert fake.writes == []


def test_no_token_is_a_clear_error(tmp_path, fake, monkeypatch, capsys):
    course = make_course(tmp_path / "course", canvas={"url": fake.url, "course_id": 101})
    monkeypatch.delenv("CANVAS_API_TOKEN", raising=False)
    assert main(["--course-root", str(course.root), "lms", "canvas"]) == 1
    assert "set CANVAS_API_TOKEN" in capsys.readouterr().err and fake.requests == []


def test_other_403s_are_not_retried_and_write_nothing(tmp_path, fake):
    course = make_course(tmp_path / "course")
    fake.faults.append(Fault("GET", r"/assignments$", 403, '{"status": "unauthorized"}', times=9))
    with pytest.raises(CourseError, match="forbids this token"):
        sync(course, options_for(fake), token=fake.token, apply=True)
    assert fake.writes == [] and fake.faults[0].times == 8


def test_differing_point_scales_are_refused_unless_scaled(tmp_path, fake):
    course = make_course(tmp_path / "course")
    fake.assignments[0]["points_possible"] = 20
    with pytest.raises(CourseError, match=r"01_strides: .* out of 20 points.*--scale"):
        sync(course, options_for(fake), token=fake.token, apply=True)
    assert fake.writes == []
    result = sync(course, options_for(fake), token=fake.token, apply=True, scale=True)
    assert fake.scores[(501, 12)] == 7.0  # 3.5 of 10 -> 7 of 20
    assert result.out_of_sync == []


@pytest.mark.parametrize("match", ["sis_user_id", "email"])
def test_a_matching_field_the_token_cannot_see_is_an_error_not_a_missing_class(tmp_path, fake, match):
    course = make_course(tmp_path / "course")
    fake.hidden_fields.add(match)
    with pytest.raises(CourseError, match=f"shows no {match} .* needs"):
        sync(course, options_for(fake, match=match), token=fake.token, apply=True)
    assert fake.writes == []


def test_matching_by_email_asks_canvas_for_it_and_never_falls_back(tmp_path, fake):
    course = make_course(tmp_path / "course")
    fake.users[1]["email"] = "someone-else@uni.edu"  # s02's sis id still matches, but not by email
    result = sync(course, options_for(fake, match="email"), token=fake.token)
    users = [r for r in fake.requests if r.path.endswith("users")]
    assert users[0].query.get("include[]") == ["email"]
    actions = {(r.student, r.assignment): r.action for r in result.rows}
    assert actions[("s02", "01_strides")] == NOT_IN_CANVAS
    assert actions[("s03", "01_strides")] == SET


def test_assignments_are_found_by_name_or_refused_naming_the_candidates(tmp_path, fake):
    course = make_course(tmp_path / "course")
    fake.assignments.append({"id": 777, "name": "04_adagrad", "points_possible": 10})
    with pytest.raises(CourseError, match=r"several Canvas assignments .*\(ids 504, 777\)"):
        sync(course, options_for(fake), token=fake.token)
    mapped = options_for(fake).with_assignments(["04_adagrad=777"])
    result = sync(course, mapped, token=fake.token, apply=True)
    assert {r.canvas_assignment for r in result.rows} == {777} and fake.scores[(777, 13)] == 10.0
    with pytest.raises(CourseError, match=r"no Canvas assignment .* named '01_strides'.*"
                                          r"'Participation' \(599\)"):
        fake.assignments[0]["name"] = "Strides"
        sync(course, options_for(fake).with_assignments(["01_strides"]), token=fake.token)


def test_a_failed_bulk_update_is_reported_and_exits_non_zero(tmp_path, fake):
    course = make_course(tmp_path / "course", klass={k: v for k, v in CLASS.items() if k != "ghost"})
    fake.fail_progress = True
    result = sync(course, options_for(fake), token=fake.token, apply=True)
    assert result.failed and "a fake failure" in result.failed[0]
    assert result.out_of_sync and result.exit_code() == 1


def test_the_cli_previews_then_applies(tmp_path, fake, monkeypatch, capsys):
    course = make_course(tmp_path / "course", klass={k: v for k, v in CLASS.items() if k != "ghost"},
                         canvas={"url": fake.url, "course_id": 101,
                                 "assignments": {"01_strides": 501}})
    monkeypatch.setenv("CANVAS_API_TOKEN", fake.token)
    root = ["--course-root", str(course.root), "lms", "canvas"]
    assert main(root) == 0
    out = capsys.readouterr()
    assert "dry run: 3 set, 1 unchanged, 0 not in Canvas, 0 excused in Canvas" in out.out and fake.writes == []
    assert "http://" in out.err  # the plain-HTTP warning
    assert main(root + ["--apply"]) == 0
    assert "applied: 3 set" in capsys.readouterr().out
    assert main(root + ["--apply"]) == 0 and "applied: 0 set, 4 unchanged" in capsys.readouterr().out
    assert all("/504/" not in r.path for r in fake.requests)  # only the mapped assignment


def test_automatic_posting_is_warned_about(tmp_path, fake):
    course = make_course(tmp_path / "course")
    fake.assignments[1]["post_manually"] = False
    result = sync(course, options_for(fake), token=fake.token)
    assert any("04_adagrad" in w and "Manually" in w for w in result.warnings)


def test_the_import_csv_has_canvas_columns_and_nbgraders_scores(tmp_path, fake):
    course = make_course(tmp_path / "course", canvas={"assignments": {"01_strides": 501,
                                                                      "04_adagrad": None}})
    out = tmp_path / "grades.csv"
    assert main(["--course-root", str(course.root), "lms", "csv", str(out)]) == 0
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section",
                       "01_strides (501)", "04_adagrad"]
    assert rows[1][0].strip() == "Points Possible" and rows[1][5:] == ["10", "10"]
    by_id = {row[2]: row for row in rows[2:]}
    assert by_id["s02"][0] == "Turing, Alan" and by_id["s02"][5:] == ["3.5", "0"]
    assert set(by_id) == set(CLASS)
    assert main(["--course-root", str(course.root), "lms", "csv", str(out), "--match", "email"]) == 1


def test_bad_settings_name_what_was_expected(tmp_path):
    course = make_course(tmp_path / "course", canvas={"url": "https://x", "course": 3})
    with pytest.raises(CourseError, match=r"unknown key\(s\) \['course'\]"):
        CanvasOptions.from_config(course.config)
    with pytest.raises(CourseError, match="NAME=CANVAS_ID"):
        CanvasOptions().with_assignments(["=5"])
    with pytest.raises(CourseError, match="must be a number"):
        CanvasOptions().with_assignments(["01_strides=abc"])
    with pytest.raises(CourseError, match="expected https://host"):
        sync(course, CanvasOptions(url="canvas.example.edu", course_id=1), token="t")


def test_against_a_canvas_it_has_never_seen(tmp_path, monkeypatch, capsys):
    """Other ids and page sizes, 23 students with scores drawn at random, one extra Canvas-only
    student, one gradebook student Canvas does not have, a 429 and a 500 on the first writes, and a
    wrong token first: the whole flow through the command line."""
    import random

    rng = random.Random(20261203)
    klass = {f"u{n:03d}": (f"First{n}", f"Last{n}", f"u{n}@college.edu",
                           {name: (rng.choice([0, 1, 2.5, 4, 6]) * m / 6, rng.randint(0, 4) * m / 4)
                            for name, (_, m) in (("01_strides", (6, 4)), ("04_adagrad", (5, 5)))
                            if rng.random() < 0.9})
             for n in range(23)}
    klass["dropped"] = ("Dropped", "Student", "", {"01_strides": (1, 1)})
    users = [canvas_user(70000 + 7 * n, None, login=f"U{n:03d}", name=f"Last{n}, First{n}")
             for n in range(23)] + [canvas_user(79999, None, login="auditor")]
    canvas = FakeCanvas(course_id=8812, token="tok-8812", page_size=3, progress_polls=3,
                        users=users, assignments=[
                            {"id": 31338, "name": "AdaGrad (04)", "points_possible": 10,
                             "post_manually": True},
                            {"id": 31337, "name": "01_strides", "points_possible": 10,
                             "post_manually": True}],
                        scores={(31337, 79999): 9.0, (31337, 70000): 1.25})
    canvas.faults += [Fault("POST", "update_grades$", 429, "", {"Retry-After": "0"}),
                      Fault("POST", "update_grades$", 500, "oops")]
    canvas.start()
    try:
        course = make_course(tmp_path / "course", klass=klass, canvas={
            "url": canvas.url, "course_id": 8812, "match": "login_id",
            "assignments": {"01_strides": None, "04_adagrad": 31338}})
        root = ["--course-root", str(course.root), "lms", "canvas"]
        monkeypatch.setenv("CANVAS_API_TOKEN", "tok-wrong")
        assert main(root + ["--apply"]) == 1
        assert "refused the token" in capsys.readouterr().err and canvas.writes == []
        monkeypatch.setenv("CANVAS_API_TOKEN", "tok-8812")
        assert main(root) == 0 and canvas.writes == []
        preview = capsys.readouterr().out
        assert "not in Canvas" in preview and "auditor" not in preview
        assert main(root + ["--apply"]) == 1  # "dropped" is not in Canvas
        out = capsys.readouterr()
        assert "not in Canvas (nothing written for them): dropped" in out.err
        assert "throttled" in out.err and "HTTP 500" in out.err
        for n in range(23):
            for aid, name in ((31337, "01_strides"), (31338, "04_adagrad")):
                want = round(gradebook_total(f"u{n:03d}", name, klass), 2)
                assert canvas.scores[(aid, 70000 + 7 * n)] == pytest.approx(want), (n, name)
        assert canvas.scores[(31337, 79999)] == 9.0
        sent = len(canvas.writes)
        assert main(root + ["--apply"]) == 1 and len(canvas.writes) == sent
        assert "applied: 0 set" in capsys.readouterr().out
    finally:
        canvas.stop()


def test_an_excused_submission_is_left_alone_and_a_hostile_id_stays_one_log_line(tmp_path, fake):
    klass = dict(CLASS)
    klass["s05\nforged line"] = ("Eve", "X", "eve@uni.edu", {"01_strides": (1, 1)})
    fake.users.append(canvas_user(16, "s05\nforged line"))
    fake.excused.add((504, 13))
    course = make_course(tmp_path / "course", klass=klass)
    result = sync(course, options_for(fake), token=fake.token, apply=True)
    actions = {(r.student, r.assignment): r.action for r in result.rows}
    assert actions[("s03", "04_adagrad")] == EXCUSED and (504, 13) not in fake.scores
    assert fake.scores[(501, 16)] == 2.0 and result.out_of_sync == []
    log = (course.root / "reports" / "lms-canvas.log").read_text().splitlines()
    assert not any(line.startswith("forged line") for line in log)
    assert any("s05\\nforged line" in line for line in log)


def test_the_import_csv_never_starts_a_cell_with_a_formula(tmp_path):
    klass = {"=HYPERLINK(\"http://x\")": ("+1", "-2", "", {"01_strides": (1, 1)})}
    course = make_course(tmp_path / "course", klass=klass)
    out = tmp_path / "grades.csv"
    assert main(["--course-root", str(course.root), "lms", "csv", str(out)]) == 0
    rows = list(csv.reader(out.open()))
    assert all(cell[:1] not in "=+-@" or cell == "" for row in rows[2:] for cell in row)
    assert rows[2][2] == "'=HYPERLINK(\"http://x\")"


@pytest.mark.parametrize("header, wanted", [("2", 2.0), ("-5", 0.0), ("soon", None), ("", None),
                                             ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)])
def test_retry_after_reads_seconds_or_a_date_and_ignores_anything_else(header, wanted):
    import requests

    from autograder.lms.canvas_http import retry_after

    response = requests.Response()
    response.headers["Retry-After"] = header
    assert retry_after(response) == wanted


def test_an_unreachable_canvas_is_one_error_line_without_a_long_retry(tmp_path, monkeypatch, capsys):
    """m1 (issue 41): a URL whose host does not resolve ends in one ``autograder lms: error:`` line,
    at once (a name that does not resolve is not retried), not a requests traceback after ~17 s."""
    import time

    course = make_course(tmp_path / "course")
    monkeypatch.setenv("CANVAS_API_TOKEN", "x")
    started = time.monotonic()
    code = main(["--course-root", str(course.root), "lms", "canvas", "--url", "https://canvas.invalid",
                 "--course", "1"])
    took = time.monotonic() - started
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("autograder lms: error: cannot reach Canvas at https://canvas.invalid: ")
    assert "canvas.invalid" in err.split(": ", 3)[-1] and "Traceback" not in err
    assert took < 5, f"{took:.1f} s: a name that does not resolve was retried"


def test_a_refused_connection_is_retried_then_one_error_line(tmp_path, capsys):
    from autograder.lms.canvas_http import PatientAdapter, unreachable

    slept: list[float] = []
    adapter = PatientAdapter(retries=2, timeout_s=2, sleep=slept.append)
    import requests

    session = requests.Session()
    session.mount("http://", adapter)
    with pytest.raises(requests.ConnectionError) as caught:
        session.get("http://127.0.0.1:9/api/v1/courses/1")
    assert len(slept) == 2  # a refused connection may be a server restarting: retried
    assert "Connection refused" in unreachable(caught.value) and "\n" not in unreachable(caught.value)


def test_only_assignments_handed_in_or_past_due_are_posted(tmp_path, fake, capsys, monkeypatch):
    """M4 (issue 41): nobody has submitted 04_adagrad and it is not due: neither the preview nor the
    import CSV has it (no column of zeros), and both say why; --all-assignments posts it."""
    import datetime as dt

    klass = {sid: (first, last, email, {"01_strides": work["01_strides"]})
             for sid, (first, last, email, work) in CLASS.items() if "01_strides" in work}
    course = make_course(tmp_path / "course", klass=klass)
    with course.gradebook() as gb:
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None)  # nbgrader keeps naive UTC
        gb.update_or_create_assignment("04_adagrad", duedate=now + dt.timedelta(days=7))
    result = sync(course, options_for(fake), token=fake.token)
    assert {row.assignment for row in result.rows} == {"01_strides"}
    assert len(result.left_out) == 1 and result.left_out[0].startswith("04_adagrad: left out")
    assert "due date" in result.left_out[0] and "--all-assignments" in result.left_out[0]
    assert all("/504/" not in r.path for r in fake.requests)
    every = sync(course, options_for(fake), token=fake.token, all_assignments=True)
    assert {row.assignment for row in every.rows} == {"01_strides", "04_adagrad"}

    out = tmp_path / "grades.csv"
    assert main(["--course-root", str(course.root), "lms", "csv", str(out)]) == 0
    assert next(csv.reader(out.open()))[5:] == ["01_strides"]
    assert "04_adagrad: left out" in capsys.readouterr().err
    with course.gradebook() as gb:  # now past due: posted, 0 for everyone who did not hand it in
        gb.update_or_create_assignment("04_adagrad", duedate=now - dt.timedelta(days=1))
    assert main(["--course-root", str(course.root), "lms", "csv", str(out)]) == 0
    rows = list(csv.reader(out.open()))
    assert rows[0][5:] == ["01_strides", "04_adagrad"] and {r[6] for r in rows[2:]} == {"0"}
