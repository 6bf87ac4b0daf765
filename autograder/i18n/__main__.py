"""``python -m autograder.i18n``: keep the translation catalogues in step with the English sources.

    python -m autograder.i18n update [--language zh_TW]   rewrite every catalogue from its source
                                                          (figures.po: the figures' texts, figures.py;
                                                          messages.po: the test messages, messages.py)
    python -m autograder.i18n check [FILES...] [--summary] report what each catalogue still lacks
                                                          (exit 1 when anything does)
    python -m autograder.i18n pages [--language zh_TW]    write the translated book's sources into
                                                          _build/i18n/<lang>/book/ (make site builds it)

``check`` needs only ``polib`` and ``opencc``: it reads the .po files, the glossary (``glossary.tsv``)
and the Taiwan-usage list (``usage.tsv``), never a source. Besides each catalogue's entries it checks
what only all of them show (first use of a term per page, one English unit or term rendered two ways,
glossary terms no page uses) and prints the consistency report.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from autograder.i18n import DEFAULT_LANGUAGE, LOCALES_DIR

KINDS = ("missing", "fuzzy", "numbers", "code", "glossary", "reserved", "retired", "usage", "simplified", "fragment",
         "first-use", "inconsistent", "unused", "stale", "untranslated", "placeholders")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.i18n", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["update", "check", "pages"])
    parser.add_argument("files", nargs="*", type=Path, help="check: catalogues (default: all)")
    parser.add_argument("--language", default=DEFAULT_LANGUAGE)
    parser.add_argument("--root", type=Path, default=Path("."))
    parser.add_argument("--summary", action="store_true", help="check: counts only")
    args = parser.parse_intermixed_args(argv)
    if args.command == "update":
        return _update(args.root, args.language)
    if args.command == "pages":
        return _pages(args.root, args.language)
    return _check(args.root, args.language, args.files, summary=args.summary)


def _update(root: Path, language: str) -> int:
    from autograder.i18n import figures, messages
    from autograder.i18n.catalogue import sources, update

    for source in sources(root):
        result = update(source, language, root)
        stale = f", {len(result.fuzzy)} newly fuzzy" if result.fuzzy else ""
        print(f"{result.path.relative_to(root)}: {result.entries} entries, "
              f"{result.translated} translated{stale}, {result.obsolete} obsolete")
    path, entries, translated = figures.update(language, root)
    print(f"{path.relative_to(root)}: {entries} figure texts, {translated} translated")
    path, entries, translated = messages.update(language, root)
    print(f"{path.relative_to(root)}: {entries} test messages, {translated} translated")
    return 0


def _pages(root: Path, language: str) -> int:
    from autograder.i18n.pages import write_book

    report = write_book(language, root)
    for page, count in sorted(report.untranslated.items()):
        print(f"{page}: {count} units not yet translated (shown in English, marked)")
    print(f"{language}: {report.translated} units translated, {report.missing} not yet translated; "
          f"book sources in {report.book}")
    return 0


def _check(root: Path, language: str, files: list[Path], *, summary: bool) -> int:
    from autograder.i18n.checks import (
        check_catalogues,
        glossary_path,
        inconsistent_terms,
        read_terms,
        read_usage,
        usage_path,
    )

    terms = read_terms(glossary_path(language, root))
    usage = read_usage(usage_path(language, root))
    every = not files
    files = files or sorted((root / LOCALES_DIR / language).rglob("*.po"))
    report = check_catalogues(files, terms, usage=usage, every=every)  # messages.po: messages.check
    total: Counter[str] = Counter()
    warnings = 0
    for path, problems in report.problems.items():
        counts = Counter(p.kind for p in problems)
        warnings += counts.pop("warning", 0)
        total.update(counts)
        state = ", ".join(f"{counts[k]} {k}" for k in KINDS if counts[k]) or "complete"
        print(f"{path}: {state}")
        if not summary:
            for problem in problems:
                if problem.kind != "missing":
                    print(f"  {problem.where}: {problem.kind}: {problem.message}")
    inconsistent = inconsistent_terms(report)
    print("consistency: " + ("one rendering per glossary term" if not inconsistent else
                             f"{len(inconsistent)} terms with more than one rendering"))
    for term, seen in sorted(inconsistent.items()):
        print(f"  {term!r}: " + "; ".join(
            f"{rendering} x{n} ({', '.join(sorted(Path(w).stem for w in report.where[term, rendering]))})"
            for rendering, n in seen.most_common()))
    if warnings:
        print(f"warnings (usage to review, not counted): {warnings}")
    print("total: " + (", ".join(f"{total[k]} {k}" for k in KINDS if total[k]) or "no problems"))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
