"""Our JdbcCatalog and Iceberg Java's on one catalog database (SQLite file, PostgreSQL database).

Both must agree on the catalog tables (``iceberg_tables``, ``iceberg_namespace_properties``) and on the
schema versions of ``jdbc.schema-version``: V0 (no ``iceberg_type``; what Java creates by default) and V1.
Whichever side creates the database, the other loads, lists, reads and commits to the first one's
tables, and Java reads ours (except Java on a SQLite database it did not create: ``STALE_SQLITE``).  Java's catalog is a Spark catalog with the same name as ours, configured
from the same ``spark.sql.catalog.<name>.*`` keys (the name is the rows' ``catalog_name``).
"""

from __future__ import annotations

import sqlite3
import uuid

import pyarrow as pa
import pytest

import procedures
from procedures.framework.context import open_catalog
from tests.helpers.catalogs import java_jdbc_conf, jdbc_database
from tests.oracles import assert_rows_equal, java_read, spark_df_to_arrow

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]

KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
CATALOG_TABLES = ("iceberg_tables", "iceberg_namespace_properties")


def _fresh(spark, request, kind: str, **properties: str) -> tuple[str, dict, str]:
    """A new database with Java's catalog configured on it (not yet initialized): name, keys, uri."""
    name = f"jc{kind[:2]}{uuid.uuid4().hex[:10]}"
    uri, user = jdbc_database(request, kind, name)
    return name, java_jdbc_conf(spark, name, uri, request.getfixturevalue("tmp_path") / "wh", user,
                                **properties), uri


def _columns(uri: str, conf: dict, name: str) -> dict[str, list[tuple]]:
    """Per catalog table: its columns (name, type, nullable) in order, and the primary key."""
    out: dict[str, list[tuple]] = {}
    if uri.startswith("jdbc:sqlite:"):
        conn = sqlite3.connect(uri[len("jdbc:sqlite:"):])
        try:
            for table in CATALOG_TABLES:
                info = conn.execute(f"PRAGMA table_info({table})").fetchall()
                # (cid, name, type, notnull, default, pk position)
                out[table] = [(r[1], r[2].upper().replace(" ", ""), bool(r[3]), r[5]) for r in info]
        finally:
            conn.close()
        return out
    import psycopg

    host_port, db = uri[len("jdbc:postgresql://"):].split("/", 1)
    host, port = host_port.split(":")
    user = conf[f"spark.sql.catalog.{name}.jdbc.user"]
    with psycopg.connect(host=host, port=int(port), dbname=db, user=user) as conn:
        for table in CATALOG_TABLES:
            cols = conn.execute(
                "SELECT column_name, data_type, character_maximum_length, is_nullable FROM information_schema.columns "
                "WHERE table_name = %s ORDER BY ordinal_position", (table,)).fetchall()
            pk = [r[0] for r in conn.execute(
                "SELECT k.column_name FROM information_schema.table_constraints c JOIN "
                "information_schema.key_column_usage k ON c.constraint_name = k.constraint_name "
                "WHERE c.table_name = %s AND c.constraint_type = 'PRIMARY KEY' ORDER BY k.ordinal_position",
                (table,)).fetchall()]
            out[table] = [(c[0], c[1], c[2], c[3], c[0] in pk) for c in cols] + [("primary key", *pk)]
    return out


def _rows(spark, table: str) -> list[int]:
    return sorted(spark_df_to_arrow(procedures.read_table(spark, table)).column("id").to_pylist())


def _java_ids(spark, table: str) -> list[int]:
    spark.sql(f"REFRESH TABLE {table}")
    return sorted(java_read(spark, table).column("id").to_pylist())


def _both_ways(spark, name: str, ours) -> None:
    """Java's table ``db.java_t`` exists with rows 1, 2: we load and extend it, we create ``db.our_t``
    and Java loads and extends it; both list both; Java drops ours and we no longer see it."""
    t = ours.load_table(("db", "java_t"))
    assert t.metadata.properties.get("by") == "java"
    assert _rows(spark, f"{name}.db.java_t") == [1, 2]
    assert_rows_equal(spark_df_to_arrow(procedures.read_table(spark, f"{name}.db.java_t")),
                      java_read(spark, f"{name}.db.java_t"), key="id", label="java's table read by us")
    procedures.sql(spark, f"INSERT INTO {name}.db.java_t VALUES (3, 'ours')")
    assert _java_ids(spark, f"{name}.db.java_t") == [1, 2, 3]

    procedures.sql(spark, f"CREATE TABLE {name}.db.our_t (id bigint, s string) USING iceberg "
                          "TBLPROPERTIES ('by'='procedures')")
    procedures.sql(spark, f"INSERT INTO {name}.db.our_t VALUES (10, 'ours')")
    assert _java_ids(spark, f"{name}.db.our_t") == [10]
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {name}.db.our_t").collect()}
    assert props["by"] == "procedures"
    spark.sql(f"INSERT INTO {name}.db.our_t VALUES (11, 'java')")
    assert _rows(spark, f"{name}.db.our_t") == [10, 11]
    assert ours.load_table(("db", "our_t")).metadata.current_snapshot().summary["added-records"] == "1"

    java_tables = sorted(r["tableName"] for r in spark.sql(f"SHOW TABLES IN {name}.db").collect())
    assert java_tables == ["java_t", "our_t"]
    assert ours.list_tables("db") == [("db", "java_t"), ("db", "our_t")]
    assert ours.load_namespace_properties("db").get("k") == "java"

    spark.sql(f"DROP TABLE {name}.db.our_t")
    assert not ours.table_exists(("db", "our_t"))
    assert ours.list_tables("db") == [("db", "java_t")]


def _java_creates(spark, name: str) -> None:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}.db WITH DBPROPERTIES ('k'='java')")
    spark.sql(f"CREATE TABLE {name}.db.java_t (id bigint, s string) USING iceberg TBLPROPERTIES ('by'='java')")
    spark.sql(f"INSERT INTO {name}.db.java_t VALUES (1, 'java'), (2, 'java')")


@pytest.mark.parametrize("kind", KINDS)
def test_catalog_tables_are_javas(spark, request, kind):
    """The tables we create on a new database are the ones Java creates with jdbc.schema-version=V1
    (its V0 tables plus iceberg_type), column for column."""
    java_name, java_conf, java_uri = _fresh(spark, request, kind, **{"jdbc.schema-version": "V1"})
    spark.sql(f"SHOW NAMESPACES IN {java_name}").collect()  # Java initializes its database
    our_name, our_conf, our_uri = _fresh(spark, request, kind)
    open_catalog(our_name, our_conf)
    javas, ours = _columns(java_uri, java_conf, java_name), _columns(our_uri, our_conf, our_name)
    assert any(c[0] == "iceberg_type" for c in javas["iceberg_tables"])
    assert ours == javas


@pytest.mark.parametrize("kind", KINDS)
def test_java_first_v0_database(spark, request, kind):
    """Java creates the database at its default V0; we use it at V0 (no iceberg_type column, rows
    without a type), then with jdbc.schema-version=V1 move it to V1 under Java's open catalog."""
    name, conf, uri = _fresh(spark, request, kind)
    _java_creates(spark, name)
    assert not any(c[0] == "iceberg_type" for c in _columns(uri, conf, name)["iceberg_tables"])
    ours = open_catalog(name, conf)
    _both_ways(spark, name, ours)
    assert not any(c[0] == "iceberg_type" for c in _columns(uri, conf, name)["iceberg_tables"])

    # Java's catalog was initialized at V0 and stays so; our catalogs opened from now on move the database
    spark.conf.set(f"spark.sql.catalog.{name}.jdbc.schema-version", "V1")
    v1 = open_catalog(name, {**conf, f"spark.sql.catalog.{name}.jdbc.schema-version": "V1"})
    assert any(c[0] == "iceberg_type" for c in _columns(uri, conf, name)["iceberg_tables"])
    procedures.sql(spark, f"CREATE TABLE {name}.db.v1_t (id bigint) USING iceberg")
    spark.sql(f"CREATE TABLE {name}.db.java_v0_t (id bigint) USING iceberg")  # Java still writes V0 rows
    spark.sql(f"INSERT INTO {name}.db.v1_t VALUES (7)")
    assert _rows(spark, f"{name}.db.v1_t") == [7]
    assert v1.list_tables("db") == [("db", "java_t"), ("db", "java_v0_t"), ("db", "v1_t")]
    types = dict(v1._query("SELECT table_name, iceberg_type FROM iceberg_tables"))
    assert types == {"java_t": None, "java_v0_t": None, "v1_t": "TABLE"}


#: Iceberg Java 1.10.2 opening a SQLite catalog database that already has its tables does not see commits
#: made after its catalog started (after our INSERT and a REFRESH, Java reads the table as it was).  The
#: likely cause: its initialization leaves its metadata queries (``getTables``, ``getColumns``) unclosed
#: when they find a row, which keeps a read transaction, and so a WAL snapshot, open on a pooled
#: connection; on a database Java creates itself they find nothing and end.  Hence the shared catalogs of
#: the other tests let Java create the database.  Not seen on PostgreSQL.
#: So this case runs on PostgreSQL only: on SQLite the outcome depends on Java's connection pool, and a
#: test that passes either way proves nothing.  docs/interfaces.md recommends PostgreSQL for a catalog
#: shared with Java.


@pytest.mark.parametrize("kind", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_ours_first_v1_database(spark, request, kind):
    """We create the database (V1); Java, with its default settings, finds iceberg_type and uses V1."""
    name, conf, uri = _fresh(spark, request, kind)
    ours = open_catalog(name, conf)
    assert any(c[0] == "iceberg_type" for c in _columns(uri, conf, name)["iceberg_tables"])
    _java_creates(spark, name)
    _both_ways(spark, name, ours)
    rows = sorted(ours._query("SELECT catalog_name, table_namespace, table_name, iceberg_type FROM iceberg_tables"))
    assert rows == [(name, "db", "java_t", "TABLE")]
    expected = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
    assert_rows_equal(java_read(spark, f"{name}.db.java_t").select(["id"]), expected, key="id", label="java")
