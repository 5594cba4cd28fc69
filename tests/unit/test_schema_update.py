"""SchemaUpdate: ids assigned, order after moves, promotions and refused changes."""

from __future__ import annotations

import pytest

from procedures.errors import SchemaEvolutionError, ValidationError
from procedures.spec import metadata_columns as mc
from procedures.spec.schema import Schema
from procedures.spec.schema_update import SchemaUpdate, check_compatible, promotion_refusal
from procedures.spec.types import (
    BINARY, DATE, DOUBLE, FLOAT, INT, LONG, STRING, TIMESTAMP, TIMESTAMP_NS, TIMESTAMPTZ, UNKNOWN,
    DecimalType, ListType, MapType, NestedField, StructType,
)


def base() -> Schema:
    return Schema(
        (
            NestedField(1, "id", INT, True),
            NestedField(2, "data", STRING),
            NestedField(3, "loc", StructType((NestedField(4, "lat", FLOAT), NestedField(5, "long", FLOAT)))),
            NestedField(6, "tags", ListType(7, STRING)),
            NestedField(8, "points", ListType(9, StructType((NestedField(10, "x", LONG), NestedField(11, "y", LONG))))),
            NestedField(12, "props", MapType(13, STRING, 14, StructType((NestedField(15, "v", INT),)))),
            NestedField(16, "d", DATE),
            NestedField(17, "amount", DecimalType(9, 2)),
        ),
        schema_id=3,
        identifier_field_ids=(1,),
    )


def names(struct_or_schema) -> list[str]:
    return [f.name for f in struct_or_schema.fields]


# ------------------------------------------------------------------ promotion rules
@pytest.mark.parametrize(
    "old, new, ok",
    [
        (INT, LONG, True), (FLOAT, DOUBLE, True), (DecimalType(9, 2), DecimalType(18, 2), True),
        (DATE, TIMESTAMP, True), (DATE, TIMESTAMP_NS, True), (UNKNOWN, STRING, True),
        (UNKNOWN, StructType((NestedField(1, "a", INT),)), True),
        (LONG, INT, False), (INT, DOUBLE, False), (DOUBLE, FLOAT, False), (INT, STRING, False),
        (DecimalType(9, 2), DecimalType(9, 3), False), (DecimalType(18, 2), DecimalType(9, 2), False),
        (DATE, TIMESTAMPTZ, False), (TIMESTAMP, TIMESTAMP_NS, False), (STRING, BINARY, False),
        (DecimalType(9, 2), LONG, False),
    ],
)
def test_check_compatible(old, new, ok):
    assert check_compatible(old, new) is ok


def test_v3_promotions_refused_before_v3():
    assert not check_compatible(DATE, TIMESTAMP, format_version=2)
    assert not check_compatible(UNKNOWN, STRING, format_version=2)
    assert check_compatible(INT, LONG, format_version=1)
    assert promotion_refusal(LONG, INT) == "long cannot be promoted to any other type"


# ------------------------------------------------------------------ additions and ids
def test_add_columns_assigns_ids_after_last_column_id_including_nested():
    upd = (
        SchemaUpdate(base(), 20)
        .add_column(None, "extra", StructType((NestedField(100, "a", INT), NestedField(101, "b", ListType(102, STRING)))))
        .add_column("loc", "alt", DOUBLE, "altitude")
        .add_column("points", "z", LONG)   # a list parent means its element struct
        .add_column("props", "w", STRING)  # a map parent means its value struct
    )
    schema, last = upd.apply()
    assert last == 27
    extra = schema.find_field("extra")
    assert extra.field_id == 21
    # struct fields are numbered before descending: a=22, b=23, then b's element=24
    assert [f.field_id for f in extra.field_type.fields] == [22, 23]
    assert extra.field_type.fields[1].field_type.element_id == 24
    assert schema.find_field("loc.alt").field_id == 25
    assert schema.find_field("loc.alt").doc == "altitude"
    assert schema.find_field("points.element.z").field_id == 26
    assert schema.find_field("props.value.w").field_id == 27
    assert names(schema)[-1] == "extra"
    assert names(schema.find_field("loc").field_type) == ["lat", "long", "alt"]
    assert schema.schema_id == 3 and schema.identifier_field_ids == (1,)


def test_builder_is_immutable():
    u0 = SchemaUpdate(base(), 17)
    u1 = u0.add_column(None, "x", STRING)
    assert u0.apply()[0].same_schema(base())
    assert u0.last_column_id == 17 and u1.last_column_id == 18
    assert u1.apply()[0].find_field("x").field_id == 18


def test_last_column_id_never_below_highest_field_id():
    schema, last = SchemaUpdate(base(), 5).add_column(None, "x", STRING).apply()
    assert last == 18 and schema.find_field("x").field_id == 18


def test_required_column_needs_initial_default():
    with pytest.raises(SchemaEvolutionError, match="required column without an initial default: 'x'"):
        SchemaUpdate(base(), 17).add_column(None, "x", INT, required=True)
    schema, _ = SchemaUpdate(base(), 17).add_column(None, "x", INT, required=True, initial_default=7).apply()
    f = schema.find_field("x")
    assert (f.required, f.initial_default, f.write_default) == (True, 7, 7)
    schema, _ = SchemaUpdate(base(), 17, allow_incompatible_changes=True).add_column(None, "x", INT, required=True).apply()
    assert schema.find_field("x").required


def test_defaults_and_v3_types_need_v3():
    with pytest.raises(SchemaEvolutionError, match="defaults need format version 3"):
        SchemaUpdate(base(), 17, format_version=2).add_column(None, "x", INT, initial_default=1)
    with pytest.raises(SchemaEvolutionError, match="'x'.*needs format version 3"):
        SchemaUpdate(base(), 17, format_version=2).add_column(None, "x", TIMESTAMP_NS)
    with pytest.raises(SchemaEvolutionError, match="unknown columns must be optional"):
        SchemaUpdate(base(), 17).add_column(None, "x", UNKNOWN, required=True, initial_default=None)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda u: u.add_column(None, "data", STRING), "Cannot add column 'data': name already exists"),
        (lambda u: u.add_column("loc", "lat", STRING), "Cannot add column 'loc.lat': name already exists"),
        (lambda u: u.add_column("data", "x", STRING), "non-struct column 'data' of type string"),
        (lambda u: u.add_column("tags", "x", STRING), "non-struct column 'tags'"),
        (lambda u: u.add_column("nope", "x", STRING), "parent struct 'nope' not found"),
        (lambda u: u.add_column(None, "a.b", STRING), "ambiguous name 'a.b'"),
        (lambda u: u.add_column(None, "", STRING), "invalid column name ''"),
        (lambda u: u.add_column(None, "x", STRING).add_column(None, "x", INT), "'x': it is already added"),
        (lambda u: u.delete_column("loc").add_column("loc", "z", INT), "to 'loc': it will be deleted"),
    ],
)
def test_refused_additions(call, message):
    with pytest.raises(SchemaEvolutionError, match=message):
        call(SchemaUpdate(base(), 17))


def test_add_after_delete_of_same_name_reuses_name_with_new_id():
    schema, last = SchemaUpdate(base(), 17).delete_column("data").add_column(None, "data", LONG).apply()
    assert schema.find_field("data").field_id == 18 and schema.find_type("data") == LONG
    assert names(schema)[-1] == "data" and last == 18


# ------------------------------------------------------------------ delete / rename / update
def test_delete_rename_update_doc_optional():
    schema, last = (
        SchemaUpdate(base(), 17)
        .delete_column("tags")
        .delete_column("points.x")
        .rename_column("loc.lat", "latitude")
        .rename_column("data", "payload")
        .update_column("id", LONG)
        .update_column("amount", DecimalType(12, 2))
        .update_column("d", TIMESTAMP)
        .update_column("props.value.v", LONG)
        .update_column_doc("data", "the payload")  # lookups use the old name
        .make_column_optional("id")
        .set_identifier_fields([])
        .apply()
    )
    assert last == 17
    assert names(schema) == ["id", "payload", "loc", "points", "props", "d", "amount"]
    assert schema.find_field(2).doc == "the payload" and schema.find_field(2).name == "payload"
    assert schema.find_field("loc.latitude").field_id == 4
    assert names(schema.find_field(9).field_type) == ["y"]
    f1 = schema.find_field(1)
    assert (f1.field_type, f1.required) == (LONG, False)
    assert schema.find_type(17) == DecimalType(12, 2)
    assert schema.find_type(16) == TIMESTAMP
    assert schema.find_type(15) == LONG
    assert schema.identifier_field_ids == ()


def test_list_element_and_map_value_updates():
    schema, _ = (
        SchemaUpdate(base(), 17)
        .make_column_optional("points.element")
        .update_column("tags.element", STRING)
        .apply()
    )
    assert schema.find_type("points").element_required is False
    s = Schema((NestedField(1, "m", MapType(2, STRING, 3, INT, True)), NestedField(4, "l", ListType(5, FLOAT, True))))
    out, _ = (
        SchemaUpdate(s, 5).update_column("m.value", LONG).update_column("l.element", DOUBLE)
        .make_column_optional("m.value").apply()
    )
    assert out.find_type("m") == MapType(2, STRING, 3, LONG, False)
    assert out.find_type("l") == ListType(5, DOUBLE, True)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda u: u.update_column("data", INT), r"Cannot change column type: 'data': string -> int: string cannot be promoted"),
        (lambda u: u.update_column("id", DOUBLE), r"'id': int -> double: int can only be promoted to long"),
        (lambda u: u.update_column("amount", DecimalType(9, 3)), r"'amount': decimal\(9, 2\) -> decimal\(9, 3\): decimal scale cannot change"),
        (lambda u: u.update_column("amount", DecimalType(5, 2)), r"decimal precision can only grow"),
        (lambda u: u.update_column("loc", STRING), r"'loc': struct<.*> -> string: nested types cannot change kind"),
        (lambda u: u.update_column("props.key", BINARY), r"map key 'props.key'"),
        (lambda u: u.update_column("nope", LONG), r"Cannot update missing column: 'nope'"),
        (lambda u: u.require_column("data"), r"Cannot change column nullability: 'data': optional -> required"),
        (lambda u: u.delete_column("nope"), r"Cannot delete missing column: 'nope'"),
        (lambda u: u.delete_column("tags.element"), r"Cannot delete 'tags.element'"),
        (lambda u: u.rename_column("nope", "x"), r"Cannot rename missing column: 'nope'"),
        (lambda u: u.rename_column("data", ""), r"invalid column name ''"),
        (lambda u: u.delete_column("data").rename_column("data", "x"), r"Cannot rename a column that will be deleted: 'data'"),
        (lambda u: u.delete_column("data").update_column_doc("data", "x"), r"Cannot update a column that will be deleted: 'data'"),
        (lambda u: u.rename_column("data", "x").delete_column("data"), r"Cannot delete a column that has updates: 'data'"),
        (lambda u: u.add_column("loc", "z", INT).delete_column("loc"), r"Cannot delete a column that has additions: 'loc'"),
        (lambda u: u.add_column(None, "z", INT).delete_column("z"), r"'z': it is added in this same update"),
    ],
)
def test_refused_changes_name_the_column(call, message):
    with pytest.raises(SchemaEvolutionError, match=message):
        call(SchemaUpdate(base(), 17))


def test_date_to_timestamp_refused_in_v2():
    with pytest.raises(SchemaEvolutionError, match=r"'d': date -> timestamp: .*format version 3"):
        SchemaUpdate(base(), 17, format_version=2).update_column("d", TIMESTAMP)


def test_unknown_to_nested_gets_fresh_ids():
    s = Schema((NestedField(1, "u", UNKNOWN),))
    out, last = SchemaUpdate(s, 1).update_column("u", ListType(99, INT)).apply()
    assert out.find_type("u") == ListType(2, INT) and last == 2


def test_require_column_with_incompatible_or_defaulted_add():
    out, _ = SchemaUpdate(base(), 17, allow_incompatible_changes=True).require_column("data").apply()
    assert out.find_field("data").required
    out, _ = SchemaUpdate(base(), 17).add_column(None, "n", INT, initial_default=0).require_column("n").apply()
    assert out.find_field("n").required


def test_duplicate_name_after_rename_refused():
    with pytest.raises(SchemaEvolutionError, match="duplicate column name 'data'"):
        SchemaUpdate(base(), 17).rename_column("d", "data").apply()
    with pytest.raises(SchemaEvolutionError, match="duplicate column name 'loc.long'"):
        SchemaUpdate(base(), 17).rename_column("loc.lat", "long").apply()


def test_swap_names_is_allowed():
    out, _ = SchemaUpdate(base(), 17).rename_column("loc.lat", "long").rename_column("loc.long", "lat").apply()
    assert [(f.field_id, f.name) for f in out.find_field("loc").field_type.fields] == [(4, "long"), (5, "lat")]


def test_case_insensitive_lookup():
    out, _ = SchemaUpdate(base(), 17, case_sensitive=False).rename_column("LOC.LAT", "latitude").apply()
    assert out.find_field(4).name == "latitude"
    with pytest.raises(SchemaEvolutionError, match="name already exists"):
        SchemaUpdate(base(), 17, case_sensitive=False).add_column(None, "DATA", STRING)


# ------------------------------------------------------------------ moves
def test_moves_order():
    out, _ = (
        SchemaUpdate(base(), 17)
        .add_column(None, "ts", TIMESTAMP)
        .move_first("ts")
        .move_after("id", "amount")
        .move_before("d", "data")
        .move_after("loc.lat", "loc.long")
        .add_column("points", "z", LONG)
        .move_first("points.element.z")
        .apply()
    )
    assert names(out) == ["ts", "d", "data", "loc", "tags", "points", "props", "amount", "id"]
    assert names(out.find_field("loc").field_type) == ["long", "lat"]
    assert names(out.find_field(9).field_type) == ["z", "x", "y"]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda u: u.move_after("data", "loc.lat"), "Cannot move field 'data' to a different struct"),
        (lambda u: u.move_before("loc.lat", "id"), "Cannot move field 'loc.lat' to a different struct"),
        (lambda u: u.move_first("nope"), "missing column: 'nope'"),
        (lambda u: u.move_after("data", "nope"), "Cannot move 'data' after missing column: 'nope'"),
        (lambda u: u.move_before("data", "data"), "Cannot move 'data' before itself"),
        (lambda u: u.move_first("tags.element"), "Cannot move 'tags.element'"),
        (lambda u: u.delete_column("data").move_first("data"), "column 'data': it will be deleted"),
        (lambda u: u.move_first("data").delete_column("data").apply(), "Cannot move column 'data': it will be deleted"),
    ],
)
def test_refused_moves(call, message):
    with pytest.raises(SchemaEvolutionError, match=message):
        call(SchemaUpdate(base(), 17))


# ------------------------------------------------------------------ identifier fields
def test_deleting_identifier_field_refused_unless_identifiers_updated():
    with pytest.raises(SchemaEvolutionError, match="Cannot delete identifier field 'id'"):
        SchemaUpdate(base(), 17).delete_column("id").apply()
    out, _ = SchemaUpdate(base(), 17).delete_column("id").set_identifier_fields([]).apply()
    assert out.identifier_field_ids == () and out.find_field_or_none("id") is None


def test_deleting_struct_with_nested_identifier_refused():
    s = Schema((NestedField(1, "k", StructType((NestedField(2, "a", INT, True),)), True),), identifier_field_ids=(2,))
    with pytest.raises(SchemaEvolutionError, match="Cannot delete field 'k' as it will delete nested identifier field 'k.a'"):
        SchemaUpdate(s, 2).delete_column("k").apply()


def test_identifier_fields_follow_renames_and_accept_added_columns():
    out, _ = (
        SchemaUpdate(base(), 17)
        .rename_column("id", "key")
        .add_column(None, "region", STRING, required=True, initial_default="eu")
        .set_identifier_fields(["id", "region"])
        .apply()
    )
    assert out.identifier_field_ids == (1, 18)
    assert out.identifier_field_names == ["key", "region"]


@pytest.mark.parametrize(
    "idents, message",
    [
        (["nope"], "Cannot add field 'nope' as an identifier field: not found"),
        (["data"], "identifier field 'data' must be required"),
        (["loc.lat"], "identifier field 'loc.lat' cannot be float"),
        (["tags"], "identifier field 'tags' must be a primitive type"),
    ],
)
def test_invalid_identifier_fields(idents, message):
    with pytest.raises(SchemaEvolutionError, match=message):
        SchemaUpdate(base(), 17).set_identifier_fields(idents).apply()


def test_identifier_field_cannot_become_optional():
    with pytest.raises(SchemaEvolutionError, match="identifier field 'id' must be required"):
        SchemaUpdate(base(), 17).make_column_optional("id").apply()


# ------------------------------------------------------------------ union by name
def test_union_by_name():
    new = StructType((
        NestedField(1, "id", LONG, False),
        NestedField(2, "loc", StructType((NestedField(3, "lat", DOUBLE), NestedField(4, "alt", DOUBLE)))),
        NestedField(5, "new_col", ListType(6, STRING)),
        NestedField(7, "amount", DecimalType(9, 2)),
    ))
    out, last = SchemaUpdate(base(), 17).set_identifier_fields([]).union_by_name(new).apply()
    assert out.find_field(1).field_type == LONG and not out.find_field(1).required
    assert out.find_type("loc.lat") == DOUBLE
    assert out.find_field("loc.alt").field_id == 18
    assert out.find_field("new_col").field_id == 19 and out.find_type("new_col") == ListType(20, STRING)
    assert last == 20
    assert names(out)[-1] == "new_col"


def test_union_by_name_incompatible():
    new = StructType((NestedField(1, "data", INT),))
    with pytest.raises(SchemaEvolutionError, match="'data': string and int are not compatible"):
        SchemaUpdate(base(), 17).union_by_name(new)


def test_union_keeps_wider_existing_type():
    new = StructType((NestedField(1, "amount", DecimalType(5, 2)),))
    out, _ = SchemaUpdate(base(), 17).union_by_name(new).apply()
    assert out.find_type("amount") == DecimalType(9, 2)


# ------------------------------------------------------------------ metadata columns
def test_metadata_columns_ids_and_lookups():
    assert mc.FILE_PATH.field_id == 2147483646 and mc.FILE_PATH.name == "_file"
    assert (mc.ROW_POSITION.field_id, mc.IS_DELETED.field_id, mc.SPEC_ID.field_id) == (2147483645, 2147483644, 2147483643)
    assert mc.PARTITION_ID == 2147483642
    assert (mc.DELETE_FILE_PATH.field_id, mc.DELETE_FILE_POS.field_id, mc.DELETE_FILE_ROW_ID) == (2147483546, 2147483545, 2147483544)
    assert (mc.CHANGE_TYPE.field_id, mc.CHANGE_ORDINAL.field_id, mc.COMMIT_SNAPSHOT_ID.field_id) == (2147483543, 2147483542, 2147483541)
    assert (mc.ROW_ID.field_id, mc.LAST_UPDATED_SEQUENCE_NUMBER.field_id) == (2147483540, 2147483539)
    assert mc.metadata_column_by_name("_pos") is mc.ROW_POSITION
    assert mc.metadata_column_by_id(2147483540).name == "_row_id"
    part = mc.metadata_column_by_name("_partition", StructType((NestedField(1000, "d_day", DATE),)))
    assert part.field_id == 2147483642 and not part.required and part.field_type.fields[0].name == "d_day"
    assert mc.is_metadata_column("_deleted") and mc.is_metadata_column(2147483544) and mc.is_metadata_column("row")
    assert not mc.is_metadata_column("id") and not mc.is_metadata_column(17)
    assert mc.is_reserved_field_id(2147483448) and not mc.is_reserved_field_id(2147483447)
    with pytest.raises(ValidationError, match="'_nope' is not a reserved metadata column"):
        mc.metadata_column_by_name("_nope")
    with pytest.raises(ValidationError, match="field id 5 is not a reserved"):
        mc.metadata_column_by_id(5)


def test_position_delete_schema():
    s = mc.POSITION_DELETE_SCHEMA
    assert [(f.field_id, f.name, f.field_type, f.required) for f in s.fields] == [
        (2147483546, "file_path", STRING, True), (2147483545, "pos", LONG, True)]
    with_row = mc.position_delete_schema(StructType((NestedField(1, "id", INT, True),)))
    row = with_row.find_field("row")
    assert row.field_id == 2147483544 and row.required and with_row.find_field("row.id").field_id == 1
