"""A real one-node Slurm cluster on localhost, for tests: the ``slurm_cluster`` fixture.

Session-scoped (``conftest.py`` re-exports it, so any test can ask for it). It needs root and Debian's
``slurm-wlm`` and ``munge`` (``make system-deps`` installs them). Everything lives in one temporary folder:

    <root>/munge/      munge.key (0400), munge.sock, munged.pid, munged.seed, munged.log
    <root>/slurm.conf  the whole configuration (no cgroup.conf: proctrack/linuxproc + task/none need none)
    <root>/state/      StateSaveLocation        <root>/spool/  SlurmdSpoolDir
    <root>/log/        slurmctld.log, slurmd.log and the daemons' own stderr

``munged``, ``slurmctld -D`` and ``slurmd -D`` run in the foreground as children of the test process,
each in its own session. The node is the real machine (``slurmd -C``: its CPUs and memory) under a fixed
name, with one partition ``debug``. No accounting database: ``sacct`` says "accounting storage is
disabled", so job states come from ``squeue`` while the controller remembers the job (MinJobAge).

Clients find the cluster through ``SLURM_CONF`` (set in ``os.environ`` for the session, restored at the
end; ``cluster.env`` has it too) and munge through ``AuthInfo=socket=...`` in slurm.conf. Teardown, even
after failing tests: cancel every job, wait for its step daemons, stop the daemons, then assert that no
process of this cluster is left.

When Slurm cannot start, the fixture fails under ``CI=true`` and skips with the reason elsewhere.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

PARTITION = "debug"
NODE = "autograder-node"
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sinfo", "squeue", "sbatch", "srun", "scancel", "scontrol", "munge")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


class ClusterError(RuntimeError):
    """The cluster could not start (the message names the daemon and quotes its log)."""


@dataclass
class SlurmCluster:
    """A running one-node cluster; ``env`` is what a client needs (``SLURM_CONF``)."""

    root: Path
    conf: Path
    node: str = NODE
    partition: str = PARTITION
    cpus: int = 1
    memory_mb: int = 0
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        """A Slurm client command against this cluster (``cluster.run("squeue", "-h")``)."""
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise ClusterError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def log(self, name: str, tail: int = 30) -> str:
        """The last ``tail`` lines of log/<name> (for failure messages)."""
        path = self.root / "log" / name
        if not path.is_file():
            return f"({path} does not exist)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-tail:])

    def node_state(self) -> str:
        done = self.run("sinfo", "-h", "-N", "-n", self.node, "-o", "%T", check=False)
        return done.stdout.strip() if done.returncode == 0 else f"sinfo failed: {done.stderr.strip()}"

    def job_ids(self) -> list[str]:
        done = self.run("squeue", "-h", "-o", "%A", check=False)
        return done.stdout.split() if done.returncode == 0 else []

    def step_processes(self) -> list[psutil.Process]:
        """Job step daemons of this cluster (``slurmstepd``, reparented to init, recognised by a socket
        or file in its spool folder) and everything they run."""
        found: dict[int, psutil.Process] = {}
        for proc in psutil.process_iter(["name"]):
            try:
                if proc.info["name"] != "slurmstepd":
                    continue
                paths = [c.laddr for c in proc.net_connections(kind="unix")]
                paths += [f.path for f in proc.open_files()]
                if any(isinstance(p, str) and p.startswith(str(self.root)) for p in paths):
                    found[proc.pid] = proc
                    found.update((c.pid, c) for c in proc.children(recursive=True))
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return _alive(found.values())

    def stray_processes(self) -> list[psutil.Process]:
        """Every process of this cluster still alive: the daemons with their children (slurmctld's
        slurmscriptd), any daemon whose command line names this cluster's folder, and the steps."""
        found: dict[int, psutil.Process] = {}
        for proc in self.processes.values():
            try:
                found[proc.pid] = psutil.Process(proc.pid)
                found.update((c.pid, c) for c in found[proc.pid].children(recursive=True))
            except psutil.NoSuchProcess:
                continue
        for proc in psutil.process_iter(["name", "cmdline"]):
            try:
                if proc.info["name"] in DAEMONS and any(str(self.root) in arg
                                                        for arg in proc.info["cmdline"] or ()):
                    found[proc.pid] = proc
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        found.update((p.pid, p) for p in self.step_processes())
        return _alive(found.values())


def _alive(processes) -> list[psutil.Process]:
    alive = []
    for proc in processes:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
        except psutil.NoSuchProcess:
            continue
    return alive


def _binary(name: str) -> str:
    """The full path of a Slurm or munge program (daemons live in /usr/sbin, which a non-root PATH
    may lack)."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        raise ClusterError(f"{name} is not installed")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _node_hardware() -> dict[str, str]:
    """``slurmd -C``: this machine's real CPUs, sockets, cores, threads and memory."""
    done = subprocess.run([_binary("slurmd"), "-C"], capture_output=True, text=True, timeout=30)
    first = done.stdout.splitlines()[0] if done.stdout else ""
    fields = dict(part.split("=", 1) for part in first.split() if "=" in part)
    wanted = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    if done.returncode != 0 or not all(k in fields for k in wanted):
        raise ClusterError(f"slurmd -C did not describe this node: {done.stdout}{done.stderr}")
    return {k: fields[k] for k in wanted}


def write_config(root: Path) -> tuple[Path, dict[str, str]]:
    """Write ``root/slurm.conf`` for a one-node cluster; return its path and the node's hardware.

    The choices that work in a container without systemd or cgroup delegation: proctrack/linuxproc,
    task/none, no accounting; select/cons_tres with CR_Core_Memory and DefMemPerCPU so that jobs share
    the node; free ports picked at start, so two sessions on one machine do not collide."""
    hardware = _node_hardware()
    host = socket.gethostname().split(".")[0]
    conf = root / "slurm.conf"
    cpus = int(hardware["CPUs"])
    node = " ".join(f"{k}={v}" for k, v in hardware.items())
    conf.write_text(f"""\
# A one-node test cluster written by tests/support/slurm_cluster.py.
ClusterName=autograder-test
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.sock
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
# no systemd, no cgroup delegation in a container: track processes by parentage, bind nothing
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# a job without --mem takes one CPU's share, not the whole node
DefMemPerCPU={int(hardware["RealMemory"]) // cpus}
ReturnToService=2
MinJobAge=300
KillWait=2
OverTimeLimit=0
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName={NODE} NodeAddr=127.0.0.1 {node} State=UNKNOWN
PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
""")
    return conf, hardware


def _check_prerequisites() -> None:
    missing = [name for name in (*DAEMONS, *CLIENTS)
               if shutil.which(name) is None and shutil.which(name, path="/usr/sbin:/sbin") is None]
    if missing:
        raise ClusterError(f"not installed: {', '.join(missing)} (Debian: apt-get install slurm-wlm "
                           "munge; `make system-deps` does it)")
    if os.geteuid() != 0:
        raise ClusterError("the test cluster runs slurmd as root (it launches jobs); run as root")


def _spawn(cluster: SlurmCluster, name: str, args: list[str]) -> None:
    out = open(cluster.root / "log" / f"{name}.stderr", "wb")
    proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=cluster.env, start_new_session=True)
    out.close()
    cluster.processes[name] = proc


def _wait(cluster: SlurmCluster, what: str, ready, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in cluster.processes.items():
            if proc.poll() is not None:
                raise ClusterError(f"{name} exited with {proc.returncode} while waiting for {what}:\n"
                                   f"{cluster.log(f'{name}.stderr')}\n{cluster.log(f'{name}.log')}")
        if ready():
            return
        time.sleep(0.2)
    raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}; node state "
                       f"{cluster.node_state()!r}\nslurmctld.log:\n{cluster.log('slurmctld.log')}\n"
                       f"slurmd.log:\n{cluster.log('slurmd.log')}")


def start_cluster(cluster: SlurmCluster) -> None:
    """Start munged, slurmctld and slurmd for ``cluster`` and wait for its node to be idle (what
    started before a failure stays in ``cluster.processes``, for ``stop_cluster``)."""
    _check_prerequisites()
    root = cluster.root
    root.chmod(0o755)  # munged wants every folder above its socket searchable by all
    for sub in ("munge", "state", "spool", "log", "run"):
        (root / sub).mkdir(mode=0o755)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    conf, hardware = write_config(root)
    cluster.cpus, cluster.memory_mb = int(hardware["CPUs"]), int(hardware["RealMemory"])
    munge = root / "munge"
    _spawn(cluster, "munged", [
        _binary("munged"), "--foreground", f"--socket={munge}/munge.sock", f"--key-file={key}",
        f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log",
        f"--seed-file={munge}/munged.seed"])
    _wait(cluster, "munged's socket", lambda: (munge / "munge.sock").exists())
    _spawn(cluster, "slurmctld", [_binary("slurmctld"), "-D", "-f", str(conf)])
    _wait(cluster, "slurmctld to answer", lambda: cluster.run("sinfo", "-h", check=False).returncode == 0)
    _spawn(cluster, "slurmd", [_binary("slurmd"), "-D", "-N", NODE, "-f", str(conf)])
    _wait(cluster, f"node {NODE} to be idle", lambda: cluster.node_state() == "idle")


def stop_cluster(cluster: SlurmCluster) -> list[str]:
    """Cancel every job, then stop the daemons; return a description of any process left alive."""
    if cluster.processes.get("slurmctld") and cluster.processes["slurmctld"].poll() is None:
        cluster.run("scancel", "--user", "root", check=False)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            if not cluster.job_ids() and not cluster.step_processes():
                break
            time.sleep(0.2)
    for name in reversed(DAEMONS):  # slurmd, slurmctld, then munged
        proc = cluster.processes.get(name)
        if proc is None or proc.poll() is not None:
            continue
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=STOP_TIMEOUT_S)
    left = cluster.stray_processes()
    for proc in left:  # never leave anything behind, but report it: the test run fails
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            pass
    return [f"{p.pid} {' '.join(p.cmdline()) if p.is_running() else '?'}" for p in left]


def _cannot_start(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the Slurm test cluster could not start (CI=true, so this fails): {reason}",
                    pytrace=False)
    pytest.skip(f"no Slurm test cluster: {reason}")


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """A running one-node Slurm cluster (see the module docstring); SLURM_CONF points at it."""
    root = Path(tempfile.mkdtemp(prefix="slurm-"))  # short: a unix socket path has 107 bytes at most
    cluster = SlurmCluster(root=root, conf=root / "slurm.conf")
    with pytest.MonkeyPatch.context() as patch:
        try:
            try:
                start_cluster(cluster)
            except (ClusterError, OSError, subprocess.SubprocessError) as error:
                _cannot_start(str(error))
            patch.setenv("SLURM_CONF", str(cluster.conf))
            yield cluster
        finally:
            left = stop_cluster(cluster)
            logs = root / "log"
            shutil.rmtree(root, ignore_errors=True)
            assert not left, f"Slurm test cluster left processes running: {left} (logs were in {logs})"
