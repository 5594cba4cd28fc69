"""Snapshot summaries name the engine as Iceberg Java's Spark integration does: ``engine-name=spark``,
``engine-version`` and ``app-id`` on every commit, ``spark.app.id`` besides on DataFrame writes.
Java's ``iceberg-version`` (its Apache Iceberg build) is ours ``iceberg-procedures-version``."""

from __future__ import annotations

import pytest

import procedures
from procedures.spark.dml import append

pytestmark = [pytest.mark.spark, pytest.mark.java]

ENVIRONMENT = {"engine-name", "engine-version", "app-id", "spark.app.id", "iceberg-version",
               "iceberg-procedures-version"}


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    spark.conf.set("spark.sql.catalog.ours.type", "hadoop")
    spark.conf.set("spark.sql.catalog.ours.warehouse", str(java_warehouse))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")


def _environment(spark, table: str) -> list[tuple[str, dict[str, str]]]:
    rows = spark.sql(f"SELECT operation, summary FROM jcat.{table}.snapshots ORDER BY committed_at").collect()
    return [(r.operation, {k: v for k, v in dict(r.summary).items() if k in ENVIRONMENT}) for r in rows]


def test_summary_engine_keys_match_java_on_twin_operations(spark, ours):
    for name in ("sum_java", "sum_ours"):
        spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
        spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, d string) USING iceberg")
    # an append of a DataFrame, then a procedure's commit (rewrite_data_files: replace)
    for rows in ("(1, 'a')", "(2, 'b')"):
        spark.sql(f"INSERT INTO jcat.db.sum_java VALUES {rows}")
        append(spark, "ours.db.sum_ours", spark.sql(f"SELECT * FROM VALUES {rows} AS v(id, d)"))
    spark.sql("CALL jcat.system.rewrite_data_files(table => 'db.sum_java', options => map('rewrite-all', 'true'))")
    procedures.call("rewrite_data_files", spark=spark, table="ours.db.sum_ours", options={"rewrite-all": "true"})
    spark.sql("REFRESH TABLE jcat.db.sum_ours")

    java, mine = _environment(spark, "db.sum_java"), _environment(spark, "db.sum_ours")
    assert [op for op, _ in java] == [op for op, _ in mine] == ["append", "append", "replace"]
    app_id = spark.conf.get("spark.app.id")
    for (op, j), (_, m) in zip(java, mine):
        assert set(m) == set(j) - {"iceberg-version"} | {"iceberg-procedures-version"}, op
        assert {k: m[k] for k in ("engine-name", "engine-version", "app-id")} == \
            {k: j[k] for k in ("engine-name", "engine-version", "app-id")} == \
            {"engine-name": "spark", "engine-version": spark.version, "app-id": app_id}, op
        assert m.get("spark.app.id") == j.get("spark.app.id"), op  # on the appends only
        assert m["iceberg-procedures-version"] == f"iceberg-procedures {procedures.__version__}"
