"""The feedback service under a real JupyterHub, through a real browser.

A JupyterHub (pip ``jupyterhub``, ``configurable-http-proxy`` from npm, its ``DummyAuthenticator``)
starts ``autograder serve --hub`` as a managed service. Two students log in with headless chromium:
alice uploads the reference notebook, bob a wrong one; each sees their feedback at
``/services/autograder/``. Bob cannot read alice's submission (HTTP status and page text), an API call
with a hub token works, and no page shows hidden-check source. The screenshot of alice's feedback is
the README's. The hub, its proxy and the service are stopped whatever happens.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from browser import launch_chromium, require_chromium, screenshot
from service_course import free_port, make_course, right_notebook, wrong_notebook
from test_service import assert_no_hidden_source

from autograder.authoring.release import nbgrader_environment

ROOT = Path(__file__).resolve().parents[1]
CHP = ROOT / ".venv" / "node" / "node_modules" / ".bin" / "configurable-http-proxy"
SERVICE = "autograder"

HUB_CONFIG = '''
c = get_config()  # noqa: F821
c.JupyterHub.authenticator_class = "dummy"
c.Authenticator.allowed_users = {{"alice", "bob", "prof"}}
c.JupyterHub.load_groups = {{"instructors": {{"users": ["prof"]}}}}
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {hub_port}
c.JupyterHub.db_url = "sqlite:///{folder}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{folder}/cookie_secret"
c.ConfigurableHTTPProxy.command = ["{chp}"]
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{proxy_api_port}"
c.JupyterHub.services = [{{
    "name": "{service}",
    "url": "http://127.0.0.1:{service_port}",
    "command": {command!r},
    "environment": {environment!r},
    "oauth_no_confirm": True,
    "oauth_client_allowed_scopes": ["read:users:groups!user"],
}}]
c.JupyterHub.load_roles = [
    {{"name": "user", "scopes": ["self", "access:services!service={service}",
                                "read:users:groups!user"]}},
]
'''


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    return make_course(tmp_path_factory.mktemp("service-hub") / "course")


@pytest.fixture(scope="module")
def hub(course, tmp_path_factory):
    """A running JupyterHub with the service; yields its public URL."""
    if not CHP.exists():
        pytest.fail(f"{CHP} is missing: run `make node-deps` (part of `make test`)")
    folder = tmp_path_factory.mktemp("hub")
    port = free_port()
    env = {**nbgrader_environment(), "AUTOGRADER_ALLOW_CPU": "1"}
    command = [sys.executable, "-m", "autograder.cli", "--course-root", str(course), "serve",
               "--hub", "--workers", "2"]
    (folder / "jupyterhub_config.py").write_text(HUB_CONFIG.format(
        port=port, hub_port=free_port(), folder=folder, chp=CHP, proxy_api_port=free_port(),
        service=SERVICE, service_port=free_port(), command=command,
        environment={k: env[k] for k in ("PATH", "AUTOGRADER_ALLOW_CPU")}))
    log = open(folder / "hub.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen([str(Path(sys.executable).parent / "jupyterhub"), "-f",
                                str(folder / "jupyterhub_config.py")], cwd=folder, stdout=log,
                               stderr=subprocess.STDOUT, env={**os.environ, **env},
                               start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(lambda: httpx.get(f"{url}/services/{SERVICE}/", timeout=2).status_code
                  in (200, 302), process, folder / "hub.log")
        yield url
    finally:
        _stop_group(process)
        log.close()
        leftover = _still_running(str(folder))
        assert not leftover, f"left running after the hub stopped: {leftover}"


def _wait_for(ready, process, log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyterhub exited:\n{log.read_text()[-4000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if ready():
                return
        time.sleep(0.3)
    raise RuntimeError(f"jupyterhub with the service did not come up:\n{log.read_text()[-4000:]}")


def _still_running(pattern: str, grace_s: float = 10.0) -> list[str]:
    """Processes whose command line holds ``pattern``, once ``grace_s`` has let a killed one go (a
    SIGKILL takes effect when the process next runs: on a loaded machine, not at once); each as
    "pid command line"."""
    deadline = time.monotonic() + grace_s
    while True:
        found = subprocess.run(["pgrep", "-a", "-f", pattern], capture_output=True,
                               text=True).stdout.splitlines()
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def _stop_group(process: subprocess.Popen) -> None:
    """SIGTERM the hub (it stops its proxy and services), then SIGKILL whatever is left."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(10)


def _log_in(playwright, hub_url: str, user: str, tmp: Path):
    """A browser of ``user``'s own (its own profile: cookies are not shared), logged in."""
    context = launch_chromium(playwright, tmp / f"profile-{user}")
    page = context.pages[0] if context.pages else context.new_page()
    page.goto(f"{hub_url}/hub/login?next=/services/{SERVICE}/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", "any password: the DummyAuthenticator")
    page.click("#login_submit")
    page.wait_for_url(f"**/services/{SERVICE}/", timeout=60_000)
    return context, page


def _submit(page, notebook: Path) -> int:
    page.set_input_files("input[name=notebook]", str(notebook))
    page.click("#upload button[type=submit]")
    page.wait_for_url("**/submissions/*", timeout=30_000)
    # a selector, not wait_for_function: the service's CSP forbids evaluating strings (good)
    page.locator("#state.state-done, #state.state-failed").wait_for(timeout=180_000)
    return int(page.url.rstrip("/").rsplit("/", 1)[1])


def test_two_students_get_their_own_feedback_through_the_hub(hub, course, tmp_path):
    require_chromium()
    from playwright.sync_api import sync_playwright

    for name, content in (("right", right_notebook(course)), ("wrong", wrong_notebook(course))):
        (tmp_path / name).mkdir()
        (tmp_path / name / "01_strides.ipynb").write_bytes(content)
    with sync_playwright() as playwright:
        contexts = []
        try:
            alice_context, alice = _log_in(playwright, hub, "alice", tmp_path)
            contexts.append(alice_context)
            assert "01_strides" in alice.text_content("#assignments")
            alice_id = _submit(alice, tmp_path / "right" / "01_strides.ipynb")
            assert alice.text_content("#state") == "done"
            assert "Score: 10 / 10" in alice.text_content("#feedback")
            assert "failed" not in alice.text_content("#tests")
            assert_no_hidden_source(alice.content())
            screenshot(alice, "service-feedback-right")

            bob_context, bob = _log_in(playwright, hub, "bob", tmp_path)
            contexts.append(bob_context)
            bob_id = _submit(bob, tmp_path / "wrong" / "01_strides.ipynb")
            feedback = bob.text_content("#feedback")
            assert "Score: " in feedback and "Score: 10 / 10" not in feedback
            assert "failed" in bob.text_content("#tests")
            assert bob.locator("tr.message pre").count() >= 1  # the failing test's message
            assert_no_hidden_source(bob.content())
            screenshot(bob, "service-feedback-wrong")  # the README's (docs/service-feedback.png)

            other = bob.goto(f"{hub}/services/{SERVICE}/submissions/{alice_id}")
            assert other.status == 404
            assert "There is no submission" in bob.text_content("main")
            api = bob.goto(f"{hub}/services/{SERVICE}/api/submissions/{alice_id}")
            assert api.status == 404 and "no submission" in bob.text_content("body")
            own = bob.goto(f"{hub}/services/{SERVICE}/submissions/{bob_id}")
            assert own.status == 200
            bob.locator("#state.state-done").wait_for(timeout=30_000)
            index = bob.goto(f"{hub}/services/{SERVICE}/")
            assert index.status == 200
            ids = bob.locator("#history tbody tr td:first-child").all_text_contents()
            assert [int(i) for i in ids] == [bob_id]  # bob's history is bob's alone
            assert_no_hidden_source(bob.content())
            assert bob.goto(f"{hub}/services/{SERVICE}/instructor").status == 403

            prof_context, prof = _log_in(playwright, hub, "prof", tmp_path)
            contexts.append(prof_context)
            staff = prof.goto(f"{hub}/services/{SERVICE}/instructor")
            assert staff.status == 200  # a member of the hub group "instructors"
            assert "Queued:" in prof.text_content("#queue")
            assert prof.locator("#distribution").count() == 1
        finally:
            for context in contexts:
                context.close()
