"""Names and strings spelled for the Spark SQL text the package builds (statements it runs, CALL
text it shows, SHOW output it prints).

One spelling everywhere: a name in back-quotes doubles its back-quotes, a string literal in single
quotes escapes backslashes and single quotes (Spark's default ``spark.sql.parser.escapedStringLiterals``
off).  Text built from a user's table, column or partition names is only safe when every place
quotes alike, so every module quotes through here.
"""

from __future__ import annotations

import re

__all__ = ["quote_name", "quote_if_needed", "sql_string"]

_PLAIN = re.compile(r"[A-Za-z0-9_]+")


def quote_name(part: str) -> str:
    """``part`` as a Spark SQL identifier in back-quotes (``we`ird`` -> ```we``ird```)."""
    return "`" + part.replace("`", "``") + "`"


def quote_if_needed(part: str) -> str:
    """``part`` as Spark prints it (its ``quoteIfNeeded``): plain when it is letters, digits and
    underscores but not digits alone, else in back-quotes."""
    if _PLAIN.fullmatch(part) and not part.isdigit():
        return part
    return quote_name(part)


def sql_string(value: str) -> str:
    """``value`` as a single-quoted Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
