"""Issue 30 (part B) end to end, through SQL and ``CALL`` on Spark: table folders never overlap, and
garbage collection of a table made before that rule (or by another engine) keeps out of its neighbour,
on our hadoop (``ovh``) and jdbc/SQLite (``ovj``) catalogs, and the hive catalog on the session's
metastore (``ohive``) for the refusals.

Every file of every table is hashed before and after each refused or guarded call, and the surviving
tables' rows are read back through Iceberg Java, PyIceberg and DuckDB (:func:`tests.oracles.read_all`)
and compared with what they read before.  The Spark listing and reachability paths are forced for
the garbage collection cases, as on a large table."""

from __future__ import annotations

import os

import pytest

import procedures
from procedures.core.gc import reachability as R
from procedures.core.kernel.operations import DeleteFiles, FastAppend
from procedures.core.kernel.paths import normalize_path
from procedures.core.kernel.transaction import RetryPolicy, commit
from procedures.errors import ValidationError
from procedures.spark.engine import gc_steps as O
from procedures.spark.dml import append
from procedures.spark.engine.spark_engine import SparkEngine
from procedures.spark.session import catalog_for
from tests.helpers.catalogs import allow_overlap
from tests.helpers.files import age_everything, fingerprint, touch
from tests.oracles import assert_rows_equal, read_all

pytestmark = [pytest.mark.spark, pytest.mark.java]

FAST = RetryPolicy(num_retries=4, min_wait_ms=1, max_wait_ms=5, total_timeout_ms=60_000)
FUTURE = "TIMESTAMP '2100-01-01 00:00:00'"
COLUMNS = "id bigint, data string"


@pytest.fixture(scope="module")
def cats(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("overlap")
    spark.conf.set("spark.sql.catalog.ovh.type", "hadoop")
    spark.conf.set("spark.sql.catalog.ovh.warehouse", str(root / "hadoop-wh"))
    spark.conf.set("spark.sql.catalog.ovj.type", "jdbc")
    spark.conf.set("spark.sql.catalog.ovj.uri", f"jdbc:sqlite:{root / 'catalog.db'}")
    spark.conf.set("spark.sql.catalog.ovj.warehouse", str(root / "jdbc-wh"))
    spark.conf.set("spark.sql.catalog.ohive.type", "hive")
    out = {name: catalog_for(spark, name) for name in ("ovh", "ovj", "ohive")}
    for name, cat in out.items():
        ns = "ovdb" if name == "ohive" else ("ovdb",)
        if not cat.namespace_exists(ns):
            cat.create_namespace(ns)
    spark.sql("CREATE DATABASE IF NOT EXISTS spark_catalog.ovsrc")
    return out


def _table(spark, cats, cat: str, name: str, rows, *, location: str | None = None):
    c = cats[cat]
    ident = ("ovdb", *name.split("."))
    if c.table_exists(ident):
        c.drop_table(ident, purge=True)
    where = f" LOCATION '{location}'" if location else ""
    procedures.sql(spark, f"CREATE TABLE {cat}.ovdb.{name} ({COLUMNS}) USING iceberg{where} "
                          "TBLPROPERTIES ('format-version'='2')")
    for batch in rows:
        append(spark, f"{cat}.ovdb.{name}", spark.createDataFrame(batch, COLUMNS))
    t = c.load_table(ident)
    age_everything(normalize_path(t.location).path)
    return t


def _reads(spark, t) -> dict:
    t.refresh()
    path = t.metadata_location.replace("file:", "")
    return read_all(spark, path, path)


def _same_rows(spark, t, before) -> None:
    after = _reads(spark, t)
    for reader in before:
        assert_rows_equal(after[reader], before[reader], key="id", label=f"{t.identifier} {reader}")


def _folder(t) -> str:
    return normalize_path(t.location).path


def _refused(spark, statement: str, survivors, *names: str) -> None:
    """``statement`` is refused naming ``names``, and no file of any survivor changed."""
    state = {t.identifier: (fingerprint(_folder(t)), _reads(spark, t)) for t in survivors}
    with pytest.raises(ValidationError) as e:
        procedures.sql(spark, statement).collect()
    for name in names:
        assert name in str(e.value), (name, str(e.value))
    for t in survivors:
        files, rows = state[t.identifier]
        assert fingerprint(_folder(t)) == files
        _same_rows(spark, t, rows)


@pytest.mark.parametrize("cat", ["ovh", "ovj", "ohive"])
def test_sql_and_procedures_refuse_overlapping_tables(spark, cats, cat):
    t = _table(spark, cats, cat, f"base_{cat}", [[(1, "a"), (2, "b")]])
    u = _table(spark, cats, cat, f"other_{cat}", [[(3, "c")]])
    loc = t.location.rstrip("/")
    # a write.data.path into another table, at create time
    _refused(spark, f"CREATE TABLE {cat}.ovdb.wp_{cat} ({COLUMNS}) USING iceberg "
                    f"TBLPROPERTIES ('write.data.path'='{u.location}/data')", [t, u], f"wp_{cat}", f"other_{cat}")
    assert not cats[cat].table_exists(("ovdb", f"wp_{cat}"))
    # a snapshot with its write.data.path in another table (only the source was checked)
    spark.sql("DROP TABLE IF EXISTS spark_catalog.ovsrc.src")
    spark.sql(f"CREATE TABLE spark_catalog.ovsrc.src ({COLUMNS}) USING parquet")
    spark.sql("INSERT INTO spark_catalog.ovsrc.src VALUES (9, 'z')")
    _refused(spark, f"CALL {cat}.system.snapshot(source_table => 'ovsrc.src', table => 'ovdb.snap_{cat}', "
                    f"properties => map('write.data.path', '{loc}/data'))", [t, u], f"snap_{cat}", f"base_{cat}")
    if cat == "ovh":
        # a hadoop table lies where its name says: a nested name is how one gets inside another
        if not cats[cat].namespace_exists(("ovdb", "outer")):
            cats[cat].create_namespace(("ovdb", "outer"))
        inner = _table(spark, cats, cat, "outer.inner", [[(5, "e")]])
        _refused(spark, f"CREATE TABLE ovh.ovdb.outer ({COLUMNS}) USING iceberg", [t, u, inner],
                 "ovdb.outer", "ovdb.outer.inner")
        return
    # a table created inside another table's folder, at the same place, or at the warehouse root
    _refused(spark, f"CREATE TABLE {cat}.ovdb.in_{cat} ({COLUMNS}) USING iceberg LOCATION '{loc}/inner'",
             [t, u], f"in_{cat}", f"base_{cat}")
    _refused(spark, f"CREATE TABLE {cat}.ovdb.in_{cat} ({COLUMNS}) USING iceberg LOCATION 'file://{_folder(t)}/data/..'",
             [t, u], f"in_{cat}", f"base_{cat}")
    # a snapshot into another table's folder
    _refused(spark, f"CALL {cat}.system.snapshot(source_table => 'ovsrc.src', table => 'ovdb.snap_{cat}', "
                    f"location => '{loc}/snap')", [t, u], f"snap_{cat}", f"base_{cat}")
    # register_table of metadata whose location is another table's
    _refused(spark, f"CALL {cat}.system.register_table('ovdb.copy_{cat}', '{t.metadata_location}')",
             [t, u], f"copy_{cat}", f"base_{cat}")
    for name in (f"in_{cat}", f"snap_{cat}", f"copy_{cat}"):
        assert not cats[cat].table_exists(("ovdb", name))
    if cat == "ovj":
        wh = cats[cat].warehouse
        _refused(spark, f"CREATE TABLE ovj.ovdb.top ({COLUMNS}) USING iceberg LOCATION '{wh}'", [t, u],
                 "ovdb.top", "warehouse")


def _nested(spark, cats, cat: str, monkeypatch):
    """An outer table with an inner table in its folder, as they could be made before issue 30."""
    allow_overlap(monkeypatch)
    if cat == "ovh":
        if not cats[cat].namespace_exists(("ovdb", "nest")):
            cats[cat].create_namespace(("ovdb", "nest"))
        inner = _table(spark, cats, cat, "nest.inner", [[(10, "i")], [(11, "j")]])
        outer = _table(spark, cats, cat, "nest", [[(1, "a")], [(2, "b")]])
    else:
        outer = _table(spark, cats, cat, "nest", [[(1, "a")], [(2, "b")]])
        inner = _table(spark, cats, cat, "nest_inner", [[(10, "i")], [(11, "j")]],
                       location=f"{outer.location.rstrip('/')}/inner")
    monkeypatch.undo()
    return outer, inner


@pytest.mark.parametrize("cat", ["ovh", "ovj"])
def test_gc_of_an_outer_table_keeps_the_inner_table(spark, cats, cat, monkeypatch):
    outer, inner = _nested(spark, cats, cat, monkeypatch)
    # an expired snapshot of the outer table named one of the inner table's data files
    inner_file = next(iter(R.content_paths_driver(inner.io, R.read_snapshot_manifests(
        inner.io, inner.metadata).distinct().values())))
    outer = commit(outer, [FastAppend([_data_file(inner_file)])], policy=FAST)
    outer = commit(outer, [DeleteFiles([inner_file])], policy=FAST)
    orphan = touch(f"{_folder(outer)}/data/orphan.parquet")
    inner_orphan = touch(f"{_folder(inner)}/data/orphan-of-inner.parquet")
    age_everything(_folder(outer))
    inner_files, inner_rows = fingerprint(_folder(inner)), _reads(spark, inner)
    outer_rows = _reads(spark, outer)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    monkeypatch.setattr(R, "DRIVER_MAX_LISTS", 0)
    monkeypatch.setattr(O, "DRIVER_MAX_DIRS", 1)
    name = ".".join(outer.identifier)
    rows = procedures.sql(spark, f"CALL {cat}.system.remove_orphan_files(table => '{name}')").collect()
    assert [normalize_path(r[0]).path for r in rows] == [orphan]
    procedures.sql(spark, f"CALL {cat}.system.expire_snapshots(table => '{name}', older_than => {FUTURE}, "
                          "retain_last => 1)").collect()
    assert fingerprint(_folder(inner)) == inner_files
    _same_rows(spark, inner, inner_rows)
    _same_rows(spark, outer, outer_rows)
    # the inner table still cleans its own folder
    rows = procedures.sql(spark, f"CALL {cat}.system.remove_orphan_files(table => '{'.'.join(inner.identifier)}')")
    assert [normalize_path(r[0]).path for r in rows.collect()] == [inner_orphan]
    _same_rows(spark, inner, inner_rows)
    _same_rows(spark, outer, outer_rows)


@pytest.mark.parametrize("cat", ["ovh", "ovj"])
def test_a_write_data_path_of_slash_does_not_let_expire_delete_another_table(spark, cats, cat, monkeypatch):
    u = _table(spark, cats, cat, "victim", [[(1, "a")], [(2, "b")]])
    allow_overlap(monkeypatch)
    t = _table(spark, cats, cat, "wide", [[(5, "e")]])
    t = commit(t, [_set("write.data.path", "/")], policy=FAST)
    monkeypatch.undo()
    victim = next(iter(R.content_paths_driver(u.io, R.read_snapshot_manifests(u.io, u.metadata).distinct().values())))
    t = commit(t, [FastAppend([_data_file(victim)])], policy=FAST)
    t = commit(t, [DeleteFiles([victim])], policy=FAST)
    files, rows, own_rows = fingerprint(_folder(u)), _reads(spark, u), _reads(spark, t)
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    procedures.sql(spark, f"CALL {cat}.system.expire_snapshots(table => 'ovdb.wide', older_than => {FUTURE}, "
                          "retain_last => 1)").collect()
    assert fingerprint(_folder(u)) == files
    _same_rows(spark, u, rows)
    _same_rows(spark, t, own_rows)
    # until the property goes, every new table of the catalog would overlap this one
    cats[cat].drop_table(("ovdb", "wide"))


@pytest.mark.parametrize("cat", ["ovh", "ovj"])
@pytest.mark.parametrize("engine", [False, True])
def test_a_corrupt_expired_entry_never_gets_a_retained_manifest_deleted(spark, cats, cat, engine, monkeypatch):
    t = _table(spark, cats, cat, f"corrupt_{int(engine)}", [[(1, "a")], [(2, "b")], [(3, "c")]])
    manifest = next(iter(R.read_snapshot_manifests(t.io, t.metadata).distinct()))
    t = commit(t, [FastAppend([_data_file(manifest)])], policy=FAST)
    corrupt = t.metadata.current_snapshot().snapshot_id
    t = commit(t, [DeleteFiles([manifest])], policy=FAST)
    files, rows = fingerprint(_folder(t)), _reads(spark, t)
    if engine:
        monkeypatch.setattr(R, "DRIVER_MAX_MANIFESTS", 0)
    procedures.sql(spark, f"CALL {cat}.system.expire_snapshots(table => '{'.'.join(t.identifier)}', "
                          f"snapshot_ids => array({corrupt}))").collect()
    assert os.path.exists(normalize_path(manifest).path)
    gone = set(files) - set(fingerprint(_folder(t)))
    assert gone and all(p.endswith(".avro") for p in gone), gone  # the corrupt snapshot's own list and manifest
    _same_rows(spark, t, rows)


def _data_file(path: str):
    from procedures.spec.manifest.model import DataFile, FileFormat

    return DataFile(path, FileFormat.PARQUET, (), 1, 1)


def _set(key: str, value: str):
    from procedures.core.kernel import updates as U
    from procedures.core.kernel.transaction import MetadataChange

    return MetadataChange((U.SetProperties(((key, value),)),))


def test_migrate_refuses_a_source_folder_that_holds_an_iceberg_table(spark, cats):
    """An Iceberg table of the hive catalog lies inside the Parquet table's folder: migrating the
    Parquet table in place would put the new table around it.  Refused before the rename."""
    spark.sql("DROP TABLE IF EXISTS spark_catalog.ovsrc.mig")
    spark.sql("DROP TABLE IF EXISTS spark_catalog.ovsrc.mig_backup_")
    spark.sql(f"CREATE TABLE spark_catalog.ovsrc.mig ({COLUMNS}) USING parquet")
    spark.sql("INSERT INTO spark_catalog.ovsrc.mig VALUES (1, 'a'), (2, 'b')")
    source = normalize_path(SparkEngine(spark).describe_session_table(("ovsrc", "mig")).location).path
    squatter = _table(spark, cats, "ohive", "squatter", [[(7, "s")]], location=f"{source}/iceberg")
    source_files = fingerprint(source)
    _refused(spark, "CALL ohive.system.migrate('ovsrc.mig')", [squatter], "ovsrc.mig", "ovdb.squatter")
    assert fingerprint(source) == source_files
    assert sorted(tuple(r) for r in spark.table("spark_catalog.ovsrc.mig").collect()) == [(1, "a"), (2, "b")]
    assert not spark.catalog.tableExists("ovsrc.mig_backup_")
    assert not cats["ohive"].table_exists("ovsrc.mig")
