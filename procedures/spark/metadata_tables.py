"""Iceberg metadata tables as Spark DataFrames, with Iceberg Java's column names and types
(``SnapshotsTable``, ``HistoryTable``, ``RefsTable``, ``ManifestsTable``, ``FilesTable`` /
``DataFilesTable`` / ``DeleteFilesTable``, ``ManifestEntriesTable``, ``PartitionsTable``).

They are small (one row per snapshot, ref, manifest, file or partition) and are built on the driver
from the metadata and manifests.  Java's derived ``readable_metrics`` column of ``files`` and
``entries`` is not produced.
"""

from __future__ import annotations

import datetime as dt
import uuid as _uuid
from decimal import Decimal
from typing import Any, Callable, Iterator

from procedures.catalog.base import Table
from procedures.errors import ValidationError
from procedures.spec.conversions import from_bytes, to_human_string
from procedures.spec.manifest.model import FileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.metadata import TableMetadata
from procedures.spec.types import (
    DateType,
    IcebergType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    UUIDType,
)
from procedures.core.kernel.snapshot_producer import snapshot_manifests
from procedures.spark.read import load_table, spark_type, unified_partition_type

__all__ = ["METADATA_TABLES", "metadata_table", "metadata_table_rows", "metadata_table_schema"]

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _ts(ms: int | None) -> dt.datetime | None:
    return None if ms is None else _EPOCH_UTC + dt.timedelta(milliseconds=ms)


def _spark_value(value: Any, t: IcebergType) -> Any:
    """A partition value in the Python form Spark accepts for the Spark type of ``t``."""
    if value is None:
        return None
    if isinstance(t, DateType):
        return dt.date(1970, 1, 1) + dt.timedelta(days=value)
    if isinstance(t, (TimestampType, TimestampNanoType)):
        return _EPOCH + dt.timedelta(microseconds=value // (1000 if isinstance(t, TimestampNanoType) else 1))
    if isinstance(t, (TimestamptzType, TimestamptzNanoType)):
        return _EPOCH_UTC + dt.timedelta(microseconds=value // (1000 if isinstance(t, TimestamptzNanoType) else 1))
    if isinstance(t, UUIDType):
        return str(value) if isinstance(value, _uuid.UUID) else str(_uuid.UUID(bytes=value))
    if isinstance(t, Decimal):
        return value
    return value


# ------------------------------------------------------------------------------ schemas
def _file_fields(ptype: StructType) -> list[tuple[str, str]]:
    part = [("partition", _ddl(ptype))] if ptype.fields else []
    return [
        ("content", "int"), ("file_path", "string"), ("file_format", "string"), ("spec_id", "int"), *part,
        ("record_count", "bigint"), ("file_size_in_bytes", "bigint"), ("column_sizes", "map<int,bigint>"),
        ("value_counts", "map<int,bigint>"), ("null_value_counts", "map<int,bigint>"),
        ("nan_value_counts", "map<int,bigint>"), ("lower_bounds", "map<int,binary>"),
        ("upper_bounds", "map<int,binary>"), ("key_metadata", "binary"), ("split_offsets", "array<bigint>"),
        ("equality_ids", "array<int>"), ("sort_order_id", "int"), ("first_row_id", "bigint"),
        ("referenced_data_file", "string"), ("content_offset", "bigint"), ("content_size_in_bytes", "bigint"),
    ]


def _ddl(t: StructType) -> str:
    return spark_type(t).simpleString()


def metadata_table_schema(name: str, md: TableMetadata) -> str:
    """The DDL schema (Spark ``simpleString`` field list) of metadata table ``name``."""
    ptype = unified_partition_type(md)
    if name == "snapshots":
        return ("committed_at timestamp, snapshot_id bigint, parent_id bigint, operation string, "
                "manifest_list string, summary map<string,string>")
    if name == "history":
        return "made_current_at timestamp, snapshot_id bigint, parent_id bigint, is_current_ancestor boolean"
    if name == "refs":
        return ("name string, type string, snapshot_id bigint, max_reference_age_in_ms bigint, "
                "min_snapshots_to_keep int, max_snapshot_age_in_ms bigint")
    if name == "manifests":
        return ("content int, path string, length bigint, partition_spec_id int, added_snapshot_id bigint, "
                "added_data_files_count int, existing_data_files_count int, deleted_data_files_count int, "
                "added_delete_files_count int, existing_delete_files_count int, deleted_delete_files_count int, "
                "partition_summaries array<struct<contains_null:boolean,contains_nan:boolean,"
                "lower_bound:string,upper_bound:string>>")
    if name in ("files", "data_files", "delete_files"):
        return ", ".join(f"{n} {t}" for n, t in _file_fields(ptype))
    if name == "entries":
        return ("status int, snapshot_id bigint, sequence_number bigint, file_sequence_number bigint, "
                "data_file struct<" + ",".join(f"{n}:{t}" for n, t in _file_fields(ptype)) + ">")
    if name == "partitions":
        part = f"partition {_ddl(ptype)}, spec_id int, " if ptype.fields else ""
        return (part + "record_count bigint, file_count int, total_data_file_size_in_bytes bigint, "
                "position_delete_record_count bigint, position_delete_file_count int, "
                "equality_delete_record_count bigint, equality_delete_file_count int, last_updated_at timestamp, "
                "last_updated_snapshot_id bigint")
    raise ValidationError(f"Unknown metadata table {name!r}; known: {', '.join(METADATA_TABLES)}")


# ------------------------------------------------------------------------------ rows
def _snapshots(t: Table) -> Iterator[tuple]:
    for s in t.metadata.snapshots:
        summary = {k: v for k, v in s.summary.items() if k != "operation"}
        yield (_ts(s.timestamp_ms), s.snapshot_id, s.parent_snapshot_id, s.summary.get("operation"),
               s.manifest_list, summary)


def _history(t: Table) -> Iterator[tuple]:
    md = t.metadata
    ancestors = {s.snapshot_id for s in md.ancestors_of(md.current_snapshot_id)}
    for e in md.snapshot_log:
        snap = md.snapshot_by_id(e.snapshot_id)
        yield (_ts(e.timestamp_ms), e.snapshot_id, None if snap is None else snap.parent_snapshot_id,
               e.snapshot_id in ancestors)


def _refs(t: Table) -> Iterator[tuple]:
    for name, r in t.metadata.refs.items():
        yield (name, r.ref_type.value.upper(), r.snapshot_id, r.max_ref_age_ms, r.min_snapshots_to_keep,
               r.max_snapshot_age_ms)


def _manifests(t: Table) -> Iterator[tuple]:
    md = t.metadata
    snap = md.current_snapshot()
    schema = md.schema()
    for m in snapshot_manifests(t.io, snap):
        spec = md.spec_by_id(m.partition_spec_id)
        ptype = spec.partition_type(schema) if spec is not None else StructType()
        summaries = []
        for fs, pf in zip(m.partitions or (), ptype.fields):
            def human(b: bytes | None) -> str | None:
                if b is None:
                    return None
                return to_human_string(from_bytes(b, pf.field_type), pf.field_type)
            summaries.append((fs.contains_null, fs.contains_nan, human(fs.lower_bound), human(fs.upper_bound)))
        is_data = m.content == ManifestContent.DATA
        counts = (m.added_files_count or 0, m.existing_files_count or 0, m.deleted_files_count or 0)
        zero = (0, 0, 0)
        yield (int(m.content), m.manifest_path, m.manifest_length, m.partition_spec_id, m.added_snapshot_id,
               *(counts if is_data else zero), *(zero if is_data else counts), summaries)


def _partition_row(md: TableMetadata, ptype: StructType, spec_id: int, partition: tuple) -> tuple:
    spec = md.spec_by_id(spec_id)
    values = {} if spec is None else {f.field_id: v for f, v in zip(spec.fields, partition)}
    return tuple(_spark_value(values.get(f.field_id), f.field_type) for f in ptype.fields)


def _file_row(md: TableMetadata, ptype: StructType, df: Any) -> tuple:
    part = (_partition_row(md, ptype, df.spec_id, df.partition),) if ptype.fields else ()
    return (int(df.content), df.file_path, df.file_format.value, df.spec_id, *part, df.record_count,
            df.file_size_in_bytes, df.column_sizes, df.value_counts, df.null_value_counts, df.nan_value_counts,
            df.lower_bounds, df.upper_bounds, df.key_metadata,
            None if df.split_offsets is None else list(df.split_offsets),
            None if df.equality_ids is None else list(df.equality_ids), df.sort_order_id, df.first_row_id,
            df.referenced_data_file, df.content_offset, df.content_size_in_bytes)


def _entries_of(t: Table, content: ManifestContent | None = None) -> Iterator[ManifestEntry]:
    md = t.metadata
    specs = md.specs_by_id
    for m in snapshot_manifests(t.io, md.current_snapshot()):
        if content is not None and m.content != content:
            continue
        yield from read_manifest(t.io, m, specs=specs)


def _files(content: ManifestContent | None) -> Callable[[Table], Iterator[tuple]]:
    def rows(t: Table) -> Iterator[tuple]:
        ptype = unified_partition_type(t.metadata)
        for e in _entries_of(t, content):
            if e.status != ManifestEntryStatus.DELETED:
                yield _file_row(t.metadata, ptype, e.data_file)
    return rows


def _entries(t: Table) -> Iterator[tuple]:
    ptype = unified_partition_type(t.metadata)
    for e in _entries_of(t):
        yield (int(e.status), e.snapshot_id, e.sequence_number, e.file_sequence_number,
               _file_row(t.metadata, ptype, e.data_file))


def _partitions(t: Table) -> Iterator[tuple]:
    md = t.metadata
    ptype = unified_partition_type(md)
    acc: dict[tuple, list] = {}
    for e in _entries_of(t):
        if e.status == ManifestEntryStatus.DELETED:
            continue
        df = e.data_file
        part = _partition_row(md, ptype, df.spec_id, df.partition)
        key = (part, df.spec_id) if ptype.fields else ((), 0)
        # record_count, file_count, size, pos records, pos files, eq records, eq files, last ms, last snapshot
        a = acc.setdefault(key, [0, 0, 0, 0, 0, 0, 0, None, None])
        if df.content == FileContent.DATA:
            a[0] += df.record_count
            a[1] += 1
            a[2] += df.file_size_in_bytes
        elif df.content == FileContent.POSITION_DELETES:
            a[3] += df.record_count
            a[4] += 1
        else:
            a[5] += df.record_count
            a[6] += 1
        snap = md.snapshot_by_id(e.snapshot_id) if e.snapshot_id is not None else None
        if snap is not None and (a[7] is None or snap.timestamp_ms > a[7]):
            a[7], a[8] = snap.timestamp_ms, snap.snapshot_id
    for (part, spec_id), a in acc.items():
        head = (part, spec_id) if ptype.fields else ()
        yield (*head, a[0], a[1], a[2], a[3], a[4], a[5], a[6], _ts(a[7]), a[8])


METADATA_TABLES: dict[str, Callable[[Table], Iterator[tuple]]] = {
    "snapshots": _snapshots,
    "history": _history,
    "refs": _refs,
    "manifests": _manifests,
    "files": _files(None),
    "data_files": _files(ManifestContent.DATA),
    "delete_files": _files(ManifestContent.DELETES),
    "entries": _entries,
    "partitions": _partitions,
}


def metadata_table_rows(table: Table, name: str) -> list[tuple]:
    """The rows of metadata table ``name`` as Python tuples in the table's column order."""
    fn = METADATA_TABLES.get(name)
    if fn is None:
        raise ValidationError(f"Unknown metadata table {name!r} of {table.name}; known: {', '.join(METADATA_TABLES)}")
    return list(fn(table))


def metadata_table(spark: Any, table: str | Table, name: str) -> Any:
    """Metadata table ``name`` (``snapshots``, ``history``, ``refs``, ``manifests``, ``files``,
    ``data_files``, ``delete_files``, ``entries``, ``partitions``) of ``table`` as a DataFrame."""
    t = load_table(spark, table)
    rows = metadata_table_rows(t, name)
    return spark.createDataFrame(rows, metadata_table_schema(name, t.metadata))
