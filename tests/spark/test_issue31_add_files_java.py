"""add_files and snapshot against Iceberg Java 1.10.2 on sources Java's own procedure tests use
(issue 31): partition values Hive escapes in directory names (a space, ``/``, ``%``) and a single data
file as the source path.  Twin targets are made with Java SQL; ours runs through
:func:`procedures.sql`, Java's through ``spark.sql``; the added entries (paths, partition values,
record counts) and the rows Java reads back must be the same.
"""

from __future__ import annotations

import glob
import os

import fastavro
import pytest

import procedures
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.errors import ValidationError
from procedures.spark.session import catalog_for
from tests.helpers.catalogs import java_twins, ours_on_java_warehouse
from tests.oracles import java_read

pytestmark = [pytest.mark.spark, pytest.mark.java]

DB = "c31db"
#: values Hive writes escaped in a partition directory's name (``%20`` is not one: a space stays)
SPECIAL = ["John Doe", "2023/05/30", "50%", "a=b:c", "plain"]


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    spark.sql(f"CREATE DATABASE IF NOT EXISTS spark_catalog.{DB}")
    return ours_on_java_warehouse(spark, java_warehouse)


@pytest.fixture(scope="module")
def hive(spark):
    spark.conf.set("spark.sql.catalog.ohive.type", "hive")
    return catalog_for(spark, "ohive")


@pytest.fixture(scope="module")
def special_source(spark, ours):
    spark.sql(f"DROP TABLE IF EXISTS spark_catalog.{DB}.escaped_src")
    spark.sql(f"CREATE TABLE spark_catalog.{DB}.escaped_src (id bigint, naMe string) USING parquet PARTITIONED BY (naMe)")
    values = ", ".join(f"({i}, '{v}')" for i, v in enumerate(SPECIAL))
    spark.sql(f"INSERT INTO spark_catalog.{DB}.escaped_src VALUES {values}")
    return f"spark_catalog.{DB}.escaped_src"


def _entries(table) -> list[tuple]:
    md = table.metadata
    return sorted((e.data_file.file_path, e.data_file.partition, e.data_file.record_count)
                  for e in live_entries(table.io, md, snapshot_manifests(table.io, md.current_snapshot())))


def _both(spark, mine: str, java: str, args: str) -> tuple[list, list]:
    got = [tuple(r) for r in procedures.sql(spark, f"CALL ours.system.add_files(table => 'db.{mine}', {args})").collect()]
    want = [tuple(r) for r in spark.sql(f"CALL jcat.system.add_files(table => 'db.{java}', {args})").collect()]
    return got, want


def _same_table(spark, ours, mine: str, java: str) -> None:
    assert _entries(ours.load_table(("db", mine))) == _entries(ours.load_table(("db", java)))
    for n in (mine, java):
        spark.sql(f"REFRESH TABLE jcat.db.{n}")
    got, want = java_read(spark, f"jcat.db.{mine}"), java_read(spark, f"jcat.db.{java}")
    assert got.sort_by("id").to_pylist() == want.sort_by("id").to_pylist()


def test_add_files_escaped_partition_directories(spark, ours, special_source):
    mine, java = java_twins(spark, "c31_escaped", "id bigint, naMe string", "naMe")
    got, want = _both(spark, mine, java, f"source_table => '{special_source}'")
    assert got == want and got[0][0] == len(SPECIAL)
    _same_table(spark, ours, mine, java)
    entries = _entries(ours.load_table(("db", mine)))
    assert {e[1] for e in entries} == {(v,) for v in SPECIAL}
    # the paths are real file paths: the directory name as Hive escaped it, not percent-encoded again
    assert all(os.path.exists(p.removeprefix("file:")) for p, _, _ in entries)
    assert any("naMe=2023%2F05%2F30/" in p for p, _, _ in entries)


def test_add_files_escaped_partition_with_filter(spark, ours, special_source):
    mine, java = java_twins(spark, "c31_escaped_f", "id bigint, naMe string", "naMe")
    args = f"source_table => '{special_source}', partition_filter => map('naMe', 'John Doe')"
    got, want = _both(spark, mine, java, args)
    assert got == want and got[0][0] == 1
    _same_table(spark, ours, mine, java)


def test_add_files_escaped_partition_path_import(spark, ours, special_source):
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {special_source}").where("col_name = 'Location'").first().data_type
    mine, java = java_twins(spark, "c31_escaped_p", "id bigint, naMe string", "naMe")
    got, want = _both(spark, mine, java, f"source_table => '`parquet`.`{location}`'")
    assert got == want
    _same_table(spark, ours, mine, java)


def test_snapshot_escaped_partition_directories(spark, hive, special_source):
    for target in ("c31_snap_o", "c31_snap_j"):
        spark.sql(f"DROP TABLE IF EXISTS jhive.{DB}.{target}")
    got = [tuple(r) for r in procedures.sql(
        spark, f"CALL ohive.system.snapshot('{special_source}', '{DB}.c31_snap_o')").collect()]
    want = [tuple(r) for r in spark.sql(
        f"CALL jhive.system.snapshot('{special_source}', 'jhive.{DB}.c31_snap_j')").collect()]
    assert got == want == [(len(SPECIAL),)]
    assert _entries(hive.load_table((DB, "c31_snap_o"))) == _entries(hive.load_table((DB, "c31_snap_j")))
    spark.sql(f"REFRESH TABLE jhive.{DB}.c31_snap_o")
    got_rows = java_read(spark, f"jhive.{DB}.c31_snap_o").sort_by("id").to_pylist()
    assert got_rows == java_read(spark, f"jhive.{DB}.c31_snap_j").sort_by("id").to_pylist()
    assert [r["naMe"] for r in got_rows] == SPECIAL


# ------------------------------------------------------------------------------ a single file as source
@pytest.fixture(scope="module")
def single_files(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("c31_single")
    df = spark.createDataFrame([(i, f"d{i}") for i in range(5)], "id bigint, data string")
    out = {}
    for fmt in ("parquet", "orc"):
        df.coalesce(1).write.format(fmt).save(str(root / fmt))
        out[fmt] = glob.glob(str(root / fmt / f"part-*.{fmt}"))[0]
    return out


@pytest.mark.parametrize("fmt", ["parquet", "orc"])
def test_add_files_single_file_unpartitioned(spark, ours, single_files, fmt):
    mine, java = java_twins(spark, f"c31_single_{fmt}", "id bigint, data string")
    got, want = _both(spark, mine, java, f"source_table => '`{fmt}`.`{single_files[fmt]}`'")
    assert got == want and got[0][0] == 1
    _same_table(spark, ours, mine, java)
    assert [p for p, _, _ in _entries(ours.load_table(("db", mine)))] == ["file:" + single_files[fmt]]


def test_add_files_single_file_partitioned_target_refused(spark, ours, single_files):
    mine, java = java_twins(spark, "c31_single_part", "id bigint, data string", "data")
    args = f"source_table => '`parquet`.`{single_files['parquet']}`'"
    with pytest.raises(Exception) as java_error:
        spark.sql(f"CALL jcat.system.add_files(table => 'db.{java}', {args})").collect()
    before = ours.load_table(("db", mine)).metadata_location
    # the same refusal as Java's: a file has no partition columns
    match = r"Cannot find a partition spec in Iceberg table \w+\.db\.c31_single_part_. that matches the partition columns \(\[\]\)"
    assert java_error.match(match)
    with pytest.raises(ValidationError, match=match):
        procedures.sql(spark, f"CALL ours.system.add_files(table => 'db.{mine}', {args})").collect()
    assert ours.load_table(("db", mine)).metadata_location == before


# ------------------------------------------------------------------------------ inherited snapshot ids
def _raw_entries(table) -> list[tuple]:
    """(status, snapshot_id, sequence_number, file_sequence_number) of every entry as stored in the
    current snapshot's manifests (fastavro, no inheritance applied), and whether the manifest list
    names the snapshot."""
    snap = table.metadata.current_snapshot()
    out = []
    for m in snapshot_manifests(table.io, snap):
        assert m.added_snapshot_id == snap.snapshot_id
        with open(m.manifest_path.removeprefix("file:"), "rb") as fh:
            for r in fastavro.reader(fh):
                sid = r["snapshot_id"]
                out.append((r["status"], "self" if sid == snap.snapshot_id else sid,
                            r.get("sequence_number"), r.get("file_sequence_number")))
    return sorted(out, key=repr)


def test_snapshot_leaves_entry_snapshot_ids_to_inheritance(spark, hive, special_source):
    for target in ("c31_inh_o", "c31_inh_j"):
        spark.sql(f"DROP TABLE IF EXISTS jhive.{DB}.{target}")
    procedures.sql(spark, f"CALL ohive.system.snapshot('{special_source}', '{DB}.c31_inh_o')").collect()
    spark.sql(f"CALL jhive.system.snapshot('{special_source}', 'jhive.{DB}.c31_inh_j')").collect()
    mine, java = hive.load_table((DB, "c31_inh_o")), hive.load_table((DB, "c31_inh_j"))
    assert mine.metadata.format_version == java.metadata.format_version == 2
    assert _raw_entries(mine) == _raw_entries(java) == [(1, None, None, None)] * len(SPECIAL)


@pytest.mark.parametrize("props, source", [
    ("'format-version'='2'", "table"), ("'format-version'='2'", "path"), ("'format-version'='1'", "table"),
    ("'format-version'='1', 'compatibility.snapshot-id-inheritance.enabled'='true'", "table"),
], ids=["v2-table", "v2-path", "v1", "v1-inheritance"])
def test_add_files_entry_snapshot_ids_as_java(spark, ours, special_source, props, source):
    name = "c31_ids_" + str(abs(hash((props, source))) % 10_000)
    mine, java = java_twins(spark, name, "id bigint, naMe string", "naMe", props)
    if source == "path":
        location = spark.sql(f"DESCRIBE TABLE EXTENDED {special_source}").where("col_name = 'Location'").first().data_type
        args = f"source_table => '`parquet`.`{location}`'"
    else:
        args = f"source_table => '{special_source}'"
    got, want = _both(spark, mine, java, args)
    assert got == want
    assert _raw_entries(ours.load_table(("db", mine))) == _raw_entries(ours.load_table(("db", java)))
    _same_table(spark, ours, mine, java)
