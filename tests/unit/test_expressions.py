"""Unit tests for procedures.spec.expressions: construction, simplification, literals, binding."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pytest

from procedures.errors import ExpressionError
from procedures.spec.expressions import (
    ABOVE_MAX,
    ALWAYS_FALSE,
    ALWAYS_TRUE,
    BELOW_MIN,
    And,
    BoundPredicate,
    Literal,
    Not,
    Operation,
    Or,
    Reference,
    UnboundPredicate,
    and_,
    bind,
    eq,
    gt,
    gt_eq,
    in_,
    is_nan,
    is_null,
    lit,
    lt,
    lt_eq,
    not_,
    not_eq,
    not_in,
    not_nan,
    not_null,
    not_starts_with,
    or_,
    parse_timestamp_micros,
    referenced_field_ids,
    referenced_names,
    rewrite_not,
    starts_with,
    transform_term,
    without_implied_not_null,
)
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import (
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
    UUID,
    DecimalType,
    FixedType,
    ListType,
    NestedField,
    StructType,
)

SCHEMA = Schema(
    [
        NestedField(1, "id", INT, required=True),
        NestedField(2, "data", STRING),
        NestedField(3, "d", DOUBLE),
        NestedField(4, "amount", DecimalType(9, 2)),
        NestedField(5, "ts", TIMESTAMP),
        NestedField(6, "tstz", TIMESTAMPTZ),
        NestedField(7, "dt", DATE),
        NestedField(8, "big", LONG),
        NestedField(9, "loc", StructType((NestedField(10, "lat", FLOAT), NestedField(11, "name", STRING, True)))),
        NestedField(12, "tags", ListType(13, STRING)),
        NestedField(14, "u", UUID),
        NestedField(15, "f4", FixedType(4)),
        NestedField(16, "ns", TIMESTAMP_NS),
        NestedField(17, "t", TIME),
        NestedField(18, "req", StructType((NestedField(19, "x", INT, True),)), required=True),
    ]
)


# ------------------------------------------------------------------------------------ connectives
def test_and_or_not_simplify_constants():
    p = eq("id", 1)
    assert and_(ALWAYS_TRUE, p) == p
    assert and_(p, ALWAYS_FALSE) is ALWAYS_FALSE
    assert or_(ALWAYS_FALSE, p) == p
    assert or_(p, ALWAYS_TRUE) is ALWAYS_TRUE
    assert not_(ALWAYS_TRUE) is ALWAYS_FALSE
    assert not_(not_(p)) == p
    assert and_() is ALWAYS_TRUE and or_() is ALWAYS_FALSE
    assert and_(p, gt("id", 0), lt("id", 9)) == And(And(p, gt("id", 0)), lt("id", 9))
    assert (p & ALWAYS_TRUE) == p and (p | ALWAYS_TRUE) is ALWAYS_TRUE and ~p == Not(p)


def test_predicate_constructors():
    assert eq("id", 5) == UnboundPredicate(Operation.EQ, Reference("id"), (Literal(5, INT),))
    assert in_("id", [1, 2, 2]).literals == (Literal(1, INT), Literal(2, INT))
    assert in_("id", []) is ALWAYS_FALSE
    assert not_in("id", []) is ALWAYS_TRUE
    assert is_null("x") == UnboundPredicate(Operation.IS_NULL, Reference("x"))
    assert starts_with("data", "ab").op is Operation.STARTS_WITH
    assert str(lt("id", 5)) == "id < 5"


def test_literal_rejects_null_and_nan():
    with pytest.raises(ExpressionError, match="null"):
        eq("id", None)
    with pytest.raises(ExpressionError, match="NaN"):
        eq("d", float("nan"))


def test_literal_type_inference():
    assert lit(True).type.type_string == "boolean"
    assert lit(7).type == INT and lit(2**40).type == LONG
    assert lit(1.5).type == DOUBLE
    assert lit(Decimal("12.345")).type == DecimalType(5, 3)
    assert lit(uuid.UUID(int=1)).type == UUID


def test_negate_operations():
    assert lt("a", 1).negate() == gt_eq("a", 1)
    assert gt("a", 1).negate() == lt_eq("a", 1)
    assert is_nan("d").negate() == not_nan("d")
    assert starts_with("s", "x").negate() == not_starts_with("s", "x")
    assert in_("a", [1, 2]).negate() == not_in("a", [1, 2])


# ------------------------------------------------------------------------------------ conversions
@pytest.mark.parametrize(
    "literal, target, expected",
    [
        (Literal(5, INT), LONG, 5),
        (Literal(5, INT), DOUBLE, 5.0),
        (Literal(5, INT), DecimalType(9, 2), Decimal("5.00")),
        (Literal(17486, INT), DATE, 17486),
        (Literal("2017-11-16", STRING), DATE, 17486),
        (Literal("2017-11-16T22:31:08", STRING), TIMESTAMP, 1510871468000000),
        (Literal("2017-11-16 22:31:08.000001", STRING), TIMESTAMP, 1510871468000001),
        (Literal("2017-11-16T22:31:08+01:00", STRING), TIMESTAMPTZ, 1510867868000000),
        (Literal("2017-11-16T22:31:08Z", STRING), TIMESTAMPTZ, 1510871468000000),
        (Literal("2017-11-16T22:31:08.123456789", STRING), TIMESTAMP_NS, 1510871468123456789),
        (Literal("22:31:08", STRING), TIME, 81068000000),
        (Literal("14.20", STRING), DecimalType(9, 2), Decimal("14.20")),
        (Literal("14.2", STRING), DecimalType(9, 2), Decimal("14.20")),
        (Literal("f79c3e09-677c-4bbd-a479-3f349cb785e7", STRING), UUID,
         uuid.UUID("f79c3e09-677c-4bbd-a479-3f349cb785e7")),
        (Literal("42", STRING), INT, 42),
        (Literal(Decimal("1.5"), DecimalType(2, 1)), DOUBLE, 1.5),
        (Literal(Decimal("3"), DecimalType(1, 0)), LONG, 3),
        (Literal(0.1, DOUBLE), FLOAT, 0.10000000149011612),
        (Literal(17486, DATE), TIMESTAMP, 1510790400000000),
        (Literal(1510871468000000, TIMESTAMP), DATE, 17486),
        (Literal(-1, TIMESTAMP), DATE, -1),
        (Literal(1, TIMESTAMP), TIMESTAMP_NS, 1000),
        (Literal(b"abcd", lit(b"x").type), FixedType(4), b"abcd"),
    ],
)
def test_literal_conversions(literal, target, expected):
    converted = literal.to(target)
    assert isinstance(converted, Literal)
    assert converted.type == target
    assert converted.value == expected


@pytest.mark.parametrize(
    "literal, target, expected",
    [
        (Literal(2**31, LONG), INT, ABOVE_MAX),
        (Literal(-(2**31) - 1, LONG), INT, BELOW_MIN),
        (Literal(2**31 - 1, LONG), INT, None),
        (Literal(1e39, DOUBLE), FLOAT, ABOVE_MAX),
        (Literal(-1e39, DOUBLE), FLOAT, BELOW_MIN),
        (Literal(Decimal("10000000.00"), DecimalType(10, 2)), DecimalType(9, 2), ABOVE_MAX),
        (Literal(-(10**9), LONG), DecimalType(9, 2), BELOW_MIN),
    ],
)
def test_out_of_range_conversions(literal, target, expected):
    converted = literal.to(target)
    if expected is None:
        assert isinstance(converted, Literal) and converted.value == literal.value
    else:
        assert converted is expected


@pytest.mark.parametrize(
    "literal, target",
    [
        (Literal("abc", STRING), DATE),
        (Literal("2017-11-16T22:31:08+01:00", STRING), TIMESTAMP),
        (Literal(1.5, DOUBLE), INT),
        (Literal(Decimal("1.234"), DecimalType(4, 3)), DecimalType(9, 2)),
        (Literal(True, lit(True).type), INT),
        (Literal(b"abc", lit(b"x").type), FixedType(4)),
    ],
)
def test_impossible_conversions_raise(literal, target):
    with pytest.raises(ExpressionError, match="Invalid value for conversion"):
        literal.to(target)


def test_parse_timestamp_micros():
    assert parse_timestamp_micros("1970-01-01") == (0, False)
    assert parse_timestamp_micros("1969-12-31T23:59:59.999999") == (-1, False)
    assert parse_timestamp_micros("1970-01-01T00:00:00-08:00") == (8 * 3600 * 1_000_000, True)


# ------------------------------------------------------------------------------------ binding
def test_bind_resolves_field_id_positions_and_converts_literals():
    bound = bind(eq("dt", "2017-11-16"), SCHEMA)
    assert isinstance(bound, BoundPredicate)
    assert bound.term.field_id == 7 and bound.term.positions == (6,)
    assert bound.literal == Literal(17486, DATE)

    nested = bind(gt("loc.lat", 1), SCHEMA)
    assert nested.term.field_id == 10 and nested.term.positions == (8, 0)
    assert nested.literal == Literal(1.0, FLOAT)
    assert nested.term.eval((None,) * 8 + ((2.5, "x"),)) == 2.5
    assert nested.term.eval((None,) * 9) is None


def test_bind_unknown_column_names_it():
    with pytest.raises(ExpressionError, match="Cannot find field 'nope' in struct"):
        bind(and_(eq("id", 1), lt("nope", 3)), SCHEMA)


def test_bind_case_insensitive():
    assert bind(eq("ID", 1), SCHEMA, case_sensitive=False).term.field_id == 1
    with pytest.raises(ExpressionError, match="'ID'"):
        bind(eq("ID", 1), SCHEMA)


def test_bind_rejects_list_elements_and_nested_types():
    with pytest.raises(ExpressionError, match="lists and maps"):
        bind(eq("tags.element", "a"), SCHEMA)
    with pytest.raises(ExpressionError, match="nested type"):
        bind(is_null("loc"), SCHEMA)


def test_bind_null_checks_on_required_fields_fold():
    assert bind(is_null("id"), SCHEMA) is ALWAYS_FALSE
    assert bind(not_null("id"), SCHEMA) is ALWAYS_TRUE
    # required inside a required struct is never null; inside an optional struct it can be
    assert bind(is_null("req.x"), SCHEMA) is ALWAYS_FALSE
    assert isinstance(bind(is_null("loc.name"), SCHEMA), BoundPredicate)


@pytest.mark.parametrize(
    "expr, expected",
    [
        (lt("id", 2**40), ALWAYS_TRUE),
        (lt_eq("id", 2**40), ALWAYS_TRUE),
        (not_eq("id", 2**40), ALWAYS_TRUE),
        (gt("id", 2**40), ALWAYS_FALSE),
        (eq("id", 2**40), ALWAYS_FALSE),
        (gt("id", -(2**40)), ALWAYS_TRUE),
        (gt_eq("id", -(2**40)), ALWAYS_TRUE),
        (lt("id", -(2**40)), ALWAYS_FALSE),
        (eq("id", -(2**40)), ALWAYS_FALSE),
        (in_("id", [2**40, -(2**40)]), ALWAYS_FALSE),
        (not_in("id", [2**40]), ALWAYS_TRUE),
    ],
)
def test_bind_out_of_range_literals(expr, expected):
    assert bind(expr, SCHEMA) is expected


def test_bind_in_drops_out_of_range_and_collapses_to_eq():
    bound = bind(in_("id", [5, 2**40]), SCHEMA)
    assert bound.op is Operation.EQ and bound.literal == Literal(5, INT)
    bound = bind(not_in("id", [5, 6, 2**40]), SCHEMA)
    assert bound.op is Operation.NOT_IN and bound.literal_set == frozenset({5, 6})


def test_bind_type_errors():
    with pytest.raises(ExpressionError, match="non-floating-point column 'id'"):
        bind(is_nan("id"), SCHEMA)
    with pytest.raises(ExpressionError, match="string column"):
        bind(starts_with("id", "1"), SCHEMA)
    with pytest.raises(ExpressionError, match="Cannot bind 'dt = 'soon'' to column 'dt'"):
        bind(eq("dt", "soon"), SCHEMA)


def test_bind_struct_type_and_is_idempotent():
    struct = StructType((NestedField(1000, "id_bucket", INT), NestedField(1001, "ts_day", DATE)))
    bound = bind(eq("ts_day", 17486), struct)
    assert bound.term.positions == (1,) and bound.literal == Literal(17486, DATE)
    assert bind(bound, struct) is bound


# ------------------------------------------------------------------------------------ rewrite
def test_rewrite_not_pushes_negation_into_predicates():
    expr = not_(and_(lt("id", 5), or_(is_null("data"), not_(starts_with("data", "a")))))
    assert rewrite_not(expr) == Or(gt_eq("id", 5), And(not_null("data"), starts_with("data", "a")))
    bound = rewrite_not(bind(not_(in_("id", [1, 2])), SCHEMA))
    assert bound.op is Operation.NOT_IN and bound.literal_set == frozenset({1, 2})


def test_referenced_ids_and_names():
    expr = and_(eq("id", 1), or_(lt("loc.lat", 2.0), not_(is_null("data"))))
    assert referenced_names(expr) == {"id", "loc.lat", "data"}
    assert referenced_field_ids(bind(expr, SCHEMA)) == {1, 10, 2}


def test_a_not_null_that_a_comparison_on_its_column_implies_is_dropped():
    kept = without_implied_not_null([not_null("id"), gt("id", 5), not_null("data"), not_null("ts")])
    assert kept == [gt("id", 5), not_null("data"), not_null("ts")]
    for rejecting in (lt("a", 1), lt_eq("a", 1), gt_eq("a", 1), eq("a", 1), in_("a", [1, 2]), starts_with("a", "x")):
        assert without_implied_not_null([not_null("a"), rejecting]) == [rejecting]


def test_a_not_null_stays_beside_predicates_a_null_may_satisfy_or_on_other_terms():
    for other in (not_eq("a", 1), not_in("a", [1]), not_starts_with("a", "x"), is_null("a"), not_nan("a"),
                  gt("b", 1), gt("A", 1)):
        assert without_implied_not_null([not_null("a"), other]) == [not_null("a"), other]
    bucketed = UnboundPredicate(Operation.EQ, transform_term(parse_transform("bucket[4]"), "a"), (lit(1),))
    assert without_implied_not_null([not_null("a"), bucketed]) == [not_null("a"), bucketed]
    assert without_implied_not_null([not_null("a")]) == [not_null("a")]
    assert without_implied_not_null([]) == []
    # the conjuncts of an OR are not the caller's to pass: a nested expression is kept as it is
    either = or_(gt("a", 1), lt("b", 0))
    assert without_implied_not_null([not_null("a"), either]) == [not_null("a"), either]
