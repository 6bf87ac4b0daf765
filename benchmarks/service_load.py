"""Load on `autograder serve`: a burst of students submitting at once, against batch `autograder grade`.

    python benchmarks/service_load.py [--students N] [--workers W] [--concurrency C]
                                      [--poll-interval S] [--worker-nice N] [--keep DIR]
                                      [--worker-processes K [--postgresql] [--faults] [--lease-s S]]

Builds a temporary course (``tests/support/service_course.py``, ``make_course``: 01_strides and 02_einops released, N
students s000... on the roster), starts ``autograder serve`` on it standalone (``Service``, course
tokens, W workers), and lets every student submit one notebook in the same instant from a bounded
asyncio client (``lean_http``: C keep-alive connections, a tenth of httpx's CPU per request): students alternate between the two assignments, four in five
submit the reference solution and every fifth one of the catalogue's wrong answers (in turn). Each
student then polls its submission as the page does (when the service says: ``poll_after_s``; or every
S seconds with ``--poll-interval S``) until it is done, while a probe on
its own connection asks for a status (``GET api/submissions/<id>``) back to back, 10 times a second,
for the whole burst. Checks that all N were accepted (202) and graded exactly once (the service's
database: N rows, each ``done`` with ``graded_count == 1``). Then grades the same N notebooks with
batch ``autograder grade`` (same worker count) in a fresh copy of the course, and checks that every
student's score is the one the service gave (exit status 1 if not, or if anything was lost).

Prints time-to-feedback p50/p95 (accept to done as the polling client saw it, and received_at to
finished_at in the database), the status request's latency during the burst, the throughput of both
and their ratio, the CPU the client and the web process took, and the load average (the machine may
be shared). ``--worker-nice N`` is an experiment: the service's worker with its sandboxes, and the batch
run, at niceness N, the web process at this script's.

``--worker-processes K``: the web process alone (``serve --no-worker``) and K ``autograder worker``
processes, each with its own state folder as on K machines, sharing W sandboxes between them, and
each told its share of the CPUs (``--cpus``, so that K processes do not each start the machine's
worth of torch threads);
``--postgresql`` puts the queue on a private PostgreSQL cluster (``tests/support/postgres_cluster.py``).
``--faults`` (K >= 3): mid-burst the first worker's machine dies (``kill -9`` of its process group
while a notebook runs), the second freezes (SIGSTOP for 2.5 leases while a notebook runs, then SIGCONT:
its late results must be refused), and the last starts only after the kill. Then nothing may be
failed or a grader error, and every submission is still graded exactly once with batch's score.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nbformat
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))
sys.path.insert(0, str(REPO / "benchmarks"))

from lean_http import LeanClient, LeanHTTPError  # noqa: E402
from postgres_cluster import postgres_cluster  # noqa: E402
from service_course import ASSIGNMENTS, Service, WorkerProcess, make_course  # noqa: E402
from sqlalchemy import select  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from autograder.authoring import samples  # noqa: E402
from autograder.authoring.release import nbgrader_environment  # noqa: E402
from autograder.course.nbgrader import load_course  # noqa: E402
from autograder.service.schema import SubmissionRow  # noqa: E402
from autograder.service.store import Store, default_url  # noqa: E402

WRONG_EVERY = 5  # every fifth student submits a catalogue wrong answer
PROBE_PAUSE_S = 0.1


@dataclass
class Submission:
    student: str
    assignment: str
    variant: str  # "reference" or the catalogue's wrong-answer name
    content: bytes
    token: str = ""
    status: int | None = None  # the POST's HTTP status
    refusal: str = ""
    id: int | None = None
    sent_at: float = 0.0
    accepted_at: float = 0.0
    done_at: float = 0.0
    state: str = ""
    score: float | None = None
    polls: int = 0


def renice_worker(serve_pid: int, niceness: int, stop: threading.Event) -> None:
    """``--worker-nice``: keep the worker and everything it starts (sandboxes) at ``niceness``."""
    while not stop.is_set():
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(serve_pid).children():
                if "autograder.service.worker" in " ".join(child.cmdline()):
                    for proc in (child, *child.children(recursive=True)):
                        with contextlib.suppress(psutil.Error):
                            if proc.nice() < niceness:
                                proc.nice(niceness)
        stop.wait(0.5)


def build_class(course: Path, students: int) -> list[Submission]:
    """One notebook per student: the reference, or (every WRONG_EVERY-th) a catalogue wrong answer."""
    reference = {a: nbformat.writes(samples.reference_notebook(a, course_root=course)).encode()
                 for a in ASSIGNMENTS}
    wrong = {a: itertools.cycle(samples.load_catalogue(a, course_root=REPO)[0]) for a in ASSIGNMENTS}
    out = []
    for index in range(students):
        assignment = ASSIGNMENTS[index % len(ASSIGNMENTS)]
        if index % WRONG_EVERY == WRONG_EVERY - 1:
            entry = next(wrong[assignment])
            nb = samples.student_notebook(assignment, entry["replace"], course_root=course)
            out.append(Submission(f"s{index:03d}", assignment, entry["name"],
                                  nbformat.writes(nb).encode()))
        else:
            out.append(Submission(f"s{index:03d}", assignment, "reference", reference[assignment]))
    return out


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank), nan for no values."""
    if not values:
        return float("nan")
    ranked = sorted(values)
    return ranked[min(len(ranked) - 1, max(0, round(q / 100 * len(ranked) + 0.5) - 1))]


def ms(values: list[float], q: float) -> str:
    return f"{1000 * pct(values, q):5.0f} ms"


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_snapshot(serve_pid: int) -> dict[str, float]:
    """CPU seconds so far of the whole machine (busy), this client and the service's web process."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    out = {"machine": machine_cpu(), "client": me.ru_utime + me.ru_stime, "web": 0.0}
    with contextlib.suppress(psutil.NoSuchProcess):
        times = psutil.Process(serve_pid).cpu_times()
        out["web"] = times.user + times.system
    return out


async def burst(url: str, subs: list[Submission], *, concurrency: int, poll_s: float,
                deadline_s: float) -> tuple[list[tuple[float, float]], float, float]:
    """Submit everything at once, poll each until done; returns the probe's (when, latency) pairs
    (monotonic, s) and the probe's window (start, end)."""
    pending = len(subs)
    all_done = asyncio.Event()
    accepted: list[Submission] = []
    first_accept = asyncio.Event()
    give_up = time.monotonic() + deadline_s

    async def student(http: LeanClient, sub: Submission) -> None:
        nonlocal pending
        auth = {"Authorization": f"Bearer {sub.token}"}
        try:
            sub.sent_at = time.monotonic()
            reply = await http.post("api/submissions", params={"filename": f"{sub.assignment}.ipynb"},
                                    content=sub.content, headers=auth)
            sub.accepted_at = time.monotonic()
            sub.status = reply.status_code
            if reply.status_code != 202:
                sub.refusal = reply.text[:300]
                return
            sub.id = reply.json()["id"]
            accepted.append(sub)
            first_accept.set()
            wait = poll_s if poll_s > 0 else 1.0
            while time.monotonic() < give_up:
                await asyncio.sleep(wait)
                reply = await http.get(f"api/submissions/{sub.id}", headers=auth)
                sub.polls += 1
                if reply.status_code != 200:
                    continue
                view = reply.json()
                if poll_s <= 0:  # as the page (app.js): when the service says (poll_after_s)
                    wait = float(view.get("poll_after_s") or 3.0)
                if view["state"] in ("done", "failed"):
                    sub.done_at, sub.state, sub.score = time.monotonic(), view["state"], \
                        view.get("score")
                    return
        except LeanHTTPError as error:
            sub.refusal = sub.refusal or f"{type(error).__name__}: {error}"
        finally:
            pending -= 1
            if pending == 0:
                all_done.set()
                first_accept.set()

    latencies: list[tuple[float, float]] = []
    window = [0.0, 0.0]

    async def probe() -> None:
        """One connection of its own (no wait for the students' pool): status, back to back."""
        await first_accept.wait()
        window[0] = time.monotonic()
        async with LeanClient(url, connections=1) as http:
            for number in itertools.count():
                if all_done.is_set():
                    break
                sub = accepted[number % len(accepted)]
                started = time.perf_counter()
                reply = await http.get(f"api/submissions/{sub.id}",
                                       headers={"Authorization": f"Bearer {sub.token}"})
                latencies.append((time.monotonic(), time.perf_counter() - started))
                if reply.status_code != 200:
                    raise LeanHTTPError(f"status probe: {reply.status_code} {reply.text[:200]}")
                await asyncio.sleep(PROBE_PAUSE_S)
        window[1] = time.monotonic()

    async with LeanClient(url, connections=concurrency) as http:
        probing = asyncio.create_task(probe())
        await asyncio.gather(*(student(http, sub) for sub in subs))
        await probing
    return latencies, window[0], window[1]


def db_rows(url: str) -> list[SubmissionRow]:
    return Store(url).history()


def started_on(store: Store, worker: str) -> bool:
    """Whether a notebook claimed by ``worker`` is running in a sandbox now (a cheap query)."""
    with Session(store.engine) as session:
        return session.scalar(select(SubmissionRow.id).where(
            SubmissionRow.state == "running", SubmissionRow.claimed_by == worker,
            SubmissionRow.lease_started).limit(1)) is not None


@dataclass
class Faults:
    """What ``--faults`` did, when (seconds after the first 202), and what the workers logged."""
    events: list[str]
    refused: int = 0  # late results the frozen worker offered, refused
    requeued: int = 0  # "queued again" lines: expired leases put back


def inject_faults(store: Store, workers: list[WorkerProcess], start_late: Callable[[], WorkerProcess],
                  lease_s: float, t0: float, stop: threading.Event, out: Faults) -> None:
    """Kill the first worker mid-notebook, freeze the second past its lease, start the last late."""
    def wait_started(worker: WorkerProcess) -> bool:
        name = worker.worker_id()
        while not stop.is_set():
            if started_on(store, name):
                return True
            stop.wait(0.05)
        return False

    if not wait_started(workers[0]):
        return
    workers[0].signal_group(signal.SIGKILL)
    out.events.append(f"{time.monotonic() - t0:.1f} s: kill -9 of worker 1 (a notebook running)")
    workers.append(start_late())
    out.events.append(f"{time.monotonic() - t0:.1f} s: worker {len(workers)} started late")
    if not wait_started(workers[1]):
        return
    workers[1].signal_group(signal.SIGSTOP)
    out.events.append(f"{time.monotonic() - t0:.1f} s: SIGSTOP of worker 2 (a notebook running)")
    stop.wait(2.5 * lease_s)
    workers[1].signal_group(signal.SIGCONT)
    out.events.append(f"{time.monotonic() - t0:.1f} s: SIGCONT of worker 2, {2.5 * lease_s:g} s later")


def machine_cpu() -> float:
    fields = [float(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def batch_grade(root: Path, subs: list[Submission], workers: int, *, niceness: int | None = None
                ) -> tuple[float, dict[str, float], float]:
    """The same notebooks in ``submitted/`` of a fresh copy, ``autograder grade``: its seconds, each
    student's score, the machine's busy CPU seconds meanwhile."""
    for sub in subs:
        path = root / "submitted" / sub.student / sub.assignment / f"{sub.assignment}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(sub.content)
    env = nbgrader_environment({"AUTOGRADER_ALLOW_CPU": "1"})
    machine = machine_cpu()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "autograder.cli", "--course-root", str(root), "grade",
                    *ASSIGNMENTS, "--workers", str(workers), "--allow-cpu", "--no-progress",
                    "--memory-limit", "4", "--notebook-timeout", "600"],
                   check=True, env=env, stdout=subprocess.DEVNULL,
                   preexec_fn=None if niceness is None else lambda: os.nice(niceness - os.nice(0)))
    seconds = time.perf_counter() - started
    cpu = machine_cpu() - machine
    found = {}
    with load_course(root).gradebook() as gb:
        for assignment in ASSIGNMENTS:
            for submission in gb.find_assignment(assignment).submissions:
                found[submission.student.id] = float(submission.score)
    return seconds, found, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=300)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    parser.add_argument("--concurrency", type=int, default=50, help="client connections")
    parser.add_argument("--poll-interval", type=float, default=0.0, metavar="S",
                        help="each student's status polling every S seconds (default 0: as the "
                             "page does, when the service says: poll_after_s)")
    parser.add_argument("--deadline", type=float, default=3600.0, metavar="S",
                        help="give up on submissions not graded by then")
    parser.add_argument("--worker-nice", type=int, default=None, metavar="N",
                        help="experiment: run the service's worker and its sandboxes at niceness N "
                             "(the web process keeps this script's)")
    parser.add_argument("--keep", type=Path, default=None, help="keep the courses in this directory")
    parser.add_argument("--worker-processes", type=int, default=0, metavar="K",
                        help="serve --no-worker and K `autograder worker` processes (default 0: the "
                             "service's own worker)")
    parser.add_argument("--postgresql", action="store_true",
                        help="the queue on a private PostgreSQL cluster (default: SQLite)")
    parser.add_argument("--faults", action="store_true",
                        help="kill -9 one worker, freeze another past its lease, start one late "
                             "(needs --worker-processes 3 or more)")
    parser.add_argument("--lease-s", type=float, default=10.0, metavar="S",
                        help="the worker processes' lease (default 10)")
    args = parser.parse_args()
    if args.faults and args.worker_processes < 3:
        parser.error("--faults needs --worker-processes 3 or more")
    if args.worker_processes and args.workers < args.worker_processes:
        parser.error("--workers is the sandboxes of all worker processes together: at least one each")
    with contextlib.ExitStack() as stack:
        url = None
        if args.postgresql:
            url = stack.enter_context(postgres_cluster()).url
        return run(args, url)


def run(args: argparse.Namespace, db_url: str | None) -> int:

    base = Path(args.keep or tempfile.mkdtemp(prefix="service-load-"))
    service_root, batch_root = base / "service", base / "batch"
    for root in (service_root, batch_root):
        if root.exists():
            shutil.rmtree(root)
    load_start = loadavg()
    students = [f"s{i:03d}" for i in range(args.students)]
    make_course(service_root, students=students)
    shutil.copytree(service_root, batch_root)  # before the service writes anything into it
    subs = build_class(service_root, args.students)
    wrong = sum(s.variant != "reference" for s in subs)
    split = [args.workers // args.worker_processes + (i < args.workers % args.worker_processes)
             for i in range(args.worker_processes)]
    cpus = len(os.sched_getaffinity(0))
    # as on K machines, each worker process is told its share of this one's CPUs (--cpus: its
    # notebooks' torch threads), not the whole machine K times over
    shares = [max(1, round(cpus * n / args.workers)) for n in split]
    where = (f"{args.worker_processes} worker processes ({'+'.join(map(str, split))} sandboxes, "
             f"--cpus {'+'.join(map(str, shares))}) on "
             f"{'PostgreSQL' if db_url else 'SQLite'}{', with faults' if args.faults else ''}"
             if args.worker_processes else "the service's own worker")
    print(f"{args.students} students, one notebook each ({', '.join(ASSIGNMENTS)} alternating; "
          f"{wrong} catalogue wrong answers); {os.cpu_count()} CPUs, {args.workers} workers, {where}, "
          f"{args.concurrency} connections, polling "
          f"{'as the page does' if args.poll_interval <= 0 else f'every {args.poll_interval:g} s'}; "
          f"niceness {os.nice(0)}{'' if args.worker_nice is None else f', worker and batch {args.worker_nice}'}; "
          f"courses in {base}")

    state = service_root / ".service"
    url = db_url or default_url(state)
    service = Service(service_root, workers=args.workers, db_url=db_url,
                      extra=("--no-worker",) if args.worker_processes else ()).start(timeout=120)
    logs = [base / f"worker{i + 1}.log" for i in range(args.worker_processes)]

    def worker(index: int) -> WorkerProcess:
        return WorkerProcess(service_root, url, base / f"worker{index + 1}", logs[index],
                             workers=split[index], lease_s=args.lease_s,
                             extra=("--cpus", str(shares[index])))

    workers = [worker(i) for i in range(args.worker_processes - bool(args.faults))]
    for process in workers:
        process.worker_id()  # started and grading (its course mirror made) before the burst
    faults = Faults([])
    stop_faults = threading.Event()
    stop_renice = threading.Event()
    if args.worker_nice is not None:
        threading.Thread(target=renice_worker, args=(service.process.pid, args.worker_nice,
                                                     stop_renice), daemon=True).start()
    try:
        tokens = service.tokens(*students)
        for sub in subs:
            sub.token = tokens[sub.student]
        load_before = loadavg()
        cpu_before = cpu_snapshot(service.process.pid)
        started = time.monotonic()
        if args.faults:
            threading.Thread(target=inject_faults, daemon=True, args=(
                Store(url), workers, lambda: worker(args.worker_processes - 1), args.lease_s,
                started, stop_faults, faults)).start()
        probes, probe_from, probe_to = asyncio.run(burst(
            service.url, subs, concurrency=args.concurrency, poll_s=args.poll_interval,
            deadline_s=args.deadline))
        burst_s = time.monotonic() - started
        cpu_after = cpu_snapshot(service.process.pid)
        load_burst = loadavg()
        rows = db_rows(url)
    finally:
        stop_faults.set()
        stop_renice.set()
        for process in workers:
            process.stop()
        service.stop()
    log_text = service.log.read_text(errors="replace") if service.log else ""
    worker_logs = "".join(log.read_text(errors="replace") for log in logs if log.exists())
    faults.refused = worker_logs.count("the lease expired before its result (refused)")
    faults.requeued = worker_logs.count("queued again")
    log_text += worker_logs

    accepted = [s for s in subs if s.status == 202]
    done = [s for s in accepted if s.state == "done"]
    first_accept = min((s.accepted_at for s in accepted), default=started)
    last_done = max((s.done_at for s in done), default=first_accept)
    last_accept = max((s.accepted_at for s in accepted), default=started)
    latencies = [lat for _, lat in probes]
    uploading = [lat for when, lat in probes if when <= last_accept]
    grading = [lat for when, lat in probes if when > last_accept]
    cpu = {k: cpu_after[k] - cpu_before[k] for k in cpu_before}
    observed = [s.done_at - s.accepted_at for s in done]
    posts = [s.accepted_at - s.sent_at for s in accepted]
    by_id = {r.id: r for r in rows}
    rows_done = [r for r in rows if r.state == "done" and r.finished_at is not None]
    in_db = [(r.finished_at - r.received_at).total_seconds() for r in rows_done]
    queued = [(r.started_at - r.received_at).total_seconds() for r in rows_done if r.started_at]
    running = [(r.finished_at - r.started_at).total_seconds() for r in rows_done if r.started_at]
    once = sum(r.graded_count == 1 for r in rows)
    not_done = {state: sum(r.state == state for r in rows) for state in ("failed", "error")}
    service_s = last_done - first_accept
    db_span = (max(r.finished_at for r in rows_done) - min(r.received_at for r in rows_done)
               ).total_seconds() if rows_done else float("nan")
    problems = []
    if len(accepted) != len(subs):
        problems.append(f"{len(subs) - len(accepted)} not accepted: " + "; ".join(
            f"{s.student} {s.status} {s.refusal}" for s in subs if s.status != 202)[:1000])
    if len(done) != len(accepted):
        problems.append(f"{len(accepted) - len(done)} accepted but not seen done: " + ", ".join(
            f"{s.student}#{s.id} {s.state or 'pending'} {s.refusal}"
            for s in accepted if s.state != "done")[:1000])
    if any(not_done.values()):
        problems.append(f"{not_done['failed']} failed and {not_done['error']} grader errors")
    if args.faults and len(faults.events) < 4:
        problems.append(f"the faults did not all happen: {faults.events}")
    if len(rows) != len(accepted) or once != len(rows) or len(rows_done) != len(rows) or \
            {s.id for s in accepted} != set(by_id):
        problems.append(f"database: {len(rows)} rows for {len(accepted)} accepted, "
                        f"{len(rows_done)} done, {once} with graded_count == 1")

    load_after_service = loadavg()
    batch_s, batch_scores, batch_cpu = batch_grade(batch_root, subs, args.workers,
                                                   niceness=args.worker_nice)
    load_end = loadavg()
    differ = [(s.student, s.assignment, s.variant, s.score, by_id[s.id].score if s.id in by_id
               else None, batch_scores.get(s.student)) for s in subs
              if s.id is None or s.id not in by_id or s.score != by_id[s.id].score
              or batch_scores.get(s.student) != s.score]
    if differ:
        problems.append(f"{len(differ)} students whose scores differ (service API, service DB, batch)")

    per_min_service = 60 * len(done) / service_s if service_s > 0 else float("nan")
    per_min_batch = 60 * len(batch_scores) / batch_s
    probe_s = probe_to - probe_from
    print(f"\naccepted (202)            : {len(accepted)}/{len(subs)} in "
          f"{last_accept - started:.1f} s (POST as the client saw it: p50 {pct(posts, 50):.2f} s, "
          f"p95 {pct(posts, 95):.2f} s, {args.concurrency} connections)")
    print(f"graded, none lost         : {len(done)}/{len(accepted)} seen done by polling; database: "
          f"{len(rows)} rows, {len(rows_done)} done, {once} with graded_count == 1")
    print(f"time to feedback, polled  : p50 {pct(observed, 50):6.1f} s  p95 {pct(observed, 95):6.1f} s"
          f"  max {max(observed, default=float('nan')):6.1f} s  (202 -> done seen)")
    print(f"time to feedback, DB      : p50 {pct(in_db, 50):6.1f} s  p95 {pct(in_db, 95):6.1f} s  "
          f"(received_at -> finished_at; of which queued p50 {pct(queued, 50):.1f} s, claimed "
          f"-> finished p50 {pct(running, 50):.1f} s)")
    print(f"status request in burst   : p50 {ms(latencies, 50)}  p95 {ms(latencies, 95)}  max "
          f"{ms(latencies, 100)}  ({len(latencies)} probes over {probe_s:.0f} s; "
          f"{sum(s.polls for s in subs)} student polls besides)")
    print(f"  while uploads arrive    : p50 {ms(uploading, 50)}  p95 {ms(uploading, 95)}  "
          f"({len(uploading)} probes)")
    print(f"  while grading only      : p50 {ms(grading, 50)}  p95 {ms(grading, 95)}  "
          f"({len(grading)} probes)")
    print(f"service ({args.workers} workers)       : {service_s:7.1f} s  {per_min_service:6.1f} "
          f"notebooks/minute (first 202 -> last done; DB {db_span:.1f} s)")
    print(f"batch autograder grade    : {batch_s:7.1f} s  {per_min_batch:6.1f} notebooks/minute "
          f"({args.workers} workers, fresh copy of the course, the whole command)")
    print(f"ratio service / batch     : {per_min_service / per_min_batch:.2f}")
    if args.worker_processes:
        print(f"failed / grader errors    : {not_done['failed']} / {not_done['error']}")
    if args.faults:
        print(f"faults                    : {'; '.join(faults.events)}")
        print(f"  recovered               : {faults.requeued} 'queued again' lines (expired leases "
              f"put back); {faults.refused} late result(s) of the frozen worker refused")
    print(f"same scores as batch      : {'yes' if not differ else 'NO'} ({len(subs)} students; "
          f"mean {statistics.fmean([s.score or 0 for s in done] or [0]):.2f})")
    print(f"{f'CPU busy (of {os.cpu_count()} cores)':<26}: service phase {cpu['machine'] / burst_s:.2f} "
          f"(this client {cpu['client'] / burst_s:.2f}, web process {cpu['web'] / burst_s:.2f}); "
          f"batch phase {batch_cpu / batch_s:.2f} (the machine is shared: other users included)")
    print(f"load average (1/5/15 min) : start {load_start}; burst start {load_before}, end "
          f"{load_burst}; batch start {load_after_service}, end {load_end}")
    errors = [line for line in log_text.splitlines() if "Traceback" in line or " ERROR" in line
              or "WARNING" in line or "exited with status" in line]
    print(f"service log               : {service.log} ({len(errors)} traceback/error/warning lines)")
    for line in errors[:10]:
        print(f"  {line[:200]}")
    for row in differ[:20]:
        print("  differs (student, assignment, variant, API, DB, batch):", row)
    for problem in problems:
        print(f"PROBLEM: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
