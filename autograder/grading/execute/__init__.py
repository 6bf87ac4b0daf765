"""Execution, trusted side: the warm template (``warm.py``, ``forkserver.py``), one checker per notebook
(``checker.py``), its limits (``limits.py``) and the loop that runs notebooks on a sandbox pool
(``runner.py``). Every executor executes through ``runner.NotebookRunner``; nothing here imports
nbformat or nbgrader, so a Slurm array task pays only for what executes.
"""
