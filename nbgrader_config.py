"""nbgrader configuration for the course (read by every `nbgrader ...` command run from this directory).

Layout: instructor sources in solutions/NN_name/ (the .py text source is converted to .ipynb by
`autograder release`), student releases in exercises/NN_name/, submissions in submitted/<student>/<NN_name>/,
the gradebook in gradebook.db next to this file.
"""

from pathlib import Path

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import ClearHiddenTests, GetGrades

from autograder.hidden._feedback import ClearHiddenTestTracebacks

c = get_config()  # noqa: F821  (injected by traitlets when it loads this file)

COURSE_ROOT = Path(__file__).resolve().parent

c.CourseDirectory.root = str(COURSE_ROOT)
c.CourseDirectory.course_id = "cs336-resource-accounting"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.db_url = f"sqlite:///{COURSE_ROOT / 'gradebook.db'}"
# The jupytext text sources (solutions/NN_name/NN_name.py) must never be copied into a release.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py"]

# Releases are committed without outputs; the header/footer machinery is unused.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}

# Grading: a hung cell should cost a grade, not the batch. A reference notebook of these exercises
# grades in about 0.5 s (its slowest cell, the GPU checks' first CUDA call, a few seconds), so 60 s per
# cell is over ten times what an honest cell needs on a loaded machine, while a `while True` holds a
# sandbox one minute instead of five. A cell over the limit fails alone and the later cells still run
# (`--notebook-timeout`, the limit on the whole notebook, instead scores every cell after the hang 0).
c.Execute.timeout = 60

# Late submissions: nbgrader's own late-penalty step compares timestamp.txt (written by `autograder collect`
# for every notebook: the exchange's time, or an LMS zip member's time read as UTC) with the due date
# (`nbgrader db assignment add 01_strides --duedate "2026-10-15 23:59 UTC"`). Its plugin is nbgrader's
# with per-student extensions (autograder/grading/late.py); nbgrader autograde uses it too.
c.AssignLatePenalties.plugin_class = "autograder.grading.late.ExtensionsLatePlugin"
# c.LateSubmissionPlugin.penalty_method = "zero"  # nbgrader's rule: "none" (default) or "zero"
# c.Autograder.extensions = {"01_strides": {"bob": "2026-10-22 23:59 UTC"}}  # no penalty until then

# Grading on a Slurm cluster (autograder.grading.options.SlurmOptions; unset keys keep its defaults, and command
# line options win over these). For example:
# c.Autograder.slurm = {"partition": "gpu", "gpus_per_task": 1, "time_min": 60, "account": None,
#                       "max_jobs": 16, "chunk_size": 10, "retries": 2, "cpus_per_task": 4, "mem_gb": 16}

# Feedback shows the student their grade cells with the hidden-test region removed, so no hidden-check
# source (not even the line that calls it) reaches the HTML: ClearHiddenTestTracebacks drops hidden lines
# that IPython quotes as context in tracebacks (it must run first), ClearHiddenTests drops the region.
# Failed hidden checks render as their message only (autograder.hidden._base.HiddenCheckFailed).
c.GenerateFeedback.preprocessors = [
    GetGrades,
    ClearHiddenTestTracebacks,
    ClearHiddenTests,
    CSSHTMLHeaderPreprocessor,
]

# Feedback may name the misconception a failing submission looks like (autograder/reports/feedback_misconception.py:
# one sentence, a catalogue name only; default False, the names are then in the staff's report only).
# c.Autograder.feedback_names_misconception = True

# Autograde on submit (`autograder serve`; every key and its meaning: autograder/service/policy.py).
# "default" applies to every assignment, an assignment's own entry overrides it; `due` defaults to the
# assignment's nbgrader due date. The service's scores never enter the gradebook: accepted notebooks
# land in submitted/ (the latest, or the best with "counts": "best") for `autograder grade`.
c.AutograderService.policy = {
    "default": {"max_submissions": 5, "window_hours": 24, "late": False, "counts": "latest",
                "feedback_before_due": "tests", "feedback_after_due": "tests"},
    # "01_strides": {"opens": "2026-10-01 09:00 UTC", "due": "2026-10-15 23:59 UTC"},
}
c.AutograderService.roster = "gradebook"  # students = the gradebook's (nbgrader db student add/import)
c.AutograderService.instructors = []  # user names that see the instructor view (hub admins do too)
c.AutograderService.instructor_group = "instructors"  # and members of this JupyterHub group
c.AutograderService.max_upload_mb = 5
