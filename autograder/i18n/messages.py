"""Test-failure messages in the reader's language: ``locales/<lang>/messages.po``, read from the code.

The English is never typed twice: the templates are read with ``ast`` from where messages are made,

    autograder/hidden/*.py     the message argument of ``expect(cond, msg)``, ``AssertionError(msg)``,
                               ``HiddenCheckFailed(msg)`` and the ``what`` of ``expect_equal`` (and
                               what is assigned to a name ``message``/``what``), f-strings included;
                               the name of a ``@hidden_check`` (it heads each of its messages) and
                               the label passed to any function of the module that takes a ``what``
                               (``_compare(got, want, "AdaGrad(params) with small gradients")``); a
                               label that is one identifier is code
    solutions/*/*.py           ``assert cond, msg`` (and ``AssertionError(msg)``) in the grade cells,
                               and the text of their ``print`` calls (shown in the zh-TW notebook
                               through the same hook); the English a field can show as it is
                               (``{kwargs or 'defaults'}``: the message with "defaults" in it) and
                               what a function of the exercise returns where a field shows its
                               result (``describe_scaler``: "disabled GradScaler")
    autograder/reports/feedback_misconception.py   the ``message`` naming a misconception in feedback, and
    catalogue/misconceptions.json          the misconception names it shows (the signature table's)

each f-string field becoming a ``{expr}`` placeholder (``{shape}``, ``{got!r}``, ``{type(error).__name__}``).
A template whose text is code alone (``contiguous_strides({shape})``) needs no translation and is
left out. One entry per template; its ``msgctxt`` is ``test message <sha256[:12]>`` of the English.

``translate(message, language)`` matches a message against the templates as patterns (the longest
literal text first; of two that match, the one that leaves less English); placeholders keep what
they held, each translated in turn (a hint inside a message: ``{what}: {message} [seed {used_seed}]``).
A message no template matches comes back as it is, never mangled. Grades never depend on it: it only changes what a message *shows*
(``autograder.reports.feedback``'s ``TranslateTestMessages``; ``kernel_hook`` in the zh-TW notebooks).

``check(language)`` reports entries missing, stale (their template is gone), untranslated, fuzzy, or
whose translation lacks or adds a placeholder, and every message the code assembles from fragments
(``fragments``: a phrase passed to a helper that puts it into its own message, English inside a
placeholder): a translation of a fragment cannot agree with the sentence it lands in, so each message
is written as a whole sentence. Standard library and ``polib`` only.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polib

from autograder.course.source import SOURCES_GLOB, read_source_cells, regions
from autograder.i18n import LANGUAGES, LOCALES_DIR

HIDDEN_GLOB = "autograder/hidden/*.py"
CATALOGUE = "messages.po"
CONTEXT = "test message "
# call name -> index of its message argument (``hidden_check``'s is the name that heads every
# failure message of its check: "get_batch seeding: ...")
MESSAGE_CALLS = {"expect": 1, "AssertionError": 0, "HiddenCheckFailed": 0, "expect_equal": 2,
                 "hidden_check": 0}
MESSAGE_KEYWORDS = frozenset({"message", "msg", "what"})
# a function of the same code with a parameter of one of these names puts that argument into a
# message of its own: a label ("AdaGrad(params) with small gradients" into ``_compare``'s "{what}: ...")
MESSAGE_NAMES = frozenset({"message", "what", "where"})
EXTRA = ("check failed",)  # _base.hidden_check's message for an AssertionError without one
FEEDBACK_SOURCE = "autograder/reports/feedback_misconception.py"
MISCONCEPTION_TABLE = "catalogue/misconceptions.json"  # autograder.reports.misconceptions.TABLE
# the feedback service's student pages: every ``_("...")`` (one whole sentence, ``{field}``
# placeholders filled in after translation: autograder.service.language)
SERVICE_PAGES = ("autograder/service/handlers.py", "autograder/service/pages.py",
                 "autograder/service/client.py", "autograder/service/templates/*.html")
# the reasons a student reads in the service (a refused upload, why a submission waits or was not
# graded, the notices beside a grade): stored and logged in English, shown in the reader's language
# (``autograder.service.language.reason``, through ``translate``). Read from each file: the message
# of ``Refused(status, msg)``, ``GraderFault(msg)``, ``_error(status, msg)``, ``_kill(ename, msg)``;
# what is assigned to ``why``, ``then``, ``reason``, ``evalue``, ``GRADER_ERROR``/``GRADER_ERROR_AGAIN``
# or an attribute ``.reason``; what is appended or added to ``reasons``; with True, what a function
# returns
REASON_SOURCES = {"autograder/service/intake.py": True, "autograder/service/views.py": True,
                  "autograder/service/handlers.py": True, "autograder/service/policy.py": False,
                  "autograder/service/api.py": False, "autograder/grading/record.py": True,
                  "autograder/grading/execute/forkserver.py": False,
                  "autograder/sandbox/inside/shell.py": False}
REASON_CALLS = {"Refused": 1, "GraderFault": 0, "_error": 1, "_kill": 1}
REASON_NAMES = frozenset({"why", "then", "reason", "evalue", "GRADER_ERROR", "GRADER_ERROR_AGAIN"})
KINDS = ("test message", "service page", "service reason")
_PAGE_STRING = re.compile(r'(?<![A-Za-z0-9])_\(\s*"((?:[^"\\\n]|\\.)+)"')
_PAGE_FIELD = re.compile(r"\{[A-Za-z_]\w*\}")
# an English word of running text: letters not part of an identifier, a call, an attribute or a
# keyword argument (quoted strings are taken out first)
_WORD = re.compile(r"(?<![\w.{=])[A-Za-z]{2,}(?![\w(.}=\[])")
_QUOTED = re.compile(r"'[^']*'")


def package_root() -> Path:
    """The course repository this package belongs to (where its locales/ lie)."""
    return Path(__file__).resolve().parents[2]


def catalogue_path(language: str, root: Path | None = None) -> Path:
    return Path(root or package_root()) / LOCALES_DIR / language / CATALOGUE


def message_key(english: str) -> str:
    return CONTEXT + hashlib.sha256(english.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class Template:
    """One message template: its parts in order, each a literal text or a field (``{expr}``)."""

    parts: tuple[tuple[str, bool], ...]  # (text, is_field)
    where: tuple[str, int]
    kind: str = "test message"  # one of KINDS: the catalogue entry's comment

    @property
    def english(self) -> str:
        return "".join(text for text, _ in self.parts)

    @property
    def fields(self) -> list[str]:
        return [text for text, is_field in self.parts if is_field]

    @property
    def literal(self) -> str:
        return "".join(text for text, is_field in self.parts if not is_field)

    def prose(self) -> bool:
        """Whether it has English words to translate (not code alone)."""
        return bool(_WORD.search(_QUOTED.sub(" ", "".join(" " if f else t for t, f in self.parts))))

    def needed(self) -> bool:
        """Whether it becomes an entry: prose, or a service reason that frames another with words of
        its own (``{name}.ipynb: {reason}``: its Chinese punctuation)."""
        return self.prose() or (self.kind == "service reason" and bool(self.fields)
                                and bool(re.search(r"[A-Za-z]{2}", self.literal)))


# --- the templates, from the code -------------------------------------------------------------------

def _field(value: ast.FormattedValue) -> str:
    text = ast.unparse(value.value)
    if value.conversion != -1:
        text += "!" + chr(value.conversion)
    if value.format_spec is not None:
        spec = value.format_spec
        text += ":" + ("".join(str(v.value) for v in spec.values if isinstance(v, ast.Constant))
                       if isinstance(spec, ast.JoinedStr) else ast.unparse(spec))
    return "{" + text + "}"


def _templates(node: ast.AST | None) -> list[tuple[tuple[str, bool], ...]]:
    """The message texts an expression can be: a string, an f-string, either side of ``or``/``if``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [((node.value, False),)] if node.value else []
    if isinstance(node, ast.JoinedStr):
        parts = [(str(v.value), False) if isinstance(v, ast.Constant) else
                 (_field(v) if isinstance(v, ast.FormattedValue) else "{" + ast.unparse(v) + "}", True)
                 for v in node.values if not (isinstance(v, ast.Constant) and not v.value)]
        if not parts:
            return []
        found = [tuple(parts)]
        values = [v for v in node.values if not (isinstance(v, ast.Constant) and not v.value)]
        for n, value in enumerate(values):  # "{_kwargs or 'defaults'}": the message it shows with
            for word in _shown_words(value):  # "defaults" is a message of its own
                found.append(_merged(parts[:n] + [(word, False)] + parts[n + 1:]))
        return found
    if isinstance(node, ast.BoolOp):
        return [t for value in node.values for t in _templates(value)]
    if isinstance(node, ast.IfExp):
        return _templates(node.body) + _templates(node.orelse)
    return []


def _shown_words(value: ast.AST) -> list[str]:
    """The English a field shows as it is: the string constants of ``x or 'defaults'`` or
    ``a if c else 'none'`` (not a format spec, not a call's arguments)."""
    if not isinstance(value, ast.FormattedValue) or not isinstance(value.value, ast.BoolOp | ast.IfExp):
        return []
    expr = value.value
    options = expr.values if isinstance(expr, ast.BoolOp) else [expr.body, expr.orelse]
    return [o.value for o in options if isinstance(o, ast.Constant) and isinstance(o.value, str)
            and re.search(r"[A-Za-z]{2}", o.value)]


def _merged(parts: list[tuple[str, bool]]) -> tuple[tuple[str, bool], ...]:
    """``parts`` with neighbouring literal texts joined into one."""
    out: list[tuple[str, bool]] = []
    for text, is_field in parts:
        if out and not is_field and not out[-1][1]:
            out[-1] = (out[-1][0] + text, False)
        else:
            out.append((text, is_field))
    return tuple(out)


def _name(func: ast.AST) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) \
        else None


def label_helpers(tree: ast.AST) -> dict[str, int | None]:
    """The functions ``tree`` defines that take a message or a label (a parameter named as in
    ``MESSAGE_KEYWORDS``): name -> the index of that positional argument at a call (``self`` left
    out; None where it is keyword-only). What a call passes there is shown to the student."""
    found: dict[str, int | None] = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
            offset = 1 if params[:1] in (["self"], ["cls"]) else 0
            named = [n for n, param in enumerate(params) if param in MESSAGE_KEYWORDS and n >= offset]
            if named:
                found[fn.name] = named[0] - offset
            elif any(a.arg in MESSAGE_KEYWORDS for a in fn.args.kwonlyargs):
                found[fn.name] = None
    return found


def code_templates(code: str, where: str, first_line: int = 1, *, asserts: bool = False,
                   prints: bool = False) -> list[Template]:
    """The message templates of one piece of Python (module docstring); unparsable code has none.
    ``prints``: a ``print`` call's text too (a grade cell's lines a student reads: "no GPU here: ...")."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found: list[Template] = []
    calls = {**label_helpers(tree), **MESSAGE_CALLS}

    def add(node: ast.AST | None, line: int, *, label: bool = False) -> None:
        found.extend(Template(parts, (where, first_line + line - 1)) for parts in _templates(node)
                     if not (label and re.fullmatch(r"[A-Za-z_]\w*", "".join(t for t, _ in parts))))

    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and asserts:
            add(node.msg, node.lineno)
        elif prints and isinstance(node, ast.Call) and _name(node.func) == "print" and node.args:
            add(node.args[0], node.lineno)
        elif isinstance(node, ast.Call) and _name(node.func) in calls:
            index = calls[_name(node.func) or ""]
            label = _name(node.func) not in MESSAGE_CALLS or _name(node.func) == "hidden_check"
            add(node.args[index] if index is not None and len(node.args) > index else None, node.lineno,
                label=label)  # a label that is one name is code ("patchify", a check's function)
            for keyword in node.keywords:
                if keyword.arg in MESSAGE_KEYWORDS:
                    add(keyword.value, node.lineno, label=label)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in MESSAGE_NAMES
                                                  for t in node.targets):
            add(node.value, node.lineno)
    return found


def fragments(code: str, where: str) -> list[tuple[str, str]]:
    """``(where, problem)`` for each message of ``code`` assembled from pieces at run time:

    - a phrase passed to a function that puts that parameter inside a clause of a message of its own,
      words on both sides (``self._too_much("converted the whole of")`` into ``"get_batch {how} a
      dataset of ..."``); a subject or a label (``"{what} should raise ..."``, ``"{what}: ..."``) is a
      whole noun phrase and translates as one;
    - English inside a placeholder (``{got['seen'] or 'nothing'}``): what the field shows is a word
      no catalogue holds.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found: list[tuple[str, str]] = []
    joiners: dict[str, dict[int, str]] = {}  # function -> {argument index: the message it fills}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        params = [a.arg for a in fn.args.args]
        offset = 1 if params[:1] in (["self"], ["cls"]) else 0
        for template in code_templates(ast.unparse(fn), where):
            parts = template.parts
            for n, (text, is_field) in enumerate(parts):
                before = parts[n - 1][0] if n and not parts[n - 1][1] else ""
                after = parts[n + 1][0] if n + 1 < len(parts) and not parts[n + 1][1] else ""
                inside = re.search(r"[A-Za-z]\s*$", before) and re.match(r"\s*[A-Za-z]", after)
                if is_field and inside and text[1:-1] in params[offset:]:
                    joiners.setdefault(fn.name, {})[params.index(text[1:-1]) - offset] = template.english
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in joiners:
            for index, message in joiners[_name(node.func) or ""].items():
                if index < len(node.args) and any(  # words, not a call passed as the subject
                        Template(parts, (where, node.lineno)).prose() for parts in _templates(node.args[index])):
                    piece = "".join(t for t, _ in _templates(node.args[index])[0])
                    found.append((f"{where}:{node.lineno}", f"{piece!r} is joined into {message[:60]!r} at "
                                                            "run time: write each message as a whole sentence"))
        if isinstance(node, ast.FormattedValue) and isinstance(node.value, ast.BoolOp | ast.IfExp):
            words = [c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)
                     and isinstance(c.value, str) and re.search(r"[A-Za-z]{2}", c.value)]
            if words:
                found.append((f"{where}:{node.lineno}", f"English inside a placeholder ({words[0]!r} in "
                                                        f"{_field(node)}): write a message for each case"))
    return found


def shown_returns(cells: list, messages: list[Template], where: str) -> list[Template]:
    """The texts a function of the exercise's own cells returns (``describe_scaler``: "disabled
    GradScaler") where a message of ``messages`` shows its result in a field: each a message of its
    own, so that the field's value is translated too."""
    called = set()
    for template in messages:
        for field in template.fields:
            try:
                tree = ast.parse(field[1:-1].split("!")[0], mode="eval")
            except SyntaxError:
                continue
            called |= {_name(c.func) for c in ast.walk(tree) if isinstance(c, ast.Call)}
    found: list[Template] = []
    for cell in cells:
        if cell.kind != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name in called:
                found += [Template(parts, (where, cell.line + node.lineno - 1)) for node in ast.walk(fn)
                          if isinstance(node, ast.Return) for parts in _templates(node.value)]
    return found


def _grade_templates(assignment_source: Path, where: str, *, hidden: bool) -> list[Template]:
    """The templates of the grade cells of one exercise source (the hidden region too or left out)
    and the texts of its functions they show (``shown_returns``)."""
    cells = read_source_cells(assignment_source)
    found: list[Template] = []
    for cell in cells:
        if cell.kind == "code" and cell.meta.get("grade"):
            code = cell.source if hidden else "\n".join(  # blank: lines keep numbers
                "" if region == "hidden test" else line
                for _, line, region in regions(cell.source.split("\n")))
            found += code_templates(code, where, cell.line, asserts=True, prints=True)
    return found + shown_returns(cells, found, where)


def visible_templates(assignment_source: Path, where: str) -> list[Template]:
    """The templates of the visible tests of one exercise source (its grade cells, hidden region
    left out): what a student's own kernel can show."""
    return _grade_templates(assignment_source, where, hidden=False)


def misconception_names(root: Path) -> list[str]:
    """The catalogue's misconception names, as the signature table holds them (none without one)."""
    path = Path(root) / MISCONCEPTION_TABLE
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    return [str(row["misconception"]) for rows in data.get("assignments", {}).values() for row in rows]


def reason_templates(code: str, where: str, *, returns: bool) -> list[Template]:
    """The reasons of one file of ``REASON_SOURCES`` (its comment says which), each a whole
    sentence whose fields hold numbers, names or another reason."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    nodes: list[tuple[ast.AST | None, int]] = []

    def listed(value: ast.AST | None) -> list[ast.AST | None]:  # [x for ...], [x, y]
        if isinstance(value, ast.ListComp):
            return [value.elt]
        return list(value.elts) if isinstance(value, ast.List) else []

    def named(target: ast.AST) -> bool:
        return (isinstance(target, ast.Name) and target.id in REASON_NAMES) or \
            (isinstance(target, ast.Attribute) and target.attr == "reason")

    def is_reasons(target: ast.AST) -> bool:
        return isinstance(target, ast.Name) and target.id == "reasons"

    for node in ast.walk(tree):
        line = getattr(node, "lineno", 1)
        if isinstance(node, ast.Call) and _name(node.func) in REASON_CALLS:
            index = REASON_CALLS[_name(node.func) or ""]
            nodes.append((node.args[index] if len(node.args) > index else None, line))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "append" and is_reasons(node.func.value) and node.args:
            nodes.append((node.args[0], line))
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(named(t) for t in targets):
                nodes.append((node.value, line))
            if any(is_reasons(t) for t in targets):
                nodes += [(v, line) for v in listed(node.value)]
        elif returns and isinstance(node, ast.Return):
            nodes.append((node.value, line))
    return [Template(parts, (where, line), "service reason")
            for value, line in nodes for parts in _templates(value)]


def page_templates(root: Path) -> list[Template]:
    """The service pages' fixed strings: each ``_("...")`` of ``SERVICE_PAGES``."""
    found = []
    for pattern in SERVICE_PAGES:
        for path in sorted(root.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            for match in _PAGE_STRING.finditer(text):
                english = match.group(1).replace('\\"', '"')
                line = text.count("\n", 0, match.start()) + 1
                found.append(Template(tuple(split(english, _PAGE_FIELD.findall(english))),
                                      (path.relative_to(root).as_posix(), line), "service page"))
    return found


def templates(root: Path | None = None) -> list[Template]:
    """Every template that needs a translation, each once (first occurrence), in source order."""
    root = Path(root or package_root())
    found: list[Template] = []
    for path in sorted(root.glob(HIDDEN_GLOB)):
        found += code_templates(path.read_text(encoding="utf-8"), path.relative_to(root).as_posix())
    for path in sorted(root.glob(SOURCES_GLOB)):
        found += _grade_templates(path, path.relative_to(root).as_posix(), hidden=True)
    for path in sorted(root.glob(SOURCES_GLOB)):  # what ForbiddenAPI says where a rule removes code
        from autograder import forbidden

        rel = path.relative_to(root).as_posix()
        for removal in forbidden.removals(forbidden.rules(path.stem, course_root=root)):
            found.append(Template(((removal["message"], False),), (rel, 1)))
    if (root / "autograder" / "hidden" / "_base.py").is_file():
        found += [Template(((text, False),), ("autograder/hidden/_base.py", 0)) for text in EXTRA]
    if (root / FEEDBACK_SOURCE).is_file():  # the sentence that names a misconception in feedback
        found += code_templates((root / FEEDBACK_SOURCE).read_text(encoding="utf-8"), FEEDBACK_SOURCE)
    found += [Template(((name, False),), (MISCONCEPTION_TABLE, 0)) for name in misconception_names(root)]
    found += page_templates(root)
    for rel, returns in REASON_SOURCES.items():
        if (root / rel).is_file():
            found += reason_templates((root / rel).read_text(encoding="utf-8"), rel, returns=returns)
    seen: dict[str, Template] = {}
    for template in found:
        if template.needed():
            seen.setdefault(template.english, template)
    return list(seen.values())


# --- the catalogue ----------------------------------------------------------------------------------

def update(language: str, root: Path | None = None) -> tuple[Path, int, int]:
    """Rewrite ``messages.po`` from the code (translations kept by key, unused ones obsolete);
    returns the path, the number of entries and of translated ones."""
    root = Path(root or package_root())
    path = catalogue_path(language, root)
    old = polib.pofile(str(path), wrapwidth=100) if path.is_file() else polib.POFile(wrapwidth=100)
    by_key = {e.msgctxt: e for e in old}
    po = polib.POFile(wrapwidth=100)
    po.metadata = {"Project-Id-Version": "cs336-resource-accounting", "Language": language,
                   "MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
                   "Content-Transfer-Encoding": "8bit"}
    keys = set()
    for template in templates(root):
        key = message_key(template.english)
        keys.add(key)
        was = by_key.get(key)
        po.append(polib.POEntry(msgctxt=key, msgid=template.english, msgstr=was.msgstr if was else "",
                                occurrences=[(template.where[0], str(template.where[1]))],
                                comment=template.kind, tcomment=was.tcomment if was else "",
                                flags=list(was.flags) if was else []))
    for entry in old:
        if entry.msgctxt not in keys and entry.msgstr.strip():
            entry.obsolete, entry.occurrences = True, []
            po.append(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != po.__unicode__():
        po.save(str(path))
    live = [e for e in po if not e.obsolete]
    return path, len(live), sum(bool(e.msgstr.strip()) for e in live)


def split(text: str, fields: list[str]) -> list[tuple[str, bool]]:
    """``text`` as parts, each occurrence of one of ``fields`` (longest first) a field."""
    if not fields:
        return [(text, False)] if text else []
    pattern = re.compile("|".join(map(re.escape, sorted(set(fields), key=len, reverse=True))))
    parts: list[tuple[str, bool]] = []
    at = 0
    for match in pattern.finditer(text):
        if match.start() > at:
            parts.append((text[at:match.start()], False))
        parts.append((match.group(0), True))
        at = match.end()
    if at < len(text):
        parts.append((text[at:], False))
    return parts


def entry_problems(entry: polib.POEntry, known: dict[str, Template]) -> list[tuple[str, str]]:
    """``(kind, message)`` for each problem of one live entry of ``messages.po``."""
    template = known.get(entry.msgid)
    if template is None or message_key(entry.msgid) != entry.msgctxt:
        return [("stale", "no message of the code has this English (python -m autograder.i18n update)")]
    if not entry.msgstr.strip():
        return [("missing", "no translation")]
    found = []
    if "fuzzy" in entry.flags:
        found.append(("fuzzy", "marked fuzzy"))
    wanted, got = sorted(template.fields), sorted(f for f, is_field in split(entry.msgstr, template.fields)
                                                  if is_field)
    if wanted != got:
        found.append(("placeholders", f"the English has {wanted}, the translation {got}"))
    if entry.msgstr.strip() == entry.msgid.strip() and template.prose():
        found.append(("untranslated", "the translation is the English"))
    return found


# code in a message: a field, or a token holding what only code holds (optimizer.state[p], lr=0.1)
_CODE_TOKEN = re.compile(r"\{[^{}]+\}|[!-+\--~]*[_.()\[\]='`<>*/][!-+\--~]*")  # ASCII but , ; :


def masked(text: str) -> str:
    """``text`` with its fields and code tokens blanked: what the page checks may read as prose."""
    return _CODE_TOKEN.sub(" ", text)


def check(language: str, root: Path | None = None, *,
          prose_check: Callable[[polib.POEntry], list[tuple[str, str]]] | None = None
          ) -> list[tuple[str, str, str]]:
    """``(where, kind, message)`` for each problem of the language's messages catalogue: missing
    (no entry or no translation), stale, untranslated, fuzzy, placeholders; with ``prose_check``
    (the page catalogues' glossary, usage and Simplified checks, given by ``autograder.i18n.checks``)
    also those on the prose of each message (``masked``)."""
    root = Path(root or package_root())
    path = catalogue_path(language, root)
    known = {t.english: t for t in templates(root)}
    entries = [e for e in polib.pofile(str(path))] if path.is_file() else []
    live = [e for e in entries if not e.obsolete]
    problems = [(f"{t.where[0]}:{t.where[1]} {english[:50]!r}", "missing", "no entry")
                for english, t in known.items() if english not in {e.msgid for e in live}]
    for path in sorted(root.glob(HIDDEN_GLOB)) + [root / FEEDBACK_SOURCE]:
        if path.is_file():
            problems += [(where, "fragment", problem) for where, problem in
                         fragments(path.read_text(encoding="utf-8"), path.relative_to(root).as_posix())]
    for entry in live:
        where = f"{CATALOGUE}:{entry.linenum} {entry.msgid[:50]!r}"
        found = entry_problems(entry, known)
        if prose_check is not None and not found:
            prose = polib.POEntry(msgid=masked(entry.msgid), msgstr=masked(entry.msgstr),
                                  tcomment=entry.tcomment)
            found = [(kind, message) for kind, message in prose_check(prose)
                     if kind not in ("numbers", "code", "missing")]
        problems += [(where, kind, message) for kind, message in found]
    return problems


# --- translating a message ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    fields: tuple[str, ...]
    target: tuple[tuple[str, bool], ...]


def _rules(pairs: list[tuple[str, str]]) -> list[_Rule]:
    """Compiled ``(English template, translation)`` pairs: those ending in literal text first (a
    wrapper such as ``{what}: {message} [seed {used_seed}]`` before what it wraps), then the longest
    literal text first."""
    rules = []
    for english, target in pairs:
        fields = re.findall(r"\{[^{}]+\}", english)
        parts = split(english, fields)
        literal = "".join(t for t, f in parts if not f)
        if not re.search(r"[A-Za-z]{2}", literal):
            continue  # nothing to anchor on: would match anything
        names = []
        regex = ""
        for text, is_field in parts:
            if is_field:
                names.append(text)
                regex += "(.*?)"  # fullmatch: the last field still takes the rest
            else:
                regex += re.escape(text)
        rank = (not parts[-1][1], len(literal))  # ending in text ("... [seed N]") is outermost
        rules.append((rank, _Rule(re.compile(regex, re.DOTALL), tuple(names),
                                  tuple(split(target, names)))))
    return [rule for _, rule in sorted(rules, key=lambda pair: pair[0], reverse=True)]


@functools.lru_cache(maxsize=8)
def _table(language: str, root: str) -> tuple[_Rule, ...]:
    path = catalogue_path(language, Path(root))
    if not path.is_file():
        return ()
    pairs = [(e.msgid, e.msgstr) for e in polib.pofile(str(path))
             if e.msgstr.strip() and not e.obsolete and "fuzzy" not in e.flags
             and e.comment != "service page"]
    return tuple(_rules(pairs))


def language_code(tag: str | None) -> str | None:
    """A language as a notebook names it (``zh-TW``, course.toml's tag) -> its gettext code (``zh_TW``);
    None for English or an unknown language."""
    for code, info in LANGUAGES.items():
        if tag in (code, info["tag"]):
            return code
    return None


def _english_words(text: str) -> int:
    """How many English words of running text ``text`` still shows (``Template.prose``'s words)."""
    return len(_WORD.findall(_QUOTED.sub(" ", text)))


def translate(message: str, language: str | None, root: Path | None = None, *, _depth: int = 0) -> str:
    """``message`` in ``language`` (a gettext code or a tag), or as it is (module docstring).

    The first template that matches, in ``_rules``' order, unless a later one that matches too leaves
    fewer English words: a label holding brackets ("... [parameters 10, ...]: expected 256, got 200")
    also fits ``{what}[{key!r}]: expected ...``, which would cut the label in two."""
    code = language_code(language)
    if not code or _depth > 8 or not message:
        return message
    return _translate(message, code, str(Path(root or package_root()).resolve()), _depth)


_WIDE = "\u3000-\u303f\u4e00-\u9fff\uff00-\uffef"  # CJK and full-width punctuation


def _joined(parts: list[tuple[str, bool]]) -> str:
    """A translation's parts put together, without the space that a field's value, translated into
    Chinese, leaves between two Chinese characters (「（已停用） 必須」: the space of "{what} 必須"
    is there for a Latin name)."""
    out = ""
    for n, (text, is_field) in enumerate(parts):
        after_field = n > 0 and parts[n - 1][1]
        if is_field and re.match(f"[{_WIDE}]", text) and re.search(f"[{_WIDE}] $", out):
            out = out[:-1]  # "實際得到 {x}" with a Chinese x
        elif after_field and re.search(f"[{_WIDE}]$", out) and re.match(f" [{_WIDE}]", text):
            text = text[1:]  # "{what} 必須" with a what that ends in Chinese
        out += text
    return out


@functools.lru_cache(maxsize=4096)
def _translate(message: str, code: str, root: str, depth: int) -> str:
    best: tuple[int, str] | None = None
    for rule in _table(code, root):
        match = rule.pattern.fullmatch(message)
        if match is None:
            continue
        values = {name: translate(value, code, Path(root), _depth=depth + 1)
                  for name, value in zip(rule.fields, match.groups(), strict=True)}
        shown = _joined([(values.get(text, text), is_field) for text, is_field in rule.target])
        if best is None or _english_words(shown) < best[0]:
            best = (_english_words(shown), shown)
        if best[0] == 0:
            break
    return best[1] if best else message


NOTEBOOK_KEY = "course"  # a translated release's ``metadata.course.language`` (autograder.authoring.release)


def notebook_language(nb: dict) -> str | None:
    """The language a notebook was released in (``zh-TW``), None for the English release."""
    course = nb.get("metadata", {}).get(NOTEBOOK_KEY, {})
    language = course.get("language") if isinstance(course, dict) else None
    return language if isinstance(language, str) else None


def translate_output(output: dict, language: str | None, root: Path | None = None) -> bool:
    """An error output of a notebook cell with its message in ``language`` (``evalue`` and where the
    traceback shows it), in place; whether anything changed."""
    evalue = output.get("evalue")
    if not isinstance(evalue, str) or not evalue:
        return False
    shown = translate(evalue, language, root)
    if shown == evalue:
        return False
    output["evalue"] = shown
    output["traceback"] = [frame.replace(evalue, shown) if isinstance(frame, str) else frame
                           for frame in output.get("traceback", [])]
    return True


# --- the student's kernel ---------------------------------------------------------------------------

HOOK_HEADER = "# 測試失敗時，訊息以繁體中文顯示（只改變顯示的文字，不影響測試與評分）"

_HOOK = '''\
{header}
def _course_messages(table):
    import re
    import string
    rules = []
    for english, target in table:
        regex = "".join(re.escape(text) + ("(.*?)" if name is not None else "")
                        for text, name, _, _ in string.Formatter().parse(english))
        rules.append((re.compile(regex, re.DOTALL), target))

    def translate(text, depth=0):
        for pattern, target in rules:
            match = pattern.fullmatch(text) if depth < 8 else None
            if match:
                return target.format(*(translate(v, depth + 1) for v in match.groups()))
        return text

    def show(shell, etype, value, tb, tb_offset=None):
        try:
            value.args = (translate(str(value)),)
        except Exception:
            pass
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)

    try:
        get_ipython().set_custom_exc((AssertionError,), show)
    except NameError:
        pass

    import builtins
    shown = builtins.print

    def print_(*args, **kwargs):  # a test cell's own line ("no GPU here: ..."); any other as it is
        if len(args) == 1 and isinstance(args[0], str) and kwargs.get("file") is None:
            args = (translate(args[0]),)
        shown(*args, **kwargs)

    builtins.print = print_


_course_messages({table})
del _course_messages'''


def _positional(english: str, target: str) -> tuple[str, str]:
    """A pair as ``str.format`` patterns: fields ``{0}``, ``{1}``... in the English order."""
    fields = re.findall(r"\{[^{}]+\}", english)
    order = {name: n for n, name in enumerate(dict.fromkeys(fields))}

    def form(text: str) -> str:
        return "".join(f"{{{order[t]}}}" if f else t.replace("{", "{{").replace("}", "}}")
                       for t, f in split(text, fields))

    return form(english), form(target)


def kernel_hook(assignment_source: Path, language: str, root: Path | None = None) -> str | None:
    """The code that shows the visible tests' messages of one exercise in ``language`` in the
    student's own kernel (an IPython exception handler; no import of this package), or None when
    none is translated. Only the visible tests' templates are in it: the hidden ones never reach a
    student's notebook."""
    code = language_code(language)
    if code is None:
        return None
    path = catalogue_path(code, root)
    if not path.is_file():
        return None
    done = {e.msgid: e.msgstr for e in polib.pofile(str(path))
            if e.msgstr.strip() and not e.obsolete and "fuzzy" not in e.flags}
    pairs = []
    for template in visible_templates(assignment_source, ""):
        if template.prose() and template.english in done and \
                (pair := _positional(template.english, done[template.english])) not in pairs:
            pairs.append(pair)
    if not pairs:
        return None
    pairs.sort(key=lambda pair: (not re.search(r"\{\d+\}$", pair[0]),  # as _rules orders them
                                 len(re.sub(r"\{\d+\}", "", pair[0]))), reverse=True)
    table = "[\n" + "".join(f"    ({english!r},\n     {target!r}),\n" for english, target in pairs) + "]"
    return _HOOK.format(header=HOOK_HEADER, table=table)


__all__ = ["Template", "catalogue_path", "check", "kernel_hook", "language_code", "notebook_language",
           "templates", "translate", "translate_output", "update"]
