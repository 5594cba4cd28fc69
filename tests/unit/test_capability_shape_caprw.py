"""The shape of the data_rewrite, table_stats, table_relocation, changelog and file_import capabilities
(issue #32): each is a ``Capability`` whose ``plan(metadata, params)`` validates the typed
parameters once and whose ``execute`` runs on engine steps the Spark engine implements; the
rewriter is chosen in one place."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from procedures.core.changelog import changes
from procedures.core.changelog.changelog_engine import ChangelogEngine
from procedures.core.data_rewrite import compaction, position_deletes
from procedures.core.data_rewrite.data_rewrite_engine import DataRewriteEngine
from procedures.core.data_rewrite.rewriter import Rewriter
from procedures.core.engine import Engine
from procedures.core.file_import import import_files
from procedures.core.file_import.file_import_engine import FileImportEngine
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.capability import Capability
from procedures.core.table_relocation import relocation
from procedures.core.table_relocation.table_relocation_engine import TableRelocationEngine
from procedures.core.table_stats import column_sketches, partition_counts
from procedures.core.table_stats.table_stats_engine import TableStatsEngine
from procedures.errors import ValidationError
from procedures.spark.engine.spark_engine import SparkEngine
from procedures.spec.schema import Schema
from procedures.spec.snapshots import Snapshot
from procedures.spec.types import LONG, NestedField

CAPABILITIES = {
    "rewrite_data_files": (compaction.REWRITE_DATA_FILES, compaction.RewriteDataFilesParams),
    "rewrite_position_delete_files": (position_deletes.REWRITE_POSITION_DELETE_FILES,
                                      position_deletes.RewritePositionDeletesParams),
    "compute_table_stats": (column_sketches.COMPUTE_TABLE_STATS, column_sketches.TableStatsParams),
    "compute_partition_stats": (partition_counts.COMPUTE_PARTITION_STATS, partition_counts.PartitionStatsParams),
    "rewrite_table_path": (relocation.REWRITE_TABLE_PATH, relocation.RewriteTablePathParams),
    "create_changelog_view": (changes.CREATE_CHANGELOG_VIEW, changes.ChangelogParams),
    "add_files": (import_files.ADD_FILES, import_files.AddFilesParams),
}
PROTOCOLS = (DataRewriteEngine, TableStatsEngine, TableRelocationEngine, ChangelogEngine, FileImportEngine)


def _members(protocol: type) -> set[str]:
    return {name for klass in protocol.__mro__ if klass.__module__.startswith("procedures.")
            for name, value in vars(klass).items() if callable(value) and not name.startswith("_")}


@pytest.mark.parametrize("name", sorted(CAPABILITIES))
def test_each_capability_has_the_shape(name):
    capability, params = CAPABILITIES[name]
    assert isinstance(capability, Capability) and capability.name == name
    assert dataclasses.is_dataclass(params) and params.__dataclass_params__.frozen
    assert list(inspect.signature(capability.plan).parameters) == ["metadata", "params"]
    assert list(inspect.signature(capability.execute).parameters) == ["table", "plan", "engine"]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.__name__)
def test_the_spark_engine_implements_every_step(protocol):
    assert protocol in Engine.__mro__
    members = _members(protocol)
    missing = sorted(m for m in members if not callable(getattr(SparkEngine, m, None)))
    assert missing == []


def _metadata(with_snapshot: bool):
    md, _ = new_table_metadata(schema=Schema((NestedField(1, "id", LONG, True),)), location="/tmp/t")
    if not with_snapshot:
        return md
    snap = Snapshot(snapshot_id=1, parent_snapshot_id=None, sequence_number=1, timestamp_ms=1,
                    manifest_list="/tmp/t/metadata/snap-1.avro", summary={"operation": "append"}, schema_id=0)
    return dataclasses.replace(md, snapshots=(snap,), current_snapshot_id=1, last_sequence_number=1)


def test_rewrite_options_are_validated_in_plan_once_there_is_something_to_rewrite():
    bad = compaction.RewriteDataFilesParams("c.db.t", options={"bogus": "1"})
    # a table without a snapshot has nothing to rewrite: its options are not looked at (as before)
    assert compaction.plan(_metadata(False), bad).options is None
    with pytest.raises(ValidationError, match=r"Cannot use options \[bogus\]"):
        compaction.plan(_metadata(True), bad)
    with pytest.raises(ValidationError, match=r"Cannot use options \[max-files-to-rewrite\]"):
        position_deletes.plan(_metadata(False), position_deletes.RewritePositionDeletesParams(
            options={"max-files-to-rewrite": "1"}))
    with pytest.raises(ValidationError, match=r"Source prefix cannot be the same as target prefix"):
        relocation.plan(_metadata(False), relocation.RewriteTablePathParams("/a", "/a"))
    with pytest.raises(ValidationError, match="Parallelism should be larger than 0"):
        import_files.plan(_metadata(False), import_files.AddFilesParams("`parquet`.`/x`", parallelism=0))


def test_the_rewriter_is_chosen_once_and_carries_everything_the_engine_needs():
    md = _metadata(True)
    plan = compaction.plan(md, compaction.RewriteDataFilesParams("c.db.t", sort_order="zorder(id)"))
    assert plan.rewriter == Rewriter("Z-ORDER", zorder_columns=("id",))
    # the options no longer name a rewriter of their own
    assert "rewriter" not in {f.name for f in dataclasses.fields(plan.options)}
