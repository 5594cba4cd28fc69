"""The package in a process that holds a Spark Connect session and nothing else, built with
``pyspark.sql.connect.session.SparkSession.builder`` directly (no ``.remote()`` through pyspark's own
builder, so the process's Connect mode is off and no classic SparkContext exists), where a type text
given to pyspark's plain ``udf`` cannot be parsed; the package's ``mapInArrow``/``createDataFrame``
schemas are ``StructType`` (:func:`procedures.spark.dataframes.struct_schema`).  On pyspark 4.3 a
Connect ``mapInArrow`` has the server parse a text, so this flow also passed before them (checked).  The flow below reaches each of them: the write
job, the read, the task frames of rewrite_data_files, the keyed frames of rewrite_manifests, the
listing and key frames of remove_orphan_files and expire_snapshots' manifest frames, with the GC
steps forced onto Spark (pyspark 4 only: 3.5 ships no Connect server).  Beside it, the schema helper
and the procedures' output frames (:func:`procedures.spark.dataframes.local_frame`) on both lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.references import SPARK4, import_reference

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]

FLOW = r'''
import importlib, json, os, sys, time
from pyspark import SparkContext
from pyspark.sql.connect.session import SparkSession as ConnectSession
import procedures
from procedures.core.gc import reachability

url, warehouse, report = sys.argv[1], sys.argv[2], sys.argv[3]
# the GC steps as Spark jobs even on this small table (the size rules would keep them on the driver)
reachability.DRIVER_MAX_MANIFESTS = 0
reachability.DRIVER_MAX_LISTS = 0
importlib.import_module("procedures.spark.engine.gc_steps").DRIVER_MAX_DIRS = 1
spark = ConnectSession.builder.remote(url).create()
spark.conf.set("spark.sql.catalog.solo.type", "hadoop")
spark.conf.set("spark.sql.catalog.solo.warehouse", warehouse)
out = {"connect_mode": os.environ.get("SPARK_CONNECT_MODE_ENABLED"),
       "classic_context": SparkContext._active_spark_context is not None}
sql = lambda text: procedures.sql(spark, text)
sql("CREATE NAMESPACE IF NOT EXISTS solo.db")
sql("CREATE TABLE solo.db.t (id bigint NOT NULL, p int) USING iceberg PARTITIONED BY (p) "
    "TBLPROPERTIES ('format-version' = '2')")
for i in range(3):
    sql(f"INSERT INTO solo.db.t SELECT id, CAST(id % 2 AS int) FROM range({i * 10}, {i * 10 + 10})")
out["sum"] = sql("SELECT sum(id) AS s, count(*) AS n FROM solo.db.t").first().asDict()
row = sql("CALL solo.system.rewrite_data_files(table => 'db.t', options => map('min-input-files', '2'))").first()
out["rewrite"] = row.asDict()
out["manifests"] = sql("CALL solo.system.rewrite_manifests(table => 'db.t')").first().asDict()
out["expire"] = sql("CALL solo.system.expire_snapshots(table => 'db.t', retain_last => 1, "
                    "older_than => TIMESTAMP '2999-01-01 00:00:00')").first().asDict()
orphan = os.path.join(warehouse, "db", "t", "data", "p=0", "orphan.parquet")
with open(orphan, "wb") as f:
    f.write(b"no metadata names this file")
old = time.time() - 10 * 24 * 3600
os.utime(orphan, (old, old))
out["orphans"] = [r[0] for r in sql("CALL solo.system.remove_orphan_files(table => 'db.t')").collect()]
out["after"] = sql("SELECT sum(id) AS s, count(*) AS n FROM solo.db.t").first().asDict()
with open(report, "w") as f:
    json.dump(out, f, default=str)
spark.stop()
'''


def test_struct_schema_reads_flat_ddl_and_refuses_the_rest():
    """The flat DDL texts of the package's task frames become the StructType Spark would make of
    them (every field nullable); a type it does not know is refused rather than guessed."""
    from pyspark.sql import types

    from procedures.spark.dataframes import struct_schema

    assert struct_schema("`payload` binary, n long, slot int, s string") == types.StructType([
        types.StructField("payload", types.BinaryType(), True), types.StructField("n", types.LongType(), True),
        types.StructField("slot", types.IntegerType(), True), types.StructField("s", types.StringType(), True)])
    given = types.StructType([types.StructField("x", types.DoubleType(), False)])
    assert struct_schema(given) is given
    with pytest.raises(ValueError, match="struct_schema reads"):
        struct_schema("m map<string, int>")


@pytest.mark.connect
@pytest.mark.skipif(not SPARK4, reason="Spark Connect needs pyspark 4")
def test_a_connect_only_process_writes_reads_and_runs_the_procedures(connect_server, tmp_path):
    """Every distributed step of the flow runs in a process whose only session is a Connect client
    made without Connect mode."""
    import_reference("grpc", "the Spark Connect client is not installed: pip install 'pyspark[connect]'")
    warehouse, report = tmp_path / "wh", tmp_path / "report.json"
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED",
                                                            "SPARK_LOCAL_REMOTE")}
    env.update({"PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable})
    run = subprocess.run([sys.executable, "-c", FLOW, connect_server.url, str(warehouse), str(report)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(report.read_text())
    assert out["connect_mode"] is None and out["classic_context"] is False
    assert out["sum"] == {"s": 435, "n": 30} and out["after"] == out["sum"]
    # three inserts of two partitions each: at least six small files, compacted into one per partition
    rewritten = out["rewrite"]["rewritten_data_files_count"]
    assert rewritten >= 6 and out["rewrite"]["added_data_files_count"] == 2
    assert out["manifests"]["rewritten_manifests_count"] >= 2
    assert out["expire"]["deleted_data_files_count"] == rewritten
    assert len(out["orphans"]) == 1 and out["orphans"][0].endswith("p=0/orphan.parquet")


def test_local_frame_is_a_local_relation_with_the_rows_of_create_dataframe(spark):
    """A procedure's output frame (:func:`procedures.spark.dataframes.local_frame`) holds what
    ``createDataFrame`` makes of the rows, and on a classic pyspark 4 session it is a local relation,
    so collecting it runs no Spark job (a list made one RDD and a Python worker pass per collect)."""
    import decimal

    from pyspark.sql import types

    from procedures.spark.dataframes import local_frame

    schema = types.StructType([
        types.StructField("n", types.LongType(), False), types.StructField("s", types.StringType(), True),
        types.StructField("a", types.ArrayType(types.StringType()), True),
        types.StructField("m", types.MapType(types.StringType(), types.LongType()), True),
        types.StructField("d", types.DecimalType(10, 2), True), types.StructField("b", types.BooleanType(), True)])
    rows = [(1, "x", ["p", "q"], {"k": 2}, decimal.Decimal("1.25"), True), (2, None, None, None, None, None)]
    frame = local_frame(spark, rows, schema)
    assert frame.schema == schema
    assert frame.collect() == spark.createDataFrame(rows, schema).collect()
    assert local_frame(spark, [], schema).collect() == []
    if SPARK4:
        assert "LocalRelation" in frame._jdf.queryExecution().optimizedPlan().toString()
