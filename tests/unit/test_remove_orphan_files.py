"""remove_orphan_files on our hadoop catalog with real files: what is an orphan (hidden paths,
partition dirs starting with '_', untracked metadata.json, age), dry_run, the 24-hour guard,
gc.enabled, prefix mismatches in each mode, URI normalisation, location, stream_results and the
procedure through the registry."""

from __future__ import annotations

import datetime as dt

import os
import time

import pyarrow.fs as pafs
import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import DeleteFiles, FastAppend
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import ValidationError
from procedures.frontend import runner
from procedures.core.gc import orphans as O
from procedures.spark.engine.gc_steps import GcSteps
from procedures.core.kernel.paths import flatten_equal_map, normalize_path
from procedures.core.gc.hidden_paths import HiddenPathFilter
from procedures.core.gc.orphans import RemoveOrphanFilesParams, find_orphans
from procedures.io.directory_walk import modified_before, walk
from tests.helpers.gc_runs import remove_orphan_files
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import LONG, NestedField
from tests.helpers.files import age_everything, all_files, touch

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True), NestedField(2, "_p", LONG)))
SPEC = PartitionSpec(0, (PartitionField(2, 1000, parse_transform("identity"), "_p"),))


@pytest.fixture()
def catalog(tmp_path):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    return cat


def make_table(catalog, name="t", properties=None):
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{catalog.warehouse}/db/{name}", spec=SPEC,
                               format_version=2, properties=properties or {})
    t = catalog.create_table(("db", name), md)
    files = [DataFile(touch(f"{t.location}/data/_p={i}/f{i}.parquet"), FileFormat.PARQUET, (i,), 1, 1) for i in range(3)]
    t = commit(t, [FastAppend(files[:2])], policy=FAST)
    t = commit(t, [DeleteFiles([files[0].file_path])], policy=FAST)  # f0 stays referenced by snapshot 1
    t = commit(t, [FastAppend(files[2:])], policy=FAST)
    age_everything(t.location)
    return t


def q(path: str) -> str:
    """Hadoop's spelling of a listed local file."""
    return "file:" + path


def plant_orphans(t) -> dict[str, str]:
    loc = t.location
    return {
        "orphan": touch(f"{loc}/data/_p=1/orphan.parquet"),
        "orphan_manifest": touch(f"{loc}/metadata/orphan-m0.avro"),
        "stale_metadata": touch(f"{loc}/metadata/stale.metadata.json"),
        "top": touch(f"{loc}/stray.txt"),
        "young": touch(f"{loc}/data/_p=0/young.parquet", mtime=None),
        "hidden_file": touch(f"{loc}/data/_p=0/.f0.parquet.crc"),
        "success": touch(f"{loc}/data/_SUCCESS"),
        "hidden_dir": touch(f"{loc}/data/_temporary/0/x.parquet"),
        "dot_dir": touch(f"{loc}/.staging/y.parquet"),
    }


def test_orphans_are_found_and_deleted_and_nothing_referenced_is(catalog):
    t = make_table(catalog)
    planted = plant_orphans(t)
    referenced = all_files(t.location) - set(planted.values())
    result = remove_orphan_files(t, RemoveOrphanFilesParams())
    expected = {q(planted[k]) for k in ("orphan", "orphan_manifest", "stale_metadata", "top")}
    assert set(result.orphan_file_locations) == expected
    assert result.orphan_count == 4 and result.deleted_count == 4
    left = all_files(t.location)
    assert referenced <= left  # every data file, manifest, list, metadata.json and version-hint survives
    assert not {planted[k] for k in ("orphan", "orphan_manifest", "stale_metadata", "top")} & left
    for k in ("young", "hidden_file", "success", "hidden_dir", "dot_dir"):
        assert planted[k] in left
    assert os.path.exists(f"{t.location}/metadata/version-hint.text")
    assert catalog.load_table(("db", "t")).metadata == t.metadata


def test_dry_run_deletes_nothing(catalog):
    t = make_table(catalog)
    planted = plant_orphans(t)
    before = all_files(t.location)
    result = remove_orphan_files(t, RemoveOrphanFilesParams(dry_run=True))
    assert q(planted["orphan"]) in result.orphan_file_locations and result.deleted_count == 0
    assert all_files(t.location) == before


def test_explicit_older_than_includes_young_files_only_when_testing(catalog):
    t = make_table(catalog)
    young = touch(f"{t.location}/data/_p=0/young.parquet", mtime=None)
    now = int(time.time() * 1000)
    with pytest.raises(ValidationError, match="Cannot remove orphan files with an interval less than 24 hours"):
        remove_orphan_files(t, RemoveOrphanFilesParams(older_than_ms=now - 3600_000))
    assert os.path.exists(young)
    result = remove_orphan_files(t, RemoveOrphanFilesParams(older_than_ms=now + 10_000, testing=True))
    assert result.orphan_file_locations == (q(young),) and not os.path.exists(young)
    # an explicit value at least 24 h back is accepted
    assert remove_orphan_files(t, RemoveOrphanFilesParams(older_than_ms=now - 25 * 3600_000)).orphan_count == 0


@pytest.mark.parametrize("kw, message", [
    ({"max_concurrent_deletes": 0}, "max_concurrent_deletes should have value > 0, value: 0"),
    ({"prefix_mismatch_mode": "bogus"}, "Invalid mode: bogus"),
])
def test_bad_arguments(catalog, kw, message):
    t = make_table(catalog)
    orphan = touch(f"{t.location}/data/orphan.parquet")
    with pytest.raises(ValidationError, match=message):
        remove_orphan_files(t, RemoveOrphanFilesParams(**kw))
    assert os.path.exists(orphan)


def test_gc_disabled(catalog):
    t = make_table(catalog, properties={"gc.enabled": "false"})
    orphan = touch(f"{t.location}/data/orphan.parquet")
    with pytest.raises(ValidationError, match=r"Cannot delete orphan files: GC is disabled"):
        remove_orphan_files(t, RemoveOrphanFilesParams())
    assert os.path.exists(orphan)


def test_mode_is_case_insensitive():
    assert RemoveOrphanFilesParams(prefix_mismatch_mode="delete").mode() == "DELETE"
    assert RemoveOrphanFilesParams().mode() == "ERROR"


# ------------------------------------------------------------------------------------ prefix mismatch
def mismatched_table(catalog):
    """A table whose metadata names one data file under hdfs://nn1 with the same path as a local file."""
    t = make_table(catalog)
    local = touch(f"{t.location}/data/_p=5/remote.parquet")
    remote = DataFile(f"hdfs://nn1{local}", FileFormat.PARQUET, (5,), 1, 1)
    t = commit(t, [FastAppend([remote])], policy=FAST)
    age_everything(t.location)
    return t, local


def test_prefix_mismatch_error_lists_the_conflicts_and_deletes_nothing(catalog):
    t, local = mismatched_table(catalog)
    orphan = touch(f"{t.location}/data/orphan.parquet")
    with pytest.raises(ValidationError) as e:
        remove_orphan_files(t, RemoveOrphanFilesParams())
    assert "Unable to determine whether certain files are orphan" in str(e.value)
    assert "Conflicting authorities/schemes: [(hdfs, file), (nn1, null)]." in str(e.value)
    assert os.path.exists(local) and os.path.exists(orphan)


def test_prefix_mismatch_ignore_and_delete(catalog):
    t, local = mismatched_table(catalog)
    result = remove_orphan_files(t, RemoveOrphanFilesParams(prefix_mismatch_mode="IGNORE"))
    assert result.orphan_file_locations == () and os.path.exists(local)
    result = remove_orphan_files(t, RemoveOrphanFilesParams(prefix_mismatch_mode="DELETE"))
    assert result.orphan_file_locations == (q(local),) and not os.path.exists(local)


def test_equal_schemes_and_authorities_resolve_the_mismatch(catalog):
    t, local = mismatched_table(catalog)
    result = remove_orphan_files(t, RemoveOrphanFilesParams(equal_schemes={"hdfs,viewfs": "file"},
                                                            equal_authorities={"nn1": ""}))
    assert result.orphan_file_locations == () and os.path.exists(local)


def test_uri_normalisation():
    assert normalize_path("file:/a//b/") == normalize_path("file:///a/b")
    assert normalize_path("file:/a//b/").key() == ("file", None, "/a/b")
    for text in ("file:/wh/t/x", "file:///wh/t/x", "/wh/t/x", "/wh/t/./data/../x"):
        assert normalize_path(text).path == "/wh/t/x"
    assert normalize_path("file:///wh/x").authority is None and normalize_path("/wh/x").scheme is None
    u = normalize_path("s3a://Bucket/p/x", None, {"Bucket": "b"})
    assert (u.scheme, u.authority, u.path) == ("s3", "b", "/p/x")
    assert flatten_equal_map({" a , b ": " c "}) == {"a": "c", "b": "c"}


@pytest.mark.parametrize("actual, valid, mode, expected", [
    (["s3a://b/t/x", "s3://b/t/y"], ["s3://b/t/x"], "ERROR", ["s3://b/t/y"]),  # s3a == s3 by default
    (["S3://B/t/x"], ["s3://b/t/x"], "ERROR", []),  # case-insensitive components
    (["file:/t/x"], ["/t/x"], "ERROR", []),  # no scheme in metadata matches any
    (["gs://b/t/x"], ["s3://b/t/x"], "IGNORE", []),
    (["gs://b/t/x"], ["s3://b/t/x"], "DELETE", ["gs://b/t/x"]),
    (["s3://c/t/x"], ["s3://b/t/x", "s3://c/t/x"], "DELETE", []),  # one exact match is enough
])
def test_find_orphans(actual, valid, mode, expected):
    assert find_orphans(actual, valid, equal_schemes={}, equal_authorities={}, mode=mode) == expected


def test_find_orphans_error_names_scheme_and_authority_pairs():
    with pytest.raises(ValidationError, match=r"Conflicting authorities/schemes: \[\(b1, b2\), \(s3, gs\)\]\."):
        find_orphans(["gs://b2/t/x"], ["s3://b1/t/x"], equal_schemes={}, equal_authorities={}, mode="ERROR")


# ------------------------------------------------------------------------------------ listing, location, streaming
def test_hidden_path_filter_and_walk(tmp_path):
    f = HiddenPathFilter(("_p=",))
    assert f.accept("_p=1") and f.accept("x.parquet") and not f.accept("_SUCCESS") and not f.accept(".crc")
    assert not HiddenPathFilter().accept("_p=1")
    root = str(tmp_path)
    for i in range(5):
        touch(f"{root}/d{i}/e/f.parquet")
    files, pending = walk([root], int(time.time() * 1000), f, max_dirs=3)
    # the root and d0, d1 listed; d2..d4 and d0/e, d1/e left over
    assert len(pending) == 5 and not files
    files, pending = walk([root], int(time.time() * 1000), f)
    assert len(files) == 5 and not pending


def test_walk_file_limit_still_hands_over_enough_directories(tmp_path):
    """A big folder listed first (the metadata folder) fills the driver's file limit; the walk goes
    on until ``min_pending`` directories are left, so the data tree is not one Spark task."""
    root = str(tmp_path)
    for i in range(6):
        touch(f"{root}/meta/m{i}.avro")
    for i in range(4):
        touch(f"{root}/x/data/p={i}/f.parquet")
    now = int(time.time() * 1000)
    files, pending = walk([root], now, HiddenPathFilter(), max_files=5, min_pending=3)
    assert len(files) == 6 and sorted(p.rsplit("/", 1)[-1] for p in pending) == [f"p={i}" for i in range(4)]
    files, pending = walk([root], now, HiddenPathFilter(), max_files=5)
    assert len(files) == 6 and len(pending) == 1  # without min_pending: stopped at the first folder past it


def test_location_limits_the_listing(catalog):
    t = make_table(catalog)
    planted = plant_orphans(t)
    result = remove_orphan_files(t, RemoveOrphanFilesParams(location=f"{t.location}/data"))
    assert result.orphan_file_locations == (q(planted["orphan"]),)
    assert os.path.exists(planted["orphan_manifest"]) and os.path.exists(planted["top"])


def test_prefix_listing_finds_the_same_orphans(catalog):
    t = make_table(catalog)
    planted = plant_orphans(t)
    result = remove_orphan_files(t, RemoveOrphanFilesParams(prefix_listing=True, dry_run=True))
    assert {normalize_path(p).path for p in result.orphan_file_locations} == {
        planted[k] for k in ("orphan", "orphan_manifest", "stale_metadata", "top")}


def test_stream_results_caps_the_rows_but_deletes_everything(catalog, monkeypatch):
    monkeypatch.setattr(O, "MAX_STREAMED_RESULTS", 2)
    t = make_table(catalog)
    planted = [touch(f"{t.location}/data/o{i}.parquet") for i in range(3)]
    result = remove_orphan_files(t, RemoveOrphanFilesParams(stream_results=True))
    assert len(result.orphan_file_locations) == 2 and result.orphan_count == 3 and result.deleted_count == 3
    assert not any(os.path.exists(p) for p in planted)


def test_procedure_through_the_registry(catalog):
    t = make_table(catalog)
    orphan = touch(f"{t.location}/data/orphan.parquet")
    conf = {"spark.sql.catalog.local.type": "hadoop", "spark.sql.catalog.local.warehouse": catalog.warehouse}
    recent = dt.datetime.now(dt.timezone.utc)
    with pytest.raises(ValidationError, match="interval less than 24 hours"):
        runner.run("remove_orphan_files", kwargs={"table": "db.t", "older_than": recent}, catalog="local", conf=conf,
                     lenient=True)
    res = runner.run("remove_orphan_files", kwargs={"table": "db.t", "dry_run": True}, catalog="local", conf=conf)
    assert res.rows == [(q(orphan),)] and [c.name for c in res.columns] == ["orphan_file_location"]
    res = runner.run("remove_orphan_files", kwargs={"table": "db.t", "older_than": recent + dt.timedelta(seconds=1)},
                       catalog="local", conf={**conf, "spark.testing": "true"}, lenient=True)
    assert res.rows == [(q(orphan),)] and not os.path.exists(orphan)
    with pytest.raises(ValidationError, match="Invalid mode: nope"):
        runner.run("remove_orphan_files", kwargs={"table": "db.t", "prefix_mismatch_mode": "nope"},
                     catalog="local", conf=conf)


# ------------------------------------------------------------------------------------ the age cutoff after matching
def test_a_young_file_is_never_an_orphan_nor_a_conflict(catalog):
    """A local walk lists names without their ages and applies ``older_than`` to the unmatched files
    only: a file modified since must stay out of every mode's verdict, as if never listed."""
    t, local = mismatched_table(catalog)
    young_conflict = touch(f"{t.location}/data/_p=6/young-remote.parquet", mtime=None)
    t = commit(t, [FastAppend([DataFile(f"hdfs://nn1{young_conflict}", FileFormat.PARQUET, (6,), 1, 1)])], policy=FAST)
    os.utime(local, (time.time() - 10 * 24 * 3600,) * 2)
    young = touch(f"{t.location}/data/_p=1/young.parquet", mtime=None)
    old = touch(f"{t.location}/data/_p=1/old.parquet")
    with pytest.raises(ValidationError) as e:  # the old mismatch alone is a conflict
        remove_orphan_files(t, RemoveOrphanFilesParams())
    assert "[(hdfs, file), (nn1, null)]" in str(e.value)
    result = remove_orphan_files(t, RemoveOrphanFilesParams(prefix_mismatch_mode="DELETE", dry_run=True))
    assert sorted(result.orphan_file_locations) == sorted([q(local), q(old)])
    os.utime(local, None)  # now young too: no conflict left, and never deleted
    result = remove_orphan_files(t, RemoveOrphanFilesParams())
    assert result.orphan_file_locations == (q(old),)
    result = remove_orphan_files(t, RemoveOrphanFilesParams(prefix_mismatch_mode="DELETE"))
    assert result.orphan_file_locations == () and all(os.path.exists(p) for p in (young, young_conflict, local))


def test_find_orphans_asks_the_age_of_unmatched_files_only():
    asked: list[list[str]] = []

    def old_enough(paths):
        asked.append(list(paths))
        return [not p.endswith("young") for p in paths]

    actual = ["/t/a", "/t/young", "hdfs://nn2/t/b-young", "/t/c", "hdfs://nn2/t/d"]
    valid = ["/t/a", "hdfs://nn1/t/b-young", "hdfs://nn1/t/d"]
    with pytest.raises(ValidationError, match=r"\[\(nn1, nn2\)\]"):
        find_orphans(actual, valid, equal_schemes={}, equal_authorities={}, mode="ERROR", old_enough=old_enough)
    assert asked == [["/t/young", "hdfs://nn2/t/b-young", "/t/c", "hdfs://nn2/t/d"]]
    assert find_orphans(actual, valid, equal_schemes={}, equal_authorities={}, mode="DELETE",
                        old_enough=old_enough) == ["/t/c", "hdfs://nn2/t/d"]
    assert find_orphans(actual[:4], valid, equal_schemes={}, equal_authorities={}, mode="ERROR",
                        old_enough=old_enough) == ["/t/c"]


def test_walk_without_a_cutoff_and_modified_before(tmp_path):
    root = str(tmp_path)
    old, young = touch(f"{root}/d/old.parquet"), touch(f"{root}/d/young.parquet", mtime=None)
    os.makedirs(f"{root}/d/sub")
    now = int(time.time() * 1000)
    assert walk([root], now - 3600_000, HiddenPathFilter())[0] == [q(old)]
    files = sorted(walk([root], None, HiddenPathFilter())[0])
    assert files == [q(old), q(young)]
    gone = q(f"{root}/d/gone.parquet")
    assert modified_before(files + [gone, q(f"{root}/d/sub")], now - 3600_000) == [True, False, False, False]
    assert modified_before([old, young], now + 10_000) == [True, True]


def test_a_remote_file_of_unknown_age_is_never_old_enough():
    class Store:
        def __init__(self, mtime_ns):
            self.mtime_ns = mtime_ns

        def filesystem(self, path):
            outer = self

            class FS:
                def get_file_info(self, p):
                    return pafs.FileInfo(p, pafs.FileType.File, mtime=None if outer.mtime_ns is None else outer.mtime_ns / 1e9)
            return FS(), path.split("://", 1)[1]

    assert modified_before(["s3://b/t/data/x.parquet"], 10**13, io=Store(None)) == [False]
    assert modified_before(["s3://b/t/data/x.parquet"], 10**13, io=Store(1_000 * 10**9)) == [True]


# ---------------------------------------------------------------- a concurrent expire_snapshots
def _expire_all_but_the_last(catalog):
    from procedures.core.gc.expire import ExpireSnapshotsParams
    from tests.helpers.gc_runs import expire_snapshots

    return lambda: expire_snapshots(catalog.load_table(("db", "t")),
                                    ExpireSnapshotsParams(older_than_ms=2**62, retain_last=1))


def test_an_expire_racing_the_run_makes_it_read_the_metadata_again(catalog, monkeypatch):
    from tests.helpers.faults import then

    t = make_table(catalog)
    planted = plant_orphans(t)
    # the run lists the files, then an expire removes snapshots and their manifest lists before the
    # run reads them from the metadata it loaded
    then(monkeypatch, GcSteps, "list_files", _expire_all_but_the_last(catalog))
    result = remove_orphan_files(t, RemoveOrphanFilesParams())
    assert planted["orphan"] in {p.removeprefix("file:") for p in result.orphan_file_locations}
    assert not os.path.exists(planted["orphan"])
    # everything the current metadata references is still there
    current = catalog.load_table(("db", "t")).metadata
    assert all(os.path.exists(s.manifest_list) for s in current.snapshots)


def test_a_file_the_current_metadata_still_names_is_an_error(catalog):
    from procedures.errors import InvalidMetadataError

    t = make_table(catalog)
    gone = t.metadata.current_snapshot().manifest_list
    os.remove(gone)
    with pytest.raises(InvalidMetadataError, match="manifest list of snapshot .* is missing"):
        remove_orphan_files(t, RemoveOrphanFilesParams())


def test_refreshes_are_bounded(catalog, monkeypatch):
    from procedures.errors import InvalidMetadataError

    t = make_table(catalog)
    calls = []

    def always_gone(*args, **kwargs):
        # each attempt finds a file gone, and the table has changed each time
        calls.append(1)
        commit(catalog.load_table(("db", "t")), [FastAppend([])], policy=FAST)
        raise InvalidMetadataError("the manifest is missing", location="/nowhere/m.avro") from FileNotFoundError()

    monkeypatch.setattr(O, "valid_paths", always_gone)
    with pytest.raises(InvalidMetadataError):
        remove_orphan_files(t, RemoveOrphanFilesParams())
    assert len(calls) == O.MAX_METADATA_REFRESHES + 1
