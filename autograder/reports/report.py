"""Grades out of nbgrader's gradebook: a CSV (one row per student) and a self-contained HTML report.

CSV columns: ``student``, then for each assignment ``<assignment>`` (its score) followed by one
``<assignment>/<grade_id>`` column per grade cell, and ``total``. A blank cell means "no submission".
The HTML report embeds its figures as base64 PNG (matplotlib, Agg): the score distribution of each
exercise, the grade cells most often failed, and a table of submissions whose grading hit a limit
(timeout, memory, crash) as recorded by ``autograder grade``, and per exercise how many failing
submissions look like each named misconception of the catalogue (``autograder.reports.misconceptions``;
per submission in ``misconceptions.csv``: ``assignment,student,misconception``, empty when none).
Submissions scored above their maximum (extra credit, or a gradebook someone edited) are listed in
their own warning table and logged.

Grade cells the grading machine did not run (a GPU check graded without a GPU,
``autograder.machine_limits``) are no failure of the student's: per assignment the report warns "N
grade cells in K submissions were not run: no GPU", ``grades.csv`` holds ``not run: no GPU`` in those
cells' columns instead of a 0, and the failure rates and misconceptions leave those cells out.
"""

from __future__ import annotations

import csv
import html
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from autograder.authoring.staff_only import MISCONCEPTION_COLUMNS, PAGE_MARK
from autograder.course.nbgrader import Course, load_course
from autograder.grading import read_run_record
from autograder.machine_limits import NOT_RUN_REASON, not_run_in_notebooks, not_run_summary
from autograder.reports import misconceptions
from autograder.reports.figures import png, score_distribution


@dataclass
class Grades:
    """Everything the report shows, read once from the gradebook."""

    assignments: list[str]
    cells: dict[str, list[str]]  # assignment -> grade ids, in notebook order
    max_cell: dict[tuple[str, str], float]
    max_assignment: dict[str, float]
    students: list[str]
    score: dict[tuple[str, str], float] = field(default_factory=dict)  # (student, assignment)
    cell_score: dict[tuple[str, str, str], float] = field(default_factory=dict)
    problems: list[tuple[str, str, str]] = field(default_factory=list)  # student, assignment, why
    # student, assignment, what the static review found (forbidden APIs, dynamic access)
    review: list[tuple[str, str, str]] = field(default_factory=list)
    devices: dict[tuple[str, str], str] = field(default_factory=dict)
    # (student, assignment) -> grade ids the grading machine did not run (no GPU)
    not_run: dict[tuple[str, str], list[str]] = field(default_factory=dict)

    def was_run(self, student: str, assignment: str, cell: str) -> bool:
        return cell not in self.not_run.get((student, assignment), ())

    def not_run_count(self, assignment: str, cell: str) -> int:
        """How many submissions of ``assignment`` the machine did not run ``cell`` of."""
        return sum(cell in cells for (_, a), cells in self.not_run.items() if a == assignment)

    def not_run_warnings(self) -> dict[str, str]:
        """assignment -> "N grade cells in K submissions were not run: no GPU", where any was."""
        found = {}
        for assignment in self.assignments:
            line = not_run_summary({key: cells for key, cells in self.not_run.items()
                                    if key[1] == assignment})
            if line:
                found[assignment] = line
        return found

    def over_maximum(self) -> list[tuple[str, str, float, float]]:
        """(student, assignment, score, maximum) of every submission scored above its maximum — in a
        gradebook only the autograder and nbgrader write, that is extra credit or tampering."""
        return sorted((s, a, v, self.max_assignment[a]) for (s, a), v in self.score.items()
                      if v > self.max_assignment[a] + 1e-9)

    def total(self, student: str) -> float:
        return sum(v for (s, _), v in self.score.items() if s == student)


def read_grades(course: Course) -> Grades:
    """Scores per student, assignment and grade cell, straight from nbgrader's Gradebook."""
    with course.gradebook() as gb:
        assignments = sorted(a.name for a in gb.assignments)
        cells, max_cell, max_assignment = {}, {}, {}
        for assignment in gb.assignments:
            ids = []
            for notebook in sorted(assignment.notebooks, key=lambda n: n.name):
                for cell in notebook.grade_cells:
                    ids.append(cell.name)
                    max_cell[(assignment.name, cell.name)] = float(cell.max_score)
            cells[assignment.name] = ids
            max_assignment[assignment.name] = float(assignment.max_score)
        grades = Grades(assignments=assignments, cells=cells, max_cell=max_cell,
                        max_assignment=max_assignment,
                        students=sorted(s.id for s in gb.students))
        for assignment in gb.assignments:
            for submission in assignment.submissions:
                student = submission.student.id
                grades.score[(student, assignment.name)] = float(submission.score)
                for notebook in submission.notebooks:
                    for grade in notebook.grades:
                        grades.cell_score[(student, assignment.name, grade.name)] = float(grade.score)
                folder = course.step_dir("autograded", student, assignment.name)
                skipped = not_run_in_notebooks(sorted(folder.glob("*.ipynb"))) \
                    if folder.is_dir() else []
                if skipped:
                    grades.not_run[(student, assignment.name)] = skipped
                run = read_run_record(course, student=student, assignment=assignment.name)
                if run is not None:
                    grades.devices[(student, assignment.name)] = run.get("device", "?")
                    for why in run.get("problems", []):
                        grades.problems.append((student, assignment.name, why))
                    for found in run.get("review", []):
                        grades.review.append((student, assignment.name, _finding(found)))
    return grades


def _finding(found: dict) -> str:
    """A run record's finding as one line: ``notebook.ipynb, cell, line N: what (rule)``."""
    rule = f": {found['rule']}" if found.get("rule") else ""
    return (f"{found.get('notebook', '?')}.ipynb, {found.get('cell', '?')}, line "
            f"{found.get('line', '?')}: {found.get('kind', '?')}: {found.get('what', '?')}{rule}")


def write_csv(grades: Grades, path: Path) -> Path:
    header = ["student"]
    for assignment in grades.assignments:
        header += [assignment] + [f"{assignment}/{cell}" for cell in grades.cells[assignment]]
    header.append("total")
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for student in grades.students:
            row: list[object] = [student]
            for assignment in grades.assignments:
                row.append(_fmt(grades.score.get((student, assignment))))
                row += [_fmt(grades.cell_score.get((student, assignment, cell)))
                        if grades.was_run(student, assignment, cell) else NOT_RUN_REASON
                        for cell in grades.cells[assignment]]
            row.append(_fmt(grades.total(student)))
            writer.writerow(row)
    return path


def _fmt(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _figures(grades: Grades) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    scores = {a: [v for (_, name), v in grades.score.items() if name == a]
              for a in grades.assignments}
    distribution = score_distribution(scores, grades.max_assignment)
    if distribution:
        figures.append(("Score distribution per exercise", distribution))
    failed = _failure_rates(grades)[:15]
    if failed:
        fig, ax = plt.subplots(figsize=(7, 0.35 * len(failed) + 1))
        labels = [f"{a}/{c}" + (f" (ran in {n} of {n + grades.not_run_count(a, c)})"
                                 if grades.not_run_count(a, c) else "")
                  for a, c, _, n in failed][::-1]
        ax.barh(labels, [rate for *_, rate, _ in failed][::-1], color="#c05050")
        ax.set_xlabel("fraction of submissions that lost points")
        ax.set_xlim(0, 1)
        fig.tight_layout()
        figures.append(("Most-failed grade cells", png(fig)))
        plt.close(fig)
    return figures


def _failure_rates(grades: Grades) -> list[tuple[str, str, float, int]]:
    """(assignment, grade id, fraction of submissions below full marks, submissions), worst first;
    a submission whose cell the machine did not run is not counted for that cell."""
    rates = []
    for assignment in grades.assignments:
        for cell in grades.cells[assignment]:
            got = [v for (s, a, c), v in grades.cell_score.items()
                   if a == assignment and c == cell and grades.was_run(s, a, c)]
            if got:
                lost = sum(v < grades.max_cell[(assignment, cell)] for v in got)
                rates.append((assignment, cell, lost / len(got), len(got)))
    return sorted((r for r in rates if r[2] > 0), key=lambda r: (-r[2], r[0], r[1]))


def _student_table(rows: list[tuple[str, str, str]], what: str, none: str) -> list[str]:
    """(student, assignment, text) rows as an HTML table, or the sentence ``none``."""
    esc = html.escape
    if not rows:
        return [f"<p>{esc(none)}</p>"]
    return ["<table><tr><th>student</th><th>assignment</th>"
            f"<th>{esc(what)}</th></tr>",
            *(f"<tr><td>{esc(s)}</td><td>{esc(a)}</td><td>{esc(w)}</td></tr>"
              for s, a, w in sorted(rows)),
            "</table>"]


def passed(grades: Grades) -> set[tuple[str, str]]:
    """(student, assignment) of the submissions that lost no points, but in cells the machine did not
    run."""
    full = set()
    for (student, assignment), value in grades.score.items():
        unrun = sum(grades.max_cell.get((assignment, cell), 0.0) - grades.cell_score.get(
            (student, assignment, cell), 0.0) for cell in grades.not_run.get((student, assignment), ()))
        if value + unrun >= grades.max_assignment[assignment] - 1e-9:
            full.add((student, assignment))
    return full


def write_misconceptions_csv(named: list[misconceptions.Named], path: Path) -> Path:
    """``assignment,student,misconception``: one row per graded submission (empty: none named)."""
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(MISCONCEPTION_COLUMNS)
        writer.writerows([n.assignment, n.student, n.misconception]
                         for n in sorted(named, key=lambda n: (n.assignment, n.student)))
    return path


def _misconception_tables(grades: Grades, named: list[misconceptions.Named]) -> list[str]:
    """Per exercise: misconception -> how many students, then its grade cells' failure rates."""
    esc = html.escape
    parts = ["<h2 id='misconceptions'>Misconceptions</h2><p>Each failing submission's grade-cell "
             "errors compared with those of the catalogue's wrong implementations "
             "(<code>catalogue/misconceptions.json</code>): the nearest one's name, or none "
             f"below a similarity of {misconceptions.MIN_SIMILARITY:g}. A hint of what to teach "
             "again, not a verdict. Per student: <code>misconceptions.csv</code>.</p>"]
    rates = {(a, c): (r, n) for a, c, r, n in _failure_rates(grades)}
    full = passed(grades)
    for assignment in grades.assignments:
        mine = [n for n in named if n.assignment == assignment]
        failing = [n for n in mine if (n.student, assignment) not in full]
        if not failing:
            continue
        counts = Counter(n.misconception or "(none named)" for n in failing)
        parts.append(f"<h3>{esc(assignment)}</h3><table><tr><th>misconception</th><th>students</th></tr>")
        parts += [f"<tr><td>{esc(m)}</td><td>{c}</td></tr>"
                  for m, c in sorted(counts.items(), key=lambda mc: (-mc[1], mc[0]))]
        parts.append("</table><table><tr><th>grade cell</th><th>lost points</th></tr>")
        parts += [f"<tr><td>{esc(c)}</td><td>{rates[(assignment, c)][0]:.0%}</td></tr>"
                  for c in grades.cells[assignment] if (assignment, c) in rates]
        parts.append("</table>")
    return parts


def write_html(grades: Grades, path: Path, *, csv_name: str,
               named: list[misconceptions.Named] | None = None) -> Path:
    esc = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>Grades report</title>",
             "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em}"
             "img{max-width:100%}</style></head><body><h1>Grades report</h1>",
             f"<p>{len(grades.students)} students, {len(grades.score)} graded submissions. "
             f"Per-cell scores: <code>{esc(csv_name)}</code>. {PAGE_MARK} (it names students).</p>",
             "<h2>Exercises</h2><table><tr><th>assignment</th><th>submissions</th><th>mean</th>"
             "<th>max points</th><th>full marks</th><th>graded on</th></tr>"]
    over = grades.over_maximum()
    for assignment in grades.assignments:
        scores = [v for (s, a), v in grades.score.items() if a == assignment]
        top = grades.max_assignment[assignment]
        devices = sorted({d for (s, a), d in grades.devices.items() if a == assignment})
        mean = f"{sum(scores) / len(scores):.2f}" if scores else "–"
        graded_on = ", ".join(devices) or ("nbgrader" if scores else "no submissions yet")
        parts.append(f"<tr><td>{esc(assignment)}</td><td>{len(scores)}</td><td>{mean}</td>"
                     f"<td>{top:g}</td><td>{sum(v >= top for v in scores)}</td>"
                     f"<td>{esc(graded_on)}</td></tr>")
    parts.append("</table>")
    unrun = grades.not_run_warnings()
    if unrun:
        parts.append("<h2 id='not-run'>Checks not run</h2><p class='warning'>These grade cells scored "
                     "0 because the grading machine could not run them (a GPU check graded without "
                     "a GPU), not because the students failed them: grade these assignments again on "
                     "a machine with a GPU (or with <code>--allow-cpu</code>) before exporting "
                     "grades. The failure rates and misconceptions below leave them out.</p><ul>")
        parts += [f"<li><strong>{esc(a)}</strong>: {esc(line)}</li>" for a, line in unrun.items()]
        parts.append("</ul><table><tr><th>student</th><th>assignment</th><th>grade cells not run"
                     "</th></tr>")
        parts += [f"<tr><td>{esc(s)}</td><td>{esc(a)}</td><td>{esc(' '.join(cells))}</td></tr>"
                  for (s, a), cells in sorted(grades.not_run.items())]
        parts.append("</table>")
    if over:
        parts.append("<h2 id='over-maximum'>Scores above the maximum</h2><p class='warning'>"
                     "These submissions score more than the exercise's maximum (extra credit in the "
                     "gradebook): check them before exporting grades. The means above include "
                     "them.</p><table><tr><th>student</th><th>assignment</th><th>score</th>"
                     "<th>maximum</th></tr>")
        parts += [f"<tr><td>{esc(s)}</td><td>{esc(a)}</td><td>{v:g}</td><td>{m:g}</td></tr>"
                  for s, a, v, m in over]
        parts.append("</table>")
    for title, encoded in _figures(grades):
        parts.append(f"<h2>{esc(title)}</h2><img alt='{esc(title)}' src='data:image/png;base64,{encoded}'>")
    rates = _failure_rates(grades)
    if rates:
        parts.append("<h2>Grade cells by failure rate</h2><table><tr><th>grade cell</th>"
                     "<th>lost points</th><th>submissions</th></tr>")
        parts += [f"<tr><td>{esc(a)}/{esc(c)}</td><td>{r:.0%}</td><td>{n}"
                  + (f" ({grades.not_run_count(a, c)} more {NOT_RUN_REASON})"
                     if grades.not_run_count(a, c) else "") + "</td></tr>"
                  for a, c, r, n in rates]
        parts.append("</table>")
    if named is not None:
        parts += _misconception_tables(grades, named)
    elif grades.score:
        parts.append(f"<h2 id='misconceptions'>Misconceptions</h2><p>None named: this course has no "
                     f"signature table (<code>{esc(str(misconceptions.TABLE))}</code>, written by "
                     "<code>python -m autograder.reports.misconception_table</code> from its catalogue).</p>")
    parts.append("<h2>Needs review: forbidden APIs and dynamic access</h2>")
    if grades.review:
        parts.append("<p>What the static review found in the students' own cells before they ran "
                     "(a reading of the code, not a verdict: look at each one).</p>")
    parts += _student_table(grades.review, "where and what", "None: no student cell uses a "
                            "forbidden API or reaches code dynamically.")
    parts.append("<h2>Grading problems</h2>")
    parts += _student_table(grades.problems, "what happened",
                            "None: no submission hit a time or memory limit or crashed.")
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def report(*, course_root: Path = Path("."), db_url: str | None = None,
           output_dir: Path | None = None,
           warn: Callable[[str], None] | None = None) -> tuple[Path, Path]:
    """Write ``grades.csv``, ``misconceptions.csv`` and ``report.html`` into ``output_dir`` (default
    ``<course>/reports``). ``warn`` (default: the ``autograder`` logger) gets one line per
    assignment with grade cells the machine did not run."""
    course = load_course(course_root, db_url=db_url)
    out = Path(output_dir) if output_dir is not None else course.root / "reports"
    out.mkdir(parents=True, exist_ok=True)
    grades = read_grades(course)
    for student, assignment, score, top in grades.over_maximum():
        logging.getLogger("autograder").warning(
            "%s/%s scores %g, above the maximum %g (extra credit in the gradebook?)",
            assignment, student, score, top)
    for assignment, line in grades.not_run_warnings().items():
        (warn or logging.getLogger("autograder").warning)(f"{assignment}: {line}")
    csv_path = write_csv(grades, out / "grades.csv")
    table = misconceptions.load_table(course.root)
    named = misconceptions.name_submissions(course, grades.score, passed=passed(grades), table=table)
    write_misconceptions_csv(named, out / "misconceptions.csv")
    html_path = write_html(grades, out / "report.html", csv_name=csv_path.name,
                           named=named if table else None)
    return csv_path, html_path
