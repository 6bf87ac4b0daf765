"""The Slurm backend of remote grading (``grading/remote/``): ``chunks.py`` (work items as one
submitit job array: retries, resume), ``executor.py`` (the instructor's side, a sibling of
``grading/local.py``) and ``task.py`` (what an array task is on its node)."""
