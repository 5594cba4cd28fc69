"""Iceberg schemas as Arrow schemas and back (on-disk notes 12.1 "Schema", 12.2 "name mapping").

The Arrow schema built here is the one written to Parquet: every field carries its Iceberg id as
``PARQUET:field_id`` metadata (struct children, the list ``element`` and the map ``key`` and
``value`` included), so pyarrow's Parquet writer emits the same message type as Java's
``TypeToMessageType``.  The reverse direction reads ids from that metadata, or from a name
mapping for files written without ids.

:func:`cast_to_schema` brings Arrow data from another producer (Spark's ``mapInArrow`` batches,
pandas) to the table's Arrow schema: columns are matched by name, timestamps are brought to
micros in UTC, Spark's string uuids become 16-byte uuids.
"""

from __future__ import annotations

import uuid as _uuid
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from procedures.errors import ValidationError
from procedures.spec.name_mapping import NameMapping, arrow_field_ids
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
    UNKNOWN,
    UUID,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    GeographyType,
    GeometryType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
    VariantType,
)

__all__ = [
    "FIELD_ID_KEY",
    "UUID_ARROW_TYPE",
    "primitive_to_arrow",
    "type_to_arrow",
    "field_to_arrow",
    "schema_to_arrow",
    "field_id",
    "has_field_ids",
    "arrow_type_to_iceberg",
    "arrow_to_schema",
    "cast_to_schema",
    "iter_fields_with_ids",
]

#: the Arrow field-metadata key that pyarrow's Parquet reader and writer map to the Parquet field id
FIELD_ID_KEY = b"PARQUET:field_id"

#: pyarrow's canonical uuid extension type writes FIXED_LEN_BYTE_ARRAY(16) with the UUID annotation
UUID_ARROW_TYPE: pa.DataType = pa.uuid() if hasattr(pa, "uuid") else pa.binary(16)

_UTC = "UTC"


def _is_uuid_arrow(t: pa.DataType) -> bool:
    return isinstance(t, pa.BaseExtensionType) and t.extension_name == "arrow.uuid"


def primitive_to_arrow(t: IcebergType, *, large_types: bool = False) -> pa.DataType:
    """The Arrow type Iceberg writes for a primitive type (table in on-disk notes 12.1).

    ``large_types`` picks 64-bit offsets for strings and binaries (batches over 2 GiB of text).
    """
    match t:
        case BooleanType():
            return pa.bool_()
        case IntegerType():
            return pa.int32()
        case LongType():
            return pa.int64()
        case FloatType():
            return pa.float32()
        case DoubleType():
            return pa.float64()
        case DecimalType():
            return pa.decimal128(t.precision, t.scale)
        case DateType():
            return pa.date32()
        case TimeType():
            return pa.time64("us")
        case TimestampType():
            return pa.timestamp("us")
        case TimestamptzType():
            return pa.timestamp("us", tz=_UTC)
        case TimestampNanoType():
            return pa.timestamp("ns")
        case TimestamptzNanoType():
            return pa.timestamp("ns", tz=_UTC)
        case StringType():
            return pa.large_string() if large_types else pa.string()
        case UUIDType():
            return UUID_ARROW_TYPE
        case FixedType():
            return pa.binary(t.length)
        case BinaryType() | GeometryType() | GeographyType():
            return pa.large_binary() if large_types else pa.binary()
        case UnknownType():
            return pa.null()
        case VariantType():
            # the unshredded variant group; its children carry no field ids
            return pa.struct([pa.field("metadata", pa.binary(), False), pa.field("value", pa.binary(), False)])
    raise ValidationError(f"no Arrow type for Iceberg type {t}; only primitive types map directly")


def _with_id(name: str, arrow_type: pa.DataType, nullable: bool, fid: int) -> pa.Field:
    return pa.field(name, arrow_type, nullable=nullable, metadata={FIELD_ID_KEY: str(fid).encode()})


def type_to_arrow(t: IcebergType, *, large_types: bool = False) -> pa.DataType:
    """The Arrow type for any Iceberg type, nested children carrying their field ids."""
    if isinstance(t, StructType):
        return pa.struct([field_to_arrow(f, large_types=large_types) for f in t.fields])
    if isinstance(t, ListType):
        element = _with_id(
            "element", type_to_arrow(t.element_type, large_types=large_types), not t.element_required, t.element_id
        )
        return pa.large_list(element) if large_types else pa.list_(element)
    if isinstance(t, MapType):
        key = _with_id("key", type_to_arrow(t.key_type, large_types=large_types), False, t.key_id)
        value = _with_id(
            "value", type_to_arrow(t.value_type, large_types=large_types), not t.value_required, t.value_id
        )
        return pa.map_(key, value)
    return primitive_to_arrow(t, large_types=large_types)


def field_to_arrow(f: NestedField, *, large_types: bool = False) -> pa.Field:
    """An Arrow field for an Iceberg field: same name, nullability and ``PARQUET:field_id``."""
    return _with_id(f.name, type_to_arrow(f.field_type, large_types=large_types), not f.required, f.field_id)


def schema_to_arrow(
    schema: Schema | StructType, *, include_unknown: bool = True, large_types: bool = False
) -> pa.Schema:
    """The Arrow schema for an Iceberg schema, every field (list elements named ``element``, map
    keys/values included) carrying its id as ``PARQUET:field_id`` metadata.

    ``large_types`` uses 64-bit offsets for strings, binaries and lists.  With
    ``include_unknown=False`` top-level ``unknown`` columns are left out, as writers must (they
    are never written to data files).
    """
    return pa.schema(
        [
            field_to_arrow(f, large_types=large_types)
            for f in schema.fields
            if include_unknown or not isinstance(f.field_type, UnknownType)
        ]
    )


def field_id(arrow_field: pa.Field) -> int | None:
    """The Iceberg field id in an Arrow field's metadata, or None when it has none."""
    md = arrow_field.metadata
    if not md:
        return None
    raw = md.get(FIELD_ID_KEY)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValidationError(
            f"Arrow field {arrow_field.name!r} has a non-integer field id {raw!r} in {FIELD_ID_KEY.decode()}"
        ) from None


def _children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or _is_list_view(t):
        return [t.value_field]
    return []


def _is_list_view(t: pa.DataType) -> bool:
    is_lv = getattr(pa.types, "is_list_view", None)
    is_llv = getattr(pa.types, "is_large_list_view", None)
    return bool((is_lv and is_lv(t)) or (is_llv and is_llv(t)))


def has_field_ids(arrow_schema: pa.Schema) -> bool:
    """True when any field of the schema, at any depth, carries a field id (Java then uses ids)."""
    stack = list(arrow_schema)
    while stack:
        f = stack.pop()
        if field_id(f) is not None:
            return True
        stack.extend(_children(f.type))
    return False


def arrow_type_to_iceberg(t: pa.DataType) -> IcebergType:
    """The Iceberg primitive type for an Arrow primitive type (nested types go through
    :func:`arrow_to_schema`, which needs the children's ids)."""
    if _is_uuid_arrow(t):
        return UUID
    if pa.types.is_boolean(t):
        return BOOLEAN
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return INT
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return LONG
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        return FLOAT
    if pa.types.is_float64(t):
        return DOUBLE
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise ValidationError(f"Arrow decimal({t.precision}, {t.scale}) exceeds Iceberg's precision 38")
        return DecimalType(t.precision, t.scale)
    if pa.types.is_date(t):
        return DATE
    if pa.types.is_time(t):
        return TIME
    if pa.types.is_timestamp(t):
        if t.unit == "ns":
            return TIMESTAMPTZ_NS if t.tz else TIMESTAMP_NS
        return TIMESTAMPTZ if t.tz else TIMESTAMP
    if pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", lambda _: False)(t):
        return STRING
    if pa.types.is_fixed_size_binary(t):
        return FixedType(t.byte_width)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or getattr(pa.types, "is_binary_view", lambda _: False)(t):
        return BINARY
    if pa.types.is_null(t):
        return UNKNOWN
    raise ValidationError(f"Arrow type {t} has no Iceberg equivalent; cast it (for example to int64/string) first")


def arrow_to_schema(
    arrow_schema: pa.Schema,
    *,
    name_mapping: NameMapping | None = None,
    assign_fresh_ids: bool = False,
    schema_id: int = 0,
) -> Schema:
    """The Iceberg schema of an Arrow schema.

    Ids come from ``PARQUET:field_id`` metadata.  For a schema without any ids, ``name_mapping``
    supplies them by name (fields it does not map are left out, as readers ignore them); with
    ``assign_fresh_ids`` fields without ids get new ids 1, 2, ... in depth-first order (creating a
    table from a DataFrame).  Otherwise a field without an id raises :class:`ValidationError`.
    """
    mapped: dict[tuple[str, ...], int] | None = None
    if name_mapping is not None and not has_field_ids(arrow_schema):
        mapped = arrow_field_ids(name_mapping, arrow_schema)
    counter = [0]
    if assign_fresh_ids:
        used = set()
        stack = list(arrow_schema)
        while stack:
            f = stack.pop()
            if (fid := field_id(f)) is not None:
                used.add(fid)
            stack.extend(_children(f.type))
        counter[0] = max(used, default=0)

    def resolve(f: pa.Field, path: tuple[str, ...]) -> int | None:
        if mapped is not None:
            return mapped.get(path)
        fid = field_id(f)
        if fid is not None:
            return fid
        if assign_fresh_ids:
            counter[0] += 1
            return counter[0]
        raise ValidationError(
            f"Arrow field {'.'.join(path)!r} has no {FIELD_ID_KEY.decode()} metadata; "
            "pass a name mapping (table property schema.name-mapping.default) or assign_fresh_ids=True"
        )

    def convert(t: pa.DataType, path: tuple[str, ...]) -> IcebergType | None:
        if pa.types.is_struct(t):
            return StructType(tuple(nf for nf in (convert_field(c, path) for c in _children(t)) if nf is not None))
        if pa.types.is_map(t):
            kf, vf = t.key_field, t.item_field
            kid, vid = resolve(kf, path + (kf.name,)), resolve(vf, path + (vf.name,))
            if kid is None or vid is None:
                return None
            kt, vt = convert(kf.type, path + (kf.name,)), convert(vf.type, path + (vf.name,))
            if kt is None or vt is None:
                return None
            return MapType(kid, kt, vid, vt, not vf.nullable)
        if _children(t):
            ef = t.value_field
            eid = resolve(ef, path + (ef.name,))
            et = convert(ef.type, path + (ef.name,)) if eid is not None else None
            if eid is None or et is None:
                return None
            return ListType(eid, et, not ef.nullable)
        return arrow_type_to_iceberg(t)

    def convert_field(f: pa.Field, prefix: tuple[str, ...]) -> NestedField | None:
        path = prefix + (f.name,)
        fid = resolve(f, path)
        if fid is None:
            return None
        t = convert(f.type, path)
        if t is None:
            return None
        return NestedField(fid, f.name, t, required=not f.nullable)

    fields = tuple(nf for nf in (convert_field(f, ()) for f in arrow_schema) if nf is not None)
    return Schema(fields, schema_id=schema_id)


# --------------------------------------------------------------------------- casting data
def _find_child(names: Sequence[str], name: str) -> int | None:
    try:
        return names.index(name)
    except ValueError:
        pass
    lowered = name.lower()
    hits = [i for i, n in enumerate(names) if n.lower() == lowered]
    return hits[0] if len(hits) == 1 else None


def _cast_uuid(arr: pa.Array, where: str) -> pa.Array:
    if _is_uuid_arrow(arr.type):
        return arr
    if pa.types.is_fixed_size_binary(arr.type) and arr.type.byte_width == 16:
        storage = arr
    elif pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
        try:
            storage = pa.array([None if s is None else _uuid.UUID(s).bytes for s in arr.to_pylist()], pa.binary(16))
        except ValueError as e:
            raise ValidationError(f"column {where!r}: {e}; uuid columns need canonical uuid strings") from None
    elif pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
        storage = arr.cast(pa.binary(16))
    else:
        raise ValidationError(f"column {where!r}: cannot write Arrow {arr.type} as uuid")
    if isinstance(UUID_ARROW_TYPE, pa.BaseExtensionType):
        return pa.ExtensionArray.from_storage(UUID_ARROW_TYPE, storage)
    return storage


def _cast_array(arr: pa.Array, target: pa.Field, where: str) -> pa.Array:
    tt = target.type
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([_cast_array(c, target, where) for c in arr.chunks], type=tt)
    if _is_uuid_arrow(tt) or (tt == UUID_ARROW_TYPE):
        return _cast_uuid(arr, where)
    if pa.types.is_struct(tt):
        if not pa.types.is_struct(arr.type):
            raise ValidationError(f"column {where!r}: expected a struct, got Arrow {arr.type}")
        src_names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        children = []
        for i in range(tt.num_fields):
            tf = tt.field(i)
            j = _find_child(src_names, tf.name)
            if j is None:
                if not tf.nullable:
                    raise ValidationError(f"required field {where}.{tf.name} is missing from the data")
                children.append(pa.nulls(len(arr), tf.type))
            else:
                children.append(_cast_array(arr.field(j), tf, f"{where}.{tf.name}"))
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(tt), mask=mask)
    if (pa.types.is_list(tt) or pa.types.is_large_list(tt)) and (
        pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)
    ):
        values = _cast_array(arr.flatten(), tt.value_field, f"{where}.element")
        large = pa.types.is_large_list(tt)
        offsets = arr.offsets.cast(pa.int64() if large else pa.int32())
        # offsets of a sliced array need not start at 0; flatten() already dropped the prefix
        offsets = pc.subtract(offsets, offsets[0])
        mask = arr.is_null() if arr.null_count else None
        cls = pa.LargeListArray if large else pa.ListArray
        return cls.from_arrays(offsets, values, type=tt, mask=mask)
    if pa.types.is_map(tt) and pa.types.is_map(arr.type):
        keys = _cast_array(arr.keys, tt.key_field, f"{where}.key")
        items = _cast_array(arr.items, tt.item_field, f"{where}.value")
        offsets = pc.subtract(arr.offsets, arr.offsets[0])
        mask = arr.is_null() if arr.null_count else None
        return pa.MapArray.from_arrays(offsets, keys, items, type=tt, mask=mask)
    if arr.type == tt:
        return arr
    if pa.types.is_timestamp(tt) and pa.types.is_timestamp(arr.type):
        if bool(tt.tz) != bool(arr.type.tz):
            # Spark hands both kinds as instants in the session zone; the wall clock stays as given
            arr = arr.cast(pa.timestamp(arr.type.unit, tz=tt.tz)) if not arr.type.tz else pc.local_timestamp(arr)
        return arr.cast(tt)
    if pa.types.is_time(tt) and pa.types.is_integer(arr.type):
        return arr.cast(pa.int64()).cast(tt)
    try:
        return arr.cast(tt)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise ValidationError(f"column {where!r}: cannot write Arrow {arr.type} as {tt}: {e}") from None


def cast_to_schema(
    data: pa.Table | pa.RecordBatch, schema: Schema, *, include_unknown: bool = False, large_types: bool = False
) -> pa.Table:
    """``data`` as a table with exactly the Arrow schema of ``schema`` (ids in the metadata).

    Columns are matched by name (case-insensitively when that is unambiguous); optional columns
    absent from the data become nulls, a missing required column raises
    :class:`ValidationError`.  Values are cast to the table's types: timestamps to micros (UTC for
    ``timestamptz``), strings to uuids, binary to fixed, decimals rescaled when exact.
    """
    target = schema_to_arrow(schema, include_unknown=include_unknown, large_types=large_types)
    names = list(data.schema.names)
    columns = []
    for tf in target:
        j = _find_child(names, tf.name)
        if j is None:
            if not tf.nullable:
                raise ValidationError(f"required column {tf.name!r} is missing from the data (columns: {names})")
            columns.append(pa.nulls(data.num_rows, tf.type))
            continue
        col = data.column(j)
        if not tf.nullable and col.null_count:
            raise ValidationError(f"required column {tf.name!r} holds {col.null_count} null values")
        columns.append(_cast_array(col, tf, tf.name))
    return pa.Table.from_arrays(columns, schema=target)


def iter_fields_with_ids(arrow_schema: pa.Schema) -> Iterable[tuple[tuple[str, ...], pa.Field, int | None]]:
    """``(arrow name path, field, field id)`` for every field at every depth, depth first."""
    stack = [((f.name,), f) for f in reversed(list(arrow_schema))]
    while stack:
        path, f = stack.pop()
        yield path, f, field_id(f)
        stack.extend((path + (c.name,), c) for c in reversed(_children(f.type)))
