"""``CALL`` statements, SQL scripts and :func:`procedures.call`: the entry points of the front end.

A script is split on ``;`` (:func:`procedures.frontend.parser.split_statements`) and run in order;
``CALL`` statements run our procedures (:func:`procedures.frontend.runner.run`), statements on
tables of our catalogs are handled by :mod:`procedures.frontend.sqlddl`, everything else goes to
``spark.sql``.  :func:`list_procedures` and :func:`describe` show the registered procedures, the
built-in ones included.
"""

from __future__ import annotations

import logging

from procedures.catalog.config import default_catalog_name
from procedures.spark.catalog_conf import statement_conf
from procedures.errors import SqlSyntaxError, ValidationError
from procedures.framework.declaration import Procedure
from procedures.framework.registry import get_procedure, list_procedures as registered_procedures
from procedures.framework.sqltypes import SqlType
from procedures.frontend import runner, sqlalter, sqlddl
from procedures.frontend.parser import CallStatement, is_call, parse_call, split_statements, syntax_error
from procedures.spark.dataframes import local_frame
from procedures.spark.environment import check_session
from procedures.spark.sql_quoting import quote_path

log = logging.getLogger(__name__)

__all__ = [
    "sql", "call", "execute", "run_call", "result_to_dataframe", "spark_type", "list_procedures", "describe",
    "active_session",
]


def list_procedures() -> list[str]:
    """Names of every registered procedure (the built-in ones and yours), sorted."""
    return registered_procedures()


def describe(name: str) -> Procedure:
    """The registered procedure ``name``: parameters, output columns, doc (``print()`` it to read)."""
    return get_procedure(name.rsplit(".", 1)[-1])


# ------------------------------------------------------------------------------------ running
_SPARK_TYPES = {
    "STRING": "StringType", "BIGINT": "LongType", "INT": "IntegerType", "SMALLINT": "ShortType",
    "TINYINT": "ByteType", "BOOLEAN": "BooleanType", "DOUBLE": "DoubleType", "FLOAT": "FloatType",
    "DATE": "DateType", "TIMESTAMP": "TimestampType", "TIMESTAMP_NTZ": "TimestampNTZType",
}


def spark_type(t: SqlType):
    """The pyspark DataType of a procedure output type."""
    from pyspark.sql import types as T

    if t.name in _SPARK_TYPES:
        return getattr(T, _SPARK_TYPES[t.name])()
    if t.name == "DECIMAL":
        return T.DecimalType(t.precision, t.scale)
    if t.name == "ARRAY":
        return T.ArrayType(spark_type(t.element))
    if t.name == "MAP":
        return T.MapType(spark_type(t.key), spark_type(t.value))
    return T.NullType()


def result_to_dataframe(spark, result):
    """A ProcedureResult as a DataFrame with the procedure's output schema."""
    from pyspark.sql import types as T

    schema = T.StructType([T.StructField(c.name, spark_type(c.type), c.nullable) for c in result.columns])
    # a local relation on both session kinds: collecting the output runs no Spark job
    return local_frame(spark, [tuple(r) for r in result.rows], schema)


def refresh_spark_tables(spark, conf: dict, changed) -> None:
    """After a commit, refresh Spark's cached view of a table whose catalog is also a Spark catalog plugin
    (for example a warehouse shared with Iceberg Java), and the temporary views ``procedures.sql``
    made of it (:func:`procedures.frontend.sqlddl.refresh_table_views`); best effort, like Java's
    re-caching."""
    try:
        sqlddl.refresh_table_views(spark, conf, changed)
    except Exception:  # noqa: BLE001 -- a stale view must not fail a committed change
        log.warning("could not refresh the temporary views of %s", changed, exc_info=True)
    for catalog, ident in changed:
        if f"spark.sql.catalog.{catalog}" not in conf:
            continue
        name = quote_path((catalog, *ident))
        try:
            spark.sql(f"REFRESH TABLE {name}")
        except Exception:  # noqa: BLE001 -- a stale Spark cache must not fail a committed change
            pass


def run_call(spark, stmt: CallStatement, conf: dict | None = None):
    """Run a parsed CALL on ``spark``; returns the output DataFrame."""
    if conf is not None:  # the caller read the conf already: no second read
        return _run_call(spark, stmt, conf)
    with statement_conf(spark) as read:
        return _run_call(spark, stmt, read)


def _run_call(spark, stmt: CallStatement, conf: dict):
    catalog = stmt.catalog or default_catalog_name(conf)
    result = runner.run(stmt.name, args=stmt.positional, kwargs=stmt.named, catalog=catalog, conf=conf, spark=spark)
    refresh_spark_tables(spark, conf, result.changed_tables)
    return result_to_dataframe(spark, result)


def sql(spark, text: str):
    """Run a statement or a ``;``-separated script on ``spark``; returns the last statement's DataFrame.

    ``CALL`` statements run our procedures; statements on tables of our catalogs are handled by
    :mod:`procedures.frontend.sqlddl`; everything else goes to ``spark.sql``.  Statements run in order and
    the first error stops the script.
    """
    check_session(spark)
    statements = split_statements(text)
    if not statements:
        raise SqlSyntaxError("Syntax error: the SQL text holds no statement", line=1, column=1, token=None)
    last = None
    for stmt in statements:
        last = execute(spark, stmt.text, script=text, offset=stmt.offset)
    return last


def execute(spark, text: str, *, script: str | None = None, offset: int = 0):
    """Run one statement (no ``;``); syntax errors are located within ``script`` when given."""
    try:
        if is_call(text):
            return run_call(spark, parse_call(text))
        with statement_conf(spark) as conf:
            # Iceberg's DDL (ALTER TABLE, CTAS, REPLACE TABLE) on our tables. Routed here rather than in
            # sqlddl.execute: sqlalter reads queries and types through sqlddl, so sqlddl cannot import it
            altered = sqlalter.execute(spark, None, text, conf)
            if altered is not None:
                return altered
            return sqlddl.execute(spark, text, conf)
    except SqlSyntaxError as e:
        if script is None or offset == 0 or e.line is None:
            raise
        # re-locate the error in the whole script, so -f users see the script's line numbers
        inner = _line_col_to_pos(text, e.line, e.column)
        raise syntax_error(script, offset + inner, getattr(e, "reason", str(e)), e.token) from None


def _line_col_to_pos(text: str, line: int, col: int) -> int:
    lines = text.split("\n")
    return sum(len(x) + 1 for x in lines[: line - 1]) + col - 1


def active_session(spark=None):
    """``spark`` or the active SparkSession; a clear error when there is none (versions checked once)."""
    if spark is not None:
        return check_session(spark)
    from pyspark.sql import SparkSession  # noqa: PLC0415 -- pyspark only when a session is needed

    session = SparkSession.getActiveSession()
    if session is None:
        raise ValidationError("No active SparkSession: create one first or pass spark=...")
    return check_session(session)


def call(name: str, *, spark=None, **params):
    """Run procedure ``name`` (``rollback_to_snapshot`` or ``ours.system.rollback_to_snapshot``) eagerly
    with named arguments; returns the output rows as a DataFrame with the procedure's output schema."""
    spark = active_session(spark)
    with statement_conf(spark) as conf:
        result = runner.run(name, kwargs=params, conf=conf, spark=spark, lenient=True)
        refresh_spark_tables(spark, conf, result.changed_tables)
        return result_to_dataframe(spark, result)
