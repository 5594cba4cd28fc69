"""CALL statements as text: the calls table_health and plan_maintenance propose, and the console's.

A procedure call named by its arguments (Python values) rendered in Spark SQL's CALL syntax, which
:mod:`procedures.frontend.sqlcall` reads back.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from procedures.spark.sql_quoting import quote_name, sql_string

__all__ = ["sql_literal", "render_arguments", "render_call", "table_reference"]


def sql_literal(value: Any) -> str:
    """``value`` as a Spark SQL literal: strings quoted, maps as ``map(k, v, ...)``, lists as ``array(...)``."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, Mapping):
        return "map(" + ", ".join(f"{sql_literal(k)}, {sql_literal(v)}" for k, v in value.items()) + ")"
    if isinstance(value, (list, tuple)):
        return "array(" + ", ".join(sql_literal(v) for v in value) + ")"
    return sql_string(str(value))


def render_arguments(arguments: Iterable[tuple[str, Any]]) -> str:
    """Named arguments as CALL syntax: ``table => 'db.t', retain_last => 1``."""
    return ", ".join(f"{name} => {sql_literal(value)}" for name, value in arguments)


def render_call(catalog: str, procedure: str, arguments: Iterable[tuple[str, Any]]) -> str:
    """The whole statement: ``CALL <catalog>.system.<procedure>(<arguments>)``."""
    return f"CALL {_quote(catalog)}.system.{procedure}({render_arguments(arguments)})"


def table_reference(identifier: Sequence[str]) -> str:
    """A table identifier as a CALL's ``table`` argument: dotted, parts back-quoted when needed."""
    return ".".join(_quote(p) for p in identifier)


def _quote(name: str) -> str:
    if name.replace("_", "a").isalnum() and not name[:1].isdigit():
        return name
    return quote_name(name)
