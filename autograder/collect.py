"""Collect submissions into nbgrader's ``submitted/<student>/<assignment>/`` from a directory or a zip.

Two layouts are recognised:

- **nbgrader layout** — ``<student>/<assignment>/<notebook>.ipynb`` (what ``nbgrader collect`` leaves in
  ``submitted/``, other files such as ``timestamp.txt`` included), or the exchange's inbound folders
  ``<student>+<assignment>+<timestamp>[+<random>]/``.
- **LMS download** — notebooks side by side (any depth), one per student; the student id comes from the
  file name through ``pattern``, a regular expression with a ``student`` group (and optionally an
  ``assignment`` group; otherwise ``assignment`` must be given).

Every notebook is checked before it is copied: it must be valid nbformat JSON and carry at least one
grade id of the assignment's notebook in the gradebook. A file that fails is refused with a message
naming it and why; the rest are collected. An existing submission is replaced only by a newer, different
one (below), or by any with ``force``.

What is offered is untrusted, and each offer (one student's folder or file) succeeds or fails alone:

- **Files are never followed.** Only what ``lstat`` says is a regular file is copied, opened with
  ``O_NOFOLLOW`` and checked again on the open descriptor; an offer holding a symbolic link, a device,
  a FIFO or a socket is refused with a message naming that path.
- **Zip archives are bounded** before anything is unpacked: at most ``MAX_MEMBERS`` members and
  ``MAX_TOTAL_BYTES`` uncompressed in all (else the archive is refused); a member larger than
  ``MAX_MEMBER_BYTES``, one above 1 MiB that expands more than ``MAX_RATIO`` times, a symbolic-link
  member, or one with an absolute path or ``..`` is skipped with a reason. The bytes actually
  decompressed are counted, so a member whose header lies about its size stops at the limit.
- **An exchange folder is its owner's.** nbgrader's exchange names inbound folders
  ``<student>+<assignment>+<timestamp>[+<random>]``, and the folder is created by the student's own
  process, so it belongs to the student's uid. An inbound folder whose owner's user name is not the
  student id in its name is refused (nbgrader's ``ExchangeCollect.check_owner`` only warns) — unless
  it belongs to whoever runs ``collect`` (the instructor's own copy of the exchange), or
  ``check_owner=False``. The same owner check applies to a ``<student>/<assignment>/`` folder read from
  a folder others can write. Of several offers of one student, the newest by timestamp is taken (as
  ``nbgrader collect`` does); the older ones are listed as ``superseded``.
- **The layout is the source's.** A folder holding exchange inbound folders is an exchange inbound:
  only nbgrader's inbound names are read from it (anyone may create a ``<victim>/<assignment>/``
  folder there — the inbound is ``0733`` — so such a folder is ignored with a note, never taken or
  counted against the victim's real offer). Only a folder without inbound names is read as
  ``<student>/<assignment>/``.
- **An extra notebook is left out, not a reason to refuse.** A notebook the assignment does not have,
  next to one it has (JupyterLab's ``01_strides-Copy1.ipynb``), is listed as ``ignored``; the offer is
  taken.

**Every notebook taken gets a ``timestamp.txt``** (nbgrader's format, ``%Y-%m-%d %H:%M:%S.%f UTC``), written
by ``collect`` whatever the offer carried (a ``timestamp.txt`` inside an offer is the student's to write:
it is never copied). It is the time nbgrader's late penalty and the gradebook's submission time read:

- an exchange inbound folder: the timestamp in its name (``<student>+<assignment>+<timestamp>``, what
  ``nbgrader submit`` wrote and ``nbgrader collect`` reads);
- a ``<student>/<assignment>/`` folder (an nbgrader ``submitted/`` copy): its ``timestamp.txt`` when it
  parses as a date, else the newest modification time of its notebooks;
- an LMS zip: the member's time (``ZipInfo.date_time``). A zip stores no time zone; the time is read as
  **UTC** by default, or as this machine's local time with ``zip_time="local"`` (``--zip-time local``:
  a zip made by hand with ``zip`` records local time). Which one an LMS writes is its own choice:
  compare one student's ``timestamp.txt`` with the LMS's submission time once;
- anything else (an LMS download unpacked into a folder): the file's modification time.

**The newest submission counts.** An offer whose notebooks differ from the submission already collected
replaces it when its time is later than that one's ``timestamp.txt`` (``force``: whatever the times);
an identical, older or undated one is kept out, with the reason. Each replacement is listed in
``CollectResult.replaced``: the next ``autograder grade`` regrades it (``grading/prepare.plan`` compares
the submitted notebooks' digest with the graded one's).

A translated edition of a notebook (``01_strides.zh-TW.ipynb``) is stored as the notebook it is graded
as (``01_strides.ipynb``, ``autograder.course.source.graded_notebook_name``): its grade cells are the English
ones, so grade, feedback and the gradebook see one notebook whatever language the student read. Of
several editions in one offer the one worked on is taken (the others are unchanged releases).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import stat
import tempfile
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import nbformat
from nbgrader.utils import parse_utc

from autograder.course.nbgrader import Course, load_course
from autograder.course.source import graded_notebook_name
from autograder.errors import CollectError

# Canvas/Moodle-style names start with the student's login: "jdoe_12345_67890_01_strides.ipynb"
DEFAULT_PATTERN = r"^(?P<student>[A-Za-z0-9][A-Za-z0-9.\-]*)[_\-]"
STUDENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
INBOUND = re.compile(r"^(?P<student>[^+]+)\+(?P<assignment>[^+]+)\+(?P<timestamp>[^+]+)(\+.*)?$")

# Limits on what an offered zip may hold (uncompressed bytes as actually decompressed).
MAX_MEMBER_BYTES = 64 * 2**20  # one file: a notebook with outputs is rarely above a few MiB
MAX_TOTAL_BYTES = 256 * 2**20  # the whole archive
MAX_RATIO = 100  # uncompressed / compressed, for members above RATIO_FLOOR_BYTES
RATIO_FLOOR_BYTES = 2**20
MAX_MEMBERS = 10_000
_CHUNK = 2**20


@dataclass
class CollectResult:
    """What ``collect`` did: submissions written, offers refused (with why), ones left alone."""

    collected: list[tuple[str, str]] = field(default_factory=list)  # (student, assignment)
    refused: list[str] = field(default_factory=list)  # messages naming the file and why
    existing: list[tuple[str, str]] = field(default_factory=list)  # kept: already collected
    superseded: list[str] = field(default_factory=list)  # older offers of a student: not taken
    ignored: list[str] = field(default_factory=list)  # files of a taken offer left out, and why
    # (student, assignment, graded): taken over an earlier, different submission (``force``);
    # graded: the earlier one was graded (the next ``autograder grade`` regrades it)
    replaced: list[tuple[str, str, bool]] = field(default_factory=list)
    # of ``existing``: the offered notebook differs from the one collected, and why it was not taken
    # (it is not newer; ``force`` takes it anyway)
    differing: list[tuple[str, str, str]] = field(default_factory=list)
    # unchanged language editions left out of offers that hold several (a hub fetch hands out all)
    editions_left_out: int = 0
    # exchange offers whose claimed time (the folder's name) is earlier than the kernel's record of
    # their files: the claim is not believed, the later time is used; one message each
    flagged: list[str] = field(default_factory=list)

    def replaced_lines(self) -> list[str]:
        """One line per replaced student (``dave: replaced an earlier submission of 01_strides ...``)."""
        return [f"{student}: replaced an earlier submission of {assignment} ("
                + ("graded: the next `autograder grade` regrades it" if graded else "not graded yet")
                + ")" for student, assignment, graded in self.replaced]


@dataclass(frozen=True)
class _Offer:
    """One student's submission as found in the source: files to copy into submitted/."""

    student: str
    assignment: str
    files: dict[str, Path]  # name in submitted/<student>/<assignment>/ -> source file
    timestamp: str | None = None  # the exchange's (an inbound folder's name)
    where: Path | None = None  # the offered folder (None: a single file)
    when: datetime | None = None  # a zip member's time (LMS zip)
    problem: str | None = None  # why the offer cannot be taken, found while reading it


def collect(*, source: Path, assignment: str | None = None, course_root: Path = Path("."),
            db_url: str | None = None, pattern: str = DEFAULT_PATTERN,
            force: bool = False, check_owner: bool = True, zip_time: str = "utc") -> CollectResult:
    """Import the submissions in ``source`` (a directory or a .zip) into the course's ``submitted/``.

    Each offer is taken or refused on its own (``CollectResult.refused`` says why); a CollectError is
    raised only for what stops the whole run (no such source, a bad pattern, an archive over its
    limits). ``check_owner``: refuse exchange folders owned by another user (module docstring).
    ``zip_time``: how a zip member's time is read, ``"utc"`` (default) or ``"local"``."""
    if zip_time not in ("utc", "local"):
        raise CollectError(f"--zip-time must be utc or local, got {zip_time!r}")
    course = load_course(course_root, db_url=db_url)
    source = Path(source)
    if not source.exists():
        raise CollectError(f"{source}: no such file or directory")
    try:
        regex = re.compile(pattern)
    except re.error as error:
        raise CollectError(f"--pattern {pattern!r} is not a regular expression: {error}") from None
    if "student" not in regex.groupindex:
        raise CollectError(f"--pattern {pattern!r} needs a (?P<student>...) group")
    if assignment is not None:
        course.require_assignment(assignment)
    result = CollectResult()
    with tempfile.TemporaryDirectory(prefix="autograder-collect-") as tmp:
        times: dict[Path, datetime] = {}
        root = _unpack(source, Path(tmp), result, times, zip_time) if source.is_file() else source
        def shown(path: Path) -> str:
            return _shown(path, root, source)

        offers = _find_offers(root, course, assignment=assignment, regex=regex, result=result,
                              shown=shown, times=times)
        offers = _owned(offers, check_owner=check_owner and not source.is_file(), result=result)
        offers = _newest(offers, result)
        expected = {name: _grade_ids(course, name) for name in {o.assignment for o in offers}}
        for offer in offers:
            try:
                _take(course, offer, expected[offer.assignment], force=force, result=result,
                      shown=shown)
            except Exception as error:  # noqa: BLE001 - one offer's failure is that offer's alone
                result.refused.append(f"{offer.student}/{offer.assignment}: could not be collected "
                                      f"({type(error).__name__}: {str(error)[:200]})")
    return result


def _unpack(archive: Path, into: Path, result: CollectResult, times: dict[Path, datetime],
            zip_time: str = "utc") -> Path:
    """Unpack the regular-file members of ``archive`` within the limits of the module docstring;
    members that break a per-member rule are skipped with a reason in ``result.refused``. ``times``
    gets each unpacked file's member time (``zip_time``: read as UTC or as local time)."""
    if not zipfile.is_zipfile(archive):
        raise CollectError(f"{archive}: not a directory or a zip archive")
    with zipfile.ZipFile(archive) as zf:
        members = zf.infolist()
        if len(members) > MAX_MEMBERS:
            raise CollectError(f"{archive}: {len(members)} members, more than the {MAX_MEMBERS} "
                               "an offered archive may hold")
        declared = sum(m.file_size for m in members)
        if declared > MAX_TOTAL_BYTES:
            raise CollectError(f"{archive}: {declared} bytes uncompressed, more than the "
                               f"{MAX_TOTAL_BYTES} an offered archive may expand to")
        total = 0
        for member in members:
            problem = _member_problem(member)
            if problem is None:
                try:
                    total += _extract(zf, member, into, budget=MAX_TOTAL_BYTES - total)
                    if not member.is_dir():
                        times[into / member.filename] = _member_time(member, zip_time)
                except _TooLarge as error:
                    problem = str(error)
                except (zipfile.BadZipFile, OSError, ValueError, EOFError) as error:
                    problem = f"cannot be unpacked ({type(error).__name__}: {str(error)[:120]})"
            if problem:
                result.refused.append(f"{archive.name}:{member.filename}: {problem}")
    return into


def _member_time(member: zipfile.ZipInfo, zip_time: str) -> datetime:
    """A zip member's time, aware: its DOS time (no zone recorded) read as UTC or as local time."""
    try:
        naive = datetime(*member.date_time)
    except ValueError:  # a zero or impossible DOS date: 1980-01-01, the format's own epoch
        naive = datetime(1980, 1, 1)
    if zip_time == "local":
        return naive.astimezone(UTC)  # a naive datetime is read as local time
    return naive.replace(tzinfo=UTC)


class _TooLarge(Exception):
    pass


def _member_problem(member: zipfile.ZipInfo) -> str | None:
    """Why a zip member is not unpacked (None: unpack it; directories need no unpacking)."""
    name = member.filename
    parts = name.replace("\\", "/").split("/")
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in parts:
        return "an absolute path or '..': would unpack outside the archive"
    mode = stat.S_IFMT(member.external_attr >> 16)  # Unix file type (0: none recorded, a file)
    if member.is_dir():
        return None if not mode or stat.S_ISDIR(mode) else "a directory entry of another file type"
    if mode and not stat.S_ISREG(mode):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        return f"{kind} (only regular files are collected)"
    if member.file_size > MAX_MEMBER_BYTES:
        return f"{member.file_size} bytes uncompressed, more than the limit of {MAX_MEMBER_BYTES}"
    if member.file_size > RATIO_FLOOR_BYTES and member.file_size > MAX_RATIO * max(member.compress_size, 1):
        return (f"expands {member.file_size // max(member.compress_size, 1)} times, more than the "
                f"limit of {MAX_RATIO} (a zip bomb?)")
    return None


def _extract(zf: zipfile.ZipFile, member: zipfile.ZipInfo, into: Path, *, budget: int) -> int:
    """Write one regular-file member under ``into``, counting the bytes actually decompressed."""
    if member.is_dir():
        return 0
    target = into / member.filename
    target.parent.mkdir(parents=True, exist_ok=True)
    limit = min(MAX_MEMBER_BYTES, budget)
    written = 0
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out, zf.open(member) as data:
        while chunk := data.read(_CHUNK):
            written += len(chunk)
            if written > limit:
                out.close()
                target.unlink()
                raise _TooLarge(f"expands past {limit} bytes (the per-member or archive limit)")
            out.write(chunk)
    return written


def _shown(path: Path, root: Path, source: Path) -> str:
    """How to name a file in messages: inside the zip, or the path on disk."""
    if source.is_file():
        return f"{source.name}:{path.relative_to(root)}"
    return str(path)


def _find_offers(root: Path, course: Course, *, assignment: str | None, regex: re.Pattern,
                 result: CollectResult, shown, times: dict[Path, datetime]) -> list[_Offer]:
    known = set(course.gradebook_assignments())
    offers: list[_Offer] = []
    top = sorted(root.iterdir())
    second = [q for p in top if _is_dir(p) for q in sorted(p.iterdir())]
    inbound = [p for p in top if INBOUND.match(p.name) and _is_dir(p)]
    # the layout is the source's: an exchange inbound yields only nbgrader's inbound names (a
    # <student>/<assignment>/ folder inside it is anyone's to make: the inbound is world-writable)
    nested = [] if inbound else [p for p in second if p.name in known and _is_dir(p)]
    if inbound:
        for folder in (p for p in top if _is_dir(p) and not INBOUND.match(p.name)):
            result.refused.append(f"{shown(folder)}: not an exchange inbound folder "
                                  "(<student>+<assignment>+<timestamp>) in an exchange inbound; "
                                  "ignored")
    if nested or inbound:  # nbgrader layouts: a link where a folder belongs is refused by name
        for link in (p for p in [*top, *second] if p.is_symlink()):
            result.refused.append(f"{shown(link)}: a symbolic link (only regular files and "
                                  "folders are collected, links are never followed)")
        for folder in nested:
            files, problem = _files_in(folder, shown)
            offers.append(_Offer(folder.parent.name, folder.name, files, where=folder,
                                 problem=problem))
        for folder in inbound:
            match = INBOUND.match(folder.name)
            assert match is not None  # inbound holds only the names INBOUND matches
            files, problem = _files_in(folder, shown)
            offers.append(_Offer(match["student"], match["assignment"], files,
                                 timestamp=match["timestamp"], where=folder, problem=problem))
        if assignment is not None:
            offers = [o for o in offers if o.assignment == assignment]
        for offer in offers:
            if offer.assignment not in known:
                result.refused.append(f"{offer.student}/{offer.assignment}: unknown assignment")
        return [o for o in offers if o.assignment in known]
    for path, problem in _walk(root, shown):
        if _junk(path.relative_to(root)):
            continue
        if problem:
            result.refused.append(problem)
            continue
        if path.suffix != ".ipynb":
            result.refused.append(f"{shown(path)}: not a notebook (expected a .ipynb file)")
            continue
        match = regex.search(path.name)
        if match is None:
            result.refused.append(f"{shown(path)}: the file name does not match the "
                                  f"student-id pattern {regex.pattern!r}")
            continue
        name = match.groupdict().get("assignment") or assignment
        if name is None:
            raise CollectError("an LMS download needs --assignment (or an (?P<assignment>...) "
                               "group in --pattern)")
        notebooks = course_notebooks(course, name)
        if len(notebooks) != 1:
            raise CollectError(f"{name} has {len(notebooks)} notebooks; an LMS download carries "
                               "one notebook per student")
        offers.append(_Offer(match["student"], name, {f"{notebooks[0]}.ipynb": path},
                             when=times.get(path)))
    return offers


def _junk(path: Path) -> bool:
    return any(part.startswith((".", "__MACOSX")) for part in path.parts) or path.name == "Thumbs.db"


def _is_dir(path: Path) -> bool:
    """A real directory (``lstat``: a link to one is not)."""
    try:
        return stat.S_ISDIR(path.lstat().st_mode)
    except OSError:
        return False


def _walk(top: Path, shown) -> list[tuple[Path, str | None]]:
    """Every entry below ``top`` that is not a directory, in order, with why it cannot be collected
    (None for a regular file). Links are reported, never followed."""
    found: list[tuple[Path, str | None]] = []
    for folder, dirs, files in os.walk(top, followlinks=False):
        dirs.sort()
        for name in sorted([*files, *(d for d in dirs if os.path.islink(os.path.join(folder, d)))]):
            path = Path(folder) / name
            mode = path.lstat().st_mode
            if stat.S_ISREG(mode):
                found.append((path, None))
            else:
                kind = "a symbolic link" if stat.S_ISLNK(mode) else \
                    "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or \
                    stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a regular file"
                found.append((path, f"{shown(path)}: {kind} (only regular files are collected, "
                                    "links are never followed)"))
    return found


def _files_in(folder: Path, shown) -> tuple[dict[str, Path], str | None]:
    """The regular files of an offered folder, and the first entry that refuses the whole offer."""
    files: dict[str, Path] = {}
    for path, problem in _walk(folder, shown):
        if ".ipynb_checkpoints" in path.relative_to(folder).parts:
            continue
        if problem:
            return files, problem
        files[str(path.relative_to(folder))] = path
    return files, None


def _owned(offers: list[_Offer], *, check_owner: bool, result: CollectResult) -> list[_Offer]:
    """The offers whose exchange folder belongs to the student it names (module docstring)."""
    if not check_owner:
        return offers
    kept = []
    for offer in offers:
        if offer.where is None or (offer.timestamp is None and not _others_can_write(offer.where)):
            kept.append(offer)  # a single file, or a <student>/<assignment>/ dump only its owner writes
            continue
        uid = offer.where.lstat().st_uid
        if uid == os.geteuid():  # the collector's own copy of the exchange
            kept.append(offer)
            continue
        try:
            owner = pwd.getpwuid(uid).pw_name
        except KeyError:
            owner = None
        if owner == offer.student:
            kept.append(offer)
        else:
            by = repr(owner) if owner else f"uid {uid} (no user name)"
            result.refused.append(f"{offer.where}: claims to be {offer.student!r}'s submission but "
                                  f"is owned by {by}; refused (check_owner)")
    return kept


def _others_can_write(folder: Path) -> bool:
    """Whether another user could have made ``folder`` (``<root>/<student>/<assignment>``): its
    parents up to the source root are writable by group or others (an inbound is 0733)."""
    for parent in (folder.parent, folder.parent.parent):
        try:
            if parent.lstat().st_mode & 0o022:
                return True
        except OSError:
            return True
    return False


def _newest(offers: list[_Offer], result: CollectResult) -> list[_Offer]:
    """One offer per (student, assignment): the newest by exchange timestamp or zip member time
    (others superseded)."""
    groups: dict[tuple[str, str], list[tuple[datetime | None, _Offer]]] = {}
    for offer in offers:
        when = _naive_utc(offer.when) if offer.when is not None else None
        if offer.timestamp is not None:
            try:
                when, distrusted = _exchange_time(offer)
            except Exception:  # noqa: BLE001 - an unreadable timestamp refuses that offer only
                result.refused.append(f"{offer.where}: timestamp {offer.timestamp!r} is not a date")
                continue
            if distrusted:
                result.flagged.append(distrusted)
        groups.setdefault((offer.student, offer.assignment), []).append((when, offer))
    kept = []
    for (student, assignment), group in groups.items():
        if len(group) > 1 and any(when is None for when, _ in group):
            result.refused.append(f"{student}/{assignment}: offered {len(group)} times, not all "
                                  "with a time (exchange timestamp or zip member time); none taken")
            continue
        group.sort(key=lambda item: item[0] or datetime.min)
        kept.append(group[-1][1])
        result.superseded += [f"{o.where}: older than {group[-1][1].where}" for _, o in group[:-1]]
    return kept


def _read_regular(path: Path, shown) -> bytes:
    """The bytes of ``path`` if it is a regular file (no link followed, checked on the descriptor)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise CollectError(f"{shown(path)}: not a regular file")
        if info.st_size > MAX_MEMBER_BYTES:
            raise CollectError(f"{shown(path)}: {info.st_size} bytes, more than the limit of "
                               f"{MAX_MEMBER_BYTES}")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(MAX_MEMBER_BYTES + 1)
    finally:
        os.close(fd)


def course_notebooks(course: Course, assignment: str) -> list[str]:
    with course.gradebook() as gb:
        return sorted(nb.name for nb in gb.find_assignment(assignment).notebooks)


def _grade_ids(course: Course, assignment: str) -> dict[str, set[str]]:
    """notebook name -> grade ids of its cells (what a notebook of this assignment carries)."""
    with course.gradebook() as gb:
        return {nb.name: {cell.name for cell in nb.source_cells}
                for nb in gb.find_assignment(assignment).notebooks}


def _take(course: Course, offer: _Offer, expected: dict[str, set[str]], *, force: bool,
          result: CollectResult, shown) -> None:
    if offer.problem:
        result.refused.append(offer.problem)
        return
    if not offer.files:
        result.refused.append(f"{offer.where}: no files")
        return
    if not STUDENT_ID.match(offer.student):
        result.refused.append(f"{shown(next(iter(offer.files.values())))}: student id "
                              f"{offer.student!r} may hold only letters, digits, '_', '.', '-'")
        return
    contents: dict[str, bytes] = {}
    names = _graded_names(offer.files, shown, result)
    if isinstance(names, str):
        result.refused.append(f"{offer.where or offer.student}: {names}")
        return
    for original, name in names.items():
        path = offer.files[original]
        try:
            contents[name] = _read_regular(path, shown)
        except (CollectError, OSError) as error:
            result.refused.append(f"{shown(path)}: cannot be read safely ({error})")
            return
        if not name.endswith(".ipynb"):
            continue
        if _extra_notebook(name, names.values(), expected):  # JupyterLab's "-Copy1" and the like
            result.ignored.append(f"{shown(path)}: not a notebook of {offer.assignment} "
                                  f"(expected {', '.join(sorted(expected))}); left out")
            del contents[name]
            continue
        problem = notebook_problem(contents[name], Path(name).stem, offer.assignment, expected)
        if problem:
            result.refused.append(f"{shown(path)}: {problem}")
            return
    when = _submission_time(offer, contents.pop(TIMESTAMP_FILE, None))
    dest = course.step_dir("submitted", offer.student, offer.assignment)
    _recover(dest)
    if dest.exists() and not force:
        why = _why_kept(dest, contents, when)
        if why is not None:
            result.existing.append((offer.student, offer.assignment))
            if why:
                result.differing.append((offer.student, offer.assignment, why))
            return
        # newer than the one collected, and different: it replaces it (the newest counts)
    replaced = dest.exists() and _notebooks_differ(dest, contents)
    graded = course.step_dir("autograded", offer.student, offer.assignment).is_dir()
    new = dest.with_name(f"{NEW_PREFIX}{dest.name}-{os.getpid()}")
    if new.exists():
        shutil.rmtree(new)
    new.mkdir(parents=True)
    for name, data in contents.items():
        (new / name).parent.mkdir(parents=True, exist_ok=True)
        (new / name).write_bytes(data)
    (new / TIMESTAMP_FILE).write_text(format_timestamp(when))
    _swap_in(new, dest)
    result.collected.append((offer.student, offer.assignment))
    if replaced:
        result.replaced.append((offer.student, offer.assignment, graded))


TIMESTAMP_FILE = "timestamp.txt"
# a submission is written beside its place, then renamed into it: a killed collect never leaves half
# a submission, and the one it replaces is kept aside until the new one is in place (``_recover``)
NEW_PREFIX, OLD_PREFIX = ".collecting-", ".replaced-"


def _swap_in(new: Path, dest: Path) -> None:
    """``new`` becomes ``dest``; an earlier ``dest`` is set aside first and removed after."""
    if not dest.exists():
        os.replace(new, dest)
        return
    old = dest.with_name(f"{OLD_PREFIX}{dest.name}-{os.getpid()}")
    os.replace(dest, old)
    os.replace(new, dest)
    shutil.rmtree(old, ignore_errors=True)


def _recover(dest: Path) -> None:
    """After a killed collect: put back a submission set aside whose replacement never arrived, and
    drop half-written ones (dot-folders, which neither nbgrader nor ``grade`` ever reads)."""
    if not dest.parent.is_dir():
        return
    for old in sorted(dest.parent.glob(f"{OLD_PREFIX}{dest.name}-*")):
        if not dest.exists():
            os.replace(old, dest)
        else:
            shutil.rmtree(old, ignore_errors=True)
    for new in dest.parent.glob(f"{NEW_PREFIX}{dest.name}-*"):
        shutil.rmtree(new, ignore_errors=True)


def format_timestamp(when: datetime) -> str:
    """nbgrader's timestamp format (``Exchange.timestamp_format``), in UTC."""
    return _naive_utc(when).strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"


def _naive_utc(when: datetime) -> datetime:
    """``when`` in UTC without a zone (a naive one is taken as UTC already, as nbgrader's are)."""
    return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo else when


CLAIM_SLACK_S = 60.0  # nbgrader submit names the folder, then copies the files: seconds apart


def _exchange_time(offer: _Offer) -> tuple[datetime, str | None]:
    """An exchange offer's time: the timestamp in its folder's name, which the student's own process
    wrote, bounded below by the last change the kernel recorded on the folder and its files (their
    ctime, which no process can set back). A claim more than ``CLAIM_SLACK_S`` earlier is not
    believed: the bound is used, and the second value says so. The collector's own copy of the
    exchange (a folder of its uid, copied later) keeps its claimed times."""
    assert offer.timestamp is not None and offer.where is not None
    claimed = parse_utc(offer.timestamp)
    info = offer.where.lstat()
    if info.st_uid == os.geteuid():
        return claimed, None
    changed = info.st_ctime
    for path in offer.files.values():
        with contextlib.suppress(OSError):  # gone since it was listed: read later, refused there
            changed = max(changed, path.lstat().st_ctime)
    bound = datetime.fromtimestamp(changed, tz=UTC).replace(tzinfo=None)
    if (bound - claimed).total_seconds() <= CLAIM_SLACK_S:
        return claimed, None
    return bound, (f"{offer.where}: claims {format_timestamp(claimed)}, but its files were last "
                   f"changed at {format_timestamp(bound)}; the claim is not believed, the later "
                   "time is used")


def _submission_time(offer: _Offer, offered_stamp: bytes | None) -> datetime:
    """The time ``collect`` writes into ``timestamp.txt`` (module docstring): the exchange's name,
    the zip member's time, a ``submitted/`` copy's own timestamp.txt (an instructor's folder, not an
    exchange inbound), else the newest modification time of the offered files."""
    if offer.timestamp is not None:  # _newest refused an offer whose timestamp does not parse
        return _exchange_time(offer)[0]
    if offer.when is not None:
        return _naive_utc(offer.when)
    if offered_stamp is not None and offer.where is not None:
        try:
            return parse_utc(offered_stamp.decode("utf-8").strip())
        except Exception:  # noqa: BLE001 - unreadable: the files' time instead
            pass
    mtimes = [path.lstat().st_mtime for name, path in offer.files.items() if name != TIMESTAMP_FILE]
    return datetime.fromtimestamp(max(mtimes), tz=UTC).replace(tzinfo=None)


def _why_kept(dest: Path, contents: dict[str, bytes], when: datetime) -> str | None:
    """Why an offer does not replace the submission already in ``dest`` without ``force``: "" for the
    same notebooks, a reason when it is not newer (by ``timestamp.txt``); None: it is newer and
    different, so it replaces it."""
    if not _notebooks_differ(dest, contents):
        return ""
    try:
        collected = parse_utc((dest / TIMESTAMP_FILE).read_text(encoding="utf-8").strip())
    except Exception:  # noqa: BLE001 - none, or unreadable: which is newer cannot be told
        return "the one collected has no time to compare with"
    if _naive_utc(when) <= collected:
        return (f"the one collected is as new or newer ({format_timestamp(collected)} >= "
                f"{format_timestamp(when)})")
    return None


def _notebooks_differ(dest: Path, contents: dict[str, bytes]) -> bool:
    """Whether the notebooks about to be written differ from those already in ``dest``."""
    new = {name: data for name, data in contents.items() if name.endswith(".ipynb")}
    old = {str(p.relative_to(dest)): p for p in dest.rglob("*.ipynb") if p.is_file()}
    if set(new) != set(old):
        return True
    return any(old[name].read_bytes() != data for name, data in new.items())


def _extra_notebook(name: str, taken, expected: dict[str, set[str]]) -> bool:
    """A top-level notebook the assignment does not have, next to one it has: left out, not a
    refusal of the whole offer (an offer with none of the assignment's notebooks is still refused)."""
    stems = {Path(n).stem for n in taken if n.endswith(".ipynb") and "/" not in n}
    return "/" not in name and Path(name).stem not in expected and bool(stems & set(expected))


def _graded_names(files: dict[str, Path], shown, result: CollectResult) -> dict[str, str] | str:
    """Offered name -> name in submitted/, for the files to take: a notebook of a language edition is
    stored under the notebook it is graded as (``source.graded_notebook_name``). Several editions of
    one notebook (a hub fetch hands out all of them): the one the student worked on is taken, the
    others are counted in ``result.editions_left_out``; worked on in two languages: why the offer is
    refused."""
    groups: dict[str, list[str]] = {}
    for name in files:
        top_notebook = name.endswith(".ipynb") and "/" not in name
        groups.setdefault(f"{graded_notebook_name(name)}.ipynb" if top_notebook else name, []).append(name)
    names: dict[str, str] = {}
    for graded, offered in groups.items():
        if len(offered) > 1:
            worked = [name for name in offered if _worked_on(files[name], shown)]
            if len(worked) > 1:
                return f"{' and '.join(sorted(worked))} are the same notebook, worked on in two languages"
            taken = worked[0] if worked else (graded if graded in offered else sorted(offered)[0])
            # the unchanged editions are the release as handed out, not a submission: counted, not
            # listed one line per student (every hub student has them all)
            result.editions_left_out += sum(1 for name in offered if name != taken)
            offered = [taken]
        names[offered[0]] = graded
    return names


def _worked_on(path: Path, shown) -> bool:
    """True when a solution cell of the notebook at ``path`` differs from its release (nbgrader's
    checksum of the cell no longer matches the one the release wrote); unreadable counts as worked on."""
    from nbgrader.utils import compute_checksum

    try:
        nb = nbformat.reads(_read_regular(path, shown).decode("utf-8"), as_version=4)
        cells = [c for c in nb.cells if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
        return any(c.metadata.nbgrader.get("checksum") != compute_checksum(c) for c in cells)
    except Exception:  # noqa: BLE001 - its problem is reported when it is read for real
        return True


def notebook_problem(data: bytes, notebook: str, assignment: str,
                      expected: dict[str, set[str]]) -> str | None:
    """Why ``data`` is not a notebook of ``assignment`` (None when it is)."""
    try:
        nb = nbformat.reads(data.decode("utf-8"), as_version=4)
        cells = nb.get("cells") if isinstance(nb, dict) else None
        if not isinstance(cells, list):
            raise ValueError("no list of cells")
    except Exception as error:  # noqa: BLE001 - any parse failure is a refusal
        return f"not a Jupyter notebook ({type(error).__name__}: {str(error)[:120]})"
    if notebook not in expected:
        return (f"{assignment} has no notebook named {notebook!r} "
                f"(expected {', '.join(sorted(expected))})")
    ids = set()
    for cell in cells:
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        meta = meta.get("nbgrader") if isinstance(meta, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str):
            ids.add(meta["grade_id"])
    if not ids & expected[notebook]:
        sample = ", ".join(sorted(expected[notebook])[:3])
        return (f"not a notebook of {assignment}: none of its cells carries a grade id of "
                f"{assignment} (expected e.g. {sample})")
    return None
