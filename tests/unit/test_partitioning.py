"""Partition specs: ids, names, validation, JSON and Java's partition paths (spec-onfile §3.4, §5.3, §7.3)."""

import uuid
from decimal import Decimal

import pytest

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.partitioning import (
    PARTITION_FIELD_ID_START, UNPARTITIONED_SPEC, PartitionField, PartitionSpec, PartitionSpecBuilder,
    assign_fresh_partition_ids, escape_path_part, fields_to_json, spec_from_json, spec_to_json,
)
from procedures.spec.schema import Schema
from procedures.spec.transforms import DAY, IDENTITY, VOID, BucketTransform, TruncateTransform, UnknownTransform
from procedures.spec.types import (
    BINARY, BOOLEAN, DATE, FLOAT, INT, LONG, STRING, TIME, TIMESTAMP, TIMESTAMPTZ, UNKNOWN, UUID, DecimalType,
    NestedField, StructType,
)

JAVA_PATH = (
    "ts=2017-11-16T22%3A31%3A08.0001/tstz=2017-11-16T22%3A31%3A08.0001%2B00%3A00/s=a+b%2Fc%3Dd%25%C3%A9/"
    "b=qrvM/d=-14.20/t=22%3A31/dt=2017-11-16/u=f79c3e09-677c-4bbd-a479-3f349cb785e7/f=1.5/bo=true/"
    "dt_year=2017/ts_month=2017-11/tstz_day=2017-11-16/s_bucket=9/s_trunc=a+b"
)


def path_schema() -> Schema:
    cols = [("ts", TIMESTAMP), ("tstz", TIMESTAMPTZ), ("s", STRING), ("b", BINARY), ("d", DecimalType(9, 2)),
            ("t", TIME), ("dt", DATE), ("u", UUID), ("f", FLOAT), ("bo", BOOLEAN)]
    return Schema(tuple(NestedField(i + 1, n, t) for i, (n, t) in enumerate(cols)))


def path_spec(schema: Schema) -> PartitionSpec:
    b = PartitionSpecBuilder(schema)
    for col in ("ts", "tstz", "s", "b", "d", "t", "dt", "u", "f", "bo"):
        b.identity(col)
    return b.year("dt").month("ts").day("tstz").bucket("s", 16).truncate("s", 3).build()


TS = 1510871468000100  # 2017-11-16T22:31:08.0001
JAVA_VALUES = (TS, TS, "a b/c=d%é", bytes.fromhex("aabbcc"), Decimal("-14.20"), 81060000000, 17486,
               uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7"), 1.5, True, 47, 574, 17486, 9, "a b")


def test_java_partition_path_example():
    schema = path_schema()
    spec = path_spec(schema)
    assert spec.partition_to_path(JAVA_VALUES, schema) == JAVA_PATH
    assert spec.partition_from_path(JAVA_PATH, schema) == JAVA_VALUES
    assert spec.partition_from_path(f"s3://b/t/data/{JAVA_PATH}/00000-0.parquet", schema) == JAVA_VALUES


def test_path_nulls_hive_marker_and_hour():
    schema = Schema((NestedField(1, "ts", TIMESTAMP), NestedField(2, "id", LONG)))
    spec = PartitionSpecBuilder(schema).hour("ts").identity("id").build()
    assert spec.partition_to_path((419686, None), schema) == "ts_hour=2017-11-16-22/id=null"
    assert spec.partition_from_path("ts_hour=2017-11-16-22/id=null", schema) == (419686, None)
    assert spec.partition_from_path("ts_hour=1969-12-31-23/id=__HIVE_DEFAULT_PARTITION__", schema) == (-1, None)
    with pytest.raises(ValidationError, match="ts_hour"):
        spec.partition_from_path("other=1/id=2", schema)


def test_escape_matches_java_url_encoder():
    assert escape_path_part("a b~*._-") == "a+b%7E*._-"
    assert escape_path_part("é/=%:+") == "%C3%A9%2F%3D%25%3A%2B"


def test_default_names_and_v1_ids():
    schema = Schema((NestedField(1, "id", LONG), NestedField(2, "s", STRING), NestedField(3, "ts", TIMESTAMP),
                     NestedField(4, "loc", StructType((NestedField(5, "zip", INT),)))))
    spec = (PartitionSpecBuilder(schema, format_version=1).identity("id").bucket("s", 8).truncate("s", 2)
            .year("ts").void("id").bucket("loc.zip", 4).build())
    assert [f.name for f in spec.fields] == ["id", "s_bucket", "s_trunc", "ts_year", "id_null", "loc.zip_bucket"]
    assert [f.field_id for f in spec.fields] == [1000, 1001, 1002, 1003, 1004, 1005]
    assert [f.source_id for f in spec.fields] == [1, 2, 2, 3, 1, 5]
    for method, suffix in (("month", "_month"), ("day", "_day"), ("hour", "_hour")):
        assert getattr(PartitionSpecBuilder(schema), method)("ts").build().fields[0].name == "ts" + suffix


def test_v2_ids_continue_and_reuse_equivalent_fields():
    schema = Schema((NestedField(1, "id", LONG), NestedField(2, "ts", TIMESTAMP)))
    first = PartitionSpecBuilder(schema, 0, 999).bucket("id", 16).build()
    assert first.fields[0].field_id == 1000
    b = PartitionSpecBuilder(schema, 1, 1003, existing_specs=[first])
    second = b.day("ts").bucket("id", 16, name="renamed").build()
    assert [f.field_id for f in second.fields] == [1004, 1000]
    assert b.last_partition_id == 1004
    fresh, last = assign_fresh_partition_ids(
        PartitionSpec(2, (PartitionField(2, 1, DAY, "d"), PartitionField(1, 2, IDENTITY, "id"))),
        format_version=2, existing_specs=[first, second], last_partition_id=1004,
    )
    assert [f.field_id for f in fresh.fields] == [1004, 1005] and last == 1005


def test_name_and_redundancy_validation():
    schema = Schema((NestedField(1, "id", LONG), NestedField(2, "ts", TIMESTAMP), NestedField(3, "flag", BOOLEAN)))
    with pytest.raises(ValidationError, match="'ts'"):
        PartitionSpecBuilder(schema).bucket("id", 4, name="ts")  # clashes with a column
    with pytest.raises(ValidationError, match="different column"):
        PartitionSpecBuilder(schema).identity("id", name="ts")
    with pytest.raises(ValidationError, match="already exists"):
        PartitionSpecBuilder(schema).bucket("id", 4, name="x").truncate("id", 4, name="x")
    with pytest.raises(ValidationError, match="redundant"):
        PartitionSpecBuilder(schema).day("ts").hour("ts")
    with pytest.raises(ValidationError, match="redundant"):
        PartitionSpecBuilder(schema).bucket("id", 4).bucket("id", 4, name="again")
    with pytest.raises(ValidationError, match="boolean"):
        PartitionSpecBuilder(schema).bucket("flag", 4)
    with pytest.raises(ValidationError, match="nope"):
        PartitionSpecBuilder(schema).identity("nope")
    # void fields are exempt from the redundancy rule
    spec = PartitionSpecBuilder(schema).void("id").void("id", name="id_null2").identity("id").build()
    assert [str(f.transform) for f in spec.fields] == ["void", "void", "identity"]


def test_partition_type_is_all_optional_with_result_types():
    schema = Schema((NestedField(1, "id", LONG, True), NestedField(2, "ts", TIMESTAMP, True)))
    spec = PartitionSpecBuilder(schema).bucket("id", 16).day("ts").identity("id").build()
    assert spec.partition_type(schema) == StructType((
        NestedField(1000, "id_bucket", INT), NestedField(1001, "ts_day", DATE), NestedField(1002, "id", LONG),
    ))
    dropped = PartitionSpec(1, (PartitionField(9, 1000, VOID, "gone"),))
    assert dropped.partition_type(schema).fields[0].field_type == UNKNOWN


def test_unpartitioned_and_compatibility():
    assert UNPARTITIONED_SPEC.is_unpartitioned() and UNPARTITIONED_SPEC.last_assigned_field_id == 999
    only_void = PartitionSpec(1, (PartitionField(1, 1000, VOID, "x_null"),))
    assert only_void.is_unpartitioned()
    a = PartitionSpec(0, (PartitionField(1, 1000, BucketTransform(4), "b"),))
    assert a.compatible_with(PartitionSpec(5, (PartitionField(1, 1007, BucketTransform(4), "b"),)))
    assert not a.compatible_with(PartitionSpec(5, (PartitionField(1, 1000, BucketTransform(8), "b"),)))
    assert not a.compatible_with(PartitionSpec(5, (PartitionField(1, 1000, BucketTransform(4), "c"),)))
    assert PARTITION_FIELD_ID_START == 1000


def test_json_round_trip_and_manifest_fields():
    obj = {"spec-id": 0, "fields": [
        {"name": "ts_day", "transform": "day", "source-id": 3, "field-id": 1000},
        {"name": "id_bucket", "transform": "bucket[16]", "source-id": 1, "field-id": 1001}]}
    spec = spec_from_json(obj)
    assert spec.fields[1] == PartitionField(1, 1001, BucketTransform(16), "id_bucket")
    assert spec_to_json(spec) == obj
    assert fields_to_json(spec) == obj["fields"]
    assert spec_to_json(UNPARTITIONED_SPEC) == {"spec-id": 0, "fields": []}


def test_json_v1_implied_ids_all_or_none_and_unknown_transforms():
    spec = spec_from_json({"spec-id": 0, "fields": [
        {"name": "a", "transform": "identity", "source-id": 1},
        {"name": "b", "transform": "truncate[4]", "source-id": 2}]})
    assert [f.field_id for f in spec.fields] == [1000, 1001]
    assert spec.fields[1].transform == TruncateTransform(4)
    with pytest.raises(InvalidMetadataError, match="all fields or on none"):
        spec_from_json({"spec-id": 0, "fields": [
            {"name": "a", "transform": "identity", "source-id": 1, "field-id": 1000},
            {"name": "b", "transform": "identity", "source-id": 2}]})
    odd = spec_from_json({"spec-id": 1, "fields": [{"name": "z", "transform": "zorder", "source-ids": [4],
                                                     "field-id": 1000}]})
    assert isinstance(odd.fields[0].transform, UnknownTransform)
    assert spec_to_json(odd)["fields"][0]["transform"] == "zorder"
    with pytest.raises(InvalidMetadataError, match="source-id"):
        spec_from_json({"spec-id": 0, "fields": [{"name": "a", "transform": "identity"}]}, location="m.json")
