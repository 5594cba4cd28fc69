"""The Spark steps of the ``file_import`` capability (:class:`FileImportSteps`, the Spark side of
:class:`procedures.core.file_import.file_import_engine.FileImportEngine`): the steps of ``add_files``,
``snapshot`` and ``migrate`` (:mod:`procedures.core.file_import.import_files`,
:mod:`procedures.core.file_import.session_import`), the latter's catalog work (overlap check, staged
create, removal of a half-made table) included, as core cannot reach the catalog layer.

* the source: for a path import (`` `parquet`.`/dir` ``) the ``k=v`` directories under the path;
  for a table of Spark's session catalog Spark SQL statements (``DESCRIBE TABLE EXTENDED``,
  ``SHOW PARTITIONS``: partition values, locations, serde/provider;
  :mod:`procedures.spark.session_catalog`), on classic and Spark Connect sessions;
* the files directly in each partition directory (hidden ``_``/``.`` files skipped,
  sub-directories ignored), each file's metrics read (Parquet and ORC footers, Avro record counts)
  on the driver for a few files and as a Spark job over the file list otherwise
  (:data:`DRIVER_MAX_FILES`; one task per slice of the list,
  :func:`procedures.spark.dataframes.run_slices`).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import unquote

from procedures.catalog.base import delete_quietly, split_dotted, staged_create
from procedures.catalog.overlap import check_table_folders
from procedures.core.file_import import source_rules as core_add_files
from procedures.core.file_import.file_import_engine import ImportSource
from procedures.core.file_import.table_creation import SourceTable
from procedures.core.kernel.paths import local_path
from procedures.core.kernel.snapshot_producer import snapshot_manifests
from procedures.errors import NotFoundError, ValidationError
from procedures.io.fileio import FileIO
from procedures.io.data_import import ImportTarget, imported_data_file
from procedures.io.sandbox_fileio import file_io
from procedures.io.parquet_writer import MetricsConfig
from procedures.spark.dataframes import parallelism as session_parallelism
from procedures.spark.dataframes import run_slices
from procedures.spark.environment import check_python_workers
from procedures.spark.session import optional_job
from procedures.spark.session_catalog import SessionTable, describe_table, list_partitions, rename_table, table_exists
from procedures.spark.sql_quoting import quote_name
from procedures.spark.worker import prepare_python_worker
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile

__all__ = ["FileImportSteps", "catalog_source", "session_table", "import_data_files", "DRIVER_MAX_FILES"]

#: up to this many files the footers are read on the driver; more run as a Spark job
DRIVER_MAX_FILES = 16


# ------------------------------------------------------------------------------ path imports
def _qualified(path: str) -> str:
    """A path spelled as Hadoop spells it: local paths as ``file:/abs``."""
    local = local_path(path)
    if local is not None:
        return "file:" + os.path.abspath(local)
    return path.rstrip("/")


def _hidden(name: str) -> bool:
    return name.startswith("_") or name.startswith(".")


def _path_source(io: FileIO, fmt: str, path: str) -> ImportSource:
    """Partitions of a directory of files, discovered from ``k=v`` sub-directories as Spark does.
    A path naming one file is an unpartitioned source of that file, as Java's listing of a file
    is the file itself."""
    root = _qualified(path)
    if not io.is_dir(root):
        if not io.exists(root):
            raise NotFoundError(f"Unable to list files in partition: {path} (no such file or directory)")
        return ImportSource(f"{quote_name(fmt)}.{quote_name(path)}", (), [core_add_files.SourcePartition((), root, fmt)], True, False)
    leaves: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    queue: list[tuple[str, tuple[tuple[str, str], ...]]] = [(root, ())]
    while queue:
        directory, values = queue.pop(0)
        has_files = False
        for name, is_dir in io.list_dir(directory):
            if _hidden(name):
                continue
            if not is_dir:
                has_files = True
                continue
            key, eq, value = name.partition("=")
            if not eq or not key:
                raise ValidationError(
                    f"Cannot add files from {path}: directory {directory}/{name} is not a partition directory (name=value)"
                )
            queue.append((f"{directory}/{name}", values + ((unquote(key), unquote(value)),)))
        if has_files:
            leaves.append((directory, values))
    layouts = {tuple(k for k, _ in values) for _, values in leaves}
    if len(layouts) > 1:
        listed = "\n\t".join(f"Partition column name list #{i}: {', '.join(c)}" for i, c in enumerate(sorted(layouts)))
        raise ValidationError(f"Conflicting partition column names detected:\n\t{listed}")
    columns = next(iter(layouts)) if layouts else ()
    partitions = [core_add_files.SourcePartition(values, directory, fmt) for directory, values in leaves]
    return ImportSource(f"{quote_name(fmt)}.{quote_name(path)}", tuple(columns), partitions, True, bool(columns))


# ------------------------------------------------------------------------------ catalog tables
def session_table(spark: Any, parts: Sequence[str], *, full: bool = True) -> SessionTable:
    """A table of Spark's session catalog, read through Spark SQL statements
    (:func:`procedures.spark.session_catalog.describe_table`; ``full=False``: without properties and
    schema).  A ``spark_catalog`` prefix is dropped; without a database the current one is used."""
    return describe_table(spark, parts, full=full)


def catalog_source(spark: Any, parts: Sequence[str]) -> ImportSource:
    """A table of Spark's session catalog (Hive or data-source table), read through Spark SQL
    statements: partition columns, each partition's values and location, the serde/provider."""
    table = session_table(spark, parts, full=False)
    table_format = table.serde or table.provider
    description = f"{table.database}.{table.name}"
    if table_format is None:
        raise ValidationError(f"Could not determine table format of {description}")
    columns = table.partition_columns
    if not columns:
        location = _qualified(table.location or "")
        return ImportSource(description, (), [core_add_files.SourcePartition((), location, core_add_files.file_format(table_format))], False, False)
    partitions = []
    for p in list_partitions(spark, table):
        values = dict(p.values)
        if p.location is None:
            raise ValidationError(f"Partition URI should be defined ({description} {values})")
        ordered = tuple((c, values.get(c)) for c in columns)
        partitions.append(core_add_files.SourcePartition(ordered, _qualified(p.location), core_add_files.file_format(p.serde or table_format)))
    return ImportSource(description, columns, partitions, False, True)


# ------------------------------------------------------------------------------ footers
def _list_partition(io: FileIO, partition: core_add_files.SourcePartition) -> list[str]:
    """Files directly in a partition directory, hidden ones skipped (not recursive); a partition
    location naming a file lists that file (Hadoop's ``listStatus`` of a file, hidden-file filter
    included)."""
    if not io.is_dir(partition.location):
        if io.exists(partition.location):
            name = partition.location.rstrip("/").rsplit("/", 1)[-1]
            return [] if _hidden(name) else [partition.location]
        raise NotFoundError(f"Unable to list files in partition: {partition.location} (no such directory)")
    return [f"{partition.location}/{name}" for name, is_dir in io.list_dir(partition.location)
            if not is_dir and not _hidden(name)]


#: one file to describe: (path, spec id, partition tuple, file format)
ImportItem = tuple[str, int, tuple, str]


def _describe_on_driver(io: FileIO, target: ImportTarget, items: list[ImportItem], parallelism: int) -> list[DataFile]:
    def one(item: ImportItem) -> DataFile:
        path, spec_id, partition, fmt = item
        return imported_data_file(io, path, io.new_input(path).size(), target, spec_id, partition, fmt)

    if parallelism <= 1 or len(items) <= 1:
        return [one(i) for i in items]
    with ThreadPoolExecutor(max_workers=parallelism) as pool:
        return list(pool.map(one, items))


def _slices(items: list[ImportItem], n: int) -> list[tuple[int, list[ImportItem]]]:
    """``items`` in ``n`` contiguous slices of near-equal size (as ``parallelize`` cuts a list),
    each with the position of its first item."""
    bounds = [i * len(items) // n for i in range(n + 1)]
    return [(bounds[i], items[bounds[i]:bounds[i + 1]]) for i in range(n)]


def _describe_in_spark(spark: Any, target: ImportTarget, items: list[ImportItem], parallelism: int) -> list[DataFile]:
    check_python_workers(spark)
    n = max(1, min(len(items), session_parallelism(spark) * 2))

    def read(part: tuple[int, list[ImportItem]]) -> Iterator[tuple[int, list[DataFile]]]:
        prepare_python_worker()
        io = file_io(dict(target.io_properties))
        yield part[0], _describe_on_driver(io, target, part[1], parallelism)

    # slices come back in any order: put the files back in the listing's order
    return [f for _, files in sorted(run_slices(spark, _slices(items, n), read), key=lambda r: r[0]) for f in files]


def import_data_files(spark: Any, io: FileIO, md: Any, spec: Any, partitions: Sequence[core_add_files.SourcePartition],
                      parallelism: int, job: str) -> list[DataFile]:
    """The ``DataFile`` of every file directly in ``partitions`` for a table with metadata ``md``
    under ``spec``: footers read on the driver for a few files, as a Spark job (description ``job``,
    ``{n}`` the file count) for more.  Each file is read as its partition's format says (Parquet
    and ORC footers, Avro block headers; :mod:`procedures.io.data_import`)."""
    items = []
    for p in partitions:
        values = core_add_files.partition_tuple(spec, md, p.as_dict())
        items.extend((path, spec.spec_id, values, p.file_format) for path in _list_partition(io, p))
    target = ImportTarget(
        schema=md.schema(), mapping=core_add_files.table_name_mapping(md),
        metrics=MetricsConfig.from_properties(dict(md.properties), md.schema()),
        io_properties=dict(io.properties),
    )
    if spark is not None and len(items) > DRIVER_MAX_FILES:
        with optional_job(spark, job.replace("{n}", str(len(items)))):
            return _describe_in_spark(spark, target, items, parallelism)
    return _describe_on_driver(io, target, items, parallelism)


# ------------------------------------------------------------------------------ the action
def _resolve_source(spark: Any, io: FileIO, text: str) -> ImportSource:
    if text is None or not str(text).strip():
        raise ValidationError("Cannot handle an empty identifier for parameter 'source_table'")
    try:
        parts = split_dotted(text.strip())
    except ValidationError:
        raise ValidationError(f"Cannot parse identifier for parameter 'source_table': {text}") from None
    fmt = core_add_files.source_kind(parts)
    if fmt is not None:
        return _path_source(io, fmt, parts[1])
    return catalog_source(spark, parts)


def _remove_created(catalog: Any, ident: tuple[str, ...], location: str) -> None:
    io = catalog.io
    if catalog.table_exists(ident):
        table = catalog.load_table(ident)
        snap = table.metadata.current_snapshot()
        written = [table.metadata_location]
        if snap is not None:
            written.append(snap.manifest_list)
            written.extend(m.manifest_path for m in snapshot_manifests(io, snap))
        catalog.drop_table(ident)
        delete_quietly(io, written)
    for folder in (f"{location.rstrip('/')}/metadata", location.rstrip("/")):
        if io.is_dir(folder) and not io.list_dir(folder):
            io.delete_dir(folder)


class FileImportSteps:
    """:class:`~procedures.core.file_import.file_import_engine.FileImportEngine` on ``self.spark`` (None: a path
    import read on the driver)."""

    spark: Any
    #: the engine's commit (:meth:`procedures.spark.engine.spark_engine.SparkEngine.commit`)
    commit: Callable[[Any, Sequence[Any]], Any]

    def resolve_import_source(self, io: FileAccess, text: str) -> ImportSource:
        """A path import walked through ``io``, or a session-catalog table read through Spark SQL."""
        return _resolve_source(self.spark, io, text)

    def read_data_files(self, io: FileAccess, md: Any, spec: Any, partitions: Sequence[core_add_files.SourcePartition],
                        parallelism: int, job: str) -> list[DataFile]:
        """Footers read on the driver for a few files, as a Spark job for more."""
        return import_data_files(self.spark, io, md, spec, partitions, parallelism, job)

    def describe_session_table(self, parts: Sequence[str]) -> SourceTable:
        """Read through Spark SQL statements (``DESCRIBE TABLE EXTENDED``, ``SHOW TBLPROPERTIES``)."""
        table = session_table(self.spark, parts)
        return SourceTable(
            database=table.database, name=table.name, provider=table.provider, location=table.location,
            schema_json=dict(table.schema_json), partition_columns=table.partition_columns,
            properties=dict(table.properties), bucketed=table.bucket_spec, table_type=table.table_type,
        )

    def session_table_partitions(self, database: str, name: str) -> list[core_add_files.SourcePartition]:
        """Read through ``SHOW PARTITIONS`` and ``DESCRIBE``."""
        return catalog_source(self.spark, (database, name)).partitions

    def session_table_exists(self, database: str, name: str) -> bool:
        """Through ``spark.catalog.tableExists``."""
        return table_exists(self.spark, database, name)

    def rename_session_table(self, database: str, name: str, new_name: str) -> None:
        """``ALTER TABLE ... RENAME TO``."""
        rename_table(self.spark, database, name, new_name)

    def check_new_table(self, catalog: Any, ident: tuple[str, ...], md: Any, action: str) -> None:
        """Against the folders of every table ``catalog`` lists (:mod:`procedures.catalog.overlap`)."""
        check_table_folders(catalog, ident, md, action=action)

    def create_table(self, catalog: Any, ident: tuple[str, ...], md: Any, operations: Sequence[Any]) -> Any:
        """A staged create (:func:`procedures.catalog.base.staged_create`) committed through the engine's commit."""
        return self.commit(staged_create(catalog, ident, md), operations)

    def remove_created_table(self, catalog: Any, ident: tuple[str, ...], location: str) -> None:
        """The catalog entry dropped, then the files the create wrote and its empty folders deleted."""
        _remove_created(catalog, ident, location)
