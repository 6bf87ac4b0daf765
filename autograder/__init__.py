"""Course autograder: release exercises, collect and grade submissions, feedback and reports.

nbgrader stays the system of record (its gradebook, feedback and export); this package adds
speed (warm workers), isolation (timeouts, memory limits), GPU awareness and reports around it.
"""

__version__ = "0.1.0"
