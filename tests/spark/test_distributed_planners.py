"""The other planners that read data manifests -- DML file matching, rewrite_data_files' planner and
compute_table_stats -- read them on the executors past the scan planning threshold
(procedures.spark.scan_planning), with the driver path's result."""

from __future__ import annotations

import pytest

import procedures.spark.scan_planning as scan_planning
from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.builder import new_table_metadata
from procedures.core.rewrite.planner import parse_rewrite_options, plan_rewrite
from procedures.spark.actions.compute_table_stats import compute_table_stats
from procedures.spark.dml import append, delete_where, match_files
from procedures.spark.read import read_table
from procedures.spark.scan_planning import SparkEntryReader
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField
from tests.helpers.references import import_reference

pytestmark = [pytest.mark.spark]

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))
BY_DATA = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "data"),))


@pytest.fixture()
def table(spark, tmp_path):
    """A table of 12 appends (12 data manifests) over three partitions."""
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=BY_DATA, format_version=2)
    t = cat.create_table(("db", "t"), md)
    for i in range(12):
        rows = [(100 * i + j, ("a", "b", "c")[(i + j) % 3]) for j in range(6)]
        t = append(spark, t, spark.createDataFrame(rows, "id long, data string"))
    return t


def _jobs(spark) -> set[int]:
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup())


@pytest.fixture()
def on_executors(monkeypatch):
    """Any number of data manifests is read on the executors."""
    monkeypatch.setattr(scan_planning, "DRIVER_MAX_SCAN_MANIFESTS", 0)


def _paths(files) -> list[str]:
    return sorted(f.file_path for f in files)


@pytest.mark.parametrize("flt", ["data = 'a'", "id < 450", "id >= 300 AND data <> 'b'"])
def test_dml_file_matching(spark, table, on_executors, flt):
    driver = match_files(table, flt)
    before = _jobs(spark)
    executors = match_files(table, flt, spark)
    assert _jobs(spark) - before  # the manifests were read in a Spark job
    assert (_paths(executors.full), _paths(executors.partial)) == (_paths(driver.full), _paths(driver.partial))
    assert executors.full or executors.partial
    assert executors.deletes == driver.deletes


def test_dml_delete_with_executor_planning(spark, table, on_executors):
    t = delete_where(spark, table, "id < 450 AND data = 'b'")
    rows = sorted(tuple(r) for r in read_table(spark, t).collect())
    assert len(rows) == 72 - sum(1 for i in range(12) for j in range(6)
                                 if 100 * i + j < 450 and ("a", "b", "c")[(i + j) % 3] == "b")
    assert not [r for r in rows if r[0] < 450 and r[1] == "b"]


def test_rewrite_planner(spark, table, on_executors):
    md = table.metadata
    opts = parse_rewrite_options({"rewrite-all": "true"}, table_properties=md.properties)
    driver = plan_rewrite(md, table.io, opts, filter="id >= 200")
    reader = SparkEntryReader(spark, table.io, table.name)
    executors = plan_rewrite(md, table.io, opts, filter="id >= 200", read_entries=reader)
    assert reader.distributed
    as_paths = lambda plan: [[t.data_file.file_path for t in g.tasks] for g in plan.groups]  # noqa: E731
    assert as_paths(executors) == as_paths(driver) and driver.groups


def test_compute_table_stats(spark, table, on_executors):
    import_reference("datasketches")
    before = _jobs(spark)
    stats = compute_table_stats(table, columns=["id", "data"], spark=spark)
    assert stats is not None and len(_jobs(spark) - before) >= 2  # planning, then sketching
    ndv = {b.fields[0]: int(b.properties["ndv"]) for b in stats.blob_metadata}
    assert ndv == {1: 72, 2: 3}
