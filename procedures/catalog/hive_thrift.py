"""A :class:`~procedures.catalog.hive.MetastoreClient` that talks to a Hive metastore server over its
thrift API (``uri=thrift://host:port``), from the driver process alone: it needs no Spark session, so
it serves classic and Spark Connect sessions alike (and a catalog opened from a dict of properties).

The thrift bindings come from `pymetastore <https://pypi.org/project/pymetastore/>`_ (the generated
``ThriftHiveMetastore`` client of the Hive metastore API, over the ``thrift`` runtime), installed by
the optional extra ``hive``: ``pip install 'iceberg-procedures[hive]'``.  Only calls every metastore
since Hive 2.3 serves are used (``get_table``, ``alter_table_with_environment_context``, ``lock``,
``check_lock``, ``unlock``...).

The commit is Iceberg Java's: take the metastore's exclusive table lock, read and compare
``metadata_location``, alter the table, unlock.  A server that refuses locks (no transaction tables)
fails the commit with a :class:`~procedures.errors.CatalogConfigError` naming ``lock-enabled``;
``lock-enabled=false`` commits by an unguarded check-then-alter.  Like Java, the alter asks the
metastore not to recompute the table's statistics (``DO_NOT_UPDATE_STATS``): ``numFiles``,
``numRows`` and ``totalSize`` are the snapshot's, not a listing of the table's folder.

Plain (unauthenticated) binary thrift over TCP only: a Kerberos (SASL) metastore is not supported.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from procedures.catalog.hive import (
    METADATA_LOCATION,
    HiveDatabase,
    HiveTable,
    await_lock,
    hive_user,
    lock_refused_error,
)
from procedures.errors import CatalogConfigError, NamespaceAlreadyExistsError, TableAlreadyExistsError

__all__ = ["ThriftMetastoreClient", "parse_thrift_uris", "HIVE_EXTRA"]

log = logging.getLogger(__name__)

#: how to install the thrift bindings (named by every error about them)
HIVE_EXTRA = "pip install 'iceberg-procedures[hive]'"
#: Hive's own default of ``hive.metastore.client.socket.timeout``
DEFAULT_TIMEOUT_S = 600.0
TIMEOUT_KEY = "hive.metastore.client.socket.timeout"
#: the EnvironmentContext key that keeps the metastore from listing the table's folder on alter
_NO_STATS = {"DO_NOT_UPDATE_STATS": "true"}
_TIME_UNITS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def _bindings() -> tuple[Any, Any, Any, Any, Any]:
    """The thrift runtime and the metastore's generated client and types, or a CatalogConfigError
    naming the extra that installs them."""
    try:
        from pymetastore.hive_metastore import ThriftHiveMetastore, ttypes  # noqa: PLC0415 -- optional extra
        from thrift.protocol import TBinaryProtocol  # noqa: PLC0415
        from thrift.transport import TSocket, TTransport  # noqa: PLC0415
    except ImportError as e:
        raise CatalogConfigError(
            f"A hive catalog with a thrift:// uri needs the Hive metastore thrift client ({e.name} is missing): "
            f"{HIVE_EXTRA}"
        ) from None
    return ThriftHiveMetastore, ttypes, TBinaryProtocol, TSocket, TTransport


def parse_thrift_uris(uri: str, key: str = "uri") -> list[tuple[str, int]]:
    """``thrift://host:port[,thrift://host2:port2...]`` (Hive's ``hive.metastore.uris`` form) as
    (host, port) pairs, tried in order; anything else is a CatalogConfigError naming ``key``."""
    out = []
    for part in (p.strip() for p in str(uri).split(",")):
        parsed = urlsplit(part)
        try:
            port = parsed.port
        except ValueError:
            port = None
        if parsed.scheme != "thrift" or not parsed.hostname or port is None:
            raise CatalogConfigError(f"{key}: expected thrift://host:port for a hive catalog, got {part!r}")
        out.append((parsed.hostname, port))
    return out


def _seconds(value: Any) -> float:
    """Hive's time values: ``600``, ``600s``, ``2min``, ``1500ms`` (a bare number is seconds)."""
    text = str(value).strip().lower()
    for unit in sorted(_TIME_UNITS, key=len, reverse=True):
        if text.endswith(unit) and text[: -len(unit)].strip().replace(".", "", 1).isdigit():
            return float(text[: -len(unit)]) * _TIME_UNITS[unit]
    try:
        return float(text)
    except ValueError:
        raise CatalogConfigError(f"hadoop.{TIMEOUT_KEY}: expected a time such as 600s, got {value!r}") from None


class ThriftMetastoreClient:
    """A metastore server reached over thrift (see the module doc).

    One connection per client, opened on first use and used by one call at a time (the thrift client
    is not thread-safe); a broken connection is reopened by the next call.  ``conf`` takes the
    catalog's ``hadoop.*`` keys: ``hive.metastore.client.socket.timeout`` is honoured, others are
    ignored (they configure Java's client).
    """

    def __init__(self, uri: str, *, lock_enabled: bool = True, conf: Mapping[str, str] | None = None) -> None:
        self.uri = uri
        self.lock_enabled = lock_enabled
        self._addresses = parse_thrift_uris(uri)
        self._timeout = _seconds((conf or {}).get(TIMEOUT_KEY, DEFAULT_TIMEOUT_S))
        self._service, self._types, self._protocol, self._socket, self._transport_module = _bindings()
        self._mutex = threading.RLock()
        self._client: Any = None
        self._transport: Any = None

    # -- the connection --------------------------------------------------------------------------

    def _open(self) -> Any:
        errors = []
        for host, port in self._addresses:
            sock = self._socket.TSocket(host, port)
            sock.setTimeout(self._timeout * 1000)
            transport = self._transport_module.TBufferedTransport(sock)
            try:
                transport.open()
            except Exception as e:  # noqa: BLE001 -- next address; all failing is reported below
                errors.append(f"{host}:{port}: {e}")
                continue
            self._transport = transport
            self._client = self._service.Client(self._protocol.TBinaryProtocol(transport))
            return self._client
        raise CatalogConfigError(
            f"Cannot reach the Hive metastore {self.uri} ({'; '.join(errors)}): check the catalog's uri and that "
            "the metastore server is running"
        )

    def close(self) -> None:
        """Close the connection (the next call opens a new one)."""
        with self._mutex:
            if self._transport is not None:
                try:
                    self._transport.close()
                except Exception:  # noqa: BLE001 -- closing a dead socket
                    pass
            self._client = self._transport = None

    def _call(self, method: str, *args: Any, missing: Any = None, exists: type[Exception] | None = None) -> Any:
        """``client.<method>(*args)``; NoSuchObjectException returns ``missing`` (a sentinel when
        given), AlreadyExistsException raises ``exists`` when given."""
        types = self._types
        with self._mutex:
            client = self._client or self._open()
            try:
                return getattr(client, method)(*args)
            except types.NoSuchObjectException:
                if missing is None:
                    raise
                return missing
            except types.AlreadyExistsException as e:
                if exists is None:
                    raise
                raise exists(f"Already exists in the metastore: {e.message}") from e
            except (types.MetaException, types.InvalidOperationException, types.NoSuchLockException,
                    types.TxnOpenException):
                raise  # the server answered: the connection is fine
            except Exception:
                # a transport or protocol error leaves the connection in an unknown state
                self.close()
                raise

    # -- databases -------------------------------------------------------------------------------

    def get_database(self, name: str) -> HiveDatabase | None:
        """The database, or None."""
        db = self._call("get_database", name, missing=_MISSING)
        if db is _MISSING:
            return None
        return HiveDatabase(db.name, db.locationUri, dict(db.parameters or {}), db.description)

    def list_databases(self) -> list[str]:
        """Every database name."""
        return list(self._call("get_all_databases"))

    def create_database(self, database: HiveDatabase) -> None:
        """Create a database."""
        db = self._types.Database(name=database.name, description=database.description or "",
                                  locationUri=database.location, parameters=dict(database.parameters))
        self._call("create_database", db, exists=NamespaceAlreadyExistsError)

    def set_database_parameters(self, name: str, parameters: Mapping[str, str]) -> None:
        """Replace the database's parameters."""
        db = self._call("get_database", name)
        db.parameters = dict(parameters)
        self._call("alter_database", name, db)

    def drop_database(self, name: str) -> None:
        """Drop an (empty) database, keeping its folder."""
        self._call("drop_database", name, False, False)

    # -- tables ------------------------------------------------------------------------------------

    def get_table(self, database: str, name: str) -> HiveTable | None:
        """The table, or None."""
        t = self._call("get_table", database, name, missing=_MISSING)
        if t is _MISSING:
            return None
        sd = t.sd
        cols = tuple((c.name, c.type) for c in ((sd.cols if sd is not None else None) or []))
        return HiveTable(t.dbName, t.tableName, t.tableType, sd.location if sd is not None else None,
                         dict(t.parameters or {}), cols, t.owner)

    def list_tables(self, database: str) -> list[str]:
        """Every table name of the database."""
        return list(self._call("get_all_tables", database))

    def create_table(self, table: HiveTable) -> None:
        """Register a table as Iceberg Java does (external, no partition keys, file formats that Hive
        cannot read directly)."""
        types = self._types
        sd = types.StorageDescriptor(
            cols=[types.FieldSchema(name=n, type=t, comment=None) for n, t in table.columns],
            location=table.location,
            inputFormat="org.apache.hadoop.mapred.FileInputFormat",
            outputFormat="org.apache.hadoop.mapred.FileOutputFormat",
            serdeInfo=types.SerDeInfo(serializationLib="org.apache.hadoop.hive.serde2.lazy.LazySimpleSerDe",
                                      parameters={}),
        )
        now = int(time.time())
        t = types.Table(tableName=table.name, dbName=table.database, owner=table.owner or hive_user(),
                        createTime=now, lastAccessTime=now, sd=sd, partitionKeys=[],
                        parameters=dict(table.parameters), tableType=table.table_type)
        self._call("create_table", t, exists=TableAlreadyExistsError)

    def drop_table(self, database: str, name: str) -> None:
        """Unregister a table, leaving its files (Iceberg owns them)."""
        self._call("drop_table", database, name, False)

    def rename_table(self, database: str, name: str, new_database: str, new_name: str) -> None:
        """Rename a table in the metastore."""
        t = self._call("get_table", database, name)
        t.dbName = new_database
        t.tableName = new_name
        self._alter(database, name, t)

    def _alter(self, database: str, name: str, table: Any) -> None:
        context = self._types.EnvironmentContext(properties=dict(_NO_STATS))
        self._call("alter_table_with_environment_context", database, name, table, context)

    # -- the commit ----------------------------------------------------------------------------------

    def swap_parameters(self, database: str, name: str, expected_location: str,
                        parameters: Mapping[str, str], *, lock: bool | None = None) -> bool:
        """Set ``parameters`` if ``metadata_location`` still is ``expected_location``; False if it moved.

        ``lock`` (default: the client's ``lock_enabled``) takes the metastore's exclusive table lock
        around the check and the alter, as Iceberg Java does; without it the check-then-alter is
        unguarded (two writers racing within milliseconds could both win)."""
        use_lock = self.lock_enabled if lock is None else lock
        lock_id = self._lock(database, name) if use_lock else None
        if not use_lock:
            log.debug("committing %s.%s without a metastore lock (lock-enabled=false)", database, name)
        try:
            t = self._call("get_table", database, name)
            params = dict(t.parameters or {})
            if params.get(METADATA_LOCATION) != expected_location:
                return False
            params.update(parameters)
            t.parameters = params
            self._alter(database, name, t)
            return True
        finally:
            if lock_id is not None:
                self._unlock(lock_id, database, name)

    def _unlock(self, lock_id: int, database: str, name: str) -> None:
        try:
            self._call("unlock", self._types.UnlockRequest(lockid=lock_id))
        except Exception:  # noqa: BLE001 -- the lock times out on the server
            log.warning("Could not release metastore lock %s on %s.%s", lock_id, database, name)

    def _lock(self, database: str, name: str) -> int:
        types = self._types
        component = types.LockComponent(type=types.LockType.EXCLUSIVE, level=types.LockLevel.TABLE,
                                        dbname=database, tablename=name)
        request = types.LockRequest(component=[component], user=hive_user(), hostname=socket.gethostname())
        try:
            response = self._call("lock", request)
        except CatalogConfigError:
            raise
        except Exception as e:  # noqa: BLE001 -- a metastore without lock support refuses every time
            raise lock_refused_error(self.uri, database, name, _message(e)) from e
        state_name = types.LockState._VALUES_TO_NAMES

        def check() -> str:
            nonlocal response
            response = self._call("check_lock", types.CheckLockRequest(lockid=response.lockid))
            return state_name.get(response.state, str(response.state))

        unlock: Callable[[], None] = lambda: self._unlock(response.lockid, database, name)  # noqa: E731
        await_lock(state_name.get(response.state, str(response.state)), check, unlock, database, name)
        return response.lockid


_MISSING = object()


def _message(e: BaseException) -> str:
    text = getattr(e, "message", None) or str(e)
    return f"{type(e).__name__}: {text}".splitlines()[0]
