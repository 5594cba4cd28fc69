"""``snapshot`` and ``migrate`` as capabilities (procedures.md §3.12, §3.13; Iceberg Java 1.10's
``SnapshotTableSparkAction`` and ``MigrateTableSparkAction``): :class:`SnapshotParams` /
:class:`MigrateParams` -> :func:`plan_snapshot` / :func:`plan_migrate` -> :func:`execute_snapshot` /
:func:`execute_migrate` on a :class:`~procedures.core.file_import.file_import_engine.FileImportEngine`.

Both turn a Parquet, ORC or Avro table of the engine's session catalog into an Iceberg table of
one of our catalogs.  There is no Iceberg table before the run, so the action runs on a
:class:`NewTable` (where the table is created; its ``metadata`` is None) and the capability's
``plan`` checks the arguments alone.  Once the engine has described the source, the pure
:func:`creation_plan` turns that description into the new table's metadata and the partitions whose
files are imported.  Then the engine steps do the work: describe the session table, rename it
(migrate), read every source file's metrics as ``add_files`` does, and create the table with its
first snapshot in one commit (a failed import writes no metadata file).

* ``snapshot`` leaves the source as it is; the new table references its files in place, with
  ``gc.enabled=false`` so that no maintenance deletes them.
* ``migrate`` renames the source to the backup name, creates the Iceberg table under the source's
  name at the source's location over the backup's files, and drops the backup (metastore entry
  only; the files are the Iceberg table's now) when asked.  Any failure removes what was created
  and renames the backup back.

Dry runs: ``snapshot`` given a sandbox catalog, and ``migrate`` with ``MigrateParams.dry_run``
(whose :class:`NewTable` creates in a sandbox), run every check and create the table in the
sandbox: the file count is the real run's, and nothing is written, created or renamed (migrate
reads the source where it is instead of renaming it first).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from procedures.core.file_import import source_rules, table_creation
from procedures.core.file_import.file_import_engine import FileImportEngine
from procedures.core.file_import.source_rules import SourcePartition
from procedures.core.file_import.table_creation import SourceTable
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.capability import Capability
from procedures.errors import TableAlreadyExistsError, ValidationError
from procedures.spec.metadata import TableMetadata

__all__ = [
    "NewTable",
    "SnapshotParams",
    "MigrateParams",
    "SessionImportPlan",
    "CreationPlan",
    "SessionImportResult",
    "creation_plan",
    "plan_snapshot",
    "plan_migrate",
    "execute_snapshot",
    "execute_migrate",
    "SNAPSHOT",
    "MIGRATE",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NewTable:
    """What ``snapshot`` and ``migrate`` run on in place of a table: the catalog the checks read
    (``catalog``), the one the table is created in (``create_in``: the catalog, or a sandbox over
    it in a dry run; default ``catalog``) and the new table's identifier (None: the source's, as
    for migrate).  ``metadata`` is None: the table does not exist yet."""

    catalog: Any
    identifier: tuple[str, ...] | None = None
    create_in: Any = None
    metadata: None = field(default=None, init=False)

    @property
    def target_catalog(self) -> Any:
        """The catalog the table is created in."""
        return self.catalog if self.create_in is None else self.create_in


@dataclass(frozen=True)
class SnapshotParams:
    """``snapshot``'s arguments (the target is the :class:`NewTable`'s identifier)."""

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


@dataclass(frozen=True)
class SessionImportPlan:
    """The checked arguments of a snapshot or a migrate."""

    params: Any
    parallelism: int


@dataclass(frozen=True)
class CreationPlan:
    """The new table: its metadata and the source partitions whose files it takes."""

    metadata: TableMetadata
    partitions: tuple[SourcePartition, ...]


@dataclass(frozen=True)
class SessionImportResult:
    """The output row: the new table's data files (``total-data-files``)."""

    count: int

    def row(self) -> tuple:
        """The procedure's output row."""
        return (self.count,)


def _check_parallelism(parallelism: int | None) -> int:
    if parallelism is not None and parallelism <= 0:
        raise ValidationError("Parallelism should be larger than 0")
    return parallelism or 1


def plan_snapshot(metadata: None, params: SnapshotParams) -> SessionImportPlan:
    """Check ``snapshot``'s arguments (there is no table yet: ``metadata`` is None)."""
    return SessionImportPlan(params, _check_parallelism(params.parallelism))


def plan_migrate(metadata: None, params: MigrateParams) -> SessionImportPlan:
    """Check ``migrate``'s arguments (there is no table yet: ``metadata`` is None)."""
    return SessionImportPlan(params, _check_parallelism(params.parallelism))


def creation_plan(source: SourceTable, partitions: Sequence[SourcePartition], location: str,
                  properties: Mapping[str, str]) -> CreationPlan:
    """The new table made from the description of ``source``: its schema, identity partitioning on
    its partition columns, at ``location`` with ``properties`` (reserved keys dropped, Java's
    creation defaults added); it takes the files of ``partitions``."""
    schema = table_creation.spark_schema(source.schema_json)
    md, _ = new_table_metadata(schema=schema, location=location,
                               spec=table_creation.identity_spec(schema, source.partition_columns),
                               properties=table_creation.table_properties(properties))
    return CreationPlan(md, tuple(partitions))


def _create(engine: FileImportEngine, catalog: Any, ident: tuple[str, ...], source: SourceTable,
            creation: CreationPlan, parallelism: int, what: str, *, checked: bool = False) -> Any:
    """Create ``ident`` in ``catalog`` over the files of ``creation``, with its first snapshot, in one
    commit.  ``checked``: the caller already ran the overlap check on this metadata."""
    md = creation.metadata
    name = ".".join((catalog.name, *ident))
    if not checked:
        # refused before any footer is read (the catalog's create checks again, against what it sees then)
        engine.check_new_table(catalog, ident, md, f"{what} into table {'.'.join(ident)}")
    files = engine.read_data_files(catalog.io, md, md.spec(), creation.partitions, parallelism,
                                   f"{what}: read the footers of {{n}} file(s) of {source.qualified} for {name}")
    ops: list[Any] = []
    change = source_rules.name_mapping_change(md)
    if change is not None:
        ops.append(change)
    ops.append(source_rules.AddFiles(files, through_manifests=bool(source.partition_columns)))
    with engine.job(f"{what}: create {name} over {len(files)} file(s) of {source.qualified}"):
        return engine.create_table(catalog, ident, md, ops)


def _total_files(table: Any) -> int:
    snap = table.metadata.current_snapshot()
    return int(snap.summary.get("total-data-files", "0")) if snap is not None else 0


def _described(engine: FileImportEngine, parts: Sequence[str]) -> tuple[SourceTable, list[SourcePartition]]:
    """The source checked, with its partitions; a partition in an unknown format is refused
    (UnsupportedFileFormatError) before anything changes."""
    source = engine.describe_session_table(parts)
    table_creation.check_source(source)
    return source, engine.session_table_partitions(source.database, source.name)


def execute_snapshot(table: NewTable, plan: SessionImportPlan, engine: FileImportEngine) -> SessionImportResult:
    """Create ``table`` (a :class:`NewTable`) as a snapshot of the session-catalog table
    ``params.source``.  Nothing changes on any refusal."""
    params = plan.params
    catalog, ident = table.target_catalog, tuple(table.identifier or ())
    source, partitions = _described(engine, params.source)
    if catalog.table_exists(ident):
        raise TableAlreadyExistsError(f"Cannot create table {'.'.join(ident)} as it already exists")
    location = params.location or catalog.default_table_location(ident)
    table_creation.check_snapshot_location(location, source.location)
    props = table_creation.snapshot_properties(source.properties, dict(params.properties or {}))
    creation = creation_plan(source, partitions, location, props)
    created = _create(engine, catalog, ident, source, creation, plan.parallelism, "snapshot")
    count = _total_files(created)
    log.info("snapshot of %s as %s: %d file(s)", source.qualified, created.name, count)
    return SessionImportResult(count)


def execute_migrate(table: NewTable, plan: SessionImportPlan, engine: FileImportEngine) -> SessionImportResult:
    """Replace the session-catalog table ``params.source`` by an Iceberg table of ``table.catalog``
    (a hive catalog on the same metastore) with the same name and location (``table`` is a
    :class:`NewTable` without identifier)."""
    params: MigrateParams = plan.params
    catalog = table.catalog
    if not hasattr(catalog, "client"):
        raise ValidationError(
            f"Cannot migrate into catalog {catalog.name}: migrate keeps the table's name in the Hive metastore, "
            "so the CALL's catalog must be a hive catalog on Spark's metastore")
    source, partitions = _described(engine, params.source)
    db, name = source.database, source.name
    backup = table_creation.backup_name(name, params.backup_table_name)
    if engine.session_table_exists(db, backup):
        raise TableAlreadyExistsError(
            f"Cannot rename {source.qualified} as {db}.{backup} for backup. The backup table already exists.")
    ident = (db, name)
    props = table_creation.migrate_properties(source.properties, dict(params.properties or {}))
    location = props.pop("location", None) or source.location
    creation = creation_plan(source, partitions, location, props)
    # refused before the rename: the Iceberg table would share folders with another table.  Once is
    # enough before the footers (the metadata's folders are the same after the rename, and the
    # catalog's create checks again at commit): each check reads every table of the metastore
    engine.check_new_table(catalog, ident, creation.metadata, f"migrate into table {db}.{name}")
    if params.dry_run:
        planned = _create(engine, table.target_catalog, ident, source, creation, plan.parallelism, "migrate",
                          checked=True)
        return SessionImportResult(_total_files(planned))
    engine.rename_session_table(db, name, backup)
    try:
        moved = creation_plan(source, engine.session_table_partitions(db, backup), location, props)
        created = _create(engine, catalog, ident, source, moved, plan.parallelism, "migrate", checked=True)
    except BaseException:
        log.error("migrate of %s failed; restoring the original table", source.qualified)
        try:
            engine.remove_created_table(catalog, ident, location)
        finally:
            try:
                engine.rename_session_table(db, backup, name)
            except Exception as e:  # noqa: BLE001 -- the original error is the one to raise
                log.error("cannot rename %s.%s back to %s; the backup is kept for manual recovery: %s",
                          db, backup, name, e)
        raise
    if params.drop_backup:
        _drop_backup(catalog, db, backup)
    count = _total_files(created)
    log.info("migrated %s to Iceberg: %d file(s)", source.qualified, count)
    return SessionImportResult(count)


def _drop_backup(catalog: Any, db: str, backup: str) -> None:
    """Unregister the backup, keeping its files (they are the Iceberg table's data files now)."""
    try:
        catalog.client.drop_table(db, backup)
    except Exception as e:  # noqa: BLE001 -- Java only logs a failed drop of the backup
        log.error("cannot drop the backup table %s.%s after migrating: %s", db, backup, e)


#: the capabilities as the Spark action runs them (on a :class:`NewTable`)
SNAPSHOT: Capability[SnapshotParams, SessionImportPlan, SessionImportResult] = Capability(
    "snapshot", plan_snapshot, execute_snapshot)
MIGRATE: Capability[MigrateParams, SessionImportPlan, SessionImportResult] = Capability(
    "migrate", plan_migrate, execute_migrate)
