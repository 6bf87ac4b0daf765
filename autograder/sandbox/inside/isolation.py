"""A notebook's own namespaces inside the sandbox (untrusted side, before any student code runs).

The sandbox template forks one child per notebook. Without more, that child would share with the
template, and with the notebooks before and after it, whatever the sandbox holds: its writable folders,
System V IPC, the template's ``/proc`` entries (same user). ``enter_own_namespaces`` gives every notebook
namespaces of its own, nested in the sandbox's, so that it starts from nothing shared:

- a **PID namespace** whose first process is the notebook: the template and bubblewrap's init have no
  PID there to signal, a pidfd or ``/proc/<pid>`` folder outside it is refused, and when the notebook
  ends the kernel kills whatever it left in its namespace;
- a **mount namespace** with fresh, size-capped tmpfs on ``/tmp``, ``/dev/shm`` and ``/sandbox-work``
  (the notebook's folder is made in it after this call): nothing the notebook writes outlives it, nothing the
  last one wrote is there; read-only mounts below those folders (a virtual environment under ``/tmp``)
  are carried over. The ``/proc`` folders of every process outside the notebook's namespace (bubblewrap's
  init, the template and its threads, this process) are covered by empty read-only mounts, so the
  notebook cannot write the template's ``oom_score_adj`` or scheduling settings. (A fresh ``/proc``
  cannot be mounted below bubblewrap's read-only overmounts.) The mounts are locked: a namespace the
  notebook makes for itself cannot unmount them;
- in that mount namespace, the files of ``cover`` (a forbidden implementation's source and cached
  bytecode, ``removal.py``) are covered by read-only binds of their stand-ins: the notebook, and any
  interpreter it starts, reads the stand-in;
- an **IPC namespace**: System V shared memory, semaphores and message queues of its own;
- a **user namespace** (needed to make the others without privilege) mapping only the sandbox's own
  user, and every capability dropped before the notebook's first line runs, ``no_new_privs`` set.

Standard library and ``ctypes`` only (bubblewrap mounts this folder alone). Returns False, changing
nothing, where the kernel refuses nested namespaces; the template reports it (``autograder doctor``).
"""

from __future__ import annotations

import ctypes
import os
import signal

CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNS, CLONE_NEWIPC = 0x10000000, 0x20000000, 0x20000, 0x8000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = \
    1, 2, 4, 32, 4096, 8192, 16384, 1 << 18
MNT_DETACH = 2
HOLD = ".autograder-carried"  # where mounts below a fresh folder wait while it is replaced
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 1, 4, 38, 24
_CAPABILITY_VERSION_3 = 0x20080522
_LAST_CAP = 63


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def enter_own_namespaces(fresh: dict[str, int], cover: dict[str, bytes] | None = None) -> bool:
    """Move this (single-threaded) process's future into its own user, PID, mount and IPC namespaces,
    with a fresh tmpfs of ``fresh[folder]`` bytes on each folder of ``fresh`` (``/dev/shm`` first),
    and each file of ``cover`` covered by its new content (read-only).

    Forks once: this process stays behind only to wait and pass the notebook's exit status on (it
    never returns); the returning process is PID 1 of the new namespace. False: not possible here."""
    libc = load_libc()
    uid, gid = os.getuid(), os.getgid()
    outside = _outside_tasks()
    # the template is non-dumpable, and so is this fork of it: its /proc/self files would belong to
    # the global root, whom the sandbox's user namespace does not map (it maps one unprivileged
    # uid), and it could not write its own uid_map. The notebook's process may be dumpable: only
    # its own processes can see it
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC) != 0:
        return False
    map_own_user(uid, gid)
    mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    for folder, size in sorted(fresh.items(), key=lambda item: item[0] != "/dev/shm"):
        fresh_tmpfs(libc, folder, size, hold="/dev/shm")
    for task in outside:
        mount(libc, "none", f"/proc/{task}", "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
              "size=4k,mode=0555", missing_ok=True)
    if cover:
        cover_files(libc, cover, scratch="/dev/shm")
    pid = os.fork()
    if pid != 0:
        _wait_and_pass_on(pid)  # never returns
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    drop_capabilities(libc)
    return True


def cover_files(libc, cover: dict[str, bytes], *, scratch: str) -> None:
    """Cover each existing file ``path`` of ``cover`` by a read-only bind of a file holding
    ``cover[path]``. Those files live on a tmpfs made below ``scratch`` and detached at once: the binds
    keep them, and no path leads to them."""
    folder = os.path.join(scratch, f".autograder-cover-{os.getpid()}")
    os.mkdir(folder, 0o700)
    size = sum(len(text) for text in cover.values()) + 4096 * (len(cover) + 1)
    mount(libc, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size},mode=0700")
    for number, (path, text) in enumerate(sorted(cover.items())):
        if not os.path.isfile(path):
            continue
        stand_in = os.path.join(folder, str(number))
        with open(stand_in, "wb") as handle:
            handle.write(text)
        os.chmod(stand_in, 0o444)
        mount(libc, stand_in, path, None, MS_BIND)
        mount(libc, None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    _check(libc.umount2(folder.encode(), MNT_DETACH), f"umount {folder}")
    os.rmdir(folder)


def load_libc() -> ctypes.CDLL:
    """The C library, with ``mount``'s argument types declared and ``errno`` kept."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                           ctypes.c_char_p]
    return libc


def map_own_user(uid: int, gid: int) -> None:
    """In a user namespace just made: map only the user (and group) this process already is."""
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                       ("/proc/self/gid_map", f"{gid} {gid} 1")):
        with open(path, "w") as handle:
            handle.write(text)


def untraversable(folders: list[str], *, uid: int) -> list[str]:
    """For each of ``folders``, the highest folder on the way to it that ``uid`` (not its owner)
    cannot enter, like ``/root`` (mode 700): a process of that uid can reach those folders only
    through a tmpfs put there, carrying them."""
    found = set()
    for folder in folders:
        parts = folder.rstrip("/").split("/")
        for depth in range(2, len(parts) + 1):
            ancestor = "/".join(parts[:depth])
            info = os.stat(ancestor)
            if info.st_uid != uid and not info.st_mode & 0o001:
                found.add(ancestor)
                break
    return sorted(found)


def become(uid: int, code: list[str]) -> None:
    """As root, in a (single-threaded) child about to exec: a private mount namespace in which the
    ``code`` folders are reachable by ``uid`` (folders on the way that it could not enter become
    tmpfs carrying them), then ``uid`` for good (groups dropped)."""
    libc = load_libc()
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare: " + os.strerror(ctypes.get_errno()))
    mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
    blocked = untraversable(code, uid=uid)
    if blocked:
        fresh_tmpfs(libc, "/dev/shm", 1 << 20, hold="/dev/shm")
        for folder in blocked:
            fresh_tmpfs(libc, folder, 1 << 20, hold="/dev/shm", carry=code, mode="0755")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)


def _outside_tasks() -> list[str]:
    """The ``/proc`` names of every task that stays outside the notebook's PID namespace: bubblewrap's
    init, the template (this process's parent), this process, and their threads."""
    tasks = set()
    for pid in {1, os.getppid(), os.getpid()}:
        tasks.add(str(pid))
        try:
            tasks |= set(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass
    return sorted(tasks)


def fresh_tmpfs(libc, folder: str, size: int, *, hold: str, carry: tuple[str, ...] | list[str] = (),
                options: str = "", mode: str | None = None) -> None:
    """An empty tmpfs of ``size`` bytes on ``folder``; mounts below it (read-only binds of the
    interpreter or the virtual environment) and the ``carry`` folders below it are moved aside under
    ``hold`` and back on top, so they stay where they were."""
    inside = folder.rstrip("/") + "/"
    below = [point for point in [*_mount_points(), *carry] if point.startswith(inside)]
    below = sorted({p for p in below if not any(p != q and p.startswith(q + "/") for q in below)})
    if below and (hold == folder or hold.startswith(folder.rstrip("/") + "/")):
        raise OSError(f"mounts below {folder} cannot be carried through {hold}")
    carried = []
    for number, point in enumerate(below):
        aside = os.path.join(hold, f"{HOLD}-{number}")
        os.makedirs(aside)
        mount(libc, point, aside, None, MS_BIND | MS_REC)
        carried.append((aside, point))
    mode = mode or ("1777" if folder in ("/tmp", "/dev/shm") else "0700")
    mount(libc, "tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV,
          f"size={int(size)},mode={mode}{options}")
    for aside, point in carried:
        os.makedirs(point, exist_ok=True)
        mount(libc, aside, point, None, MS_MOVE)
        os.rmdir(aside)


def _mount_points() -> list[str]:
    with open("/proc/self/mountinfo") as handle:
        return [line.split()[4].encode().decode("unicode_escape") for line in handle
                if len(line.split()) > 4]


def mount(libc, source: str | None, target: str, kind: str | None, flags: int,
           data: str | None = None, *, missing_ok: bool = False) -> None:
    encode = lambda text: text.encode() if text is not None else None  # noqa: E731
    if libc.mount(encode(source), encode(target), encode(kind), flags, encode(data)) != 0:
        error = ctypes.get_errno()
        if missing_ok and error == 2:  # ENOENT: a thread that ended meanwhile
            return
        raise OSError(error, f"mount {target}: {os.strerror(error)}")


def drop_capabilities(libc) -> None:
    for cap in range(_LAST_CAP + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last one the kernel knows
    header, data = _CapHeader(_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    _check(libc.capset(ctypes.byref(header), data), "capset")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _wait_and_pass_on(pid: int) -> None:
    """The process left outside: exit as the notebook did (a signal as that signal)."""
    try:
        os.closerange(0, 65536)  # hold nothing of the notebook's (its data socket above all)
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 70)
    finally:
        os._exit(70)
