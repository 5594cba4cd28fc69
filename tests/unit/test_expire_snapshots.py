"""expire_snapshots on our hadoop catalog with real files: retention, explicit ids, refs, WAP and
cherry-pick, shared and rewritten files, delete files and DVs, statistics, clean_expired_metadata,
argument errors (table unchanged) and the procedure through the registry.

Every test checks the deletions against an independent oracle (files reachable from the expired
snapshots minus files reachable from the retained ones, read naively entry by entry) and that
every file a retained snapshot needs still exists."""

from __future__ import annotations

import datetime as dt

import os
import threading

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel import updates as U
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.manage import CherryPick, ManageRef
from procedures.core.kernel.operations import DeleteFiles, FastAppend, RewriteFiles, RowDelta
from procedures.core.kernel.transaction import MetadataChange, RetryPolicy, commit
from procedures.errors import ValidationError
from procedures.core.gc import reachability as R
from procedures.frontend import runner
from procedures.core.gc.expire import ExpireSnapshotsParams
from tests.helpers.gc_runs import expire_snapshots
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat, ManifestEntryStatus
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.snapshots import SnapshotRefType
from procedures.spec.statistics import PartitionStatisticsFile, StatisticsFile
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING)))
SPEC = PartitionSpec(0, (PartitionField(1, 1000, parse_transform("identity"), "id"),))
FUTURE = 2**62  # older_than later than every snapshot: only retain_last and refs keep snapshots


@pytest.fixture()
def catalog(tmp_path):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    return cat


def make_table(catalog, name="t", fv=2, properties=None):
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{catalog.warehouse}/db/{name}", spec=SPEC,
                               format_version=fv, properties=properties or {})
    return catalog.create_table(("db", name), md)


def touch(path: str, data: bytes = b"x") -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def data_file(t, name: str, part: int = 0) -> DataFile:
    path = touch(f"{t.location}/data/id={part}/{name}.parquet")
    return DataFile(path, FileFormat.PARQUET, (part,), 10, 100, spec_id=0)


def pos_delete(t, name: str, target: DataFile) -> DataFile:
    path = touch(f"{t.location}/data/id={target.partition[0]}/{name}-deletes.parquet")
    return DataFile(path, FileFormat.PARQUET, target.partition, 1, 50, content=FileContent.POSITION_DELETES,
                    referenced_data_file=target.file_path, spec_id=0)


def eq_delete(t, name: str, part: int = 0) -> DataFile:
    path = touch(f"{t.location}/data/id={part}/{name}-eq.parquet")
    return DataFile(path, FileFormat.PARQUET, (part,), 1, 50, content=FileContent.EQUALITY_DELETES,
                    equality_ids=(1,), spec_id=0)


def dv(t, puffin: str, target: DataFile, offset: int) -> DataFile:
    path = f"{t.location}/data/{puffin}.puffin"
    if not os.path.exists(path):
        touch(path, b"PFA1" + b"\0" * 200)
    return DataFile(path, FileFormat.PUFFIN, target.partition, 1, 204, content=FileContent.POSITION_DELETES,
                    referenced_data_file=target.file_path, content_offset=offset, content_size_in_bytes=40, spec_id=0)


def c(t, *ops):
    return commit(t, list(ops), policy=FAST)


# ------------------------------------------------------------------------------------ oracle
def reachable(t_io, md, ids) -> set[str]:
    """Naive reachability: every manifest list, manifest, live content file and stats file."""
    out: set[str] = set()
    for s in md.snapshots:
        if s.snapshot_id not in ids:
            continue
        out.add(s.manifest_list)
        for m in read_manifest_list(t_io, s.manifest_list):
            out.add(m.manifest_path)
            for e in read_manifest(t_io, m):
                if e.status != ManifestEntryStatus.DELETED:
                    out.add(e.data_file.file_path)
    out.update(f.statistics_path for f in md.statistics if f.snapshot_id in ids)
    out.update(f.statistics_path for f in md.partition_statistics if f.snapshot_id in ids)
    return out


def all_files(t) -> set[str]:
    root = t.location
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


def run_expire(t, **kw):
    """Expire with ``kw``; returns (result, deleted paths, table after) and checks the oracle."""
    before_md = t.metadata
    before_files = all_files(t)
    per_snapshot = {s.snapshot_id: reachable(t.io, before_md, {s.snapshot_id}) for s in before_md.snapshots}
    result = expire_snapshots(t, ExpireSnapshotsParams(**kw))
    after = t.catalog.load_table(t.identifier)
    deleted = before_files - all_files(after)
    kept_ids = {s.snapshot_id for s in after.metadata.snapshots}
    expired = set(per_snapshot) - kept_ids
    assert expired == set(result.expired_snapshot_ids)
    expected = set().union(*(per_snapshot[i] for i in expired)) - set().union(*(per_snapshot[i] for i in kept_ids))
    assert deleted == expected
    assert sum(result.row()) == len(deleted)
    for path in reachable(t.io, after.metadata, {s.snapshot_id for s in after.metadata.snapshots}):
        assert os.path.exists(path), f"retained snapshot needs {path}"
    assert not any(p.endswith(".metadata.json") or p.endswith("version-hint.text") for p in deleted)
    return result, deleted, after


# ------------------------------------------------------------------------------------ retention
def test_retain_last_keeps_newest_and_deletes_only_manifest_lists(catalog):
    t = make_table(catalog)
    for i in range(4):
        t = c(t, FastAppend([data_file(t, f"f{i}", i)]))
    sids = [s.snapshot_id for s in t.metadata.snapshots]
    result, deleted, after = run_expire(t, older_than_ms=FUTURE, retain_last=2)
    assert [s.snapshot_id for s in after.metadata.snapshots] == sids[2:]
    assert result.row() == (0, 0, 0, 0, 2, 0)
    assert {os.path.basename(p).split("-")[1] for p in deleted} == {str(sids[0]), str(sids[1])}


def test_default_cutoff_keeps_young_snapshots(catalog):
    t = make_table(catalog)
    for i in range(3):
        t = c(t, FastAppend([data_file(t, f"f{i}", i)]))
    result, deleted, after = run_expire(t)  # now - 5 days: nothing is old enough
    assert result.row() == (0,) * 6 and not deleted and len(after.metadata.snapshots) == 3
    assert after.metadata_location == t.metadata_location  # no commit at all


def test_table_property_defaults_are_used(catalog):
    t = make_table(catalog, properties={"history.expire.max-snapshot-age-ms": "0",
                                        "history.expire.min-snapshots-to-keep": "2"})
    for i in range(4):
        t = c(t, FastAppend([data_file(t, f"f{i}", i)]))
    result, _, after = run_expire(t, now_ms=t.metadata.last_updated_ms + 10)
    assert len(after.metadata.snapshots) == 2 and result.deleted_manifest_lists_count == 2


def test_removed_and_rewritten_files_are_deleted_shared_ones_kept(catalog):
    t = make_table(catalog)
    f0, f1, f2 = (data_file(t, f"f{i}", 0) for i in range(3))
    t = c(t, FastAppend([f0, f1]))
    t = c(t, DeleteFiles([f0.file_path]))
    f3 = data_file(t, "f3", 0)
    t = c(t, RewriteFiles(remove_files=[f1], add_files=[f3]))
    t = c(t, FastAppend([f2]))
    result, deleted, _ = run_expire(t, older_than_ms=FUTURE, retain_last=1)
    assert {f0.file_path, f1.file_path} <= deleted
    assert f2.file_path not in deleted and f3.file_path not in deleted
    assert result.deleted_data_files_count == 2 and result.deleted_manifest_lists_count == 3
    assert result.deleted_manifest_files_count >= 2


def test_delete_files_are_counted_by_type(catalog):
    t = make_table(catalog)
    f0 = data_file(t, "f0")
    t = c(t, FastAppend([f0]))
    d0, e0 = pos_delete(t, "d0", f0), eq_delete(t, "e0")
    t = c(t, RowDelta(add_deletes=[d0, e0]))
    t = c(t, DeleteFiles([f0.file_path, d0.file_path, e0.file_path]))
    t = c(t, FastAppend([data_file(t, "f1", 1)]))
    result, deleted, _ = run_expire(t, older_than_ms=FUTURE, retain_last=1)
    assert result.row()[:3] == (1, 1, 1)
    assert {f0.file_path, d0.file_path, e0.file_path} <= deleted


def test_puffin_file_is_kept_while_a_retained_entry_references_it(catalog):
    t = make_table(catalog, fv=3)
    f0, f1 = data_file(t, "f0", 0), data_file(t, "f1", 0)
    t = c(t, FastAppend([f0, f1]))
    t = c(t, RowDelta(add_deletes=[dv(t, "shared", f1, 4)]))
    main_head = t.metadata.current_snapshot_id
    # a staged snapshot whose DV sits in the same Puffin file, and one with its own Puffin file
    t = c(t, RowDelta(add_deletes=[dv(t, "shared", f0, 44)], stage_only=True))
    staged_shared = max(t.metadata.snapshots, key=lambda s: s.sequence_number).snapshot_id
    t = c(t, RowDelta(add_deletes=[dv(t, "own", f0, 4)], stage_only=True))
    staged_own = max(t.metadata.snapshots, key=lambda s: s.sequence_number).snapshot_id
    assert t.metadata.current_snapshot_id == main_head
    result, deleted, after = run_expire(t, older_than_ms=0, snapshot_ids=(staged_shared, staged_own))
    assert f"{t.location}/data/shared.puffin" not in deleted
    assert f"{t.location}/data/own.puffin" in deleted
    assert result.row() == (0, 1, 0, 2, 2, 0)
    assert {s.snapshot_id for s in after.metadata.snapshots} == set(
        s.snapshot_id for s in t.metadata.snapshots) - {staged_shared, staged_own}


# ------------------------------------------------------------------------------------ explicit ids, refs
def test_explicit_ids_expire_even_young_snapshots(catalog):
    t = make_table(catalog)
    files = []
    for i in range(3):
        files.append(data_file(t, f"f{i}", i))
        t = c(t, FastAppend([files[-1]]))
    s0, s1, s2 = (s.snapshot_id for s in t.metadata.snapshots)
    result, deleted, after = run_expire(t, snapshot_ids=(s1,))
    assert [s.snapshot_id for s in after.metadata.snapshots] == [s0, s2]
    assert result.row() == (0, 0, 0, 0, 1, 0)


def test_explicit_id_of_a_ref_head_is_refused_and_table_unchanged(catalog):
    t = make_table(catalog)
    t = c(t, FastAppend([data_file(t, "f0")]))
    t = c(t, FastAppend([data_file(t, "f1")]))
    s0 = t.metadata.snapshots[0].snapshot_id
    t = c(t, ManageRef("create", "v1", SnapshotRefType.TAG, snapshot_id=s0))
    loc, files = t.metadata_location, all_files(t)
    for sid, ref in ((t.metadata.current_snapshot_id, "main"), (s0, "v1")):
        with pytest.raises(ValidationError, match=f"Cannot expire {sid}. Still referenced by refs: .*{ref}"):
            expire_snapshots(t, ExpireSnapshotsParams(snapshot_ids=(sid,)))
    assert catalog.load_table(("db", "t")).metadata_location == loc and all_files(t) == files


def test_tags_and_branch_retention(catalog):
    t = make_table(catalog)
    f = [data_file(t, f"f{i}", i) for i in range(5)]
    t = c(t, FastAppend([f[0]]))
    tagged = t.metadata.current_snapshot_id
    t = c(t, ManageRef("create", "keep", SnapshotRefType.TAG, snapshot_id=tagged))
    t = c(t, DeleteFiles([f[0].file_path]))
    # a branch that keeps 2 of its own snapshots whatever the arguments say
    t = c(t, ManageRef("create", "b", SnapshotRefType.BRANCH, min_snapshots_to_keep=2))
    for i in (1, 2, 3):
        t = c(t, FastAppend([f[i]], branch="b"))
    b_ids = [sid for sid in reversed([s.snapshot_id for s in t.metadata.snapshots])][:3]
    t = c(t, FastAppend([f[4]]))
    # a tag that aged out (max-ref-age 1 ms) is removed together with its snapshot
    t = c(t, ManageRef("create", "old", SnapshotRefType.TAG, snapshot_id=b_ids[2], max_ref_age_ms=1))
    result, deleted, after = run_expire(t, older_than_ms=FUTURE, retain_last=1,
                                        now_ms=t.metadata.last_updated_ms + 10_000)
    md = after.metadata
    kept = {s.snapshot_id for s in md.snapshots}
    assert tagged in kept and f[0].file_path not in deleted  # tag head and its files survive
    assert set(b_ids[:2]) <= kept and b_ids[2] not in kept  # branch min-snapshots-to-keep=2
    assert "old" not in md.refs and set(md.refs) == {"main", "keep", "b"}
    assert result.removed_refs == ("old",)


def test_wap_staged_and_cherry_picked_snapshots(catalog):
    t = make_table(catalog)
    t = c(t, FastAppend([data_file(t, "f0")]))
    picked_file, lost_file = data_file(t, "picked", 1), data_file(t, "lost", 2)
    t = c(t, FastAppend([picked_file], stage_only=True, snapshot_properties={"wap.id": "w1"}))
    picked = [s for s in t.metadata.snapshots if s.summary.get("wap.id") == "w1"][0].snapshot_id
    t = c(t, FastAppend([lost_file], stage_only=True, snapshot_properties={"wap.id": "w2"}))
    t = c(t, FastAppend([data_file(t, "f1", 3)]))
    t = c(t, CherryPick(picked))
    # young staged snapshots survive the default cutoff; explicitly or by age they go
    _, deleted, after = run_expire(t, older_than_ms=FUTURE, retain_last=10)
    assert picked not in {s.snapshot_id for s in after.metadata.snapshots}
    assert picked_file.file_path not in deleted  # the cherry-picked snapshot still has it
    assert lost_file.file_path in deleted  # the never-published one took its file with it


def test_statistics_and_partition_statistics_files(catalog):
    t = make_table(catalog)
    t = c(t, FastAppend([data_file(t, "f0")]))
    s0 = t.metadata.current_snapshot_id
    t = c(t, FastAppend([data_file(t, "f1", 1)]))
    s1 = t.metadata.current_snapshot_id
    st0 = touch(f"{t.location}/metadata/stats-{s0}.puffin")
    pst0 = touch(f"{t.location}/metadata/partition-stats-{s0}.parquet")
    st1 = touch(f"{t.location}/metadata/stats-{s1}.puffin")
    t = c(t, MetadataChange((U.SetStatistics(StatisticsFile(s0, st0, 1, 1)),
                             U.SetPartitionStatistics(PartitionStatisticsFile(s0, pst0, 1)),
                             U.SetStatistics(StatisticsFile(s1, st1, 1, 1)))))
    result, deleted, after = run_expire(t, older_than_ms=FUTURE, retain_last=1)
    assert result.deleted_statistics_files_count == 2 and {st0, pst0} <= deleted and st1 not in deleted
    assert [s.statistics_path for s in after.metadata.statistics] == [st1]


def test_statistics_file_shared_with_a_retained_snapshot_is_kept(catalog):
    t = make_table(catalog)
    t = c(t, FastAppend([data_file(t, "f0")]))
    s0 = t.metadata.current_snapshot_id
    t = c(t, FastAppend([data_file(t, "f1", 1)]))
    shared = touch(f"{t.location}/metadata/stats.puffin")
    t = c(t, MetadataChange((U.SetStatistics(StatisticsFile(s0, shared, 1, 1)),
                             U.SetStatistics(StatisticsFile(t.metadata.current_snapshot_id, shared, 1, 1)))))
    result, deleted, _ = run_expire(t, older_than_ms=FUTURE, retain_last=1)
    assert shared not in deleted and result.deleted_statistics_files_count == 0


# ------------------------------------------------------------------------------------ clean_expired_metadata
def test_clean_expired_metadata_removes_unused_specs_and_schemas(catalog):
    t = make_table(catalog)
    t = c(t, FastAppend([data_file(t, "f0")]))
    schema2 = Schema((*SCHEMA.fields, NestedField(3, "extra", STRING)), schema_id=1)
    spec2 = PartitionSpec(1, (PartitionField(2, 1001, parse_transform("identity"), "data"),))
    t = c(t, MetadataChange((U.AddSchema(schema2, 3), U.SetCurrentSchema(-1), U.AddPartitionSpec(spec2),
                             U.SetDefaultSpec(-1))))
    path = touch(f"{t.location}/data/data=a/g0.parquet")
    t = c(t, DeleteFiles([f"{t.location}/data/id=0/f0.parquet"]))
    g0 = DataFile(path, FileFormat.PARQUET, ("a",), 1, 10, spec_id=1)
    t = c(t, FastAppend([g0]))
    # a removing commit drops the spec-0 manifest that only holds the DELETED entry of f0
    g1 = DataFile(touch(f"{t.location}/data/data=a/g1.parquet"), FileFormat.PARQUET, ("a",), 1, 10, spec_id=1)
    t = c(t, RewriteFiles(remove_files=[g0], add_files=[g1]))
    kept_without = expire_snapshots(t, ExpireSnapshotsParams(older_than_ms=0))  # nothing old: no change
    assert not kept_without.expired_snapshot_ids
    _, _, after = run_expire(t, older_than_ms=FUTURE, retain_last=1, clean_expired_metadata=True)
    md = after.metadata
    assert [s.spec_id for s in md.partition_specs] == [1] and [s.schema_id for s in md.schemas] == [1]
    assert md.default_spec_id == 1 and md.current_schema_id == 1


def test_clean_expired_metadata_off_keeps_specs(catalog):
    t = make_table(catalog)
    t = c(t, FastAppend([data_file(t, "f0")]))
    spec2 = PartitionSpec(1, (PartitionField(2, 1001, parse_transform("identity"), "data"),))
    t = c(t, MetadataChange((U.AddPartitionSpec(spec2), U.SetDefaultSpec(-1))))
    t = c(t, FastAppend([DataFile(touch(f"{t.location}/data/x.parquet"), FileFormat.PARQUET, ("a",), 1, 1, spec_id=1)]))
    _, _, after = run_expire(t, older_than_ms=FUTURE, retain_last=1)
    assert [s.spec_id for s in after.metadata.partition_specs] == [0, 1]


def test_builder_refuses_to_remove_default_spec_and_current_schema(catalog):
    t = make_table(catalog)
    with pytest.raises(ValidationError, match="default partition spec 0"):
        c(t, MetadataChange((U.RemovePartitionSpecs((0,)),)))
    with pytest.raises(ValidationError, match="current schema 0"):
        c(t, MetadataChange((U.RemoveSchemas((0,)),)))


# ------------------------------------------------------------------------------------ errors, options
def test_gc_disabled_refuses_and_leaves_table_unchanged(catalog):
    t = make_table(catalog, properties={"gc.enabled": "false"})
    t = c(t, FastAppend([data_file(t, "f0")]))
    t = c(t, FastAppend([data_file(t, "f1")]))
    loc = t.metadata_location
    with pytest.raises(ValidationError, match=r"Cannot expire snapshots: GC is disabled \(deleting files may corrupt"):
        expire_snapshots(t, ExpireSnapshotsParams(older_than_ms=FUTURE))
    assert catalog.load_table(("db", "t")).metadata_location == loc


@pytest.mark.parametrize("which", ["retained", "expired"])
def test_a_missing_manifest_list_fails_before_the_commit(catalog, which):
    # the docs promise that an error leaves the table as it was: the lists are read before committing
    from procedures.errors import InvalidMetadataError
    from tests.helpers.files import fingerprint

    t = make_table(catalog)
    for i in range(4):
        t = c(t, FastAppend([data_file(t, f"f{i}", i)]))
    snaps = sorted(t.metadata.snapshots, key=lambda s: s.sequence_number)
    gone = (snaps[-1] if which == "retained" else snaps[0]).manifest_list
    os.remove(gone)
    loc, before = t.metadata_location, fingerprint(t.location)
    with pytest.raises(InvalidMetadataError, match="manifest list of snapshot .* is missing"):
        expire_snapshots(t, ExpireSnapshotsParams(older_than_ms=FUTURE, retain_last=2))
    assert fingerprint(t.location) == before
    assert catalog.load_table(("db", "t")).metadata_location == loc


def test_a_commit_landing_before_expires_own_recomputes_the_files(catalog, monkeypatch):
    # the files are found before the commit; when another commit makes ours retry, they are found
    # again on the metadata as committed, so a file the other commit brought back stays
    from procedures.core.gc import expire as action

    t = make_table(catalog)
    f0 = data_file(t, "f0")
    t = c(t, FastAppend([f0]))
    t = c(t, DeleteFiles([f0.file_path]))
    real, calls = action.expired_files, []

    def find_then_commit(*args, **kwargs):
        calls.append(args[2])
        if len(calls) == 1:
            c(catalog.load_table(("db", "t")), FastAppend([f0]))
        return real(*args, **kwargs)

    monkeypatch.setattr(action, "expired_files", find_then_commit)
    head = t.metadata.current_snapshot().snapshot_id
    result = expire_snapshots(t, ExpireSnapshotsParams(older_than_ms=FUTURE, retain_last=1))
    # found on the planned metadata, then again on the committed one, where the new snapshot is kept
    newest = catalog.load_table(("db", "t")).metadata.current_snapshot().snapshot_id
    assert [[s.snapshot_id for s in after.snapshots] for after in calls] == [[head], [newest]]
    # the recomputed files keep f0 (the delete guard had nothing to catch)
    assert os.path.exists(f0.file_path) and result.deleted_data_files_count == 0 and result.kept_reachable == ()


@pytest.mark.parametrize("kw, message", [
    ({"retain_last": 0}, "Number of snapshots to retain must be at least 1, cannot be: 0"),
    ({"max_concurrent_deletes": 0}, "max_concurrent_deletes should have value > 0, value: 0"),
    ({"max_concurrent_deletes": -3, "retain_last": 0}, "max_concurrent_deletes should have value > 0, value: -3"),
])
def test_bad_arguments_name_the_parameter_and_change_nothing(catalog, kw, message):
    t = make_table(catalog)
    t = c(t, FastAppend([data_file(t, "f0")]))
    t = c(t, FastAppend([data_file(t, "f1")]))
    loc, files = t.metadata_location, all_files(t)
    with pytest.raises(ValidationError, match=message):
        expire_snapshots(t, ExpireSnapshotsParams(older_than_ms=FUTURE, **kw))
    assert catalog.load_table(("db", "t")).metadata_location == loc and all_files(t) == files


def test_concurrent_deletes_and_streaming_give_the_same_result(catalog):
    results = []
    for i, kw in enumerate(({}, {"max_concurrent_deletes": 4}, {"stream_results": True})):
        t = make_table(catalog, name=f"t{i}")
        f = [data_file(t, f"f{j}", j) for j in range(6)]
        for j in range(0, 6, 2):
            t = c(t, FastAppend(f[j:j + 2]))
            t = c(t, DeleteFiles([f[j].file_path]))
        result, deleted, _ = run_expire(t, older_than_ms=FUTURE, retain_last=1, **kw)
        results.append((result.row(), sorted(os.path.relpath(p, t.location) for p in deleted if "/data/" in p)))
    assert results[0] == results[1] == results[2]
    assert results[0][0][0] == 3


def test_a_file_two_expired_manifests_name_is_read_while_deleting_and_counted_once(catalog, monkeypatch):
    t = make_table(catalog)
    f0 = data_file(t, "f0")
    t = c(t, FastAppend([f0]))
    t = c(t, FastAppend([f0]))  # the same file in a second manifest
    t = c(t, DeleteFiles([f0.file_path]))
    t = c(t, FastAppend([data_file(t, "f1", 1)]))

    def held_at_once(*_a, **_k):
        raise AssertionError("no retained manifest can name them: the candidates must be streamed")

    monkeypatch.setattr(R, "content_paths_driver", held_at_once)
    result, deleted, _ = run_expire(t, older_than_ms=FUTURE, retain_last=1)
    assert f0.file_path in deleted and result.deleted_data_files_count == 1


@pytest.mark.parametrize("threads,ahead", [(1, 0), (3, 0), (3, 1 << 30), (8, 2000)])
def test_streamed_content_paths_are_the_driver_read_in_order_each_once(catalog, threads, ahead):
    t = make_table(catalog)
    files = [data_file(t, f"f{i}", i % 3) for i in range(12)]
    for i in range(0, 12, 2):
        t = c(t, FastAppend(files[i:i + 2]))
    t = c(t, FastAppend(files[:3]))  # names three files a second time
    manifests = list(R.read_snapshot_manifests(t.io, t.metadata).distinct().values())
    streamed = list(R.stream_content_paths(t.io, manifests, threads=threads, ahead_bytes=ahead))
    assert len(streamed) == len(set(streamed)) == 12
    assert streamed == list(R.content_paths_driver(t.io, manifests).items())


def test_reads_sharing_manifests_keep_one_object_per_manifest(catalog):
    t = make_table(catalog)
    for i in range(3):
        t = c(t, FastAppend([data_file(t, f"f{i}", i)]))
    ids = [s.snapshot_id for s in t.metadata.snapshots]
    shared: dict = {}
    early = R.read_snapshot_manifests(t.io, t.metadata, ids[:2], shared=shared).distinct()
    last = R.read_snapshot_manifests(t.io, t.metadata, ids[2:], shared=shared).distinct()
    assert len(early) == 2 and len(last) == 3 and set(shared) == set(last)
    assert all(last[p] is m for p, m in early.items())


def test_a_stream_closed_early_stops_its_readers(catalog):
    t = make_table(catalog)
    for i in range(6):
        t = c(t, FastAppend([data_file(t, f"f{i}", i)]))
    manifests = list(R.read_snapshot_manifests(t.io, t.metadata).distinct().values())
    stream = R.stream_content_paths(t.io, manifests, threads=2)
    first = next(stream)
    stream.close()
    assert first[1] == R.DATA
    assert not [th for th in threading.enumerate() if th.name.startswith("read-manifest")]


def test_an_unreadable_manifest_in_the_stream_leaves_its_files_and_the_rest_go(catalog, caplog):
    t = make_table(catalog)
    for i in range(4):
        t = c(t, FastAppend([data_file(t, f"f{i}", i)]))
    manifests = list(R.read_snapshot_manifests(t.io, t.metadata).distinct().values())
    gone = manifests[1]
    os.remove(gone.manifest_path)
    for threads in (1, 3):
        streamed = [p for p, _ in R.stream_content_paths(t.io, manifests, threads=threads)]
        expected = [p for m in manifests if m is not gone for p, _ in R.manifest_content_paths(t.io, m)]
        assert streamed == expected and len(streamed) == 3
    assert gone.manifest_path in caplog.text


def test_delete_files_closes_what_it_was_given_when_a_batch_fails(tmp_path):
    from procedures.core.gc.deletes import delete_files
    from procedures.io.fileio import FileIO

    closed = []

    def items():
        try:
            for i in range(5):
                yield str(tmp_path / f"x{i}"), R.DATA
        finally:
            closed.append(True)

    class Refusing:
        def check(self, chunk):
            raise RuntimeError("guard failed")

    given = items()  # held here, as a caller holding the stream would: only delete_files can close it
    with pytest.raises(RuntimeError, match="guard failed"):
        delete_files(FileIO(), given, guard=Refusing(), batch=2)
    assert closed == [True]


def test_failed_deletes_are_not_counted(catalog, monkeypatch):
    t = make_table(catalog)
    f0 = data_file(t, "f0")
    t = c(t, FastAppend([f0]))
    t = c(t, DeleteFiles([f0.file_path]))
    t = c(t, FastAppend([data_file(t, "f1")]))
    real_delete = type(t.io).delete

    def flaky(self, path):
        if path == f0.file_path:
            raise PermissionError(f"denied: {path}")
        return real_delete(self, path)

    monkeypatch.setattr(type(t.io), "delete", flaky)
    result = expire_snapshots(t, ExpireSnapshotsParams(older_than_ms=FUTURE, retain_last=1))
    assert result.deleted_data_files_count == 0 and os.path.exists(f0.file_path)
    assert result.deleted_manifest_lists_count == 2


def test_size_threshold_decides_driver_or_spark(monkeypatch):
    from procedures.spec.manifest.model import ManifestFile

    ms = [ManifestFile(f"/m{i}.avro", 1000, 0) for i in range(5)]
    assert not R.use_spark(None, ms * 1000)  # no session: always the driver
    assert not R.use_spark(object(), ms)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 4)
    assert R.use_spark(object(), ms)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 100)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFEST_BYTES", 4999)
    assert R.use_spark(object(), ms)


def test_procedure_through_the_registry(catalog):
    t = make_table(catalog)
    for i in range(3):
        t = c(t, FastAppend([data_file(t, f"f{i}", i)]))
    conf = {"spark.sql.catalog.local.type": "hadoop", "spark.sql.catalog.local.warehouse": catalog.warehouse}
    res = runner.run("expire_snapshots", kwargs={"table": "db.t", "older_than": dt.datetime(2999, 1, 1),
                                                   "retain_last": 1}, catalog="local", conf=conf, lenient=True)
    assert [c.name for c in res.columns][0] == "deleted_data_files_count"
    assert res.rows == [(0, 0, 0, 0, 2, 0)]
    with pytest.raises(ValidationError, match="retain_last"):
        runner.run("expire_snapshots", kwargs={"table": "db.t", "retain_last": "one"}, catalog="local", conf=conf)
    with pytest.raises(ValidationError, match="max_concurrent_deletes should have value > 0, value: 0"):
        runner.run("expire_snapshots", args=["db.missing", None, None, 0], catalog="local", conf=conf)


# ------------------------------------------------------------------------------------ retained manifests pruned
def test_retained_file_in_a_rewritten_manifest_of_a_pruned_table_is_kept(catalog, monkeypatch):
    """Many partitions, one manifest each: only the retained manifest of the candidates' partition
    is read, and the file it still lists survives while its deleted neighbour goes."""
    from procedures.core.gc import pruning

    t = make_table(catalog)
    for p in range(6):
        if p == 3:
            keep, gone = data_file(t, "keep", 3), data_file(t, "gone", 3)
            t = c(t, FastAppend([keep, gone]))
        else:
            t = c(t, FastAppend([data_file(t, f"f{p}", p)]))
    t = c(t, DeleteFiles([gone.file_path]))  # the partition-3 manifest is rewritten: keep EXISTING
    read = []
    real = pruning.retained_to_read

    def spy(md, cands, retained):
        out = real(md, cands, retained)
        read.extend(out)
        return out

    monkeypatch.setattr(pruning, "retained_to_read", spy)
    result, deleted, after = run_expire(t, older_than_ms=FUTURE, retain_last=1)
    assert gone.file_path in deleted and keep.file_path not in deleted
    assert result.deleted_data_files_count == 1
    assert len(read) == 1 and read[0].partitions is not None  # only the partition-3 manifest


def test_tag_keeping_an_old_snapshot_keeps_its_files_after_a_rewrite(catalog):
    t = make_table(catalog)
    f = [data_file(t, f"f{i}", i % 3) for i in range(6)]
    t = c(t, FastAppend(f[:3]))
    t = c(t, FastAppend(f[3:]))
    t = c(t, ManageRef("create", "old", SnapshotRefType.TAG, snapshot_id=t.metadata.current_snapshot_id))
    t = c(t, DeleteFiles([f[0].file_path, f[4].file_path]))
    t = c(t, RewriteFiles(remove_files=[f[1]], add_files=[data_file(t, "r1", 1)]))
    t = c(t, FastAppend([data_file(t, "late", 2)]))
    result, deleted, _ = run_expire(t, older_than_ms=FUTURE, retain_last=1)
    assert not {x.file_path for x in f} & deleted  # the tag still reaches every original file
    assert result.deleted_data_files_count == 0


def test_deleted_delete_files_in_pruned_partitions(catalog):
    t = make_table(catalog)
    files = [data_file(t, f"f{p}", p) for p in range(4)]
    for x in files:
        t = c(t, FastAppend([x]))
    d1 = pos_delete(t, "d1", files[1])
    t = c(t, RowDelta(add_deletes=[d1]))
    t = c(t, DeleteFiles([files[1].file_path, d1.file_path]))
    t = c(t, FastAppend([data_file(t, "g1", 1)]))
    result, deleted, _ = run_expire(t, older_than_ms=FUTURE, retain_last=1)
    assert {files[1].file_path, d1.file_path} <= deleted
    assert result.row()[:2] == (1, 1)
