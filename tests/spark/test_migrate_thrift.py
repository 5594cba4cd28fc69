"""``migrate`` of a ``spark_catalog`` table on both session kinds.  Migrate needs our hive catalog on
the metastore Spark's session catalog uses:

* classic: the run's session and its embedded metastore, opened through the session's JVM (``ohive``,
  no uri);
* Spark Connect (pyspark 4): a Connect server of its own whose Hive support uses a metastore server
  (``spark.hadoop.hive.metastore.uris``, tests/metastore_server.py), and our catalog on the same
  server through thrift (``uri``): the embedded metastore of a Connect server is out of the client's
  reach.

The source is read, renamed and restored through Spark SQL statements on both kinds; PyIceberg reads
the migrated table's rows back.
"""

from __future__ import annotations

import os

import pytest

from procedures.spark.hive_jvm import JvmMetastoreClient
from procedures.catalog.hive_thrift import ThriftMetastoreClient
from procedures.core.kernel.paths import local_path
from procedures.core.file_import.session_import import MIGRATE, MigrateParams, NewTable
from procedures.spark.engine.action import Action
from procedures.spark.engine.spark_engine import SparkEngine
from procedures.spark.session import catalog_for
from tests import connect_server as server_module
from tests.helpers.references import SPARK4, import_reference, skip_missing_reference
from tests.metastore_server import start_metastore, stop_metastore
from tests.oracles import pyiceberg_read

pytestmark = pytest.mark.spark

DB = "mtdb"
VALUES = ("a/b", "c d", None)


@pytest.fixture(scope="module", params=("classic", "connect") if SPARK4 else ("classic",))
def env(request, tmp_path_factory):
    """(session, our hive catalog on the metastore of the session's spark_catalog)."""
    if request.param == "classic":
        spark = request.getfixturevalue("classic_spark")
        spark.conf.set("spark.sql.catalog.ohive.type", "hive")
        cat = catalog_for(spark, "ohive")
        assert isinstance(cat.client, JvmMetastoreClient)
        yield spark, cat
        return
    import_reference("grpc", "the Spark Connect client is not installed: pip install 'pyspark[connect]'")
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    metastore = start_metastore()
    home = tmp_path_factory.mktemp("connect-thrift")
    conf = {"spark.sql.catalogImplementation": "hive", "spark.hadoop.hive.metastore.uris": metastore.uri,
            "spark.sql.warehouse.dir": str(home / "warehouse"), "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2", "spark.driver.memory": "1g", "spark.sql.session.timeZone": "UTC"}
    try:
        server = server_module.start(conf)
    except RuntimeError as e:
        stop_metastore(metastore)
        skip_missing_reference(f"Spark Connect server did not start: {e}")
    # a session of its own, not made the process's default (the shared Connect session stays that)
    spark = ConnectSession(connection=server.url)
    try:
        spark.conf.set("spark.sql.catalog.mhive.type", "hive")
        spark.conf.set("spark.sql.catalog.mhive.uri", metastore.uri)
        spark.conf.set("spark.sql.catalog.mhive.lock-enabled", "false")  # the test server has no lock tables
        cat = catalog_for(spark, "mhive")
        assert isinstance(cat.client, ThriftMetastoreClient)
        yield spark, cat
    finally:
        spark.stop()
        server_module.stop(server)
        stop_metastore(metastore)


def _source(spark, name: str) -> list[tuple]:
    spark.sql(f"CREATE DATABASE IF NOT EXISTS spark_catalog.{DB}")
    for n in (name, f"{name}_backup_"):
        spark.sql(f"DROP TABLE IF EXISTS spark_catalog.{DB}.{n}")
    spark.sql(f"CREATE TABLE spark_catalog.{DB}.{name} (id bigint, data string, p string) USING parquet "
              "PARTITIONED BY (p) TBLPROPERTIES ('owner-team'='data')")
    rows = ", ".join(f"({i}, 'row{i}', {'NULL' if v is None else repr(v)})" for i, v in enumerate(VALUES))
    spark.sql(f"INSERT INTO spark_catalog.{DB}.{name} VALUES {rows}")
    return _rows(spark, name)


def _rows(spark, name: str) -> list[tuple]:
    spark.sql(f"REFRESH TABLE spark_catalog.{DB}.{name}")
    return sorted((tuple(r) for r in spark.table(f"spark_catalog.{DB}.{name}").select("id", "data", "p").collect()),
                  key=repr)


def _location(spark, name: str) -> str:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED spark_catalog.{DB}.{name}").collect()
    return next(r[1] for r in rows if r[0] == "Location")


def test_migrate_replaces_the_table_and_keeps_or_drops_the_backup(env):
    spark, cat = env
    rows = _source(spark, "mt_keep")
    _source(spark, "mt_drop")
    count = Action(MIGRATE, spark).run(NewTable(cat), MigrateParams(source=(DB, "mt_keep"))).count
    table = cat.load_table((DB, "mt_keep"))
    assert count == 3 == int(table.metadata.current_snapshot().summary["total-data-files"])
    assert table.metadata.properties["migrated"] == "true" and table.metadata.properties["owner-team"] == "data"
    assert spark.catalog.tableExists("mt_keep_backup_", DB)
    assert _rows(spark, "mt_keep_backup_") == rows
    got = pyiceberg_read(table.metadata_location)
    assert sorted(zip(got["id"].to_pylist(), got["data"].to_pylist(), got["p"].to_pylist()), key=repr) == rows

    assert Action(MIGRATE, spark).run(
        NewTable(cat), MigrateParams(source=("spark_catalog", DB, "mt_drop"), drop_backup=True)).count == 3
    assert not spark.catalog.tableExists("mt_drop_backup_", DB)
    assert cat.table_exists((DB, "mt_drop"))


def test_migrate_failure_restores_the_table(env, monkeypatch):
    spark, cat = env
    rows = _source(spark, "mt_fail")
    location = _location(spark, "mt_fail")

    def failing(engine, table, ops):
        raise RuntimeError("injected failure")

    monkeypatch.setattr(SparkEngine, "commit", failing)
    with pytest.raises(RuntimeError, match="injected failure"):
        Action(MIGRATE, spark).run(NewTable(cat), MigrateParams(source=(DB, "mt_fail")))
    assert not cat.table_exists((DB, "mt_fail"))
    assert not spark.catalog.tableExists("mt_fail_backup_", DB)
    assert _location(spark, "mt_fail") == location
    assert not os.path.exists(os.path.join(local_path(location), "metadata"))
    assert _rows(spark, "mt_fail") == rows
