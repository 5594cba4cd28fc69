"""Unit tests for procedures.spec.expression_parser.parse_filter."""

from __future__ import annotations

from decimal import Decimal

import pytest

from procedures.errors import ExpressionError
from procedures.spec.expression_parser import parse_filter
from procedures.spec.expressions import (
    ALWAYS_FALSE,
    ALWAYS_TRUE,
    Literal,
    and_,
    bind,
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
    not_null,
    not_starts_with,
    or_,
    starts_with,
)
from procedures.spec.schema import Schema
from procedures.spec.types import (
    BINARY,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    STRING,
    TIMESTAMP,
    TIMESTAMPTZ,
    DecimalType,
    NestedField,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("id = 5", eq("id", 5)),
        ("id == 5", eq("id", 5)),
        ("id != 5", not_eq("id", 5)),
        ("id <> 5", not_eq("id", 5)),
        ("id < 5", lt("id", 5)),
        ("id <= 5", lt_eq("id", 5)),
        ("id > 5", gt("id", 5)),
        ("id >= 5", gt_eq("id", 5)),
        ("5 < id", gt("id", 5)),
        ("5 >= id", lt_eq("id", 5)),
        ("id <=> 5", eq("id", 5)),
        ("id IN (1, 2, 3)", in_("id", [1, 2, 3])),
        ("id in (1)", in_("id", [1])),
        ("id NOT IN (1, 2)", not_in("id", [1, 2])),
        ("data IS NULL", is_null("data")),
        ("data is not null", not_null("data")),
        ("isnan(d)", is_nan("d")),
        ("NOT isnan(d)", not_(is_nan("d"))),
        ("isnull(d)", is_null("d")),
        ("isnotnull(d)", not_null("d")),
        ("data LIKE 'abc%'", starts_with("data", "abc")),
        ("data like 'abc%%'", starts_with("data", "abc")),
        ("data NOT LIKE 'abc%'", not_starts_with("data", "abc")),
        ("data LIKE 'abc'", eq("data", "abc")),
        ("data LIKE 'a\\%b%'", starts_with("data", "a%b")),
        ("id BETWEEN 1 AND 10", and_(gt_eq("id", 1), lt_eq("id", 10))),
        ("id NOT BETWEEN 1 AND 10", not_(and_(gt_eq("id", 1), lt_eq("id", 10)))),
        ("a = 1 AND b = 2 OR c = 3", or_(and_(eq("a", 1), eq("b", 2)), eq("c", 3))),
        ("a = 1 AND (b = 2 OR c = 3)", and_(eq("a", 1), or_(eq("b", 2), eq("c", 3)))),
        ("NOT a = 1 AND b = 2", and_(not_(eq("a", 1)), eq("b", 2))),
        ("NOT (a = 1 AND b = 2)", not_(and_(eq("a", 1), eq("b", 2)))),
        ("!(a = 1)", not_(eq("a", 1))),
        ("active", eq("active", True)),
        ("flag = true", eq("flag", True)),
        ("flag = FALSE", eq("flag", False)),
        ("s.x.y > 1", gt("s.x.y", 1)),
        ("`weird col` = 1", eq("weird col", 1)),
        ("`a``b`.`c` = 1", eq("a`b.c", 1)),
        ("name = 'it''s'", eq("name", "it's")),
        ("name = 'it\\'s'", eq("name", "it's")),
        ('name = "foo"', eq("name", "foo")),
        ("id = 3 and name = \"foo\"", and_(eq("id", 3), eq("name", "foo"))),
        ("TRUE", ALWAYS_TRUE),
        ("false OR id = 1", eq("id", 1)),
        ("1 = 1", ALWAYS_TRUE),
        ("1 > 2", ALWAYS_FALSE),
        ("id = NULL", ALWAYS_FALSE),
        ("id != NULL", ALWAYS_FALSE),
        ("NULL = id", ALWAYS_FALSE),
        ("id <=> NULL", is_null("id")),
        ("NULL IS NULL", ALWAYS_TRUE),
        ("id IN (1, NULL)", in_("id", [1])),
        ("id NOT IN (1, NULL)", ALWAYS_FALSE),
    ],
)
def test_parse(text, expected):
    assert parse_filter(text) == expected


@pytest.mark.parametrize(
    "text, literal",
    [
        ("x = 5", Literal(5, INT)),
        ("x = -5", Literal(-5, INT)),
        ("x = 3000000000", Literal(3000000000, LONG)),
        ("x = 5L", Literal(5, LONG)),
        ("x = 1.50", Literal(Decimal("1.50"), DecimalType(3, 2))),
        ("x = -0.5", Literal(Decimal("-0.5"), DecimalType(1, 1))),
        ("x = .5", Literal(Decimal(".5"), DecimalType(1, 1))),
        ("x = 1e3", Literal(1000.0, DOUBLE)),
        ("x = -1.5E-2", Literal(-0.015, DOUBLE)),
        ("x = 2.5D", Literal(2.5, DOUBLE)),
        ("x = 2.5F", Literal(2.5, FLOAT)),
        ("x = 7BD", Literal(Decimal("7"), DecimalType(1, 0))),
        ("x = 'str'", Literal("str", STRING)),
        ("x = DATE '2017-11-16'", Literal(17486, DATE)),
        ("x = timestamp '2017-11-16 22:31:08'", Literal(1510871468000000, TIMESTAMP)),
        ("x = TIMESTAMP '2017-11-16T22:31:08.5'", Literal(1510871468500000, TIMESTAMP)),
        ("x = TIMESTAMP '2017-11-16T23:31:08+01:00'", Literal(1510871468000000, TIMESTAMPTZ)),
        ("x = TIMESTAMP_NTZ '1970-01-01'", Literal(0, TIMESTAMP)),
        ("x = X'0aFF'", Literal(b"\x0a\xff", BINARY)),
    ],
)
def test_literals(text, literal):
    expr = parse_filter(text)
    assert expr.literals == (literal,)


def test_keywords_are_case_insensitive():
    assert parse_filter("a is NoT nUlL aNd b In (1) oR NOT c LiKe 'x%'") == or_(
        and_(not_null("a"), in_("b", [1])), not_(starts_with("c", "x"))
    )


def test_parsed_filter_binds_to_schema():
    schema = Schema([NestedField(1, "id", LONG), NestedField(2, "ts", TIMESTAMPTZ), NestedField(3, "price", DOUBLE)])
    bound = bind(parse_filter("id > 5 and ts >= TIMESTAMP '2021-01-01 00:00:00' and price < 1.5"), schema)
    assert bound.left.left.literal == Literal(5, LONG)
    assert bound.left.right.literal == Literal(1609459200000000, TIMESTAMPTZ)
    assert bound.right.literal == Literal(1.5, DOUBLE)


@pytest.mark.parametrize(
    "text, message",
    [
        ("id >", "Cannot parse filter 'id >': expected a value at position 4, found end of input"),
        ("id > > 3", "Cannot parse filter 'id > > 3': expected a value at position 5, found '>'"),
        ("", "Cannot parse filter '': expected a filter expression at position 0, found end of input"),
        ("id = 1 id = 2", "expected AND, OR or end of input at position 7, found 'id'"),
        ("(id = 1", "expected ')' at position 7, found end of input"),
        ("id IN (1, 2", "expected ',' or ')' at position 11, found end of input"),
        ("id IN 1", "expected '(' at position 6, found '1'"),
        ("id IS 5", "expected NULL at position 6, found '5'"),
        ("a = b", "comparisons between two columns cannot be converted to an Iceberg filter at position 2, found '='"),
        ("substr(a, 1) = 'x'", "function 'substr' cannot be converted to an Iceberg filter at position 0, found 'substr'"),
        ("a LIKE '%x'", "only prefix patterns ('abc%') can be converted from LIKE at position 7, found ''%x''"),
        ("a LIKE 'a_c%'", "only prefix patterns"),
        ("a = 'open", "unterminated string at position 4"),
        ("a = 12abc", "malformed number at position 6, found 'a'"),
        ("a = DATE '2017-13-01'", "invalid DATE literal at position 9, found ''2017-13-01''"),
        ("a # 1", "unexpected character at position 2, found '#'"),
        ("a 5", "expected a comparison operator at position 2, found '5'"),
        ("id IN (1, b)", "IN lists must hold literals"),
        ("AND", "expected a column or a value at position 0, found 'AND'"),
        ("bucket(4, id) = 1", "function 'bucket' cannot be converted to an Iceberg filter (Iceberg's function is system.bucket)"),
        ("id > 1 AND system.foo(ts) = 54", "function 'system.foo' cannot be converted to an Iceberg filter"),
        ("system.bucket(0, id) = 1", "invalid system.bucket width 0"),
        ("system.truncate(-2, data) = 'a'", "invalid system.truncate width -2"),
        ("system.bucket(4) = 1", "system.bucket takes 2 argument(s)"),
        ("system.years(ts, 1) = 1", "system.years takes 1 argument(s)"),
        ("system.bucket(id, 4) = 1", "the last argument of system.bucket must be a column"),
        ("system.bucket(4L, id) = 1", "the first argument of system.bucket must be an integer literal"),
        ("system.bucket(4, id)", "expected a comparison operator at position 20, found end of input"),
        ("system.bucket(4, id) = system.bucket(4, id)", "comparisons between two columns"),
        ("id IN (system.bucket(4, id))", "IN lists must hold literals"),
    ],
)
def test_errors_name_position_and_token(text, message):
    with pytest.raises(ExpressionError) as info:
        parse_filter(text)
    assert message in str(info.value)


def test_non_string_input():
    with pytest.raises(ExpressionError, match="must be a string"):
        parse_filter(5)  # type: ignore[arg-type]
