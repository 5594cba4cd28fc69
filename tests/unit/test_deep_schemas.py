"""Deeply nested schemas: up to MAX_NESTING_DEPTH levels they work end to end; beyond it every way in
(a Schema, metadata JSON, CREATE TABLE) refuses them with a typed error naming the depth and the limit,
never a bare RecursionError.  Iceberg Java's reference: Jackson reads at most 1,000 nested JSON levels."""

from __future__ import annotations

import pytest

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.kernel.builder import new_table_metadata
from procedures.errors import InvalidMetadataError, ValidationError
from procedures.frontend.sqlddl import execute
from procedures.spec.metadata import metadata_from_json, metadata_to_json
from procedures.spec.schema import MAX_NESTING_DEPTH, Schema, nesting_depth
from procedures.spec.types import LONG, NestedField, StructType


def deep_schema(depth: int) -> Schema:
    t = StructType((NestedField(1, "leaf", LONG),))
    for i in range(depth - 1):
        t = StructType((NestedField(i + 2, f"s{i}", t),))
    return Schema((NestedField(depth + 1, "deep", t),))


def deep_metadata_json(depth: int) -> str:
    """A valid v2 metadata document whose schema nests ``depth`` structs (built as text: json.dumps
    itself cannot write it)."""
    t = '{"type": "struct", "fields": [{"id": 1, "name": "leaf", "required": false, "type": "long"}]}'
    for i in range(depth - 1):
        t = f'{{"type": "struct", "fields": [{{"id": {i + 2}, "name": "s{i}", "required": false, "type": {t}}}]}}'
    schema = (f'{{"type": "struct", "schema-id": 0, "fields": [{{"id": {depth + 1}, "name": "deep", '
              f'"required": false, "type": {t}}}]}}')
    return ('{"format-version": 2, "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1", "location": "/tmp/t", '
            '"last-sequence-number": 0, "last-updated-ms": 1, "last-column-id": %d, "current-schema-id": 0, '
            '"schemas": [%s], "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": []}], '
            '"last-partition-id": 999, "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}], '
            '"properties": {}, "snapshots": [], "snapshot-log": [], "metadata-log": []}') % (depth + 1, schema)


def test_the_deepest_allowed_schema_round_trips(tmp_path):
    schema = deep_schema(MAX_NESTING_DEPTH)
    assert nesting_depth(schema.fields[0].field_type) == MAX_NESTING_DEPTH
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=schema, location=f"{cat.warehouse}/db/t")
    cat.create_table(("db", "t"), md)
    loaded = cat.load_table(("db", "t")).metadata
    assert nesting_depth(loaded.schema().fields[0].field_type) == MAX_NESTING_DEPTH
    assert metadata_from_json(deep_metadata_json(MAX_NESTING_DEPTH)).schema() == deep_schema(MAX_NESTING_DEPTH)
    assert metadata_from_json(metadata_to_json(loaded)).schema() == loaded.schema()


def test_a_500_deep_schema_is_refused_with_its_depth_and_the_limit():
    with pytest.raises(ValidationError, match=f"nests types 500 levels deep, beyond the limit of {MAX_NESTING_DEPTH}"):
        deep_schema(500)


@pytest.mark.parametrize("depth", [MAX_NESTING_DEPTH + 1, 300, 500])
def test_deep_metadata_json_is_invalid_metadata_not_a_recursion_error(tmp_path, depth):
    text = deep_metadata_json(depth)
    with pytest.raises(InvalidMetadataError, match=rf"(nests types {depth} levels deep|nests JSON \d+ levels deep)"
                                                   rf".*{MAX_NESTING_DEPTH}"):
        metadata_from_json(text, location="/tmp/t/metadata/v1.metadata.json")
    # loading the table that file belongs to fails the same way
    cat = HadoopCatalog("local", str(tmp_path / "wh"))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=deep_schema(2), location=f"{cat.warehouse}/db/t")
    t = cat.create_table(("db", "t"), md)
    with open(t.metadata_location.removeprefix("file:"), "w") as f:
        f.write(text)
    with pytest.raises(InvalidMetadataError, match=str(MAX_NESTING_DEPTH)):
        cat.load_table(("db", "t"))


def test_create_table_with_a_500_deep_struct_is_refused(tmp_path):
    conf = {"spark.sql.catalog.ours.type": "hadoop", "spark.sql.catalog.ours.warehouse": str(tmp_path / "wh")}
    column = "STRUCT<a: " * 500 + "BIGINT" + ">" * 500
    with pytest.raises(ValidationError, match=f"nests types {MAX_NESTING_DEPTH + 1} levels deep.*{MAX_NESTING_DEPTH}"):
        execute(None, f"CREATE TABLE ours.db.t (deep {column})", conf)
