"""Names and strings spelled for the Spark SQL text the package builds (statements it runs, CALL
text it shows, SHOW output it prints).

One spelling everywhere: a name in back-quotes doubles its back-quotes, a string literal in single
quotes escapes backslashes and single quotes (Spark's default ``spark.sql.parser.escapedStringLiterals``
off).  Text built from a user's table, column or partition names is only safe when every place
quotes alike, so every module quotes through here.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

__all__ = ["quote_name", "quote_if_needed", "quote_path", "sql_string", "type_sql"]

_PLAIN = re.compile(r"[A-Za-z0-9_]+")


def quote_name(part: str) -> str:
    """``part`` as a Spark SQL identifier in back-quotes (``we`ird`` -> ```we``ird```)."""
    return "`" + part.replace("`", "``") + "`"


def quote_path(path: Sequence[str]) -> str:
    """A multi-part name (a field nested in a column, names from the top; a table's catalog,
    namespace and name) as ``F.col`` and SQL text read it: each part back-quoted, so dots and
    back-quotes in a part are no path."""
    return ".".join(quote_name(p) for p in path)


def quote_if_needed(part: str) -> str:
    """``part`` as Spark prints it (its ``quoteIfNeeded``): plain when it is letters, digits and
    underscores but not digits alone, else in back-quotes."""
    if _PLAIN.fullmatch(part) and not part.isdigit():
        return part
    return quote_name(part)


def type_sql(data_type: Any) -> str:
    """A Spark ``DataType`` as Spark SQL type text (for casts and DDL schemas) with every struct field
    name back-quoted: ``simpleString`` leaves ``x.y``, ``a b`` or ``a,b`` bare, which no parser
    reads back as the same type."""
    fields = getattr(data_type, "fields", None)
    if fields is not None:
        return "struct<" + ",".join(f"{quote_name(f.name)}:{type_sql(f.dataType)}" for f in fields) + ">"
    element = getattr(data_type, "elementType", None)
    if element is not None:
        return f"array<{type_sql(element)}>"
    key = getattr(data_type, "keyType", None)
    if key is not None:
        return f"map<{type_sql(key)},{type_sql(data_type.valueType)}>"
    return data_type.simpleString()


def sql_string(value: str) -> str:
    """``value`` as a single-quoted Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
