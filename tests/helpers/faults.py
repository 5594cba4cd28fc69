"""Fault injection for tests: a fault-injecting catalog wrapper for commit tests (no mocks: it wraps
a real catalog), and :func:`armed`, which applies a :class:`~procedures.core.kernel.fault_points.FaultPlan`
on the driver and in Spark tasks."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator

from procedures.catalog.base import Catalog, Table
from procedures.core.kernel import fault_points
from procedures.core.kernel.fault_points import FaultPlan
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
        return self.commit_changes(table, base, new, [])

    def commit_changes(self, table: Table, base, new, updates) -> Table:
        self.attempts += 1
        if self.attempts <= self.fail_times:
            raise CommitFailedError(f"injected conflict {self.attempts}", table=str(table.identifier))
        if self.race is not None and self.attempts <= self.race_times:
            self.race()
        inner_table = Table(table.identifier, table.metadata, table.metadata_location, table.io, self.inner)
        committed = self.inner.commit_changes(inner_table, base, new, updates)
        if self.succeed_then_unknown:
            raise CommitStateUnknownError("injected: the catalog did not answer", table=str(table.identifier))
        return Table(committed.identifier, committed.metadata, committed.metadata_location, committed.io, self)

    def __getattr__(self, name):
        return getattr(self.inner, name)


# ------------------------------------------------------------------ fault plans (kill anywhere)
@contextlib.contextmanager
def armed(spark, plan: FaultPlan, plan_file: str) -> Iterator[None]:
    """Apply ``plan`` inside the block on the driver and in every Spark task the block starts."""
    with open(plan_file, "w", encoding="utf-8") as f:
        f.write(plan.to_json())
    previous = fault_points.install(plan.injector("driver"))
    sc = spark.sparkContext if spark is not None else None
    if sc is not None:
        sc.setLocalProperty(fault_points.PLAN_PROPERTY, plan_file)
    try:
        yield
    finally:
        fault_points.install(previous)
        if sc is not None:
            sc.setLocalProperty(fault_points.PLAN_PROPERTY, None)


def count_points(log: list[tuple[str, str, int, str]]) -> dict[str, int]:
    """How many points of each kind a plan's log (:func:`~procedures.core.kernel.fault_points.read_log`) holds."""
    counts: dict[str, int] = {}
    for kind, _, _, _ in log:
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def then(monkeypatch, owner: object, name: str, action: Callable[[], object]) -> None:
    """Patch ``owner.name`` so that ``action()`` runs right after each call returns (a concurrent
    writer's commit at an exact step of a procedure, for instance)."""
    real = getattr(owner, name)

    def patched(*args, **kwargs):
        out = real(*args, **kwargs)
        action()
        return out

    monkeypatch.setattr(owner, name, patched)
