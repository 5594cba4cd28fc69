"""Issue 30 (part B) without Spark, on the hadoop and jdbc (SQLite) catalogs: table folders never overlap
(create, register, commits that set a location or a ``write.*.path``, dry runs), garbage collection keeps
out of other tables' folders, deletes only in ``write.*.path`` folders that pass the rule, and never
deletes a file the retained metadata names, whatever a corrupt expired entry says.

Every file of every table is hashed before and after each refused or guarded call (``fingerprint`` of
the whole temporary folder); the full read-back through Iceberg Java, PyIceberg and DuckDB is in
tests/spark/test_table_overlap_java.py."""

from __future__ import annotations

import os
import time

import pytest

from procedures.catalog.base import metadata_file_bytes
from procedures.catalog.hadoop import HadoopCatalog
from procedures.catalog.jdbc import JdbcCatalog
from procedures.catalog.sandbox import sandboxed
from procedures.core.kernel import updates as U
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.gc import reachability as R
from procedures.core.gc.expire import ExpireSnapshotsParams
from procedures.core.gc.orphans import RemoveOrphanFilesParams
from procedures.core.kernel.operations import DeleteFiles, FastAppend
from procedures.core.kernel.paths import normalize_path
from procedures.core.kernel.transaction import MetadataChange, RetryPolicy, commit
from procedures.errors import ValidationError
from tests.helpers.gc_runs import expire_snapshots
from tests.helpers.gc_runs import remove_orphan_files
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.partitioning import PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.statistics import PartitionStatisticsFile
from procedures.spec.types import LONG, NestedField
from tests.helpers.catalogs import allow_overlap
from tests.helpers.files import age_everything, fingerprint, touch, reached_paths
from tests.unit.test_gc_confinement import catalog  # noqa: F401 -- the hadoop and jdbc fixture

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
SCHEMA = Schema((NestedField(1, "id", LONG, True),))
FUTURE_MS = int(time.time() * 1000) + 3600_000


def data_file(path: str) -> DataFile:
    return DataFile(path, FileFormat.PARQUET, (), 1, 1)


def metadata(location: str, properties: dict | None = None):
    md, _ = new_table_metadata(schema=SCHEMA, location=location, spec=PartitionSpec(0, ()), format_version=2,
                               properties=properties or {})
    return md


def make_table(catalog, ident=("db", "t"), location: str | None = None, properties: dict | None = None, files=3):
    location = location or catalog.default_table_location(ident)
    t = catalog.create_table(ident, metadata(location, properties))
    for i in range(files):
        t = commit(t, [FastAppend([data_file(touch(f"{t.location}/data/f{i}.parquet"))])], policy=FAST)
    age_everything(t.location)
    return t


def referenced(t) -> set[str]:
    """Every file the table's current metadata references, as local paths."""
    return reached_paths(t.refresh())


def assert_intact(t) -> None:
    missing = sorted(p for p in referenced(t) if not os.path.exists(p))
    assert not missing, f"referenced files of {t.identifier} deleted: {missing}"


# ------------------------------------------------------------------------------------ refusals
def _refused(tmp_path, action, *names):
    before = fingerprint(str(tmp_path))
    with pytest.raises(ValidationError) as e:
        action()
    for name in names:
        assert name in str(e.value), (name, str(e.value))
    assert fingerprint(str(tmp_path)) == before
    return e.value


@pytest.mark.parametrize("where", ["inside", "same", "spelt", "holding", "warehouse", "above"])
def test_jdbc_create_with_an_overlapping_location_is_refused(tmp_path, where):
    cat = JdbcCatalog("local", f"jdbc:sqlite:{tmp_path / 'catalog.db'}", str(tmp_path / "wh"))
    cat.create_namespace("db")
    t = make_table(cat)
    location = {"inside": f"{t.location}/inner", "same": t.location, "spelt": f"file://{t.location}/data/..",
                "holding": f"{cat.warehouse}/db", "warehouse": cat.warehouse, "above": str(tmp_path)}[where]
    names = ["db.new"] + (["db.t"] if where in ("inside", "same", "spelt") else [])
    _refused(tmp_path, lambda: cat.create_table(("db", "new"), metadata(location)), *names)
    assert not cat.table_exists(("db", "new"))
    assert_intact(t)


def test_hadoop_nested_names_cannot_put_a_table_around_another(tmp_path):
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    cat.create_namespace(("db", "t"))
    inner = make_table(cat, ("db", "t", "inner"))
    _refused(tmp_path, lambda: make_table(cat, ("db", "t")), "db.t", "db.t.inner")
    assert not cat.table_exists(("db", "t"))
    assert_intact(inner)


@pytest.mark.parametrize("prop, where", [("write.data.path", "other"), ("write.data.path", "root"),
                                         ("write.object-storage.path", "warehouse")])
def test_create_with_an_overlapping_write_path_is_refused(catalog, tmp_path, prop, where):
    u = make_table(catalog, ("db", "u"))
    value = {"other": f"{u.location}/data", "root": "/", "warehouse": catalog.warehouse}[where]
    ident = ("db", "t")
    _refused(tmp_path, lambda: catalog.create_table(ident, metadata(catalog.default_table_location(ident),
                                                                    {prop: value})), "db.t", prop)
    assert not catalog.table_exists(ident)
    assert_intact(u)


@pytest.mark.parametrize("prop, where", [("write.data.path", "other"), ("write.data.path", "root"),
                                         ("write.folder-storage.path", "warehouse")])
def test_setting_an_overlapping_write_path_is_refused_and_changes_nothing(catalog, tmp_path, prop, where):
    t = make_table(catalog)
    u = make_table(catalog, ("db", "u"))
    value = {"other": f"file:{u.location}/data/x", "root": "/", "warehouse": f"{catalog.warehouse}/"}[where]
    current = t.metadata_location
    _refused(tmp_path, lambda: commit(t, [MetadataChange((U.SetProperties(((prop, value),)),))], policy=FAST),
             "db.t", prop)
    assert catalog.load_table(("db", "t")).metadata_location == current
    # a folder of its own is fine
    commit(t, [MetadataChange((U.SetProperties(((prop, f"{t.location}/custom"),)),))], policy=FAST)
    assert_intact(t)
    assert_intact(u)


def test_jdbc_moving_a_table_into_another_is_refused(tmp_path):
    cat = JdbcCatalog("local", f"jdbc:sqlite:{tmp_path / 'catalog.db'}", str(tmp_path / "wh"))
    cat.create_namespace("db")
    t = make_table(cat)
    u = make_table(cat, ("db", "u"))
    _refused(tmp_path, lambda: commit(t, [MetadataChange((U.SetLocation(f"{u.location}/moved"),))], policy=FAST),
             "db.t", "db.u")


def test_register_table_whose_location_lies_in_another_table_is_refused(catalog, tmp_path):
    t = make_table(catalog)
    if isinstance(catalog, JdbcCatalog):
        # the same metadata file under a second name: two tables on one folder
        _refused(tmp_path, lambda: catalog.register_table(("db", "t2"), t.metadata_location), "db.t2", "db.t")
        assert not catalog.table_exists(("db", "t2"))
    else:
        # a hadoop table adopts only metadata at its own path: a nested name is the way in
        catalog.create_namespace(("db", "outer"))
        make_table(catalog, ("db", "outer", "inner"))
        md = metadata(catalog.default_table_location(("db", "outer")))
        path = str(tmp_path / "staged" / "v1.metadata.json")
        catalog.io.write(path, metadata_file_bytes(md, path))
        _refused(tmp_path, lambda: catalog.register_table(("db", "outer"), path), "db.outer", "db.outer.inner")
        assert not catalog.table_exists(("db", "outer"))
    assert_intact(t)


def test_jdbc_rename_then_create_at_the_old_place_is_refused(tmp_path):
    """A rename keeps the location, so the old name's default location is still taken."""
    cat = JdbcCatalog("local", f"jdbc:sqlite:{tmp_path / 'catalog.db'}", str(tmp_path / "wh"))
    cat.create_namespace("db")
    t = make_table(cat)
    cat.rename_table(("db", "t"), ("db", "renamed"))
    _refused(tmp_path, lambda: cat.create_table(("db", "t"), metadata(cat.default_table_location(("db", "t")))),
             "db.t", "db.renamed")
    assert_intact(cat.load_table(("db", "renamed")))
    del t


def test_a_table_whose_metadata_cannot_be_read_still_counts(tmp_path):
    cat = JdbcCatalog("local", f"jdbc:sqlite:{tmp_path / 'catalog.db'}", str(tmp_path / "wh"))
    cat.create_namespace("db")
    u = make_table(cat, ("db", "u"))
    with open(u.metadata_location.replace("file:", ""), "wb") as f:
        f.write(b"{ not json")
    _refused(tmp_path, lambda: cat.create_table(("db", "t"), metadata(f"{u.location}/data/t")), "db.t", "db.u")


def test_a_dry_run_refuses_what_the_real_run_would(catalog, tmp_path):
    u = make_table(catalog, ("db", "u"))
    sandbox = sandboxed(catalog)
    _refused(tmp_path, lambda: sandbox.create_table(("db", "t"), metadata(
        catalog.default_table_location(("db", "t")), {"write.data.path": f"{u.location}/data"})), "db.t", "db.u")


def test_commits_that_move_no_folder_still_work_on_tables_that_overlap(catalog, monkeypatch, tmp_path):
    allow_overlap(monkeypatch)
    t = make_table(catalog, properties={"write.data.path": str(tmp_path / "wh")})
    monkeypatch.undo()
    t = commit(t, [FastAppend([data_file(touch(f"{t.location}/data/more.parquet"))])], policy=FAST)
    commit(t, [MetadataChange((U.SetProperties((("comment", "still fine"),)),))], policy=FAST)


# ------------------------------------------------------------------------------------ garbage collection
def _nested(catalog, monkeypatch):
    """An outer table with an inner table in its folder, made as before issue 30."""
    allow_overlap(monkeypatch)
    if isinstance(catalog, HadoopCatalog):
        catalog.create_namespace(("db", "t"))
        inner = make_table(catalog, ("db", "t", "inner"))
        outer = make_table(catalog, ("db", "t"))
    else:
        outer = make_table(catalog)
        inner = make_table(catalog, ("db", "inner"), location=f"{outer.location}/inner")
    monkeypatch.undo()
    return outer, inner


@pytest.mark.parametrize("dry_run", [True, False])
def test_orphan_removal_of_an_outer_table_keeps_the_inner_table(catalog, monkeypatch, tmp_path, dry_run):
    outer, inner = _nested(catalog, monkeypatch)
    orphan = touch(f"{outer.location}/data/orphan.parquet")
    inner_orphan = touch(f"{inner.location}/data/orphan-of-inner.parquet")
    inner_before = fingerprint(inner.location)
    result = remove_orphan_files(outer, RemoveOrphanFilesParams(dry_run=dry_run))
    assert fingerprint(inner.location) == inner_before
    assert_intact(inner)
    assert_intact(outer)
    assert [normalize_path(p).path for p in result.orphan_file_locations] == [orphan]
    assert os.path.exists(orphan) is dry_run
    assert inner_orphan in {normalize_path(p).path for p in result.kept_in_other_table}
    # the inner table still cleans its own folder
    inner_result = remove_orphan_files(inner, RemoveOrphanFilesParams(dry_run=dry_run))
    assert [normalize_path(p).path for p in inner_result.orphan_file_locations] == [inner_orphan]
    assert_intact(outer)


def test_expire_of_an_outer_table_keeps_files_in_the_inner_table(catalog, monkeypatch):
    outer, inner = _nested(catalog, monkeypatch)
    shared = f"{inner.location}/data/f0.parquet"
    outer = commit(outer, [FastAppend([data_file(shared)])], policy=FAST)
    outer = commit(outer, [DeleteFiles([shared, f"{outer.location}/data/f0.parquet"])], policy=FAST)
    inner_before = fingerprint(inner.location)
    result = expire_snapshots(outer, ExpireSnapshotsParams(older_than_ms=FUTURE_MS, retain_last=1))
    assert fingerprint(inner.location) == inner_before
    assert_intact(inner)
    assert_intact(outer)
    assert not os.path.exists(f"{outer.location}/data/f0.parquet")
    assert result.kept_in_other_table == (shared,)


@pytest.mark.parametrize("where", ["root", "other_table", "warehouse"])
def test_a_wide_write_data_path_does_not_widen_what_expire_deletes(catalog, monkeypatch, tmp_path, where):
    u = make_table(catalog, ("db", "u"))
    value = {"root": "/", "other_table": u.location, "warehouse": catalog.warehouse}[where]
    allow_overlap(monkeypatch)
    t = make_table(catalog, properties={"write.data.path": value})
    monkeypatch.undo()
    stranger = touch(str(tmp_path / "elsewhere" / "not-ours.parquet")) if where == "root" else \
        f"{u.location}/data/f1.parquet" if where == "other_table" else touch(f"{catalog.warehouse}/stray.parquet")
    t = commit(t, [FastAppend([data_file(stranger)])], policy=FAST)
    t = commit(t, [DeleteFiles([stranger, f"{t.location}/data/f0.parquet"])], policy=FAST)
    before = fingerprint(str(tmp_path / "elsewhere")) if where == "root" else fingerprint(u.location)
    result = expire_snapshots(t, ExpireSnapshotsParams(older_than_ms=FUTURE_MS, retain_last=1))
    assert os.path.exists(stranger)
    assert (fingerprint(str(tmp_path / "elsewhere")) if where == "root" else fingerprint(u.location)) == before
    assert_intact(u)
    assert_intact(t)
    assert not os.path.exists(f"{t.location}/data/f0.parquet")
    assert result.deleted_data_files_count == 1
    assert stranger in result.kept_outside_location + result.kept_in_other_table


@pytest.mark.parametrize("target", ["manifest", "manifest_list", "partition_statistics"])
def test_a_corrupt_expired_entry_never_gets_a_retained_file_deleted(catalog, tmp_path, target):
    """An expired snapshot's manifest names, as a data file, a manifest, a manifest list or a
    statistics file the retained snapshots use: the last check before the delete keeps it."""
    t = make_table(catalog)
    keep_snapshot = t.metadata.current_snapshot()
    stats = touch(f"{t.location}/metadata/partition-stats-{keep_snapshot.snapshot_id}.parquet")
    t = commit(t, [MetadataChange((U.SetPartitionStatistics(
        PartitionStatisticsFile(keep_snapshot.snapshot_id, stats, 1)),))], policy=FAST)
    victim = {"manifest": next(iter(R.read_snapshot_manifests(t.io, t.metadata).distinct())),
              "manifest_list": keep_snapshot.manifest_list, "partition_statistics": stats}[target]
    t = commit(t, [FastAppend([data_file(victim)])], policy=FAST)
    corrupt = t.metadata.current_snapshot().snapshot_id
    t = commit(t, [DeleteFiles([victim])], policy=FAST)
    before = fingerprint(t.location)
    expire_snapshots(t, ExpireSnapshotsParams(snapshot_ids=(corrupt,), older_than_ms=0, retain_last=1))
    t = catalog.load_table(("db", "t"))
    assert t.metadata.snapshot_by_id(corrupt) is None
    assert os.path.exists(normalize_path(victim).path)
    assert_intact(t)
    gone = set(before) - set(fingerprint(t.location))
    assert all(p.endswith(".avro") for p in gone), gone  # only the corrupt snapshot's own list and manifest
