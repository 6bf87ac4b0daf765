"""Authoring: what turns ``exercises/`` and ``solutions/`` into what students get.

``release`` (nbgrader's ``generate_assignment`` plus the translated editions), ``scaffold`` (a new
exercise), ``publish`` (the student edition) with ``leaks`` and ``staff_only`` (nothing of the solutions
or hidden checks gets out), and ``samples`` (the reference and catalogue notebooks as submissions).
"""
