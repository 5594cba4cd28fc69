"""The statements the console and ``procedures.sql`` run on tables of OUR catalogs, and the dispatcher.

Spark cannot see our catalogs (they are not Spark catalog plugins), so a statement naming a table
``<our catalog>.<namespace>.<table>`` is read once with sqlglot (:mod:`procedures.frontend.sqltext`)
and handled here:

* ``CREATE NAMESPACE|DATABASE|SCHEMA [IF NOT EXISTS] cat.ns``, ``DROP NAMESPACE [IF EXISTS] cat.ns``;
* ``CREATE TABLE [IF NOT EXISTS] cat.ns.t (col type [NOT NULL] [COMMENT '...'], ...) [USING iceberg]
  [PARTITIONED BY (col | years(c) | months(c) | days(c) | hours(c) | bucket(n, c) | truncate(w, c), ...)]
  [LOCATION '...'] [TBLPROPERTIES ('k' = 'v', ...)]`` -- through the core metadata builder;
* ``DROP TABLE [IF EXISTS] cat.ns.t [PURGE]``;
* ``INSERT INTO [TABLE] cat.ns.t <query>`` -- the query (``VALUES ...`` or ``SELECT ...``) runs on
  Spark, the rows are appended by :func:`procedures.spark.dml.append`;
* ``SHOW NAMESPACES|TABLES|TBLPROPERTIES|CREATE TABLE`` and ``DESCRIBE [EXTENDED]``
  (:mod:`procedures.frontend.sqlshow`);
* queries (``SELECT``, set operations, CTEs; ``CREATE TEMPORARY VIEW``/``CACHE TABLE ... AS``): each of
  our tables in the tree -- with ``VERSION AS OF``/``TIMESTAMP AS OF``, as a metadata table
  (``t.snapshots``) or a selector (``t.branch_dev``) -- is replaced by a temporary view of what it
  reads, and the tree, written back as Spark SQL, runs on ``spark.sql``.

Any other statement on our tables raises :class:`~procedures.errors.UnsupportedStatementError`
listing these.  Statements that name none of our catalogs go to ``spark.sql`` untouched.
"""

from __future__ import annotations

import itertools
import contextlib
import re
import uuid
from typing import Mapping

from sqlglot import exp

from procedures.catalog.config import catalog_names
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.table_selectors import TableSelection, select_table, with_version
from procedures.errors import (
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    SqlSyntaxError,
    TableAlreadyExistsError,
    UnsupportedStatementError,
    ValidationError,
)
from procedures.framework.context import open_catalog
from procedures.frontend import sqldml, sqlshow
from procedures.frontend.parser import Parser, tokenize
from procedures.frontend.sqltext import (
    DIALECT,
    is_opaque,
    our_table_refs,
    parse_statement,
    spark_errors_as_ours,
    table_parts,
    user_message,
)
from procedures.spark.dataframes import functions, no_result, query_frame, with_schema
from procedures.spark.dml import append
from procedures.spark.read import read_table
from procedures.spark.sql_quoting import quote_name
from procedures.spark.table_reads import read_selection
from procedures.spec import types as spec_types
from procedures.spec.partitioning import PartitionSpecBuilder
from procedures.spec.schema import MAX_NESTING_DEPTH, Schema, too_deep

__all__ = ["execute", "parse_spark_type", "iceberg_to_spark_ddl", "iceberg_to_spark_type", "refresh_table_views",
           "cached_views_on", "SUPPORTED_STATEMENTS", "substitute_reads", "display_name", "user_message", "user_errors",
           "parse_partition_term", "parse_partitioned_by"]

#: numbers the temporary views of our tables within the process
_VIEWS = itertools.count(1)

_PRIMS = {
    "BOOLEAN": spec_types.BOOLEAN, "TINYINT": spec_types.INT, "BYTE": spec_types.INT, "SMALLINT": spec_types.INT, "SHORT": spec_types.INT,
    "INT": spec_types.INT, "INTEGER": spec_types.INT, "BIGINT": spec_types.LONG, "LONG": spec_types.LONG, "FLOAT": spec_types.FLOAT, "REAL": spec_types.FLOAT,
    "DOUBLE": spec_types.DOUBLE, "STRING": spec_types.STRING, "VARCHAR": spec_types.STRING, "CHAR": spec_types.STRING, "BINARY": spec_types.BINARY,
    "DATE": spec_types.DATE, "TIMESTAMP": spec_types.TIMESTAMPTZ, "TIMESTAMP_LTZ": spec_types.TIMESTAMPTZ, "TIMESTAMP_NTZ": spec_types.TIMESTAMP,
}


class _DDL(Parser):
    """Parser for the statements above, on the CALL parser's tokens."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._ids = itertools.count(1)

    def spark_type(self, depth: int = 0) -> spec_types.IcebergType:
        if self.tok.kind not in ("IDENT", "QIDENT"):
            raise self.error("expected a column type")
        tok = self.next()
        name = tok.text.upper()
        if name in ("ARRAY", "MAP", "STRUCT") and depth >= MAX_NESTING_DEPTH:
            # refused while parsing: the recursive descent would otherwise exhaust Python's stack
            raise ValidationError(too_deep(depth + 1, "column type"))
        if name in ("DECIMAL", "DEC", "NUMERIC"):
            p, s = 10, 0
            if self.op("("):
                self.next()
                p = int(self.next().text)
                if self.op(","):
                    self.next()
                    s = int(self.next().text)
                self.expect_op(")", "')' after the decimal precision and scale")
            return spec_types.DecimalType(p, s)
        if name in ("VARCHAR", "CHAR") and self.op("("):
            self.next()
            self.next()
            self.expect_op(")", "')' after the length")
        if name == "ARRAY":
            self.expect_op("<", "'<' after ARRAY")
            element = self.spark_type(depth + 1)
            self.expect_op(">", "'>' closing ARRAY<...>")
            return spec_types.ListType(next(self._ids), element, False)
        if name == "MAP":
            self.expect_op("<", "'<' after MAP")
            key = self.spark_type(depth + 1)
            self.expect_op(",", "',' between the MAP key and value types")
            value = self.spark_type(depth + 1)
            self.expect_op(">", "'>' closing MAP<...>")
            return spec_types.MapType(next(self._ids), key, next(self._ids), value, False)
        if name == "STRUCT":
            self.expect_op("<", "'<' after STRUCT")
            fields = []
            while True:
                fname = self.ident("a struct field name")
                if self.op(":"):
                    self.next()
                fields.append(self.field(fname, depth + 1))
                if self.op(","):
                    self.next()
                    continue
                break
            self.expect_op(">", "'>' closing STRUCT<...>")
            return spec_types.StructType(tuple(fields))
        if name in _PRIMS:
            return _PRIMS[name]
        raise self.error(f"unsupported column type {tok.text}", tok)

    def field(self, name: str, depth: int = 0) -> spec_types.NestedField:
        ftype = self.spark_type(depth)
        required = self.take("NOT", "NULL")
        doc = None
        if self.take("COMMENT"):
            if self.tok.kind != "STRING":
                raise self.error("expected a 'comment' string")
            doc = self.next().value
        return spec_types.NestedField(next(self._ids), name, ftype, required, doc)



def parse_spark_type(text: str) -> spec_types.IcebergType:
    """Iceberg type of a Spark SQL type string (``bigint``, ``array<string>``, ``struct<a: int>``)."""
    p = _DDL(text)
    t = p.spark_type()
    p.end()
    return t


def iceberg_to_spark_ddl(t: spec_types.IcebergType) -> str:
    """The Spark SQL type a column of Iceberg type ``t`` reads as (for casts before writes)."""
    if isinstance(t, spec_types.DecimalType):
        return f"decimal({t.precision},{t.scale})"
    if isinstance(t, spec_types.ListType):
        return f"array<{iceberg_to_spark_ddl(t.element_type)}>"
    if isinstance(t, spec_types.MapType):
        return f"map<{iceberg_to_spark_ddl(t.key_type)},{iceberg_to_spark_ddl(t.value_type)}>"
    if isinstance(t, spec_types.StructType):
        return "struct<" + ",".join(f"{quote_name(f.name)}:{iceberg_to_spark_ddl(f.field_type)}" for f in t.fields) + ">"
    return _primitive_ddl(t)


#: the Spark type of each Iceberg primitive type (by its text) a write casts to; others: string
_PRIMITIVE_DDL = {
    "boolean": "boolean", "int": "int", "long": "bigint", "float": "float", "double": "double",
    "date": "date", "timestamp": "timestamp_ntz", "timestamptz": "timestamp", "string": "string",
    "uuid": "string", "binary": "binary",
}
#: the ``pyspark.sql.types`` class of each type text of :data:`_PRIMITIVE_DDL`
_DDL_CLASSES = {"boolean": "BooleanType", "int": "IntegerType", "bigint": "LongType", "float": "FloatType",
                "double": "DoubleType", "date": "DateType", "timestamp_ntz": "TimestampNTZType",
                "timestamp": "TimestampType", "string": "StringType", "binary": "BinaryType"}


def _primitive_ddl(t: spec_types.IcebergType) -> str:
    return _PRIMITIVE_DDL.get(str(t), "binary" if str(t).startswith("fixed") else "string")


def iceberg_to_spark_type(t: spec_types.IcebergType):
    """:func:`iceberg_to_spark_ddl` as a ``pyspark.sql.types`` type, every nested field, element
    and value nullable (what a cast to the DDL text gives)."""
    from pyspark.sql import types as T  # noqa: PLC0415 -- pyspark only when a statement runs

    if isinstance(t, spec_types.DecimalType):
        return T.DecimalType(t.precision, t.scale)
    if isinstance(t, spec_types.ListType):
        return T.ArrayType(iceberg_to_spark_type(t.element_type), True)
    if isinstance(t, spec_types.MapType):
        return T.MapType(iceberg_to_spark_type(t.key_type), iceberg_to_spark_type(t.value_type), True)
    if isinstance(t, spec_types.StructType):
        return T.StructType([T.StructField(f.name, iceberg_to_spark_type(f.field_type), True) for f in t.fields])
    return getattr(T, _DDL_CLASSES[_primitive_ddl(t)])()


# ------------------------------------------------------------------------------------ dispatch
#: what runs on tables of our catalogs, for the message of an unsupported statement
SUPPORTED_STATEMENTS = (
    "SELECT (joins, CTEs, subqueries, set operations; VERSION AS OF, TIMESTAMP AS OF, "
    "FOR SYSTEM_VERSION/SYSTEM_TIME AS OF; metadata tables such as t.snapshots; t.branch_<name>, t.tag_<name>)",
    "CREATE [TEMPORARY] VIEW ... AS SELECT, CACHE TABLE ... AS SELECT",
    "INSERT INTO, INSERT OVERWRITE [TABLE] ... [PARTITION (...)]",
    "DELETE FROM, UPDATE ... SET, MERGE INTO ... USING ... ON ... WHEN [NOT] MATCHED [BY SOURCE] ...",
    "CREATE NAMESPACE, DROP NAMESPACE",
    "CREATE TABLE [AS SELECT], CREATE OR REPLACE TABLE, REPLACE TABLE [AS SELECT], DROP TABLE",
    "ALTER TABLE: SET/UNSET TBLPROPERTIES, ADD/DROP/RENAME/ALTER COLUMN, ADD/DROP/REPLACE PARTITION FIELD, "
    "WRITE ORDERED BY/DISTRIBUTED BY PARTITION/UNORDERED, SET/DROP IDENTIFIER FIELDS, "
    "CREATE/REPLACE/DROP BRANCH and TAG, RENAME TO",
    "SHOW NAMESPACES, SHOW TABLES, SHOW TBLPROPERTIES, SHOW CREATE TABLE",
    "DESCRIBE [TABLE] [EXTENDED]",
    "CALL <catalog>.system.<procedure>(...)",
)

_NAMESPACE_KINDS = ("NAMESPACE", "DATABASE", "SCHEMA")


def _names_a_catalog(text: str, ours: set[str]) -> bool:
    """Whether any word of ``text`` is one of our catalog names: a statement without one goes to
    Spark as written, even one sqlglot cannot read."""
    # the CALL parser's tokenizer: sqlglot's keeps the rest of a statement it reads only as a command
    # (EXPLAIN ..., SHOW ...) as one string
    try:
        tokens = tokenize(text)
    except ValidationError:
        return any(name in text for name in ours)
    # a name's first part only: ``SET spark.sql.catalog.local.type = ...`` names no catalog
    return any(t.kind in ("IDENT", "QIDENT") and t.value in ours and not (i and tokens[i - 1].text == ".")
               for i, t in enumerate(tokens))


def execute(spark, text: str, conf: Mapping[str, str]):
    """Run one non-CALL statement; returns a DataFrame (empty for DDL)."""
    # DELETE / UPDATE / MERGE / INSERT OVERWRITE on our tables (issue 35), read with sqlglot
    if sqldml.is_dml(text):
        statement = sqldml.parse(text)
        result = sqldml.execute(spark, statement, text, conf)
        if result is not None:
            refresh_table_views(spark, conf, [sqldml.changed_table(statement)])
            return result
    ours = set(catalog_names(conf))
    if not ours or not _names_a_catalog(text, ours):
        return spark.sql(text)
    try:
        statement = parse_statement(text)
    except RecursionError:
        # sqlglot descends once per nesting level; a column type nested beyond what the spec allows
        # exhausts it first.  Our CREATE TABLE grammar refuses it with the depth and the limit.
        if [w.upper() for w in text.split()[:2]] == ["CREATE", "TABLE"]:
            return _create_table(spark, text, conf)
        raise ValidationError("Statement nests expressions or types too deeply to be read") from None
    except SqlSyntaxError:
        # sqlglot refuses names Spark takes: keywords as name parts (``outer``, ``inner``) and nested
        # namespaces (``cat.a.b.t``).  Our own grammar reads CREATE TABLE with them.
        if [w.upper() for w in text.split()[:2]] == ["CREATE", "TABLE"]:
            return _create_table(spark, text, conf)
        raise
    # -- the DML (sqldml.execute) and Iceberg DDL (sqlalter.execute) front ends plug in here: each
    #    takes (spark, statement, text, conf) and returns a DataFrame, or None for a statement not its own
    if is_opaque(statement):
        shown = sqlshow.execute_show(spark, text, conf, ours)
        if shown is not None:
            return shown
        raise _unsupported(text, ours)
    if isinstance(statement, exp.Create) and str(statement.args.get("kind") or "").upper() in _NAMESPACE_KINDS:
        parts = table_parts(statement.this)
        if parts[0] in ours and len(parts) >= 2:
            return _create_namespace(spark, conf, parts, bool(statement.args.get("exists")))
    if isinstance(statement, exp.Drop) and str(statement.args.get("kind") or "").upper() in _NAMESPACE_KINDS:
        parts = table_parts(_dropped(statement)[0])
        if parts[0] in ours and len(parts) >= 2:
            return _drop_namespace(spark, conf, parts, statement)
    refs = our_table_refs(statement, ours)
    if not refs:
        return spark.sql(text)
    if isinstance(statement, exp.Describe):
        return sqlshow.describe(spark, statement, conf)
    if isinstance(statement, exp.Create) and str(statement.args.get("kind") or "").upper() == "TABLE":
        if statement.expression is not None or statement.args.get("replace"):
            raise _unsupported(text, ours)
        return _create_table(spark, text, conf)
    if isinstance(statement, exp.Drop) and str(statement.args.get("kind") or "").upper() == "TABLE":
        return _drop_table(spark, statement, conf)
    if isinstance(statement, exp.Insert):
        return _insert(spark, statement, text, conf, ours)
    if isinstance(statement, (exp.Query, exp.Cache)) or (
            isinstance(statement, exp.Create) and str(statement.args.get("kind") or "").upper() == "VIEW"):
        return _sql_over_views(spark, *substitute_reads(spark, statement, conf, ours),
                               query=isinstance(statement, exp.Query))
    raise _unsupported(text, ours)


def _unsupported(text: str, ours: set[str]) -> UnsupportedStatementError:
    head = " ".join(text.split()[:3])
    return UnsupportedStatementError(
        f"Statement '{head} ...' is not supported on tables of catalog(s) {', '.join(sorted(ours))}. "
        "Supported: " + "; ".join(SUPPORTED_STATEMENTS) + ".")


def _create_namespace(spark, conf, parts: tuple[str, ...], if_not_exists: bool):
    try:
        open_catalog(parts[0], conf).create_namespace(tuple(parts[1:]))
    except NamespaceAlreadyExistsError:
        if not if_not_exists:
            raise
    return no_result(spark)


def _drop_namespace(spark, conf, parts: tuple[str, ...], statement: exp.Drop):
    if statement.args.get("cascade"):
        raise UnsupportedStatementError(
            f"DROP NAMESPACE ... CASCADE is not supported on {'.'.join(parts)}: drop its tables first")
    catalog = open_catalog(parts[0], conf)
    if statement.args.get("exists") and not catalog.namespace_exists(tuple(parts[1:])):
        return no_result(spark)
    catalog.drop_namespace(tuple(parts[1:]))
    return no_result(spark)




def _table(conf, parts: list[str]):
    return open_catalog(parts[0], conf), tuple(parts[1:])


def _create_table(spark, text: str, conf):
    p = _DDL(text)
    p.i = 2
    if_not_exists = p.take("IF", "NOT", "EXISTS")
    parts = p.multipart("a table name")
    catalog, ident = _table(conf, parts)
    p.expect_op("(", "'(' and the column list")
    fields = []
    while True:
        fields.append(p.field(p.ident("a column name")))
        if p.op(","):
            p.next()
            continue
        break
    p.expect_op(")", "',' or ')' in the column list")
    schema = Schema(tuple(fields))
    transforms: list[tuple[str, str]] = []
    props: dict[str, str] = {}
    location = None
    while p.tok.kind != "EOF":
        if p.take("USING"):
            provider = p.ident("a table provider")
            if provider.lower() != "iceberg":
                raise p.error(f"only USING iceberg is supported for catalog {parts[0]}")
        elif p.take("PARTITIONED", "BY"):
            transforms += parse_partitioned_by(p)
        elif p.take("LOCATION"):
            location = p.string("a location string")
        elif p.take("TBLPROPERTIES"):
            p.expect_op("(", "'(' after TBLPROPERTIES")
            while True:
                key = p.string("a property name string")
                if p.op("="):
                    p.next()
                props[key] = p.string("a property value string")
                if p.op(","):
                    p.next()
                    continue
                break
            p.expect_op(")", "',' or ')' in TBLPROPERTIES")
        elif p.take("COMMENT"):
            props["comment"] = p.string("a comment string")
        else:
            raise p.error("expected USING, PARTITIONED BY, LOCATION, TBLPROPERTIES or COMMENT")
    builder = PartitionSpecBuilder(schema)
    for column, transform in transforms:
        builder.add(column, transform)
    if catalog.table_exists(ident):
        if if_not_exists:
            return no_result(spark)
        raise TableAlreadyExistsError(f"Table {'.'.join(parts)} already exists")
    md, _ = new_table_metadata(
        schema=schema, spec=builder.build(), properties=props,
        location=location or catalog.default_table_location(ident),
    )
    catalog.create_table(ident, md)
    return no_result(spark)


#: partition transforms by the names Spark SQL gives them
_TRANSFORMS = {"years": "year", "year": "year", "months": "month", "month": "month", "days": "day", "day": "day",
               "date": "day", "hours": "hour", "hour": "hour", "date_hour": "hour", "identity": "identity"}


def parse_partitioned_by(p: Parser) -> list[tuple[str, str]]:
    """The parenthesised term list after ``PARTITIONED BY``: ``(col, days(ts), bucket(16, id))``."""
    p.expect_op("(", "'(' after PARTITIONED BY")
    terms = [parse_partition_term(p)]
    while p.comma():
        terms.append(parse_partition_term(p))
    p.expect_op(")", "',' or ')' in PARTITIONED BY")
    return terms


def parse_partition_term(p: Parser) -> tuple[str, str]:
    """``(column, transform)`` of a partition or sort term: ``col``, ``bucket(16, col)``,
    ``truncate(4, col)`` (either argument order), ``years|months|days|hours(col)``."""
    first = p.tok
    parts = p.multipart("a column or a partition transform")
    if not p.op("("):
        return ".".join(parts), "identity"
    name = ".".join(parts)
    p.next()
    columns: list[str] = []
    numbers: list[int] = []
    while True:
        if p.tok.kind == "NUMBER":
            numbers.append(p.integer("a number"))
        else:
            columns.append(p.column())
        if not p.comma():
            break
    p.expect_op(")", "')' closing the transform")
    fn = name.lower()
    if fn in _TRANSFORMS and len(columns) == 1 and not numbers:
        return columns[0], _TRANSFORMS[fn]
    if fn in ("bucket", "truncate") and len(columns) == 1 and len(numbers) == 1:
        return columns[0], f"{fn}[{numbers[0]}]"
    raise p.error(f"unsupported transform {name}(...): use bucket(n, col), truncate(width, col), "
                  "years/months/days/hours(col) or a column", first)


def _dropped(statement: exp.Drop) -> list[exp.Table]:
    """The tables or namespaces a DROP names (sqlglot keeps them in ``tables``)."""
    return statement.args.get("tables") or [statement.this]


def _drop_table(spark, statement: exp.Drop, conf):
    for ref in _dropped(statement):
        parts = table_parts(ref)
        catalog, ident = _table(conf, list(parts))
        try:
            catalog.drop_table(ident, purge=bool(statement.args.get("purge")))
        except NoSuchTableError:
            if not statement.args.get("exists"):
                raise
    return no_result(spark)


#: the temporary views standing for our tables in statements: (catalog, identifier) -> view names.
#: A temporary view or cached table made through ``procedures.sql`` reads one of them, which holds
#: the scan of the snapshot current when it was made; after our commits to the table they are made
#: again (:func:`refresh_table_views`), as Spark re-resolves an Iceberg table and Java's procedures
#: refresh its caches.
_TABLE_VIEWS: dict[tuple[str, tuple[str, ...]], set[str]] = {}


#: every view :func:`substitute_reads` made -> the table as its statement named it, so that a Spark
#: error raised later (a write's job, where the views are no longer at hand) can name the table
_VIEW_TABLES: dict[str, str] = {}


def user_errors(views: Mapping[str, str] | None = None) -> contextlib.AbstractContextManager[None]:
    """:func:`procedures.frontend.sqltext.spark_errors_as_ours` for the views of this session's tables
    and ``views``: Spark errors about our tables name the tables, not our views, without the JVM stack
    trace a Connect error carries; other errors and ours pass unchanged."""
    return spark_errors_as_ours({**_VIEW_TABLES, **(views or {})})


def _view_key(catalog: str, ident) -> tuple[str, tuple[str, ...]]:
    return catalog.lower(), tuple(ident)


def refresh_table_views(spark, conf: Mapping[str, str], changed) -> None:
    """After commits to the tables ``changed`` (``(catalog, identifier)`` pairs), make the views that
    stand for them in this session read the current snapshot, and cache again the cached temporary
    views built on them (uncached before the view is replaced, while the old plan still finds the
    cache).  Views dropped since are forgotten."""
    for catalog_name, ident in dict.fromkeys((c, tuple(i)) for c, i in changed):
        views = _TABLE_VIEWS.get(_view_key(catalog_name, ident))
        if not views:
            continue
        live = {v for v in views if spark.catalog.tableExists(v)}
        views.intersection_update(live)
        if not live:
            continue
        cached = cached_views_on(spark, live)
        for name in cached:
            spark.catalog.uncacheTable(name)
        df = read_table(spark, open_catalog(catalog_name, conf).load_table(ident))
        for view in live:
            df.createOrReplaceTempView(view)
        for name in cached:
            spark.catalog.cacheTable(name)


def cached_views_on(spark, views: set[str]) -> list[str]:
    """Cached temporary views whose plan reads one of ``views`` (or is one).  The plan is read with
    ``EXPLAIN EXTENDED`` (its analyzed plan names the views it reads), which a Spark Connect session
    answers too: it has no ``_jdf`` to ask the JVM's query execution."""
    out = []
    for t in spark.catalog.listTables():
        if not t.isTemporary or t.name in views or not spark.catalog.isCached(t.name):
            continue
        plan = str(spark.sql(f"EXPLAIN EXTENDED SELECT * FROM {quote_name(t.name)}").first()[0])
        if any(v in plan for v in views):
            out.append(t.name)
    return out


def _view_name() -> str:
    """A fresh temporary view name of only ``[A-Za-z0-9_]``: Spark parses a view name as an identifier,
    so one built from the table's own name fails on a space, a quote or a non-ASCII letter."""
    return f"__procedures_{next(_VIEWS)}_{uuid.uuid4().hex[:8]}"


def display_name(table: exp.Table) -> str:
    """A table reference as Spark SQL, without its alias and time travel: how messages name it."""
    bare = table.copy()
    for key in ("alias", "version"):
        bare.set(key, None)
    return bare.sql(dialect=DIALECT)


def _version_of(spark, table: exp.Table) -> tuple[str | None, int | None]:
    """``(version, as-of millis)`` of the reference's ``VERSION AS OF`` / ``TIMESTAMP AS OF`` clause."""
    version = table.args.get("version")
    if version is None:
        return None, None
    value = version.expression
    if str(version.this).upper() == "VERSION":
        if not isinstance(value, exp.Literal):
            raise ValidationError(f"VERSION AS OF of {display_name(table)} takes a snapshot id or a branch or tag "
                                  f"name, not {value.sql(dialect=DIALECT)}")
        return value.this, None
    # Spark evaluates the time expression (a string, a timestamp or an expression such as
    # current_timestamp() - INTERVAL 1 DAY) in the session's time zone; so do we, through Spark
    micros = spark.sql(f"SELECT unix_micros(CAST(({value.sql(dialect=DIALECT)}) AS TIMESTAMP))").first()[0]
    if micros is None:
        raise ValidationError(f"TIMESTAMP AS OF of {display_name(table)} is not a time: {value.sql(dialect=DIALECT)}")
    return None, micros // 1000


def _selection(spark, conf, table: exp.Table) -> tuple[TableSelection, str]:
    parts = table_parts(table)
    name = display_name(table)
    sel = select_table(open_catalog(parts[0], conf), parts[1:], name)
    version, as_of = _version_of(spark, table)
    return with_version(sel, version=version, as_of_ms=as_of, display=name), name


def substitute_reads(spark, statement: exp.Expression, conf, ours: set[str]) -> tuple[str, dict[str, str]]:
    """``statement`` as Spark SQL with each of our tables in it replaced by a temporary view of what
    it reads (rows at the chosen snapshot, a metadata table), and each view's name mapped to the
    table as the statement names it (for messages).  The tree is changed in place.

    A reference without an alias gets its own last name as alias, so columns qualified by the table
    name (``t.id``) and Spark's messages keep naming the table.  One view serves every reference
    that reads the same thing."""
    views: dict[str, str] = {}
    made: dict[tuple, str] = {}
    for ref in our_table_refs(statement, ours):
        sel, name = _selection(spark, conf, ref)
        key = (sel.table.catalog.name, tuple(sel.table.identifier), sel.metadata_table, sel.snapshot_id, sel.ref,
               sel.as_of_ms)
        view = made.get(key)
        if view is None:
            view = made[key] = _view_name()
            read_selection(spark, sel).createOrReplaceTempView(view)
            if sel.metadata_table is None and not sel.time_travel:
                # only views of the current rows follow later commits (refresh_table_views)
                _TABLE_VIEWS.setdefault(_view_key(sel.table.catalog.name, sel.table.identifier), set()).add(view)
        views[view] = name
        _VIEW_TABLES[view] = name
        last = table_parts(ref)[-1]
        # Spark reads only [A-Za-z0-9_] unquoted
        alias = ref.args.get("alias") or exp.TableAlias(
            this=exp.to_identifier(last, quoted=not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", last)))
        replacement = exp.Table(this=exp.to_identifier(view), alias=alias)
        for key_, value in ref.args.items():
            if key_ not in ("this", "db", "catalog", "version", "alias") and value:
                replacement.set(key_, value)
        ref.replace(replacement)
    return statement.sql(dialect=DIALECT), views


def _sql_over_views(spark, text: str, views: Mapping[str, str], *, query: bool = True):
    """``spark.sql(text)``, analysed now; a ``query`` (not a command such as CACHE TABLE or CREATE
    VIEW, which must run now) in one round trip on Spark Connect, whose analysis also gives the
    schema the callers need (:func:`procedures.spark.dataframes.query_frame`).  When the text reads
    our tables, a Spark error becomes a ValidationError that names the tables, not the views, and
    carries no JVM stack trace."""
    try:
        df = query_frame(spark, text) if query else spark.sql(text)
        df.schema  # noqa: B018 -- analysis errors surface here, not at the caller's first action
        return df
    except Exception as e:  # noqa: BLE001 -- a Spark error about a query over our views, as ours
        if not views:
            raise
        raise ValidationError(user_message(str(e), views)) from None


def _insert(spark, statement: exp.Insert, text: str, conf, ours: set[str]):
    target = statement.this
    if (not isinstance(target, exp.Table) or statement.args.get("overwrite") or statement.args.get("partition")
            or target.args.get("partition")):
        raise _unsupported(text, ours)
    parts = table_parts(target)
    if parts[0] not in ours:
        raise _unsupported(text, ours)
    # the session's own functions module: in a process holding a classic and a Connect session,
    # pyspark.sql.functions builds the columns of one kind only
    F = functions(spark)
    catalog, ident = _table(conf, list(parts))
    table = catalog.load_table(ident)
    query, views = substitute_reads(spark, statement.expression, conf, ours)
    df = _sql_over_views(spark, query, views)
    fields = table.metadata.schema().fields
    if len(df.columns) != len(fields):
        raise ValidationError(
            f"Cannot write to {display_name(target)}: the query has {len(df.columns)} columns, the table "
            f"{len(fields)} ({', '.join(f.name for f in fields)})"
        )
    types = [iceberg_to_spark_type(f.field_type) for f in fields]
    df = df.select(*[F.col(quote_name(c)).cast(t).alias(f.name) for c, f, t in zip(df.columns, fields, types)])
    # the names and types just given: the write need not ask a Connect server to analyze the plan again
    from pyspark.sql.types import StructField, StructType  # noqa: PLC0415 -- pyspark only when a statement runs

    df = with_schema(df, StructType([StructField(f.name, t, True) for f, t in zip(fields, types)]))
    with user_errors(views):
        append(spark, table, df, columns=[f.name for f in fields])
    refresh_table_views(spark, conf, [(parts[0], ident)])
    return no_result(spark)
