"""add_files against Iceberg Java 1.10.2's procedure, on twin tables.

The sources are written once with plain Spark (``df.write.partitionBy(...).parquet(dir)`` and
``spark_catalog`` tables ``USING parquet``).  For each case two identical targets are created with
Java SQL in ``jcat.db``; ours runs ``CALL ours.system.add_files(...)`` through :func:`procedures.sql`
on one (``ours`` is our hadoop catalog on the same warehouse), Java's ``CALL jcat.system.add_files``
on the other.  Outputs, the added data files (path, partition, record count, size, metrics) and
the rows read back through Java, PyIceberg and DuckDB must be identical; every refusal is a typed
error and leaves our table's metadata location unchanged.
"""

from __future__ import annotations

import math

import pytest

import procedures
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.errors import (
    DuplicateFilesError, NoSuchTableError, NotFoundError, UnsupportedFileFormatError, ValidationError,
)
from procedures.spark.engine import file_import_steps as AF
from procedures.spec.name_mapping import DEFAULT_NAME_MAPPING_PROPERTY
from tests.helpers.catalogs import java_twins, ours_on_java_warehouse
from tests.oracles import assert_rows_equal, java_metadata_location, read_all

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]

COLUMNS = "id bigint, data string, p int, f double, c string"


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    return ours_on_java_warehouse(spark, java_warehouse)


@pytest.fixture(scope="module")
def sources(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("add_files_sources")
    rows = [(i, f"s{i}", i % 2, i / 3, "ab" if i % 3 else "cd") for i in range(12)]
    rows += [(None, None, 1, math.nan, "ab"), (100, "x" * 40, 0, None, "cd")]
    df = spark.createDataFrame(rows, COLUMNS)
    paths = {
        "unpartitioned": str(root / "src_u"),
        "by_p": str(root / "src_p"),
        "by_p_c": str(root / "src_pc"),
    }
    df.write.parquet(paths["unpartitioned"])
    df.write.partitionBy("p").parquet(paths["by_p"])
    df.write.partitionBy("p", "c").parquet(paths["by_p_c"])
    spark.sql("DROP TABLE IF EXISTS default.af_hive_p")
    spark.sql("CREATE TABLE default.af_hive_p (id bigint, data string, f double, c string, p int) "
              "USING parquet PARTITIONED BY (p)")
    df.select("id", "data", "f", "c", "p").write.insertInto("default.af_hive_p")
    spark.sql("DROP TABLE IF EXISTS default.af_hive_u")
    spark.sql("CREATE TABLE default.af_hive_u (id bigint, data string, p int, f double, c string) STORED AS PARQUET")
    df.write.insertInto("default.af_hive_u")
    return paths


def _twins(spark, name: str, partitioned_by: str = "", props: str = "") -> tuple[str, str]:
    return java_twins(spark, name, COLUMNS, partitioned_by, props)


def _files(ours, name: str) -> dict[str, tuple]:
    t = ours.load_table(("db", name))
    md = t.metadata
    out = {}
    for e in live_entries(t.io, md, snapshot_manifests(t.io, md.current_snapshot())):
        f = e.data_file
        out[f.file_path] = dict(
            partition=f.partition, spec_id=f.spec_id, record_count=f.record_count, size=f.file_size_in_bytes,
            column_sizes=f.column_sizes, value_counts=f.value_counts, null_value_counts=f.null_value_counts,
            nan_value_counts=f.nan_value_counts or {}, lower_bounds=f.lower_bounds, upper_bounds=f.upper_bounds,
            split_offsets=tuple(f.split_offsets or ()), sort_order_id=f.sort_order_id,
        )
    return out


def _call(spark, catalog: str, name: str, args: str) -> list[tuple]:
    sql = f"CALL {catalog}.system.add_files(table => 'db.{name}', {args})"
    df = spark.sql(sql) if catalog == "jcat" else procedures.sql(spark, sql)
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema] == [
        ("added_files_count", "bigint", False), ("changed_partition_count", "bigint", True)]
    return [tuple(r) for r in df.collect()]


def _compare(spark, ours, java_warehouse, mine: str, java: str, args: str) -> list[tuple]:
    got = _call(spark, "ours", mine, args)
    want = _call(spark, "jcat", java, args)
    assert got == want, "output rows"
    mine_files, java_files = _files(ours, mine), _files(ours, java)
    assert sorted(mine_files) == sorted(java_files), "added data file paths"
    for path, want_file in java_files.items():
        for key, value in want_file.items():
            assert mine_files[path][key] == value, f"{key} of {path}"
    t_mine, t_java = ours.load_table(("db", mine)), ours.load_table(("db", java))
    assert t_mine.metadata.properties.get(DEFAULT_NAME_MAPPING_PROPERTY) is not None
    for t in (t_mine, t_java):
        snap = t.metadata.current_snapshot()
        assert snap.summary["operation"] == "append"
    keys = ("added-data-files", "added-records", "added-files-size", "changed-partition-count",
            "total-data-files", "total-records", "total-files-size")
    assert {k: t_mine.metadata.current_snapshot().summary.get(k) for k in keys} == \
        {k: t_java.metadata.current_snapshot().summary.get(k) for k in keys}, "summary"
    spark.sql(f"REFRESH TABLE jcat.db.{mine}")
    spark.sql(f"REFRESH TABLE jcat.db.{java}")
    expected = read_all(spark, f"jcat.db.{java}", java_metadata_location(java_warehouse, "db", java))["java"]
    for reader, rows in read_all(spark, f"jcat.db.{mine}", java_metadata_location(java_warehouse, "db", mine)).items():
        assert_rows_equal(rows, expected, key="id", label=f"after add_files / {reader}")
    return got


def _refused(spark, ours, name: str, args: str, error: type, match: str) -> None:
    before = ours.load_table(("db", name)).metadata_location
    with pytest.raises(error, match=match):
        _call(spark, "ours", name, args)
    assert ours.load_table(("db", name)).metadata_location == before, "a refusal changed the table"


def test_unpartitioned_path(spark, ours, java_warehouse, sources):
    mine, java = _twins(spark, "af_unpart")
    rows = _compare(spark, ours, java_warehouse, mine, java, f"source_table => '`parquet`.`{sources['unpartitioned']}`'")
    assert rows[0][0] >= 1 and rows[0][1] is None


@pytest.mark.parametrize("via_spark", [False, True], ids=["driver", "spark"])
def test_partitioned_path(spark, ours, java_warehouse, sources, via_spark, monkeypatch):
    if via_spark:
        monkeypatch.setattr(AF, "DRIVER_MAX_FILES", 0)
    mine, java = _twins(spark, f"af_part_{int(via_spark)}", "p")
    rows = _compare(spark, ours, java_warehouse, mine, java, f"source_table => '`parquet`.`{sources['by_p']}`'")
    assert rows[0][0] >= 2


def test_partitioned_path_v1_counts_partitions(spark, ours, java_warehouse, sources):
    mine, java = _twins(spark, "af_part_v1", "p", "'format-version'='1'")
    rows = _compare(spark, ours, java_warehouse, mine, java, f"source_table => '`parquet`.`{sources['by_p']}`'")
    assert rows[0][1] == 2


def test_two_level_partitioned_path_with_filter(spark, ours, java_warehouse, sources):
    mine, java = _twins(spark, "af_filter", "p, c")
    _compare(spark, ours, java_warehouse, mine, java,
             f"source_table => '`parquet`.`{sources['by_p_c']}`', partition_filter => map('c', 'ab')")
    assert {v['partition'][1] for v in _files(ours, mine).values()} == {"ab"}


def test_metastore_table_partitioned(spark, ours, java_warehouse, sources):
    mine, java = _twins(spark, "af_hive_p", "p")
    _compare(spark, ours, java_warehouse, mine, java, "source_table => 'default.af_hive_p', partition_filter => map('p', '1')")
    assert {v['partition'] for v in _files(ours, mine).values()} == {(1,)}
    # then the rest: the partition already added is not listed again
    _compare(spark, ours, java_warehouse, mine, java, "source_table => 'spark_catalog.default.af_hive_p', partition_filter => map('p', '0')")


def test_metastore_table_no_matching_partition_commits_empty_append(spark, ours, java_warehouse, sources):
    mine, java = _twins(spark, "af_hive_none", "p")
    assert _compare(spark, ours, java_warehouse, mine, java,
                    "source_table => 'default.af_hive_p', partition_filter => map('p', '7')") == [(0, 0)]


def test_metastore_table_unpartitioned(spark, ours, java_warehouse, sources):
    mine, java = _twins(spark, "af_hive_u")
    rows = _compare(spark, ours, java_warehouse, mine, java, "source_table => 'default.af_hive_u'")
    assert rows[0][1] == 1


def test_duplicates_refused_then_allowed(spark, ours, java_warehouse, sources):
    mine, java = _twins(spark, "af_dup")
    args = f"source_table => '`parquet`.`{sources['unpartitioned']}`'"
    n = _compare(spark, ours, java_warehouse, mine, java, args)[0][0]
    _refused(spark, ours, mine, args, DuplicateFilesError,
             "Cannot complete import because data files to be imported already exist within the target table: file:")
    with pytest.raises(Exception, match="already exist within the target table"):
        _call(spark, "jcat", java, args)
    _compare(spark, ours, java_warehouse, mine, java, args + ", check_duplicate_files => false")
    assert ours.load_table(("db", mine)).metadata.current_snapshot().summary["total-data-files"] == str(2 * n)


@pytest.mark.parametrize("target, source, match", [
    ("", "by_p", r"Cannot find a partition spec in Iceberg table ours\.db\.af_layout_\w+ that matches the partition columns \(\[p\]\) in input table"),
    ("p", "unpartitioned", r"matches the partition columns \(\[\]\) in input table"),
    ("c", "by_p", r"matches the partition columns \(\[p\]\)"),
    ("p", "by_p_c", r"matches the partition columns \(\[p, c\]\)"),
    ("bucket(2, id)", "by_p", r"matches the partition columns \(\[p\]\)"),
], ids=["partitioned-into-unpartitioned", "unpartitioned-into-partitioned", "other-column", "extra-level", "non-identity"])
def test_mismatched_partitioning_refused(spark, ours, sources, target, source, match):
    name = "af_layout_" + str(abs(hash((target, source))) % 10_000)
    mine, java = _twins(spark, name, target)
    args = f"source_table => '`parquet`.`{sources[source]}`'"
    _refused(spark, ours, mine, args, ValidationError, match)
    with pytest.raises(Exception, match="Cannot find a partition spec in Iceberg table"):
        _call(spark, "jcat", java, args)


@pytest.mark.parametrize("target, filt, match", [
    ("p", "map('c', 'ab')", r"refers to columns that are not partitioned: \[c\] \. Valid partition columns: \[p\]"),
    ("p", "map('p', '1', 'c', 'ab')", r"number of columns in the provided partition filter \(2\) is greater"),
    ("", "map('p', '1')", "Cannot use partition filter with an unpartitioned table ours.db.af_filter_bad"),
    ("p", "map('p', '9')", "Cannot find any matching partitions in table ours.db.af_filter_bad"),
])
def test_bad_partition_filter_refused(spark, ours, sources, target, filt, match):
    mine, _ = _twins(spark, "af_filter_bad", target)
    _refused(spark, ours, mine, f"source_table => '`parquet`.`{sources['by_p']}`', partition_filter => {filt}",
             ValidationError, match)


def test_missing_sources_refused(spark, ours, sources, tmp_path):
    mine, _ = _twins(spark, "af_missing")
    _refused(spark, ours, mine, f"source_table => '`parquet`.`{tmp_path / 'nope'}`'", NotFoundError,
             "Unable to list files in partition")
    _refused(spark, ours, mine, "source_table => 'default.af_nope'", NoSuchTableError,
             "Table `default`.`af_nope` does not exist")
    _refused(spark, ours, mine, f"source_table => '`csv`.`{tmp_path}`'", NoSuchTableError, "does not exist")


def test_unsupported_formats_refused(spark, ours, sources):
    """ORC and Avro are imported (tests/spark/test_import_orc_avro_java.py); other formats are refused."""
    mine, _ = _twins(spark, "af_format")
    spark.sql("DROP TABLE IF EXISTS default.af_csv")
    spark.sql("CREATE TABLE default.af_csv (id bigint, data string) USING csv")
    _refused(spark, ours, mine, "source_table => 'default.af_csv'", UnsupportedFileFormatError,
             "Unknown partition format: ")


def test_unknown_target_and_bad_parallelism(spark, ours, sources):
    with pytest.raises(NoSuchTableError, match="Couldn't load table 'db.af_no_such_table' in catalog 'ours'"):
        _call(spark, "ours", "af_no_such_table", f"source_table => '`parquet`.`{sources['unpartitioned']}`'")
    mine, _ = _twins(spark, "af_parallel")
    _refused(spark, ours, mine, f"source_table => '`parquet`.`{sources['unpartitioned']}`', parallelism => 0",
             ValidationError, "Parallelism should be larger than 0")


def test_nested_columns_by_name_mapping(spark, ours, java_warehouse, tmp_path):
    cols = "id bigint, s struct<a:int,b:string>, l array<int>, m map<string,int>, d date, dec decimal(10,2)"
    df = spark.sql("SELECT id, named_struct('a', CAST(id AS int), 'b', CAST(id AS string)) AS s, "
                   "array(CAST(id AS int), 7) AS l, map('k', CAST(id AS int)) AS m, "
                   "date_add(DATE '2024-01-01', CAST(id AS int)) AS d, CAST(id / 4 AS decimal(10,2)) AS dec "
                   "FROM range(20)")
    path = str(tmp_path / "nested")
    df.repartition(2).write.parquet(path)
    for n in ("af_nested_o", "af_nested_j"):
        spark.sql(f"DROP TABLE IF EXISTS jcat.db.{n}")
        spark.sql(f"CREATE TABLE jcat.db.{n} ({cols}) USING iceberg")
    _compare(spark, ours, java_warehouse, "af_nested_o", "af_nested_j", f"source_table => '`parquet`.`{path}`'")


def test_files_with_field_ids(spark, ours, java_warehouse, sources):
    """Files Iceberg wrote carry field ids: they are matched by id, not by name."""
    spark.sql("DROP TABLE IF EXISTS jcat.db.af_ids_src")
    spark.sql(f"CREATE TABLE jcat.db.af_ids_src ({COLUMNS}) USING iceberg")
    spark.sql("INSERT INTO jcat.db.af_ids_src VALUES (1, 'a', 0, 0.5, 'x'), (2, NULL, 1, NULL, 'y')")
    data = ours.load_table(("db", "af_ids_src")).location.removeprefix("file:") + "/data"
    mine, java = _twins(spark, "af_ids")
    for n in (mine, java):  # the mapping add_files sets knows only "payload": the files' "data" is found by id
        spark.sql(f"ALTER TABLE jcat.db.{n} RENAME COLUMN data TO payload")
    _compare(spark, ours, java_warehouse, mine, java, f"source_table => '`parquet`.`{data}`'")
    files = list(_files(ours, mine).values())
    assert files and all(2 in f["value_counts"] for f in files)
    assert any(2 in f["lower_bounds"] for f in files)
