"""ORC and Avro data files in Iceberg tables, against Iceberg Java 1.10.2.

* Tables with ``write.format.default`` = ``orc``/``avro``: Java appends some rows, we append others
  (``procedures.spark.dml.append``); both readers see every row, our files have the table's format
  and, for ORC, the same value/null/NaN counts and bounds as Java's file of the same rows.
* ``rewrite_data_files`` compacts such a table (reading Java's and our files) into files of the same
  format, the rows unchanged for Java and for our reader.
"""

from __future__ import annotations

import pytest

import procedures
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.spark.dml import append
from procedures.spark.session import load_table
from procedures.spec.manifest.model import FileFormat
from tests.helpers.catalogs import ours_on_java_warehouse
from tests.oracles import assert_rows_equal, java_read, spark_df_to_arrow

pytestmark = [pytest.mark.spark, pytest.mark.java]

COLUMNS = "id bigint, data string, f double, d date, dec decimal(10,2), s struct<a:int,b:string>, l array<int>, cat string"
SELECT = ("SELECT id, concat('v', id) AS data, CASE WHEN id = 3 THEN double('NaN') ELSE id / 4 END AS f, "
          "date_add(DATE '2024-01-01', CAST(id AS int)) AS d, CAST(id / 3 AS decimal(10,2)) AS dec, "
          "named_struct('a', CAST(id AS int), 'b', concat('b', id)) AS s, array(CAST(id AS int), 7) AS l, "
          "CASE WHEN id % 2 = 0 THEN 'even' ELSE 'odd' END AS cat FROM range({lo}, {hi})")


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    return ours_on_java_warehouse(spark, java_warehouse)


def _files(ours, name: str) -> list:
    t = ours.load_table(("db", name))
    return [e.data_file for e in live_entries(t.io, t.metadata, snapshot_manifests(t.io, t.metadata.current_snapshot()))]


def _create(spark, name: str, fmt: str) -> None:
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
    spark.sql(f"CREATE TABLE jcat.db.{name} ({COLUMNS}) USING iceberg PARTITIONED BY (cat) "
              f"TBLPROPERTIES ('write.format.default'='{fmt}')")


def _check_rows(spark, name: str, n: int) -> None:
    spark.sql(f"REFRESH TABLE jcat.db.{name}")
    expected = spark_df_to_arrow(spark.sql(SELECT.format(lo=0, hi=n)))
    assert_rows_equal(java_read(spark, f"jcat.db.{name}"), expected, key="id", label="java")
    assert_rows_equal(spark_df_to_arrow(procedures.read_table(spark, f"ours.db.{name}")), expected, key="id",
                      label="ours")


@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_written_in_the_table_format_and_read_by_both(spark, ours, fmt):
    name = f"oaw_{fmt}"
    _create(spark, name, fmt)
    spark.sql(SELECT.format(lo=0, hi=10)).writeTo(f"jcat.db.{name}").append()  # Java's files
    java_paths = {f.file_path for f in _files(ours, name)}
    table = load_table(spark, f"ours.db.{name}")
    append(spark, table, spark.sql(SELECT.format(lo=10, hi=20)))  # ours
    ours_files = [f for f in _files(ours, name) if f.file_path not in java_paths]
    assert ours_files and all(f.file_format == FileFormat(fmt.upper()) and f.file_path.endswith("." + fmt)
                              for f in ours_files)
    _check_rows(spark, name, 20)
    if fmt == "avro":
        assert all(f.value_counts is None and f.lower_bounds is None for f in _files(ours, name))


def test_orc_metrics_match_javas_writer(spark, ours):
    """The same rows written by Java and by us: the same counts and bounds (column sizes differ:
    pyarrow's ORC writer records no bytes-on-disk statistics)."""
    _create(spark, "oaw_m_j", "orc")
    _create(spark, "oaw_m_o", "orc")
    df = spark.sql(SELECT.format(lo=0, hi=40)).where("cat = 'odd'")
    df.coalesce(1).writeTo("jcat.db.oaw_m_j").append()
    append(spark, load_table(spark, "ours.db.oaw_m_o"), df.coalesce(1))
    (j,), (o,) = _files(ours, "oaw_m_j"), _files(ours, "oaw_m_o")
    assert (o.record_count, o.value_counts, o.null_value_counts, o.nan_value_counts) == \
        (j.record_count, j.value_counts, j.null_value_counts, j.nan_value_counts)
    assert (o.lower_bounds, o.upper_bounds) == (j.lower_bounds, j.upper_bounds)


@pytest.mark.parametrize("fmt", ["orc", "avro"])
def test_rewrite_data_files_keeps_the_format(spark, ours, fmt):
    name = f"oaw_rw_{fmt}"
    _create(spark, name, fmt)
    for lo in range(0, 30, 10):
        spark.sql(SELECT.format(lo=lo, hi=lo + 10)).writeTo(f"jcat.db.{name}").append()
    before = len(_files(ours, name))
    row = procedures.sql(spark, f"CALL ours.system.rewrite_data_files(table => 'db.{name}', "
                                "options => map('min-input-files', '2'))").collect()[0]
    assert row[0] == before and row[1] == 2  # every file rewritten into one per partition
    files = _files(ours, name)
    assert len(files) == 2 and all(f.file_format == FileFormat(fmt.upper()) for f in files)
    _check_rows(spark, name, 30)
