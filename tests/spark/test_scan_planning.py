"""Scan planning with the data manifests read in Spark tasks (procedures.spark.scan_planning): the
tasks must be the driver path's, in the same order, with deletes, several specs and filters."""

from __future__ import annotations

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel import updates as U
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.gc import reachability as R
from procedures.core.kernel.operations import FastAppend, RowDelta
from procedures.core.kernel.scan import iter_file_scan_tasks
from procedures.core.kernel.transaction import MetadataChange, RetryPolicy, commit
from procedures.spark.read import read_table
from procedures.spark.scan_planning import SparkEntryReader, iter_scan_tasks, plan_scan_tasks
from procedures.spec.conversions import to_bytes
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]

FAST = RetryPolicy(num_retries=2, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))
BY_DATA = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "data"),))
BY_BUCKET = PartitionSpec(1, (PartitionField(1, 1001, parse_transform("bucket[4]"), "id_bucket"),))


def _file(t, name, part, lo, hi, spec_id, content=FileContent.DATA, **kw):
    return DataFile(f"{t.location}/data/{name}", FileFormat.PARQUET, part, 10, 100, content=content, spec_id=spec_id,
                    lower_bounds={1: to_bytes(lo, LONG)}, upper_bounds={1: to_bytes(hi, LONG)}, **kw)


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """A table of 24 data manifests under two specs, with partition- and file-scoped position deletes and equality deletes
    (only metadata: planning opens no data file)."""
    cat = HadoopCatalog("local", str(tmp_path_factory.mktemp("plan") / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=BY_DATA, format_version=2)
    t = cat.create_table(("db", "t"), md)
    for i in range(12):
        part = ("a", "b", "c")[i % 3]
        t = commit(t, [FastAppend([_file(t, f"s0-{i}-{j}.parquet", (part,), 100 * i + 10 * j, 100 * i + 10 * j + 9, 0)
                                   for j in range(3)])], policy=FAST)
    first = f"{t.location}/data/s0-0-0.parquet"
    t = commit(t, [RowDelta(add_deletes=[
        _file(t, "pos-a.parquet", ("a",), 0, 0, 0, FileContent.POSITION_DELETES),
        _file(t, "pos-scoped.parquet", ("a",), 0, 0, 0, FileContent.POSITION_DELETES, referenced_data_file=first),
        _file(t, "eq-b.parquet", ("b",), 0, 0, 0, FileContent.EQUALITY_DELETES, equality_ids=(1,)),
    ])], policy=FAST)
    t = commit(t, [MetadataChange((U.AddPartitionSpec(BY_BUCKET), U.SetDefaultSpec(-1)))], policy=FAST)
    for i in range(12):
        t = commit(t, [FastAppend([_file(t, f"s1-{i}-{j}.parquet", ((i + j) % 4,), 100 * i + j, 100 * i + j, 1)
                                   for j in range(2)])], policy=FAST)
    target = f"{t.location}/data/s1-0-0.parquet"
    t = commit(t, [RowDelta(add_deletes=[
        _file(t, "pos-s1.parquet", (0,), 0, 0, 1, FileContent.POSITION_DELETES, referenced_data_file=target),
        _file(t, "eq-s1.parquet", (1,), 0, 0, 1, FileContent.EQUALITY_DELETES, equality_ids=(1,)),
    ])], policy=FAST)
    return t


@pytest.mark.parametrize("flt", [None, "data = 'a'", "id < 450", "id >= 200 AND id < 700", "id = 305",
                                 "data = 'b' OR id < 150"])
def test_executor_planning_gives_the_driver_tasks_in_order(spark, table, flt):
    md = table.metadata
    driver = list(iter_file_scan_tasks(md, table.io, filter=flt))
    reader = SparkEntryReader(spark, table.io, table.name, min_manifests=2)
    executors = list(iter_file_scan_tasks(md, table.io, filter=flt, read_entries=reader))
    assert reader.distributed
    assert executors == driver and driver
    assert any(tk.deletes for tk in driver) or flt == "id = 305"
    assert plan_scan_tasks(spark, table, min_manifests=2, filter=flt) == driver
    streamed = SparkEntryReader(spark, table.io, table.name, min_manifests=2, stream=True)
    assert list(iter_file_scan_tasks(md, table.io, filter=flt, read_entries=streamed)) == driver
    assert streamed.distributed
    assert list(iter_scan_tasks(spark, table, min_manifests=2, filter=flt)) == driver


def test_deletes_and_both_specs_reach_the_executor_plan(spark, table):
    tasks = plan_scan_tasks(spark, table, min_manifests=2)
    assert len(tasks) == 12 * 3 + 12 * 2
    assert {tk.spec_id for tk in tasks} == {0, 1}
    kinds = {d.data_file.file_path.rsplit("/", 1)[1] for tk in tasks for d in tk.deletes}
    assert kinds == {"pos-a.parquet", "pos-scoped.parquet", "eq-b.parquet", "pos-s1.parquet", "eq-s1.parquet"}


def test_small_scans_stay_on_the_driver(spark, table):
    reader = SparkEntryReader(spark, table.io, table.name)
    assert list(iter_file_scan_tasks(table.metadata, table.io, read_entries=reader))
    assert not reader.distributed


@pytest.mark.java
def test_read_table_past_the_limit_reads_the_same_rows(spark, monkeypatch):
    ident = "jcat.db.plan_on_executors"
    spark.sql(f"DROP TABLE IF EXISTS {ident}")
    spark.sql(f"CREATE TABLE {ident} (id bigint, p int) USING iceberg PARTITIONED BY (p) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    for i in range(4):
        spark.sql(f"INSERT INTO {ident} VALUES ({i}, {i % 2}), ({i + 10}, {i % 2})")
    spark.sql(f"DELETE FROM {ident} WHERE id = 11")
    expected = sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {ident} WHERE id > 1").collect())
    calls = []
    real = SparkEntryReader._read

    def counting(self, plan, manifests):
        calls.append(len(manifests))
        return real(self, plan, manifests)

    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 1)
    monkeypatch.setattr(SparkEntryReader, "_read", counting)
    got = sorted(tuple(r) for r in read_table(spark, ident, filter="id > 1").collect())
    assert got == expected and calls == [4]
