"""Capabilities run through the uniform action the way tests call them: ``compute_table_stats`` and
``compute_partition_stats`` returning the registered file, ``rewrite_table_path`` its result."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from procedures.core.table_relocation.relocation import REWRITE_TABLE_PATH, RewriteTablePathParams
from procedures.core.table_stats.column_sketches import COMPUTE_TABLE_STATS, TableStatsParams
from procedures.core.table_stats.partition_counts import COMPUTE_PARTITION_STATS, PartitionStatsParams
from procedures.spark.engine.action import Action


def compute_table_stats(table: Any, snapshot_id: int | None = None, columns: Sequence[str] | None = None, *,
                        spark: Any = None, committer: Callable | None = None) -> Any:
    """The registered statistics file (None without a snapshot)."""
    params = TableStatsParams(snapshot_id, None if columns is None else tuple(columns))
    return Action(COMPUTE_TABLE_STATS, spark, committer=committer).run(table, params).statistics_file


def compute_partition_stats(table: Any, snapshot_id: int | None = None, *, committer: Callable | None = None) -> Any:
    """The registered (or existing) partition statistics file (None when there is none)."""
    return Action(COMPUTE_PARTITION_STATS, None, committer=committer).run(table, PartitionStatsParams(snapshot_id)).statistics_file


def rewrite_table_path(table: Any, params: RewriteTablePathParams, spark: Any = None) -> Any:
    """Stage the relocated metadata; the ``RewriteTablePathResult``."""
    return Action(REWRITE_TABLE_PATH, spark).run(table, params)
