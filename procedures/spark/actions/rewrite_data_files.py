"""The ``data_rewrite`` capability run on Spark: ``rewrite_data_files`` and
``rewrite_position_delete_files`` planned and executed by the core
(:mod:`procedures.core.data_rewrite.compaction`, :mod:`procedures.core.data_rewrite.position_deletes`)
on :class:`~procedures.spark.engine.data_rewrite_steps.DataRewriteSteps`."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from procedures.core.data_rewrite import compaction, position_deletes
from procedures.core.kernel.transaction import commit
from procedures.spark.engine.data_rewrite_steps import DataRewriteSteps
from procedures.spark.session import active_session

__all__ = ["DataRewriteEngine", "run_rewrite_data_files", "run_rewrite_position_deletes"]


class DataRewriteEngine(DataRewriteSteps):
    """The data rewrite steps on ``spark`` (None: the driver alone), committing through ``committer``
    (the CALL's, which records the changed table; default the kernel's)."""

    def __init__(self, spark: Any = None, *, committer: Callable[[Any, Sequence[Any]], Any] | None = None) -> None:
        self.spark = spark
        self.committer = committer

    def commit(self, table: Any, operations: Sequence[Any]) -> Any:
        """Through the caller's committer, else the kernel's."""
        return (self.committer or commit)(table, operations)


def run_rewrite_data_files(table: Any, params: compaction.RewriteDataFilesParams, spark: Any = None, *,
                           committer: Callable[[Any, Sequence[Any]], Any] | None = None) -> compaction.RewriteResult:
    """Plan on the table as loaded (a table without a snapshot needs no session), then execute on
    ``spark`` (default: the active session)."""
    plan = compaction.plan(table.metadata, params)
    if plan.starting_snapshot_id is None:
        return compaction.RewriteResult()
    engine = DataRewriteEngine(active_session(spark), committer=committer)
    return compaction.execute(table, plan, engine)


def run_rewrite_position_deletes(table: Any, params: position_deletes.RewritePositionDeletesParams, spark: Any = None,
                                 *, committer: Callable[[Any, Sequence[Any]], Any] | None = None
                                 ) -> position_deletes.RewritePositionDeletesResult:
    """Plan on the table as loaded (bad options fail before a session is asked for), then execute on
    ``spark`` (default: the active session)."""
    plan = position_deletes.plan(table.metadata, params)
    engine = DataRewriteEngine(active_session(spark), committer=committer)
    return position_deletes.execute(table, plan, engine)
