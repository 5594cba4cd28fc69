"""The reachable-file plan of garbage collection (``procedures.core.gc.reachability``) in isolation:
the parents-first order the list reading and chunking rely on, the driver/engine thresholds, the
bounded read-ahead of the expire stream, and the small conversions executors depend on.

Written against the surviving mutants of ``.ci/mutation.sh reachability`` (docs/testing.md)."""

from __future__ import annotations

import os
import random
from concurrent.futures import Future
from dataclasses import replace

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.gc import reachability as R
from procedures.core.kernel.manage import ManageRef
from procedures.core.kernel.operations import FastAppend
from procedures.core.kernel.transaction import MetadataChange, RetryPolicy, commit
from procedures.core.kernel.updates import SetPartitionStatistics, SetStatistics
from procedures.errors import InvalidMetadataError
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat, ManifestContent, ManifestFile
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.snapshots import SnapshotRefType
from procedures.spec.statistics import PartitionStatisticsFile, StatisticsFile
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, NestedField

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True),))
SPEC = PartitionSpec(0, (PartitionField(1, 1000, parse_transform("identity"), "id"),))


@pytest.fixture()
def table(tmp_path):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=SPEC, format_version=2)
    return cat.create_table(("db", "t"), md)


def append(t, name: str, branch: str | None = None):
    f = DataFile(f"{t.location}/data/{name}.parquet", FileFormat.PARQUET, (1,), 10, 100, spec_id=0)
    return commit(t, [FastAppend([f], **({"branch": branch} if branch else {}))], policy=FAST)


def forked(t):
    """main: a0 <- a1 <- a2 <- a3; branch b from a1: b0 <- b1 (a1 has two children, both appends)."""
    t = append(append(t, "a0"), "a1")
    t = commit(t, [ManageRef("create", "b", SnapshotRefType.BRANCH)], policy=FAST)
    t = append(append(t, "b0", "b"), "b1", "b")
    return append(append(t, "a2"), "a3")


def depths(md) -> dict[int, int]:
    """Depth of every snapshot in its remaining history (a snapshot whose parent is gone is a root)."""
    by_id = {s.snapshot_id: s for s in md.snapshots}

    def depth(sid: int) -> int:
        parent = by_id[sid].parent_snapshot_id
        return 0 if parent not in by_id else 1 + depth(parent)
    return {sid: depth(sid) for sid in by_id}


def test_lists_are_ordered_by_depth_whatever_order_the_metadata_lists_them(table):
    t = forked(table)
    snaps = list(t.metadata.snapshots)
    gone = snaps[2].snapshot_id  # b0 or a2: its child's history now starts at the child
    rng = random.Random(38)
    for base in (t.metadata, replace(t.metadata, snapshots=tuple(s for s in snaps if s.snapshot_id != gone))):
        for _ in range(12):
            shuffled = list(base.snapshots)
            rng.shuffle(shuffled)
            md = replace(base, snapshots=tuple(shuffled))
            depth = depths(md)
            order = [sid for sid, _, _ in R.manifest_list_chunks(md, 1)[0]]
            # sorted by depth, ties in the metadata's order
            assert order == sorted((s.snapshot_id for s in shuffled), key=depth.__getitem__)


def spy_decoding(monkeypatch) -> list[int]:
    decoded: list[int] = []
    for name in ("decode_manifest_list_head", "iter_manifest_list_rows"):
        real = getattr(R, name)

        def spy(enc, size, count, real=real):
            decoded.append(count)
            return real(enc, size, count)
        monkeypatch.setattr(R, name, spy)
    return decoded


@pytest.mark.parametrize("threads", [1, 4])
def test_both_children_of_a_fork_decode_only_their_new_row(table, monkeypatch, threads):
    t = forked(table)
    md = t.metadata
    decoded = spy_decoding(monkeypatch)
    read = R.read_snapshot_manifests(t.io, md, threads=threads)
    # the root's list is decoded whole (one row), every other list adds one manifest to its parent's
    assert decoded == [1] * len(md.snapshots)
    assert len(read.distinct()) == len(md.snapshots)
    decoded.clear()
    chunk = R.manifest_list_chunks(md, 1)[0]
    assert len(R.read_chunk_manifests(t.io, chunk)) == len(md.snapshots)
    assert decoded == [1] * len(md.snapshots)


def test_a_missing_manifest_list_names_the_snapshot_and_the_file(table):
    t = append(append(table, "a0"), "a1")
    s = t.metadata.current_snapshot()
    os.remove(s.manifest_list)
    with pytest.raises(InvalidMetadataError, match=rf"snapshot {s.snapshot_id} is missing.*expire or remove the "
                                                   r"snapshot, then rerun") as err:
        R.read_snapshot_manifests(t.io, t.metadata)
    assert err.value.location == s.manifest_list


def test_lists_in_engine_without_a_current_list_or_at_the_size_limit(table, monkeypatch):
    assert not R.lists_in_engine(table.io, table.metadata)  # no snapshot at all
    t = append(table, "a0")
    size = os.path.getsize(t.metadata.current_snapshot().manifest_list)
    monkeypatch.setattr(R, "DRIVER_MAX_LIST_BYTES", size)
    assert not R.lists_in_engine(t.io, t.metadata)  # "above" the limit, not at it
    monkeypatch.setattr(R, "DRIVER_MAX_LIST_BYTES", size - 1)
    assert R.lists_in_engine(t.io, t.metadata)
    # the current list gone: the driver's read reports it, with its own error
    os.remove(t.metadata.current_snapshot().manifest_list)
    assert not R.lists_in_engine(t.io, t.metadata)


def test_use_spark_only_above_the_limits(monkeypatch):
    ms = [ManifestFile(f"/m{i}.avro", 1000, 0) for i in range(5)]
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 5)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFEST_BYTES", 5000)
    assert not R.use_spark(object(), ms)  # at both limits
    assert R.use_spark(object(), ms + [ManifestFile("/m5.avro", 0, 0)])  # one manifest more
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 100)
    assert R.use_spark(object(), ms[:4] + [ManifestFile("/m4.avro", 1001, 0)])  # one byte more
    # a manifest of unknown length counts for nothing
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFEST_BYTES", 2)
    assert not R.use_spark(object(), [ManifestFile(f"/n{i}.avro", None, 0) for i in range(3)])


def test_statistics_of_the_given_snapshots_only(table):
    t = append(append(table, "a0"), "a1")
    s0, s1 = (s.snapshot_id for s in t.metadata.snapshots)
    loc = f"{t.location}/metadata"
    t = commit(t, [MetadataChange((SetStatistics(StatisticsFile(s0, f"{loc}/s0.puffin", 1, 1)),
                                   SetStatistics(StatisticsFile(s1, f"{loc}/s1.puffin", 1, 1)),
                                   SetPartitionStatistics(PartitionStatisticsFile(s0, f"{loc}/p0.parquet", 1)),
                                   SetPartitionStatistics(PartitionStatisticsFile(s1, f"{loc}/p1.parquet", 1))))],
               policy=FAST)
    assert R.statistics_paths(t.metadata, [s0]) == {f"{loc}/s0.puffin": R.STATISTICS, f"{loc}/p0.parquet": R.STATISTICS}
    assert R.statistics_paths(t.metadata, []) == {}
    assert set(R.statistics_paths(t.metadata)) == {f"{loc}/{n}" for n in ("s0.puffin", "s1.puffin", "p0.parquet",
                                                                          "p1.parquet")}


@pytest.mark.parametrize("location", ["s3://b/wh/TAX", "s3://b/wh/TAX/", "/wh/t//"])
def test_the_version_hint_is_under_the_table_location(location):
    md, _ = new_table_metadata(schema=SCHEMA, location=location, spec=SPEC, format_version=2)
    md = replace(md, location=location)  # as another writer may have left it (the builder trims it)
    hint = R.metadata_file_paths(md, None)[-1]
    assert hint == location.rstrip("/") + "/metadata/version-hint.text"


def test_manifest_rows_carry_what_an_executor_needs():
    m = ManifestFile("/t/metadata/m1.avro", 4242, 3, ManifestContent.DELETES, added_files_count=2)
    row = R.manifest_row(m)
    assert row == ("/t/metadata/m1.avro", 4242, 3, 1)
    back = R.manifest_from_row(*row)
    assert (back.manifest_path, back.manifest_length, back.partition_spec_id, back.content) == (
        "/t/metadata/m1.avro", 4242, 3, ManifestContent.DELETES)
    assert R.manifest_row(replace(m, manifest_length=None))[1] == 0  # unknown length: 0, as use_spark counts it


def test_content_kinds_are_javas_names():
    assert [R.content_kind(c) for c in (0, 1, 2)] == ["Data", "Position Delete", "Equality Delete"]
    assert R.content_kind(FileContent.EQUALITY_DELETES) == R.EQUALITY_DELETE


def test_path_digests_are_16_bytes_and_tell_paths_apart():
    paths = [f"s3://b/t/data/{i:05d}.parquet" for i in range(2000)]
    digests = {R.path_digest(p) for p in paths}
    assert len(digests) == len(paths) and {len(d) for d in digests} == {16}
    assert R.path_digest(paths[0]) == R.path_digest(str(paths[0]))


class InlineExecutor:
    """A thread pool that runs each task when it is submitted, recording the order (deterministic)."""

    submitted: list[str] = []

    def __init__(self, max_workers=None, thread_name_prefix=""):
        pass

    def submit(self, fn, *args):
        InlineExecutor.submitted.append(args[0].manifest_path)
        f: Future = Future()
        f.set_result(fn(*args))
        return f

    def shutdown(self, wait=True):
        pass


@pytest.mark.parametrize("threads, ahead, lengths", [
    (2, 10_000, [100] * 9),               # bounded by the count: twice the threads
    (4, 250, [100] * 9),                  # bounded by the bytes: two manifests of 100 fit in 250
    (4, 250, [300, 100, 100, 300, 50]),   # a manifest larger than the budget is still read, alone
    (3, 0, [None, None, None, None]),     # unknown lengths count for nothing
])
def test_the_stream_reads_ahead_within_its_bounds(monkeypatch, threads, ahead, lengths):
    ms = [ManifestFile(f"/m/{i}.avro", n, 0) for i, n in enumerate(lengths)]
    monkeypatch.setattr(R, "manifest_content_paths", lambda io, m: [(m.manifest_path + ".parquet", R.DATA)])
    monkeypatch.setattr(R, "ThreadPoolExecutor", InlineExecutor)
    InlineExecutor.submitted = []
    seen = []
    for path, _ in R.stream_content_paths(None, ms, threads=threads, ahead_bytes=ahead):
        seen.append(path[:-len(".parquet")])
        ahead_of_consumer = InlineExecutor.submitted[len(seen) - 1:]  # read, not yet consumed (this one included)
        held = sum(m.manifest_length or 0 for m in ms if m.manifest_path in ahead_of_consumer)
        assert len(ahead_of_consumer) <= 2 * threads and (held <= ahead or len(ahead_of_consumer) == 1)
        # and as far ahead as the bounds allow: the next manifest would have broken one of them
        nxt = len(InlineExecutor.submitted)
        assert nxt == len(ms) or len(ahead_of_consumer) == 2 * threads or \
            held + (ms[nxt].manifest_length or 0) > ahead
    assert seen == [m.manifest_path for m in ms] == InlineExecutor.submitted
