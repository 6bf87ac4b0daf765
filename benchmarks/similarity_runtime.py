"""What ``autograder similarity`` costs on a class: N students of exercise 04, every pair compared.

    python benchmarks/similarity_runtime.py [--students N]

Builds a temporary copy of the course with N submissions of 04_adagrad: each student's AdaGrad cell is
one of the test class's honest styles (``tests/test_similarity.py``) with every identifier renamed
per student (so no two are equal as text; the other solution cells are left as released).
Times ``similarity(["04_adagrad"])`` (the comparison grows with the square of N) and prints the
seconds, the pairs compared and the pairs per second.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "support"))  # conftest's helpers

import test_similarity as styles  # noqa: E402

from autograder.authoring import samples  # noqa: E402
from autograder.authoring.release import copy_course  # noqa: E402
from autograder.course.source import release_path  # noqa: E402
from autograder.reports.similarity import similarity  # noqa: E402

STYLES = (styles.LOOP, styles.FUNCTIONAL, styles.FOREACH, styles.ENUMERATED)
KEEP = {"AdaGrad", "torch", "self", "None", "super", "closure", "step", "dict", "len", "float",
        "lr", "eps", "group", "params", "param_groups", "state", "grad", "sum", "filter", "enumerate",
        "math", "ValueError", "value", "memory_format", "preserve_format", "with", "enable_grad",
        "no_grad", "Optimizer", "optim"}


def renamed(code: str, student: int) -> str:
    """``code`` with each local-looking identifier given a name of this student's."""
    def rename(match: re.Match[str]) -> str:
        word = match.group(0)
        if word in KEEP or word.startswith("_foreach") or word.startswith("__") or \
                word in {"if", "else", "for", "in", "not", "is", "return", "def", "class", "import",
                         "continue", "lambda", "raise", "with", "as", "and", "or", "True", "False"}:
            return word
        return f"{word}_{student}"

    return re.sub(r"(?<![.\"'])\b[A-Za-z_][A-Za-z0-9_]*\b(?![\"'])", rename, code)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=300)
    args = parser.parse_args()
    root = copy_course(REPO, Path(tempfile.mkdtemp(prefix="similarity-")) / "course")
    released = nbformat.read(release_path("04_adagrad", course_root=root), as_version=4)
    for student in range(args.students):
        nb = nbformat.from_dict(released)
        for cell in nb.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id == "AdaGrad":
                cell.source = renamed(STYLES[student % len(STYLES)].strip("\n"), student)
        samples.write_submission(nb, course_root=root, student=f"s{student:03d}", assignment="04_adagrad")
    started = time.perf_counter()
    [result] = similarity(["04_adagrad"], course_root=root)
    seconds = time.perf_counter() - started
    pairs = sum(n * (n - 1) // 2 for n in result.compared.values())
    print(f"{args.students} students, 04_adagrad, {len(result.compared)} solution cells: "
          f"{seconds:.1f} s for {pairs} pairs ({pairs / seconds:,.0f} pairs/s); "
          f"{len(result.matches)} rows at the default threshold; report {result.html_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
