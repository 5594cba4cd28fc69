"""One maintenance flow on a table of our hadoop catalog, run the same way on a Spark standalone cluster
(``tests/spark/test_cluster.py`` submits this file with ``spark-submit``) and on the test run's own
local[2] session (imported as ``tests.helpers.cluster_flow``): create, four inserts, rewrite_data_files
(bin-pack, sort, z-order), rewrite_manifests, expire_snapshots, remove_orphan_files, reads.
:func:`run_flow` returns what both runs must agree on: every procedure's output rows (paths made
relative to the warehouse) and the table's rows.

As a script it imports only pyspark and ``procedures``: the package reaches the driver and the executors
the way a user ships it (``--py-files`` with a zip of ``procedures``), never through PYTHONPATH, and it
reports where the executors' Python workers ran and which ``procedures`` they imported.

    spark-submit --master spark://... --py-files procedures.zip cluster_flow.py <warehouse> <out.json>
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import procedures
from procedures.spark.dataframes import run_slices
from procedures.core.gc import reachability
from procedures.spark.engine import gc_steps as orphans_action

CATALOG = "flow"
TABLE = f"{CATALOG}.db.events"
APP_NAME = "iceberg-procedures-cluster-flow"


def catalog_conf(warehouse: str, catalog: str = CATALOG) -> dict[str, str]:
    """Our hadoop catalog on ``warehouse`` (on the same machine, so shared by driver and executors)."""
    return {f"spark.sql.catalog.{catalog}.type": "hadoop", f"spark.sql.catalog.{catalog}.warehouse": warehouse}


def force_distributed_steps() -> None:
    """Make the GC steps run as Spark jobs even on a small table (the size rules would keep them on the
    driver): manifest lists and manifests are read by executors and the listing below the root is done in Spark tasks."""
    reachability.DRIVER_MAX_MANIFESTS = 0
    reachability.DRIVER_MAX_LISTS = 0
    orphans_action.DRIVER_MAX_DIRS = 1


def _rows(df: Any, warehouse: str) -> list[dict]:
    out = []
    for row in df.collect():
        d = row.asDict(recursive=True)
        out.append({k: (v.replace(warehouse, "<warehouse>") if isinstance(v, str) else v) for k, v in d.items()})
    return out


def run_flow(spark: Any, warehouse: str, catalog: str = CATALOG) -> dict:
    """Run the flow on ``spark`` (whose conf has :func:`catalog_conf` for ``catalog``)."""
    table = f"{catalog}.db.events"
    short = "db.events"
    procedures.sql(spark, f"CREATE NAMESPACE IF NOT EXISTS {catalog}.db")
    procedures.sql(spark, f"""CREATE TABLE {table} (id bigint NOT NULL, category string, amount double)
        USING iceberg PARTITIONED BY (category) TBLPROPERTIES ('format-version' = '2')""")
    for batch in range(4):
        procedures.sql(spark, f"""INSERT INTO {table}
            SELECT id, CASE WHEN id % 3 = 0 THEN 'a' WHEN id % 3 = 1 THEN 'b' ELSE 'c' END, id * 1.5
            FROM range({batch * 100}, {batch * 100 + 100}) ORDER BY id""")
    result: dict[str, Any] = {}
    result["rewrite_data_files"] = _rows(procedures.sql(
        spark, f"CALL {catalog}.system.rewrite_data_files(table => '{short}', options => map('min-input-files', '2'))"),
        warehouse)
    # sort and z-order go through Spark's range shuffle (between executor JVMs on a cluster)
    result["rewrite_sort"] = _rows(procedures.sql(
        spark, f"CALL {catalog}.system.rewrite_data_files(table => '{short}', strategy => 'sort', "
               "sort_order => 'id DESC NULLS LAST', options => map('rewrite-all', 'true'))"), warehouse)
    result["rewrite_zorder"] = _rows(procedures.sql(
        spark, f"CALL {catalog}.system.rewrite_data_files(table => '{short}', strategy => 'sort', "
               "sort_order => 'zorder(id, amount)', options => map('rewrite-all', 'true'))"), warehouse)
    result["rewrite_manifests"] = _rows(procedures.sql(
        spark, f"CALL {catalog}.system.rewrite_manifests(table => '{short}')"), warehouse)
    result["expire_snapshots"] = _rows(procedures.sql(
        spark, f"CALL {catalog}.system.expire_snapshots(table => '{short}', "
               "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1)"), warehouse)
    # an orphan old enough for the default older_than (three days)
    orphan = Path(warehouse, "db", "events", "data", "category=a", "orphan.parquet")
    orphan.write_bytes(b"not referenced by any metadata")
    old = time.time() - 10 * 24 * 3600
    os.utime(orphan, (old, old))
    result["remove_orphan_files"] = _rows(procedures.sql(
        spark, f"CALL {catalog}.system.remove_orphan_files(table => '{short}')"), warehouse)
    result["orphan_left"] = orphan.exists()
    result["rows"] = _rows(procedures.sql(spark, f"SELECT * FROM {table} ORDER BY id"), warehouse)
    result["per_category"] = _rows(procedures.sql(
        spark, f"SELECT category, count(*) AS n, sum(amount) AS total FROM {table} GROUP BY category ORDER BY category"),
        warehouse)
    result["snapshots"] = len(procedures.call("ancestors_of", spark=spark, table=table).collect())
    return result


def _executor_report(_: Any) -> Any:
    """One row per partition: the Python worker's pid, the pid of the JVM it serves and that JVM's main
    class, and where it imported ``procedures`` from.  It imports the package's write path itself, as a
    task of the flow does, so that the modules it reports are the package's and not only its root."""
    import procedures.spark.write  # noqa: F401,PLC0415 -- loaded in the worker to see where it comes from

    pid = os.getpid()
    jvm_pid, jvm_cmd = None, ""
    parent = os.getppid()
    while parent > 1:
        try:
            cmd = Path(f"/proc/{parent}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = Path(f"/proc/{parent}/stat").read_text()
        except OSError:
            break
        if "java" in cmd.split(" ", 1)[0]:
            jvm_pid, jvm_cmd = parent, cmd
            break
        parent = int(stat.rsplit(")", 1)[1].split()[1])
    yield {"pid": pid, "jvm_pid": jvm_pid, "executor_jvm": "CoarseGrainedExecutorBackend" in jvm_cmd,
           "procedures_file": procedures.__file__, "modules": loaded_modules()}


def loaded_modules() -> dict[str, str]:
    """Every imported module of the package and the file it came from (a mix of the shipped zip and an
    installed copy would be a broken deployment)."""
    return {name: str(getattr(module, "__file__", None)) for name, module in sorted(sys.modules.items())
            if name == "procedures" or name.startswith("procedures.")}


def where_code_runs(spark: Any) -> dict:
    """Pids of the driver (Python and JVM) and of the executors' Python workers, and the ``procedures``
    modules each imported."""
    sc = spark.sparkContext
    # through the DataFrame API, as the package's own tasks run (their Python workers)
    executors = run_slices(spark, [0, 1], _executor_report)
    return {"driver_pid": os.getpid(), "driver_jvm_pid": int(sc._jvm.java.lang.ProcessHandle.current().pid()),
            "driver_modules": loaded_modules(), "master": sc.master, "executors": executors}


def main(argv: list[str]) -> int:
    """``cluster_flow.py <warehouse> <out.json>``: run the flow on the session spark-submit configured."""
    from pyspark.sql import SparkSession

    warehouse, out = argv[1], argv[2]
    builder = SparkSession.builder.appName(APP_NAME)
    for key, value in catalog_conf(warehouse).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        force_distributed_steps()
        flow = run_flow(spark, warehouse)
        # after the flow, so the driver and the reused Python workers have imported what it needed
        report = {"flow": flow, "where": where_code_runs(spark)}
    finally:
        spark.stop()
    Path(out).write_text(json.dumps(report, indent=1, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
