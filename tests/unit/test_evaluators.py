"""Unit tests for the row, manifest and metrics evaluators and for partition projection."""

from __future__ import annotations

import struct
from decimal import Decimal

import pytest

from procedures.errors import ValidationError
from procedures.spec.conversions import to_bytes
from procedures.spec.evaluators import (
    IN_PREDICATE_LIMIT,
    Evaluator,
    InclusiveMetricsEvaluator,
    ManifestEvaluator,
    StrictMetricsEvaluator,
    compare_values,
)
from procedures.spec.expressions import (
    ALWAYS_FALSE,
    ALWAYS_TRUE,
    Operation,
    and_,
    eq,
    gt,
    gt_eq,
    in_,
    is_nan,
    is_null,
    lt,
    lt_eq,
    not_,
    not_eq,
    not_in,
    not_nan,
    not_null,
    not_starts_with,
    or_,
    predicate,
    starts_with,
    visit,
)
from procedures.spec.manifest.model import DataFile, FieldSummary, FileFormat
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.projection import inclusive_projection, strict_projection
from procedures.spec.schema import Schema
from procedures.spec.transforms import (
    DAY,
    HOUR,
    IDENTITY,
    MONTH,
    VOID,
    YEAR,
    BucketTransform,
    TruncateTransform,
    UnknownTransform,
)
from procedures.spec.types import (
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIMESTAMP,
    DecimalType,
    NestedField,
    StructType,
)

# ====================================================================================== metrics
METRICS_SCHEMA = Schema(
    [
        NestedField(1, "id", INT, required=True),
        NestedField(2, "no_stats", INT),
        NestedField(3, "required", STRING, required=True),
        NestedField(4, "all_nulls", STRING),
        NestedField(5, "some_nulls", STRING),
        NestedField(6, "no_nulls", STRING),
        NestedField(7, "all_nans", DOUBLE),
        NestedField(8, "some_nans", FLOAT),
        NestedField(9, "no_nans", FLOAT),
        NestedField(10, "all_nulls_double", DOUBLE),
        NestedField(11, "nan_and_null_only", DOUBLE),
        NestedField(12, "no_nan_stats", DOUBLE),
        NestedField(13, "s", StructType((NestedField(14, "x", LONG),))),
        NestedField(15, "trunc", STRING),
        NestedField(16, "ts", TIMESTAMP),
        NestedField(17, "ts_from_date", TIMESTAMP),
    ]
)
DAY_US = 86_400_000_000
TS_LOW, TS_HIGH = 17486 * DAY_US + 1, 17486 * DAY_US + 3_600_000_000


def _f32(v: float) -> bytes:
    return struct.pack("<f", v)


def data_file(record_count: int = 50, **overrides) -> DataFile:
    fields = dict(
        file_path="s3://b/file.parquet",
        file_format=FileFormat.PARQUET,
        partition=(),
        record_count=record_count,
        file_size_in_bytes=1024,
        value_counts={i: 50 for i in (3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16, 17)},
        null_value_counts={1: 0, 3: 0, 4: 50, 5: 10, 6: 0, 7: 0, 8: 0, 9: 0, 10: 50, 11: 10, 12: 0, 14: 0, 15: 0,
                           16: 0, 17: 0},
        nan_value_counts={7: 50, 8: 10, 9: 0, 10: 0, 11: 40},
        lower_bounds={
            1: to_bytes(30, INT),
            3: to_bytes("a", STRING),
            5: to_bytes("bbb", STRING),
            6: to_bytes("abc", STRING),
            8: _f32(1.0),
            9: _f32(0.5),
            12: to_bytes(1.0, DOUBLE),
            # written as int before the column was promoted to long
            14: to_bytes(5, INT),
            # truncated bounds of values that all start with "abc" ... "abd"
            15: to_bytes("abc", STRING),
            16: to_bytes(TS_LOW, TIMESTAMP),
            # written as dates before the column was promoted to timestamp: midnight of that day
            17: to_bytes(17486, DATE),
        },
        upper_bounds={
            1: to_bytes(79, INT),
            3: to_bytes("z", STRING),
            5: to_bytes("eee", STRING),
            6: to_bytes("abe", STRING),
            # a NaN upper bound from an old writer must be ignored
            8: _f32(float("nan")),
            9: _f32(9.5),
            12: to_bytes(10.0, DOUBLE),
            14: to_bytes(15, INT),
            15: to_bytes("abd", STRING),
            16: to_bytes(TS_HIGH, TIMESTAMP),
            17: to_bytes(17488, DATE),
        },
    )
    fields.update(overrides)
    return DataFile(**fields)


FILE = data_file()


def inclusive(expr, file=FILE) -> bool:
    return InclusiveMetricsEvaluator(METRICS_SCHEMA, expr).eval(file)


def inclusive_visited(expr, file=FILE) -> bool:
    """The inclusive answer through the visitor alone, without the functions ``eval`` compiles for
    comparisons and IN: both must give the same answers."""
    ev = InclusiveMetricsEvaluator(METRICS_SCHEMA, expr)
    return ev._visited(file, ev.expr)


def strict(expr, file=FILE) -> bool:
    return StrictMetricsEvaluator(METRICS_SCHEMA, expr).eval(file)


@pytest.mark.parametrize(
    "expr, expected",
    [
        (eq("id", 5), False),
        (eq("id", 29), False),
        (eq("id", 30), True),
        (eq("id", 79), True),
        (eq("id", 80), False),
        (lt("id", 30), False),
        (lt("id", 31), True),
        (lt_eq("id", 29), False),
        (lt_eq("id", 30), True),
        (gt("id", 79), False),
        (gt("id", 78), True),
        (gt_eq("id", 80), False),
        (gt_eq("id", 79), True),
        (not_eq("id", 30), True),
        (in_("id", [5, 6]), False),
        (in_("id", [29, 80]), False),
        (in_("id", [5, 40]), True),
        (in_("id", list(range(100, 400))), True),  # beyond the IN limit: not checked
        (not_in("id", [30, 40]), True),
        (not_(lt("id", 5)), True),
        (not_(gt_eq("id", 5)), False),
        (and_(gt("id", 50), lt("id", 20)), False),
        (or_(lt("id", 5), gt("id", 78)), True),
        (eq("no_stats", 5), True),
        (is_null("no_stats"), True),
        (is_null("all_nulls"), True),
        (is_null("no_nulls"), False),
        (not_null("all_nulls"), False),
        (not_null("some_nulls"), True),
        (eq("all_nulls", "a"), False),
        (lt("all_nulls", "a"), False),
        (in_("all_nulls", ["a", "b"]), False),
        (starts_with("all_nulls", "a"), False),
        (not_starts_with("all_nulls", "a"), True),
        (is_nan("all_nans"), True),
        (is_nan("no_nans"), False),
        (is_nan("all_nulls_double"), False),
        (is_nan("no_nan_stats"), True),
        (not_nan("all_nans"), False),
        (not_nan("some_nans"), True),
        (lt("all_nans", 1.0), False),
        (eq("all_nans", 1.0), False),
        (gt("nan_and_null_only", 1.0), True),
        (gt("some_nans", 100.0), True),  # the NaN upper bound is ignored
        (lt("some_nans", 0.5), False),
        (gt("no_nans", 9.5), False),
        (gt("no_nans", 9.0), True),
        (eq("some_nulls", "aaa"), False),
        (eq("some_nulls", "ccc"), True),
        (gt("s.x", 15), False),  # 4-byte bounds of a promoted long column
        (gt("s.x", 14), True),
        (eq("s.x", 4), False),
        (starts_with("trunc", "abc"), True),
        (starts_with("trunc", "abcz"), True),
        (starts_with("trunc", "ab"), True),
        (starts_with("trunc", "abe"), False),
        (starts_with("trunc", "aa"), False),
        (starts_with("no_nulls", "abf"), False),
        (not_starts_with("trunc", "ab"), False),
        (not_starts_with("trunc", "abc"), True),
        (not_starts_with("some_nulls", "b"), True),
        (starts_with("required", "m"), True),
        (starts_with("required", "zz"), False),
        # truncated bounds ("abc" .. "abd") of longer values: still below and above every value
        (eq("trunc", "abcz"), True),
        (eq("trunc", "abd"), True),
        (eq("trunc", "abda"), False),
        (gt("trunc", "abczz"), True),
        (gt("trunc", "abd"), False),
        (gt_eq("trunc", "abd"), True),
        (lt("trunc", "abc"), False),
        (lt_eq("trunc", "abc"), True),
        (in_("trunc", ["abda", "ab"]), False),
        (in_("trunc", ["abda", "abcq"]), True),
        # != and NOT IN never prune: nulls and NaN satisfy them, and bounds are not values
        (not_eq("all_nulls", "a"), True),
        (not_eq("all_nans", 1.0), True),
        (not_in("all_nans", [1.0]), True),
        (not_in("no_nulls", ["abc", "abd", "abe"]), True),
        (not_(eq("id", 30)), True),
        (not_(in_("id", [5, 6])), True),
        # NaN counts: only NaN values satisfy no comparison; NaN and nulls together prove nothing
        (in_("all_nans", [1.0, 2.0]), False),
        (gt_eq("all_nans", -1.0), False),
        (gt_eq("nan_and_null_only", 1.0), True),
        (in_("no_nan_stats", [5.0]), True),
        (lt("no_nan_stats", 1.0), False),
        # timestamps, and bounds written as dates before a promotion (midnight of the day)
        (lt("ts", TS_LOW), False),
        (lt_eq("ts", TS_LOW), True),
        (gt("ts", TS_HIGH), False),
        (eq("ts", TS_HIGH), True),
        (in_("ts", [TS_LOW - 1, TS_HIGH + 1]), False),
        (lt("ts_from_date", 17486 * DAY_US), False),
        (lt("ts_from_date", 17486 * DAY_US + 1), True),
        (gt("ts_from_date", 17488 * DAY_US), False),
        (gt_eq("ts_from_date", 17488 * DAY_US), True),
        (eq("ts_from_date", 17487 * DAY_US + 5), True),
    ],
)
def test_inclusive_metrics(expr, expected):
    assert inclusive(expr) is expected
    assert inclusive_visited(expr) is expected


def test_in_lists_longer_than_the_limit_are_not_tested_value_by_value():
    """Java's IN_PREDICATE_LIMIT: up to 200 values the bounds are tested against each value; past
    it the file might match.  ``id`` lies in [30, 79]; the values here all lie above it."""
    assert IN_PREDICATE_LIMIT == 200
    at_limit, past_limit = list(range(80, 280)), list(range(80, 281))
    for expr in (in_("id", at_limit), in_("id", [1] + at_limit[:-1])):
        assert inclusive(expr) is False and inclusive_visited(expr) is False
    assert inclusive(in_("id", past_limit)) is True and inclusive_visited(in_("id", past_limit)) is True
    # a column with only nulls still rules the file out, whatever the length
    assert inclusive(in_("all_nulls", [str(i) for i in range(300)])) is False


def test_inclusive_record_counts():
    assert inclusive(eq("id", 50), data_file(record_count=0)) is False
    assert inclusive(eq("id", 5), data_file(record_count=-1)) is True  # imported without a row count


def test_inclusive_missing_metrics_might_match():
    bare = data_file(value_counts=None, null_value_counts=None, nan_value_counts=None,
                     lower_bounds=None, upper_bounds=None)
    for expr in (eq("id", 5), is_null("all_nulls"), not_null("all_nulls"), is_nan("no_nans"),
                 not_nan("all_nans"), starts_with("trunc", "zz"), lt("s.x", 0)):
        assert inclusive(expr, bare) is True
        assert inclusive_visited(expr, bare) is True


@pytest.mark.parametrize("missing", ["value_counts", "null_value_counts", "nan_value_counts"])
def test_one_missing_count_map_proves_nothing(missing):
    # the all-null and all-NaN rules need the value count and the null (NaN) count both
    f = data_file(**{missing: None})
    nulls_known = missing not in ("value_counts", "null_value_counts")
    nans_known = missing not in ("value_counts", "nan_value_counts")
    for expr, proven in ((eq("all_nulls", "a"), nulls_known), (lt("all_nulls", "b"), nulls_known),
                         (in_("all_nulls", ["a"]), nulls_known), (not_null("all_nulls"), nulls_known),
                         (gt("all_nans", 0.0), nans_known), (in_("all_nans", [1.0]), nans_known),
                         (not_nan("all_nans"), nans_known)):
        assert inclusive(expr, f) is not proven, expr
        assert inclusive_visited(expr, f) is not proven, expr
    # strict: a missing null count may hide nulls, which satisfy no comparison
    assert strict(lt("id", 80), f) is (missing != "null_value_counts")
    assert strict(not_null("no_nulls"), f) is (missing != "null_value_counts")
    assert strict(not_eq("all_nulls", "a"), f) is nulls_known
    assert strict(not_in("all_nans", [1.0]), f) is nans_known


@pytest.mark.parametrize(
    "expr, expected",
    [
        (lt("id", 80), True),
        (lt("id", 79), False),
        (lt_eq("id", 79), True),
        (lt_eq("id", 78), False),
        (gt("id", 29), True),
        (gt("id", 30), False),
        (gt_eq("id", 30), True),
        (gt_eq("id", 31), False),
        (eq("id", 30), False),
        (not_eq("id", 5), True),
        (not_eq("id", 80), True),
        (not_eq("id", 30), False),
        (not_in("id", [5, 6]), True),
        (not_in("id", [5, 80]), True),
        (not_in("id", [5, 30]), False),
        (in_("id", [30, 40]), False),
        (not_(lt("id", 30)), True),
        (and_(lt("id", 80), gt("id", 29)), True),
        (or_(lt("id", 5), gt("id", 29)), True),
        (lt("no_stats", 5), False),
        (is_null("all_nulls"), True),
        (is_null("some_nulls"), False),
        (not_null("no_nulls"), True),
        (not_null("some_nulls"), False),
        (not_eq("all_nulls", "a"), True),
        (not_in("all_nulls", ["a"]), True),
        (is_nan("all_nans"), True),
        (is_nan("some_nans"), False),
        (not_nan("no_nans"), True),
        (not_nan("all_nulls_double"), True),
        (not_nan("some_nans"), False),
        (not_eq("all_nans", 1.0), True),
        (gt("some_nans", 0.0), False),  # NaN values do not satisfy >
        (gt("no_nans", 0.0), True),
        (lt("no_nan_stats", 11.0), True),  # no NaN count: treated as no NaN, as Java
        (lt("some_nulls", "zzz"), False),  # nulls never satisfy <
        (gt("s.x", 0), False),  # nested columns are never trusted
        (starts_with("trunc", "ab"), True),
        (starts_with("trunc", "abc"), False),
        (not_starts_with("trunc", "x"), True),
        (not_starts_with("trunc", "ab"), False),
    ],
)
def test_strict_metrics(expr, expected):
    assert strict(expr) is expected


def test_strict_single_value_file():
    single = data_file(lower_bounds={1: to_bytes(42, INT)}, upper_bounds={1: to_bytes(42, INT)})
    assert strict(eq("id", 42), single) is True
    assert strict(in_("id", [42, 43]), single) is True
    assert strict(in_("id", [41, 43]), single) is False
    assert strict(eq("id", 42), data_file(record_count=0)) is True


# ====================================================================================== rows
ROW_SCHEMA = Schema(
    [
        NestedField(1, "id", LONG),
        NestedField(2, "data", STRING),
        NestedField(3, "d", DOUBLE),
        NestedField(4, "s", StructType((NestedField(5, "x", INT),))),
    ]
)


@pytest.mark.parametrize(
    "expr, row, expected",
    [
        (eq("id", 5), (5, "a", 1.0, (1,)), True),
        (eq("id", 5), (None, "a", 1.0, (1,)), False),
        (not_eq("id", 5), (None, "a", 1.0, (1,)), True),
        (lt("id", 5), (None, "a", 1.0, (1,)), False),
        (in_("id", [1, 2]), (2, None, None, None), True),
        (not_in("id", [1, 2]), (None, None, None, None), True),
        (is_null("data"), (1, None, None, None), True),
        (not_null("data"), (1, "x", None, None), True),
        (starts_with("data", "ab"), (1, "abc", None, None), True),
        (starts_with("data", "ab"), (1, None, None, None), False),
        (not_starts_with("data", "ab"), (1, None, None, None), True),
        (is_nan("d"), (1, None, float("nan"), None), True),
        (not_nan("d"), (1, None, 2.0, None), True),
        (gt("d", 1e300), (1, None, float("nan"), None), True),  # NaN sorts above all numbers
        (eq("s.x", 7), (1, None, None, (7,)), True),
        (eq("s.x", 7), (1, None, None, None), False),
        (is_null("s.x"), (1, None, None, None), True),
        (and_(gt("id", 1), lt("id", 3)), (2, None, None, None), True),
        (or_(gt("id", 1), lt("id", 3)), (None, None, None, None), False),
        (not_(gt("id", 1)), (0, None, None, None), True),
    ],
)
def test_row_evaluator(expr, row, expected):
    assert Evaluator(ROW_SCHEMA, expr).eval(row) is expected


# ====================================================================================== manifests
PART_STRUCT = StructType(
    (NestedField(1000, "id", INT), NestedField(1001, "name", STRING), NestedField(1002, "f", FLOAT))
)


def summaries(id_summary=None, name_summary=None, f_summary=None):
    return [
        id_summary or FieldSummary(False, None, to_bytes(1, INT), to_bytes(10, INT)),
        name_summary or FieldSummary(False, None, to_bytes("abc", STRING), to_bytes("abe", STRING)),
        f_summary or FieldSummary(False, False, _f32(1.0), _f32(2.0)),
    ]


@pytest.mark.parametrize(
    "expr, expected",
    [
        (eq("id", 0), False),
        (eq("id", 5), True),
        (eq("id", 11), False),
        (lt("id", 1), False),
        (lt_eq("id", 1), True),
        (gt("id", 10), False),
        (gt_eq("id", 10), True),
        (not_eq("id", 5), True),
        (in_("id", [11, 12]), False),
        (in_("id", [-1, 0]), False),
        (in_("id", [0, 5]), True),
        (not_in("id", [1, 2]), True),
        (is_null("id"), False),
        (not_null("id"), True),
        (not_(eq("id", 5)), True),
        (not_(lt("id", 100)), False),
        (starts_with("name", "abd"), True),
        (starts_with("name", "ab"), True),
        (starts_with("name", "abf"), False),
        (starts_with("name", "aa"), False),
        (not_starts_with("name", "ab"), False),
        (not_starts_with("name", "abd"), True),
        (is_nan("f"), False),
        (not_nan("f"), True),
        (gt("f", 2.0), False),
    ],
)
def test_manifest_evaluator(expr, expected):
    assert ManifestEvaluator(PART_STRUCT, expr).eval(summaries()) is expected


def test_manifest_evaluator_null_and_nan_summaries():
    all_null = summaries(id_summary=FieldSummary(True, None, None, None))
    ev = lambda e, s: ManifestEvaluator(PART_STRUCT, e).eval(s)  # noqa: E731
    assert ev(not_null("id"), all_null) is False
    assert ev(is_null("id"), all_null) is True
    assert ev(eq("id", 1), all_null) is False
    assert ev(in_("id", [1, 2]), all_null) is False
    only_nan = summaries(f_summary=FieldSummary(False, True, None, None))
    assert ev(not_nan("f"), only_nan) is False
    assert ev(is_nan("f"), only_nan) is True
    assert ev(lt("f", 1.0), only_nan) is False
    nulls_and_nan = summaries(f_summary=FieldSummary(True, True, None, None))
    assert ev(not_null("f"), nulls_and_nan) is True  # NaN values are non-null
    nulls_no_nan = summaries(f_summary=FieldSummary(True, False, None, None))
    assert ev(not_null("f"), nulls_no_nan) is False
    with_null_name = summaries(name_summary=FieldSummary(True, None, to_bytes("abc", STRING), to_bytes("abe", STRING)))
    assert ev(not_starts_with("name", "ab"), with_null_name) is True


def test_manifest_in_lists_longer_than_the_limit_might_match():
    """The manifest evaluator's IN test has the same 200-value limit; ``id`` lies in [1, 10]."""
    ev = lambda e: ManifestEvaluator(PART_STRUCT, e).eval(summaries())  # noqa: E731
    assert ev(in_("id", list(range(11, 211)))) is False
    assert ev(in_("id", list(range(11, 212)))) is True
    all_null = summaries(id_summary=FieldSummary(True, None, None, None))
    assert ManifestEvaluator(PART_STRUCT, in_("id", list(range(11, 300)))).eval(all_null) is False


def test_manifest_without_partition_summaries_might_match():
    class Manifest:
        partitions = None

    assert ManifestEvaluator(PART_STRUCT, eq("id", 99)).eval(Manifest()) is True


def test_manifest_evaluator_for_row_filter_prunes_by_day():
    schema = Schema([NestedField(1, "id", LONG), NestedField(2, "ts", TIMESTAMP)])
    spec = PartitionSpec(0, (PartitionField(2, 1000, DAY, "ts_day"),))
    # manifest covering 2017-11-16 .. 2017-11-18 (days 17486 .. 17488)
    stats = [FieldSummary(False, None, to_bytes(17486, DATE), to_bytes(17488, DATE))]
    nov_19 = 17489 * 86_400_000_000
    nov_16_noon = 17486 * 86_400_000_000 + 12 * 3_600_000_000
    assert ManifestEvaluator.for_row_filter(gt_eq("ts", nov_19), spec, schema).eval(stats) is False
    assert ManifestEvaluator.for_row_filter(lt("ts", nov_16_noon), spec, schema).eval(stats) is True
    assert ManifestEvaluator.for_row_filter(lt("ts", 17486 * 86_400_000_000), spec, schema).eval(stats) is False
    assert ManifestEvaluator.for_row_filter(eq("id", 5), spec, schema).eval(stats) is True


# ====================================================================================== projection
PROJ_SCHEMA = Schema(
    [
        NestedField(1, "id", LONG),
        NestedField(2, "data", STRING),
        NestedField(3, "ts", TIMESTAMP),
        NestedField(4, "amount", DecimalType(9, 2)),
        NestedField(5, "dt", DATE),
    ]
)
DAY_MICROS = 86_400_000_000
# 2017-11-16T22:31:08 (spec-onfile §7.2: day 17486, hour 419686, month 574, year 47)
TS = 1510871468000000


def spec_of(*fields) -> PartitionSpec:
    return PartitionSpec(0, tuple(PartitionField(src, 1000 + i, t, name) for i, (src, t, name) in enumerate(fields)))


def project(expr, *fields, strict_: bool = False):
    spec = spec_of(*fields)
    return (strict_projection if strict_ else inclusive_projection)(spec, PROJ_SCHEMA, expr)


def test_day_projection_of_timestamps():
    f = (3, DAY, "ts_day")
    projected = project(lt("ts", TS), f)
    assert projected.op is Operation.LT_EQ and projected.term.name == "ts_day"
    assert projected.literal.value == DAY.apply(TS, TIMESTAMP) == 17486 and projected.literal.type == DATE
    assert str(project(lt("ts", TS), f)) == "ts_day <= 17486"
    assert str(project(lt("ts", 17486 * DAY_MICROS), f)) == "ts_day <= 17485"  # midnight: previous day
    assert str(project(lt_eq("ts", TS), f)) == "ts_day <= 17486"
    assert str(project(gt("ts", TS), f)) == "ts_day >= 17486"
    assert str(project(gt("ts", 17487 * DAY_MICROS - 1), f)) == "ts_day >= 17487"
    assert str(project(eq("ts", TS), f)) == "ts_day = 17486"
    assert project(not_eq("ts", TS), f) is ALWAYS_TRUE
    assert str(project(lt("ts", TS), f, strict_=True)) == "ts_day < 17486"
    assert str(project(lt_eq("ts", 17487 * DAY_MICROS - 1), f, strict_=True)) == "ts_day < 17487"
    assert str(project(gt("ts", TS), f, strict_=True)) == "ts_day > 17486"
    assert str(project(not_eq("ts", TS), f, strict_=True)) == "ts_day != 17486"
    assert project(eq("ts", TS), f, strict_=True) is ALWAYS_FALSE
    assert str(project(is_null("ts"), f)) == "is_null(ts_day)"


def test_other_time_projections():
    assert str(project(gt_eq("ts", TS), (3, YEAR, "y"))) == "y >= 47"
    assert str(project(gt_eq("ts", TS), (3, MONTH, "m"))) == "m >= 574"
    assert str(project(gt_eq("ts", TS), (3, HOUR, "h"))) == "h >= 419686"
    assert str(project(in_("dt", [17486, 17487]), (5, MONTH, "m"))) == "m = 574"
    assert str(project(lt("dt", 17486), (5, DAY, "d"))) == "d <= 17485"


def test_pre_epoch_time_fixups():
    f = (3, DAY, "ts_day")
    # -1 micros is day -1; old writers produced 0, so both partitions may hold it
    assert str(project(eq("ts", -1), f)) == "ts_day IN (-1, 0)"
    assert str(project(lt("ts", -1), f)) == "ts_day <= 0"
    assert str(project(lt_eq("ts", -DAY_MICROS - 1), f)) == "ts_day <= -1"
    assert str(project(in_("ts", [-1, TS]), f)) == "ts_day IN (-1, 0, 17486)"
    assert str(project(gt("ts", -2), f, strict_=True)) == "ts_day > 0"
    assert str(project(gt_eq("ts", 0), f, strict_=True)) == "ts_day > 0"
    assert str(project(not_eq("ts", -1), f, strict_=True)) == "ts_day NOT IN (-1, 0)"
    assert str(project(not_in("ts", [-1, TS]), f, strict_=True)) == "ts_day NOT IN (-1, 0, 17486)"


def test_bucket_projection():
    b = BucketTransform(16)
    f = (1, b, "id_bucket")
    assert b.apply(34, LONG) == 3  # spec test vector: hash(34L) = 2017239379
    assert str(project(eq("id", 34), f)) == "id_bucket = 3"
    assert project(eq("id", 34), f).literal.value == b.apply(34, LONG)
    expected = sorted({b.apply(v, LONG) for v in (1, 2, 34)})
    assert [lit.value for lit in project(in_("id", [1, 2, 34]), f).literals] == expected
    assert project(lt("id", 34), f) is ALWAYS_TRUE
    assert project(not_eq("id", 34), f) is ALWAYS_TRUE
    assert str(project(not_eq("id", 34), f, strict_=True)) == "id_bucket != 3"
    assert project(eq("id", 34), f, strict_=True) is ALWAYS_FALSE
    assert str(project(not_null("id"), f)) == "not_null(id_bucket)"


def test_truncate_integer_projection():
    f = (1, TruncateTransform(10), "id_trunc")
    assert str(project(lt("id", 25), f)) == "id_trunc <= 20"
    assert str(project(lt("id", 20), f)) == "id_trunc <= 10"
    assert str(project(lt_eq("id", 25), f)) == "id_trunc <= 20"
    assert str(project(gt("id", 25), f)) == "id_trunc >= 20"
    assert str(project(gt("id", 29), f)) == "id_trunc >= 30"
    assert str(project(eq("id", -1), f)) == "id_trunc = -10"
    assert str(project(in_("id", [1, 5, 11]), f)) == "id_trunc IN (0, 10)"
    assert str(project(lt("id", 25), f, strict_=True)) == "id_trunc < 20"
    assert str(project(lt_eq("id", 29), f, strict_=True)) == "id_trunc < 30"
    assert str(project(gt_eq("id", 20), f, strict_=True)) == "id_trunc > 10"
    assert str(project(not_in("id", [25, 37]), f, strict_=True)) == "id_trunc NOT IN (20, 30)"
    assert project(eq("id", 25), f, strict_=True) is ALWAYS_FALSE


def test_truncate_decimal_projection():
    f = (4, TruncateTransform(50), "amount_trunc")
    p = project(lt("amount", Decimal("10.65")), f)
    assert p.op is Operation.LT_EQ and p.literal.value == Decimal("10.50")
    p = project(gt("amount", Decimal("10.99")), f)
    assert p.op is Operation.GT_EQ and p.literal.value == Decimal("11.00")
    p = project(gt_eq("amount", Decimal("11.00")), f, strict_=True)
    assert p.op is Operation.GT and p.literal.value == Decimal("10.50")


def test_truncate_string_projection():
    f = (2, TruncateTransform(3), "data_trunc")
    assert str(project(starts_with("data", "ab"), f)) == "starts_with(data_trunc, 'ab')"
    assert str(project(starts_with("data", "abc"), f)) == "data_trunc = 'abc'"
    assert str(project(starts_with("data", "abcdef"), f)) == "starts_with(data_trunc, 'abc')"
    assert str(project(not_starts_with("data", "ab"), f)) == "not_starts_with(data_trunc, 'ab')"
    assert str(project(not_starts_with("data", "abc"), f)) == "data_trunc != 'abc'"
    assert project(not_starts_with("data", "abcdef"), f) is ALWAYS_TRUE
    assert str(project(lt("data", "abcdef"), f)) == "data_trunc <= 'abc'"
    assert str(project(gt("data", "abcdef"), f)) == "data_trunc >= 'abc'"
    assert str(project(eq("data", "abcdef"), f)) == "data_trunc = 'abc'"
    assert str(project(starts_with("data", "ab"), f, strict_=True)) == "starts_with(data_trunc, 'ab')"
    assert str(project(starts_with("data", "abc"), f, strict_=True)) == "data_trunc = 'abc'"
    assert project(starts_with("data", "abcd"), f, strict_=True) is ALWAYS_FALSE
    assert str(project(not_starts_with("data", "abcdef"), f, strict_=True)) == "not_starts_with(data_trunc, 'abc')"
    assert str(project(lt_eq("data", "abcdef"), f, strict_=True)) == "data_trunc < 'abc'"
    assert str(project(not_eq("data", "abcdef"), f, strict_=True)) == "data_trunc != 'abc'"
    # strict > and >=: a partition value above the literal's prefix puts every value above the literal
    assert str(project(gt("data", "abcdef"), f, strict_=True)) == "data_trunc > 'abc'"
    assert str(project(gt_eq("data", "abcdef"), f, strict_=True)) == "data_trunc > 'abc'"
    # sets: IN keeps the truncated values (inclusive), NOT IN too (strict); the other way proves nothing
    assert str(project(in_("data", ["abcdef", "abxyz", "ab"]), f)) == "data_trunc IN ('ab', 'abc', 'abx')"
    assert project(not_in("data", ["abcdef", "abxyz"]), f) is ALWAYS_TRUE
    assert str(project(not_in("data", ["abcdef", "abxyz", "ab"]), f, strict_=True)) == \
        "data_trunc NOT IN ('ab', 'abc', 'abx')"
    assert project(in_("data", ["abcdef", "abxyz"]), f, strict_=True) is ALWAYS_FALSE


def test_identity_void_unknown_and_combinations():
    ident = (1, IDENTITY, "id")
    assert str(project(in_("id", [3, 1]), ident)) == "id IN (1, 3)"
    assert str(project(lt("id", 5), ident, strict_=True)) == "id < 5"
    assert str(project(starts_with("data", "x"), (2, IDENTITY, "data"))) == "starts_with(data, 'x')"
    assert project(eq("id", 5), (1, VOID, "v")) is ALWAYS_TRUE
    assert project(eq("id", 5), (1, VOID, "v"), strict_=True) is ALWAYS_FALSE
    assert project(eq("id", 5), (1, UnknownTransform("zorder"), "z")) is ALWAYS_TRUE
    assert project(eq("id", 5), (1, UnknownTransform("zorder"), "z"), strict_=True) is ALWAYS_FALSE
    # several fields on one source: AND (inclusive) / OR (strict)
    two = [(1, BucketTransform(16), "b"), (1, TruncateTransform(10), "t")]
    assert str(project(eq("id", 34), *two)) == "(b = 3 AND t = 30)"
    assert str(project(not_eq("id", 34), *two, strict_=True)) == "(b != 3 OR t != 30)"
    # NOT is pushed down before projecting
    assert str(project(not_(gt_eq("id", 25)), two[1])) == "t <= 20"
    # unpartitioned columns project to true / false
    assert project(and_(eq("data", "x"), lt("id", 25)), two[1]) == project(lt("id", 25), two[1])
    assert project(or_(eq("data", "x"), lt("id", 25)), two[1]) is ALWAYS_TRUE


_FILTERS = [Operation.LT, Operation.LT_EQ, Operation.GT, Operation.GT_EQ, Operation.EQ, Operation.NOT_EQ]

# (source id, transform, sample rows, literal, and per filter of _FILTERS the literal (inclusive, strict)
# projections).  The expectations are Iceberg Java 1.10.2's ``Projections.inclusive`` / ``strict`` on
# the same spec and filter (run through its jar): the tightest projections except where Java widens
# time projections before 1970 (old writers computed those partition values one too large); day(date)
# is never widened.
_PROJECTION_CASES = {
    "day(ts) 1969-12-30T23:59:59.999999": (3, DAY, range(-3 * DAY_MICROS, 3 * DAY_MICROS, DAY_MICROS // 4 - 7),
                                           -DAY_MICROS - 1, [
        ("p <= -1", "p < -2"), ("p <= -1", "p < -1"), ("p >= -1", "p > -1"), ("p >= -2", "p > -1"),
        ("p IN (-2, -1)", "false"), ("true", "p NOT IN (-2, -1)")]),
    "day(ts) 1970-01-01": (3, DAY, range(-3 * DAY_MICROS, 3 * DAY_MICROS, DAY_MICROS // 4 - 7), 0, [
        ("p <= 0", "p < 0"), ("p <= 0", "p < 0"), ("p >= 0", "p > 1"), ("p >= 0", "p > 0"),
        ("p = 0", "false"), ("true", "p != 0")]),
    "hour(ts) 1969-12-31T23:00": (3, HOUR, range(-5 * 3_600_000_000, 5 * 3_600_000_000, 900_000_001), -3_600_000_000, [
        ("p <= -1", "p < -1"), ("p <= 0", "p < -1"), ("p >= -1", "p > 0"), ("p >= -1", "p > -1"),
        ("p IN (-1, 0)", "false"), ("true", "p NOT IN (-1, 0)")]),
    "month(ts) 1970-02-01": (3, MONTH, range(-70 * DAY_MICROS, 70 * DAY_MICROS, 5 * DAY_MICROS + 3), 31 * DAY_MICROS, [
        ("p <= 0", "p < 1"), ("p <= 1", "p < 1"), ("p >= 1", "p > 1"), ("p >= 1", "p > 1"),
        ("p = 1", "false"), ("true", "p != 1")]),
    "year(ts) 1969-01-01": (3, YEAR, range(-800 * DAY_MICROS, 800 * DAY_MICROS, 29 * DAY_MICROS), -365 * DAY_MICROS, [
        ("p <= -1", "p < -1"), ("p <= 0", "p < -1"), ("p >= -1", "p > 0"), ("p >= -1", "p > -1"),
        ("p IN (-1, 0)", "false"), ("true", "p NOT IN (-1, 0)")]),
    "day(date) 1969-12-31": (5, DAY, range(-10, 10), -1, [
        ("p <= -2", "p < -1"), ("p <= -1", "p < 0"), ("p >= 0", "p > -1"), ("p >= -1", "p > -2"),
        ("p = -1", "false"), ("true", "p != -1")]),
    "truncate[10](long) -11": (1, TruncateTransform(10), range(-40, 40, 3), -11, [
        ("p <= -20", "p < -20"), ("p <= -20", "p < -10"), ("p >= -10", "p > -20"), ("p >= -20", "p > -20"),
        ("p = -20", "false"), ("true", "p != -20")]),
    "bucket[4](long) 7": (1, BucketTransform(4), range(-20, 20), 7, [
        ("true", "false"), ("true", "false"), ("true", "false"), ("true", "false"),
        ("p = 3", "false"), ("true", "p != 3")]),  # bucket(7) = 3
}


@pytest.mark.parametrize("case", list(_PROJECTION_CASES))
def test_projections_are_tight(case):
    """Soundness alone passes for an always-true inclusive and an always-false strict projection:
    each projection must be the literal one Java computes."""
    source_id, transform, _, literal, expected = _PROJECTION_CASES[case]
    spec = spec_of((source_id, transform, "p"))
    name = PROJ_SCHEMA.find_column_name(source_id)
    got = [(str(inclusive_projection(spec, PROJ_SCHEMA, predicate(op, name, literal))),
            str(strict_projection(spec, PROJ_SCHEMA, predicate(op, name, literal)))) for op in _FILTERS]
    assert dict(zip([op.name for op in _FILTERS], got)) == dict(zip([op.name for op in _FILTERS], expected))


@pytest.mark.parametrize("case", list(_PROJECTION_CASES))
def test_projections_are_sound_on_rows(case):
    """For every row: filter true => inclusive projection true on its partition, and strict
    projection true on its partition => filter true."""
    source_id, transform, values, literal, _ = _PROJECTION_CASES[case]
    name = PROJ_SCHEMA.find_column_name(source_id)
    source_type = PROJ_SCHEMA.find_type(source_id)
    spec = spec_of((source_id, transform, "p"))
    part_struct = spec.partition_type(PROJ_SCHEMA)
    row_eval_schema = Schema([NestedField(source_id, name, source_type)])
    for op in _FILTERS:
        expr = predicate(op, name, literal)
        row_eval = Evaluator(row_eval_schema, expr)
        incl = Evaluator(part_struct, inclusive_projection(spec, PROJ_SCHEMA, expr))
        strc = Evaluator(part_struct, strict_projection(spec, PROJ_SCHEMA, expr))
        for v in values:
            partition = (transform.apply(v, source_type),)
            matches = row_eval.eval((v,))
            if matches:
                assert incl.eval(partition), (op, v)
            if strc.eval(partition):
                assert matches, (op, v)


def test_visiting_a_manifest_evaluator_answers_as_its_compiled_tests():
    """Comparisons are compiled to direct tests; the evaluator's visitor methods (what a direct
    ``visit`` of it calls) must give the same answers, including with missing bounds and nulls."""
    sums = [summaries(), summaries(id_summary=FieldSummary(True, None, None, None)),
            summaries(id_summary=FieldSummary(True, None, to_bytes(4, INT), None)),
            summaries(id_summary=FieldSummary(False, None, None, to_bytes(4, INT))),
            summaries(f_summary=FieldSummary(False, True, None, None))]
    checked = 0
    for make in (lt, lt_eq, gt, gt_eq, eq):
        for field, values in (("id", (0, 1, 4, 5, 10, 11)), ("f", (0.5, 1.0, 2.0, 3.0))):
            for value in values:
                ev = ManifestEvaluator(PART_STRUCT, make(field, value))
                for s in sums:
                    ev._stats = s
                    assert visit(ev.expr, ev) is ev.eval(s), (make.__name__, field, value, s)
                    checked += 1
    assert checked == 5 * 10 * len(sums)
    assert visit(ALWAYS_TRUE, ev) is True and visit(ALWAYS_FALSE, ev) is False


def test_manifest_evaluator_for_partition_filter_names_partition_fields():
    ev = ManifestEvaluator.for_partition_filter(PART_STRUCT, and_(gt_eq("ID", 5), starts_with("name", "ab")),
                                                case_sensitive=False)
    assert ev.eval(summaries()) is True
    assert ManifestEvaluator.for_partition_filter(PART_STRUCT, gt("id", 10)).eval(summaries()) is False
    with pytest.raises(ValidationError, match="ID"):
        ManifestEvaluator.for_partition_filter(PART_STRUCT, gt("ID", 10))


# ------------------------------------------------------------------ edges found by mutation testing (issue 38)
def test_nan_sorts_above_every_number_whatever_the_other_type():
    nan = float("nan")
    assert compare_values(nan, 1) == compare_values(nan, 1e308) == 1
    assert compare_values(1, nan) == compare_values(-1.0, nan) == -1
    assert compare_values(nan, nan) == 0 and compare_values(2, 1.5) == 1 and compare_values(1.5, 1.5) == 0


@pytest.mark.parametrize("make", [
    lambda e, cs: Evaluator(ROW_SCHEMA, e, **cs).eval((5, "a", 1.0, (1,))),
    lambda e, cs: InclusiveMetricsEvaluator(METRICS_SCHEMA, e, **cs).eval(FILE),
    lambda e, cs: StrictMetricsEvaluator(METRICS_SCHEMA, e, **cs).eval(FILE),
    lambda e, cs: ManifestEvaluator(PART_STRUCT, e, **cs).eval(summaries()),
])
def test_names_are_case_sensitive_unless_asked(make):
    assert make(gt_eq("ID", 5), {"case_sensitive": False}) is make(gt_eq("id", 5), {})
    for cs in ({}, {"case_sensitive": True}):
        with pytest.raises(ValidationError, match="ID"):
            make(gt_eq("ID", 5), cs)


def test_manifest_evaluator_for_row_filter_is_case_sensitive_unless_asked():
    schema = Schema([NestedField(1, "id", LONG), NestedField(2, "ts", TIMESTAMP)])
    spec = PartitionSpec(0, (PartitionField(2, 1000, DAY, "ts_day"),))
    stats = [FieldSummary(False, None, to_bytes(17486, DATE), to_bytes(17488, DATE))]
    late = 17490 * 86_400_000_000
    assert ManifestEvaluator.for_row_filter(gt_eq("TS", late), spec, schema, case_sensitive=False).eval(stats) is False
    with pytest.raises(ValidationError, match="TS"):
        ManifestEvaluator.for_row_filter(gt_eq("TS", late), spec, schema)


@pytest.mark.parametrize("expr, row, expected", [
    (lt_eq("id", 5), (6, None, None, None), False),
    (lt_eq("id", 5), (None, None, None, None), False),
    (gt_eq("id", 5), (None, None, None, None), False),
    (gt_eq("id", 5), (4, None, None, None), False),
    (starts_with("data", "No"), (1, None, None, None), False),  # a null is not the text "None"
    (not_starts_with("data", "ab"), (1, "abc", None, None), False),
    (not_nan("d"), (1, None, float("nan"), None), False),
    (not_nan("d"), (1, None, 1.0, None), True),
])
def test_row_evaluator_edges(expr, row, expected):
    ev = Evaluator(ROW_SCHEMA, expr)
    assert ev.eval(row) is expected
    assert ev.eval((5, "a", 1.0, (1,))) is Evaluator(ROW_SCHEMA, expr).eval((5, "a", 1.0, (1,)))  # no state kept


def test_a_manifest_evaluator_of_false_matches_nothing():
    assert ManifestEvaluator(PART_STRUCT, ALWAYS_FALSE).eval(summaries()) is False
    assert ManifestEvaluator(PART_STRUCT, ALWAYS_TRUE).eval(summaries()) is True


NULLS_AB = data_file(lower_bounds={5: to_bytes("abc", STRING)}, upper_bounds={5: to_bytes("abd", STRING)})
ONE_BOUND = data_file(lower_bounds={1: to_bytes(42, INT)}, upper_bounds={})
NO_BOUNDS = data_file(lower_bounds={}, upper_bounds={})
NAN_COUNT_UNKNOWN = data_file(nan_value_counts={7: 50, 8: 10, 9: 0, 11: 40})
ONE_NAN = data_file(nan_value_counts={7: 50, 8: 1, 9: 0, 10: 0, 11: 40},
                    lower_bounds={8: _f32(1.0)}, upper_bounds={8: _f32(2.0)})


@pytest.mark.parametrize("expr, file, expected", [
    # columns in structs prove nothing
    (not_eq("s.x", 100), FILE, False), (in_("s.x", [5, 15]), FILE, False), (not_in("s.x", [100, 101]), FILE, False),
    # a missing bound proves nothing for IN
    (in_("id", [42, 43]), ONE_BOUND, False),  # (one value would be rewritten to =)
    # nulls never start with a prefix, even when both bounds do
    (starts_with("some_nulls", "ab"), NULLS_AB, False),
    # only nulls: NOT IN, NOT starts_with hold for all
    (not_in("all_nulls", ["a", "b"]), FILE, True), (not_in("all_nans", [1.0, 2.0]), FILE, True),
    (not_starts_with("all_nulls", "a"), FILE, True),
    # no bounds: NOT starts_with is unknown; bounds outside the prefix: it holds for all
    (not_starts_with("no_nulls", "x"), NO_BOUNDS, False),
    (not_starts_with("no_nulls", "aa"), FILE, True), (not_starts_with("no_nulls", "abf"), FILE, True),
    (not_starts_with("no_nulls", "abd"), FILE, False),
    # one bound: the range is open on the other side
    (not_starts_with("no_nulls", "aa"), data_file(lower_bounds={6: to_bytes("abc", STRING)}, upper_bounds={}), True),
    (not_starts_with("no_nulls", "x"), data_file(lower_bounds={6: to_bytes("abc", STRING)}, upper_bounds={}), False),
    (not_starts_with("no_nulls", "x"), data_file(lower_bounds={}, upper_bounds={6: to_bytes("abc", STRING)}), True),
    (not_starts_with("no_nulls", "aa"), data_file(lower_bounds={}, upper_bounds={6: to_bytes("abc", STRING)}), False),
    # NaN: a count of one is enough to fail a comparison; all nulls hold NaN nowhere whatever the count
    (lt("some_nans", 100.0), ONE_NAN, False),
    (not_nan("all_nulls_double"), NAN_COUNT_UNKNOWN, True),
    # a file of one row is tested like any other
    (eq("id", 5), data_file(record_count=1), False),
])
def test_strict_metrics_edges(expr, file, expected):
    assert strict(expr, file) is expected


def test_metrics_evaluators_of_constants_and_of_a_bare_struct():
    for ev in (strict, inclusive, inclusive_visited):
        assert ev(ALWAYS_TRUE) is True and ev(ALWAYS_FALSE) is False
    struct_only = StructType(tuple(METRICS_SCHEMA.fields))  # a partition type, say: no Schema around it
    for expr in (lt("id", 80), gt("id", 79), starts_with("trunc", "ab")):
        assert InclusiveMetricsEvaluator(struct_only, expr).eval(FILE) is inclusive(expr)
        assert StrictMetricsEvaluator(struct_only, expr).eval(FILE) is strict(expr)


@pytest.mark.parametrize("projection", [inclusive_projection, strict_projection])
def test_projections_are_case_sensitive_unless_asked(projection):
    spec = spec_of((3, DAY, "ts_day"))
    expected = projection(spec, PROJ_SCHEMA, gt_eq("ts", TS))
    assert str(projection(spec, PROJ_SCHEMA, gt_eq("TS", TS), case_sensitive=False)) == str(expected)
    for cs in ({}, {"case_sensitive": True}):
        with pytest.raises(ValidationError, match="TS"):
            projection(spec, PROJ_SCHEMA, gt_eq("TS", TS), **cs)


_TRUNC_ID = (1, TruncateTransform(10), "id_trunc")
_DAY_TS = (3, DAY, "ts_day")


@pytest.mark.parametrize("expr, fields, strict_, expected", [
    (ALWAYS_TRUE, (_TRUNC_ID,), False, "true"),
    (ALWAYS_FALSE, (_TRUNC_ID,), True, "false"),
    # compound filters: each side projected the same way (an unpartitioned side proves nothing)
    (and_(lt("ts", TS), gt("id", 5)), (_DAY_TS,), True, "false"),
    (or_(lt("ts", TS), gt("ts", TS + 1)), (_DAY_TS,), True, "(ts_day < 17486 OR ts_day > 17486)"),
    (and_(lt("ts", TS), gt_eq("ts", 0)), (_DAY_TS,), False, "(ts_day <= 17486 AND ts_day >= 0)"),
    (or_(lt("ts", TS), eq("id", 7)), (_DAY_TS,), False, "true"),
    (and_(lt("ts", TS), gt_eq("ts", 0)), (_DAY_TS,), True, "(ts_day < 17486 AND ts_day > 0)"),
    # the pre-epoch fix of time sets touches negative days only (day 0 is exact)
    (in_("ts", [0, 5 * DAY_MICROS]), (_DAY_TS,), False, "ts_day IN (0, 5)"),
    (not_in("ts", [0, 5 * DAY_MICROS]), (_DAY_TS,), True, "ts_day NOT IN (0, 5)"),
    # the partition field of the predicate's column need not be the spec's first
    (lt("ts", TS), ((1, IDENTITY, "id_part"), _DAY_TS), False, "ts_day <= 17486"),
    (lt("ts", TS), ((1, IDENTITY, "id_part"), _DAY_TS), True, "ts_day < 17486"),
    (is_null("id"), ((1, IDENTITY, "id_part"),), False, "is_null(id_part)"),
    (not_null("id"), ((1, IDENTITY, "id_part"),), True, "not_null(id_part)"),
    (in_("id", [1, 2, 3]), ((1, BucketTransform(4), "id_bucket"),), False, "id_bucket IN (0, 3)"),
    # sets through truncate: NOT IN of one truncated value is !=, and only the sound direction projects
    (not_in("id", [11, 12]), (_TRUNC_ID,), True, "id_trunc != 10"),
    (not_in("id", [11, 12]), (_TRUNC_ID,), False, "true"),
    (in_("id", [11, 12]), (_TRUNC_ID,), True, "false"),
    # < v is <= v - 1 before truncating: one unit of the type, not more
    (lt("id", 101), (_TRUNC_ID,), False, "id_trunc <= 100"),
    (lt("amount", Decimal("1.01")), ((4, TruncateTransform(10), "amount_trunc"),), False,
     "amount_trunc <= Decimal('1.00')"),
])
def test_projection_edges(expr, fields, strict_, expected):
    assert str(project(expr, *fields, strict_=strict_)) == expected
