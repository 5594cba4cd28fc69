"""snapshot and migrate against Iceberg Java 1.10.2, on twin Parquet, ORC and Avro tables of ``spark_catalog``.

Each case creates two identical sources with Spark SQL (``CREATE TABLE spark_catalog.smdb.<t> ...
USING parquet`` / ``USING orc`` / Hive's ``STORED AS AVRO`` (Spark's own avro source needs the
spark-avro package, which pyspark does not ship) and the same inserts), runs ours (``CALL ohive.system.snapshot/migrate`` through
:func:`procedures.sql`; ``ohive`` is our hive catalog on the session's metastore) on one and Java's
``snapshot`` into ``jhive`` (Iceberg Java's HiveCatalog on the same metastore) on the other.  Java's
``migrate`` cannot run here: it needs ``spark_catalog`` to be Iceberg's ``SparkSessionCatalog``, which
the shared session is not (checked below), so a migrated table is compared with Java's snapshot of
the twin: same schema, spec, data file metrics, rows (Java, PyIceberg, DuckDB).
"""

from __future__ import annotations

import json
import os

import pytest

import procedures
from procedures.catalog.hive import HiveCatalog
from procedures.core.kernel.paths import local_path
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.errors import (
    NoSuchTableError, TableAlreadyExistsError, ValidationError,
)
from procedures.spark.engine.spark_engine import SparkEngine
from procedures.spark.session import catalog_for
from procedures.spec.name_mapping import DEFAULT_NAME_MAPPING_PROPERTY
from tests.helpers.files import fingerprint
from tests.oracles import (
    assert_rows_equal, duckdb_read, java_read, pyiceberg_read, read_all, spark_df_to_arrow,
)

pytestmark = pytest.mark.spark

DB = "smdb"
COLUMNS = "id bigint, data string, f double, ts timestamp, d decimal(10,2), p int"
ROWS = [
    "(1, 'a', 0.5, TIMESTAMP '2024-01-01 10:00:00', 1.25, 0), (2, NULL, NULL, NULL, NULL, 1)",
    "(3, 'c', -1.0, TIMESTAMP '2024-06-30 23:59:59', 99.99, 1), (4, 'dd', 2.0, TIMESTAMP '2023-12-31 00:00:00', 0, 0)",
]


@pytest.fixture(scope="module")
def hive(spark):
    spark.conf.set("spark.sql.catalog.ohive.type", "hive")
    cat = catalog_for(spark, "ohive")
    assert isinstance(cat, HiveCatalog)
    spark.sql(f"CREATE DATABASE IF NOT EXISTS spark_catalog.{DB}")
    return cat


def _drop(spark, *names: str) -> None:
    for n in names:
        spark.sql(f"DROP TABLE IF EXISTS spark_catalog.{DB}.{n}")


def _source(spark, name: str, partitioned: bool = True, using: str = "parquet") -> None:
    spark.sql(f"DROP TABLE IF EXISTS spark_catalog.{DB}.{name}")
    columns = COLUMNS
    if using == "orc":
        # Spark stores `timestamp` in ORC as a local timestamp, which Java cannot read as the
        # timestamptz it maps the column to ("Can not promote TIMESTAMP type to TIMESTAMP"), and a
        # `timestamp_ntz` column makes the table Spark-specific, whose partitions Java (and we)
        # refuse ("Unknown partition format: ...LazySimpleSerDe"): the values are kept as text
        columns = COLUMNS.replace("ts timestamp", "ts string")
    if using == "avro":  # a Hive serde table: partition columns are declared apart
        spark.conf.set("hive.exec.dynamic.partition.mode", "nonstrict")
        cols = columns.removesuffix(", p int") if partitioned else columns
        spark.sql(f"CREATE TABLE spark_catalog.{DB}.{name} ({cols})"
                  + (" PARTITIONED BY (p int)" if partitioned else "") + " STORED AS AVRO")
    else:
        spark.sql(f"CREATE TABLE spark_catalog.{DB}.{name} ({columns}) USING {using}"
                  + (" PARTITIONED BY (p)" if partitioned else ""))
    for rows in ROWS:
        spark.sql(f"INSERT INTO spark_catalog.{DB}.{name} VALUES {rows}")


def _location(spark, name: str) -> str:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED spark_catalog.{DB}.{name}").collect()
    return next(r.data_type for r in rows if r.col_name == "Location")


def _fingerprint(location: str) -> dict[str, str]:
    return fingerprint(local_path(location))


def _spark_rows(spark, ident: str) -> list[tuple]:
    return sorted((tuple(r) for r in spark.table(ident).collect()), key=repr)


def _files(table) -> list[tuple]:
    md = table.metadata
    out = []
    for e in live_entries(table.io, md, snapshot_manifests(table.io, md.current_snapshot())):
        f = e.data_file
        out.append((f.partition, f.spec_id, f.record_count, f.file_size_in_bytes, f.column_sizes, f.value_counts,
                    f.null_value_counts, f.nan_value_counts or {}, f.lower_bounds, f.upper_bounds,
                    tuple(f.split_offsets or ()), os.path.basename(os.path.dirname(f.file_path)).partition("=")[2]))
    return sorted(out, key=repr)


IGNORED_PROPERTIES = {"snapshot", "migrated", "gc.enabled"}


def _compare_tables(spark, hive, mine: tuple[str, str], java: tuple[str, str], ignored: tuple[str, ...] = (),
                    using: str = "parquet") -> None:
    """Same schema, spec, name mapping, files and rows; properties as Java's but for the ones named.
    DuckDB reads Parquet data files only, PyIceberg Parquet and ORC ones."""
    t_mine, t_java = hive.load_table(mine), hive.load_table(java)
    m, j = t_mine.metadata, t_java.metadata
    assert m.format_version == j.format_version
    assert m.schema() == j.schema(), "schema"
    assert m.spec() == j.spec(), "partition spec"
    assert json.loads(m.properties[DEFAULT_NAME_MAPPING_PROPERTY]) == json.loads(j.properties[DEFAULT_NAME_MAPPING_PROPERTY])
    strip = lambda props: {k: v for k, v in props.items()  # noqa: E731
                           if k not in IGNORED_PROPERTIES and k not in ignored and k != DEFAULT_NAME_MAPPING_PROPERTY}
    assert strip(m.properties) == strip(j.properties), "properties"
    assert _files(t_mine) == _files(t_java), "data files"
    keys = ("operation", "added-data-files", "added-records", "total-data-files", "total-records",
            "changed-partition-count", "added-files-size", "total-files-size")
    assert {k: m.current_snapshot().summary.get(k) for k in keys} == \
        {k: j.current_snapshot().summary.get(k) for k in keys}, "summary"
    spark.sql(f"REFRESH TABLE jhive.{'.'.join(mine)}")
    expected = java_read(spark, f"jhive.{'.'.join(java)}")
    readers = {"java": lambda: java_read(spark, f"jhive.{'.'.join(mine)}"),
               "ours": lambda: spark_df_to_arrow(procedures.read_table(spark, f"ohive.{'.'.join(mine)}")),
               "pyiceberg": lambda: pyiceberg_read(t_mine.metadata_location),
               "duckdb": lambda: duckdb_read(t_mine.metadata_location)}
    unsupported = {"parquet": (), "orc": ("duckdb",), "avro": ("duckdb", "pyiceberg")}[using]
    for reader, read in readers.items():
        if reader in unsupported:
            with pytest.raises(Exception, match="(?i)not supported|unsupported file format"):
                read()
        else:
            assert_rows_equal(read(), expected, key="id", label=f"{mine} / {reader}")
    assert expected.num_rows == 4


def _ours(spark, sql: str) -> list[tuple]:
    return [tuple(r) for r in procedures.sql(spark, sql).collect()]


def _unsupported_sources(spark, iceberg: str, csv: str) -> None:
    """An Iceberg table (Java's, in the metastore) and a CSV table of spark_catalog."""
    spark.sql(f"DROP TABLE IF EXISTS jhive.{DB}.{iceberg} PURGE")
    spark.sql(f"CREATE TABLE jhive.{DB}.{iceberg} (id bigint) USING iceberg")
    _source(spark, csv, using="csv")


def _bad_sources(names: tuple[str, str, str], rest: str) -> list[tuple[str, type, str]]:
    """Refusals of a missing, a CSV and an Iceberg source (``names`` in that order)."""
    errors = ((NoSuchTableError, "does not exist"), (ValidationError, "from source provider: 'csv'"),
              (ValidationError, "already an Iceberg table"))
    return [(f"'{DB}.{n}'{rest}", e, m) for n, (e, m) in zip(names, errors)]


def _refusals(spark, procedure: str, cases: list[tuple[str, type, str]]) -> None:
    for args, error, match in cases:
        with pytest.raises(error, match=match):
            _ours(spark, f"CALL ohive.system.{procedure}({args})")


def _java_snapshot(spark, source: str, target: str) -> list[tuple]:
    spark.sql(f"DROP TABLE IF EXISTS jhive.{DB}.{target}")
    return [tuple(r) for r in spark.sql(
        f"CALL jhive.system.snapshot(source_table => 'spark_catalog.{DB}.{source}', table => 'jhive.{DB}.{target}')"
    ).collect()]


# ------------------------------------------------------------------------------ snapshot
@pytest.mark.java
@pytest.mark.parametrize("using", ["parquet", "orc", "avro"])
@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_snapshot_matches_java(spark, hive, partitioned, using):
    tag = ("p" if partitioned else "u") + ("" if using == "parquet" else f"_{using}")
    src_o, src_j, snap_o, snap_j = f"sn_src_{tag}_o", f"sn_src_{tag}_j", f"sn_{tag}_o", f"sn_{tag}_j"
    _drop(spark, snap_o)
    _source(spark, src_o, partitioned, using)
    _source(spark, src_j, partitioned, using)
    before = _fingerprint(_location(spark, src_o))
    before_rows = _spark_rows(spark, f"spark_catalog.{DB}.{src_o}")
    df = procedures.sql(spark, f"CALL ohive.system.snapshot(source_table => '{DB}.{src_o}', table => '{DB}.{snap_o}')")
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema] == [("imported_files_count", "bigint", False)]
    got = [tuple(r) for r in df.collect()]
    want = _java_snapshot(spark, src_j, snap_j)
    assert got == want and got[0][0] >= 2
    _compare_tables(spark, hive, (DB, snap_o), (DB, snap_j), using=using)
    md = hive.load_table((DB, snap_o)).metadata
    assert md.properties["gc.enabled"] == "false" and md.properties["snapshot"] == "true"
    assert md.location == hive.default_table_location((DB, snap_o))
    # the source is untouched: same files, same bytes, still a Parquet table Spark reads
    assert _fingerprint(_location(spark, src_o)) == before
    spark.sql(f"REFRESH TABLE spark_catalog.{DB}.{src_o}")
    assert _spark_rows(spark, f"spark_catalog.{DB}.{src_o}") == before_rows
    provider = [r for r in spark.sql(f"DESCRIBE TABLE EXTENDED spark_catalog.{DB}.{src_o}").collect()
                if r.col_name == "Provider"]
    assert provider[0].data_type.lower() == ("hive" if using == "avro" else using)


@pytest.mark.java
def test_snapshot_gc_disabled_never_deletes_source_files(spark, hive, tmp_path):
    _source(spark, "sn_gc_src")
    _drop(spark, "sn_gc")
    location = str(tmp_path / "snap_here")
    _ours(spark, f"CALL ohive.system.snapshot('spark_catalog.{DB}.sn_gc_src', '{DB}.sn_gc', '{location}', "
                 "map('owner', 'me'))")
    t = hive.load_table((DB, "sn_gc"))
    assert local_path(t.metadata.location) == location and t.metadata.properties["owner"] == "me"
    # writes go to the snapshot's own location, the source files stay
    spark.sql(f"INSERT INTO jhive.{DB}.sn_gc VALUES (9, 'new', 1.0, NULL, NULL, 0)")
    before = _fingerprint(_location(spark, "sn_gc_src"))
    with pytest.raises(ValidationError, match="GC is disabled"):
        _ours(spark, f"CALL ohive.system.expire_snapshots(table => '{DB}.sn_gc', retain_last => 1, "
                     "older_than => TIMESTAMP '2999-01-01 00:00:00')")
    with pytest.raises(ValidationError, match="(?i)gc"):
        _ours(spark, f"CALL ohive.system.remove_orphan_files(table => '{DB}.sn_gc', "
                     "older_than => TIMESTAMP '2999-01-01 00:00:00')")
    assert _fingerprint(_location(spark, "sn_gc_src")) == before
    spark.sql(f"REFRESH TABLE spark_catalog.{DB}.sn_gc_src")
    assert len(_spark_rows(spark, f"spark_catalog.{DB}.sn_gc_src")) == 4


@pytest.mark.java
def test_snapshot_refusals_change_nothing(spark, hive, tmp_path):
    _source(spark, "sn_bad_src")
    _drop(spark, "sn_bad")
    _unsupported_sources(spark, "sn_iceberg", "sn_orc_src")
    before = set(hive.list_tables(DB))
    cases = [
        *_bad_sources(("sn_nope", "sn_orc_src", "sn_iceberg"), f", '{DB}.sn_bad'"),
        (f"'{DB}.sn_bad_src', '{DB}.sn_iceberg'", TableAlreadyExistsError, "already exists"),
        (f"'{DB}.sn_bad_src', '{DB}.sn_bad_src'", ValidationError, "same name as the source"),
        (f"'jcat.db.x', '{DB}.sn_bad'", ValidationError, "isn't in the session catalog"),
        (f"'{DB}.sn_bad_src', '{DB}.sn_bad', '{_location(spark, 'sn_bad_src')}'", ValidationError,
         "cannot be same as the source table location"),
        (f"'{DB}.sn_bad_src', '{DB}.sn_bad', '{_location(spark, 'sn_bad_src')}/inside'", ValidationError,
         "would overlap with source table location"),
        (f"'{DB}.sn_bad_src', '{DB}.sn_bad', NULL, map(), 0", ValidationError, "Parallelism should be larger than 0"),
    ]
    _refusals(spark, "snapshot", cases)
    assert set(hive.list_tables(DB)) == before
    assert not os.path.exists(local_path(hive.default_table_location((DB, "sn_bad"))))


# ------------------------------------------------------------------------------ migrate
@pytest.mark.java
def test_java_migrate_needs_a_session_catalog_we_do_not_have(spark, hive):
    _source(spark, "mg_java_src")
    with pytest.raises(Exception, match="not a ProcedureCatalog|non-Iceberg Spark Session Catalog"):
        spark.sql(f"CALL spark_catalog.system.migrate('{DB}.mg_java_src')").collect()


@pytest.mark.java
@pytest.mark.parametrize("using", ["parquet", "orc", "avro"])
def test_migrate_matches_java_snapshot(spark, hive, using):
    # names of one length: Hive's Avro writer puts the table name in each file's schema
    src, twin = ("mg_src", "mg_twin") if using == "parquet" else (f"mg_src_{using}", f"mg_twn_{using}")
    _drop(spark, src, f"{src}_backup_", twin)
    _source(spark, src, using=using)
    _source(spark, twin, using=using)
    location = _location(spark, src)
    rows = _spark_rows(spark, f"spark_catalog.{DB}.{src}")
    df = procedures.sql(spark, f"CALL ohive.system.migrate(table => '{DB}.{src}', properties => map('k', 'v'))")
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in df.schema] == [("migrated_files_count", "bigint", False)]
    got = [tuple(r) for r in df.collect()]
    want = _java_snapshot(spark, twin, f"{twin}_snap")
    assert got == want
    md = hive.load_table((DB, src)).metadata
    assert md.properties["migrated"] == "true" and md.properties["k"] == "v"
    assert "gc.enabled" not in md.properties and "snapshot" not in md.properties
    assert local_path(md.location) == local_path(location)
    _compare_tables(spark, hive, (DB, src), (DB, f"{twin}_snap"), ignored=("k",), using=using)
    # the backup is the original table, readable by Spark
    spark.sql(f"REFRESH TABLE spark_catalog.{DB}.{src}_backup_")
    assert _spark_rows(spark, f"spark_catalog.{DB}.{src}_backup_") == rows


def test_migrate_drop_backup_and_backup_name(spark, hive):
    _drop(spark, "mg_drop", "mg_keep", "mg_keep_old")
    _source(spark, "mg_drop")
    _source(spark, "mg_keep")
    assert _ours(spark, f"CALL ohive.system.migrate(table => '{DB}.mg_drop', drop_backup => true)")[0][0] >= 2
    assert not spark.catalog.tableExists(f"{DB}.mg_drop_backup_")
    t = hive.load_table((DB, "mg_drop"))
    assert len(read_all(spark, f"jhive.{DB}.mg_drop", t.metadata_location)["duckdb"]) == 4
    _ours(spark, f"CALL ohive.system.migrate(table => 'spark_catalog.{DB}.mg_keep', backup_table_name => 'mg_keep_old')")
    assert spark.catalog.tableExists(f"{DB}.mg_keep_old")
    assert hive.table_exists((DB, "mg_keep"))


def test_python_migrate_takes_its_catalog_from_the_table_name(spark, hive):
    # procedures.call without a catalog: spark_catalog.db.t lives in the metastore, so the hive
    # catalog on it (ohive; jhive is Java's plugin) is the table's catalog, not the default `local`
    _drop(spark, "mg_py", "mg_py_backup_")
    _source(spark, "mg_py")
    rows = procedures.call("migrate", spark=spark, table=f"spark_catalog.{DB}.mg_py").collect()
    assert rows[0][0] >= 2
    assert hive.load_table((DB, "mg_py")).metadata.properties["migrated"] == "true"
    _drop(spark, "mg_py_src2", "mg_py_snap")
    _source(spark, "mg_py_src2")
    # snapshot: its `table` (the new table) names the catalog, its source is in spark_catalog
    assert procedures.call("snapshot", spark=spark, source_table=f"spark_catalog.{DB}.mg_py_src2",
                           table=f"ohive.{DB}.mg_py_snap").collect()[0][0] >= 2


@pytest.mark.parametrize("after_create", [False, True], ids=["commit-fails", "fails-after-create"])
def test_migrate_failure_restores_the_table(spark, hive, monkeypatch, after_create):
    name = f"mg_fail_{int(after_create)}"
    _drop(spark, name, f"{name}_backup_")
    _source(spark, name)
    location = _location(spark, name)
    rows = _spark_rows(spark, f"spark_catalog.{DB}.{name}")
    real = SparkEngine.commit

    def failing(engine, table, ops):
        if after_create:
            real(engine, table, ops)
        raise RuntimeError("injected failure")

    monkeypatch.setattr(SparkEngine, "commit", failing)
    with pytest.raises(RuntimeError, match="injected failure"):
        _ours(spark, f"CALL ohive.system.migrate('{DB}.{name}')")
    assert not hive.table_exists((DB, name))
    assert not spark.catalog.tableExists(f"{DB}.{name}_backup_")
    assert _location(spark, name) == location
    assert not os.path.exists(os.path.join(local_path(location), "metadata"))
    spark.sql(f"REFRESH TABLE spark_catalog.{DB}.{name}")
    assert _spark_rows(spark, f"spark_catalog.{DB}.{name}") == rows


@pytest.mark.java
def test_migrate_refusals_change_nothing(spark, hive):
    _drop(spark, "mg_bad", "mg_bad_backup_", "mg_orc")
    _source(spark, "mg_bad")
    spark.sql(f"CREATE TABLE spark_catalog.{DB}.mg_bad_backup_ (id bigint) USING parquet")
    _unsupported_sources(spark, "mg_iceberg", "mg_orc")
    before = sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN spark_catalog.{DB}").collect())
    cases = [
        *_bad_sources(("mg_nope", "mg_orc", "mg_iceberg"), ""),
        (f"'{DB}.mg_bad'", TableAlreadyExistsError, "The backup table already exists"),
        (f"table => '{DB}.mg_bad', parallelism => 0", ValidationError, "Parallelism should be larger than 0"),
    ]
    _refusals(spark, "migrate", cases)
    assert sorted(r.tableName for r in spark.sql(f"SHOW TABLES IN spark_catalog.{DB}").collect()) == before
    assert not hive.table_exists((DB, "mg_bad"))
    assert len(_spark_rows(spark, f"spark_catalog.{DB}.mg_bad")) == 4
