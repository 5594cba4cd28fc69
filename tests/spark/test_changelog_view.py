"""create_changelog_view on tables written without Spark, on classic and Spark Connect sessions
(the comparisons with Iceberg Java's view are in test_changelog_view_java.py)."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import DeleteFiles, FastAppend
from procedures.core.kernel.transaction import commit
from procedures.io.parquet_writer import WriteSettings, write_data_files
from procedures.core.changelog.changes import CREATE_CHANGELOG_VIEW, ChangelogParams
from procedures.spark.engine.action import Action
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, STRING, NestedField

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]

SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))


def _append(t, rows):
    arrow = pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                      "data": pa.array([r[1] for r in rows], pa.string())})
    files = write_data_files(t.io, WriteSettings.from_metadata(t.metadata), [arrow])
    return commit(t, [FastAppend(files)]), [f.file_path for f in files]


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    """Append (1, a), (2, b); append (3, c); delete the first file."""
    cat = HadoopCatalog("local", str(tmp_path_factory.mktemp("changelog") / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", format_version=2)
    t = cat.create_table(("db", "t"), md)
    t, first = _append(t, [(1, "a"), (2, "b")])
    t, _ = _append(t, [(3, "c")])
    return commit(t, [DeleteFiles(first)])


def create_changelog_view(spark, table, view, params):
    return Action(CREATE_CHANGELOG_VIEW, spark).run(table, dataclasses.replace(params, view_name=view)).view_name


def _view(spark, name):
    return sorted(tuple(r) for r in spark.sql(
        f"SELECT id, data, _change_type, _change_ordinal FROM {name}").collect())


def test_changelog_view_rows(spark, table):
    snaps = [s.snapshot_id for s in table.metadata.snapshots]
    assert create_changelog_view(spark, table, "cl_rows", ChangelogParams("t")) == "cl_rows"
    assert _view(spark, "cl_rows") == [(1, "a", "DELETE", 2), (1, "a", "INSERT", 0), (2, "b", "DELETE", 2),
                                       (2, "b", "INSERT", 0), (3, "c", "INSERT", 1)]
    ids = {r[0]: r[1] for r in spark.sql("SELECT _change_ordinal, _commit_snapshot_id FROM cl_rows").collect()}
    assert ids == dict(enumerate(snaps))
    # net changes: the inserts and deletes of ids 1 and 2 cancel out
    create_changelog_view(spark, table, "cl_net", ChangelogParams("t", net_changes=True))
    assert _view(spark, "cl_net") == [(3, "c", "INSERT", 1)]


def test_changelog_view_of_no_changes(spark, table):
    # a time range after the last commit holds no snapshot
    later = table.metadata.current_snapshot().timestamp_ms + 1000
    request = ChangelogParams("t", options={"start-timestamp": str(later)})
    create_changelog_view(spark, table, "cl_none", request)
    view = spark.table("cl_none")
    assert view.columns == ["id", "data", "_change_type", "_change_ordinal", "_commit_snapshot_id"]
    assert view.collect() == []
