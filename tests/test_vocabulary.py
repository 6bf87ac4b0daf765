"""The package's vocabulary (``autograder/__init__.py``, "One word, one thing"), held by its identifiers.

What is read: every name the package *defines* — module files, classes, functions and their
parameters, assigned variables and attributes, import aliases — read with ``ast`` (no import). Not
docstrings and comments: there "job" and "worker" are ordinary English ("a module with three jobs"),
and a rule on prose would be an allowlist of sentences; the prose follows the identifiers in review.

The rules, each word one thing:

- *job* is only a Slurm job: no identifier says "job" outside ``grading/slurm/``;
- *worker* is only the service's: none says "worker" outside ``service/`` and ``cli/`` (the
  ``worker`` command), except ``workers``/``worker_count``, the ``--workers N`` count of notebooks
  graded at once, which the paragraph names;
- *template* is only the sandbox's: none says "template" outside ``sandbox/`` — the checker's warm
  process is always "the checker forkserver" (``grading/execute/forkserver.py``);
- the student process's server is ``StudentServer``: no ``class Kernel`` anywhere, and no identifier
  says "kernel" in ``sandbox/`` (a Jupyter kernel is nbgrader's, and the sandbox has none).

``ALLOWED`` lists the legitimate exceptions, each with its reason; ``PENDING`` the exact spots in
files another change owns, each with who renames it. Every self-test plants a misuse into a copy of
the package and sees it caught.
"""

from __future__ import annotations

import ast
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "autograder"


@dataclass(frozen=True)
class Rule:
    word: str
    pattern: re.Pattern[str]
    home: tuple[str, ...] | None  # folders (package-relative) where the word may be used; None: nowhere
    only_in: tuple[str, ...] | None = None  # the rule applies only under these folders
    exempt: frozenset[str] = frozenset()  # names the package's paragraph itself allows everywhere
    why: str = ""

    def applies(self, relative: str) -> bool:
        if self.only_in is not None and not relative.startswith(self.only_in):
            return False
        return self.home is None or not relative.startswith(self.home)


RULES = (
    Rule("job", re.compile(r"job", re.I), ("grading/slurm/",),
         why="a job is only a Slurm job (the sandbox's is a launch, the service queue's a claim)"),
    Rule("worker", re.compile(r"worker", re.I), ("service/", "cli/"),
         exempt=frozenset({"workers", "worker_count"}),
         why="the worker is only the service's (--workers N counts notebooks at once)"),
    Rule("template", re.compile(r"template", re.I), ("sandbox/",),
         why="the template is only the sandbox's; the checker's is the checker forkserver"),
    Rule("Kernel", re.compile(r"^Kernel$"), None,
         why="the student process's server is StudentServer (a Jupyter kernel is nbgrader's)"),
    Rule("kernel", re.compile(r"kernel", re.I), None, only_in=("sandbox/",),
         why="the sandbox runs no Jupyter kernel: its server is StudentServer"),
)

# (package-relative path, identifier) -> why it is right where it is
ALLOWED: dict[tuple[str, str], str] = {
    ("grading/options.py", "max_jobs"):
        "Slurm's own word: the array tasks (Slurm jobs) running at once, --max-jobs",
    ("grading/execute/limits.py", "TEMPLATE_ALLOWANCE"):
        "the sandbox template's footprint, which the memory limit leaves room for (the sandbox's template)",
    ("sandbox/inside/protocol.py", "KERNEL_DIED"):
        "the failure's recorded name, kept in every gradebook that has one (the value is data)",
    ("service/handlers.py", "template"): "Tornado's template API (an HTML page template)",
    ("i18n/messages.py", "*"): "message text templates (string.Template), not a process",
}

# (package-relative path, identifier) -> who renames it (files another change owns)
PENDING: dict[tuple[str, str], str] = {
}


def defined_names(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every name the module defines, its own module name first."""
    found = [(0, path.stem)]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append((node.lineno, node.name))
        elif isinstance(node, ast.arg):
            found.append((node.lineno, node.arg))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.alias) and node.asname:
            found.append((node.lineno, node.asname))
    return found


def _excused(relative: str, name: str) -> bool:
    return any(key in ALLOWED or key in PENDING for key in ((relative, name), (relative, "*")))


def misuses(package: Path = PACKAGE) -> list[str]:
    """``path:line: name`` for every identifier that breaks a rule, with the rule's reason."""
    found = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package).as_posix()
        for line, name in defined_names(path):
            for rule in RULES:
                if (rule.applies(relative) and rule.pattern.search(name) and name not in rule.exempt
                        and not _excused(relative, name)):
                    found.append(f"{relative}:{line}: {name!r} ({rule.why})")
    return sorted(set(found))


def test_the_package_keeps_its_vocabulary():
    assert misuses() == []


def test_every_allowed_spot_still_exists():
    """An exception whose name is gone is stale: it would excuse the next misuse at that spot."""
    names = {path.relative_to(PACKAGE).as_posix(): {n for _, n in defined_names(path)}
             for path in PACKAGE.rglob("*.py")}
    stale = [key for key in ALLOWED if key[0] not in names or (key[1] != "*" and key[1] not in names[key[0]])]
    assert stale == []


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "autograder"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return copy


def _plant(copy: Path, relative: str, code: str) -> list[str]:
    target = copy / relative
    target.write_text(target.read_text(encoding="utf-8") + "\n" + code + "\n", encoding="utf-8")
    return misuses(copy)


def test_a_planted_job_in_the_sandbox_host_is_caught(tmp_path):
    found = _plant(_copy(tmp_path), "sandbox/host.py", "job = {'id': 1}")
    assert len(found) == 1 and found[0].startswith("sandbox/host.py:") and "'job'" in found[0], found


def test_a_planted_class_kernel_is_caught(tmp_path):
    found = _plant(_copy(tmp_path), "sandbox/inside/template.py", "class Kernel:\n    pass")
    assert any("'Kernel'" in f and "StudentServer" in f for f in found), found


def test_a_planted_worker_in_grading_is_caught(tmp_path):
    found = _plant(_copy(tmp_path), "grading/local.py", "def start_worker(worker_id: int) -> None:\n    pass")
    assert [f.split(": ")[1] for f in found] == ["'start_worker' (the worker is only the service's "
                                                 "(--workers N counts notebooks at once))",
                                                 "'worker_id' (the worker is only the service's "
                                                 "(--workers N counts notebooks at once))"], found


def test_a_planted_template_for_the_checker_forkserver_is_caught(tmp_path):
    found = _plant(_copy(tmp_path), "grading/execute/forkserver.py", "warm_template = None")
    assert len(found) == 1 and "grading/execute/forkserver.py" in found[0] and "'warm_template'" in found[0]


def test_the_allowed_uses_are_not_misuses_and_slurm_keeps_its_jobs(tmp_path):
    """The homes hold: a Slurm job in grading/slurm/, the service's worker, the sandbox's template."""
    copy = _copy(tmp_path)
    _plant(copy, "grading/slurm/executor.py", "job_states = {}")
    _plant(copy, "service/serve.py", "worker_pid = 0")
    assert _plant(copy, "sandbox/host.py", "template_pid = 0") == []
