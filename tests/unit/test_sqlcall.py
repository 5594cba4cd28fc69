"""CALL parser, literals, comments, script splitting and syntax-error positions (no Spark)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from procedures.errors import SqlSyntaxError
from procedures.framework.sqltypes import BIGINT, BOOLEAN, DATE, DOUBLE, FLOAT, INT, NULL, SMALLINT, STRING, TIMESTAMP, TINYINT
from procedures.frontend.parser import is_call, parse_call, split_statements, tokenize


def arg(text: str):
    """The single positional literal of ``CALL c.system.p(<text>)``."""
    stmt = parse_call(f"CALL c.system.p({text})")
    assert len(stmt.positional) == 1 and not stmt.named
    return stmt.positional[0]


def test_named_arguments_keep_order_and_case():
    stmt = parse_call("CALL ours.system.rollback_to_snapshot(table => 'db.t', SNAPSHOT_ID => 123L)")
    assert stmt.catalog == "ours" and stmt.name == "rollback_to_snapshot"
    assert [(n, lit.type, lit.value) for n, lit in stmt.named] == [("table", STRING, "db.t"), ("SNAPSHOT_ID", BIGINT, 123)]
    assert stmt.positional == ()


def test_positional_arguments_and_optional_catalog():
    stmt = parse_call("call SYSTEM.Ancestors_Of('db.t', 7)")
    assert stmt.catalog is None and stmt.name == "Ancestors_Of"
    assert [(lit.type, lit.value) for lit in stmt.positional] == [(STRING, "db.t"), (INT, 7)]


def test_back_ticked_names():
    stmt = parse_call("CALL `my cat`.`system`.`fast_forward`(`table` => 'x')")
    assert stmt.catalog == "my cat" and stmt.name == "fast_forward" and stmt.named[0][0] == "table"


@pytest.mark.parametrize(
    "text, sql_type, value",
    [
        ("5", INT, 5),
        ("-5", INT, -5),
        ("2147483648", BIGINT, 2147483648),
        ("5L", BIGINT, 5),
        ("-9223372036854775808L", BIGINT, -(2**63)),
        ("5S", SMALLINT, 5),
        ("5Y", TINYINT, 5),
        ("1.0D", DOUBLE, 1.0),
        ("1E3", DOUBLE, 1000.0),
        ("-2.5e-1", DOUBLE, -0.25),
        ("1.5F", FLOAT, 1.5),
        ("TRUE", BOOLEAN, True),
        ("false", BOOLEAN, False),
        ("NULL", NULL, None),
        ("'it''s'", STRING, "its"),  # adjacent strings concatenate, as in Spark
        ("'a\\'b'", STRING, "a'b"),
        ('"double"', STRING, "double"),
        ("'tab\\tnew\\nline\\\\'", STRING, "tab\tnew\nline\\"),
        ("'\\u0041\\101'", STRING, "AA"),
        ("TIMESTAMP '2021-06-30 00:00:00.000'", TIMESTAMP, "2021-06-30 00:00:00.000"),
        ("date '2021-06-30'", DATE, "2021-06-30"),
    ],
)
def test_literal_kinds(text, sql_type, value):
    lit = arg(text)
    assert lit.type == sql_type and lit.value == value


# what Spark 3.5.8's parser makes of each string literal (SELECT <literal>, checked by hand): an octal
# escape is \ followed by [01][0-7][0-7]; any other backslash escapes the one character after it
SPARK_STRING_LITERALS = [
    ("'\\101'", "A"),
    ("'\\177'", "\x7f"),
    ("'\\000x'", "\x00x"),
    ("'\\200'", "200"),  # [2-3]xx is not an octal escape in Spark: '\2' is '2'
    ("'\\377'", "377"),
    ("'\\400'", "400"),
    ("'\\128'", "128"),  # 8 is not an octal digit
    ("'\\18'", "18"),
    ("'\\1'", "1"),
    ("'\\0'", "\x00"),
]


@pytest.mark.parametrize("text, value", SPARK_STRING_LITERALS)
def test_string_escapes_as_spark_reads_them(text, value):
    lit = arg(text)
    assert lit.type == STRING and lit.value == value


def test_decimal_literals_keep_precision_and_scale():
    lit = arg("2.20")
    assert str(lit.type) == "DECIMAL(3,2)" and lit.value == Decimal("2.20")
    big = arg("1BD")
    assert str(big.type) == "DECIMAL(1,0)" and big.value == Decimal(1)
    assert str(arg("99999999999999999999").type) == "DECIMAL(20,0)"


def test_map_and_array_literals():
    m = arg("map('a', 1, 'b', 2L)")
    assert str(m.type) == "MAP<STRING,BIGINT>"
    assert [(k.value, v.value) for k, v in m.value] == [("a", 1), ("b", 2)]
    a = arg("array(1, -2, 3L)")
    assert str(a.type) == "ARRAY<BIGINT>" and [x.value for x in a.value] == [1, -2, 3]
    assert str(arg("array()").type) == "ARRAY<NULL>"


def test_comments_are_ignored():
    stmt = parse_call("/* head */ CALL c.system.p( -- first\n 'a', /* inline */ 1 -- tail\n)")
    assert [lit.value for lit in stmt.positional] == ["a", 1]
    assert is_call("-- leading comment\nCALL c.system.p()")
    assert not is_call("SELECT 1")


def test_script_splitting_respects_strings_and_comments():
    script = "SELECT ';' AS a; -- x; y\nCALL c.system.p('a;b') ; /* ; */\n; SELECT `we;ird`"
    parts = split_statements(script)
    assert [p.text for p in parts] == ["SELECT ';' AS a", "-- x; y\nCALL c.system.p('a;b')", "SELECT `we;ird`"]
    assert [p.line for p in parts] == [1, 1, 3]
    assert split_statements("  ;; -- nothing\n") == []


@pytest.mark.parametrize(
    "text, line, column, token",
    [
        ("CALL c.system.p(a => )", 1, 22, ")"),
        ("CALL c.system.p(1,\n  2 3)", 2, 5, "3"),
        ("CALL c.system.p('open", 1, 17, "'open"),
        ("CALL c.system.p(1", 1, 18, None),
        ("CALL c.other.p(1)", 1, 6, "c"),
        ("CALL c.system.p(1 + 1)", 1, 19, "+"),
        ("CALL c.system.p(map('a'))", 1, 17, "map"),
        ("CALL c.system.p(1.5L)", 1, 17, "1.5L"),
        ("CALL c.system.p(300Y)", 1, 17, "300Y"),
        ("CALL c.system.p(1) extra", 1, 20, "extra"),
    ],
)
def test_syntax_errors_name_position_and_token(text, line, column, token):
    with pytest.raises(SqlSyntaxError) as e:
        parse_call(text)
    assert (e.value.line, e.value.column, e.value.token) == (line, column, token)
    assert f"line {line}, column {column}" in str(e.value)
    if token is not None:
        assert repr(token) in str(e.value)


def test_unterminated_comment_in_script():
    with pytest.raises(SqlSyntaxError) as e:
        split_statements("SELECT 1;\n/* never closed")
    assert (e.value.line, e.value.column) == (2, 1)


def test_tokenize_keeps_positions():
    toks = tokenize("CALL  x")
    assert [(t.kind, t.text, t.pos) for t in toks] == [("IDENT", "CALL", 0), ("IDENT", "x", 6), ("EOF", "", 7)]
