"""Spark 4's Python data source ``iceberg-procedures``: our tables through ``spark.read`` and ``df.write``.

After :func:`register_data_source` (``procedures.register_data_source(spark)``)::

    spark.read.format("iceberg-procedures").load("cat.db.t")
    spark.read.format("iceberg-procedures").option("snapshot-id", 123).load("cat.db.t")
    df.write.format("iceberg-procedures").mode("append").save("cat.db.t")      # or "overwrite"

Spark runs every method of a Python data source in a Python worker, never in the driver's own
Python process, so nothing here can reach the SparkSession.  Registration therefore captures what
the worker needs from the session (the ``spark.sql.catalog.*`` keys, the default catalog, case
sensitivity, the default parallelism) in a per-session subclass that Spark pickles by value.

Reading plans with :mod:`procedures.core.kernel.scan` when Spark plans the query: one Spark partition per
task group of :mod:`procedures.core.kernel.splits`, each read with :class:`procedures.spark.read.TaskReader`
(deletes and deletion vectors applied as in ``read_table``).  Spark hands pushed filters to
``pushFilters`` (Spark 4.1+): the ones we can translate prune manifests, files, Parquet row groups
(by their statistics) and the rows the reader can decide (:mod:`procedures.io.read_filters`); all
of them go back to Spark, which still applies them to the rows, since that pruning is inclusive.
Spark never pushes the selected columns to a Python data source (its scan builder lacks column
pushdown), so a read projects to the schema the reader is given: the table's, or a narrower one
given with ``spark.read.schema(...)``.

Writing: each Spark task writes Parquet data files with :func:`procedures.spark.write.write_in_task`
(target file size, partitioning, metrics as every other write) and returns their ``DataFile``\\s in
its commit message; ``commit`` appends them (``MergeAppend``, as Java's DataFrame append) or
replaces every row (``overwrite``: an overwrite by the filter ``true``, Java's truncate) through
:func:`procedures.core.kernel.transaction.commit` (optimistic concurrency and retries); ``abort`` deletes
the files of the tasks that finished, unless a commit whose outcome was unknown put them in the table.

The module imports on pyspark 3.5 (and with no pyspark at all); there the classes are inert and
:func:`register_data_source` raises :class:`procedures.errors.UnsupportedVersionError`.
"""

from __future__ import annotations

import datetime as dt
import inspect
import sys
import uuid as _uuid
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa

from procedures.catalog.base import Table
from procedures.catalog.config import (
    SPARK_PREFIX,
    catalog_properties,
    resolve_identifier,
)
from procedures.spark.catalog_conf import conf_from_spark, load_catalog
from procedures.core.kernel.operations import MergeAppend, OverwriteFiles
from procedures.core.kernel.scan import (
    DeleteFileIndex,
    EntryFilter,
    ScanManifests,
    delete_index,
    iter_file_scan_tasks,
    read_entries_on_driver,
    scan_manifests,
    select_snapshot,
    tasks_from_entries,
)
from procedures.core.kernel.summary import set_engine
from procedures.core.kernel.transaction import commit
from procedures.errors import CatalogConfigError, ExpressionError, UnsupportedVersionError, ValidationError
from procedures.io.fileio import FileIO
from procedures.io.parquet_writer import WriteSettings
from procedures.io.sandbox_fileio import file_io
from procedures.spark.dataframes import parallelism
from procedures.spark.read import TaskReader, as_of_ms, group_tasks, light_task, spark_schema, to_spark_arrow
from procedures.spark.scan_planning import reads_manifests_in_tasks
from procedures.spark.session import active_session
from procedures.spark.worker import prepare_python_worker
from procedures.spark.write import check_columns, delete_quietly, write_in_task, write_settings
from procedures.spec.expressions import (
    ALWAYS_TRUE,
    Expression,
    and_,
    bind,
    eq,
    gt,
    gt_eq,
    in_,
    is_null,
    lt,
    lt_eq,
    not_,
    not_null,
    starts_with,
    without_implied_not_null,
)
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile, ManifestFile
from procedures.spec.schema import Schema
from procedures.spec.snapshots import SPARK_APP_ID

try:
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceArrowWriter,
        DataSourceReader,
        InputPartition,
        WriterCommitMessage,
    )
except ImportError:  # pyspark < 4 (or none): the classes below stay inert, register_data_source refuses
    DataSource = DataSourceArrowWriter = DataSourceReader = InputPartition = WriterCommitMessage = object
    HAS_DATA_SOURCE_API = False
else:
    HAS_DATA_SOURCE_API = True
#: filter pushdown into Python data sources (pushFilters and its filter classes) came with pyspark 4.1;
#: on 4.0 the source reads without it
HAS_FILTER_PUSHDOWN = HAS_DATA_SOURCE_API and hasattr(sys.modules.get("pyspark.sql.datasource"), "EqualTo")

__all__ = [
    "FORMAT",
    "HAS_DATA_SOURCE_API",
    "HAS_FILTER_PUSHDOWN",
    "register_data_source",
    "IcebergDataSource",
    "IcebergReader",
    "IcebergWriter",
    "ScanPartition",
    "ManifestPartition",
    "WrittenFilesMessage",
    "translate_filter",
    "load_named_table",
    "READ_OPTIONS",
    "WRITE_OPTIONS",
    "spark_arrow_schema",
]

#: the format name of ``spark.read.format(...)`` / ``df.write.format(...)``
FORMAT = "iceberg-procedures"
#: read options, named as Iceberg Java's Spark read options
READ_OPTIONS = ("snapshot-id", "as-of-timestamp", "branch", "tag", "split-size", "file-open-cost",
                "planning-min-manifests")
#: write options, named as Iceberg Java's Spark write options (plus ``snapshot-property.<key>``)
WRITE_OPTIONS = ("target-file-size-bytes", "write-format")
SNAPSHOT_PROPERTY_PREFIX = "snapshot-property."
#: session keys copied at registration besides ``spark.sql.catalog.*``
SESSION_KEYS = ("spark.sql.defaultCatalog", "spark.sql.caseSensitive", "spark.sql.session.timeZone", "spark.app.id")
#: where the captured session settings keep the session's Spark version (snapshot summaries name it)
SPARK_VERSION_KEY = "procedures.sparkVersion"
#: where the captured session settings keep the session's parallelism (:func:`~procedures.spark.dataframes.parallelism`)
PARALLELISM_KEY = "procedures.defaultParallelism"
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


# ------------------------------------------------------------------------------ registration
def register_data_source(spark: Any = None) -> type:
    """Register the ``iceberg-procedures`` data source with ``spark`` (default: the active session)
    and return the registered class.

    The session's catalog configuration is captured now: after configuring another catalog,
    register again.  On Spark 4.1+ it also turns on ``spark.sql.python.filterPushdown.enabled``
    (filters prune files) unless the session set it to false, in which case filters are not pushed.
    On pyspark 3.5 it raises :class:`UnsupportedVersionError`: Python data sources need Spark 4.
    """
    if not HAS_DATA_SOURCE_API:
        raise UnsupportedVersionError(
            f"The {FORMAT} data source needs pyspark 4.0 or later (Python data sources), this is pyspark "
            f"{_pyspark_version()}: use procedures.read_table / procedures.spark.dml on Spark 3.5, or upgrade pyspark",
            component="pyspark", version=_pyspark_version(), supported=">=4.0",
        )
    spark = active_session(spark)
    conf = conf_from_spark(spark)
    pushdown = _pushdown_supported(spark.version) and str(conf.get(PUSHDOWN_CONF, "")).strip().lower() != "false"
    if pushdown:
        spark.conf.set(PUSHDOWN_CONF, "true")
    captured = {k: v for k, v in conf.items() if k.startswith(SPARK_PREFIX) or k in SESSION_KEYS}
    captured[PARALLELISM_KEY] = str(parallelism(spark))
    captured[SPARK_VERSION_KEY] = str(spark.version)
    # a class created here is not importable by name, so Spark's cloudpickle ships it by value,
    # with the captured settings, to the Python workers that plan, read and commit
    base = IcebergDataSource if pushdown else IcebergDataSourceNoPushdown
    source = type("IcebergProceduresDataSource", (base,), {"session_conf": captured, "__module__": __name__})
    spark.dataSource.register(source)
    return source


def _pyspark_version() -> str:
    try:
        import pyspark  # noqa: PLC0415 -- only to name the version in the error
    except ImportError:
        return "(not installed)"
    return str(pyspark.__version__)


def _pushdown_supported(version: str) -> bool:
    parts = [int(p) for p in version.split(".")[:2] if p.isdigit()]
    return tuple(parts) >= (4, 1)


# ------------------------------------------------------------------------------ options
def _int_option(options: Mapping[str, str], key: str) -> int | None:
    value = options.get(key)
    if value is None or str(value).strip() == "":
        return None
    try:
        return int(str(value).strip())
    except ValueError:
        raise ValidationError(f"Invalid {FORMAT} option {key}={value!r}: expected an integer") from None


def _as_of_option(options: Mapping[str, str]) -> int | None:
    value = options.get("as-of-timestamp")
    if value is None or str(value).strip() == "":
        return None
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return as_of_ms(text)
    except ValueError:
        raise ValidationError(
            f"Invalid {FORMAT} option as-of-timestamp={value!r}: expected epoch milliseconds or an ISO timestamp"
        ) from None


def _ref_option(options: Mapping[str, str]) -> str | None:
    branch, tag = options.get("branch"), options.get("tag")
    if branch and tag:
        raise ValidationError(f"Cannot set both branch={branch!r} and tag={tag!r} on a {FORMAT} read: choose one")
    return branch or tag or None


def _table_name(options: Mapping[str, str]) -> str:
    path = options.get("path")
    if not path or not str(path).strip():
        raise ValidationError(
            f"No table given to the {FORMAT} data source: use load(\"<catalog>.<db>.<table>\") or "
            "save(\"<catalog>.<db>.<table>\")"
        )
    return str(path).strip()


def load_named_table(options: Mapping[str, str], session_conf: Mapping[str, str]) -> Table:
    """The table the ``path`` option names (``cat.db.t``, or ``db.t`` in the default catalog),
    opened through our catalogs with the captured session configuration."""
    catalog_name, ident = resolve_identifier(_table_name(options), conf=session_conf)
    props, _ = catalog_properties(catalog_name, session_conf)
    if str(props.get("type", "")).strip().lower() == "hive" or str(props.get("catalog-impl", "")).endswith("HiveCatalog"):
        raise CatalogConfigError(
            f"Catalog {catalog_name} is a hive catalog, which reaches its metastore through the session's JVM; "
            f"the {FORMAT} data source runs in Python workers without it. Use procedures.read_table and "
            "procedures.spark.dml for tables of hive catalogs"
        )
    return load_catalog(catalog_name, session_conf).load_table(ident)


# ------------------------------------------------------------------------------ the source
class IcebergDataSource(DataSource):
    """Our tables as a Spark data source; ``options["path"]`` names the table (``cat.db.t``)."""

    #: the session settings captured by :func:`register_data_source` (set on its subclass)
    session_conf: dict[str, str] = {}
    reader_class: type = None  # type: ignore[assignment]  # set below, once the readers exist

    @classmethod
    def name(cls) -> str:
        """The format name, ``iceberg-procedures``."""
        return FORMAT

    def load(self) -> Table:
        """The table named by the ``path`` option, through our catalog configured like the session's."""
        return load_named_table(self.options, self.session_conf)

    @property
    def case_sensitive(self) -> bool:
        """Spark's ``spark.sql.caseSensitive`` at registration (default false)."""
        return str(self.session_conf.get("spark.sql.caseSensitive", "false")).lower() == "true"

    def read_schema(self, table: Table) -> Schema:
        """The Iceberg schema a read sees: the snapshot's for ``snapshot-id`` / ``as-of-timestamp`` /
        ``tag``, else the table's current schema."""
        return select_snapshot(table.metadata, snapshot_id=_int_option(self.options, "snapshot-id"),
                               as_of_timestamp_ms=_as_of_option(self.options), ref=_ref_option(self.options)).schema

    def schema(self) -> Any:
        """The Spark schema of the table (see :func:`procedures.spark.read.spark_type`)."""
        return spark_schema(pa.schema([]), self.read_schema(self.load()).fields)

    def reader(self, schema: Any) -> "IcebergReader":
        """A reader of the columns of ``schema`` (the table's, or narrower one the user gave)."""
        return self.reader_class(self, schema)

    def writer(self, schema: Any, overwrite: bool) -> "IcebergWriter":
        """A writer appending ``schema``'s rows, or replacing every row when ``overwrite``."""
        return IcebergWriter(self, schema, overwrite)


@dataclass
class ScanPartition(InputPartition):
    """One Spark partition of a read: a group of light scan tasks."""

    tasks: list = field(default_factory=list)


@dataclass
class ManifestPartition(InputPartition):
    """One Spark partition of a read planned in its task: a contiguous group of the scan's data
    manifests, the filter for their entries and the scan's delete index (read on the planning worker)."""

    manifests: Sequence[ManifestFile]
    entry_filter: EntryFilter
    schema: Schema
    deletes: DeleteFileIndex

    def plan_tasks(self, io: FileAccess) -> Iterator[Any]:
        """The scan tasks of this partition's manifests, deletes attached, in manifest order."""
        plan = ScanManifests(schema=self.schema, entry_filter=self.entry_filter, delete_manifests=(),
                             data_manifests=self.manifests)
        return tasks_from_entries(plan, self.deletes, read_entries_on_driver(io, plan))


def _spark_names(schema: Any) -> list[str]:
    return [f.name for f in schema.fields]


class IcebergReaderBase(DataSourceReader):
    """Plans on the planning worker, reads in the tasks (see the module doc); no filter pushdown."""

    def __init__(self, source: IcebergDataSource, schema: Any) -> None:
        self.options = dict(source.options)
        self.session_conf = dict(source.session_conf)
        self.case_sensitive = source.case_sensitive
        table = source.load()
        md = table.metadata
        self.table_name = table.name
        selection = select_snapshot(md, snapshot_id=_int_option(self.options, "snapshot-id"),
                                    as_of_timestamp_ms=_as_of_option(self.options), ref=_ref_option(self.options))
        # the snapshot is pinned here: planning and every task read the same one
        self.snapshot_id = selection.snapshot.snapshot_id if selection.snapshot is not None else None
        self.scan_schema = scan_schema = selection.schema
        self.names = _spark_names(schema)
        missing = [n for n in self.names if scan_schema.find_field_or_none(n, self.case_sensitive) is None]
        if missing:
            raise ValidationError(
                f"Cannot read column(s) {missing} of {table.name}: not in its schema "
                f"({', '.join(f.name for f in scan_schema.fields)})"
            )
        self.projected = scan_schema.select(self.names, self.case_sensitive)
        # the projected top-level field of each output column, in the output order
        self.fields = [self.projected.find_field(n, self.case_sensitive) for n in self.names]
        self.spark_schema = schema
        self.task_reader = TaskReader.for_table(table, self.projected, scan_schema)
        self.filters: list[Expression] = []
        self._table: Table | None = table

    def __getstate__(self) -> dict:
        # the loaded table (metadata, catalog connection) stays on the planning worker
        state = dict(self.__dict__)
        state["_table"] = None
        return state

    def partitions(self) -> list[ScanPartition] | list[ManifestPartition]:
        """The scan planned with the pushed filters, cut and packed into read groups.

        Past ``planning-min-manifests`` data manifests after pruning (default: read_table's rule,
        :func:`~procedures.spark.scan_planning.reads_manifests_in_tasks`) the data manifests are read
        in the read tasks instead: one
        partition per contiguous group of manifests (four per core), each planning and reading its
        own files.  The planning worker then reads only the manifest list and the delete manifests,
        so planning is spread over the cluster as read_table's is -- a Python data source cannot
        start a Spark job of its own.  Partitions are then balanced by manifest, not by bytes.
        """
        if self.snapshot_id is None:
            return []  # a table without snapshots has no rows
        table = self._table
        if table is None:
            table = load_named_table(self.options, self.session_conf)
        md = table.metadata
        expr = and_(*self.filters) if self.filters else None
        plan = scan_manifests(md, table.io, snapshot_id=self.snapshot_id, filter=expr,
                              case_sensitive=self.case_sensitive)
        if plan is None:
            return []
        deletes = delete_index(table.io, plan)
        manifests = plan.data_manifests
        cores = int(self.session_conf.get(PARALLELISM_KEY, "1") or 1)
        threshold = _int_option(self.options, "planning-min-manifests")
        if threshold is not None and threshold < 1:
            raise ValidationError(f"Invalid {FORMAT} option planning-min-manifests={threshold}: expected at least 1")
        if (len(manifests) >= threshold) if threshold is not None else reads_manifests_in_tasks(manifests):
            slices = max(1, min(len(manifests), cores * 4))
            cuts = [len(manifests) * k // slices for k in range(slices + 1)]
            # slices of the manifest list's rows travel still encoded (a fifth of the objects' pickle)
            return [ManifestPartition(manifests[a:b], plan.entry_filter, plan.schema, deletes)
                    for a, b in zip(cuts, cuts[1:]) if b > a]
        tasks = [light_task(t) for t in tasks_from_entries(plan, deletes, read_entries_on_driver(table.io, plan))]
        groups = group_tasks(md, tasks, _int_option(self.options, "split-size"),
                             _int_option(self.options, "file-open-cost"), cores)
        return [ScanPartition(list(g)) for g in groups]

    def read(self, partition: Any) -> Iterator[pa.RecordBatch]:
        """The rows of one partition's tasks, deletes applied, as Arrow batches of the reader's schema."""
        prepare_python_worker()
        target = spark_arrow_schema(self.spark_schema)
        if isinstance(partition, ManifestPartition):
            tasks = partition.plan_tasks(file_io(self.task_reader.io_properties))
        else:
            # Spark reads one InputPartition(None) when planning returned none
            tasks = getattr(partition, "tasks", None) or []
        for batch in self.task_reader.batches(tasks):
            out = to_spark_arrow(batch, self.projected.fields)
            columns = [out.column(out.schema.get_field_index(f.name)) for f in self.fields]
            cast = [c if c.type == t.type else c.cast(t.type) for c, t in zip(columns, target)]
            yield pa.RecordBatch.from_arrays(cast, schema=target)


def spark_arrow_schema(schema: Any) -> pa.Schema:
    """Spark's own Arrow form of a Spark ``StructType``, timestamps with time zone in UTC.

    pyspark's ``to_arrow_schema`` changed its signature: up to 4.1 it takes ``timestamp_utc``
    (default True, UTC), from 4.2 a keyword-only ``timezone`` (default None, which it refuses for
    a timestamp column); the keyword is chosen from the installed function's signature.
    """
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415 -- Spark's own Arrow form

    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")
    if "timestamp_utc" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timestamp_utc=True)
    return to_arrow_schema(schema)


class IcebergReader(IcebergReaderBase):
    """:class:`IcebergReaderBase` with filter pushdown (Spark 4.1+)."""

    def pushFilters(self, filters: list) -> Iterator[Any]:
        """Keep the filters we can translate for file pruning; hand every filter back to Spark.

        A NOT NULL that another kept filter on its column implies (Spark infers one beside every
        comparison) is left out of the pruning: it rules out no other file, and testing it costs a
        fifth of the planning of a million files."""
        schema = self.scan_schema
        kept = []
        for f in filters:
            expr = translate_filter(f)
            if expr is not None:
                try:
                    bind(expr, schema, self.case_sensitive)
                except (ExpressionError, ValidationError, TypeError, ValueError):
                    expr = None
            if expr is not None:
                kept.append(expr)
        if kept:
            self.filters.extend(without_implied_not_null(kept))
            # Spark filters the rows again, so the read may skip those the filter rules out
            self.task_reader = replace(self.task_reader, filter_rows=True)
        # pruning is inclusive, not exact: Spark must still filter the rows
        yield from filters


class IcebergDataSourceNoPushdown(IcebergDataSource):
    """The source for sessions that set ``spark.sql.python.filterPushdown.enabled=false`` (or Spark 4.0):
    Spark refuses a reader with ``pushFilters`` there."""

    reader_class = IcebergReaderBase


IcebergDataSource.reader_class = IcebergReader


# ------------------------------------------------------------------------------ filters
def _value(v: Any) -> Any:
    # literals our expressions type unambiguously; others (arrays, structs, NaN) are not pushed
    if isinstance(v, (bool, int, str, Decimal, bytes, dt.date, dt.datetime, _uuid.UUID)):
        return v
    if isinstance(v, float) and v == v:
        return v
    raise ExpressionError(f"literal {v!r} is not pushed")


def translate_filter(f: Any) -> Expression | None:
    """Our expression for a Spark data source filter (``pyspark.sql.datasource.Filter``), or None
    when it has no exact counterpart (``StringEndsWith``, ``StringContains``, non-scalar values)."""
    kind = type(f).__name__
    try:
        if kind == "Not":
            inner = translate_filter(f.child)
            return not_(inner) if inner is not None else None
        name = ".".join(f.attribute)
        if kind == "IsNull":
            return is_null(name)
        if kind == "IsNotNull":
            return not_null(name)
        if kind == "EqualNullSafe":
            return is_null(name) if f.value is None else eq(name, _value(f.value))
        if kind == "In":
            values = [_value(v) for v in f.value if v is not None]
            return in_(name, values) if values else None
        if kind == "StringStartsWith":
            return starts_with(name, str(f.value))
        make = {"EqualTo": eq, "GreaterThan": gt, "GreaterThanOrEqual": gt_eq, "LessThan": lt,
                "LessThanOrEqual": lt_eq}.get(kind)
        if make is None or f.value is None:
            return None
        return make(name, _value(f.value))
    except (ExpressionError, AttributeError, TypeError):
        return None


# ------------------------------------------------------------------------------ writes
@dataclass
class WrittenFilesMessage(WriterCommitMessage):
    """A write task's commit message: the data files it wrote."""

    files: list = field(default_factory=list)


class IcebergWriter(DataSourceArrowWriter):
    """Writes data files in the tasks and commits them on the driver side (see the module doc)."""

    def __init__(self, source: IcebergDataSource, schema: Any, overwrite: bool) -> None:
        self.options = dict(source.options)
        self.session_conf = dict(source.session_conf)
        self.overwrite = overwrite
        table = source.load()
        md = table.metadata
        self.table_name = table.name
        fmt = str(self.options.get("write-format", "parquet") or "parquet").strip().lower()
        if fmt != "parquet":
            raise ValidationError(f"Cannot write {fmt!r} files to {table.name}: this package writes parquet only")
        overrides = {}
        target = _int_option(self.options, "target-file-size-bytes")
        if target is not None:
            overrides["write.target-file-size-bytes"] = str(target)
        self.settings: WriteSettings = write_settings(md, properties=overrides)
        check_columns(_spark_names(schema), self.settings)
        self.snapshot_properties = {k[len(SNAPSHOT_PROPERTY_PREFIX):]: str(v) for k, v in self.options.items()
                                    if k.lower().startswith(SNAPSHOT_PROPERTY_PREFIX)}
        self.io_properties = dict(getattr(table.io, "properties", {}) or {})
        self.operation_id = str(_uuid.uuid4())
        self.base_snapshot_id = md.current_snapshot_id

    def __repr__(self) -> str:  # storage secrets stay out of logs
        return f"IcebergWriter({self.table_name}, overwrite={self.overwrite})"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenFilesMessage:
        """Write one task's rows as data files (deleted again if the task fails)."""
        prepare_python_worker()
        return WrittenFilesMessage(write_in_task(self.io_properties, self.settings, self.operation_id, iterator))

    def commit(self, messages: Sequence[WrittenFilesMessage | None]) -> None:
        """Append the tasks' files, or replace every row with them, in one commit."""
        files: list[DataFile] = [f for m in messages if m is not None for f in m.files]
        table = load_named_table(self.options, self.session_conf)
        if self.overwrite:
            op = OverwriteFiles(add_files=files, row_filter=ALWAYS_TRUE, snapshot_properties=self.snapshot_properties)
        elif files:
            op = MergeAppend(files, snapshot_properties=self.snapshot_properties)
        else:
            return
        # the session is not reachable here: its version and application id were captured with
        # its conf when the source was registered
        app_id = self.session_conf.get("spark.app.id")
        set_engine("spark", self.session_conf.get(SPARK_VERSION_KEY, ""), app_id)
        if app_id:
            op.snapshot_properties.setdefault(SPARK_APP_ID, app_id)
        commit(table, [op])

    def abort(self, messages: Sequence[WrittenFilesMessage | None]) -> None:
        """Delete the files of the tasks that finished (a failed task deletes its own)."""
        paths = [f.file_path for m in messages if m is not None for f in m.files]
        if not paths:
            return
        try:
            committed = self._live_paths(paths)
        except Exception:  # noqa: BLE001 -- unsure whether a commit used them: keep the files
            return
        delete_quietly(FileIO(self.io_properties), [p for p in paths if p not in committed])

    def _live_paths(self, paths: Sequence[str]) -> set[str]:
        # Spark also aborts when commit raised; after an unknown commit outcome the files may be live
        table = load_named_table(self.options, self.session_conf)
        md = table.metadata
        if md.current_snapshot_id == self.base_snapshot_id:
            return set()
        wanted = set(paths)
        return {t.data_file.file_path for t in iter_file_scan_tasks(md, table.io)} & wanted
