"""The few non-CALL statements the console runs on tables of OUR catalogs.

Spark cannot see our catalogs (they are not Spark catalog plugins), so statements naming a table
``<our catalog>.<namespace>.<table>`` are handled here:

* ``CREATE NAMESPACE|DATABASE|SCHEMA [IF NOT EXISTS] cat.ns``
* ``CREATE TABLE [IF NOT EXISTS] cat.ns.t (col type [NOT NULL] [COMMENT '...'], ...) [USING iceberg]
  [PARTITIONED BY (col | years(c) | months(c) | days(c) | hours(c) | bucket(n, c) | truncate(w, c), ...)]
  [LOCATION '...'] [TBLPROPERTIES ('k' = 'v', ...)]`` -- through the core metadata builder;
* ``DROP TABLE [IF EXISTS] cat.ns.t [PURGE]``;
* ``INSERT INTO [TABLE] cat.ns.t <query>`` -- the query (``VALUES ...`` or ``SELECT ...``) runs on
  Spark, the rows are appended by ``:func:`procedures.spark.dml.append`;
* any other statement (``SELECT ...``) runs on ``spark.sql`` after each of our tables it names
  is replaced by a temporary view of :func:`procedures.spark.read.read_table`.

Statements that name none of our catalogs go to ``spark.sql`` untouched.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Mapping

from procedures.catalog.config import catalog_names
from procedures.core.kernel.builder import new_table_metadata
from procedures.errors import NoSuchTableError, TableAlreadyExistsError, NamespaceAlreadyExistsError, ValidationError
from procedures.framework.context import open_catalog
from procedures.frontend.parser import Parser, Token, tokenize
from procedures.spark.dataframes import functions
from procedures.spark.dml import append
from procedures.spark.read import read_table
from procedures.spec import types as spec_types
from procedures.spec.partitioning import PartitionSpecBuilder
from procedures.spec.schema import MAX_NESTING_DEPTH, Schema, too_deep

__all__ = ["execute", "parse_spark_type", "iceberg_to_spark_ddl", "refresh_table_views", "cached_views_on"]

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

    def op(self, text: str) -> bool:
        return self.tok.kind == "OP" and self.tok.text == text

    def take_keywords(self, *words: str) -> bool:
        save = self.i
        for w in words:
            if not self.keyword(w):
                self.i = save
                return False
            self.next()
        return True

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
        required = self.take_keywords("NOT", "NULL")
        doc = None
        if self.take_keywords("COMMENT"):
            if self.tok.kind != "STRING":
                raise self.error("expected a 'comment' string")
            doc = self.next().value
        return spec_types.NestedField(next(self._ids), name, ftype, required, doc)

    def end(self) -> None:
        if self.tok.kind != "EOF":
            raise self.error("unexpected text at the end of the statement")

    def string(self, what: str) -> str:
        if self.tok.kind != "STRING":
            raise self.error(f"expected {what}")
        return self.next().value


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
        return "struct<" + ",".join(f"`{f.name}`:{iceberg_to_spark_ddl(f.field_type)}" for f in t.fields) + ">"
    return {
        "boolean": "boolean", "int": "int", "long": "bigint", "float": "float", "double": "double",
        "date": "date", "timestamp": "timestamp_ntz", "timestamptz": "timestamp", "string": "string",
        "uuid": "string", "binary": "binary",
    }.get(str(t), "binary" if str(t).startswith("fixed") else "string")


# ------------------------------------------------------------------------------------ dispatch
def _our_table_refs(tokens: list[Token], ours: set[str]) -> list[tuple[int, int, list[str]]]:
    """``(first token index, last token index, parts)`` of every dotted name whose first part is ours."""
    out, i = [], 0
    while i < len(tokens):
        t = tokens[i]
        if t.kind in ("IDENT", "QIDENT") and t.value in ours and not (i and tokens[i - 1].text == "."):
            parts, j = [t.value], i
            while j + 2 < len(tokens) and tokens[j + 1].text == "." and tokens[j + 2].kind in ("IDENT", "QIDENT"):
                parts.append(tokens[j + 2].value)
                j += 2
            if len(parts) >= 3:
                out.append((i, j, parts))
                i = j + 1
                continue
        i += 1
    return out


def execute(spark, text: str, conf: Mapping[str, str]):
    """Run one non-CALL statement; returns a DataFrame (empty for DDL)."""
    ours = set(catalog_names(conf))
    tokens = tokenize(text)
    refs = _our_table_refs(tokens, ours)
    head = [t.text.upper() for t in tokens[:3]]
    if head[:1] == ["CREATE"] and len(head) > 1 and head[1] in ("NAMESPACE", "DATABASE", "SCHEMA"):
        p = _DDL(text)
        p.i = 2
        if_not_exists = p.take_keywords("IF", "NOT", "EXISTS")
        parts = p.multipart("a namespace name")
        if parts[0] in ours and len(parts) >= 2:
            p.end()
            try:
                open_catalog(parts[0], conf).create_namespace(tuple(parts[1:]))
            except NamespaceAlreadyExistsError:
                if not if_not_exists:
                    raise
            return _empty(spark)
    if not refs:
        return spark.sql(text)
    if head[:1] == ["CREATE"] and head[1:2] == ["TABLE"]:
        return _create_table(spark, text, conf)
    if head[:2] == ["DROP", "TABLE"]:
        return _drop_table(spark, text, conf)
    if head[:2] == ["INSERT", "INTO"] and refs[0][0] in (2, 3):
        return _insert(spark, text, tokens, refs, conf)
    return _sql_over_views(spark, *_substitute_reads(spark, text, tokens, refs, conf))


def _empty(spark):
    from pyspark.sql import types as T  # noqa: PLC0415 -- pyspark only when a statement runs

    return spark.createDataFrame([], T.StructType([]))


def _table(conf, parts: list[str]):
    return open_catalog(parts[0], conf), tuple(parts[1:])


def _create_table(spark, text: str, conf):
    p = _DDL(text)
    p.i = 2
    if_not_exists = p.take_keywords("IF", "NOT", "EXISTS")
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
        if p.take_keywords("USING"):
            provider = p.ident("a table provider")
            if provider.lower() != "iceberg":
                raise p.error(f"only USING iceberg is supported for catalog {parts[0]}")
        elif p.take_keywords("PARTITIONED", "BY"):
            p.expect_op("(", "'(' after PARTITIONED BY")
            while True:
                transforms.append(_partition_term(p))
                if p.op(","):
                    p.next()
                    continue
                break
            p.expect_op(")", "',' or ')' in PARTITIONED BY")
        elif p.take_keywords("LOCATION"):
            location = p.string("a location string")
        elif p.take_keywords("TBLPROPERTIES"):
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
        elif p.take_keywords("COMMENT"):
            props["comment"] = p.string("a comment string")
        else:
            raise p.error("expected USING, PARTITIONED BY, LOCATION, TBLPROPERTIES or COMMENT")
    builder = PartitionSpecBuilder(schema)
    for column, transform in transforms:
        builder.add(column, transform)
    if catalog.table_exists(ident):
        if if_not_exists:
            return _empty(spark)
        raise TableAlreadyExistsError(f"Table {'.'.join(parts)} already exists")
    md, _ = new_table_metadata(
        schema=schema, spec=builder.build(), properties=props,
        location=location or catalog.default_table_location(ident),
    )
    catalog.create_table(ident, md)
    return _empty(spark)


def _partition_term(p: _DDL) -> tuple[str, str]:
    name = p.ident("a partition column or transform")
    if not p.op("("):
        return name, "identity"
    p.next()
    args: list[str] = []
    numbers: list[int] = []
    while True:
        if p.tok.kind == "NUMBER":
            numbers.append(int(p.next().text))
        else:
            args.append(".".join(p.multipart("a column name")))
        if p.op(","):
            p.next()
            continue
        break
    p.expect_op(")", "')' closing the partition transform")
    fn = name.lower()
    simple = {"years": "year", "year": "year", "months": "month", "month": "month", "days": "day", "day": "day",
              "date": "day", "hours": "hour", "hour": "hour", "date_hour": "hour", "identity": "identity"}
    if fn in simple and len(args) == 1 and not numbers:
        return args[0], simple[fn]
    if fn in ("bucket", "truncate") and len(args) == 1 and len(numbers) == 1:
        return args[0], f"{fn}[{numbers[0]}]"
    raise ValidationError(f"Unsupported partition transform {name}(...): use years/months/days/hours(col), "
                          "bucket(n, col) or truncate(width, col)")


def _drop_table(spark, text: str, conf):
    p = _DDL(text)
    p.i = 2
    if_exists = p.take_keywords("IF", "EXISTS")
    parts = p.multipart("a table name")
    purge = p.take_keywords("PURGE")
    p.end()
    catalog, ident = _table(conf, parts)
    try:
        catalog.drop_table(ident, purge=purge)
    except NoSuchTableError:
        if not if_exists:
            raise
    return _empty(spark)


#: the temporary views standing for our tables in statements: (catalog, identifier) -> view names.
#: A temporary view or cached table made through ``procedures.sql`` reads one of them, which holds
#: the scan of the snapshot current when it was made; after our commits to the table they are made
#: again (:func:`refresh_table_views`), as Spark re-resolves an Iceberg table and Java's procedures
#: refresh its caches.
_TABLE_VIEWS: dict[tuple[str, tuple[str, ...]], set[str]] = {}


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
        plan = str(spark.sql(f"EXPLAIN EXTENDED SELECT * FROM `{t.name.replace('`', '``')}`").first()[0])
        if any(v in plan for v in views):
            out.append(t.name)
    return out


def _view_name() -> str:
    """A fresh temporary view name of only ``[A-Za-z0-9_]``: Spark parses a view name as an identifier,
    so one built from the table's own name fails on a space, a quote or a non-ASCII letter."""
    return f"__procedures_{next(_VIEWS)}_{uuid.uuid4().hex[:8]}"


def _substitute_reads(spark, text: str, tokens: list[Token], refs, conf) -> tuple[str, dict[str, str]]:
    """``text`` with each of our tables replaced by a temporary view of its rows, and each view's
    name mapped to the table as the statement spells it (for messages)."""
    out, last, views = [], 0, {}
    for first, lastidx, parts in refs:
        catalog, ident = _table(conf, parts)
        view = _view_name()
        read_table(spark, catalog.load_table(ident)).createOrReplaceTempView(view)
        _TABLE_VIEWS.setdefault(_view_key(catalog.name, ident), set()).add(view)
        start, end_tok = tokens[first].pos, tokens[lastidx]
        out.append(text[last:start])
        out.append(f"`{view}`")
        last = end_tok.pos + len(end_tok.text)
        views[view] = text[start:last]
    out.append(text[last:])
    return "".join(out), views


def _sql_over_views(spark, query: str, views: Mapping[str, str]):
    """``spark.sql(query)``; an error naming one of our temporary views names its table instead."""
    try:
        return spark.sql(query)
    except Exception as e:  # noqa: BLE001 -- any Spark error may quote a view; others pass unchanged
        message = str(e)
        if not any(view in message for view in views):
            raise
        for view, table in views.items():
            message = message.replace(f"`{view}`", table).replace(view, table)
        raise ValidationError(message) from None


def _insert(spark, text: str, tokens: list[Token], refs, conf):
    # the session's own functions module: in a process holding a classic and a Connect session,
    # pyspark.sql.functions builds the columns of one kind only
    F = functions(spark)
    first, lastidx, parts = refs[0]
    catalog, ident = _table(conf, parts)
    table = catalog.load_table(ident)
    query_start = tokens[lastidx + 1].pos
    rest_refs = [r for r in refs[1:]]
    query, views = text[query_start:], {}
    if rest_refs:
        shifted = tokenize(query)
        query, views = _substitute_reads(spark, query, shifted, _our_table_refs(shifted, set(catalog_names(conf))),
                                         conf)
    df = _sql_over_views(spark, query, views)
    fields = table.metadata.schema().fields
    if len(df.columns) != len(fields):
        raise ValidationError(
            f"Cannot write to {'.'.join(parts)}: the query has {len(df.columns)} columns, the table {len(fields)} "
            f"({', '.join(f.name for f in fields)})"
        )
    df = df.select(*[F.col(f"`{c}`").cast(iceberg_to_spark_ddl(f.field_type)).alias(f.name)
                     for c, f in zip(df.columns, fields)])
    append(spark, table, df)
    refresh_table_views(spark, conf, [(parts[0], ident)])
    return _empty(spark)

