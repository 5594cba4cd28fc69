"""compute_table_stats and compute_partition_stats on twin tables written by Iceberg Java.

Each table is built with Java SQL on ``jcat.db.<t>``; its folder is saved, Java's
``CALL jcat.system.<proc>`` runs and its result is recorded, the folder is restored and ours runs
(``CALL ours.system.<proc>`` through :func:`procedures.sql`).  Our NDVs must equal Java's, Java must
load the table with our statistics file and read our Puffin file and sketches, and our partition
statistics rows must equal those of Java's file.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

import procedures
from procedures.errors import IcebergError
from procedures.spec.puffin import read_puffin
from tests.spark.test_gc_java_tables import Twin, _age, build, ours  # noqa: F401 -- the fixture
from tests.helpers.references import import_reference

import_reference("datasketches")
# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]

TYPES = [
    "CREATE TABLE {t} (id bigint, i int, s string, d date, ts timestamp, ntz timestamp_ntz, b boolean, "
    "f float, db double, dec decimal(10, 2), bin binary, st struct<x: int, y: string>, l array<int>) "
    "USING iceberg PARTITIONED BY (bucket(2, id), d) "
    "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')",
    "INSERT INTO {t} SELECT id, CAST(id % 7 AS INT), CONCAT('s', id % 13), DATE_ADD(DATE '2024-01-01', CAST(id % 3 AS INT)), "
    "TIMESTAMP '2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 50), "
    "TIMESTAMP_NTZ '2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, id % 40, 0), id % 2 = 0, "
    "CAST(id % 11 AS FLOAT) / 3, CAST(id % 17 AS DOUBLE) / 7, CAST(id % 19 AS DECIMAL(10, 2)) / 4, "
    "CAST(CONCAT('b', id % 23) AS BINARY), named_struct('x', CAST(id % 5 AS INT), 'y', 'q'), array(1) "
    "FROM range(0, 300)",
    "INSERT INTO {t} VALUES (1000, NULL, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "DELETE FROM {t} WHERE id < 20",
]


def java_table(spark, name: str):
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    return spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"jcat.db.{name}")


def java_stats(spark, name: str) -> dict[int, dict[int, int]]:
    """snapshot id -> {field id: ndv} as Iceberg Java reads the table's statistics."""
    out = {}
    for sf in java_table(spark, name).statisticsFiles():
        out[sf.snapshotId()] = {int(b.fields()[0]): int(b.properties()["ndv"]) for b in sf.blobMetadata()}
    return out


def java_sketch_estimates(spark, io, path: str) -> dict[int, float]:
    """Iceberg Java's Puffin reader lists the blobs; its (shaded) DataSketches reads each sketch."""
    jvm = spark._jvm
    reader = jvm.org.apache.iceberg.puffin.Puffin.read(
        jvm.org.apache.iceberg.Files.localInput(path.replace("file:", ""))).build()
    java_blobs = [(int(b.inputFields()[0]), b.type()) for b in reader.fileMetadata().blobs()]
    reader.close()
    puffin = read_puffin(io, path)
    sk = jvm.org.apache.iceberg.shaded.org.apache.datasketches
    out = {}
    for b in puffin.blobs:
        sketch = sk.theta.Sketches.wrapSketch(sk.memory.Memory.wrap(bytearray(puffin.read_blob(b))))
        out[b.fields[0]] = sketch.getEstimate()
    assert sorted(java_blobs) == sorted((f, "apache-datasketches-theta-v1") for f in out)
    return out


def test_compute_table_stats_like_java(spark, ours, tmp_path):
    name = "stats_types"
    build(spark, name, TYPES)
    twin = Twin(spark, ours, name, tmp_path)
    md0 = ours.load_table(("db", name)).metadata
    sid = md0.current_snapshot_id
    jrows = spark.sql(f"CALL jcat.system.compute_table_stats(table => 'db.{name}')").collect()
    assert len(jrows) == 1 and jrows[0][0].endswith(".stats")
    java = java_stats(spark, name)[sid]
    twin.restore()
    df = procedures.sql(spark, f"CALL ours.system.compute_table_stats(table => 'db.{name}')")
    assert [(f.name, f.nullable) for f in df.schema] == [("statistics_file", True)]
    rows = df.collect()
    assert len(rows) == 1 and rows[0][0].endswith(".stats") and f"/metadata/{sid}-" in rows[0][0]
    mine = java_stats(spark, name)[sid]
    assert mine == java  # every top-level primitive column, exact NDVs
    assert set(mine) == {f.field_id for f in md0.schema().fields if f.field_type.is_primitive}
    t = ours.load_table(("db", name))
    assert len(t.metadata.statistics) == 1 and t.metadata.statistics[0].snapshot_id == sid
    estimates = java_sketch_estimates(spark, t.io, rows[0][0])
    assert {k: int(v) for k, v in estimates.items()} == mine
    assert spark.sql(f"SELECT count(*) FROM jcat.db.{name}").collect()[0][0] == 281

    # chosen columns, an older snapshot, duplicates dropped; the snapshot's file is replaced
    old = md0.current_snapshot().parent_snapshot_id
    twin.restore()
    spark.sql(f"CALL jcat.system.compute_table_stats(table => 'db.{name}', snapshot_id => {old}, "
              "columns => array('s', 'st.x', 's'))").collect()
    java = java_stats(spark, name)[old]
    twin.restore()
    for _ in range(2):
        procedures.sql(spark, f"CALL ours.system.compute_table_stats(table => 'db.{name}', snapshot_id => {old}, "
                              "columns => array('s', 'st.x', 's'))").collect()
    assert java_stats(spark, name) == {old: java}
    assert len(ours.load_table(("db", name)).metadata.statistics) == 1


@pytest.mark.parametrize("args, message", [
    ("snapshot_id => 42", "Snapshot not found: 42"),
    ("columns => array('nope')", "Can't find column nope"),
    ("columns => array('l')", "non-primitive type column: l"),
    ("columns => array()", "Columns cannot be null/empty"),
])
def test_compute_table_stats_errors(spark, ours, args, message):
    name = "stats_errors"
    if not spark.catalog.tableExists(f"jcat.db.{name}"):
        build(spark, name, ["CREATE TABLE {t} (id bigint, l array<int>) USING iceberg",
                            "INSERT INTO {t} VALUES (1, array(1))"])
    before = ours.load_table(("db", name)).metadata_location
    with pytest.raises(IcebergError, match=message.replace("(", r"\(")):
        procedures.sql(spark, f"CALL ours.system.compute_table_stats(table => 'db.{name}', {args})").collect()
    assert ours.load_table(("db", name)).metadata_location == before
    with pytest.raises(IcebergError, match="db.missing|missing"):
        procedures.sql(spark, "CALL ours.system.compute_table_stats(table => 'db.missing')").collect()


def test_stats_on_an_empty_table(spark, ours):
    name = "stats_empty"
    build(spark, name, ["CREATE TABLE {t} (id bigint, p int) USING iceberg PARTITIONED BY (p)"])
    for proc in ("compute_table_stats", "compute_partition_stats"):
        java = spark.sql(f"CALL jcat.system.{proc}(table => 'db.{name}')").collect()
        mine = procedures.sql(spark, f"CALL ours.system.{proc}(table => 'db.{name}')").collect()
        assert mine == java == []


PARTITIONED = [
    "CREATE TABLE {t} (id bigint, data string, p int) USING iceberg PARTITIONED BY (p) "
    "TBLPROPERTIES ('format-version'='%s', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')",
    "INSERT INTO {t} VALUES (1, 'a', 1), (2, 'b', 1), (3, 'c', 2), (4, 'd', NULL)",
    "INSERT INTO {t} VALUES (5, 'e', 2), (6, 'f', 3)",
    "DELETE FROM {t} WHERE id = 1",
    "ALTER TABLE {t} ADD PARTITION FIELD bucket(2, id)",
    "INSERT INTO {t} VALUES (7, 'g', 1), (8, 'h', 4)",
    "DELETE FROM {t} WHERE p = 3",
    "UPDATE {t} SET data = 'z' WHERE id = 7",
]


def _stats_rows(path: str) -> tuple[list, list]:
    t = pq.read_table(path.replace("file:", ""))
    ids = [(f.name, (f.metadata or {}).get(b"PARQUET:field_id")) for f in t.schema]
    rows = sorted(t.to_pylist(), key=lambda r: (repr(r["partition"]), r["spec_id"]))
    return rows, ids


@pytest.mark.parametrize("version", ["2", "3"])
def test_compute_partition_stats_like_java(spark, ours, tmp_path, version):
    name = f"pstats_v{version}"
    build(spark, name, [s.replace("%s", version) for s in PARTITIONED])
    twin = Twin(spark, ours, name, tmp_path)
    sid = ours.load_table(("db", name)).metadata.current_snapshot_id
    jrows = spark.sql(f"CALL jcat.system.compute_partition_stats(table => 'db.{name}')").collect()
    java_rows, java_ids = _stats_rows(jrows[0][0])
    twin.restore()
    df = procedures.sql(spark, f"CALL ours.system.compute_partition_stats(table => 'db.{name}')")
    assert [(f.name, f.nullable) for f in df.schema] == [("partition_statistics_file", True)]
    rows = df.collect()
    assert len(rows) == 1 and f"/metadata/partition-stats-{sid}-" in rows[0][0] and rows[0][0].endswith(".parquet")
    mine_rows, mine_ids = _stats_rows(rows[0][0])
    assert mine_ids == java_ids
    assert mine_rows == java_rows
    # Java loads the table with our file registered, reads it, and calling again is a no-op
    files = list(java_table(spark, name).partitionStatisticsFiles())
    assert [(f.snapshotId(), f.path()) for f in files] == [(sid, rows[0][0])]
    again = procedures.sql(spark, f"CALL ours.system.compute_partition_stats(table => 'db.{name}')").collect()
    assert again == rows
    assert spark.sql(f"SELECT count(*) FROM jcat.db.{name}").collect()[0][0] == 6


def test_compute_partition_stats_errors(spark, ours):
    name = "pstats_errors"
    build(spark, name, ["CREATE TABLE {t} (id bigint) USING iceberg", "INSERT INTO {t} VALUES (1)"])
    before = ours.load_table(("db", name)).metadata_location
    with pytest.raises(IcebergError, match="Table must be partitioned"):
        procedures.sql(spark, f"CALL ours.system.compute_partition_stats(table => 'db.{name}')").collect()
    build(spark, name + "p", ["CREATE TABLE {t} (id bigint) USING iceberg PARTITIONED BY (id)",
                              "INSERT INTO {t} VALUES (1)"])
    with pytest.raises(IcebergError, match="Snapshot not found: 7"):
        procedures.sql(spark, f"CALL ours.system.compute_partition_stats(table => 'db.{name}p', snapshot_id => 7)").collect()
    assert ours.load_table(("db", name)).metadata_location == before


def test_gc_keeps_and_expires_statistics_files(spark, ours):
    """remove_orphan_files keeps both files; expire_snapshots deletes them with their snapshot."""
    name = "stats_gc"
    build(spark, name, ["CREATE TABLE {t} (id bigint, p int) USING iceberg PARTITIONED BY (p)",
                        "INSERT INTO {t} VALUES (1, 1), (2, 2)"])
    stats = procedures.sql(spark, f"CALL ours.system.compute_table_stats(table => 'db.{name}')").collect()[0][0]
    pstats = procedures.sql(spark, f"CALL ours.system.compute_partition_stats(table => 'db.{name}')").collect()[0][0]
    loc = ours.load_table(("db", name)).location.replace("file:", "")
    open(f"{loc}/metadata/stray.stats", "wb").close()
    _age(loc)
    orphans = {r[0] for r in procedures.sql(
        spark, f"CALL ours.system.remove_orphan_files(table => 'db.{name}', dry_run => true)").collect()}
    assert orphans == {f"file:{loc}/metadata/stray.stats"}, orphans
    assert not {stats, pstats} & orphans
    spark.sql(f"INSERT INTO jcat.db.{name} VALUES (3, 3)")
    out = procedures.sql(spark, f"CALL ours.system.expire_snapshots(table => 'db.{name}', "
                                "older_than => TIMESTAMP '2100-01-01 00:00:00', retain_last => 1)").collect()
    assert out[0][5] == 2  # deleted_statistics_files_count: the Puffin and the partition stats file
    md = ours.load_table(("db", name)).metadata
    assert md.statistics == () or list(md.statistics) == []
    assert list(md.partition_statistics) == []
