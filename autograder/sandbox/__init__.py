"""Where student code runs, and the two trusted ends that reach it.

- ``host.py`` (trusted, the grading host): the bubblewrap policy and ``SandboxProcess``, one warm
  sandboxed template per notebook graded at once; ``cgroups.py``: each sandbox's and checker's
  cgroups (processes, memory, CPU); ``seccomp.py``: the syscalls no sandbox may make;
- ``channel.py`` (trusted, the checker): ``SandboxChannel``, the checker's end of the values-only
  channel; ``handles.py``: the ``Remote`` handles grade cells use, the errors that cross back;
- ``inside/`` (untrusted): the only folder bubblewrap mounts, and the only code that runs next to the
  student's — the template and the student server, the shell, the wire format and its values-only
  codec, the protocol both sides import, the observers. It imports nothing of ``autograder`` outside
  itself, and ``inside.SHARED`` names which trusted modules may import which of its modules
  (tests/test_trust_boundary.py).
"""
