"""Sorting Arrow rows by an Iceberg sort order, for rewrites that sort a small file group inside one
task instead of through an engine's shuffle.

Each sort field becomes two Arrow sort keys: whether the value is null (placed first or last as the
field says, so each field keeps its own null order, which Arrow's one global null placement cannot)
and the value itself (the source column, or the field's transform of it).  Arrow compares strings and
binary by their bytes, as Spark's sort does.  Spark also holds NaN above every number in both
directions, while Arrow puts NaN last whatever the direction, so floating-point fields get a third key,
whether the value is NaN, ahead of the value.  The order is then the one the shuffle would give (ties
aside).
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from procedures.spec.schema import Schema
from procedures.spec.sorting import NullOrder, SortDirection, SortField
from procedures.spec.types import (
    BinaryType, BooleanType, DateType, DecimalType, DoubleType, FloatType, IcebergType, IntegerType, LongType,
    StringType, TimestampNanoType, TimestampType, TimestamptzNanoType, TimestamptzType, TimeType,
)

__all__ = ["arrow_sortable", "column_at", "sort_indices", "sort_keys"]

_SORTABLE = (BooleanType, IntegerType, LongType, FloatType, DoubleType, DecimalType, DateType, TimeType,
             TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType, StringType, BinaryType)


def _key_type(schema: Schema, field: SortField) -> IcebergType:
    source = schema.find_field(field.source_id).field_type
    return field.transform.result_type(source)


def arrow_sortable(schema: Schema, fields: Sequence[SortField]) -> bool:
    """Whether Arrow sorts every key of ``fields`` in the engine's order (uuid and fixed keys, whose
    Arrow forms are extension or fixed-width types, are left to the engine)."""
    return bool(fields) and all(isinstance(_key_type(schema, f), _SORTABLE) for f in fields)


def column_at(data: pa.Table | pa.RecordBatch, path: Sequence[str]) -> pa.Array:
    """The column at ``path`` (a top-level name, then struct field names) as one array; null where
    any struct on the way is."""
    col = data.column(data.schema.get_field_index(path[0]))
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    for part in path[1:]:
        # struct_field, unlike StructArray.field, is null where the struct itself is
        arr = pc.struct_field(arr, [part])
    return arr


def sort_keys(data: pa.Table | pa.RecordBatch, schema: Schema, fields: Sequence[SortField]
              ) -> tuple[pa.Table, list[tuple[str, str]]]:
    """The sort-key columns of ``data`` (columns named as ``schema``) in the order of ``fields``,
    and the Arrow sort keys over them: sorting the key table by those keys sorts ``data``.  Dates,
    times and timestamps are keyed by their integer storage (same order), so a key value read back
    as a Python object is a plain number."""
    keys: dict[str, pa.Array] = {}
    order: list[tuple[str, str]] = []
    for i, f in enumerate(fields):
        source = schema.find_field(f.source_id).field_type
        values = f.transform.apply_arrow(column_at(data, schema.field_path(f.source_id)), source)
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if pa.types.is_temporal(values.type):
            values = values.view(pa.int32() if values.type.bit_width == 32 else pa.int64())
        # False sorts before True: descending puts the nulls (True) first
        keys[f"n{i}"] = pc.is_null(values)
        order.append((f"n{i}", "descending" if f.null_order == NullOrder.NULLS_FIRST else "ascending"))
        direction = "ascending" if f.direction == SortDirection.ASC else "descending"
        if pa.types.is_floating(values.type):
            # NaN is the largest value: last ascending, first descending (True sorts after False)
            keys[f"x{i}"] = pc.fill_null(pc.is_nan(values), False)
            order.append((f"x{i}", direction))
        keys[f"v{i}"] = values
        order.append((f"v{i}", direction))
    return pa.table(keys), order


def sort_indices(data: pa.Table | pa.RecordBatch, schema: Schema, fields: Sequence[SortField]) -> pa.Array:
    """Row indices of ``data`` (columns named as ``schema``) in the order of ``fields``."""
    keys, order = sort_keys(data, schema, fields)
    return pc.sort_indices(keys, sort_keys=order)
