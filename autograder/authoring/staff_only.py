"""What marks a file as the course staff's own, wherever it lies and whatever it is called.

The class reports (``autograder report``'s misconceptions, ``autograder similarity``'s pairs) name
students and show solution code; they live in ``reports/``, which is never published. In case one is
copied elsewhere, each carries a mark the leak check (``autograder.authoring.leaks``) refuses in any file: the
CSVs their header row, the HTML pages the sentence ``PAGE_MARK`` they open with.
"""

from __future__ import annotations

SIMILARITY_COLUMNS = ("student_a", "student_b", "cell", "similarity", "shared_failures",
                      "shared_failure_cells")
MISCONCEPTION_COLUMNS = ("assignment", "student", "misconception")
PAGE_MARK = "For the course staff only"
MARKS = (",".join(SIMILARITY_COLUMNS[:4]), ",".join(MISCONCEPTION_COLUMNS), PAGE_MARK)
