"""Iceberg <-> Arrow schema conversion, field ids in Parquet, name mapping, casting data."""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from procedures.errors import ValidationError
from procedures.io.arrow_schema import (
    FIELD_ID_KEY,
    UUID_ARROW_TYPE,
    arrow_to_schema,
    cast_to_schema,
    field_id,
    has_field_ids,
    schema_to_arrow,
)
from procedures.spec.name_mapping import parse_name_mapping
from procedures.spec.schema import Schema
from procedures.spec.types import (
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIME,
    TIMESTAMP,
    TIMESTAMP_NS,
    TIMESTAMPTZ,
    TIMESTAMPTZ_NS,
    UUID,
    DecimalType,
    FixedType,
    ListType,
    MapType,
    NestedField,
    StructType,
)

# the schema of the Java TypeToMessageType example in spec-onfile.md 12.1
SPEC_SCHEMA = Schema((
    NestedField(1, "id", LONG, True),
    NestedField(2, "tags", ListType(3, STRING)),
    NestedField(4, "props", MapType(5, STRING, 6, INT)),
    NestedField(7, "loc", StructType((NestedField(8, "lat", DOUBLE, True),))),
    NestedField(9, "u", UUID),
    NestedField(10, "d9", DecimalType(9, 2)),
    NestedField(11, "d18", DecimalType(18, 2)),
    NestedField(12, "d38", DecimalType(38, 10)),
    NestedField(13, "t", TIME),
    NestedField(14, "ts", TIMESTAMP),
    NestedField(15, "tstz", TIMESTAMPTZ),
    NestedField(16, "tsns", TIMESTAMP_NS),
    NestedField(17, "dt", DATE),
    NestedField(18, "fx", FixedType(4)),
    NestedField(19, "bin", BINARY),
    NestedField(20, "my col", STRING),
    NestedField(21, "nested_list", ListType(22, StructType((NestedField(23, "x", INT),)), True)),
    NestedField(24, "b", BOOLEAN),
    NestedField(25, "f", FLOAT),
    NestedField(26, "tstzns", TIMESTAMPTZ_NS),
))


def test_primitive_types_follow_the_spec_table():
    s = schema_to_arrow(SPEC_SCHEMA)
    assert s.field("id").type == pa.int64() and not s.field("id").nullable
    assert s.field("d9").type == pa.decimal128(9, 2)
    assert s.field("d38").type == pa.decimal128(38, 10)
    assert s.field("t").type == pa.time64("us")
    assert s.field("ts").type == pa.timestamp("us")
    assert s.field("tstz").type == pa.timestamp("us", tz="UTC")
    assert s.field("tsns").type == pa.timestamp("ns")
    assert s.field("tstzns").type == pa.timestamp("ns", tz="UTC")
    assert s.field("dt").type == pa.date32()
    assert s.field("fx").type == pa.binary(4)
    assert s.field("bin").type == pa.binary()
    assert s.field("u").type == UUID_ARROW_TYPE
    assert s.field("f").type == pa.float32()
    assert s.field("b").type == pa.bool_()
    assert schema_to_arrow(SPEC_SCHEMA, large_types=True).field("my col").type == pa.large_string()


def test_every_field_carries_its_id_including_element_key_value():
    s = schema_to_arrow(SPEC_SCHEMA)
    assert s.field("id").metadata == {FIELD_ID_KEY: b"1"}
    tags = s.field("tags").type
    assert tags.value_field.name == "element" and field_id(tags.value_field) == 3
    props = s.field("props").type
    assert (field_id(props.key_field), field_id(props.item_field)) == (5, 6)
    assert not props.key_field.nullable
    loc = s.field("loc").type
    assert field_id(loc.field(0)) == 8 and not loc.field(0).nullable
    nl = s.field("nested_list").type.value_field
    assert field_id(nl) == 22 and not nl.nullable and field_id(nl.type.field(0)) == 23


def test_parquet_schema_matches_java_message_type(tmp_path):
    arrow = schema_to_arrow(SPEC_SCHEMA)
    path = str(tmp_path / "x.parquet")
    pq.write_table(arrow.empty_table(), path, store_decimal_as_integer=True, version="2.6")
    text = str(pq.ParquetFile(path).schema)
    # physical types and ids per spec-onfile.md 12.1
    for line in (
        "required int64 field_id=1 id;",
        "optional binary field_id=3 element (String);",
        "required binary field_id=5 key (String);",
        "optional int32 field_id=6 value;",
        "required double field_id=8 lat;",
        "optional fixed_len_byte_array(16) field_id=9 u (UUID);",
        "optional int32 field_id=10 d9 (Decimal(precision=9, scale=2));",
        "optional int64 field_id=11 d18 (Decimal(precision=18, scale=2));",
        "optional fixed_len_byte_array(16) field_id=12 d38 (Decimal(precision=38, scale=10));",
        "optional int64 field_id=13 t (Time(isAdjustedToUTC=false, timeUnit=microseconds));",
        "optional int64 field_id=16 tsns (Timestamp(isAdjustedToUTC=false, timeUnit=nanoseconds, is_from_converted_type=false, force_set_converted_type=false));",
        "optional int32 field_id=17 dt (Date);",
        "optional fixed_len_byte_array(4) field_id=18 fx;",
        "required group field_id=22 element {",
    ):
        assert line in text, (line, text)
    # repeated groups get no id
    assert "repeated group field_id=-1 list {" in text and "repeated group field_id=-1 key_value {" in text
    assert "field_id=15 tstz (Timestamp(isAdjustedToUTC=true, timeUnit=microseconds" in text


def test_round_trip_through_parquet_keeps_schema(tmp_path):
    path = str(tmp_path / "x.parquet")
    pq.write_table(schema_to_arrow(SPEC_SCHEMA).empty_table(), path, store_decimal_as_integer=True, version="2.6")
    back = arrow_to_schema(pq.read_schema(path))
    assert back.as_struct() == SPEC_SCHEMA.as_struct()
    # also without the stored Arrow schema (as files written by Java are read)
    pq.write_table(
        schema_to_arrow(SPEC_SCHEMA).empty_table(), path, store_decimal_as_integer=True, version="2.6",
        store_schema=False,
    )
    back = arrow_to_schema(pq.read_schema(path))
    assert back.find_type("u") in (UUID, FixedType(16))
    assert back.find_type("d18") == DecimalType(18, 2)
    assert back.find_type("nested_list") == SPEC_SCHEMA.find_type("nested_list")


def test_missing_ids_raise_or_map_or_assign():
    plain = pa.schema([
        pa.field("id", pa.int64(), False),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("extra", pa.int32()),
    ])
    assert not has_field_ids(plain)
    with pytest.raises(ValidationError, match="'id' has no PARQUET:field_id"):
        arrow_to_schema(plain)
    mapping = parse_name_mapping(
        '[{"field-id": 7, "names": ["id"]}, {"field-id": 8, "names": ["tags"], "fields": [{"field-id": 9, "names": ["element"]}]}]'
    )
    mapped = arrow_to_schema(plain, name_mapping=mapping)
    assert mapped.as_struct() == StructType((NestedField(7, "id", LONG, True), NestedField(8, "tags", ListType(9, STRING))))
    fresh = arrow_to_schema(plain, assign_fresh_ids=True)
    assert [f.field_id for f in fresh.fields] == [1, 2, 4]
    assert fresh.find_type("tags") == ListType(3, STRING)


def test_cast_spark_like_batch_to_table_schema():
    schema = Schema((
        NestedField(1, "id", LONG, True),
        NestedField(2, "ts", TIMESTAMPTZ),
        NestedField(3, "u", UUID),
        NestedField(4, "tags", ListType(5, STRING)),
        NestedField(6, "s", StructType((NestedField(7, "a", INT), NestedField(8, "b", STRING)))),
        NestedField(9, "fx", FixedType(2)),
        NestedField(10, "missing", STRING),
    ))
    u = uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")
    batch = pa.RecordBatch.from_pydict(
        {
            "ID": pa.array([1, 2], pa.int64()),
            "ts": pa.array([dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), None], pa.timestamp("us", tz="Europe/Paris")),
            "u": pa.array([str(u), None]),
            "tags": pa.array([["a"], None], pa.list_(pa.field("item", pa.string()))),
            "s": pa.array([{"b": "x", "a": 1}, None], pa.struct([("b", pa.string()), ("a", pa.int32())])),
            "fx": pa.array([b"ab", b"cd"], pa.binary()),
        }
    )
    out = cast_to_schema(batch, schema)
    assert out.schema == schema_to_arrow(schema)
    assert out.schema.field("tags").type.value_field.metadata == {FIELD_ID_KEY: b"5"}
    rows = out.to_pylist()
    assert rows[0]["id"] == 1 and rows[0]["u"] == u and rows[1]["u"] is None
    assert rows[0]["ts"] == dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    assert rows[0]["s"] == {"a": 1, "b": "x"} and rows[1]["s"] is None
    assert rows[0]["tags"] == ["a"] and rows[1]["tags"] is None
    assert rows[1]["fx"] == b"cd" and rows[0]["missing"] is None


def test_cast_refuses_missing_required_and_nulls_in_required():
    schema = Schema((NestedField(1, "id", LONG, True),))
    with pytest.raises(ValidationError, match="required column 'id' is missing"):
        cast_to_schema(pa.table({"x": [1]}), schema)
    with pytest.raises(ValidationError, match="'id' holds 1 null"):
        cast_to_schema(pa.table({"id": pa.array([1, None], pa.int64())}), schema)


def test_decimal_cast_keeps_values():
    schema = Schema((NestedField(1, "d", DecimalType(9, 2)),))
    out = cast_to_schema(pa.table({"d": pa.array([Decimal("1.50")], pa.decimal128(10, 2))}), schema)
    assert out.column("d").to_pylist() == [Decimal("1.50")]
