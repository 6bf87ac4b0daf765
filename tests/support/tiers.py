"""The fast tier, ``-m fast`` (``make check``, with ruff, mypy, lint-imports and ``regenerate --check``,
under 2 minutes): test module -> its tests left out (the slow ones, and the ruff, mypy and
import-linter runs that ``make check`` makes itself). The guards come with their planted-violation
self-tests. ``tests/conftest.py`` marks them; ``python tests/support/tiers.py`` prints the modules, so
that ``make check`` collects only those (collecting the whole suite costs half a minute)."""

from __future__ import annotations

from pathlib import Path

FAST: dict[str, tuple[str, ...]] = {
    "test_architecture": ("test_import_contracts_hold",),
    "test_product_data": (),
    "test_layout_table": (),
    "test_trust_boundary": (),
    "test_vocabulary": (),
    "test_types": ("test_mypy_is_clean",),
    "test_regenerate": (),
    "test_docs": (),
    "test_notebook_hygiene": (),
    "test_wire_codec": (),
    "test_deadlines": (),
    "test_settings": (),
    "test_manifest": ("test_new_exercise_releases_grades_and_is_in_the_outline",),
    "test_source": (),
    "test_forbidden": ("test_a_submission_that_delegates_is_flagged_in_its_run_record_and_the_report",
                       "test_a_hostile_cell_is_flagged_never_a_crash"),
}
TESTS = Path(__file__).resolve().parents[1]


def is_fast(module: str, test: str) -> bool:
    """Whether ``test`` (its name without parameters) of ``module`` (no ``.py``) is in the fast tier."""
    return module in FAST and test not in FAST[module]


def fast_modules() -> list[str]:
    """The fast tier's modules that exist, as paths from the repository root."""
    return [f"tests/{m}.py" for m in FAST if (TESTS / f"{m}.py").is_file()]


if __name__ == "__main__":
    print(" ".join(fast_modules()))
