"""``python -m autograder.tools.regenerate --check`` passes on the tree and fails on a planted stale
artefact, naming it and the command that regenerates it, without writing; without ``--check`` it
writes the artefact back. The cheap artefacts (the outline, the settings tables) are planted in a
temporary copy of the course; the whole ``--check`` (releases, translations, misconceptions, the
goldens) is what ``make check`` runs on the tree."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autograder.tools import regenerate, tables

ROOT = Path(__file__).resolve().parents[1]
CHEAP = "outline,tables"


def _copy(tmp_path: Path) -> Path:
    copy = tmp_path / "course"
    copy.mkdir()
    for name in ("course.toml", "_toc.yml"):
        shutil.copy2(ROOT / name, copy / name)
    for page in tables.PAGES:
        (copy / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / page, copy / page)
    return copy


def test_the_cheap_artefacts_of_the_tree_are_current(capsys):
    assert regenerate.main(["--check", "--only", CHEAP, "--course-root", str(ROOT)]) == 0
    assert capsys.readouterr().out.splitlines() == ["outline: current", "tables: current"]


def test_a_planted_stale_outline_and_table_are_named_with_their_commands(tmp_path, capsys):
    copy = _copy(tmp_path)
    assert regenerate.main(["--check", "--only", CHEAP, "--course-root", str(copy)]) == 0
    toc = copy / "_toc.yml"
    toc.write_text(toc.read_text(encoding="utf-8").replace("chapters/", "chapter/", 1), encoding="utf-8")
    page = copy / next(iter(tables.PAGES))
    row = next(line for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("| `"))
    page.write_text(page.read_text(encoding="utf-8").replace(row, row + " planted |", 1), encoding="utf-8")
    planted = {p: p.read_bytes() for p in (toc, page)}
    capsys.readouterr()

    assert regenerate.main(["--check", "--only", CHEAP, "--course-root", str(copy)]) == 1
    err = capsys.readouterr().err
    assert "stale: outline (_toc.yml): run autograder outline" in err
    assert f"stale: tables ({next(iter(tables.PAGES))}): run python -m autograder.tools.tables" in err
    assert {p: p.read_bytes() for p in planted} == planted, "--check wrote to the course"

    assert regenerate.main(["--only", CHEAP, "--course-root", str(copy)]) == 0
    assert toc.read_bytes() == (ROOT / "_toc.yml").read_bytes()
    assert regenerate.check(copy, CHEAP.split(",")) == {}


def test_the_goldens_are_skipped_without_the_test_suites_make_targets(tmp_path, capsys):
    assert regenerate.check(_copy(tmp_path), ["tamper-golden", "parity-golden"]) == {}
    assert capsys.readouterr().out.count("(skipped: ") == 2


def test_an_unknown_artefact_is_refused():
    with pytest.raises(SystemExit):
        regenerate.main(["--check", "--only", "outlines"])
    assert set(regenerate.BY_NAME) == {"outline", "tables", "releases", "translations", "misconceptions",
                                       "tamper-golden", "parity-golden"}


def test_the_misconceptions_table_is_checked_by_the_digest_of_its_inputs(tmp_path, capsys):
    """``--check`` grades nothing: it compares the digest the table was built from; a changed catalogue
    entry makes it stale (``make test`` still regrades in full: tests/test_misconceptions.py)."""
    from autograder.reports import misconception_table

    copy = tmp_path / "course"
    for folder in ("catalogue", "solutions", "exercises"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__", "*.zh-TW.*"))
    assert regenerate.check(copy, ["misconceptions"]) == {}
    entry = copy / "catalogue" / "01_strides.py"
    entry.write_text(entry.read_text(encoding="utf-8") + "\n# one more line\n", encoding="utf-8")
    assert regenerate.check(copy, ["misconceptions"]) == {"misconceptions": [str(misconception_table.TABLE)]}
    assert misconception_table.main(["--check", "--course-root", str(copy)]) == 1
    assert "stale: run make misconceptions" in capsys.readouterr().out
