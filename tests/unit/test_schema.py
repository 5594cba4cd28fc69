import pytest

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.schema import Schema, schema_from_json, schema_to_json
from procedures.spec.types import (
    DOUBLE, INT, LONG, STRING, DecimalType, FixedType, ListType, MapType, NestedField, StructType, parse_primitive,
)


def sample() -> Schema:
    return Schema(
        (
            NestedField(1, "id", LONG, True),
            NestedField(2, "tags", ListType(3, STRING)),
            NestedField(4, "props", MapType(5, STRING, 6, INT)),
            NestedField(7, "loc", StructType((NestedField(8, "lat", DOUBLE, True),)), True),
            NestedField(9, "pts", ListType(10, StructType((NestedField(11, "x", INT),)), True)),
        ),
        schema_id=3,
        identifier_field_ids=(1,),
    )


def test_indexes_resolve_nested_names_and_ids():
    s = sample()
    assert s.find_field("loc.lat").field_id == 8
    assert s.find_field("tags.element").field_id == 3
    assert s.find_field("props.key").field_id == 5
    assert s.find_field("pts.x").field_id == 11  # short form below a list, as Java indexes it
    assert s.find_column_name(11) == "pts.element.x"
    assert s.parent_id(8) == 7
    assert s.highest_field_id == 11
    assert s.find_field("LOC.LAT", case_sensitive=False).field_id == 8


def test_unknown_column_error_names_it():
    with pytest.raises(ValidationError, match="nope"):
        sample().find_field("nope")


def test_duplicate_ids_refused():
    with pytest.raises(InvalidMetadataError, match="field id 1 twice"):
        Schema((NestedField(1, "a", INT), NestedField(1, "b", INT)))


def test_json_round_trip_and_shape():
    s = sample()
    js = schema_to_json(s)
    assert js["schema-id"] == 3 and js["identifier-field-ids"] == [1]
    assert js["fields"][1]["type"] == {"type": "list", "element-id": 3, "element": "string", "element-required": False}
    assert schema_from_json(js) == s


def test_primitive_strings():
    assert parse_primitive("decimal(9,2)") == DecimalType(9, 2)
    assert str(DecimalType(9, 2)) == "decimal(9, 2)"
    assert parse_primitive("fixed[16]") == FixedType(16)
    with pytest.raises(InvalidMetadataError, match="unknown Iceberg type 'strnig'"):
        parse_primitive("strnig")


def test_identifier_field_rules():
    sample().validate_identifier_fields()
    bad = Schema((NestedField(1, "d", DOUBLE, True),), identifier_field_ids=(1,))
    with pytest.raises(ValidationError, match="cannot be double"):
        bad.validate_identifier_fields()


def test_project_keeps_ancestors():
    p = sample().project({8, 11})
    assert [f.name for f in p.fields] == ["loc", "pts"]
    assert p.find_field("pts.element.x").field_id == 11
