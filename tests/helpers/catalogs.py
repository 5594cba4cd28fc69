"""Our catalogs opened beside the Java ones of the shared test session."""

from __future__ import annotations

import importlib
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.catalog.jdbc import JdbcCatalog
from procedures.errors import NoSuchTableError
from procedures.framework.context import open_catalog
from procedures.spark.catalog_conf import conf_from_spark
from tests import postgres_server
from tests.helpers.references import require_jdbc_driver

def local_catalog(kind: str, tmp_path: Path) -> Any:
    """A fresh ``hadoop`` or ``jdbc`` (SQLite) catalog ``local`` on ``<tmp_path>/wh`` with namespace ``db``."""
    wh = str(tmp_path / "wh")
    if kind == "hadoop":
        cat: Any = HadoopCatalog("local", wh)
    else:
        cat = JdbcCatalog("local", f"jdbc:sqlite:{tmp_path / 'catalog.db'}", wh)
    cat.create_namespace("db")
    return cat


#: every catalog kind Iceberg Java and we both serve in the test session (``shared_catalog``)
SHARED_KINDS = ("hadoop", "hive", "sqlite", "postgres")


def ours_on_java_warehouse(spark: Any, java_warehouse: str | Path, name: str = "ours") -> Any:
    """Our hadoop catalog ``name`` on the warehouse of Java's ``jcat`` (configured in the session too,
    so ``CALL <name>.system...`` finds it), with the namespace ``jcat.db`` created."""
    conf = {f"spark.sql.catalog.{name}.type": "hadoop", f"spark.sql.catalog.{name}.warehouse": str(java_warehouse)}
    for k, v in conf.items():
        spark.conf.set(k, v)
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    return open_catalog(name, conf)


@dataclass(frozen=True)
class SharedCatalog:
    """One catalog that Iceberg Java and we both write: ``java`` is the Spark catalog name of Java's
    SparkCatalog (for ``spark.sql``), ``ours`` the name our procedures open it under (for
    ``procedures.call``/``procedures.sql``), ``catalog`` our catalog object."""

    kind: str
    java: str
    ours: str
    catalog: Any


def java_twins(spark: Any, name: str, columns: str, partitioned_by: str = "", props: str = "") -> tuple[str, str]:
    """Two identical empty tables ``jcat.db.<name>_o`` (for ours) and ``jcat.db.<name>_j`` (for Java),
    created with Java SQL; returns their names."""
    mine, java = f"{name}_o", f"{name}_j"
    for n in (mine, java):
        spark.sql(f"DROP TABLE IF EXISTS jcat.db.{n}")
        spark.sql(f"CREATE TABLE jcat.db.{n} ({columns}) USING iceberg"
                  + (f" PARTITIONED BY ({partitioned_by})" if partitioned_by else "")
                  + (f" TBLPROPERTIES ({props})" if props else ""))
    return mine, java


def java_jdbc_conf(spark: Any, name: str, uri: str, warehouse: str | Path, user: str | None = None,
                   **properties: str) -> dict[str, str]:
    """Make Spark catalog ``name`` Iceberg Java's JdbcCatalog on ``uri`` (plus catalog ``properties``)
    and return the ``spark.sql.catalog.<name>.*`` keys, which configure our JdbcCatalog of that name too.
    Both must answer to one name: it is the ``catalog_name`` column of every row either writes.  Java
    initializes the database when Spark first uses the catalog; Spark keeps the plugin for the whole
    session, so use a fresh name for every database."""
    dialect = "sqlite" if uri.startswith("jdbc:sqlite:") else "postgresql"
    require_jdbc_driver(dialect)
    prefix = f"spark.sql.catalog.{name}"
    conf = {f"{prefix}.type": "jdbc", f"{prefix}.uri": uri, f"{prefix}.warehouse": str(warehouse)}
    if user:
        conf[f"{prefix}.jdbc.user"] = user
    if dialect == "sqlite":
        # Java's SQLite driver waits 3 s for the database lock by default (then fails the statement,
        # which Java does not retry); ours waits 30 s (jdbc.busy-timeout-ms)
        conf[f"{prefix}.jdbc.busy_timeout"] = "30000"
    conf.update({f"{prefix}.{k}": v for k, v in properties.items()})
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    for k, v in conf.items():
        spark.conf.set(k, v)
    return conf


def shared_catalog(spark: Any, kind: str, request: pytest.FixtureRequest) -> SharedCatalog:
    """A catalog of ``kind`` (one of :data:`SHARED_KINDS`) reachable from Iceberg Java and from us.

    ``hadoop``: Java's ``jcat`` and our ``ours`` on its warehouse; ``hive``: Java's ``jhive`` and our
    ``ohive`` on the session's metastore; ``sqlite``/``postgres``: one JdbcCatalog name for both on a
    fresh database (a file in the test's temporary folder, or a database on the run's server)."""
    if kind == "hadoop":
        warehouse = request.getfixturevalue("java_warehouse")
        return SharedCatalog(kind, "jcat", "ours", ours_on_java_warehouse(spark, warehouse))
    if kind == "hive":
        spark.conf.set("spark.sql.catalog.ohive.type", "hive")
        return SharedCatalog(kind, "jhive", "ohive", open_catalog("ohive", conf_from_spark(spark)))
    name = f"j{kind[:2]}{uuid.uuid4().hex[:10]}"
    if kind not in SHARED_KINDS:
        raise ValueError(f"unknown catalog kind {kind!r}; expected one of {SHARED_KINDS}")
    uri, user = jdbc_database(request, kind, name)
    conf = java_jdbc_conf(spark, name, uri, request.getfixturevalue("tmp_path") / "wh", user)
    # Java initializes the database first (at its default V0): on a SQLite database that already has
    # the catalog tables, Iceberg Java 1.10.2 keeps reading a stale snapshot of it (see
    # tests/conformance/test_jdbc_catalog_java.py), so its writer would never see our commits
    spark.sql(f"SHOW NAMESPACES IN {name}").collect()
    return SharedCatalog(kind, name, name, open_catalog(name, conf))


def jdbc_database(request: pytest.FixtureRequest, kind: str, name: str) -> tuple[str, str | None]:
    """A new, empty catalog database for a test: ``(jdbc uri, user)``; ``kind`` is ``sqlite`` (a file in
    the test's temporary folder) or ``postgres`` (a database ``name`` on the run's server)."""
    if kind == "sqlite":
        return f"jdbc:sqlite:{request.getfixturevalue('tmp_path') / (name + '.db')}", None
    server = request.getfixturevalue("pg_server")
    return postgres_server.create_database(server, name), server.user


def check_refresh_reads_only_moved_metadata(cat: Any, module: Any, table: Any, bumped: Any, monkeypatch: Any) -> None:
    """``table.refresh()`` on catalog ``cat`` (whose module ``module`` reads metadata through
    ``read_table_metadata``) reads nothing while the table is unchanged, reads the new file once
    after another writer's commit (``bumped(t, **props)`` builds it), and fails once the table is dropped."""
    writer = cat.load_table(table.identifier)
    reads: list[str] = []
    real = module.read_table_metadata
    monkeypatch.setattr(module, "read_table_metadata", lambda io, path: reads.append(path) or real(io, path))
    held = table.metadata
    assert table.refresh() is table and table.metadata is held and reads == []
    committed = cat.commit_table(writer, writer.metadata, bumped(writer, k="v"))
    assert table.refresh().metadata.properties == {"k": "v"}
    assert reads == [committed.metadata_location] == [table.metadata_location]
    cat.drop_table(table.identifier)
    with pytest.raises(NoSuchTableError):
        table.refresh()


def allow_overlap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let tables of our catalogs overlap, as they could before issue 30 (or when another engine made
    them): the overlap check of :mod:`procedures.catalog.overlap` accepts everything until
    ``monkeypatch.undo()``.  On code without the check nothing needs patching."""
    try:
        overlap = importlib.import_module("procedures.catalog.overlap")
    except ImportError:
        return
    monkeypatch.setattr(overlap, "check_no_overlap", lambda *a, **k: None)
