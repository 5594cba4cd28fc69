"""Name mapping: JSON round trip, creation from a schema, updates and resolving file paths."""

from __future__ import annotations

import json

import pytest

from procedures.errors import InvalidMetadataError
from procedures.spec.name_mapping import (
    MappedField,
    NameMapping,
    arrow_field_ids,
    create_mapping,
    name_mapping_to_json,
    parse_name_mapping,
    resolve_field_ids,
    update_mapping,
    update_mapping_for_schema,
)
from procedures.spec.schema import Schema
from procedures.spec.schema_update import SchemaUpdate
from procedures.spec.types import DOUBLE, INT, LONG, STRING, ListType, MapType, NestedField, StructType
from tests.helpers.references import import_reference

# the example of spec-onfile.md section 12.2
SPEC_EXAMPLE = """[ {"field-id": 1, "names": ["id", "record_id"]},
  {"field-id": 2, "names": ["data"]},
  {"field-id": 3, "names": ["tags"], "fields": [ {"field-id": 4, "names": ["element"]} ]},
  {"field-id": 5, "names": ["props"], "fields": [ {"field-id": 6, "names": ["key"]}, {"field-id": 7, "names": ["value"]} ]},
  {"field-id": 8, "names": ["location", "loc"], "fields": [
      {"field-id": 9,  "names": ["latitude", "lat"]},
      {"field-id": 10, "names": ["longitude", "long"]} ]} ]"""


def schema() -> Schema:
    return Schema((
        NestedField(1, "id", LONG, True),
        NestedField(2, "data", STRING),
        NestedField(3, "tags", ListType(4, STRING)),
        NestedField(5, "props", MapType(6, STRING, 7, INT)),
        NestedField(8, "location", StructType((NestedField(9, "latitude", DOUBLE), NestedField(10, "longitude", DOUBLE)))),
    ))


def test_parse_spec_example_and_find():
    m = parse_name_mapping(SPEC_EXAMPLE)
    assert len(m) == 5
    assert m.find_id("record_id") == 1 and m.find_id("id") == 1
    assert m.find_id("loc.lat") == 9 and m.find_id("location.longitude") == 10
    assert m.find_id(("loc", "long")) == 10
    assert m.find_id("tags.element") == 4 and m.find_id(("props", "value")) == 7
    assert m.find_id("nope") is None and m.find_id(("loc", "nope")) is None
    assert m.find_by_id(8).names == ("location", "loc")
    assert m.find("data").fields is None


def test_json_round_trip():
    m = parse_name_mapping(SPEC_EXAMPLE)
    text = name_mapping_to_json(m)
    assert json.loads(text) == json.loads(SPEC_EXAMPLE)
    assert parse_name_mapping(text) == m


def test_optional_field_id_and_empty_names():
    m = parse_name_mapping('[{"names": ["only_in_files"]}, {"field-id": 3, "names": []}]')
    assert m.fields[0] == MappedField(None, ("only_in_files",), None)
    assert m.find_id("only_in_files") is None
    assert json.loads(name_mapping_to_json(m)) == [{"names": ["only_in_files"]}, {"field-id": 3, "names": []}]


@pytest.mark.parametrize(
    "text, message",
    [
        ("{", "not valid JSON"),
        ('{"field-id": 1}', "must be a JSON array"),
        ('[1]', "non-object field 1"),
        ('[{"field-id": "x", "names": []}]', "field-id must be an integer, got 'x'"),
        ('[{"field-id": 1, "names": "a"}]', "names must be a list of strings"),
        ('[{"field-id": 1, "names": ["a"]}, {"field-id": 1, "names": ["b"]}]', "field id 1 is not unique"),
        ('[{"field-id": 1, "names": ["a"]}, {"field-id": 2, "names": ["a"]}]', "name 'a' is mapped twice"),
    ],
)
def test_parse_errors(text, message):
    with pytest.raises(InvalidMetadataError, match=message):
        parse_name_mapping(text)


def test_create_mapping_matches_java_shape():
    m = create_mapping(schema())
    assert json.loads(name_mapping_to_json(m)) == [
        {"field-id": 1, "names": ["id"]},
        {"field-id": 2, "names": ["data"]},
        {"field-id": 3, "names": ["tags"], "fields": [{"field-id": 4, "names": ["element"]}]},
        {"field-id": 5, "names": ["props"], "fields": [{"field-id": 6, "names": ["key"]}, {"field-id": 7, "names": ["value"]}]},
        {"field-id": 8, "names": ["location"], "fields": [
            {"field-id": 9, "names": ["latitude"]}, {"field-id": 10, "names": ["longitude"]}]},
    ]


def test_update_mapping_renames_keep_aliases_and_adds_append():
    old = schema()
    new, _ = (
        SchemaUpdate(old, 10)
        .rename_column("location.latitude", "lat")
        .rename_column("data", "payload")
        .add_column("location", "alt", DOUBLE)
        .add_column(None, "events", ListType(0, StructType((NestedField(0, "ts", LONG),))))
        .apply()
    )
    m = update_mapping_for_schema(create_mapping(old), old, new)
    assert m.find(("location", "latitude")).names == ("latitude", "lat")
    assert m.find_id("location.lat") == 9 and m.find_id("location.latitude") == 9
    assert m.find_id("payload") == 2 and m.find_id("data") == 2
    assert m.find_id("location.alt") == 11
    assert m.find_id(("events", "element", "ts")) == 14
    assert [f.names[0] for f in m.fields] == ["id", "data", "tags", "props", "location", "events"]
    assert json.loads(name_mapping_to_json(m))[-1] == {
        "field-id": 12, "names": ["events"], "fields": [
            {"field-id": 13, "names": ["element"], "fields": [{"field-id": 14, "names": ["ts"]}]}]}


def test_update_mapping_removes_names_taken_by_other_ids():
    # "data" is dropped and a new column is added under the old name: the old id loses the alias
    m = create_mapping(schema())
    m2 = update_mapping(m, {11: NestedField(11, "data", INT)}, {-1: [11]})
    assert m2.find_by_id(2).names == ()
    assert m2.find_id("data") == 11
    # a rename onto a sibling's alias takes the alias too
    m3 = update_mapping(parse_name_mapping(SPEC_EXAMPLE), {2: NestedField(2, "record_id", STRING)}, {})
    assert m3.find_by_id(1).names == ("id",) and m3.find_id("record_id") == 2


def test_resolve_paths():
    m = parse_name_mapping(SPEC_EXAMPLE)
    got = resolve_field_ids(m, [("record_id",), ("loc", "lat"), ("tags", "element"), ("unmapped",)])
    assert got == {("record_id",): 1, ("loc", "lat"): 9, ("tags", "element"): 4}


def test_arrow_schema_without_ids():
    pa = import_reference("pyarrow")
    arrow = pa.schema([
        pa.field("record_id", pa.int64()),
        pa.field("tags", pa.list_(pa.string())),  # arrow names the child "item"
        pa.field("props", pa.map_(pa.string(), pa.int32())),
        pa.field("loc", pa.struct([pa.field("lat", pa.float64()), pa.field("other", pa.float64())])),
        pa.field("extra", pa.string()),
    ])
    got = arrow_field_ids(parse_name_mapping(SPEC_EXAMPLE), arrow)
    assert got == {
        ("record_id",): 1, ("tags",): 3, ("tags", "item"): 4, ("props",): 5, ("props", "key"): 6,
        ("props", "value"): 7, ("loc",): 8, ("loc", "lat"): 9,
    }


def test_module_does_not_import_pyarrow_at_import_time():
    import subprocess
    import sys

    code = "import sys, procedures.spec.name_mapping; print('pyarrow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_empty_mapping():
    m = NameMapping(())
    assert name_mapping_to_json(m) == "[]" and m.find_id("a") is None
