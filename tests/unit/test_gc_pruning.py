"""Which retained manifests expire_snapshots reads (procedures.core.gc.pruning) and the manifest-list
reading it relies on (read_snapshot_manifests decoding only the rows a list adds to its parent's).

The end-to-end cases (a retained file in a rewritten manifest, a tag keeping an old snapshot, delete
files) are in test_expire_snapshots.py, checked against its naive oracle."""

from __future__ import annotations

from dataclasses import replace

import pytest

from procedures.core.kernel.builder import new_table_metadata
from procedures.core.gc import pruning as P
from procedures.core.gc import reachability as R
from procedures.core.gc.live_paths import manifest_live_paths
from procedures.core.kernel.manage import ManageRef
from procedures.core.kernel.operations import DeleteFiles, FastAppend, MergeAppend
from procedures.core.kernel.transaction import MetadataChange, RetryPolicy, commit
from procedures.core.kernel.updates import SetProperties
from procedures.catalog.hadoop import HadoopCatalog
from procedures.spec.conversions import to_bytes
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import DataFile, FieldSummary, FileFormat, ManifestContent, ManifestFile
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.snapshots import SnapshotRefType
from procedures.spec.transforms import parse_transform
from procedures.spec.types import DOUBLE, LONG, STRING, NestedField

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "data", STRING), NestedField(3, "x", DOUBLE)))
SPECS = {
    "id": PartitionSpec(0, (PartitionField(1, 1000, parse_transform("identity"), "id"),)),
    "data": PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "data"),)),
    "x": PartitionSpec(0, (PartitionField(3, 1000, parse_transform("identity"), "x"),)),
}


def metadata(field: str = "id"):
    md, _ = new_table_metadata(schema=SCHEMA, location="/tmp/t", spec=SPECS[field], format_version=2)
    return md


def summary(lo, hi, t=LONG, null=False) -> FieldSummary:
    return FieldSummary(null, None, None if lo is None else to_bytes(lo, t), None if hi is None else to_bytes(hi, t))


def manifest(name: str, *summaries: FieldSummary, content=ManifestContent.DATA, spec_id=0, added=1, existing=0,
             partitions=True) -> ManifestFile:
    return ManifestFile(f"/m/{name}.avro", 100, spec_id, content, added_files_count=added,
                        existing_files_count=existing, deleted_files_count=0,
                        partitions=tuple(summaries) if partitions else None)


def names(ms) -> list[str]:
    return sorted(m.manifest_path.rsplit("/", 1)[1][:-5] for m in ms)


# ------------------------------------------------------------------------------------ pruning rules
def test_manifests_without_live_entries_are_not_read():
    cands = [manifest("c", summary(1, 1))]
    retained = [manifest("gone", summary(1, 1), added=0, existing=0),
                manifest("existing", summary(1, 1), added=0, existing=3),
                manifest("v1", summary(1, 1), added=None, existing=None)]
    assert names(P.retained_to_read(metadata(), cands, retained)) == ["existing", "v1"]


def test_disjoint_partition_ranges_are_not_read_overlapping_ones_are():
    cands = [manifest("c1", summary(0, 9)), manifest("c2", summary(20, 29)), manifest("c3", summary(5, 12))]
    retained = [manifest("below", summary(-5, -1)), manifest("gap", summary(13, 19)),
                manifest("above", summary(30, 99)), manifest("touch_lo", summary(-5, 0)),
                manifest("inside", summary(21, 22)), manifest("spans", summary(13, 40)),
                manifest("touch_hi", summary(12, 12))]
    assert names(P.retained_to_read(metadata(), cands, retained)) == ["inside", "spans", "touch_hi", "touch_lo"]


def test_nulls_meet_nulls_only():
    cands = [manifest("c", summary(None, None, null=True))]  # only null partition values
    retained = [manifest("values", summary(1, 5)), manifest("with_null", summary(1, 5, null=True)),
                manifest("unknown", FieldSummary(False, None, None, None))]
    assert names(P.retained_to_read(metadata(), cands, retained)) == ["unknown", "with_null"]


def test_delete_candidates_other_specs_and_missing_summaries_are_always_read():
    retained = [manifest("far", summary(100, 200)), manifest("other_spec", summary(100, 200), spec_id=1),
                manifest("no_summary", partitions=False),
                manifest("deletes", summary(100, 200), content=ManifestContent.DELETES)]
    data_cands = [manifest("c", summary(1, 2))]
    assert names(P.retained_to_read(metadata(), data_cands, retained)) == ["deletes", "no_summary", "other_spec"]
    # a Puffin file of deletion vectors is named by entries of several partitions: no pruning at all
    delete_cands = data_cands + [manifest("d", summary(1, 2), content=ManifestContent.DELETES)]
    assert names(P.retained_to_read(metadata(), delete_cands, retained)) == names(retained)
    assert names(P.retained_to_read(metadata(), [manifest("c", partitions=False)], retained)) == names(retained)


def test_only_safely_ordered_types_prune():
    cands = [manifest("c", summary("a", "b", STRING))]
    retained = [manifest("far", summary("x", "z", STRING)), manifest("near", summary("b", "c", STRING))]
    assert names(P.retained_to_read(metadata("data"), cands, retained)) == ["near"]
    # characters beyond ASCII may order differently in the writer: read
    wide = [manifest("c", summary("\u00e9", "\u00e9", STRING))]
    assert names(P.retained_to_read(metadata("data"), wide, retained)) == ["far", "near"]
    floats = [manifest("c", summary(1.0, 2.0, DOUBLE))]
    assert names(P.retained_to_read(metadata("x"), floats, [manifest("r", summary(5.0, 6.0, DOUBLE))])) == ["r"]


# ------------------------------------------------------------------------------------ reading lists and manifests
@pytest.fixture()
def table(tmp_path):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=SPECS["id"], format_version=2)
    return cat.create_table(("db", "t"), md)


def data_file(t, name: str, part: int) -> DataFile:
    return DataFile(f"{t.location}/data/id={part}/{name}.parquet", FileFormat.PARQUET, (part,), 10, 100, spec_id=0)


def branched_history(t, appends: int):
    """``appends`` appends, a branch with one append, and a delete that rewrites a manifest."""
    for i in range(appends):
        t = commit(t, [FastAppend([data_file(t, f"f{i}", i)])], policy=FAST)
    t = commit(t, [ManageRef("create", "b", SnapshotRefType.BRANCH)], policy=FAST)
    t = commit(t, [FastAppend([data_file(t, "fb", 9)], branch="b")], policy=FAST)
    return commit(t, [DeleteFiles([f"{t.location}/data/id=2/f2.parquet"])], policy=FAST)


def spy_decoding(monkeypatch) -> list[int]:
    """The row counts of every list decoding from now on (a list decoded whole is read row by row)."""
    decoded: list[int] = []
    real, real_rows = R.decode_manifest_list_head, R.iter_manifest_list_rows

    def spy(enc, size, count):
        decoded.append(count)
        return real(enc, size, count)

    def spy_rows(enc, size, count):
        decoded.append(count)
        return real_rows(enc, size, count)

    monkeypatch.setattr(R, "decode_manifest_list_head", spy)
    monkeypatch.setattr(R, "iter_manifest_list_rows", spy_rows)
    return decoded


def test_lists_decode_only_the_rows_they_add_and_equal_a_full_read(table, monkeypatch):
    t = branched_history(table, 6)
    t = commit(t, [FastAppend([data_file(t, "f7", 7)])], policy=FAST)
    decoded = spy_decoding(monkeypatch)
    md = t.metadata
    read = R.read_snapshot_manifests(t.io, md, per_snapshot=True)
    for s in md.snapshots:
        assert list(read.manifests[s.snapshot_id]) == read_manifest_list(t.io, s.manifest_list)
    rows = sum(len(read_manifest_list(t.io, s.manifest_list)) for s in md.snapshots)
    # every append and the branch's decode one row; the delete decodes its whole list
    assert sum(decoded) < rows and sorted(decoded)[:-1] == [1] * (len(md.snapshots) - 1)
    sub = R.read_snapshot_manifests(t.io, md, [md.snapshots[3].snapshot_id], per_snapshot=True)
    assert list(sub.manifests) == [md.snapshots[3].snapshot_id]
    # without per_snapshot the same distinct manifests, and no per-snapshot tuples kept
    lean = R.read_snapshot_manifests(t.io, md)
    assert lean.manifests == {} and lean.distinct() == read.distinct()
    assert list(lean.distinct()) == list(dict.fromkeys(
        m.manifest_path for s in md.snapshots for m in read_manifest_list(t.io, s.manifest_list)))
    # slim: the same manifests with what reading their paths needs, nothing else (and a small prefetch)
    slim = R.read_snapshot_manifests(t.io, md, slim=True, prefetch_bytes=1)
    assert list(slim.distinct()) == list(read.distinct())
    for path, m in slim.distinct().items():
        assert R.manifest_row(m) == R.manifest_row(read.distinct()[path])
        assert m.partitions is None and m.added_files_count is None and read.distinct()[path].partitions is not None


def test_live_paths_equal_the_full_reader(table):
    t = table
    t = commit(t, [FastAppend([data_file(t, f"f{i}", 1) for i in range(4)])], policy=FAST)
    t = commit(t, [DeleteFiles([f"{t.location}/data/id=1/f1.parquet"])], policy=FAST)
    for m in read_manifest_list(t.io, t.metadata.current_snapshot().manifest_list):
        full = [(e.data_file.file_path, e.data_file.content) for e in read_manifest(t.io, m, skip_deleted=True)]
        assert list(manifest_live_paths(t.io, m)) == full
        assert len(full) == 3


# ------------------------------------------------------------------------------------ lists read in chunks
def chunked_rows(t, md, chunks: int) -> set[tuple]:
    out: list[tuple] = []
    for chunk in R.manifest_list_chunks(md, chunks):
        out.extend(R.read_chunk_manifests(t.io, chunk))
    return set(out)


def driver_rows(t, md) -> set[tuple]:
    return {R.manifest_row(m) for m in R.read_snapshot_manifests(t.io, md, slim=True).distinct().values()}


def test_chunked_list_reading_finds_the_driver_read_manifests(table, monkeypatch):
    """Every way of cutting the history into chunks names the same manifests as the driver's read, on
    a history with a branch, a delete and a merge (manifests rewritten), a snapshot whose parent is
    gone and a v1 snapshot without a manifest list."""
    t = branched_history(table, 4)
    t = commit(t, [MetadataChange((SetProperties((("commit.manifest.min-count-to-merge", "2"),)),))], policy=FAST)
    t = commit(t, [MergeAppend([data_file(t, "f5", 5)])], policy=FAST)  # merges the main branch's manifests
    assert len(read_manifest_list(t.io, t.metadata.current_snapshot().manifest_list)) == 1
    t = commit(t, [FastAppend([data_file(t, "f6", 6)], branch="b")], policy=FAST)
    t = commit(t, [FastAppend([data_file(t, "f7", 7)])], policy=FAST)
    md = t.metadata
    snaps = list(md.snapshots)
    # a parent gone (expired) and a v1 parent that embeds its manifests instead of a list
    gone = snaps[2].snapshot_id
    v1 = snaps[5].snapshot_id
    odd = replace(md, snapshots=tuple(replace(s, manifest_list=None) if s.snapshot_id == v1 else s
                                      for s in snaps if s.snapshot_id != gone))
    assert any(s.parent_snapshot_id == gone for s in odd.snapshots)
    assert any(s.parent_snapshot_id == v1 for s in odd.snapshots)
    for m in (md, odd):
        expected = driver_rows(t, m)
        assert len(expected) > 5
        with_lists = sum(1 for s in m.snapshots if s.manifest_list)
        for chunks in range(1, with_lists + 2):
            cut = R.manifest_list_chunks(m, chunks)
            assert len(cut) == min(chunks, with_lists) and all(cut)
            # runs of one parents-first order (a parent before its children), every list once
            order = [sid for c in cut for sid, _, _ in c]
            assert all(order.index(s.parent_snapshot_id) < order.index(s.snapshot_id)
                       for s in m.snapshots if s.manifest_list and s.parent_snapshot_id in order)
            assert sorted(sid for c in cut for sid, _, _ in c) == sorted(
                s.snapshot_id for s in m.snapshots if s.manifest_list)
            assert chunked_rows(t, m, chunks) == expected, chunks


def test_a_chunk_decodes_only_the_rows_its_lists_add(table, monkeypatch):
    """In a linear history each chunk decodes its first list whole and only the new row of the others."""
    t = table
    for i in range(8):
        t = commit(t, [FastAppend([data_file(t, f"f{i}", i)])], policy=FAST)
    md = t.metadata
    decoded = spy_decoding(monkeypatch)
    chunks = R.manifest_list_chunks(md, 3)
    assert [len(c) for c in chunks] == [2, 3, 3]
    for c in chunks:
        decoded.clear()
        R.read_chunk_manifests(t.io, c)
        # the snapshot at depth d has d + 1 manifests: the chunk's first is decoded whole
        first_depth = [s.snapshot_id for s in md.snapshots].index(c[0][0])
        assert decoded == [first_depth + 1] + [1] * (len(c) - 1)
    assert chunked_rows(t, md, 3) == driver_rows(t, md)


def test_lists_in_engine_by_count_or_size(table, monkeypatch):
    t = table
    for i in range(3):
        t = commit(t, [FastAppend([data_file(t, f"f{i}", i)])], policy=FAST)
    assert not R.lists_in_engine(t.io, t.metadata)
    monkeypatch.setattr(R, "DRIVER_MAX_LISTS", 2)
    assert R.lists_in_engine(t.io, t.metadata)
    monkeypatch.setattr(R, "DRIVER_MAX_LISTS", 3)
    assert not R.lists_in_engine(t.io, t.metadata)
    monkeypatch.setattr(R, "DRIVER_MAX_LIST_BYTES", 10)
    assert R.lists_in_engine(t.io, t.metadata)


@pytest.mark.parametrize("path, metadata", [
    ("/wh/t/metadata/version-hint.text", True),
    ("version-hint.text", True),                           # a bare name
    ("s3://b/t/metadata/version-hint.text/", True),        # a trailing slash
    ("/wh/t/metadata/v3.metadata.json", True),
    ("/wh/t/metadata/00001-abc.metadata.json.gz", True),
    ("/wh/t/metadata/v3.gz.metadata.json", True),
    ("/wh/t/metadata/snap-1-abc.avro", False),
    ("/wh/t/metadata/v3.metadata.json.bak", False),
    ("/wh/t/metadata/v3.metadata.jsonX", False),           # only slashes are trimmed from the end
    ("/wh/t/metadata/version-hint.text.tmp", False),
    ("/wh/t/version-hint.text/data.parquet", False),       # a folder of that name is not the file
    ("/wh/t/v1.metadata.json/data.parquet", False),
    ("/wh/t/metadata/V3.METADATA.JSON", False),            # names are compared as written
])
def test_which_files_snapshot_expiry_never_deletes(path, metadata):
    assert R.is_table_metadata_file(path) is metadata
