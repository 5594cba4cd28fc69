"""A column whose name contains ``.`` (``the.data``), against Iceberg Java 1.10.2 (issue 31): rows
written through ours (``INSERT`` through :func:`procedures.sql`, a DataFrame append) are read back
by Java as written, and ours reads, compacts (sorted on that column) and lists files of the table as
Java's twin does."""

from __future__ import annotations

import pytest

import procedures
from procedures.spark.dml import append
from procedures.spark.metadata_tables import metadata_table
from tests.helpers.catalogs import ours_on_java_warehouse
from tests.oracles import java_read

pytestmark = [pytest.mark.spark, pytest.mark.java]


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    return ours_on_java_warehouse(spark, java_warehouse)


def _create(spark, name: str) -> None:
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint, `the.data` string) USING iceberg")


def test_write_and_read_dotted_column(spark, ours):
    _create(spark, "c31_dot_o")
    _create(spark, "c31_dot_j")
    procedures.sql(spark, "INSERT INTO ours.db.c31_dot_o VALUES (1, 'a'), (2, 'b')")
    spark.sql("INSERT INTO jcat.db.c31_dot_j VALUES (1, 'a'), (2, 'b')")
    df = spark.createDataFrame([(3, "c")], "id bigint, `the.data` string")
    append(spark, ours.load_table(("db", "c31_dot_o")), df)
    df.writeTo("jcat.db.c31_dot_j").append()
    spark.sql("REFRESH TABLE jcat.db.c31_dot_o")
    want = java_read(spark, "jcat.db.c31_dot_j").sort_by("id").to_pylist()
    assert want == [{"id": 1, "the.data": "a"}, {"id": 2, "the.data": "b"}, {"id": 3, "the.data": "c"}]
    assert java_read(spark, "jcat.db.c31_dot_o").sort_by("id").to_pylist() == want
    got = procedures.read_table(spark, "ours.db.c31_dot_o").orderBy("id").collect()
    assert [r.asDict() for r in got] == want
    got = procedures.sql(spark, "SELECT `the.data` FROM ours.db.c31_dot_o WHERE `the.data` > 'a' ORDER BY 1").collect()
    assert [tuple(r) for r in got] == [("b",), ("c",)]


def test_rewrite_sorted_on_dotted_column(spark, ours):
    for name in ("c31_dots_o", "c31_dots_j"):
        _create(spark, name)
        for i in range(3):
            spark.sql(f"INSERT INTO jcat.db.{name} VALUES ({i}, '{'zyx'[i]}'), ({i + 10}, '{'abc'[i]}')")
    args = "strategy => 'sort', sort_order => '`the.data` ASC NULLS FIRST', options => map('rewrite-all', 'true')"
    got = [tuple(r) for r in procedures.sql(
        spark, f"CALL ours.system.rewrite_data_files(table => 'db.c31_dots_o', {args})").collect()]
    want = [tuple(r) for r in spark.sql(f"CALL jcat.system.rewrite_data_files(table => 'db.c31_dots_j', {args})").collect()]
    assert got[0][:3] == want[0][:3]
    spark.sql("REFRESH TABLE jcat.db.c31_dots_o")
    assert java_read(spark, "jcat.db.c31_dots_o").sort_by("id").to_pylist() == \
        java_read(spark, "jcat.db.c31_dots_j").sort_by("id").to_pylist()
    # metadata tables of such a table: the files' metrics name the column by id, the schema DDL quotes it
    files = metadata_table(spark, "ours.db.c31_dots_o", "files").collect()
    assert sum(r.record_count for r in files) == 6
    entries = metadata_table(spark, "ours.db.c31_dots_o", "entries").collect()
    assert len([e for e in entries if e.status != 2]) == len(files)
