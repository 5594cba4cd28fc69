"""The clean-install flow run by .ci/clean_install_check.sh inside a throwaway venv (no extras, no
Iceberg Java jar): a table on the embedded SQLite catalog ``local``, three inserts, rewrite_data_files,
expire_snapshots, the rows read back through the Python API, on pyspark 4 an append and a filtered read through the
``iceberg-procedures`` data source, then one ``procedures-sql`` command and
the maintenance planner's ``procedures-sql plan --execute`` (statistics skipped: no ``stats`` extra).
Any failure exits non-zero.  Run from an empty working folder (the catalog lives in ./warehouse)."""

from __future__ import annotations

import datetime
import os
import subprocess
import sys
from pathlib import Path


def main() -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import procedures
    import pyspark
    from procedures.frontend.cli import EMBEDDED_DEFAULTS
    from pyspark.sql import SparkSession

    # the package must come from the venv's site-packages, not from a checkout on sys.path
    assert "site-packages" in procedures.__file__, procedures.__file__
    print(f"pyspark {pyspark.__version__}, python {sys.version.split()[0]}, procedures at {procedures.__file__}")
    builder = SparkSession.builder.master("local[2]").appName("clean-install-check")
    for key, value in EMBEDDED_DEFAULTS.items():
        if key != "spark.master":
            builder = builder.config(key, value)
    builder = builder.config("spark.sql.catalog.local.warehouse", str(Path("warehouse").resolve()))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        procedures.sql(spark, """
            CREATE NAMESPACE IF NOT EXISTS local.db;
            CREATE TABLE local.db.events (id bigint NOT NULL, category string, ts timestamp)
                USING iceberg PARTITIONED BY (days(ts));
            INSERT INTO local.db.events VALUES (1, 'click', TIMESTAMP '2024-01-01 10:00:00'),
                                               (2, 'view', TIMESTAMP '2024-01-02 11:00:00');
            INSERT INTO local.db.events VALUES (3, 'click', TIMESTAMP '2024-01-02 12:00:00');
            INSERT INTO local.db.events VALUES (4, 'view', TIMESTAMP '2024-01-02 13:00:00');
        """)
        rewritten = procedures.call("rewrite_data_files", spark=spark, table="local.db.events",
                                    options={"min-input-files": "2"}).collect()
        print("rewrite_data_files:", rewritten)
        assert rewritten[0]["rewritten_data_files_count"] >= 2, rewritten
        expired = procedures.call("expire_snapshots", spark=spark, table="local.db.events",
                                  older_than=datetime.datetime(2999, 1, 1), retain_last=1).collect()
        print("expire_snapshots:", expired)
        rows = sorted((r["id"], r["category"]) for r in procedures.read_table(spark, "local.db.events").collect())
        assert rows == [(1, "click"), (2, "view"), (3, "click"), (4, "view")], rows
        snapshots = procedures.call("ancestors_of", spark=spark, table="local.db.events").collect()
        assert len(snapshots) == 1, snapshots
        if int(pyspark.__version__.split(".")[0]) >= 4:
            data_source_flow(spark, procedures)
            rows.append((5, "click"))
    finally:
        spark.stop()
    console = Path(sys.executable).with_name("procedures-sql")
    run = subprocess.run([str(console), "-e", "SELECT id, category FROM local.db.events ORDER BY id"],
                         capture_output=True, text=True, timeout=300)
    print(run.stdout, run.stderr, sep="\n")
    assert run.returncode == 0, f"procedures-sql failed with exit code {run.returncode}"
    expected = ["id", "category", "--", "--------"] + [str(v) for row in rows for v in row]
    assert run.stdout.split() == expected, run.stdout
    # the planner on the plain install: statistics need the `stats` extra, so that step is skipped with
    # the install hint and the run succeeds (options before the subcommand, as a user types them)
    plan = subprocess.run([str(console), "--master", "local[2]", "plan", "local.db.events", "--execute",
                           "--no-orphans"], capture_output=True, text=True, timeout=600)
    print(plan.stdout, plan.stderr, sep="\n")
    assert plan.returncode == 0, f"procedures-sql plan --execute failed with exit code {plan.returncode}"
    stats = [line for line in plan.stdout.splitlines() if "compute_table_stats" in line]
    assert stats and all(" skipped " in line and "iceberg-procedures[stats]" in line for line in stats), stats
    print("clean-install flow: OK")
    return 0


def data_source_flow(spark, procedures) -> None:
    """pyspark 4's Python data source on this install (its helper signatures change between minor
    releases; .ci/pyspark_lines.sh runs the whole data-source suite on the 4.x lines the suites do not):
    an append through ``spark.write``, then a filtered read through ``spark.read``."""
    procedures.register_data_source(spark)
    rows = spark.createDataFrame([(5, "click", datetime.datetime(2024, 1, 3, 9))], "id bigint, category string, ts timestamp")
    rows.write.format("iceberg-procedures").mode("append").save("local.db.events")
    read = spark.read.format("iceberg-procedures").load("local.db.events").where("category = 'click'")
    got = sorted(r["id"] for r in read.select("id").collect())
    assert got == [1, 3, 5], got
    print("data source on pyspark", spark.version, ": OK")


if __name__ == "__main__":
    sys.exit(main())
