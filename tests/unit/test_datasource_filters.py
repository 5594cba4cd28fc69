"""The data source's Spark-free parts: filters translated to our expressions (Spark 4.1's filter
classes are matched by name, so stand-ins with the same names and fields serve on any pyspark) and the
refusal on pyspark 3.5."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest

from procedures.errors import UnsupportedVersionError
from procedures.spark import datasource as ds
from procedures.spec.evaluators import Evaluator
from procedures.spec.expressions import bind
from procedures.spec.schema import Schema
from procedures.spec.types import DATE, DecimalType, LONG, STRING, TIMESTAMPTZ, NestedField, StructType
from tests.helpers.references import import_reference


def _filter(name: str, *fields: str):
    return dataclass(frozen=True)(type(name, (), {"__annotations__": {f: Any for f in fields}}))


EqualTo, EqualNullSafe, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual, In = (
    _filter(n, "attribute", "value") for n in
    ("EqualTo", "EqualNullSafe", "GreaterThan", "GreaterThanOrEqual", "LessThan", "LessThanOrEqual", "In"))
StringStartsWith, StringEndsWith, StringContains = (
    _filter(n, "attribute", "value") for n in ("StringStartsWith", "StringEndsWith", "StringContains"))
IsNull, IsNotNull = (_filter(n, "attribute") for n in ("IsNull", "IsNotNull"))
Not = _filter("Not", "child")

SCHEMA = Schema((
    NestedField(1, "id", LONG, True), NestedField(2, "name", STRING), NestedField(3, "d", DATE),
    NestedField(4, "ts", TIMESTAMPTZ), NestedField(5, "amount", DecimalType(9, 2)),
    NestedField(6, "s", StructType((NestedField(7, "x", LONG),))),
))


def _matches(spark_filter, row: tuple) -> bool:
    expr = ds.translate_filter(spark_filter)
    assert expr is not None, spark_filter
    return Evaluator(SCHEMA.as_struct(), bind(expr, SCHEMA)).eval(row)


ROW = (5, "apple", 19782, 1704276000000000, Decimal("12.50"), (7,))


@pytest.mark.parametrize("spark_filter, expected", [
    (EqualTo(("id",), 5), True),
    (EqualTo(("id",), 6), False),
    (Not(EqualTo(("id",), 5)), False),
    (GreaterThan(("id",), 4), True),
    (GreaterThanOrEqual(("id",), 6), False),
    (LessThan(("id",), 6), True),
    (LessThanOrEqual(("id",), 4), False),
    (In(("id",), (1, None, 5)), True),
    (Not(In(("id",), (5,))), False),
    (IsNull(("name",)), False),
    (IsNotNull(("name",)), True),
    (EqualNullSafe(("name",), None), False),
    (EqualNullSafe(("name",), "apple"), True),
    (StringStartsWith(("name",), "app"), True),
    (Not(StringStartsWith(("name",), "app")), False),
    (LessThan(("d",), dt.date(2024, 3, 1)), True),
    (GreaterThanOrEqual(("ts",), dt.datetime(2024, 1, 3, 10, tzinfo=dt.timezone.utc)), True),
    (GreaterThan(("ts",), dt.datetime(2024, 1, 3, 10, tzinfo=dt.timezone.utc)), False),
    (EqualTo(("amount",), Decimal("12.5")), True),
    (EqualTo(("s", "x"), 7), True),
])
def test_translated_filters_keep_their_meaning(spark_filter, expected):
    assert _matches(spark_filter, ROW) is expected


@pytest.mark.parametrize("spark_filter", [
    StringEndsWith(("name",), "le"),
    StringContains(("name",), "pl"),
    Not(StringContains(("name",), "pl")),
    EqualTo(("id",), [1, 2]),  # array literal
    EqualTo(("id",), float("nan")),
    EqualTo(("id",), None),
    In(("id",), (None,)),
    _filter("SomethingNew", "attribute")(("id",)),
])
def test_filters_without_an_exact_counterpart_are_not_translated(spark_filter):
    assert ds.translate_filter(spark_filter) is None


def test_register_refuses_without_the_data_source_api(monkeypatch):
    monkeypatch.setattr(ds, "HAS_DATA_SOURCE_API", False)
    with pytest.raises(UnsupportedVersionError, match="needs pyspark 4.0 or later") as info:
        ds.register_data_source()
    assert info.value.component == "pyspark" and info.value.supported == ">=4.0"


def test_the_api_is_there_exactly_from_pyspark_4():
    pyspark = import_reference("pyspark")
    assert ds.HAS_DATA_SOURCE_API == (int(pyspark.__version__.split(".")[0]) >= 4)


def test_tables_resolve_through_the_captured_catalog_configuration(tmp_path):
    from procedures.errors import CatalogConfigError, NoSuchCatalogError, NoSuchTableError, ValidationError

    conf = {"spark.sql.catalog.h.type": "hive", "spark.sql.catalog.w.type": "hadoop",
            "spark.sql.catalog.w.warehouse": str(tmp_path)}
    with pytest.raises(CatalogConfigError, match="hive catalog"):
        ds.load_named_table({"path": "h.db.t"}, conf)
    with pytest.raises(NoSuchTableError):
        ds.load_named_table({"path": "w.db.t"}, conf)
    with pytest.raises(NoSuchCatalogError, match="local"):
        ds.load_named_table({"path": "db.t"}, conf)  # two parts: the default catalog, not configured
    with pytest.raises(ValidationError, match="No table given"):
        ds.load_named_table({}, conf)


# ------------------------------------------------- pyspark's to_arrow_schema across 4.x versions
def _arrow_form(schema, tz):
    import pyarrow as pa
    from pyspark.sql.types import TimestampType

    def one(t):
        if isinstance(t, TimestampType):
            assert tz is not None, "timezone required for TimestampType"
            return pa.timestamp("us", tz=tz)
        return pa.int64()
    return pa.schema([pa.field(f.name, one(f.dataType), f.nullable) for f in schema])


# the signatures of pyspark/sql/pandas/types.py: 3.5, 4.0 and 4.1 (timestamp_utc), 4.2 (keyword-only timezone)
def _to_arrow_35(schema):
    return _arrow_form(schema, "UTC")


def _to_arrow_40_41(schema, error_on_duplicated_field_names_in_struct=False, timestamp_utc=True,
                    prefers_large_types=False):
    return _arrow_form(schema, "UTC" if timestamp_utc else None)


def _to_arrow_42(schema, *, error_on_duplicated_field_names_in_struct=False, timezone=None,
                 prefers_large_types=False):
    return _arrow_form(schema, timezone)


@pytest.mark.parametrize("stub", [_to_arrow_35, _to_arrow_40_41, _to_arrow_42], ids=["3.5", "4.0-4.1", "4.2+"])
def test_spark_arrow_schema_fits_every_to_arrow_schema_signature(monkeypatch, stub):
    # a user's pyspark 4.1.4 failed with "to_arrow_schema() got an unexpected keyword argument 'timezone'"
    import pyarrow as pa
    import pyspark.sql.pandas.types as spark_arrow
    from pyspark.sql.types import LongType, StructField, StructType, TimestampType

    monkeypatch.setattr(spark_arrow, "to_arrow_schema", stub)
    schema = StructType([StructField("id", LongType(), False), StructField("ts", TimestampType())])
    got = ds.spark_arrow_schema(schema)
    assert got.field("ts").type == pa.timestamp("us", tz="UTC")
    assert got.field("id").type == pa.int64()
