"""The JDBC catalog of Iceberg Java (``JdbcCatalog``) and PyIceberg (``SqlCatalog``), on SQLite or PostgreSQL.

Two tables, shared with those implementations so all three see the same tables:

* ``iceberg_tables(catalog_name, table_namespace, table_name, metadata_location,
  previous_metadata_location, iceberg_type)`` -- one row per table (``iceberg_type`` is ``TABLE``,
  ``VIEW`` rows belong to views, ``NULL`` to rows written before the column existed);
* ``iceberg_namespace_properties(catalog_name, namespace, property_key, property_value)``.

A namespace exists when it has a property row or a table (in it or below it), as in both
reference implementations; ``create_namespace`` writes ``exists=true`` when given no properties.

Schema versions (Java's ``jdbc.schema-version``): ``iceberg_tables`` without ``iceberg_type`` is V0, with
it V1.  An existing database is used at the version it has; with ``jdbc.schema-version=V1`` a V0
database gets the column (``ALTER TABLE ... ADD COLUMN``), as Java does.  A new database is created at
V1 (as PyIceberg does; Java creates V0 unless told V1): Java and PyIceberg read and write both.

The commit is a compare-and-swap: ``UPDATE iceberg_tables SET metadata_location = <new>,
previous_metadata_location = <base> WHERE ... AND metadata_location = <base>``.  One updated row
means the swap happened; zero means another writer moved the pointer first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence
from urllib.parse import unquote, urlsplit

from procedures.catalog.base import (
    Catalog,
    Identifier,
    IdentifierLike,
    NamespacePropertiesUpdate,
    Table,
    delete_removed_metadata_files,
    identifier_to_string,
    metadata_file_bytes,
    next_metadata_location,
    parse_identifier,
    parse_namespace,
    plan_table_purge,
    purge_table_files,
)
from procedures.catalog.overlap import check_commit_folders, check_table_folders
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
    redact_text,
)
from procedures.io.fileio import FileIO, join_path
from procedures.spec.metadata import read_table_metadata

__all__ = ["JdbcCatalog", "parse_jdbc_uri", "JdbcUri"]

log = logging.getLogger(__name__)

TABLES = "iceberg_tables"
NS_PROPS = "iceberg_namespace_properties"
TABLE_TYPE = "TABLE"
#: Java's catalog property naming the schema version a V0 database is moved to (V0 or V1)
SCHEMA_VERSION = "jdbc.schema-version"

_CREATE_TABLES = (
    f"CREATE TABLE IF NOT EXISTS {TABLES} ("
    "catalog_name VARCHAR(255) NOT NULL, "
    "table_namespace VARCHAR(255) NOT NULL, "
    "table_name VARCHAR(255) NOT NULL, "
    "metadata_location VARCHAR(1000), "
    "previous_metadata_location VARCHAR(1000), "
    "iceberg_type VARCHAR(5), "
    "PRIMARY KEY (catalog_name, table_namespace, table_name))"
)
_ADD_TYPE_COLUMN = f"ALTER TABLE {TABLES} ADD COLUMN iceberg_type VARCHAR(5)"
_CREATE_NS_PROPS = (
    f"CREATE TABLE IF NOT EXISTS {NS_PROPS} ("
    "catalog_name VARCHAR(255) NOT NULL, "
    "namespace VARCHAR(255) NOT NULL, "
    "property_key VARCHAR(255), "
    "property_value VARCHAR(1000), "
    "PRIMARY KEY (catalog_name, namespace, property_key))"
)


@dataclass(frozen=True, slots=True)
class JdbcUri:
    """A parsed catalog uri: ``dialect`` is ``sqlite`` or ``postgresql``; ``target`` the file or conninfo."""

    dialect: str
    target: str
    user: str | None = None
    #: kept out of the repr: a parsed uri may be shown in messages and logs
    password: str | None = field(default=None, repr=False)


def parse_jdbc_uri(uri: str, *, key: str = "uri") -> JdbcUri:
    """Parse ``jdbc:sqlite:<path>``, ``jdbc:postgresql://host:port/db`` (and the SQLAlchemy
    spellings ``sqlite:///<path>``, ``postgresql[+psycopg]://...`` PyIceberg uses).  ``key`` names
    the configuration key in errors."""
    if not isinstance(uri, str) or not uri.strip():
        raise CatalogConfigError(f"{key}: expected a JDBC uri such as jdbc:sqlite:/path/catalog.db, got {uri!r}")
    text = uri.strip()
    body = text[5:] if text.startswith("jdbc:") else text
    if body.startswith("sqlite:"):
        rest = body[len("sqlite:"):]
        if rest.startswith("///"):  # SQLAlchemy: sqlite:////abs/path or sqlite:///rel
            rest = rest[3:]
        elif rest.startswith("file:"):
            rest = rest[5:]
            if rest.startswith("//"):
                rest = rest[2:]
        rest = rest.split("?", 1)[0]
        if not rest or rest == ":memory:":
            raise CatalogConfigError(
                f"{key}: {uri!r} names no database file; an in-memory SQLite catalog cannot be shared "
                "between connections, use a file path"
            )
        return JdbcUri("sqlite", rest)
    for prefix in ("postgresql+psycopg://", "postgresql+psycopg2://", "postgresql://", "postgres://"):
        if body.startswith(prefix):
            parts = urlsplit("postgresql://" + body[len(prefix):])
            if not parts.hostname or not parts.path.strip("/"):
                raise CatalogConfigError(f"{key}: {uri!r} must name a host and a database: jdbc:postgresql://host:5432/db")
            try:
                port = parts.port or 5432
            except ValueError:
                raise CatalogConfigError(f"{key}: {uri!r} has an invalid port") from None
            conninfo = f"host={parts.hostname} port={port} dbname={parts.path.strip('/')}"
            for pair in filter(None, parts.query.split("&")):
                k, _, v = pair.partition("=")
                if k in ("user", "password"):
                    continue
                conninfo += f" {k}={v}"
            query = dict(p.partition("=")[::2] for p in filter(None, parts.query.split("&")))
            user = unquote(parts.username) if parts.username else query.get("user")
            password = unquote(parts.password) if parts.password else query.get("password")
            return JdbcUri("postgresql", conninfo, user, password)
    raise CatalogConfigError(
        f"{key}: unsupported JDBC uri {uri!r}; expected jdbc:sqlite:<path> or jdbc:postgresql://host:port/db"
    )


class _Backend:
    """Connections and dialect differences: placeholders, error classes, transactions."""

    dialect = ""

    def connect(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def sql(self, statement: str) -> str:
        return statement

    def is_integrity_error(self, e: BaseException) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def is_not_applied(self, e: BaseException) -> bool:
        """Errors that guarantee the statement had no effect (lock timeouts)."""
        return False

    def errors(self) -> tuple[type[BaseException], ...]:  # pragma: no cover - abstract
        raise NotImplementedError

    @contextlib.contextmanager
    def transaction(self, write: bool = True) -> Iterator[Callable[..., Any]]:
        """Yield ``execute(sql, params) -> cursor`` inside one committed-or-rolled-back transaction."""
        conn = self.connect()
        try:
            self.begin(conn, write)
            cur = conn.cursor()

            def execute(statement: str, params: Sequence[Any] = ()) -> Any:
                cur.execute(self.sql(statement), tuple(params))
                return cur

            try:
                yield execute
            except BaseException:
                conn.rollback()
                raise
            conn.commit()
        finally:
            conn.close()

    def begin(self, conn: Any, write: bool) -> None:
        pass


class _SqliteBackend(_Backend):
    dialect = "sqlite"

    def __init__(self, path: str, busy_timeout_ms: int) -> None:
        self.path = path
        self.timeout = busy_timeout_ms / 1000.0

    def connect(self) -> sqlite3.Connection:
        folder = os.path.dirname(self.path)
        if folder and self.path != ":memory:" and "://" not in folder:
            # SQLite creates the database file but not its folder ("unable to open database file")
            os.makedirs(folder, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
        return conn

    def begin(self, conn: Any, write: bool) -> None:
        # take the write lock up front: a deferred read-then-write transaction in WAL mode can
        # fail with SQLITE_BUSY instead of waiting for the busy timeout
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def is_integrity_error(self, e: BaseException) -> bool:
        return isinstance(e, sqlite3.IntegrityError)

    def is_not_applied(self, e: BaseException) -> bool:
        return isinstance(e, sqlite3.OperationalError) and ("locked" in str(e) or "busy" in str(e))

    def errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.Error,)


class _PostgresBackend(_Backend):
    dialect = "postgresql"

    def __init__(self, uri: JdbcUri, properties: Mapping[str, str]) -> None:
        try:
            import psycopg
        except ImportError:
            raise CatalogConfigError(
                "A PostgreSQL catalog needs psycopg 3: pip install 'iceberg-procedures[postgres]'"
            ) from None
        self.psycopg = psycopg
        self.kwargs: dict[str, Any] = {}
        user = properties.get("jdbc.user") or uri.user
        password = properties.get("jdbc.password") or uri.password
        if user:
            self.kwargs["user"] = user
        if password:
            self.kwargs["password"] = password
        self.conninfo = uri.target

    def connect(self) -> Any:
        return self.psycopg.connect(self.conninfo, **self.kwargs)

    def sql(self, statement: str) -> str:
        return statement.replace("?", "%s")

    def is_integrity_error(self, e: BaseException) -> bool:
        return isinstance(e, self.psycopg.IntegrityError)

    def is_not_applied(self, e: BaseException) -> bool:
        errors = self.psycopg.errors
        return isinstance(e, (errors.LockNotAvailable, errors.SerializationFailure, errors.DeadlockDetected))

    def errors(self) -> tuple[type[BaseException], ...]:
        return (self.psycopg.Error,)


def _escape_like(text: str) -> str:
    return text.replace("!", "!!").replace("_", "!_").replace("%", "!%")


class JdbcCatalog(Catalog):
    """Tables and namespaces in the Iceberg JDBC schema; commits by compare-and-swap UPDATE.

    ``uri`` is ``jdbc:sqlite:<path>`` or ``jdbc:postgresql://host:port/db``; ``warehouse`` is the
    root for default table locations (``<warehouse>/<ns...>/<table>``, as Java's JdbcCatalog).
    Property ``jdbc.busy-timeout-ms`` (default 30000) bounds how long SQLite waits for a lock;
    ``jdbc.schema-version`` (``V0``, the default, or ``V1``) says whether to add ``iceberg_type`` to a
    V0 database.
    """

    def __init__(
        self,
        name: str,
        uri: str,
        warehouse: str | None = None,
        properties: Mapping[str, str] | None = None,
        io: FileIO | None = None,
    ) -> None:
        super().__init__(name, properties, io)
        parsed = parse_jdbc_uri(uri)
        self.uri = uri
        self.warehouse = warehouse.rstrip("/") if warehouse else None
        if parsed.dialect == "sqlite":
            raw = self.properties.get("jdbc.busy-timeout-ms", "30000")
            try:
                timeout = int(raw)
            except (TypeError, ValueError):
                raise CatalogConfigError(f"jdbc.busy-timeout-ms: expected an integer, got {raw!r}") from None
            self._db: _Backend = _SqliteBackend(parsed.target, timeout)
        else:
            self._db = _PostgresBackend(parsed, self.properties)
        version = self.properties.get(SCHEMA_VERSION, "V0").strip().upper()
        if version not in ("V0", "V1"):
            raise CatalogConfigError(
                f"{SCHEMA_VERSION}: expected V0 or V1, got {self.properties[SCHEMA_VERSION]!r}"
            )
        self._with_type_column = self._initialize(upgrade=version == "V1")

    def __repr__(self) -> str:
        return f"JdbcCatalog({self.name!r}, uri={redact_text(self.uri)!r})"

    # -- schema -------------------------------------------------------------------------------

    def _initialize(self, upgrade: bool) -> bool:
        """Create the catalog tables when missing; whether ``iceberg_tables`` has ``iceberg_type``
        (adding it to a V0 database when ``upgrade``)."""
        db = self._db
        if isinstance(db, _SqliteBackend):
            conn = db.connect()
            try:
                conn.execute("PRAGMA journal_mode=WAL")
            finally:
                conn.close()
        for ddl in (_CREATE_TABLES, _CREATE_NS_PROPS):
            try:
                with db.transaction() as execute:
                    execute(ddl)
            except db.errors() as e:
                # two processes racing on CREATE TABLE IF NOT EXISTS: PostgreSQL may report a
                # duplicate from its catalog; the table exists either way
                if not db.is_integrity_error(e):
                    raise
        if self._has_type_column():
            return True
        if not upgrade:
            log.warning("Catalog %s: %s has no iceberg_type column (JDBC schema V0; set %s=V1 to add it)",
                        self.name, TABLES, SCHEMA_VERSION)
            return False
        try:
            with db.transaction() as execute:
                execute(_ADD_TYPE_COLUMN)
        except db.errors() as e:
            # another catalog may have added it meanwhile
            if not self._has_type_column():
                raise CatalogConfigError(
                    f"{SCHEMA_VERSION}=V1: catalog {self.name} could not add iceberg_type to {TABLES} ({e}); "
                    f"run {_ADD_TYPE_COLUMN} as the database owner, or set {SCHEMA_VERSION}=V0"
                ) from e
        return True

    def _has_type_column(self) -> bool:
        db = self._db
        try:
            with db.transaction(write=False) as execute:
                execute(f"SELECT iceberg_type FROM {TABLES} WHERE 1 = 0").fetchall()
            return True
        except db.errors():
            return False

    def _type_filter(self) -> str:
        return f" AND (iceberg_type = '{TABLE_TYPE}' OR iceberg_type IS NULL)" if self._with_type_column else ""

    def _query(self, statement: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._db.transaction(write=False) as execute:
            return list(execute(statement, params).fetchall())

    # -- namespaces ---------------------------------------------------------------------------

    def _namespace_exists(self, ns_text: str) -> bool:
        like = _escape_like(ns_text) + ".%"
        rows = self._query(
            f"SELECT 1 FROM {TABLES} WHERE catalog_name = ? AND (table_namespace = ? "
            "OR table_namespace LIKE ? ESCAPE '!') "
            f"UNION ALL SELECT 1 FROM {NS_PROPS} WHERE catalog_name = ? AND (namespace = ? "
            "OR namespace LIKE ? ESCAPE '!') LIMIT 1",
            (self.name, ns_text, like, self.name, ns_text, like),
        )
        return bool(rows)

    def namespace_exists(self, namespace: IdentifierLike) -> bool:
        """A namespace exists when it has properties or tables (in it or below it)."""
        return self._namespace_exists(identifier_to_string(parse_namespace(namespace)))

    def _require_namespace(self, ns: Identifier) -> str:
        text = identifier_to_string(ns)
        if not self._namespace_exists(text):
            raise NoSuchNamespaceError(f"Namespace {text} does not exist in catalog {self.name}")
        return text

    def create_namespace(self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None) -> None:
        """Insert the namespace's properties (``exists=true`` when none are given)."""
        ns = parse_namespace(namespace)
        text = identifier_to_string(ns)
        props = _string_props(properties, f"properties of namespace {text}") or {"exists": "true"}
        if self._namespace_exists(text):
            raise NamespaceAlreadyExistsError(f"Namespace {text} already exists in catalog {self.name}")
        try:
            with self._db.transaction() as execute:
                for k, v in props.items():
                    execute(
                        f"INSERT INTO {NS_PROPS} (catalog_name, namespace, property_key, property_value) "
                        "VALUES (?, ?, ?, ?)",
                        (self.name, text, k, v),
                    )
        except self._db.errors() as e:
            if self._db.is_integrity_error(e):
                raise NamespaceAlreadyExistsError(f"Namespace {text} already exists in catalog {self.name}") from e
            raise

    def list_namespaces(self, parent: IdentifierLike = ()) -> list[Identifier]:
        """Namespaces one level below ``parent``, from property rows and table rows alike."""
        ns = parse_namespace(parent) if parent else ()
        if ns:
            self._require_namespace(ns)
        rows = self._query(
            f"SELECT table_namespace FROM {TABLES} WHERE catalog_name = ? "
            f"UNION SELECT namespace FROM {NS_PROPS} WHERE catalog_name = ?",
            (self.name, self.name),
        )
        depth = len(ns) + 1
        found = set()
        for (text,) in rows:
            levels = tuple(text.split("."))
            if len(levels) >= depth and levels[: depth - 1] == ns:
                found.add(levels[:depth])
        return sorted(found)

    def drop_namespace(self, namespace: IdentifierLike) -> None:
        """Delete the namespace's properties; it must hold no tables and no child namespaces."""
        ns = parse_namespace(namespace)
        text = self._require_namespace(ns)
        tables = self._query(
            f"SELECT table_name FROM {TABLES} WHERE catalog_name = ? AND table_namespace = ?", (self.name, text)
        )
        if tables:
            raise NamespaceNotEmptyError(
                f"Cannot drop namespace {text}: it contains {len(tables)} table(s), e.g. {text}.{tables[0][0]}"
            )
        children = self.list_namespaces(ns)
        if children:
            raise NamespaceNotEmptyError(
                f"Cannot drop namespace {text}: it contains namespace {identifier_to_string(children[0])}"
            )
        with self._db.transaction() as execute:
            execute(f"DELETE FROM {NS_PROPS} WHERE catalog_name = ? AND namespace = ?", (self.name, text))

    def load_namespace_properties(self, namespace: IdentifierLike) -> dict[str, str]:
        """The property rows of the namespace."""
        text = self._require_namespace(parse_namespace(namespace))
        rows = self._query(
            f"SELECT property_key, property_value FROM {NS_PROPS} WHERE catalog_name = ? AND namespace = ?",
            (self.name, text),
        )
        return {k: v for k, v in sorted(rows)}

    def update_namespace_properties(
        self,
        namespace: IdentifierLike,
        removals: Iterable[str] = (),
        updates: Mapping[str, str] | None = None,
    ) -> NamespacePropertiesUpdate:
        """Remove ``removals`` and set ``updates`` in one transaction."""
        ns = parse_namespace(namespace)
        text = identifier_to_string(ns)
        removals = [str(r) for r in removals]
        updates = _string_props(updates, f"properties of namespace {text}")
        overlap = sorted(set(removals) & set(updates))
        if overlap:
            raise ValidationError(f"Cannot both remove and set namespace properties {overlap} of {text}")
        current = self.load_namespace_properties(ns)
        removed = tuple(sorted(k for k in removals if k in current))
        missing = tuple(sorted(k for k in removals if k not in current))
        with self._db.transaction() as execute:
            for key in [*removed, *updates]:
                execute(
                    f"DELETE FROM {NS_PROPS} WHERE catalog_name = ? AND namespace = ? AND property_key = ?",
                    (self.name, text, key),
                )
            for key, value in updates.items():
                execute(
                    f"INSERT INTO {NS_PROPS} (catalog_name, namespace, property_key, property_value) "
                    "VALUES (?, ?, ?, ?)",
                    (self.name, text, key, value),
                )
        return NamespacePropertiesUpdate(removed, tuple(sorted(updates)), missing)

    # -- tables -------------------------------------------------------------------------------

    def default_table_location(self, identifier: IdentifierLike) -> str:
        """The namespace's ``location`` property joined with the table name, else
        ``<warehouse>/<ns...>/<table>`` (Java's JdbcCatalog layout)."""
        ident = parse_identifier(identifier)
        ns_location = self.load_namespace_properties(ident[:-1]).get("location")
        if ns_location:
            return join_path(ns_location, ident[-1])
        if not self.warehouse:
            raise CatalogConfigError(
                f"Catalog {self.name} has no warehouse: set its warehouse or give table {'.'.join(ident)} a location"
            )
        return join_path(self.warehouse, *ident)

    def _current_location(self, ident: Identifier) -> str | None:
        rows = self._query(
            f"SELECT metadata_location FROM {TABLES} WHERE catalog_name = ? AND table_namespace = ? "
            f"AND table_name = ?{self._type_filter()}",
            (self.name, identifier_to_string(ident[:-1]), ident[-1]),
        )
        return rows[0][0] if rows else None

    def list_tables(self, namespace: IdentifierLike) -> list[Identifier]:
        """Tables whose namespace is exactly ``namespace``."""
        ns = parse_namespace(namespace)
        text = self._require_namespace(ns)
        rows = self._query(
            f"SELECT table_name FROM {TABLES} WHERE catalog_name = ? AND table_namespace = ?{self._type_filter()}",
            (self.name, text),
        )
        return sorted((*ns, name) for (name,) in rows)

    def load_table(self, identifier: IdentifierLike) -> Table:
        """Read the metadata file the table's row points to."""
        ident = parse_identifier(identifier)
        location = self._current_location(ident)
        if not location:
            raise NoSuchTableError(f"Table {'.'.join(ident)} does not exist in catalog {self.name}")
        return Table(ident, read_table_metadata(self.io, location), location, self.io, self)

    def current_metadata_location(self, identifier: IdentifierLike) -> str | None:
        """The metadata file the table's row points to, not read."""
        ident = parse_identifier(identifier)
        location = self._current_location(ident)
        if not location:
            raise NoSuchTableError(f"Table {'.'.join(ident)} does not exist in catalog {self.name}")
        return location

    def current_metadata_locations(self, namespace: IdentifierLike) -> dict[Identifier, str] | None:
        """The metadata file of every table of the namespace, from one query."""
        ns = parse_namespace(namespace)
        text = self._require_namespace(ns)
        rows = self._query(
            f"SELECT table_name, metadata_location FROM {TABLES} WHERE catalog_name = ? AND table_namespace = ?"
            f"{self._type_filter()}",
            (self.name, text),
        )
        return {(*ns, name): location for name, location in rows if location}

    def location_hint(self, identifier: IdentifierLike) -> str | None:
        """The folder holding the table's ``metadata`` folder, from the metadata file its row names."""
        metadata_location = self._current_location(parse_identifier(identifier))
        if not metadata_location or "/" not in metadata_location:
            return None
        folder = metadata_location.rsplit("/", 1)[0]
        return folder.rsplit("/", 1)[0] if folder.endswith("/metadata") else folder

    def table_exists(self, identifier: IdentifierLike) -> bool:
        """Whether the catalog has a row for the table."""
        return self._current_location(parse_identifier(identifier)) is not None

    def _insert(self, ident: Identifier, location: str) -> None:
        columns = "catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location"
        values = "?, ?, ?, ?, NULL"
        params: list[Any] = [self.name, identifier_to_string(ident[:-1]), ident[-1], location]
        if self._with_type_column:
            columns += ", iceberg_type"
            values += ", ?"
            params.append(TABLE_TYPE)
        try:
            with self._db.transaction() as execute:
                execute(f"INSERT INTO {TABLES} ({columns}) VALUES ({values})", params)
        except self._db.errors() as e:
            if self._db.is_integrity_error(e):
                raise TableAlreadyExistsError(f"Table {'.'.join(ident)} already exists in catalog {self.name}") from e
            raise

    def create_table(self, identifier: IdentifierLike, metadata) -> Table:  # noqa: ANN001
        """Write ``<location>/metadata/00000-<uuid>.metadata.json`` and insert the table's row."""
        ident = parse_identifier(identifier)
        self._require_namespace(ident[:-1])
        if self.table_exists(ident):
            raise TableAlreadyExistsError(f"Table {'.'.join(ident)} already exists in catalog {self.name}")
        check_table_folders(self, ident, metadata, action=f"create table {'.'.join(ident)}")
        location = next_metadata_location(metadata, None)
        self.io.write(location, metadata_file_bytes(metadata, location), overwrite=False)
        try:
            self._insert(ident, location)
        except TableAlreadyExistsError:
            self.io.delete(location)
            raise
        return Table(ident, metadata, location, self.io, self)

    def register_table(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        """Insert a row pointing at an existing metadata file (which is read to validate it first)."""
        ident = parse_identifier(identifier)
        self._require_namespace(ident[:-1])
        metadata = read_table_metadata(self.io, metadata_location)
        check_table_folders(self, ident, metadata, action=f"register table {'.'.join(ident)}")
        self._insert(ident, metadata_location)
        return Table(ident, metadata, metadata_location, self.io, self)

    def drop_table(self, identifier: IdentifierLike, purge: bool = False) -> None:
        """Delete the row; with ``purge`` also every file of the table its metadata reaches
        (:func:`~procedures.catalog.base.plan_table_purge`, read before the row goes: unreadable
        metadata fails the drop with nothing changed).  Nothing is listed: other files in the
        table's folder, and other tables sharing it, are never touched."""
        ident = parse_identifier(identifier)
        table = self.load_table(ident) if purge else None
        plan = plan_table_purge(table) if table is not None else None
        with self._db.transaction() as execute:
            cur = execute(
                f"DELETE FROM {TABLES} WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?"
                f"{self._type_filter()}",
                (self.name, identifier_to_string(ident[:-1]), ident[-1]),
            )
            if cur.rowcount == 0:
                raise NoSuchTableError(f"Table {'.'.join(ident)} does not exist in catalog {self.name}")
        if table is not None and plan is not None:
            purge_table_files(table, plan)

    def rename_table(self, source: IdentifierLike, target: IdentifierLike) -> None:
        """Move the row to the new identifier; the target namespace must exist."""
        src, dst = parse_identifier(source), parse_identifier(target)
        if not self.table_exists(src):
            raise NoSuchTableError(f"Cannot rename {'.'.join(src)}: table does not exist in catalog {self.name}")
        self._require_namespace(dst[:-1])
        if self.table_exists(dst):
            raise TableAlreadyExistsError(f"Cannot rename {'.'.join(src)} to {'.'.join(dst)}: target exists")
        try:
            with self._db.transaction() as execute:
                cur = execute(
                    f"UPDATE {TABLES} SET table_namespace = ?, table_name = ? "
                    "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ?",
                    (identifier_to_string(dst[:-1]), dst[-1], self.name, identifier_to_string(src[:-1]), src[-1]),
                )
                if cur.rowcount == 0:
                    raise NoSuchTableError(f"Cannot rename {'.'.join(src)}: table does not exist")
        except self._db.errors() as e:
            if self._db.is_integrity_error(e):
                raise TableAlreadyExistsError(f"Cannot rename {'.'.join(src)} to {'.'.join(dst)}: target exists") from e
            raise

    # -- commit -------------------------------------------------------------------------------

    def commit_table(self, table: Table, base, new) -> Table:  # noqa: ANN001
        """Write the new metadata file, then swap the pointer from ``table.metadata_location`` to it."""
        ident = table.identifier
        name = ".".join(ident)
        if base is not table.metadata and base != table.metadata:
            raise ValidationError(f"Cannot commit {name}: base metadata is not the metadata the table was loaded with")
        check_commit_folders(self, ident, base, new)
        expected = table.metadata_location
        location = next_metadata_location(new, expected)
        try:
            self.io.write(location, metadata_file_bytes(new, location), overwrite=False)
        except OSError as e:
            self.io.delete(location)
            raise CommitFailedError(f"Cannot commit {name}: writing {location} failed: {e}", table=name) from e
        params = (location, expected, self.name, identifier_to_string(ident[:-1]), ident[-1], expected)
        try:
            with self._db.transaction() as execute:
                updated = execute(
                    f"UPDATE {TABLES} SET metadata_location = ?, previous_metadata_location = ? "
                    "WHERE catalog_name = ? AND table_namespace = ? AND table_name = ? AND metadata_location = ?",
                    params,
                ).rowcount
        except self._db.errors() as e:
            if self._db.is_not_applied(e):
                self.io.delete(location)
                raise CommitFailedError(f"Cannot commit {name}: catalog busy ({e})", table=name) from e
            self._decide_unknown(name, ident, location, e)
            updated = 1
        if updated != 1:
            self.io.delete(location)
            current = self._current_location(ident)
            if current is None:
                raise NoSuchTableError(f"Cannot commit {name}: table was dropped from catalog {self.name}")
            raise CommitFailedError(
                f"Cannot commit {name}: metadata moved from {expected} to {current} (concurrent commit)", table=name
            )
        delete_removed_metadata_files(self.io, base, new)
        return Table(ident, new, location, self.io, self)

    def _decide_unknown(self, name: str, ident: Identifier, location: str, error: BaseException) -> None:
        """After an unexpected database error, succeed only if the row visibly points at ``location``."""
        try:
            if self._current_location(ident) == location:
                return
        except Exception as check_error:  # noqa: BLE001 -- any failure here leaves the outcome unknown
            raise CommitStateUnknownError(
                f"Cannot tell whether the commit of {name} to {location} happened: {error}; "
                "check the table before retrying",
                table=name,
                cause=check_error,
            ) from error
        raise CommitStateUnknownError(
            f"Cannot tell whether the commit of {name} to {location} happened: {error}; check the table before retrying",
            table=name,
            cause=error,
        ) from error


def _string_props(props: Mapping[str, str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in (props or {}).items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ValidationError(f"Invalid {what}: {k!r} = {v!r}; keys and values must be strings")
        out[k] = v
    return out
