"""table_health and plan_maintenance on tables written by Iceberg Java (``jcat``) and by us: a
neglected table (small files, many snapshots, heavy merge-on-read deletes, orphan files, no
statistics) gets a finding per problem and a plan naming each procedure; executing the plan keeps
every row as Java, PyIceberg and DuckDB read it, deletes the orphans, and leaves a table whose
health has no warnings and whose next plan is empty.  A maintained table gets neither."""

from __future__ import annotations

import os

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.frontend import runner
from procedures.spark.dml import append, delete_where
from procedures.spark.session import catalog_for
from procedures.spec.partitioning import PartitionSpecBuilder
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, STRING, NestedField
from tests.helpers.files import touch
from tests.oracles import assert_rows_equal, java_metadata_location, read_all

pytestmark = [pytest.mark.spark, pytest.mark.java]

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "cat", STRING)))
PROPS = {"format-version": "2", "write.delete.mode": "merge-on-read",
         # every snapshot but the current one is past retention as soon as the next commit lands
         "history.expire.max-snapshot-age-ms": "1"}
APPENDS = 12
# ids 0-4 of every ten are in partition a, 5-9 in b; the deletes hide 3 of 5 rows of a's files, 2 of 5 of b's
DELETED_A = [i * 10 + k for i in range(APPENDS) for k in (0, 1, 2)]
DELETED_B = [i * 10 + k for i in range(APPENDS) for k in (5, 6)]


def _conf(warehouse) -> dict:
    return {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(warehouse),
            "spark.sql.session.timeZone": "UTC"}


def _run(spark, warehouse, name, **kwargs):
    result = runner.run(name, kwargs=kwargs, catalog="ours", conf=_conf(warehouse), spark=spark)
    return [dict(zip([c.name for c in result.columns], r)) for r in result.rows]


def _rows(i):
    return [(i * 10 + k, "a" if k < 5 else "b") for k in range(10)]


def _java_neglected(spark, name, fv):
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    props = ", ".join(f"'{k}'='{v}'" for k, v in {**PROPS, "format-version": str(fv)}.items())
    spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint NOT NULL, cat string) USING iceberg PARTITIONED BY (cat) "
              f"TBLPROPERTIES ({props})")
    for i in range(APPENDS):
        values = ", ".join(f"({a}, '{b}')" for a, b in _rows(i))
        spark.sql(f"INSERT INTO jcat.db.{name} VALUES {values}")
    for ids in (DELETED_A, DELETED_B):
        spark.sql(f"DELETE FROM jcat.db.{name} WHERE id IN ({', '.join(map(str, ids))})")


def _our_neglected(spark, name, fv):
    cat = catalog_for(spark, "jcat")
    ident = ("db", name)
    if cat.table_exists(ident):
        cat.drop_table(ident, purge=True)
    spec = PartitionSpecBuilder(SCHEMA).identity("cat").build()
    md, _ = new_table_metadata(schema=SCHEMA, location=cat.default_table_location(ident), spec=spec,
                               format_version=fv, properties={**PROPS, "format-version": str(fv)})
    t = cat.create_table(ident, md)
    for i in range(APPENDS):
        t = append(spark, t, spark.createDataFrame(_rows(i), "id bigint, cat string").repartition(1, "cat"))
    for ids in (DELETED_A, DELETED_B):
        t = delete_where(spark, t, f"id IN ({', '.join(map(str, ids))})")


def _read(spark, warehouse, name):
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    return read_all(spark, f"jcat.db.{name}", java_metadata_location(warehouse, "db", name))


@pytest.mark.parametrize("writer,fv", [("java", 2), ("ours", 2), ("java", 3), ("ours", 3)])
def test_neglected_table_is_planned_executed_and_healthy(spark, java_warehouse, writer, fv):
    name = f"health_neglected_{writer}_v{fv}"
    (_java_neglected if writer == "java" else _our_neglected)(spark, name, fv)
    location = HadoopCatalog("ours", str(java_warehouse)).load_table(("db", name)).location
    orphans = [touch(f"{location}/data/cat=a/orphan-1.parquet"), touch(f"{location}/metadata/orphan-2.avro")]
    before = _read(spark, java_warehouse, name)
    assert before["java"].num_rows == APPENDS * 5

    health = _run(spark, java_warehouse, "table_health", table=f"db.{name}", include_orphans=True)
    by_check = {}
    for row in health:
        by_check.setdefault(row["check"], []).append(row)
    assert {r["partition"] for r in by_check["small_files"]} == {"cat=a", "cat=b"}
    assert all(r["measured"] == APPENDS for r in by_check["small_files"])
    assert {r["partition"]: r["measured"] for r in by_check["deleted_rows"]} == {"cat=a": 0.6, "cat=b": 0.4}
    # v2: one position delete file per data file and DELETE; v3: deletion vectors, never compacted
    assert {r["partition"] for r in by_check.get("delete_files", [])} == ({"cat=a", "cat=b"} if fv == 2 else set())
    assert [r["measured"] for r in by_check["small_manifests"]] == [APPENDS]
    assert [r["measured"] for r in by_check["orphan_files"]] == [2]
    assert by_check["expired_snapshots"][0]["measured"] == APPENDS + 1  # all but the current snapshot
    assert [r["severity"] for r in by_check["missing_statistics"]] == ["info"]
    # the orphans were only listed
    assert all(os.path.exists(p) for p in orphans)

    plan = _run(spark, java_warehouse, "plan_maintenance", table=f"db.{name}")
    assert [r["procedure"] for r in plan] == ["rewrite_data_files", "rewrite_position_delete_files",
                                              "rewrite_manifests", "expire_snapshots", "remove_orphan_files",
                                              "compute_table_stats"]
    assert not any(r["executed"] for r in plan)
    assert "'delete-file-threshold', '1'" in plan[0]["arguments"]
    assert plan[3]["call"] == f"CALL ours.system.expire_snapshots(table => 'db.{name}', retain_last => 1)"
    assert _read(spark, java_warehouse, name)["java"].num_rows == APPENDS * 5  # planning changed nothing

    done = _run(spark, java_warehouse, "plan_maintenance", table=f"db.{name}", execute=True)
    assert [r["procedure"] for r in done] == [r["procedure"] for r in plan] and all(r["executed"] for r in done)
    results = {r["procedure"]: r["result"] for r in done}
    assert results["rewrite_data_files"].startswith(f"rewritten_data_files_count={2 * APPENDS},")
    assert "2 rows: orphan_file_location=" in results["remove_orphan_files"]
    assert results["compute_table_stats"].startswith("statistics_file=")
    assert not any(os.path.exists(p) for p in orphans)

    for reader, got in _read(spark, java_warehouse, name).items():
        assert_rows_equal(got, before["java"], key="id", label=f"after plan_maintenance / {reader}")
    after = _run(spark, java_warehouse, "table_health", table=f"db.{name}", include_orphans=True)
    assert after == []
    assert _run(spark, java_warehouse, "plan_maintenance", table=f"db.{name}") == []


def test_maintained_table_has_no_findings(spark, java_warehouse):
    name = "health_maintained"
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, cat string) USING iceberg PARTITIONED BY (cat) "
              "TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO jcat.db.{name} SELECT id, concat('c', cast(id % 3 as string)) FROM range(0, 300)")
    # statistics computed by Iceberg Java count as present
    spark.sql(f"CALL jcat.system.compute_table_stats(table => 'db.{name}')")
    before = _read(spark, java_warehouse, name)
    assert _run(spark, java_warehouse, "table_health", table=f"db.{name}", include_orphans=True) == []
    assert _run(spark, java_warehouse, "plan_maintenance", table=f"db.{name}", execute=True) == []
    for reader, got in _read(spark, java_warehouse, name).items():
        assert_rows_equal(got, before["java"], key="id", label=f"maintained / {reader}")


def test_findings_match_what_java_procedures_do(spark, java_warehouse):
    # the measured values are what Iceberg Java's own procedures act on, run with their defaults on
    # the Java-written table (the health report is taken first and changes nothing)
    name = "health_vs_java"
    _java_neglected(spark, name, 2)
    location = HadoopCatalog("ours", str(java_warehouse)).load_table(("db", name)).location
    touch(f"{location}/data/cat=b/orphan.parquet")
    health = _run(spark, java_warehouse, "table_health", table=f"db.{name}", include_orphans=True)
    measured = {}
    for row in health:
        measured[row["check"]] = measured.get(row["check"], 0) + row["measured"]

    orphans = spark.sql(f"CALL jcat.system.remove_orphan_files(table => 'db.{name}', dry_run => true)").collect()
    assert len(orphans) == measured["orphan_files"] == 1
    snapshots = spark.sql(f"SELECT count(*) FROM jcat.db.{name}.snapshots").collect()[0][0]
    spark.sql(f"CALL jcat.system.expire_snapshots(table => 'db.{name}')")
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    left = spark.sql(f"SELECT count(*) FROM jcat.db.{name}.snapshots").collect()[0][0]
    assert snapshots - left == measured["expired_snapshots"] and left == 1
    rewritten = spark.sql(f"CALL jcat.system.rewrite_data_files(table => 'db.{name}')").collect()[0]
    assert rewritten.rewritten_data_files_count == measured["small_files"] == 2 * APPENDS
    manifests = spark.sql(f"CALL jcat.system.rewrite_manifests(table => 'db.{name}')").collect()[0]
    assert manifests.added_manifests_count < manifests.rewritten_manifests_count
