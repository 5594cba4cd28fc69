"""read_table's Spark-facing API: column selection and order, filters, snapshot choice by time and ref,
metadata columns, empty tables and errors.

The tests marked ``java`` compare with Iceberg Java's reads (classic pyspark 3.5 only); the others
build their tables without Spark and run on classic and Spark Connect sessions."""

from __future__ import annotations

import pyarrow as pa
import pytest

import procedures.spark.catalog_conf as catalog_conf
import procedures.spark.dataframes as dataframes
import procedures.spark.scan_planning as scan_planning
from oracles import spark_df_to_arrow
from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.transaction import commit
from procedures.errors import NoSuchRefError, ValidationError
from procedures.core.kernel.scan import iter_file_scan_tasks
from procedures.io.parquet_writer import WriteSettings, write_data_files
from procedures.spark.dataframes import functions
from procedures.spark.read import load_table, read_files, read_table, read_tasks
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]


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


@pytest.mark.java
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


@pytest.mark.java
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


@pytest.mark.java
def test_metadata_columns_and_types(spark, table):
    df = read_table(spark, table, metadata_columns=("_spec_id", "_pos", "_deleted"))
    assert df.schema.simpleString() == (
        "struct<id:bigint,name:string,loc:struct<lat:double,lon:double>,_spec_id:int,_pos:bigint,_deleted:boolean>")
    rows = spark_df_to_arrow(df).to_pylist()
    assert {r["_spec_id"] for r in rows} == {0} and {r["_deleted"] for r in rows} == {False}
    with pytest.raises(ValidationError, match="_nope"):
        read_table(spark, table, metadata_columns=("_nope",))


@pytest.mark.java
def test_empty_table_reads_no_rows_with_its_schema(spark):
    ident = "jcat.db.read_api_empty"
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(f"CREATE TABLE {ident} (id bigint, d date) USING iceberg")
    df = read_table(spark, ident)
    assert df.columns == ["id", "d"] and df.count() == 0


@pytest.mark.java
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


@pytest.mark.java
def test_text_filters_skip_row_groups_and_rows_and_read_like_java(spark):
    """A text filter is re-applied by Spark, so the read skips the row groups and rows it rules out;
    rows, positions and deletes still match Java's read."""
    ident = "jcat.db.read_pruned"
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(f"""CREATE TABLE {ident} (id bigint, s string, v double) USING iceberg TBLPROPERTIES (
        'format-version'='2', 'write.delete.mode'='merge-on-read',
        'write.parquet.row-group-size-bytes'='65536')""")
    spark.sql(f"INSERT INTO {ident} SELECT id, concat('value-', id), id * 0.5 FROM range(0, 60000, 1, 2)")
    spark.sql(f"DELETE FROM {ident} WHERE id % 7 = 3")
    for where in ("id >= 1000 AND id < 3000 OR s = 'value-59999'", "s >= 'value-5' AND v < 27000.0",
                  "id IN (5, 6, 7, 30001) OR s IS NULL"):
        ours = _tuples(read_table(spark, ident, filter=where, metadata_columns=("_pos",)))
        java = _tuples(spark.sql(f"SELECT id, s, v, _pos FROM {ident} WHERE {where}"))
        assert ours == java and ours, where
    # what the read hands to Spark, before Spark's filter: only matching rows for an exact filter
    t = load_table(spark, ident)
    where = "id >= 1000 AND id < 3000"
    tasks = list(iter_file_scan_tasks(t.metadata, t.io, filter=where))
    raw = read_tasks(spark, t, tasks, t.metadata.schema(), filter_rows=True)
    assert raw.count() == len([i for i in range(1000, 3000) if i % 7 != 3])
    assert read_tasks(spark, t, tasks, t.metadata.schema()).count() > 20000  # the whole file


# ------------------------------------------------------------------ tables written without Spark
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))
BY_DATA = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "data"),))
ROWS = [(i, "abc"[i % 3]) for i in range(12)]


def _append(t, rows):
    arrow = pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                      "data": pa.array([r[1] for r in rows], pa.string())})
    return commit(t, [FastAppend(write_data_files(t.io, WriteSettings.from_metadata(t.metadata), [arrow]))])


def _new_table(root, name):
    cat = HadoopCatalog("local", str(root / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/{name}", spec=BY_DATA, format_version=2)
    return cat.create_table(("db", name), md)


@pytest.fixture(scope="module")
def local_table(tmp_path_factory):
    """Two appends of three files each (one per ``data`` value); returns the table and the first snapshot."""
    t = _append(_new_table(tmp_path_factory.mktemp("read-local"), "t"), ROWS[:6])
    first = t.metadata.current_snapshot_id
    return _append(t, ROWS[6:]), first


def _tuples(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_read_table_rows_columns_filter_and_time_travel(spark, local_table):
    t, first = local_table
    df = read_table(spark, t)
    assert df.columns == ["id", "data"] and not df.schema["id"].nullable and df.schema["data"].nullable
    assert _tuples(df) == ROWS
    assert _tuples(read_table(spark, t, snapshot_id=first)) == ROWS[:6]
    picked = read_table(spark, t, columns=["data", "id"], filter="id >= 9")
    assert picked.columns == ["data", "id"] and _tuples(picked) == sorted((d, i) for i, d in ROWS if i >= 9)
    meta = read_table(spark, t, metadata_columns=("_file", "_pos", "_spec_id")).collect()
    files = {tk.data_file.file_path: tk.data_file.record_count for tk in iter_file_scan_tasks(t.metadata, t.io)}
    assert {r["_file"] for r in meta} == set(files) and {r["_spec_id"] for r in meta} == {0}
    assert sorted((r["_file"], r["_pos"]) for r in meta) == sorted((f, p) for f, n in files.items() for p in range(n))


@pytest.mark.parametrize("inline", [True, False], ids=["inline", "shuffled"])
def test_each_read_group_is_one_partition(spark, local_table, monkeypatch, inline):
    # the tasks frame puts group i alone in partition i, whether the groups ride in the plan or are
    # hash-placed (a group split over two tasks, or two groups in one, would show here)
    if not inline:
        monkeypatch.setattr(dataframes, "INLINE_PAYLOAD_BYTES", 0)
    t, _ = local_table
    F = functions(spark)
    tasks = list(iter_file_scan_tasks(t.metadata, t.io))
    df = read_tasks(spark, t, tasks, SCHEMA, metadata_columns=("_file",), split_size=1)
    placed = df.select(F.spark_partition_id().alias("p"), "_file").distinct().collect()
    by_partition: dict[int, set] = {}
    for r in placed:
        by_partition.setdefault(r["p"], set()).add(r["_file"])
    assert sorted(by_partition) == list(range(len(tasks))) and len(tasks) == 6
    assert all(len(v) == 1 for v in by_partition.values())
    part_of = {tk.data_file.file_path: tk.data_file.partition[0] for tk in tasks}
    assert sorted((r["id"], part_of[r["_file"]]) for r in df.collect()) == ROWS


def test_empty_reads_keep_the_schema(spark, tmp_path, local_table):
    empty = _new_table(tmp_path, "empty")
    df = read_table(spark, empty)
    assert df.columns == ["id", "data"] and not df.schema["id"].nullable and df.count() == 0
    t, _ = local_table
    pruned = read_table(spark, t, filter="id > 1000", metadata_columns=("_pos",))
    assert pruned.columns == ["id", "data", "_pos"] and pruned.collect() == []


def test_read_with_the_manifests_read_on_the_executors(spark, local_table, monkeypatch):
    t, _ = local_table
    calls = []
    real = scan_planning.SparkEntryReader._read

    def counting(self, plan, manifests):
        calls.append(len(manifests))
        return real(self, plan, manifests)

    monkeypatch.setattr(scan_planning, "DRIVER_MAX_SCAN_MANIFESTS", 0)

    monkeypatch.setattr(scan_planning, "DRIVER_MAX_SCAN_ENTRIES", 0)
    monkeypatch.setattr(scan_planning.SparkEntryReader, "_read", counting)
    assert _tuples(read_table(spark, t, filter="id < 8")) == [r for r in ROWS if r[0] < 8]
    # read_files plans with the streamed reader (results pulled a partition at a time)
    wanted = [tk.data_file.file_path for tk in iter_file_scan_tasks(t.metadata, t.io) if tk.data_file.partition == ("b",)]
    got = read_files(spark, t, wanted, columns=["id"]).collect()
    assert sorted(r["id"] for r in got) == [i for i, d in ROWS if d == "b"]
    assert calls == [2, 2]


def test_classic_and_connect_sessions_read_the_same(classic_spark, connect_spark, local_table):
    t, first = local_table
    for kwargs in ({}, {"snapshot_id": first, "metadata_columns": ("_file", "_pos", "_spec_id")},
                   {"columns": ["data"], "filter": "id >= 5"}):
        classic, connect = read_table(classic_spark, t, **kwargs), read_table(connect_spark, t, **kwargs)
        assert classic.schema == connect.schema
        assert _tuples(classic) == _tuples(connect) and _tuples(classic)


def test_session_conf_read_holds_the_static_keys(spark):
    # on pyspark 3.5 classic the read is SET alone (no copy of the context's conf): the static keys a
    # catalog is configured with must still be there, as on Spark 4 and Connect
    conf = catalog_conf.conf_from_spark(spark)
    assert conf["spark.sql.catalog.jcat.type"] == "hadoop" and "spark.app.name" in conf
    assert conf["spark.sql.session.timeZone"] == spark.conf.get("spark.sql.session.timeZone")


def test_session_conf_from_the_jvm_is_what_pyspark_reads(spark, monkeypatch):
    # one JSON text from the JVM (1-2 ms) instead of SET or getAll (6-14 ms a statement): the same
    # entries, a runtime change seen at once, and a secret as set, not as SET redacts it
    if getattr(spark, "_jsparkSession", None) is None:
        pytest.skip("a Spark Connect session has no JVM in this process: its conf is read through pyspark")
    assert catalog_conf._jvm_session_conf(spark) is not None  # a classic session answers from its JVM
    key = "spark.sql.catalog.conftest.s3.secret-access-key"
    spark.conf.set(key, "s3cr3t")
    try:
        fast = catalog_conf.conf_from_spark(spark)
        monkeypatch.setattr(catalog_conf, "_jvm_session_conf", lambda session: None)
        slow = catalog_conf.conf_from_spark(spark)
        assert fast == slow and fast[key] == "s3cr3t"
        spark.conf.set(key, "rotated")
        monkeypatch.undo()
        assert catalog_conf.conf_from_spark(spark)[key] == "rotated"
    finally:
        spark.conf.unset(key)
    assert key not in catalog_conf.conf_from_spark(spark)


@pytest.mark.java
def test_loading_a_table_by_name_reads_the_session_conf_once(spark, table, monkeypatch):
    # each read of the conf costs tens of JVM round trips (on Connect, a server call): a tenth of a
    # small read's time when it was read twice, once for the identifier and again for the catalog
    calls = []
    real = catalog_conf.conf_from_spark

    def counting(session):
        calls.append(1)
        return real(session)

    monkeypatch.setattr(catalog_conf, "conf_from_spark", counting)
    assert load_table(spark, table).name.endswith("read_api")
    assert len(calls) == 1
