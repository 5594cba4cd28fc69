"""The metastore a classic Spark session opens itself (no ``uri``: Spark's Hive support over, for
example, its embedded Derby), reached through the session's JVM with the Hive client classes pyspark
ships (Hive 2.3).  This is the one module of the package that uses py4j: a Spark Connect session has
no JVM in the client process (its metastore is the server's), so there a hive catalog needs
``uri=thrift://...`` (:mod:`procedures.catalog.hive_thrift`).

Without a lock the commit is atomic by itself: one transaction on the metastore's database that
swaps ``metadata_location`` only where it still names the base (``UPDATE TABLE_PARAMS ... WHERE
PARAM_VALUE = <base>``).  With locks on, the metastore's exclusive table lock is taken around it too,
so Iceberg Java writers (which check-then-alter under that lock) cannot overwrite it; a metastore
that refuses locks falls back to the transaction alone.  When the session's Hadoop conf names a
metastore server (``hive.metastore.uris``), the commit is the lock, check and alter of a server.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any, Mapping

from procedures.catalog.hive import (
    METADATA_LOCATION,
    HiveDatabase,
    HiveTable,
    await_lock,
    hive_user,
    lock_refused_error,
)
from procedures.errors import CatalogConfigError, NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError

__all__ = ["JvmMetastoreClient"]

log = logging.getLogger(__name__)

class JvmMetastoreClient:
    """A :class:`~procedures.catalog.hive.MetastoreClient` over the Hive client classes in a classic
    Spark session's JVM, on the session's own metastore configuration (``javax.jdo.option.ConnectionURL``
    of Spark's embedded Derby, or the ``hive.metastore.uris`` of its Hadoop conf).  ``uri`` overrides
    the latter (the catalog's ``uri`` goes to the thrift client instead, see the module doc).  The
    session is only a gateway to the JVM: nothing here imports pyspark.
    """

    def __init__(self, session: Any, uri: str | None = None, *, lock_enabled: bool = True,
                 conf: Mapping[str, str] | None = None) -> None:
        jvm = getattr(session, "_jvm", None)
        jsession = getattr(session, "_jsparkSession", None)
        if jvm is None or jsession is None:
            raise CatalogConfigError(
                "A hive catalog on the session's own metastore needs a classic Spark session (a JVM in this process); "
                "on Spark Connect set the catalog's uri=thrift://host:port of a metastore server")
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
        t.setOwner(table.owner or hive_user())
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
        request = api.LockRequest(components, hive_user(), socket.gethostname())
        try:
            response = self._client.lock(request)
        except Exception as e:  # noqa: BLE001 -- a metastore without lock support refuses every time
            raise lock_refused_error(self.uri, database, name, _short(e)) from e
        lock_id = response.getLockid()

        def check() -> str:
            return str(self._client.checkLock(lock_id).getState())

        await_lock(str(response.getState()), check, lambda: self._client.unlock(lock_id), database, name)
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

