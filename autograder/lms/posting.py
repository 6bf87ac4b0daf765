"""Which assignments ``autograder lms csv`` and ``lms canvas`` post: never a column of zeros for an
exercise nobody has handed in, never a score the grading machine made up.

- An assignment is posted when at least one student has a submission in the gradebook or its nbgrader
  due date has passed; the others are left out, each named with why (``--all-assignments`` posts
  every one).
- An assignment some of whose grade cells the grading machine did not run (a GPU check graded without
  a GPU: ``autograder.machine_limits``) is refused, the whole command with it, naming the assignment
  (``--include-unrun`` posts it anyway, those cells at 0).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace

from autograder.errors import CourseError
from autograder.lms.gradebook_scores import GradebookScores
from autograder.machine_limits import not_run_summary

ALL_FLAG, UNRUN_FLAG = "--all-assignments", "--include-unrun"


@dataclass(frozen=True)
class Choice:
    """The scores of the assignments to post, and a sentence per assignment left out."""

    scores: GradebookScores
    left_out: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # unrun checks posted anyway (--include-unrun)


def choose(scores: GradebookScores, *, all_assignments: bool = False, include_unrun: bool = False,
           now: dt.datetime | None = None) -> Choice:
    """The assignments of ``scores`` to post (module docstring); a ``CourseError`` when one has
    unrun checks (without ``include_unrun``) or none is left."""
    now = now or dt.datetime.now(dt.UTC)
    kept: list[str] = []
    left_out: list[str] = []
    for name in scores.assignments:
        handed_in = sum((student.id, name) in scores.submitted for student in scores.students)
        due = scores.due.get(name)
        if all_assignments or handed_in or (due is not None and due <= now):
            kept.append(name)
            continue
        when = f"its due date {due:%Y-%m-%d %H:%M} UTC has not passed" if due is not None \
            else "it has no due date"
        left_out.append(f"{name}: left out, no submission in the gradebook and {when} "
                        f"({ALL_FLAG} posts it, as 0 for every student)")
    notes: list[str] = []
    unrun = {name: not_run_summary(scores.not_run[name]) for name in kept if scores.not_run.get(name)}
    if unrun and not include_unrun:
        them = "them" if len(unrun) > 1 else "it"
        listing = ", ".join(f"{name} ({line})" for name, line in unrun.items())
        raise CourseError(f"refusing to post {listing}: those cells would count as 0; grade {them} "
                          f"again on a machine with a GPU, or pass {UNRUN_FLAG} to post {them} "
                          f"anyway. Nothing was written")
    notes += [f"{name}: {line}; posted anyway ({UNRUN_FLAG}), those cells as 0"
              for name, line in unrun.items()]
    if not kept:
        raise CourseError("nothing to post: " + "; ".join(left_out))
    chosen = replace(scores, assignments=kept,
                     maximum={name: scores.maximum[name] for name in kept})
    return Choice(chosen, left_out, notes)


__all__ = ["ALL_FLAG", "UNRUN_FLAG", "Choice", "choose"]
