"""procedures/frontend/sqltext.py: statements read with sqlglot, errors located, our tables found."""

import pytest

from procedures.errors import SqlSyntaxError
from procedures.frontend.sqltext import is_opaque, our_table_refs, parse_statement, table_parts


def test_tables_of_our_catalogs_found_in_any_construct():
    s = parse_statement("WITH x AS (SELECT * FROM local.db.t) SELECT * FROM x "
                        "JOIN `local`.`db`.`odd name` y ON x.id = y.id "
                        "WHERE x.id IN (SELECT id FROM other.db.u) AND EXISTS (SELECT 1 FROM local.db.t.snapshots)")
    assert sorted(table_parts(t) for t in our_table_refs(s, ["local"])) == [
        ("local", "db", "odd name"), ("local", "db", "t"), ("local", "db", "t", "snapshots")]
    assert [table_parts(t) for t in our_table_refs(s, ["other"])] == [("other", "db", "u")]


def test_a_syntax_error_names_line_column_and_token():
    with pytest.raises(SqlSyntaxError) as e:
        parse_statement("SELECT *\nFROM WHERE")
    assert (e.value.line, e.value.column, e.value.token) == (2, 6, "WHERE")
    assert "<Token" not in str(e.value)


def test_one_statement_only():
    with pytest.raises(SqlSyntaxError, match="expected one statement, found 2"):
        parse_statement("SELECT 1; SELECT 2")


def test_iceberg_extensions_are_opaque_to_sqlglot():
    assert is_opaque(parse_statement("ALTER TABLE local.db.t ADD PARTITION FIELD bucket(4, id)"))
    assert not is_opaque(parse_statement("ALTER TABLE local.db.t SET TBLPROPERTIES ('a' = 'b')"))
