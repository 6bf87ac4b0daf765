"""The sandboxes' and checkers' cgroups (trusted), as root: one parent group per grading process and
hierarchy (``autograder-sandboxes-PID``, ``autograder-checkers-PID``), and in it one group per sandbox
or checker — ``ProcessLimit`` (pids), ``MemoryLimit`` (memory) and ``CpuShare`` (cpu, and how much CPU
the sandbox got or waited for) on one base, ``_Group``. cgroup v1 and v2; without a writable
controller none is made and the limit falls back (RLIMIT_NPROC, the template's watchdog) or the log
says so. The policy that uses them is ``host.py``."""

from __future__ import annotations

import atexit
import os
import time
from pathlib import Path

SANDBOX_PROCESSES = 512  # processes and threads of one sandbox (its template and the notebook's)
# the weight of all sandboxes together against the grading process, its checkers and the web process
# beside them (cgroup v2 cpu.weight; v1 cpu.shares 1024): one ordinary process's, however many
# sandboxes there are and however busy they are (an idle grader leaves them all of it)
SANDBOXES_WEIGHT = 100
CPU_WEIGHT = 100  # cgroup v2 cpu.weight of every sandbox among the others (v1: cpu.shares 1024)
_PARENTS: list[Path] = []  # the parent groups this process made (removed when it exits)


def _parent(root: Path, kind: str, version: str, controller: str) -> Path:
    """The group under ``root`` that holds this process's groups of ``kind`` ("sandboxes",
    "checkers"): one per hierarchy (v1) or one for all controllers (v2), made once."""
    path = root / f"autograder-{kind}-{os.getpid()}"
    if version == "v2":
        _enable_controller(root, controller)
    path.mkdir(exist_ok=True)
    if version == "v2":
        _enable_controller(path, controller)
    if controller == "cpu" and kind == "sandboxes":
        knob, weight = ("cpu.weight", SANDBOXES_WEIGHT) if version == "v2" else \
            ("cpu.shares", SANDBOXES_WEIGHT * 1024 // 100)
        (path / knob).write_text(str(weight))
    if path not in _PARENTS:
        if not _PARENTS:
            atexit.register(_remove_parents)
        _PARENTS.append(path)
    return path


def _remove_parents() -> None:
    """At exit: the parent groups, and what a sandbox or checker never closed left in them."""
    for path in reversed(_PARENTS):
        try:
            left = [child for child in path.iterdir() if child.is_dir()]
        except OSError:
            left = []
        for child in left:
            _remove_cgroup(child, timeout_s=1)
        _remove_cgroup(path, timeout_s=0)


class _Group:
    """One cgroup of one sandbox (or checker), under this process's parent group of its kind. In
    v2 a process is in one group, so the controllers share the first one made (``unified_group``)."""

    path: Path | None = None
    version: str | None = None
    shared: bool = False

    def _make(self, found: tuple[Path, str], *, kind: str, controller: str,
              unified_group: Path | None, knobs: dict[str, str]) -> None:
        """Make the group and write ``knobs`` (file -> value); raises OSError (no group then)."""
        root, self.version = found
        parent = _parent(root, kind, self.version, controller)
        self.shared = self.version == "v2" and unified_group is not None \
            and unified_group.parent == parent
        path = unified_group if self.shared and unified_group is not None else \
            parent / f"{os.getpid()}-{id(self)}"
        try:
            path.mkdir(exist_ok=True)
            for knob, value in knobs.items():
                if knob != "memory.swap.max" or (path / knob).exists():
                    (path / knob).write_text(value)
        except OSError:
            if not self.shared:
                _remove_cgroup(path, timeout_s=0)
            raise
        self.path = path

    def enter(self, pid: int | None = None) -> None:
        """Put ``pid`` (default: this process, before it execs bubblewrap) into the group."""
        if self.path is not None and not self.shared:
            (self.path / "cgroup.procs").write_text(str(pid or os.getpid()))

    def remove(self) -> None:
        """Delete the group once its processes are gone (they die with bubblewrap, shortly after)."""
        if self.shared:  # the first controller's group: removed with it
            self.path = None
        self.path = _remove_cgroup(self.path)


def pids_cgroup_root() -> Path | None:
    """Where a per-sandbox ``pids`` cgroup can be made: cgroup v1's pids hierarchy or a v2 hierarchy
    with the pids controller, writable by this process (root). RLIMIT_NPROC cannot stand in for it
    when grading as root: the kernel exempts processes that are root outside their user namespace."""
    for root in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")):
        v2 = (root / "cgroup.controllers").is_file()
        if root.name != "pids" and not (v2 and "pids" in (root / "cgroup.controllers").read_text()):
            continue
        if (root / "cgroup.procs").is_file() and os.access(root, os.W_OK):
            return root
    return None


class ProcessLimit(_Group):
    """A ``pids`` cgroup holding one sandbox: at most ``limit`` processes and threads in it, counted
    by the kernel, whatever user the sandbox maps to. ``None`` root: the limit comes only from
    RLIMIT_NPROC (effective when grading as an ordinary user)."""

    def __init__(self, limit: int = SANDBOX_PROCESSES) -> None:
        self.limit = limit
        root = pids_cgroup_root() if os.geteuid() == 0 else None
        if root is not None:
            version = "v2" if (root / "cgroup.controllers").is_file() else "v1"
            try:
                self._make((root, version), kind="sandboxes", controller="pids",
                           unified_group=None, knobs={"pids.max": str(limit)})
            except OSError:
                self.path = None

    def allow(self, more: int) -> None:
        """Allow ``more`` processes and threads on top of those running now (the template's)."""
        if self.path is not None:
            current = int((self.path / "pids.current").read_text())
            (self.path / "pids.max").write_text(str(min(current + more, self.limit)))

    @staticmethod
    def describe(limit: int = SANDBOX_PROCESSES) -> str:
        if os.geteuid() == 0 and pids_cgroup_root() is not None:
            return f"a pids cgroup per sandbox (at most {limit} processes and threads)"
        if os.geteuid() != 0:
            return "RLIMIT_NPROC of the sandbox's user"
        return "NONE: grading as root without a writable pids cgroup (a fork bomb is stopped only by " \
               "the memory watchdog)"


def memory_cgroup_root() -> tuple[Path, str] | None:
    """Where a per-sandbox memory cgroup can be made, and its version: cgroup v2 with the memory
    controller, or v1's memory hierarchy, writable by this process (root)."""
    unified = Path("/sys/fs/cgroup")
    controllers = unified / "cgroup.controllers"
    if controllers.is_file() and "memory" in controllers.read_text().split() \
            and os.access(unified, os.W_OK):
        return unified, "v2"
    v1 = Path("/sys/fs/cgroup/memory")
    if (v1 / "memory.limit_in_bytes").is_file() and os.access(v1, os.W_OK):
        return v1, "v1"
    return None


class MemoryLimit(_Group):
    """A memory cgroup holding one sandbox (``kind`` "sandboxes") or one checker ("checkers"): the
    kernel counts everything it uses there — heap, page cache, and the tmpfs and shared memory the
    RSS watchdog cannot see — and stops it at ``limit`` bytes (its process is killed: that notebook
    fails alone). ``None`` root or limit: none is made (grading as an ordinary user, or without
    ``--memory-limit``)."""

    def __init__(self, limit: int | None, *, unified_group: Path | None = None,
                 kind: str = "sandboxes") -> None:
        """``unified_group``: the sandbox's cgroup v2 group if it has one already (its pids limit):
        in v2 a process is in one group, so the memory limit goes there too."""
        self.limit = limit
        found = memory_cgroup_root() if os.geteuid() == 0 and limit else None
        if found is not None and limit is not None:  # found: limit is set
            knob = "memory.max" if found[1] == "v2" else "memory.limit_in_bytes"
            try:
                self._make(found, kind=kind, controller="memory", unified_group=unified_group,
                           knobs={knob: str(int(limit)), "memory.swap.max": "0"})
            except OSError:
                self.path = None

    def used_bytes(self) -> int | None:
        """What the group uses now, as the kernel counts it."""
        knob = "memory.current" if self.version == "v2" else "memory.usage_in_bytes"
        try:
            return int((self.path / knob).read_text()) if self.path is not None else None
        except OSError:
            return None

    def oom_kills(self) -> int:
        """How many processes the kernel has killed in the group for passing its limit."""
        knob = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            lines = (self.path / knob).read_text().splitlines() if self.path is not None else []
        except OSError:
            return 0
        return sum(int(line.split()[1]) for line in lines if line.startswith("oom_kill "))

    @staticmethod
    def describe() -> str:
        found = memory_cgroup_root() if os.geteuid() == 0 else None
        if found is None:
            return ("none (not root, or no writable memory cgroup): the RSS watchdog, the "
                    "size-capped tmpfs and the checker's decode budget are the limits")
        return (f"a memory cgroup per sandbox (cgroup {found[1]}), counting heap, tmpfs and shared "
                "memory, at --memory-limit plus the template's footprint and its tmpfs; one per "
                "checker, its private tmpfs counted, at twice --memory-limit plus 1 GiB")


def cpu_cgroup_root() -> tuple[Path, str] | None:
    """Where a per-sandbox cpu cgroup can be made, and its version: cgroup v2 with the cpu
    controller, or v1's cpu hierarchy, writable by this process (root)."""
    unified = Path("/sys/fs/cgroup")
    controllers = unified / "cgroup.controllers"
    if controllers.is_file() and "cpu" in controllers.read_text().split() \
            and os.access(unified, os.W_OK):
        return unified, "v2"
    for v1 in (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpu,cpuacct")):
        if (v1 / "cpu.shares").is_file() and os.access(v1, os.W_OK):
            return v1, "v1"
    return None


_CPU_SAID = False  # the log says once that sandboxes share the CPU as the kernel's sessions do


def _say_no_cpu_share(why: str) -> None:
    global _CPU_SAID
    if not _CPU_SAID:
        _CPU_SAID = True
        import logging

        logging.getLogger("autograder").warning(
            "no cpu cgroup per sandbox (%s): a notebook's processes in many sessions get more of "
            "the CPU than an honest notebook's, the grader's share is not protected, and a timeout "
            "on a starved machine scores 0 like any other", why)


class CpuShare(_Group):
    """A cpu cgroup holding one sandbox, with the same weight as every other sandbox's, all of them
    in one parent group that weighs as one ordinary process (``SANDBOXES_WEIGHT``): the kernel
    shares the CPU between the grader's side and the sandboxes first, then between sandboxes, then
    between a sandbox's processes, so processes a notebook spreads over many sessions (``setsid``:
    autogroups weigh sessions, but only outside a cgroup of their own) or threads buy it no more
    than one busy loop. ``cores``: optionally at most that many CPUs' time (``cpu.max``). ``usage``
    says how much CPU the sandbox got and how long it waited for one. Where no cpu controller can
    be used (not root, no delegation) none is made and the log says so once."""

    def __init__(self, *, unified_group: Path | None = None, cores: float | None = None) -> None:
        self._live: dict[str, tuple[int, int]] = {}  # thread id -> (ns run, ns waited) last seen
        self._gone = (0, 0)  # what threads that have ended had run and waited
        found = cpu_cgroup_root() if os.geteuid() == 0 else None
        if found is None:
            _say_no_cpu_share("not root" if os.geteuid() != 0 else "no writable cpu controller")
            return
        period = 100_000
        if found[1] == "v2":
            knobs = {"cpu.weight": str(CPU_WEIGHT)}
            if cores:
                knobs["cpu.max"] = f"{int(cores * period)} {period}"
        else:
            knobs = {"cpu.shares": str(CPU_WEIGHT * 1024 // 100)}
            if cores:
                knobs.update({"cpu.cfs_period_us": str(period),
                              "cpu.cfs_quota_us": str(int(cores * period))})
        try:
            self._make(found, kind="sandboxes", controller="cpu", unified_group=unified_group,
                       knobs=knobs)
        except OSError as error:
            _say_no_cpu_share(f"cgroup {found[1]}: {error}")
            self.path = None

    def usage(self) -> tuple[float, float] | None:
        """Seconds the sandbox's threads have run, and waited runnable for a CPU (other load, or a
        quota), so far, as the scheduler counts them (``/proc/TID/schedstat``; a thread that ended
        counts what it had when last seen: call this often). None: no group."""
        if self.path is None:
            return None
        try:
            threads = set((self.path / ("tasks" if self.version == "v1" else "cgroup.threads"))
                          .read_text().split())
        except OSError:
            return None
        for tid in [t for t in self._live if t not in threads]:
            run, wait = self._live.pop(tid)
            self._gone = (self._gone[0] + run, self._gone[1] + wait)
        for tid in threads:
            try:
                run, wait = (int(x) for x in Path(f"/proc/{tid}/schedstat").read_text().split()[:2])
            except (OSError, ValueError):
                continue
            self._live[tid] = (run, wait)
        run = self._gone[0] + sum(r for r, _ in self._live.values())
        wait = self._gone[1] + sum(w for _, w in self._live.values())
        return run / 1e9, wait / 1e9

    @staticmethod
    def describe() -> str:
        found = cpu_cgroup_root() if os.geteuid() == 0 else None
        if found is None:
            return ("NONE (not root, or no writable cpu controller): a notebook's processes in "
                    "many sessions outweigh an honest notebook's, the grader's CPU share is not "
                    "protected, and a timeout on a starved machine scores 0 like any other")
        return (f"a cpu cgroup per sandbox (cgroup {found[1]}), every sandbox the same weight, all "
                "of them together one ordinary process's against the grader and its checkers; a "
                "cell that times out while its sandbox waited for a CPU is a grader fault "
                "(run again once, then failed for review), never a score")


def _remove_cgroup(path: Path | None, timeout_s: float = 5) -> Path | None:
    """Delete a cgroup once its processes are gone; what is left (None: removed or none)."""
    deadline = time.monotonic() + timeout_s
    while path is not None:
        try:
            path.rmdir()
            return None
        except OSError:
            if time.monotonic() > deadline:
                return path
            time.sleep(0.05)
    return None


def _enable_controller(root: Path, controller: str) -> None:
    control = root / "cgroup.subtree_control"
    if controller not in control.read_text().split():
        control.write_text(f"+{controller}")
