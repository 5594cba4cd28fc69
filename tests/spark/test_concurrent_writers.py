"""Concurrent writers on every catalog (issue 17): two of our writers and one other implementation's
writer append to one table at once, while a third thread of ours runs maintenance (rewrite_manifests,
expire_snapshots) on it.  No commit and no row may be lost: every writer's rows are there, read by
Iceberg Java, PyIceberg and DuckDB, and every file a snapshot references exists.

The other writer is Iceberg Java where it can reach the catalog from the test session (hadoop: ``jcat``,
hive: ``jhive``) and PyIceberg's SqlCatalog on the jdbc catalogs (SQLite and PostgreSQL), whose Java
JDBC drivers are not on the session's class path.  The long version of this run is
``benchmarks/soak.py``.
"""

from __future__ import annotations

import os
import threading
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import procedures
from procedures.core.operations import FastAppend
from procedures.core.paths import normalize_path
from procedures.core.transaction import RetryPolicy, commit
from procedures.core.gc import reachability as R
from procedures.spark.session import catalog_for
from procedures.spec.manifest import DataFile, FileFormat
from tests.oracles import assert_rows_equal, duckdb_read, java_read, pyiceberg_read

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]

COMMITS_PER_WRITER = 8
RETRIES = RetryPolicy(num_retries=50, min_wait_ms=5, max_wait_ms=200, total_timeout_ms=120_000)
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"1"}),
                    pa.field("who", pa.string(), metadata={b"PARQUET:field_id": b"2"})])


def _our_file(table, ids: list[int], who: str) -> DataFile:
    path = f"{table.location}/data/{who}-{uuid.uuid4().hex}.parquet"
    local = normalize_path(path).path
    os.makedirs(os.path.dirname(local), exist_ok=True)
    pq.write_table(pa.table({"id": ids, "who": [who] * len(ids)}, schema=SCHEMA), local)
    return DataFile(path, FileFormat.PARQUET, (), len(ids), table.io.new_input(path).size(), spec_id=0)


def _run_all(workers) -> None:
    errors: list[BaseException] = []

    def guard(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 -- reported after join
                errors.append(e)
        return run

    threads = [threading.Thread(target=guard(w)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a writer hung"
    assert not errors, errors


def _our_writer(cat, ident, who: str, base: int):
    def run():
        for i in range(COMMITS_PER_WRITER):
            t = cat.load_table(ident)
            commit(t, [FastAppend([_our_file(t, [base + i], who)])], policy=RETRIES)
    return run


def _maintainer(spark, cat_name: str, ident):
    name = ".".join(ident)

    def run():
        for _ in range(3):
            procedures.call("rewrite_manifests", spark=spark, table=f"{cat_name}.{name}")
            procedures.call("expire_snapshots", spark=spark, table=f"{cat_name}.{name}", retain_last=3)
    return run


def _check(spark, cat, ident, java_ident: str | None) -> None:
    t = cat.load_table(ident)
    expected = sorted([1000 + i for i in range(COMMITS_PER_WRITER)] + [2000 + i for i in range(COMMITS_PER_WRITER)]
                      + [3000 + i for i in range(COMMITS_PER_WRITER)])
    location = normalize_path(t.metadata_location).path
    rows = java_read(spark, java_ident or location)
    assert sorted(rows.column("id").to_pylist()) == expected
    assert_rows_equal(pyiceberg_read(location), rows, key="id", label="pyiceberg")
    assert_rows_equal(duckdb_read(location), rows, key="id", label="duckdb")
    sm = R.read_snapshot_manifests(t.io, t.metadata)
    missing = [p for p in R.content_paths_driver(t.io, sm.distinct().values())
               if not t.io.exists(p)]
    assert not missing, missing


def _create(spark, cat_name: str, name: str, extra: str = ""):
    cat = catalog_for(spark, cat_name)
    ns = "cw"
    if not cat.namespace_exists(ns):
        cat.create_namespace(ns)
    if cat.table_exists((ns, name)):
        cat.drop_table((ns, name), purge=True)
    procedures.sql(spark, f"CREATE TABLE {cat_name}.{ns}.{name} (id bigint NOT NULL, who string) USING iceberg "
                          "TBLPROPERTIES ('format-version'='2', 'commit.retry.num-retries'='50', "
                          f"'commit.retry.min-wait-ms'='5', 'commit.retry.max-wait-ms'='200'{extra})")
    return cat, (ns, name)


@pytest.mark.parametrize("kind", ["hadoop", "hive"])
def test_two_of_ours_and_java_on_one_table(spark, java_warehouse, kind):
    if kind == "hadoop":
        spark.conf.set("spark.sql.catalog.ours.type", "hadoop")
        spark.conf.set("spark.sql.catalog.ours.warehouse", str(java_warehouse))
        cat_name, java_cat = "ours", "jcat"
    else:
        spark.conf.set("spark.sql.catalog.ohive.type", "hive")
        cat_name, java_cat = "ohive", "jhive"
    # on the metastore both sides take its table lock: Java's commit there is check-then-alter
    cat, ident = _create(spark, cat_name, f"cw_{kind}", ", 'engine.hive.lock-enabled'='true'" if kind == "hive" else "")
    java_ident = f"{java_cat}.{ident[0]}.{ident[1]}"

    def java_writer():
        for i in range(COMMITS_PER_WRITER):
            spark.sql(f"INSERT INTO {java_ident} VALUES ({3000 + i}, 'java')")

    _run_all([_our_writer(cat, ident, "a", 1000), _our_writer(cat, ident, "b", 2000), java_writer,
              _maintainer(spark, cat_name, ident)])
    spark.sql(f"REFRESH TABLE {java_ident}")
    _check(spark, cat, ident, java_ident)


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_two_of_ours_and_pyiceberg_on_a_jdbc_table(spark, tmp_path, request, backend):
    from pyiceberg.catalog.sql import SqlCatalog

    name = f"jc{backend}"
    if backend == "sqlite":
        uri = f"jdbc:sqlite:{tmp_path / 'catalog.db'}"
        py_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    else:
        from tests import postgres_server

        server = request.getfixturevalue("pg_server")
        uri = postgres_server.create_database(server, "cw_" + uuid.uuid4().hex[:10])
        spark.conf.set(f"spark.sql.catalog.{name}.jdbc.user", server.user)
        py_uri = f"postgresql+psycopg://{server.user}@{server.host}:{server.port}/{uri.rsplit('/', 1)[1]}"
    spark.conf.set(f"spark.sql.catalog.{name}.type", "jdbc")
    spark.conf.set(f"spark.sql.catalog.{name}.uri", uri)
    spark.conf.set(f"spark.sql.catalog.{name}.warehouse", str(tmp_path / "wh"))
    cat, ident = _create(spark, name, "t")
    py_cat = SqlCatalog(name, uri=py_uri, warehouse=f"file://{tmp_path / 'wh'}")

    def pyiceberg_writer():
        for i in range(COMMITS_PER_WRITER):
            table = py_cat.load_table(".".join(ident))
            for attempt in range(50):
                try:
                    table.append(pa.table({"id": [3000 + i], "who": ["pyiceberg"]}, schema=SCHEMA))
                    break
                except Exception as e:  # noqa: BLE001 -- PyIceberg's commit conflict: reload and retry
                    if "CommitFailed" not in type(e).__name__ or attempt == 49:
                        raise
                    table = py_cat.load_table(".".join(ident))

    _run_all([_our_writer(cat, ident, "a", 1000), _our_writer(cat, ident, "b", 2000), pyiceberg_writer,
              _maintainer(spark, name, ident)])
    _check(spark, cat, ident, None)
