"""Issue 12 end to end: remove_orphan_files and expire_snapshots never leave the table, on tables written
by Iceberg Java (hadoop catalog ``jcat``, opened by ours as ``ours``) and by us (jdbc/SQLite catalog
``oursj``), through ``CALL`` on Spark with the Spark listing and reachability paths forced.  After
every call each referenced file exists and Iceberg Java, PyIceberg and DuckDB read the rows they read
before."""

from __future__ import annotations

import os

import pytest

import procedures
from procedures.core.kernel.paths import normalize_path
from procedures.errors import ValidationError
from procedures.core.gc import reachability as R
from procedures.core.gc.orphans import CONFLICTS, find_orphans, format_pairs
from procedures.framework.context import open_catalog
from procedures.spark.engine import gc_steps as O
from procedures.spark.dml import append, delete_where
from procedures.spark.listing import FrameKeeper, driver_keys_dataframe, find_orphans_dataframe
from procedures.spark.session import catalog_for
from tests.helpers.files import age_everything, touch
from tests.oracles import assert_rows_equal, java_read, read_all

pytestmark = pytest.mark.spark

FUTURE = "TIMESTAMP '2100-01-01 00:00:00'"


@pytest.fixture(scope="module")
def catalogs(spark, java_warehouse, tmp_path_factory):
    spark.conf.set("spark.sql.catalog.ours.type", "hadoop")
    spark.conf.set("spark.sql.catalog.ours.warehouse", str(java_warehouse))
    wh = tmp_path_factory.mktemp("jdbc-wh")
    spark.conf.set("spark.sql.catalog.oursj.type", "jdbc")
    spark.conf.set("spark.sql.catalog.oursj.uri", f"jdbc:sqlite:{wh / 'catalog.db'}")
    spark.conf.set("spark.sql.catalog.oursj.warehouse", str(wh))
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    j = catalog_for(spark, "oursj")
    if not j.namespace_exists(("db",)):
        j.create_namespace(("db",))
    return {"ours": open_catalog("ours", {"spark.sql.catalog.ours.type": "hadoop",
                                                   "spark.sql.catalog.ours.warehouse": str(java_warehouse)}),
            "oursj": j}


def _java_table(spark, catalogs, name: str):
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name} PURGE")
    t = f"jcat.db.{name}"
    spark.sql(f"CREATE TABLE {t} (id bigint, data string) USING iceberg PARTITIONED BY (data) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    # partition values that Java writes percent-encoded into folder names
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a b'), (2, 'c/d'), (3, 'e%f')")
    spark.sql(f"INSERT INTO {t} VALUES (4, 'a b'), (5, 'plain')")
    spark.sql(f"DELETE FROM {t} WHERE id = 4")
    return "ours", ("db", name), t


def _our_table(spark, catalogs, name: str):
    cat = catalogs["oursj"]
    if cat.table_exists(("db", name)):
        cat.drop_table(("db", name), purge=True)
    procedures.sql(spark, f"CREATE TABLE oursj.db.{name} (id bigint, data string) USING iceberg "
                          "PARTITIONED BY (data) TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    t = append(spark, f"oursj.db.{name}", spark.createDataFrame([(1, "a b"), (2, "c/d"), (3, "e%f")], "id bigint, data string"))
    t = append(spark, t, spark.createDataFrame([(4, "a b"), (5, "plain")], "id bigint, data string"))
    delete_where(spark, t, "id = 4")
    return "oursj", ("db", name), None


def _state(spark, catalogs, cat: str, ident, java_ident):
    t = catalogs[cat].load_table(ident)
    reads = read_all(spark, java_ident or t.metadata_location.replace("file:", ""), t.metadata_location.replace("file:", ""))
    return t, reads


def _referenced_exist(t) -> None:
    md = t.refresh().metadata
    sm = R.read_snapshot_manifests(t.io, md)
    paths = [p for p in sm.manifest_lists.values() if p] + list(sm.distinct())
    paths += list(R.content_paths_driver(t.io, sm.distinct().values()))
    paths += [p for p in R.metadata_file_paths(md, t.metadata_location) if not p.endswith("version-hint.text")]
    missing = [p for p in paths if not os.path.exists(normalize_path(p).path)]
    assert not missing, missing


def _same_rows(before, after) -> None:
    for reader in before:
        assert_rows_equal(after[reader], before[reader], key="id", label=reader)


@pytest.mark.java
@pytest.mark.parametrize("writer", ["java", "ours"])
def test_orphan_removal_stays_inside_the_table(spark, catalogs, writer, monkeypatch):
    name = f"conf_{writer}"
    cat, ident, java_ident = (_java_table if writer == "java" else _our_table)(spark, catalogs, name)
    other_cat, other_ident, _ = (_java_table if writer == "java" else _our_table)(spark, catalogs, f"{name}_other")
    t, before = _state(spark, catalogs, cat, ident, java_ident)
    loc = normalize_path(t.location).path
    other_loc = normalize_path(catalogs[other_cat].load_table(other_ident).location).path
    orphan = touch(f"{loc}/data/orphan.parquet")
    other_orphan = touch(f"{other_loc}/data/orphan-of-other.parquet")
    age_everything(loc)
    age_everything(other_loc)
    # the Spark listing and reachability paths, as on a large table
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    monkeypatch.setattr(R, "DRIVER_MAX_LISTS", 0)
    monkeypatch.setattr(O, "DRIVER_MAX_DIRS", 1)
    call = f"CALL {cat}.system.remove_orphan_files(table => '{'.'.join(ident)}'"
    warehouse = os.path.dirname(os.path.dirname(loc))
    for bad in (f"{loc}/..", f"{loc}/data/../../{os.path.basename(other_loc)}", other_loc, warehouse,
                f"{loc}/data/%2E%2E/%2E%2E", f"file:{loc}x"):
        for dry in ("true", "false"):
            with pytest.raises(ValidationError, match="is not the table location"):
                procedures.sql(spark, f"{call}, location => '{bad}', dry_run => {dry})")
    assert os.path.exists(other_orphan)
    for spelling in (f"{loc}/data/..", f"file:{loc}/", f"{loc}//data/"):
        dry = sorted(r[0] for r in procedures.sql(spark, f"{call}, location => '{spelling}', dry_run => true)").collect())
        assert [normalize_path(p).path for p in dry] == [orphan]
    rows = procedures.sql(spark, f"{call}, location => '{loc}/data/..')").collect()
    assert [normalize_path(r[0]).path for r in rows] == [orphan] and not os.path.exists(orphan)
    assert os.path.exists(other_orphan)
    _referenced_exist(t)
    _same_rows(before, _state(spark, catalogs, cat, ident, java_ident)[1])


@pytest.mark.java
def test_file_list_view_spellings_outside_the_table_are_not_deleted(spark, catalogs):
    cat, ident, java_ident = _java_table(spark, catalogs, "conf_view")
    t, before = _state(spark, catalogs, cat, ident, java_ident)
    loc = normalize_path(t.location).path
    orphan = touch(f"{loc}/data/orphan.parquet")
    outside = touch(f"{os.path.dirname(loc)}/not-this-table.parquet")
    live = [r[0] for r in spark.sql(f"SELECT file_path FROM {java_ident}.files").collect()]
    listed = [f"file:{orphan}", f"{loc}/data/../../{os.path.basename(outside)}", f"{loc}/%2E%2E/x", outside]
    # the live files in other spellings: plain, doubled slash, with a '.'
    listed += [normalize_path(p).path for p in live] + [p.replace("/data/", "//data/./") for p in live]
    spark.createDataFrame([(p,) for p in listed], "file_path string").selectExpr(
        "file_path", "timestamp '2000-01-01 00:00:00' AS last_modified").createOrReplaceTempView("conf_listing")
    call = (f"CALL {cat}.system.remove_orphan_files(table => '{'.'.join(ident)}', file_list_view => 'conf_listing'")
    dry = [r[0] for r in procedures.sql(spark, call + ", dry_run => true)").collect()]
    real = [r[0] for r in procedures.sql(spark, call + ")").collect()]
    assert dry == real == [f"file:{orphan}"]
    assert not os.path.exists(orphan) and os.path.exists(outside)
    _referenced_exist(t)
    _same_rows(before, _state(spark, catalogs, cat, ident, java_ident)[1])


@pytest.mark.java
def test_expire_keeps_files_add_files_brought_from_another_folder(spark, catalogs, tmp_path):
    """Java's add_files registers a Parquet file in place; once a rewrite replaced it and the snapshot
    expired, Java's expire_snapshots deletes the source file -- ours keeps it."""
    name = "conf_added"
    spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name} PURGE")
    t = f"jcat.db.{name}"
    spark.sql(f"CREATE TABLE {t} (id bigint, data string) USING iceberg TBLPROPERTIES ('format-version'='2')")
    src = tmp_path / "source"
    spark.createDataFrame([(10, "x"), (11, "y")], "id bigint, data string").coalesce(1).write.parquet(str(src))
    spark.sql(f"CALL jcat.system.add_files(table => 'db.{name}', source_table => '`parquet`.`{src}`')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a')")
    spark.sql(f"DELETE FROM {t} WHERE id = 10")  # copy-on-write: the added file is replaced
    source_files = [str(p) for p in src.glob("*.parquet")]
    assert source_files
    table, before = _state(spark, catalogs, "ours", ("db", name), t)
    rows = procedures.sql(spark, f"CALL ours.system.expire_snapshots(table => 'db.{name}', older_than => {FUTURE}, "
                                 "retain_last => 1)").collect()
    assert rows[0][0] == 0  # the only data file the expired snapshots alone reached lies outside the table
    assert all(os.path.exists(p) for p in source_files)
    _referenced_exist(table)
    _same_rows(before, _state(spark, catalogs, "ours", ("db", name), t)[1])
    assert sorted(java_read(spark, t).column("id").to_pylist()) == [1, 11]


def test_unreached_paths_on_spark_matches_the_path_set(spark):
    """The Spark anti-join of expire_snapshots keeps a candidate exactly when the driver's PathSet
    would: plain paths are keyed in the JVM, odd ones ('.', '..', '%', '//') in Python."""
    from procedures.core.kernel.paths import PathSet
    from procedures.spark.listing import unreached_paths

    valid = ["file:/wh/t/data/a.parquet", "/wh/t/data/b%20c.parquet", "s3a://bkt/wh/t/d.parquet",
             "file:///wh/t//data/./e.parquet", "/wh/t/data/x/../f.parquet", "//wh/t/data/g.parquet"]
    candidates = ["/wh/t/data/a.parquet", "file:///wh/t/data/a.parquet", "/wh/t/data/b c.parquet",
                  "s3://bkt/wh/t/d.parquet", "/wh/t/data/e.parquet", "/wh/t/data/f.parquet", "/wh/t/data/g.parquet",
                  "/wh/t/data/h.parquet", "/wh/t/data/./h2.parquet", "file:/wh/t/data/i%2Fj.parquet", "/wh/t/datax/a.parquet"]
    frame = unreached_paths(spark.createDataFrame([(c, "Data") for c in candidates], "path string, kind string"),
                            spark.createDataFrame([(v,) for v in valid], "path string"))
    kept = PathSet(valid)
    assert sorted(r[0] for r in frame.collect()) == sorted(c for c in candidates if c not in kept)
    # "//wh/..." names the authority "wh" (as Hadoop reads it), so it does not keep /wh/t/data/g.parquet
    assert sorted(r[0] for r in frame.collect()) == ["/wh/t/data/./h2.parquet", "/wh/t/data/g.parquet",
                                                     "/wh/t/data/h.parquet", "/wh/t/datax/a.parquet",
                                                     "file:/wh/t/data/i%2Fj.parquet"]


def test_uri_frame_in_the_jvm_equals_the_python_normaliser(spark):
    """remove_orphan_files keys plain paths in the JVM: every spelling must get the very rows
    path_keys gives (scheme and authority mapping included), or a referenced file could look orphaned."""
    from procedures.spark.listing import uri_dataframe, uri_frame

    paths = ["file:/wh/t/data/a.parquet", "file:///wh/t/data/a.parquet", "/wh/t//data/a.parquet/",
             "S3A://Bkt/wh/t/d.parquet", "s3n://bkt/wh/t/d.parquet", "s3://bkt/wh/t/d.parquet", "s3://bkt",
             "gs://Other/k", "hdfs://nn:8020/wh/t/x", "hdfs:///wh/t/x", "/wh/t/data/b%20c.parquet",
             "/wh/t/data/./e.parquet", "//wh/t/g.parquet", "/wh/t/a:b.parquet", "ab c:/x", "relative/p/",
             "/", "x:/windows/drive", "abfss://c@acct.dfs.core.windows.net/wh/t/y"]
    schemes = {"gs": "gcs", "hdfs": ""}
    auths = {"Other": "bucket2", "nn:8020": "nn"}
    df = spark.createDataFrame([(p,) for p in paths], "file_path string")
    cols = ["scheme", "authority", "path", "uri"]
    jvm = sorted(tuple(r) for r in uri_frame(df, "file_path", schemes, auths).select(*cols).na.fill("<null>").collect())
    python = sorted(tuple(r) for r in uri_dataframe(df, "file_path", schemes, auths).select(*cols).na.fill("<null>").collect())
    assert len(python) >= len(paths)
    assert jvm == python


@pytest.mark.parametrize("mode", ["ERROR", "IGNORE", "DELETE"])
def test_orphan_matching_on_spark_equals_the_driver_matcher(spark, mode):
    """remove_orphan_files' Spark matching (per reading, then per file) gives the driver's verdicts:
    the same orphans, the same conflicts, for files with one reading and with two ('%')."""
    valid = ["file:/wh/t/data/a.parquet", "/wh/t/data/b%20c.parquet", "s3a://bkt/wh/t/d.parquet",
             "hdfs://nn1/wh/t/e.parquet", "hdfs://nn1/wh/t/f%41.parquet", "/wh/t/data/g.parquet",
             "/wh/t/data/k l.parquet"]
    # k%20l: only its decoded reading is valid, so the file is kept (one reading matching is enough)
    actual = ["/wh/t/data/k%20l.parquet", "file:/wh/t/data/a.parquet", "/wh/t/data/b c.parquet",
              "/wh/t/data/b%20c.parquet", "s3://bkt/wh/t/d.parquet", "s3://other/wh/t/d.parquet", "hdfs://nn2/wh/t/e.parquet",
              "hdfs://nn2/wh/t/fA.parquet", "hdfs://nn1/wh/t/f%41.parquet", "/wh/t/data/h.parquet",
              "/wh/t/data/h%20i.parquet", "gs://b/wh/t/data/g.parquet"]
    schemes, auths = {}, {"other": "bkt"} if mode == "DELETE" else {}
    try:
        expected: object = sorted(find_orphans(actual, valid, equal_schemes=schemes, equal_authorities=auths, mode=mode))
    except ValidationError as e:
        expected = str(e)
    with FrameKeeper() as keep:
        frame, conflicts = find_orphans_dataframe(
            driver_keys_dataframe(spark, actual, schemes, auths, actual=True),
            driver_keys_dataframe(spark, valid, schemes, auths, actual=False), mode, keep)
        if conflicts:
            got: object = CONFLICTS.format(format_pairs(conflicts))
        else:
            got = sorted(r[0] for r in frame.collect())
    assert got == expected
    if mode == "ERROR":
        assert "(nn1, nn2)" in got and "(null, gs)" not in got
    else:
        assert "/wh/t/data/h.parquet" in got and "file:/wh/t/data/a.parquet" not in got
        assert "/wh/t/data/k%20l.parquet" not in got


@pytest.mark.parametrize("mode", ["ERROR", "IGNORE", "DELETE"])
def test_orphan_matching_on_spark_applies_the_age_cutoff_like_the_driver(spark, tmp_path, mode):
    """With a listing that did not stat its files, the Spark matching drops the unmatched files
    modified since the cutoff before deciding orphans and conflicts, as the driver matcher does: a
    young file is neither an orphan nor a conflict."""
    import time

    from procedures.io.directory_walk import modified_before

    root = str(tmp_path)
    names = ("old", "young", "old-mismatch", "young-mismatch", "valid-young", "valid-old")
    files = {n: touch(f"{root}/data/{n}.parquet", mtime=None if "young" in n else time.time() - 5 * 86400)
             for n in names}
    actual = ["file:" + p for p in files.values()]
    valid = [f"hdfs://nn1{files['old-mismatch']}", f"hdfs://nn1{files['young-mismatch']}",
             files["valid-young"], files["valid-old"]]
    cutoff = int(time.time() * 1000) - 3600_000
    try:
        expected: object = sorted(find_orphans(actual, valid, equal_schemes={}, equal_authorities={}, mode=mode,
                                               old_enough=lambda ps: modified_before(ps, cutoff)))
    except ValidationError as e:
        expected = str(e)
    with FrameKeeper() as keep:
        frame, conflicts = find_orphans_dataframe(
            driver_keys_dataframe(spark, actual, {}, {}, actual=True),
            driver_keys_dataframe(spark, valid, {}, {}, actual=False), mode, keep, cutoff)
        got: object = CONFLICTS.format(format_pairs(conflicts)) if conflicts else sorted(r[0] for r in frame.collect())
    assert got == expected
    want = {"ERROR": CONFLICTS.format("[(hdfs, file), (nn1, null)]"), "IGNORE": ["file:" + files["old"]],
            "DELETE": sorted(["file:" + files["old"], "file:" + files["old-mismatch"]])}[mode]
    assert got == want
    if mode == "ERROR":  # the young mismatch alone is no conflict
        without_old = [p for p in actual if not p.endswith("/old-mismatch.parquet")]
        with FrameKeeper() as keep:
            frame, conflicts = find_orphans_dataframe(
                driver_keys_dataframe(spark, without_old, {}, {}, actual=True),
                driver_keys_dataframe(spark, valid, {}, {}, actual=False), mode, keep, cutoff)
            assert not conflicts and [r[0] for r in frame.collect()] == ["file:" + files["old"]]
