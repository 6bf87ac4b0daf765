"""The Slurm executor: ``chunks.py`` (work items as one submitit job array: retries, resume),
``executor.py`` (the instructor's side, a sibling of ``grading/local.py``) and ``node.py`` (what an
array task runs on its node)."""
