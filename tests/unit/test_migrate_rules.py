"""The engine-free rules of snapshot and migrate (procedures.core.file_import.table_creation)."""

from __future__ import annotations

import pytest

from procedures.core.file_import import table_creation as M
from procedures.errors import ValidationError
from procedures.spec import types as T

SPARK_SCHEMA = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": False, "metadata": {"comment": "key"}},
    {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
    {"name": "ntz", "type": "timestamp_ntz", "nullable": True, "metadata": {}},
    {"name": "b", "type": "short", "nullable": True, "metadata": {}},
    {"name": "d", "type": "decimal(10, 2)", "nullable": True, "metadata": {}},
    {"name": "s", "type": {"type": "struct", "fields": [
        {"name": "x", "type": "string", "nullable": True, "metadata": {}}]}, "nullable": True, "metadata": {}},
    {"name": "l", "type": {"type": "array", "elementType": "integer", "containsNull": False},
     "nullable": True, "metadata": {}},
    {"name": "m", "type": {"type": "map", "keyType": "string", "valueType": "double", "valueContainsNull": True},
     "nullable": True, "metadata": {}},
    {"name": "p", "type": "integer", "nullable": True, "metadata": {}},
]}


def _source(**kw) -> M.SourceTable:
    base = dict(database="db", name="t", provider="parquet", location="file:/w/t", schema_json=SPARK_SCHEMA,
                partition_columns=("p",), properties={}, bucketed=None, table_type="MANAGED")
    base.update(kw)
    return M.SourceTable(**base)


def test_spark_schema_as_java_converts_it():
    schema = M.spark_schema(SPARK_SCHEMA)
    by_name = {f.name: f for f in schema.fields}
    assert by_name["id"].required and by_name["id"].doc == "key"
    assert by_name["ts"].field_type == T.TIMESTAMPTZ and by_name["ntz"].field_type == T.TIMESTAMP
    assert by_name["b"].field_type == T.INT and str(by_name["d"].field_type) == "decimal(10, 2)"
    assert by_name["l"].field_type.element_required and not by_name["m"].field_type.value_required
    assert len(set(schema.field_ids())) == len(list(schema.field_ids()))
    spec = M.identity_spec(schema, ["P"])
    assert [(f.name, str(f.transform)) for f in spec.fields] == [("p", "identity")]
    with pytest.raises(ValidationError, match="Cannot convert Spark type"):
        M.spark_schema({"type": "struct", "fields": [{"name": "v", "type": "variant", "nullable": True}]})


def test_properties():
    source = {"path": "/x", "transient_lastDdlTime": "1", "serialization.format": "1", "write.data.path": "/d",
              "owner": "a", "gc.enabled": "true"}
    snap = M.snapshot_properties(source, {"gc.enabled": "true", "snapshot": "false", "k": "v"})
    assert snap == {"owner": "a", "provider": "iceberg", "k": "v", "gc.enabled": "false", "snapshot": "true"}
    mig = M.migrate_properties(source, {"owner": "b"})
    assert mig == {"write.data.path": "/d", "owner": "b", "provider": "iceberg", "gc.enabled": "true",
                   "migrated": "true"}
    assert M.table_properties(mig) == {"write.data.path": "/d", "owner": "b", "gc.enabled": "true",
                                       "migrated": "true", "write.parquet.compression-codec": "zstd"}


def test_locations_and_backup_name():
    M.check_snapshot_location("file:/w/snap", "file:/w/t")
    M.check_snapshot_location("/w/tt", "file:/w/t")
    with pytest.raises(ValidationError, match="cannot be same"):
        M.check_snapshot_location("/w/t/", "file:/w/t")
    for inside in ("file:/w/t/sub", "/w"):
        with pytest.raises(ValidationError, match="would overlap"):
            M.check_snapshot_location(inside, "file:/w/t")
    assert M.backup_name("t", None) == "t_backup_" and M.backup_name("t", "old") == "old"


@pytest.mark.parametrize("kw, match", [
    (dict(provider="iceberg"), "already an Iceberg table"),
    (dict(provider="hive", properties={"table_type": "ICEBERG"}), "already an Iceberg table"),
    (dict(provider="csv"), "source provider: 'csv'"),
    (dict(location=None), "without an explicit location"),
    (dict(bucketed="4 buckets, bucket columns: [id]"), "bucketed source table"),
])
def test_source_checks(kw, match):
    M.check_source(_source())
    with pytest.raises(ValidationError, match=match):
        M.check_source(_source(**kw))
