"""Forbidden APIs: each exercise's rules (in its source) and the static review of a submission.

An exercise that asks the student to implement something torch already has forbids torch's version.
The rules live in the exercise source's header, the one place an instructor edits::

    # ---
    # jupyter:
    #   autograder:
    #     forbidden:
    #     - rule: torch's AdaGrad
    #       why: implement AdaGrad yourself
    #       names: [torch.optim.Adagrad, torch.optim.adagrad, torch._fused_adagrad_]
    #       attributes: [Adagrad, _fused_adagrad_]
    #       within: AdaGrad            # optional: only inside this function or class of the student's
    #       remove: [torch.optim.adagrad, aten::_fused_adagrad_]   # optional, see below
    # ---

``names`` are dotted paths (a path and everything below it), ``attributes`` attribute names that are
forbidden on any object (``x.as_strided``: the type of ``x`` is not known before the code runs).
The release never copies the header (its notebook metadata is fixed), so the rules stay on the
instructor's side; the notebook's instructions say them in words.

``review(cells, rules)`` is the static line, run by the trusted grader before nothing of the student's
has executed (milliseconds): a use of a forbidden name in a student cell (through an import alias,
``from x import y as z``, an assignment ``f = torch.as_strided``, or ``getattr`` with a literal), and every
*dynamic* access that could reach one without naming it (``getattr`` with a computed name, ``__import__``,
``importlib``, ``exec``/``eval``/``compile``, ``__builtins__``, ``sys.modules``, ``ctypes``, ``gc``,
``inspect``, ``pickle``/``marshal``, ``__subclasses__``, what turns torch's function modes off), each
with its cell and line, for the course staff to review. It is never the only line of defence: a static reading can be evaded.

``remove`` is the line that holds: modules whose code, and dispatcher operators (``aten::name``) whose
kernels, are taken out of the student's process in the sandbox (``sandbox/inside/removal.py``), so that
every route to them raises ``ForbiddenAPI`` with the rule's sentence. Only what the rest of torch does
not need can go: ``as_strided`` (01) stays, reviewed by ``within``.
"""

from __future__ import annotations

import ast
import re
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from autograder.course.source import SourceError, source_path
from autograder.errors import CourseError

#: Module-level names whose use is dynamic access, whatever the student does with them.
DYNAMIC_CALLS = frozenset({"__import__", "exec", "eval", "compile", "globals", "vars"})
DYNAMIC_MODULES = frozenset({"importlib", "ctypes", "gc", "inspect", "pickle", "marshal", "dill",
                             "cloudpickle", "runpy", "zipimport", "builtins"})
DYNAMIC_ATTRIBUTES = frozenset({"__builtins__", "__subclasses__", "__globals__", "__code__",
                                "__closure__", "__dict__", "__getattribute__", "modules"})
#: What takes code out of torch's function dispatch, where a check watches it (``drivers.call_watching``).
OBSERVER_ESCAPES = frozenset({"DisableTorchFunction", "DisableTorchFunctionSubclass",
                              "_pop_torch_function_stack", "_pop_mode", "_pop_mode_temporarily",
                              "_disable_current_modes"})
FORBIDDEN, DYNAMIC = "forbidden", "needs review"
REMOVED = "the grader removed it where your code runs; the tests use their own copy"
TIMING_LINE_MAGIC = re.compile(r"^(\s*)%(?:time|timeit|prun)\b(?:\s+-\S+)*\s*")
TIMING_CELL_MAGIC = re.compile(r"^\s*%%(?:time|timeit|prun|capture)\b")


@dataclass(frozen=True)
class Rule:
    """One forbidden API of an exercise (see the module docstring)."""

    rule: str  # what the student reads: "torch's AdaGrad"
    why: str  # "implement AdaGrad yourself"
    names: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    within: str | None = None  # only inside this top-level function or class
    remove: tuple[str, ...] = ()  # modules and aten::operators taken out of the sandbox

    def message(self) -> str:
        """The sentence a student and the staff read when the rule is hit."""
        return f"{self.rule} is not allowed in this exercise: {self.why}"

    def forbids(self, dotted: str) -> bool:
        return any(dotted == name or dotted.startswith(name + ".") for name in self.names) or \
            dotted.rsplit(".", 1)[-1] in self.attributes


@dataclass(frozen=True)
class Finding:
    """A place in a student cell the staff should look at."""

    cell: str  # the cell's grade id, or "cell N" (1-based among code cells) for a cell of the student's
    line: int  # 1-based, in the cell
    kind: str  # FORBIDDEN or DYNAMIC
    what: str  # the code's name for it: "torch.optim.Adagrad", "getattr with a computed name"
    rule: str = ""  # the rule's message, for FORBIDDEN

    def describe(self) -> str:
        where = f"{self.cell}, line {self.line}"
        if self.kind == FORBIDDEN:
            return f"{FORBIDDEN}: {where}: {self.what}: {self.rule}"
        return f"{DYNAMIC}: {where}: {self.what}"

    def as_json(self) -> dict[str, Any]:
        return {"cell": self.cell, "line": self.line, "kind": self.kind, "what": self.what,
                "rule": self.rule}


# --------------------------------------------------------------------------- the rules


def header(path: Path) -> dict[str, Any]:
    """The YAML front matter of a py:percent source (``# ---`` ... ``# ---``), as a mapping."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0].strip() != "# ---":
        return {}
    try:
        end = next(n for n, line in enumerate(lines[1:], start=1) if line.strip() == "# ---")
    except StopIteration:
        raise SourceError(f"{path}: the '# ---' header is not closed") from None
    text = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in lines[1:end])
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as error:
        raise SourceError(f"{path}: the '# ---' header is not YAML ({error})") from None
    if not isinstance(data, dict):
        raise SourceError(f"{path}: the '# ---' header is not a mapping")
    return data


def rules(assignment: str, *, course_root: Path = Path(".")) -> tuple[Rule, ...]:
    """The forbidden APIs of ``assignment``, from its source's header (none when it declares none)."""
    path = source_path(assignment, course_root=course_root)
    if not path.is_file():
        return ()
    jupyter = header(path).get("jupyter") or {}
    declared = (jupyter.get("autograder") or {}).get("forbidden", []) if isinstance(jupyter, dict) else []
    if not isinstance(declared, list):
        raise SourceError(f"{path}: jupyter.autograder.forbidden must be a list of rules")
    return tuple(_rule(entry, f"{path}: jupyter.autograder.forbidden[{index}]")
                 for index, entry in enumerate(declared))


def course_rules(course: Any, assignment: str) -> tuple[Rule, ...]:
    """The rules in force for ``assignment`` of ``course``: its source's, unless the course turns
    them off (``c.Autograder.forbidden_apis = False``, e.g. for a comparison run)."""
    if not _setting(course, "forbidden_apis", True):
        return ()
    return rules(assignment, course_root=Path(course.root))


def shown_to_students(course: Any) -> bool:
    """``c.Autograder.review_in_feedback = True``: the findings go into the student's feedback and
    the service's answer too (default: the course staff's report only)."""
    return bool(_setting(course, "review_in_feedback", False))


def _setting(course: Any, name: str, default: bool) -> bool:
    value = course.config.get("Autograder", {}).get(name, default)
    if not isinstance(value, bool):
        raise CourseError(f"nbgrader_config.py: c.Autograder.{name} must be True or False, "
                          f"not {value!r}")
    return value


def _rule(entry: object, where: str) -> Rule:
    if not isinstance(entry, dict):
        raise SourceError(f"{where}: a rule is a mapping with rule, why, names and/or attributes")
    unknown = set(entry) - {"rule", "why", "names", "attributes", "within", "remove"}
    if unknown:
        raise SourceError(f"{where}: unknown keys {sorted(unknown)}")
    for key in ("rule", "why"):
        if not isinstance(entry.get(key), str) or not entry[key].strip():
            raise SourceError(f"{where}: '{key}' must be a non-empty text")
    lists = {}
    for key in ("names", "attributes", "remove"):
        value = entry.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise SourceError(f"{where}: '{key}' must be a list of names")
        lists[key] = tuple(value)
    if not lists["names"] and not lists["attributes"]:
        raise SourceError(f"{where}: a rule needs names or attributes")
    within = entry.get("within")
    if within is not None and (not isinstance(within, str) or not within.isidentifier()):
        raise SourceError(f"{where}: 'within' must be the name of a function or class")
    for name in lists["remove"]:
        if not re.fullmatch(r"(aten::)?[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*", name):
            raise SourceError(f"{where}: 'remove' takes module names and aten::operators, not {name!r}")
    return Rule(entry["rule"].strip(), entry["why"].strip(), lists["names"], lists["attributes"],
                within, lists["remove"])


def removals(rules: Sequence[Rule]) -> list[dict[str, Any]]:
    """What the sandbox takes out of the student's process for ``rules`` (``protocol.Removal``);
    ``message`` is what ``ForbiddenAPI`` says there (translated like the tests' messages)."""
    return [{"message": f"{rule.message()} ({REMOVED})",
             "modules": [name for name in rule.remove if "::" not in name],
             "ops": [name for name in rule.remove if "::" in name]}
            for rule in rules if rule.remove]


# --------------------------------------------------------------------------- the review


def review(cells: Iterable[tuple[str, str]], rules: Sequence[Rule],
           context: Iterable[str] = ()) -> list[Finding]:
    """Findings in the student's ``cells`` ((label, source) in notebook order) under ``rules``.

    ``context`` is the instructor's code that runs before them (its imports give the names their
    meaning: ``import torch`` in a locked cell); it is never reviewed itself."""
    aliases: dict[str, str] = {}
    for source in context:
        tree = _parse(source)
        if tree is not None:
            _Reader(aliases, rules, label="", review=False).visit(tree)
    findings: list[Finding] = []
    for label, source in cells:
        try:
            tree = _parse(source)
            if tree is None:
                continue  # it fails when it runs, and says why there
            reader = _Reader(aliases, rules, label=label, review=True)
            reader.visit(tree)
            findings += reader.findings
        except (RecursionError, MemoryError):  # hostile nesting: never a reason to stop grading
            findings.append(Finding(label, 1, DYNAMIC, "a cell nested too deeply to read"))
    return sorted(set(findings), key=lambda f: (f.cell, f.line, f.kind, f.what))


def _parse(source: str) -> ast.Module | None:
    """The cell as Python: the code behind the timing magics read as code (``%time x = f()``,
    ``%%timeit``), the other magics and ``!`` lines turned into calls by IPython."""
    lines = source.splitlines()
    if lines and TIMING_CELL_MAGIC.match(lines[0]):
        lines = lines[1:]
    source = "\n".join(TIMING_LINE_MAGIC.sub(r"\1", line) for line in lines)
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 - no IPython, or a cell it cannot read: try it as it is
        pass
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, OverflowError):
        return None


class _Reader(ast.NodeVisitor):
    """One cell: keeps the names' meaning (``aliases``: local name -> dotted path) across cells."""

    def __init__(self, aliases: dict[str, str], rules: Sequence[Rule], *, label: str,
                 review: bool) -> None:
        self.aliases, self.rules, self.label, self.reviewing = aliases, rules, label, review
        self.findings: list[Finding] = []
        self.scope: list[str] = []  # the enclosing top-level def/class names

    # -- names -------------------------------------------------------------------------------
    def dotted(self, node: ast.AST) -> str | None:
        """``torch.optim.Adagrad`` for an attribute chain (through aliases), else None."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id, node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base is not None else f"?.{node.attr}"
        if isinstance(node, ast.Call) and _is_name(node.func, "getattr") and len(node.args) >= 2 \
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
            base = self.dotted(node.args[0])
            return f"{base or '?'}.{node.args[1].value}"
        return None

    def note(self, node: ast.AST, kind: str, what: str, rule: Rule | None = None) -> None:
        if self.reviewing:
            self.findings.append(Finding(self.label, getattr(node, "lineno", 1), kind, what,
                                         rule.message() if rule else ""))

    def check(self, node: ast.AST, dotted: str | None) -> bool:
        if dotted is None:
            return False
        for rule in self.rules:
            if rule.forbids(dotted) and (rule.within is None or rule.within in self.scope[:1]):
                self.note(node, FORBIDDEN, dotted.replace("?.", "."), rule)
                return True
        return False

    # -- what binds names --------------------------------------------------------------------
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top
            self.check(node, alias.name)
            self._dynamic_module(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            self.aliases[alias.asname or alias.name] = full
            self.check(node, full)
            self._dynamic_module(node, full)
            if alias.name in OBSERVER_ESCAPES:
                self.note(node, DYNAMIC, f"import of {full}")

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        dotted = self.dotted(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name):
                if dotted is not None and "?" not in dotted:
                    self.aliases[target.id] = dotted  # f = torch.as_strided: f means it now
                else:
                    self.aliases.pop(target.id, None)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_ClassDef = visit_FunctionDef

    # -- what uses them ----------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> None:
        if not self.check(node, self.dotted(node)):
            self.generic_visit(node)
        if node.attr in DYNAMIC_ATTRIBUTES and not (node.attr == "modules" and
                                                    self.dotted(node.value) != "sys"):
            self.note(node, DYNAMIC, f".{node.attr}")
        if node.attr in OBSERVER_ESCAPES:
            self.note(node, DYNAMIC, f".{node.attr}")

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            meaning = self.aliases.get(node.id)
            if meaning is not None and meaning != node.id:
                self.check(node, meaning)
            if node.id in DYNAMIC_CALLS or node.id == "__builtins__":
                self.note(node, DYNAMIC, node.id)

    def visit_Call(self, node: ast.Call) -> None:
        function = node.func.id if isinstance(node.func, ast.Name) else ""
        if function in ("getattr", "setattr", "delattr", "hasattr"):
            name = node.args[1] if len(node.args) >= 2 else None
            if isinstance(name, ast.Constant) and isinstance(name.value, str):
                if not self.check(node, self.dotted(node) if function == "getattr" else
                                  f"{self.dotted(node.args[0]) or '?'}.{name.value}"):
                    self.visit(node.args[0])
                for rest in (*node.args[2:], *node.keywords):
                    self.visit(rest)
                return
            self.note(node, DYNAMIC, f"{function} with a computed name")
        self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # a docstring: prose about the API is not a use of it
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        """A string that is exactly a forbidden attribute's name (``"Adagrad"``, for a ``getattr``
        or a lookup in a namespace further on)."""
        if isinstance(node.value, str) and self.reviewing:
            for rule in self.rules:
                if node.value in rule.attributes and (rule.within is None
                                                      or rule.within in self.scope[:1]):
                    self.note(node, DYNAMIC, f"the text {node.value!r} in a string ({rule.rule})")

    def _dynamic_module(self, node: ast.AST, module: str) -> None:
        if module.split(".")[0] in DYNAMIC_MODULES:
            self.note(node, DYNAMIC, f"import of {module}")


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def student_cells(nb: Any, kinds: dict[int, str], student: str = "student") -> Iterator[tuple[str, str]]:
    """(label, source) of the cells ``kinds`` marks as the student's: a solution cell by its grade
    id, a cell the student added as ``cell N`` (N counts the notebook's code cells from 1)."""
    code = 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        code += 1
        if kinds.get(index) == student:
            grade_id = (cell.metadata.get("nbgrader") or {}).get("grade_id")
            yield (grade_id if isinstance(grade_id, str) and grade_id else f"cell {code}",
                   cell.source)


def trusted_sources(nb: Any, kinds: dict[int, str], student: str = "student") -> list[str]:
    """The sources of the instructor's code cells (the gradebook's text: ``cell_kinds`` restored it)."""
    return [cell.source for index, cell in enumerate(nb.cells)
            if cell.cell_type == "code" and index in kinds and kinds[index] != student]


# --------------------------------------------------------------------------- copies shipped with a notebook

#: A companion file holding this share of a removed module's distinctive lines is a copy of it.
COPY_SHARE = 0.5
_COPY_LINE_CHARS = 20
_ZIP_MEMBER_BYTES = 8 * 2**20


def module_source(name: str) -> str | None:
    """The installed source text of module ``name`` (found without importing it), or None."""
    import importlib.util

    top, _, rest = name.partition(".")
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    base = Path(spec.origin).parent if not spec.submodule_search_locations else \
        Path(list(spec.submodule_search_locations)[0])
    parts = rest.split(".") if rest else []
    for candidate in (base.joinpath(*parts).with_suffix(".py") if parts else Path(spec.origin),
                      base.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate.read_text(errors="replace")
    return None


def _distinctive(text: str) -> set[str]:
    lines = {" ".join(line.split()) for line in text.splitlines()}
    return {line for line in lines if len(line) >= _COPY_LINE_CHARS and not line.startswith("#")}


def copied_share(text: str, library: str) -> float:
    """The share of ``library``'s distinctive lines (whitespace-normalised, long, not comments) that
    ``text`` holds too."""
    theirs = _distinctive(library)
    return len(theirs & _distinctive(text)) / len(theirs) if theirs else 0.0


def disarm_library_copies(folder: Path, rules: Sequence[Rule]) -> list[str]:
    """Companion files of a notebook (in its staged ``folder``) that are copies of a module the rules
    remove, alone or inside a zip, are replaced by a module that raises ``ForbiddenAPI`` on import;
    returns one sentence for each, naming the file and the rule."""
    libraries = [(rule, name, text) for rule in rules for name in rule.remove if "::" not in name
                 for text in [module_source(name)] if text]
    if not libraries:
        return []
    said = []

    def copy_of(data: bytes) -> tuple[Rule, str] | None:
        text = data.decode("utf-8", errors="replace")
        return next(((rule, name) for rule, name, library in libraries
                     if copied_share(text, library) >= COPY_SHARE), None)

    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.is_symlink() or path.suffix == ".ipynb":
            continue
        relative = path.relative_to(folder)
        if path.suffix == ".py":
            found = copy_of(path.read_bytes())
            if found:
                path.write_text(_stand_in(*found))
                said.append(f"{relative}: a copy of {found[1]}; {found[0].message()} (replaced by a "
                            "module that raises ForbiddenAPI)")
        elif zipfile.is_zipfile(path):
            for member in _disarm_zip(path, copy_of):
                said.append(f"{relative}: {member[0]} is a copy of {member[2]}; {member[1].message()} "
                            "(replaced by a module that raises ForbiddenAPI)")
    return said


def _stand_in(rule: Rule, name: str) -> str:
    return ("class ForbiddenAPI(RuntimeError):\n    pass\n\n\n"
            f"raise ForbiddenAPI({(rule.message() + ' (this file is a copy of ' + name + ')')!r})\n")


def _disarm_zip(path: Path, copy_of) -> list[tuple[str, Rule, str]]:
    """Rewrite the zip at ``path`` with each member that is a copy replaced; returns those members."""
    import io

    replaced, members = [], []
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                data = archive.read(info) if info.file_size <= _ZIP_MEMBER_BYTES else b""
                found = copy_of(data) if info.filename.endswith(".py") and data else None
                if found:
                    replaced.append((info.filename, *found))
                    data = _stand_in(*found).encode()
                members.append((info, data))
    except (zipfile.BadZipFile, OSError, RuntimeError, NotImplementedError):
        return []  # unreadable here, unreadable to Python's zipimport as well
    if replaced:
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for info, data in members:
                archive.writestr(info.filename, data)
        path.write_bytes(buffer.getvalue())
    return replaced
