"""Our hadoop catalog and Iceberg Java's (``jcat``) share one warehouse: each sees the other's commits."""

import dataclasses
import json
import os
import time

import pytest

from procedures.catalog import HadoopCatalog, resolve_identifier
from procedures.spark.catalog_conf import conf_from_spark, load_catalog
from procedures.errors import CommitFailedError
from procedures.spec.snapshots import MetadataLogEntry

# every test here reads or writes through Iceberg Java (deselected on pyspark 4)
pytestmark = [pytest.mark.spark, pytest.mark.java]


def bumped(table, **props):
    md = table.metadata
    return dataclasses.replace(
        md,
        properties={**md.properties, **props},
        last_updated_ms=max(int(time.time() * 1000), md.last_updated_ms + 1),
        metadata_log=md.metadata_log + (MetadataLogEntry(md.last_updated_ms, table.metadata_location),),
    )


@pytest.fixture()
def ours(spark, java_warehouse):
    cat = load_catalog("jcat", spark)  # conf read from the session itself
    assert isinstance(cat, HadoopCatalog) and cat.warehouse == str(java_warehouse)
    assert resolve_identifier("jcat.db.t", conf=conf_from_spark(spark)) == ("jcat", ("db", "t"))
    assert resolve_identifier("db.t", conf=conf_from_spark(spark)) == ("local", ("db", "t"))
    return cat


def java_props(spark, table):
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def test_java_table_loads_with_same_metadata(spark, ours, java_warehouse, table_name):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    spark.sql(f"CREATE TABLE jcat.db.{table_name} (id bigint, s string) USING iceberg TBLPROPERTIES ('k'='java')")
    spark.sql(f"INSERT INTO jcat.db.{table_name} VALUES (1, 'a'), (2, 'b')")

    t = ours.load_table(("db", table_name))
    meta_dir = os.path.join(str(java_warehouse), "db", table_name, "metadata")
    newest = max(int(n[1:].split(".")[0]) for n in os.listdir(meta_dir) if n.startswith("v") and n.endswith(".json"))
    assert t.metadata_location.endswith(f"/v{newest}.metadata.json")
    with open(os.path.join(meta_dir, f"v{newest}.metadata.json")) as f:
        raw = json.load(f)
    assert t.metadata.table_uuid == raw["table-uuid"]
    assert t.metadata.current_snapshot_id == raw["current-snapshot-id"]
    assert t.metadata.properties == raw["properties"]
    assert [f.name for f in t.metadata.schema().fields] == ["id", "s"]
    assert ("db",) in ours.list_namespaces()
    assert ("db", table_name) in ours.list_tables("db")


def test_commits_are_seen_both_ways(spark, ours, table_name):
    spark.sql("CREATE NAMESPACE IF NOT EXISTS jcat.db")
    spark.sql(f"CREATE TABLE jcat.db.{table_name} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO jcat.db.{table_name} VALUES (1)")
    name = f"jcat.db.{table_name}"

    t = ours.load_table(("db", table_name))
    t = ours.commit_table(t, t.metadata, bumped(t, by="procedures"))
    spark.catalog.refreshTable(name)
    assert java_props(spark, name)["by"] == "procedures"
    assert spark.sql(f"SELECT count(*) FROM {name}").collect()[0][0] == 1  # snapshots intact

    spark.sql(f"ALTER TABLE {name} SET TBLPROPERTIES ('by'='java', 'j'='1')")
    stale = t
    fresh = ours.load_table(("db", table_name))
    assert fresh.metadata.properties["by"] == "java" and fresh.metadata.properties["j"] == "1"
    assert fresh.metadata.metadata_log[-1].metadata_file.endswith(t.metadata_location.rsplit("/", 1)[-1])
    with pytest.raises(CommitFailedError):
        ours.commit_table(stale, stale.metadata, bumped(stale, lost="1"))

    fresh = ours.commit_table(fresh, fresh.metadata, bumped(fresh, again="procedures"))
    spark.sql(f"REFRESH TABLE {name}")
    props = java_props(spark, name)
    assert props["again"] == "procedures" and props["by"] == "java" and "lost" not in props
    spark.sql(f"INSERT INTO {name} VALUES (2)")
    after = ours.load_table(("db", table_name))
    assert after.metadata.properties["again"] == "procedures"
    assert len(after.metadata.snapshots) == 2
