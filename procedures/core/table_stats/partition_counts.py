"""``compute_partition_stats`` as a capability (procedures.md §3.19): per-partition counts from a
snapshot's manifests, the partition statistics file's schema (spec "Partition Statistics") and its
rows in order, written by the engine (:meth:`TableStatsEngine.write_partition_statistics`) and
registered in the table metadata (Iceberg Java 1.10's ``ComputePartitionStatsSparkAction``).

As in Java, a snapshot that already has a partition statistics file gets it back unchanged, and an
empty result (a branch without files) registers nothing.  Java computes incrementally from an
ancestor's file when there is one; here the computation is always full, which gives the same counts.

The counting follows Iceberg Java 1.10's ``PartitionStatsHandler`` (full computation): every
manifest of the snapshot is read; a live entry adds its file to its partition's counters (data
records, files and bytes; position-delete records and files, deletion vectors counted apart as
``dv_count``; equality-delete records and files) and a deleted entry only touches the partition.
Either way the partition's ``last_updated_at`` / ``last_updated_snapshot_id`` become those of the
newest snapshot (still in the table) that added or removed one of its files.  Partitions are keyed
by spec id and partition values coerced to the table's unified partition type, and sorted by
partition values (nulls first).  ``total_record_count`` is left null, as Java 1.10 leaves it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from procedures.core.kernel.capability import Capability
from procedures.core.kernel.scan import partition_key, unified_partition_type
from procedures.core.kernel.snapshot_producer import metadata_dir
from procedures.core.kernel.transaction import Table
from procedures.core.table_stats.table_stats_engine import TableStatsEngine
from procedures.core.table_stats.statistics_files import RegisterStatistics, stats_snapshot
from procedures.errors import ValidationError
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat, ManifestEntry
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.metadata import TableMetadata
from procedures.spec.schema import Schema
from procedures.spec.snapshots import Snapshot
from procedures.spec.statistics import PartitionStatisticsFile
from procedures.spec.types import INT, LONG, NestedField, StructType

__all__ = [
    "PartitionStats",
    "partition_stats_schema",
    "partition_stats_snapshot",
    "latest_stats_file",
    "aggregate_entries",
    "count_partitions",
    "PartitionStatsParams",
    "PartitionStatsPlan",
    "PartitionStatsResult",
    "plan",
    "execute",
    "COMPUTE_PARTITION_STATS",
    "partition_stats_path",
    "PARTITION_STATS_COLUMNS",
]

#: column names of the file after ``partition``, in order (ids 2..13)
PARTITION_STATS_COLUMNS = (
    "spec_id", "data_record_count", "data_file_count", "total_data_file_size_in_bytes",
    "position_delete_record_count", "position_delete_file_count", "equality_delete_record_count",
    "equality_delete_file_count", "total_record_count", "last_updated_at", "last_updated_snapshot_id", "dv_count",
)


_INT_COLUMNS = frozenset({"spec_id", "data_file_count", "position_delete_file_count", "equality_delete_file_count",
                          "dv_count"})


@dataclass
class PartitionStats:
    """The counters of one partition of one spec."""

    partition: tuple
    spec_id: int
    # the newest change (fields in any order: rows follow PARTITION_STATS_COLUMNS)
    last_updated_at: int | None = None
    last_updated_snapshot_id: int | None = None
    data_record_count: int = 0
    data_file_count: int = 0
    total_data_file_size_in_bytes: int = 0
    #: null: Java 1.10 does not fill it
    total_record_count: int | None = None
    position_delete_record_count: int = 0
    position_delete_file_count: int = 0
    dv_count: int = 0
    equality_delete_record_count: int = 0
    equality_delete_file_count: int = 0

    def add_live(self, f: DataFile) -> None:
        """Count a live data or delete file."""
        if f.content == FileContent.DATA:
            self.data_record_count += f.record_count
            self.data_file_count += 1
            self.total_data_file_size_in_bytes += f.file_size_in_bytes
        elif f.content == FileContent.POSITION_DELETES:
            self.position_delete_record_count += f.record_count
            if f.file_format == FileFormat.PUFFIN:
                self.dv_count += 1
            else:
                self.position_delete_file_count += 1
        else:
            self.equality_delete_record_count += f.record_count
            self.equality_delete_file_count += 1

    def touched(self, snapshot: Snapshot | None) -> None:
        """Note a change by ``snapshot`` (None: expired, ignored); the newest one wins."""
        if snapshot is not None and (self.last_updated_at is None or self.last_updated_at < snapshot.timestamp_ms):
            self.last_updated_at = snapshot.timestamp_ms
            self.last_updated_snapshot_id = snapshot.snapshot_id

    def row(self) -> tuple:
        """The file row: partition values, then :data:`PARTITION_STATS_COLUMNS`."""
        return (self.partition,) + tuple(getattr(self, c) for c in PARTITION_STATS_COLUMNS)


def partition_stats_schema(partition_type: StructType, format_version: int) -> Schema:
    """The spec's partition statistics schema for a unified partition type (v3 adds ``dv_count``
    and makes the delete counters required)."""
    if not partition_type.fields:
        raise ValidationError("Table must be partitioned")
    v3 = format_version >= 3
    fields = [NestedField(1, "partition", partition_type, True)]
    for field_id, name in enumerate(PARTITION_STATS_COLUMNS, start=2):
        if name == "dv_count" and not v3:
            continue
        required = field_id <= 5 or (v3 and (field_id <= 9 or name == "dv_count"))
        fields.append(NestedField(field_id, name, INT if name in _INT_COLUMNS else LONG, required))
    return Schema(tuple(fields))


def partition_stats_snapshot(md: TableMetadata, snapshot_id: int | None) -> Snapshot | None:
    """Check the table is partitioned and find the snapshot (None: an empty table)."""
    if not unified_partition_type(md).fields:
        raise ValidationError("Table must be partitioned")
    return stats_snapshot(md, snapshot_id)


def latest_stats_file(md: TableMetadata, snapshot_id: int) -> PartitionStatisticsFile | None:
    """The partition statistics file of the newest snapshot in ``snapshot_id``'s ancestry."""
    by_snapshot = {f.snapshot_id: f for f in md.partition_statistics}
    for snap in md.ancestors_of(snapshot_id):
        if snap.snapshot_id in by_snapshot:
            return by_snapshot[snap.snapshot_id]
    return None


def _coerce(partition_type: StructType, spec_field_ids: list[int], values: tuple) -> tuple:
    by_id = dict(zip(spec_field_ids, values))
    return tuple(by_id.get(f.field_id) for f in partition_type.fields)


def aggregate_entries(md: TableMetadata, entries: Iterable[ManifestEntry]) -> list[PartitionStats]:
    """Partition counters over manifest entries (full computation), sorted by partition values."""
    ptype = unified_partition_type(md)
    ids = {s.spec_id: [f.field_id for f in s.fields] for s in md.partition_specs}
    snapshots = {s.snapshot_id: s for s in md.snapshots}
    stats: dict[tuple, PartitionStats] = {}
    for e in entries:
        f = e.data_file
        key = partition_key(f.spec_id, f.partition)
        ps = stats.get(key)
        if ps is None:
            ps = stats[key] = PartitionStats(_coerce(ptype, ids[f.spec_id], f.partition), f.spec_id)
        if e.is_live:
            ps.add_live(f)
        ps.touched(snapshots.get(e.snapshot_id) if e.snapshot_id is not None else None)
    return sorted(stats.values(), key=lambda s: (_sort_key(s.partition), s.spec_id))


def _sort_key(values: tuple) -> tuple:
    return tuple((v is not None, _comparable(v)) for v in values)


def _comparable(v: Any) -> Any:
    if v is None:
        return 0
    if isinstance(v, uuid.UUID):
        return v.bytes
    return v


def _entries(io: FileAccess, md: TableMetadata, snapshot: Snapshot) -> Iterator[ManifestEntry]:
    specs = {s.spec_id: s for s in md.partition_specs}
    for m in read_manifest_list(io, snapshot.manifest_list):
        yield from read_manifest(io, m, specs=specs)


def count_partitions(io: FileAccess, md: TableMetadata, snapshot: Snapshot) -> list[PartitionStats]:
    """Every partition's counters at ``snapshot``, read from its manifests on the driver."""
    return aggregate_entries(md, _entries(io, md, snapshot))


def partition_stats_path(md: TableMetadata, snapshot_id: int, extension: str = "parquet") -> str:
    """A new partition statistics file: ``<metadata dir>/partition-stats-<id>-<uuid>.<ext>``."""
    return f"{metadata_dir(md)}/partition-stats-{snapshot_id}-{uuid.uuid4()}.{extension}"


@dataclass(frozen=True)
class PartitionStatsParams:
    """The arguments of ``compute_partition_stats``: the snapshot (default current)."""

    snapshot_id: int | None = None


@dataclass(frozen=True)
class PartitionStatsPlan:
    """The snapshot to count (None: an empty table) and the file it already has, if any."""

    snapshot: Snapshot | None
    existing: PartitionStatisticsFile | None = None


@dataclass(frozen=True)
class PartitionStatsResult:
    """The registered (or already registered) partition statistics file, None when there is none."""

    statistics_file: PartitionStatisticsFile | None = None

    def rows(self) -> list[tuple]:
        """The procedure's rows: the file's path, or none."""
        return [] if self.statistics_file is None else [(self.statistics_file.statistics_path,)]


def plan(metadata: TableMetadata, params: PartitionStatsParams) -> PartitionStatsPlan:
    """The table must be partitioned; the snapshot and the file it already has."""
    snapshot = partition_stats_snapshot(metadata, params.snapshot_id)
    if snapshot is None:
        return PartitionStatsPlan(None)
    existing = latest_stats_file(metadata, snapshot.snapshot_id)
    if existing is not None and existing.snapshot_id == snapshot.snapshot_id:
        return PartitionStatsPlan(snapshot, existing)
    return PartitionStatsPlan(snapshot)


def execute(table: Table, plan: PartitionStatsPlan, engine: TableStatsEngine) -> PartitionStatsResult:
    """Count the snapshot's partitions from its manifests (on the driver: manifests only, no data),
    have the engine write the file and register it."""
    if plan.snapshot is None or plan.existing is not None:
        return PartitionStatsResult(plan.existing)
    md = table.metadata
    stats = count_partitions(table.io, md, plan.snapshot)
    if not stats:
        return PartitionStatsResult()
    schema = partition_stats_schema(unified_partition_type(md), md.format_version)
    path = partition_stats_path(md, plan.snapshot.snapshot_id)
    size = engine.write_partition_statistics(table, path, schema, [s.row() for s in stats])
    result = PartitionStatisticsFile(plan.snapshot.snapshot_id, path, size)
    engine.commit(table, [RegisterStatistics(result)])
    return PartitionStatsResult(result)


#: the capability as the Spark action runs it
COMPUTE_PARTITION_STATS: Capability[PartitionStatsParams, PartitionStatsPlan, PartitionStatsResult] = Capability(
    "compute_partition_stats", plan, execute)
