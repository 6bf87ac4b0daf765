"""The generic remote layer (trusted side): grading on machines other than the instructor's.

A backend (``grading/slurm/``, and any later one) moves work to other machines and back; this package
is what every backend shares, so a third one copies nothing:

- ``work.py``: the work unit (``SubmissionWork``: one submission's notebooks, files and limits, keyed
  by a digest of its inputs and of the grading code), the results folder (one JSON file per submission,
  written atomically) and the hand-over of a result to the pipeline's outcomes;
- ``node.py``: what runs on the other machine — the same warm template, sandbox pool and per-notebook
  loop as local grading — told by its backend which task it is, how many CPUs it has and which signals
  mean "stop".
"""
