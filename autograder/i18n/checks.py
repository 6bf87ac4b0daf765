"""What a translation must keep from its English unit, checked entry by entry of a catalogue, and
what the catalogues must agree on across pages.

Per entry:

- **complete**: every entry has a msgstr and none is ``#, fuzzy`` (stale);
- **numbers**: the set of numbers of the msgstr is the set of numbers of the msgid (NFKC, so full-width
  digits count; ``1,024`` is ``1024``), code spans and math aside (they are compared whole);
- **code**: inline code, MyST roles (role name and target; a role's shown title may be translated),
  ``$...$`` math and link targets occur in the msgstr exactly as in the msgid; math is compared with
  each ``\text{...}`` body emptied, so the words inside a formula may be translated;
- **glossary**: an English glossary term in the msgid (word, plural too, outside code; a longer term
  that contains it masks it: "storage dtype" is not "storage") needs its Taiwan term in the msgstr,
  unless the term is ``soft`` (the English word has other senses); a translator comment
  ``glossary-ok: <term>`` exempts one entry from one term;
- **reserved**: a ``reserved`` target (核心 is "core", never "kernel") only where the msgid has its
  English term (or a term whose target contains it: 張量核心 is "tensor core");
- **retired**: a rendering the glossary ``retired`` for a term (複本 for "copy") where the msgid has
  that term, unless another term present explains it;
- **usage**: a Taiwan-usage deny list (``usage.tsv``: mainland forms that OpenCC ``s2twp`` cannot
  catch in text already written in Traditional characters: 要麼, 報錯, 取整 ...); ``warn`` lines are
  reported, not counted; ``usage-ok: <form>`` exempts one entry;
- **simplified**: OpenCC ``s2twp`` leaves the msgstr unchanged, once the glossary's own terms (the
  course's chosen vocabulary, e.g. 參數, which s2twp's phrase table rewrites) are set aside.

Across catalogues (``check_catalogues``):

- **first-use**: on each page (chapter, intro, exercise), the first occurrence of a ``first`` term in
  running text (a unit with 。，；！ or ？: headings and labels are skipped) carries its English in
  full-width parentheses right after it, or after the compound (up to four more characters) it
  begins: 「張量（tensor）」, 「kernel（核函式）」, 「最佳化器狀態（optimizer state）」 (inside
  parentheses already, after a comma: 「（Adam 的動差，moment）」); ``first-ok:
  <term>`` on an entry skips it;
- **inconsistent**: the same English unit translated differently on two pages, and the consistency
  report: an English term rendered more than one way (its target and a retired rendering) across pages;
- **unused**: a glossary term that no catalogue's English contains (a dead entry).

``messages.po`` (the test messages) is checked by ``autograder.i18n.messages.check`` instead: against
the code its templates come from (missing, stale, untranslated, placeholders), and by the entry
checks above on each message's prose only (fields and code tokens blanked); it is no page.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import polib

from autograder.i18n import LOCALES_DIR

_ROLE = re.compile(r"\{([\w:.-]+)\}(`+)(.+?)\2")
_CODE = re.compile(r"(?<!\})(`+)(.+?)\1")
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\s](?:[^$]*?[^$\s])?\$")
_LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
_NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
_TEXT_BODY = re.compile(r"\\text\{([^{}]*)\}")
_FIELD = re.compile(r"\{\d+\}")  # a field of an f-string figure text (figures.po)
_SENTENCE = re.compile(r"[。，；！？]")  # running text, not a heading or a label
_COMPOUND = re.compile(r"[\u3400-\u9fff]{0,4}")  # 最佳化器狀態（optimizer state）: the gloss of a compound


def _exempt(entry: polib.POEntry, key: str) -> set[str]:
    """The terms a translator comment ``<key>: a, b`` exempts this entry from (lower-cased)."""
    found = re.finditer(rf"{key}:\s*([^\n;]+)", entry.tcomment or "")
    return {t.strip().lower() for m in found for t in m.group(1).split(",")}


@dataclass(frozen=True)
class Problem:
    """One finding: the catalogue, the entry's English (shortened) and its source line, what is wrong."""

    path: str
    where: str
    kind: str  # one of KINDS in __main__
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.where}: {self.kind}: {self.message}"


@dataclass(frozen=True)
class Term:
    """One glossary line: ``English<TAB>target[<TAB>options]`` (options ``;``-separated)."""

    english: str
    target: str
    soft: bool = False  # the English word has other senses: the target is not required
    reserved: bool = False  # the target only where the English has the term
    first: str | None = None  # the gloss its first use on a page carries in （…）
    retired: tuple[str, ...] = ()  # renderings replaced by the target
    label: bool = False  # a label of the pages ("Check yourself"), not on the terminology page

    @classmethod
    def parse(cls, line: str) -> Term:
        english, target, *rest = [part.strip() for part in line.split("\t")]
        options: dict = {}
        for option in (o.strip() for o in (rest[0] if rest else "").split(";") if o.strip()):
            key, _, value = option.partition("=")
            key = key.strip()
            if key in ("soft", "reserved", "label"):
                options[key] = True
            elif key == "first":
                options["first"] = value.strip() or english
            elif key == "retired":
                options["retired"] = tuple(v.strip() for v in value.split(",") if v.strip())
            else:
                raise ValueError(f"glossary: unknown option {key!r} in {line!r}")
        return cls(english, target, **options)


@dataclass(frozen=True)
class Usage:
    """One line of ``usage.tsv``: ``regex<TAB>deny|warn<TAB>what to write instead``."""

    pattern: re.Pattern
    level: str
    instead: str


def glossary_path(language: str, root: Path = Path(".")) -> Path:
    return Path(root) / LOCALES_DIR / language / "glossary.tsv"


def usage_path(language: str, root: Path = Path(".")) -> Path:
    return Path(root) / LOCALES_DIR / language / "usage.tsv"


def _lines(path: Path) -> list[str]:
    return [line for line in Path(path).read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.startswith("#")]


def read_terms(path: Path) -> list[Term]:
    """Every glossary line, in file order (module docstring for the options)."""
    return [Term.parse(line) for line in _lines(path)]


def read_glossary(path: Path) -> dict[str, str]:
    """English term -> target-language term, from a TAB-separated file (``#`` lines are comments)."""
    return {term.english: term.target for term in read_terms(path)}


def read_usage(path: Path) -> list[Usage]:
    """The Taiwan-usage list (none when the file does not exist)."""
    if not Path(path).is_file():
        return []
    found = []
    for line in _lines(path):
        pattern, level, instead = (line.split("\t") + ["", ""])[:3]
        if level.strip() not in ("deny", "warn"):
            raise ValueError(f"usage.tsv: level must be deny or warn: {line!r}")
        found.append(Usage(re.compile(pattern.strip()), level.strip(), instead.strip()))
    return found


def _math(text: str) -> str:
    """A math span with each ``\text{...}`` body emptied (those words may be translated)."""
    return _TEXT_BODY.sub(r"\\text{}", text)


def text_bodies(text: str) -> list[str]:
    """The ``\text{...}`` bodies of the math of ``text`` (prose inside formulas)."""
    return [body for m in _MATH.finditer(prose(text, keep_math=True)) for body in
            _TEXT_BODY.findall(m.group(0))]


def protected(text: str) -> Counter[str]:
    """What must come through untouched: code spans, roles (name and target), math (``\text{}`` bodies
    aside), link targets."""
    found: Counter[str] = Counter()
    rest = text
    for match in _ROLE.finditer(text):
        content = match.group(3)
        target = re.search(r"<([^>]+)>\s*$", content)
        found[f"{{{match.group(1)}}}{target.group(1) if target else content}"] += 1
    rest = _ROLE.sub(" ", rest)
    for pattern in (_CODE, _MATH, _LINK_TARGET):
        found.update(_math(m.group(0)) if pattern is _MATH else m.group(0) for m in pattern.finditer(rest))
        rest = pattern.sub(" ", rest)
    return found


def prose(text: str, *, keep_math: bool = False) -> str:
    """``text`` without what ``protected`` finds (numbers and words inside code are not prose), nor a
    figure text's ``{0}`` fields."""
    text = _FIELD.sub(" ", text)
    for pattern in (_ROLE, _CODE, _MATH, _LINK_TARGET):
        if not (keep_math and pattern is _MATH):
            text = pattern.sub(" ", text)
    return text


def numbers(text: str) -> set[str]:
    """The numbers of the prose of ``text`` (NFKC-normalized, thousands separators dropped)."""
    plain = unicodedata.normalize("NFKC", prose(text))
    return {_number(m.group(0)) for m in _NUMBER.finditer(plain)}


def _number(text: str) -> str:
    """One number as the checks compare it: no thousands separators, no leading zero (第 08 章 is
    chapter 8: a Chinese reader writes 第 8 章)."""
    whole, dot, fraction = text.replace(",", "").partition(".")
    return (whole.lstrip("0") or "0") + dot + fraction


@cache
def _term(english: str) -> re.Pattern:
    words = r"[ -]".join(re.escape(word) for word in english.split())  # tensor core, tensor-core
    return re.compile(rf"(?<![\w-]){words}(?:s|es)?(?![\w-])", re.IGNORECASE)


def _terms(glossary: Mapping[str, str] | Iterable[Term]) -> list[Term]:
    if isinstance(glossary, Mapping):
        return [Term(english, target) for english, target in glossary.items()]
    return list(glossary)


def english_has(term: Term, english: str, terms: list[Term]) -> bool:
    """Whether the prose of ``english`` has ``term``, outside longer terms that contain it."""
    text = prose(english)
    for longer in terms:
        if longer.english != term.english and term.english.lower() in longer.english.lower():
            text = _term(longer.english).sub(" ", text)
    return bool(_term(term.english).search(text))


@cache
def _converter():
    import opencc

    return opencc.OpenCC("s2twp")


def simplified(text: str, glossary: Mapping[str, str] | Iterable[Term]) -> str | None:
    """What OpenCC ``s2twp`` would change in ``text`` (None when nothing), glossary terms set aside."""
    plain = " ".join([prose(text), *text_bodies(text)])
    for target in sorted({t.target for t in _terms(glossary)}, key=len, reverse=True):
        plain = plain.replace(target, "\u3000")
    converted = _converter().convert(plain)
    if converted == plain:
        return None
    changed = [f"{a}->{b}" for a, b in zip(plain, converted, strict=False) if a != b]
    return ", ".join(changed[:5]) or f"{plain!r} -> {converted!r}"


def check_entry(entry: polib.POEntry, glossary: Mapping[str, str] | Iterable[Term],
                usage: Iterable[Usage] = ()) -> list[tuple[str, str]]:
    """``(kind, message)`` for each problem of one entry (module docstring); a ``warn`` usage comes
    back as kind ``warning``."""
    if not entry.msgstr.strip():
        return [("missing", "no translation")]
    terms = _terms(glossary)
    found: list[tuple[str, str]] = []
    if "fuzzy" in entry.flags:
        found.append(("fuzzy", "the English changed since this was translated (see #| msgid)"))
    en, zh = entry.msgid, entry.msgstr
    if numbers(en) != numbers(zh):
        found.append(("numbers", f"English has {sorted(numbers(en))}, translation {sorted(numbers(zh))}"))
    lost, added = protected(en) - protected(zh), protected(zh) - protected(en)
    if lost or added:
        found.append(("code", f"not byte-identical: missing {sorted(lost)}, extra {sorted(added)}"))
    exempt = _exempt(entry, "glossary-ok")
    present = [t for t in terms if english_has(t, en, terms)]
    zh_prose = " ".join([prose(zh), *text_bodies(zh)])
    for term in present:
        if not term.soft and term.english.lower() not in exempt and term.target not in zh:
            found.append(("glossary", f"{term.english!r} is {term.target!r} in the glossary"))
    explained = {t.target for t in present}
    for term in terms:
        if term.reserved and term.english.lower() not in exempt and term.target in zh_prose and \
                not any(term.target in target for target in explained):
            found.append(("reserved", f"{term.target!r} is reserved for {term.english!r}, which the "
                                      "English does not say"))
    for term in present:
        for old in term.retired:
            if old in zh_prose and term.english.lower() not in exempt and \
                    not any(old in target for target in explained):
                found.append(("retired", f"{old!r} for {term.english!r}: the glossary says "
                                         f"{term.target!r}"))
    usage_exempt = _exempt(entry, "usage-ok")
    for rule in usage:
        hit = rule.pattern.search(zh_prose)
        if hit and hit.group(0).lower() not in usage_exempt:
            kind = "usage" if rule.level == "deny" else "warning"
            found.append((kind, f"{hit.group(0)!r} is not Taiwan usage here: {rule.instead}"))
    change = simplified(zh, terms)
    if change:
        found.append(("simplified", f"OpenCC s2twp would change {change}"))
    return found


def _where(entry: polib.POEntry) -> str:
    ref = ":".join(entry.occurrences[0]) if entry.occurrences else entry.msgctxt
    return f"{ref} {entry.msgid[:50]!r}"


def check_catalogue(path: Path, glossary: Mapping[str, str] | Iterable[Term], *,
                    usage: Iterable[Usage] = (), shown: str | None = None) -> list[Problem]:
    """Every problem of the live (non-obsolete) entries of one ``.po`` file."""
    po = polib.pofile(str(path))
    usage = list(usage)
    return [Problem(shown or str(path), _where(entry), kind, message)
            for entry in po if not entry.obsolete
            for kind, message in check_entry(entry, glossary, usage)]


# --- across catalogues -----------------------------------------------------------------------------

def is_page(path: Path) -> bool:
    """A catalogue a reader meets as one page: a chapter, the intro, an exercise (not the title,
    the captions, the references, the figures' texts or the test messages)."""
    return Path(path).name not in ("_config.po", "_toc.po", "references.po", "figures.po", "messages.po")


def first_use(entries: list[polib.POEntry], terms: list[Term]) -> list[tuple[polib.POEntry, str]]:
    """``(entry, message)`` for each ``first`` term whose first occurrence on this page, in running
    text, is not followed by its gloss in （…）."""
    found = []
    longer = {t.english: [o.target for o in terms if o.target != t.target and t.target in o.target]
              for t in terms}
    for term in terms:
        first = term.first
        if not first:
            continue
        for entry in entries:
            zh = prose(entry.msgstr)
            if not _SENTENCE.search(zh) or term.english.lower() in _exempt(entry, "first-ok"):
                continue
            for target in longer[term.english]:  # 張量核心 is not a use of 張量
                zh = zh.replace(target, "\u3000" * len(target))
            at = zh.find(term.target)
            if at < 0:
                continue
            after = zh[at + len(term.target):]
            compound = _COMPOUND.match(after)
            assert compound is not None  # {0,4}: it matches every string
            after = after[compound.end():].lstrip(" ")
            gloss = re.match(r"[（，]([^（）]*)）", after)  # 「張量（tensor）」, inside （…）: 「動差，moment）」
            if not gloss or first.lower() not in gloss.group(1).lower():
                found.append((entry, f"first use of {term.target!r} on this page: write "
                                     f"「{term.target}（{term.first}）」"))
            break
    return found


@dataclass
class Report:
    """What ``check_catalogues`` found: problems per catalogue, the renderings per English term."""

    problems: dict[str, list[Problem]] = field(default_factory=dict)
    renderings: dict[str, Counter[str]] = field(default_factory=dict)  # term -> rendering -> units
    where: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (term, rendering) -> pages


def check_catalogues(paths: Iterable[Path], terms: list[Term], *, usage: Iterable[Usage] = (),
                     every: bool = False) -> Report:
    """Each catalogue's own problems, then what only the set of them shows: first use per page, one
    English unit with two translations, one term with two renderings; with ``every`` (all the
    catalogues of the language) also the glossary's unused terms."""
    from autograder.i18n import messages

    report = Report()
    usage = list(usage)
    live: dict[str, list[polib.POEntry]] = {}
    messages_prose: list[polib.POEntry] = []  # messages.po's prose: in the renderings and unused terms
    for path in paths:
        key = str(path)
        if Path(path).name == messages.CATALOGUE:  # checked against the code it comes from
            language, root = Path(path).parent.name, Path(path).parents[2]
            report.problems[key] = [Problem(key, where, kind, message) for where, kind, message in
                                    messages.check(
                                        language, root,
                                        prose_check=lambda e: check_entry(e, terms, usage))]
            messages_prose = [polib.POEntry(msgid=messages.masked(e.msgid), msgstr=messages.masked(e.msgstr))
                              for e in polib.pofile(str(path)) if not e.obsolete and e.msgstr.strip()]
            continue
        live[key] = [e for e in polib.pofile(str(path)) if not e.obsolete]
        report.problems[key] = [Problem(key, _where(e), kind, message) for e in live[key]
                                for kind, message in check_entry(e, terms, usage)]
        if is_page(Path(path)):
            done = [e for e in live[key] if e.msgstr.strip() and "fuzzy" not in e.flags]
            report.problems[key] += [Problem(key, _where(e), "first-use", message)
                                     for e, message in first_use(done, terms)]
    by_unit: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for key, entries in live.items():
        for e in entries:
            if e.msgstr.strip() and "fuzzy" not in e.flags:
                by_unit[e.msgctxt][e.msgstr].append(key)
    for key, entries in live.items():
        for e in entries:
            versions = by_unit.get(e.msgctxt, {})
            if len(versions) > 1 and "inconsistent-ok" not in (e.tcomment or ""):
                others = sorted({v for v in versions if v != e.msgstr})
                report.problems[key].append(Problem(
                    key, _where(e), "inconsistent",
                    f"the same English is {others[0]!r} elsewhere ({', '.join(sorted(set(versions[others[0]])))})"))
    counted = {**live, **({messages.CATALOGUE: messages_prose} if messages_prose else {})}
    for term in (t for t in terms if t.retired):
        seen: Counter[str] = Counter()
        for key, entries in counted.items():
            for e in entries:
                if not english_has(term, e.msgid, terms):
                    continue
                for rendering in (term.target, *term.retired):
                    if rendering in prose(e.msgstr):  # not an identifier in code
                        seen[rendering] += 1
                        report.where.setdefault((term.english, rendering), set()).add(key)
        report.renderings[term.english] = seen
    if every:
        english = [e.msgid for entries in counted.values() for e in entries]
        for term in terms:
            if not any(english_has(term, text, terms) for text in english):
                report.problems.setdefault("glossary.tsv", []).append(Problem(
                    "glossary.tsv", term.english, "unused",
                    f"{term.english!r} occurs in no catalogue's English: remove the entry"))
    return report


def inconsistent_terms(report: Report) -> dict[str, Counter[str]]:
    """The consistency report: English terms with more than one rendering across the catalogues."""
    return {term: seen for term, seen in report.renderings.items() if len(+seen) > 1}
