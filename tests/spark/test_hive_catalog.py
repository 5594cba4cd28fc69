"""The hive catalog against a real Hive metastore (Spark's bundled Hive 2.3 over embedded Derby, the
run's one session) and against Iceberg Java's HiveCatalog on the same metastore (``jhive``).

Our catalog is ``ohive`` (``spark.sql.catalog.ohive.type=hive``: the same keys configure Java's).
Tables created by either side are read by the other, commits interleave, two writers from one base
cannot both win, and tables that are not Iceberg are refused with a message that says so.
"""

from __future__ import annotations

import threading

import pytest

import procedures
from procedures.spark.catalog_conf import load_catalog
from procedures.catalog.hive import HiveCatalog
from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import (
    CatalogConfigError, CommitFailedError, NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError,
    ValidationError,
)
from procedures.spark.dml import append
from procedures.spark.read import read_table
from procedures.spark.session import catalog_for
from procedures.spec.manifest.model import DataFile, FileFormat
from tests.metastore_server import start_metastore, stop_metastore
from tests.oracles import assert_rows_equal, duckdb_read, java_read, pyiceberg_read

pytestmark = pytest.mark.spark

FAST = RetryPolicy(num_retries=20, min_wait_ms=1, max_wait_ms=20, total_timeout_ms=60_000)


@pytest.fixture(scope="module")
def hive(spark):
    spark.conf.set("spark.sql.catalog.ohive.type", "hive")
    cat = catalog_for(spark, "ohive")
    assert isinstance(cat, HiveCatalog)
    if not cat.namespace_exists("hdb"):
        cat.create_namespace("hdb")
    return cat


def _fresh(spark, name: str) -> str:
    spark.sql(f"DROP TABLE IF EXISTS jhive.hdb.{name} PURGE")
    return f"hdb.{name}"


def _rows(df_or_table) -> list[tuple]:
    return sorted(tuple(r) for r in df_or_table.collect())


@pytest.mark.java
def test_namespaces_are_hive_databases(spark, hive):
    assert ("hdb",) in hive.list_namespaces()
    assert "hdb" in [r[0] for r in spark.sql("SHOW NAMESPACES IN jhive").collect()]
    with pytest.raises(NamespaceAlreadyExistsError):
        hive.create_namespace("hdb")
    hive.create_namespace("hdb_props", {"owner-team": "data"})
    assert hive.load_namespace_properties("hdb_props")["owner-team"] == "data"
    hive.update_namespace_properties("hdb_props", removals=["owner-team"], updates={"k": "v"})
    props = hive.load_namespace_properties("hdb_props")
    assert props.get("k") == "v" and "owner-team" not in props
    hive.drop_namespace("hdb_props")
    assert not hive.namespace_exists("hdb_props")


@pytest.mark.java
def test_java_table_read_and_written_by_us(spark, hive):
    ident = _fresh(spark, "java_made")
    spark.sql(f"CREATE TABLE jhive.{ident} (id bigint, data string) USING iceberg PARTITIONED BY (data) "
              "TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO jhive.{ident} VALUES (1, 'a'), (2, 'b')")
    t = hive.load_table(ident)
    assert t.metadata.current_snapshot() is not None
    assert _rows(read_table(spark, f"ohive.{ident}")) == [(1, "a"), (2, "b")]
    append(spark, f"ohive.{ident}", spark.createDataFrame([(3, "c")], "id bigint, data string"))
    spark.sql(f"REFRESH TABLE jhive.{ident}")
    assert _rows(spark.table(f"jhive.{ident}")) == [(1, "a"), (2, "b"), (3, "c")]
    spark.sql(f"INSERT INTO jhive.{ident} VALUES (4, 'd')")
    t = hive.load_table(ident)
    rows = java_read(spark, f"jhive.{ident}")
    assert_rows_equal(pyiceberg_read(t.metadata_location), rows, key="id", label="pyiceberg")
    assert_rows_equal(duckdb_read(t.metadata_location), rows, key="id", label="duckdb")
    assert rows.num_rows == 4
    # the metastore keeps Java's bookkeeping: previous pointer and the summary parameters
    params = hive.client.get_table("hdb", "java_made").parameters
    assert params["previous_metadata_location"] != params["metadata_location"]
    assert params["table_type"] == "ICEBERG" and params["numRows"] == "4"


@pytest.mark.java
def test_our_table_read_by_java(spark, hive):
    ident = _fresh(spark, "ours_made")
    procedures.sql(spark, f"CREATE TABLE ohive.{ident} (id bigint, data string) USING iceberg "
                          "TBLPROPERTIES ('format-version'='2')")
    append(spark, f"ohive.{ident}", spark.createDataFrame([(1, "x"), (2, "y")], "id bigint, data string"))
    assert _rows(spark.table(f"jhive.{ident}")) == [(1, "x"), (2, "y")]
    assert ("hdb", "ours_made") in hive.list_tables("hdb")
    hive_table = hive.client.get_table("hdb", "ours_made")
    assert hive_table.table_type == "EXTERNAL_TABLE" and hive_table.parameters["EXTERNAL"] == "TRUE"
    assert hive_table.columns == (("id", "bigint"), ("data", "string"))
    # Java's procedures work on our table, and we see their commit
    spark.sql(f"CALL jhive.system.rewrite_data_files(table => '{ident}', options => map('min-input-files', '1'))")
    assert hive.load_table(ident).metadata.current_snapshot().summary["operation"] == "replace"
    with pytest.raises(TableAlreadyExistsError):
        procedures.sql(spark, f"CREATE TABLE ohive.{ident} (id bigint) USING iceberg")


@pytest.mark.java
def test_two_writers_from_one_base_cannot_both_win(spark, hive):
    ident = _fresh(spark, "race")
    procedures.sql(spark, f"CREATE TABLE ohive.{ident} (id bigint) USING iceberg")
    base = hive.load_table(ident)
    stale = hive.load_table(ident)

    def files(i: int) -> list[DataFile]:
        return [DataFile(f"{base.location}/data/f{i}.parquet", FileFormat.PARQUET, (), 1, 10)]

    first = commit(base, [FastAppend(files(1))], policy=RetryPolicy(num_retries=0))
    with pytest.raises(CommitFailedError):
        hive.commit_table(stale, stale.metadata, first.metadata)
    assert hive.load_table(ident).metadata_location == first.metadata_location
    # the swap itself is conditional: a stale expected pointer changes nothing
    assert not hive.client.swap_parameters("hdb", "race", stale.metadata_location,
                                           {"metadata_location": "file:/nowhere.metadata.json"})
    assert hive.load_table(ident).metadata_location == first.metadata_location
    # many concurrent writers with retries: every commit lands exactly once
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            commit(hive.load_table(ident), [FastAppend(files(100 + i))], policy=FAST)
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    md = hive.load_table(ident).metadata
    assert len(md.snapshots) == 5 and md.current_snapshot().summary["total-data-files"] == "5"


def test_hive_tables_that_are_not_iceberg_are_refused(spark, hive):
    spark.sql("DROP TABLE IF EXISTS spark_catalog.hdb.plain")
    spark.sql("CREATE TABLE spark_catalog.hdb.plain (id bigint) USING parquet")
    with pytest.raises(NoSuchTableError, match="not an Iceberg table"):
        hive.load_table("hdb.plain")
    assert ("hdb", "plain") not in hive.list_tables("hdb")
    with pytest.raises(NoSuchTableError, match="Table does not exist"):
        hive.load_table("hdb.missing")


@pytest.mark.java
def test_rename_register_and_drop(spark, hive):
    ident = _fresh(spark, "to_rename")
    _fresh(spark, "renamed")
    _fresh(spark, "registered")
    procedures.sql(spark, f"CREATE TABLE ohive.{ident} (id bigint) USING iceberg")
    append(spark, f"ohive.{ident}", spark.createDataFrame([(7,)], "id bigint"))
    hive.rename_table(ident, "hdb.renamed")
    assert not hive.table_exists(ident) and hive.table_exists("hdb.renamed")
    t = hive.load_table("hdb.renamed")
    # the same metadata under a second name would put two tables on one folder (issue 30)
    with pytest.raises(ValidationError, match="hdb.registered.*hdb.renamed"):
        hive.register_table("hdb.registered", t.metadata_location)
    assert not hive.table_exists("hdb.registered")
    hive.drop_table("hdb.renamed")
    hive.register_table("hdb.registered", t.metadata_location)
    assert _rows(spark.table("jhive.hdb.registered")) == [(7,)]  # dropping without purge kept the files
    hive.drop_table("hdb.registered")
    assert not hive.table_exists("hdb.registered")


def test_a_dict_uses_the_running_session_and_a_bad_uri_is_refused(spark):
    # without a session this is a CatalogConfigError naming SparkSession (tests/unit/test_catalog_hadoop.py)
    cat = load_catalog("h", {"spark.sql.catalog.h.type": "hive"})
    assert isinstance(cat, HiveCatalog) and cat.namespace_exists("hdb")
    spark.conf.set("spark.sql.catalog.badhive.type", "hive")
    spark.conf.set("spark.sql.catalog.badhive.uri", "http://localhost:1")
    with pytest.raises(CatalogConfigError, match="thrift://"):
        catalog_for(spark, "badhive")


# ------------------------------------------------------------------------------------ thrift server
@pytest.fixture(scope="module")
def metastore():
    server = start_metastore()
    yield server
    stop_metastore(server)


@pytest.mark.java
def test_a_metastore_server_over_thrift(spark, metastore, tmp_path):
    """Our catalog with ``uri=thrift://...``: tables live in that server, not in the session's metastore;
    the server has no lock support, so a commit says to set lock-enabled=false, and then commits."""
    # the session says lock-enabled=false for Java on embedded Derby: the first catalog overrides it
    for name, lock in (("thrift_locked", "true"), ("thrift_free", "false")):
        spark.conf.set(f"spark.sql.catalog.{name}.type", "hive")
        spark.conf.set(f"spark.sql.catalog.{name}.uri", metastore.uri)
        spark.conf.set(f"spark.sql.catalog.{name}.warehouse", str(tmp_path / "wh"))
        spark.conf.set(f"spark.sql.catalog.{name}.lock-enabled", lock)
    cat = catalog_for(spark, "thrift_locked")
    assert cat.client.uri == metastore.uri
    cat.create_namespace("remote")
    procedures.sql(spark, "CREATE TABLE thrift_locked.remote.t (id bigint) USING iceberg")
    assert ("remote", "t") in cat.list_tables("remote")
    assert not catalog_for(spark, "ohive").namespace_exists("remote")  # not the session's metastore
    before = cat.load_table("remote.t").metadata_location
    with pytest.raises(CatalogConfigError, match="lock-enabled=false"):
        append(spark, "thrift_locked.remote.t", spark.createDataFrame([(1,)], "id bigint"))
    assert cat.load_table("remote.t").metadata_location == before
    assert [p.name for p in (tmp_path / "wh" / "remote.db" / "t" / "metadata").iterdir()] == [before.rsplit("/", 1)[1]]
    append(spark, "thrift_free.remote.t", spark.createDataFrame([(1,), (2,)], "id bigint"))
    t = cat.load_table("remote.t")
    assert t.metadata_location != before
    assert _rows(read_table(spark, "thrift_locked.remote.t")) == [(1,), (2,)]
    assert_rows_equal(pyiceberg_read(t.metadata_location), java_read(spark, t.metadata_location), key="id")


def test_refresh_follows_the_metastore_pointer_and_reads_nothing_else(spark, hive):
    if hive.table_exists("hdb.refreshed"):
        hive.drop_table("hdb.refreshed", purge=True)
    procedures.sql(spark, "CREATE TABLE ohive.hdb.refreshed (id bigint) USING iceberg")
    t, writer = hive.load_table("hdb.refreshed"), hive.load_table("hdb.refreshed")
    held = t.metadata
    assert hive.current_metadata_location("hdb.refreshed") == t.metadata_location
    assert t.refresh().metadata is held  # the pointer did not move: nothing re-read
    moved = commit(writer, [FastAppend([DataFile(f"{t.location}/data/f.parquet", FileFormat.PARQUET, (), 1, 10)])],
                   policy=RetryPolicy(num_retries=0))
    assert t.refresh().metadata_location == moved.metadata_location and len(t.metadata.snapshots) == 1
    hive.drop_table("hdb.refreshed", purge=True)
    with pytest.raises(NoSuchTableError):
        t.refresh()
