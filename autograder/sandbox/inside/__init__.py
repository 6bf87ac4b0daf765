"""What runs inside the sandbox (untrusted side): bubblewrap mounts exactly this folder, read-only.

Its modules import one another as top-level modules (``import wire``) when ``template.py`` runs as a
script in the sandbox, and as this package from the trusted side; they import nothing else of
``autograder`` (tests/test_trust_boundary.py reads every import, dynamic ones by literal included).

``template.py`` is the sandbox's program and nothing trusted imports it. The other modules are shared:
their code runs on both sides of the boundary, and ``SHARED`` names the only trusted modules (or
packages) that may import each one (the same test holds the trusted side to it).
"""

SHARED: dict[str, tuple[str, ...]] = {
    # the request/answer vocabulary, the failure names and the notebook limits both ends agree on
    # (pure data: the engine records the failures by these names)
    "protocol": ("autograder.sandbox.channel", "autograder.sandbox.handles", "autograder.sandbox.host",
                 "autograder.grading"),
    # the framing both ends speak, and the errors of the channel
    "wire": ("autograder.sandbox.channel", "autograder.sandbox.handles", "autograder.sandbox.host"),
    # the values-only codec both ends speak (a value as a JSON tree plus blobs)
    "codec": ("autograder.sandbox.channel", "autograder.sandbox.handles"),
    # the cell timeout's exception and the skip tag, which the checker reads in cell sources; the
    # checker's template warms the first traceback with it (warm_up)
    "shell": ("autograder.sandbox.channel", "autograder.sandbox.handles", "autograder.grading.execute.checker",
              "autograder.grading.execute.warm"),
    # namespaces, mounts and uids: the host enters them for the sandbox, the checker for itself
    "isolation": ("autograder.sandbox.host", "autograder.grading.execute.confine"),
    # observers a hidden check installs next to the student's code (they report; the check decides)
    "drivers": ("autograder.hidden._base",),
}
