"""One gradebook connection for a grading run, and one database transaction per submission.

nbgrader's preprocessors each open ``Gradebook(db_url)`` and commit after every cell. To reuse them
unchanged while keeping a submission all-or-nothing (a SIGKILL can never leave half its grades),
``borrowed_gradebook`` hands them the run's open gradebook instead, and ``one_transaction`` turns their
commits into flushes and commits once at the end (or rolls everything back).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from unittest import mock

from nbgrader.api import Gradebook
from nbgrader.preprocessors import (
    getgrades,
    latesubmissions,
    overwritecells,
    overwritekernelspec,
    saveautogrades,
)

# nbgrader modules whose preprocessors construct their own Gradebook
_MODULES = (overwritecells, overwritekernelspec, saveautogrades, latesubmissions, getgrades)


class _BorrowedGradebook:
    """A gradebook lent to nbgrader code: leaving its ``with`` block does not close it."""

    def __init__(self, gradebook: Gradebook) -> None:
        self._gradebook = gradebook

    def __getattr__(self, name: str):
        return getattr(self._gradebook, name)

    def __enter__(self) -> _BorrowedGradebook:
        return self

    def __exit__(self, *exc_info) -> None:
        return None

    def close(self) -> None:
        return None


@contextmanager
def borrowed_gradebook(gradebook: Gradebook) -> Iterator[None]:
    """While active, nbgrader preprocessors use ``gradebook`` instead of opening their own."""
    lent = _BorrowedGradebook(gradebook)
    with ExitStack() as stack:
        for module in _MODULES:
            stack.enter_context(mock.patch.object(module, "Gradebook", lambda *a, **k: lent))
        yield


@contextmanager
def one_transaction(gradebook: Gradebook) -> Iterator[None]:
    """Run the block as a single transaction: inner commits only flush; commit at the end, or roll
    back if the block raises."""
    session = gradebook.db
    session.commit()  # start from a clean transaction
    try:
        with mock.patch.object(session, "commit", session.flush):
            yield
    except BaseException:
        session.rollback()
        raise
    session.commit()
