"""Twin courses graded by plain ``nbgrader autograde`` and by ``autograder grade``, snapshot, diff.

The parity suite's instrument (issue 16). A ``Scenario`` is one test of nbgrader's
``nbgrader/tests/apps/test_nbgrader_autograde.py`` written as data: the files of its course, the
students and due date it adds to the gradebook, then one ``Step`` per ``autograde`` run (file
operations before the run, the run's arguments and config). Three functions do the work:

- ``build_course(root, scenarios)``: one course holding the scenarios (one assignment each, named
  after the scenario), released with nbgrader's own ``generate_assignment``, submissions in
  ``submitted/``. Its copy is the twin (``build_twins``).
- ``run_course(root, scenarios, grader)``: every step of every scenario, in lockstep, through
  ``NbgraderGrader`` (one ``nbgrader autograde ASSIGNMENT`` per scenario and step) or
  ``AutograderGrader`` (one ``autograder grade A1 A2 ...`` for all the scenarios of a step that share
  arguments and config); returns, per scenario, one ``snapshot`` per step.
- ``snapshot(root, assignment)``: the exit status of the run, the assignment's gradebook rows and
  the files under ``autograded/`` and ``submitted/``, as plain JSON-able dicts; ``diff(a, b)`` lists
  where two snapshots differ.

Config given on nbgrader's command line in the original tests (``--Autograde.create_student=False``,
``--AutogradeApp.permissions=644``, ...) is written to ``nbgrader_config.py`` for that run instead
(nbgrader reads both the same way; the autograder reads only the file). The command-line flags both
graders document (``--force``, ``--student``) are passed as such; nbgrader-only flags (``-f``,
``--notebook``, ``--no-execute``) are passed to both, and an autograder that refuses them differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FILES = ROOT / "tests" / "nbgrader_files"
GOLDEN = Path(__file__).resolve().parent / "golden"
BIN = Path(sys.executable).parent
DUEDATE = "2015-02-02 14:58:23.948203 America/Los_Angeles"
CONFIG = "nbgrader_config.py"
CALL_TIMEOUT = 300  # seconds for one grading command; a hang fails the suite instead of stalling it


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment with this interpreter's bin directory first on PATH (nbgrader's
    Gradebook runs ``alembic``; kernels and ``autograder`` come from this environment), without
    PYTHONPATH (a relative entry would put each grader's working directory, the course root, on
    its ``sys.path``: what the graders do about that is under test)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env.update(extra or {})
    return env


os.environ["PATH"] = environment()["PATH"]  # for in-process Gradebook use


# --- file operations of a scenario (paths relative to the course root; "{a}": its assignment) ---

@dataclass(frozen=True)
class Copy:
    """Copy the vendored nbgrader fixture ``fixture`` (its nbgrader name) to ``dest``."""
    fixture: str
    dest: str


@dataclass(frozen=True)
class CopyCourse:
    """Copy a course file (``src``, e.g. the release) to ``dest``."""
    src: str
    dest: str


@dataclass(frozen=True)
class Write:
    """Write ``text`` to ``dest`` (``_make_file``)."""
    dest: str
    text: str = ""


@dataclass(frozen=True)
class Empty:
    """An empty notebook at ``dest``, with a kernelspec for language ``kernel`` (``_empty_notebook``)."""
    dest: str
    kernel: str | None = None


@dataclass(frozen=True)
class Remove:
    """Remove ``path`` (``utils.remove``); one a grader did not write is already a difference."""
    path: str


@dataclass(frozen=True)
class Mkdir:
    path: str


Action = Copy | CopyCourse | Write | Empty | Remove | Mkdir


def fixture_path(name: str) -> Path:
    """A vendored fixture; notebooks are stored as NAME.ipynb.json (see tests/nbgrader_files/NOTE.md)."""
    path = FILES / (name + ".json" if name.endswith(".ipynb") else name)
    if not path.is_file():
        raise FileNotFoundError(f"no vendored nbgrader fixture {name!r} in {FILES}")
    return path


def apply(action: Action, root: Path, assignment: str) -> None:
    """Do one file operation in the course ``root`` for ``assignment``."""
    def at(rel: str) -> Path:
        return root / rel.format(a=assignment)

    if isinstance(action, Copy | CopyCourse | Write | Empty):
        dest = at(action.dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists():
            dest.unlink()
    if isinstance(action, Copy):
        shutil.copyfile(fixture_path(action.fixture), dest)
    elif isinstance(action, CopyCourse):
        shutil.copyfile(at(action.src), dest)
    elif isinstance(action, Write):
        dest.write_text(action.text)
    elif isinstance(action, Empty):
        metadata = {}
        if action.kernel is not None:
            metadata["kernelspec"] = {"display_name": "kernel", "language": action.kernel,
                                      "name": action.kernel}
        dest.write_text(json.dumps({"cells": [], "metadata": metadata, "nbformat": 4,
                                    "nbformat_minor": 5}, indent=1))
    elif isinstance(action, Remove):
        path = at(action.path)
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    elif isinstance(action, Mkdir):
        at(action.path).mkdir(parents=True)
    else:
        raise TypeError(f"not a file operation: {action!r}")


# --- scenarios ---

@dataclass(frozen=True)
class Step:
    """One ``autograde`` run: ``before`` (file operations), then the run with ``args`` (nbgrader's
    arguments after the assignment) and ``config`` (lines added to nbgrader_config.py for this run;
    ``{a}``: the assignment). ``assignment`` grades another assignment name than the scenario's
    (``{a}`` allowed). ``nbgrader_fails``: the original test expects ``retcode=1``."""
    args: tuple[str, ...] = ()
    config: str = ""
    before: tuple[Action, ...] = ()
    assignment: str | None = None
    nbgrader_fails: bool = False

    def assignment_name(self, scenario: Scenario) -> str:
        return (self.assignment or "{a}").format(a=scenario.name)


@dataclass(frozen=True)
class Scenario:
    """One nbgrader test. ``name`` (the test's name without ``test_``) is also its assignment.

    ``course``: scenarios with the same course share one (their ``config`` must agree).
    ``config``: course config lines present from ``generate_assignment`` on (only those that act on
    it; config that acts on autograde alone goes in the steps). ``root_files``: file operations in
    the course root (``Copy``/``Write``; the union over a course, which must not conflict).
    ``source``: files before ``generate_assignment``; the first step's ``before`` holds the
    submissions. ``modes``: snapshot the permissions of autograded ``"files"`` (or ``"all"``,
    folders too: nbgrader guarantees folder modes only when groupshared). ``differs``: the
    documented difference (issue 16) while the autograder does not agree; None when it does.
    """
    name: str
    steps: tuple[Step, ...]
    source: tuple[Action, ...] = ()
    students: tuple[str, ...] = ("foo", "bar")
    duedate: str | None = DUEDATE
    course: str = "plain"
    config: str = ""
    root_files: tuple[Action, ...] = ()
    modes: str = ""
    differs: str | None = None

    def digest(self) -> str:
        """What the golden result of this scenario depends on: the scenario (minus ``differs`` and
        ``course``: a snapshot does not depend on the other assignments of its course),
        the fixtures it copies and nbgrader's version."""
        import nbgrader

        spec = {k: v for k, v in self.__dict__.items() if k not in ("differs", "course")}
        h = hashlib.sha256(repr(sorted(spec.items())).encode())
        for name in sorted(self.fixtures()):
            h.update(name.encode() + fixture_path(name).read_bytes())
        h.update(nbgrader.__version__.encode())
        return h.hexdigest()[:16]

    def fixtures(self) -> set[str]:
        actions = [*self.root_files, *self.source, *(a for s in self.steps for a in s.before)]
        return {a.fixture for a in actions if isinstance(a, Copy)}


def courses(scenarios: Sequence[Scenario]) -> dict[str, list[Scenario]]:
    """Scenarios grouped by course, checking that each course's config and root files agree."""
    grouped: dict[str, list[Scenario]] = {}
    for s in scenarios:
        grouped.setdefault(s.course, []).append(s)
    for name, group in grouped.items():
        if len({s.config for s in group}) != 1:
            raise ValueError(f"course {name!r}: its scenarios disagree on config")
        dests = {}
        for action in {a for s in group for a in s.root_files}:
            if dests.setdefault(action.dest, action) != action:
                raise ValueError(f"course {name!r}: two different root files {action.dest}")
    return grouped


# --- building ---

_SETUP = r"""
import sys
from nbgrader.api import Gradebook
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
from nbgrader.utils import parse_utc
from traitlets.config import PyFileConfigLoader

spec = __import__("json").loads(sys.argv[1])
config = PyFileConfigLoader("nbgrader_config.py", path=".").load_config()
coursedir = CourseDirectory(config=config)
with Gradebook(coursedir.db_url) as gb:
    for student in spec["students"]:
        gb.update_or_create_student(student)
    for name, duedate in spec["assignments"]:
        gb.update_or_create_assignment(name, duedate=parse_utc(duedate) if duedate else None)
api = NbGraderAPI(coursedir=coursedir, config=config)
for name, _ in spec["assignments"]:
    result = api.generate_assignment(name, force=True, create=False)
    if not result["success"]:
        sys.exit(f"generate_assignment {name} failed:\n{result.get('error')}\n{result.get('log')}")
"""


def write_config(root: Path, *parts: str) -> None:
    text = "c = get_config()\n" + "".join(p.rstrip("\n") + "\n" for p in parts if p)
    (root / CONFIG).write_text(text)


def build_course(root: Path, scenarios: Sequence[Scenario]) -> Path:
    """One course at ``root`` for ``scenarios`` (all of one course): config, root files, gradebook
    (students, assignments with their due dates), ``source/``, ``release/`` by nbgrader's
    ``generate_assignment`` (``db student add``, ``db assignment add --duedate`` and
    ``generate_assignment`` of the original tests, in one process)."""
    (group,) = courses(scenarios).values()
    root.mkdir(parents=True)
    write_config(root, group[0].config)
    for action in sorted({a for s in group for a in s.root_files}, key=lambda a: a.dest):
        apply(action, root, "")
    for s in group:
        for action in s.source:
            apply(action, root, s.name)
    students = sorted({st for s in group for st in s.students})
    spec = {"students": students, "assignments": [(s.name, s.duedate) for s in group]}
    done = subprocess.run([sys.executable, "-c", _SETUP, json.dumps(spec)], cwd=root,
                          env=environment(), capture_output=True, text=True, timeout=CALL_TIMEOUT)
    if done.returncode != 0:
        raise RuntimeError(f"setting up {root} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return root


def build_twins(parent: Path, scenarios: Sequence[Scenario]) -> tuple[Path, Path]:
    """Twin courses ``parent/nbgrader_course`` and ``parent/autograder_course``: one built, the other
    its copy."""
    first = build_course(parent / "nbgrader_course", scenarios)
    return first, Path(shutil.copytree(first, parent / "autograder_course", symlinks=True))


# --- graders ---

@dataclass(frozen=True)
class Call:
    """One grading command: these scenarios' step ``index``, with ``args`` and ``config``."""
    scenarios: tuple[Scenario, ...]
    index: int
    args: tuple[str, ...]
    config: str

    def assignments(self) -> list[str]:
        return [s.steps[self.index].assignment_name(s) for s in self.scenarios]


@dataclass
class Grader:
    """Runs the ``Call``s of a step; ``run`` returns each scenario's exit status."""
    name: str = "grader"
    log: list[str] = field(default_factory=list)

    def calls(self, scenarios: Sequence[Scenario], index: int) -> list[Call]:
        raise NotImplementedError

    def run(self, root: Path, call: Call) -> dict[str, int]:
        raise NotImplementedError


def _step_config(s: Scenario, index: int) -> str:
    return s.steps[index].config.format(a=s.name)


class NbgraderGrader(Grader):
    """Plain nbgrader: ``nbgrader autograde ASSIGNMENT ARGS`` per scenario and step, as the tests do."""

    def __init__(self) -> None:
        super().__init__(name="nbgrader")

    def calls(self, scenarios, index):
        return [Call((s,), index, s.steps[index].args, _step_config(s, index)) for s in scenarios]

    def run(self, root, call):
        (s,) = call.scenarios
        done = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", *call.assignments(),
                               *call.args], cwd=root, env=environment(), capture_output=True,
                              text=True, timeout=CALL_TIMEOUT)
        self.log.append(f"$ nbgrader autograde {' '.join(call.assignments() + list(call.args))} "
                        f"-> {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-4000:]}")
        return {s.name: done.returncode}


_ROW = re.compile(r"^\s*[│|]\s*(?P<assignment>\S+)\s*[│|]\s*(?P<student>\S+)\s*[│|]\s*(?P<score>\S+)")


class AutograderGrader(Grader):
    """``autograder --course-root ROOT grade A1 A2 ... ARGS`` (the real sandbox): one command for
    all the scenarios of a step that share arguments and config; a step nbgrader expects to fail
    runs alone, so that a failure of the whole command tells about that scenario only. A scenario's
    exit status is the command's when the command failed as a whole (bad arguments, an error before
    grading), else 1 if one of its submissions is listed as failed (the CLI's rule), else 0."""

    def __init__(self) -> None:
        super().__init__(name="autograder")

    def calls(self, scenarios, index):
        grouped: dict[tuple, list[Scenario]] = {}
        for s in scenarios:
            step = s.steps[index]
            key = (step.args, _step_config(s, index), s.name if step.nbgrader_fails else "")
            grouped.setdefault(key, []).append(s)
        return [Call(tuple(group), index, args, config)
                for (args, config, _), group in grouped.items()]

    def run(self, root, call):
        command = [str(BIN / "autograder"), "--course-root", str(root), "grade", *call.assignments(),
                   "--no-progress", *call.args]
        started = time.monotonic()
        done = subprocess.run(command, cwd=root, env=environment({"COLUMNS": "400"}),
                              capture_output=True, text=True, timeout=CALL_TIMEOUT)
        self.log.append(f"$ {' '.join(command[1:])} -> {done.returncode} "
                        f"({time.monotonic() - started:.1f} s)\n"
                        f"{done.stdout[-4000:]}{done.stderr[-4000:]}")
        if done.returncode == 0:
            return {s.name: 0 for s in call.scenarios}
        rows = [m.groupdict() for m in map(_ROW.match, done.stdout.splitlines()) if m]
        summarized = re.search(r"^graded \d+, skipped \d+ .* failed \d+", done.stdout, re.M)
        if not summarized:
            return {s.name: done.returncode for s in call.scenarios}
        failed = {r["assignment"] for r in rows if r["score"] == "failed"}
        return {s.name: int(s.steps[call.index].assignment_name(s) in failed)
                for s in call.scenarios}


def run_course(root: Path, scenarios: Sequence[Scenario], grader: Grader) -> dict[str, list[dict]]:
    """Every step of ``scenarios`` (one built course at ``root``) in lockstep: step k's file
    operations for all, then step k's grading commands (``grader.calls``), then one snapshot per
    scenario. Returns scenario name -> [snapshot of step 1, step 2, ...]."""
    (group,) = courses(scenarios).values()
    base = group[0].config
    results: dict[str, list[dict]] = {s.name: [] for s in group}
    for index in range(max(len(s.steps) for s in group)):
        active = [s for s in group if index < len(s.steps)]
        for s in active:
            for action in s.steps[index].before:
                apply(action, root, s.name)
        statuses: dict[str, int] = {}
        for call in grader.calls(active, index):
            write_config(root, base, call.config)
            try:
                statuses.update(grader.run(root, call))
            finally:
                write_config(root, base)
        for s in active:
            shot = {"status": "ok" if statuses[s.name] == 0 else "failed",
                    **snapshot(root, s.steps[index].assignment_name(s), modes=s.modes)}
            if s.steps[index].assignment_name(s) != s.name:
                shot["released"] = snapshot(root, s.name, modes=s.modes)
            results[s.name].append(shot)
    return results


# --- snapshots ---

def _iso(value) -> str | None:
    return None if value is None else value.isoformat()


def gradebook_rows(db_url: str, assignment: str) -> dict[str, Any] | None:
    """The assignment's submissions as plain dicts: student -> timestamp, total_seconds_late and,
    per notebook, its late_submission_penalty, per grade cell auto_score / manual_score /
    needs_manual_grade and per comment its auto_comment. None when the assignment is unknown."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gb:
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            return None
        rows = {}
        for sub in found.submissions:
            rows[sub.student.id] = {
                "timestamp": _iso(sub.timestamp),
                "total_seconds_late": sub.total_seconds_late,
                "notebooks": {nb.notebook.name: {
                    "late_submission_penalty": nb.late_submission_penalty,
                    "grades": {g.name: {"auto_score": g.auto_score, "manual_score": g.manual_score,
                                        "needs_manual_grade": bool(g.needs_manual_grade)}
                               for g in nb.grades},
                    "comments": {c.name: c.auto_comment for c in nb.comments},
                } for nb in sub.notebooks},
            }
        return dict(sorted(rows.items()))


_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


def _text(value) -> str:
    return _ADDRESS.sub("0x…", "".join(value) if isinstance(value, list) else str(value))


def _output(out: dict) -> dict:
    kind = out.get("output_type")
    if kind == "stream":
        return {"stream": out.get("name"), "text": _text(out.get("text", ""))}
    if kind == "error":
        return {"error": out.get("ename"), "evalue": _text(out.get("evalue", ""))}
    data = out.get("data", {})
    return {kind: sorted(data), "text/plain": _text(data.get("text/plain", ""))}


def notebook_cells(path: Path) -> list[dict] | str:
    """A notebook as what scoring reads: per cell its type, source and nbgrader metadata, and for
    code cells its outputs (streams, results, errors by name and value; no tracebacks, execution
    counts or timings; memory addresses masked)."""
    try:
        nb = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        return f"unreadable: {error.__class__.__name__}"
    cells = []
    for cell in nb.get("cells", []):
        entry = {"type": cell.get("cell_type"), "source": _text(cell.get("source", "")),
                 "nbgrader": cell.get("metadata", {}).get("nbgrader")}
        if cell.get("cell_type") == "code":
            entry["outputs"] = [_output(o) for o in cell.get("outputs", [])]
        cells.append(entry)
    return cells


def folder_files(root: Path, step: str, assignment: str, *, modes: str = "") -> dict[str, dict]:
    """student -> relative path -> entry for every ``<step>/<student>/<assignment>/`` folder: dirs,
    notebooks (``notebook_cells``), other files by their text (or sha256 when not short text);
    with ``modes`` the permission bits too, of files (``"files"``) or also of folders (``"all"``;
    the submission's folder itself is ``.``)."""
    found = {}
    for folder in sorted(root.glob(f"{step}/*/{assignment}")):
        entries = {}
        for path in [folder, *sorted(folder.rglob("*"))]:
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                entry = {"type": "symlink"}
            elif path.is_dir():
                entry = {"type": "dir"}
            elif path.suffix == ".ipynb" and step != "submitted":
                entry = {"type": "notebook", "cells": notebook_cells(path)}
            else:
                data = path.read_bytes()
                try:
                    text = data.decode() if len(data) <= 2000 else None
                except UnicodeDecodeError:
                    text = None
                entry = {"type": "file", "text": text} if text is not None else \
                    {"type": "file", "sha256": hashlib.sha256(data).hexdigest()}
            if modes == "all" or (modes == "files" and entry["type"] != "dir"):
                entry["mode"] = oct(path.lstat().st_mode & 0o7777)
            entries[rel] = entry
        found[folder.parent.name] = entries
    return found


def snapshot(root: Path, assignment: str, *, modes: str = "") -> dict[str, Any]:
    """What a run left for ``assignment``: gradebook rows, ``autograded/`` and ``submitted/`` files."""
    found = {"gradebook": gradebook_rows(f"sqlite:///{root / 'gradebook.db'}", assignment),
             "autograded": folder_files(root, "autograded", assignment, modes=modes),
             "submitted": folder_files(root, "submitted", assignment)}
    records = sorted(p.parent.parent.name for p in
                     (root / "autograded").glob(f"*/.autograder/{assignment}.json"))
    if records:  # the autograder's run records (autograder/grading/run_record.py); nbgrader has none
        found[RUN_RECORDS] = records
    return found


# --- comparing ---

def diff(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Where ``actual`` differs from ``expected`` (plain JSON-able values), one line per leaf:
    ``path: nbgrader=... autograder=...``."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        lines = []
        for key in sorted(set(expected) | set(actual), key=str):
            sub = f"{path}/{key}" if path else str(key)
            if key not in actual:
                lines.append(f"{sub}: only nbgrader has it: {_short(expected[key])}")
            elif key not in expected:
                lines.append(f"{sub}: only the autograder has it: {_short(actual[key])}")
            else:
                lines += diff(expected[key], actual[key], sub)
        return lines
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [line for i, (e, a) in enumerate(zip(expected, actual, strict=True))
                for line in diff(e, a, f"{path}[{i}]")]
    if expected != actual:
        return [f"{path}: nbgrader={_short(expected)} autograder={_short(actual)}"]
    return []


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


RUN_RECORD = "autograder.json"
RUN_RECORDS = "run_records"


def without_run_record(steps: list[dict]) -> tuple[list[dict], list[str]]:
    """The autograder's snapshots without its run records (``autograded/<student>/.autograder/
    <assignment>.json``: device, timings, why cells failed), which nbgrader does not write, and which
    sit outside the autograded folder so that feedback never carries them; and where they were
    (``step N/student``). The one file the comparison allows the autograder to add. A record inside
    the autograded folder is *not* stripped: it would reach the student's feedback."""
    stripped, found = [], []
    for number, step in enumerate(steps, start=1):
        step = json.loads(json.dumps(step))
        for shot in (step, step.get("released") or {}):
            found += [f"step {number}/{student}" for student in shot.pop(RUN_RECORDS, [])]
        stripped.append(step)
    return stripped, found


def outcome(outputs: list[dict]) -> str:
    """What scoring reads from a code cell's outputs (``nbgrader.utils.determine_grade``): the first
    error (``"error"``), stderr stream (``"stderr"``) or result (``"result: <text/plain>"``, partial
    credit), else ``"ok"``."""
    for out in outputs:
        if "error" in out:
            return "error"
        if out.get("stream") == "stderr":
            return "stderr"
        if "execute_result" in out:
            return f"result: {out['text/plain']}"
    return "ok"


def scoring_view(steps: list[dict]) -> list[dict]:
    """Snapshots with each autograded notebook's code-cell outputs reduced to their ``outcome``
    (sources, nbgrader metadata and everything else kept): notebooks are compared by what scoring
    reads, not byte for byte (stream texts, error messages and tracebacks may differ)."""
    steps = json.loads(json.dumps(steps))
    for step in steps:
        for shot in (step, step.get("released") or {}):
            for entries in (shot.get("autograded") or {}).values():
                for entry in entries.values():
                    for cell in entry.get("cells") if isinstance(entry.get("cells"), list) else ():
                        if "outputs" in cell:
                            cell["outcome"] = outcome(cell.pop("outputs"))
    return steps


# The one documented difference (README, "Parity with nbgrader autograde"): a submission that cannot
# be graded leaves no gradebook row. nbgrader has created its student, submission and notebook rows
# before it fails and leaves them without grades; the autograder records a submission in one
# transaction or not at all, so a crash never leaves half a submission behind.
DECISION = ("a submission that cannot be graded leaves no gradebook row and no autograded folder "
            "(nbgrader leaves a row without grades, and with --notebook an empty folder)")


def ungraded_row(row: Any) -> bool:
    """A gradebook row as nbgrader leaves it when grading fails: notebooks without any grade."""
    notebooks = row.get("notebooks") if isinstance(row, dict) else None
    return isinstance(notebooks, dict) and all(not nb.get("grades") for nb in notebooks.values())


EMPTY_FOLDER = {".": {"type": "dir"}}


def without_decided(expected: dict, actual: dict) -> dict:
    """``expected`` minus what ``DECISION`` accounts for: ungraded rows, and empty autograded
    folders, that the autograder lacks."""
    book, theirs = expected.get("gradebook"), actual.get("gradebook") or {}
    if isinstance(book, dict):
        kept = {s: row for s, row in book.items() if s in theirs or not ungraded_row(row)}
        if kept != book:
            expected = dict(expected, gradebook=kept)
    folders, their_folders = expected.get("autograded"), actual.get("autograded") or {}
    if isinstance(folders, dict):
        kept = {s: f for s, f in folders.items() if s in their_folders or f != EMPTY_FOLDER}
        if kept != folders:
            expected = dict(expected, autograded=kept)
    return expected


def compare_steps(expected: list[dict], actual: list[dict]) -> list[str]:
    """``diff`` of nbgrader's and the autograder's runs of one scenario, step by step
    (``step 1/...``), in their ``scoring_view``, the autograder's run record left out
    (``without_run_record``), ``DECISION`` applied (``without_decided``)."""
    actual, _ = without_run_record(actual)
    expected, actual = scoring_view(expected), scoring_view(actual)
    expected = [without_decided(e, a) for e, a in zip(expected, actual, strict=False)] + \
        expected[len(actual):]
    lines = [] if len(expected) == len(actual) else [
        f"steps: nbgrader={len(expected)} autograder={len(actual)}"]
    for i, (e, a) in enumerate(zip(expected, actual, strict=False), start=1):
        lines += diff(e, a, f"step {i}")
    return lines


# --- golden results ---

def golden_path(scenario: Scenario) -> Path:
    return GOLDEN / f"{scenario.name}.json"


def read_golden(scenario: Scenario) -> dict:
    return json.loads(golden_path(scenario).read_text())


def write_golden(scenario: Scenario, steps: list[dict]) -> Path:
    import nbgrader

    path = golden_path(scenario)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"scenario": scenario.name, "nbgrader": nbgrader.__version__,
              "digest": scenario.digest(), "steps": steps}
    path.write_text(json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return path


def grade_twice(parent: Path, scenarios: Sequence[Scenario],
                graders: Sequence[Callable[[], Grader]] = (NbgraderGrader, AutograderGrader)
                ) -> tuple[dict[str, dict[str, list[dict]]], dict[str, Grader]]:
    """Build twin courses of ``scenarios`` (one course) under ``parent`` and grade one with each
    grader: grader name -> scenario -> snapshots, and the graders (their ``log``)."""
    roots = build_twins(parent, scenarios)
    results, used = {}, {}
    for root, make in zip(roots, graders, strict=True):
        grader = make()
        results[grader.name] = run_course(root, scenarios, grader)
        used[grader.name] = grader
    return results, used
