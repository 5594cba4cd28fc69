"""``dry_run`` of the procedures that change tables, on Java-written twin tables.

Each case builds two tables by the same Iceberg Java SQL statements (``jcat.db.<t>_d`` and
``_r``), calls our procedure (catalog ``ours``: our hadoop catalog on the same warehouse) with
``dry_run => true`` on the first and for real on the second, and checks:

* the outputs are equal (snapshot ids compared by their position in the table's history, paths
  relative to the table with uuids masked);
* the dry-run table's folder is byte for byte what it was (every file hashed, every folder listed),
  its current metadata file is the same, and Iceberg Java reads the same rows;
* a real run on the dry-run table afterwards returns exactly what the dry run returned, and leaves
  the rows Java reads equal to the twin's.

snapshot and migrate create tables: their dry run leaves no table, no folder and the source as it
was.  On S3 (a SeaweedFS server) the bucket's objects are hashed around the dry runs.  The six ref-moving snapshot procedures are covered without Spark in
``tests/unit/test_dry_run.py``; here one of them goes through SQL to check the argument binds.
"""

from __future__ import annotations

import hashlib
import os

import pyarrow.fs as pafs
import pytest

import procedures
from procedures.core.gc import reachability as R
from procedures.core.kernel.paths import local_path
from procedures.framework.context import open_catalog
from procedures.frontend import runner
from procedures.io.storage import s3_options
from procedures.spark.session import catalog_for
from tests.helpers.files import folder_state as files_state
from tests.helpers.outputs import normalized

pytestmark = [pytest.mark.spark, pytest.mark.java]

DB = "drdb"


@pytest.fixture(scope="module")
def conf(spark, java_warehouse) -> dict[str, str]:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    return {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse),
            "spark.sql.session.timeZone": "UTC"}


@pytest.fixture(scope="module")
def ours(conf):
    return open_catalog("ours", conf)


def folder_state(root: str) -> tuple[dict[str, str], list[str]]:
    return files_state(local_path(root) or root)


def build(spark, name: str, steps: list[str]) -> None:
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name} PURGE")
    for step in steps:
        spark.sql(step.format(t=f"jcat.db.{name}"))


def java_rows(spark, name: str) -> list[tuple]:
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    return sorted((tuple(r) for r in spark.sql(f"SELECT * FROM jcat.db.{name}").collect()), key=repr)


def positions(ours, name: str) -> dict[int, int]:
    snaps = sorted(ours.load_table(("db", name)).metadata.snapshots, key=lambda s: (s.sequence_number, s.timestamp_ms))
    return {s.snapshot_id: i for i, s in enumerate(snaps)}


def call(spark, conf, procedure: str, **kwargs) -> list[tuple]:
    return runner.run(procedure, kwargs=kwargs, catalog="ours", conf=conf, spark=spark).rows


def _without(rows: list[tuple], columns: tuple[int, ...]) -> list[tuple]:
    return [tuple(v for i, v in enumerate(r) if i not in columns) for r in rows]


def twins(spark, conf, ours, name: str, steps: list[str], procedure: str, args=lambda n: {},
          twin_differs: tuple[int, ...] = ()) -> list[tuple]:
    """The dry run on ``<name>_d``, the real run on ``<name>_r``, then a real run on ``<name>_d``
    (see the module doc); returns the dry run's rows.  The dry run must equal the later real run
    on the same table exactly; ``twin_differs`` names output columns that may differ from the
    twin's because the twins' own files differ (file names Java drew are written into delete files)."""
    dry_name, real_name = f"{name}_d", f"{name}_r"
    for n in (dry_name, real_name):
        build(spark, n, steps)
    table = ours.load_table(("db", dry_name))
    root, metadata = table.location, table.metadata_location
    state, rows = folder_state(root), java_rows(spark, dry_name)
    pos_dry, pos_real = positions(ours, dry_name), positions(ours, real_name)

    dry = call(spark, conf, procedure, table=f"db.{dry_name}", dry_run=True, **args(dry_name))
    assert folder_state(root) == state, f"the dry run of {procedure} changed the table's folder"
    assert ours.load_table(("db", dry_name)).metadata_location == metadata
    assert java_rows(spark, dry_name) == rows

    real_before = ours.load_table(("db", real_name)).metadata_location
    real = call(spark, conf, procedure, table=f"db.{real_name}", **args(real_name))
    real_root = ours.load_table(("db", real_name)).location
    assert ours.load_table(("db", real_name)).metadata_location != real_before, "the real run changed nothing"
    assert _without(normalized(dry, pos_dry, root), twin_differs) == _without(normalized(real, pos_real, real_root),
                                                                           twin_differs)

    again = call(spark, conf, procedure, table=f"db.{dry_name}", **args(dry_name))
    assert normalized(again, pos_dry, root) == normalized(dry, pos_dry, root)
    assert java_rows(spark, dry_name) == java_rows(spark, real_name)
    return dry


# ------------------------------------------------------------------------------ data rewrites
SMALL_FILES = [
    "CREATE TABLE {t} (id bigint, cat string) USING iceberg PARTITIONED BY (cat)",
    *[f"INSERT INTO {{t}} SELECT id, concat('c', cast(id % 2 as string)) FROM range({i * 50}, {(i + 1) * 50})"
      for i in range(4)],
]

MERGE_ON_READ = [
    "CREATE TABLE {t} (id bigint, cat string) USING iceberg PARTITIONED BY (cat) TBLPROPERTIES "
    "('format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')",
    *[f"INSERT INTO {{t}} SELECT id, concat('c', cast(id % 2 as string)) FROM range({i * 100}, {(i + 1) * 100})"
      for i in range(4)],
    *[f"DELETE FROM {{t}} WHERE id BETWEEN {lo} AND {lo + 10}" for lo in (5, 55, 105, 205)],
]


@pytest.mark.parametrize("case, args", [
    ("bin", {"options": {"min-input-files": "2"}}),
    ("sort", {"strategy": "sort", "sort_order": "id DESC", "options": {"rewrite-all": "true"}}),
    # two groups, two commits: the second is planned on top of the first
    ("partial", {"options": {"min-input-files": "2", "partial-progress.enabled": "true",
                             "partial-progress.max-commits": "2"}}),
    ("where", {"options": {"min-input-files": "2"}, "where": "cat = 'c1'"}),
])
def test_rewrite_data_files(spark, conf, ours, case, args):
    rows = twins(spark, conf, ours, f"rdf_{case}", SMALL_FILES, "rewrite_data_files", lambda n: args)
    assert rows[0][0] >= 4 and rows[0][1] >= 1 and rows[0][2] > 0


def test_rewrite_data_files_with_deletes(spark, conf, ours):
    # rewriting the data files drops their position deletes, which then dangle (counted in the output)
    rows = twins(spark, conf, ours, "rdf_mor", MERGE_ON_READ, "rewrite_data_files",
                 lambda n: {"options": {"rewrite-all": "true", "remove-dangling-deletes": "true"}})
    assert rows[0][0] == 8 and rows[0][4] > 0


def test_rewrite_position_delete_files(spark, conf, ours):
    # delete files hold the data files' paths, whose names Java drew differently in each twin: the
    # byte counts of the old and new delete files can differ by a few bytes between the twins
    rows = twins(spark, conf, ours, "rpd", MERGE_ON_READ, "rewrite_position_delete_files",
                 lambda n: {"options": {"rewrite-all": "true"}}, twin_differs=(2, 3))
    assert rows[0][0] >= 4 and rows[0][1] >= 1 and rows[0][3] > 0


def test_rewrite_manifests(spark, conf, ours):
    rows = twins(spark, conf, ours, "rm", SMALL_FILES, "rewrite_manifests")
    assert rows == [(4, 1)]


# ------------------------------------------------------------------------------ expiration, stats
@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_expire_snapshots(spark, conf, ours, monkeypatch, engine):
    if engine == "spark":  # the content comparison runs as Spark jobs
        monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    steps = SMALL_FILES + ["INSERT OVERWRITE {t} SELECT id, cat FROM {t} WHERE id < 120"]
    rows = twins(spark, conf, ours, f"exp_{engine}", steps, "expire_snapshots",
                 lambda n: {"older_than": 2**62 // 1000 * 1000, "retain_last": 1})
    assert rows[0][0] > 0 and rows[0][3] > 0 and rows[0][4] == 4


def test_compute_table_stats(spark, conf, ours):
    rows = twins(spark, conf, ours, "cts", SMALL_FILES, "compute_table_stats")
    assert rows[0][0].endswith(".stats") and not os.path.exists(local_path(rows[0][0]))


def test_compute_partition_stats(spark, conf, ours):
    rows = twins(spark, conf, ours, "cps", SMALL_FILES, "compute_partition_stats")
    assert "partition-stats-" in rows[0][0] and not os.path.exists(local_path(rows[0][0]))


def test_rollback_through_sql_binds_dry_run(spark, conf, ours):
    build(spark, "sql_rb", SMALL_FILES)
    table = ours.load_table(("db", "sql_rb"))
    first = min(table.metadata.snapshots, key=lambda s: s.sequence_number).snapshot_id
    state = folder_state(table.location)
    for key, value in conf.items():
        spark.conf.set(key, value)
    rows = procedures.sql(spark, f"CALL ours.system.rollback_to_snapshot('db.sql_rb', {first}L, true)").collect()
    assert tuple(rows[0]) == (table.metadata.current_snapshot_id, first)
    assert folder_state(table.location) == state
    assert ours.load_table(("db", "sql_rb")).metadata.current_snapshot_id == table.metadata.current_snapshot_id


# ------------------------------------------------------------------------------ add_files
def test_add_files(spark, conf, ours, tmp_path):
    source = str(tmp_path / "src")
    (spark.range(0, 60).selectExpr("id", "concat('c', cast(id % 2 as string)) AS cat")
     .repartition(3).write.partitionBy("cat").parquet(source))
    source_state = folder_state(source)
    steps = ["CREATE TABLE {t} (id bigint, cat string) USING iceberg PARTITIONED BY (cat)",
             "INSERT INTO {t} VALUES (1000, 'c0')"]
    rows = twins(spark, conf, ours, "af", steps, "add_files", lambda n: {"source_table": f"`parquet`.`{source}`"})
    assert rows[0][0] >= 2
    assert folder_state(source) == source_state


# ------------------------------------------------------------------------------ snapshot, migrate
COLUMNS = "id bigint, data string, p int"


def _source(spark, name: str) -> str:
    spark.sql(f"DROP TABLE IF EXISTS spark_catalog.{DB}.{name}")
    spark.sql(f"CREATE TABLE spark_catalog.{DB}.{name} ({COLUMNS}) USING parquet PARTITIONED BY (p)")
    spark.sql(f"INSERT INTO spark_catalog.{DB}.{name} VALUES (1, 'a', 0), (2, 'b', 1)")
    spark.sql(f"INSERT INTO spark_catalog.{DB}.{name} VALUES (3, 'c', 1), (4, NULL, 0)")
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED spark_catalog.{DB}.{name}").collect()
    return next(r.data_type for r in rows if r.col_name == "Location")


def test_snapshot(spark, conf, ours, java_warehouse):
    spark.sql(f"CREATE DATABASE IF NOT EXISTS spark_catalog.{DB}")
    location = _source(spark, "snap_src")
    source_state = folder_state(location)
    for n in ("snap_d", "snap_r"):
        spark.sql(f"DROP TABLE IF EXISTS jcat.db.{n} PURGE")
    warehouse_state = folder_state(str(java_warehouse / "db"))
    args = {"source_table": f"{DB}.snap_src"}
    dry = call(spark, conf, "snapshot", table="db.snap_d", dry_run=True, **args)
    assert not ours.table_exists(("db", "snap_d"))
    assert folder_state(str(java_warehouse / "db")) == warehouse_state
    assert folder_state(location) == source_state
    real = call(spark, conf, "snapshot", table="db.snap_r", **args)
    assert dry == real and dry[0][0] >= 2
    assert call(spark, conf, "snapshot", table="db.snap_d", **args) == real
    assert java_rows(spark, "snap_d") == java_rows(spark, "snap_r")


def test_migrate(spark):
    spark.conf.set("spark.sql.catalog.ohive.type", "hive")  # our hive catalog on the session's metastore
    spark.sql(f"CREATE DATABASE IF NOT EXISTS spark_catalog.{DB}")
    for n in ("mg_d", "mg_r", "mg_d_backup_", "mg_r_backup_"):
        spark.sql(f"DROP TABLE IF EXISTS spark_catalog.{DB}.{n}")
    location = _source(spark, "mg_d")
    _source(spark, "mg_r")
    state = folder_state(location)
    rows = sorted((tuple(r) for r in spark.table(f"spark_catalog.{DB}.mg_d").collect()), key=repr)
    dry = [tuple(r) for r in procedures.sql(
        spark, f"CALL ohive.system.migrate(table => '{DB}.mg_d', dry_run => true)").collect()]
    # still the Parquet table it was: no backup, no Iceberg metadata, the same files
    assert not spark.catalog.tableExists(f"{DB}.mg_d_backup_")
    assert spark.sql(f"DESCRIBE TABLE EXTENDED spark_catalog.{DB}.mg_d").where("col_name = 'Provider'").collect()[0][1] == "parquet"
    assert folder_state(location) == state
    assert sorted((tuple(r) for r in spark.table(f"spark_catalog.{DB}.mg_d").collect()), key=repr) == rows
    real = [tuple(r) for r in procedures.sql(spark, f"CALL ohive.system.migrate(table => '{DB}.mg_r')").collect()]
    assert dry == real and dry[0][0] >= 2
    again = [tuple(r) for r in procedures.sql(spark, f"CALL ohive.system.migrate(table => '{DB}.mg_d')").collect()]
    assert again == real
    assert catalog_for(spark, "ohive").load_table((DB, "mg_d")).metadata.properties.get("migrated") == "true"


# ------------------------------------------------------------------------------ object store
def _bucket_state(s3_server, prefix: str) -> dict[str, str]:
    fs = pafs.S3FileSystem(**s3_options(s3_server.properties()))
    out = {}
    for info in fs.get_file_info(pafs.FileSelector(prefix, recursive=True, allow_not_found=True)):
        if info.type == pafs.FileType.File:
            with fs.open_input_stream(info.path) as f:
                out[info.path] = hashlib.sha256(f.read()).hexdigest()
    return out


def test_dry_runs_on_s3(spark, s3_server, tmp_path):
    catalog = "s3dry"
    keys = {"type": "jdbc", "uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}",
            "warehouse": f"s3://{s3_server.bucket}/dry", **s3_server.properties()}
    for key, value in keys.items():
        spark.conf.set(f"spark.sql.catalog.{catalog}.{key}", value)
    try:
        procedures.sql(spark, f"CREATE NAMESPACE IF NOT EXISTS {catalog}.db")
        procedures.sql(spark, f"CREATE TABLE {catalog}.db.t (id bigint, cat string) USING iceberg PARTITIONED BY (cat)")
        for i in range(3):
            procedures.sql(spark, f"INSERT INTO {catalog}.db.t VALUES ({i}, 'a'), ({i + 10}, 'b')")
        prefix = f"{s3_server.bucket}/dry"
        calls = [
            "rewrite_data_files(table => 'db.t', options => map('min-input-files', '2'){dry})",
            "expire_snapshots(table => 'db.t', older_than => TIMESTAMP '2100-01-01 00:00:00', retain_last => 1{dry})",
        ]
        for text in calls:
            state = _bucket_state(s3_server, prefix)
            dry = [tuple(r) for r in procedures.sql(spark, f"CALL {catalog}.system." + text.format(dry=", dry_run => true")).collect()]
            assert _bucket_state(s3_server, prefix) == state, text
            real = [tuple(r) for r in procedures.sql(spark, f"CALL {catalog}.system." + text.format(dry="")).collect()]
            assert dry == real and sum(real[0]) > 0, text
            assert _bucket_state(s3_server, prefix) != state, text
    finally:
        for key in keys:
            spark.conf.unset(f"spark.sql.catalog.{catalog}.{key}")
