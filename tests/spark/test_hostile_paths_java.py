"""Issue 30 (part A) end to end on Spark: ``DROP TABLE ... PURGE``, remove_orphan_files and
rewrite_table_path never lose a file that is not theirs to touch, on tables written by Iceberg Java
(hadoop catalog ``jcat``, opened by ours as ``ours``) and by us (jdbc/SQLite catalog ``hostj``, and
the hive catalog ``ohive`` on the session's metastore).

Every file of the warehouse, and of a folder outside it that a symlink in a table reaches, is hashed
before and after; the surviving tables are read back through Iceberg Java, PyIceberg and DuckDB and
give the rows they gave before.  The no-Spark half of these cases is ``tests/unit/test_hostile_paths.py``."""

from __future__ import annotations

import os

import pytest

import procedures
from procedures.core.gc import reachability as R
from procedures.core.kernel.paths import normalize_path
from procedures.errors import ValidationError
from procedures.spark.engine import gc_steps as O
from procedures.spark.dml import append
from procedures.spark.session import catalog_for
from tests.helpers.catalogs import allow_overlap, ours_on_java_warehouse
from tests.helpers.files import age_everything, folder_state, touch
from tests.oracles import assert_rows_equal, read_all

pytestmark = [pytest.mark.spark, pytest.mark.java]


@pytest.fixture(scope="module")
def catalogs(spark, java_warehouse, tmp_path_factory):
    wh = tmp_path_factory.mktemp("hostile-jdbc-wh")
    for key, value in (("type", "jdbc"), ("uri", f"jdbc:sqlite:{wh.parent / 'hostile-catalog.db'}"),
                       ("warehouse", str(wh))):
        spark.conf.set(f"spark.sql.catalog.hostj.{key}", value)
    j = catalog_for(spark, "hostj")
    if not j.namespace_exists(("db",)):
        j.create_namespace(("db",))
    return {"ours": ours_on_java_warehouse(spark, java_warehouse), "hostj": j, "jdbc_warehouse": str(wh)}


@pytest.fixture()
def outside(tmp_path):
    """A folder outside every warehouse, old enough for remove_orphan_files to call its files orphans."""
    root = str(tmp_path / "outside")
    touch(f"{root}/keep.parquet")
    touch(f"{root}/sub/keep2.parquet")
    return root


def _java_table(spark, name: str, rows: str = "(1, 'a'), (2, 'b')") -> str:
    t = f"jcat.db.{name}"
    spark.sql(f"DROP TABLE IF EXISTS {t} PURGE")
    spark.sql(f"CREATE TABLE {t} (id bigint, data string) USING iceberg PARTITIONED BY (data) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {t} VALUES {rows}")
    spark.sql(f"INSERT INTO {t} VALUES (3, 'a'), (4, 'c')")
    spark.sql(f"DELETE FROM {t} WHERE id = 3")
    return t


def _our_table(spark, cat, name: str, location: str | None = None):
    if cat.table_exists(("db", name)):
        cat.drop_table(("db", name), purge=True)
    where = f" LOCATION '{location}'" if location else ""
    procedures.sql(spark, f"CREATE TABLE hostj.db.{name} (id bigint, data string) USING iceberg{where} "
                          "TBLPROPERTIES ('format-version'='2')")
    df = spark.createDataFrame([(1, f"{name}-a"), (2, f"{name}-b")], "id bigint, data string")
    return append(spark, f"hostj.db.{name}", df)


def _reads(spark, table, java_ident: str | None = None):
    """The rows of ``table`` as Iceberg Java, PyIceberg and DuckDB read them."""
    path = table.metadata_location.replace("file:", "")
    return read_all(spark, java_ident or path, path)


def _same_rows(before, after) -> None:
    for reader in before:
        assert_rows_equal(after[reader], before[reader], key="id", label=reader)


def _reached(t) -> set[str]:
    md = t.metadata
    sm = R.read_snapshot_manifests(t.io, md)
    paths = [p for p in sm.manifest_lists.values() if p] + list(sm.distinct())
    paths += list(R.content_paths_driver(t.io, sm.distinct().values()))
    paths += [p for p in R.metadata_file_paths(md, t.metadata_location) if not p.endswith("version-hint.text")]
    return {normalize_path(p).path for p in paths}


def _files(root: str) -> set[str]:
    return {os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs}


# ------------------------------------------------------------------------------------ DROP TABLE ... PURGE
def test_purge_of_a_java_table_deletes_only_what_its_metadata_reaches(spark, catalogs, outside):
    ours = catalogs["ours"]
    _java_table(spark, "hostile_purge")
    kept = _java_table(spark, "hostile_purge_kept", "(7, 'x'), (8, 'y')")
    t = ours.load_table(("db", "hostile_purge"))
    loc = normalize_path(t.location).path
    user_file = touch(f"{loc}/notes.txt")
    os.symlink(outside, f"{loc}/data/link")
    reached = _reached(t)
    kept_table = ours.load_table(("db", "hostile_purge_kept"))
    kept_loc = normalize_path(kept_table.location).path
    before = _reads(spark, kept_table, kept)
    states = {root: folder_state(root) for root in (kept_loc, outside)}
    procedures.sql(spark, "DROP TABLE ours.db.hostile_purge PURGE")
    assert not ours.table_exists(("db", "hostile_purge"))
    assert {root: folder_state(root) for root in (kept_loc, outside)} == states
    left = _files(loc)
    assert not left & reached
    assert user_file in left and os.path.islink(f"{loc}/data/link")
    # what stays is what no metadata named: the user's file (Java's .crc side files went with their files)
    assert {p for p in left if not os.path.basename(p).startswith(".")} == {user_file}
    _same_rows(before, _reads(spark, ours.load_table(("db", "hostile_purge_kept")), kept))


def test_purge_of_a_jdbc_table_at_the_warehouse_root_keeps_every_other_table(spark, catalogs, outside, monkeypatch):
    """Such a table is refused at creation now (the overlap rule); one made before the rule, or by
    another engine, purges only what its metadata reaches."""
    cat, wh = catalogs["hostj"], catalogs["jdbc_warehouse"]
    keep = _our_table(spark, cat, "hostile_keep")
    other = _our_table(spark, cat, "hostile_other")
    allow_overlap(monkeypatch)
    root = _our_table(spark, cat, "hostile_root", location=wh)
    user_file = touch(f"{wh}/notes.txt")
    os.symlink(outside, f"{wh}/data/link")
    reached = _reached(cat.load_table(("db", "hostile_root")))
    before = {t.identifier: _reads(spark, t) for t in (keep, other)}
    states = {p: folder_state(p) for p in (normalize_path(keep.location).path, normalize_path(other.location).path,
                                           outside)}
    procedures.sql(spark, "DROP TABLE hostj.db.hostile_root PURGE")
    assert not cat.table_exists(("db", "hostile_root")) and root.location
    assert {p: folder_state(p) for p in states} == states
    assert not _files(wh) & reached and os.path.exists(user_file) and os.path.islink(f"{wh}/data/link")
    for t in (keep, other):
        _same_rows(before[t.identifier], _reads(spark, cat.load_table(t.identifier)))


def test_purge_of_a_hive_table_over_another_tables_folder_keeps_it(spark, outside, monkeypatch):
    spark.conf.set("spark.sql.catalog.ohive.type", "hive")
    hive = catalog_for(spark, "ohive")
    if not hive.namespace_exists("hdb"):
        hive.create_namespace("hdb")
    for name in ("hostile_hkeep", "hostile_hroot"):
        if hive.table_exists(("hdb", name)):
            hive.drop_table(("hdb", name))
    procedures.sql(spark, "CREATE TABLE ohive.hdb.hostile_hkeep (id bigint, data string) USING iceberg")
    keep = append(spark, "ohive.hdb.hostile_hkeep", spark.createDataFrame([(1, "k")], "id bigint, data string"))
    folder = os.path.dirname(normalize_path(keep.location).path)  # the database folder, holding hostile_hkeep
    allow_overlap(monkeypatch)  # refused since the overlap rule; a table made before it still purges safely
    procedures.sql(spark, f"CREATE TABLE ohive.hdb.hostile_hroot (id bigint, data string) USING iceberg "
                          f"LOCATION '{folder}'")
    append(spark, "ohive.hdb.hostile_hroot", spark.createDataFrame([(2, "r")], "id bigint, data string"))
    user_file = touch(f"{folder}/notes.txt")
    os.symlink(outside, f"{folder}/data/link")
    reached = _reached(hive.load_table(("hdb", "hostile_hroot")))
    before = _reads(spark, keep)
    states = {p: folder_state(p) for p in (normalize_path(keep.location).path, outside)}
    procedures.sql(spark, "DROP TABLE ohive.hdb.hostile_hroot PURGE")
    assert not hive.table_exists(("hdb", "hostile_hroot"))
    assert {p: folder_state(p) for p in states} == states
    assert not _files(folder) & reached and os.path.exists(user_file) and os.path.islink(f"{folder}/data/link")
    _same_rows(before, _reads(spark, hive.load_table(("hdb", "hostile_hkeep"))))


# ------------------------------------------------------------------------------------ remove_orphan_files
@pytest.mark.parametrize("prefix_listing", ["false", "true"])
def test_orphan_removal_on_spark_never_follows_a_symlink(spark, catalogs, outside, monkeypatch, prefix_listing):
    name = f"hostile_orphans_{prefix_listing}"
    java_ident = _java_table(spark, name)
    t = catalogs["ours"].load_table(("db", name))
    loc = normalize_path(t.location).path
    orphan = touch(f"{loc}/data/orphan.parquet")
    os.symlink(outside, f"{loc}/data/link")
    os.symlink(f"{outside}/keep.parquet", f"{loc}/data/flink.parquet")
    age_everything(loc)
    before = _reads(spark, t, java_ident)
    outside_state = folder_state(outside)
    # the Spark listing and reachability paths, as on a large table
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    monkeypatch.setattr(O, "DRIVER_MAX_DIRS", 1)
    call = f"CALL ours.system.remove_orphan_files(table => 'db.{name}', prefix_listing => {prefix_listing}"
    for location in (f"{loc}/data/link", f"file:{loc}/data/link/sub"):
        with pytest.raises(ValidationError, match="symlink"):
            procedures.sql(spark, f"{call}, location => '{location}')")
    # a file list naming files through the link: listed, matched as orphans, and still never deleted
    listed = [f"{loc}/data/link/keep.parquet", f"file:{loc}/data/link/sub/keep2.parquet", f"{loc}/data/flink.parquet"]
    spark.createDataFrame([(p,) for p in listed], "file_path string").selectExpr(
        "file_path", "timestamp '2000-01-01 00:00:00' AS last_modified").createOrReplaceTempView("hostile_listing")
    procedures.sql(spark, f"CALL ours.system.remove_orphan_files(table => 'db.{name}', "
                          "file_list_view => 'hostile_listing')").collect()
    rows = procedures.sql(spark, f"{call})").collect()
    assert [normalize_path(r[0]).path for r in rows] == [orphan] and not os.path.exists(orphan)
    assert folder_state(outside) == outside_state
    assert os.path.islink(f"{loc}/data/link") and os.path.islink(f"{loc}/data/flink.parquet")
    assert _reached(t.refresh()) <= _files(loc)
    _same_rows(before, _reads(spark, t, java_ident))


# ------------------------------------------------------------------------------------ rewrite_table_path
def test_rewrite_table_path_never_stages_into_a_table(spark, catalogs, tmp_path):
    java_ident = _java_table(spark, "hostile_rewrite")
    other_ident = _java_table(spark, "hostile_rewrite_other", "(5, 'p'), (6, 'q')")
    ours = catalogs["ours"]
    t, other = ours.load_table(("db", "hostile_rewrite")), ours.load_table(("db", "hostile_rewrite_other"))
    loc, other_loc = normalize_path(t.location).path, normalize_path(other.location).path
    os.symlink(other_loc, tmp_path / "alias")
    before = {java_ident: _reads(spark, t, java_ident), other_ident: _reads(spark, other, other_ident)}
    state = {p: folder_state(p) for p in (loc, other_loc)}
    call = (f"CALL ours.system.rewrite_table_path(table => 'db.hostile_rewrite', source_prefix => '{t.location}', "
            "target_prefix => '/copy/t', staging_location => ")
    for staging in (other_loc, f"{other_loc}/metadata", f"file:{loc}", f"{loc}/./", f"file://{loc}//metadata",
                    str(tmp_path / "alias")):
        with pytest.raises(ValidationError, match="inside the folder|is the source prefix"):
            procedures.sql(spark, f"{call}'{staging}')")
    assert {p: folder_state(p) for p in state} == state
    rows = procedures.sql(spark, f"{call}'{tmp_path / 'stage'}')").collect()
    assert rows[0][1] == f"{tmp_path / 'stage'}/file-list"
    staged = folder_state(str(tmp_path / "stage"))
    with pytest.raises(ValidationError, match="already holds"):
        procedures.sql(spark, f"{call}'{tmp_path / 'stage'}')")
    assert folder_state(str(tmp_path / "stage")) == staged and {p: folder_state(p) for p in state} == state
    _same_rows(before[java_ident], _reads(spark, t, java_ident))
    _same_rows(before[other_ident], _reads(spark, other, other_ident))
