"""The ``iceberg-procedures`` Python data source (Spark 4): reads equal PyIceberg's and DuckDB's, pushed
filters prune files, time travel by option, append/overwrite read back by the references, and a failed
write leaves the table and its folder as they were.

Runs on pyspark 4 with its own session (the shared ``spark`` fixture carries Iceberg Java for Spark 3.5);
on pyspark 3.5 only the refusal test runs here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import procedures
from procedures.spark.catalog_conf import load_catalog
from procedures.core.kernel.paths import normalize_path
from procedures.errors import UnsupportedVersionError
from procedures.spark import datasource as ds
from procedures.spark.dml import append, delete_where
from tests.helpers.references import import_reference
from tests.oracles import assert_rows_equal, duckdb_read, pyiceberg_read, spark_df_to_arrow

pytestmark = pytest.mark.spark

SPARK4 = ds.HAS_DATA_SOURCE_API
needs_spark4 = pytest.mark.skipif(not SPARK4, reason="Python data sources need pyspark 4 (this is pyspark 3.5)")
# filter pushdown into Python data sources arrived in pyspark 4.1; on 4.0 the source reads without it
needs_pushdown = pytest.mark.skipif(not ds.HAS_FILTER_PUSHDOWN,
                                    reason="filter pushdown into Python data sources needs pyspark 4.1 or later")
CAT = "dsc"
FORMAT = "iceberg-procedures"


@pytest.mark.skipif(SPARK4, reason="the refusal is for pyspark 3.5")
def test_register_on_spark_35_says_it_needs_spark_4():
    with pytest.raises(UnsupportedVersionError, match="needs pyspark 4.0 or later"):
        procedures.register_data_source()


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ds_warehouse")


@pytest.fixture(scope="module")
def spark4(warehouse):
    """A Spark 4 session (the run's own if one exists) with our jdbc catalog ``dsc`` and the source registered."""
    if not SPARK4:
        pytest.skip("Python data sources need pyspark 4 (this is pyspark 3.5)")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("iceberg-procedures-datasource")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2").config("spark.sql.session.timeZone", "UTC")
               .config("spark.pyspark.python", sys.executable).getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    # catalog keys are runtime SQL conf: they work on a session someone else created too
    session.conf.set(f"spark.sql.catalog.{CAT}.type", "jdbc")
    session.conf.set(f"spark.sql.catalog.{CAT}.uri", f"jdbc:sqlite:{warehouse / 'catalog.db'}")
    session.conf.set(f"spark.sql.catalog.{CAT}.warehouse", str(warehouse))
    procedures.register_data_source(session)
    yield session


@pytest.fixture()
def name(request) -> str:
    import re

    return "t_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")[:50]


def _create(spark, name: str, fv: int = 2, props: str = "") -> str:
    ident = f"{CAT}.db.{name}"
    procedures.sql(spark, f"CREATE NAMESPACE IF NOT EXISTS {CAT}.db")
    procedures.sql(spark, f"DROP TABLE IF EXISTS {ident} PURGE")
    procedures.sql(spark, f"CREATE TABLE {ident} (id bigint NOT NULL, cat string, v double) USING iceberg "
                          f"PARTITIONED BY (cat) TBLPROPERTIES ('format-version'='{fv}'{props})")
    return ident


def _rows(spark, start: int, end: int, parts: int = 2):
    return spark.range(start, end, numPartitions=parts).selectExpr(
        "id", "CASE WHEN id % 3 = 0 THEN 'a' WHEN id % 3 = 1 THEN 'b' ELSE 'c' END AS cat", "id * 1.5 AS v")


def _table(spark, ident: str):
    cat, db, t = ident.split(".")
    return load_catalog(cat, spark).load_table((db, t))


def _metadata(spark, ident: str) -> str:
    return normalize_path(_table(spark, ident).metadata_location).path


def _read(spark, ident: str, **options):
    reader = spark.read.format(FORMAT)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(ident)


def _check_references(spark, ident: str, df=None, snapshot_id: int | None = None) -> pa.Table:
    ours = spark_df_to_arrow(df if df is not None else _read(spark, ident))
    location = _metadata(spark, ident)
    assert_rows_equal(ours, pyiceberg_read(location, snapshot_id), key="id", label="pyiceberg")
    assert_rows_equal(ours, duckdb_read(location, snapshot_id), key="id", label="duckdb")
    return ours


# ------------------------------------------------------------------------------ reads
@needs_spark4
def test_read_our_table_with_position_deletes_equals_references(spark4, name):
    ident = _create(spark4, name, props=", 'write.delete.mode'='merge-on-read'")
    append(spark4, ident, _rows(spark4, 0, 300))
    append(spark4, ident, _rows(spark4, 300, 450))
    delete_where(spark4, ident, "id < 100")  # partly matching files: position delete files
    t = _table(spark4, ident)
    assert t.metadata.current_snapshot().summary.get("added-position-delete-files", "0") != "0"
    ours = _check_references(spark4, ident)
    assert ours.num_rows == 350
    assert ours.schema.names == ["id", "cat", "v"]


@needs_spark4
def test_read_deletion_vectors_of_a_v3_table(spark4, name):
    ident = _create(spark4, name, fv=3, props=", 'write.delete.mode'='merge-on-read'")
    append(spark4, ident, _rows(spark4, 0, 200))
    delete_where(spark4, ident, "id < 50")
    summary = _table(spark4, ident).metadata.current_snapshot().summary
    assert summary.get("added-dvs", summary.get("added-delete-files", "0")) != "0"
    rows = _read(spark4, ident).collect()
    assert sorted(r.id for r in rows) == list(range(50, 200))
    assert_rows_equal(spark_df_to_arrow(_read(spark4, ident)), pyiceberg_read(_metadata(spark4, ident)), key="id",
                      label="pyiceberg")


@needs_spark4
def test_read_a_table_pyiceberg_wrote(spark4, warehouse):
    sql = import_reference("pyiceberg.catalog.sql", "PyIceberg (with SQLite) not installed")
    py_cat = sql.SqlCatalog(CAT, uri=f"sqlite:///{warehouse / 'catalog.db'}", warehouse=f"file://{warehouse}")
    try:
        py_cat.create_namespace("pyns")
    except Exception:  # noqa: BLE001 -- already there from an earlier run of the module
        pass
    if py_cat.table_exists("pyns.written"):
        py_cat.purge_table("pyns.written")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()),
                        pa.field("ts", pa.timestamp("us", tz="UTC")), pa.field("d", pa.date32())])
    table = py_cat.create_table("pyns.written", schema=schema)
    import datetime as dt

    for start in (0, 50):
        table.append(pa.table({
            "id": list(range(start, start + 50)),
            "name": [None if i % 9 == 0 else f"n{i}" for i in range(start, start + 50)],
            "ts": [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(hours=i) for i in range(start, start + 50)],
            "d": [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in range(start, start + 50)],
        }, schema=schema))
    table.delete("id < 10")  # PyIceberg's own delete (copy-on-write rewrite)
    ident = f"{CAT}.pyns.written"
    ours = _check_references(spark4, ident)
    assert ours.num_rows == 90
    # timestamp, date and string filters reach planning as Python datetimes, dates and strs
    df = _read(spark4, ident).where("ts >= timestamp'2024-01-03 10:00:00' AND d < date'2024-03-01' AND name IS NOT NULL")
    expected = [i for i in range(10, 100) if i >= 58 and i < 60 and i % 9]
    assert sorted(r.id for r in df.collect()) == expected
    if ds.HAS_FILTER_PUSHDOWN:
        from pyspark.sql.datasource import GreaterThanOrEqual

        source_cls = ds.register_data_source(spark4)
        since = dt.datetime(2024, 1, 3, 10, tzinfo=dt.timezone.utc)
        assert _planned_files(source_cls, ident, df.schema, []) == 2
        assert _planned_files(source_cls, ident, df.schema, [GreaterThanOrEqual(("ts",), since)]) == 1
    first = table.history()[0].snapshot_id
    old = _read(spark4, ident, **{"snapshot-id": first})
    _check_references(spark4, ident, old, snapshot_id=first)
    assert old.count() == 50


@needs_spark4
def test_a_given_schema_projects_columns(spark4, name):
    ident = _create(spark4, name)
    append(spark4, ident, _rows(spark4, 0, 30))
    df = spark4.read.format(FORMAT).schema("V double, id bigint").load(ident)  # case-insensitive like Spark
    assert df.columns == ["V", "id"]
    assert sorted((r.id, r.V) for r in df.collect()) == [(i, i * 1.5) for i in range(30)]
    with pytest.raises(Exception, match="not in its schema"):
        spark4.read.format(FORMAT).schema("id bigint, nope string").load(ident).collect()


def _planned_files(source_cls, ident: str, spark_schema, filters, **options) -> int:
    source = source_cls({"path": ident, **options})
    reader = source.reader(spark_schema)
    if filters:
        returned = list(reader.pushFilters(filters))
        assert [id(f) for f in returned] == [id(f) for f in filters], "Spark must still filter the rows"
    return sum(len(p.tasks) for p in reader.partitions())


@needs_spark4
@needs_pushdown
def test_pushed_filters_prune_planned_files(spark4, name):
    from pyspark.sql.datasource import EqualTo, GreaterThan, StringContains

    ident = _create(spark4, name)
    append(spark4, ident, _rows(spark4, 0, 90, parts=1))
    append(spark4, ident, _rows(spark4, 1000, 1090, parts=1))
    source_cls = ds.register_data_source(spark4)
    schema = _read(spark4, ident).schema
    assert _planned_files(source_cls, ident, schema, []) == 6  # 3 partitions x 2 appends
    assert _planned_files(source_cls, ident, schema, [EqualTo(("cat",), "a")]) == 2
    assert _planned_files(source_cls, ident, schema, [EqualTo(("cat",), "a"), GreaterThan(("id",), 500)]) == 1
    # no counterpart: nothing pruned, Spark filters the rows
    assert _planned_files(source_cls, ident, schema, [StringContains(("cat",), "a")]) == 6

    # end to end: split-size 1 gives one Spark partition per planned file
    df = _read(spark4, ident, **{"split-size": 1}).where("cat = 'a' AND id > 500")
    assert df.rdd.getNumPartitions() == 1
    assert sorted(r.id for r in df.collect()) == [i for i in range(1000, 1090) if i % 3 == 0]
    assert _read(spark4, ident, **{"split-size": 1}).rdd.getNumPartitions() == 6
    contains = _read(spark4, ident).where("cat LIKE '%b%'")
    assert contains.count() == 60


@needs_spark4
@needs_pushdown
def test_spark_s_inferred_not_null_is_left_out_of_the_pruning(spark4, name):
    """Spark pushes ``id IS NOT NULL`` beside ``id > 5``; the comparison implies it, so only the
    comparison prunes (the same files, one test less per file), while a NOT NULL on a column no
    other filter names is kept, and Spark still gets every filter back."""
    from pyspark.sql.datasource import GreaterThan, IsNotNull

    ident = _create(spark4, name)
    append(spark4, ident, _rows(spark4, 0, 30))
    source_cls = ds.register_data_source(spark4)
    reader = source_cls({"path": ident}).reader(_read(spark4, ident).schema)
    filters = [IsNotNull(("id",)), GreaterThan(("id",), 5), IsNotNull(("cat",))]
    assert [id(f) for f in reader.pushFilters(filters)] == [id(f) for f in filters]
    assert [str(e) for e in reader.filters] == ["id > 5", "not_null(cat)"]
    assert reader.task_reader.filter_rows
    assert sorted(r.id for r in _read(spark4, ident).where("id > 5").collect()) == list(range(6, 30))


@needs_spark4
@needs_pushdown
def test_pushed_filters_skip_rows_in_the_read_and_spark_still_filters(spark4, name):
    """The reader hands Spark only the rows a pushed filter may match (row groups skipped by their
    statistics, rows tested in Arrow); Spark's own filter then gives the same rows as the references."""
    from pyspark.sql.datasource import GreaterThanOrEqual, LessThan

    ident = _create(spark4, name, props=", 'write.parquet.row-group-size-bytes'='4096'")
    append(spark4, ident, _rows(spark4, 0, 20000, parts=1))
    delete_where(spark4, ident, "id >= 5050 AND id < 5060")  # position deletes inside the range read
    kept = [i for i in range(5000, 5100) if not 5050 <= i < 5060]
    source_cls = ds.register_data_source(spark4)
    schema = _read(spark4, ident).schema
    reader = source_cls({"path": ident}).reader(schema)
    filters = [GreaterThanOrEqual(("id",), 5000), LessThan(("id",), 5100)]
    assert len(list(reader.pushFilters(filters))) == 2
    handed = [r for p in reader.partitions() for b in reader.read(p) for r in b.column(0).to_pylist()]
    assert sorted(handed) == kept
    df = _read(spark4, ident).where("id >= 5000 AND id < 5100")
    assert sorted(r.id for r in df.collect()) == kept
    ours = spark_df_to_arrow(_read(spark4, ident).where("id >= 5000 AND v < 7600.0"))
    ref = pyiceberg_read(_metadata(spark4, ident))
    ref = ref.filter(pc.and_(pc.greater_equal(ref["id"], 5000), pc.less(ref["v"], 7600.0)))
    assert ours.num_rows == len([i for i in range(5000, 5067) if not 5050 <= i < 5060])
    assert_rows_equal(ours, ref, key="id", label="pyiceberg")


@needs_spark4
def test_snapshot_options(spark4, name):
    ident = _create(spark4, name)
    append(spark4, ident, _rows(spark4, 0, 10))
    first = _table(spark4, ident).metadata.current_snapshot()
    append(spark4, ident, _rows(spark4, 10, 25))
    assert _read(spark4, ident).count() == 25
    assert _read(spark4, ident, **{"snapshot-id": first.snapshot_id}).count() == 10
    assert _read(spark4, ident, **{"as-of-timestamp": first.timestamp_ms}).count() == 10
    with pytest.raises(Exception, match="choose one"):
        _read(spark4, ident, **{"snapshot-id": first.snapshot_id, "as-of-timestamp": first.timestamp_ms}).collect()
    with pytest.raises(Exception, match="Cannot find snapshot 42"):
        _read(spark4, ident, **{"snapshot-id": 42}).collect()


@needs_spark4
def test_empty_table_reads_no_rows(spark4, name):
    ident = _create(spark4, name)
    df = _read(spark4, ident)
    assert df.columns == ["id", "cat", "v"]
    assert df.count() == 0


# ------------------------------------------------------------------------------ writes
@needs_spark4
def test_append_and_overwrite_read_by_references(spark4, name):
    ident = _create(spark4, name, props=", 'write.target-file-size-bytes'='1000000'")
    _rows(spark4, 0, 100).write.format(FORMAT).mode("append").save(ident)
    _rows(spark4, 100, 160).write.format(FORMAT).mode("append").option("snapshot-property.origin", "ds").save(ident)
    t = _table(spark4, ident)
    snap = t.metadata.current_snapshot()
    assert snap.summary["operation"] == "append" and snap.summary.get("origin") == "ds"
    assert len(t.metadata.snapshots) == 2
    ours = _check_references(spark4, ident)
    assert sorted(ours.column("id").to_pylist()) == list(range(160))

    _rows(spark4, 500, 520).write.format(FORMAT).mode("overwrite").save(ident)
    t = _table(spark4, ident)
    assert t.metadata.current_snapshot().summary["operation"] == "overwrite"
    ours = _check_references(spark4, ident)
    assert sorted(ours.column("id").to_pylist()) == list(range(500, 520))


@needs_spark4
def test_target_file_size_option_rolls_files(spark4, name):
    ident = _create(spark4, name)
    # hashed ids and random values: sequential ones encode so small that no file would reach the target
    rows = _rows(spark4, 0, 30000, parts=1).selectExpr("xxhash64(id) AS id", "cat", "rand(7) AS v")
    rows.write.format(FORMAT).mode("append").option("target-file-size-bytes", 20000).save(ident)
    summary = _table(spark4, ident).metadata.current_snapshot().summary
    assert int(summary["added-data-files"]) > 3  # more than one file per partition
    assert _read(spark4, ident).count() == 30000


@needs_spark4
def test_failing_write_leaves_table_and_folder_unchanged(spark4, name):
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    ident = _create(spark4, name)
    append(spark4, ident, _rows(spark4, 0, 10))
    before = _table(spark4, ident)
    data_dir = normalize_path(before.location).path + "/data"
    files_before = {str(p) for p in Path(data_dir).rglob("*") if p.is_file()}

    def explode(i):
        if i == 1999:
            import time

            time.sleep(4)  # let partition 0 finish: abort, not the failing task, must delete its files
            raise RuntimeError("boom in a write task")
        return i

    boom = F.udf(explode, LongType())
    # partition 0 finishes and writes files; partition 1 fails at its last row
    df = _rows(spark4, 0, 2000).withColumn("id", boom("id"))
    with pytest.raises(Exception, match="boom in a write task"):
        df.write.format(FORMAT).mode("append").save(ident)
    after = _table(spark4, ident)
    assert after.metadata_location == before.metadata_location
    assert {str(p) for p in Path(data_dir).rglob("*") if p.is_file()} == files_before
    assert _read(spark4, ident).count() == 10


@needs_spark4
def test_write_refusals(spark4, name):
    ident = _create(spark4, name)
    with pytest.raises(Exception, match="required column"):
        spark4.range(3).selectExpr("'a' AS cat").write.format(FORMAT).mode("append").save(ident)
    with pytest.raises(Exception, match="parquet only"):
        _rows(spark4, 0, 3).write.format(FORMAT).mode("append").option("write-format", "orc").save(ident)
    with pytest.raises(Exception, match="No table given"):
        _rows(spark4, 0, 3).write.format(FORMAT).mode("append").save()
    assert _table(spark4, ident).metadata.current_snapshot() is None


@needs_spark4
@needs_pushdown
def test_sessions_that_turn_pushdown_off_still_read(spark4, name):
    ident = _create(spark4, name)
    append(spark4, ident, _rows(spark4, 0, 30))
    spark4.conf.set(ds.PUSHDOWN_CONF, "false")
    try:
        source_cls = ds.register_data_source(spark4)
        # Spark refuses a reader that implements pushFilters when pushdown is off
        assert source_cls.reader_class is ds.IcebergReaderBase
        assert sorted(r.id for r in _read(spark4, ident).where("cat = 'b'").collect()) == list(range(1, 30, 3))
    finally:
        spark4.conf.set(ds.PUSHDOWN_CONF, "true")
        assert ds.register_data_source(spark4).reader_class is ds.IcebergReader


@needs_spark4
def test_overwrite_with_no_rows_empties_the_table(spark4, name):
    ident = _create(spark4, name, props=", 'write.delete.mode'='merge-on-read'")
    append(spark4, ident, _rows(spark4, 0, 30))
    delete_where(spark4, ident, "id < 5")
    _rows(spark4, 0, 0).write.format(FORMAT).mode("overwrite").save(ident)
    t = _table(spark4, ident)
    summary = t.metadata.current_snapshot().summary
    assert summary["total-data-files"] == "0" and summary["total-delete-files"] == "0"
    assert _read(spark4, ident).count() == 0
    _check_references(spark4, ident)


@needs_spark4
def test_equality_deletes_apply_also_when_their_column_is_not_read(spark4, name):
    import pyarrow.parquet as pq

    from procedures.core.kernel.operations import RowDelta
    from procedures.core.kernel.transaction import commit
    from procedures.io.arrow_schema import schema_to_arrow
    from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
    from procedures.spec.schema import Schema

    ident = _create(spark4, name)
    append(spark4, ident, _rows(spark4, 0, 12))
    table = _table(spark4, ident)
    md = table.metadata
    schema = Schema((md.schema().find_field("v"),))
    path = f"{table.location}/data/eq-a.parquet"
    local = normalize_path(path).path
    pq.write_table(pa.Table.from_pydict({"v": [0.0, 4.5, 1.5]}, schema=schema_to_arrow(schema)), local)
    # partition 'a' holds ids 0, 3, 6, 9: v = 0.0 and 4.5 go; 1.5 (id 1) is in partition 'b', untouched
    delete = DataFile(path, FileFormat.PARQUET, ("a",), 3, Path(local).stat().st_size,
                      content=FileContent.EQUALITY_DELETES, equality_ids=(schema.fields[0].field_id,),
                      spec_id=md.spec().spec_id)
    commit(table, [RowDelta(add_deletes=[delete])])
    expected = [i for i in range(12) if i not in (0, 3)]
    assert sorted(r.id for r in _read(spark4, ident).collect()) == expected
    narrow = spark4.read.format(FORMAT).schema("id bigint").load(ident)
    assert sorted(r.id for r in narrow.collect()) == expected
    # no reference here: DuckDB 1.5.5 applies a partition's equality deletes to every partition (it drops
    # id 1) and PyIceberg 0.12 refuses equality deletes; the expected rows follow the spec


@needs_spark4
def test_nested_and_temporal_types_round_trip(spark4, name):
    ident = f"{CAT}.db.{name}"
    procedures.sql(spark4, f"CREATE NAMESPACE IF NOT EXISTS {CAT}.db")
    procedures.sql(spark4, f"DROP TABLE IF EXISTS {ident} PURGE")
    procedures.sql(spark4, f"""CREATE TABLE {ident} (id bigint NOT NULL, s struct<a: int, b: string>,
        l array<bigint>, m map<string, double>, dec decimal(10, 3), d date, ts timestamp, ntz timestamp_ntz,
        bin binary) USING iceberg TBLPROPERTIES ('format-version'='2')""")
    df = spark4.sql("""SELECT id, named_struct('a', CAST(id AS int), 'b', CAST(id AS string)) AS s,
        CASE WHEN id % 4 = 0 THEN NULL ELSE sequence(0, id % 3) END AS l, map('k', CAST(id * 0.5 AS double)) AS m,
        CAST(id / 7 AS decimal(10, 3)) AS dec, date_add(DATE'2024-01-01', CAST(id AS int)) AS d,
        TIMESTAMP'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, CAST(id AS int)) AS ts,
        TIMESTAMP_NTZ'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, CAST(id AS int)) AS ntz,
        CAST(CAST(id AS string) AS binary) AS bin FROM range(40)""")
    df.write.format(FORMAT).mode("append").save(ident)
    ours = _read(spark4, ident)
    assert ours.columns == df.columns
    assert ours.schema["ts"].dataType.typeName() == "timestamp" and ours.schema["ntz"].dataType.typeName() == "timestamp_ntz"
    assert_rows_equal(spark_df_to_arrow(ours), spark_df_to_arrow(df), key="id", label="the written rows")
    assert_rows_equal(spark_df_to_arrow(ours), pyiceberg_read(_metadata(spark4, ident)), key="id", label="pyiceberg")
    assert ours.where("ts >= TIMESTAMP'2024-01-02 12:00:00' AND s.a < 39").count() == 3


@needs_spark4
@pytest.mark.skipif(ds.HAS_FILTER_PUSHDOWN, reason="the fallback is for pyspark 4.0")
def test_pyspark_40_reads_without_pushdown(spark4, name):
    ident = _create(spark4, name)
    append(spark4, ident, _rows(spark4, 0, 30))
    assert ds.register_data_source(spark4).reader_class is ds.IcebergReaderBase
    assert sorted(r.id for r in _read(spark4, ident).where("cat = 'b'").collect()) == list(range(1, 30, 3))


@needs_spark4
def test_many_manifests_are_planned_in_the_read_tasks(spark4, name):
    """Past planning-min-manifests data manifests, each Spark partition reads a group of manifests and
    plans its own files: the same rows as driver planning, deletes applied, pushed filters pruning."""
    ident = _create(spark4, name)
    for i in range(6):  # one manifest per append
        append(spark4, ident, _rows(spark4, i * 100, i * 100 + 90, parts=1))
    gone = [i * 100 + 5 for i in range(6)] + [i * 100 + 50 for i in range(6)]
    delete_where(spark4, ident, f"id IN ({', '.join(map(str, gone))})", mode="merge-on-read")
    source_cls = ds.register_data_source(spark4)
    schema = _read(spark4, ident).schema
    reader = source_cls({"path": ident, "planning-min-manifests": "2"}).reader(schema)
    parts = reader.partitions()
    assert parts and all(isinstance(p, ds.ManifestPartition) for p in parts)
    assert sum(len(p.manifests) for p in parts) == 6
    driver_parts = source_cls({"path": ident}).reader(schema).partitions()
    assert all(isinstance(p, ds.ScanPartition) for p in driver_parts)
    distributed = _read(spark4, ident, **{"planning-min-manifests": 2})
    assert sorted(r.id for r in distributed.collect()) == sorted(r.id for r in _read(spark4, ident).collect())
    assert distributed.count() == 6 * 90 - len(gone)
    _check_references(spark4, ident, distributed)
    if ds.HAS_FILTER_PUSHDOWN:
        filtered = _read(spark4, ident, **{"planning-min-manifests": 2}).where("cat = 'a' AND id >= 500")
        assert sorted(r.id for r in filtered.collect()) == [i for i in range(500, 590) if i % 3 == 0 and i not in gone]
    with pytest.raises(Exception, match="planning-min-manifests=0"):
        _read(spark4, ident, **{"planning-min-manifests": 0}).collect()
