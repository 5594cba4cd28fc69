"""The shape every maintenance capability has (``procedures/core/<capability>/``).

``plan(metadata, params)`` validates the typed parameters once and decides what to do from the
metadata alone (a capability whose plan must read manifests says why in its docstring; one that
creates its table, as ``snapshot`` and ``migrate`` do, gets None and checks the parameters only);
``execute(table, plan, engine)`` does it through the engine steps the capability declares as a
protocol in its own ``engine.py`` and returns the typed result.  ``execute`` takes the table beside
the plan because it commits to it and reads through its FileIO.  The Spark layer runs every
capability the same way (:class:`procedures.spark.engine.action.Action`).
"""

from __future__ import annotations

from dataclasses import dataclass
from contextlib import AbstractContextManager
from typing import Any, Callable, Generic, Protocol, Sequence, TypeVar

from procedures.spec.metadata import TableMetadata

__all__ = ["Capability", "Committer", "JobScope"]

ParamsT = TypeVar("ParamsT")
PlanT = TypeVar("PlanT")
ResultT = TypeVar("ResultT")


class Committer(Protocol):
    """The engine step every capability that changes a table shares."""

    def commit(self, table: Any, operations: Sequence[Any]) -> Any:
        """Commit ``operations`` to ``table`` through the one transactional path; the new table."""
        ...


class JobScope(Protocol):
    """The engine step every capability that runs engine jobs shares."""

    def job(self, description: str) -> AbstractContextManager[None]:
        """A scope for one run's steps: names the engine's jobs ``description`` and keeps the rows
        the steps read more than once until it closes."""
        ...


@dataclass(frozen=True)
class Capability(Generic[ParamsT, PlanT, ResultT]):
    """A maintenance capability: its name (job descriptions, messages), its pure ``plan`` and its
    ``execute`` through an engine."""

    name: str
    plan: Callable[[TableMetadata | None, ParamsT], PlanT]
    execute: Callable[[Any, PlanT, Any], ResultT]
