"""The sandbox's seccomp filter (trusted): the kernel interfaces no namespace isolates, refused.

Namespaces give the sandbox its own processes, mounts, network, IPC, host name and users; some kernel
interfaces are none of these and stay shared with the grader and with every other notebook. Above all
the **kernel keyring**: keyrings survive fork, exec, setsid and unshare, so a notebook could read a
key the grading session stored, or plant answers there that a later notebook reads. ``DENIED`` is the
one reviewed list of what the sandbox may not call, each with its reason; ``program`` compiles it
into the classic-BPF program bubblewrap loads (``--seccomp FD``, ``host.bwrap_command``) before it
execs the sandbox's template, so the template and every notebook it forks inherit it (a seccomp
filter cannot be removed, only added to).

The program, for the machine the grader runs on (x86_64 or aarch64):

1. ``seccomp_data.arch`` must be that machine's native one; any other (the i386 ABI through
   ``int 0x80`` on x86_64, AArch32 on aarch64) gets EPERM for every call: those tables are not
   reviewed here, so nothing of them is allowed;
2. on x86_64, a number with the x32 bit (``0x40000000``) gets EPERM: the x32 ABI is another table;
3. a number in ``DENIED`` gets EPERM; every other call is allowed.

Deny by default holds for the two ABIs nobody uses here; for the native one, a deny list: the Python,
numpy and torch stack calls hundreds of syscalls, and an allow list would break on the next release of
any of them. What is allowed on purpose is listed in ``ALLOWED_ON_PURPOSE`` (with why), so the review
is in this one file. Another machine has no table: the sandbox refuses to start there (fail closed).
"""

from __future__ import annotations

import errno
import platform
import struct

# --------------------------------------------------------------------------- the list

# syscall -> why the sandbox may not call it. Each is refused with EPERM.
DENIED: dict[str, str] = {
    "keyctl": "the kernel keyring is not namespaced: read the grader's keys, plant answers for "
              "a later notebook",
    "add_key": "the kernel keyring: plant a key (an answer) another process or notebook reads",
    "request_key": "the kernel keyring: find a key by name in the inherited keyrings, or upcall",
    "perf_event_open": "counters and samples of the shared CPUs and kernel (side channels); "
                       "not used by Python or torch",
    "userfaultfd": "stalls the kernel at a chosen page fault (a race-widening primitive of kernel "
                   "exploits)",
    "io_uring_setup": "io_uring: a second syscall interface seccomp cannot see into, and a "
                      "frequent source of kernel bugs",
    "io_uring_enter": "io_uring (see io_uring_setup)",
    "io_uring_register": "io_uring (see io_uring_setup)",
    "io_setup": "Linux AIO contexts count against the system-wide aio-max-nr (starves every "
                "other process); Python's asyncio does not use them",
    "bpf": "eBPF programs and maps: kernel attack surface, shared kernel state",
    "kexec_load": "loads a new kernel",
    "kexec_file_load": "loads a new kernel",
    "init_module": "loads a kernel module",
    "finit_module": "loads a kernel module",
    "delete_module": "unloads a kernel module",
    "open_by_handle_at": "opens a file by handle, bypassing the mount namespace's view (the "
                         "'shocker' container escape)",
    "name_to_handle_at": "the handles open_by_handle_at takes; not used by Python or torch",
    "syslog": "the kernel's log is shared (addresses, other processes' messages)",
    "acct": "process accounting is system-wide",
    "swapon": "swap is system-wide",
    "swapoff": "swap is system-wide",
    "reboot": "in a PID namespace, ends its init: the whole sandbox",
    "quotactl": "disk quotas are system-wide",
    "quotactl_fd": "disk quotas are system-wide",
    "lookup_dcookie": "kernel profiling (oprofile) cookies name paths outside the sandbox",
    "fanotify_init": "watches file access on whole mounts (other processes' file access)",
    "settimeofday": "the clock is not namespaced (a time namespace offsets only monotonic clocks)",
    "clock_settime": "the clock is not namespaced",
    "uselib": "x86_64 only: an obsolete way to map a library, kernel attack surface",
    "iopl": "x86_64 only: raw I/O port access",
    "ioperm": "x86_64 only: raw I/O port access",
    "_sysctl": "x86_64 only: the removed binary sysctl interface",
}

# considered and allowed: syscall (or family) -> why
ALLOWED_ON_PURPOSE: dict[str, str] = {
    "mount, umount2, pivot_root, fsopen/fsmount/move_mount/open_tree": "act only in the sandbox's own "
        "mount namespace (a user namespace owns it); isolation.py mounts a fresh /tmp for each notebook",
    "unshare, clone, setns": "isolation.py gives every notebook namespaces of its own; a namespace "
        "made inside the sandbox is nested in the sandbox's",
    "ptrace, process_vm_readv/writev, kcmp, pidfd_getfd": "reach only processes of the notebook's "
        "own PID namespace (the template is non-dumpable)",
    "sethostname, setdomainname": "the sandbox's own UTS namespace",
    "seccomp, prctl": "a process may only add to its filter, never lift it",
    "adjtimex, clock_adjtime": "reading is harmless (ntp_gettime); changing the clock needs "
                               "CAP_SYS_TIME in the first user namespace",
}

# The numbers, from the kernel's tables: arch/x86/entry/syscalls/syscall_64.tbl (x86_64, "common"
# and "64" rows) and include/uapi/asm-generic/unistd.h (aarch64). None: the machine has no such call.
NUMBERS: dict[str, dict[str, int | None]] = {
    #                   x86_64  aarch64
    "keyctl":            {"x86_64": 250, "aarch64": 219},
    "add_key":           {"x86_64": 248, "aarch64": 217},
    "request_key":       {"x86_64": 249, "aarch64": 218},
    "perf_event_open":   {"x86_64": 298, "aarch64": 241},
    "userfaultfd":       {"x86_64": 323, "aarch64": 282},
    "io_uring_setup":    {"x86_64": 425, "aarch64": 425},
    "io_uring_enter":    {"x86_64": 426, "aarch64": 426},
    "io_uring_register": {"x86_64": 427, "aarch64": 427},
    "io_setup":          {"x86_64": 206, "aarch64": 0},
    "bpf":               {"x86_64": 321, "aarch64": 280},
    "kexec_load":        {"x86_64": 246, "aarch64": 104},
    "kexec_file_load":   {"x86_64": 320, "aarch64": 294},
    "init_module":       {"x86_64": 175, "aarch64": 105},
    "finit_module":      {"x86_64": 313, "aarch64": 273},
    "delete_module":     {"x86_64": 176, "aarch64": 106},
    "open_by_handle_at": {"x86_64": 304, "aarch64": 265},
    "name_to_handle_at": {"x86_64": 303, "aarch64": 264},
    "syslog":            {"x86_64": 103, "aarch64": 116},
    "acct":              {"x86_64": 163, "aarch64": 89},
    "swapon":            {"x86_64": 167, "aarch64": 224},
    "swapoff":           {"x86_64": 168, "aarch64": 225},
    "reboot":            {"x86_64": 169, "aarch64": 142},
    "quotactl":          {"x86_64": 179, "aarch64": 60},
    "quotactl_fd":       {"x86_64": 443, "aarch64": 443},
    "lookup_dcookie":    {"x86_64": 212, "aarch64": 18},
    "fanotify_init":     {"x86_64": 300, "aarch64": 262},
    "settimeofday":      {"x86_64": 164, "aarch64": 170},
    "clock_settime":     {"x86_64": 227, "aarch64": 112},
    "uselib":            {"x86_64": 134, "aarch64": None},
    "iopl":              {"x86_64": 172, "aarch64": None},
    "ioperm":            {"x86_64": 173, "aarch64": None},
    "_sysctl":           {"x86_64": 156, "aarch64": None},
}

# <linux/audit.h>: AUDIT_ARCH_X86_64 = EM_X86_64 | 64BIT | LE, AUDIT_ARCH_AARCH64 = EM_AARCH64 | ...
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000

# --------------------------------------------------------------------------- classic BPF

# <linux/filter.h>, <linux/seccomp.h>
BPF_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JGE_K = 0x05 | 0x30 | 0x00  # BPF_JMP | BPF_JGE | BPF_K
BPF_RET_K = 0x06 | 0x00  # BPF_RET | BPF_K
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
REFUSE = SECCOMP_RET_ERRNO | errno.EPERM
OFFSET_NR, OFFSET_ARCH = 0, 4  # struct seccomp_data { int nr; __u32 arch; __u64 ip; __u64 args[6]; }
_SOCK_FILTER = struct.Struct("=HBBI")  # struct sock_filter { __u16 code; __u8 jt, jf; __u32 k; }


def machine() -> str:
    """The syscall table this machine uses: "x86_64" or "aarch64" (ValueError on any other)."""
    name = platform.machine().lower()
    name = {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)
    if name not in AUDIT_ARCH:
        raise ValueError(f"no seccomp table for this machine ({platform.machine()}): the sandbox "
                         f"runs on {' or '.join(AUDIT_ARCH)}")
    return name


def denied_numbers(arch: str) -> list[int]:
    """The numbers of ``DENIED`` on ``arch`` (those it has), ascending."""
    return sorted({number for name in DENIED if (number := NUMBERS[name][arch]) is not None})


def instructions(arch: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions, for ``arch`` (this machine's by default)."""
    arch = arch or machine()
    numbers = denied_numbers(arch)
    program = [(BPF_LD_W_ABS, 0, 0, OFFSET_ARCH),
               (BPF_JEQ_K, 1, 0, AUDIT_ARCH[arch]),
               (BPF_RET_K, 0, 0, REFUSE),  # a foreign ABI: nothing of it is reviewed
               (BPF_LD_W_ABS, 0, 0, OFFSET_NR)]
    checks: list[tuple[int, int]] = [(BPF_JGE_K, X32_SYSCALL_BIT)] if arch == "x86_64" else []
    checks += [(BPF_JEQ_K, number) for number in numbers]
    # after the checks: ALLOW, then REFUSE; check i jumps over the checks after it and ALLOW
    for index, (code, k) in enumerate(checks):
        to_refuse = len(checks) - index
        if to_refuse > 255:
            raise ValueError("too many denied syscalls for one jump (split the program)")
        program.append((code, to_refuse, 0, k))
    program += [(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW), (BPF_RET_K, 0, 0, REFUSE)]
    return program


def program(arch: str | None = None) -> bytes:
    """The compiled filter (an array of ``struct sock_filter``), as ``bwrap --seccomp`` reads it."""
    return b"".join(_SOCK_FILTER.pack(*instruction) for instruction in instructions(arch))


def syscall_number(name: str) -> int:
    """``name``'s number on this machine (for the grader's own ``keyctl``, host.py)."""
    number = NUMBERS[name][machine()]
    if number is None:
        raise ValueError(f"{name} does not exist on {machine()}")
    return number
