"""The service's worker process: takes queued submissions and grades them, in its own workspace.

The only process of the service that starts sandboxes. Locally it runs ``grade_stream``: the sandboxes
stay warm, and a submission starts as soon as a sandbox is free (up to ``2 × workers`` claimed at
once, one per student, fair: ``Store.claim``). With ``--executor slurm`` it grades batches with
``grade`` on the cluster. Any number of workers, on any machines that reach the database, each with
its own state folder (its course mirror): every claim is a lease its heartbeat renews, each result is
written once and only under a live lease (``Store.finish``); a worker that dies or freezes leaves
leases that expire, and any worker puts those back in the queue (``Store.recover``). A fault of the
grader (``SubmissionResult.grader_fault``) is retried, then shown as a grader error, never a score.

    python -m autograder.service.worker --options JSON   (serve.worker_command writes it)
    autograder worker --service-db URL --state DIR [flags]   (cli/service.py)
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from autograder.authoring import samples
from autograder.course.nbgrader import load_course
from autograder.errors import DeviceError
from autograder.grading import (
    GradeOptions,
    SubmissionResult,
    executor_class,
    gpu_cells,
    grade,
    grade_stream,
)
from autograder.service.landing import land, nbgrader_timestamp
from autograder.service.lifetime import die_with_parent
from autograder.service.options import ServiceOptions
from autograder.service.results import graded_feedback
from autograder.service.schema import PROBE_OK, ClaimedSubmission
from autograder.service.settings import ServiceSettings
from autograder.service.store import Store, default_url
from autograder.service.workspace import Workspace, definitions_fingerprint

log = logging.getLogger("autograder.service.worker")
IDLE_S = 0.1  # how long the stream waits when the queue is empty
RECHECK_S = 30.0  # how often the course's assignment definitions are compared with the mirror
PROBE_STUDENT = "autograder-probe"  # the start-up probe's student, in the workspace only


class Worker:
    """Grades what the queue holds until ``stop`` is set."""

    def __init__(self, options: ServiceOptions) -> None:
        if options.state_dir is None:
            raise TypeError("a worker needs its own state folder (ServiceOptions.state_dir)")
        self.options = options
        self.id = f"worker-{uuid.uuid4().hex[:12]}"
        Path(options.state_dir).mkdir(parents=True, exist_ok=True)
        self.store = Store(options.db_url or default_url(options.state_dir),
                           lease_s=options.lease_s)
        self.course = load_course(options.course_root)
        self.settings = ServiceSettings.of(self.course)
        self.workspace = Workspace(self.course, Path(options.state_dir) / "workspace")
        self.inflight: dict[tuple[str, str], ClaimedSubmission] = {}
        self._inflight_lock = threading.Lock()
        self.grading = GradeOptions.of(**options.grading)  # checked now: a wrong setting stops the start
        if options.gpu:
            require_cuda()
        self.skip: tuple[str, ...] = ()  # assignments left to workers with a GPU
        self._gradebook: Gradebook | None = None  # the workspace's, for feedback (_read_gradebook)
        self.probe: str | None = None  # the start-up probe: None until graded, PROBE_OK, or why not
        self._probe_assignment: str | None = None
        self._probe_started = 0.0

    def run(self, stop: threading.Event) -> None:
        log.info("%s: grading (pid %d, leases of %g s)", self.id, os.getpid(), self.options.lease_s)
        self._route()
        self.store.register_worker(self.id, host=socket.gethostname(), pid=os.getpid(),
                                   gpu=self.options.gpu or self.grading.device == "cuda",
                                   skip=self.skip, live_s=self.options.lease_s)
        self._recover()
        heartbeat = threading.Thread(target=self._heartbeat, args=(stop,), daemon=True,
                                     name="lease heartbeat")
        heartbeat.start()
        while not stop.is_set():
            self.close_gradebook()  # prepare() may make the workspace's gradebook anew
            self.workspace.prepare()
            self._route()
            grade_options = self._grade_options()
            if executor_class(self.grading.executor).streams:
                grade_stream(grade_options, self._requests(stop), self._settled,
                             started=self._started)
            else:
                if self.probe is None:
                    self._probe_in_batch(grade_options)
                self._batch(grade_options, stop)
            if self.probe not in (None, PROBE_OK):
                stop.set()  # the probe failed: this worker grades nothing (main says why)

    # -- the start-up probe ----------------------------------------------------------------------
    def _stage_probe(self) -> bool:
        """The reference solution of the first exercise this worker grades without a GPU, into the
        workspace as ``PROBE_STUDENT``'s: graded like any submission, it must get full marks. False
        when the course has no such exercise (nothing to probe: the probe counts as passed)."""
        with self.course.gradebook() as gb:
            names = sorted(a.name for a in gb.assignments)
        for name in names:
            if gpu_cells(self.course, name):
                continue
            try:
                nb = samples.reference_notebook(name, course_root=self.course.root)
            except samples.SampleError:
                continue
            self._probe_assignment, self._probe_started = name, time.monotonic()
            self.workspace.put(PROBE_STUDENT, name, f"{name}.ipynb", nbformat.writes(nb).encode(),
                               nbgrader_timestamp(datetime.now(UTC).replace(tzinfo=None)))
            return True
        self._probe_done(PROBE_OK)
        log.info("%s: start-up probe skipped: no exercise without GPU checks has a release", self.id)
        return False

    def _probe_result(self, result: SubmissionResult) -> None:
        took = time.monotonic() - self._probe_started
        if result.status == "graded" and result.max_score and result.score == result.max_score:
            log.info("%s: start-up probe: the reference %s graded %g/%g through the workspace in "
                     "%.1f s", self.id, result.assignment, result.score, result.max_score, took)
            self._probe_done(PROBE_OK)
            return
        why = "; ".join(result.reasons) or (
            f"it scored {result.score}/{result.max_score}, not full marks" if result.status == "graded"
            else f"not graded ({result.status})")
        self._probe_done(f"the reference solution of {result.assignment}, graded through this "
                         f"worker's workspace ({self.workspace.root}), failed: {why}")

    def _probe_done(self, outcome: str) -> None:
        self.probe = outcome
        self.store.worker_probed(self.id, outcome)
        if outcome != PROBE_OK:
            log.error("%s: start-up probe: %s", self.id, outcome)

    def _probe_in_batch(self, grade_options: GradeOptions) -> None:
        if not self._stage_probe():
            return
        name = self._probe_assignment or ""
        try:
            summary = grade(grade_options, assignments=[name], students=[PROBE_STUDENT])
        except Exception as error:  # noqa: BLE001 - the probe's failure is the reason serve gives
            self._probe_done(f"the reference solution of {name} could not be graded: {error}")
            return
        results = [r for r in summary.results if r.student == PROBE_STUDENT]
        if results:
            self._probe_result(results[0])
        else:
            self._probe_done(f"grading the reference solution of {name} returned no result")

    def _route(self) -> None:
        """Without a GPU, the assignments with GPU-only grade cells are left in the queue for a
        worker with one (on CPU they would score 0: a fault of the grader, not of the notebook),
        unless GPU checks may run their CPU path here (``--allow-cpu``)."""
        if self.options.gpu or self.grading.cpu_allowed or self.grading.device == "cuda":
            skip: tuple[str, ...] = ()
        else:
            with self.course.gradebook() as gb:
                names = sorted(a.name for a in gb.assignments)
            skip = tuple(name for name in names if gpu_cells(self.course, name))
        if skip and skip != self.skip:
            log.info("%s: no GPU: %s left to a worker started with --gpu", self.id, ", ".join(skip))
        self.skip = skip

    def _recover(self) -> None:
        requeued, errored = self.store.recover()
        if requeued or errored:
            log.warning("%s: %d submission(s) whose worker stopped answering are queued again, "
                        "%d marked as grader errors", self.id, requeued, errored)

    def _heartbeat(self, stop: threading.Event) -> None:
        """Every lease_s / 4: renew this worker's leases, and put back leases that expired."""
        while not stop.wait(self.options.lease_s / 4):
            try:
                with self._inflight_lock:
                    leases = [claim.lease for claim in self.inflight.values()]
                self.store.renew(leases)
                self.store.worker_alive(self.id, skip=self.skip, live_s=self.options.lease_s)
                self._recover()
            except Exception:  # noqa: BLE001 - the database may be away for a while: try again
                log.exception("%s: lease heartbeat", self.id)

    def _started(self, student: str, assignment: str) -> None:
        claim = self.inflight.get((student, assignment))
        if claim is not None:
            self.store.started(claim.id, claim.lease)

    def _grade_options(self) -> GradeOptions:
        return GradeOptions.of(self.grading, course_root=self.workspace.root,
                               db_url=self.workspace.db_url, force=True, progress=False)

    # -- local: one stream ------------------------------------------------------------------------
    def _requests(self, stop: threading.Event) -> Iterator[tuple[str, str] | None]:
        capacity = 2 * self.grading.worker_count
        checked = time.monotonic()
        if self.probe is None and self._stage_probe():
            yield (PROBE_STUDENT, self._probe_assignment or "")
        while not stop.is_set():
            if time.monotonic() - checked > RECHECK_S:
                checked = time.monotonic()
                if definitions_fingerprint(self.course) != self.workspace._fingerprint:
                    return  # the course changed its assignments: mirror again, then go on
            if len(self.inflight) >= capacity:
                yield None  # full: the stream waits on its running notebooks, not here
                continue
            claims = self.store.claim(self.id, capacity - len(self.inflight), skip=self.skip)
            if not claims:
                time.sleep(IDLE_S)  # the queue is empty: do not ask the database again at once
                yield None
                continue
            for claim in claims:  # all of them now: a claim waiting its turn is renewed too
                self._stage(claim)
            for claim in claims:
                yield (claim.student, claim.assignment)

    def _stage(self, claim: ClaimedSubmission) -> None:
        with self._inflight_lock:
            self.inflight[(claim.student, claim.assignment)] = claim
        self.workspace.put(claim.student, claim.assignment, claim.notebook, claim.content,
                           nbgrader_timestamp(claim.received_at))

    def _settled(self, result: SubmissionResult) -> None:
        if result.student == PROBE_STUDENT:
            self._probe_result(result)
            return
        with self._inflight_lock:
            claim = self.inflight.pop((result.student, result.assignment), None)
        if claim is None:
            return
        try:
            self._record(claim, result)
        except Exception as error:  # noqa: BLE001 - one bad result never stops the worker
            log.exception("recording submission %d", claim.id)
            self.store.fault(claim.id, claim.lease, f"the service could not record this grade ({error})")

    def _record(self, claim: ClaimedSubmission, result: SubmissionResult) -> None:
        why = "; ".join(result.reasons) or f"not graded ({result.status})"
        if result.grader_fault:
            state = self.store.fault(claim.id, claim.lease, why)
            if state is None:
                self._lease_lost(claim)
            else:
                log.warning("%s: submission %d: grader fault (%s): %s", self.id, claim.id, why, state)
            return
        if result.status != "graded":
            if not self.store.fail(claim.id, claim.lease, why):
                self._lease_lost(claim)
            return
        stem = Path(claim.notebook).stem
        feedback = graded_feedback(
            self._read_gradebook(), student=claim.student, assignment=claim.assignment,
            notebooks={stem: self.workspace.autograded(claim.student, claim.assignment, claim.notebook)},
            reasons=result.reasons)
        score = result.score_of_record  # late penalty applied: the grade export will report
        if self.store.finish(claim.id, claim.lease, score=score, max_score=result.max_score,
                             feedback=feedback):
            self._land_if_best(claim, score)
        else:
            self._lease_lost(claim)

    def _read_gradebook(self) -> Gradebook:
        """The workspace's gradebook, kept open between submissions (its compiled queries too)."""
        if self._gradebook is None:
            self._gradebook = Gradebook(self.workspace.db_url, self.course.course_id)
        return self._gradebook

    def close_gradebook(self) -> None:
        if self._gradebook is not None:
            self._gradebook.close()
            self._gradebook = None

    def _lease_lost(self, claim: ClaimedSubmission) -> None:
        log.warning("%s: submission %d: the lease expired before its result (refused); another "
                    "worker grades it", self.id, claim.id)

    def _land_if_best(self, claim: ClaimedSubmission, score: float | None) -> None:
        """``counts = "best"``: the notebook goes to ``submitted/`` when its grade of record (late
        penalty applied) beats what is there: a late notebook that passes more tests but keeps
        fewer points never replaces an on-time one."""
        if self.settings.policy(claim.assignment).counts != "best":
            return
        best = max((row.score or 0.0 for row in self.store.history(claim.student, claim.assignment)
                    if row.landed and row.id != claim.id), default=None)
        if best is None or (score or 0.0) > best:
            land(self.course, student=claim.student, assignment=claim.assignment,
                 notebook=claim.notebook, content=claim.content, received_at=claim.received_at)
            self.store.mark_landed([claim.id])

    # -- slurm: batches -------------------------------------------------------------------------
    def _batch(self, grade_options: GradeOptions, stop: threading.Event) -> None:
        claims = self.store.claim(self.id, self.options.batch_size, skip=self.skip)
        if not claims:
            stop.wait(1.0)
            return
        self.workspace.stage([(j.student, j.assignment, j.notebook, j.content,
                               nbgrader_timestamp(j.received_at)) for j in claims])
        with self._inflight_lock:
            self.inflight = {(j.student, j.assignment): j for j in claims}
        for claim in claims:  # the batch starts them all: each attempt counts now
            self.store.started(claim.id, claim.lease)
        try:
            summary = grade(grade_options, assignments=sorted({j.assignment for j in claims}),
                            students=sorted({j.student for j in claims}))
        except Exception as error:  # noqa: BLE001 - a failed batch fails its claims, with the reason
            for claim in claims:
                self.store.fault(claim.id, claim.lease, f"grading failed: {error}")
            with self._inflight_lock:
                self.inflight.clear()
            return
        for result in summary.results:
            self._settled(result)
        with self._inflight_lock:
            left, self.inflight = list(self.inflight.values()), {}
        for claim in left:
            self.store.fault(claim.id, claim.lease, "grading returned no result for this submission")


def require_cuda() -> None:
    """``--gpu`` is a promise to the queue: checked with this environment's torch, in a child (the
    worker itself never initialises CUDA)."""
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True, timeout=300)
    if probe.stdout.strip() != "True":
        raise DeviceError("autograder worker --gpu: this machine has no CUDA device for torch "
                          f"({(probe.stdout + probe.stderr).strip()[-200:] or 'no answer'}); "
                          "start it without --gpu (GPU exercises then wait for a worker with one)")


def command_line() -> argparse.ArgumentParser:
    """The worker's command line (``serve.worker_command`` writes it)."""
    parser = argparse.ArgumentParser(prog="python -m autograder.service.worker")
    parser.add_argument("--options", type=ServiceOptions.from_json, required=True, metavar="JSON",
                        help="the service's options, as `autograder serve` writes them "
                             "(ServiceOptions.to_json: the course, state folder, database, lease, "
                             "GPU, niceness and the grading settings given)")
    parser.add_argument("--with-parent", action="store_true", help="exit when the parent dies")
    parser.add_argument("--report-id", action="store_true",
                        help="write this worker's id as the first line of stdout (then stdout is "
                             "stderr): `serve` reads its start-up probe by it")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = command_line().parse_args(argv)
    return run_worker(args.options, with_parent=args.with_parent, report_id=args.report_id)


def run_worker(options: ServiceOptions, *, with_parent: bool = False, report_id: bool = False) -> int:
    """Grade until SIGTERM/SIGINT (or the parent's death, ``with_parent``); 3 when the start-up
    probe failed."""
    if options.state_dir is None:
        raise SystemExit("autograder worker: a state folder is needed (--state)")
    if options.worker_nice > 0:
        os.nice(options.worker_nice)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s worker %(message)s")
    faulthandler.register(signal.SIGUSR1)  # kill -USR1 <pid>: where a stuck worker is, on stderr
    if with_parent:
        die_with_parent(signal.SIGTERM)  # the serve process that started it (kill -9 too)
    stop = threading.Event()

    def stopped(*_: object) -> None:
        if not stop.is_set():
            stop.set()
            raise WorkerStopped  # now, not after the running notebooks: they are given back

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stopped)
    with workspace_lock(options.state_dir):
        worker = Worker(options)
        if report_id:
            print(worker.id, flush=True)
            os.dup2(2, 1)  # nothing else on the pipe that serve stops reading
        try:
            worker.run(stop)
        except WorkerStopped:
            pass
        finally:
            worker.close_gradebook()
            worker.store.unregister_worker(worker.id)
            released = worker.store.release(worker.id)
            if released:
                log.info("%s: stopped; %d running submission(s) back in the queue", worker.id,
                         released)
    if worker.probe not in (None, PROBE_OK):
        print(f"autograder worker: error: start-up probe failed: {worker.probe}", file=sys.stderr)
        return 3
    return 0


class WorkerStopped(BaseException):
    """SIGTERM/SIGINT (also the parent's death): leave at once; the sandboxes are closed on the way
    out and the running submissions go back to the queue."""


@contextlib.contextmanager
def workspace_lock(state: Path, *, wait_s: float = 60.0) -> Iterator[None]:
    """One worker per state folder: a second one waits (an orphan still shutting down), then
    refuses with the reason."""
    Path(state).mkdir(parents=True, exist_ok=True)
    with open(Path(state) / "worker.lock", "a+") as handle:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"another worker holds {state}/worker.lock; one service per "
                                     "state folder") from None
                time.sleep(0.5)
        yield


if __name__ == "__main__":
    sys.exit(main())
