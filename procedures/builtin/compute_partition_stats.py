"""``compute_partition_stats`` (procedures.md §3.19): per-partition counts of a snapshot in a
partition statistics file registered for that snapshot.

Parameters and output follow Iceberg Java 1.10's Spark 3.5 procedure (``table``, ``snapshot_id``);
the work is :func:`procedures.spark.actions.compute_partition_stats.compute_partition_stats` (driver
only: manifests are read, no data).  No row for a table without snapshots.
"""

from __future__ import annotations

from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.spark.actions.compute_partition_stats import compute_partition_stats as compute

__all__ = ["compute_partition_stats"]


@register(
    "compute_partition_stats",
    parameters=[
        P("table", "STRING", True, doc="Partitioned table to compute partition statistics for."),
        P("snapshot_id", "BIGINT", doc="Snapshot to compute for; default the current snapshot."),
        DRY_RUN,
    ],
    output=(Col("partition_statistics_file", "STRING", True, "Path of the partition statistics file."),),
)
def compute_partition_stats(ctx: ProcedureContext, table: str, snapshot_id: int | None, dry_run: bool) -> list[tuple]:
    """Count the snapshot's partitions from its manifests, write the file and register it."""
    t = ctx.load_table(table, dry_run=dry_run)
    stats = compute(t, snapshot_id, committer=ctx.commit)
    return [] if stats is None else [(stats.statistics_path,)]
