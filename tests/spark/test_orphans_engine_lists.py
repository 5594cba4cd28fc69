"""remove_orphan_files with the manifest lists read in Spark tasks (many snapshots): the same orphans as
the driver's read, on a history with a branch, a delete and merged manifests, and a commit landing
during the run keeps what it references although the driver never held the manifests."""

from __future__ import annotations

import os
import re

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.gc import reachability as R
from procedures.core.gc.orphans import RemoveOrphanFilesParams
from procedures.core.kernel.manage import ManageRef
from procedures.core.kernel.operations import DeleteFiles, FastAppend, MergeAppend
from procedures.core.kernel.paths import normalize_path
from procedures.core.kernel.transaction import MetadataChange, RetryPolicy, commit
from procedures.core.kernel.updates import SetProperties
from procedures.errors import InvalidMetadataError
from procedures.spark import listing as L
from tests.helpers.gc_runs import remove_orphan_files
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.partitioning import PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.snapshots import SnapshotRefType
from procedures.spec.types import LONG, NestedField
from tests.helpers.faults import then
from tests.helpers.files import age_everything, touch

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True),))


def data_file(path: str) -> DataFile:
    return DataFile(path, FileFormat.PARQUET, (), 1, 1)


def history(tmp_path):
    """A table of a dozen snapshots (a branch, a delete rewriting a manifest, a merge) and its orphans."""
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=PartitionSpec(0, ()),
                               format_version=2)
    t = cat.create_table(("db", "t"), md)
    loc = t.location

    def append(name: str, op=FastAppend, **kw):
        return commit(t, [op([data_file(touch(f"{loc}/data/{name}.parquet"))], **kw)], policy=FAST)

    for i in range(5):
        t = append(f"f{i}")
    t = commit(t, [ManageRef("create", "b", SnapshotRefType.BRANCH)], policy=FAST)
    t = append("fb1", branch="b")
    t = commit(t, [DeleteFiles([f"{loc}/data/f2.parquet"])], policy=FAST)
    t = commit(t, [MetadataChange((SetProperties((("commit.manifest.min-count-to-merge", "2"),)),))], policy=FAST)
    t = append("f5", MergeAppend)
    t = append("fb2", branch="b")
    t = append("f6")
    orphans = {touch(f"{loc}/data/orphan-{i}.parquet") for i in range(3)}
    orphans.add(touch(f"{loc}/metadata/orphan-m0.avro"))
    age_everything(loc)
    return cat, orphans


def referenced_exist(t) -> None:
    md = t.metadata
    sm = R.read_snapshot_manifests(t.io, md)
    paths = [p for p in sm.manifest_lists.values() if p] + list(sm.distinct())
    paths += list(R.content_paths_driver(t.io, sm.distinct().values()))
    missing = [p for p in paths if not os.path.exists(normalize_path(p).path)]
    assert not missing


def run(spark, cat, monkeypatch, engine: bool, **kw):
    calls = []
    real = L.manifest_rows_dataframe

    def spy(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(L, "manifest_rows_dataframe", spy)
    monkeypatch.setattr(R, "DRIVER_MAX_LISTS", 0 if engine else 10**6)
    result = remove_orphan_files(cat.load_table(("db", "t")), RemoveOrphanFilesParams(**kw), spark=spark)
    assert bool(calls) is engine and (result.used_spark or not engine)
    return result


def found(result) -> set[str]:
    return {normalize_path(p).path for p in result.orphan_file_locations}


def test_lists_read_in_spark_find_the_driver_read_orphans(spark, tmp_path, monkeypatch):
    cat, orphans = history(tmp_path)
    driver = run(spark, cat, monkeypatch, False, dry_run=True)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)  # the lists on the driver, the manifests in Spark
    spark_manifests = run(spark, cat, monkeypatch, False, dry_run=True)
    engine = run(spark, cat, monkeypatch, True, dry_run=True)
    # the planted orphans, and nothing else: a merge append deletes the manifest it wrote and then
    # merged away (as Java does), so no merge leaves an orphan of its own
    assert found(driver) == found(spark_manifests) == found(engine) == orphans
    deleted = run(spark, cat, monkeypatch, True)
    assert found(deleted) == found(driver) and not any(os.path.exists(p) for p in found(driver))
    referenced_exist(cat.load_table(("db", "t")))


def test_a_commit_during_a_run_with_lists_in_spark_keeps_what_it_references(spark, tmp_path, monkeypatch):
    """After matching and before the deletes, a merge commit adds a file the listing saw as an orphan
    and rewrites the manifests: the guard reads the new manifests (and only then asks Spark for the
    ones it had seen) and keeps the file."""
    cat, orphans = history(tmp_path)
    loc = cat.load_table(("db", "t")).location
    late = touch(f"{loc}/data/late.parquet")
    then(monkeypatch, L, "find_orphans_dataframe",
         lambda: commit(cat.load_table(("db", "t")), [MergeAppend([data_file(late)])], policy=FAST))
    result = run(spark, cat, monkeypatch, True)
    assert found(result) == orphans
    assert os.path.exists(late) and not any(os.path.exists(p) for p in orphans)
    referenced_exist(cat.load_table(("db", "t")))


@pytest.mark.parametrize("damage", ["missing", "corrupt", "missing manifest"])
@pytest.mark.parametrize("engine", [False, True])
def test_a_damaged_manifest_list_fails_the_run_typed_and_deletes_nothing(spark, tmp_path, monkeypatch, damage, engine):
    """Without one snapshot's list (or a manifest) what it references is unknown: the run stops with
    the same typed error naming the file whether it is read on the driver or in Spark tasks, and
    every file, the orphans too, is still there."""
    cat, orphans = history(tmp_path)
    t = cat.load_table(("db", "t"))
    victim = t.metadata.snapshots[2].manifest_list
    if damage == "missing manifest":
        victim = R.read_snapshot_manifests(t.io, t.metadata).distinct()
        victim = sorted(victim)[0]
    local = normalize_path(victim).path
    if damage.startswith("missing"):
        os.remove(local)
    else:
        with open(local, "r+b") as f:
            f.truncate(os.path.getsize(local) // 2)
    monkeypatch.setattr(R, "DRIVER_MAX_LISTS", 0 if engine else 10**6)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0 if engine else 10**6)
    with pytest.raises(InvalidMetadataError, match=re.escape(os.path.basename(local))) as e:
        remove_orphan_files(t, RemoveOrphanFilesParams(), spark=spark)
    assert ("in a Spark task" in str(e.value)) is engine
    assert all(os.path.exists(p) for p in orphans)


@pytest.mark.parametrize("engine", [False, True])
def test_an_expire_racing_the_run_makes_it_start_over(spark, tmp_path, monkeypatch, engine):
    """An expire_snapshots between the listing and the metadata reads deletes manifest lists the run's
    metadata names: read on the driver or in Spark tasks, the run reads the table again and finishes."""
    from procedures.core.gc.expire import ExpireSnapshotsParams
    from procedures.spark.engine.gc_steps import GcSteps
    from tests.helpers.gc_runs import expire_snapshots

    cat, orphans = history(tmp_path)
    expire = lambda: expire_snapshots(cat.load_table(("db", "t")),  # noqa: E731
                                      ExpireSnapshotsParams(older_than_ms=2**62, retain_last=1))
    then(monkeypatch, GcSteps, "list_files", expire)
    result = run(spark, cat, monkeypatch, engine)
    assert orphans <= found(result) and not any(os.path.exists(p) for p in orphans)
    referenced_exist(cat.load_table(("db", "t")))
