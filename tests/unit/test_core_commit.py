"""The transactional core: builder, requirements, retry loop, operations and failure semantics."""

from __future__ import annotations

import os

import pytest

from procedures.catalog.base import Table
from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel import updates as U
from procedures.core.kernel.builder import MetadataBuilder, new_table_metadata
from procedures.core.kernel.manage import CherryPick, FastForward, ManageRef, RollbackTo, RollbackToTime, SetCurrentSnapshot
from procedures.core.kernel.operations import (
    DeleteFiles, FastAppend, MergeAppend, OverwriteFiles, ReplacePartitions, RewriteFiles, RowDelta,
)
from procedures.core.kernel.transaction import MetadataChange, RetryPolicy, commit
from procedures.errors import (
    CommitFailedError, CommitStateUnknownError, NoSuchSnapshotError, ValidationError,
)
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat, ManifestEntryStatus
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.snapshots import SnapshotRefType
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField

from tests.helpers.faults import FaultyCatalog

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))
SPEC = PartitionSpec(0, (PartitionField(1, 1000, parse_transform("bucket[4]"), "id_bucket"),))


@pytest.fixture()
def catalog(tmp_path):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    return cat


def make_table(catalog, name="t", fv=2) -> Table:
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{catalog.warehouse}/db/{name}", spec=SPEC, format_version=fv)
    return catalog.create_table(("db", name), md)


def data_file(table: Table, i: int, records: int = 10) -> DataFile:
    return DataFile(f"{table.location}/data/f{i}.parquet", FileFormat.PARQUET, (i % 4,), records, 100 + i, spec_id=0)


def pos_delete(table: Table, target: DataFile, i: int) -> DataFile:
    return DataFile(
        f"{table.location}/data/d{i}.parquet", FileFormat.PARQUET, target.partition, 1, 50,
        content=FileContent.POSITION_DELETES, referenced_data_file=target.file_path, spec_id=0,
    )


def live_paths(table: Table) -> set[str]:
    snap = table.metadata.current_snapshot()
    specs = {s.spec_id: s for s in table.metadata.partition_specs}
    out = set()
    for m in read_manifest_list(table.io, snap.manifest_list):
        for e in read_manifest(table.io, m, specs=specs):
            if e.status != ManifestEntryStatus.DELETED:
                out.add(e.data_file.file_path)
    return out


def metadata_files(table: Table) -> set[str]:
    d = os.path.join(table.location, "metadata")
    return {f for f in os.listdir(d) if not f.startswith(".")}


@pytest.mark.parametrize("fv", [1, 2, 3])
def test_append_sequence_numbers_summaries_and_row_ids(catalog, fv):
    t = make_table(catalog, fv=fv)
    t = commit(t, [FastAppend([data_file(t, 1), data_file(t, 2)])], policy=FAST)
    t = commit(t, [FastAppend([data_file(t, 3, records=5)])], policy=FAST)
    md = t.metadata
    s1, s2 = md.snapshots
    assert s2.parent_snapshot_id == s1.snapshot_id
    assert (s1.sequence_number, s2.sequence_number) == ((0, 0) if fv == 1 else (1, 2))
    assert md.last_sequence_number == (0 if fv == 1 else 2)
    assert s2.summary["operation"] == "append"
    assert s2.summary["added-records"] == "5" and s2.summary["total-records"] == "25"
    assert s2.summary["total-data-files"] == "3" and s2.summary["added-files-size"] == "103"
    if fv == 3:
        assert (s1.first_row_id, s1.added_rows, s2.first_row_id, s2.added_rows) == (0, 20, 20, 5)
        assert md.next_row_id == 25
    assert [e.snapshot_id for e in md.snapshot_log] == [s1.snapshot_id, s2.snapshot_id]
    assert live_paths(t) == {data_file(t, i).file_path for i in (1, 2, 3)}


def test_delete_and_rewrite_keep_the_right_files(catalog):
    t = make_table(catalog)
    t = commit(t, [FastAppend([data_file(t, i) for i in range(4)])], policy=FAST)
    t = commit(t, [DeleteFiles([data_file(t, 0).file_path])], policy=FAST)
    assert t.metadata.current_snapshot().summary["operation"] == "delete"
    start = t.metadata.current_snapshot_id
    t = commit(t, [RewriteFiles(remove_files=[data_file(t, 1), data_file(t, 2)], add_files=[data_file(t, 9, 20)],
                                starting_snapshot_id=start)], policy=FAST)
    s = t.metadata.current_snapshot()
    assert s.summary["operation"] == "replace"
    assert s.summary["total-records"] == "30" and s.summary["total-data-files"] == "2"
    assert live_paths(t) == {data_file(t, 3).file_path, data_file(t, 9).file_path}


def test_delete_of_missing_file_is_refused_and_leaves_no_files(catalog):
    t = make_table(catalog)
    t = commit(t, [FastAppend([data_file(t, 1)])], policy=FAST)
    before = metadata_files(t)
    with pytest.raises(ValidationError, match="no longer in the table"):
        commit(t, [DeleteFiles([f"{t.location}/data/nope.parquet"])], policy=FAST)
    assert metadata_files(t) == before
    assert catalog.load_table(("db", "t")).metadata == t.metadata


def test_lost_races_are_retried_without_losing_either_commit(catalog):
    t = make_table(catalog)
    t = commit(t, [FastAppend([data_file(t, 1)])], policy=FAST)

    def other_writer():
        other = catalog.load_table(("db", "t"))
        commit(other, [FastAppend([data_file(other, 2)])], policy=FAST)

    faulty = FaultyCatalog(catalog, race=other_writer, race_times=2)
    ours = faulty.load_table(("db", "t"))
    done = commit(ours, [FastAppend([data_file(ours, 3)])], policy=FAST)
    assert faulty.attempts == 3
    assert live_paths(done) == {data_file(t, i).file_path for i in (1, 2, 3)}
    assert len(done.metadata.snapshots) == 4
    # the two discarded attempts' manifest lists are gone; only files of live snapshots remain
    lists = {os.path.basename(s.manifest_list) for s in done.metadata.snapshots}
    assert {f for f in metadata_files(done) if f.startswith("snap-")} == lists


def referenced_metadata_files(table: Table) -> set[str]:
    """Manifest lists and manifests of every snapshot, by file name."""
    out = set()
    for snap in table.metadata.snapshots:
        out.add(os.path.basename(snap.manifest_list))
        out.update(os.path.basename(m.manifest_path) for m in read_manifest_list(table.io, snap.manifest_list))
    return out


def test_a_manifest_reused_by_one_retry_and_replaced_by_the_next_is_deleted(catalog):
    """A retry that reuses an earlier attempt's merged manifest marks it as used for that attempt
    only: when a later attempt merges differently, the old merged manifest is deleted like any
    other discarded file (the reuse marks are cleared between attempts)."""
    t = make_table(catalog)
    t = commit(t, [MetadataChange((U.SetProperties((("commit.manifest.min-count-to-merge", "3"),)),))], policy=FAST)
    for i in (1, 2):
        t = commit(t, [FastAppend([data_file(t, i)])], policy=FAST)

    def other_writer():
        other = catalog.load_table(("db", "t"))
        commit(other, [FastAppend([data_file(other, 3)])], policy=FAST)

    # attempt 1: refused (merged manifest M1 written); attempt 2: same base, M1 reused, but another
    # writer commits first; attempt 3: the new base has one manifest more, merged into M2 instead
    faulty = FaultyCatalog(catalog, fail_times=1, race=other_writer, race_times=2)
    ours = faulty.load_table(("db", "t"))
    op = MergeAppend([data_file(ours, 4)])
    done = commit(ours, [op], policy=FAST)
    assert faulty.attempts == 3
    assert live_paths(done) == {data_file(t, i).file_path for i in (1, 2, 3, 4)}
    assert len(read_manifest_list(done.io, done.metadata.current_snapshot().manifest_list)) == 1
    on_disk = {f for f in metadata_files(done) if f.endswith(".avro")}
    assert on_disk == {f for f in referenced_metadata_files(done) if f.endswith(".avro")}


def test_retries_exhausted_cleans_up_and_says_how_many_attempts(catalog):
    t = make_table(catalog)
    before = metadata_files(t)
    faulty = FaultyCatalog(catalog, fail_times=10)
    with pytest.raises(CommitFailedError) as err:
        commit(faulty.load_table(("db", "t")), [FastAppend([data_file(t, 1)])], policy=FAST)
    assert err.value.attempts == 5
    assert metadata_files(t) == before  # manifests and lists of all five attempts deleted


def test_unknown_outcome_deletes_nothing(catalog):
    t = make_table(catalog)
    faulty = FaultyCatalog(catalog, succeed_then_unknown=True)
    with pytest.raises(CommitStateUnknownError):
        commit(faulty.load_table(("db", "t")), [FastAppend([data_file(t, 1)])], policy=FAST)
    # the commit did land, and every file it needs is still there
    landed = catalog.load_table(("db", "t"))
    assert live_paths(landed) == {data_file(t, 1).file_path}


def test_rewrite_fails_cleanly_when_a_concurrent_delete_removed_its_input(catalog):
    t = make_table(catalog)
    t = commit(t, [FastAppend([data_file(t, 1), data_file(t, 2)])], policy=FAST)
    start = t.metadata.current_snapshot_id
    rewrite = RewriteFiles(remove_files=[data_file(t, 1)], add_files=[data_file(t, 5)], starting_snapshot_id=start)
    commit(catalog.load_table(("db", "t")), [DeleteFiles([data_file(t, 1).file_path])], policy=FAST)
    before = metadata_files(t)
    with pytest.raises(ValidationError, match="no longer in the table"):
        commit(t.refresh(), [rewrite], policy=FAST)
    assert metadata_files(t) == before


def test_rewrite_fails_when_new_deletes_target_its_input(catalog):
    t = make_table(catalog)
    t = commit(t, [FastAppend([data_file(t, 1)])], policy=FAST)
    start = t.metadata.current_snapshot_id
    t = commit(t, [RowDelta(add_deletes=[pos_delete(t, data_file(t, 1), 1)])], policy=FAST)
    assert t.metadata.current_snapshot().summary["operation"] == "delete"
    with pytest.raises(ValidationError, match="found new delete file"):
        commit(t, [RewriteFiles(remove_files=[data_file(t, 1)], add_files=[data_file(t, 5)], starting_snapshot_id=start)],
               policy=FAST)


def test_row_delta_checks_referenced_files_and_format(catalog):
    t = make_table(catalog)
    t = commit(t, [FastAppend([data_file(t, 1)])], policy=FAST)
    with pytest.raises(ValidationError, match="referenced data file"):
        commit(t, [RowDelta(add_deletes=[pos_delete(t, data_file(t, 7), 1)])], policy=FAST)
    v3 = make_table(catalog, "v3", fv=3)
    v3 = commit(v3, [FastAppend([data_file(v3, 1)])], policy=FAST)
    with pytest.raises(ValidationError, match="v3 uses deletion vectors"):
        commit(v3, [RowDelta(add_deletes=[pos_delete(v3, data_file(v3, 1), 1)])], policy=FAST)


def test_replace_partitions_replaces_only_touched_partitions(catalog):
    t = make_table(catalog)
    t = commit(t, [FastAppend([data_file(t, i) for i in range(4)])], policy=FAST)  # partitions 0..3
    t = commit(t, [ReplacePartitions([data_file(t, 5)])], policy=FAST)  # partition 1
    assert live_paths(t) == {data_file(t, i).file_path for i in (0, 2, 3, 5)}
    assert t.metadata.current_snapshot().summary["replace-partitions"] == "true"


def test_merge_append_merges_once_min_count_reached(catalog):
    t = make_table(catalog)
    t = commit(t, [MetadataChange((U.SetProperties((("commit.manifest.min-count-to-merge", "3"),)),))], policy=FAST)
    for i in range(4):
        t = commit(t, [MergeAppend([data_file(t, i)])], policy=FAST)
        # the append's own new manifest, once merged into another, is deleted (as Java does)
        on_disk = {f for f in metadata_files(t) if f.endswith(".avro")}
        assert on_disk == {f for f in referenced_metadata_files(t) if f.endswith(".avro")}, i
    manifests = read_manifest_list(t.io, t.metadata.current_snapshot().manifest_list)
    assert len(manifests) < 4
    assert live_paths(t) == {data_file(t, i).file_path for i in range(4)}


def test_a_manifest_merged_away_by_one_attempt_and_kept_by_the_next_is_not_deleted(catalog):
    """What one attempt merged away the next may need as it is: here another writer turns merging
    off between the attempts, so the last attempt commits the append's own manifest unmerged."""
    t = make_table(catalog)
    t = commit(t, [MetadataChange((U.SetProperties((("commit.manifest.min-count-to-merge", "2"),)),))], policy=FAST)
    t = commit(t, [FastAppend([data_file(t, 1)])], policy=FAST)

    def other_writer():
        other = catalog.load_table(("db", "t"))
        commit(other, [MetadataChange((U.SetProperties((("commit.manifest-merge.enabled", "false"),)),),
                                      replayable=True)], policy=FAST)

    faulty = FaultyCatalog(catalog, race=other_writer, race_times=1)
    ours = faulty.load_table(("db", "t"))
    done = commit(ours, [MergeAppend([data_file(ours, 2)])], policy=FAST)
    assert faulty.attempts == 2
    manifests = read_manifest_list(done.io, done.metadata.current_snapshot().manifest_list)
    assert len(manifests) == 2  # not merged the second time
    assert all(os.path.exists(m.manifest_path) for m in manifests)
    assert live_paths(done) == {data_file(t, i).file_path for i in (1, 2)}
    on_disk = {f for f in metadata_files(done) if f.endswith(".avro")}
    assert on_disk == {f for f in referenced_metadata_files(done) if f.endswith(".avro")}


def test_overwrite_detects_conflicting_appends(catalog):
    t = make_table(catalog)
    t = commit(t, [FastAppend([data_file(t, 1)])], policy=FAST)
    start = t.metadata.current_snapshot_id
    commit(catalog.load_table(("db", "t")), [FastAppend([data_file(t, 5)])], policy=FAST)  # partition 1 too
    op = OverwriteFiles(add_files=[data_file(t, 9)], remove_paths=[data_file(t, 1).file_path],
                        starting_snapshot_id=start, conflict_filter=lambda f: f.partition == (1,))
    with pytest.raises(ValidationError, match="conflicting files"):
        commit(t.refresh(), [op], policy=FAST)


def test_schema_change_requirement_is_not_replayed_on_a_concurrent_schema_change(catalog):
    t = make_table(catalog)
    s2 = Schema(SCHEMA.fields + (NestedField(3, "x", LONG),))
    change = MetadataChange((U.AddSchema(s2, 3), U.SetCurrentSchema(-1)))
    other = Schema(SCHEMA.fields + (NestedField(3, "y", STRING),))

    def concurrent():
        commit(catalog.load_table(("db", "t")), [MetadataChange((U.AddSchema(other, 3), U.SetCurrentSchema(-1)))], policy=FAST)

    faulty = FaultyCatalog(catalog, race=concurrent)
    with pytest.raises(CommitFailedError, match="last assigned field id changed|current schema changed") as err:
        commit(faulty.load_table(("db", "t")), [change], policy=FAST)
    assert err.value.retryable is False
    # the replayed requirement names the table too: "...: Cannot commit to local.db.t: <problem> since ..."
    assert str(err.value).count("Cannot commit to local.db.t") == 2
    assert catalog.load_table(("db", "t")).metadata.schema().find_field("y")


def test_builder_refuses_invalid_changes(catalog):
    md = make_table(catalog).metadata
    b = MetadataBuilder(md)
    with pytest.raises(ValidationError, match="downgrade"):
        b.apply(U.UpgradeFormatVersion(1))
    with pytest.raises(NoSuchSnapshotError):
        b.apply(U.SetSnapshotRef("main", __import__("procedures.spec.snapshots", fromlist=["SnapshotRef"]).SnapshotRef(42)))
    with pytest.raises(ValidationError, match="reserved"):
        b.apply(U.SetProperties((("format-version", "3"),)))
    with pytest.raises(ValidationError, match="unknown schema id 7"):
        b.apply(U.SetCurrentSchema(7))


def test_metadata_log_trim_and_delete_after_commit(catalog):
    t = make_table(catalog)
    t = commit(t, [MetadataChange((U.SetProperties((
        ("write.metadata.previous-versions-max", "2"), ("write.metadata.delete-after-commit.enabled", "true"),)),))],
        policy=FAST)
    for i in range(4):
        t = commit(t, [FastAppend([data_file(t, i)])], policy=FAST)
    assert len(t.metadata.metadata_log) == 2
    jsons = sorted(f for f in metadata_files(t) if f.endswith(".metadata.json"))
    assert jsons == ["v4.metadata.json", "v5.metadata.json", "v6.metadata.json"]


def test_rollback_set_current_cherry_pick_and_fast_forward(catalog):
    t = make_table(catalog)
    t = commit(t, [FastAppend([data_file(t, 1)])], policy=FAST)
    first = t.metadata.current_snapshot_id
    t = commit(t, [FastAppend([data_file(t, 2)])], policy=FAST)
    second = t.metadata.current_snapshot_id
    with pytest.raises(NoSuchSnapshotError, match="unknown snapshot id: 5"):
        commit(t, [RollbackTo(5)], policy=FAST)
    t = commit(t, [RollbackTo(first)], policy=FAST)
    assert t.metadata.current_snapshot_id == first
    with pytest.raises(ValidationError, match="not an ancestor"):
        commit(t, [RollbackTo(second)], policy=FAST)
    t = commit(t, [SetCurrentSnapshot(second)], policy=FAST)
    assert t.metadata.current_snapshot_id == second
    with pytest.raises(ValidationError, match="no valid snapshot older than"):
        commit(t, [RollbackToTime(t.metadata.snapshot_by_id(first).timestamp_ms)], policy=FAST)

    # a staged (WAP) append, then cherry-picked onto a main that moved on
    staged = FastAppend([data_file(t, 3)], stage_only=True, snapshot_properties={"wap.id": "w1"})
    t = commit(t, [staged], policy=FAST)
    assert t.metadata.current_snapshot_id == second
    t = commit(t, [RollbackTo(first)], policy=FAST)
    pick = CherryPick(staged.snapshot_id)
    t = commit(t, [pick], policy=FAST)
    head = t.metadata.current_snapshot()
    assert head.summary["source-snapshot-id"] == str(staged.snapshot_id)
    assert head.summary["published-wap-id"] == "w1"
    assert live_paths(t) == {data_file(t, 1).file_path, data_file(t, 3).file_path}
    with pytest.raises(ValidationError, match="published already|already picked"):
        commit(t, [CherryPick(staged.snapshot_id)], policy=FAST)

    t = commit(t, [ManageRef("create", "dev", SnapshotRefType.BRANCH, snapshot_id=first)], policy=FAST)
    ff = FastForward("dev", "main")
    t = commit(t, [ff], policy=FAST)
    assert (ff.previous_snapshot_id, ff.updated_snapshot_id) == (first, head.snapshot_id)
    assert t.metadata.refs["dev"].snapshot_id == head.snapshot_id
    with pytest.raises(ValidationError, match="not an ancestor"):
        commit(t, [ManageRef("replace", "dev", snapshot_id=second), FastForward("dev", "main")], policy=FAST)


def test_delete_by_row_filter_removes_whole_files_and_refuses_partial_ones(catalog):
    from procedures.spec.conversions import to_bytes

    t = make_table(catalog)

    def with_ids(i: int, lo: int, hi: int) -> DataFile:
        f = data_file(t, i)
        return DataFile(f.file_path, f.file_format, (lo % 4,), 10, 100, lower_bounds={1: to_bytes(lo, LONG)},
                        upper_bounds={1: to_bytes(hi, LONG)}, value_counts={1: 10}, null_value_counts={1: 0}, spec_id=0)

    t = commit(t, [FastAppend([with_ids(1, 0, 9), with_ids(2, 10, 19), with_ids(3, 20, 29)])], policy=FAST)
    t = commit(t, [DeleteFiles(row_filter="id >= 10 AND id < 20")], policy=FAST)
    assert live_paths(t) == {data_file(t, 1).file_path, data_file(t, 3).file_path}
    assert t.metadata.current_snapshot().summary["deleted-data-files"] == "1"
    with pytest.raises(ValidationError, match="some, but not all, rows match filter"):
        commit(t, [DeleteFiles(row_filter="id < 5")], policy=FAST)
    # an overwrite by filter must only add files whose rows match it
    with pytest.raises(ValidationError, match="do not match filter"):
        commit(t, [OverwriteFiles(add_files=[with_ids(4, 100, 200)], row_filter="id >= 20 AND id < 30")], policy=FAST)
    t = commit(t, [OverwriteFiles(add_files=[with_ids(5, 21, 22)], row_filter="id >= 20 AND id < 30")], policy=FAST)
    assert live_paths(t) == {data_file(t, 1).file_path, data_file(t, 5).file_path}
    assert t.metadata.current_snapshot().summary["operation"] == "overwrite"


def test_removing_one_dv_keeps_its_neighbours_in_the_shared_puffin_file(catalog):
    t = make_table(catalog, "dv", fv=3)
    a, b = data_file(t, 1), data_file(t, 2)
    t = commit(t, [FastAppend([a, b])], policy=FAST)

    def dv(target: DataFile, offset: int) -> DataFile:
        return DataFile(f"{t.location}/data/dvs.puffin", FileFormat.PUFFIN, target.partition, 1, 200,
                        content=FileContent.POSITION_DELETES, referenced_data_file=target.file_path,
                        content_offset=offset, content_size_in_bytes=44, spec_id=0)

    t = commit(t, [RowDelta(add_deletes=[dv(a, 4), dv(b, 48)])], policy=FAST)
    t = commit(t, [RowDelta(remove_deletes=[dv(a, 4)])], policy=FAST)
    snap = t.metadata.current_snapshot()
    specs = {s.spec_id: s for s in t.metadata.partition_specs}
    live = [
        (e.data_file.referenced_data_file, e.data_file.content_offset)
        for m in read_manifest_list(t.io, snap.manifest_list)
        for e in read_manifest(t.io, m, specs=specs)
        if e.status != ManifestEntryStatus.DELETED and e.data_file.content != FileContent.DATA
    ]
    assert live == [(b.file_path, 48)]
    assert snap.summary["removed-dvs"] == "1"


def test_expiration_treats_tags_as_referencing_only_their_head(catalog):
    from procedures.core.kernel.manage import plan_expiration

    t = make_table(catalog)
    for i in range(3):
        t = commit(t, [FastAppend([data_file(t, i)])], policy=FAST)
    s1, s2, s3 = (s.snapshot_id for s in t.metadata.snapshots)
    t = commit(t, [ManageRef("create", "v3", SnapshotRefType.TAG, snapshot_id=s3), RollbackTo(s1)], policy=FAST)
    now = t.metadata.snapshots[-1].timestamp_ms + 10
    # s2 is only an ancestor of the tag: unreferenced, so kept while young and expired once old (Java)
    young = plan_expiration(t.metadata, now_ms=now, older_than_ms=now - 60_000)
    assert young.expired_snapshot_ids == frozenset()
    old = plan_expiration(t.metadata, now_ms=now, older_than_ms=now)
    assert old.expired_snapshot_ids == {s2}
    with pytest.raises(ValidationError, match=r"Still referenced by refs: \[v3\]"):
        plan_expiration(t.metadata, now_ms=now, snapshot_ids=[s3])


def test_bad_numeric_table_properties_are_named():
    with pytest.raises(ValidationError, match="commit.retry.num-retries must be an integer, got 'many'"):
        RetryPolicy.from_properties({"commit.retry.num-retries": "many"})
    with pytest.raises(ValidationError, match="commit.retry.min-wait-ms must be at least 0, got -1"):
        RetryPolicy.from_properties({"commit.retry.min-wait-ms": "-1"})
    assert RetryPolicy.from_properties({"commit.retry.num-retries": "7"}).num_retries == 7
