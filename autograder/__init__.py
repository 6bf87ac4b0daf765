"""Course autograder: release exercises, collect and grade submissions, feedback and reports.

nbgrader stays the system of record (its gradebook, feedback and export); this package adds
speed (warm sandboxes), isolation (timeouts, memory limits), GPU awareness and reports around it.

The process map — who runs what, and which side of the trust boundary it is on::

    instructor process (trusted)        autograder grade / serve's worker: pipeline.py plans,
    │                                   sanitizes, records; the only gradebook writer
    ├─ checker forkserver (trusted)     grading/execute/forkserver.py + warm.py: imports torch once
    │  └─ checker, one per notebook     grading/execute/checker.py, confined (confine.py); runs the
    │       (trusted, confined)         grade cells' checks, drives the student's objects by handle
    │                                   through sandbox/channel.py
    └─ sandbox template (UNTRUSTED)     sandbox/inside/template.py in bubblewrap (sandbox/host.py
       └─ student process               starts it): forks one student process per notebook, whose
            (UNTRUSTED)                 StudentServer (sandbox/inside/student_server.py) runs the
                                        student's cells and answers the checker with values

    Both sides import only sandbox/inside/{protocol,wire,codec,shell,isolation,drivers}.py, each
    importer named in sandbox/inside/__init__.py's SHARED (tests/test_trust_boundary.py). On another
    machine (grading/remote/node.py, e.g. a Slurm array task) the same three lower boxes run; the
    service's web process (service/web.py) runs none of them.

One word, one thing: a *job* is only a Slurm job; a notebook's *program* (``NotebookProgram``) is
what the checker executes; its *launch* (``protocol.NotebookLaunch``) is what the sandbox template
receives; a *claimed submission* is the service queue's row a worker took; *the worker* is only the
service's (``service/worker.py``) — ``--workers N`` counts notebooks at once; the *template* is only
the sandbox's; an *executor* is where notebooks run (``grading/registry.py``); the student process's server is
``StudentServer``. tests/test_vocabulary.py holds every identifier the package defines to this.
"""

__version__ = "0.1.0"

# The GPU rule's switch: "1" lets GPU-only checks run their CPU path (set by `grade --allow-cpu`).
# Kept here, free of torch, so the grading parent process can use it without importing torch.
ALLOW_CPU_ENV = "AUTOGRADER_ALLOW_CPU"
