"""The Spark type an INSERT casts each column to (``iceberg_to_spark_type``, also told to a Spark
Connect client as the frame's schema) is the type of the DDL text the other writes cast to
(``iceberg_to_spark_ddl``): a client told another schema than the plan's would send the write wrong
column types."""

from __future__ import annotations

import pytest

from procedures.frontend.sqlddl import iceberg_to_spark_ddl, iceberg_to_spark_type
from procedures.spec import types as t


CASES = [
    t.BooleanType(), t.IntegerType(), t.LongType(), t.FloatType(), t.DoubleType(), t.DateType(),
    t.TimestampType(), t.TimestamptzType(), t.StringType(), t.UUIDType(), t.BinaryType(), t.FixedType(16),
    t.DecimalType(10, 2), t.TimeType(),
    t.ListType(1, t.LongType(), element_required=True),
    t.MapType(2, t.StringType(), 3, t.DoubleType(), value_required=False),
    t.StructType((t.NestedField(4, "a b", t.IntegerType(), required=True),
                  t.NestedField(5, "c", t.ListType(6, t.StringType()), required=False))),
]


@pytest.mark.parametrize("iceberg_type", CASES, ids=str)
def test_cast_type_is_the_ddl_type_with_every_nested_part_nullable(iceberg_type):
    spark_type = iceberg_to_spark_type(iceberg_type)
    assert spark_type.simpleString() == iceberg_to_spark_ddl(iceberg_type).replace("`", "")
    for node in _nested(spark_type):
        assert getattr(node, "nullable", True) and getattr(node, "containsNull", True) \
            and getattr(node, "valueContainsNull", True)


def _nested(data_type):
    yield data_type
    for child in getattr(data_type, "fields", ()):
        yield child
        yield from _nested(child.dataType)
    for attr in ("elementType", "keyType", "valueType"):
        if hasattr(data_type, attr):
            yield from _nested(getattr(data_type, attr))
