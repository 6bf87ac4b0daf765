"""The HTML page of ``autograder similarity``: a summary that stays readable at 300 students.

A class of near-identical notebooks gives every pair of students a row: n(n-1)/2 per cell, 44,850 at
300 students. The page never lists them all (the CSV does): it summarises

1. **the rule** and its numbers per cell (median, median absolute deviation, the cut-off used and why);
2. **groups, by cell**: students whose reported pairs connect them (a copier and the copied, a whole
   chain of copies, everyone who pasted the library) are one group, shown once — its members, how many
   pairs, their range of similarity, what they fail the same way — and the strongest pair of each of the
   first ``SHOWN`` groups side by side, the matched regions marked;
3. **by student**: each flagged student once, with the cells and how many others;
4. every reported pair, the first ``ROWS`` of them, collapsed (``<details>``).

Self-contained and offline: no script, no stylesheet or font to fetch. Under 1 MB and a load under a
second in chromium for 300 near-identical notebooks (tests/test_similarity_scale.py).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from autograder.authoring.staff_only import PAGE_MARK
from autograder.reports import similarity_rule
from autograder.reports.similarity_rule import LIBRARY, SOLUTION, Cutoff

# autograder.reports.similarity.Match (not imported, not even for typing: that module imports this one)
Match = Any

MIN_TOKENS = 60  # autograder.reports.similarity.MIN_TOKENS (not imported: that module imports this one)

SHOWN = 30  # groups whose strongest pair is shown side by side
ROWS = 500  # pairs listed in the collapsed table (the CSV holds every row)
MEMBERS = 40  # members named in a group's row (then "and N more")
PARTNERS = 8  # others named in a student's row

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:90em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}
.pair{display:grid;grid-template-columns:1fr 1fr;gap:1em}pre{background:#f6f6f6;padding:.6em;
overflow-x:auto;font-size:.85em}mark{background:#ffd54f}h3{margin-top:2em}summary{cursor:pointer}"""


def groups(matches: Iterable[Match]) -> list[list[Match]]:
    """The reported pairs split into connected groups, one cell at a time (union-find over owners);
    strongest groups first (shared failures, then similarity)."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(x: tuple[str, str]) -> tuple[str, str]:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    matches = list(matches)
    for m in matches:
        a, b = find((m.cell, m.a.owner)), find((m.cell, m.b.owner))
        if a != b:
            parent[a] = b
    found: dict[tuple[str, str], list[Match]] = {}
    for m in matches:
        found.setdefault(find((m.cell, m.a.owner)), []).append(m)
    return sorted(found.values(), key=lambda g: min(m.key for m in g))


def _marked(code: str, region: object) -> str:
    """``code`` as escaped HTML with copydetect's matched regions (a 2 x N array of starts and
    ends, or an empty one) in ``<mark>``."""
    import numpy as np

    array = np.asarray(region)
    pairs = sorted(zip(array[0].tolist(), array[1].tolist(), strict=True)) if array.ndim == 2 else []
    out, at = [], 0
    for start, end in pairs:
        start, end = max(int(start), at), min(int(end), len(code))
        if start >= end:
            continue
        out += [html.escape(code[at:start]), "<mark>", html.escape(code[start:end]), "</mark>"]
        at = end
    out.append(html.escape(code[at:]))
    return "".join(out)


def _names(names: Sequence[str], most: int) -> str:
    shown = ", ".join(html.escape(n) for n in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _rule(cutoffs: Mapping[str, Mapping[str, Cutoff]], compared: Mapping[str, int],
          matches: Sequence[Match], threshold: float | None) -> list[str]:
    esc = html.escape
    if threshold is not None:
        parts = [f"<p>Rule: a fixed cut-off, {threshold:g} (<code>--threshold</code>), for every pair.</p>"]
    else:
        parts = [
            "<p>Rule: a cut-off per cell, from that cell's own pairs. A pair of students is reported "
            f"when its similarity stands out: at least the median + {similarity_rule.SPREADS:g} spreads (1.4826 × "
            f"the median absolute deviation, at least {similarity_rule.MIN_SPREAD:g}), or above a clear gap in the "
            f"sorted scores (at least {similarity_rule.MIN_GAP:g} wide and {similarity_rule.GAP_RATIO:g} × the typical step), "
            f"and never below {similarity_rule.FLOOR:g}; with fewer than {similarity_rule.MIN_STUDENTS} students, "
            f"{similarity_rule.SMALL_CLASS:g}; never above {similarity_rule.CAP:g}. A pair with a reference "
            f"by the same spread rule over that reference's scores, never below "
            + ", ".join(f"{r} {v:g}" for r, v in similarity_rule.REFERENCE_FLOOR.items())
            + ". <code>--threshold</code> sets one fixed cut-off instead.</p>"]
    reported: dict[tuple[str, str], int] = {}
    for m in matches:
        group = m.b.owner if m.b.owner in (SOLUTION, LIBRARY) else "students"
        reported[(m.cell, group)] = reported.get((m.cell, group), 0) + 1
    parts.append("<table><tr><th>cell</th><th>cells judged</th><th>pairs of</th><th>pairs</th>"
                 "<th>median</th><th>MAD</th><th>cut-off</th><th>reported</th></tr>")
    for cell, by_group in cutoffs.items():
        for group, c in by_group.items():
            parts.append(f"<tr><td>{esc(cell)}</td><td>{compared.get(cell, 0)}</td><td>{esc(group)}</td>"
                         f"<td>{c.pairs}</td><td>{c.median:.2f}</td><td>{c.mad:.2f}</td>"
                         f"<td>{esc(c.describe())}</td><td>{reported.get((cell, group), 0)}</td></tr>")
    parts.append("</table>")
    return parts


def write_html(assignment: str, matches: Sequence[Match], too_short: Mapping[str, Sequence[str]],
               compared: Mapping[str, int], cutoffs: Mapping[str, Mapping[str, Cutoff]],
               threshold: float | None, path: Path) -> Path:
    esc = html.escape
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Similarity: "
             f"{esc(assignment)}</title><style>{STYLE}</style></head><body>",
             f"<h1>Similarity of the students' own cells: {esc(assignment)}</h1>",
             f"<p>{PAGE_MARK} (it shows solution code). Each group is a reason to look at "
             "notebooks side by side, never a verdict: students taught from the same notes write "
             "alike, and short cells say little. What everyone was given is not counted. "
             f"{len(matches)} pair(s) and cell(s) reported; the CSV beside this page holds every one.</p>",
             "<h2>Rule</h2>"]
    parts += _rule(cutoffs, compared, matches, threshold)
    if too_short:
        count = sum(len(o) for o in too_short.values())
        parts.append(f"<details><summary>Too short to judge: {count} cell(s) (fewer than {MIN_TOKENS} "
                     "characters of code after normalising)</summary><p>"
                     + "; ".join(f"{esc(c)}: {_names(list(o), 200)}" for c, o in too_short.items())
                     + "</p></details>")
    found = groups(matches)
    parts.append(f"<h2>Groups, by cell</h2><p>{len(found)} group(s): students whose reported pairs "
                 "connect them, each group once.</p>")
    if not matches:
        parts.append("<p>No pair reported.</p>")
    else:
        parts.append("<table><tr><th>#</th><th>cell</th><th>students</th><th>pairs</th>"
                     "<th>similarity</th><th>failed the same way</th></tr>")
        for n, group in enumerate(found, start=1):
            owners = sorted({o for m in group for o in (m.a.owner, m.b.owner)})
            low, high = min(m.similarity for m in group), max(m.similarity for m in group)
            failed = sorted({f for m in group for f in m.shared_failures})
            label = f"<a href=#g{n}>{n}</a>" if n <= SHOWN else str(n)
            parts.append(f"<tr><td>{label}</td><td>{esc(group[0].cell)}</td><td>{_names(owners, MEMBERS)}"
                         f"</td><td>{len(group)}</td><td>{low:.2f}–{high:.2f}</td>"
                         f"<td>{esc(' '.join(failed)) or '—'}</td></tr>")
        parts.append("</table>")
    parts += _students(matches)
    for n, group in enumerate(found[:SHOWN], start=1):
        m = min(group, key=lambda x: x.key)
        regions = m.regions()
        more = f" (the strongest of {len(group)} pairs in this group)" if len(group) > 1 else ""
        parts.append(f"<h3 id='g{n}'>{n}. {esc(m.a.owner)} and {esc(m.b.owner)}: {esc(m.cell)}, "
                     f"{m.similarity:.2f}{more}</h3><div class='pair'>"
                     f"<pre>{_marked(m.a.code, regions[0])}</pre>"
                     f"<pre>{_marked(m.b.code, regions[1])}</pre></div>")
    if len(found) > SHOWN:
        parts.append(f"<p>Groups after the first {SHOWN}: their pairs are in the table below and the CSV.</p>")
    if matches:
        shown = min(len(matches), ROWS)
        parts.append(f"<details><summary>Every reported pair: {len(matches)} (the first {shown} here; "
                     "the CSV holds them all)</summary><table><tr><th>#</th><th>student</th><th>with</th>"
                     "<th>cell</th><th>similarity</th><th>failed the same way</th></tr>")
        parts += [f"<tr><td>{n}</td><td>{esc(m.a.owner)}</td><td>{esc(m.b.owner)}</td><td>{esc(m.cell)}</td>"
                  f"<td>{m.similarity:.2f}</td><td>{esc(' '.join(m.shared_failures)) or '—'}</td></tr>"
                  for n, m in enumerate(matches[:ROWS], start=1)]
        parts.append("</table></details>")
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path



def _students(matches: Sequence[Match]) -> list[str]:
    """Each student of a reported pair once: cells, others, highest similarity."""
    esc = html.escape
    rows: dict[str, dict[str, set[str]]] = {}
    best: dict[str, float] = {}
    for m in matches:
        for me, other in ((m.a.owner, m.b.owner), (m.b.owner, m.a.owner)):
            if me in (SOLUTION, LIBRARY):
                continue
            rows.setdefault(me, {}).setdefault(m.cell, set()).add(other)
            best[me] = max(best.get(me, 0.0), m.similarity)
    if not rows:
        return []
    order = sorted(rows, key=lambda s: (-best[s], s))
    table = ["<table><tr><th>student</th><th>cell: with</th><th>highest</th></tr>"]
    for student in order:
        cells = "; ".join(f"{esc(cell)}: {_names(sorted(others), PARTNERS)}"
                          for cell, others in sorted(rows[student].items()))
        table.append(f"<tr><td>{esc(student)}</td><td>{cells}</td><td>{best[student]:.2f}</td></tr>")
    table.append("</table>")
    head = f"<h2>By student</h2><p>{len(order)} student(s) in a reported pair.</p>"
    if len(order) > 50:
        return [head, f"<details><summary>All {len(order)} students</summary>", *table, "</details>"]
    return [head, *table]
