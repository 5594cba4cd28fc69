"""``compute_table_stats`` without an engine: which columns get a sketch, where the Puffin file
goes, the blob metadata and the commit operation that registers the file.

The rules follow Iceberg Java 1.10's ``ComputeTableStatsSparkAction``: the default columns are the
top-level primitive columns of the snapshot's schema (leaving out the types Java's Spark reader
cannot feed a sketch: timestamp_ns, unknown, geometry, geography, variant), duplicates are dropped keeping the first,
and the file is ``<metadata dir>/<snapshot id>-<uuid>.stats``; registering it replaces any
statistics file of the same snapshot.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Sequence

from procedures.core.kernel import updates as metadata_updates
from procedures.core.kernel.snapshot_producer import metadata_dir
from procedures.core.kernel.transaction import CommitContext
from procedures.errors import NoSuchSnapshotError, ValidationError
from procedures.spec.metadata import TableMetadata
from procedures.spec.schema import Schema
from procedures.spec.snapshots import Snapshot
from procedures.spec.statistics import PartitionStatisticsFile, StatisticsFile
from procedures.spec.theta import can_sketch, check_sketch_type
from procedures.spec.types import NestedField

__all__ = [
    "StatsColumn",
    "stats_snapshot",
    "stats_columns",
    "statistics_path",
    "RegisterStatistics",
]


@dataclass(frozen=True, slots=True)
class StatsColumn:
    """A column to sketch: its full dotted name and field."""

    name: str
    field: NestedField


def stats_snapshot(md: TableMetadata, snapshot_id: int | None) -> Snapshot | None:
    """The snapshot to compute for: ``snapshot_id`` or the current one (None for an empty table)."""
    if snapshot_id is None:
        return md.current_snapshot()
    snap = md.snapshot_by_id(snapshot_id)
    if snap is None:
        raise NoSuchSnapshotError(f"Snapshot not found: {snapshot_id}")
    return snap


def stats_columns(schema: Schema, columns: Sequence[str] | None) -> list[StatsColumn]:
    """The columns to sketch, validated as Java validates them (messages included)."""
    if columns is not None:
        if len(columns) == 0:
            raise ValidationError("Columns cannot be null/empty")
        names = list(dict.fromkeys(columns))
    else:
        names = [f.name for f in schema.fields if can_sketch(f.field_type)]
    if not names:
        raise ValidationError("No columns found to compute stats")
    out = []
    for name in names:
        field = schema.find_field_or_none(name)
        if field is None:
            raise ValidationError(f"Can't find column {name} in {schema}")
        check_sketch_type(name, field.field_type)
        out.append(StatsColumn(name, field))
    return out


def statistics_path(md: TableMetadata, snapshot_id: int) -> str:
    """A new statistics file's path: ``<metadata dir>/<snapshot id>-<uuid>.stats``."""
    return f"{metadata_dir(md)}/{snapshot_id}-{uuid.uuid4()}.stats"


class RegisterStatistics:
    """Register a table-statistics (Puffin) or partition-statistics file for its snapshot,
    replacing the one that snapshot had.  Replayable: a concurrent commit only matters if it
    expired the snapshot."""

    replayable = True

    def __init__(self, stats: StatisticsFile | PartitionStatisticsFile) -> None:
        self.stats = stats

    def apply(self, base: TableMetadata, ctx: CommitContext) -> list[metadata_updates.MetadataUpdate]:
        """The set-statistics update, if the snapshot is still there."""
        if base.snapshot_by_id(self.stats.snapshot_id) is None:
            raise NoSuchSnapshotError(f"Snapshot not found: {self.stats.snapshot_id}")
        if isinstance(self.stats, StatisticsFile):
            return [metadata_updates.SetStatistics(self.stats)]
        return [metadata_updates.SetPartitionStatistics(self.stats)]
