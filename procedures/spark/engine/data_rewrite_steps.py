"""The Spark steps of the ``data_rewrite`` capability (:class:`DataRewriteSteps`, the Spark side of
:class:`procedures.core.data_rewrite.data_rewrite_engine.DataRewriteEngine`): planning reads manifests
in Spark tasks, data file groups are rewritten as Spark jobs from a driver thread pool bounded by
``max-concurrent-file-group-rewrites``, position delete groups in one Spark job.  Data file groups
that need no shuffle and one task each (small bin-pack groups, in-task sorts: :func:`batchable`) all
share one Spark job of at most ``max-concurrent-file-group-rewrites`` tasks, each group still its own
unit of success (:func:`rewrite_batched_groups`), since a job per small group costs more than the
group's work; the others run one group per job.

Rewriting one data file group (``rewrite_data_files``, procedures.md §3.9): a group's data files are read with their deletes applied (:func:`procedures.spark.read.read_tasks`
on the tasks planned from the starting snapshot), optionally clustered, and written as new data
files with the write half's writer (:func:`procedures.spark.write.write_dataframe`); nothing is
committed here.  The three rewriters follow Iceberg Java 1.10's runners:

* BIN-PACK: no shuffle; the group is read in splits of its input split size (small files packed
  together, large ones cut at row groups) and each split is written by the task that read it; only
  when the output spec differs from the input spec are rows range-partitioned by the output
  partition values first;
* SORT: rows are range-partitioned into ``expected files x shuffle-partitions-per-file`` partitions
  by the sort order (prefixed by the output spec's partition values when the spec changes) and sorted
  within them; sort keys with transforms are computed with Iceberg's own transforms.  A group that
  stays in its spec and is either small (at most ``IN_TASK_SORT_MAX_BYTES``) or would be sorted in one
  range partition anyway (one expected file, one shuffle partition per file) is instead read, sorted
  in Arrow and written by one Python task (no shuffle, one read, rows never in the JVM), cut into the
  same number of files; past a memory budget the task sorts in runs spilled to its local disk
  (:mod:`procedures.core.data_rewrite.external_sort`), as Spark's sort spills;
* Z-ORDER: as SORT on the interleaved z-value of the chosen columns (:mod:`procedures.core.data_rewrite.zorder`).

Writers roll files at the group's ``max_output_file_size`` (target plus half the way to max).
On a v3 table every path reads each row's ``_row_id`` and ``_last_updated_sequence_number`` (stored,
else inherited) and writes them into the new files, so rows keep their lineage (spec "Row Lineage").
"""

from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow as pa

from procedures.catalog.base import Table
from procedures.core.data_rewrite.arrow_sort import arrow_sortable, column_at
from procedures.core.data_rewrite.data_rewrite_engine import EntryReader
from procedures.core.data_rewrite.external_sort import SORT_MEMORY_BYTES, BatchCursor, ExternalSorter, sort_memory_pool
from procedures.core.data_rewrite.grouping import DeleteGroup, FileGroup, GroupRewrite, RewritePlan
from procedures.core.data_rewrite.options import BIN_PACK, SORT, Z_ORDER, PositionDeleteRewriteOptions, RewriteOptions
from procedures.core.data_rewrite.rewriter import Rewriter
from procedures.core.data_rewrite.zorder import Z_COLUMN, zorder_values
from procedures.core.kernel.scan import partition_key
from procedures.core.kernel.splits import spread_groups
from procedures.core.kernel.summary import content_size
from procedures.errors import ValidationError
from procedures.io.prefetch import read_ahead
from procedures.io.delete_writers import (
    DeleteTarget, merged_positions, read_position_arrays, write_deletion_vectors, write_position_delete_files,
)
from procedures.io.parquet_writer import data_location
from procedures.io.sandbox_fileio import file_io
from procedures.spark.dataframes import functions, parallelism
from procedures.spark.environment import check_python_workers
from procedures.spark.group_writes import write_groups
from procedures.spark.read import TaskReader, group_tasks, light_task, read_tasks
from procedures.spark.scan_planning import SparkEntryReader
from procedures.spark.session import active_session, in_caller_context, job_description, map_in_arrow
from procedures.spark.sql_quoting import quote_path, quote_name
from procedures.spark.worker import prepare_python_worker
from procedures.spark.write import (
    delete_quietly, task_ids, write_dataframe, write_in_task, write_payloads, write_settings,
)
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile
from procedures.spec.metadata_columns import row_lineage_names
from procedures.spec.partitioning import PartitionSpec
from procedures.spec.sorting import NullOrder, SortDirection, SortField, SortOrder
from procedures.spec.transforms import IdentityTransform
from procedures.spec.types import BinaryType, BooleanType, DecimalType, DoubleType, FixedType, FloatType, StringType

__all__ = [
    "DataRewriteSteps", "rewrite_group", "rewrite_batched_groups", "rewrite_delete_group", "group_description",
    "in_task_kind", "batchable", "ShippedDataGroup", "IN_TASK_SORT_MAX_BYTES",
]

log = logging.getLogger(__name__)

#: Largest group (input file bytes) of several range partitions that SORT rewrites inside one Python
#: task: past it, the partitions' sorts run in parallel through Spark's range shuffle.  A group of one
#: range partition is sorted in one task on either path, so it always stays in Python (the task sorts
#: in bounded memory, spilling past ``SORT_MEMORY_BYTES`` of Arrow rows).
IN_TASK_SORT_MAX_BYTES = 64 * 1024 * 1024
#: Rows per batch handed to the writer after an in-task sort (it rolls files between batches).
SORTED_BATCH_ROWS = 65_536
#: Most Arrow bytes the writer of an in-task sort buffers for a row group: with the sorter's budget
#: (``SORT_MEMORY_BYTES``) and the process itself, the task's Python worker stays under 512 MiB
#: whatever the group's size (the default buffer, 256 MiB, and 128 MiB sorted at once took it to 1 GiB).
SORTED_ROW_GROUP_BUFFER_BYTES = 48 * 1024 * 1024


#: the least a file weighs when groups are dealt over tasks (opening one costs a round trip)
OPEN_FILE_COST = 4 * 1024 * 1024
DELETE_OPEN_FILE_COST = OPEN_FILE_COST


def group_description(table: Table, group: FileGroup, total: int, rewriter: str, groups_in_partition: int) -> str:
    """The Spark job description of a group, worded like Java's."""
    if group.partition:
        return (f"Rewriting {group.input_file_count} files ({rewriter}, file group {group.global_index}/{total}, "
                f"{group.partition} ({group.partition_index}/{groups_in_partition})) in {table.name}")
    return f"Rewriting {group.input_file_count} files ({rewriter}, file group {group.global_index}/{total}) in {table.name}"


def _key_columns(schema: Any, fields: Sequence[tuple[int, Any]]) -> list[tuple[str, list[str], Any, Any]]:
    """(temp column name, source path, transform, source type) for each transformed key."""
    out = []
    for i, (source_id, transform) in enumerate(fields):
        f = schema.find_field(source_id)
        out.append((f"__rewrite_key_{i}", schema.field_path(source_id), transform, f.field_type))
    return out


def _key_kind(t: Any) -> tuple[Any, pa.DataType]:
    """(Spark type, Arrow type) of a transformed sort key: integers, dates and times as longs (their
    order is the order of their integer storage), strings and binary as they are."""
    from pyspark.sql import types as T  # noqa: PLC0415

    if isinstance(t, StringType):
        return T.StringType(), pa.string()
    if isinstance(t, (BinaryType, FixedType)):
        return T.BinaryType(), pa.binary()
    if isinstance(t, BooleanType):
        return T.BooleanType(), pa.bool_()
    if isinstance(t, (FloatType, DoubleType)):
        return T.DoubleType(), pa.float64()
    if isinstance(t, DecimalType):
        return T.DecimalType(t.precision, t.scale), pa.decimal128(t.precision, t.scale)
    return T.LongType(), pa.int64()


def _as_key(arr: Any, target: pa.DataType) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type == target:
        return arr
    if target == pa.int64() and (pa.types.is_temporal(arr.type)):
        width = pa.int32() if pa.types.is_date32(arr.type) or arr.type == pa.time32("s") or arr.type == pa.time32("ms") else pa.int64()
        arr = arr.view(width)
    return arr.cast(target)


def _with_keys(df: Any, keys: list[tuple[str, list[str], Any, Any]], zorder: tuple[Sequence[str], int, int | None] | None) -> Any:
    """``df`` plus one column per transformed sort key (and the z-value), computed in Arrow on executors."""
    from pyspark.sql import types as T  # noqa: PLC0415

    if not keys and zorder is None:
        return df

    check_python_workers(df.sparkSession)
    fields = list(df.schema.fields)
    kinds = [_key_kind(transform.result_type(source_type)) for _, _, transform, source_type in keys]
    for (name, _, _, _), (spark_t, _) in zip(keys, kinds):
        fields.append(T.StructField(name, spark_t, True))
    if zorder is not None:
        fields.append(T.StructField(Z_COLUMN, T.BinaryType(), True))
    out_schema = T.StructType(fields)

    def add(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        for b in batches:
            arrays = list(b.columns)
            names = list(b.schema.names)
            for (name, path, transform, source_type), (_, arrow_t) in zip(keys, kinds):
                arrays.append(_as_key(transform.apply_arrow(column_at(b, path), source_type), arrow_t))
                names.append(name)
            if zorder is not None:
                cols, vlc, mos = zorder
                arrays.append(zorder_values(b, cols, var_length_contribution=vlc, max_output_size=mos))
                names.append(Z_COLUMN)
            yield pa.RecordBatch.from_arrays(arrays, names=names)

    return map_in_arrow(df, add, out_schema)


def _ordered(col: Any, direction: SortDirection, nulls: NullOrder) -> Any:
    if direction == SortDirection.ASC:
        return col.asc_nulls_first() if nulls == NullOrder.NULLS_FIRST else col.asc_nulls_last()
    return col.desc_nulls_first() if nulls == NullOrder.NULLS_FIRST else col.desc_nulls_last()


def _sort_fields(order: SortOrder, output_spec: PartitionSpec, repartition: bool) -> list[SortField]:
    # Java's SortOrderUtil.buildSortOrder: when data moves to another spec, cluster by its partition first
    fields: list[SortField] = []
    if repartition:
        for pf in output_spec.fields:
            if pf.transform.is_void:
                continue
            fields.append(SortField(pf.source_id, pf.transform, SortDirection.ASC, NullOrder.NULLS_FIRST))
    fields.extend(order.fields)
    return fields


def _sorted_df(df: Any, schema: Any, fields: Sequence[SortField], partitions: int, zorder: Any = None) -> tuple[Any, list[str]]:
    F = functions(df.sparkSession)
    transformed = [(f.source_id, f.transform) for f in fields if not isinstance(f.transform, IdentityTransform)]
    keys = _key_columns(schema, transformed)
    df = _with_keys(df, keys, zorder)
    exprs = []
    it = iter(keys)
    for f in fields:
        if isinstance(f.transform, IdentityTransform):
            path = schema.field_path(f.source_id)
            col = F.col(quote_path(path))
        else:
            col = F.col(quote_name(next(it)[0]))
        exprs.append(_ordered(col, f.direction, f.null_order))
    if zorder is not None:
        exprs.append(F.col(Z_COLUMN).asc_nulls_last())
    df = df.repartitionByRange(partitions, *exprs).sortWithinPartitions(*exprs)
    temp = [k[0] for k in keys] + ([Z_COLUMN] if zorder is not None else [])
    return df, temp


def _bin_pack_splits(spark: Any, table: Table, tasks: Sequence[Any], group: FileGroup, spec_id: int) -> list[DataFile]:
    """Bin-pack without a shuffle, as Java's runner: the group is read in splits of its input split
    size (small files packed, large ones cut at row groups) and each split is written by the task
    that read it, rolling at the group's max output size.  Rows stay inside the Python worker: no
    trip through the JVM between reading and writing."""
    md = table.metadata
    lineage = row_lineage_names(md.format_version)
    settings = write_settings(md, spec_id=spec_id, row_lineage=bool(lineage),
                              properties={"write.target-file-size-bytes": str(group.max_output_file_size)})
    cores = parallelism(spark)
    splits = group_tasks(md, list(tasks), max(1, group.input_split_size), 0, cores)
    if not splits:
        return []
    # A Python task has a fixed cost of tens of milliseconds, so splits are dealt over at most twice
    # the session's cores (balanced by bytes) rather than one task per split; each split still
    # becomes its own file(s), as in Java, and a cluster with enough cores runs one split per task.
    slots = max(1, 2 * cores)
    payloads = [[(i, [light_task(t) for t in splits[i]]) for i in members] for members in spread_groups(splits, slots)]
    reader = TaskReader.for_table(table, md.schema(), metadata_columns=lineage)
    operation_id = str(uuid.uuid4())

    def write_splits(payload: list[tuple[int, list[Any]]]) -> Iterator[list[DataFile]]:
        for index, split in payload:
            yield _write_split(reader, settings, f"{operation_id}-{index}", split)

    return write_payloads(spark, table.io, payloads, write_splits, data_path=settings.data_path)


def _write_split(reader: TaskReader, settings: Any, operation_id: str, split: list[Any]) -> list[DataFile]:
    """Inside a task: one bin-pack split read (deletes applied) and written as it is read; one
    operation id per split keeps file names unique within the task."""
    return write_in_task(reader.io_properties, settings, operation_id, read_ahead(reader.batches(split)))


def _write_sorted(reader: TaskReader, settings: Any, fields: Sequence[SortField], memory_bytes: int, n_out: int,
                  operation_id: str, light_tasks: list[Any]) -> Iterator[list[DataFile]]:
    """Inside a task: a group's rows read, sorted in bounded memory (:class:`ExternalSorter`, spilling
    to the task's local disk past ``memory_bytes``) and written as ``n_out`` equal runs of rows, each
    its own file(s), as the range partitions of a shuffle would be."""
    settings = dataclasses.replace(settings, row_group_buffer_bytes=SORTED_ROW_GROUP_BUFFER_BYTES)
    # jemalloc hands freed pages back sooner than the default mimalloc (sort_memory_pool); the pool is
    # process-wide, and a buffer is freed to the pool it came from, so switching back afterwards is
    # safe while batches of the task are still alive
    previous_pool = pa.default_memory_pool()
    pa.set_memory_pool(sort_memory_pool())
    try:
        with ExternalSorter(reader.projected, fields, _spill_dir(), memory_bytes=memory_bytes) as sorter:
            for batch in read_ahead(reader.batches(light_tasks)):
                sorter.add(batch)
            rows = BatchCursor(sorter.sorted_batches(SORTED_BATCH_ROWS))
            bounds = [sorter.rows * i // n_out for i in range(n_out + 1)]
            for i in range(n_out):
                count = bounds[i + 1] - bounds[i]
                if count:
                    yield write_in_task(reader.io_properties, settings, f"{operation_id}-{i}", rows.take(count))
    finally:
        pa.set_memory_pool(previous_pool)


def _spill_dir() -> str | None:
    """The running task's local scratch directory (Spark hands Python workers its local dirs), else
    the system's temporary directory."""
    dirs = os.environ.get("SPARK_LOCAL_DIRS", "")
    return dirs.split(",")[0] or None


def _sort_in_task(spark: Any, table: Table, tasks: Sequence[Any], group: FileGroup, spec_id: int,
                  fields: Sequence[SortField]) -> list[DataFile]:
    """SORT of a group without a shuffle: one Python task reads the group's rows (deletes applied),
    sorts them in Arrow (in memory when they fit ``SORT_MEMORY_BYTES``, else in spilled runs merged by
    key ranges, :class:`ExternalSorter`) and writes the group's expected number of files, each a run
    of consecutive rows (as a range partition is) rolled at the group's max output size, so rows never
    cross into the JVM and are read once (a range shuffle samples its input first)."""
    md = table.metadata
    schema = md.schema()
    lineage = row_lineage_names(md.format_version)
    settings = write_settings(md, spec_id=spec_id, row_lineage=bool(lineage),
                              properties={"write.target-file-size-bytes": str(group.max_output_file_size)})
    reader = TaskReader.for_table(table, schema, metadata_columns=lineage)
    operation_id = str(uuid.uuid4())
    payload = [light_task(t) for t in tasks]
    n_out = max(1, group.expected_output_files)
    memory_bytes = SORT_MEMORY_BYTES  # read on the driver, so a session can lower it for a test

    def sort_and_write(light_tasks: list[Any]) -> Iterator[list[DataFile]]:
        return _write_sorted(reader, settings, fields, memory_bytes, n_out, operation_id, light_tasks)

    return write_payloads(spark, table.io, [payload], sort_and_write, data_path=settings.data_path)


def _output_spec_id(md: Any, group: FileGroup) -> int:
    return group.output_spec_id if group.output_spec_id is not None else md.default_spec_id


def in_task_kind(md: Any, group: FileGroup, rewriter: Rewriter, options: RewriteOptions) -> str | None:
    """How a group is rewritten without a shuffle, if it is: ``BIN_PACK`` (its files stay in their
    spec: splits read and written by the tasks that read them), ``SORT`` (it stays in its spec, is
    small or one range partition anyway, and Arrow sorts its keys: one Python task sorts it), else
    None (the group goes through Spark's range shuffle)."""
    spec_id = _output_spec_id(md, group)
    if any(t.data_file.spec_id != spec_id for t in group.tasks):
        return None
    if rewriter.kind == BIN_PACK:
        return BIN_PACK
    n_out = max(1, group.expected_output_files)
    if (rewriter.kind == SORT and rewriter.sort_order is not None
            and (group.input_size <= IN_TASK_SORT_MAX_BYTES or n_out * options.shuffle_partitions_per_file == 1)
            and arrow_sortable(md.schema(), rewriter.sort_order.fields)):
        return SORT
    return None


def batchable(md: Any, group: FileGroup, rewriter: Rewriter, options: RewriteOptions) -> bool:
    """Whether a group can share a Spark job with other groups (:func:`rewrite_batched_groups`):
    it is rewritten without a shuffle and by one task on its own path anyway (one bin-pack split,
    or an in-task sort), so running it as one task of a shared job costs it no parallelism."""
    kind = in_task_kind(md, group, rewriter, options)
    if kind == BIN_PACK:
        return group.input_size <= max(1, group.input_split_size)
    return kind == SORT


def rewrite_group(
    spark: Any,
    table: Table,
    group: FileGroup,
    rewriter: Rewriter,
    options: RewriteOptions,
    *,
    description: str | None = None,
) -> list[DataFile]:
    """Rewrite one group's files (deletes applied) into new, uncommitted data files.

    If the job fails, every file its tasks wrote is removed (a failing task removes its own, the
    driver those of tasks that had finished); the error propagates.
    """
    md = table.metadata
    schema = md.schema()
    output_spec = md.spec_by_id(group.output_spec_id if group.output_spec_id is not None else md.default_spec_id)
    if output_spec is None:
        raise ValidationError(f"Cannot rewrite into spec {group.output_spec_id}: not a spec of {table.name}")
    tasks = [dataclasses.replace(t, schema=schema) for t in group.tasks]
    n_out = max(1, group.expected_output_files)
    repartition = any(t.data_file.spec_id != output_spec.spec_id for t in tasks)
    text = description or f"Rewriting {len(tasks)} files ({rewriter.kind}) in {table.name}"
    # v3: every row keeps its _row_id and _last_updated_sequence_number (read as stored, else
    # inherited from its file) by writing them into the new files, as Java's rewrite does
    lineage = row_lineage_names(md.format_version)
    with job_description(spark, text):
        temp: list[str] = []
        kind = in_task_kind(md, group, rewriter, options)
        if kind == BIN_PACK:
            files = _bin_pack_splits(spark, table, tasks, group, output_spec.spec_id)
            return [dataclasses.replace(f, sort_order_id=rewriter.sort_order_id) for f in files]
        if kind == SORT:
            files = _sort_in_task(spark, table, tasks, group, output_spec.spec_id, rewriter.sort_order.fields)
            return [dataclasses.replace(f, sort_order_id=rewriter.sort_order_id) for f in files]
        # the read only feeds a shuffle: scan-sized splits (spread over the cores for a small group)
        # rather than one per output file; files are cheap to open here, so no open-file cost
        df = read_tasks(spark, table, tasks, schema, scan_schema=schema, open_file_cost=0, metadata_columns=lineage)
        if rewriter.kind == BIN_PACK:
            # Java's RANGE distribution when the data moves to another spec
            df, temp = _sorted_df(df, schema, _sort_fields(SortOrder(0, ()), output_spec, repartition), n_out)
        elif rewriter.kind == SORT:
            if rewriter.sort_order is None or rewriter.sort_order.is_unsorted():
                raise ValidationError("Cannot sort data without a valid sort order, the provided sort order is null or empty")
            fields = _sort_fields(rewriter.sort_order, output_spec, repartition)
            df, temp = _sorted_df(df, schema, fields, n_out * options.shuffle_partitions_per_file)
            if options.shuffle_partitions_per_file > 1:
                df = df.coalesce(n_out)  # neighbouring range partitions stay in order
        elif rewriter.kind == Z_ORDER:
            if not rewriter.zorder_columns:
                raise ValidationError("Cannot ZOrder when no columns are specified")
            fields = _sort_fields(SortOrder(0, ()), output_spec, repartition)
            zorder = (list(rewriter.zorder_columns), options.var_length_contribution, options.max_output_size)
            df, temp = _sorted_df(df, schema, fields, n_out * options.shuffle_partitions_per_file, zorder)
            if options.shuffle_partitions_per_file > 1:
                df = df.coalesce(n_out)
        else:
            raise ValidationError(f"Unknown rewriter {rewriter.kind!r}; use {BIN_PACK}, {SORT} or {Z_ORDER}")
        if temp:
            df = df.drop(*temp)
        files = write_dataframe(
            spark, table, df, spec_id=output_spec.spec_id,
            properties={"write.target-file-size-bytes": str(group.max_output_file_size)},
            description=text, row_lineage=bool(lineage),
        )
    return [dataclasses.replace(f, sort_order_id=rewriter.sort_order_id) for f in files]


@dataclasses.dataclass(frozen=True)
class ShippedDataGroup:
    """A :class:`FileGroup` as a task of a shared job receives it: how it is rewritten (``BIN_PACK``:
    each split read and written on its own; ``SORT``: the one split sorted), its tasks without
    metrics, the key of its writer settings and the number of files a sort cuts it into."""

    kind: str
    splits: tuple[tuple[Any, ...], ...]
    settings_key: tuple[int, int]
    n_out: int


def rewrite_batched_groups(spark: Any, table: Table, groups: Sequence[FileGroup], rewriter: Rewriter,
                           options: RewriteOptions, *, slots: int, stop_on_failure: bool,
                           description: str) -> list[GroupRewrite]:
    """Rewrite :func:`batchable` ``groups`` in one Spark job of at most ``slots`` tasks (groups dealt
    over them balanced by bytes, :func:`~procedures.spark.group_writes.write_groups`), one outcome
    per group that ran, indexed by position in ``groups``.  Each group is written as its own path
    would (splits written as read, or sorted in bounded memory) and fails on its own: its files are
    deleted and the task goes on with its other groups (skips them with ``stop_on_failure``)."""
    md = table.metadata
    schema = md.schema()
    lineage = row_lineage_names(md.format_version)
    reader = TaskReader.for_table(table, schema, metadata_columns=lineage)
    settings: dict[tuple[int, int], Any] = {}
    shipped = []
    for group in groups:
        spec_id = _output_spec_id(md, group)
        key = (spec_id, group.max_output_file_size)
        if key not in settings:
            settings[key] = write_settings(md, spec_id=spec_id, row_lineage=bool(lineage),
                                           properties={"write.target-file-size-bytes": str(group.max_output_file_size)})
        kind = in_task_kind(md, group, rewriter, options)
        tasks = [dataclasses.replace(t, schema=schema) for t in group.tasks]
        splits = group_tasks(md, tasks, max(1, group.input_split_size), 0, 1) if kind == BIN_PACK else [tasks]
        shipped.append(ShippedDataGroup(kind, tuple(tuple(light_task(t) for t in split) for split in splits), key,
                                        max(1, group.expected_output_files)))
    fields = tuple(rewriter.sort_order.fields) if rewriter.sort_order is not None else ()
    memory_bytes = SORT_MEMORY_BYTES  # read on the driver, so a session can lower it for a test
    operation_id = str(uuid.uuid4())
    io_props = reader.io_properties

    def write(index: int, group: ShippedDataGroup) -> list[DataFile]:
        written: list[DataFile] = []
        prefix = f"{operation_id}-{index}"  # unique file names when a task rewrites several groups
        try:
            if group.kind == BIN_PACK:
                for k, split in enumerate(group.splits):
                    written.extend(_write_split(reader, settings[group.settings_key], f"{prefix}-{k}", list(split)))
            else:
                for files in _write_sorted(reader, settings[group.settings_key], fields, memory_bytes, group.n_out,
                                           prefix, list(group.splits[0])):
                    written.extend(files)
        except BaseException:
            # write_groups needs a failed group to leave nothing behind: its finished files go too
            delete_quietly(file_io(io_props), [f.file_path for f in written])
            raise
        return written

    weights = [sum(max(content_size(f), OPEN_FILE_COST) for f in group.files) for group in groups]
    with job_description(spark, description):
        outcomes = write_groups(spark, table.io, shipped, weights, slots, write, stop_on_failure=stop_on_failure,
                                data_path=next(iter(settings.values())).data_path)
    return [GroupRewrite(o.index, tuple(dataclasses.replace(f, sort_order_id=rewriter.sort_order_id) for f in o.files),
                         o.error, o.task_traceback) for o in outcomes]


def _by_completion(futures: Iterable[Future], key: Callable[[Future], int]) -> Iterator[Future]:
    """Futures as they finish; those finishing together in ``key`` order (the plan's group number)."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, return_when=FIRST_COMPLETED)
        yield from sorted(done, key=key)


class DataRewriteSteps:
    """The Spark steps of :class:`~procedures.core.data_rewrite.data_rewrite_engine.DataRewriteEngine`.

    A mixin of the Spark engine: it runs on ``self.spark``, else the active session (resolved when a
    step first needs one, so a call that fails validation or has nothing to do never asks for a
    session), and commits through ``self.commit``.  ``on_driver`` runs everything on the driver
    instead (no session at all)."""

    spark: Any
    commit: Callable[[Any, Sequence[Any]], Any]
    #: rewrite without Spark: manifests read, delete groups rewritten on the driver
    on_driver: bool = False

    def rewrite_session(self) -> Any:
        """The session the rewrite's jobs run on (raises when there is none)."""
        return active_session(self.spark)

    def manifest_entry_reader(self, table: Table) -> EntryReader | None:
        """Data manifests read in Spark tasks (on the driver with ``on_driver``)."""
        return None if self.on_driver else SparkEntryReader(self.rewrite_session(), table.io, table.name)

    def rewrite_data_group(self, table: Table, rewriter: Rewriter, options: RewriteOptions, groups: RewritePlan,
                           group: FileGroup) -> list[DataFile]:
        """One group rewritten as Spark jobs named like Java's."""
        text = group_description(table, group, groups.total_group_count, rewriter.kind,
                                 groups.groups_in_partition.get(tuple(partition_key(0, tuple(group.partition))[1]), 0))
        return rewrite_group(self.rewrite_session(), table, group, rewriter, options, description=text)

    def rewrite_groups(self, table: Table, rewriter: Rewriter, options: RewriteOptions, groups: RewritePlan, *,
                       stop_on_failure: bool) -> Iterator[GroupRewrite]:
        """Groups rewritten on a driver thread pool of ``max-concurrent-file-group-rewrites`` threads
        (``Rewrite-Service``), each thread's Spark jobs in the caller's job group; outcomes in order of
        completion.  Groups that need no shuffle and one task each (:func:`batchable`) share one
        Spark job instead of one job each, at most ``max-concurrent-file-group-rewrites`` of them
        in flight (:func:`rewrite_batched_groups`): a job's fixed cost would otherwise dominate small
        groups.  After a failure with ``stop_on_failure`` the groups not yet started are cancelled
        and the running ones still report, so their files can be cleaned up."""
        spark = None if self.on_driver else self.rewrite_session()
        md = table.metadata
        batched = [] if spark is None else [i for i, g in enumerate(groups.groups)
                                            if batchable(md, g, rewriter, options)]
        if len(batched) < 2:
            batched = []
        in_batch = set(batched)

        def one(index: int) -> list[GroupRewrite]:
            files = self.rewrite_data_group(table, rewriter, options, groups, groups.groups[index])
            return [GroupRewrite(index, tuple(files))]

        def batch() -> list[GroupRewrite]:
            members = [groups.groups[i] for i in batched]
            text = (f"Rewriting {sum(g.input_file_count for g in members)} files in {len(members)} file groups "
                    f"({rewriter.kind}) in {table.name}")
            slots = max(1, min(options.max_concurrent, 2 * parallelism(spark)))
            outcomes = rewrite_batched_groups(spark, table, members, rewriter, options, slots=slots,
                                              stop_on_failure=stop_on_failure, description=text)
            return [dataclasses.replace(o, index=batched[o.index]) for o in outcomes]

        run_one = in_caller_context(spark, one)
        run_batch = in_caller_context(spark, batch)
        order = [g.global_index for g in groups.groups]
        with ThreadPoolExecutor(options.max_concurrent, thread_name_prefix="Rewrite-Service") as pool:
            futures: dict[Future, list[int]] = {}
            if batched:
                futures[pool.submit(run_batch)] = batched
            for i in range(len(groups.groups)):
                if i not in in_batch:
                    futures[pool.submit(run_one, i)] = [i]
            failed = False
            for fut in _by_completion(futures, lambda f: order[futures[f][0]]):
                if fut.cancelled():
                    continue
                try:
                    outcomes = fut.result()
                except Exception as e:  # noqa: BLE001 - reported; the capability decides
                    outcomes = [GroupRewrite(i, error=e) for i in futures[fut]]
                except BaseException as e:  # an interrupt: without partial progress it fails the call too
                    if not stop_on_failure:
                        raise
                    outcomes = [GroupRewrite(i, error=e) for i in futures[fut]]
                for outcome in outcomes:
                    if outcome.error is not None and stop_on_failure and not failed:
                        failed = True
                        for other in futures:
                            other.cancel()
                    yield outcome

    def rewrite_delete_groups(self, table: Table, groups: Sequence[DeleteGroup],
                              options: PositionDeleteRewriteOptions, *, stop_on_failure: bool) -> list[GroupRewrite]:
        """Every group rewritten by one Spark job (on the driver with ``on_driver``)."""
        if self.on_driver:
            return _delete_groups_on_driver(table, list(groups), options.max_concurrent)
        spark = self.rewrite_session()
        # groups in flight at once: one per task, so the tasks are capped by the option (and by
        # twice the cores, which is enough to even out estimated weights)
        slots = max(1, min(options.max_concurrent, 2 * parallelism(spark)))
        outcomes = _delete_groups_in_spark(spark, table, list(groups), slots, stop_on_failure)
        log.info("Rewrote %d of %d position delete file groups of %s in one Spark job",
                 sum(1 for o in outcomes if o.error is None), len(groups), table.name)
        return outcomes


@dataclasses.dataclass(frozen=True)
class ShippedDeleteGroup:
    """A :class:`DeleteGroup` as a task receives it: the targets cut down to what a delete file
    records of its data file (path, partition, spec), so the payload stays small."""

    files: tuple[DataFile, ...]
    targets: dict[str, DeleteTarget]
    dvs: dict[str, DataFile]

    @classmethod
    def of(cls, group: DeleteGroup) -> "ShippedDeleteGroup":
        """The payload of ``group``."""
        return cls(group.files, {p: DeleteTarget.of(f) for p, f in group.targets.items()}, group.dvs)


def _delete_groups_in_spark(spark: Any, table: Any, groups: list[DeleteGroup], slots: int,
                            stop_on_failure: bool) -> list[GroupRewrite]:
    """Every group rewritten by one Spark job of at most ``slots`` tasks, balanced by the bytes of
    the groups' delete files (:func:`~procedures.spark.group_writes.write_groups`: a group that
    fails is reported on its own, its files deleted, and the other groups of its task go on with
    partial progress, or are skipped without)."""
    md = table.metadata
    io_props = dict(getattr(table.io, "properties", {}) or {})
    operation_id = str(uuid.uuid4())

    def rewrite(index: int, group: ShippedDeleteGroup) -> list[DataFile]:
        partition_id, task_id = task_ids()
        # one operation id per group keeps file names unique when a task rewrites several groups
        return rewrite_delete_group(file_io(io_props), md, group, partition_id=partition_id, task_id=task_id,
                                    operation_id=f"{operation_id}-{index}")

    # reading a delete file costs at least a round trip however small it is
    weights = [sum(max(content_size(f), DELETE_OPEN_FILE_COST) for f in g.files) for g in groups]
    n_files = sum(len(g.files) for g in groups)
    text = (f"rewrite_position_delete_files: {table.name}: rewrite {n_files} position delete files "
            f"in {len(groups)} file groups")
    with job_description(spark, text):
        outcomes = write_groups(spark, table.io, [ShippedDeleteGroup.of(g) for g in groups], weights, slots, rewrite, stop_on_failure=stop_on_failure,
                                data_path=data_location(md.location, md.properties))
    return [GroupRewrite(o.index, tuple(o.files), o.error, o.task_traceback) for o in outcomes]


def _delete_groups_on_driver(table: Any, groups: list[DeleteGroup], max_concurrent: int) -> list[GroupRewrite]:
    """Every group rewritten on the driver, up to ``max_concurrent`` at once (no Spark session)."""
    def run(index: int) -> GroupRewrite:
        try:
            added = rewrite_delete_group(table.io, table.metadata, ShippedDeleteGroup.of(groups[index]))
        except Exception as e:  # noqa: BLE001 -- the capability decides by the partial-progress rules
            return GroupRewrite(index, error=e)
        log.info("Rewrote position delete file group %d/%d of %s", index + 1, len(groups), table.name)
        return GroupRewrite(index, tuple(added))

    with ThreadPoolExecutor(max_concurrent, thread_name_prefix="Rewrite-Position-Delete-Service") as pool:
        return list(pool.map(run, range(len(groups))))


def rewrite_delete_group(io: FileAccess, md: Any, group: ShippedDeleteGroup, *, partition_id: int = 0, task_id: int = 0,
                         operation_id: str | None = None) -> list[DataFile]:
    """New delete files for a group; deletes of data files that are not live targets are dangling
    and dropped.  On v3 each new DV absorbs the data file's current DV."""
    found: dict[str, list[Any]] = {}
    for f in group.files:
        for path, pos in read_position_arrays(io, f).items():
            if path in group.targets:
                found.setdefault(path, []).append(pos)
    positions = {path: merged_positions(*runs) for path, runs in found.items()}
    if not positions:
        return []
    names = {"partition_id": partition_id, "task_id": task_id, "operation_id": operation_id}
    if md.format_version >= 3:
        merged = {}
        for path, pos in positions.items():
            old = group.dvs.get(path)
            if old is not None:
                pos = merged_positions(pos, read_position_arrays(io, old).get(path, ()))
            merged[group.targets[path]] = pos
        return write_deletion_vectors(io, md, merged, **names)
    return write_position_delete_files(io, md, {group.targets[p]: pos for p, pos in positions.items()}, **names)
