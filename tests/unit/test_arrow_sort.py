"""Sorting Arrow rows by an Iceberg sort order (procedures.core.data_rewrite.arrow_sort): the order Spark's
sort gives, with each field's own direction and null order."""

from __future__ import annotations

import math

import pyarrow as pa

from procedures.core.data_rewrite.arrow_sort import arrow_sortable, sort_indices
from procedures.spec.schema import Schema
from procedures.spec.sorting import parse_sort_order
from procedures.spec.types import DOUBLE, LONG, STRING, UUID, NestedField, StructType

SCHEMA = Schema((
    NestedField(1, "id", LONG, required=False),
    NestedField(2, "data", STRING, required=False),
    NestedField(3, "x", DOUBLE, required=False),
    NestedField(4, "s", StructType((NestedField(5, "k", LONG, required=False),)), required=False),
    NestedField(6, "u", UUID, required=False),
))
ROWS = pa.table({
    "id": [3, None, 1, 2, None, 1],
    "data": ["b", "a", None, "é", "a", "B"],
    "x": [1.5, float("nan"), None, -2.0, 0.0, 7.0],
    "s": [{"k": 30}, {"k": None}, {"k": 10}, {"k": 20}, None, {"k": 11}],
})


def order_of(text: str) -> list[int]:
    fields = parse_sort_order(text, SCHEMA).fields
    return sort_indices(ROWS, SCHEMA, fields).to_pylist()


def test_each_field_keeps_its_own_null_order():
    # id nulls first then data nulls last: rows 1 and 4 (null id) lead, ordered by data ("a" = "a")
    assert order_of("id ASC NULLS FIRST, data DESC NULLS LAST")[:2] in ([1, 4], [4, 1])
    assert order_of("id ASC NULLS LAST, data ASC NULLS FIRST") == [2, 5, 3, 0, 1, 4]
    # nulls last although descending
    assert order_of("data DESC NULLS LAST") == [3, 0, 1, 4, 5, 2] or order_of("data DESC NULLS LAST") == [3, 0, 4, 1, 5, 2]


def test_strings_by_bytes_and_nan_above_numbers():
    assert order_of("data ASC NULLS FIRST")[0] == 2
    # UTF-8 bytes: "B" < "a" < "b" < "é"
    assert [ROWS["data"][i].as_py() for i in order_of("data ASC NULLS LAST")][:5] == ["B", "a", "a", "b", "é"]
    xs = [ROWS["x"][i].as_py() for i in order_of("x ASC NULLS FIRST")]
    assert xs[0] is None and xs[1:5] == [-2.0, 0.0, 1.5, 7.0] and math.isnan(xs[5])
    # descending, NaN is still the largest, so it comes first (Arrow alone puts it last either way)
    xs = [ROWS["x"][i].as_py() for i in order_of("x DESC NULLS LAST")]
    assert math.isnan(xs[0]) and xs[1:5] == [7.0, 1.5, 0.0, -2.0] and xs[5] is None


def test_nested_fields_and_transforms():
    assert order_of("s.k DESC NULLS FIRST")[:2] in ([1, 4], [4, 1])
    assert order_of("s.k DESC NULLS FIRST")[2:] == [0, 3, 5, 2]
    # truncate(1, data): "a" and "a" tie, "B" before them; id breaks the tie, nulls last
    assert order_of("truncate(1, data) ASC NULLS LAST, id ASC NULLS LAST")[:3] == [5, 1, 4]


def test_sortable_only_where_arrow_matches_the_engine():
    assert arrow_sortable(SCHEMA, parse_sort_order("id, bucket(4, data), s.k", SCHEMA).fields)
    assert not arrow_sortable(SCHEMA, parse_sort_order("id, u", SCHEMA).fields)
    assert not arrow_sortable(SCHEMA, ())
