"""rewrite_manifests on our hadoop catalog: clustering by partition, target sizes, summaries, entry
metadata kept, delete manifests, spec selection, concurrent commits, and the procedure's output."""

from __future__ import annotations

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import FastAppend, RowDelta
from procedures.core.manifest_rewrite.clustering import ListedManifests, RewriteManifests, _chunks, target_manifest_count
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import ValidationError
from procedures.frontend import runner
from procedures.spec.manifest.manifest_list import ManifestRows, read_manifest_list
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat, ManifestContent, ManifestEntryStatus
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, STRING, NestedField
from procedures.frontend.parser import parse_call

FAST = RetryPolicy(num_retries=2, min_wait_ms=1, max_wait_ms=2)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "cat", STRING)))
SPEC = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "cat"),))


@pytest.fixture()
def setup(tmp_path):
    wh = tmp_path / "wh"
    cat = HadoopCatalog("ours", str(wh))
    cat.create_namespace("db")
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(wh)}
    return cat, conf


def _table(cat, name="t", fv=2, spec=SPEC, props=None):
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/{name}", spec=spec, format_version=fv,
                               properties=props)
    return cat.create_table(("db", name), md)


def _file(t, i, part):
    return DataFile(f"{t.location}/data/cat={part}/f{i}.parquet", FileFormat.PARQUET, (part,), 10 + i, 1000 + i, spec_id=0)


def _append_many(t, n=12, parts=("c", "a", "b")):
    files = []
    for i in range(n):
        f = _file(t, i, parts[i % len(parts)])
        files.append(f)
        t = commit(t, [FastAppend([f])], policy=FAST)
    return t, files


def _manifests(t, content=None):
    ms = read_manifest_list(t.io, t.metadata.current_snapshot().manifest_list)
    return [m for m in ms if content is None or m.content == content]


def _entries(t, m):
    return list(read_manifest(t.io, m, specs={s.spec_id: s for s in t.metadata.partition_specs}))


def _run(conf, text):
    stmt = parse_call(text)
    return runner.run(stmt.name, args=stmt.positional, kwargs=stmt.named, catalog="ours", conf=conf).rows


def test_helpers():
    assert target_manifest_count(1, 8) == 1 and target_manifest_count(17, 8) == 3
    assert _chunks(list(range(6)), [(0,), (0,), (0,), (1,), (1,), (2,)], 3) == [[0, 1, 2], [3, 4], [5]]
    assert _chunks(list(range(4)), None, 2) == [[0, 1], [2, 3]]


def test_rewrite_into_one_manifest_keeps_entries(setup):
    cat, conf = setup
    t, files = _append_many(_table(cat))
    before = {e.data_file.file_path: (e.snapshot_id, e.sequence_number, e.file_sequence_number)
              for m in _manifests(t) for e in _entries(t, m)}
    assert len(_manifests(t)) == 12
    assert _run(conf, "CALL ours.system.rewrite_manifests('db.t')") == [(12, 1)]
    t = t.refresh()
    snap = t.metadata.current_snapshot()
    assert snap.summary["operation"] == "replace"
    assert {k: snap.summary[k] for k in ("manifests-created", "manifests-kept", "manifests-replaced",
                                         "entries-processed")} == {
        "manifests-created": "1", "manifests-kept": "0", "manifests-replaced": "12", "entries-processed": "12"}
    assert snap.summary["total-data-files"] == "12"
    (m,) = _manifests(t)
    entries = _entries(t, m)
    assert all(e.status == ManifestEntryStatus.EXISTING for e in entries)
    assert [e.data_file.partition[0] for e in entries] == sorted(e.data_file.partition[0] for e in entries)
    assert {e.data_file.file_path: (e.snapshot_id, e.sequence_number, e.file_sequence_number) for e in entries} == before
    # one manifest that stays one manifest: nothing to do, no new snapshot
    assert _run(conf, "CALL ours.system.rewrite_manifests('db.t')") == [(0, 0)]
    assert t.refresh().metadata.current_snapshot_id == snap.snapshot_id


def test_small_target_clusters_partitions(setup):
    cat, conf = setup
    t, _ = _append_many(_table(cat, props={"commit.manifest.target-size-bytes": "12000"}))
    total = sum(m.manifest_length for m in _manifests(t))
    n = target_manifest_count(total, 12000)
    assert n > 1
    rows = _run(conf, "CALL ours.system.rewrite_manifests(table => 'db.t', use_caching => true)")
    t = t.refresh()
    ms = _manifests(t)
    assert rows == [(12, len(ms))] and 1 < len(ms) <= n
    # each partition value lives in exactly one manifest (contiguous ranges)
    seen = {}
    for m in ms:
        for e in _entries(t, m):
            seen.setdefault(e.data_file.partition[0], set()).add(m.manifest_path)
    assert all(len(v) == 1 for v in seen.values()) and set(seen) == {"a", "b", "c"}


def test_delete_manifests_and_v3_row_ids(setup):
    cat, conf = setup
    t = _table(cat, fv=3)
    t, files = _append_many(t, n=4)
    for i, f in enumerate(files[:2]):
        dv = DataFile(f"{t.location}/data/dv{i}.puffin", FileFormat.PUFFIN, f.partition, 1, 60,
                      content=FileContent.POSITION_DELETES, referenced_data_file=f.file_path,
                      content_offset=4, content_size_in_bytes=40, spec_id=0)
        t = commit(t, [RowDelta(add_deletes=[dv])], policy=FAST)
    row_ids = {e.data_file.file_path: e.data_file.first_row_id for m in _manifests(t, ManifestContent.DATA)
               for e in _entries(t, m)}
    assert _run(conf, "CALL ours.system.rewrite_manifests('db.t')") == [(6, 2)]
    t = t.refresh()
    assert [m.content for m in _manifests(t)] == [ManifestContent.DATA, ManifestContent.DELETES]
    assert {e.data_file.file_path: e.data_file.first_row_id for m in _manifests(t, ManifestContent.DATA)
            for e in _entries(t, m)} == row_ids
    assert len(_entries(t, _manifests(t, ManifestContent.DELETES)[0])) == 2


def test_spec_selection_and_errors(setup):
    cat, conf = setup
    t, _ = _append_many(_table(cat), n=3)
    with pytest.raises(ValidationError, match="Invalid spec id 5"):
        _run(conf, "CALL ours.system.rewrite_manifests('db.t', false, 5)")
    assert _run(conf, "CALL ours.system.rewrite_manifests('db.t', false, 0)") == [(3, 1)]
    with pytest.raises(ValidationError, match=r"field\(s\) \['nope'\] were not found"):
        commit(t.refresh(), [RewriteManifests(sort_by=["nope"])])
    with pytest.raises(ValidationError, match="sort_by must not be empty"):
        commit(t.refresh(), [RewriteManifests(sort_by=[])])


def test_empty_table_and_v1(setup):
    cat, conf = setup
    _table(cat, name="e")
    assert _run(conf, "CALL ours.system.rewrite_manifests('db.e')") == [(0, 0)]
    t, _ = _append_many(_table(cat, name="v1", fv=1), n=3)
    assert _run(conf, "CALL ours.system.rewrite_manifests('db.v1')") == [(3, 1)]
    t = t.refresh()
    assert sorted(e.data_file.record_count for e in _entries(t, _manifests(t)[0])) == [10, 11, 12]


def test_concurrent_append_is_kept_and_concurrent_rewrite_fails(setup):
    cat, conf = setup
    t, _ = _append_many(_table(cat), n=3)
    op = RewriteManifests()
    base = t.refresh()
    # plan against the current state, then let another writer append before the commit
    from procedures.core.kernel.transaction import CommitContext
    op._plan(base.metadata, base.metadata.current_snapshot(), CommitContext(base))
    extra = _file(t, 99, "z")
    commit(t.refresh(), [FastAppend([extra])], policy=FAST)
    commit(base, [op], policy=FAST)
    t = t.refresh()
    paths = {e.data_file.file_path for m in _manifests(t) for e in _entries(t, m)}
    assert extra.file_path in paths and len(paths) == 4
    assert t.metadata.current_snapshot().summary["manifests-kept"] == "1"
    # a second rewrite planned before another rewrite committed fails cleanly
    t, _ = _append_many(t, n=2)
    stale = RewriteManifests()
    stale._plan(t.metadata, t.metadata.current_snapshot(), CommitContext(t))
    commit(t.refresh(), [RewriteManifests()], policy=FAST)
    with pytest.raises(ValidationError, match="could not be found in the latest snapshot"):
        commit(t, [stale], policy=FAST)


def test_manifests_are_held_encoded_and_the_kept_ones_reach_the_new_list_exactly(setup):
    """The planning keeps the current manifest list's rows as bytes (a large table's 10,000 manifests
    are never all decoded objects with their partition summaries); the manifests it keeps (here:
    excluded by ``rewrite_if``) are listed again unchanged, in their order, after the new ones."""
    cat, _ = setup
    t, _ = _append_many(_table(cat), n=6)
    before = _manifests(t)
    skip = {before[1].manifest_path, before[4].manifest_path}
    op = RewriteManifests(rewrite_if=lambda m: m.manifest_path not in skip)
    t = commit(t, [op], policy=FAST)
    # the replaced manifests are held as their positions in the planned list, read again on demand
    replaced = [m for m in before if m.manifest_path not in skip]
    assert isinstance(op.rewritten, ListedManifests) and list(op.rewritten.positions) == [0, 2, 3, 5]
    assert list(op.rewritten) == replaced and op.rewritten[1] == replaced[1] and op.rewritten[1:3] == replaced[1:3]
    after = _manifests(t)
    assert [m.manifest_path for m in after[:len(op.added)]] == [m.manifest_path for m in op.added]
    assert after[len(op.added):] == [m for m in before if m.manifest_path in skip]
    assert t.metadata.current_snapshot().summary["manifests-kept"] == "2"


class _RecordingEngine:
    """A DistributedRewriter that takes every job and writes nothing (the test looks at the job)."""

    def __init__(self) -> None:
        self.jobs = []

    def wants(self, manifests) -> bool:
        return True

    def rewrite(self, job):
        self.jobs.append(job)
        return [], 0


def test_an_engine_is_handed_the_manifests_as_encoded_rows(setup):
    from procedures.core.kernel.transaction import CommitContext
    cat, _ = setup
    t, _ = _append_many(_table(cat), n=5)
    engine = _RecordingEngine()
    RewriteManifests(distributed=engine).apply(t.metadata, CommitContext(t))
    (job,) = engine.jobs
    # its tasks get each manifest as the row's bytes, decoded where it is read
    assert isinstance(job.manifests, ManifestRows)
    assert list(job.manifests) == _manifests(t)


def test_a_rewrite_whose_planned_manifest_list_is_gone_fails_cleanly(setup):
    """A retry reads the replaced manifests' paths from the list it planned on: when a concurrent
    expire_snapshots removed that list, the commit fails with a message saying to rerun."""
    from procedures.core.kernel.transaction import CommitContext
    cat, _ = setup
    t, _ = _append_many(_table(cat), n=3)
    stale = RewriteManifests()
    stale._plan(t.metadata, t.metadata.current_snapshot(), CommitContext(t))
    t2 = commit(t.refresh(), [FastAppend([_file(t, 50, "q")])], policy=FAST)
    t.io.delete(t.metadata.current_snapshot().manifest_list)
    with pytest.raises(ValidationError, match="is gone .* rerun rewrite_manifests"):
        commit(t2, [stale], policy=FAST)
