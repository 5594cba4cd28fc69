"""``compute_table_stats`` as a capability (procedures.md §3.18): theta sketches of columns of one
snapshot, in a Puffin statistics file registered in the table metadata (Iceberg Java 1.10's
``ComputeTableStatsSparkAction``).

:func:`plan` picks the snapshot and validates the columns
(:func:`procedures.core.table_stats.statistics_files.stats_columns`); :func:`execute` has the engine
sketch and write the file (:meth:`TableStatsEngine.sketch_columns`) and commits it with one metadata
update, replacing the statistics file the snapshot had.
"""

from __future__ import annotations

from dataclasses import dataclass

from procedures.core.kernel.capability import Capability
from procedures.core.kernel.transaction import Table
from procedures.core.table_stats.table_stats_engine import TableStatsEngine
from procedures.core.table_stats.statistics_files import (
    RegisterStatistics, StatsColumn, statistics_path, stats_columns, stats_snapshot,
)
from procedures.spec.metadata import TableMetadata
from procedures.spec.schema import Schema
from procedures.spec.snapshots import Snapshot
from procedures.spec.statistics import StatisticsFile

__all__ = ["TableStatsParams", "TableStatsPlan", "TableStatsResult", "plan", "execute", "COMPUTE_TABLE_STATS"]


@dataclass(frozen=True)
class TableStatsParams:
    """The arguments of ``compute_table_stats``: the snapshot (default current) and the columns
    (default every top-level column a sketch can take)."""

    snapshot_id: int | None = None
    columns: tuple[str, ...] | None = None


@dataclass(frozen=True)
class TableStatsPlan:
    """The snapshot, its schema and the validated columns (no snapshot: nothing to do)."""

    snapshot: Snapshot | None
    schema: Schema | None = None
    columns: tuple[StatsColumn, ...] = ()


@dataclass(frozen=True)
class TableStatsResult:
    """The registered statistics file (None for a table without snapshots)."""

    statistics_file: StatisticsFile | None = None

    def rows(self) -> list[tuple]:
        """The procedure's rows: the file's path, or none."""
        return [] if self.statistics_file is None else [(self.statistics_file.statistics_path,)]


def plan(metadata: TableMetadata, params: TableStatsParams) -> TableStatsPlan:
    """The snapshot (``Snapshot not found`` when the id is unknown) and the columns, validated as
    Java validates them."""
    snapshot = stats_snapshot(metadata, params.snapshot_id)
    if snapshot is None:
        return TableStatsPlan(None)
    schema = metadata.schema_by_id(snapshot.schema_id) if snapshot.schema_id is not None else metadata.schema()
    columns = stats_columns(schema, None if params.columns is None else list(params.columns))
    return TableStatsPlan(snapshot, schema, tuple(columns))


def execute(table: Table, plan: TableStatsPlan, engine: TableStatsEngine) -> TableStatsResult:
    """Sketch, write and register the statistics file."""
    if plan.snapshot is None:
        return TableStatsResult()
    path = statistics_path(table.metadata, plan.snapshot.snapshot_id)
    stats = engine.sketch_columns(table, plan.snapshot, plan.schema, plan.columns, path)
    engine.commit(table, [RegisterStatistics(stats)])
    return TableStatsResult(stats)


#: the capability as the Spark action runs it
COMPUTE_TABLE_STATS: Capability[TableStatsParams, TableStatsPlan, TableStatsResult] = Capability(
    "compute_table_stats", plan, execute)
