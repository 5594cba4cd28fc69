"""Spark SQL text read with sqlglot: one statement parsed, and the tables of OUR catalogs it names.

Statements on our tables (DML, Iceberg's DDL, reads with time travel or metadata tables) are read
with `sqlglot <https://github.com/tobymao/sqlglot>`_'s Spark dialect rather than a grammar of our own:
it knows Spark's statements, quoting and expressions, and gives back a tree whose table references
can be found and replaced whatever construct holds them (joins, CTEs, subqueries, MERGE sources).
Our own grammar (:mod:`procedures.frontend.parser`) is kept for ``CALL`` with named arguments, which
sqlglot does not parse, and for the Iceberg extensions sqlglot reads only as an opaque command.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Iterable, Iterator, Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from procedures.errors import IcebergError, SqlSyntaxError, ValidationError
from procedures.frontend.parser import syntax_error

__all__ = ["parse_statement", "table_parts", "our_table_refs", "is_opaque", "has_stack_trace", "user_message",
           "spark_errors_as_ours"]

DIALECT = "spark"

# sqlglot warns on its logger for each statement it reads only as a Command; those are expected here
logging.getLogger("sqlglot").setLevel(logging.ERROR)


def _offset(text: str, line: int, col: int) -> int:
    lines = text.split("\n")
    return sum(len(x) + 1 for x in lines[: max(line - 1, 0)]) + max(col - 1, 0)


#: Spark's synonyms of the time-travel clauses that sqlglot's Spark dialect does not read
_TIME_TRAVEL_SYNONYMS = {"SYSTEM_VERSION": "VERSION AS OF", "SYSTEM_TIME": "TIMESTAMP AS OF"}


def _time_travel_synonyms(text: str) -> str:
    """``text`` with ``FOR SYSTEM_VERSION AS OF`` / ``FOR SYSTEM_TIME AS OF`` written as ``VERSION AS OF`` /
    ``TIMESTAMP AS OF``, padded with spaces so that every later position (of a syntax error) stays."""
    try:
        tokens = sqlglot.Dialect.get_or_raise(DIALECT).tokenize(text)
    except TokenError:
        return text
    out, last = [], 0
    for i in range(len(tokens) - 3):
        t, kind, as_, of = tokens[i:i + 4]
        if (t.text.upper() == "FOR" and kind.text.upper() in _TIME_TRAVEL_SYNONYMS and as_.text.upper() == "AS"
                and of.text.upper() == "OF" and t.start >= last):
            span = of.end + 1 - t.start
            out.append(text[last:t.start])
            out.append(_TIME_TRAVEL_SYNONYMS[kind.text.upper()].ljust(span))
            last = of.end + 1
    out.append(text[last:])
    return "".join(out)


def parse_statement(text: str) -> exp.Expression:
    """The one statement in ``text`` as a sqlglot tree (Spark dialect).

    Raises :class:`~procedures.errors.SqlSyntaxError` locating the error (line, column, token), as
    the CALL parser does, when sqlglot cannot read it or when ``text`` holds more than one statement.
    """
    try:
        trees = [t for t in sqlglot.parse(_time_travel_synonyms(text), read=DIALECT) if t is not None]
    except ParseError as e:
        first = e.errors[0] if e.errors else {}
        line, col = first.get("line") or 1, first.get("col") or 1
        token = first.get("highlight") or None
        # sqlglot reports the column after the token; point at its start as our parser does
        pos = _offset(text, line, col) - (len(token) - 1 if token else 0)
        reason = str(first.get("description") or e).split("\n")[0].split(" but got <Token")[0]
        raise syntax_error(text, max(pos, 0), reason, token) from None
    except TokenError as e:
        raise SqlSyntaxError(f"Syntax error: {e}") from None
    if len(trees) != 1:
        raise SqlSyntaxError(f"Syntax error: expected one statement, found {len(trees)}")
    return trees[0]


def table_parts(table: exp.Table) -> tuple[str, ...]:
    """The name parts of a table reference as written, unquoted: ``local.db.t.snapshots`` is four."""
    return tuple(p.name for p in table.parts)


def our_table_refs(statement: exp.Expression, catalogs: Iterable[str]) -> list[exp.Table]:
    """Every table reference in ``statement`` whose first part names one of ``catalogs``.

    A reference needs at least ``catalog.namespace.table``; names defined by the statement's own CTEs
    are never ours (a CTE cannot have a dotted name).
    """
    ours = set(catalogs)
    return [t for t in statement.find_all(exp.Table)
            if len(t.parts) >= 3 and t.parts[0].name in ours]


def is_opaque(statement: exp.Expression) -> bool:
    """True when sqlglot read the statement only as an uninterpreted command (``exp.Command``).

    It does so for Iceberg's extensions (``ALTER TABLE ... ADD PARTITION FIELD``, ``WRITE ORDERED BY``,
    branches and tags) and a few Spark statements (``SHOW TABLES``); those are read by our grammar.
    """
    return isinstance(statement, exp.Command)


#: where a JVM stack trace starts in the text of a Spark error (classic and Connect)
_STACK = re.compile(r"\n\s*(JVM stacktrace:|at [\w$.]+\(|\tat )")


def has_stack_trace(message: str) -> bool:
    """True when a Spark error's text carries a JVM stack trace (a Connect error always does)."""
    return _STACK.search(message) is not None


@contextlib.contextmanager
def spark_errors_as_ours(views: Mapping[str, str]) -> Iterator[None]:
    """Spark errors raised inside the block that quote one of ``views`` or carry a JVM stack trace
    (a Connect error always does) become a ValidationError with :func:`user_message`'s text; our own
    errors and other errors pass unchanged."""
    try:
        yield
    except IcebergError:
        raise
    except Exception as e:  # noqa: BLE001 -- a Spark error about a statement on our tables, as ours
        message = str(e)
        if not has_stack_trace(message) and not any(v in message for v in views):
            raise
        raise ValidationError(user_message(message, views)) from None


def user_message(message: str, views: Mapping[str, str]) -> str:
    """A Spark error's message with our views named as the user's tables, without a JVM stack trace."""
    m = _STACK.search(message)
    if m:
        message = message[:m.start()]
    for view, table in views.items():
        message = message.replace(f"`{view}`", table).replace(view, table)
    return message.strip()
