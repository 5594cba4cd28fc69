"""The ``snapshot`` and ``migrate`` actions (procedures.md §3.12, §3.13; Iceberg Java 1.10's
``SnapshotTableSparkAction`` and ``MigrateTableSparkAction``) for Parquet, ORC and Avro tables of Spark's
session catalog, with one of our catalogs as the Iceberg side.

Both read the source through Spark SQL statements (``DESCRIBE TABLE EXTENDED``, ``SHOW
TBLPROPERTIES``, ``SHOW PARTITIONS``: schema, partition columns, location, provider, properties,
buckets; :mod:`procedures.spark.session_catalog`), so they run on classic and Spark Connect sessions
alike, build the new table's metadata (the source's schema, identity partitioning on its partition columns, the properties of :mod:`procedures.core.file_import.table_creation`, the name
mapping), read every source file's metrics as ``add_files`` does
(:func:`procedures.spark.engine.file_import_steps.import_data_files`), and create the table with its first
snapshot in one commit (:func:`procedures.catalog.base.staged_create`: a failed import writes no
metadata file).

* ``snapshot`` leaves the source as it is; the new table references its files in place, with
  ``gc.enabled=false`` so that no maintenance deletes them.
* ``migrate`` renames the source to the backup name (``ALTER TABLE ... RENAME TO``), creates the
  Iceberg table under the source's name at the source's location over the backup's files, and drops the backup (metastore entry only;
  the files are the Iceberg table's now) when asked.  Any failure removes what was created and
  renames the backup back.

Dry runs: ``snapshot`` handed a sandbox catalog (:func:`procedures.catalog.sandbox.sandboxed`) and
``migrate`` with ``MigrateParams.dry_run`` run every check and create the table on the sandbox: the
file count is the real run's, and nothing is written, created or renamed (migrate reads the source
where it is instead of renaming it first).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from procedures.catalog.base import delete_quietly, staged_create
from procedures.catalog.overlap import check_table_folders, check_table_location
from procedures.catalog.sandbox import sandboxed
from procedures.core.file_import import source_rules as core_add_files
from procedures.core.file_import import table_creation as core_migrate
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.snapshot_producer import snapshot_manifests
from procedures.core.kernel.transaction import commit
from procedures.errors import TableAlreadyExistsError, ValidationError
from procedures.spark.engine.file_import_steps import catalog_source, import_data_files, session_table
from procedures.spark.session import optional_job
from procedures.spark.session_catalog import rename_table, table_exists

__all__ = ["SnapshotParams", "MigrateParams", "snapshot_table", "migrate_table", "read_source"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SnapshotParams:
    """``snapshot``'s arguments (the target already resolved in the CALL's catalog)."""

    source: tuple[str, ...]
    location: str | None = None
    properties: Mapping[str, str] | None = None
    parallelism: int | None = None


@dataclass(frozen=True)
class MigrateParams:
    """``migrate``'s arguments."""

    source: tuple[str, ...]
    properties: Mapping[str, str] | None = None
    drop_backup: bool = False
    backup_table_name: str | None = None
    parallelism: int | None = None
    dry_run: bool = False


def read_source(spark: Any, parts: Sequence[str]) -> core_migrate.SourceTable:
    """The session-catalog table ``parts`` as :class:`~procedures.core.file_import.table_creation.SourceTable`
    (NoSuchTableError when missing), read through Spark SQL statements."""
    table = session_table(spark, parts)
    return core_migrate.SourceTable(
        database=table.database, name=table.name, provider=table.provider, location=table.location,
        schema_json=dict(table.schema_json), partition_columns=table.partition_columns,
        properties=dict(table.properties), bucketed=table.bucket_spec, table_type=table.table_type,
    )


def _checked_partitions(spark: Any, source: core_migrate.SourceTable) -> list[core_add_files.SourcePartition]:
    """The source's partitions; a partition in an unknown format is refused (UnsupportedFileFormatError)
    before anything changes."""
    return catalog_source(spark, (source.database, source.name)).partitions


def _check_parallelism(parallelism: int | None) -> int:
    if parallelism is not None and parallelism <= 0:
        raise ValidationError("Parallelism should be larger than 0")
    return parallelism or 1


def _create(spark: Any, catalog: Any, ident: tuple[str, ...], source: core_migrate.SourceTable,
            partitions: Sequence[core_add_files.SourcePartition], location: str, properties: dict[str, str],
            parallelism: int, what: str) -> Any:
    """Create ``ident`` in ``catalog`` over the source's files, with its first snapshot, in one commit."""
    schema = core_migrate.spark_schema(source.schema_json)
    md, _ = new_table_metadata(schema=schema, location=location,
                               spec=core_migrate.identity_spec(schema, source.partition_columns),
                               properties=core_migrate.table_properties(properties))
    name = ".".join((catalog.name, *ident))
    # refused before any footer is read (the catalog's create checks again, against what it sees then)
    check_table_folders(catalog, ident, md, action=f"{what} into table {'.'.join(ident)}")
    files = import_data_files(spark, catalog.io, md, md.spec(), partitions, parallelism,
                              f"{what}: read the footers of {{n}} file(s) of {source.qualified} for {name}")
    ops: list[Any] = []
    change = core_add_files.name_mapping_change(md)
    if change is not None:
        ops.append(change)
    ops.append(core_add_files.AddFiles(files, through_manifests=bool(source.partition_columns)))
    with optional_job(spark, f"{what}: create {name} over {len(files)} file(s) of {source.qualified}"):
        return commit(staged_create(catalog, ident, md), ops)


def _total_files(table: Any) -> int:
    snap = table.metadata.current_snapshot()
    return int(snap.summary.get("total-data-files", "0")) if snap is not None else 0


def snapshot_table(spark: Any, catalog: Any, ident: tuple[str, ...], params: SnapshotParams) -> int:
    """Create ``ident`` in ``catalog`` as a snapshot of the session-catalog table ``params.source``;
    returns ``imported_files_count``.  Nothing changes on any refusal."""
    parallelism = _check_parallelism(params.parallelism)
    source = read_source(spark, params.source)
    core_migrate.check_source(source)
    partitions = _checked_partitions(spark, source)
    if catalog.table_exists(ident):
        raise TableAlreadyExistsError(f"Cannot create table {'.'.join(ident)} as it already exists")
    location = params.location or catalog.default_table_location(ident)
    core_migrate.check_snapshot_location(location, source.location)
    props = core_migrate.snapshot_properties(source.properties, dict(params.properties or {}))
    table = _create(spark, catalog, ident, source, partitions, location, props, parallelism, "snapshot")
    count = _total_files(table)
    log.info("snapshot of %s as %s: %d file(s)", source.qualified, table.name, count)
    return count


# ------------------------------------------------------------------------------ migrate
def _remove_created(catalog: Any, ident: tuple[str, ...], location: str) -> None:
    """Drop a half-made Iceberg table: its metastore entry, its metadata files, and the folders it
    created when they hold nothing else."""
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


def _drop_backup(catalog: Any, db: str, backup: str) -> None:
    """Unregister the backup, keeping its files (they are the Iceberg table's data files now)."""
    try:
        catalog.client.drop_table(db, backup)
    except Exception as e:  # noqa: BLE001 -- Java only logs a failed drop of the backup
        log.error("cannot drop the backup table %s.%s after migrating: %s", db, backup, e)


def migrate_table(spark: Any, catalog: Any, params: MigrateParams) -> int:
    """Replace the session-catalog table ``params.source`` by an Iceberg table of ``catalog`` (a hive
    catalog on the same metastore) with the same name and location; returns ``migrated_files_count``."""
    parallelism = _check_parallelism(params.parallelism)
    if not hasattr(catalog, "client"):
        raise ValidationError(
            f"Cannot migrate into catalog {catalog.name}: migrate keeps the table's name in the Hive metastore, "
            "so the CALL's catalog must be a hive catalog on Spark's metastore")
    source = read_source(spark, params.source)
    core_migrate.check_source(source)
    partitions = _checked_partitions(spark, source)
    db, name = source.database, source.name
    backup = core_migrate.backup_name(name, params.backup_table_name)
    if table_exists(spark, db, backup):
        raise TableAlreadyExistsError(
            f"Cannot rename {source.qualified} as {db}.{backup} for backup. The backup table already exists.")
    ident = (db, name)
    props = core_migrate.migrate_properties(source.properties, dict(params.properties or {}))
    location = props.pop("location", None) or source.location
    # refused before the rename: the Iceberg table would share folders with another table
    check_table_location(catalog, ident, location, props, action=f"migrate into table {db}.{name}")
    if params.dry_run:
        planned = _create(spark, sandboxed(catalog), ident, source, partitions, location, props, parallelism, "migrate")
        return _total_files(planned)
    rename_table(spark, db, name, backup)
    try:
        partitions = _checked_partitions(spark, read_source(spark, (db, backup)))
        table = _create(spark, catalog, ident, source, partitions, location, props, parallelism, "migrate")
    except BaseException:
        log.error("migrate of %s failed; restoring the original table", source.qualified)
        try:
            _remove_created(catalog, ident, location)
        finally:
            try:
                rename_table(spark, db, backup, name)
            except Exception as e:  # noqa: BLE001 -- the original error is the one to raise
                log.error("cannot rename %s.%s back to %s; the backup is kept for manual recovery: %s",
                          db, backup, name, e)
        raise
    if params.drop_backup:
        _drop_backup(catalog, db, backup)
    count = _total_files(table)
    log.info("migrated %s to Iceberg: %d file(s)", source.qualified, count)
    return count
