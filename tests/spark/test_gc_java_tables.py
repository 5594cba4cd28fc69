"""expire_snapshots and remove_orphan_files on tables written by Iceberg Java, against Java's own procedures.

Each scenario is built once with Java SQL on ``jcat.db.<t>``.  The table folder is saved, Java's
``CALL jcat.system.<proc>`` runs, the deleted paths (relative to the table location) and the output
are recorded, the folder is restored byte for byte, and ours runs (``CALL ours.system.<proc>``
through :func:`procedures.sql`; ``ours`` is our hadoop catalog on the same warehouse).  Outputs,
deleted paths and the resulting refs/snapshots must be identical.  The driver and the Spark
implementations of reachability and listing are both exercised (thresholds forced to zero).
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

import procedures
from procedures.errors import IcebergError
from procedures.core.gc import deletes as EX
from procedures.core.gc import reachability as R
from procedures.framework.context import open_catalog
from procedures.spark import listing as L
from procedures.spark.engine import gc_steps as O

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]

FUTURE = "TIMESTAMP '2100-01-01 00:00:00'"


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    spark.conf.set("spark.sql.catalog.ours.type", "hadoop")
    spark.conf.set("spark.sql.catalog.ours.warehouse", str(java_warehouse))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    return open_catalog("ours", {"spark.sql.catalog.ours.type": "hadoop",
                                          "spark.sql.catalog.ours.warehouse": str(java_warehouse)})


def _spark_path(mp: pytest.MonkeyPatch, calls: list) -> None:
    """Force reachability and listing of ours onto Spark (thresholds to zero), counting Spark reads."""
    mp.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    mp.setattr(R, "DRIVER_MAX_LISTS", 0)  # remove_orphan_files reads the manifest lists in Spark tasks too
    mp.setattr(O, "DRIVER_MAX_DIRS", 1)
    # small delete batches: manifests are deleted before the last content rows are read
    mp.setattr(EX, "DELETE_BATCH", 2)
    # expire's and remove_orphan_files' (the manifests of Spark-read lists)
    for reader in ("manifest_content_dataframe", "valid_keys_dataframe", "manifest_keys_dataframe"):
        real = getattr(L, reader)
        mp.setattr(L, reader, lambda *a, real=real: calls.append(1) or real(*a))


def build(spark, name: str, steps: list[str]) -> None:
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name} PURGE")
    for step in steps:
        spark.sql(step.format(t=f"jcat.db.{name}"))


def files(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
            if not f.startswith(".")}


class Twin:
    """A table folder that can be restored after a procedure changed it."""

    def __init__(self, spark, ours, name: str, tmp_path) -> None:
        self.spark, self.ours, self.name = spark, ours, name
        self.location = ours.load_table(("db", name)).location.replace("file:", "")
        self.saved = str(tmp_path / f"saved-{name}")
        shutil.copytree(self.location, self.saved)

    def restore(self) -> None:
        shutil.rmtree(self.location)
        shutil.copytree(self.saved, self.location)
        self.spark.sql(f"REFRESH TABLE jcat.db.{self.name}")

    def run(self, sql: str, *, java: bool):
        before = files(self.location)
        df = self.spark.sql(sql) if java else procedures.sql(self.spark, sql)
        rows = sorted(tuple(r) for r in df.collect())
        schema = [(f.name, f.dataType, f.nullable) for f in df.schema]
        self.spark.sql(f"REFRESH TABLE jcat.db.{self.name}")
        md = self.ours.load_table(("db", self.name)).metadata
        shape = (sorted((n, r.ref_type.value) for n, r in md.refs.items()), len(md.snapshots),
                 sorted(s.spec_id for s in md.partition_specs), sorted(s.schema_id for s in md.schemas))
        return rows, schema, before - files(self.location), shape

    def compare(self, args: str, proc: str = "expire_snapshots"):
        """Java's CALL, then ours on the restored folder with driver-side and with Spark reachability."""
        java = self.run(f"CALL jcat.system.{proc}(table => 'db.{self.name}'{args})", java=True)
        for path in ("spark", "driver"):  # the driver run last leaves the table as ours left it
            self.restore()
            calls: list = []
            with pytest.MonkeyPatch.context() as mp:
                if path == "spark":
                    _spark_path(mp, calls)
                mine = self.run(f"CALL ours.system.{proc}(table => 'db.{self.name}'{args})", java=False)
            assert mine[1] == java[1], f"output schema ({path})"
            assert mine[0] == java[0], f"output rows ({path})"
            assert mine[2] == java[2], f"deleted paths ({path})"
            assert mine[3] == java[3], f"refs, snapshot count, specs, schemas ({path})"
            if path == "spark" and (proc != "expire_snapshots" or java[0][0][3] > 0):
                assert calls, "the Spark path read no manifest"
        return mine


MOR_V2 = [
    "CREATE TABLE {t} (id bigint, data string) USING iceberg PARTITIONED BY (bucket(2, id)) "
    "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')",
    "INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd')",
    "INSERT INTO {t} VALUES (5, 'e'), (6, 'f')",
    "DELETE FROM {t} WHERE id = 1",
    "UPDATE {t} SET data = 'z' WHERE id = 5",
    "INSERT OVERWRITE {t} SELECT * FROM {t} WHERE id > 2",
    "INSERT INTO {t} VALUES (7, 'g')",
]


def test_expire_v2_merge_on_read_history(spark, ours, tmp_path):
    name = f"gc_v2"
    build(spark, name, MOR_V2 + ["DELETE FROM {t} WHERE id = 7"])
    twin = Twin(spark, ours, name, tmp_path)
    rows, _, deleted, _ = twin.compare(f", older_than => {FUTURE}, retain_last => 2")
    data, pos, eq, manifests, lists, stats = rows[0]
    assert data > 0 and pos > 0 and manifests > 0 and lists == len(MOR_V2) - 2
    assert any(p.startswith("data/") for p in deleted)
    assert sorted(tuple(r) for r in spark.sql(f"SELECT * FROM jcat.db.{name}").collect()) == [
        (3, "c"), (4, "d"), (5, "z"), (6, "f")]


def test_expire_v3_deletion_vectors(spark, ours, tmp_path):
    name = f"gc_v3"
    build(spark, name, [
        "CREATE TABLE {t} (id bigint, data string) USING iceberg "
        "TBLPROPERTIES ('format-version'='3', 'write.delete.mode'='merge-on-read')",
        "INSERT INTO {t} SELECT id, cast(id as string) FROM range(0, 20)",
        "DELETE FROM {t} WHERE id = 1",
        "DELETE FROM {t} WHERE id = 2",  # the DV is rewritten: the first Puffin file loses its last entry
        "DELETE FROM {t} WHERE id = 3",
    ])
    twin = Twin(spark, ours, name, tmp_path)
    rows, _, deleted, _ = twin.compare(f", older_than => {FUTURE}, retain_last => 1, stream_results => true")
    assert rows[0][1] == 2 and sum(p.endswith(".puffin") for p in deleted) == 2
    assert spark.sql(f"SELECT count(*) FROM jcat.db.{name}").collect()[0][0] == 17


def test_expire_with_branches_tags_and_explicit_ids(spark, ours, tmp_path):
    name = f"gc_refs"
    build(spark, name, [
        "CREATE TABLE {t} (id bigint) USING iceberg TBLPROPERTIES ('format-version'='2')",
        "INSERT INTO {t} VALUES (1)",
        "ALTER TABLE {t} CREATE TAG keep",
        "INSERT INTO {t} VALUES (2)",
        "ALTER TABLE {t} CREATE BRANCH b WITH SNAPSHOT RETENTION 2 SNAPSHOTS",
        "INSERT INTO {t}.branch_b VALUES (10)",
        "INSERT INTO {t}.branch_b VALUES (11)",
        "INSERT INTO {t}.branch_b VALUES (12)",
        "DELETE FROM {t} WHERE id = 2",
        "INSERT INTO {t} VALUES (3)",
        "INSERT INTO {t} VALUES (4)",
    ])
    twin = Twin(spark, ours, name, tmp_path)
    twin.compare(f", older_than => {FUTURE}, retain_last => 1")
    assert sorted(r[0] for r in spark.sql(f"SELECT * FROM jcat.db.{name} VERSION AS OF 'keep'").collect()) == [1]
    assert sorted(r[0] for r in spark.sql(f"SELECT * FROM jcat.db.{name} VERSION AS OF 'b'").collect()) == [1, 2, 10, 11, 12]
    # explicit ids: Java and ours expire the same one (the ids are the same: same metadata)
    twin2 = Twin(spark, ours, name, tmp_path / "again")
    md = ours.load_table(("db", name)).metadata
    heads = {r.snapshot_id for r in md.refs.values()}
    victim = next(s.snapshot_id for s in sorted(md.snapshots, key=lambda s: s.sequence_number) if s.snapshot_id not in heads)
    twin2.compare(f", snapshot_ids => array({victim}L)")
    with pytest.raises(IcebergError, match="Still referenced by refs"):
        procedures.sql(spark, f"CALL ours.system.expire_snapshots(table => 'db.{name}', snapshot_ids => array({md.current_snapshot_id}L))")


def test_expire_statistics_and_clean_expired_metadata(spark, ours, tmp_path):
    name = f"gc_meta"
    build(spark, name, [
        "CREATE TABLE {t} (id bigint, data string) USING iceberg PARTITIONED BY (data) TBLPROPERTIES ('format-version'='2')",
        "INSERT INTO {t} VALUES (1, 'a'), (2, 'b')",
        "CALL jcat.system.compute_table_stats(table => 'db.{name}')".replace("{name}", name),
        "ALTER TABLE {t} DROP PARTITION FIELD data",
        "ALTER TABLE {t} ADD COLUMN extra int",
        "INSERT OVERWRITE {t} SELECT id, data, 0 FROM {t}",
        "INSERT INTO {t} VALUES (3, 'c', 1)",
    ])
    twin = Twin(spark, ours, name, tmp_path)
    rows, _, deleted, shape = twin.compare(f", older_than => {FUTURE}, retain_last => 1, clean_expired_metadata => true")
    assert rows[0][5] == 1 and any(p.endswith(".stats") or p.endswith(".puffin") for p in deleted)
    assert len(shape[2]) == 1  # the old spec is gone


def test_expire_errors_like_java(spark, ours):
    name = "gc_errors"
    build(spark, name, ["CREATE TABLE {t} (id bigint) USING iceberg", "INSERT INTO {t} VALUES (1)",
                        "INSERT INTO {t} VALUES (2)"])
    before = ours.load_table(("db", name)).metadata_location
    for args, message in [(", retain_last => 0", "Number of snapshots to retain must be at least 1, cannot be: 0"),
                          (", max_concurrent_deletes => 0", "max_concurrent_deletes should have value > 0, value: 0")]:
        with pytest.raises(Exception, match=message.split(",")[0]):
            spark.sql(f"CALL jcat.system.expire_snapshots(table => 'db.{name}', older_than => {FUTURE}{args})").collect()
        with pytest.raises(IcebergError, match=message):
            procedures.sql(spark, f"CALL ours.system.expire_snapshots(table => 'db.{name}', older_than => {FUTURE}{args})")
    spark.sql(f"ALTER TABLE jcat.db.{name} SET TBLPROPERTIES ('gc.enabled'='false')")
    before = ours.load_table(("db", name)).metadata_location
    with pytest.raises(Exception, match="GC is disabled"):
        spark.sql(f"CALL jcat.system.expire_snapshots(table => 'db.{name}', older_than => {FUTURE})").collect()
    with pytest.raises(IcebergError, match="Cannot expire snapshots: GC is disabled"):
        procedures.sql(spark, f"CALL ours.system.expire_snapshots(table => 'db.{name}', older_than => {FUTURE})")
    assert ours.load_table(("db", name)).metadata_location == before


# ------------------------------------------------------------------------------------ orphans
def _age(root: str, seconds: float = 5 * 24 * 3600) -> None:
    old = time.time() - seconds
    for d, _, fs in os.walk(root):
        for f in fs:
            os.utime(os.path.join(d, f), (old, old))


def test_remove_orphan_files_like_java(spark, ours, tmp_path):
    name = f"gc_orphans"
    build(spark, name, MOR_V2)
    loc = ours.load_table(("db", name)).location.replace("file:", "")
    for rel in ("data/id_bucket=0/orphan.parquet", "data/id_bucket=1/x/y/deep.parquet", "metadata/stray-m0.avro",
                "stray.txt", "data/_temporary/0/tmp.parquet", "data/.hidden.parquet"):
        path = os.path.join(loc, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "wb").close()
    _age(loc)
    # written just now: Java's listing leaves it out by age; ours lists names only and must drop it
    # after matching, on the driver and in the Spark tasks alike
    young = os.path.join(loc, "data/id_bucket=0/young.parquet")
    open(young, "wb").close()
    twin = Twin(spark, ours, name, tmp_path)
    dry = twin.compare(", dry_run => true", "remove_orphan_files")
    assert {os.path.relpath(r[0].replace("file:", ""), loc) for r in dry[0]} == {
        "data/id_bucket=0/orphan.parquet", "data/id_bucket=1/x/y/deep.parquet", "metadata/stray-m0.avro", "stray.txt"}
    deleted = twin.run(f"CALL ours.system.remove_orphan_files(table => 'db.{name}')", java=False)[2]
    assert deleted == {"data/id_bucket=0/orphan.parquet", "data/id_bucket=1/x/y/deep.parquet", "metadata/stray-m0.avro",
                       "stray.txt"}
    assert spark.sql(f"SELECT count(*) FROM jcat.db.{name}").collect()[0][0] == 5
    assert os.path.exists(young)


def test_remove_orphan_files_with_a_file_list_view(spark, ours, tmp_path):
    name = "gc_orphans_view"
    build(spark, name, MOR_V2[:3])
    loc = ours.load_table(("db", name)).location
    listed = [(f"{loc}/data/ghost-{i}.parquet",) for i in range(3)]
    spark.createDataFrame(listed, "file_path string").selectExpr(
        "file_path", "timestamp '2000-01-01 00:00:00' AS last_modified").createOrReplaceTempView("gc_listing")
    java = sorted(r[0] for r in spark.sql(
        f"CALL jcat.system.remove_orphan_files(table => 'db.{name}', file_list_view => 'gc_listing', dry_run => true)").collect())
    mine = sorted(r[0] for r in procedures.sql(spark,
        f"CALL ours.system.remove_orphan_files(table => 'db.{name}', file_list_view => 'gc_listing', dry_run => true)").collect())
    assert mine == java == sorted(p for (p,) in listed)
    spark.createDataFrame([(1, 2)], "file_path int, last_modified int").createOrReplaceTempView("gc_bad_listing")
    with pytest.raises(IcebergError, match="Invalid file_path column: int is not a string"):
        procedures.sql(spark, f"CALL ours.system.remove_orphan_files(table => 'db.{name}', file_list_view => 'gc_bad_listing')")


def test_remove_orphan_files_interval_guard_like_java(spark, ours):
    name = "gc_orphans_guard"
    build(spark, name, MOR_V2[:2])
    recent = "TIMESTAMP '" + time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(time.time() - 3600)) + "'"
    with pytest.raises(Exception, match="interval less than 24 hours"):
        spark.sql(f"CALL jcat.system.remove_orphan_files(table => 'db.{name}', older_than => {recent})").collect()
    with pytest.raises(IcebergError, match="interval less than 24 hours"):
        procedures.sql(spark, f"CALL ours.system.remove_orphan_files(table => 'db.{name}', older_than => {recent})")
