"""A notebook's own namespaces inside the sandbox (untrusted side, before any student code runs).

The sandbox template forks one child per notebook. Without more, that child could signal the
template (stop it, kill it) — they run as the same user. ``enter_own_namespaces`` gives the notebook a
user and PID namespace of its own, nested in the sandbox's:

- a new PID namespace whose first process is the notebook: the template and bubblewrap's init are not
  in it, so they have no PID there to ``kill``, and the kernel refuses a signal through a pidfd (or a
  ``/proc/<pid>`` folder) to a process outside the caller's namespace; when the notebook ends, the
  kernel kills whatever it left in its namespace. (``/proc`` stays the sandbox's: a fresh one cannot
  be mounted below bubblewrap's read-only overmounts, so the template's *entry* stays visible, its
  memory and environment not: it is non-dumpable.)
- a new user namespace (needed to make the others without privilege) mapping only the sandbox's own
  user, and every capability dropped before the notebook's first line runs, ``no_new_privs`` set.

Standard library and ``ctypes`` only (bubblewrap mounts this folder alone). Returns False, changing
nothing, where the kernel refuses nested namespaces; the template reports it (``autograder doctor``).
"""

from __future__ import annotations

import ctypes
import os
import signal

CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 1, 38, 24
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


def enter_own_namespaces() -> bool:
    """Move this (single-threaded) process's future into its own user + PID namespace.

    Forks once: this process stays behind only to wait and pass the notebook's exit status on (it
    never returns); the returning process is PID 1 of the new namespace. False: not possible here."""
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0:
        return False
    for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                       ("/proc/self/gid_map", f"{gid} {gid} 1")):
        with open(path, "w") as handle:
            handle.write(text)
    pid = os.fork()
    if pid != 0:
        _wait_and_pass_on(pid)  # never returns
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _drop_capabilities(libc)
    return True


def _drop_capabilities(libc) -> None:
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
