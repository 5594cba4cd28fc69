"""The distributed steps of the maintenance procedures on both session kinds (issue 33): the same
results from Spark tasks on a classic session and on a Spark Connect session as from the driver.

The tables are written by our core (no Spark write, no Iceberg Java), so every test runs on pyspark 4
with Connect: rewrite_manifests' executor half (placement, counting, writing in parts), remove_orphan_files
with the tree listed in Spark tasks or given as a ``file_list_view``, the directory listing alone, and
rewrite_table_path's per-manifest tasks."""

from __future__ import annotations

import os

import fastavro
import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.gc import reachability as R
from procedures.core.gc.orphans import RemoveOrphanFilesParams
from procedures.core.kernel.operations import DeleteFiles, FastAppend
from procedures.core.kernel.paths import normalize_path
from procedures.core.manifest_rewrite.clustering import RewriteManifests
from procedures.core.table_relocation.relocation import RewriteTablePathParams
from procedures.core.kernel.transaction import CommitContext, MetadataChange, RetryPolicy, commit
from procedures.core.kernel.updates import SetProperties
from procedures.spark import listing as L
from procedures.spark.dataframes import is_connect
from procedures.spark.environment import check_python_workers
from procedures.spark.engine import gc_steps as O
from tests.helpers.gc_runs import remove_orphan_files
from procedures.spark.engine.manifest_rewrite_steps import SparkManifestRewriter
from procedures.spark.engine import table_relocation_steps as RTP
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import INT, LONG, NestedField
from tests.helpers.files import age_everything, touch
from tests.helpers.references import import_reference
from tests.helpers.capability_actions import rewrite_table_path

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "p", INT, False)))
BY_P = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "p"),))
UNPARTITIONED = PartitionSpec(0, ())


def _table(tmp_path, layout: str, fv: int = 2):
    """A table of twelve appends: ``single`` -- each manifest one partition; ``mixed`` -- each spans
    several; ``unpartitioned``.  One file is deleted (a manifest rewritten with a DELETED entry), and
    a tiny target manifest size makes the rewrite cut several manifests."""
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    spec = UNPARTITIONED if layout == "unpartitioned" else BY_P
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=spec, format_version=fv)
    t = cat.create_table(("db", "t"), md)
    loc = t.location
    t = commit(t, [MetadataChange((SetProperties((("commit.manifest.target-size-bytes", "6000"),)),))], policy=FAST)
    n = 0
    for i in range(12):
        files = []
        for j in range(5):
            p = i % 4 if layout == "single" else (i + j) % 4
            path = touch(f"{loc}/data/p={p}/f-{n}.parquet")
            files.append(DataFile(path, FileFormat.PARQUET, () if layout == "unpartitioned" else (p,), 10 + j, 100 + n))
            n += 1
        t = commit(t, [FastAppend(files)], policy=FAST)
    t = commit(t, [DeleteFiles([files[0].file_path])], policy=FAST)
    age_everything(loc)
    return cat, t


def _entries(io, manifests):
    return [[(e.status, e.snapshot_id, e.sequence_number, e.file_sequence_number, e.data_file)
             for e in read_manifest(io, m)] for m in manifests]


def _without_location(m):
    from dataclasses import replace

    return replace(m, manifest_path="", manifest_length=0, added_snapshot_id=None)


@pytest.mark.parametrize("fv", [2, 3])
@pytest.mark.parametrize("layout", ["mixed", "single", "unpartitioned"])
def test_rewrite_manifests_on_executors_writes_what_the_driver_writes(spark, tmp_path, monkeypatch, layout, fv):
    """Placement of mixed manifests (read and counted per partition in tasks, entries shuffled to
    their write task), single-partition manifests read by their writer, and a manifest written in
    parts joined in a second shuffle: entry for entry what the driver writes."""
    _, t = _table(tmp_path, layout, fv)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    engines = (("driver", None), ("executors", SparkManifestRewriter(spark, dict(t.io.properties), "t")),
               ("parts", SparkManifestRewriter(spark, dict(t.io.properties), "t", slots=64, min_part_entries=1)))
    ops = {}
    for label, engine in engines:
        op = RewriteManifests(distributed=engine)
        op.apply(t.metadata, CommitContext(t))
        ops[label] = op
    assert len(ops["driver"].added) > 1
    for label in ("executors", "parts"):
        assert _entries(t.io, ops[label].added) == _entries(t.io, ops["driver"].added), label
        assert ops[label].entries_processed == ops["driver"].entries_processed
        assert [_without_location(m) for m in ops[label].added] == [_without_location(m) for m in ops["driver"].added]
        assert all("-c" in m.manifest_path for m in ops[label].added)  # written by Spark tasks


@pytest.mark.parametrize("layout, most_jobs", [("mixed", 3), ("single", 1)])
def test_rewrite_manifests_on_executors_runs_no_needless_shuffle(spark, tmp_path, monkeypatch, layout, most_jobs):
    """A small table's partition keys are counted without a shuffle (each task's counts come to the
    driver: one job, where a shuffle is two under AQE), and single-partition manifests, which need no
    routing, are written by one job with a task per manifest group, no shuffle; mixed manifests'
    entries still meet their write task in a shuffle (two jobs)."""
    if is_connect(spark):
        pytest.skip("Spark jobs are counted through the classic SparkContext's status tracker")
    _, t = _table(tmp_path, layout)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    check_python_workers(spark)  # the once-per-application probe job is not the rewrite's
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    op = RewriteManifests(distributed=SparkManifestRewriter(spark, dict(t.io.properties), "t"))
    op.apply(t.metadata, CommitContext(t))
    jobs = set(tracker.getJobIdsForGroup()) - before
    assert len(op.added) > 1 and all("-c" in m.manifest_path for m in op.added)
    assert 0 < len(jobs) <= most_jobs, sorted(jobs)


def _orphan_tree(tmp_path):
    cat, t = _table(tmp_path, "single")
    orphans = {touch(f"{t.location}/data/p={p}/orphan-{p}.parquet") for p in range(4)}
    orphans.add(touch(f"{t.location}/data/deep/er/orphan.parquet"))
    age_everything(t.location)
    return cat, t, {normalize_path(p).path for p in orphans}


def _found(result) -> set[str]:
    return {normalize_path(p).path for p in result.orphan_file_locations}


def test_remove_orphan_files_lists_in_tasks(spark, tmp_path, monkeypatch):
    """The tree below the top folder listed and keyed in Spark tasks, the manifests and their lists
    read there too: the orphans the driver alone finds, then deleted."""
    cat, t, orphans = _orphan_tree(tmp_path)
    alone = remove_orphan_files(t, RemoveOrphanFilesParams(dry_run=True))
    assert _found(alone) == orphans and not alone.used_spark
    monkeypatch.setattr(O, "DRIVER_MAX_DIRS", 1)
    monkeypatch.setattr(O, "DRIVER_MIN_HANDED_DIRS", 1)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    monkeypatch.setattr(R, "DRIVER_MAX_LISTS", 0)
    dry = remove_orphan_files(t, RemoveOrphanFilesParams(dry_run=True), spark=spark)
    assert dry.used_spark and _found(dry) == orphans
    done = remove_orphan_files(cat.load_table(("db", "t")), RemoveOrphanFilesParams(), spark=spark)
    assert _found(done) == orphans
    assert not any(os.path.exists(p) for p in orphans)


def test_remove_orphan_files_from_a_file_list_view(spark, tmp_path):
    """``file_list_view`` rows (any spelling of the paths) matched in Spark: the same orphans."""
    _, t, orphans = _orphan_tree(tmp_path)
    rows = []
    for root, _, names in os.walk(normalize_path(t.location).path):
        for name in names:
            path = os.path.join(root, name)
            rows.append(("file:" + path if len(rows) % 2 else path, 0))
    view = f"files_{abs(hash(str(tmp_path)))}"
    spark.createDataFrame(rows, "file_path string, ts long").selectExpr(
        "file_path", "timestamp_seconds(ts) AS last_modified").createOrReplaceTempView(view)
    result = remove_orphan_files(t, RemoveOrphanFilesParams(dry_run=True, file_list_view=view), spark=spark)
    assert result.used_spark and _found(result) == orphans


def test_list_directories(spark, tmp_path):
    """Sub-trees listed in tasks: every file older than the cutoff, hidden ones left out."""
    want = {touch(str(tmp_path / f"d{i}" / "x" / f"f{j}")) for i in range(5) for j in range(3)}
    touch(str(tmp_path / "d0" / "_hidden" / "f"))
    touch(str(tmp_path / "d1" / ".hidden"))
    dirs = [str(tmp_path / f"d{i}") for i in range(5)]
    got = {normalize_path(r.file_path).path for r in L.list_directories(spark, dirs, 2**62, ()).collect()}
    assert got == want


def _staged_entries(io, result) -> dict[str, set[str]]:
    out = {}
    for staged, target in result.copy_plan:
        if target.endswith(".avro") and "snap-" not in target:
            with open(normalize_path(staged).path, "rb") as f:
                out[target] = {r["data_file"]["file_path"] for r in fastavro.reader(f)}
    return out


def test_rewrite_table_path_in_tasks(spark, tmp_path, monkeypatch):
    """Manifests rewritten one per Spark task: the same copy plan and staged manifests as the driver's."""
    _, t = _table(tmp_path, "mixed")
    params = RewriteTablePathParams(source_prefix=t.location, target_prefix="file:/elsewhere/t")
    driver = rewrite_table_path(t, params)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    jobs = []
    real = getattr(RTP, "slices_frame", None)

    def spy(session, slices):
        jobs.append(len(slices))
        return real(session, slices)

    monkeypatch.setattr(RTP, "slices_frame", spy, raising=False)
    tasks = rewrite_table_path(t, params, spark=spark)
    assert jobs  # the manifests were rewritten in Spark tasks
    assert sorted(target for _, target in tasks.copy_plan) == sorted(target for _, target in driver.copy_plan)
    assert tasks.rewritten_manifest_file_paths_count == driver.rewritten_manifest_file_paths_count > 1
    staged = _staged_entries(t.io, tasks)
    assert staged and staged == _staged_entries(t.io, driver)
    assert all(p.startswith("file:/elsewhere/t") for paths in staged.values() for p in paths)


def _files_below(root: str) -> tuple[set[str], int]:
    """The data files below ``root`` (relative: their names are the same in twin tables) and the
    number of metadata files (whose names hold uuids)."""
    found = {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}
    return {p for p in found if p.startswith("data")}, sum(1 for p in found if p.startswith("metadata"))


def test_expire_snapshots_compares_in_tasks(spark, tmp_path, monkeypatch):
    """The expired snapshots' content files compared with the kept ones' in Spark tasks (streamed back
    with ``toLocalIterator``): the same result and the same files deleted as on the driver alone."""
    from procedures.core.gc.expire import ExpireSnapshotsParams
    from tests.helpers.gc_runs import expire_snapshots

    results, left = {}, {}
    for label, session in (("driver", None), ("tasks", spark)):
        cat, t = _table(tmp_path / label, "mixed")
        t = commit(t, [DeleteFiles([f.file_path for f in _live_files(t)[:7]])], policy=FAST)
        monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 10**6 if session is None else 0)
        params = ExpireSnapshotsParams(older_than_ms=t.metadata.current_snapshot().timestamp_ms + 1, retain_last=1)
        results[label] = expire_snapshots(t, params, spark=session)
        left[label] = _files_below(normalize_path(t.location).path)
    assert results["tasks"].used_spark and not results["driver"].used_spark
    assert results["tasks"].row() == results["driver"].row() and results["driver"].row()[0] == 8
    assert left["tasks"] == left["driver"] and len(left["tasks"][0]) == 60 - 8


def _live_files(t) -> list:
    return [e.data_file for m in _current_manifests(t) for e in read_manifest(t.io, m) if e.status != 2]


def _current_manifests(t) -> list:
    from procedures.spec.manifest.manifest_list import read_manifest_list

    return read_manifest_list(t.io, t.metadata.current_snapshot().manifest_list)


def test_compute_table_stats_in_tasks(spark, tmp_path):
    """Theta sketches built in Spark tasks, one per task, unioned on the driver: the driver's NDVs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    import_reference("datasketches", "Apache DataSketches not installed: pip install 'iceberg-procedures[stats]'")
    from tests.helpers.capability_actions import compute_table_stats

    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/s", spec=UNPARTITIONED, format_version=2)
    t = cat.create_table(("db", "s"), md)
    schema = pa.schema([pa.field("id", pa.int64(), False, metadata={b"PARQUET:field_id": b"1"}),
                        pa.field("p", pa.int32(), True, metadata={b"PARQUET:field_id": b"2"})])
    files = []
    for k in range(6):
        path = f"{normalize_path(t.location).path}/data/part-{k}.parquet"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        ids = list(range(k * 300, k * 300 + 500))  # overlapping ranges: distinct ids 2,000
        pq.write_table(pa.table([pa.array(ids, pa.int64()), pa.array([i % 7 for i in ids], pa.int32())], schema=schema), path)
        files.append(DataFile(path, FileFormat.PARQUET, (), len(ids), os.path.getsize(path)))
    t = commit(t, [FastAppend(files)], policy=FAST)
    ndvs = {}
    for label, session in (("driver", None), ("tasks", spark)):
        stats = compute_table_stats(t, spark=session, committer=lambda table, ops: table)
        ndvs[label] = [(b.fields, b.properties["ndv"]) for b in stats.blob_metadata]
        os.remove(normalize_path(stats.statistics_path).path)
    assert ndvs["tasks"] == ndvs["driver"] == [((1,), "2000"), ((2,), "7")]
