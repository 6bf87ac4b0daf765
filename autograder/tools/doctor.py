"""``autograder doctor``: what this grading machine can do — device, versions, and GPU checks.

Reports the torch and CUDA versions, the device that ``--device auto`` would pick, and for every
assignment in the gradebook (or every released exercise) whether its GPU-only grade cells (grade ids
ending in ``_gpu``) can run here, must be graded with ``--allow-cpu``, or will score 0.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder import ALLOW_CPU_ENV


@dataclass
class Diagnosis:
    lines: list[tuple[str, str]] = field(default_factory=list)  # (what, finding)
    gpu_assignments: dict[str, list[str]] = field(default_factory=dict)
    cuda: bool = False
    sandbox_ok: bool | None = None  # None: not checked

    def add(self, what: str, finding: str) -> None:
        self.lines.append((what, finding))


def diagnose(*, course_root: Path = Path("."), db_url: str | None = None,
             check_processes: bool = True) -> Diagnosis:
    """Inspect this machine and the course; never initialises CUDA in the checker forkserver."""
    import nbgrader
    import torch

    import autograder

    result = Diagnosis()
    result.add("autograder", autograder.__version__)
    result.add("python", platform.python_version())
    result.add("torch", f"{torch.__version__} (CUDA build: {torch.version.cuda or 'none'})")
    result.add("nbgrader", nbgrader.__version__)
    result.add("CPU cores", str(os.cpu_count()))
    result.cuda = torch.cuda.is_available()
    if result.cuda:
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            result.add(f"cuda:{index}", f"{props.name}, {props.total_memory / 2**30:.0f} GiB, "
                       f"compute capability {props.major}.{props.minor}")
        result.add("--device auto", "cuda")
    else:
        result.add("--device auto", "cpu (no CUDA device visible)")
    result.add(ALLOW_CPU_ENV, os.environ.get(ALLOW_CPU_ENV, "unset"))
    if check_processes:
        from autograder.grading import probe_forkserver

        started = time.perf_counter()
        probe = probe_forkserver()  # starts the checker forkserver: its imports
        warm = time.perf_counter() - started
        started = time.perf_counter()
        probe = probe_forkserver()
        result.add("warm template", f"ready in {warm:.1f} s; a forked child in "
                   f"{(time.perf_counter() - started) * 1000:.0f} ms, "
                   f"{probe.resident_bytes / 2**20:.0f} MiB resident")
    if check_processes:
        result.sandbox_ok = _check_sandbox(result, course_root=course_root)
    try:
        from autograder.course.nbgrader import load_course
        from autograder.grading import gpu_cells

        course = load_course(course_root, db_url=db_url)
        for assignment in course.gradebook_assignments():
            cells = gpu_cells(course, assignment)
            if cells:
                result.gpu_assignments[assignment] = cells
                if result.cuda:
                    verdict = "run on CUDA"
                else:
                    verdict = "NO CUDA: score 0, reported as 'not run: no GPU', unless graded with --allow-cpu"
                result.add(f"GPU checks of {assignment}", f"{', '.join(cells)}: {verdict}")
            else:
                result.add(f"GPU checks of {assignment}", "none (CPU only)")
    except Exception as error:  # noqa: BLE001 - the machine report is still useful without a course
        result.add("course", f"not inspected: {error}")
    return result


_SANDBOX_PROBE = """
import os, socket
_probe = {"uid": os.getuid(), "processes": sum(p.isdigit() for p in os.listdir("/proc")),
          "course_entries": sorted(os.listdir(COURSE)) if os.path.isdir(COURSE) else [],
          "seccomp": [line.split(":", 1)[1].strip() for line in open("/proc/self/status")
                      if line.startswith("Seccomp:")]}
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    _probe["network"] = "open"
except OSError as error:
    _probe["network"] = f"closed ({error.strerror or error})"
"""


def _check_sandbox(result: Diagnosis, *, course_root: Path) -> bool:
    """Start one sandbox, run a probe cell in it, report what it can see and reach."""
    import shutil
    import socket

    from autograder.errors import GradingError
    from autograder.grading import CHECKER_UID
    from autograder.sandbox import channel, seccomp
    from autograder.sandbox.cgroups import CpuShare, MemoryLimit, ProcessLimit
    from autograder.sandbox.host import SANDBOX_UID, SandboxProcess, python_dirs

    bwrap = shutil.which("bwrap")
    if bwrap is None:
        result.add("sandbox", "NOT AVAILABLE: bubblewrap (bwrap) is not installed; grading stops "
                   "unless --no-sandbox (Debian: apt-get install bubblewrap)")
        return False
    listener = socket.create_server(("127.0.0.1", 0))
    box = SandboxProcess()
    started = time.perf_counter()
    try:
        box.start()
        cpu_group = box.cpu is not None and box.cpu.path is not None
        box.wait_ready()
        ready = time.perf_counter() - started
        data, kill = box.start_notebook({"id": 0, "env": {}, "threads": 1, "student_rss_bytes": None,
                                    "rlimits": {}}, [])
        sandbox = channel.SandboxChannel(data, kill, memmap_dir="/tmp")
        code = _SANDBOX_PROBE.replace("COURSE", repr(str(Path(course_root).resolve()))) \
            .replace("PORT", str(listener.getsockname()[1]))
        outputs, _ = sandbox.run_cell(code, 30)
        probe = sandbox.lookup(["_probe"]).get("_probe")
        sandbox.kill("probe done")
    except (GradingError, channel.SandboxDied, OSError) as error:
        result.add("sandbox", f"NOT WORKING: {error}; grading stops unless --no-sandbox")
        return False
    finally:
        box.close()
        listener.close()
    if not isinstance(probe, dict):
        result.add("sandbox", f"NOT WORKING: the probe cell failed: {outputs}")
        return False
    venv = {Path(p).name for p in python_dirs() if Path(p).parent == Path(course_root).resolve()}
    leaked = [name for name in probe["course_entries"] if name not in venv]
    isolated = bool(box.info.get("isolated"))
    ok = probe["network"].startswith("closed") and not leaked and probe["processes"] < 10 and isolated
    result.add("sandbox", f"{'works' if ok else 'LEAKS'}: bubblewrap, warm in {ready:.1f} s")
    result.add("sandbox network", f"{probe['network']} (a listener on 127.0.0.1 of this machine)")
    seen = f"VISIBLE: {', '.join(leaked)}" if leaked else \
        f"hidden (only {', '.join(sorted(venv)) or 'nothing'}: the Python environment)"
    result.add("sandbox files", f"course folder {seen}; runs as uid {probe['uid']} in its own "
               "user namespace")
    result.add("sandbox processes", f"{probe['processes']} visible (its own PID namespace); limit: "
               f"{ProcessLimit.describe()}")
    result.add("sandbox notebooks", "each in its own user, PID, mount and IPC namespace: fresh /tmp, "
               "/dev/shm and job folder, the template's /proc covered, no signal reaches it"
               if isolated else
               "NOT ISOLATED from their template (nested namespaces refused by this kernel)")
    result.add("sandbox memory", MemoryLimit.describe())
    result.add("sandbox cpu", CpuShare.describe() if cpu_group else
               "NONE in force here: " + CpuShare.describe().removeprefix("NONE "))
    filtered = probe.get("seccomp") == ["2"]  # /proc/self/status: 2 is a filter in force
    result.add("sandbox seccomp", f"in force (a filter refusing {len(seccomp.denied_numbers(seccomp.machine()))} syscalls "
               "and every other ABI's: keyring, perf, io_uring, bpf, modules, ...)" if filtered
               else f"NOT IN FORCE (Seccomp: {probe.get('seccomp')}): the kernel keyring and the "
               "other interfaces of seccomp.py are reachable from a notebook")
    checker = _check_checker(course_root)
    result.add("checker", checker)
    root = os.geteuid() == 0
    result.add("uids", f"grader {os.geteuid()}; checker {CHECKER_UID if root else os.geteuid()}; "
               f"sandbox {probe['uid']} inside its user namespace, "
               f"{SANDBOX_UID if root else os.geteuid()} outside it, without capabilities")
    return ok and filtered and not checker.startswith("NOT")


def _check_checker(course_root: Path) -> str:
    """Confine a throwaway child as a checker is confined; report what it could still see."""
    import json
    import tempfile

    from autograder.grading import confine

    course = str(Path(course_root).resolve())
    with tempfile.TemporaryDirectory(prefix="autograder-doctor-") as scratch:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read)
                done = confine(workdir=os.path.join(scratch, "work"), scratch=scratch, hidden=(course,))
                try:
                    listed = os.listdir(course)
                except (FileNotFoundError, PermissionError):  # a course under a private /tmp: not there
                    listed = []
                seen = {"done": done, "course": listed, "uid": os.geteuid()}
            except Exception as error:  # noqa: BLE001 - reported
                seen = {"error": f"{type(error).__name__}: {error}"}
            os.write(write, json.dumps(seen).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as handle:
            seen = json.loads(handle.read() or "{}")
        os.waitpid(pid, 0)
    if "error" in seen or "done" not in seen:
        return f"NOT CONFINED: {seen.get('error', 'no answer')}; grading records no notebook"
    from autograder.grading import code_folders

    code = {Path(p).name for p in code_folders() if str(Path(p).parent) == course}
    leaked = sorted(set(seen["course"]) - code)
    shown = f"VISIBLE: {', '.join(leaked)}" if leaked else \
        f"only {', '.join(sorted(code))} (the code it runs, read-only)" if code else "empty"
    return f"{seen['done']}; the course folder as it sees it: {shown}"


def render(diagnosis: Diagnosis) -> str:
    width = max(len(what) for what, _ in diagnosis.lines)
    return "\n".join(f"{what:<{width}}  {finding}" for what, finding in diagnosis.lines)


def diagnose_slurm(options, *, course_root: Path = Path("."),
                   timeout_s: float = 300) -> list[tuple[str, bool, str]]:
    """Can ``grade --executor slurm`` run with ``options`` (a ``SlurmOptions``)? The rows of
    ``autograder.grading.slurm.doctor.doctor_slurm`` (sinfo, partition, GPU gres, accounting, a tiny test job whose
    folder is under the course root, which the nodes must share), then where GPU checks will run."""
    from autograder.grading.slurm.doctor import doctor_slurm

    folder = Path(course_root).resolve() / ".slurm" / "doctor"
    rows = doctor_slurm(options, folder=folder, timeout_s=timeout_s)
    if options.gpus_per_task:
        rows.append(("GPU checks", True, f"run on CUDA on the nodes ({options.gpus_per_task} GPU(s) "
                                         "per array task)"))
    else:
        rows.append(("GPU checks", True, "no GPUs requested (gpus_per_task=0): GPU-only checks score"
                                         " 0 (reported as 'not run: no GPU') unless graded with --allow-cpu"))
    return rows
