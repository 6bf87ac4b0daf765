"""A student's path through an exercise in JupyterLab, driven in headless Debian chromium.

JupyterLab (this environment's, with nbgrader's extensions) starts on a free port with a token, in a
throw-away HOME / Jupyter config / runtime folder, serving a temporary copy of exercises/. The test opens
exercises/03_flops/03_flops.ipynb, types the reference solution into every solution cell through the
editor, runs all cells from the Run menu and checks that no visible test fails, then presses nbgrader's
Validate button. A second notebook gets a wrong implementation typed in, and the failing visible
test's message must be on screen. The server is shut down and no process of it may be left.

Screenshots: test-artifacts/screenshots/lab/. LAB_TEST_ASSIGNMENT picks another exercise (default
03_flops); LAB_TEST_WRONG picks the catalogue entry typed in as the wrong implementation; LAB_JUPYTER
runs another installation's `jupyter` (default: this environment's).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import psutil
import pytest
from browser import (
    REPO_ROOT,
    free_port,
    launch_chromium,
    require_chromium,
    screenshot,
    unavailable,
    watch,
)

from autograder.authoring import samples
from autograder.authoring.release import release_path

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ASSIGNMENT = os.environ.get("LAB_TEST_ASSIGNMENT", "03_flops")
WRONG_ENTRY = os.environ.get("LAB_TEST_WRONG", "matmul_no_factor_two")
# LAB_JUPYTER tries another installation (e.g. a student venv with only the documented packages).
JUPYTER = Path(os.environ.get("LAB_JUPYTER", Path(sys.executable).parent / "jupyter"))
SERVER_START_S = 120
KERNEL_READY_S = 120
RUN_ALL_S = 300
VALIDATE_S = 300
SUCCESS = "Success! Your notebook passes all the tests."

# JupyterLab user settings for the throw-away profile: every cell in the DOM (no windowing, so cell
# N of the file is the N-th .jp-Cell), and no "get notified about Jupyter news?" toast over the page.
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
}


class LabServer:
    """A JupyterLab process in its own folders; `url(path)` adds the token."""

    def __init__(self, root: Path, notebooks: Path):
        self.root, self.notebooks = root, notebooks
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.log_path = root / "jupyterlab.log"
        self.process: subprocess.Popen | None = None
        self.started_in_s = 0.0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.base}/{path.lstrip('/')}?token={self.token}"

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else ""

    def environment(self) -> dict[str, str]:
        dirs = {
            name: self.root / name
            for name in ("home", "config", "data", "runtime", "settings", "workspaces")
        }
        for folder in dirs.values():
            folder.mkdir(parents=True, exist_ok=True)
        for name, value in LAB_SETTINGS.items():
            target = dirs["settings"] / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(value))
        env = dict(os.environ)
        env.pop("JUPYTER_PATH", None)
        env.update(
            HOME=str(dirs["home"]),
            JUPYTER_CONFIG_DIR=str(dirs["config"]),
            JUPYTER_DATA_DIR=str(dirs["data"]),
            JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
            JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
            JUPYTERLAB_WORKSPACES_DIR=str(dirs["workspaces"]),
            PATH=os.pathsep.join([str(JUPYTER.parent), os.environ.get("PATH", "")]),
        )
        return env

    def start(self) -> None:
        command = [
            str(JUPYTER), "lab", "--no-browser",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}", f"--ServerApp.root_dir={self.notebooks}",
            "--LabApp.news_url=None", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.expose_app_in_browser=True",  # read cell models back for the assertions
        ]  # fmt: skip
        if os.geteuid() == 0:
            command.append("--allow-root")  # CI runs as root
        started = time.perf_counter()
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                command, cwd=self.root, env=self.environment(), stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"JupyterLab exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=5) as reply:
                    if reply.status == 200:
                        self.started_in_s = time.perf_counter() - started
                        return
            except OSError:
                time.sleep(0.5)
        pytest.fail(
            f"JupyterLab did not answer on {self.base} within {SERVER_START_S} s:\n{self.log_tail()}"
        )

    def processes(self) -> list[psutil.Process]:
        """The server and every process started from it (kernels), while they live."""
        if self.process is None:
            return []
        try:
            server = psutil.Process(self.process.pid)
            return [server, *server.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> list[str]:
        """Terminate the server, wait for it, and return descriptions of any process left over."""
        if self.process is None:
            return []
        family = self.processes()
        self.process.terminate()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        psutil.wait_procs(family, timeout=30)
        leftovers = [p for p in family if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        leftovers += [
            p for p in psutil.process_iter() if self._mentions_root(p) and p not in leftovers
        ]
        described = [
            f"pid {p.pid}: {' '.join(p.cmdline())[:200]}" for p in leftovers if p.is_running()
        ]
        for p in leftovers:  # leave the machine clean even when the test fails
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        return described

    def _mentions_root(self, process: psutil.Process) -> bool:
        try:
            return any(str(self.root) in part for part in process.cmdline())
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return False


@pytest.fixture(scope="module")
def release() -> Path:
    path = release_path(ASSIGNMENT, course_root=REPO_ROOT)
    if not path.is_file():
        unavailable(f"{ASSIGNMENT}: no release at {path} (run `autograder release`)")
    return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory, release):
    """A running JupyterLab over a temporary copy of exercises/; checked for leftovers on the way out."""
    require_chromium()
    if not JUPYTER.exists():
        unavailable(f"no jupyter executable at {JUPYTER}; run `make env`")
    root = tmp_path_factory.mktemp("lab")
    notebooks = root / "exercises"
    shutil.copytree(
        REPO_ROOT / "exercises", notebooks, ignore=shutil.ignore_patterns(".ipynb_checkpoints")
    )
    server = LabServer(root, notebooks)
    server.start()
    print(f"\nJupyterLab answered after {server.started_in_s:.1f} s")
    try:
        yield server
    finally:
        leftovers = server.stop()
        shutil.copy(server.log_path, _artifact("jupyterlab.log"))
        assert not leftovers, "processes left after JupyterLab shut down:\n  " + "\n  ".join(
            leftovers
        )


@pytest.fixture(scope="module")
def browser_context(lab, tmp_path_factory):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = launch_chromium(
            p, tmp_path_factory.mktemp("chromium-profile"), viewport=(1400, 1000)
        )
        context.set_default_timeout(60_000)
        try:
            yield context
        finally:
            context.close()


def _artifact(name: str) -> Path:
    path = REPO_ROOT / "test-artifacts" / "lab" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


# --- driving JupyterLab ------------------------------------------------------------------------------

PANEL = "window.jupyterapp.shell.currentWidget"
CELLS = (
    ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell"  # the visible notebook's cells
)


def open_notebook(context, lab: LabServer, relative: str):
    """Open a notebook in JupyterLab and wait until its kernel is idle; returns the page."""
    page = context.new_page()
    page.watch = watch(page)
    started = time.perf_counter()
    workspace = relative.replace("/", "-").replace(
        ".", "-"
    )  # a fresh layout: only this notebook open
    page.goto(lab.url(f"lab/workspaces/{workspace}/tree/{relative}"))
    page.wait_for_selector(CELLS, timeout=KERNEL_READY_S * 1000)
    page.wait_for_function(
        f"""() => {{
            const panel = window.jupyterapp && {PANEL};
            const kernel = panel && panel.sessionContext && panel.sessionContext.session
                           && panel.sessionContext.session.kernel;
            return panel && panel.context && panel.context.path === {json.dumps(relative)}
                   && kernel && kernel.status === 'idle';
        }}""",
        timeout=KERNEL_READY_S * 1000,
    )
    print(f"{relative}: open with an idle kernel after {time.perf_counter() - started:.1f} s")
    return page


def cell_sources(page) -> list[str]:
    return page.evaluate(f"() => {PANEL}.content.widgets.map(w => w.model.sharedModel.getSource())")


def type_into_cell(page, index: int, code: str) -> None:
    """Replace cell `index`'s text through its CodeMirror editor: click, select all, insert."""
    cell = page.locator(CELLS).nth(index)
    cell.scroll_into_view_if_needed()
    editor = cell.locator(".cm-content")
    editor.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.insert_text(code)
    page.keyboard.press("Escape")  # back to command mode
    typed = cell_sources(page)[index]
    assert typed == code, f"cell {index}: the editor holds\n{typed!r}\ninstead of\n{code!r}"


def run_all_from_menu(page) -> float:
    """Run > Run All Cells, then wait until nothing is queued or running; returns seconds taken."""
    started = time.perf_counter()
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel").get_by_text("Run All Cells", exact=True).click()
    page.wait_for_function(
        f"""() => {{
            const panel = {PANEL};
            const cells = panel.content.widgets.filter(w => w.model.type === 'code');
            const kernel = panel.sessionContext.session.kernel;
            const busy = cells.some(w => w.model.executionState === 'running'
                                        || (w.promptNode && w.promptNode.textContent.includes('*')));
            return cells[0].model.executionCount !== null && !busy && kernel.status === 'idle';
        }}""",
        timeout=RUN_ALL_S * 1000,
        polling=250,
    )
    return time.perf_counter() - started


def cell_report(page) -> list[dict]:
    """Per cell: type, execution count, error outputs (ename/evalue) and the output text on screen."""
    return page.evaluate(
        f"""() => {PANEL}.content.widgets.map(w => ({{
            type: w.model.type,
            count: w.model.type === 'code' ? w.model.executionCount : null,
            errors: w.model.type === 'code'
                ? w.model.outputs.toJSON().filter(o => o.output_type === 'error')
                      .map(o => ({{ename: o.ename, evalue: o.evalue}}))
                : [],
            shown: (w.node.querySelector('.jp-OutputArea') || {{innerText: ''}}).innerText,
        }}))"""
    )


def press_validate(page) -> str:
    """Save, press nbgrader's Validate button and return the text of the dialog it opens."""
    page.keyboard.press("ControlOrMeta+s")
    page.wait_for_function(f"() => !{PANEL}.context.model.dirty", timeout=30_000)
    page.locator(".jp-NotebookPanel-toolbar").get_by_text("Validate", exact=True).click()
    dialog = page.locator(".jp-Dialog-content")
    dialog.wait_for(state="visible", timeout=VALIDATE_S * 1000)
    page.wait_for_function(
        "() => !/validating/i.test(document.querySelector('.jp-Dialog-content').innerText)",
        timeout=VALIDATE_S * 1000,
    )
    return dialog.inner_text()


def grade_cells(release: Path) -> dict[int, str]:
    """Cell index -> grade_id of the release's grade (visible test) cells."""
    nb = nbformat.read(release, as_version=4)
    return {
        i: c.metadata["nbgrader"]["grade_id"]
        for i, c in enumerate(nb.cells)
        if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"
    }


def solution_cells(release: Path) -> dict[int, str]:
    """Cell index -> grade_id of the release's solution cells."""
    nb = nbformat.read(release, as_version=4)
    return {
        i: c.metadata["nbgrader"]["grade_id"]
        for i, c in enumerate(nb.cells)
        if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"
    }


def copy_release(lab: LabServer, release: Path, folder: str) -> str:
    """Put a fresh copy of the release under the server's root; returns its path relative to the root."""
    target = lab.notebooks / folder / release.name
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(release, target)
    return f"{folder}/{release.name}"


def test_reference_solution_typed_in_passes_visible_tests_and_validate(
    browser_context, lab, release
):
    relative = f"{ASSIGNMENT}/{release.name}"
    assert (lab.notebooks / relative).is_file(), (
        f"{relative} missing from the served copy of exercises/"
    )
    page = open_notebook(browser_context, lab, relative)
    screenshot(page, f"lab/{ASSIGNMENT}_opened", full_page=False)

    solutions = samples.reference_solutions(ASSIGNMENT, course_root=REPO_ROOT)
    for index, grade_id in solution_cells(release).items():
        assert "NotImplementedError" in cell_sources(page)[index], (
            f"cell {index} ({grade_id}) is not a stub"
        )
        type_into_cell(page, index, solutions[grade_id])

    seconds = run_all_from_menu(page)
    print(f"Run All Cells: {seconds:.1f} s")
    screenshot(page, f"lab/{ASSIGNMENT}_reference_ran", full_page=False)
    report = cell_report(page)
    tests = grade_cells(release)
    not_run = [gid for i, gid in tests.items() if report[i]["count"] is None]
    failed = {gid: report[i]["errors"] for i, gid in tests.items() if report[i]["errors"]}
    other_errors = {i: r["errors"] for i, r in enumerate(report) if r["errors"] and i not in tests}
    assert not other_errors, f"cells other than tests raised: {other_errors}"
    assert not failed, f"visible tests failed with the reference solution typed in: {failed}"
    assert not not_run, f"visible tests that did not run: {not_run}"
    shown_errors = [
        tests[i]
        for i in tests
        if "Traceback" in report[i]["shown"] or "Error" in report[i]["shown"]
    ]
    assert not shown_errors, f"test cells show an error on screen: {shown_errors}"

    started = time.perf_counter()
    message = press_validate(page)
    print(f"Validate: {time.perf_counter() - started:.1f} s")
    screenshot(page, f"lab/{ASSIGNMENT}_validate", full_page=False)
    assert SUCCESS in message, f"Validate did not report success:\n{message[:3000]}"
    assert not page.watch.page_errors, f"JavaScript errors in JupyterLab: {page.watch.page_errors}"
    assert not page.watch.external_requests, (
        f"JupyterLab reached for the internet: {page.watch.external_requests}"
    )
    page.close()


def test_wrong_implementation_shows_the_failing_test_message(browser_context, lab, release):
    wrong, _ = samples.load_catalogue(ASSIGNMENT, course_root=REPO_ROOT)
    entry = next((e for e in wrong if e["name"] == WRONG_ENTRY), None)
    assert entry is not None, (
        f"catalogue/{ASSIGNMENT}.py has no WRONG entry named {WRONG_ENTRY!r}"
    )
    (function, code), *more = entry["replace"].items()
    assert not more, f"{WRONG_ENTRY}: pick a catalogue entry that replaces one function"

    relative = copy_release(lab, release, "second_attempt")
    page = open_notebook(browser_context, lab, relative)
    sources = cell_sources(page)
    index = next(i for i in solution_cells(release) if f"def {function}(" in sources[i])
    type_into_cell(page, index, code.strip() + "\n")

    run_all_from_menu(page)
    report = cell_report(page)
    tests = grade_cells(release)
    failing = {tests[i]: report[i] for i in tests if report[i]["errors"]}
    assert failing, f"{WRONG_ENTRY}: no visible test failed with {function} wrong"
    unexpected = set(failing) - set(entry["breaks"])
    assert not unexpected, (
        f"{WRONG_ENTRY}: tests {unexpected} failed, but the catalogue says only {entry['breaks']}"
    )
    for grade_id, cell in failing.items():
        error = cell["errors"][0]
        assert error["ename"] == "AssertionError", (
            f"{grade_id}: failed with {error}, not a test assertion"
        )
        assert error["evalue"].strip(), f"{grade_id}: the assertion has no message for the student"
        assert "expected" in error["evalue"].lower() or "got" in error["evalue"].lower(), (
            f"{grade_id}: message {error['evalue']!r} does not say what was expected and what came back"
        )
        assert error["evalue"] in cell["shown"], (
            f"{grade_id}: the message {error['evalue']!r} is not on screen; the output area shows:\n"
            f"{cell['shown'][-1500:]}"
        )
        cell_index = next(i for i, g in tests.items() if g == grade_id)
        output = page.locator(CELLS).nth(cell_index).locator(".jp-OutputArea")
        output.scroll_into_view_if_needed()
        assert output.get_by_text(error["evalue"], exact=False).first.is_visible(), (
            f"{grade_id}: the message is in the output area but not visible"
        )
        screenshot(page, f"lab/{ASSIGNMENT}_wrong_{grade_id}", full_page=False)
    assert not page.watch.page_errors, f"JavaScript errors in JupyterLab: {page.watch.page_errors}"
    page.close()
