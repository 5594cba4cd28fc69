"""rewrite_position_delete_files on Java-written merge-on-read tables: our procedure on one table,
Java's CALL on a twin built by the same statements.  Both rewrite the same delete files into the
same number, drop the deletes of data files that are gone, and Java, PyIceberg and DuckDB read the
same rows before and after.  The v3 case is a v2 table with position delete files upgraded to v3
(Java 1.10 writes only deletion vectors into v3 tables): both rewrite those files into DVs."""

from __future__ import annotations

import os

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.snapshot_producer import live_entries, snapshot_manifests
from procedures.core.summary import is_dv
from procedures.io.delete_writers import read_position_deletes
from procedures.frontend import runner
from procedures.spec.manifest import FileContent, ManifestContent
from tests.oracles import assert_rows_equal, java_metadata_location, read_all

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]


def _build(spark, name: str, fv: int) -> None:
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, cat string) USING iceberg PARTITIONED BY (cat) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read', "
              "'write.update.mode'='merge-on-read')")
    for i in range(4):
        spark.sql(f"INSERT INTO jcat.db.{name} SELECT id, concat('c', cast(id % 2 as string)) "
                  f"FROM range({i * 100}, {(i + 1) * 100})")
    # several position delete files per partition
    for lo in (5, 55, 105, 205):
        spark.sql(f"DELETE FROM jcat.db.{name} WHERE id BETWEEN {lo} AND {lo + 10}")
    # compacting partition c0's data files leaves its position deletes dangling
    spark.sql(f"CALL jcat.system.rewrite_data_files(table => 'db.{name}', where => \"cat = 'c0'\", "
              "options => map('rewrite-all', 'true'))")
    if fv == 3:  # the v2 position delete files stay: a v3 table's rewrite must turn them into DVs
        spark.sql(f"ALTER TABLE jcat.db.{name} SET TBLPROPERTIES ('format-version'='3')")


def _deletes(table):
    md = table.metadata
    manifests = snapshot_manifests(table.io, md.current_snapshot())
    live = {e.data_file.file_path for e in live_entries(table.io, md, [m for m in manifests if m.content == ManifestContent.DATA])}
    deletes = [e.data_file for e in live_entries(table.io, md, [m for m in manifests if m.content == ManifestContent.DELETES])
               if e.data_file.content == FileContent.POSITION_DELETES]
    return live, deletes


@pytest.mark.parametrize("fv", [2, 3])
def test_rewrite_position_delete_files_matches_java(spark, java_warehouse, fv):
    name = f"rpd_v{fv}"
    for n in (name, name + "_twin"):
        _build(spark, n, fv)
    metadata = java_metadata_location(java_warehouse, "db", name)
    before = read_all(spark, f"jcat.db.{name}", metadata)
    assert before["java"].num_rows == 400 - 4 * 11
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse)}
    table = HadoopCatalog("ours", str(java_warehouse)).load_table(("db", name))
    assert table.metadata.format_version == fv
    live, deletes = _deletes(table)
    # the fixture really has position delete files (no DVs yet) and dangling deletes to drop
    assert len(deletes) >= 4 and not any(is_dv(f) for f in deletes)
    assert any(p not in live for f in deletes for p in read_position_deletes(table.io, f))

    ours = runner.run("rewrite_position_delete_files", kwargs={"table": f"db.{name}", "options": {"rewrite-all": "true"}},
                        catalog="ours", conf=conf, spark=spark).rows
    java = [tuple(r) for r in spark.sql(f"CALL jcat.system.rewrite_position_delete_files(table => 'db.{name}_twin', "
                                        "options => map('rewrite-all', 'true'))").collect()]
    assert [r[:2] for r in ours] == [r[:2] for r in java]
    assert ours[0][0] == len(deletes) and ours[0][1] >= 1 and ours[0][2] > 0

    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    metadata = java_metadata_location(java_warehouse, "db", name)
    for reader, got in read_all(spark, f"jcat.db.{name}", metadata).items():
        assert_rows_equal(got, before["java"], key="id", label=f"after rewrite_position_delete_files / {reader}")
    table = table.refresh()
    live, deletes = _deletes(table)
    kept = {p for f in deletes for p in read_position_deletes(table.io, f)}
    assert kept and kept <= live  # every remaining delete points at a live data file
    assert table.metadata.current_snapshot().summary["operation"] == "replace"
    twin = HadoopCatalog("ours", str(java_warehouse)).load_table(("db", name + "_twin"))
    _, twin_deletes = _deletes(twin)

    def positions(t, files):  # data file names differ between the twins: compare partitions and positions
        return sorted((tuple(f.partition), tuple(pos)) for f in files for pos in read_position_deletes(t.io, f).values())

    assert positions(table, deletes) == positions(twin, twin_deletes)
    if fv == 3:  # the v2 files became one DV per data file, as in Java's twin
        assert all(is_dv(f) for f in deletes) and all(is_dv(f) for f in twin_deletes)
        assert len(deletes) == len(twin_deletes)


def test_unreadable_delete_file_fails_cleanly(spark, java_warehouse):
    name = "rpd_broken"
    _build(spark, name, 2)
    table = HadoopCatalog("ours", str(java_warehouse)).load_table(("db", name))
    _, deletes = _deletes(table)
    # a delete of partition c0 goes missing; the c1 group still writes its files, which must go too
    victim = next(d for d in deletes if tuple(d.partition) == ("c0",)).file_path
    os.remove(victim[len("file:"):] if victim.startswith("file:") else victim)
    before = table.metadata_location
    data_dir = os.path.join(str(java_warehouse), "db", name, "data")
    files_before = {os.path.join(d, f) for d, _, fs in os.walk(data_dir) for f in fs}
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse)}
    # the failing group's task reports the missing file; the groups that finished lose their files
    with pytest.raises(Exception, match="File does not exist"):
        runner.run("rewrite_position_delete_files", kwargs={"table": f"db.{name}", "options": {"rewrite-all": "true"}},
                     catalog="ours", conf=conf, spark=spark)
    assert table.refresh().metadata_location == before
    assert {os.path.join(d, f) for d, _, fs in os.walk(data_dir) for f in fs} == files_before
