"""The checker's own view of the machine (trusted side, before the checker's first cell).

The checker runs grade cells and hidden checks with its own torch; it never runs student code, and the
channel lets nothing but plain values reach it. Still, assume the next hole exists: if student code ever
ran in the checker, it should find nothing worth having. So the checker (a fresh child of the warm
template, one per notebook) moves into namespaces of its own before it runs anything:

- a **network namespace**: no network at all (a loopback that is down);
- a **mount namespace** in which the course folder and the gradebook's folder are empty tmpfs, but for
  the notebook's working folder, which is a private tmpfs holding a copy of what the parent put there;
  ``/tmp`` (its scratch folder recreated in it) and ``/dev/shm`` are private tmpfs; everything else is
  read-only. The interpreter, the virtual environment and the ``autograder`` package (the hidden checks
  among it) stay visible, read-only, wherever they lie;
- **no privilege**: started as root, the checker becomes ``CHECKER_UID`` (an unprivileged uid of its
  own, neither the grader's nor the sandbox's); folders on the way to the interpreter that it could not
  traverse (``/root``) are replaced by tmpfs carrying the interpreter. Started as an ordinary user, it
  gets a user namespace that maps only that user and drops every capability.

What the checker writes therefore never lands on the grading machine: kept files and outputs go to the
parent as data (``checker.Event``), and the parent stays the only writer of ``gradebook.db`` and
``autograded/``. ``describe`` says what was done (``autograder doctor`` prints it).
"""

from __future__ import annotations

import ctypes
import os
import stat
import sys
from collections.abc import Iterable

import autograder
from autograder.sandbox.host import python_dirs
from autograder.sandbox.inside import isolation

CHECKER_UID = 65533  # the checker's uid when grading as root ("nobody" - 1: the sandbox maps 65534)
TMP_BYTES = 1 << 30
WORKDIR_BYTES = 1 << 30
SHM_BYTES = 64 << 20
COMPANION_BYTES = 256 << 20  # what of the working folder the checker's copy holds at most
CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWUSER = 0x20000, 0x40000000, 0x10000000
_MOUNT_SETATTR, _AT_RECURSIVE, _MOUNT_ATTR_RDONLY = 442, 0x8000, 0x1


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def confine(*, workdir: str, scratch: str, hidden: tuple[str, ...]) -> str:
    """Move this (single-threaded, freshly forked) checker into its own view; return what was done.
    Raises OSError when the machine refuses (the checker then reports it and runs nothing)."""
    libc = isolation.load_libc()
    as_root = os.geteuid() == 0
    companions = _read_tree(workdir)
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWNS | CLONE_NEWNET | (0 if as_root else CLONE_NEWUSER)) != 0:
        raise OSError(ctypes.get_errno(), "unshare: " + os.strerror(ctypes.get_errno()))
    if not as_root:
        isolation.map_own_user(uid, gid)
    isolation.mount(libc, None, "/", None, isolation.MS_REC | isolation.MS_PRIVATE)
    code = code_folders()
    owner = f",uid={CHECKER_UID},gid={CHECKER_UID}" if as_root else ""
    isolation.fresh_tmpfs(libc, "/dev/shm", SHM_BYTES, hold="/dev/shm", options=owner)
    # the folders on the way to the code, and to the checker's own working folder (a course or a
    # service state folder of mode 700, anywhere), that it could not enter: tmpfs carrying the code
    blocked = isolation.untraversable([*code, os.path.dirname(workdir)], uid=CHECKER_UID) \
        if as_root else []
    replaced = ["/tmp", *_unique(hidden), *blocked]
    for folder in _outermost(replaced):
        if os.path.isdir(folder):
            isolation.fresh_tmpfs(libc, folder, TMP_BYTES, hold="/dev/shm", carry=code,
                                  options=owner if folder == "/tmp" else "", mode="0755")
    for folder in (scratch, workdir):
        os.makedirs(folder, exist_ok=True)
    isolation.mount(libc, "tmpfs", workdir, "tmpfs", isolation.MS_NOSUID | isolation.MS_NODEV,
                    f"size={WORKDIR_BYTES},mode=0700{owner}")
    _write_tree(workdir, companions)
    read_only = _read_only_except(libc, ["/tmp", "/dev/shm", workdir])
    if as_root:
        for path in (scratch, *_tree(workdir)):
            os.lchown(path, CHECKER_UID, CHECKER_UID)
        os.setgroups([])
        os.setresgid(CHECKER_UID, CHECKER_UID, CHECKER_UID)
        os.setresuid(CHECKER_UID, CHECKER_UID, CHECKER_UID)
    else:
        isolation.drop_capabilities(libc)
    libc.prctl(isolation.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.chdir(workdir)
    who = f"uid {CHECKER_UID}" if as_root else f"uid {uid} without capabilities"
    return (f"checker: {who}, no network, course folder hidden, "
            f"{'read-only elsewhere' if read_only else 'NOT read-only elsewhere (no mount_setattr)'}")


def code_folders() -> list[str]:
    """What the checker must still see (read-only): the interpreter, its packages, this package."""
    package = os.path.dirname(os.path.realpath(autograder.__file__))
    return sorted({*python_dirs(), package, os.path.dirname(os.path.realpath(sys.executable))})


def _unique(paths: Iterable[str]) -> list[str]:
    return sorted({os.path.realpath(p) for p in paths if p and os.path.realpath(p) != "/"})


def _outermost(paths: list[str]) -> list[str]:
    """Each folder once, and none inside another (the outer one's fresh tmpfs hides it already)."""
    paths = _unique(paths)
    return [p for p in paths if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in paths)]


def _read_only_except(libc: ctypes.CDLL, writable: list[str]) -> bool:
    """Every mount read-only (``mount_setattr``, recursive), then ``writable`` writable again."""
    syscall = libc.syscall
    attr = _MountAttr(_MOUNT_ATTR_RDONLY, 0, 0, 0)
    if syscall(_MOUNT_SETATTR, -100, b"/", _AT_RECURSIVE, ctypes.byref(attr),
               ctypes.sizeof(attr)) != 0:
        return False
    clear = _MountAttr(0, _MOUNT_ATTR_RDONLY, 0, 0)
    for path in writable:
        if syscall(_MOUNT_SETATTR, -100, path.encode(), 0, ctypes.byref(clear),
                   ctypes.sizeof(clear)) != 0:
            raise OSError(ctypes.get_errno(), f"mount_setattr {path}: {os.strerror(ctypes.get_errno())}")
    return True


def _read_tree(folder: str) -> dict[str, bytes]:
    """The regular files below ``folder`` (links not followed), up to ``COMPANION_BYTES`` in all."""
    found, total = {}, 0
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and total + st.st_size <= COMPANION_BYTES:
                with open(path, "rb") as handle:
                    found[os.path.relpath(path, folder)] = handle.read()
                total += st.st_size
    return found


def _write_tree(folder: str, files: dict[str, bytes]) -> None:
    for relative, data in files.items():
        target = os.path.join(folder, relative)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as out:
            out.write(data)


def _tree(folder: str) -> list[str]:
    paths = [folder]
    for root, dirs, names in os.walk(folder):
        paths += [os.path.join(root, name) for name in [*dirs, *names]]
    return paths
