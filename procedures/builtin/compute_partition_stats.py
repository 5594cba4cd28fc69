"""``compute_partition_stats`` (procedures.md §3.19): per-partition counts of a snapshot in a
partition statistics file registered for that snapshot.

Parameters and output follow Iceberg Java 1.10's Spark 3.5 procedure (``table``, ``snapshot_id``);
mapped onto :class:`~procedures.core.table_stats.partition_counts.PartitionStatsParams` and run by the
uniform action (driver only: manifests are read, no data).  No row for a table without snapshots.
"""

from __future__ import annotations

from procedures.core.table_stats.partition_counts import COMPUTE_PARTITION_STATS, PartitionStatsParams
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter
from procedures.framework.registry import register
from procedures.spark.engine.action import Action

__all__ = ["compute_partition_stats"]


@register(
    "compute_partition_stats",
    parameters=[
        Parameter("table", "STRING", True, doc="Partitioned table to compute partition statistics for."),
        Parameter("snapshot_id", "BIGINT", doc="Snapshot to compute for; default the current snapshot."),
        DRY_RUN,
    ],
    output=(Col("partition_statistics_file", "STRING", True, "Path of the partition statistics file."),),
)
def compute_partition_stats(ctx: ProcedureContext, table: str, snapshot_id: int | None, dry_run: bool) -> list[tuple]:
    """Count the snapshot's partitions from its manifests, write the file and register it."""
    t = ctx.load_table(table, dry_run=dry_run)
    params = PartitionStatsParams(snapshot_id)
    return Action(COMPUTE_PARTITION_STATS, ctx.spark, committer=ctx.commit).run(t, params).rows()
