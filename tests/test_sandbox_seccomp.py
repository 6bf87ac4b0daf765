"""The sandbox's seccomp filter (``autograder/sandbox/seccomp.py``) and its fresh session keyring
(issue 46, class 1): the BPF program as built, the program installed in a bare process, and the
refusals seen from inside a sandboxed notebook — the kernel-keyring attacks end to end."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.sandbox import channel as remote
from autograder.sandbox import seccomp
from autograder.sandbox.host import SandboxProcess, join_fresh_session_keyring

ARCH = seccomp.machine()
KEY_SPEC_SESSION_KEYRING = -3
KEYCTL_READ, KEYCTL_SEARCH, KEYCTL_INVALIDATE = 11, 10, 21

# --------------------------------------------------------------------------- the program as built


def _run_filter(program: list[tuple[int, int, int, int]], nr: int, arch: int) -> int:
    """A small interpreter of the instructions ``seccomp.instructions`` emits (what the kernel does)."""
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == seccomp.BPF_LD_W_ABS:
            acc = {seccomp.OFFSET_NR: nr, seccomp.OFFSET_ARCH: arch}[k]
        elif code == seccomp.BPF_JEQ_K:
            pc += jt if acc == k else jf
        elif code == seccomp.BPF_JGE_K:
            pc += jt if acc >= k else jf
        elif code == seccomp.BPF_RET_K:
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1


@pytest.mark.parametrize("arch", sorted(seccomp.AUDIT_ARCH))
def test_the_program_refuses_the_list_and_allows_the_rest(arch):
    program = seccomp.instructions(arch)
    native = seccomp.AUDIT_ARCH[arch]
    denied = set(seccomp.denied_numbers(arch))
    for nr in range(600):
        expected = seccomp.REFUSE if nr in denied else seccomp.SECCOMP_RET_ALLOW
        assert _run_filter(program, nr, native) == expected, (arch, nr)
    foreign = 0x40000003  # AUDIT_ARCH_I386
    assert _run_filter(program, 39, foreign) == seccomp.REFUSE  # every call of another ABI
    x32 = _run_filter(program, seccomp.X32_SYSCALL_BIT | 39, native)
    assert x32 == (seccomp.REFUSE if arch == "x86_64" else seccomp.SECCOMP_RET_ALLOW)
    assert seccomp.REFUSE == 0x00050000 | errno.EPERM
    assert len(seccomp.program(arch)) == 8 * len(program)


def test_every_denied_syscall_has_a_reason_and_numbers():
    assert set(seccomp.DENIED) == set(seccomp.NUMBERS)
    assert all(reason.strip() for reason in seccomp.DENIED.values())
    for name in ("keyctl", "add_key", "request_key", "perf_event_open", "userfaultfd",
                 "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "kexec_load",
                 "init_module", "finit_module", "delete_module", "open_by_handle_at", "syslog",
                 "acct", "swapon", "swapoff", "reboot"):
        assert name in seccomp.DENIED
    # what the sandbox needs itself (isolation.py's nested namespaces) is never refused
    needed = {"x86_64": {"unshare": 272, "mount": 165, "umount2": 166, "capset": 126, "prctl": 157},
              "aarch64": {"unshare": 97, "mount": 40, "umount2": 39, "capset": 91, "prctl": 167}}
    for arch, numbers in needed.items():
        assert not set(numbers.values()) & set(seccomp.denied_numbers(arch)), arch


_HEADERS = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
            "aarch64": Path("/usr/include/asm-generic/unistd.h")}


@pytest.mark.parametrize("arch", sorted(_HEADERS))
def test_the_numbers_are_the_kernels(arch):
    """Against this machine's kernel headers where they are installed (linux-libc-dev)."""
    header = _HEADERS[arch]
    if not header.is_file():
        pytest.skip(f"{header} is not installed")
    found = {m[1]: int(m[2]) for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)\b", header.read_text())}
    checked = 0
    for name, numbers in seccomp.NUMBERS.items():
        if name in found:
            assert numbers[arch] == found[name], (arch, name)
            checked += 1
        else:  # only the calls the machine lacks, or removed from the header since
            assert numbers[arch] is None or name in ("_sysctl", "lookup_dcookie"), (arch, name)
    assert checked >= 25


def _keyctl(*args: object) -> tuple[int, int]:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(ctypes.c_long(seccomp.syscall_number("keyctl")), *args)
    return result, ctypes.get_errno()


def _add_key(description: bytes, payload: bytes) -> int | None:
    """Add a user key to this process's session keyring; None where the kernel refuses it here."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    key = libc.syscall(ctypes.c_long(seccomp.syscall_number("add_key")), b"user", description,
                       payload, ctypes.c_size_t(len(payload)), ctypes.c_int(KEY_SPEC_SESSION_KEYRING))
    return key if key > 0 else None


def test_the_numbers_behave_as_the_calls_they_name():
    """keyctl and add_key by number do what the kernel's keyctl and add_key do (unfiltered here)."""
    key = _add_key(b"autograder-seccomp-probe", b"42")
    if key is None:
        pytest.skip(f"this process cannot add keys ({os.strerror(ctypes.get_errno())}): a "
                    "container's own filter refuses the keyring already")
    try:
        buffer = ctypes.create_string_buffer(16)
        length, _ = _keyctl(ctypes.c_long(KEYCTL_READ), ctypes.c_long(key), buffer, ctypes.c_long(16))
        assert (length, buffer.raw[:2]) == (2, b"42")
    finally:
        _keyctl(ctypes.c_long(KEYCTL_INVALIDATE), ctypes.c_long(key))


# --------------------------------------------------------------------------- installed in a process

_INSTALL = r"""
import ctypes, json, mmap, sys
program = bytes.fromhex(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

def call(nr, *args):
    result = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    return [result, ctypes.get_errno() if result < 0 else 0]

def i386_getpid():  # int 0x80 with the i386 table's getpid (20): another ABI
    code = bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3])  # mov eax, 20; int 0x80; ret
    page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(code)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    return ctypes.CFUNCTYPE(ctypes.c_int)(address)()

numbers = json.loads(sys.argv[2])
before = {str(nr): call(nr, -1, 0, 0, 0) for nr in numbers}
if sys.argv[3] == "install":
    buffer = ctypes.create_string_buffer(program)
    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    assert libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    assert libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) == 0, ctypes.get_errno()  # SECCOMP_MODE_FILTER
after = {str(nr): call(nr, -1, 0, 0, 0) for nr in numbers}
i386 = i386_getpid() if sys.argv[4] == "x86_64" else None
print(json.dumps({"before": before, "after": after, "i386": i386, "pid": __import__("os").getpid()}))
"""


def _install_and_call(numbers: list[int], *, install: bool) -> dict:
    probe = subprocess.run([sys.executable, "-I", "-c", _INSTALL, seccomp.program().hex(),
                            json.dumps(numbers), "install" if install else "no", ARCH],
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr[-2000:]
    return json.loads(probe.stdout)


def test_the_installed_filter_refuses_the_list_and_allows_the_rest():
    getpid = {"x86_64": 39, "aarch64": 172}[ARCH]
    denied = seccomp.denied_numbers(ARCH)
    numbers = [*denied, getpid, seccomp.X32_SYSCALL_BIT | 39]
    got = _install_and_call(numbers, install=True)
    for nr in denied:  # each with arguments that would be refused as invalid otherwise
        assert got["after"][str(nr)] == [-1, errno.EPERM], (nr, got["after"][str(nr)])
    assert got["after"][str(getpid)] == [got["pid"], 0]
    if ARCH == "x86_64":
        assert got["after"][str(seccomp.X32_SYSCALL_BIT | 39)] == [-1, errno.EPERM]
        assert got["i386"] == -errno.EPERM
        plain = _install_and_call([getpid], install=False)  # the i386 ABI works unfiltered here
        assert plain["i386"] in (plain["pid"], -errno.ENOSYS)
    # not EPERM before: the refusals are the filter's (a few need privileges and say EPERM anyway)
    unfiltered = [nr for nr in denied if got["before"][str(nr)][1] != errno.EPERM]
    assert len(unfiltered) >= len(denied) // 2, got["before"]


# --------------------------------------------------------------------------- from inside a notebook


@pytest.fixture(scope="module")
def box():
    if not os.path.exists("/usr/bin/bwrap") and not any(
            os.access(os.path.join(p, "bwrap"), os.X_OK) for p in os.environ["PATH"].split(":")):
        pytest.skip("bubblewrap is not installed")
    sandbox = SandboxProcess()
    sandbox.start()
    sandbox.wait_ready()
    yield sandbox
    sandbox.close()


def _notebook(box: SandboxProcess) -> remote.SandboxChannel:
    deadline = time.monotonic() + 30
    while box.state == "busy" and time.monotonic() < deadline:
        time.sleep(0.05)
        box.pump()
    data, kill = box.start_notebook({"id": 0, "env": {}, "threads": 1, "student_rss_bytes": None,
                                     "rlimits": {}}, [])
    return remote.SandboxChannel(data, kill, memmap_dir="/tmp")


_CALLS = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(nr, *args):
    result = libc.syscall(ctypes.c_long(nr), *args)
    return [result, ctypes.get_errno() if result < 0 else 0]
"""


def _in_notebook(box: SandboxProcess, code: str, name: str = "r"):
    notebook = _notebook(box)
    try:
        outputs, _ = notebook.run_cell(_CALLS + code, 60)
        return notebook.lookup([name]).get(name, outputs)
    finally:
        notebook.kill("done")


def test_each_refused_syscall_fails_with_eperm_inside_a_notebook(box):
    numbers = seccomp.denied_numbers(ARCH)
    got = _in_notebook(box, f"r = {{nr: call(nr, -1, 0, 0, 0) for nr in {numbers!r}}}\n"
                            "import os\nr['getpid'] = call(39 if os.uname().machine == 'x86_64' "
                            "else 172)\nr['status'] = [l.split()[1] for l in open('/proc/self/status')"
                            " if l.startswith('Seccomp:')]")
    assert got["status"] == ["2"], got  # SECCOMP_MODE_FILTER
    assert got["getpid"][0] > 0  # what is not listed works
    names = {number: name for name, arches in seccomp.NUMBERS.items()
             if (number := arches[ARCH]) is not None}
    refused = {names[nr]: got[nr] for nr in numbers}
    assert all(result == [-1, errno.EPERM] for result in refused.values()), refused


def test_a_notebook_cannot_read_a_key_of_the_grading_session(box):
    """The attack: the grader stores a secret in its session keyring (as a staff script or a
    service's login would); a notebook reads it by id, finds it by name, or lists it."""
    description = f"autograder-staff-secret-{os.getpid()}".encode()
    key = _add_key(description, b"the answers")
    if key is None:
        pytest.skip(f"this process cannot add keys ({os.strerror(ctypes.get_errno())}): a "
                    "container's own filter refuses the keyring to the grader and the sandbox alike")
    keyctl = seccomp.syscall_number("keyctl")
    try:
        got = _in_notebook(box, f"""
buffer = ctypes.create_string_buffer(64)
r = {{"read": call({keyctl}, ctypes.c_long({KEYCTL_READ}), ctypes.c_long({key}), buffer,
                   ctypes.c_long(64)),
      "search": call({keyctl}, ctypes.c_long({KEYCTL_SEARCH}),
                     ctypes.c_long({KEY_SPEC_SESSION_KEYRING}), b"user", {description!r},
                     ctypes.c_long(0)),
      "payload": buffer.raw}}
try:
    r["listed"] = {description.decode()!r} in open("/proc/keys").read()
except OSError as error:
    r["listed"] = type(error).__name__
""")
    finally:
        _keyctl(ctypes.c_long(KEYCTL_INVALIDATE), ctypes.c_long(key))
    assert got["read"] == [-1, errno.EPERM] and got["search"] == [-1, errno.EPERM], got
    assert b"answers" not in got["payload"]
    assert got["listed"] in (False, "FileNotFoundError", "PermissionError"), got


def test_a_notebook_cannot_plant_a_key_for_a_later_one(box):
    """The attack: one notebook stores its answers in the keyring it inherited; a later notebook (a
    blank one, another student's) reads them. The first call is refused already."""
    add_key, keyctl = seccomp.syscall_number("add_key"), seccomp.syscall_number("keyctl")
    planted = _in_notebook(box, f"""
r = {{ring: call({add_key}, b"user", b"autograder-planted", b"10/10", ctypes.c_size_t(5),
                 ctypes.c_int(ring)) for ring in (-1, -2, -3, -4, -5)}}
""")
    assert all(result == [-1, errno.EPERM] for result in planted.values()), planted
    found = _in_notebook(box, f"""
r = call({keyctl}, ctypes.c_long({KEYCTL_SEARCH}), ctypes.c_long({KEY_SPEC_SESSION_KEYRING}),
         b"user", b"autograder-planted", ctypes.c_long(0))
""")
    assert found == [-1, errno.EPERM]


# --------------------------------------------------------------------------- the second line

_SEARCH = r"""
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
found = libc.syscall(ctypes.c_long(int(sys.argv[1])), ctypes.c_long(10), ctypes.c_long(-3), b"user",
                     sys.argv[2].encode(), ctypes.c_long(0))
print(found if found > 0 else -ctypes.get_errno())
"""


def test_the_sandboxs_process_starts_in_a_fresh_session_keyring():
    """Without the filter (the second line alone): a child that joined a fresh session keyring before
    its exec finds none of the grader's keys; a child that did not, finds it."""
    description = f"autograder-second-line-{os.getpid()}"
    key = _add_key(description.encode(), b"secret")
    if key is None:
        pytest.skip(f"this process cannot add keys ({os.strerror(ctypes.get_errno())})")
    command = [sys.executable, "-I", "-c", _SEARCH, str(seccomp.syscall_number("keyctl")),
               description]
    try:
        inherited = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True)
        fresh = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True,
                               preexec_fn=join_fresh_session_keyring)
    finally:
        _keyctl(ctypes.c_long(KEYCTL_INVALIDATE), ctypes.c_long(key))
    assert int(inherited.stdout) == key
    assert int(fresh.stdout) == -errno.ENOKEY


def test_the_sandbox_is_started_with_the_filter_and_the_fresh_keyring(monkeypatch):
    """``SandboxProcess.start`` hands bubblewrap the program (``--seccomp`` with an inherited
    descriptor) and joins the fresh keyring before bubblewrap runs."""
    from autograder.sandbox import host

    seen: dict[str, object] = {}

    class Popen:
        def __init__(self, command, *, pass_fds, preexec_fn, **kwargs):
            fd = int(command[command.index("--seccomp") + 1])
            seen["program"] = os.read(fd, 1 << 16)
            seen["passed"] = fd in pass_fds
            seen["preexec"] = preexec_fn

        def poll(self):
            return 0

    monkeypatch.setattr(host.subprocess, "Popen", Popen)
    sandbox = SandboxProcess()
    sandbox.start()
    try:
        assert seen["program"] == seccomp.program() and seen["passed"]
        assert getattr(seen["preexec"], "__func__", None) is SandboxProcess._before_exec
    finally:
        sandbox.close()
