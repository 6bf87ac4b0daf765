"""``autograder serve`` as an instructor runs it (issue 41 B1, M2, M7): in a course folder, with its
state folder outside ``/tmp`` (the checker's ``/tmp`` is a tmpfs of its own, which is how a state
folder of mode 700 under pytest's ``/tmp`` hid that the checker, uid 65533 when grading as root, could
not enter it), without ``--allow-cpu``. As root and as an ordinary user alike: the start-up probe
passes, the staff's ``autograder submit`` and the student edition's stdlib-only ``submit.py`` get full
marks, a GPU exercise no running worker grades is refused with the reason, one parked says why to the
student and the staff, the service's secrets stay unreadable to the checker's uid, and no page shows a
student the server's paths. A course whose reference solution does not get full marks is not served."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from service_course import Service, client, make_course, right_notebook

from autograder.authoring.release import nbgrader_environment
from autograder.service.schema import utcnow
from autograder.service.store import Store, default_url

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "autograder" / "service" / "client.py"


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return make_course(tmp_path_factory.mktemp("service-root") / "course", students=("alice", "bob"),
                       assignments=("01_strides", "04_adagrad"))


@pytest.fixture(scope="module")
def outside_tmp() -> Iterator[Path]:
    """A folder of mode 700 outside /tmp, owned by whoever runs the tests (root: one the checker's
    uid cannot enter)."""
    base = next(b for b in (Path("/var/tmp"), Path.home()) if os.access(b, os.W_OK))
    folder = Path(tempfile.mkdtemp(prefix="autograder-service-", dir=base))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _login(service: Service, token: str) -> httpx.Cookies:
    with httpx.Client(base_url=service.url) as http:
        xsrf = re.search(r'name="_xsrf" value="([^"]+)"', http.get("login").text)[1]
        assert http.post("login", data={"token": token, "_xsrf": xsrf}).status_code == 303
        return http.cookies


def test_serve_as_an_instructor_runs_it_grades_refuses_and_keeps_its_secrets(course, outside_tmp,
                                                                            tmp_path):
    state = outside_tmp / "state"
    service = Service(course, state=state, allow_cpu=False).start()
    try:
        tokens = {**service.tokens("alice", "bob"), **service.tokens("prof", instructor=True)}
        # the staff's `autograder submit`: the reference solution, full marks
        (tmp_path / "01_strides.ipynb").write_bytes(right_notebook(course))
        staff = subprocess.run([sys.executable, "-m", "autograder.cli", "submit", "01_strides.ipynb",
                                "--url", service.url], cwd=tmp_path, capture_output=True, text=True,
                               env={**nbgrader_environment(), "AUTOGRADER_TOKEN": tokens["alice"]},
                               timeout=300)
        assert staff.returncode == 0, staff.stdout + staff.stderr
        assert "score: 10/10" in staff.stdout, staff.stdout
        log = service.log.read_text()
        assert re.search(r"start-up probe passed in [0-9.]+ s", log), log[-3000:]
        # the student edition's submit.py, in an interpreter that has nothing but the standard
        # library (-I -S: no site-packages, no course package): graded as well
        student = tmp_path / "student"
        student.mkdir()
        shutil.copyfile(CLIENT, student / "submit.py")
        (student / "Copy of 01_strides.ipynb").write_bytes(right_notebook(course))
        (student / "04_adagrad.ipynb").write_bytes(right_notebook(course, "04_adagrad"))
        env = {"AUTOGRADER_TOKEN": tokens["bob"], "AUTOGRADER_URL": service.url,
               "PATH": os.environ["PATH"]}
        graded = subprocess.run([sys.executable, "-I", "-S", "submit.py", "Copy of 01_strides.ipynb"],
                                cwd=student, capture_output=True, text=True, env=env, timeout=300)
        assert graded.returncode == 0, graded.stdout + graded.stderr
        assert "score: 10/10" in graded.stdout and "FAILED" not in graded.stdout
        # M2: no running worker grades 04 here (no GPU, no --allow-cpu): refused, with the reason
        refused = subprocess.run([sys.executable, "-I", "-S", "submit.py", "04_adagrad.ipynb"],
                                 cwd=student, capture_output=True, text=True, env=env, timeout=60)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "refused (503): no grader for 04_adagrad is running now" in refused.stderr
        store = Store(default_url(state))
        assert [r.assignment for r in store.history("bob")] == ["01_strides"]  # nothing recorded
        # one accepted while a GPU worker ran, now parked: the student and the staff see why
        parked = store.add(student="bob", assignment="04_adagrad", notebook="04_adagrad.ipynb",
                           content=right_notebook(course, "04_adagrad"), received_at=utcnow(),
                           late=False)
        with client(service, tokens["bob"]) as http:
            view = http.get(f"api/submissions/{parked}").json()
        assert view["state"] == "queued" and "no grader for 04_adagrad" in view["waiting"]
        page = httpx.get(service.url + "instructor", cookies=_login(service, tokens["prof"])).text
        assert 'id="waiting"' in page and "04_adagrad" in page and "--allow-cpu" in page
        assert 'id="workers"' in page
        # no page or answer shows a student where the server keeps anything
        cookies = _login(service, tokens["bob"])
        for path in ("", f"submissions/{parked}", "api/submissions", "api/assignments"):
            text = httpx.get(service.url + path, cookies=cookies,
                             headers={"Authorization": f"Bearer {tokens['bob']}"}).text
            assert str(state) not in text and str(course) not in text, path
    finally:
        service.stop()
    # least privilege: the state folder is its owner's; its secrets are unreadable to the checker
    assert state.stat().st_mode & 0o777 == 0o700
    secrets = [state / "cookie_secret", state / "service.db", state / "workspace" / "gradebook.db"]
    for path in secrets[:2]:
        assert path.stat().st_mode & 0o777 == 0o600, path
    if os.geteuid() == 0:  # the checker's uid, as grading as root makes it
        from autograder.grading import CHECKER_UID

        for path in secrets:
            read = subprocess.run(["cat", str(path)], capture_output=True, user=CHECKER_UID,
                                  group=CHECKER_UID, extra_groups=[])
            assert read.returncode != 0 and b"Permission denied" in read.stderr, path


def test_serve_does_not_start_when_its_probe_fails(course, outside_tmp, tmp_path):
    """A course whose reference solution loses points (a broken hidden check, a broken machine):
    `serve` stops at start, saying what the probe found, instead of grading every student wrong."""
    broken = shutil.copytree(course, tmp_path / "broken")
    source = broken / "solutions" / "01_strides" / "01_strides.py"
    right = "return offset + sum(i * s for i, s in zip(index, stride))"
    assert right in source.read_text()
    source.write_text(source.read_text().replace(right, right.replace("offset +", "offset + 1 +")))
    service = Service(broken, state=outside_tmp / "broken-state", allow_cpu=False)
    try:
        with pytest.raises(RuntimeError, match="serve exited") as failed:
            service.start()
    finally:
        service.stop()  # also when it did start (the assertion then fails)
    assert "not started: the start-up probe failed: the reference solution of 01_strides" in \
        str(failed.value)
