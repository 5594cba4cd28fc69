"""The Hive metastore catalog of Iceberg Java (``HiveCatalog``), configured as ``type=hive``.

A namespace is a Hive database; an Iceberg table is a Hive ``EXTERNAL_TABLE`` whose parameters say
``table_type=ICEBERG`` and hold ``metadata_location`` (and, after the first commit,
``previous_metadata_location``), exactly as Iceberg Java registers it, so Java and this package see
each other's tables and commits.  Tables of other types in the same database (plain Parquet/ORC Hive
tables) are listed by Hive but are not Iceberg tables here.

The metastore is reached through a :class:`MetastoreClient`:

* :class:`procedures.catalog.hive_thrift.ThriftMetastoreClient` for a metastore server
  (``uri=thrift://...``), over its thrift API from the driver: the same on classic and Spark Connect
  sessions, and without any session;
* :class:`procedures.spark.hive_jvm.JvmMetastoreClient` for the metastore a classic session opens
  itself (no ``uri``: Spark's embedded Derby when ``spark.sql.catalogImplementation=hive``), through
  the session's JVM -- the one module of the package that uses py4j.  A Spark Connect session's
  embedded metastore lives in the server's JVM, out of reach: there a hive catalog needs a ``uri``.

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
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol

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
from procedures.core.kernel.properties import HIVE_LOCK_ENABLED
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

__all__ = ["HiveCatalog", "HiveTable", "HiveDatabase", "MetastoreClient", "ICEBERG_TABLE_TYPE", "hive_type",
           "hive_user", "lock_refused_error", "await_lock", "METADATA_LOCATION", "LOCK_WAIT_S"]

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
        return sorted((db.name, name) for name, _ in self._iceberg_tables(db.name))

    def current_metadata_locations(self, namespace: IdentifierLike) -> dict[Identifier, str] | None:
        """The metadata file of every Iceberg table of the database, from the table objects
        listing fetches anyway (one metastore call per table, none more)."""
        db = self._require_database(namespace)
        return {(db.name, name): t.parameters[METADATA_LOCATION] for name, t in self._iceberg_tables(db.name)
                if t.parameters.get(METADATA_LOCATION)}

    def _iceberg_tables(self, database: str) -> Iterator[tuple[str, HiveTable]]:
        """``(name, table object)`` of each Iceberg table of ``database`` (one metastore call each)."""
        for name in self.client.list_tables(database):
            t = self.client.get_table(database, name)
            if t is not None and t.is_iceberg:
                yield name, t

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
        return HiveTable(ident[0].lower(), ident[1].lower(), "EXTERNAL_TABLE", md.location, params, cols, hive_user())

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


def hive_user() -> str:
    """The user name a metastore records as owner and lock holder (``iceberg`` when the process has none)."""
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 -- no user name in some containers
        return "iceberg"


# ------------------------------------------------------------------------------------ lock helpers
def lock_refused_error(uri: str | None, database: str, name: str, reason: str) -> CatalogConfigError:
    """The error of a metastore that refuses a lock: retrying cannot help, so the message names the
    two ways out."""
    return CatalogConfigError(
        f"The metastore {uri or '(embedded, from the session)'} refused a lock on {database}.{name} ({reason}); "
        "it may lack the transaction tables. Set the catalog's lock-enabled=false to commit without a lock "
        "(two writers can then both win a race), or enable locks on the metastore"
    )


def await_lock(state: str, check: Callable[[], str], unlock: Callable[[], None], database: str, name: str) -> None:
    """Wait while a metastore lock request is ``WAITING`` (``check`` asks again and returns the new
    state), at most :data:`LOCK_WAIT_S`; anything but ``ACQUIRED`` then fails the commit."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while state == "WAITING":
        if time.monotonic() > deadline:
            unlock()
            raise CommitFailedError(f"Timed out waiting for the metastore lock on {database}.{name}")
        time.sleep(0.05)
        state = check()
    if state != "ACQUIRED":
        raise CommitFailedError(f"Could not lock {database}.{name} in the metastore: {state}")
