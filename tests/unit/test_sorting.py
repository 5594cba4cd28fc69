"""Sort orders: JSON, Spark-style sort strings and the spec's float order (spec-onfile §5.3)."""

import math

import pytest

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.schema import Schema
from procedures.spec.sorting import (
    UNSORTED_SORT_ORDER, NullOrder, SortDirection, SortField, SortOrder, float_sort_key, parse_sort_order,
    sort_order_from_json, sort_order_to_json,
)
from procedures.spec.transforms import DAY, HOUR, IDENTITY, BucketTransform, TruncateTransform
from procedures.spec.types import DOUBLE, LONG, STRING, TIMESTAMP, NestedField, StructType

SCHEMA = Schema((
    NestedField(1, "id", LONG), NestedField(2, "name", STRING), NestedField(3, "ts", TIMESTAMP),
    NestedField(4, "loc", StructType((NestedField(5, "lat", DOUBLE),))),
))
ASC, DESC = SortDirection.ASC, SortDirection.DESC
FIRST, LAST = NullOrder.NULLS_FIRST, NullOrder.NULLS_LAST


def test_spark_defaults_and_explicit_null_orders():
    order = parse_sort_order("name ASC NULLS LAST, id DESC, ts, id desc NULLS FIRST", SCHEMA)
    assert order == SortOrder(1, (
        SortField(2, IDENTITY, ASC, LAST), SortField(1, IDENTITY, DESC, LAST),
        SortField(3, IDENTITY, ASC, FIRST), SortField(1, IDENTITY, DESC, FIRST),
    ))


def test_transforms_nested_and_quoted_columns():
    order = parse_sort_order("bucket(16, id), truncate(name, 3) DESC, truncate(4, name), days(ts), hours(ts), "
                             "`loc`.lat, LOC.LAT", SCHEMA, order_id=7)
    assert order.order_id == 7
    assert [(f.source_id, f.transform) for f in order.fields] == [
        (1, BucketTransform(16)), (2, TruncateTransform(3)), (2, TruncateTransform(4)), (3, DAY), (3, HOUR),
        (5, IDENTITY), (5, IDENTITY),
    ]
    with pytest.raises(ValidationError, match="'LOC.LAT' not found"):
        parse_sort_order("LOC.LAT", SCHEMA, case_sensitive=True)


@pytest.mark.parametrize("text,token", [
    ("nope ASC", "'nope'"),
    ("id ASC NULLS MIDDLE", "'MIDDLE'"),
    ("id name", "'name'"),
    ("zorder(id, name)", "'zorder'"),
    ("bucket(id, name)", "one column and one number"),
    ("id ; name", "';'"),
    ("", "empty"),
])
def test_errors_name_the_bad_column_or_token(text, token):
    with pytest.raises(ValidationError) as err:
        parse_sort_order(text, SCHEMA)
    assert token in str(err.value)


def test_json_round_trip():
    obj = {"order-id": 1, "fields": [
        {"transform": "identity", "source-id": 2, "direction": "asc", "null-order": "nulls-first"},
        {"transform": "bucket[4]", "source-id": 1, "direction": "desc", "null-order": "nulls-last"}]}
    order = sort_order_from_json(obj)
    assert order.fields[1] == SortField(1, BucketTransform(4), DESC, LAST)
    assert sort_order_to_json(order) == obj
    assert sort_order_to_json(UNSORTED_SORT_ORDER) == {"order-id": 0, "fields": []}
    assert sort_order_from_json({"order-id": 0, "fields": []}).is_unsorted()


def test_json_errors_and_reserved_id():
    with pytest.raises(InvalidMetadataError, match="direction"):
        sort_order_from_json({"order-id": 1, "fields": [{"transform": "identity", "source-id": 1, "null-order": "nulls-first"}]})
    with pytest.raises(InvalidMetadataError, match="reserved"):
        sort_order_from_json({"order-id": 0, "fields": [
            {"transform": "identity", "source-id": 1, "direction": "asc", "null-order": "nulls-first"}]})
    with pytest.raises(ValidationError):
        SortOrder(3, ())


def test_satisfies():
    by_hour = SortOrder(1, (SortField(3, HOUR), SortField(1)))
    assert by_hour.satisfies(SortOrder(2, (SortField(3, DAY),)))
    assert by_hour.satisfies(UNSORTED_SORT_ORDER)
    assert not by_hour.satisfies(SortOrder(2, (SortField(3, DAY, DESC),)))
    assert not SortOrder(1, (SortField(3, DAY),)).satisfies(by_hour)


def test_float_sort_key_total_order():
    neg_nan = -math.nan  # negation sets the sign bit of the NaN
    values = [math.nan, 1.0, -0.0, math.inf, 0.0, -1.0, -math.inf, neg_nan, 5e-324, -5e-324]
    ordered = sorted(values, key=float_sort_key)
    assert math.isnan(ordered[0]) and math.copysign(1, ordered[0]) < 0
    assert ordered[1:-1] == [-math.inf, -1.0, -5e-324, -0.0, 0.0, 5e-324, 1.0, math.inf]
    assert math.copysign(1, ordered[4]) < 0 and math.copysign(1, ordered[5]) > 0
    assert math.isnan(ordered[-1]) and math.copysign(1, ordered[-1]) > 0
