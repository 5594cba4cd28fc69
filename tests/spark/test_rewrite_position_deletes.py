"""rewrite_position_delete_files on tables the package wrote itself, on a classic and a Spark Connect
session alike (pyspark 4 runs both; the comparisons with Iceberg Java are in
``test_rewrite_position_deletes_java.py``): every group is rewritten by one Spark job of
``write_groups``, the rows stay the same for PyIceberg and DuckDB, the remaining deletes point at
live data files, and nothing is left under the data folder that the metadata does not reach."""

from __future__ import annotations

import pytest

from procedures.core.kernel import updates as U
from procedures.core.kernel.transaction import MetadataChange, commit
from procedures.core.kernel.summary import is_dv
from procedures.frontend import runner
from procedures.io.delete_writers import read_position_deletes
from procedures.spark.dataframes import is_connect
from procedures.spark import scan_planning
from procedures.spark.dml import delete_where
from procedures.spark.engine import data_rewrite_steps
from procedures.spark.group_writes import task_attempts
from procedures.spark.write import JOURNAL_PREFIX
from tests.helpers.files import all_files, reached_paths
from tests.helpers.our_tables import merge_on_read_table, position_deletes
from tests.oracles import assert_rows_equal, duckdb_read, pyiceberg_read

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]


@pytest.mark.parametrize("fv", [2, 3])
def test_rewrite_position_delete_files_on_both_session_kinds(spark, classic_spark, java_warehouse, fv):
    name = f"rpd_kinds_v{fv}_{'connect' if is_connect(spark) else 'classic'}"
    # four partitions of three data files, each file with position deletes of three deletes (v2 files)
    t = merge_on_read_table(classic_spark, name, appends=3, rows=100, cats=4, delete=None)
    for k in (7, 11, 13):
        t = delete_where(classic_spark, t, f"id IN ({', '.join(str(i) for i in range(0, 300, k))})")
    if fv == 3:  # the v2 position delete files stay: a v3 table's rewrite turns them into DVs
        t = commit(t, [MetadataChange((U.UpgradeFormatVersion(3),))])
    before = pyiceberg_read(t.metadata_location)
    _, deletes = position_deletes(t)
    assert len(deletes) == 4 * 3 * 3 and not any(is_dv(d) for d in deletes)
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse)}
    rows = runner.run("rewrite_position_delete_files", kwargs={"table": f"db.{name}", "options": {"rewrite-all": "true"}},
                      catalog="ours", conf=conf, spark=spark).rows
    # one new file (or DV) per data file with deletes
    assert rows[0][0] == len(deletes) and rows[0][1] == 12 and rows[0][2] > 0
    t = t.refresh()
    for reader, got in (("pyiceberg", pyiceberg_read(t.metadata_location)), ("duckdb", duckdb_read(t.metadata_location))):
        assert_rows_equal(got, before, key="id", label=f"{name} after rewrite_position_delete_files / {reader}")
    live, after = position_deletes(t)
    assert len(after) == 12 and all(is_dv(d) for d in after) == (fv == 3)
    assert {p for f in after for p in read_position_deletes(t.io, f)} <= live
    data_dir = t.metadata.location.removeprefix("file:") + "/data"
    assert all_files(data_dir) <= reached_paths(t)
    assert not any(JOURNAL_PREFIX in p for p in all_files(data_dir))


def test_task_attempts_read_from_the_session_conf(spark):
    """A group failing on its task's last attempt is reported, not retried: the attempts come from the
    session's conf (``spark.master``), readable on a Connect session too (both run ``local[2]``)."""
    assert task_attempts(spark) == 1


def test_live_data_files_are_read_through_the_engines_manifest_reader(spark, classic_spark, java_warehouse,
                                                                       monkeypatch):
    """Planning reads the data manifests (the bulk of its reading) through the engine step
    ``manifest_entry_reader``, as rewrite_data_files does: past the size rule they are read in Spark
    tasks, and the result is the driver read's."""
    name = f"rpd_reader_{'connect' if is_connect(spark) else 'classic'}"
    t = merge_on_read_table(classic_spark, name, appends=3, rows=60, cats=2, delete=None)
    t = delete_where(classic_spark, t, f"id IN ({', '.join(str(i) for i in range(0, 180, 7))})")
    before = pyiceberg_read(t.metadata_location)
    _, deletes = position_deletes(t)
    readers = []

    class Recording(data_rewrite_steps.SparkEntryReader):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            readers.append(self)

    monkeypatch.setattr(data_rewrite_steps, "SparkEntryReader", Recording)
    monkeypatch.setattr(scan_planning, "DRIVER_MAX_SCAN_MANIFESTS", 0)  # every data manifest in a task
    monkeypatch.setattr(scan_planning, "DRIVER_MAX_SCAN_ENTRIES", 0)
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(java_warehouse)}
    rows = runner.run("rewrite_position_delete_files", kwargs={"table": f"db.{name}", "options": {"rewrite-all": "true"}},
                      catalog="ours", conf=conf, spark=spark).rows
    assert [r.distributed for r in readers] == [True]
    assert rows[0][0] == len(deletes) and rows[0][1] > 0
    t = t.refresh()
    assert_rows_equal(pyiceberg_read(t.metadata_location), before, key="id", label=f"{name} after rewrite")
    live, after = position_deletes(t)
    assert {p for f in after for p in read_position_deletes(t.io, f)} <= live
