"""Cheating does not pay: the tamper catalogue (``tamper_catalogue.py``) graded in one batch with
honest students, by the real sandbox (bubblewrap), and by plain ``nbgrader autograde`` for comparison.

For every attack: its score is at most its control's (the same answers without the attack); the honest
students keep their grades; the batch completes in one run; a loopback listener receives nothing; no
process outlives its notebook to edit the gradebook or other students' files. The nbgrader run records
which attacks pay there (the README's comparison table) and fails if that changes.
"""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import tamper_catalogue as catalogue
from nbgrader.api import Gradebook

from autograder.authoring.release import copy_course, nbgrader_environment, release
from autograder.grading import grade

ROOT = Path(__file__).resolve().parents[1]
DAEMON_WAIT_S = 7.0  # the daemon attack sleeps 4 s before it strikes

# Which attacks pay under plain nbgrader (measured in full into tamper_golden.json, a live sample each
# run: test_what_pays_with_nbgrader_is_measured; the README's table shows the same). "pays": more points than the same answers without the attack.
PAYS_WITH_NBGRADER = {
    "showtraceback": False,
    "custom_exc": False,
    "run_cell": True,
    "run_cell_async": False,
    "settrace": False,
    "hidden_checks_patched": True,
    "torch_equal_patched": True,
    "always_equal": False,
    "read_solutions": True,
    "daemon_edits_gradebook": True,
    "kill_grader": True,
    "network": True,
    "forged_channel": False,
    "skip_execution_tags": True,
    "display_then_raise": False,
    "template_and_control_socket": False,
    "planted_for_the_next_notebook": False,
    "metadata_of_the_wrong_type": False,
    "output_flood": False,
    "links_to_secrets": False,
    "decoy_hidden_module": True,
    "shm_plant": False,
    "shm_read": True,  # measured after shm_plant, one notebook after the other
    "proc_write_to_the_template": False,
    "empty_file_flood": False,
    "keyring_plant": False,
    "keyring_read": True,  # measured beside keyring_plant: it reads after every cell
    "busy_sessions": False,
    "sigbus_inside_a_check": False,
    "exit_inside_a_check": False,
    "as_strided_saved_at_top_level": False,
    "as_strided_in_an_added_cell": False,
    "huge_view_to_the_checker": False,
    "memmap_to_the_checker": False,
}
OUTPUT_LIMIT_BYTES = 10 * 2**20  # an autograded notebook's size, whatever its cells printed


class Listener:
    """A TCP listener on 127.0.0.1 that records every byte it receives."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received: list[bytes] = []
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            with connection:
                connection.settimeout(2)
                try:
                    while chunk := connection.recv(4096):
                        self.received.append(chunk)
                except OSError:
                    pass

    def reset(self) -> None:
        self.received.clear()
        self.connections = 0


@pytest.fixture(scope="module")
def listener():
    listening = Listener()
    yield listening
    listening.server.close()


def _scores(root: Path, students: list[str], *, earned: bool = False) -> dict[str, float]:
    """Each student's score (None: not graded); ``earned``: without extra credit (which the daemon
    attack writes into every row of an nbgrader gradebook)."""
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        found = {}
        for student in students:
            try:
                submission = gb.find_submission(catalogue.ASSIGNMENT, student)
            except Exception:  # noqa: BLE001 - not graded
                found[student] = None
                continue
            extra = sum(g.extra_credit or 0 for nb in submission.notebooks for g in nb.grades)
            found[student] = float(submission.score) - (extra if earned else 0)
        return found


def _extra_credit(root: Path) -> list:
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        return [g.extra_credit for s in gb.find_assignment(catalogue.ASSIGNMENT).submissions
                for nb in s.notebooks for g in nb.grades if g.extra_credit]


def _digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / "submitted").rglob("*.ipynb")) if "honest" in str(p)}


def _class(tmp_path_factory, name: str, listener: Listener):
    root = copy_course(ROOT, tmp_path_factory.mktemp(name) / "course")
    release(assignments=[catalogue.ASSIGNMENT], course_root=root)
    marker = root.parent / "daemon-was-here"
    controls = catalogue.write_class(root, port=listener.port, marker=str(marker))
    return root, marker, controls


@pytest.fixture(scope="module")
def sandboxed(tmp_path_factory, listener):
    """The whole class graded by ``autograder grade`` in one run, in the bubblewrap sandbox."""
    root, marker, controls = _class(tmp_path_factory, "sandboxed", listener)
    listener.reset()
    before = _digests(root)
    # the grader's own temporary folder (another test may be grading at the same time on /tmp)
    host_tmp, tempfile.tempdir = tempfile.tempdir, str(tmp_path_factory.mktemp("host-tmp"))
    try:
        summary = grade(course_root=root, workers=2, allow_cpu=True, progress=False)
        scratch_left = set(Path(tempfile.gettempdir()).glob("autograder-checker-*"))
    finally:
        tempfile.tempdir = host_tmp
    time.sleep(DAEMON_WAIT_S)
    return {"root": root, "marker": marker, "controls": controls, "summary": summary,
            "received": list(listener.received), "connections": listener.connections,
            "before": before, "scratch_left": scratch_left}


def test_the_batch_completes_in_one_run(sandboxed):
    results = {r.student: r for r in sandboxed["summary"].results}
    students = set(sandboxed["controls"]) | {"honest-reference", "honest-wrong", "control-stub",
                                             "control-wrong", "control-wrong_gather"}
    assert set(results) == students
    assert {r.status for r in results.values()} == {"graded"}, [
        (r.student, r.status, r.reasons) for r in results.values() if r.status != "graded"]


def test_no_attack_pays(sandboxed):
    root, controls = sandboxed["root"], sandboxed["controls"]
    scores = _scores(root, [*controls, *set(controls.values())])
    paying = {a: (scores[a], scores[c]) for a, c in controls.items() if scores[a] > scores[c]}
    assert not paying, f"attacks that paid (attack score, control score): {paying}"
    assert scores["control-stub"] == 0.0


def test_honest_students_keep_their_grades(sandboxed, tmp_path):
    """The honest students score what they score in a class without attackers."""
    honest = ["honest-reference", "honest-wrong"]
    alone = copy_course(ROOT, tmp_path / "course")
    release(assignments=[catalogue.ASSIGNMENT], course_root=alone)
    for student in honest:
        source = sandboxed["root"] / "submitted" / student
        shutil.copytree(source, alone / "submitted" / student)
    grade(course_root=alone, allow_cpu=True, progress=False)
    scores = _scores(sandboxed["root"], honest)
    assert scores == _scores(alone, honest)
    assert scores["honest-reference"] == 10.0 and scores["honest-wrong"] < 10.0


def test_the_network_is_closed(sandboxed):
    assert sandboxed["received"] == [] and sandboxed["connections"] == 0


def test_nothing_outlives_its_notebook(sandboxed):
    root = sandboxed["root"]
    assert not sandboxed["marker"].exists(), "a daemon wrote on the grading machine after its notebook"
    assert _extra_credit(root) == []
    assert _digests(root) == sandboxed["before"], "another student's submission changed"


def test_the_grader_was_not_killed(sandboxed):
    record = next(r for r in sandboxed["summary"].results if r.student == "attack-kill_grader")
    assert record.status == "graded" and record.score == 0.0


def test_outputs_are_bounded_and_nothing_is_left_in_the_hosts_tmp(sandboxed):
    flooded = (sandboxed["root"] / "autograded" / "attack-output_flood" / catalogue.ASSIGNMENT /
               f"{catalogue.ASSIGNMENT}.ipynb")
    assert flooded.stat().st_size < OUTPUT_LIMIT_BYTES
    assert "output truncated by the grader" in flooded.read_text()
    assert sandboxed["scratch_left"] == set()


def test_links_are_refused_by_name(sandboxed):
    record = next(r for r in sandboxed["summary"].results if r.student == "attack-links_to_secrets")
    for link in ("gradebook_link.db", "solution_link.py", "hidden_link.py"):
        assert any(link in reason and "symbolic link" in reason for reason in record.reasons), \
            record.reasons
    staged = sandboxed["root"] / "autograded" / "attack-links_to_secrets" / catalogue.ASSIGNMENT
    assert not any(path.is_symlink() or path.name.endswith("_link.py") for path in staged.iterdir())


def test_the_forged_result_is_plain_text(sandboxed):
    """What the submission displayed during a grade cell is stdout text there, never its result."""
    nb = (sandboxed["root"] / "autograded" / "attack-display_then_raise" / catalogue.ASSIGNMENT /
          f"{catalogue.ASSIGNMENT}.ipynb")
    cells = __import__("nbformat").read(nb, as_version=4).cells
    graded = [c for c in cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert graded and all(o.output_type != "execute_result" for c in graded for o in c.outputs)
    assert any("[the submission's code showed] 10" in o.get("text", "")
               for c in graded for o in c.outputs)


def test_kept_files_are_bounded_per_notebook(sandboxed):
    """1000 empty files after each of the notebook's cells: autograded/ keeps the per-notebook budget
    (counted on the trusted side), not 1000 per cell."""
    from autograder.grading.execute.outputs import KEPT_FILES

    kept = sandboxed["root"] / "autograded" / "attack-empty_file_flood" / catalogue.ASSIGNMENT
    files = [p for p in kept.rglob("*") if p.is_file()]
    assert 0 < len([p for p in files if "flood" in p.parts]) <= KEPT_FILES, len(files)


def _cells(sandboxed, student: str) -> dict[str, tuple[float, list[tuple[str, str]]]]:
    """Each grade cell of ``student``'s autograded notebook: (score, its error outputs)."""
    import nbformat

    with Gradebook(f"sqlite:///{sandboxed['root'] / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook(catalogue.ASSIGNMENT, catalogue.ASSIGNMENT, student)
        scores = {g.name: float(g.score) for g in notebook.grades}
    graded = nbformat.read(sandboxed["root"] / "autograded" / student / catalogue.ASSIGNMENT /
                           f"{catalogue.ASSIGNMENT}.ipynb", as_version=4)
    errors = {c.metadata["nbgrader"]["grade_id"]: [(o.ename, o.evalue) for o in c.outputs
                                                   if o.output_type == "error"]
              for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade")}
    return {cell: (score, errors.get(cell, [])) for cell, score in scores.items()}


def _printed(sandboxed, student: str) -> str:
    import nbformat

    graded = nbformat.read(sandboxed["root"] / "autograded" / student / catalogue.ASSIGNMENT /
                           f"{catalogue.ASSIGNMENT}.ipynb", as_version=4)
    return "".join(o.get("text", "") for c in graded.cells if c.cell_type == "code" for o in c.outputs)


def test_the_keyring_is_refused(sandboxed):
    """add_key into the session, user and user-session keyrings fails with EPERM (or ENOSYS) in the
    sandbox; the reader, graded in the same batch, finds nothing to exec."""
    printed = _printed(sandboxed, "attack-keyring_plant")
    line = next(line for line in printed.splitlines() if line.startswith("add_key"))
    planted = __import__("ast").literal_eval(line.split(":", 1)[1].strip())
    assert [ring for ring, _, _ in planted] == [-3, -4, -5]
    assert all(key == -1 and errno in (1, 38) for _, key, errno in planted), planted
    assert all(score == 0.0 for score, _ in _cells(sandboxed, "attack-keyring_read").values())


def test_busy_sessions_ran_and_cost_only_their_own_notebook(sandboxed):
    """16 busy processes, each in its own session, for 4 s: they ran (honest students keep their
    grades: test_honest_students_keep_their_grades; the batch completes: test_the_batch_completes_in_one_run)."""
    assert "busy sessions: 16" in _printed(sandboxed, "attack-busy_sessions")


@pytest.mark.parametrize("attack, death", [("sigbus_inside_a_check", "SIGBUS"),
                                           ("exit_inside_a_check", "exited with code 0")])
def test_a_grade_cell_the_student_process_did_not_let_finish_earns_nothing(sandboxed, attack, death):
    """The student's process dies inside the function select_metadata's hidden check calls: that cell
    and every later one score 0 with an error output (a verdict that failed open would give the
    unfinished cells their points: more than the control's 8)."""
    cells = _cells(sandboxed, f"attack-{attack}")
    for cell in ("test_select_metadata", "test_is_contiguous", "test_gather_view"):
        score, errors = cells[cell]
        assert score == 0.0 and errors and any(death in evalue for _, evalue in errors), (cell, errors)
    assert cells["test_contiguous_strides"][0] == 2.0  # the cells before keep their points


@pytest.mark.parametrize("attack, refusal", [
    ("huge_view_to_the_checker", "stands for 68719476736 bytes"),  # the checker's decode budget
    ("memmap_to_the_checker", "too large to cross"),  # the sandbox's encoder, before any byte is sent
])
def test_values_that_stand_for_gigabytes_are_refused(sandboxed, attack, refusal):
    cells = _cells(sandboxed, f"attack-{attack}")
    for cell in ("test_select_metadata", "test_is_contiguous"):
        score, errors = cells[cell]
        assert score == 0.0 and any(refusal in evalue for _, evalue in errors), (cell, errors)
    assert cells["test_gather_view"][0] == 2.0  # the notebook goes on


@pytest.mark.parametrize("attack", ["as_strided_saved_at_top_level", "as_strided_in_an_added_cell"])
def test_a_forbidden_api_reached_without_its_name_is_seen(sandboxed, attack):
    score, errors = _cells(sandboxed, f"attack-{attack}")["test_gather_view"]
    assert score == 0.0 and any("must compute positions itself, not call as_strided" in evalue
                                for _, evalue in errors), errors


def _remove_planted() -> None:
    """What the shared-memory and keyring attacks leave on this machine when plain nbgrader runs them
    (the keys: in this process's session keyring, which the kernels inherit, and the user's)."""
    import ctypes

    from autograder.sandbox import seccomp

    Path("/dev/shm/answers.py").unlink(missing_ok=True)
    libc = ctypes.CDLL(None, use_errno=True)
    segment = libc.shmget(0x5EED, 0, 0)
    if segment >= 0:
        libc.shmctl(segment, 0, None)  # IPC_RMID
    keyctl = ctypes.c_long(seccomp.syscall_number("keyctl"))
    for ring in (-3, -4, -5):  # session, user, user-session keyrings
        for _ in range(8):  # KEYCTL_SEARCH, then KEYCTL_UNLINK from that keyring
            key = libc.syscall(keyctl, ctypes.c_long(10), ctypes.c_long(ring), b"user",
                               b"autograder-tamper-answers", ctypes.c_long(0))
            if key <= 0 or libc.syscall(keyctl, ctypes.c_long(9), ctypes.c_long(key), ctypes.c_long(ring)):
                break


def _nbgrader_autograde(root: Path, student: str) -> None:
    subprocess.run([sys.executable, "-m", "nbgrader", "autograde", catalogue.ASSIGNMENT,
                    "--student", student, "--force"], cwd=root, capture_output=True, text=True,
                   env=nbgrader_environment({"AUTOGRADER_ALLOW_CPU": "1"}), timeout=600)


def _kill_stops_an_nbgrader_batch(tmp_path_factory, listener) -> bool:
    """One ``nbgrader autograde`` over the kill attack and an honest student graded after it: does
    the honest student go ungraded?"""
    root, _, _ = _class(tmp_path_factory, "nbgrader-batch", listener)
    for folder in (root / "submitted").iterdir():
        if folder.name not in ("attack-kill_grader", "honest-reference"):
            shutil.rmtree(folder)
    subprocess.run([sys.executable, "-m", "nbgrader", "autograde", catalogue.ASSIGNMENT, "--force"],
                   cwd=root, capture_output=True, text=True, timeout=600,
                   env=nbgrader_environment({"AUTOGRADER_ALLOW_CPU": "1"}))
    return _scores(root, ["honest-reference"])["honest-reference"] is None


# Plain nbgrader's side is measured in full by `make tamper-golden` (TAMPER_GOLDEN=write: every attack,
# about 5 minutes) into tamper_golden.json, keyed by a digest of what it depends on; each run re-measures
# LIVE_SAMPLE (two attacks that pay, one that does not) to prove the record still holds.
GOLDEN = Path(__file__).with_name("tamper_golden.json")
LIVE_SAMPLE = ("read_solutions", "hidden_checks_patched", "always_equal")


def _golden_digest() -> str:
    import nbgrader

    digest = hashlib.sha256(nbgrader.__version__.encode())
    for path in (Path(catalogue.__file__), ROOT / "solutions" / catalogue.ASSIGNMENT / f"{catalogue.ASSIGNMENT}.py"):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _pays_with_nbgrader(tmp_path_factory, listener, attacks: list[str]) -> dict[str, bool]:
    """The same class through plain nbgrader, one ``nbgrader autograde --student`` at a time (an
    attack that kills the grader would otherwise stop the students after it): which of ``attacks``
    score more than their controls."""
    root, marker, controls = _class(tmp_path_factory, "nbgrader", listener)
    listener.reset()
    chosen = {f"attack-{name}" for name in attacks}
    # the kill attack is measured on its own (it would kill the other grading run going on)
    students = sorted({*(chosen & set(controls)), *(controls[s] for s in chosen & set(controls)),
                       "honest-reference", "honest-wrong"} - {"attack-kill_grader"})
    _remove_planted()  # nothing left by an earlier measurement makes a reader pay on its own
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda s: _nbgrader_autograde(root, s), students))
    finally:
        _remove_planted()
    if "daemon_edits_gradebook" in attacks:
        time.sleep(DAEMON_WAIT_S)
    scores = _scores(root, students, earned=True)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        extra = {s.student.id: sum(g.extra_credit or 0 for nb in s.notebooks for g in nb.grades)
                 for s in gb.find_assignment(catalogue.ASSIGNMENT).submissions}
    paid = {}
    for attack in [a for a in catalogue.ATTACKS if a["name"] in attacks]:
        student = f"attack-{attack['name']}"
        if attack["name"] == "network":
            paid[attack["name"]] = listener.connections > 0
        elif attack["name"] == "daemon_edits_gradebook":
            paid[attack["name"]] = marker.exists() and any(extra.values())
        elif attack["name"] == "kill_grader":
            paid[attack["name"]] = _kill_stops_an_nbgrader_batch(tmp_path_factory, listener)
        else:
            control = scores[controls[student]] or 0.0
            score = scores.get(student)
            paid[attack["name"]] = score is not None and score > control
    return paid


def test_the_record_of_what_pays_with_nbgrader_is_current():
    """tamper_golden.json was measured on today's attacks, exercise and nbgrader, and says what the
    README's table says (PAYS_WITH_NBGRADER)."""
    import json
    import os

    if os.environ.get("TAMPER_GOLDEN") == "write":
        pytest.fail("TAMPER_GOLDEN=write: run test_what_pays_with_nbgrader_is_measured (make tamper-golden)")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert golden["digest"] == _golden_digest(), \
        "the attacks, the exercise or nbgrader changed since tamper_golden.json: run `make tamper-golden`"
    assert golden["pays"] == PAYS_WITH_NBGRADER
    assert sorted(golden["pays"]) == sorted(a["name"] for a in catalogue.ATTACKS)


@pytest.mark.slow
def test_what_pays_with_nbgrader_is_measured(tmp_path_factory, listener):
    """A live sample (every attack with TAMPER_GOLDEN=write, which rewrites tamper_golden.json)."""
    import json
    import os

    import nbgrader

    everything = os.environ.get("TAMPER_GOLDEN") == "write"
    attacks = [a["name"] for a in catalogue.ATTACKS] if everything else list(LIVE_SAMPLE)
    paid = _pays_with_nbgrader(tmp_path_factory, listener, attacks)
    print("pays with nbgrader:", paid)
    if everything:
        GOLDEN.write_text(json.dumps({"digest": _golden_digest(), "nbgrader": nbgrader.__version__,
                                      "pays": paid}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert {True, False} <= set(paid.values()) or everything, "the sample must hold both outcomes"
    assert paid == {name: PAYS_WITH_NBGRADER[name] for name in attacks}
