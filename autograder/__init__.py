"""Course autograder: release exercises, collect and grade submissions, feedback and reports.

nbgrader stays the system of record (its gradebook, feedback and export); this package adds
speed (warm workers), isolation (timeouts, memory limits), GPU awareness and reports around it.
"""

__version__ = "0.1.0"

# The GPU rule's switch: "1" lets GPU-only checks run their CPU path (set by `grade --allow-cpu`).
# Kept here, free of torch, so the grading parent process can use it without importing torch.
ALLOW_CPU_ENV = "AUTOGRADER_ALLOW_CPU"
