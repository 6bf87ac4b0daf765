"""``autograder serve`` standalone, as a real process graded by real sandboxes: feedback for a right
and a wrong notebook, privacy between students, XSRF on forms, the instructor view, the same score as
the instructor's ``autograder grade``, and a SIGKILL mid-queue after which every accepted submission is
graded exactly once."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
from service_course import Service, client, make_course, right_notebook, wait_graded, wrong_notebook

from autograder.authoring.release import nbgrader_environment
from autograder.course.nbgrader import load_course
from autograder.course.source import hidden_lines, read_source_cells, source_path
from autograder.service.store import Store, default_url

ROOT = Path(__file__).resolve().parents[1]
FAULT_STUDENTS = tuple(f"s{i:02d}" for i in range(8))


def hidden_text(assignment: str) -> set[str]:
    return set().union(*(hidden_lines(cell.source) for cell in
                         read_source_cells(source_path(assignment, course_root=ROOT))))


def assert_no_hidden_source(text: str, assignment: str = "01_strides") -> None:
    from autograder.course.source import shows_hidden_source

    assert shows_hidden_source(text, hidden_text(assignment)) is None


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return make_course(tmp_path_factory.mktemp("service") / "course",
                       students=("alice", "bob", *FAULT_STUDENTS))


@pytest.fixture(scope="module")
def service(course):
    running = Service(course).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def tokens(service) -> dict[str, str]:
    return {**service.tokens("alice", "bob"), **service.tokens("prof", instructor=True)}


@pytest.fixture(scope="module")
def graded(service, tokens, course):
    """alice submits the reference, bob a wrong answer; both graded."""
    ids = {}
    for student, content in (("alice", right_notebook(course)), ("bob", wrong_notebook(course))):
        with client(service, tokens[student]) as http:
            reply = http.post("api/submissions", params={"filename": "01_strides.ipynb"},
                              content=content)
            assert reply.status_code == 202, reply.text
            ids[student] = reply.json()["id"]
    statuses = {}
    for student, job_id in ids.items():
        with client(service, tokens[student]) as http:
            statuses[student] = wait_graded(http, job_id)
    return ids, statuses


def test_right_and_wrong_notebooks_get_their_feedback(graded):
    _, statuses = graded
    right, wrong = statuses["alice"], statuses["bob"]
    assert right["state"] == wrong["state"] == "done"
    assert right["score"] == right["max_score"] == 10
    assert all(t["passed"] and t["message"] is None for t in right["tests"])
    assert 0 < wrong["score"] < wrong["max_score"]
    failing = [t for t in wrong["tests"] if not t["passed"]]
    assert failing and all(t["message"] for t in failing)
    assert {t["name"] for t in right["tests"]} == {t["name"] for t in wrong["tests"]}
    assert all(t["hidden"] for t in right["tests"])  # every test of 01 has a hidden region
    for status in statuses.values():
        assert_no_hidden_source(json.dumps(status))


def test_a_student_cannot_read_another_students_submission(service, tokens, graded):
    ids, _ = graded
    with client(service, tokens["bob"]) as bob:
        api = bob.get(f"api/submissions/{ids['alice']}")
        assert api.status_code == 404 and "no submission" in api.json()["error"]
        assert [s["id"] for s in bob.get("api/submissions").json()["submissions"]] == [ids["bob"]]
        assert bob.get("api/submissions", params={"student": "alice"}).json()["submissions"][0][
            "student"] == "bob"  # ?student= is for instructors only
        assert bob.get("api/queue").status_code == 403
        assert bob.get("instructor").status_code == 403
    page = httpx.get(service.url + f"submissions/{ids['alice']}",
                     cookies=_login(service, tokens["bob"]))
    assert page.status_code == 404 and "There is no submission" in page.text
    assert httpx.get(service.url + f"api/submissions/{ids['alice']}").status_code == 401


def test_pages_show_no_hidden_source_and_the_instructor_sees_everyone(service, tokens, graded):
    ids, _ = graded
    for student in ("alice", "bob"):
        cookies = _login(service, tokens[student])
        for path in ("", f"submissions/{ids[student]}", f"api/submissions/{ids[student]}"):
            reply = httpx.get(service.url + path, cookies=cookies)
            assert reply.status_code == 200
            assert_no_hidden_source(reply.text)
        index = httpx.get(service.url, cookies=cookies).text
        assert "01_strides" in index and "Your submissions" in index
    with client(service, tokens["prof"]) as prof:
        queue = prof.get("api/queue").json()
        assert queue["assignments"]["01_strides"]["students"] >= 2
        page = prof.get("instructor")
        assert page.status_code == 200 and "Queued:" in page.text and "01_strides" in page.text
        assert 'id="distribution"' in page.text  # the report's score histogram
        rows = prof.get("instructor/scores.csv").text.strip().splitlines()
        assert rows[0].startswith("id,student,assignment") and len(rows) >= 3
        assert prof.get("api/submissions", params={"student": "alice"}).json()[
            "submissions"][0]["student"] == "alice"


def test_forms_need_the_xsrf_token(service, tokens, course):
    cookies = _login(service, tokens["alice"])
    files = {"notebook": ("01_strides.ipynb", right_notebook(course))}
    assert httpx.post(service.url, cookies=cookies, files=files).status_code == 403
    with client(service, tokens["alice"]) as http:  # a header token is not ambient: no XSRF
        assert http.get("api/assignments").status_code == 200


def test_bad_input_over_http_is_a_json_error_and_writes_nothing(service, tokens, course, graded):
    with client(service, tokens["alice"]) as http:
        before = len(http.get("api/submissions").json()["submissions"])
        landed = (course / "submitted" / "alice" / "01_strides" / "01_strides.ipynb").read_bytes()
        reply = http.post("api/submissions", params={"filename": "01_strides.ipynb"},
                          content=b'{"cells": 3')
        assert reply.status_code == 400
        assert reply.json()["error"].startswith("01_strides.ipynb: not a Jupyter notebook")
        reply = http.post("api/submissions", content=b"{}")
        assert reply.status_code == 400 and "?filename=NN_name.ipynb" in reply.json()["error"]
        assert len(http.get("api/submissions").json()["submissions"]) == before
        assert (course / "submitted" / "alice" / "01_strides" / "01_strides.ipynb"
                ).read_bytes() == landed
        policy = http.get("api/assignments/01_strides/policy").json()
        assert (policy["max_submissions"], policy["counts"]) == (5, "latest")
        assert http.get("api/assignments/99_none/policy").status_code == 404


def test_no_input_gets_a_5xx_and_size_and_login_are_decided_on_the_headers(service, tokens, course):
    """401 before XSRF and before the body; the documented JSON 413 at every size, chunked too;
    ids and paths no row or file can have are 404; a notebook of too many cells is refused with
    its count, and one with two cells of one grade id names them."""
    api = service.url + "api/submissions"
    reply = httpx.post(api, params={"filename": "01_strides.ipynb"}, content=b"x" * (20 << 20))
    assert reply.status_code == 401 and "not logged in" in reply.json()["error"]
    with client(service, tokens["alice"]) as http:
        for size in (6 << 20, 100 << 20):
            reply = http.post("api/submissions", params={"filename": "01_strides.ipynb"},
                              content=b"x" * size)
            assert reply.status_code == 413, reply.text
            assert "over the 5 MiB limit" in reply.json()["error"]

        def chunked():
            for _ in range(12):
                yield b"x" * (1 << 20)
        reply = http.post("api/submissions", params={"filename": "01_strides.ipynb"},
                          content=chunked())
        assert reply.status_code == 413 and "over the 5 MiB limit" in reply.json()["error"]
        for path in (f"api/submissions/{2**63}", f"api/submissions/{10**40}", "submissions/" + "9" * 30,
                     "static/app.js%00.txt", "api/assignments/%00/policy"):
            assert http.get(path).status_code == 404, path
        nb = json.loads(right_notebook(course))
        crowded = {**nb, "cells": nb["cells"] + [{"cell_type": "markdown", "metadata": {},
                                                   "source": ""}] * 3000}
        reply = http.post("api/submissions", params={"filename": "01_strides.ipynb"},
                          content=json.dumps(crowded).encode())
        assert reply.status_code == 400 and "cells, over the 2000" in reply.json()["error"]
        graded = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")]
        doubled = {**nb, "cells": nb["cells"] + [{**graded[0], "id": "another"}]}
        reply = http.post("api/submissions", params={"filename": "01_strides.ipynb"},
                          content=json.dumps(doubled).encode())
        assert reply.status_code == 400 and "both carry grade id" in reply.json()["error"]


def test_a_grader_error_is_shown_as_such_and_staff_grade_it_again(service, tokens, course):
    """A submission the grader failed on twice: the student reads "the grader failed", it is not
    counted against them, the instructor page lists it, and its "Grade again" button (a form with
    the XSRF token) sends it back to the worker, which grades it."""
    from autograder.service.schema import SubmissionRow, utcnow

    store = Store(default_url(course / ".service"))
    with store.session(write=True) as s:  # as Store.fault leaves it after the last attempt
        row = SubmissionRow(student="bob", assignment="01_strides", notebook="01_strides.ipynb",
                            content=right_notebook(course), sha256="", received_at=utcnow(),
                            late=False, round=0, state="error", attempts=2, graded_count=0,
                            landed=False, lease_started=False,
                            reason="the grader failed 2 times on this submission (test); not your "
                                   "notebook's fault")
        s.add(row)
        s.flush()
        errored = row.id
    with client(service, tokens["bob"]) as http:
        view = http.get(f"api/submissions/{errored}").json()
        assert view["state"] == "error" and "not your notebook's fault" in view["reason"]
    cookies = _login(service, tokens["prof"])
    with httpx.Client(base_url=service.url, cookies=cookies) as prof:
        page = prof.get("instructor").text
        assert 'id="grader-errors"' in page and f"<td>{errored}</td>" in page
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page)[1]
        assert prof.post("instructor/requeue", data={"id": str(errored)}).status_code == 403
        reply = prof.post("instructor/requeue", data={"id": str(errored), "_xsrf": xsrf})
        assert reply.status_code == 303
    with client(service, tokens["bob"]) as http:
        assert wait_graded(http, errored)["state"] == "done"
    assert store.get(errored).score == 10.0 and store.get(errored).graded_count == 1


def test_autograder_submit_from_a_terminal(service, tokens, course, tmp_path):
    (tmp_path / "01_strides.ipynb").write_bytes(wrong_notebook(course))
    done = subprocess.run([sys.executable, "-m", "autograder.cli", "submit", "01_strides.ipynb",
                           "--url", service.url], cwd=tmp_path, capture_output=True, text=True,
                          env={**nbgrader_environment(), "AUTOGRADER_TOKEN": tokens["bob"]},
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "submitted 01_strides.ipynb as #" in done.stdout and "FAILED" in done.stdout
    refused = subprocess.run([sys.executable, "-m", "autograder.cli", "submit", "notes.txt",
                              "--url", service.url], cwd=tmp_path, capture_output=True, text=True,
                             env={**nbgrader_environment(), "AUTOGRADER_TOKEN": tokens["bob"]})
    assert refused.returncode == 1 and "notes.txt: no such file" in refused.stderr


def test_the_service_score_is_the_instructors_autograde_score(course, graded):
    _, statuses = graded
    with load_course(course).gradebook() as gb:  # the service never writes the gradebook
        assert [s.student.id for a in gb.assignments for s in a.submissions] == []
    subprocess.run([sys.executable, "-m", "autograder.cli", "--course-root", str(course), "grade",
                    "01_strides", "--student", "alice", "--student", "bob", "--no-progress"],
                   check=True, env={**nbgrader_environment(), "AUTOGRADER_ALLOW_CPU": "1"},
                   capture_output=True)
    with load_course(course).gradebook() as gb:
        for student in ("alice", "bob"):
            submission = gb.find_submission("01_strides", student)
            assert submission.score == statuses[student]["score"]
            cells = {g.name: g.score for nb in submission.notebooks for g in nb.grades}
            assert cells == {t["name"]: t["points"] for t in statuses[student]["tests"]}


def test_student_code_runs_only_under_the_worker_never_in_the_web_process(service, tokens, course):
    """Every sandbox (bwrap) is a descendant of the worker; the web process's other children are its
    examiner processes (they parse uploads as JSON, never run them: ``intake.examine``)."""
    import psutil

    web = psutil.Process(service.process.pid)
    [worker] = [c for c in web.children() if c.cmdline()[1:3] == ["-m", "autograder.service.worker"]]
    with client(service, tokens["alice"]) as http:  # a submission in flight while we look
        job = http.post("api/submissions", params={"filename": "01_strides.ipynb"},
                        content=right_notebook(course)).json()["id"]
        sandboxes = []
        deadline = time.monotonic() + 60
        while not sandboxes and time.monotonic() < deadline:
            sandboxes = [p for p in worker.children(recursive=True) if p.name() == "bwrap"]
            time.sleep(0.05)
        wait_graded(http, job)
    assert sandboxes
    others = [p for p in web.children(recursive=True)
              if p.pid != worker.pid and p not in worker.children(recursive=True)]
    assert others, "the upload was examined in a process of its own"
    for process in others:
        command = " ".join(process.cmdline())
        assert process.name() != "bwrap" and "multiprocessing" in command, command
        assert not process.children(), command


def test_sigkill_mid_queue_then_restart_grades_every_submission_once(course, tmp_path):
    state = tmp_path / "state"  # its own: the module's service runs on the same course
    service = Service(course, workers=1, state=state, log=tmp_path / "serve.log",
                      lease_s=4).start()
    tokens = service.tokens(*FAULT_STUDENTS)
    content = right_notebook(course)
    ids = []
    try:
        for student in FAULT_STUDENTS:
            with client(service, tokens[student]) as http:
                ids.append(http.post("api/submissions", params={"filename": "01_strides.ipynb"},
                                     content=content).json()["id"])
        store = Store(default_url(state))
        deadline = time.monotonic() + 120
        while store.counts()["done"] < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        counts = store.counts()
        assert counts["done"] >= 1 and counts["queued"] >= 2, counts
        assert _pids_of("autograder.service.worker", course, state)
        helpers = psutil.Process(service.process.pid).children(recursive=True)
        assert any("multiprocessing" in _command(p) for p in helpers), \
            "the uploads were parsed in the examiner's processes"
        service.kill()  # the serve process only: the worker and the examiner follow it by themselves
        _, alive = psutil.wait_procs(helpers, timeout=20)
        assert not alive, [_command(p) for p in alive]
        assert not _pids_of("autograder.service.worker", course, state)
        service = Service(course, workers=1, port=service.port, state=state,
                          log=tmp_path / "serve.log", lease_s=4).start()
        done = store.counts()["done"]
        deadline = time.monotonic() + 120
        while store.counts()["done"] == done and time.monotonic() < deadline:
            time.sleep(0.1)
        assert store.counts()["queued"] >= 1
        worker = _pids_of("autograder.service.worker", course, state)
        os.kill(worker[0], signal.SIGKILL)  # a worker that dies: the service starts another
        deadline = time.monotonic() + 240
        while store.counts()["done"] < len(ids) and time.monotonic() < deadline:
            time.sleep(0.3)
        rows = [store.get(i) for i in ids]
        assert [(r.state, r.graded_count, r.score) for r in rows] == [("done", 1, 10.0)] * len(ids)
        log = (tmp_path / "serve.log").read_text()
        assert "back in the queue" in log  # the worker that followed the killed service
        assert "worker exited with status -9" in log and "queued again" in log  # the killed one
    finally:
        service.stop()


def _command(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())[:160]
    except psutil.Error as error:  # gone, or a zombie not reaped yet
        return f"pid {process.pid}: {type(error).__name__}"


def _pids_of(module: str, course: Path, state: Path | None = None) -> list[int]:
    if module == "autograder.service.worker":  # its one --options JSON names the course and state
        where = f'{module} --options .*"course_root": "{re.escape(str(course))}"' + (
            f'.*"state_dir": "{re.escape(str(state))}"' if state else "")
    else:
        where = f"{module} --course-root {re.escape(str(course))}" + (
            f" --state {re.escape(str(state))}" if state else "")
    out = subprocess.run(["pgrep", "-f", where],
                         capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _login(service: Service, token: str) -> httpx.Cookies:
    """The browser's way in: the login form, with its XSRF token."""
    with httpx.Client(base_url=service.url) as http:
        form = http.get("login")
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', form.text)[1]
        reply = http.post("login", data={"token": token, "_xsrf": xsrf})
        assert reply.status_code == 303, reply.text
        return http.cookies
