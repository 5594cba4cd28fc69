"""Writing Spark DataFrames to Iceberg data files (the write half of Spark I/O).

The data never passes through the driver: each Spark task gets its Arrow batches through
``mapInArrow``, casts them to the table's Arrow schema, partitions them with the spec's
transforms and writes Parquet files with :mod:`procedures.io.parquet_writer`.  Each task returns
one row per written file holding the pickled :class:`DataFile`; the driver collects only those
and commits them through :mod:`procedures.core`.  Only the DataFrame API is used, so the same code
runs on classic and Spark Connect sessions: the paths a job wrote are named for cleanup by the
job's journal (:class:`WrittenFiles`), not by an accumulator.

Optionally the DataFrame is first clustered by the partition values (``cluster=True``) so that
each task writes few files, and sorted within tasks (``sort=True``) by the partition values and
the table's sort order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import pickle
import uuid as _uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow as pa

from procedures.catalog.base import Table
from procedures.core.kernel.distribution import HASH, NONE, RANGE, append_distribution, row_change_distribution
from procedures.core.kernel.paths import join_path
from procedures.errors import ValidationError
from procedures.io.data_writers import write_data_files
from procedures.io.parquet_writer import WriteSettings
from procedures.io.sandbox_fileio import file_io
from procedures.spark.dataframes import collect_first_column, conf_value, functions, map_slices, slices_frame, struct_schema
from procedures.spark.environment import check_python_workers
from procedures.spark.session import job_description, load_table, map_in_arrow
from procedures.spark.sql_quoting import quote_path
from procedures.spark.worker import prepare_python_worker
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile
from procedures.spec.sorting import NullOrder, SortDirection
from procedures.spec.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    TruncateTransform,
    YearTransform,
)
from procedures.spec.types import IntegerType, LongType, StringType

__all__ = ["DISTRIBUTION_MODE_CONF", "distribution_of",
           "write_dataframe", "WrittenFiles", "TaskJournal", "JOURNAL_PREFIX", "write_payloads",
           "write_settings", "write_in_task", "task_ids", "files_batch", "partition_expressions", "sort_expressions", "OUTPUT_COLUMN", "check_writable",
           "check_columns", "delete_quietly"]

log = logging.getLogger(__name__)

#: the session's distribution mode of appends (Iceberg Java's key), over the table's property
DISTRIBUTION_MODE_CONF = "spark.sql.iceberg.distribution-mode"

#: the column of the task output that holds each pickled DataFile
OUTPUT_COLUMN = "data_file"


def _col(F: Any, name_path: Sequence[str]) -> Any:
    return F.col(quote_path(name_path))


def _resolve_case(df_columns: Sequence[str], path: list[str]) -> list[str]:
    # DataFrames from users may spell top-level names in another case than the table
    if path[0] not in df_columns:
        hits = [c for c in df_columns if c.lower() == path[0].lower()]
        if len(hits) == 1:
            return [hits[0]] + path[1:]
    return path


def partition_expressions(df: Any, settings: WriteSettings) -> list[Any]:
    """Spark column expressions constant on each partition of the spec (not necessarily equal to
    Iceberg's partition values: they only need to group rows of one partition together)."""
    F = functions(df.sparkSession)
    out = []
    for pf in settings.spec.fields:
        source = settings.schema.find_field_or_none(pf.source_id)
        if source is None or pf.transform.is_void:
            continue
        c = _col(F, _resolve_case(df.columns, settings.schema.field_path(pf.source_id)))
        t = pf.transform
        if isinstance(t, IdentityTransform):
            out.append(c)
        elif isinstance(t, YearTransform):
            out.append(F.year(c))
        elif isinstance(t, MonthTransform):
            out.append(F.date_trunc("month", c))
        elif isinstance(t, DayTransform):
            out.append(F.to_date(c))
        elif isinstance(t, HourTransform):
            out.append(F.date_trunc("hour", c))
        elif isinstance(t, BucketTransform):
            # Spark's hash differs from Iceberg's murmur3 bucket; the partition is still a function of it
            out.append(F.pmod(F.hash(c), F.lit(t.num_buckets)))
        elif isinstance(t, TruncateTransform) and isinstance(source.field_type, StringType):
            out.append(F.substring(c, 1, t.width))
        elif isinstance(t, TruncateTransform) and isinstance(source.field_type, (IntegerType, LongType)):
            out.append(F.floor(c / F.lit(t.width)))
        else:
            out.append(c)
    return out


def sort_expressions(df: Any, settings: WriteSettings, sort_order: Any | None) -> list[Any]:
    """Partition expressions then the identity/order-preserving fields of the table's sort order."""
    F = functions(df.sparkSession)
    exprs = [e.asc_nulls_first() for e in partition_expressions(df, settings)]
    if sort_order is None:
        return exprs
    for sf in sort_order.fields:
        if not isinstance(sf.transform, IdentityTransform):
            continue
        if settings.schema.find_field_or_none(sf.source_id) is None:
            continue
        c = _col(F, _resolve_case(df.columns, settings.schema.field_path(sf.source_id)))
        if sf.direction == SortDirection.ASC:
            c = c.asc_nulls_first() if sf.null_order == NullOrder.NULLS_FIRST else c.asc_nulls_last()
        else:
            c = c.desc_nulls_first() if sf.null_order == NullOrder.NULLS_FIRST else c.desc_nulls_last()
        exprs.append(c)
    return exprs


def distribution_of(spark: Any, table: Table, op: str | None = None) -> str:
    """The distribution mode of a write to ``table`` in ``spark``: the session's
    ``spark.sql.iceberg.distribution-mode``, else the table's property, for an append (``op``
    None: :func:`procedures.core.kernel.distribution.append_distribution`) or the rows a DELETE,
    UPDATE or MERGE (``op``) writes (:func:`~procedures.core.kernel.distribution.row_change_distribution`)."""
    md = table.metadata
    requested = conf_value(spark, DISTRIBUTION_MODE_CONF, "") or None
    shape = {"partitioned": md.spec().is_partitioned(), "sorted_": bool(md.sort_order().fields),
             "requested_by": DISTRIBUTION_MODE_CONF}
    if op is None:
        return append_distribution(md.properties, requested, **shape)
    return row_change_distribution(md.properties, requested, op, **shape)


def write_dataframe(
    spark: Any,
    table: str | Table,
    df: Any,
    *,
    sort: bool = False,
    cluster: bool = False,
    spec_id: int | None = None,
    properties: dict[str, str] | None = None,
    description: str | None = None,
    row_lineage: bool = False,
    columns: Sequence[str] | None = None,
    distribution: str = NONE,
) -> list[DataFile]:
    """Write ``df`` as data files of ``table`` (not committed) and return their ``DataFile``s.

    Columns are matched to the table schema by name; ``properties`` override table write
    properties for this write (``write.target-file-size-bytes`` ...).  ``cluster`` repartitions by
    the partition values first so each task writes few files; ``sort`` also sorts rows within
    tasks by partition and the table's sort order (and implies clustering for partitioned tables).
    ``distribution`` (:mod:`procedures.core.kernel.distribution`; see :func:`distribution_of`)
    shuffles the rows first: ``hash`` as ``cluster``, ``range`` by a range partitioning on the
    partition and the table's sort order, each task's rows sorted the same way (the files claim no
    sort order, as Java's appends do).  ``row_lineage`` also writes the DataFrame's ``_row_id``
    and ``_last_updated_sequence_number`` columns with their reserved ids (rows copied from a v3
    table keep their lineage); without it the files carry none and new rows get ids at commit.
    ``columns``: the DataFrame's column names when the caller knows them (on Spark Connect
    ``df.columns`` is a round trip to the server).
    """
    t = load_table(spark, table)
    md = t.metadata
    settings = write_settings(md, spec_id=spec_id, properties=properties, row_lineage=row_lineage)
    columns = list(columns) if columns is not None else list(df.columns)
    check_columns(columns, settings)
    check_python_workers(spark)
    order = md.sort_order() if md.sort_order().fields else None
    cluster = cluster or distribution == HASH
    if distribution == RANGE and not sort:
        exprs = sort_expressions(df, settings, order)
        if exprs:
            df = df.repartitionByRange(*exprs).sortWithinPartitions(*exprs)
            columns = None
    elif (cluster or sort) and settings.spec.fields:
        exprs = partition_expressions(df, settings)
        if exprs:
            df = df.repartition(*exprs)
            columns = None
    if sort:
        exprs = sort_expressions(df, settings, order)
        if exprs:
            df = df.sortWithinPartitions(*exprs)
            columns = None
    if not sort and order is not None:
        # unsorted input must not claim the table's sort order
        settings = _replace_order(settings, 0)
    operation_id = str(_uuid.uuid4())
    written = WrittenFiles(t.io, settings.data_path)
    journal = written.journal

    def write_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        with journal.recording() as paths:
            files = write_in_task(journal.io_properties, settings, operation_id, batches)
            paths.extend(f.file_path for f in files)
            if files:
                yield files_batch(files)

    text = description or f"Write data files to {t.name}"
    with job_description(spark, text):
        return written.collect(map_in_arrow(df, write_task, struct_schema(f"{OUTPUT_COLUMN} binary"), columns))


#: the name of a write job's journal folder under the table's data path (not hidden: a journal left
#: by a killed driver is an unreferenced folder that remove_orphan_files collects, as Java's does)
JOURNAL_PREFIX = "write-journal-"
#: threads reading a job's journal entries (on an object store each is a round trip)
_JOURNAL_READERS = 8


@dataclasses.dataclass(frozen=True)
class TaskJournal:
    """The task side of :class:`WrittenFiles`: small and picklable, shipped inside the job's closure."""

    io_properties: dict[str, str]
    directory: str

    @contextlib.contextmanager
    def recording(self) -> Iterator[list[str]]:
        """A list for the task to extend with every path it writes.  If the block fails (the task
        fails or is killed), those files are deleted here; when it ends, their paths are recorded in
        the journal (one small file per task attempt) before the task can report success."""
        paths: list[str] = []
        try:
            yield paths
            if paths:
                partition_id, attempt_id = task_ids()
                entry = join_path(self.directory, f"{partition_id:05d}-{attempt_id}.json")
                with file_io(self.io_properties).new_output(entry).create(overwrite=True) as out:
                    out.write(json.dumps(paths).encode())
        except BaseException:
            delete_quietly(file_io(self.io_properties), paths)
            raise


class WrittenFiles:
    """The files a Spark write job's tasks wrote, as far as the driver can name them.

    Each task returns its files as rows of the job's output and deletes them itself when it fails.
    A task that finishes also records their paths in the job's journal (a file per task attempt under
    ``<data path>/write-journal-<uuid>/``, :class:`TaskJournal`), which the driver reads once the job
    is over: after a failed or cancelled job it deletes every recorded file (tasks that had finished
    before another one failed the job, whose rows never reached the driver), after a successful one
    the recorded files the job did not return (an attempt whose output Spark discarded); then the
    journal goes.  This is what a driver-side accumulator did, with the DataFrame API alone, so it
    works on Spark Connect.  A driver killed mid-job leaves the journal with the files it names; no
    metadata references either, so remove_orphan_files collects both.
    """

    def __init__(self, io: FileAccess, data_path: str) -> None:
        self.io = io
        self.journal = TaskJournal(dict(getattr(io, "properties", {}) or {}),
                                   join_path(data_path, f"{JOURNAL_PREFIX}{_uuid.uuid4()}"))

    def collect(self, written_df: Any, files_of: Callable[[Any], Iterable[DataFile]] | None = None) -> list[Any]:
        """Run the job (a DataFrame of one pickled object per row) and return the objects: the
        DataFiles of :func:`files_batch` rows, or what other rows hold when ``files_of`` says which
        files each object carries.

        If the job fails or is cancelled every recorded file is deleted; after success, recorded
        files that the job did not return are deleted."""
        try:
            rows = [pickle.loads(p) for p in collect_first_column(written_df)]
        except BaseException:
            self.settle(set())
            raise
        self.settle({f.file_path for row in rows for f in (files_of(row) if files_of is not None else (row,))})
        return rows

    def settle(self, keep: set[str]) -> None:
        """Delete the recorded files not in ``keep``, then the journal; failures are logged, not
        raised (the job's own outcome matters more, and what is left is collectable)."""
        try:
            entries = self._entries()
            if not entries:
                return
            if len(entries) == 1:
                recorded = self._read(entries[0])
            else:
                with ThreadPoolExecutor(min(_JOURNAL_READERS, len(entries)), "write-journal") as pool:
                    recorded = [p for paths in pool.map(self._read, entries) for p in paths]
        except Exception as e:  # noqa: BLE001 -- cleanup must not hide the job's own outcome
            log.warning("Could not read the journal %s of a write: %s", self.journal.directory, e)
            return
        delete_quietly(self.io, [p for p in recorded if p not in keep])
        delete_quietly(self.io, entries)
        try:
            self.io.remove_empty_dir(self.journal.directory)
        except Exception as e:  # noqa: BLE001 -- an empty folder left behind is harmless
            log.debug("Could not remove the journal folder %s: %s", self.journal.directory, e)

    def _entries(self) -> list[str]:
        return [info.path for info in self.io.list_prefix(self.journal.directory)]

    def _read(self, entry: str) -> list[str]:
        try:
            return [str(p) for p in json.loads(self.io.new_input(entry).read())]
        except ValueError:  # an entry cut short by a killed task names nothing readable
            return []


def write_payloads(spark: Any, io: FileAccess, payloads: Sequence[Any],
                   write_payload: Callable[[Any], Iterable[list[DataFile]]], *, data_path: str) -> list[DataFile]:
    """Run one Python task per payload (picklable) and return every file written.

    ``write_payload(payload)`` runs inside the task and yields lists of files as it closes them.
    If a task fails, the files it already yielded are deleted there; if the job fails,
    :class:`WrittenFiles` (journal under ``data_path``) deletes those of the tasks that had finished.
    """
    if not payloads:
        return []
    check_python_workers(spark)
    written = WrittenFiles(io, data_path)
    journal = written.journal

    def run(payload: Any) -> Iterator[list[DataFile]]:
        prepare_python_worker()
        with journal.recording() as paths:
            for files in write_payload(payload):
                paths.extend(f.file_path for f in files)
                yield from files

    return written.collect(map_slices(slices_frame(spark, payloads), run))


def delete_quietly(io: FileAccess, paths: Sequence[str]) -> None:
    """Delete uncommitted files, logging (not raising) a failure so the job's own error stays visible."""
    if not paths:
        return
    try:
        io.delete_many(list(paths))
    except Exception as e:  # noqa: BLE001 - cleanup must not hide the job's own error
        log.warning("Could not delete %d uncommitted file(s) of a failed write: %s", len(paths), e)


def write_settings(md: Any, *, spec_id: int | None = None, properties: dict[str, str] | None = None,
                   row_lineage: bool = False) -> WriteSettings:
    """The writer settings of a table, with ``properties`` overriding its write properties;
    ``row_lineage`` adds the two row-lineage columns to the written schema
    (:meth:`WriteSettings.with_row_lineage`)."""
    settings = WriteSettings.from_metadata(md, spec_id=spec_id)
    if properties:
        merged = {**settings.properties, **properties}
        settings = WriteSettings.from_metadata(_with_properties(md, merged), spec_id=spec_id)
    return settings.with_row_lineage() if row_lineage else settings


def write_in_task(io_props: dict[str, str], settings: WriteSettings, operation_id: str,
                  batches: Iterable[pa.RecordBatch]) -> list[DataFile]:
    """Write Arrow batches as data files from inside a Spark task (file names carry the task's
    partition and attempt ids); everything written is deleted if the task fails."""
    partition_id, task_id = task_ids()
    return write_data_files(file_io(io_props), settings, batches,
                            partition_id=partition_id, task_id=task_id, operation_id=operation_id)


def task_ids() -> tuple[int, int]:
    """(partition id, task attempt id) of the running Spark task, for unique file names; (0, 0)
    outside a task."""
    from pyspark import TaskContext  # noqa: PLC0415

    ctx = TaskContext.get()
    return (ctx.partitionId(), ctx.taskAttemptId()) if ctx is not None else (0, 0)


def files_batch(files: Sequence[DataFile]) -> pa.RecordBatch:
    """The task output row batch for written files (one pickled DataFile per row)."""
    payload = [pickle.dumps(f, protocol=pickle.HIGHEST_PROTOCOL) for f in files]
    return pa.RecordBatch.from_arrays([pa.array(payload, pa.binary())], names=[OUTPUT_COLUMN])


def _with_properties(md: Any, properties: dict[str, str]) -> Any:
    from dataclasses import replace  # noqa: PLC0415

    return replace(md, properties=properties)


def _replace_order(settings: WriteSettings, order_id: int) -> WriteSettings:
    from dataclasses import replace  # noqa: PLC0415

    return replace(settings, sort_order_id=order_id)


def check_writable(df: Any, settings: WriteSettings) -> None:
    """Refuse a DataFrame lacking a required column before any task starts."""
    check_columns(df.columns, settings)


def check_columns(columns: Sequence[str], settings: WriteSettings) -> None:
    """Refuse input columns lacking a required column of the table (names compared case-insensitively)."""
    names = {c.lower() for c in columns}
    missing = [f.name for f in settings.schema.fields if f.required and f.name.lower() not in names]
    if missing:
        raise ValidationError(f"Cannot write to the table: required column(s) {missing} are missing from the DataFrame")
