"""The REST catalog with Spark: our procedures on REST-catalog tables, and Iceberg Java's RESTCatalog
(``jrest``, the same server) reading our commits and writing commits we read; concurrent writers of
both kinds over REST lose nothing.

Our catalog is ``orest`` (``spark.sql.catalog.orest.type=rest`` and ``.uri``: the keys Java's takes).
"""

from __future__ import annotations

import threading

import pytest

import procedures
from procedures.catalog.rest import RestCatalog
from procedures.spark.dml import append
from procedures.spark.read import read_table
from procedures.spark.session import catalog_for
from tests.oracles import assert_rows_equal, duckdb_read, java_read, pyiceberg_read
from tests.rest_server import running

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def rest(spark, rest_server):
    spark.conf.set("spark.sql.catalog.orest.type", "rest")
    spark.conf.set("spark.sql.catalog.orest.uri", rest_server.uri)
    cat = catalog_for(spark, "orest")
    assert isinstance(cat, RestCatalog)
    if not cat.namespace_exists("rdb"):
        cat.create_namespace("rdb")
    return cat


@pytest.fixture(scope="module")
def jrest(spark, rest_server):
    """Iceberg Java's RESTCatalog on the same server (Spark 3.5 with the runtime jar only)."""
    spark.conf.set("spark.sql.catalog.jrest", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set("spark.sql.catalog.jrest.type", "rest")
    spark.conf.set("spark.sql.catalog.jrest.uri", rest_server.uri)
    return "jrest"


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_procedures_run_on_rest_tables(spark, rest):
    procedures.sql(spark, "CREATE TABLE orest.rdb.maint (id bigint, data string) USING iceberg "
                          "PARTITIONED BY (data) TBLPROPERTIES ('format-version'='2')")
    for i in range(3):
        append(spark, "orest.rdb.maint", spark.createDataFrame([(i, "a"), (10 + i, "b")], "id bigint, data string"))
    rows = _rows(read_table(spark, "orest.rdb.maint"))
    out = procedures.sql(spark, "CALL orest.system.rewrite_data_files(table => 'rdb.maint', "
                                "options => map('min-input-files', '2'))")
    assert out.collect()[0]["rewritten_data_files_count"] == 6
    procedures.sql(spark, "CALL orest.system.rewrite_manifests('rdb.maint')")
    expired = procedures.sql(spark, "CALL orest.system.expire_snapshots(table => 'rdb.maint', retain_last => 1, "
                                    "older_than => TIMESTAMP '2100-01-01 00:00:00')").collect()[0]
    assert expired["deleted_manifest_lists_count"] >= 3
    orphans = procedures.sql(spark, "CALL orest.system.remove_orphan_files(table => 'rdb.maint', "
                                    "dry_run => true)").collect()
    assert orphans == []
    table = rest.load_table(("rdb", "maint"))
    assert len(table.metadata.snapshots) == 1
    assert _rows(read_table(spark, "orest.rdb.maint")) == rows
    assert_rows_equal(pyiceberg_read(table.metadata_location), duckdb_read(table.metadata_location), key="id")


@pytest.mark.java
def test_java_rest_catalog_sees_ours_and_we_see_theirs(spark, rest, jrest):
    procedures.sql(spark, "CREATE TABLE orest.rdb.both (id bigint, data string) USING iceberg")
    append(spark, "orest.rdb.both", spark.createDataFrame([(1, "x"), (2, "y")], "id bigint, data string"))
    assert _rows(spark.table(f"{jrest}.rdb.both")) == [(1, "x"), (2, "y")]
    spark.sql(f"INSERT INTO {jrest}.rdb.both VALUES (3, 'z')")
    assert _rows(read_table(spark, "orest.rdb.both")) == [(1, "x"), (2, "y"), (3, "z")]
    spark.sql(f"CALL {jrest}.system.rewrite_data_files(table => 'rdb.both', options => map('min-input-files', '1'))")
    table = rest.load_table(("rdb", "both"))
    assert table.metadata.current_snapshot().summary["operation"] == "replace"
    assert_rows_equal(java_read(spark, f"{jrest}.rdb.both"), pyiceberg_read(table.metadata_location), key="id")


@pytest.mark.java
def test_concurrent_writers_over_rest_lose_nothing(spark, rest, jrest):
    procedures.sql(spark, "CREATE TABLE orest.rdb.race (id bigint) USING iceberg")
    errors: list[BaseException] = []

    def ours(worker: int) -> None:
        try:
            for i in range(4):
                append(spark, "orest.rdb.race", spark.createDataFrame([(worker * 100 + i,)], "id bigint"))
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    def java() -> None:
        try:
            for i in range(4):
                spark.sql(f"INSERT INTO {jrest}.rdb.race VALUES ({900 + i})")
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=ours, args=(w,)) for w in (1, 2)] + [threading.Thread(target=java)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    expected = sorted([(w * 100 + i,) for w in (1, 2) for i in range(4)] + [(900 + i,) for i in range(4)])
    assert _rows(read_table(spark, "orest.rdb.race")) == expected
    spark.sql(f"REFRESH TABLE {jrest}.rdb.race")
    assert _rows(spark.table(f"{jrest}.rdb.race")) == expected
    assert len(rest.load_table(("rdb", "race")).metadata.snapshots) == 12


def test_vended_storage_config_reaches_driver_and_executors(spark, s3_server):
    """An S3 warehouse whose keys only the REST server knows: it returns them with every table
    (LoadTableResult config), and our driver and Spark tasks write and read the table with them."""
    vended = {f"table_config.{k}": v for k, v in s3_server.properties().items()}
    with running(f"s3://{s3_server.bucket}/rest-vended", s3_filer=s3_server.filer, **vended) as server:
        spark.conf.set("spark.sql.catalog.ovend.type", "rest")
        spark.conf.set("spark.sql.catalog.ovend.uri", server.uri)
        spark.conf.set("spark.sql.catalog.ovend.header.X-Iceberg-Access-Delegation", "vended-credentials")
        try:
            cat = catalog_for(spark, "ovend")
            assert "s3.secret-access-key" not in cat.properties
            cat.create_namespace("v")
            procedures.sql(spark, "CREATE TABLE ovend.v.t (id bigint, data string) USING iceberg")
            table = cat.load_table(("v", "t"))
            assert table.location.startswith(f"s3://{s3_server.bucket}/rest-vended")
            assert table.io.properties["s3.access-key-id"] == s3_server.access_key
            append(spark, "ovend.v.t", spark.createDataFrame([(1, "a"), (2, "b")], "id bigint, data string"))
            assert _rows(read_table(spark, "ovend.v.t")) == [(1, "a"), (2, "b")]
            out = procedures.sql(spark, "CALL ovend.system.rewrite_data_files(table => 'v.t', "
                                        "options => map('min-input-files', '1'))").collect()[0]
            assert out["rewritten_data_files_count"] >= 1 and out["added_data_files_count"] == 1
            assert _rows(read_table(spark, "ovend.v.t")) == [(1, "a"), (2, "b")]
        finally:
            for key in ("type", "uri", "header.X-Iceberg-Access-Delegation"):
                spark.conf.unset(f"spark.sql.catalog.ovend.{key}")
