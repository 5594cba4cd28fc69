"""rewrite_manifests on Java-written tables: our procedure on one table, Java's CALL on a twin; both
rewrite the same manifests into the same number, and Java, PyIceberg and DuckDB read the same rows."""

from __future__ import annotations

import io

import fastavro
import pytest

from procedures.frontend import runner
from procedures.spec.manifest.manifest_list import read_manifest_list
from tests.oracles import assert_rows_equal, java_metadata_location, read_all

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]


@pytest.mark.parametrize("fv", [2, 3])
def test_rewrite_manifests_matches_java(spark, java_warehouse, fv):
    name = f"rm_v{fv}"
    for n in (name, name + "_twin"):
        spark.sql(f"DROP TABLE IF EXISTS jcat.db.{n}")
        spark.sql(f"CREATE TABLE jcat.db.{n} (id bigint, cat string) USING iceberg PARTITIONED BY (cat) "
                  f"TBLPROPERTIES ('format-version'='{fv}', 'write.delete.mode'='merge-on-read', "
                  "'commit.manifest-merge.enabled'='false')")
        for i in range(6):
            spark.sql(f"INSERT INTO jcat.db.{n} VALUES ({i}, 'c{i % 3}'), ({i + 10}, 'c{(i + 1) % 3}')")
        spark.sql(f"DELETE FROM jcat.db.{n} WHERE id = 4")
    metadata = java_metadata_location(java_warehouse, "db", name)
    before = read_all(spark, f"jcat.db.{name}", metadata)
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse)}
    ours = runner.run("rewrite_manifests", kwargs={"table": f"db.{name}"}, catalog="ours", conf=conf, spark=spark).rows
    java = [tuple(r) for r in spark.sql(f"CALL jcat.system.rewrite_manifests('db.{name}_twin')").collect()]
    assert ours == java == [(6, 1)]  # 6 data manifests -> 1
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    metadata = java_metadata_location(java_warehouse, "db", name)
    for reader, got in read_all(spark, f"jcat.db.{name}", metadata).items():
        assert_rows_equal(got, before["java"], key="id", label=f"after rewrite_manifests / {reader}")
    from procedures.catalog.hadoop import HadoopCatalog

    t = HadoopCatalog("ours", str(java_warehouse)).load_table(("db", name))
    assert len(read_manifest_list(t.io, t.metadata.current_snapshot().manifest_list)) == 1  # the DELETE dropped a whole file: no delete manifest
    assert t.metadata.current_snapshot().summary["manifests-replaced"] == "6"


def _entries(io, manifests):
    from procedures.spec.manifest.reader import read_manifest

    return [[(e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number, e.data_file)
             for e in read_manifest(io, m)] for m in manifests]


def _without_location(m):
    from dataclasses import replace

    return replace(m, manifest_path="", manifest_length=0, added_snapshot_id=None)  # each op is its own snapshot


@pytest.mark.parametrize(("layout", "fv"), [("single", 1), ("unpartitioned", 1), ("mixed", 2), ("single", 2),
                                           ("unpartitioned", 2), ("single", 3), ("unpartitioned", 3)])
def test_rewrite_manifests_on_executors_writes_what_the_driver_writes(spark, java_warehouse, monkeypatch, layout, fv):
    """Past the driver's limits the entries are read, cut and written on the executors; the manifests
    must hold the driver's entries in the driver's order, and the procedure's output equals Java's.
    ``mixed``: Java's manifests span several partitions (read for placement); ``single``: each holds
    one partition (placed from its summaries, read only by the task writing it).  v1 and v2 entries
    are copied as bytes; v3 ones are decoded (their inherited first row ids become explicit)."""
    from procedures.catalog.hadoop import HadoopCatalog
    from procedures.core.gc import reachability as R
    from procedures.core.manifest_rewrite.entry_copy import existing_records
    from procedures.core.manifest_rewrite.clustering import RewriteManifests, uniform_partition
    from procedures.core.kernel.transaction import CommitContext
    from procedures.spark.engine.manifest_rewrite_steps import SparkManifestRewriter
    from procedures.spec.manifest.writer import ManifestWriter

    name = f"rm_exec_{layout}_v{fv}"
    by = {"mixed": "PARTITIONED BY (cat)", "single": "PARTITIONED BY (b)", "unpartitioned": ""}[layout]
    for n in (name, name + "_twin"):
        spark.sql(f"DROP TABLE IF EXISTS jcat.db.{n}")
        spark.sql(f"CREATE TABLE jcat.db.{n} (id bigint, cat string, b int) USING iceberg {by} "
                  f"TBLPROPERTIES ('format-version'='{fv}', 'commit.manifest-merge.enabled'='false', "
                  "'commit.manifest.target-size-bytes'='20000')")
        for i in range(12):
            spark.sql(f"INSERT INTO jcat.db.{n} VALUES ({i}, 'c{i % 5}', {i % 4}), ({i + 100}, 'c{(i * 7) % 5}', {i % 4}), "
                      f"({i + 200}, 'c{(i + 2) % 5}', {i % 4})")
        spark.sql(f"DELETE FROM jcat.db.{n} WHERE id = 4")
    cat = HadoopCatalog("ours", str(java_warehouse))
    t = cat.load_table(("db", name))
    spec = t.metadata.spec()
    java_manifests = [m for m in read_manifest_list(t.io, t.metadata.current_snapshot().manifest_list)]
    target = ManifestWriter(t.io, "unused", spec, t.metadata.schema(), fv).avro_schema
    # Java's v1 and v2 manifests are copied without decoding their metrics
    assert all((existing_records(t.io, m, target, fv) is not None) == (fv in (1, 2)) for m in java_manifests)
    single = [uniform_partition(m, spec.partition_type(t.metadata.schema())) for m in java_manifests]
    if layout == "single":
        assert all(u is not None for u in single) and len(set(single)) == 4
    elif layout == "mixed":
        assert any(u is None for u in single)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    ops = {}
    # "parts": more task slots than manifests, so each manifest is written by several tasks (cut
    # inside manifests, with mixed manifests' entries routed to the parts) and joined
    engines = (("driver", None), ("executors", SparkManifestRewriter(spark, dict(t.io.properties), name)),
               ("parts", SparkManifestRewriter(spark, dict(t.io.properties), name, slots=64, min_part_entries=1)))
    for label, engine in engines:
        op = RewriteManifests(distributed=engine)
        op.apply(t.metadata, CommitContext(t))
        ops[label] = op
    assert len(ops["driver"].added) > 1  # the small target size makes several manifests
    for label in ("executors", "parts"):
        assert _entries(t.io, ops[label].added) == _entries(t.io, ops["driver"].added), label
        assert ops[label].entries_processed == ops["driver"].entries_processed
        assert [_without_location(m) for m in ops[label].added] == [_without_location(m) for m in ops["driver"].added]
        assert all("-c" in m.manifest_path for m in ops[label].added)  # really written by the executors
    # the parts' manifests are whole Avro files another reader takes
    for m in ops["parts"].added:
        assert sum(1 for _ in fastavro.reader(io.BytesIO(t.io.new_input(m.manifest_path).read()))) == m.existing_files_count
    for op in ops.values():
        for m in op.added:
            t.io.delete(m.manifest_path)

    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse)}
    metadata = java_metadata_location(java_warehouse, "db", name)
    before = read_all(spark, f"jcat.db.{name}", metadata)
    ours = runner.run("rewrite_manifests", kwargs={"table": f"db.{name}"}, catalog="ours", conf=conf, spark=spark).rows
    java = [tuple(r) for r in spark.sql(f"CALL jcat.system.rewrite_manifests('db.{name}_twin')").collect()]
    assert ours == java
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    metadata = java_metadata_location(java_warehouse, "db", name)
    for reader, got in read_all(spark, f"jcat.db.{name}", metadata).items():
        assert_rows_equal(got, before["java"], key="id", label=f"after rewrite_manifests on executors / {reader}")
