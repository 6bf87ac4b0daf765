"""What staff and students read after grading: the class ``report`` (with ``figures``), ``similarity``,
the named ``misconceptions`` (and ``misconception_table``, their generated signature table), and the
students' ``feedback`` pages (with ``feedback_misconception``).

Reports read the gradebook and the autograded notebooks; they never grade.
"""
