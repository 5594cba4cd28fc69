"""The Hive metastore catalog of Iceberg Java (``HiveCatalog``), configured as ``type=hive``.

A namespace is a Hive database; an Iceberg table is a Hive ``EXTERNAL_TABLE`` whose parameters say
``table_type=ICEBERG`` and hold ``metadata_location`` (and, after the first commit,
``previous_metadata_location``), exactly as Iceberg Java registers it, so Java and this package see
each other's tables and commits.  Tables of other types in the same database (plain Parquet/ORC Hive
tables) are listed by Hive but are not Iceberg tables here.

The metastore is reached through a :class:`MetastoreClient`.  :class:`JvmMetastoreClient` uses the
Hive client classes that Spark ships, through a Spark session's JVM: with a ``uri`` (``thrift://...``)
it talks to that metastore server, without one it opens the session's own metastore (Spark's embedded
Derby when ``spark.sql.catalogImplementation=hive``).

The commit swaps ``metadata_location`` only if it still names the base metadata:

* on a metastore whose database the session opens itself (embedded Derby), as one database
  transaction: ``UPDATE TABLE_PARAMS ... WHERE PARAM_VALUE = <base>`` -- one updated row means the
  swap happened, none that another writer moved the pointer first;
* on a metastore server, under the metastore's exclusive table lock (as Iceberg Java does by
  default): check, then alter, then unlock.  A server without lock support (no transaction tables)
  refuses the commit unless ``lock-enabled=false`` (Java's ``iceberg.engine.hive.lock-enabled``)
  accepts an unguarded check-then-alter.
"""

from __future__ import annotations

import getpass
import json
import logging
import socket
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Protocol

from procedures.catalog.base import (
    Catalog,
    Identifier,
    IdentifierLike,
    NamespacePropertiesUpdate,
    Table,
    delete_removed_metadata_files,
    delete_quietly,
    metadata_file_bytes,
    next_metadata_location,
    parse_identifier,
    parse_namespace,
    plan_table_purge,
    purge_table_files,
)
from procedures.catalog.overlap import check_commit_folders, check_table_folders
from procedures.core.properties import HIVE_LOCK_ENABLED
from procedures.errors import (
    CatalogConfigError,
    CommitFailedError,
    CommitStateUnknownError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationError,
)
from procedures.io.fileio import FileIO, join_path
from procedures.spec.metadata import read_table_metadata
from procedures.spec.partitioning import spec_to_json
from procedures.spec.schema import schema_to_json
from procedures.spec.types import ListType, MapType, StructType

__all__ = ["HiveCatalog", "HiveTable", "HiveDatabase", "MetastoreClient", "JvmMetastoreClient",
           "ICEBERG_TABLE_TYPE", "hive_type"]

log = logging.getLogger(__name__)

ICEBERG_TABLE_TYPE = "ICEBERG"
TABLE_TYPE = "table_type"
METADATA_LOCATION = "metadata_location"
PREVIOUS_METADATA_LOCATION = "previous_metadata_location"
#: Java's limit on one summary parameter (``iceberg.hive.table-property-max-size``)
MAX_PARAMETER_SIZE = 32672
LOCK_WAIT_S = 180.0


@dataclass(frozen=True)
class HiveDatabase:
    """A Hive database: name, location and parameters."""

    name: str
    location: str | None = None
    parameters: dict[str, str] = field(default_factory=dict)
    description: str | None = None


@dataclass(frozen=True)
class HiveTable:
    """The parts of a Hive table this catalog reads and writes."""

    database: str
    name: str
    table_type: str
    location: str | None
    parameters: dict[str, str]
    columns: tuple[tuple[str, str], ...] = ()
    owner: str | None = None

    @property
    def is_iceberg(self) -> bool:
        """Whether the parameters say the table is an Iceberg table."""
        return self.parameters.get(TABLE_TYPE, "").upper() == ICEBERG_TABLE_TYPE


class MetastoreClient(Protocol):
    """What :class:`HiveCatalog` needs of a Hive metastore.  Missing objects return None."""

    def get_database(self, name: str) -> HiveDatabase | None: ...
    def list_databases(self) -> list[str]: ...
    def create_database(self, database: HiveDatabase) -> None: ...
    def set_database_parameters(self, name: str, parameters: Mapping[str, str]) -> None: ...
    def drop_database(self, name: str) -> None: ...
    def get_table(self, database: str, name: str) -> HiveTable | None: ...
    def list_tables(self, database: str) -> list[str]: ...
    def create_table(self, table: HiveTable) -> None: ...
    def drop_table(self, database: str, name: str) -> None: ...
    def rename_table(self, database: str, name: str, new_database: str, new_name: str) -> None: ...
    def swap_parameters(self, database: str, name: str, expected_location: str,
                        parameters: Mapping[str, str], *, lock: bool | None = None) -> bool: ...


# ------------------------------------------------------------------------------------ types
_PRIMITIVES = {"boolean": "boolean", "int": "int", "long": "bigint", "float": "float", "double": "double",
               "date": "date", "string": "string", "uuid": "string", "binary": "binary",
               "timestamp": "timestamp", "timestamptz": "timestamp", "timestamp_ns": "timestamp",
               "timestamptz_ns": "timestamp", "time": "string", "unknown": "void", "variant": "string"}


def hive_type(t: Any) -> str:
    """Hive's spelling of an Iceberg type, as Iceberg Java writes table columns into the metastore."""
    if isinstance(t, StructType):
        return "struct<" + ",".join(f"{f.name}:{hive_type(f.field_type)}" for f in t.fields) + ">"
    if isinstance(t, ListType):
        return f"array<{hive_type(t.element_type)}>"
    if isinstance(t, MapType):
        return f"map<{hive_type(t.key_type)},{hive_type(t.value_type)}>"
    text = str(t)
    if text.startswith("decimal"):
        return text.replace(" ", "")
    if text.startswith("fixed"):
        return "binary"
    return _PRIMITIVES.get(text, text)


# ------------------------------------------------------------------------------------ catalog
class HiveCatalog(Catalog):
    """Iceberg tables registered in a Hive metastore (see the module doc)."""

    def __init__(self, name: str, client: MetastoreClient, warehouse: str | None = None,
                 properties: Mapping[str, str] | None = None, io: FileIO | None = None) -> None:
        super().__init__(name, properties, io)
        self.client = client
        self.warehouse = warehouse.rstrip("/") if warehouse else None

    # -- namespaces -------------------------------------------------------------------------------

    @staticmethod
    def _database(namespace: IdentifierLike) -> str:
        ns = parse_namespace(namespace)
        if len(ns) != 1:
            raise ValidationError(f"Invalid namespace {'.'.join(ns)!r}: a Hive metastore has one level of databases")
        return ns[0].lower()

    def _require_database(self, namespace: IdentifierLike) -> HiveDatabase:
        name = self._database(namespace)
        db = self.client.get_database(name)
        if db is None:
            raise NoSuchNamespaceError(f"Namespace does not exist: {name}")
        return db

    def create_namespace(self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None) -> None:
        """Create a Hive database (``location`` and ``comment`` properties become its location and description)."""
        name = self._database(namespace)
        if self.client.get_database(name) is not None:
            raise NamespaceAlreadyExistsError(f"Namespace already exists: {name}")
        props = dict(properties or {})
        location = props.pop("location", None) or (join_path(self.warehouse, f"{name}.db") if self.warehouse else None)
        self.client.create_database(HiveDatabase(name, location, props, props.pop("comment", None)))

    def list_namespaces(self, parent: IdentifierLike = ()) -> list[Identifier]:
        """Every database (a Hive metastore has no nested namespaces)."""
        if parse_namespace(parent) if parent else ():
            self._require_database(parent)
            return []
        return sorted((d,) for d in self.client.list_databases())

    def namespace_exists(self, namespace: IdentifierLike) -> bool:
        """Whether the database exists."""
        try:
            return self.client.get_database(self._database(namespace)) is not None
        except ValidationError:
            return False

    def drop_namespace(self, namespace: IdentifierLike) -> None:
        """Drop an empty database."""
        db = self._require_database(namespace)
        if self.client.list_tables(db.name):
            raise NamespaceNotEmptyError(f"Namespace {db.name} is not empty")
        self.client.drop_database(db.name)

    def load_namespace_properties(self, namespace: IdentifierLike) -> dict[str, str]:
        """The database's parameters, plus ``location`` and ``comment`` as Iceberg Java reports them."""
        db = self._require_database(namespace)
        props = dict(db.parameters)
        if db.location:
            props["location"] = db.location
        if db.description:
            props["comment"] = db.description
        return props

    def update_namespace_properties(self, namespace: IdentifierLike, removals: Iterable[str] = (),
                                    updates: Mapping[str, str] | None = None) -> NamespacePropertiesUpdate:
        """Set and remove database parameters."""
        db = self._require_database(namespace)
        updates = dict(updates or {})
        removals = list(removals)
        params = dict(db.parameters)
        missing = [k for k in removals if k not in params]
        for k in removals:
            params.pop(k, None)
        params.update(updates)
        self.client.set_database_parameters(db.name, params)
        removed = [k for k in removals if k not in missing]
        return NamespacePropertiesUpdate(removed=sorted(removed), updated=sorted(updates), missing=sorted(missing))

    # -- tables ---------------------------------------------------------------------------------

    def _split(self, identifier: IdentifierLike) -> tuple[Identifier, str, str]:
        ident = parse_identifier(identifier)
        if len(ident) != 2:
            raise ValidationError(f"Invalid table name {'.'.join(ident)!r}: expected <database>.<table>")
        return ident, ident[0].lower(), ident[1].lower()

    def _iceberg_table(self, identifier: IdentifierLike) -> tuple[Identifier, HiveTable]:
        ident, db, name = self._split(identifier)
        t = self.client.get_table(db, name)
        if t is None:
            raise NoSuchTableError(f"Table does not exist: {db}.{name}")
        if not t.is_iceberg:
            raise NoSuchTableError(
                f"Table {db}.{name} is not an Iceberg table (Hive table_type={t.parameters.get(TABLE_TYPE)!r}, "
                f"type {t.table_type}); use migrate or snapshot to bring it into Iceberg"
            )
        if not t.parameters.get(METADATA_LOCATION):
            raise NoSuchTableError(f"Iceberg table {db}.{name} has no {METADATA_LOCATION} in the metastore")
        return ident, t

    def default_table_location(self, identifier: IdentifierLike) -> str:
        """``<database location>/<table>``, as Hive and Iceberg Java place tables."""
        _, db, name = self._split(identifier)
        database = self._require_database(db)
        base = database.location or (join_path(self.warehouse, f"{db}.db") if self.warehouse else None)
        if not base:
            raise CatalogConfigError(f"Database {db} has no location and catalog {self.name} has no warehouse")
        return join_path(base, name)

    def list_tables(self, namespace: IdentifierLike) -> list[Identifier]:
        """Iceberg tables of a database (other Hive tables are left out)."""
        db = self._require_database(namespace)
        out = []
        for name in self.client.list_tables(db.name):
            t = self.client.get_table(db.name, name)
            if t is not None and t.is_iceberg:
                out.append((db.name, name))
        return sorted(out)

    def load_table(self, identifier: IdentifierLike) -> Table:
        """The table at the metadata file the metastore names."""
        ident, t = self._iceberg_table(identifier)
        location = t.parameters[METADATA_LOCATION]
        return Table(ident, read_table_metadata(self.io, location), location, self.io, self)

    def current_metadata_location(self, identifier: IdentifierLike) -> str | None:
        """The metadata file the metastore names, not read."""
        return self._iceberg_table(identifier)[1].parameters[METADATA_LOCATION]

    def location_hint(self, identifier: IdentifierLike) -> str | None:
        """The location the metastore records for the table."""
        try:
            return self._iceberg_table(identifier)[1].location
        except NoSuchTableError:
            return None

    def table_exists(self, identifier: IdentifierLike) -> bool:
        """Whether an Iceberg table of that name exists."""
        try:
            self._iceberg_table(identifier)
            return True
        except NoSuchTableError:
            return False

    def _hive_table(self, ident: Identifier, md: Any, location: str) -> HiveTable:
        params = {"EXTERNAL": "TRUE", TABLE_TYPE: ICEBERG_TABLE_TYPE, METADATA_LOCATION: location,
                  "uuid": str(md.table_uuid)}
        params.update(summary_parameters(md))
        schema = md.schema()
        cols = tuple((f.name, hive_type(f.field_type)) for f in schema.fields)
        return HiveTable(ident[0].lower(), ident[1].lower(), "EXTERNAL_TABLE", md.location, params, cols, _user())

    def create_table(self, identifier: IdentifierLike, metadata) -> Table:  # noqa: ANN001
        """Write the first metadata file and register the table in the metastore."""
        ident, db, name = self._split(identifier)
        self._require_database(db)
        if self.client.get_table(db, name) is not None:
            raise TableAlreadyExistsError(f"Table already exists: {db}.{name}")
        check_table_folders(self, (db, name), metadata, action=f"create table {db}.{name}")
        location = next_metadata_location(metadata, None)
        self.io.write(location, metadata_file_bytes(metadata, location))
        try:
            self.client.create_table(self._hive_table((db, name), metadata, location))
        except Exception:
            delete_quietly(self.io, [location])
            if self.client.get_table(db, name) is not None:
                raise TableAlreadyExistsError(f"Table already exists: {db}.{name}") from None
            raise
        return Table((db, name), metadata, location, self.io, self)

    def register_table(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        """Register an existing metadata file under a new name."""
        ident, db, name = self._split(identifier)
        self._require_database(db)
        if self.client.get_table(db, name) is not None:
            raise TableAlreadyExistsError(f"Table already exists: {db}.{name}")
        md = read_table_metadata(self.io, metadata_location)
        check_table_folders(self, (db, name), md, action=f"register table {db}.{name}")
        self.client.create_table(self._hive_table((db, name), md, metadata_location))
        return Table((db, name), md, metadata_location, self.io, self)

    def drop_table(self, identifier: IdentifierLike, purge: bool = False) -> None:
        """Unregister the table; with ``purge`` also delete every file of the table its metadata reaches
        (never a listing of its folder: :func:`~procedures.catalog.base.plan_table_purge`)."""
        ident = parse_identifier(identifier)
        table = self.load_table(ident) if purge else None
        # read whole before the table is unregistered: unreadable metadata fails the drop unchanged
        plan = plan_table_purge(table) if table is not None else None
        _, db, name = self._split(ident)
        if not purge:
            self._iceberg_table(ident)
        self.client.drop_table(db, name)
        if table is not None and plan is not None:
            purge_table_files(table, plan)

    def rename_table(self, source: IdentifierLike, target: IdentifierLike) -> None:
        """Rename within the metastore (files stay where they are)."""
        _, hive = self._iceberg_table(source)
        _, db, name = self._split(target)
        self._require_database(db)
        if self.client.get_table(db, name) is not None:
            raise TableAlreadyExistsError(f"Table already exists: {db}.{name}")
        self.client.rename_table(hive.database, hive.name, db, name)

    def commit_table(self, table: Table, base, new) -> Table:  # noqa: ANN001
        """Write the new metadata file, then swap ``metadata_location`` if it still names ``base``'s file."""
        ident, hive = self._iceberg_table(table.identifier)
        current = hive.parameters[METADATA_LOCATION]
        if current != table.metadata_location:
            raise CommitFailedError(
                f"Cannot commit {self.name}.{'.'.join(ident)}: the metastore moved from {table.metadata_location} "
                f"to {current} (another writer committed); retry on fresh metadata"
            )
        check_commit_folders(self, (hive.database, hive.name), base, new)
        location = next_metadata_location(new, table.metadata_location)
        try:
            self.io.write(location, metadata_file_bytes(new, location))
        except OSError as e:
            # the pointer was not touched: a typed failure, so the commit cleans up what it wrote
            delete_quietly(self.io, [location])
            raise CommitFailedError(f"Cannot commit {self.name}.{'.'.join(ident)}: writing {location} failed: {e}") from e
        params = {METADATA_LOCATION: location, PREVIOUS_METADATA_LOCATION: table.metadata_location}
        params.update(summary_parameters(new))
        try:
            swapped = self.client.swap_parameters(hive.database, hive.name, table.metadata_location, params,
                                                  lock=_lock_setting(new))
        except (CommitFailedError, CatalogConfigError):
            delete_quietly(self.io, [location])
            raise
        except Exception as e:  # noqa: BLE001 -- decided below by reading the pointer back
            self._decide_unknown(hive, location, e)
            swapped = True
        if not swapped:
            delete_quietly(self.io, [location])
            raise CommitFailedError(
                f"Cannot commit {self.name}.{'.'.join(ident)}: another writer committed first; retry on fresh metadata"
            )
        delete_removed_metadata_files(self.io, base, new)
        return Table(ident, new, location, self.io, self)

    def _decide_unknown(self, hive: HiveTable, location: str, error: BaseException) -> None:
        try:
            now = self.client.get_table(hive.database, hive.name)
        except Exception as e:  # noqa: BLE001
            raise CommitStateUnknownError(
                f"Commit of {hive.database}.{hive.name} failed ({error}) and the metastore could not be read back "
                f"({e}); check whether {location} is current before retrying"
            ) from error
        if now is not None and now.parameters.get(METADATA_LOCATION) == location:
            return
        delete_quietly(self.io, [location])
        raise CommitFailedError(f"Commit of {hive.database}.{hive.name} failed: {error}") from error


def _lock_setting(md: Any) -> bool | None:
    """The table's own ``engine.hive.lock-enabled`` (as Iceberg Java reads it), or None."""
    return HIVE_LOCK_ENABLED.setting(md.properties)


def summary_parameters(md: Any) -> dict[str, str]:
    """The table parameters Iceberg Java keeps in the metastore for engines that read them: current
    snapshot id, timestamp and summary, snapshot count, schema and default spec, and Hive's
    ``numFiles``/``numRows``/``totalSize``.  Values longer than Java's limit are left out."""
    out: dict[str, str] = {"snapshot-count": str(len(md.snapshots))}
    snap = md.current_snapshot()
    if snap is not None:
        summary = dict(snap.summary)
        out["current-snapshot-id"] = str(snap.snapshot_id)
        out["current-snapshot-timestamp-ms"] = str(snap.timestamp_ms)
        out["current-snapshot-summary"] = _json(summary)
        for key, hive_key in (("total-data-files", "numFiles"), ("total-records", "numRows"),
                              ("total-files-size", "totalSize")):
            if key in summary:
                out[hive_key] = summary[key]
    out["current-schema"] = _json(schema_to_json(md.schema()))
    if not md.spec().is_unpartitioned():
        out["default-partition-spec"] = _json(spec_to_json(md.spec()))
    return {k: v for k, v in out.items() if len(v) <= MAX_PARAMETER_SIZE}


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 -- no user name in some containers
        return "iceberg"


# ------------------------------------------------------------------------------------ JVM client
class JvmMetastoreClient:
    """A :class:`MetastoreClient` over the Hive client classes in a Spark session's JVM.

    ``uri`` (``thrift://host:port``) selects a metastore server; without it the session's own metastore
    configuration is used (``javax.jdo.option.ConnectionURL`` of Spark's embedded Derby).  The session
    is only a gateway to the JVM: nothing here imports pyspark.
    """

    def __init__(self, session: Any, uri: str | None = None, *, lock_enabled: bool = True,
                 conf: Mapping[str, str] | None = None) -> None:
        jvm = getattr(session, "_jvm", None)
        jsession = getattr(session, "_jsparkSession", None)
        if jvm is None or jsession is None:
            raise CatalogConfigError("A hive catalog needs a Spark session with a JVM (not Spark Connect)")
        self._jvm = jvm
        hadoop_conf = jsession.sessionState().newHadoopConf()
        for key, value in (conf or {}).items():
            hadoop_conf.set(key, value)
        if uri:
            hadoop_conf.set("hive.metastore.uris", uri)
        self.uri = uri or str(hadoop_conf.get("hive.metastore.uris") or "") or None
        self.lock_enabled = lock_enabled
        self._jdbc_url = None if self.uri else hadoop_conf.get("javax.jdo.option.ConnectionURL")
        self._jdbc_user = hadoop_conf.get("javax.jdo.option.ConnectionUserName")
        self._jdbc_password = hadoop_conf.get("javax.jdo.option.ConnectionPassword")
        try:
            hive_conf_class = jvm.org.apache.hadoop.hive.conf.HiveConf
            hive_conf = hive_conf_class(hadoop_conf, hive_conf_class().getClass())
            self._client = jvm.org.apache.hadoop.hive.metastore.HiveMetaStoreClient(hive_conf)
        except Exception as e:  # noqa: BLE001 -- py4j wraps everything
            raise CatalogConfigError(
                f"Cannot open the Hive metastore {self.uri or '(embedded, from the session)'}: {_short(e)}. Start "
                "Spark with spark.sql.catalogImplementation=hive (and the metastore's javax.jdo.option.* keys) or "
                "set the catalog's uri to a thrift://host:port metastore"
            ) from e
        self._api = jvm.org.apache.hadoop.hive.metastore.api

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 -- py4j error: classify by the Java exception's name
            name = _java_exception(e)
            if name.endswith("NoSuchObjectException"):
                return _MISSING
            if name.endswith("AlreadyExistsException"):
                raise TableAlreadyExistsError(f"Already exists in the metastore: {_short(e)}") from e
            raise

    def get_database(self, name: str) -> HiveDatabase | None:
        """The database, or None."""
        db = self._call(self._client.getDatabase, name)
        if db is _MISSING:
            return None
        return HiveDatabase(db.getName(), db.getLocationUri(), dict(db.getParameters() or {}), db.getDescription())

    def list_databases(self) -> list[str]:
        """Every database name."""
        return list(self._client.getAllDatabases())

    def create_database(self, database: HiveDatabase) -> None:
        """Create a database."""
        params = self._jvm.java.util.HashMap()
        for k, v in database.parameters.items():
            params.put(k, v)
        db = self._api.Database(database.name, database.description or "", database.location, params)
        try:
            self._client.createDatabase(db)
        except Exception as e:  # noqa: BLE001
            if _java_exception(e).endswith("AlreadyExistsException"):
                raise NamespaceAlreadyExistsError(f"Namespace already exists: {database.name}") from e
            raise

    def set_database_parameters(self, name: str, parameters: Mapping[str, str]) -> None:
        """Replace the database's parameters."""
        db = self._client.getDatabase(name)
        params = self._jvm.java.util.HashMap()
        for k, v in parameters.items():
            params.put(k, v)
        db.setParameters(params)
        self._client.alterDatabase(name, db)

    def drop_database(self, name: str) -> None:
        """Drop an (empty) database, keeping its folder."""
        self._client.dropDatabase(name, False, False, False)

    def get_table(self, database: str, name: str) -> HiveTable | None:
        """The table, or None."""
        t = self._call(self._client.getTable, database, name)
        if t is _MISSING:
            return None
        sd = t.getSd()
        cols = tuple((c.getName(), c.getType()) for c in (sd.getCols() if sd is not None else []) or [])
        return HiveTable(t.getDbName(), t.getTableName(), t.getTableType(), sd.getLocation() if sd else None,
                         dict(t.getParameters() or {}), cols, t.getOwner())

    def list_tables(self, database: str) -> list[str]:
        """Every table name of the database."""
        return list(self._client.getAllTables(database))

    def create_table(self, table: HiveTable) -> None:
        """Register a table as Iceberg Java does (external, no partition keys, file formats that Hive
        cannot read directly)."""
        api = self._api
        cols = self._jvm.java.util.ArrayList()
        for name, typ in table.columns:
            cols.add(api.FieldSchema(name, typ, None))
        serde = api.SerDeInfo()
        serde.setSerializationLib("org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe")
        serde.setParameters(self._jvm.java.util.HashMap())
        sd = api.StorageDescriptor()
        sd.setCols(cols)
        sd.setLocation(table.location)
        sd.setInputFormat("org.apache.hadoop.mapred.FileInputFormat")
        sd.setOutputFormat("org.apache.hadoop.mapred.FileOutputFormat")
        sd.setSerdeInfo(serde)
        params = self._jvm.java.util.HashMap()
        for k, v in table.parameters.items():
            params.put(k, v)
        now = int(time.time())
        t = api.Table()
        t.setDbName(table.database)
        t.setTableName(table.name)
        t.setOwner(table.owner or _user())
        t.setCreateTime(now)
        t.setLastAccessTime(now)
        t.setSd(sd)
        t.setPartitionKeys(self._jvm.java.util.ArrayList())
        t.setParameters(params)
        t.setTableType(table.table_type)
        self._call(self._client.createTable, t)

    def drop_table(self, database: str, name: str) -> None:
        """Unregister a table, leaving its files (Iceberg owns them)."""
        self._client.dropTable(database, name, False, True)

    def rename_table(self, database: str, name: str, new_database: str, new_name: str) -> None:
        """Rename a table in the metastore."""
        t = self._client.getTable(database, name)
        t.setDbName(new_database)
        t.setTableName(new_name)
        self._client.alter_table(database, name, t)

    # -- the atomic swap ----------------------------------------------------------------------------

    def swap_parameters(self, database: str, name: str, expected_location: str,
                        parameters: Mapping[str, str], *, lock: bool | None = None) -> bool:
        """Set ``parameters`` if ``metadata_location`` still is ``expected_location``; False if it moved.

        ``lock`` (default: the client's ``lock_enabled``) takes the metastore's exclusive table lock
        around the swap, so writers that only check-then-alter under that lock (Iceberg Java) cannot
        overwrite it.  On a metastore the session opens itself a refused lock falls back to the
        database transaction alone, which is atomic among writers that use it.
        """
        use_lock = self.lock_enabled if lock is None else lock
        lock_id = None
        if use_lock:
            try:
                lock_id = self._lock(database, name)
            except CatalogConfigError:
                if not self._jdbc_url:
                    raise
                log.debug("metastore has no lock support; %s.%s commits by the database transaction alone",
                          database, name)
        try:
            if self._jdbc_url:
                return self._swap_in_database(database, name, expected_location, parameters)
            if not use_lock:
                log.debug("committing %s.%s without a metastore lock (lock-enabled=false)", database, name)
            return self._check_and_alter(database, name, expected_location, parameters)
        finally:
            if lock_id is not None:
                try:
                    self._client.unlock(lock_id)
                except Exception:  # noqa: BLE001 -- the lock times out on the server
                    log.warning("Could not release metastore lock %s on %s.%s", lock_id, database, name)

    def _swap_in_database(self, database: str, name: str, expected: str, parameters: Mapping[str, str]) -> bool:
        manager = self._jvm.java.sql.DriverManager
        conn = (manager.getConnection(self._jdbc_url, self._jdbc_user, self._jdbc_password)
                if self._jdbc_user else manager.getConnection(self._jdbc_url))
        try:
            conn.setAutoCommit(False)
            find = conn.prepareStatement(
                "SELECT t.TBL_ID FROM TBLS t JOIN DBS d ON t.DB_ID = d.DB_ID WHERE d.NAME = ? AND t.TBL_NAME = ?")
            find.setString(1, database)
            find.setString(2, name)
            rows = find.executeQuery()
            if not rows.next():
                conn.rollback()
                raise NoSuchTableError(f"Table does not exist: {database}.{name}")
            tbl_id = rows.getLong(1)
            swap = conn.prepareStatement(
                "UPDATE TABLE_PARAMS SET PARAM_VALUE = ? WHERE TBL_ID = ? AND PARAM_KEY = ? AND PARAM_VALUE = ?")
            swap.setString(1, parameters[METADATA_LOCATION])
            swap.setLong(2, tbl_id)
            swap.setString(3, METADATA_LOCATION)
            swap.setString(4, expected)
            if swap.executeUpdate() != 1:
                conn.rollback()
                return False
            update = conn.prepareStatement("UPDATE TABLE_PARAMS SET PARAM_VALUE = ? WHERE TBL_ID = ? AND PARAM_KEY = ?")
            insert = conn.prepareStatement("INSERT INTO TABLE_PARAMS (TBL_ID, PARAM_KEY, PARAM_VALUE) VALUES (?, ?, ?)")
            for key, value in parameters.items():
                if key == METADATA_LOCATION:
                    continue
                update.setString(1, value)
                update.setLong(2, tbl_id)
                update.setString(3, key)
                if update.executeUpdate() == 0:
                    insert.setLong(1, tbl_id)
                    insert.setString(2, key)
                    insert.setString(3, value)
                    insert.executeUpdate()
            conn.commit()
            return True
        except Exception:
            try:
                conn.rollback()
            except Exception:  # noqa: BLE001 -- the original error matters
                pass
            raise
        finally:
            conn.close()

    def _check_and_alter(self, database: str, name: str, expected: str, parameters: Mapping[str, str]) -> bool:
        t = self._client.getTable(database, name)
        current = dict(t.getParameters() or {}).get(METADATA_LOCATION)
        if current != expected:
            return False
        params = t.getParameters()
        for k, v in parameters.items():
            params.put(k, v)
        t.setParameters(params)
        self._client.alter_table(database, name, t)
        return True

    def _lock(self, database: str, name: str) -> int:
        api = self._api
        component = api.LockComponent(api.LockType.EXCLUSIVE, api.LockLevel.TABLE, database)
        component.setTablename(name)
        components = self._jvm.java.util.ArrayList()
        components.add(component)
        request = api.LockRequest(components, _user(), socket.gethostname())
        try:
            response = self._client.lock(request)
        except Exception as e:  # noqa: BLE001
            # a metastore without lock support refuses every time: retrying cannot help
            raise CatalogConfigError(
                f"The metastore {self.uri} refused a lock on {database}.{name} ({_short(e)}); it may lack the "
                "transaction tables. Set the catalog's lock-enabled=false to commit without a lock (two writers "
                "can then both win a race), or enable locks on the metastore"
            ) from e
        lock_id = response.getLockid()
        deadline = time.monotonic() + LOCK_WAIT_S
        while str(response.getState()) == "WAITING":
            if time.monotonic() > deadline:
                self._client.unlock(lock_id)
                raise CommitFailedError(f"Timed out waiting for the metastore lock on {database}.{name}")
            time.sleep(0.05)
            response = self._client.checkLock(lock_id)
        if str(response.getState()) != "ACQUIRED":
            raise CommitFailedError(f"Could not lock {database}.{name} in the metastore: {response.getState()}")
        return lock_id


_MISSING = object()


def _java_exception(e: BaseException) -> str:
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            return str(java.getClass().getName())
        except Exception:  # noqa: BLE001
            pass
    return type(e).__name__


def _short(e: BaseException) -> str:
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            return f"{java.getClass().getSimpleName()}: {java.getMessage()}"
        except Exception:  # noqa: BLE001
            pass
    return str(e).splitlines()[0] if str(e) else type(e).__name__

