"""read_table's Spark-facing API: column selection and order, filters, snapshot choice by time and ref,
metadata columns, empty tables and errors."""

from __future__ import annotations

import pytest

from oracles import spark_df_to_arrow
from procedures.errors import NoSuchRefError, ValidationError
from procedures.core.scan import iter_file_scan_tasks
from procedures.spark.read import load_table, read_table

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]


@pytest.fixture(scope="module")
def table(spark):
    ident = "jcat.db.read_api"
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(f"""CREATE TABLE {ident} (id bigint, name string, loc struct<lat:double, lon:double>)
        USING iceberg TBLPROPERTIES ('format-version'='2')""")
    spark.sql(f"INSERT INTO {ident} VALUES (1, 'a', named_struct('lat', 1.0, 'lon', 2.0))")
    spark.sql(f"ALTER TABLE {ident} CREATE TAG first")
    spark.sql(f"INSERT INTO {ident} VALUES (2, 'b', NULL), (3, NULL, named_struct('lat', 3.0, 'lon', NULL))")
    return ident


def test_columns_keep_requested_order_and_filter_columns_need_not_be_selected(spark, table):
    df = read_table(spark, table, columns=["name", "id"], filter="id >= 2")
    assert df.columns == ["name", "id"]
    assert sorted(r["id"] for r in df.collect()) == [2, 3]
    nested = read_table(spark, table, columns=["loc.lat"], filter="id = 3")
    assert [r[0] for r in nested.collect()] == [3.0]


FIRST = [{"id": 1, "name": "a", "loc": {"lat": 1.0, "lon": 2.0}}]
SECOND = FIRST + [{"id": 2, "name": "b", "loc": None}, {"id": 3, "name": None, "loc": {"lat": 3.0, "lon": None}}]


def _rows(df) -> list[dict]:
    return sorted(spark_df_to_arrow(df).to_pylist(), key=lambda r: r["id"])


def test_snapshot_choice_by_tag_id_and_time(spark, table):
    snaps = spark.sql(f"SELECT snapshot_id, committed_at FROM {table}.snapshots ORDER BY committed_at").collect()
    first, second = snaps[0][0], snaps[1][0]
    assert _rows(read_table(spark, table, ref="first")) == FIRST
    assert _rows(read_table(spark, table, snapshot_id=first)) == FIRST
    assert _rows(read_table(spark, table, as_of_timestamp=snaps[0][1])) == FIRST
    assert _rows(read_table(spark, table, snapshot_id=second)) == SECOND
    assert _rows(read_table(spark, table, as_of_timestamp=snaps[1][1])) == SECOND
    assert _rows(read_table(spark, table)) == SECOND
    # and as Java reads the same snapshots
    assert _rows(spark.sql(f"SELECT * FROM {table} VERSION AS OF 'first'")) == FIRST
    assert _rows(spark.sql(f"SELECT * FROM {table} VERSION AS OF {second}")) == SECOND
    assert _rows(read_table(spark, table, ref="first", columns=["name", "id"])) == [{"name": "a", "id": 1}]
    with pytest.raises(NoSuchRefError):
        read_table(spark, table, ref="missing")


def test_metadata_columns_and_types(spark, table):
    df = read_table(spark, table, metadata_columns=("_spec_id", "_pos", "_deleted"))
    assert df.schema.simpleString() == (
        "struct<id:bigint,name:string,loc:struct<lat:double,lon:double>,_spec_id:int,_pos:bigint,_deleted:boolean>")
    rows = spark_df_to_arrow(df).to_pylist()
    assert {r["_spec_id"] for r in rows} == {0} and {r["_deleted"] for r in rows} == {False}
    with pytest.raises(ValidationError, match="_nope"):
        read_table(spark, table, metadata_columns=("_nope",))


def test_empty_table_reads_no_rows_with_its_schema(spark):
    ident = "jcat.db.read_api_empty"
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(f"CREATE TABLE {ident} (id bigint, d date) USING iceberg")
    df = read_table(spark, ident)
    assert df.columns == ["id", "d"] and df.count() == 0


def test_files_split_at_row_groups_read_like_java(spark):
    # Java writes several row groups per file; with a small split size we read each file in
    # several Spark partitions, and rows, positions and position deletes still match Java's
    ident = "jcat.db.read_splits"
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(f"""CREATE TABLE {ident} (id bigint, s string) USING iceberg TBLPROPERTIES (
        'format-version'='2', 'write.delete.mode'='merge-on-read',
        'write.parquet.row-group-size-bytes'='65536')""")
    spark.sql(f"INSERT INTO {ident} SELECT id, concat('value-', id) FROM range(0, 60000, 1, 2)")
    spark.sql(f"DELETE FROM {ident} WHERE id % 7 = 3")
    t = load_table(spark, ident)
    files = [task.data_file for task in iter_file_scan_tasks(t.metadata, t.io)]
    assert len(files) == 2 and all(len(f.split_offsets or ()) > 2 for f in files), files
    spark.sql(f"ALTER TABLE {ident} SET TBLPROPERTIES ('read.split.target-size'='20000')")
    df = read_table(spark, ident, metadata_columns=("_file", "_pos"))
    assert df.rdd.getNumPartitions() > len(files)
    ours = sorted(tuple(r) for r in df.collect())
    java = sorted(tuple(r) for r in spark.sql(f"SELECT id, s, _file, _pos FROM {ident}").collect())
    assert len(ours) == 60000 - len([i for i in range(60000) if i % 7 == 3])
    assert ours == java
