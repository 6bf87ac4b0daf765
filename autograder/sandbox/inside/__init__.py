"""What runs inside the sandbox (untrusted side): bubblewrap mounts exactly this folder, read-only.

Its modules import one another as top-level modules (``import wire``) when ``kernel.py`` runs as a
script in the sandbox, and as this package from the checker; they import nothing else of ``autograder``.
"""
