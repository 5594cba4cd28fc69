"""Garbage collection stays inside the table (issue 12): path normalisation, the ``location`` check of
remove_orphan_files, files outside the table referenced by expired snapshots, and the re-read of the
metadata right before deleting -- on the hadoop and the jdbc (SQLite) catalogs.

After every call the test checks that each file the metadata references still exists."""

from __future__ import annotations

import os
import time

import pytest

from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import DeleteFiles, FastAppend
from procedures.core.kernel.paths import (
    PathSet, is_within, normalize_path, path_keys, plain_prefix, plainly_within, relative_path,
)
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import ValidationError
from procedures.core.gc import expire as E
from procedures.core.gc import reachability as R
from procedures.core.gc.delete_guard import DeleteGuard, table_roots
from procedures.core.gc import orphans as O
from procedures.core.gc.expire import ExpireSnapshotsParams
from tests.helpers.gc_runs import expire_snapshots
from procedures.core.gc.orphans import RemoveOrphanFilesParams
from tests.helpers.gc_runs import remove_orphan_files
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.partitioning import PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, NestedField
from tests.helpers.faults import then
from tests.helpers.catalogs import local_catalog
from tests.helpers.files import age_everything, all_files, touch

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True),))
FUTURE_MS = int(time.time() * 1000) + 3600_000


# ------------------------------------------------------------------------------------ normalisation
@pytest.mark.parametrize("text, expected", [
    ("/wh/t/data/..", ("/wh/t", None)),
    ("/wh/t/./data//x/", ("/wh/t/data/x", None)),
    ("file:/wh/t", ("/wh/t", "file")),
    ("file:///wh/t/", ("/wh/t", "file")),
    ("FILE:/wh/../../t", ("/t", "file")),  # '..' never climbs above the root
    ("s3a://b/k/../j", ("/j", "s3")),
    ("s3n://b", ("", "s3")),
    ("hdfs://nn:8020/a//b", ("/a/b", "hdfs")),
    ("rel/../../x", ("../x", None)),
])
def test_normalize_path(text, expected):
    n = normalize_path(text)
    assert (n.path, n.scheme) == expected


def test_both_readings_of_percent_escapes():
    lit, dec = path_keys("/wh/t/a%20b/%2E%2E/c")
    assert lit.path == "/wh/t/a%20b/%2E%2E/c" and dec.path == "/wh/t/c"
    assert len(path_keys("/wh/t/plain")) == 1
    assert "/wh/t/c" in PathSet(["file:///wh/t/a%20b/%2E%2E/c"])
    assert "/wh/t/a b" in PathSet(["s3://b/wh/t/a%20b"])
    assert "/wh/t/other" not in PathSet(["/wh/t/a%20b"])


@pytest.mark.parametrize("location, path, inside", [
    ("/wh/t", "/wh/t/data/x.parquet", True),
    ("/wh/t", "file:/wh/t/data/x.parquet", True),      # file: and plain paths are the same file system
    ("file:///wh/t/", "/wh/t", True),
    ("/wh/t", "/wh/tt/x", False),                      # a sibling sharing the prefix
    ("/wh/t", "/wh/t/data/../../u/x", False),          # '..' escaping the table
    ("/wh/t", "/wh/t/%2E%2E/u/x", False),              # the same escape, percent-encoded
    ("/wh/t", "/wh/x%2F..%2Ft/f", False),              # outside literally, inside only once decoded
    ("/wh/t", "s3://b/wh/t/x", False),                 # another scheme
    ("s3://b/wh/t", "s3a://b/wh/t/x", True),           # s3a and s3 are one store
    ("s3://b/wh/t", "s3://c/wh/t/x", False),           # another bucket
    ("/wh/t", "wh/t/x", False),                        # relative paths are nowhere
])
def test_is_within(location, path, inside):
    assert is_within(location, path) is inside


_LOCATIONS = ["/wh/t", "/wh/t/", "file:/wh/t", "file:///wh/t", "s3://b/wh/t", "S3A://B/wh/t", "s3://b", "/",
              "/wh/./t", "/wh/x/../t", "hdfs://nn:8020/wh/t", "/wh/a%20b", "wh/t", "/wh/t:x"]
_SUFFIXES = ["/d/x.parquet", "", "/", "/d/", "/./x", "/../x", "/d/../../u", "//x", "/%2E%2E/u", "/.hidden/x",
             "x", "t/x", "/d/x%20y", "/d:e/f", "/..", "/..x/y"]


#: the locations without a plain prefix, and whether they hold their own children (is_within)
_NO_PLAIN_PREFIX = {
    "/wh/a%20b": True,  # inside itself, but '%20' reads as ' ' or as '%20': no string prefix is safe
    "wh/t": False,      # a relative path is nowhere, not even inside itself
}


@pytest.mark.parametrize("location", _LOCATIONS)
def test_the_plain_prefix_test_never_places_inside_what_is_outside(location):
    prefix = plain_prefix(location)
    assert (prefix is None) is (location in _NO_PLAIN_PREFIX)
    if prefix is None:
        assert is_within(location, location.rstrip("/") + "/x") is _NO_PLAIN_PREFIX[location]
        return
    for suffix in _SUFFIXES:
        path = location.rstrip("/") + suffix
        if plainly_within(prefix, path):
            assert is_within(location, path), (location, path)
    assert plainly_within(prefix, location.rstrip("/") + "/data/p=1/f.parquet")


def test_relative_path():
    assert relative_path("file:/wh/t", "/wh/t/data/../metadata/") == "metadata"
    assert relative_path("/wh/t", "/wh/t//") == ""
    assert relative_path("/wh/t", "/wh/u") is None


# ------------------------------------------------------------------------------------ tables
@pytest.fixture(params=["hadoop", "jdbc"])
def catalog(request, tmp_path):
    return local_catalog(request.param, tmp_path)


def data_file(path: str) -> DataFile:
    return DataFile(path, FileFormat.PARQUET, (), 1, 1)


def make_table(catalog, name: str = "t", properties: dict | None = None):
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{catalog.warehouse}/db/{name}", spec=PartitionSpec(0, ()),
                               format_version=2, properties=properties or {})
    t = catalog.create_table(("db", name), md)
    for i in range(3):
        t = commit(t, [FastAppend([data_file(touch(f"{t.location}/data/f{i}.parquet"))])], policy=FAST)
    age_everything(t.location)
    return t


def referenced(t) -> set[str]:
    """Every file the table's metadata references, as local paths."""
    md = t.metadata
    sm = R.read_snapshot_manifests(t.io, md)
    paths = [p for p in sm.manifest_lists.values() if p]
    paths += list(sm.distinct())
    paths += list(R.content_paths_driver(t.io, sm.distinct().values()))
    paths += R.metadata_file_paths(md, t.metadata_location)
    return {normalize_path(p).path for p in paths if not p.endswith("version-hint.text")}


def assert_intact(t) -> None:
    t.refresh()
    missing = {p for p in referenced(t) if not os.path.exists(p)}
    assert not missing, f"referenced files deleted: {sorted(missing)}"


def test_dotdot_inside_the_table_is_the_table(catalog):
    t = make_table(catalog)
    orphan = touch(f"{t.location}/data/orphan.parquet")
    stray = touch(f"{t.location}/metadata/stray.avro")
    # this call deleted half of the table's live files when '..' was compared as text
    result = remove_orphan_files(t, RemoveOrphanFilesParams(location=f"{t.location}/data/.."))
    assert {normalize_path(p).path for p in result.orphan_file_locations} == {orphan, stray}
    assert not os.path.exists(orphan) and not os.path.exists(stray)
    assert_intact(t)


@pytest.mark.parametrize("where", ["escape", "escape_deep", "other_table", "warehouse", "percent", "sibling",
                                   "elsewhere", "scheme", "empty"])
def test_locations_outside_the_table_are_refused(catalog, tmp_path, where):
    t = make_table(catalog)
    other = make_table(catalog, "u")
    touch(f"{other.location}/data/orphan-of-u.parquet")
    touch(f"{catalog.warehouse}/db/stray.parquet")
    touch(str(tmp_path / "elsewhere" / "x.parquet"))
    location = {
        "escape": f"{t.location}/..",
        "escape_deep": f"{t.location}/data/../../u",
        "other_table": other.location,
        "warehouse": catalog.warehouse,
        "percent": f"{t.location}/data/%2E%2E/%2E%2E",
        "sibling": f"{t.location}x",
        "elsewhere": str(tmp_path / "elsewhere"),
        "scheme": f"s3://bucket{t.location}",
        "empty": "  ",
    }[where]
    before = all_files(str(tmp_path))
    md_before = t.metadata_location
    for dry_run in (True, False):
        with pytest.raises(ValidationError) as e:
            remove_orphan_files(t, RemoveOrphanFilesParams(location=location, dry_run=dry_run))
        assert "location" in str(e.value) and (where == "empty" or t.location in str(e.value))
    assert all_files(str(tmp_path)) == before
    assert catalog.load_table(("db", "t")).metadata_location == md_before


@pytest.mark.parametrize("spelling", ["file:{loc}/data", "{loc}/data/", "{loc}//data", "file://{loc}/./data/x/.."])
def test_other_spellings_of_a_folder_inside_the_table(catalog, spelling):
    t = make_table(catalog)
    orphan = touch(f"{t.location}/data/orphan.parquet")
    outside_data = touch(f"{t.location}/metadata/stray.avro")
    result = remove_orphan_files(t, RemoveOrphanFilesParams(location=spelling.format(loc=t.location)))
    assert [normalize_path(p).path for p in result.orphan_file_locations] == [orphan]
    assert os.path.exists(outside_data)
    assert_intact(t)


def test_percent_encoded_names_are_one_file(catalog):
    """Metadata naming ``a%20b.parquet`` and a listing that shows ``a b.parquet`` (a layer decoded it)
    are the same file under one reading: it is kept."""
    t = make_table(catalog)
    decoded = touch(f"{t.location}/data/a b.parquet")
    encoded = touch(f"{t.location}/data/c%2Fd.parquet")
    t = commit(t, [FastAppend([data_file(f"{t.location}/data/a%20b.parquet"), data_file(encoded)])], policy=FAST)
    age_everything(t.location)
    orphan = touch(f"{t.location}/data/e%20f.parquet")
    result = remove_orphan_files(t, RemoveOrphanFilesParams())
    assert [normalize_path(p).path for p in result.orphan_file_locations] == [orphan]
    assert os.path.exists(decoded) and os.path.exists(encoded)


def test_dry_run_lists_exactly_what_a_real_run_deletes(catalog):
    t = make_table(catalog)
    for rel in ("data/o1.parquet", "data/x/o2.parquet", "o3.txt", "metadata/o4.avro"):
        touch(f"{t.location}/{rel}")
    for location in (f"{t.location}/data/../data", f"file:{t.location}/"):
        dry = remove_orphan_files(t, RemoveOrphanFilesParams(location=location, dry_run=True))
        before = all_files(t.location)
        real = remove_orphan_files(t, RemoveOrphanFilesParams(location=location))
        assert sorted(real.orphan_file_locations) == sorted(dry.orphan_file_locations)
        gone = before - all_files(t.location)
        assert gone == {normalize_path(p).path for p in dry.orphan_file_locations}
        assert_intact(t)


def test_a_commit_during_orphan_removal_keeps_what_it_references(catalog, monkeypatch):
    """A concurrent writer commits a file the listing saw as an orphan, after matching and before the
    delete: the re-read right before deleting keeps it."""
    t = make_table(catalog)
    late = touch(f"{t.location}/data/late.parquet")
    orphan = touch(f"{t.location}/data/orphan.parquet")
    then(monkeypatch, O, "find_orphans",
         lambda: commit(catalog.load_table(("db", "t")), [FastAppend([data_file(late)])], policy=FAST))
    for dry_run in (True, False):
        result = remove_orphan_files(catalog.load_table(("db", "t")), RemoveOrphanFilesParams(dry_run=dry_run))
        assert [normalize_path(p).path for p in result.orphan_file_locations] == [orphan]
    assert os.path.exists(late) and not os.path.exists(orphan)
    assert_intact(t)


def test_a_guard_given_its_manifests_lazily_asks_for_them_once(catalog, monkeypatch):
    """The guard of an engine-side read gets the seen manifests as a callable: it calls it once, at the
    first batch (every retained manifest is protected, issue 30), and once a commit lands it reads only
    the new manifests."""
    t = make_table(catalog)
    sm = R.read_snapshot_manifests(t.io, t.metadata)
    asked = []

    def seen():
        asked.append(1)
        return iter(list(sm.distinct()))

    guard = DeleteGuard(catalog.load_table(("db", "t")), (t.location,), metadata_location=t.metadata_location,
                        manifest_lists=[p for p in sm.manifest_lists.values() if p], manifests=seen, procedure="test")
    orphan = ("file:" + touch(f"{t.location}/data/orphan.parquet"), "orphan")
    assert asked == []
    assert guard.check([orphan]) == [orphan] and asked == [1]
    late = touch(f"{t.location}/data/late.parquet")
    commit(catalog.load_table(("db", "t")), [FastAppend([data_file(late)])], policy=FAST)
    read = []
    real = R.content_paths_driver

    def spy(io, manifests, **kw):
        manifests = list(manifests)
        read.extend(m.manifest_path for m in manifests)
        return real(io, manifests, **kw)

    monkeypatch.setattr(R, "content_paths_driver", spy)
    assert guard.check([(late, "orphan"), orphan]) == [orphan]
    assert guard.report.reachable == [late] and asked == [1]
    new = set(R.read_snapshot_manifests(t.io, catalog.load_table(("db", "t")).metadata).distinct()) - set(sm.distinct())
    assert len(new) == 1 and read == sorted(new)
    assert guard.check([orphan]) == [orphan] and asked == [1]
    # a second commit: the guard reads what it added, and never asks for the caller's manifests again
    later = touch(f"{t.location}/data/later.parquet")
    commit(catalog.load_table(("db", "t")), [FastAppend([data_file(later)])], policy=FAST)
    assert guard.check([(later, "orphan"), orphan]) == [orphan]
    assert guard.report.reachable == [late, later] and asked == [1]


def test_a_guard_holds_the_metadata_file_a_concurrent_commit_made_current(catalog):
    """A commit landing during the run writes a new current metadata file that no listing made before
    it knew: the guard re-reads the table and must hold that file (and the old one, now in the log)."""
    t = make_table(catalog)
    sm = R.read_snapshot_manifests(t.io, t.metadata)
    guard = DeleteGuard(catalog.load_table(("db", "t")), (t.location,), metadata_location=t.metadata_location,
                        manifest_lists=[p for p in sm.manifest_lists.values() if p], manifests=list(sm.distinct()),
                        procedure="test")
    late = touch(f"{t.location}/data/late.parquet")
    landed = commit(catalog.load_table(("db", "t")), [FastAppend([data_file(late)])], policy=FAST)
    orphan = ("file:" + touch(f"{t.location}/data/orphan.parquet"), "orphan")
    candidates = [(landed.metadata_location, "orphan"), (t.metadata_location, "orphan"), orphan]
    assert guard.check(candidates) == [orphan]
    assert sorted(guard.report.reachable) == sorted([landed.metadata_location, t.metadata_location])


def test_table_roots_are_the_location_and_the_write_paths_without_trailing_slashes():
    md, _ = new_table_metadata(schema=SCHEMA, location="s3://b/TAX/", properties={
        "write.data.path": "s3://b/dataX/", "write.metadata.path": "/", "write.object-storage.path": "s3://b/TAX"})
    assert table_roots(md) == ("s3://b/TAX", "s3://b/dataX", "/")


def test_a_guard_with_a_percent_escaped_root_still_places_plain_paths(catalog):
    t = make_table(catalog)
    guard = DeleteGuard(t, ("/wh/a%20b", t.location), metadata_location=t.metadata_location, manifest_lists=[],
                        manifests=[], procedure="test")
    assert guard.inside(f"{t.location}/data/x.parquet") and guard.inside("/wh/a%20b/x")
    assert not guard.inside("/wh/other/x")


def test_the_guard_says_what_it_keeps_and_why(catalog, caplog):
    t = make_table(catalog)
    sm = R.read_snapshot_manifests(t.io, t.metadata)
    guard = DeleteGuard(catalog.load_table(("db", "t")), (t.location,), metadata_location=t.metadata_location,
                        manifest_lists=[p for p in sm.manifest_lists.values() if p], manifests=list(sm.distinct()),
                        procedure="remove_orphan_files")
    # a commit lands during the run: its metadata file is reachable, though the caller's view lacked it
    landed = commit(catalog.load_table(("db", "t")), [FastAppend([data_file(touch(f"{t.location}/data/late.parquet"))])],
                    policy=FAST)
    outside = [(f"/elsewhere/f{i}", "orphan") for i in range(12)]
    with caplog.at_level("WARNING", logger="procedures.core.gc.delete_guard"):
        assert guard.check(outside + [(landed.metadata_location, "orphan")]) == []
    assert caplog.messages == [
        "remove_orphan_files: not deleting 12 file(s) outside the table's folders: "
        + ", ".join(p for p, _ in outside[:10]) + " and 2 more",
        "remove_orphan_files: not deleting 1 file(s) reachable from the table's current metadata: "
        + landed.metadata_location,
    ]
    caplog.clear()
    with caplog.at_level("WARNING", logger="procedures.core.gc.delete_guard"):
        guard.check(outside[:10])
    assert caplog.messages == ["remove_orphan_files: not deleting 10 file(s) outside the table's folders: "
                               + ", ".join(p for p, _ in outside[:10])]


# ------------------------------------------------------------------------------------ expire_snapshots
def test_expire_never_deletes_outside_the_table(catalog, tmp_path):
    """A file brought in from another folder (as add_files does) and then removed is reported and kept."""
    t = make_table(catalog)
    foreign = touch(str(tmp_path / "source" / "part-0.parquet"))
    escaping = touch(f"{catalog.warehouse}/db/u-data.parquet")
    t = commit(t, [FastAppend([data_file(foreign), data_file(f"{t.location}/data/../../u-data.parquet")])], policy=FAST)
    t = commit(t, [DeleteFiles([foreign, f"{t.location}/data/../../u-data.parquet", f"{t.location}/data/f0.parquet"])],
               policy=FAST)
    result = expire_snapshots(t, ExpireSnapshotsParams(older_than_ms=FUTURE_MS, retain_last=1))
    assert result.deleted_data_files_count == 1 and not os.path.exists(f"{t.location}/data/f0.parquet")
    assert os.path.exists(foreign) and os.path.exists(escaping)
    assert sorted(result.kept_outside_location) == sorted([foreign, f"{t.location}/data/../../u-data.parquet"])
    assert_intact(t)


def test_expire_deletes_in_the_tables_own_write_data_path(catalog, tmp_path):
    data_root = str(tmp_path / "elsewhere-data")
    t = make_table(catalog, properties={"write.data.path": data_root})
    mine = touch(f"{data_root}/d.parquet")
    t = commit(t, [FastAppend([data_file(mine)])], policy=FAST)
    t = commit(t, [DeleteFiles([mine])], policy=FAST)
    result = expire_snapshots(t, ExpireSnapshotsParams(older_than_ms=FUTURE_MS, retain_last=1))
    assert result.deleted_data_files_count == 1 and not os.path.exists(mine)
    assert_intact(t)


def test_expire_keeps_a_file_recommitted_before_the_delete(catalog, monkeypatch):
    t = make_table(catalog)
    f0 = f"{t.location}/data/f0.parquet"
    t = commit(t, [DeleteFiles([f0])], policy=FAST)
    real = E.delete_files

    def commit_then_delete(io, paths, **kwargs):
        # the files were found before expire's commit; this one lands after it, before the deletes
        commit(catalog.load_table(("db", "t")), [FastAppend([data_file(f0)])], policy=FAST)
        return real(io, paths, **kwargs)

    monkeypatch.setattr(E, "delete_files", commit_then_delete)
    result = expire_snapshots(t, ExpireSnapshotsParams(older_than_ms=FUTURE_MS, retain_last=1))
    assert os.path.exists(f0) and result.kept_reachable == (f0,) and result.deleted_data_files_count == 0
    assert_intact(t)


def test_expire_compares_spellings_of_retained_files(catalog):
    """A retained snapshot naming a file as ``file:/x`` keeps the ``/x`` an expired one named."""
    t = make_table(catalog)
    f0 = f"{t.location}/data/f0.parquet"
    t = commit(t, [DeleteFiles([f0])], policy=FAST)
    t = commit(t, [FastAppend([data_file(f"file://{t.location}/data/./f0.parquet")])], policy=FAST)
    result = expire_snapshots(t, ExpireSnapshotsParams(older_than_ms=FUTURE_MS, retain_last=1))
    assert result.deleted_data_files_count == 0 and os.path.exists(f0)
    assert_intact(t)
