"""The package on Spark Connect the way a user runs it (issue 33): a fresh Python process with
pyspark 4's own local Connect server (``SparkSession.builder.remote("local[2]")``), the console's
``--remote`` (``local[N]`` and ``sc://host:port``), the maintenance planner over ``--remote``, and a
Connect server in front of a standalone cluster.  pyspark 4 only (3.5 ships no Connect server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import connect_server as server_module
from tests.helpers.references import SPARK4, import_reference, skip_missing_reference

pytestmark = [pytest.mark.spark, pytest.mark.connect, pytest.mark.slow,
              pytest.mark.skipif(not SPARK4, reason="Spark Connect needs pyspark 4")]

REPO = Path(__file__).resolve().parents[2]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED",
                                                            "SPARK_LOCAL_REMOTE")}
    # the local Connect server's Python workers run this interpreter with this checkout
    env.update({"PYTHONPATH": str(REPO), "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    env.update(extra)
    return env


def _client() -> None:
    import_reference("grpc", "the Spark Connect client is not installed: pip install 'iceberg-procedures[connect]'")


def console(cwd: Path, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "procedures.frontend.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=_env(**env))


#: a user's script: pyspark's local Connect server, a table, rows, a procedure through procedures.call
#: and through procedures.sql, the table read back; prints a JSON report
USER_FLOW = r'''
import json, sys
from pyspark.sql import SparkSession
import procedures

warehouse, report = sys.argv[1], sys.argv[2]
spark = (SparkSession.builder.remote("local[2]")
         .config("spark.sql.catalog.demo.type", "hadoop")
         .config("spark.sql.catalog.demo.warehouse", warehouse)
         .config("spark.sql.shuffle.partitions", "2")
         .config("spark.default.parallelism", "2")
         .config("spark.ui.enabled", "false")
         .getOrCreate())
out = {"session": type(spark).__module__}
procedures.sql(spark, "CREATE NAMESPACE IF NOT EXISTS demo.db")
procedures.sql(spark, "CREATE TABLE demo.db.t (id bigint NOT NULL, data string) USING iceberg")
procedures.sql(spark, "INSERT INTO demo.db.t VALUES (1, 'a'), (2, 'b')")
procedures.sql(spark, "INSERT INTO demo.db.t VALUES (3, 'c')")
rows = procedures.call("demo.system.rewrite_data_files", spark=spark, table="db.t",
                       options={"min-input-files": "2"}).collect()
out["rewrite"] = [r.asDict() for r in rows]
rows = procedures.sql(spark, "CALL demo.system.expire_snapshots(table => 'db.t', retain_last => 1, "
                             "older_than => TIMESTAMP '2999-01-01 00:00:00')").collect()
out["expire"] = [r.asDict() for r in rows]
out["rows"] = [tuple(r) for r in procedures.sql(spark, "SELECT id, data FROM demo.db.t ORDER BY id").collect()]
with open(report, "w") as f:
    json.dump(out, f, default=str)
spark.stop()
'''


def test_a_user_script_on_pyspark_local_connect_server(tmp_path):
    """A fresh process, pyspark's own ``builder.remote("local[2]")``: create, insert, two procedures
    (procedures.call and procedures.sql), read back."""
    _client()
    script, report = tmp_path / "flow.py", tmp_path / "report.json"
    script.write_text(USER_FLOW)
    run = subprocess.run([sys.executable, str(script), str(tmp_path / "wh"), str(report)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600, env=_env())
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(report.read_text())
    assert out["session"].startswith("pyspark.sql.connect")
    rewrite = out["rewrite"][0]
    assert rewrite["rewritten_data_files_count"] >= 2 and rewrite["added_data_files_count"] == 1
    # the files the rewrite replaced went with the expired snapshots
    assert out["expire"][0]["deleted_data_files_count"] == rewrite["rewritten_data_files_count"]
    assert out["rows"] == [[1, "a"], [2, "b"], [3, "c"]]


def test_console_remote_local_runs_a_script_with_progress(tmp_path):
    """``procedures-sql --remote local[2] -e ...``: pyspark's local Connect server in the console's
    process; progress lines come from the server's progress messages."""
    _client()
    run = console(tmp_path, "--remote", "local[2]", "--output", "json", "-e",
                  "CREATE NAMESPACE IF NOT EXISTS local.db; "
                  "CREATE TABLE local.db.t (id bigint NOT NULL, data string) USING iceberg; "
                  "INSERT INTO local.db.t VALUES (1, 'a'), (2, 'b'); "
                  "INSERT INTO local.db.t VALUES (3, 'c'); "
                  "CALL local.system.rewrite_data_files(table => 'db.t', options => map('min-input-files', '2')); "
                  "SELECT count(*) AS n FROM local.db.t")
    assert run.returncode == 0, run.stderr[-4000:]
    lines = [json.loads(x) for x in run.stdout.splitlines() if x.startswith("{")]
    assert lines[-2]["rewritten_data_files_count"] >= 2 and lines[-2]["added_data_files_count"] == 1
    assert lines[-1] == {"n": 3}
    assert "progress: append to local.db.t" in run.stderr
    # the driver's own keys went to the local server at its start, not as refused session settings
    assert "CANNOT_MODIFY_CONFIG" not in run.stderr
    assert (tmp_path / "warehouse" / "catalog.db").is_file()


def test_console_spark_remote_environment_variable_and_metadata_statements(tmp_path):
    """``SPARK_REMOTE=local[1]``, as for ``pyspark``: the console runs on Spark Connect; DDL, a
    procedure on a table without data and a plain Spark query work there already."""
    _client()
    run = console(tmp_path, "--output", "json", "-e",
                  "CREATE NAMESPACE IF NOT EXISTS local.db; "
                  "CREATE TABLE local.db.t (id bigint) USING iceberg TBLPROPERTIES ('format-version' = '2'); "
                  "CALL local.system.expire_snapshots('db.t'); "
                  "SELECT current_catalog() AS c, 1 + 1 AS two",
                  SPARK_REMOTE="local[1]")
    assert run.returncode == 0, run.stderr[-4000:]
    rows = [json.loads(x) for x in run.stdout.splitlines()]
    assert rows[0]["deleted_data_files_count"] == 0
    assert rows[-1] == {"c": "spark_catalog", "two": 2}
    # pyspark's local server took the driver's keys at its start: no refused session settings shown
    assert "CANNOT_MODIFY_CONFIG" not in run.stderr and "Traceback" not in run.stderr
    assert list((tmp_path / "warehouse" / "db" / "t" / "metadata").glob("*.metadata.json"))


def test_console_on_a_running_connect_server_keeps_the_servers_settings(connect_server, tmp_path):
    """``--remote sc://host:port``: a setting the server has wins over the console's embedded default
    (the fixture server's two shuffle partitions, not our 8), a catalog the server lacks is the
    embedded one, the user's ``--conf`` is set on the session; --master beside --remote is refused."""
    run = console(tmp_path, "--remote", connect_server.url, "--output", "json",
                  "--conf", "spark.sql.catalog.mine.type=hadoop",
                  "-e", "SET spark.sql.shuffle.partitions; SET spark.sql.catalog.local.type; "
                        "SET spark.sql.catalog.mine.type; SET spark.sql.catalog.jcat.type")
    assert run.returncode == 0, run.stderr[-4000:]
    values = [json.loads(x)["value"] for x in run.stdout.splitlines()]
    assert values == ["2", "jdbc", "hadoop", "hadoop"]
    both = console(tmp_path, "--remote", connect_server.url, "--master", "local[1]", "-e", "SELECT 1")
    assert both.returncode == 2 and "either --master or --remote" in both.stderr


def test_console_on_a_running_connect_server_runs_a_procedure(connect_server, tmp_path):
    """A table in a catalog of the user's (``--conf``), rows, a procedure, on a running Connect server."""
    warehouse = tmp_path / "wh"
    run = console(tmp_path, "--remote", connect_server.url, "--output", "json",
                  "--conf", "spark.sql.catalog.mine.type=hadoop", "--conf", f"spark.sql.catalog.mine.warehouse={warehouse}",
                  "-e", "CREATE NAMESPACE IF NOT EXISTS mine.db; "
                        "CREATE TABLE mine.db.t (id bigint) USING iceberg; "
                        "INSERT INTO mine.db.t VALUES (1), (2); INSERT INTO mine.db.t VALUES (3); "
                        "CALL mine.system.rewrite_data_files(table => 'db.t', options => map('min-input-files', '2')); "
                        "SELECT sum(id) AS s FROM mine.db.t")
    assert run.returncode == 0, run.stderr[-4000:]
    lines = [json.loads(x) for x in run.stdout.splitlines() if x.startswith("{")]
    assert lines[-2]["rewritten_data_files_count"] >= 2 and lines[-2]["added_data_files_count"] == 1
    assert lines[-1] == {"s": 6}


def test_planner_on_spark_connect_plans_and_executes(tmp_path):
    """The quickstart and the scheduled maintenance script, then ``plan --execute``, all over
    ``--remote local[2]`` (the planner and its console on Spark Connect)."""
    _client()
    script = tmp_path / "run.sql"
    script.write_text((REPO / "sql" / "quickstart.sql").read_text() + "\n"
                      + (REPO / "sql" / "plan_maintenance.sql").read_text())
    run = console(tmp_path, "--remote", "local[2]", "-f", str(script))
    assert run.returncode == 0, run.stderr[-4000:]
    assert "CALL local.system.compute_table_stats(table => 'db.events')" in run.stdout
    plan = console(tmp_path, "--remote", "local[2]", "plan", "local.db.events", "--execute")
    assert plan.returncode == 0, plan.stderr[-4000:]
    assert "Fetched 0 row(s)" in plan.stderr


def test_connect_server_in_front_of_a_standalone_cluster_runs_a_procedure(spark_cluster, java_warehouse, tmp_path):
    """A Connect server whose master is a standalone cluster (executors in their own JVMs, Python
    workers of the cluster's worker): a table, rows and one procedure through procedures.call."""
    _client()
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    import procedures

    warehouse = tmp_path / "wh"
    conf = {"spark.sql.catalog.cl.type": "hadoop", "spark.sql.catalog.cl.warehouse": str(warehouse),
            "spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "1",
            "spark.driver.memory": "512m", "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
            # the cluster's executors start Python workers with this interpreter and checkout
            "spark.executorEnv.PYTHONPATH": str(REPO), "spark.sql.session.timeZone": "UTC"}
    try:
        server = server_module.start(conf, master=spark_cluster.url)
    except RuntimeError as e:
        skip_missing_reference(f"Spark Connect server did not start: {e}")
    try:
        spark = ConnectSession.builder.remote(server.url).create()
        try:
            procedures.sql(spark, "CREATE NAMESPACE IF NOT EXISTS cl.db")
            procedures.sql(spark, "CREATE TABLE cl.db.t (id bigint) USING iceberg")
            procedures.sql(spark, "INSERT INTO cl.db.t VALUES (1), (2)")
            procedures.sql(spark, "INSERT INTO cl.db.t VALUES (3)")
            row = procedures.call("cl.system.rewrite_data_files", spark=spark, table="db.t",
                                  options={"min-input-files": "2"}).first()
            assert row["rewritten_data_files_count"] >= 2 and row["added_data_files_count"] == 1
            assert procedures.sql(spark, "SELECT sum(id) AS s FROM cl.db.t").first()["s"] == 6
        finally:
            spark.stop()
    finally:
        server_module.stop(server)


def test_object_store_keys_reach_a_connect_client_from_the_environment(s3_server, tmp_path, monkeypatch):
    """A Connect server hides from its clients every conf key matching ``spark.redaction.regex``, so a
    catalog's S3 secret in the server's conf never reaches our catalog in the client (its access key
    does): the catalog says where the secret can come from, and takes it from the client's
    environment (the server's workers from theirs, inherited at the server's start)."""
    _client()
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    import procedures

    props = s3_server.properties()
    conf = {f"spark.sql.catalog.s3c.{k}": v for k, v in props.items()}
    conf.update({"spark.sql.catalog.s3c.type": "jdbc",
                 "spark.sql.catalog.s3c.uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}",
                 "spark.sql.catalog.s3c.warehouse": f"s3://{s3_server.bucket}/connect-env",
                 "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
                 "spark.sql.session.timeZone": "UTC"})
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", props["s3.access-key-id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", props["s3.secret-access-key"])
    try:
        server = server_module.start(conf)  # its workers inherit the keys
    except RuntimeError as e:
        skip_missing_reference(f"Spark Connect server did not start: {e}")
    try:
        spark = ConnectSession.builder.remote(server.url).create()
        try:
            visible = spark.conf.getAll
            assert "spark.sql.catalog.s3c.s3.endpoint" in visible
            assert "spark.sql.catalog.s3c.s3.access-key-id" in visible
            assert "spark.sql.catalog.s3c.s3.secret-access-key" not in visible  # Spark's, not ours
            procedures.sql(spark, "CREATE NAMESPACE IF NOT EXISTS s3c.db")  # the catalog's database alone
            monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
            with pytest.raises(Exception, match="incomplete.*Spark Connect.*AWS_SECRET_ACCESS_KEY"):
                procedures.sql(spark, "CREATE TABLE s3c.db.t (id bigint) USING iceberg")
            monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", props["s3.secret-access-key"])
            procedures.sql(spark, "CREATE TABLE s3c.db.t (id bigint) USING iceberg")
            procedures.sql(spark, "INSERT INTO s3c.db.t VALUES (1), (2), (3)")
            assert procedures.sql(spark, "SELECT sum(id) AS s FROM s3c.db.t").first()["s"] == 6
        finally:
            spark.stop()
    finally:
        server_module.stop(server)
