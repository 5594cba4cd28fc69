"""Issue 30 (part A): no data loss from hostile or careless paths, without Spark, on the hadoop and the
jdbc (SQLite) catalogs.

* ``DROP TABLE ... PURGE`` deletes what the table's metadata reaches and nothing else: not another
  table sharing the folder (a jdbc table at the warehouse root), not a user's file, not a folder a
  symlink leads to; unreadable metadata or ``gc.enabled=false`` refuse with nothing changed.
* remove_orphan_files never follows a symlink (driver walk and prefix listing) and refuses a
  location that a symlink leads out of the table.
* rewrite_table_path never writes over an existing file: a staging folder inside another table, the
  table's own folder spelled another way, or a folder holding metadata is refused.

Every test hashes every file of the warehouse (and of the folder outside it a symlink reaches)
before and after.  ``tests/spark/test_hostile_paths_java.py`` reads the surviving tables back through
Iceberg Java, PyIceberg and DuckDB."""

from __future__ import annotations

import dataclasses

import os

import pytest

from procedures.catalog.base import removed_metadata_files
from procedures.spec.metadata import MetadataLogEntry
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.gc import reachability as R
from procedures.core.gc.delete_guard import DeleteGuard
from procedures.core.gc.orphans import RemoveOrphanFilesParams
from procedures.core.kernel.operations import FastAppend, RowDelta
from procedures.core.kernel.ownership import Ownership, is_link, is_within_resolved, resolved
from procedures.core.kernel.paths import normalize_path
from procedures.core.table_stats.statistics_files import RegisterStatistics
from procedures.core.table_relocation import relocation as RTP
from procedures.core.table_relocation.relocation import RewriteTablePathParams
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import InvalidMetadataError, NoSuchTableError, ValidationError
from procedures.io.delete_writers import write_position_delete_file
from procedures.io.fileio import FileAlreadyExistsError, FileIO
from tests.helpers.gc_runs import remove_orphan_files
from tests.helpers.capability_actions import rewrite_table_path
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.partitioning import PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.statistics import PartitionStatisticsFile, StatisticsFile
from procedures.spec.types import LONG, NestedField
from tests.helpers.catalogs import allow_overlap, local_catalog
from tests.helpers.files import age_everything, fingerprint, folder_state, touch, reached_paths

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True),))


# ------------------------------------------------------------------------------------ fixtures
@pytest.fixture(params=["hadoop", "jdbc"])
def catalog(request, tmp_path):
    return local_catalog(request.param, tmp_path)


@pytest.fixture()
def outside(tmp_path):
    """A folder outside the warehouse with files in it (what a symlink in a table may lead to)."""
    root = tmp_path / "outside"
    for rel in ("keep.parquet", "sub/keep2.parquet"):
        touch(str(root / rel))
    return str(root)


def data_file(path: str) -> DataFile:
    return DataFile(path, FileFormat.PARQUET, (), 1, 1)


def make_table(catalog, name: str = "t", location: str | None = None, properties: dict | None = None):
    """A table with two appends, a position delete file, a statistics and a partition statistics file."""
    location = location or f"{catalog.warehouse}/db/{name}"
    md, _ = new_table_metadata(schema=SCHEMA, location=location, spec=PartitionSpec(0, ()), format_version=2,
                               properties=properties or {})
    t = catalog.create_table(("db", name), md)
    files = [data_file(touch(f"{t.location}/data/{name}-f{i}.parquet")) for i in range(3)]
    t = commit(t, [FastAppend(files[:2])], policy=FAST)
    t = commit(t, [FastAppend(files[2:])], policy=FAST)
    deletes = write_position_delete_file(t.io, f"{t.location}/data/{name}-deletes.parquet",
                                         {files[0].file_path: [0]}, partition=())
    t = commit(t, [RowDelta(add_deletes=[deletes])], policy=FAST)
    sid = t.metadata.current_snapshot_id
    stats, pstats = touch(f"{t.location}/metadata/{sid}.stats"), touch(f"{t.location}/metadata/p-{sid}.parquet")
    t = commit(t, [RegisterStatistics(StatisticsFile(sid, stats, 1, 1))], policy=FAST)
    t = commit(t, [RegisterStatistics(PartitionStatisticsFile(sid, pstats, 1))], policy=FAST)
    age_everything(t.location)
    return t


def reached(t) -> set[str]:
    """Every file the table's metadata reaches, as local paths."""
    return reached_paths(t)


def state(*roots: str) -> dict[str, tuple]:
    """Every file (with its hash) and folder below each root, and every symlink found."""
    out = {}
    for root in roots:
        links = sorted(os.path.join(d, n) for d, ds, fs in os.walk(root) for n in ds + fs
                       if os.path.islink(os.path.join(d, n)))
        out[root] = (folder_state(root), links)
    return out


def without(files: dict[str, str], root: str, gone: set[str]) -> dict[str, str]:
    return {rel: h for rel, h in files.items() if os.path.join(root, rel) not in gone}


# ------------------------------------------------------------------------------------ ownership
def test_ownership_resolves_local_symlinks(tmp_path, outside):
    table = tmp_path / "t"
    touch(str(table / "data" / "f.parquet"))
    os.symlink(outside, table / "data" / "link")
    os.symlink(str(table / "data" / "f.parquet"), table / "data" / "flink")
    loc = str(table)
    assert is_within_resolved(loc, f"{loc}/data/f.parquet")
    assert is_within_resolved(f"file:{loc}", f"{loc}/./data//f.parquet")
    # lexically inside, really outside
    assert not is_within_resolved(loc, f"{loc}/data/link/keep.parquet")
    assert resolved(f"file:{loc}/data/link/sub") == f"{outside}/sub"
    owned = Ownership([loc])
    assert owned.owns(f"file://{loc}/data/f.parquet")
    assert not owned.owns(f"{loc}/data/link/keep.parquet")
    assert not owned.owns(f"{loc}/data/link/sub/keep2.parquet")
    assert not owned.owns(f"{loc}/data/flink")  # a symlink is never the table's, wherever it points
    assert is_link(f"file:{loc}/data/flink") and not is_link(f"{loc}/data/f.parquet")
    assert not owned.owns(f"{loc}x/data/f.parquet") and not owned.owns("file://host/x")
    assert owned.owns(f"s3://b{loc}/data/f.parquet") is False  # another scheme: not inside as written
    assert Ownership(["s3://b/t"]).owns("s3://b/t/data/f.parquet")  # no links to resolve there


def test_the_delete_guard_holds_back_files_reached_through_a_symlink(catalog, outside):
    t = make_table(catalog)
    os.symlink(outside, f"{t.location}/data/link")
    guard = DeleteGuard(t, (t.location,), metadata_location=t.metadata_location, manifest_lists=(), manifests=(),
                        procedure="test")
    inside = touch(f"{t.location}/data/orphan.parquet")
    items = [(inside, "orphan"), (f"{t.location}/data/link/keep.parquet", "orphan"), (f"{t.location}/data/link", "orphan")]
    assert guard.check(items) == [(inside, "orphan")]
    assert sorted(guard.report.outside) == sorted(p for p, _ in items[1:])


# ------------------------------------------------------------------------------------ purge
def test_purge_deletes_what_the_metadata_reaches_and_nothing_else(catalog, outside):
    t = make_table(catalog)
    other = make_table(catalog, "u")
    user_file = touch(f"{t.location}/notes.txt")
    unreferenced = touch(f"{t.location}/data/not-in-metadata.parquet")
    os.symlink(outside, f"{t.location}/data/link")
    os.symlink(f"{outside}/keep.parquet", f"{t.location}/data/flink.parquet")
    gone = reached(t)
    before = state(catalog.warehouse, outside)
    catalog.drop_table(("db", "t"), purge=True)
    with pytest.raises(NoSuchTableError):
        catalog.load_table(("db", "t"))
    after = state(catalog.warehouse, outside)
    assert after[outside] == before[outside]
    (files, _), links = after[catalog.warehouse]
    assert files == without(before[catalog.warehouse][0][0], catalog.warehouse, gone | {
        os.path.join(t.location, "metadata", "version-hint.text")})
    assert os.path.exists(user_file) and os.path.exists(unreferenced)
    assert links == before[catalog.warehouse][1]  # the links stay, and so does what they point at
    assert reached(catalog.load_table(("db", "u"))) <= {os.path.join(d, f) for d, _, fs in os.walk(other.location)
                                                         for f in fs}


def test_purge_removes_the_folders_it_empties(catalog):
    t = make_table(catalog)
    keep = make_table(catalog, "u")
    before_u = folder_state(keep.location)
    catalog.drop_table(("db", "t"), purge=True)
    assert not os.path.exists(t.location)  # every file was the table's: nothing is left, not even folders
    assert folder_state(keep.location) == before_u
    assert os.path.isdir(f"{catalog.warehouse}/db")  # the namespace is not the table's


def test_purge_of_a_jdbc_table_at_the_warehouse_root_keeps_the_other_tables(tmp_path, monkeypatch):
    """Creating such a table is refused now (the overlap rule); one made before the rule, or by
    another engine, still purges only what its metadata reaches."""
    wh = str(tmp_path / "wh")
    cat = local_catalog("jdbc", tmp_path)
    others = [make_table(cat, "u"), make_table(cat, "v")]
    allow_overlap(monkeypatch)
    t = make_table(cat, "root", location=wh)
    gone = reached(t)
    before = state(wh)
    cat.drop_table(("db", "root"), purge=True)
    (files, _), _ = state(wh)[wh]
    assert files == without(before[wh][0][0], wh, gone)
    for o in others:
        assert reached(cat.load_table(("db", o.identifier[-1]))) <= {os.path.join(wh, rel) for rel in files}


def test_purge_keeps_reached_files_that_are_not_the_tables(catalog, tmp_path, outside):
    """A file the metadata names outside the table (add_files), or through a symlinked folder, is kept."""
    t = make_table(catalog)
    imported = touch(str(tmp_path / "imports" / "a.parquet"))
    os.symlink(outside, f"{t.location}/data/link")
    t = commit(t, [FastAppend([data_file(imported), data_file(f"{t.location}/data/link/keep.parquet")])], policy=FAST)
    before = state(str(tmp_path / "imports"), outside)
    catalog.drop_table(("db", "t"), purge=True)
    assert state(str(tmp_path / "imports"), outside) == before
    assert os.path.islink(f"{t.location}/data/link")


@pytest.mark.parametrize("damage", ["manifest_list", "manifest", "missing_manifest"])
def test_unreadable_metadata_fails_the_purge_with_nothing_changed(catalog, damage):
    t = make_table(catalog)
    other = make_table(catalog, "u")
    sm = R.read_snapshot_manifests(t.io, t.metadata)
    target = normalize_path(t.metadata.current_snapshot().manifest_list if damage == "manifest_list"
                            else sorted(sm.distinct())[0]).path
    if damage == "missing_manifest":
        os.unlink(target)
    else:
        with open(target, "wb") as f:
            f.write(b"not avro")
    before = state(catalog.warehouse)
    with pytest.raises(InvalidMetadataError, match="Cannot purge db.t|Cannot purge local.db.t"):
        catalog.drop_table(("db", "t"), purge=True)
    assert state(catalog.warehouse) == before
    assert catalog.load_table(("db", "t")).metadata_location == t.metadata_location
    assert catalog.table_exists(("db", "u")) and other.location


def test_gc_disabled_refuses_the_purge_with_nothing_changed(catalog):
    t = make_table(catalog, properties={"gc.enabled": "false"})
    before = state(catalog.warehouse)
    with pytest.raises(ValidationError, match="Cannot purge table: GC is disabled"):
        catalog.drop_table(("db", "t"), purge=True)
    assert state(catalog.warehouse) == before
    assert catalog.load_table(("db", "t")).metadata_location == t.metadata_location


def test_hadoop_drop_without_purge_deletes_metadata_only(tmp_path, outside):
    """Java's HadoopCatalog deletes the whole table folder either way; here a drop without purge
    deletes the table's metadata (so it no longer exists) and keeps its data, the user's files and
    whatever a symlink reaches."""
    cat = local_catalog("hadoop", tmp_path)
    t = make_table(cat)
    user_file = touch(f"{t.location}/notes.txt")
    os.symlink(outside, f"{t.location}/data/link")
    data = {normalize_path(p).path for p in R.content_paths_driver(t.io, R.read_snapshot_manifests(
        t.io, t.metadata).distinct().values())}
    before_outside = state(outside)
    cat.drop_table(("db", "t"))
    assert not cat.table_exists(("db", "t"))
    left = {os.path.join(d, f) for d, _, fs in os.walk(t.location) for f in fs}
    assert left == data | {user_file}
    assert os.path.islink(f"{t.location}/data/link") and state(outside) == before_outside
    assert not os.path.exists(f"{t.location}/metadata")


def test_hadoop_drop_without_purge_of_unreadable_metadata_deletes_only_the_version_files(tmp_path):
    cat = local_catalog("hadoop", tmp_path)
    t = make_table(cat)
    lst = normalize_path(t.metadata.current_snapshot().manifest_list).path
    with open(lst, "wb") as f:
        f.write(b"not avro")
    meta = f"{t.location}/metadata"
    versions = {os.path.join(meta, n) for n in os.listdir(meta) if n.startswith("v") or n == "version-hint.text"}
    before = folder_state(t.location)[0]
    cat.drop_table(("db", "t"))
    assert not cat.table_exists(("db", "t"))
    assert folder_state(t.location)[0] == without(before, t.location, versions)


# ------------------------------------------------------------------------------------ remove_orphan_files
@pytest.mark.parametrize("prefix_listing", [False, True])
def test_orphan_listing_never_follows_a_symlink(catalog, outside, prefix_listing):
    t = make_table(catalog)
    orphan = touch(f"{t.location}/data/orphan.parquet")
    os.symlink(outside, f"{t.location}/data/link")
    os.symlink(f"{outside}/keep.parquet", f"{t.location}/data/flink.parquet")
    age_everything(outside)
    before = state(outside)
    result = remove_orphan_files(t, RemoveOrphanFilesParams(prefix_listing=prefix_listing))
    assert [normalize_path(p).path for p in result.orphan_file_locations] == [orphan]
    assert state(outside) == before
    assert os.path.islink(f"{t.location}/data/link") and os.path.islink(f"{t.location}/data/flink.parquet")
    assert reached(t) <= {os.path.join(d, f) for d, _, fs in os.walk(t.location) for f in fs}


@pytest.mark.parametrize("prefix_listing", [False, True])
def test_an_orphan_location_reached_through_a_symlink_is_refused(catalog, outside, prefix_listing):
    t = make_table(catalog)
    os.symlink(outside, f"{t.location}/data/link")
    os.symlink(f"{t.location}/metadata", f"{t.location}/data/meta")  # inside, but under names no metadata uses
    age_everything(outside)
    before = state(catalog.warehouse, outside)
    for location in (f"{t.location}/data/link", f"file:{t.location}/data/link/sub", f"{t.location}/data/meta"):
        for dry_run in (True, False):
            with pytest.raises(ValidationError, match="symlink"):
                remove_orphan_files(t, RemoveOrphanFilesParams(location=location, dry_run=dry_run,
                                                               prefix_listing=prefix_listing))
    assert state(catalog.warehouse, outside) == before


def test_the_prefix_listing_of_fileio_never_follows_a_symlink(tmp_path, outside):
    root = tmp_path / "t"
    f = touch(str(root / "data" / "f.parquet"))
    os.symlink(outside, root / "data" / "link")
    os.symlink(f"{outside}/keep.parquet", root / "flink")
    assert [i.path for i in FileIO().list_prefix(f"file:{root}")] == [f"file:{f}"]


# ------------------------------------------------------------------------------------ rewrite_table_path
def _stage(t, staging):
    return rewrite_table_path(t, RewriteTablePathParams(source_prefix=t.location, target_prefix="/copy/t",
                                                        staging_location=staging))


def test_staging_inside_another_table_is_refused(catalog):
    t = make_table(catalog)
    other = make_table(catalog, "u")
    before = state(catalog.warehouse)
    for staging in (other.location, f"{other.location}/metadata", f"file:{other.location}/./data//x"):
        with pytest.raises(ValidationError, match="inside the folder"):
            _stage(t, staging)
    assert state(catalog.warehouse) == before


@pytest.mark.parametrize("spelling", ["file:{loc}", "file://{loc}/", "{loc}/./", "{loc}//", "{loc}/data/..",
                                      "{loc}/metadata"])
def test_the_tables_own_folder_spelled_another_way_is_refused(catalog, spelling):
    t = make_table(catalog)
    before = state(catalog.warehouse)
    with pytest.raises(ValidationError, match="inside the folder|is the source prefix"):
        _stage(t, spelling.format(loc=t.location))
    assert state(catalog.warehouse) == before


def test_staging_reached_through_a_symlink_into_a_table_is_refused(catalog, tmp_path):
    t = make_table(catalog)
    os.symlink(t.location, tmp_path / "alias")
    before = state(catalog.warehouse)
    with pytest.raises(ValidationError, match="inside the folder"):
        _stage(t, str(tmp_path / "alias"))
    assert state(catalog.warehouse) == before


def test_a_staging_folder_holding_metadata_or_a_staged_name_is_refused(catalog, tmp_path):
    t = make_table(catalog)
    holding = str(tmp_path / "old-stage")
    touch(f"{holding}/elsewhere/00001-x.metadata.json")
    before = state(str(tmp_path / "old-stage"), catalog.warehouse)
    with pytest.raises(ValidationError, match="already holds table metadata"):
        _stage(t, holding)
    # a file at a path this run would stage (a manifest list's name) is never written over
    clash_dir = str(tmp_path / "clash")
    lst = t.metadata.current_snapshot().manifest_list
    clash = touch(f"{clash_dir}/metadata/{os.path.basename(lst)}")
    with pytest.raises(ValidationError, match="already holds"):
        _stage(t, clash_dir)
    with open(clash, "rb") as f:
        assert f.read() == b"x"
    assert state(str(tmp_path / "old-stage"), catalog.warehouse) == before
    # a second run into the folder of a first one is refused too (Java overwrites the first run's files)
    first = _stage(t, str(tmp_path / "s"))
    staged = folder_state(str(tmp_path / "s"))
    with pytest.raises(ValidationError, match="already holds"):
        _stage(t, str(tmp_path / "s"))
    assert folder_state(str(tmp_path / "s")) == staged and first.file_list_location.endswith("file-list")


def test_a_file_appearing_at_a_staged_path_after_the_checks_is_neither_overwritten_nor_removed(
        catalog, tmp_path, monkeypatch):
    t = make_table(catalog)
    staging = str(tmp_path / "stage")
    late = f"{staging}/metadata/{os.path.basename(t.metadata.current_snapshot().manifest_list)}"
    checks = RTP.check_staged_files

    def check_then_race(*args):
        checks(*args)
        touch(late)  # another writer, between the checks and the writes

    monkeypatch.setattr(RTP, "check_staged_files", check_then_race)
    with pytest.raises(FileAlreadyExistsError):
        _stage(t, staging)
    assert folder_state(staging)[0] == {os.path.relpath(late, staging): fingerprint(os.path.dirname(late))[
        os.path.basename(late)]}


def test_delete_after_commit_never_deletes_a_logged_file_outside_the_table(catalog, tmp_path, outside):
    """write.metadata.delete-after-commit deletes the metadata files a commit drops from the log; a
    (corrupt or hand-edited) log entry naming another table's metadata file, a file outside the
    table or one reached through a symlink is kept."""
    props = {"write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "1"}
    t = make_table(catalog, properties=props)
    other = make_table(catalog, "u")
    os.symlink(outside, f"{t.location}/metadata/link")
    own = t.metadata.metadata_log[-1].metadata_file
    forged = [MetadataLogEntry(1, other.metadata_location), MetadataLogEntry(2, f"{outside}/keep.parquet"),
              MetadataLogEntry(3, f"{t.location}/metadata/link/keep.parquet"), MetadataLogEntry(4, own)]
    base = dataclasses.replace(t.metadata, metadata_log=tuple(forged))
    new = dataclasses.replace(t.metadata, metadata_log=())
    assert removed_metadata_files(base, new) == [own]
