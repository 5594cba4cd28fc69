"""read_table's Spark-facing API: column selection and order, filters, snapshot choice by time and ref,
metadata columns, empty tables and errors."""

from __future__ import annotations

import pytest

from oracles import spark_df_to_arrow
from procedures.errors import NoSuchRefError, ValidationError
from procedures.spark.read import read_table

pytestmark = pytest.mark.spark


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


def test_snapshot_choice_by_tag_id_and_time(spark, table):
    snaps = spark.sql(f"SELECT snapshot_id, committed_at FROM {table}.snapshots ORDER BY committed_at").collect()
    assert read_table(spark, table, ref="first").count() == 1
    assert read_table(spark, table, snapshot_id=snaps[0][0]).count() == 1
    assert read_table(spark, table, as_of_timestamp=snaps[1][1]).count() == 3
    assert read_table(spark, table).count() == 3
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
