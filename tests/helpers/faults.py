"""A fault-injecting catalog wrapper for commit tests (no mocks: it wraps a real catalog)."""

from __future__ import annotations

from typing import Callable

from procedures.catalog.base import Catalog, Table
from procedures.errors import CommitFailedError, CommitStateUnknownError


class FaultyCatalog:
    """Delegates to ``inner`` but injects commit faults.

    * ``fail_times``: the first N commits are refused as lost races (nothing written);
    * ``succeed_then_unknown``: the commit is applied, then reported as unknown;
    * ``race``: called before each of the first ``race_times`` commits, to commit something else
      first through the inner catalog, so the wrapped commit loses the swap for real.
    """

    def __init__(self, inner: Catalog, *, fail_times: int = 0, succeed_then_unknown: bool = False,
                 race: Callable[[], None] | None = None, race_times: int = 1) -> None:
        self.inner = inner
        self.name = inner.name
        self.fail_times = fail_times
        self.succeed_then_unknown = succeed_then_unknown
        self.race = race
        self.race_times = race_times
        self.attempts = 0

    def load_table(self, identifier) -> Table:
        t = self.inner.load_table(identifier)
        return Table(t.identifier, t.metadata, t.metadata_location, t.io, self)

    def commit_table(self, table: Table, base, new) -> Table:
        self.attempts += 1
        if self.attempts <= self.fail_times:
            raise CommitFailedError(f"injected conflict {self.attempts}", table=str(table.identifier))
        if self.race is not None and self.attempts <= self.race_times:
            self.race()
        inner_table = Table(table.identifier, table.metadata, table.metadata_location, table.io, self.inner)
        committed = self.inner.commit_table(inner_table, base, new)
        if self.succeed_then_unknown:
            raise CommitStateUnknownError("injected: the catalog did not answer", table=str(table.identifier))
        return Table(committed.identifier, committed.metadata, committed.metadata_location, committed.io, self)

    def __getattr__(self, name):
        return getattr(self.inner, name)
