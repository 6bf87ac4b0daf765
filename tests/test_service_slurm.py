"""The service's worker with ``--executor slurm``: queued submissions graded as a batch on the real
one-node cluster (``tests/support/slurm_cluster.py``), each result recorded once, scores as local grading."""

from __future__ import annotations

import threading

from service_course import make_course, right_notebook, wrong_notebook

from autograder.service.options import ServiceOptions
from autograder.service.schema import utcnow
from autograder.service.store import Store
from autograder.service.worker import Worker

SLURM = {"partition": "debug", "cpus_per_task": 1, "mem_gb": 2, "time_min": 5, "max_jobs": 2,
         "chunk_size": 1, "retries": 1}


def test_the_slurm_executor_grades_the_queue_in_batches(slurm_cluster, tmp_path):
    course = make_course(tmp_path / "course", assignments=("01_strides",))
    with open(course / "nbgrader_config.py", "a") as config:
        config.write(f"\nc.Autograder.slurm = {SLURM!r}\n")
    state = tmp_path / "state"
    worker = Worker(ServiceOptions(course_root=course, state_dir=state,
                                  grading={"executor": "slurm", "allow_cpu": True}, batch_size=10))
    store = worker.store
    ids = {student: store.add(student=student, assignment="01_strides",
                              notebook="01_strides.ipynb", content=content, received_at=utcnow(),
                              late=False)
           for student, content in (("alice", right_notebook(course)),
                                    ("bob", wrong_notebook(course)))}
    worker.workspace.prepare()
    worker._batch(worker._grade_options(), threading.Event())
    rows = {student: Store(store.url).get(job) for student, job in ids.items()}
    assert {s: (r.state, r.graded_count) for s, r in rows.items()} == {
        "alice": ("done", 1), "bob": ("done", 1)}
    assert rows["alice"].score == rows["alice"].max_score == 10
    assert 0 < rows["bob"].score < 10
    assert (state / "workspace" / ".slurm" / "grade").is_dir()  # it went through the cluster
