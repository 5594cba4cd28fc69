"""The shape of the data_rewrite, table_stats, table_relocation, changelog and file_import capabilities
(issue #32): each is a ``Capability`` whose ``plan(metadata, params)`` validates the typed
parameters once and whose ``execute`` runs on engine steps the Spark engine implements; the
rewriter is chosen in one place."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect

import pytest

from procedures.core.changelog import changes
from procedures.core.changelog.changelog_engine import ChangelogEngine
from procedures.core.data_rewrite import compaction, position_deletes
from procedures.core.data_rewrite.data_rewrite_engine import DataRewriteEngine
from procedures.core.data_rewrite.rewriter import Rewriter
from procedures.core.engine import Engine
from procedures.core.file_import import import_files, session_import, source_rules, table_creation
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
    "snapshot": (session_import.SNAPSHOT, session_import.SnapshotParams),
    "migrate": (session_import.MIGRATE, session_import.MigrateParams),
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


class _FakeCatalog:
    """A hive-like catalog (it has a ``client``) that knows no table."""

    name = "cat"
    client = None
    io = None


class _FakeImportEngine:
    """The ``file_import`` steps of a session holding ``db.src`` (unpartitioned, one partition), whose
    create fails: what migrate asks the engine to do is recorded."""

    def __init__(self):
        self.calls = []

    def describe_session_table(self, parts):
        return table_creation.SourceTable(
            database="db", name="src", provider="parquet", location="/w/src",
            schema_json={"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True}]},
            partition_columns=(), properties={}, bucketed=None, table_type="MANAGED")

    def session_table_partitions(self, database, name):
        self.calls.append(("partitions", name))
        return [source_rules.SourcePartition((), f"/w/{name}", "parquet")]

    def session_table_exists(self, database, name):
        return False

    def rename_session_table(self, database, name, new_name):
        self.calls.append(("rename", name, new_name))

    def check_new_table(self, catalog, ident, md, action):
        self.calls.append(("check", ident, md.location))

    def read_data_files(self, io, md, spec, partitions, parallelism, job):
        return []

    @contextlib.contextmanager
    def job(self, description):
        yield

    def create_table(self, catalog, ident, md, operations):
        raise RuntimeError("injected failure")

    def remove_created_table(self, catalog, ident, location):
        self.calls.append(("remove", ident, location))


def test_migrate_runs_on_any_engine_and_renames_the_source_back_when_the_create_fails():
    engine = _FakeImportEngine()
    capability = session_import.MIGRATE
    plan = capability.plan(None, session_import.MigrateParams(source=("db", "src")))
    with pytest.raises(RuntimeError, match="injected failure"):
        capability.execute(session_import.NewTable(_FakeCatalog()), plan, engine)
    # the overlap check runs once, before the rename (each reads every table of the metastore;
    # the catalog's create checks again at commit)
    assert engine.calls == [
        ("partitions", "src"), ("check", ("db", "src"), "/w/src"), ("rename", "src", "src_backup_"),
        ("partitions", "src_backup_"), ("remove", ("db", "src"), "/w/src"), ("rename", "src_backup_", "src"),
    ]
    with pytest.raises(ValidationError, match="Parallelism should be larger than 0"):
        capability.plan(None, session_import.MigrateParams(source=("db", "src"), parallelism=0))


def test_a_migrate_dry_run_creates_in_the_sandbox_and_renames_nothing():
    engine = _FakeImportEngine()
    sandbox = _FakeCatalog()
    created = []
    engine.create_table = lambda catalog, ident, md, ops: created.append(catalog) or _Created()
    params = session_import.MigrateParams(source=("db", "src"), dry_run=True)
    result = session_import.MIGRATE.execute(
        session_import.NewTable(_FakeCatalog(), None, sandbox), session_import.MIGRATE.plan(None, params), engine)
    assert result.row() == (0,) and created == [sandbox]
    assert not [c for c in engine.calls if c[0] == "rename"]
    assert [c for c in engine.calls if c[0] == "check"] == [("check", ("db", "src"), "/w/src")]


class _Created:
    name = "cat.db.src"

    class metadata:  # noqa: N801 -- stands for a table's metadata attribute
        @staticmethod
        def current_snapshot():
            return None
