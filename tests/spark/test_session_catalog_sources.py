"""``snapshot`` and ``add_files`` from tables of Spark's session catalog on a classic session and on a
Spark Connect session (each with its own embedded metastore): the source is read through Spark SQL
statements (procedures.spark.session_catalog), so the same code runs on both.  Checked: the partition
values Hive escapes in folder names (``/``, spaces, ``%``, null), a custom partition location, the
source's properties (also one Spark redacts by default, ``source-url``), the footers read on the
driver and as a Spark job, and the rows PyIceberg reads back.  ``migrate`` on Connect, which needs a
metastore both sides reach, is in tests/spark/test_migrate_thrift.py.
"""

from __future__ import annotations

import os

import pytest

from procedures.core.file_import import table_creation as M
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.paths import local_path
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.errors import NoSuchTableError, ValidationError
from procedures.core.file_import.import_files import ADD_FILES, AddFilesParams
from procedures.core.file_import.session_import import SNAPSHOT, NewTable, SnapshotParams
from procedures.spark.engine import file_import_steps as AF
from procedures.spark.engine.action import Action
from procedures.spark.dataframes import is_connect
from procedures.spark.session import catalog_for
from procedures.spark.session_catalog import describe_table, list_partitions
from tests.oracles import pyiceberg_read

pytestmark = [pytest.mark.spark, pytest.mark.both_sessions]

VALUES = ("a/b", "c d", "e%f=g", None)


def _kind(spark) -> str:
    return "connect" if is_connect(spark) else "classic"


def _source(spark, tmp_path, name: str) -> tuple[str, str]:
    """A partitioned Parquet table of spark_catalog (one partition at a custom location); returns
    (database, fully qualified name)."""
    db = f"scs_{_kind(spark)}"
    spark.sql(f"CREATE DATABASE IF NOT EXISTS spark_catalog.{db}")
    full = f"spark_catalog.{db}.{name}"
    spark.sql(f"DROP TABLE IF EXISTS {full}")
    spark.sql(f"CREATE TABLE {full} (id bigint, data string, p string) USING parquet PARTITIONED BY (p) "
              "TBLPROPERTIES ('source-url'='http://example.invalid/x', 'k'='v, x=y')")
    rows = ", ".join(f"({i}, 'row{i}', {'NULL' if v is None else repr(v)})" for i, v in enumerate(VALUES))
    spark.sql(f"INSERT INTO {full} VALUES {rows}")
    spark.sql(f"INSERT INTO {full} VALUES (10, 'again', 'a/b')")
    custom = tmp_path / f"custom {name}"
    spark.sql(f"ALTER TABLE {full} ADD PARTITION (p='custom') LOCATION '{custom}'")
    spark.sql(f"INSERT INTO {full} PARTITION (p='custom') VALUES (20, 'custom')")
    return db, full


def _rows(spark, full: str) -> list[tuple]:
    return sorted((tuple(r) for r in spark.table(full).select("id", "data", "p").collect()), key=repr)


def _data_files(table) -> list:
    md = table.metadata
    return [e.data_file for e in live_entries(table.io, md, snapshot_manifests(table.io, md.current_snapshot()))]


def _parquet_files(*folders: str) -> set[str]:
    out = set()
    for folder in folders:
        for root, _, names in os.walk(local_path(folder)):
            out.update(os.path.join(root, n) for n in names if n.endswith(".parquet") and not n.startswith((".", "_")))
    return out


def test_describe_and_partitions_through_sql(spark, tmp_path):
    db, full = _source(spark, tmp_path, "described")
    table = describe_table(spark, ("spark_catalog", db, "described"))
    assert (table.table_type, table.provider, table.partition_columns) == ("MANAGED", "parquet", ("p",))
    # the real value of a property Spark's SHOW TBLPROPERTIES redacts by default (its key holds "url")
    assert table.properties["source-url"] == "http://example.invalid/x" and table.properties["k"] == "v, x=y"
    assert table.bucket_spec is None and [f["name"] for f in table.schema_json["fields"]] == ["id", "data", "p"]
    parts = {dict(p.values)["p"]: p.location for p in list_partitions(spark, table)}
    assert set(parts) == {"a/b", "c d", "e%f=g", "__HIVE_DEFAULT_PARTITION__", "custom"}
    assert parts["custom"] == f"file:{tmp_path}/custom described"
    assert parts["a/b"] == f"{table.location}/p=a%2Fb"  # Hive's escaped folder name, as it is on disk
    assert all(os.path.isdir(local_path(loc)) for loc in parts.values())
    with pytest.raises(NoSuchTableError, match="does not exist"):
        describe_table(spark, (db, "missing"))
    spark.sql(f"DROP TABLE IF EXISTS spark_catalog.{db}.bucketed")
    spark.sql(f"CREATE TABLE spark_catalog.{db}.bucketed (id bigint, x int) USING parquet "
              "CLUSTERED BY (id) SORTED BY (x) INTO 4 BUCKETS")
    assert describe_table(spark, (db, "bucketed")).bucket_spec == "4 buckets, bucket columns: [id], sort columns: [x]"
    with pytest.raises(ValidationError, match="bucketed source table: 4 buckets"):
        Action(SNAPSHOT, spark).run(NewTable(catalog_for(spark, "jcat"), (db, "bucketed_snap")),
                                    SnapshotParams(source=(db, "bucketed")))


def test_snapshot_of_a_session_catalog_table(spark, tmp_path):
    db, full = _source(spark, tmp_path, "snap_src")
    cat = catalog_for(spark, "jcat")
    ident = (db, "snap")
    if cat.table_exists(ident):
        cat.drop_table(ident)
    source = describe_table(spark, (db, "snap_src"))
    count = Action(SNAPSHOT, spark).run(NewTable(cat, ident), SnapshotParams(source=("spark_catalog", db, "snap_src"))).count
    table = cat.load_table(ident)
    expected = _parquet_files(source.location, str(tmp_path / "custom snap_src"))
    assert count == len(expected) == 6
    assert {local_path(f.file_path) for f in _data_files(table)} == expected
    assert sorted({f.partition for f in _data_files(table)}, key=repr) == \
        sorted({(v,) for v in (*VALUES, "custom")}, key=repr)
    props = table.metadata.properties
    assert props["source-url"] == "http://example.invalid/x" and props["snapshot"] == "true"
    got = pyiceberg_read(table.metadata_location)
    assert sorted(zip(got["id"].to_pylist(), got["data"].to_pylist(), got["p"].to_pylist()), key=repr) == \
        _rows(spark, full)


@pytest.mark.parametrize("via_spark", [False, True], ids=["driver", "spark-job"])
def test_add_files_from_a_session_catalog_table(spark, tmp_path, monkeypatch, via_spark):
    name = f"af_src_{int(via_spark)}"
    db, full = _source(spark, tmp_path, name)
    if via_spark:
        monkeypatch.setattr(AF, "DRIVER_MAX_FILES", 0)
    cat = catalog_for(spark, "jcat")
    ident = (db, f"af_target_{int(via_spark)}")
    if not cat.namespace_exists((db,)):
        cat.create_namespace((db,))
    if cat.table_exists(ident):
        cat.drop_table(ident)
    schema = M.spark_schema(spark.table(full).schema.jsonValue())
    md, _ = new_table_metadata(schema=schema, location=cat.default_table_location(ident),
                               spec=M.identity_spec(schema, ["p"]), properties={"format-version": "2"})
    table = cat.create_table(ident, md)
    result = Action(ADD_FILES, spark).run(table, AddFilesParams(source_table=full, partition_filter={}, table_name=table.name))
    added = cat.load_table(ident)
    expected = _parquet_files(describe_table(spark, (db, name)).location, str(tmp_path / f"custom {name}"))
    assert result.added_files_count == len(expected) == 6
    assert {local_path(f.file_path) for f in _data_files(added)} == expected
    got = pyiceberg_read(added.metadata_location)
    assert sorted(zip(got["id"].to_pylist(), got["data"].to_pylist(), got["p"].to_pylist()), key=repr) == \
        _rows(spark, full)
    # one partition by filter, from a table named without the catalog
    again = cat.load_table(ident)
    with pytest.raises(Exception, match="(?i)duplicate"):
        Action(ADD_FILES, spark).run(again, AddFilesParams(source_table=f"{db}.{name}", partition_filter={"p": "c d"},
                                                          table_name=again.name))
