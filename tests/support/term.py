"""A scripted term through the instructor guide's own commands (``docs/guide/``), for tests/test_term*.py.

The guide marks each command block a term runs with an HTML comment right above it:

    <!-- term: NAME -->              a bash block, run as written from the course root
    <!-- term: NAME (background) --> a bash block started in the background (``autograder serve``)
    <!-- term: NAME (config) -->     a python block appended to the course's nbgrader_config.py
    <!-- term: env -->               the ``export NAME=...`` lines: the term gives each NAME its own value

``Term`` runs those blocks, by name, in a fresh course folder with its own exchange, LMS downloads, fake
Canvas and student homes, as root or as an unprivileged user (``nobody``, reaching this repository's
environment through a private mount namespace). Students' answers are drawn from the reference solutions,
the released notebooks (blank) and the catalogue's wrong implementations whose failed grade cells are the
same under every seed (``catalogue/misconceptions.json``), so each student's grade of record is
known before grading.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import re
import secrets
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
import tomllib
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry

from autograder.authoring import samples

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide"
STUDENT_PAGE = ROOT / "docs" / "students.md"
COURSE_ID = "cs336-resource-accounting"
MARK = re.compile(r"<!-- term: ([\w-]+)(?: \((background|config)\))? -->\n```(bash|python)\n(.*?)```", re.S)
PLAIN_USER = "nobody"


@dataclass(frozen=True)
class Block:
    name: str
    kind: str  # "run", "background", "config" or "env"
    code: str
    page: str


def guide_blocks(pages: list[Path] | None = None) -> dict[str, Block]:
    """Every marked block of the guide's pages and the student page, by name (names are unique)."""
    pages = pages if pages is not None else [*sorted(GUIDE.glob("*.md")), STUDENT_PAGE]
    blocks: dict[str, Block] = {}
    for page in pages:
        for found in MARK.finditer(page.read_text(encoding="utf-8")):
            name, kind, language, code = found.groups()
            kind = "env" if name == "env" else (kind or "run")
            expected = "python" if kind == "config" else "bash"
            assert language == expected, f"{page.name}: the block {name!r} is {language}, expected {expected}"
            assert name not in blocks, f"{page.name}: a second block named {name!r}"
            blocks[name] = Block(name, kind, code, page.name)
    return blocks


def exported_names(block: Block) -> list[str]:
    return re.findall(r"^export (\w+)=", block.code, re.M)


# ---- what a student hands in, and what it is worth ------------------------------------------------------

def _grade_points(assignment: str) -> dict[str, float]:
    nb = nbformat.read(ROOT / "exercises" / assignment / f"{assignment}.ipynb", as_version=4)
    points = {}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            points[meta["grade_id"]] = float(meta["points"])
    return points


def gpu_cells(assignment: str) -> set[str]:
    """Grade ids of the cells that call a GPU check of ``assignment`` (course.toml's gpu_checks)."""
    manifest = tomllib.loads((ROOT / "course.toml").read_text(encoding="utf-8"))
    functions = [c["function"] for e in manifest["exercise"] if e["name"] == assignment
                 for c in e.get("gpu_checks", [])]
    source = (ROOT / "solutions" / assignment / f"{assignment}.py").read_text(encoding="utf-8")
    found = set()
    for cell in re.split(r"^(?=# %%)", source, flags=re.M):
        grade_id = re.search(r'"grade_id": "([^"]+)"', cell.splitlines()[0] if cell else "")
        if grade_id and any(f in cell for f in functions):
            found.add(grade_id.group(1))
    return found


def deterministic_wrong(assignment: str) -> list[tuple[dict, set[str]]]:
    """Catalogue entries whose failed grade cells are the same under every seed, with those cells."""
    table = json.loads((ROOT / "catalogue" / "misconceptions.json").read_text())["assignments"]
    signatures = {row["name"]: row["cells"] for row in table[assignment]}
    wrong, _ = samples.load_catalogue(assignment, course_root=ROOT)
    chosen = []
    for entry in wrong:
        cells = signatures.get(entry["name"])
        if cells and all(c["always"] for c in cells.values()):
            chosen.append((entry, set(cells)))
    return chosen


@dataclass(frozen=True)
class Answer:
    """One notebook a student hands in: the reference, the release left blank, or a wrong entry."""

    kind: str  # "reference", "blank", or the catalogue entry's name
    replace: tuple[tuple[str, str], ...] = ()
    fails: frozenset[str] = frozenset()

    def notebook(self, assignment: str, course: Path) -> bytes:
        if self.kind == "blank":
            return (course / "exercises" / assignment / f"{assignment}.ipynb").read_bytes()
        nb = samples.student_notebook(assignment, dict(self.replace), course_root=course)
        return nbformat.writes(nb).encode()

    def score(self, assignment: str, *, gpu: bool) -> float:
        """What this answer earns; ``gpu``: the GPU checks ran (a GPU, or --allow-cpu)."""
        points = _grade_points(assignment)
        if self.kind == "blank":
            return 0.0
        lost = set(self.fails) | (set() if gpu else gpu_cells(assignment))
        return sum(p for cell, p in points.items() if cell not in lost)


REFERENCE = Answer("reference")
BLANK = Answer("blank")


def wrong(assignment: str, number: int = 0) -> Answer:
    entry, cells = deterministic_wrong(assignment)[number]
    return Answer(entry["name"], tuple(entry["replace"].items()), frozenset(cells))


def copy_repository(source: Path, destination: Path) -> None:
    """The course repository as an instructor clones it: every tracked file, nothing built."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=source, capture_output=True, check=True).stdout
    for name in tracked.decode().split("\0"):
        if name and (source / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, destination / name)


# ---- the term's machinery --------------------------------------------------------------------------------

def _blocked_directories(paths: list[Path]) -> dict[Path, set[str]]:
    """For each path, the first directory on its way that others cannot cross, and the child needed."""
    blocked: dict[Path, set[str]] = {}
    for path in paths:
        parts = Path(path).resolve().parts
        closed = [depth for depth in range(1, len(parts)) if not Path(*parts[:depth]).stat().st_mode & stat.S_IXOTH]
        assert len(closed) <= 1, (f"{path}: more than one folder on the way others cannot cross "
                                  f"({[str(Path(*parts[:d])) for d in closed]}); use a path with at most one")
        for depth in closed:
            blocked.setdefault(Path(*parts[:depth]), set()).add(parts[depth])
    return blocked


def as_user_prefix(user: str, needed: list[Path]) -> list[str]:
    """A command prefix that runs its command as ``user`` (no groups, no capabilities) in a private mount
    namespace where every path of ``needed`` can be reached: a directory ``user`` cannot cross (``/root``,
    mode 700, holding this machine's Python) is covered by a tmpfs holding only the children needed."""
    lines = ["set -e", 'stage=$(mktemp -d /tmp/term-stage.XXXXXX)']
    number = 0
    for folder, children in sorted(_blocked_directories(needed).items()):
        moves = []
        for child in sorted(children):
            number += 1
            source, kind = folder / child, "-d" if (folder / child).is_dir() else "-f"
            lines.append(f"mkdir -p $stage/{number}" if kind == "-d" else f"touch $stage/{number}")
            lines.append(f"mount --bind {shlex.quote(str(source))} $stage/{number}")
            moves.append((number, source, kind))
        lines.append(f"mount -t tmpfs -o mode=0755,size=1m term-view {shlex.quote(str(folder))}")
        for number_, source, kind in moves:
            lines.append(f"mkdir -p {shlex.quote(str(source))}" if kind == "-d"
                         else f"touch {shlex.quote(str(source))}")
            lines.append(f"mount --move $stage/{number_} {shlex.quote(str(source))}")
    lines.append(f'exec setpriv --reuid={user} --regid={pwd.getpwnam(user).pw_gid} --clear-groups '
                 '--inh-caps=-all -- "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--", "bash", "-c", "\n".join(lines), "--"]


@dataclass
class Term:
    """A course folder and everything around it for one scripted term (see the module docstring)."""

    base: Path
    plain_user: bool
    env: dict[str, str] = field(default_factory=dict)
    ran: list[str] = field(default_factory=list)
    background: list[subprocess.Popen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.blocks = guide_blocks()
        self.course = self.base / "course"
        self.exchange = self.base / "exchange"
        self.edition = self.base / "student-edition"
        self.homes = self.base / "homes"
        copy_repository(ROOT, self.course)
        for folder in (self.exchange, self.homes, self.course / "downloads", self.base / "instructor"):
            folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.exchange, 0o777)  # nbgrader's exchange is writable by every student
        bin_dir = str(Path(sys.executable).parent)
        self.env = {
            "PATH": f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": str(self.base / "instructor"), "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "AUTOGRADER_SEED": os.environ.get("AUTOGRADER_SEED", "336"),
            "EXCHANGE": str(self.exchange), "STUDENT_EDITION": str(self.edition),
        }
        if self.plain_user and os.geteuid() == 0:
            shutil.chown(self.base, PLAIN_USER)
            for path in self.base.rglob("*"):
                os.lchown(path, pwd.getpwnam(PLAIN_USER).pw_uid, -1)
            self.env |= {"USER": PLAIN_USER, "LOGNAME": PLAIN_USER}
            self.prefix = as_user_prefix(PLAIN_USER, [Path(sys.executable).resolve(), ROOT, self.base])
        else:
            self.prefix = []

    # -- guide blocks --

    def _command(self, code: str) -> list[str]:
        return [*self.prefix, "bash", "-euo", "pipefail", "-c", code]

    def run(self, name: str, *, check: bool = True, timeout: float = 600, cwd: Path | None = None,
            **env: str) -> str:
        """Run the guide's block ``name`` from the course root (or ``cwd``); its output (stdout and
        stderr). ``check``: it must succeed."""
        block = self.blocks[name]
        assert block.kind == "run", f"{name} is a {block.kind} block"
        self.ran.append(name)
        result = subprocess.run(self._command(block.code), cwd=cwd or self.course, env={**self.env, **env},
                                capture_output=True, text=True, timeout=timeout)
        self.returncode = result.returncode
        output = result.stdout + result.stderr
        if check:
            assert result.returncode == 0, (f"the guide's block {name!r} ({block.page}) failed "
                                            f"({result.returncode}):\n{block.code}\n---\n{output[-5000:]}")
        return output

    def start(self, name: str, log: Path, **env: str) -> subprocess.Popen:
        block = self.blocks[name]
        assert block.kind == "background", f"{name} is a {block.kind} block"
        self.ran.append(name)
        with open(log, "ab") as out:
            process = subprocess.Popen(self._command(block.code), cwd=self.course, env={**self.env, **env},
                                       stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self.background.append(process)
        return process

    def configure(self, name: str) -> None:
        block = self.blocks[name]
        assert block.kind == "config", f"{name} is a {block.kind} block"
        self.ran.append(name)
        with open(self.course / "nbgrader_config.py", "a", encoding="utf-8") as config:
            config.write(f"\n# from the guide ({block.page}, {name})\n{block.code}")

    def stop(self) -> None:
        """Stop what the term started in the background, and everything they started."""
        for process in self.background:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()

    # -- the world around the course --

    def own(self, *paths: Path) -> None:
        """Files the test wrote for the term belong to the term's user."""
        if self.plain_user and os.geteuid() == 0:
            uid = pwd.getpwnam(PLAIN_USER).pw_uid
            for path in paths:
                for item in [path, *path.rglob("*")] if path.is_dir() else [path]:
                    os.lchown(item, uid, -1)

    def write(self, relative: str, text: str) -> Path:
        path = self.course / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        self.own(path)
        return path

    def lms_zip(self, assignment: str, entries: list[tuple[str, Answer, datetime, bool]]) -> Path:
        """Canvas's "Download Submissions" zip: ``<student>[_LATE]_<user id>_<file id>_<name>.ipynb``, each
        member stamped with the time its student uploaded it."""
        path = self.course / "downloads" / f"{assignment}.zip"
        with zipfile.ZipFile(path, "w") as archive:
            for number, (student, answer, when, late) in enumerate(entries):
                name = f"{student}{'_LATE' if late else ''}_{1000 + number}_{5000 + number}_{assignment}.ipynb"
                info = zipfile.ZipInfo(name, date_time=when.timetuple()[:6])
                archive.writestr(info, answer.notebook(assignment, self.course))
        self.own(path)
        return path

    def exchange_submit(self, assignment: str, answers: dict[str, Answer]) -> None:
        """Students submit through nbgrader's exchange: one real ``nbgrader fetch_assignment`` and
        ``submit`` by the term's user, then that inbound folder copied for each student (nbgrader names a
        submission by the OS user, and the class shares one here) with the student's notebook in it."""
        home = self.homes / f"fetcher-{len(list(self.homes.glob('fetcher-*')))}"  # a fresh one each time
        home.mkdir()
        self.own(home)
        fetch = (f"nbgrader fetch_assignment {assignment} --course {COURSE_ID} --Exchange.root=\"$EXCHANGE\" && "
                 f"nbgrader submit {assignment} --course {COURSE_ID} --Exchange.root=\"$EXCHANGE\"")
        result = subprocess.run(self._command(fetch), cwd=home, env={**self.env, "HOME": str(home)},
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stdout + result.stderr
        inbound = self.exchange / COURSE_ID / "inbound"
        real = max(inbound.glob(f"*+{assignment}+*"), key=lambda p: p.stat().st_mtime)
        user, _, stamp, random = real.name.split("+")
        for student, answer in answers.items():
            copy = inbound / f"{student}+{assignment}+{stamp}+{random}{student}"
            shutil.copytree(real, copy)
            (copy / f"{assignment}.ipynb").write_bytes(answer.notebook(assignment, self.course))
            (copy / f"{assignment}.zh-TW.ipynb").unlink(missing_ok=True)
            secret = copy / "submission_secret.txt"  # nbgrader submit draws one per submission
            if secret.exists():
                secret.write_text(secrets.token_hex(len(secret.read_text().strip()) // 2 or 16))
            self.own(copy)
        shutil.rmtree(real)  # the term user's own submission is not a student's

    def now_stamp(self) -> str:
        return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f UTC")

    # -- the grade of record --

    def grades(self) -> dict[tuple[str, str], float]:
        """(assignment, student) -> the grade of record, as ``nbgrader export`` computes it."""
        found = {}
        with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}") as gb:
            for assignment in gb.assignments:
                for submission in assignment.submissions:
                    penalty = submission.late_submission_penalty or 0.0
                    found[(assignment.name, submission.student.id)] = max(0.0, submission.score - penalty)
        return found

    def has_submission(self, assignment: str, student: str) -> bool:
        with Gradebook(f"sqlite:///{self.course / 'gradebook.db'}") as gb:
            try:
                gb.find_submission(assignment, student)
            except MissingEntry:
                return False
            return True


def wait_for_http(url: str, process: subprocess.Popen, log: Path, timeout: float = 180) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the service exited:\n{log.read_text()[-4000:]}"
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2).status_code < 500:
                return
        time.sleep(0.3)
    raise AssertionError(f"the service did not answer in {timeout} s:\n{log.read_text()[-4000:]}")


# ---- the term itself -------------------------------------------------------------------------------------

STUDENTS = [f"s{number:02d}" for number in range(1, 31)]
ON_TIME = {  # due dates (UTC): 03_flops is the feedback service's, so it is due after today
    "01_strides": datetime(2027, 1, 15, 23, 59, tzinfo=UTC), "02_einops": datetime(2027, 1, 22, 23, 59, tzinfo=UTC),
    "04_adagrad": datetime(2027, 2, 5, 23, 59, tzinfo=UTC), "05_get_batch": datetime(2027, 2, 12, 23, 59, tzinfo=UTC),
    "06_mixed_precision": datetime(2027, 2, 19, 23, 59, tzinfo=UTC),
}


def wrong_named(assignment: str, name: str) -> Answer:
    for number, (entry, _) in enumerate(deterministic_wrong(assignment)):
        if entry["name"] == name:
            return wrong(assignment, number)
    raise AssertionError(f"{assignment}: no deterministic catalogue entry {name!r}")


def check_grades(term: Term, expected: dict[tuple[str, str], float], step: str) -> None:
    """The gradebook holds exactly the expected grade of record for every submission."""
    found = term.grades()
    wrong_ones = {key: (found.get(key), value) for key, value in expected.items() if found.get(key) != value}
    extra = sorted(set(found) - set(expected))
    assert not wrong_ones and not extra, (f"after {step}: (assignment, student): (gradebook, expected) "
                                          f"{wrong_ones}; not expected in the gradebook: {extra}")


def canvas_scores(canvas, assignment_ids: dict[str, int], users: dict[str, int]) -> dict[tuple[str, str], float]:
    return {(name, student): canvas.scores[(aid, uid)] for name, aid in assignment_ids.items()
            for student, uid in users.items() if canvas.scores.get((aid, uid)) is not None}


def on_canvas(expected: dict[tuple[str, str], float], assignments) -> dict[tuple[str, str], float]:
    """What Canvas holds once ``assignments`` are posted: the grade of record, 0 without a submission."""
    return {(a, s): expected.get((a, s), 0.0) for a in assignments for s in STUDENTS}


def play(term: Term, canvas, canvas_ids: dict[str, int], canvas_users: dict[str, int]) -> None:
    """One term, week by week, through the guide's blocks; the grade of record checked at each step."""
    expected: dict[tuple[str, str], float] = {}
    term.env |= {"CANVAS_URL": canvas.url, "CANVAS_COURSE": str(canvas.course_id),
                 "CANVAS_API_TOKEN": canvas.token}
    missing = [name for name in exported_names(term.blocks["env"]) if name not in term.env]
    assert not missing, f"the guide's set-up exports {missing}, which the term does not set"
    term.ran.append("env")

    # -- before the term: the machine, the settings, the roster, the dates, the release --
    doctor = term.run("doctor")
    assert re.search(r"^sandbox +works", doctor, re.M) and "NOT CONFINED" not in doctor, doctor
    term.configure("late-penalty")
    term.write("roster.csv", "id,first_name,last_name,email\n" + "".join(
        f"{s},Student,{s.upper()},{s}@example.edu\n" for s in STUDENTS))
    due = {**ON_TIME, "03_flops": datetime.now(UTC).replace(microsecond=0) + timedelta(days=14)}
    term.write("due-dates.csv", "name,duedate\n" + "".join(
        f"{name},{when.strftime('%Y-%m-%d %H:%M:%S')} UTC\n" for name, when in sorted(due.items())))
    listed = term.run("roster")
    assert all(name in listed for name in due), listed
    with Gradebook(f"sqlite:///{term.course / 'gradebook.db'}") as gb:
        assert sorted(s.id for s in gb.students) == STUDENTS
    term.run("release")
    assert (term.edition / "submit.py").is_file(), "the student edition has no client for the service"
    assert "submit.py" in (term.edition / "README.md").read_text(encoding="utf-8")

    # -- week 1: 01_strides through nbgrader's exchange --
    term.run("exchange-release", ASSIGNMENT="01_strides")
    week1 = {**{s: REFERENCE for s in ("s01", "s02", "s03", "s04", "s08")}, "s05": BLANK,
             "s06": wrong_named("01_strides", "flat_index_ignores_offset"), "s07": wrong("01_strides", 0)}
    term.exchange_submit("01_strides", week1)
    collected = term.run("collect-exchange")
    assert "8 collected" in collected, collected
    term.run("grade")
    expected |= {("01_strides", s): a.score("01_strides", gpu=False) for s, a in week1.items()}
    check_grades(term, expected, "week 1's grade")
    term.run("feedback")
    assert all((term.course / "feedback" / s / "01_strides" / "01_strides.html").is_file() for s in week1)
    term.run("feedback-exchange", ASSIGNMENT="01_strides")
    returned = sorted((term.exchange / COURSE_ID / "feedback").glob("*.html"))
    assert len(returned) == len(week1), returned
    lms = term.run("lms")
    posted = canvas_scores(canvas, canvas_ids, canvas_users)
    assert posted == on_canvas(expected, ["01_strides"]), lms[-3000:]  # nothing else is due or handed in

    # -- week 2: 02_einops from the LMS, a late submission, an extension --
    on_time = datetime(2027, 1, 20, 10, 0, tzinfo=UTC)
    week2 = {s: REFERENCE for s in STUDENTS}
    week2 |= {s: BLANK for s in ("s03", "s21", "s22")}
    week2 |= {"s25": wrong("02_einops", 0), "s26": wrong("02_einops", 1)}
    late = {"s07": datetime(2027, 1, 25, 9, 0, tzinfo=UTC), "s29": datetime(2027, 1, 24, 9, 0, tzinfo=UTC)}
    term.configure("extensions")  # s07 until 29 January
    term.lms_zip("02_einops", [(s, a, late.get(s, on_time), s in late) for s, a in week2.items()])
    term.run("collect-lms", ASSIGNMENT="02_einops")
    term.run("grade")
    expected |= {("02_einops", s): (0.0 if s == "s29" else a.score("02_einops", gpu=False)) for s, a in week2.items()}
    check_grades(term, expected, "week 2's grade (s29 late: 0; s07 late within the extension)")

    # -- week 3: the feedback service, resubmissions through every channel --
    log = term.base / "serve.log"
    serve = term.start("serve", log)
    url = "http://127.0.0.1:8750/"  # the service's default address, which the guide uses
    wait_for_http(url + "login", serve, log)
    term.run("tokens")
    tokens = dict(line.split("\t") for line in (term.course / "tokens.tsv").read_text().split("\n") if line)
    assert sorted(tokens) == STUDENTS
    student = term.homes / "student"
    student.mkdir(exist_ok=True)
    shutil.copy(term.edition / "submit.py", student / "submit.py")

    def submit(who: str, assignment: str, answer: Answer, *, check: bool = True) -> str:
        path = student / f"{assignment}.ipynb"
        path.write_bytes(answer.notebook(assignment, term.course))
        term.own(student)
        return term.run("student-submit", cwd=student, check=check, NOTEBOOK=path.name,
                        AUTOGRADER_URL=url, AUTOGRADER_TOKEN=tokens[who])

    week3 = {"s01": REFERENCE, "s02": REFERENCE, "s03": BLANK, "s04": wrong("03_flops", 0)}
    first = submit("s02", "03_flops", wrong("03_flops", 0))  # then a resubmission, right
    assert f"score: {wrong('03_flops', 0).score('03_flops', gpu=True):g}/" in first, first
    for who, answer in week3.items():
        shown = submit(who, "03_flops", answer)
        assert f"score: {answer.score('03_flops', gpu=True):g}/" in shown, shown
    submit("s30", "01_strides", REFERENCE)  # s30 had not handed in 01: the service's copy counts
    refused = submit("s05", "04_adagrad", REFERENCE, check=False)
    assert term.returncode != 0 and "GPU" in refused, refused
    term.exchange_submit("01_strides", {"s05": REFERENCE})  # s05 resubmits 01 on the hub
    replaced = term.run("collect-exchange")
    assert "s05" in replaced and "replaced" in replaced, replaced
    week2_again = dict(week2) | {"s03": REFERENCE}  # the LMS's new download: s03 handed in again
    later = datetime(2027, 1, 21, 12, 0, tzinfo=UTC)
    term.lms_zip("02_einops", [(s, a, later if s == "s03" else late.get(s, on_time), s in late)
                               for s, a in week2_again.items()])
    replaced = term.run("collect-lms", ASSIGNMENT="02_einops")
    assert "s03" in replaced and "replaced" in replaced, replaced
    graded = term.run("grade")
    expected |= {("03_flops", s): a.score("03_flops", gpu=True) for s, a in week3.items()}
    expected |= {("01_strides", "s30"): REFERENCE.score("01_strides", gpu=True),
                 ("01_strides", "s05"): REFERENCE.score("01_strides", gpu=True),
                 ("02_einops", "s03"): REFERENCE.score("02_einops", gpu=True)}
    check_grades(term, expected, "week 3's grade (resubmissions by the exchange, the LMS and the service)")
    lms = term.run("lms")
    posted = canvas_scores(canvas, canvas_ids, canvas_users)
    assert posted == on_canvas(expected, ["01_strides", "02_einops", "03_flops"]), lms[-3000:]

    # -- week 4: the GPU exercises on a machine without a GPU --
    weeks4 = {"04_adagrad": {**{s: REFERENCE for s in STUDENTS[:7]}, "s08": BLANK, "s09": wrong("04_adagrad", 0)},
              "05_get_batch": {**{s: REFERENCE for s in STUDENTS[:4]}, "s05": wrong("05_get_batch", 0)},
              "06_mixed_precision": {**{s: REFERENCE for s in STUDENTS[:4]}, "s05": BLANK}}
    for assignment, answers in weeks4.items():
        when = ON_TIME[assignment].replace(hour=9) - timedelta(days=1)
        term.lms_zip(assignment, [(s, a, when, False) for s, a in answers.items()])
        term.run("collect-lms", ASSIGNMENT=assignment)
    graded = term.run("grade")
    assert "not run: no GPU" in graded, graded
    for assignment, answers in weeks4.items():
        expected |= {(assignment, s): a.score(assignment, gpu=False) for s, a in answers.items()}
    check_grades(term, expected, "week 4's grade without a GPU")
    term.run("feedback")
    page = (term.course / "feedback" / "s01" / "04_adagrad" / "04_adagrad.html").read_text(encoding="utf-8")
    assert "--allow-cpu" not in page and "GPU" in page
    term.run("report")
    report = (term.course / "reports" / "report.html").read_text(encoding="utf-8")
    assert "not run" in report, "the report does not say that GPU checks were not run"
    refused = term.run("lms", check=False)  # checks not run: nothing of this week may reach Canvas
    assert term.returncode != 0 and "04_adagrad" in refused and "not run" in refused, refused[-3000:]
    assert canvas_scores(canvas, canvas_ids, canvas_users) == posted, "a refused lms run wrote to Canvas"
    term.run("grade-allow-cpu")
    for assignment, answers in weeks4.items():
        expected |= {(assignment, s): a.score(assignment, gpu=True) for s, a in answers.items()}
    check_grades(term, expected, "the GPU exercises graded with --allow-cpu")
    term.run("lms")
    assert canvas_scores(canvas, canvas_ids, canvas_users) == on_canvas(expected, canvas_ids)

    # -- week 5: a grade cell of 01 was too strict (it asked for the storage offset); fix, preview, regrade --
    source = term.course / "solutions" / "01_strides" / "01_strides.py"
    text = source.read_text(encoding="utf-8")
    fixed = text.replace('assert flat_index((0, 0), (3, 1), offset=7) == 7, "the offset is where element (0, 0) lives"\n', "")
    fixed = fixed.replace("_hidden.check_flat_index(flat_index)\n", "")
    assert fixed != text
    term.write("solutions/01_strides/01_strides.py", fixed)
    before = term.grades()
    preview = term.run("regrade-preview", ASSIGNMENT="01_strides")
    assert term.grades() == before, "the preview changed the gradebook"
    would_change = {found[0]: (float(found[1]), float(found[2]))
                    for found in re.findall(r"^\s+(s\d\d) 01_strides: ([\d.]+) -> ([\d.]+) of", preview, re.M)}
    fixed_score = REFERENCE.score("01_strides", gpu=True)
    assert would_change == {"s06": (expected[("01_strides", "s06")], fixed_score)}, preview[-3000:]
    term.run("regrade", ASSIGNMENT="01_strides")
    expected[("01_strides", "s06")] = fixed_score
    check_grades(term, expected, "the regrade after the fix")
    assert canvas_scores(canvas, canvas_ids, canvas_users) == on_canvas(expected, canvas_ids)

    # -- end of term --
    term.run("end-of-term")
    exported = (term.course / "final-grades.csv").read_text(encoding="utf-8")
    assert exported.count("\n") >= len(expected)
    assert set(term.ran) == set(term.blocks), f"guide blocks the term never ran: {set(term.blocks) - set(term.ran)}"

