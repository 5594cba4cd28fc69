"""``compute_partition_stats``: the partition statistics file of a snapshot, registered in the
table metadata (Iceberg Java 1.10's ``ComputePartitionStatsSparkAction``).

The counts come from the snapshot's manifests (:mod:`procedures.core.stats.partition_stats`), read
on the driver; the file is Parquet with the spec's field ids.  As in Java, a snapshot that already
has a partition statistics file gets it back unchanged, and an empty result (a branch without
files) registers nothing.  Java computes incrementally from an ancestor's file when there is one;
here the computation is always full, which gives the same counts.
"""

from __future__ import annotations

from typing import Callable

from procedures.catalog.base import Table
from procedures.core.kernel.scan import unified_partition_type
from procedures.core.stats.partition_stats import (
    compute_partition_stats as compute_stats,
    latest_stats_file,
    partition_stats_path,
    partition_stats_schema,
    partition_stats_snapshot,
)
from procedures.core.stats.table_stats import RegisterStatistics
from procedures.core.kernel.transaction import commit
from procedures.io.stats_files import write_partition_stats
from procedures.spec.statistics import PartitionStatisticsFile

__all__ = ["compute_partition_stats"]


def compute_partition_stats(
    table: Table,
    snapshot_id: int | None = None,
    *,
    committer: Callable[[Table, list], Table] | None = None,
) -> PartitionStatisticsFile | None:
    """Compute, write and register the partition statistics of ``snapshot_id`` (default current);
    None for a table without snapshots or a snapshot without files."""
    md = table.metadata
    snapshot = partition_stats_snapshot(md, snapshot_id)
    if snapshot is None:
        return None
    existing = latest_stats_file(md, snapshot.snapshot_id)
    if existing is not None and existing.snapshot_id == snapshot.snapshot_id:
        return existing
    stats = compute_stats(table.io, md, snapshot)
    if not stats:
        return None
    schema = partition_stats_schema(unified_partition_type(md), md.format_version)
    path = partition_stats_path(md, snapshot.snapshot_id)
    size = write_partition_stats(table.io, path, schema, [s.row() for s in stats])
    result = PartitionStatisticsFile(snapshot.snapshot_id, path, size)
    (committer or commit)(table, [RegisterStatistics(result)])
    return result
