"""The one shape of every Spark action: a capability run on a :class:`SparkEngine`.

A builtin procedure maps its CALL arguments onto the capability's ``Params`` and calls
``Action(capability, ctx.spark, committer=ctx.commit).run(table, params)``; the capability's
``plan(metadata, params)`` validates them and decides what to do, its ``execute(table, plan, engine)``
does it through the engine's steps (:class:`procedures.core.kernel.capability.Capability`).
"""

from __future__ import annotations

from typing import Any, Callable, Generic, Sequence, TypeVar

from procedures.core.kernel.capability import Capability
from procedures.spark.engine.spark_engine import SparkEngine

__all__ = ["Action"]

ParamsT = TypeVar("ParamsT")
ResultT = TypeVar("ResultT")


class Action(Generic[ParamsT, ResultT]):
    """``capability`` on ``spark`` (None: on the driver alone)."""

    def __init__(self, capability: Capability[ParamsT, Any, ResultT], spark: Any = None, *,
                 committer: Callable[[Any, Sequence[Any]], Any] | None = None) -> None:
        self.capability = capability
        self.engine = SparkEngine(spark, committer=committer)

    def run(self, table: Any, params: ParamsT) -> ResultT:
        """Plan on the table as loaded, then execute; the typed result."""
        plan = self.capability.plan(table.metadata, params)
        return self.capability.execute(table, plan, self.engine)
