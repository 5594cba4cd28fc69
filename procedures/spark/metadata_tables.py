"""Iceberg metadata tables as Spark DataFrames, with Iceberg Java's column names and types
(``SnapshotsTable``, ``HistoryTable``, ``RefsTable``, ``MetadataLogEntriesTable``, ``ManifestsTable``,
``AllManifestsTable``, ``FilesTable`` / ``DataFilesTable`` / ``DeleteFilesTable`` and their ``all_``
forms, ``ManifestEntriesTable`` / ``AllEntriesTable``, ``PartitionsTable``, ``PositionDeletesTable``).

They are small (one row per snapshot, ref, manifest, file, partition or deleted position) and are
built on the driver from the metadata, manifests and delete files.  The tables Java reads from one
snapshot (files, entries, manifests, partitions, position deletes) take a ``snapshot_id`` for time
travel; the others describe the whole table.  The file tables and the entries tables end with Java's
derived ``readable_metrics`` column: one struct per primitive column of the current schema (named by
its full dotted name, in name order, as Java's ``MetricsUtil``) holding that column's metrics from the
file's maps with the bounds decoded to the column's type.  ``position_deletes.row`` holds the deleted
row where the delete file stores it (the spec's optional ``row`` column), else null.
"""

from __future__ import annotations

import datetime as dt
import uuid as _uuid
from decimal import Decimal
from typing import Any, Callable, Iterator

import pyarrow as pa

from procedures.catalog.base import Table
from procedures.errors import NoSuchSnapshotError, ValidationError
from procedures.spec.conversions import from_bytes, to_human_string
from procedures.spec.manifest.model import FileContent, ManifestContent, ManifestEntry, ManifestEntryStatus
from procedures.spark.sql_quoting import quote_name, type_sql
from procedures.io.parquet_reader import read_dv_positions, read_position_delete_rows, read_position_deletes
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.metadata import TableMetadata
from procedures.spec.metadata_columns import DELETE_FILE_ROW_ID
from procedures.spec.snapshots import Snapshot
from procedures.spec.schema import Schema, walk_fields
from procedures.spec.types import (
    DateType,
    GeographyType,
    GeometryType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    UUIDType,
    VariantType,
)
from procedures.core.kernel.snapshot_producer import snapshot_manifests
from procedures.spark.read import load_table, spark_type, to_spark_arrow, unified_partition_type

__all__ = ["METADATA_TABLES", "SNAPSHOT_TABLES", "metadata_table", "metadata_table_docs", "metadata_table_rows",
           "metadata_table_schema"]

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


_FILE_TABLES = ("files", "data_files", "delete_files", "all_files", "all_data_files", "all_delete_files")


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
    return type_sql(spark_type(t))


def _metric_columns(schema: Schema) -> list[tuple[str, NestedField]]:
    """The columns ``readable_metrics`` describes: every primitive field by its full name (list
    elements ``element``, map keys and values ``key``/``value``), sorted by name as Java does."""
    # a variant is no primitive to Java (nor has Spark 3.5 a type for it): no metrics struct
    cols = [(".".join(path), f) for path, f, _ in walk_fields(schema.as_struct())
            if f.field_type.is_primitive and not isinstance(f.field_type, VariantType)]
    return sorted(cols, key=lambda c: c[0])


def _readable_metrics_ddl(schema: Schema) -> str:
    cols = _metric_columns(schema)
    if not cols:
        return ""
    fields = []
    for name, f in cols:
        t = spark_type(f.field_type).simpleString()
        fields.append(f"{quote_name(name)}:struct<column_size:bigint,value_count:bigint,null_value_count:bigint,"
                      f"nan_value_count:bigint,lower_bound:{t},upper_bound:{t}>")
    return ", readable_metrics struct<" + ",".join(fields) + ">"


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
    if name == "metadata_log_entries":
        return ("timestamp timestamp, file string, latest_snapshot_id bigint, latest_schema_id int, "
                "latest_sequence_number bigint")
    if name in ("manifests", "all_manifests"):
        return ("content int, path string, length bigint, partition_spec_id int, added_snapshot_id bigint, "
                "added_data_files_count int, existing_data_files_count int, deleted_data_files_count int, "
                "added_delete_files_count int, existing_delete_files_count int, deleted_delete_files_count int, "
                "partition_summaries array<struct<contains_null:boolean,contains_nan:boolean,"
                "lower_bound:string,upper_bound:string>>"
                + (", reference_snapshot_id bigint" if name == "all_manifests" else ""))
    if name in _FILE_TABLES:
        return ", ".join(f"{n} {t}" for n, t in _file_fields(ptype)) + _readable_metrics_ddl(md.schema())
    if name in ("entries", "all_entries"):
        return ("status int, snapshot_id bigint, sequence_number bigint, file_sequence_number bigint, "
                "data_file struct<" + ",".join(f"{n}:{t}" for n, t in _file_fields(ptype)) + ">"
                + _readable_metrics_ddl(md.schema()))
    if name == "partitions":
        part = f"partition {_ddl(ptype)}, spec_id int, " if ptype.fields else ""
        return (part + "record_count bigint, file_count int, total_data_file_size_in_bytes bigint, "
                "position_delete_record_count bigint, position_delete_file_count int, "
                "equality_delete_record_count bigint, equality_delete_file_count int, last_updated_at timestamp, "
                "last_updated_snapshot_id bigint")
    if name == "position_deletes":
        part = f"partition {_ddl(ptype)}, " if ptype.fields else ""
        # format v3 adds where a deletion vector sits in its Puffin file
        dv = ", content_offset bigint, content_size_in_bytes bigint" if md.format_version >= 3 else ""
        return (f"file_path string, pos bigint, row {_ddl(md.schema().as_struct())}, {part}spec_id int, "
                f"delete_file_path string{dv}")
    raise ValidationError(f"Unknown metadata table {name!r}; known: {', '.join(METADATA_TABLES)}")


#: the spec's docs of the data file fields, the column comments of Java's file tables
_FILE_DOCS = {
    "content": "Contents of the file: 0=data, 1=position deletes, 2=equality deletes",
    "file_path": "Location URI with FS scheme",
    "file_format": "File format name: avro, orc, or parquet",
    "spec_id": "Partition spec ID",
    "partition": "Partition data tuple, schema based on the partition spec",
    "record_count": "Number of records in the file",
    "file_size_in_bytes": "Total file size in bytes",
    "column_sizes": "Map of column id to total size on disk",
    "value_counts": "Map of column id to total count, including null and NaN",
    "null_value_counts": "Map of column id to null value count",
    "nan_value_counts": "Map of column id to number of NaN values in the column",
    "lower_bounds": "Map of column id to lower bound",
    "upper_bounds": "Map of column id to upper bound",
    "key_metadata": "Encryption key metadata blob",
    "split_offsets": "Splittable offsets",
    "equality_ids": "Equality comparison field IDs",
    "sort_order_id": "Sort order ID",
    "first_row_id": "The first row ID assigned to the first row in the data file",
    "referenced_data_file": "Fully qualified location (URI with FS scheme) of a data file that all deletes reference",
    "content_offset": "The offset in the file where the content starts",
    "content_size_in_bytes": "The length of referenced content stored in the file",
}
_READABLE_METRICS_DOC = {"readable_metrics": "Column metrics in readable form"}
#: column comments of each metadata table, as Java's metadata table schemas document their fields
_DOCS: dict[str, dict[str, str]] = {
    **{n: {**_FILE_DOCS, **_READABLE_METRICS_DOC} for n in _FILE_TABLES},
    "entries": _READABLE_METRICS_DOC,
    "all_entries": _READABLE_METRICS_DOC,
    "partitions": {
        "record_count": "Count of records in data files",
        "file_count": "Count of data files",
        "total_data_file_size_in_bytes": "Total size in bytes of data files",
        "position_delete_record_count": "Count of records in position delete files",
        "position_delete_file_count": "Count of position delete files",
        "equality_delete_record_count": "Count of records in equality delete files",
        "equality_delete_file_count": "Count of equality delete files",
        "last_updated_at": "Commit time of snapshot that last updated this partition",
        "last_updated_snapshot_id": "Id of snapshot that last updated this partition",
    },
    "position_deletes": {
        "file_path": "Path of a file in which a deleted row is stored",
        "pos": "Ordinal position of a deleted row in the data file",
        "row": "Deleted row values",
        "partition": "Partition that position delete row belongs to",
        "spec_id": "Spec ID used to track the file containing a row",
        "delete_file_path": "Path of the file in which a row is stored",
        "content_offset": "The offset in the DV where the content starts",
        "content_size_in_bytes": "The length in bytes of the DV blob",
    },
}


def metadata_table_docs(name: str) -> dict[str, str]:
    """The comment of each documented column of metadata table ``name`` (what ``DESCRIBE`` shows), the
    spec's field docs as Java's metadata table schemas carry them; undocumented columns are absent."""
    return _DOCS.get(name, {})


# ------------------------------------------------------------------------------ rows
def _snapshots(t: Table, snap: Snapshot | None) -> Iterator[tuple]:
    for s in t.metadata.snapshots:
        summary = {k: v for k, v in s.summary.items() if k != "operation"}
        yield (_ts(s.timestamp_ms), s.snapshot_id, s.parent_snapshot_id, s.summary.get("operation"),
               s.manifest_list, summary)


def _history(t: Table, snap: Snapshot | None) -> Iterator[tuple]:
    md = t.metadata
    ancestors = {s.snapshot_id for s in md.ancestors_of(md.current_snapshot_id)}
    for e in md.snapshot_log:
        s = md.snapshot_by_id(e.snapshot_id)
        yield (_ts(e.timestamp_ms), e.snapshot_id, None if s is None else s.parent_snapshot_id,
               e.snapshot_id in ancestors)


def _refs(t: Table, snap: Snapshot | None) -> Iterator[tuple]:
    for name, r in t.metadata.refs.items():
        yield (name, r.ref_type.value.upper(), r.snapshot_id, r.max_ref_age_ms, r.min_snapshots_to_keep,
               r.max_snapshot_age_ms)


def _metadata_log_entries(t: Table, snap: Snapshot | None) -> Iterator[tuple]:
    md = t.metadata
    # the current metadata file is the log's last entry, as in Java's MetadataLogEntriesTable
    log = [(e.timestamp_ms, e.metadata_file) for e in md.metadata_log]
    log.append((md.last_updated_ms, t.metadata_location))
    for ms, path in log:
        current = None
        for e in md.snapshot_log:
            if e.timestamp_ms <= ms:
                current = md.snapshot_by_id(e.snapshot_id)
        yield (_ts(ms), path, None if current is None else current.snapshot_id,
               None if current is None else current.schema_id,
               None if current is None else current.sequence_number)


def _manifest_row(md: TableMetadata, m: Any) -> tuple:
    schema = md.schema()
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
    return (int(m.content), m.manifest_path, m.manifest_length, m.partition_spec_id, m.added_snapshot_id,
            *(counts if is_data else zero), *(zero if is_data else counts), summaries)


def _manifests(t: Table, snap: Snapshot | None) -> Iterator[tuple]:
    for m in snapshot_manifests(t.io, snap):
        yield _manifest_row(t.metadata, m)


def _all_manifests(t: Table, snap: Snapshot | None) -> Iterator[tuple]:
    # one row per manifest of every snapshot, tagged with the snapshot whose list named it (Java's
    # reference_snapshot_id); a manifest kept by several snapshots appears once for each
    for s in t.metadata.snapshots:
        for m in snapshot_manifests(t.io, s):
            yield (*_manifest_row(t.metadata, m), s.snapshot_id)


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


def _bound(raw: bytes | None, t: IcebergType) -> Any:
    if raw is None:
        return None
    if isinstance(t, (GeometryType, GeographyType)):  # Spark reads these as binary, bounds too
        return bytes(raw)
    value = from_bytes(raw, t)
    return bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else _spark_value(value, t)


def _readable_metrics(cols: list[tuple[str, NestedField]], df: Any) -> tuple | None:
    """Java's ``readable_metrics`` of a file: per column its sizes and counts and decoded bounds
    (nulls where the file has none, e.g. for a delete file, whose metrics are of its own columns)."""
    if not cols:
        return None

    def get(m: dict | None, fid: int) -> Any:
        return None if m is None else m.get(fid)

    out = []
    for _, f in cols:
        fid, t = f.field_id, f.field_type
        out.append((get(df.column_sizes, fid), get(df.value_counts, fid), get(df.null_value_counts, fid),
                    get(df.nan_value_counts, fid), _bound(get(df.lower_bounds, fid), t),
                    _bound(get(df.upper_bounds, fid), t)))
    return tuple(out)


def _metrics_column(md: TableMetadata) -> Callable[[Any], tuple]:
    """The ``readable_metrics`` cell of a file's row, as a 1-tuple (empty when the schema has no
    primitive column, where the column is left out)."""
    cols = _metric_columns(md.schema())
    return (lambda df: (_readable_metrics(cols, df),)) if cols else (lambda df: ())


def _reachable_manifests(t: Table) -> list:
    """Every manifest of every snapshot, each once (Java's ``all_*`` tables read them by path)."""
    seen: dict[str, Any] = {}
    for s in t.metadata.snapshots:
        for m in snapshot_manifests(t.io, s):
            seen.setdefault(m.manifest_path, m)
    return list(seen.values())


def _entries_of(t: Table, snap: Snapshot | None, content: ManifestContent | None = None,
                every_snapshot: bool = False) -> Iterator[ManifestEntry]:
    md = t.metadata
    specs = md.specs_by_id
    manifests = _reachable_manifests(t) if every_snapshot else snapshot_manifests(t.io, snap)
    for m in manifests:
        if content is not None and m.content != content:
            continue
        yield from read_manifest(t.io, m, specs=specs)


def _files(content: ManifestContent | None, every_snapshot: bool = False
           ) -> Callable[[Table, Snapshot | None], Iterator[tuple]]:
    def rows(t: Table, snap: Snapshot | None) -> Iterator[tuple]:
        ptype = unified_partition_type(t.metadata)
        metrics = _metrics_column(t.metadata)
        for e in _entries_of(t, snap, content, every_snapshot):
            if e.status != ManifestEntryStatus.DELETED:
                yield (*_file_row(t.metadata, ptype, e.data_file), *metrics(e.data_file))
    return rows


def _entries(every_snapshot: bool) -> Callable[[Table, Snapshot | None], Iterator[tuple]]:
    def rows(t: Table, snap: Snapshot | None) -> Iterator[tuple]:
        ptype = unified_partition_type(t.metadata)
        metrics = _metrics_column(t.metadata)
        for e in _entries_of(t, snap, every_snapshot=every_snapshot):
            yield (int(e.status), e.snapshot_id, e.sequence_number, e.file_sequence_number,
                   _file_row(t.metadata, ptype, e.data_file), *metrics(e.data_file))
    return rows


def _partitions(t: Table, snap: Snapshot | None) -> Iterator[tuple]:
    md = t.metadata
    ptype = unified_partition_type(md)
    acc: dict[tuple, list] = {}
    for e in _entries_of(t, snap):
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
        s = md.snapshot_by_id(e.snapshot_id) if e.snapshot_id is not None else None
        if s is not None and (a[7] is None or s.timestamp_ms > a[7]):
            a[7], a[8] = s.timestamp_ms, s.snapshot_id
    for (part, spec_id), a in acc.items():
        head = (part, spec_id) if ptype.fields else ()
        yield (*head, a[0], a[1], a[2], a[3], a[4], a[5], a[6], _ts(a[7]), a[8])


def _python_cell(value: Any, t: IcebergType) -> Any:
    """An Arrow ``to_pylist`` value in the form Spark's ``createDataFrame`` takes for the Spark type of
    ``t``: structs as tuples, maps as dicts (Arrow gives key/value pairs)."""
    if value is None:
        return None
    if isinstance(t, StructType):
        return tuple(_python_cell(value.get(f.name), f.field_type) for f in t.fields)
    if isinstance(t, ListType):
        return [_python_cell(v, t.element_type) for v in value]
    if isinstance(t, MapType):
        return {_python_cell(k, t.key_type): _python_cell(v, t.value_type) for k, v in value}
    return value


def _position_deletes(t: Table, snap: Snapshot | None) -> Iterator[tuple]:
    md = t.metadata
    ptype = unified_partition_type(md)
    row_type = md.schema().as_struct()
    row_field = NestedField(DELETE_FILE_ROW_ID, "row", row_type, False)
    for e in _entries_of(t, snap, ManifestContent.DELETES):
        df = e.data_file
        if e.status == ManifestEntryStatus.DELETED or df.content != FileContent.POSITION_DELETES:
            continue
        part = (_partition_row(md, ptype, df.spec_id, df.partition),) if ptype.fields else ()
        dv = (df.content_offset, df.content_size_in_bytes) if md.format_version >= 3 else ()
        stored = None if df.content_offset is not None else read_position_delete_rows(t.io, df, row_type)
        if stored is not None:  # the file keeps the deleted rows: Java shows them
            batch = pa.RecordBatch.from_arrays([stored.column("row").combine_chunks()], names=["row"])
            cells = to_spark_arrow(batch, [row_field]).column(0).to_pylist()
            for path, pos, cell in zip(stored.column(0).to_pylist(), stored.column(1).to_pylist(), cells):
                yield (path, pos, _python_cell(cell, row_type), *part, df.spec_id, df.file_path, *dv)
            continue
        if df.content_offset is not None:  # a deletion vector: one data file's positions in a Puffin blob
            by_path = {df.referenced_data_file: read_dv_positions(t.io, df)}
        else:
            by_path = read_position_deletes(t.io, df)
        for path, positions in by_path.items():
            for pos in positions.tolist():
                yield (path, pos, None, *part, df.spec_id, df.file_path, *dv)


#: metadata table name -> rows of (table, snapshot to read or None for the current one)
METADATA_TABLES: dict[str, Callable[[Table, Snapshot | None], Iterator[tuple]]] = {
    "snapshots": _snapshots,
    "history": _history,
    "refs": _refs,
    "metadata_log_entries": _metadata_log_entries,
    "manifests": _manifests,
    "all_manifests": _all_manifests,
    "files": _files(None),
    "data_files": _files(ManifestContent.DATA),
    "delete_files": _files(ManifestContent.DELETES),
    "all_files": _files(None, every_snapshot=True),
    "all_data_files": _files(ManifestContent.DATA, every_snapshot=True),
    "all_delete_files": _files(ManifestContent.DELETES, every_snapshot=True),
    "entries": _entries(every_snapshot=False),
    "all_entries": _entries(every_snapshot=True),
    "partitions": _partitions,
    "position_deletes": _position_deletes,
}

#: the metadata tables read from one snapshot: time travel (``VERSION AS OF``) chooses it
SNAPSHOT_TABLES = frozenset({"manifests", "files", "data_files", "delete_files", "entries", "partitions",
                             "position_deletes"})


def metadata_table_rows(table: Table, name: str, snapshot_id: int | None = None) -> list[tuple]:
    """The rows of metadata table ``name`` as Python tuples in the table's column order; ``snapshot_id``
    chooses the snapshot of the tables read from one (:data:`SNAPSHOT_TABLES`), default the current."""
    fn = METADATA_TABLES.get(name)
    if fn is None:
        raise ValidationError(f"Unknown metadata table {name!r} of {table.name}; known: {', '.join(METADATA_TABLES)}")
    snap = table.metadata.current_snapshot()
    if snapshot_id is not None:
        snap = table.metadata.snapshot_by_id(int(snapshot_id))
        if snap is None:
            raise NoSuchSnapshotError(f"Cannot find snapshot {snapshot_id} in table {table.name}")
    return list(fn(table, snap))


def metadata_table(spark: Any, table: str | Table, name: str, snapshot_id: int | None = None) -> Any:
    """Metadata table ``name`` (any of :data:`METADATA_TABLES`: ``snapshots``, ``history``, ``refs``,
    ``metadata_log_entries``, ``manifests``, ``all_manifests``, ``files``, ``data_files``,
    ``delete_files``, ``all_files``, ``all_data_files``, ``all_delete_files``, ``entries``,
    ``all_entries``, ``partitions``, ``position_deletes``) of ``table`` as a DataFrame;
    ``snapshot_id`` reads the one-snapshot tables as of that snapshot."""
    t = load_table(spark, table)
    rows = metadata_table_rows(t, name, snapshot_id)
    return spark.createDataFrame(rows, metadata_table_schema(name, t.metadata))
