"""Reserved metadata columns (spec "Reserved Field IDs"; on-disk notes section 9.1 and 8.1).

User schemas may only use field ids up to ``MAX_USER_FIELD_ID`` (``Integer.MAX_VALUE - 200``).
The ids above it name the virtual columns a scan can project (``_file``, ``_pos`` ...), the
columns of position delete files (``file_path``, ``pos``, ``row``), changelog columns and the v3
row-lineage columns.  Names, ids, types, requiredness and docs follow Java 1.10's
``MetadataColumns`` so schemas we hand to Spark or write into delete files match byte for byte.
"""

from __future__ import annotations

from procedures.errors import ValidationError
from procedures.spec.schema import MAX_USER_FIELD_ID, Schema
from procedures.spec.types import (
    BOOLEAN,
    INT,
    LONG,
    STRING,
    NestedField,
    StructType,
)

__all__ = [
    "INT_MAX",
    "FILE_PATH_ID",
    "ROW_POSITION_ID",
    "IS_DELETED_ID",
    "SPEC_ID_ID",
    "PARTITION_ID",
    "DELETE_FILE_PATH_ID",
    "DELETE_FILE_POS_ID",
    "DELETE_FILE_ROW_ID",
    "CHANGE_TYPE_ID",
    "CHANGE_ORDINAL_ID",
    "COMMIT_SNAPSHOT_ID_ID",
    "ROW_ID_ID",
    "LAST_UPDATED_SEQUENCE_NUMBER_ID",
    "FILE_PATH",
    "ROW_POSITION",
    "IS_DELETED",
    "SPEC_ID",
    "DELETE_FILE_PATH",
    "DELETE_FILE_POS",
    "CHANGE_TYPE",
    "CHANGE_ORDINAL",
    "COMMIT_SNAPSHOT_ID",
    "ROW_ID",
    "LAST_UPDATED_SEQUENCE_NUMBER",
    "PARTITION_COLUMN_NAME",
    "DELETE_FILE_ROW_NAME",
    "partition_column",
    "delete_file_row",
    "metadata_column_by_name",
    "metadata_column_by_id",
    "is_metadata_column",
    "is_reserved_field_id",
    "position_delete_schema",
    "POSITION_DELETE_SCHEMA",
    "ROW_LINEAGE_COLUMNS",
    "row_lineage_names",
    "schema_with_row_lineage",
]

INT_MAX = 2**31 - 1

FILE_PATH_ID = INT_MAX - 1
ROW_POSITION_ID = INT_MAX - 2
IS_DELETED_ID = INT_MAX - 3
SPEC_ID_ID = INT_MAX - 4
PARTITION_ID = INT_MAX - 5
DELETE_FILE_PATH_ID = INT_MAX - 101
DELETE_FILE_POS_ID = INT_MAX - 102
DELETE_FILE_ROW_ID = INT_MAX - 103
CHANGE_TYPE_ID = INT_MAX - 104
CHANGE_ORDINAL_ID = INT_MAX - 105
COMMIT_SNAPSHOT_ID_ID = INT_MAX - 106
ROW_ID_ID = INT_MAX - 107
LAST_UPDATED_SEQUENCE_NUMBER_ID = INT_MAX - 108

PARTITION_COLUMN_NAME = "_partition"
DELETE_FILE_ROW_NAME = "row"

FILE_PATH = NestedField(FILE_PATH_ID, "_file", STRING, True, "Path of the file in which a row is stored")
ROW_POSITION = NestedField(ROW_POSITION_ID, "_pos", LONG, True, "Ordinal position of a row in the source data file")
IS_DELETED = NestedField(IS_DELETED_ID, "_deleted", BOOLEAN, True, "Whether the row has been deleted")
SPEC_ID = NestedField(SPEC_ID_ID, "_spec_id", INT, True, "Spec ID used to track the file containing a row")
DELETE_FILE_PATH = NestedField(
    DELETE_FILE_PATH_ID, "file_path", STRING, True, "Path of a file in which a deleted row is stored"
)
DELETE_FILE_POS = NestedField(
    DELETE_FILE_POS_ID, "pos", LONG, True, "Ordinal position of a deleted row in the data file"
)
CHANGE_TYPE = NestedField(CHANGE_TYPE_ID, "_change_type", STRING, True, "Record type in changelog")
CHANGE_ORDINAL = NestedField(CHANGE_ORDINAL_ID, "_change_ordinal", INT, False, "Change ordinal in changelog")
COMMIT_SNAPSHOT_ID = NestedField(COMMIT_SNAPSHOT_ID_ID, "_commit_snapshot_id", LONG, False, "Commit snapshot ID")
# Row lineage columns are optional: files written before lineage was enabled (or rows whose id
# is inherited from first_row_id) carry null and readers fill the value in.
ROW_ID = NestedField(ROW_ID_ID, "_row_id", LONG, False, "Implicit row ID that is automatically assigned")
LAST_UPDATED_SEQUENCE_NUMBER = NestedField(
    LAST_UPDATED_SEQUENCE_NUMBER_ID,
    "_last_updated_sequence_number",
    LONG,
    False,
    "Sequence number when the row was last updated",
)

#: the two v3 row-lineage columns, in the order writers append them
ROW_LINEAGE_COLUMNS = (ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER)
#: the first format version whose tables track row lineage
ROW_LINEAGE_FORMAT_VERSION = 3

_PARTITION_DOC = "Partition to which a row belongs to"
_ROW_DOC = "Deleted row values"

_STATIC = (
    FILE_PATH, ROW_POSITION, IS_DELETED, SPEC_ID, DELETE_FILE_PATH, DELETE_FILE_POS,
    CHANGE_TYPE, CHANGE_ORDINAL, COMMIT_SNAPSHOT_ID, ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER,
)
_BY_NAME = {f.name: f for f in _STATIC}
_BY_ID = {f.field_id: f for f in _STATIC}
_DYNAMIC_IDS = {PARTITION_ID: PARTITION_COLUMN_NAME, DELETE_FILE_ROW_ID: DELETE_FILE_ROW_NAME}


def row_lineage_names(format_version: int) -> tuple[str, ...]:
    """The lineage columns a copy of existing rows (a compaction) must carry into its new files:
    ``_row_id`` and ``_last_updated_sequence_number`` on v3+ tables, none before (spec "Row
    Lineage": rows keep their ids and sequence numbers when they are moved, not modified)."""
    if format_version < ROW_LINEAGE_FORMAT_VERSION:
        return ()
    return tuple(f.name for f in ROW_LINEAGE_COLUMNS)


def schema_with_row_lineage(schema: Schema) -> Schema:
    """``schema`` followed by the optional ``_row_id`` and ``_last_updated_sequence_number`` columns
    with their reserved ids: the write schema of data files that copy rows (as Java's
    ``MetadataColumns.schemaWithRowLineage``).  A schema that has them already is returned as it is."""
    missing = tuple(f for f in ROW_LINEAGE_COLUMNS if schema.find_field_or_none(f.field_id) is None)
    if not missing:
        return schema
    return Schema(schema.fields + missing, schema.schema_id, schema.identifier_field_ids)


def partition_column(partition_type: StructType = StructType()) -> NestedField:
    """The optional ``_partition`` column; its struct type depends on the table's specs, so the
    caller passes the (unified) partition type."""
    return NestedField(PARTITION_ID, PARTITION_COLUMN_NAME, partition_type, False, _PARTITION_DOC)


def delete_file_row(row_type: StructType) -> NestedField:
    """The ``row`` column of a position delete file: a *required* struct of the table's columns
    (deprecated; only read, never written by this package)."""
    return NestedField(DELETE_FILE_ROW_ID, DELETE_FILE_ROW_NAME, row_type, True, _ROW_DOC)


def metadata_column_by_name(name: str, partition_type: StructType | None = None) -> NestedField:
    """The reserved column with this name; raises ValidationError listing the known names.

    ``_partition`` takes its struct type from ``partition_type`` (empty when not given); ``row``
    cannot be resolved by name alone because its type is the table schema.
    """
    if name == PARTITION_COLUMN_NAME:
        return partition_column(partition_type or StructType())
    f = _BY_NAME.get(name)
    if f is None:
        known = ", ".join(sorted([*_BY_NAME, PARTITION_COLUMN_NAME]))
        raise ValidationError(f"{name!r} is not a reserved metadata column; known columns: {known}")
    return f


def metadata_column_by_id(field_id: int, partition_type: StructType | None = None) -> NestedField:
    """The reserved column with this id; raises ValidationError when the id is not reserved."""
    if field_id == PARTITION_ID:
        return partition_column(partition_type or StructType())
    f = _BY_ID.get(field_id)
    if f is None:
        raise ValidationError(
            f"field id {field_id} is not a reserved metadata column id"
            + (" (use delete_file_row(row_type) for 'row')" if field_id == DELETE_FILE_ROW_ID else "")
        )
    return f


def is_metadata_column(name_or_id: str | int) -> bool:
    """True when the name or id is one of the reserved columns of spec section 9.1."""
    if isinstance(name_or_id, int):
        return name_or_id in _BY_ID or name_or_id in _DYNAMIC_IDS
    return name_or_id in _BY_NAME or name_or_id in _DYNAMIC_IDS.values()


def is_reserved_field_id(field_id: int) -> bool:
    """True for ids above ``MAX_USER_FIELD_ID``: a user schema must not use them."""
    return field_id > MAX_USER_FIELD_ID


def position_delete_schema(row_type: StructType | None = None) -> Schema:
    """The schema of a position delete file: ``file_path``, ``pos`` and, only when ``row_type``
    is given, the deprecated required ``row`` struct."""
    fields = [DELETE_FILE_PATH, DELETE_FILE_POS]
    if row_type is not None:
        fields.append(delete_file_row(row_type))
    return Schema(tuple(fields))


#: ``file_path`` and ``pos`` only, as every current writer produces
POSITION_DELETE_SCHEMA = position_delete_schema()
