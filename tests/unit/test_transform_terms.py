"""Transform terms in filters: Iceberg's Spark system functions (``system.bucket(4, id) = 1``) in a
``where``, parsed, bound, projected onto partition fields and evaluated as Iceberg Java 1.10 does
(``UnboundTransform``/``BoundTransform``, ``ProjectionUtil.projectTransformPredicate``,
``InclusiveMetricsEvaluator`` on transformed bounds, ``StrictMetricsEvaluator.handleNonReference``)."""

from __future__ import annotations

import pickle

import pytest

from procedures.errors import ExpressionError
from procedures.spec.conversions import to_bytes
from procedures.spec.evaluators import Evaluator, InclusiveMetricsEvaluator, ManifestEvaluator, StrictMetricsEvaluator
from procedures.spec.expression_parser import parse_filter
from procedures.spec.expressions import (
    ALWAYS_FALSE,
    ALWAYS_TRUE,
    BoundPredicate,
    BoundTransform,
    Operation,
    bind,
    predicate,
    referenced_field_ids,
    referenced_names,
    transform_term,
)
from procedures.spec.manifest.model import DataFile, FieldSummary, FileFormat
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.projection import inclusive_projection, strict_projection
from procedures.spec.schema import NestedField, Schema
from procedures.spec.transforms import DAY, HOUR, IDENTITY, MONTH, YEAR, BucketTransform, TruncateTransform
from procedures.spec.types import BOOLEAN, DATE, DOUBLE, INT, LONG, STRING, TIMESTAMP

SCHEMA = Schema([
    NestedField(1, "id", LONG, required=True),
    NestedField(2, "data", STRING),
    NestedField(3, "ts", TIMESTAMP),
    NestedField(4, "dt", DATE),
    NestedField(5, "flag", BOOLEAN),
    NestedField(6, "price", DOUBLE),
])
# 2017-11-16T22:31:08: year 47, month 574, day 17486, hour 419686
TS = 1510871468000000


def spec_of(*fields) -> PartitionSpec:
    return PartitionSpec(0, tuple(PartitionField(src, 1000 + i, t, name) for i, (src, t, name) in enumerate(fields)))


# ------------------------------------------------------------------------------------ parsing
@pytest.mark.parametrize("text, expected", [
    ("system.bucket(4, id) = 1", "bucket[4](id) = 1"),
    ("SYSTEM.BUCKET(4, id) = 1", "bucket[4](id) = 1"),
    ("cat.system.truncate(4, data) = 'ab'", "truncate[4](data) = 'ab'"),
    ("system.years(ts) = 54", "year(ts) = 54"),
    ("system.months(ts) > 1", "month(ts) > 1"),
    ("system.days(ts) >= date('2023-01-01')", "day(ts) >= 19358"),
    ("1 < system.hours(ts)", "hour(ts) > 1"),
    ("system.bucket(2, `data`) IN (0, 1)", "bucket[2](data) IN (0, 1)"),
    ("system.truncate(2, data) LIKE 'ab%'", "starts_with(truncate[2](data), 'ab')"),
    ("system.bucket(2, id) IS NOT NULL", "not_null(bucket[2](id))"),
    ("isnull(system.bucket(2, id))", "is_null(bucket[2](id))"),
    ("system.bucket(4, id) = NULL", "false"),
])
def test_system_functions_parse_to_transform_terms(text, expected):
    assert str(parse_filter(text)) == expected


def test_parsed_term_is_the_java_term():
    assert parse_filter("system.bucket(4, id) = 1") == predicate(
        Operation.EQ, transform_term(BucketTransform(4), "id"), 1)
    assert referenced_names(parse_filter("system.years(ts) = 1 AND id > 2")) == {"ts", "id"}


@pytest.mark.parametrize("text", ["system.bucket(4, id) = 1", "system.truncate(4, data) = 'ab'",
                                  "system.years(ts) = 1", "system.hours(ts) IN (1, 2)"])
def test_terms_pickle(text):
    # scan filters travel to Spark tasks (EntryFilter pickles its expression)
    expr = parse_filter(text)
    assert pickle.loads(pickle.dumps(expr)) == expr


# ------------------------------------------------------------------------------------ binding
def test_binding_converts_literals_to_the_result_type():
    bound = bind(parse_filter("system.days(ts) = 17486"), SCHEMA)
    assert isinstance(bound, BoundPredicate) and isinstance(bound.term, BoundTransform)
    assert bound.term.field_id == 3 and bound.term.type == DATE and bound.literal.type == DATE
    assert bound.ref.name == "ts"
    assert bind(parse_filter("system.bucket(4, data) = 1"), SCHEMA).literal.type == INT
    assert bind(parse_filter("system.truncate(4, data) = 'ab'"), SCHEMA).literal.type == STRING
    assert referenced_field_ids(bind(parse_filter("system.years(ts) = 1"), SCHEMA)) == {3}
    # a transform of a required column is never null, as Java folds it
    assert bind(parse_filter("system.bucket(4, id) IS NULL"), SCHEMA) is ALWAYS_FALSE
    # an int literal beyond the int result range folds as for plain columns
    assert bind(parse_filter("system.bucket(4, id) < 3000000000"), SCHEMA) is ALWAYS_TRUE


@pytest.mark.parametrize("text, message", [
    ("system.bucket(4, nope) = 1", "Cannot find field 'nope'"),
    ("system.bucket(4, flag) = 1", "Cannot bind: bucket[4] cannot transform boolean values from 'flag'"),
    ("system.truncate(4, ts) = 1", "Cannot bind: truncate[4] cannot transform timestamp values from 'ts'"),
    ("system.years(data) = 1", "Cannot bind: year cannot transform string values from 'data'"),
    ("system.hours(dt) = 1", "Cannot bind: hour cannot transform date values from 'dt'"),
    ("system.bucket(4, price) = 1", "cannot transform double values from 'price'"),
    ("system.bucket(4, id) = 'x'", "Cannot bind"),
    ("system.bucket(4, data) LIKE 'a%'", "starts_with requires a string column"),
])
def test_binding_errors(text, message):
    with pytest.raises(ExpressionError, match=message.replace("[", r"\[").replace("]", r"\]")):
        bind(parse_filter(text), SCHEMA)


# ------------------------------------------------------------------------------------ projection
@pytest.mark.parametrize("text, field, inclusive, strict", [
    ("system.bucket(4, id) = 1", (1, BucketTransform(4), "b"), "b = 1", "b = 1"),
    ("system.bucket(4, id) IN (1, 2)", (1, BucketTransform(4), "b"), "b IN (1, 2)", "b IN (1, 2)"),
    ("system.bucket(4, id) != 1", (1, BucketTransform(4), "b"), "b != 1", "b != 1"),
    ("NOT system.bucket(4, id) = 1", (1, BucketTransform(4), "b"), "b != 1", "b != 1"),
    ("system.truncate(4, data) = 'ab'", (2, TruncateTransform(4), "t"), "t = 'ab'", "t = 'ab'"),
    ("system.truncate(4, data) LIKE 'ab%'", (2, TruncateTransform(4), "t"),
     "starts_with(t, 'ab')", "starts_with(t, 'ab')"),
    ("system.years(ts) = 47", (3, YEAR, "y"), "y = 47", "y = 47"),
    ("system.months(ts) < 574", (3, MONTH, "m"), "m < 574", "m < 574"),
    ("system.days(ts) >= date('2017-11-16')", (3, DAY, "d"), "d >= 17486", "d >= 17486"),
    ("system.hours(ts) > 10", (3, HOUR, "h"), "h > 10", "h > 10"),
    ("system.years(dt) = 47", (4, YEAR, "y"), "y = 47", "y = 47"),
    ("system.bucket(4, id) IS NULL", (1, BucketTransform(4), "b"), "false", "false"),
    ("system.bucket(4, data) IS NULL", (2, BucketTransform(4), "b"), "is_null(b)", "is_null(b)"),
    # another transform (or width) of the column, or another column: nothing is learned
    ("system.bucket(4, id) = 1", (1, BucketTransform(8), "b"), "true", "false"),
    ("system.bucket(4, id) = 1", (1, IDENTITY, "id"), "true", "false"),
    ("system.truncate(4, data) = 'ab'", (2, TruncateTransform(2), "t"), "true", "false"),
    ("system.years(ts) = 47", (3, MONTH, "m"), "true", "false"),
    ("system.days(ts) = 17486", (3, HOUR, "h"), "true", "false"),
    ("system.bucket(4, id) = 1", (2, BucketTransform(4), "b"), "true", "false"),
])
def test_projection_of_transform_terms(text, field, inclusive, strict):
    spec = spec_of(field)
    assert str(inclusive_projection(spec, SCHEMA, parse_filter(text))) == inclusive
    assert str(strict_projection(spec, SCHEMA, parse_filter(text))) == strict


def test_projection_mixes_transform_terms_and_columns():
    spec = spec_of((1, BucketTransform(4), "b"), (3, DAY, "d"))
    expr = parse_filter("system.bucket(4, id) = 1 AND ts >= TIMESTAMP '2017-11-16 22:31:08'")
    assert str(inclusive_projection(spec, SCHEMA, expr)) == "(b = 1 AND d >= 17486)"
    assert str(inclusive_projection(spec, SCHEMA, parse_filter("system.years(ts) = 47 OR id = 5"))) == "true"


def test_projected_partition_filter_selects_partitions():
    spec = spec_of((1, BucketTransform(4), "b"))
    ptype = spec.partition_type(SCHEMA)
    projected = inclusive_projection(spec, SCHEMA, parse_filter("system.bucket(4, id) = 1"))
    assert [Evaluator(ptype, projected).eval((b,)) for b in range(4)] == [False, True, False, False]
    summaries = (FieldSummary(False, False, to_bytes(2, INT), to_bytes(3, INT)),)
    assert ManifestEvaluator(ptype, projected).eval(summaries) is False
    assert ManifestEvaluator.for_row_filter(parse_filter("system.bucket(4, id) = 2"), spec, SCHEMA).eval(summaries)
    # a transform term on a partition field itself: summaries bound the field, not its transform
    bucket_of_partition = predicate(Operation.EQ, transform_term(BucketTransform(2), "b"), 0)
    assert ManifestEvaluator(ptype, bucket_of_partition).eval(summaries) is True


# ------------------------------------------------------------------------------------ metrics
def data_file(**overrides) -> DataFile:
    fields = dict(
        file_path="s3://b/f.parquet", file_format=FileFormat.PARQUET, partition=(), record_count=10,
        file_size_in_bytes=100, value_counts={1: 10, 2: 10, 3: 10}, null_value_counts={1: 0, 2: 10, 3: 0},
        lower_bounds={1: to_bytes(5, LONG), 3: to_bytes(TS, TIMESTAMP)},
        upper_bounds={1: to_bytes(5, LONG), 3: to_bytes(TS, TIMESTAMP)},
    )
    fields.update(overrides)
    return DataFile(**fields)


@pytest.mark.parametrize("text, might_match", [
    # bucket does not preserve order: its bounds are unknown, only the counts decide (as Java)
    ("system.bucket(4, id) = 0", True),  # bucket[4](5) is not 0, yet the metrics cannot tell
    ("system.bucket(4, id) IN (0, 1)", True),
    ("system.bucket(4, id) IS NULL", False),  # id is required: folded at binding
    ("system.bucket(4, ts) IS NULL", True),  # no null ts, but bucket is not known to keep non-nulls
    ("system.bucket(4, data) IS NOT NULL", False),  # data holds only nulls
    ("system.truncate(4, data) = 'ab'", False),
    ("system.bucket(4, data) = 1", False),
    # order-preserving transforms of the bounds bound the transformed values (Java 1.10)
    ("system.years(ts) = 47", True),
    ("system.years(ts) = 10", False),
    ("system.years(ts) < 47", False),
    ("system.years(ts) <= 47", True),
    ("system.months(ts) > 574", False),
    ("system.months(ts) >= 574", True),
    ("system.days(ts) = date('2017-11-16')", True),
    ("system.days(ts) IN (date('2017-11-15'), date('2017-11-17'))", False),
    ("system.hours(ts) IN (419686, 1)", True),
    ("system.truncate(10, id) = 0", True),
    ("system.truncate(10, id) = 10", False),
    ("system.years(ts) IS NULL", False),  # no nulls, and year keeps non-nulls
    # never decided by bounds
    ("NOT system.years(ts) = 47", True),
    ("system.years(ts) NOT IN (47, 48)", True),
])
def test_metrics_of_transform_terms(text, might_match):
    assert InclusiveMetricsEvaluator(SCHEMA, parse_filter(text)).eval(data_file()) is might_match
    # the strict evaluator never proves a transform term (Java's handleNonReference)
    if "IS NULL" not in text:
        assert StrictMetricsEvaluator(SCHEMA, parse_filter(text)).eval(data_file()) is False


def test_metrics_of_truncated_strings():
    f = data_file(null_value_counts={1: 0, 2: 0, 3: 0}, lower_bounds={2: to_bytes("abcd", STRING)},
                  upper_bounds={2: to_bytes("abzz", STRING)})
    assert InclusiveMetricsEvaluator(SCHEMA, parse_filter("system.truncate(2, data) = 'ab'")).eval(f) is True
    assert InclusiveMetricsEvaluator(SCHEMA, parse_filter("system.truncate(2, data) > 'ab'")).eval(f) is False
    assert InclusiveMetricsEvaluator(SCHEMA, parse_filter("system.truncate(2, data) NOT LIKE 'ab%'")).eval(f) is False
    assert InclusiveMetricsEvaluator(SCHEMA, parse_filter("system.truncate(2, data) NOT LIKE 'ac%'")).eval(f) is True
    assert InclusiveMetricsEvaluator(SCHEMA, parse_filter("system.truncate(2, data) LIKE 'ac%'")).eval(f) is True


def test_metrics_still_decide_the_column_predicates_beside_them():
    expr = parse_filter("system.bucket(4, id) = 0 AND id > 100")
    assert InclusiveMetricsEvaluator(SCHEMA, expr).eval(data_file()) is False
    assert InclusiveMetricsEvaluator(SCHEMA, parse_filter("system.bucket(4, id) = 0 OR id > 100")).eval(data_file())
    assert InclusiveMetricsEvaluator(SCHEMA, expr).eval(data_file(record_count=0)) is False


# ------------------------------------------------------------------------------------ rows
@pytest.mark.parametrize("text, row, expected", [
    ("system.bucket(16, id) = 3", (34, None, None, None, None, None), True),  # spec vector: bucket[16](34L) = 3
    ("system.bucket(16, id) = 4", (34, None, None, None, None, None), False),
    ("system.truncate(2, data) = 'ab'", (1, "abc", None, None, None, None), True),
    ("system.truncate(2, data) LIKE 'a%'", (1, "abc", None, None, None, None), True),
    ("system.years(ts) = 47", (1, None, TS, None, None, None), True),
    ("system.months(ts) = 574", (1, None, TS, None, None, None), True),
    ("system.days(ts) = date('2017-11-16')", (1, None, TS, None, None, None), True),
    ("system.hours(ts) = 419686", (1, None, TS, None, None, None), True),
    ("system.hours(ts) > 419686", (1, None, TS, None, None, None), False),
    ("system.years(ts) = 47", (1, None, None, None, None, None), False),
    ("system.years(ts) IS NULL", (1, None, None, None, None, None), True),
    ("system.years(ts) != 47", (1, None, None, None, None, None), True),
])
def test_rows_evaluate_the_transformed_value(text, row, expected):
    assert Evaluator(SCHEMA, parse_filter(text)).eval(row) is expected
