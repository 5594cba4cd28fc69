"""Reading Iceberg tables into Spark DataFrames (the read half of Spark I/O).

Planning runs on the driver (:func:`procedures.core.kernel.scan.iter_file_scan_tasks`; the data manifests of a
large scan are read on the executors, :mod:`procedures.spark.scan_planning`); only file metadata
travels to the executors, one serialized task per row, and ``mapInArrow`` reads the data there
with :func:`procedures.io.parquet_reader.read_task`.  Where a by-name read is exactly the by-field-id
read, :func:`read_table` lets Spark's own Parquet reader read the planned files instead
(:mod:`procedures.spark.native_read`, docs/native-reads.md).

Spark types follow Iceberg Java's Spark reader (``TypeToSparkType``):

==============================  ==========================================================
Iceberg                         Spark
==============================  ==========================================================
boolean, int, long              BooleanType, IntegerType, LongType
float, double, decimal(P,S)     FloatType, DoubleType, DecimalType(P,S)
date                            DateType
timestamp / timestamptz         TimestampNTZType / TimestampType
string, uuid                    StringType (uuid in its canonical 36-character form)
fixed[L], binary                BinaryType
struct, list, map               StructType, ArrayType, MapType
time                            LongType, microseconds since midnight (Java refuses the column)
timestamp_ns / timestamptz_ns   TimestampNTZType / TimestampType truncated to micros (Java refuses)
unknown                         NullType
==============================  ==========================================================

Required Iceberg fields are non-nullable Spark fields.  Metadata columns: ``_file`` string, ``_pos``
long, ``_spec_id`` int, ``_partition`` struct of every spec's partition fields (by field id),
``_deleted`` boolean, ``_row_id`` and ``_last_updated_sequence_number`` long.
"""

from __future__ import annotations

import datetime as dt
import logging
import pickle
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from procedures.catalog.base import Table
from procedures.spark.catalog_conf import resolve_in_session, statement_conf
from procedures.core.kernel.properties import DEFAULT_NAME_MAPPING
from procedures.core.kernel.scan import FileScanTask, select_snapshot, unified_partition_type
from procedures.core.kernel.splits import plan_spread_groups, plan_task_groups, SplitOptions
from procedures.errors import ValidationError
from procedures.io.arrow_schema import type_to_arrow
from procedures.io.sandbox_fileio import file_io
from procedures.io.parquet_reader import METADATA_COLUMN_NAMES, metadata_field, read_task
from procedures.spark.dataframes import empty_frame, parallelism, payload_frame
from procedures.spark.environment import check_python_workers, check_session
from procedures.spark.native_read import native_read_plan, read_native, required_non_null
from procedures.spark.scan_planning import iter_scan_tasks, plan_scan_tasks
from procedures.spark.session import job_description
from procedures.spark.sql_quoting import quote_name
from procedures.spark.worker import prepare_python_worker
from procedures.spec.expression_parser import parse_filter
from procedures.spec.expressions import Expression, referenced_names
from procedures.spec.manifest.model import DataFile
from procedures.spec.metadata import TableMetadata
from procedures.spec.name_mapping import parse_name_mapping
from procedures.spec.schema import Schema
from procedures.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    GeographyType,
    GeometryType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

__all__ = [
    "read_table",
    "read_files",
    "read_tasks",
    "load_table",
    "spark_type",
    "spark_schema",
    "unified_partition_type",
    "to_spark_arrow",
    "plan_read_groups",
    "group_tasks",
    "as_of_ms",
    "tasks_frame",
    "rows_frame",
    "light_task",
    "TaskReader",
]

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ tables and jobs
def load_table(spark: Any, table: str | Table) -> Table:
    """The table named ``cat.db.t`` (or ``db.t`` in the default catalog) through our catalogs."""
    check_session(spark)
    if isinstance(table, Table):
        return table
    catalog, ident = resolve_in_session(spark, table)
    return catalog.load_table(ident)


# ------------------------------------------------------------------------------ types
def spark_type(t: IcebergType) -> Any:
    """The Spark SQL type Iceberg Java's Spark reader uses for an Iceberg type (see module doc)."""
    from pyspark.sql import types as T  # noqa: PLC0415

    match t:
        case BooleanType():
            return T.BooleanType()
        case IntegerType():
            return T.IntegerType()
        case LongType() | TimeType():
            return T.LongType()
        case FloatType():
            return T.FloatType()
        case DoubleType():
            return T.DoubleType()
        case DecimalType():
            return T.DecimalType(t.precision, t.scale)
        case DateType():
            return T.DateType()
        case TimestampType() | TimestampNanoType():
            return T.TimestampNTZType()
        case TimestamptzType() | TimestamptzNanoType():
            return T.TimestampType()
        case StringType() | UUIDType():
            return T.StringType()
        case FixedType() | BinaryType() | GeometryType() | GeographyType():
            return T.BinaryType()
        case UnknownType():
            return T.NullType()
        case StructType():
            return T.StructType([_spark_field(f) for f in t.fields])
        case ListType():
            return T.ArrayType(spark_type(t.element_type), not t.element_required)
        case MapType():
            return T.MapType(spark_type(t.key_type), spark_type(t.value_type), not t.value_required)
    raise ValidationError(f"Cannot read Iceberg type {t} into Spark")


def _spark_field(f: NestedField) -> Any:
    from pyspark.sql import types as T  # noqa: PLC0415

    return T.StructField(f.name, spark_type(f.field_type), not f.required)


def spark_schema(arrow_schema: pa.Schema, iceberg_fields: Sequence[NestedField]) -> Any:
    """The Spark schema of a read: the Iceberg fields' Spark types, in order."""
    from pyspark.sql import types as T  # noqa: PLC0415

    return T.StructType([_spark_field(f) for f in iceberg_fields])


def _target_arrow(t: IcebergType) -> pa.DataType:
    """The Arrow type Spark expects for the Spark type of ``t``."""
    match t:
        case UUIDType():
            return pa.string()
        case FixedType() | GeometryType() | GeographyType():
            return pa.binary()
        case TimeType():
            return pa.int64()
        case TimestampNanoType() | TimestampType():
            return pa.timestamp("us")
        case TimestamptzNanoType() | TimestamptzType():
            return pa.timestamp("us", tz="UTC")
        case StructType():
            return pa.struct([pa.field(f.name, _target_arrow(f.field_type), not f.required) for f in t.fields])
        case ListType():
            return pa.list_(pa.field("element", _target_arrow(t.element_type), not t.element_required))
        case MapType():
            return pa.map_(pa.field("key", _target_arrow(t.key_type), False),
                           pa.field("value", _target_arrow(t.value_type), not t.value_required))

    return type_to_arrow(t)


def _needs_conversion(t: IcebergType) -> bool:
    if isinstance(t, (UUIDType, FixedType, TimeType, TimestampNanoType, TimestamptzNanoType,
                      GeometryType, GeographyType)):
        return True
    if isinstance(t, StructType):
        return any(_needs_conversion(f.field_type) for f in t.fields)
    if isinstance(t, ListType):
        return _needs_conversion(t.element_type)
    if isinstance(t, MapType):
        return _needs_conversion(t.key_type) or _needs_conversion(t.value_type)
    return False


def _convert(arr: pa.Array, t: IcebergType) -> pa.Array:
    if not _needs_conversion(t):
        return arr
    if isinstance(t, UUIDType):
        storage = arr.storage if isinstance(arr, pa.ExtensionArray) else arr
        return _uuid_strings(storage)
    if isinstance(t, (FixedType, GeometryType, GeographyType)):
        return arr.cast(pa.binary())
    if isinstance(t, TimeType):
        return arr.cast(pa.int64())
    if isinstance(t, (TimestampNanoType, TimestamptzNanoType)):
        return arr.cast(_target_arrow(t), safe=False)
    mask = arr.is_null() if arr.null_count else None
    if isinstance(t, StructType):
        kids = [_convert(arr.field(i), f.field_type) for i, f in enumerate(t.fields)]
        return pa.StructArray.from_arrays(kids, fields=list(_target_arrow(t)), mask=mask)
    if isinstance(t, ListType):
        return pa.ListArray.from_arrays(arr.offsets, _convert(arr.values, t.element_type), type=_target_arrow(t),
                                        mask=mask)
    offsets = pc.subtract(arr.offsets, arr.offsets[0])
    return pa.MapArray.from_arrays(offsets, _convert(arr.keys, t.key_type), _convert(arr.items, t.value_type),
                                   type=_target_arrow(t), mask=mask)


def _uuid_strings(storage: pa.Array) -> pa.Array:
    out = []
    for b in storage.to_pylist():
        if b is None:
            out.append(None)
        else:
            x = b.hex()
            out.append(f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}")
    return pa.array(out, pa.string())


def to_spark_arrow(batch: pa.RecordBatch, fields: Sequence[NestedField]) -> pa.RecordBatch:
    """A reader batch converted to the Arrow form Spark expects for the fields' Spark types."""
    arrays = [_convert(batch.column(i), f.field_type) for i, f in enumerate(fields)]
    schema = pa.schema([pa.field(f.name, _target_arrow(f.field_type), not f.required) for f in fields])
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# ------------------------------------------------------------------------------ tasks
def light_task(task: FileScanTask) -> FileScanTask:
    """The task without what executors do not need (column metrics, the schema)."""
    def strip(df: DataFile) -> DataFile:
        return replace(df, column_sizes=None, value_counts=None, null_value_counts=None, nan_value_counts=None,
                       lower_bounds=None, upper_bounds=None)

    deletes = tuple(replace(d, data_file=strip(d.data_file)) for d in task.deletes)
    return replace(task, data_file=strip(task.data_file), deletes=deletes, schema=None)  # type: ignore[arg-type]


def _meta_fields(metadata_columns: Sequence[str], ptype: StructType) -> list[NestedField]:
    return [metadata_field(n, ptype) for n in metadata_columns]


@dataclass(frozen=True)
class TaskReader:
    """Everything a Python task needs to read planned tasks of one table: built on the driver,
    pickled with the task function, used on the executors."""

    io_properties: dict[str, str] = field(repr=False)  # storage secrets stay out of reprs and logs
    specs: dict[int, Any]
    name_mapping_text: str | None
    scan_schema: Schema
    projected: Schema
    metadata_columns: tuple[str, ...] = ()
    partition_type: StructType | None = None
    apply_deletes: bool = True
    #: skip row groups and rows the tasks' residual filter proves unmatched (the caller re-filters)
    filter_rows: bool = False

    @classmethod
    def for_table(cls, table: Table, projected: Schema, scan_schema: Schema | None = None, **kwargs: Any) -> "TaskReader":
        """A reader of ``table``'s tasks into ``projected``; ``scan_schema`` (default ``projected``)
        is the schema the tasks were planned with."""
        md = table.metadata
        return cls(dict(getattr(table.io, "properties", {}) or {}), dict(md.specs_by_id),
                   DEFAULT_NAME_MAPPING.read(md.properties), scan_schema or projected, projected, **kwargs)

    def batches(self, tasks: Iterable[FileScanTask]) -> Iterator[pa.RecordBatch]:
        """The rows of ``tasks`` (light tasks, as shipped) with deletes applied, in
        :func:`procedures.io.parquet_reader.output_schema` form."""
        io = file_io(self.io_properties)
        mapping = parse_name_mapping(self.name_mapping_text) if self.name_mapping_text else None
        for light in tasks:
            yield from read_task(io, replace(light, schema=self.scan_schema), self.projected, specs=self.specs,
                                 name_mapping=mapping, metadata_columns=self.metadata_columns,
                                 partition_type=self.partition_type, apply_deletes=self.apply_deletes,
                                 filter_rows=self.filter_rows)


def read_tasks(
    spark: Any,
    table: Table,
    tasks: Iterable[FileScanTask],
    projected: Schema,
    *,
    scan_schema: Schema | None = None,
    metadata_columns: Sequence[str] = (),
    apply_deletes: bool = True,
    split_size: int | None = None,
    open_file_cost: int | None = None,
    filter_rows: bool = False,
) -> Any:
    """A DataFrame of planned tasks read on the executors (the building block of the readers).

    ``projected`` is the Iceberg schema of the output columns; ``scan_schema`` is the schema the
    tasks were planned with (equality deletes are resolved in it; defaults to ``projected``).

    Tasks become Spark partitions as Iceberg Java's scans do (:mod:`procedures.core.kernel.splits`): large
    files are split at row groups and small ones packed together, by the table's
    ``read.split.target-size`` / ``read.split.open-file-cost`` / ``read.split.planning-lookback``
    unless ``split_size`` / ``open_file_cost`` are given.  Without an explicit ``split_size`` a
    small scan is spread so every core of the session gets a partition.

    ``filter_rows`` lets the executors skip Parquet row groups and rows that the tasks' residual
    filter proves unmatched; only for callers that apply that filter to the rows afterwards.
    """
    md = table.metadata
    for name in metadata_columns:
        if name not in METADATA_COLUMN_NAMES:
            raise ValidationError(
                f"Cannot read metadata column {name!r} of {table.name}; supported: {', '.join(METADATA_COLUMN_NAMES)}")
    ptype = unified_partition_type(md)
    fields = list(projected.fields) + _meta_fields(metadata_columns, ptype)
    out_schema = spark_schema(pa.schema([]), fields)
    groups = plan_read_groups(spark, md, list(tasks), split_size, open_file_cost)
    payloads = [pickle.dumps([light_task(t) for t in g], protocol=pickle.HIGHEST_PROTOCOL) for g in groups]
    reader = TaskReader.for_table(table, projected, scan_schema, metadata_columns=tuple(metadata_columns),
                                  partition_type=ptype, apply_deletes=apply_deletes, filter_rows=filter_rows)

    def read_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        for b in batches:
            for raw in b.column(0).to_pylist():
                for out in reader.batches(pickle.loads(raw)):
                    yield to_spark_arrow(out, fields)

    if not payloads:
        return empty_frame(spark, out_schema)
    return tasks_frame(spark, payloads).mapInArrow(read_partition, out_schema)


def tasks_frame(spark: Any, payloads: Sequence[bytes]) -> Any:
    """A DataFrame with one partition per payload holding it as its only row (column ``task``).

    Built through the DataFrame API alone (:func:`procedures.spark.dataframes.payload_frame`), so it
    runs on classic and Spark Connect sessions; small payload sets cost no job, no shuffle and no
    Python pass before the job that reads them, and large ones are shuffled so each task receives
    only its own.
    """
    check_python_workers(spark)
    return payload_frame(spark, payloads, "task")


def rows_frame(spark: Any, rows: Sequence[tuple], schema: Any, slices: int | None = None) -> Any:
    """``spark.createDataFrame(rows, schema)`` for rows held by the driver (``schema`` a
    ``StructType``), in ``slices`` partitions when given (round-robin), on both session kinds."""
    check_python_workers(spark)
    df = spark.createDataFrame(list(rows), schema)
    return df.repartition(slices) if slices is not None else df


def plan_read_groups(spark: Any, md: TableMetadata, tasks: list[FileScanTask], split_size: int | None = None,
                     open_file_cost: int | None = None) -> list[list[FileScanTask]]:
    """The tasks cut and packed into the groups one Spark partition reads (see :func:`read_tasks`)."""
    return group_tasks(md, tasks, split_size, open_file_cost, parallelism(spark))


def group_tasks(md: TableMetadata, tasks: list[FileScanTask], split_size: int | None, open_file_cost: int | None,
                parallelism: int) -> list[list[FileScanTask]]:
    """:func:`plan_read_groups` for a known parallelism (where no session is at hand): without an
    explicit ``split_size`` a small scan is spread over ``parallelism`` groups."""
    options = SplitOptions.from_properties(md.properties, split_size=split_size, open_file_cost=open_file_cost)
    if split_size is None:
        return plan_spread_groups(tasks, options, parallelism)
    return plan_task_groups(tasks, options)


def as_of_ms(value: Any) -> int | None:
    """Epoch milliseconds of a time-travel time: millis, a datetime or ISO text (naive means UTC)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    if isinstance(value, str):
        return as_of_ms(dt.datetime.fromisoformat(value))
    return int(value)


def _projection(schema: Schema, columns: Sequence[str] | None, filter_names: set[str],
                case_sensitive: bool) -> tuple[Schema, list[str] | None]:
    if columns is None:
        return schema, None
    names = list(columns) + [n for n in sorted(filter_names) if n not in columns]
    projected = schema.select(names, case_sensitive)
    order = [schema.find_field(c, case_sensitive).name if "." not in c else c for c in columns]
    return projected, order


def read_table(
    spark: Any,
    table: str | Table,
    snapshot_id: int | None = None,
    as_of_timestamp: int | dt.datetime | str | None = None,
    ref: str | None = None,
    filter: str | Expression | None = None,
    columns: Sequence[str] | None = None,
    metadata_columns: Sequence[str] = (),
    *,
    case_sensitive: bool = True,
    native: bool | None = None,
) -> Any:
    """Read ``table`` (``"cat.db.t"`` or a loaded :class:`Table`) as a Spark DataFrame.

    ``snapshot_id``, ``as_of_timestamp`` (epoch millis, a datetime, or ISO text; naive means UTC) or
    ``ref`` (branch or tag) choose the snapshot; ``filter`` (Spark-SQL text or an expression) prunes
    files and, when given as text, is also applied to the rows (the read then also skips the
    Parquet row groups and rows the filter rules out); ``columns`` selects top-level or
    dotted columns; ``metadata_columns`` adds ``_file``, ``_pos``, ``_spec_id``, ``_partition``,
    ``_deleted``, ``_row_id``, ``_last_updated_sequence_number`` after them.

    Where that is exactly right, Spark's own Parquet reader reads the files
    (:mod:`procedures.spark.native_read`); ``native=False`` forces the Python reader, ``True``
    asks for the native route (still only where it is right), ``None`` follows the session conf
    ``spark.procedures.read.native-parquet.enabled``, then the table property
    ``read.native-parquet.enabled`` (default false: opt-in, see docs/native-reads.md).
    """
    # one read of the session's conf serves the catalog and the parallelism of the planning steps
    with statement_conf(spark):
        return _read_table(spark, table, snapshot_id, as_of_timestamp, ref, filter, columns, metadata_columns,
                           case_sensitive, native)


def _read_table(spark: Any, table: str | Table, snapshot_id: int | None, as_of_timestamp: Any, ref: str | None,
                filter: str | Expression | None, columns: Sequence[str] | None, metadata_columns: Sequence[str],
                case_sensitive: bool, native: bool | None) -> Any:
    t = load_table(spark, table)
    expr = parse_filter(filter) if isinstance(filter, str) and filter.strip() else (
        filter if isinstance(filter, Expression) else None)
    with job_description(spark, f"Plan scan of {t.name}"):
        sel = select_snapshot(t.metadata, snapshot_id=snapshot_id, as_of_timestamp_ms=as_of_ms(as_of_timestamp),
                              ref=ref)
        tasks = plan_scan_tasks(
            spark, t, snapshot_id=snapshot_id, as_of_timestamp_ms=as_of_ms(as_of_timestamp), ref=ref,
            filter=expr, case_sensitive=case_sensitive,
        )
    filter_names = referenced_names(expr) if (expr is not None and isinstance(filter, str)) else set()
    projected, order = _projection(sel.schema, columns, filter_names, case_sensitive)
    text_filter = isinstance(filter, str) and bool(filter.strip())
    df = natively = _read_natively(spark, t, tasks, projected, metadata_columns, native)
    if natively is None:
        # a text filter is applied to the rows below, so the read may skip what it proves unmatched
        df = read_tasks(spark, t, tasks, projected, scan_schema=sel.schema, metadata_columns=metadata_columns,
                        filter_rows=text_filter)
    if text_filter:
        df = df.where(filter)
    if natively is not None:
        df = required_non_null(spark, df, projected)
    if order is not None:
        df = df.select(*[quote_name(c) if "." not in c else c for c in order], *metadata_columns)
    return df


def _read_natively(spark: Any, t: Table, tasks: list[FileScanTask], projected: Schema,
                   metadata_columns: Sequence[str], native: bool | None) -> Any | None:
    """The read through Spark's Parquet reader when the route allows it, else ``None``; logs the
    route taken and why."""
    plan = native_read_plan(spark, t, projected, tasks, metadata_columns, native)
    df = None
    if plan.native:
        delete_rows = sum({d.data_file.file_path: d.data_file.record_count for tk in tasks for d in tk.deletes}.values())
        df = read_native(spark, plan, spark_schema(pa.schema([]), projected.fields), delete_rows)
    if df is not None:
        log.info("read of %s: Spark's Parquet reader, %d file(s), %d position delete file(s): %s", t.name,
                 len(plan.data_files), len(plan.delete_files), plan.reason)
    else:
        log.info("read of %s: the Python reader: %s", t.name, plan.reason)
    return df


def read_files(
    spark: Any,
    table: str | Table,
    data_files: Iterable[str | DataFile],
    *,
    snapshot_id: int | None = None,
    filter: str | Expression | None = None,
    columns: Sequence[str] | None = None,
    metadata_columns: Sequence[str] = ("_file", "_pos"),
    apply_deletes: bool = True,
) -> Any:
    """Read only the given data files of the table's snapshot, with their deletes applied.

    For copy-on-write rewrites (read the live rows of the files being replaced) and for finding
    the ``_file``/``_pos`` of rows matching a ``filter`` (text filters are applied to the rows).
    Paths that are not live data files of the snapshot raise ValidationError.
    """
    t = load_table(spark, table)
    wanted = {f if isinstance(f, str) else f.file_path for f in data_files}
    expr = parse_filter(filter) if isinstance(filter, str) and filter.strip() else (
        filter if isinstance(filter, Expression) else None)
    with job_description(spark, f"Plan reading {len(wanted)} file(s) of {t.name}"):
        sel = select_snapshot(t.metadata, snapshot_id=snapshot_id)
        # streamed: only the wanted files' tasks are ever held, however large the table
        tasks = [tk for tk in iter_scan_tasks(spark, t, snapshot_id=snapshot_id, filter=expr)
                 if tk.data_file.file_path in wanted]
    if expr is None:
        missing = wanted - {tk.data_file.file_path for tk in tasks}
        if missing:
            raise ValidationError(f"Cannot read {sorted(missing)[:3]} of {t.name}: not live data files of the snapshot")
    filter_names = referenced_names(expr) if (expr is not None and isinstance(filter, str)) else set()
    projected, order = _projection(sel.schema, columns, filter_names, True)
    text_filter = isinstance(filter, str) and bool(filter.strip())
    df = read_tasks(spark, t, tasks, projected, scan_schema=sel.schema, metadata_columns=metadata_columns,
                    apply_deletes=apply_deletes, filter_rows=text_filter)
    if text_filter:
        df = df.where(filter)
    if order is not None:
        df = df.select(*[quote_name(c) if "." not in c else c for c in order], *metadata_columns)
    return df
