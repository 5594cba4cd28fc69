"""The Spark write path: session helpers, write_dataframe in tasks, DML commits and DV carry-over, on
classic and Spark Connect sessions."""

from __future__ import annotations

import pytest

from procedures.errors import ValidationError
from procedures.io.delete_writers import read_position_deletes
from procedures.spark.dataframes import functions, is_connect
from procedures.spark.dml import append, delete_where
from procedures.spark.session import (
    active_session, cancel_job_group, catalog_for, job_description, job_group, load_table,
)
from procedures.spark.write import JOURNAL_PREFIX, write_dataframe
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import FileContent, FileFormat
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.partitioning import PartitionSpecBuilder
from procedures.spec.sorting import SortField, SortOrder
from tests.helpers.our_tables import SCHEMA, fresh_table

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]


def _table(spark, name, *, fv=2, partitioned=True, props=None, order=None):
    # both session kinds share the warehouse: each kind writes tables of its own
    name = f"{name}_connect" if is_connect(spark) else name
    spec = PartitionSpecBuilder(SCHEMA).identity("cat").build() if partitioned else None
    return fresh_table(spark, name, SCHEMA, spec=spec, fv=fv, props=props, order=order)


def _entries(t, content=None):
    snap = t.metadata.current_snapshot()
    return [e.data_file for m in read_manifest_list(t.io, snap.manifest_list)
            for e in read_manifest(t.io, m, specs=t.metadata.specs_by_id, skip_deleted=True)
            if content is None or e.data_file.content == content]


def test_session_helpers(spark):
    if is_connect(spark):
        pytest.skip("SparkContext local properties are classic-only (Connect: test_session_kinds.py)")
    assert active_session() is spark
    sc = spark.sparkContext
    sc.setJobDescription("outer")
    with job_description(spark, "rewrite_data_files: rewrite group 3/10"):
        assert sc.getLocalProperty("spark.job.description") == "rewrite_data_files: rewrite group 3/10"
    assert sc.getLocalProperty("spark.job.description") == "outer"
    with pytest.raises(RuntimeError):
        with job_description(spark, "failing"):
            raise RuntimeError("boom")
    assert sc.getLocalProperty("spark.job.description") == "outer"
    with job_group(spark, "g1", "grouped"):
        assert sc.getLocalProperty("spark.jobGroup.id") == "g1"
    assert sc.getLocalProperty("spark.jobGroup.id") is None
    sc.setJobDescription(None)
    assert catalog_for(spark, "jcat").name == "jcat"


def test_write_dataframe_clusters_and_rolls(spark):
    t = _table(spark, "wr_cluster", props={"write.target-file-size-bytes": "100000"})
    # hashed ids do not compress, so 100k rows of a partition exceed the target file size
    df = spark.range(0, 200000, numPartitions=4).selectExpr(
        "xxhash64(id) AS id", "CASE WHEN id % 2 = 0 THEN 'a' ELSE 'b' END AS cat")
    files = write_dataframe(spark, t, df, cluster=True)
    # clustered: each partition value is written by one task only, so file numbers of a task are dense
    by_cat = {}
    for f in files:
        by_cat.setdefault(f.partition, []).append(f)
    assert set(by_cat) == {("a",), ("b",)}
    for part, fs in by_cat.items():
        tasks = {f.file_path.rsplit("/", 1)[1].split("-")[0] for f in fs}
        assert len(tasks) == 1, (part, tasks)
        assert len(fs) > 1, "target-file-size-bytes=100000 must roll files"
        assert all(f"/data/cat={part[0]}/" in f.file_path for f in fs)
    assert sum(f.record_count for f in files) == 200000
    assert all(f.sort_order_id == 0 and f.spec_id == 0 for f in files)


def test_appends_follow_the_distribution_mode(spark):
    """``write.distribution-mode=hash`` gathers each partition's rows into one task (one file per
    partition) and the session's ``spark.sql.iceberg.distribution-mode`` overrides it, on both
    session kinds (tests/spark/test_write_distribution_java.py compares the files with Java's)."""
    t = _table(spark, "wr_dist", props={"write.distribution-mode": "hash"})
    # four tasks, each holding rows of all three partitions
    df = spark.range(0, 300, 1, 4).selectExpr("id", "concat('c', CAST(id % 3 AS string)) AS cat")

    def files_per_partition(t):
        out: dict = {}
        for f in _entries(t):
            out[f.partition] = out.get(f.partition, 0) + 1
        return out

    t = append(spark, t, df)
    assert files_per_partition(t) == {("c0",): 1, ("c1",): 1, ("c2",): 1}
    spark.conf.set("spark.sql.iceberg.distribution-mode", "none")
    try:
        t = append(spark, t, df)
    finally:
        spark.conf.unset("spark.sql.iceberg.distribution-mode")
    assert files_per_partition(t) == {("c0",): 5, ("c1",): 5, ("c2",): 5}


def test_sorted_write_claims_the_sort_order(spark):
    order = SortOrder(1, (SortField(1),))
    t = _table(spark, "wr_sorted", partitioned=False, order=order)
    df = spark.createDataFrame([(3, "x"), (1, "y"), (2, "z")], "id bigint, cat string").coalesce(1)
    (f,) = write_dataframe(spark, t, df, sort=True)
    assert f.sort_order_id == 1
    import pyarrow.parquet as pq

    assert pq.read_table(f.file_path).column("id").to_pylist() == [1, 2, 3]
    (g,) = write_dataframe(spark, t, df)
    assert g.sort_order_id == 0


def test_missing_required_column_is_refused(spark):
    t = _table(spark, "wr_required")
    with pytest.raises(ValidationError, match=r"required column\(s\) \['id'\]"):
        write_dataframe(spark, t, spark.createDataFrame([("a",)], "cat string"))


def test_dv_delete_keeps_neighbour_vectors_of_a_shared_puffin(spark, request):
    # one delete writes DVs for both partitions into one Puffin; a later delete touching only
    # partition 'a' must carry 'b''s vector over, or b's deleted rows would come back
    t = _table(spark, "wr_dv_carry", fv=3, props={"write.delete.mode": "merge-on-read"})
    rows = [(i, "a" if i % 2 else "b") for i in range(20)]
    t = append(spark, t, spark.createDataFrame(rows, "id bigint, cat string").coalesce(1))
    t = delete_where(spark, t, "id = 1 OR id = 2")
    dvs = _entries(t, FileContent.POSITION_DELETES)
    assert len(dvs) == 2 and len({d.file_path for d in dvs}) == 1
    t = delete_where(spark, t, "id = 3")
    dvs = _entries(t, FileContent.POSITION_DELETES)
    assert len(dvs) == 2 and all(d.file_format == FileFormat.PUFFIN for d in dvs)
    positions = {d.referenced_data_file: read_position_deletes(t.io, d)[d.referenced_data_file] for d in dvs}
    data = {f.partition: f.file_path for f in _entries(t, FileContent.DATA)}
    # rows are written in id order per partition: a holds 1,3,5.. and b holds 0,2,4..
    assert positions[data[("a",)]] == [0, 1] and positions[data[("b",)]] == [1]
    ids = sorted(r[0] for r in load_table_rows(spark, t))
    assert ids == [i for i in range(20) if i not in (1, 2, 3)]


def load_table_rows(spark, t):
    from procedures.spark.read import read_table

    return read_table(spark, load_table(spark, t)).select("id").collect()


def test_failed_job_leaves_no_files_of_tasks_that_finished(spark, tmp_path):
    import os
    import time

    F = functions(spark)
    t = _table(spark, "w_failed_job", partitioned=False)

    def slow_failure(i):
        if i >= 1000:
            time.sleep(3)  # the other task finishes and writes its file first
            raise RuntimeError("boom in the second task")
        return i

    boom = F.udf(slow_failure, "long")
    df = (spark.range(0, 2000, 1, 2).select(boom("id").alias("id"), F.lit("a").alias("cat")))
    with pytest.raises(Exception, match="boom in the second task"):
        write_dataframe(spark, t, df)
    data_dir = t.metadata.location.removeprefix("file:") + "/data"
    assert _files_under(data_dir) == []
    # the same write without the failure leaves exactly the files it returns
    files = write_dataframe(spark, t, spark.range(0, 2000, 1, 2).selectExpr("id", "'a' AS cat"))
    left = sorted(os.path.join(d, f) for d, _, fs in os.walk(data_dir) for f in fs)
    assert left == sorted(f.file_path.removeprefix("file:") for f in files) and len(files) == 2


def test_task_failing_after_some_files_deletes_them(spark):
    """A task that writes several file sets (bin-pack splits) and then fails leaves none of them:
    a failed task's journal entry is never written, so the task cleans up itself."""
    import pyarrow as pa

    from procedures.spark.write import write_in_task, write_payloads, write_settings

    t = _table(spark, "w_failed_payload", partitioned=False)
    settings = write_settings(t.metadata)
    io_props = dict(t.io.properties)

    def two_splits_then_boom(payload: bytes):
        batch = pa.RecordBatch.from_pydict({"id": pa.array([1, 2], pa.int64()), "cat": ["a", "b"]})
        for index in range(2):
            yield write_in_task(io_props, settings, f"{payload.decode()}-{index}", [batch])
        raise RuntimeError("boom after two splits")

    with pytest.raises(Exception, match="boom after two splits"):
        write_payloads(spark, t.io, [b"op"], two_splits_then_boom, data_path=settings.data_path)
    data_dir = t.metadata.location.removeprefix("file:") + "/data"
    assert _files_under(data_dir) == []


def _files_under(folder):
    import os

    return sorted(os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs) if os.path.isdir(folder) else []


def test_successful_writes_leave_nothing_behind(spark):
    """A write's journal goes once its job is over, and no accumulator stays registered on the driver
    (PySpark keeps those for the life of the context: a long-running driver grew with every write)."""
    import os

    t = _table(spark, "w_no_leftovers", partitioned=False)
    df = spark.range(0, 100, 1, 2).selectExpr("id", "'a' AS cat")
    registry = _accumulators()
    files = [f for _ in range(3) for f in write_dataframe(spark, t, df)]
    data_dir = t.metadata.location.removeprefix("file:") + "/data"
    assert len(files) == 6
    assert _files_under(data_dir) == sorted(f.file_path.removeprefix("file:") for f in files)
    assert not [d for d in os.listdir(data_dir) if d.startswith(JOURNAL_PREFIX)]
    assert _accumulators() == registry


def _accumulators():
    from pyspark import accumulators

    return set(getattr(accumulators, "_accumulatorRegistry", {}))


def test_insert_through_sql(spark):
    """``procedures.sql`` INSERT INTO a table of our catalog writes through ``append``: on a Spark
    Connect session too (it used to stop at the write's accumulator: no sparkContext there)."""
    import procedures
    from tests.oracles import pyiceberg_read

    name = "w_sql_insert_connect" if is_connect(spark) else "w_sql_insert"
    procedures.sql(spark, "CREATE NAMESPACE IF NOT EXISTS jcat.db")
    procedures.sql(spark, f"DROP TABLE IF EXISTS jcat.db.{name}")
    procedures.sql(spark, f"CREATE TABLE jcat.db.{name} (id bigint NOT NULL, cat string) PARTITIONED BY (cat)")
    procedures.sql(spark, f"INSERT INTO jcat.db.{name} VALUES (1, 'a'), (2, 'b'), (3, 'a')")
    procedures.sql(spark, f"INSERT INTO jcat.db.{name} SELECT id, 'c' FROM range(10, 13)")
    t = catalog_for(spark, "jcat").load_table(("db", name))
    rows = sorted(tuple(r.values()) for r in pyiceberg_read(t.metadata_location).to_pylist())
    assert rows == [(1, "a"), (2, "b"), (3, "a"), (10, "c"), (11, "c"), (12, "c")]
    assert [s.summary["operation"] for s in t.metadata.snapshots] == ["append", "append"]
    data_dir = t.metadata.location.removeprefix("file:") + "/data"
    assert _files_under(data_dir) == sorted(f.file_path.removeprefix("file:") for f in _entries(t))


def test_cancelled_write_leaves_no_files_of_tasks_that_finished(spark):
    """A write cancelled (its job group / tag) after one task finished: that task's files, named by the
    write's journal, are deleted; the task still running is killed before writing."""
    import threading
    import time

    F = functions(spark)
    t = _table(spark, "w_cancelled", partitioned=False)
    data_dir = t.metadata.location.removeprefix("file:") + "/data"

    def held(i):
        if i >= 1000:  # the second task waits to be killed (bounded, should the cancel not arrive)
            time.sleep(120)
        return i

    df = spark.range(0, 2000, 1, 2).select(F.udf(held, "long")("id").alias("id"), F.lit("a").alias("cat"))
    outcome = {}

    def write():
        try:
            with job_group(spark, "w-cancel", "a write to cancel", interrupt_on_cancel=True):
                write_dataframe(spark, t, df)
        except BaseException as e:  # noqa: BLE001 -- the test looks at it
            outcome["error"] = e

    thread = threading.Thread(target=write)
    thread.start()
    journal = None
    for _ in range(1200):  # the first task records its file in the journal when it finishes
        journal = next((p for p in _files_under(data_dir) if JOURNAL_PREFIX in p and _readable(p)), None)
        if journal is not None:
            break
        time.sleep(0.05)
    cancel_job_group(spark, "w-cancel")
    thread.join()
    assert journal is not None, "the first task never finished"
    assert "error" in outcome, "the cancelled write returned"
    assert _files_under(data_dir) == []


def _readable(entry):
    import json

    try:
        with open(entry) as f:
            return bool(json.load(f))
    except ValueError:  # still being written
        return False


def test_concurrent_appends_from_threads(spark):
    """Two threads append through ``dml.append`` to one table at once (each write its own job and
    journal, each commit retried on conflict): no row or commit is lost, no journal is left."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.oracles import pyiceberg_read

    t = _table(spark, "w_concurrent")
    ident = f"jcat.db.{t.identifier[-1]}"

    def writer(k):
        for i in range(3):
            lo = k * 100 + i * 10
            append(spark, ident, spark.range(lo, lo + 10, 1, 2).selectExpr("id", f"'c{k}' AS cat"))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(writer, (1, 2)))
    t = load_table(spark, ident)
    ids = sorted(r["id"] for r in pyiceberg_read(t.metadata_location).to_pylist())
    assert ids == sorted(k * 100 + i for k in (1, 2) for i in range(30))
    assert [s.summary["operation"] for s in t.metadata.snapshots] == ["append"] * 6
    data_dir = t.metadata.location.removeprefix("file:") + "/data"
    assert _files_under(data_dir) == sorted(f.file_path.removeprefix("file:") for f in _entries(t))
