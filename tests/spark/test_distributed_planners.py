"""The other planners that read data manifests -- DML file matching, rewrite_data_files' planner and
compute_table_stats -- read them on the executors past the scan planning threshold
(procedures.spark.scan_planning), with the driver path's result."""

from __future__ import annotations

import pyarrow as pa
import pytest

import procedures.spark.scan_planning as scan_planning
from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import FastAppend
from procedures.core.data_rewrite.grouping import plan_rewrite
from procedures.core.data_rewrite.options import parse_rewrite_options
from procedures.core.kernel.transaction import commit
from procedures.io.parquet_writer import WriteSettings, write_data_files
from tests.helpers.capability_actions import compute_table_stats
from procedures.spark.dml import delete_where, match_files
from procedures.spark.read import read_table
from procedures.spark.scan_planning import SparkEntryReader
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField
from tests.helpers.references import import_reference

# tests marked both_sessions run on classic and Spark Connect sessions; the others write through Spark
pytestmark = [pytest.mark.spark]

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))
BY_DATA = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "data"),))


@pytest.fixture()
def table(tmp_path):
    """A table of 12 appends (12 data manifests) over three partitions, written without Spark."""
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=BY_DATA, format_version=2)
    t = cat.create_table(("db", "t"), md)
    for i in range(12):
        rows = [(100 * i + j, ("a", "b", "c")[(i + j) % 3]) for j in range(6)]
        arrow = pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "data": [r[1] for r in rows]})
        t = commit(t, [FastAppend(write_data_files(t.io, WriteSettings.from_metadata(t.metadata), [arrow]))])
    return t


@pytest.fixture()
def on_executors(monkeypatch):
    """Any number of data manifests is read on the executors; returns the manifest counts of the
    Spark jobs that read them."""
    monkeypatch.setattr(scan_planning, "DRIVER_MAX_SCAN_MANIFESTS", 0)
    monkeypatch.setattr(scan_planning, "DRIVER_MAX_SCAN_ENTRIES", 0)
    jobs: list[int] = []
    real = SparkEntryReader._read

    def counting(self, plan, manifests):
        jobs.append(len(manifests))
        return real(self, plan, manifests)

    monkeypatch.setattr(SparkEntryReader, "_read", counting)
    return jobs


def _paths(files) -> list[str]:
    return sorted(f.file_path for f in files)


@pytest.mark.both_sessions
@pytest.mark.parametrize("flt", ["data = 'a'", "id < 450", "id >= 300 AND data <> 'b'"])
def test_dml_file_matching(spark, table, on_executors, flt):
    driver = match_files(table, flt)
    executors = match_files(table, flt, spark)
    assert on_executors == [12]  # the manifests were read in a Spark job
    assert (_paths(executors.full), _paths(executors.partial)) == (_paths(driver.full), _paths(driver.partial))
    assert executors.full or executors.partial
    assert executors.deletes == driver.deletes


def test_dml_delete_with_executor_planning(spark, table, on_executors):
    t = delete_where(spark, table, "id < 450 AND data = 'b'")
    rows = sorted(tuple(r) for r in read_table(spark, t).collect())
    assert len(rows) == 72 - sum(1 for i in range(12) for j in range(6)
                                 if 100 * i + j < 450 and ("a", "b", "c")[(i + j) % 3] == "b")
    assert not [r for r in rows if r[0] < 450 and r[1] == "b"]


@pytest.mark.both_sessions
def test_rewrite_planner(spark, table, on_executors):
    md = table.metadata
    opts = parse_rewrite_options({"rewrite-all": "true"}, table_properties=md.properties)
    driver = plan_rewrite(md, table.io, opts, filter="id >= 200")
    reader = SparkEntryReader(spark, table.io, table.name)
    executors = plan_rewrite(md, table.io, opts, filter="id >= 200", read_entries=reader)
    assert reader.distributed
    as_paths = lambda plan: [[t.data_file.file_path for t in g.tasks] for g in plan.groups]  # noqa: E731
    assert as_paths(executors) == as_paths(driver) and driver.groups


@pytest.mark.both_sessions
def test_compute_table_stats(spark, table, on_executors):
    import_reference("datasketches")
    stats = compute_table_stats(table, columns=["id", "data"], spark=spark)
    assert stats is not None and on_executors == [12]  # planned on the executors, then sketched
    ndv = {b.fields[0]: int(b.properties["ndv"]) for b in stats.blob_metadata}
    assert ndv == {1: 72, 2: 3}
