"""``python -m autograder.i18n``: keep the translation catalogues in step with the English sources.

    python -m autograder.i18n update [--language zh_TW]   rewrite every catalogue from its source
    python -m autograder.i18n check [FILES...] [--summary] report what each catalogue still lacks
                                                          (exit 1 when anything does)
    python -m autograder.i18n pages [--language zh_TW]    write the translated book's sources into
                                                          _build/i18n/<lang>/book/ (make site builds it)

``check`` needs only ``polib`` and ``opencc``: it reads the .po files and the glossary, never a source.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from autograder.i18n import DEFAULT_LANGUAGE, LOCALES_DIR

KINDS = ("missing", "fuzzy", "numbers", "code", "glossary", "simplified")


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
    from autograder.i18n.catalogue import sources, update

    for source in sources(root):
        result = update(source, language, root)
        stale = f", {len(result.fuzzy)} newly fuzzy" if result.fuzzy else ""
        print(f"{result.path.relative_to(root)}: {result.entries} entries, "
              f"{result.translated} translated{stale}, {result.obsolete} obsolete")
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
    from autograder.i18n.checks import check_catalogue, glossary_path, read_glossary

    glossary = read_glossary(glossary_path(language, root))
    files = files or sorted((root / LOCALES_DIR / language).rglob("*.po"))
    total: Counter[str] = Counter()
    for path in files:
        problems = check_catalogue(path, glossary)
        counts = Counter(p.kind for p in problems)
        total.update(counts)
        state = ", ".join(f"{counts[k]} {k}" for k in KINDS if counts[k]) or "complete"
        print(f"{path}: {state}")
        if not summary:
            for problem in problems:
                if problem.kind != "missing":
                    print(f"  {problem.where}: {problem.kind}: {problem.message}")
    print("total: " + (", ".join(f"{total[k]} {k}" for k in KINDS if total[k]) or "no problems"))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
