"""The Spark write path: session helpers, write_dataframe in tasks, DML commits and DV carry-over."""

from __future__ import annotations

import pytest

from procedures.core.builder import new_table_metadata
from procedures.errors import ValidationError
from procedures.io.delete_writers import read_position_deletes
from procedures.spark.dml import append, delete_where
from procedures.spark.session import active_session, catalog_for, job_description, job_group, load_table
from procedures.spark.write import write_dataframe
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import FileContent, FileFormat
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.partitioning import PartitionSpecBuilder
from procedures.spec.schema import Schema
from procedures.spec.sorting import SortField, SortOrder
from procedures.spec.types import LONG, STRING, NestedField

pytestmark = pytest.mark.spark

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "cat", STRING)))


def _table(spark, name, *, fv=2, partitioned=True, props=None, order=None):
    cat = catalog_for(spark, "jcat")
    if not cat.namespace_exists(("db",)):
        cat.create_namespace(("db",))
    ident = ("db", name)
    if cat.table_exists(ident):
        cat.drop_table(ident, purge=True)
    spec = PartitionSpecBuilder(SCHEMA).identity("cat").build() if partitioned else None
    md, _ = new_table_metadata(schema=SCHEMA, location=cat.default_table_location(ident), spec=spec,
                               sort_order=order, format_version=fv, properties=dict(props or {}))
    return cat.create_table(ident, md)


def _entries(t, content=None):
    snap = t.metadata.current_snapshot()
    return [e.data_file for m in read_manifest_list(t.io, snap.manifest_list)
            for e in read_manifest(t.io, m, specs=t.metadata.specs_by_id, skip_deleted=True)
            if content is None or e.data_file.content == content]


def test_session_helpers(spark):
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
    df = spark.range(0, 200000, numPartitions=4).selectExpr("id", "CASE WHEN id % 2 = 0 THEN 'a' ELSE 'b' END AS cat")
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


def test_dv_delete_keeps_neighbour_vectors_of_a_shared_puffin(spark):
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

    from pyspark.sql import functions as F

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
    left = [f for _, _, files in os.walk(data_dir) for f in files] if os.path.isdir(data_dir) else []
    assert left == []
    # the same write without the failure leaves exactly the files it returns
    files = write_dataframe(spark, t, spark.range(0, 2000, 1, 2).selectExpr("id", "'a' AS cat"))
    left = sorted(os.path.join(d, f) for d, _, fs in os.walk(data_dir) for f in fs)
    assert left == sorted(f.file_path.removeprefix("file:") for f in files) and len(files) == 2


def test_task_failing_after_some_files_deletes_them(spark):
    """A task that writes several file sets (bin-pack splits) and then fails leaves none of them:
    a failed task's accumulator updates never reach the driver, so the task cleans up itself."""
    import os

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
        write_payloads(spark, t.io, [b"op"], two_splits_then_boom)
    data_dir = t.metadata.location.removeprefix("file:") + "/data"
    left = [f for _, _, files in os.walk(data_dir) for f in files] if os.path.isdir(data_dir) else []
    assert left == []


def test_successful_writes_leave_no_accumulator_behind(spark):
    """PySpark keeps every accumulator on the driver for the life of the context; a write forgets its own
    once its job succeeded, so a long-running driver does not grow with every write (the soak's leak)."""
    from pyspark import accumulators

    t = _table(spark, "w_acc_release", partitioned=False)
    df = spark.range(0, 100, 1, 2).selectExpr("id", "'a' AS cat")
    write_dataframe(spark, t, df)  # warm: anything the first write registers once
    before = set(accumulators._accumulatorRegistry)
    for _ in range(3):
        assert len(write_dataframe(spark, t, df)) == 2
    assert set(accumulators._accumulatorRegistry) - before == set()
