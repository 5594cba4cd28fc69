"""add_files of ORC and Avro files against Iceberg Java 1.10.2's procedure, on twin tables.

Sources: ORC written by Spark (``df.write.orc`` and a ``spark_catalog`` table ``USING orc``) and
Avro written by Hive's AvroSerDe (a ``spark_catalog`` table ``STORED AS AVRO``: Spark 3.5's own
``avro`` data source needs the spark-avro package, which pyspark does not ship) and by fastavro
(path imports, `` `avro`.`/dir` ``).  For each case two identical targets are created with Java SQL;
ours runs ``CALL ours.system.add_files`` on one, Java's ``CALL jcat.system.add_files`` on the
other.  Outputs, the added data files (path, format, partition, record count, size, metrics) and
snapshot summaries must be identical, and the rows read back through Java and our own reader must
be the source's.  PyIceberg reads the ORC tables too; DuckDB reads neither format's data files
and PyIceberg no Avro data files (each checked below, so a reference gaining support shows up).
"""

from __future__ import annotations

import math
import os

import fastavro
import pytest

import procedures
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.spark.engine import file_import_steps as AF
from tests.helpers.catalogs import ours_on_java_warehouse
from tests.oracles import (
    assert_rows_equal, duckdb_read, java_metadata_location, java_read, pyiceberg_read, spark_df_to_arrow,
)

pytestmark = [pytest.mark.spark, pytest.mark.java]

COLUMNS = "id bigint, data string, p int, f double, c string, d date, dec decimal(10,2), b boolean"
NO_P = "id bigint, data string, f double, c string, d date, dec decimal(10,2), b boolean"


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    spark.conf.set("hive.exec.dynamic.partition.mode", "nonstrict")
    return ours_on_java_warehouse(spark, java_warehouse)


def _rows():
    import datetime
    from decimal import Decimal
    rows = [(i, f"s{i}" * (1 + i % 9), i % 2, i / 3, "ab" if i % 3 else "cd",
             datetime.date(2024, 1, 1) + datetime.timedelta(days=i), Decimal(i) / 4, i % 4 == 0) for i in range(12)]
    rows += [(None, None, 1, math.nan, "ab", None, None, None), (100, "x" * 40, 0, None, "cd", datetime.date(1999, 12, 31),
                                                                Decimal("-3.50"), True)]
    return rows


def _avro_file(path: str, rows: list[tuple]) -> None:
    """An Avro file as other writers make it: no field ids, nullable unions, logical types."""
    schema = {"type": "record", "name": "topLevelRecord", "fields": [
        {"name": "id", "type": ["null", "long"]},
        {"name": "data", "type": ["null", "string"]},
        {"name": "f", "type": ["null", "double"]},
        {"name": "c", "type": ["null", "string"]},
        {"name": "d", "type": ["null", {"type": "int", "logicalType": "date"}]},
        {"name": "dec", "type": ["null", {"type": "fixed", "name": "dec", "size": 5, "logicalType": "decimal",
                                          "precision": 10, "scale": 2}]},
        {"name": "b", "type": ["null", "boolean"]},
    ]}
    records = [dict(id=r[0], data=r[1], f=r[3], c=r[4], d=r[5], dec=r[6], b=r[7]) for r in rows]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        fastavro.writer(out, fastavro.parse_schema(schema), records, codec="deflate")


@pytest.fixture(scope="module")
def sources(spark, ours, tmp_path_factory):
    root = tmp_path_factory.mktemp("orc_avro_sources")
    rows = _rows()
    df = spark.createDataFrame(rows, COLUMNS)
    paths = {"orc_u": str(root / "orc_u"), "orc_p": str(root / "orc_p"), "avro_u": str(root / "avro_u"),
             "avro_p": str(root / "avro_p")}
    df.repartition(2).write.orc(paths["orc_u"])
    df.write.partitionBy("p").orc(paths["orc_p"])
    _avro_file(f"{paths['avro_u']}/part-0.avro", rows[:7])
    _avro_file(f"{paths['avro_u']}/part-1.avro", rows[7:])
    for p in (0, 1):
        _avro_file(f"{paths['avro_p']}/p={p}/part-0.avro", [r for r in rows if r[2] == p])
    spark.sql("DROP TABLE IF EXISTS default.oa_orc_p")
    spark.sql(f"CREATE TABLE default.oa_orc_p ({NO_P}, p int) USING orc PARTITIONED BY (p)")
    df.select("id", "data", "f", "c", "d", "dec", "b", "p").write.insertInto("default.oa_orc_p")
    spark.sql("DROP TABLE IF EXISTS default.oa_avro_p")
    spark.sql(f"CREATE TABLE default.oa_avro_p ({NO_P}) PARTITIONED BY (p int) STORED AS AVRO")
    df.select("id", "data", "f", "c", "d", "dec", "b", "p").write.insertInto("default.oa_avro_p")
    spark.sql("DROP TABLE IF EXISTS default.oa_avro_u")
    spark.sql(f"CREATE TABLE default.oa_avro_u ({COLUMNS}) STORED AS AVRO")
    df.write.insertInto("default.oa_avro_u")
    return paths


def _twins(spark, name: str, partitioned_by: str = "") -> tuple[str, str]:
    mine, java = f"{name}_o", f"{name}_j"
    for n in (mine, java):
        spark.sql(f"DROP TABLE IF EXISTS jcat.db.{n}")
        spark.sql(f"CREATE TABLE jcat.db.{n} ({COLUMNS}) USING iceberg"
                  + (f" PARTITIONED BY ({partitioned_by})" if partitioned_by else ""))
    return mine, java


def _files(ours, name: str) -> dict[str, dict]:
    t = ours.load_table(("db", name))
    md = t.metadata
    out = {}
    for e in live_entries(t.io, md, snapshot_manifests(t.io, md.current_snapshot())):
        f = e.data_file
        out[f.file_path] = dict(
            file_format=f.file_format, partition=f.partition, record_count=f.record_count, size=f.file_size_in_bytes,
            column_sizes=f.column_sizes, value_counts=f.value_counts, null_value_counts=f.null_value_counts,
            nan_value_counts=f.nan_value_counts or {}, lower_bounds=f.lower_bounds, upper_bounds=f.upper_bounds,
            split_offsets=tuple(f.split_offsets or ()),
        )
    return out


def _call(spark, catalog: str, name: str, args: str) -> list[tuple]:
    sql = f"CALL {catalog}.system.add_files(table => 'db.{name}', {args})"
    df = spark.sql(sql) if catalog == "jcat" else procedures.sql(spark, sql)
    return [tuple(r) for r in df.collect()]


def _compare(spark, ours, java_warehouse, mine: str, java: str, args: str, fmt: str) -> dict[str, dict]:
    got = _call(spark, "ours", mine, args)
    want = _call(spark, "jcat", java, args)
    assert got == want, "output rows"
    mine_files, java_files = _files(ours, mine), _files(ours, java)
    assert sorted(mine_files) == sorted(java_files), "added data file paths"
    for path, want_file in java_files.items():
        assert want_file["file_format"].value == fmt.upper()
        for key, value in want_file.items():
            assert mine_files[path][key] == value, f"{key} of {path}"
    t_mine, t_java = ours.load_table(("db", mine)), ours.load_table(("db", java))
    keys = ("added-data-files", "added-records", "added-files-size", "changed-partition-count",
            "total-data-files", "total-records", "total-files-size")
    assert {k: t_mine.metadata.current_snapshot().summary.get(k) for k in keys} == \
        {k: t_java.metadata.current_snapshot().summary.get(k) for k in keys}, "summary"
    spark.sql(f"REFRESH TABLE jcat.db.{mine}")
    spark.sql(f"REFRESH TABLE jcat.db.{java}")
    expected = java_read(spark, f"jcat.db.{java}")
    assert expected.num_rows == 14
    assert_rows_equal(java_read(spark, f"jcat.db.{mine}"), expected, key="id", label="java reads ours")
    assert_rows_equal(spark_df_to_arrow(procedures.read_table(spark, f"ours.db.{mine}")), expected,
                      key="id", label="our reader")
    location = java_metadata_location(java_warehouse, "db", mine)
    if fmt == "orc":
        assert_rows_equal(pyiceberg_read(location), expected, key="id", label="pyiceberg")
    else:
        with pytest.raises(ValueError, match="Unsupported file format: FileFormat.AVRO"):
            pyiceberg_read(location)
    with pytest.raises(Exception, match=f"File format '{fmt.upper()}' not supported, only supports 'parquet'"):
        duckdb_read(location)
    return mine_files


def test_orc_unpartitioned_path(spark, ours, java_warehouse, sources):
    mine, java = _twins(spark, "oa_orc_u")
    files = _compare(spark, ours, java_warehouse, mine, java, f"source_table => '`orc`.`{sources['orc_u']}`'", "orc")
    assert len(files) >= 2
    # the footer's statistics: counts for every column, bounds for the ones ORC keeps them for
    f = next(iter(files.values()))
    assert set(f["value_counts"]) == set(range(1, 9)) and 2 in f["lower_bounds"] and 6 in f["upper_bounds"]


@pytest.mark.parametrize("via_spark", [False, True], ids=["driver", "spark"])
def test_orc_partitioned_path(spark, ours, java_warehouse, sources, via_spark, monkeypatch):
    if via_spark:
        monkeypatch.setattr(AF, "DRIVER_MAX_FILES", 0)
    mine, java = _twins(spark, f"oa_orc_p{int(via_spark)}", "p")
    _compare(spark, ours, java_warehouse, mine, java, f"source_table => '`orc`.`{sources['orc_p']}`'", "orc")


def test_orc_metastore_table(spark, ours, java_warehouse, sources):
    mine, java = _twins(spark, "oa_orc_hive", "p")
    _compare(spark, ours, java_warehouse, mine, java, "source_table => 'default.oa_orc_p'", "orc")


@pytest.mark.parametrize("source", ["avro_u", "avro_p"])
def test_avro_path(spark, ours, java_warehouse, sources, source):
    mine, java = _twins(spark, f"oa_{source}", "p" if source == "avro_p" else "")
    files = _compare(spark, ours, java_warehouse, mine, java, f"source_table => '`avro`.`{sources[source]}`'", "avro")
    # Java keeps only the record count of an imported Avro file
    assert all(not f["value_counts"] and not f["lower_bounds"] and f["record_count"] > 0 for f in files.values())


@pytest.mark.parametrize("table, partitioned_by", [("oa_avro_p", "p"), ("oa_avro_u", "")])
def test_avro_metastore_table(spark, ours, java_warehouse, sources, table, partitioned_by):
    mine, java = _twins(spark, f"oa_hive_{table}", partitioned_by)
    _compare(spark, ours, java_warehouse, mine, java, f"source_table => 'default.{table}'", "avro")
