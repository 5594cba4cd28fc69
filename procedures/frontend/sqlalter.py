"""Iceberg's DDL on tables of OUR catalogs: ``ALTER TABLE ...``, ``CREATE TABLE ... AS SELECT``,
``[CREATE OR] REPLACE TABLE ... [AS SELECT]`` -- as Iceberg Java's Spark SQL with its extensions.

Statements (``t`` is ``<our catalog>.<namespace>.<table>``):

* ``ALTER TABLE t SET TBLPROPERTIES ('k' = 'v', ...)``, ``UNSET TBLPROPERTIES [IF EXISTS] ('k', ...)``
* ``ALTER TABLE t ADD COLUMN[S] [(]col type [NOT NULL] [COMMENT 'c'] [FIRST | AFTER c], ...[)]``
  (``col`` may be nested: ``point.z``), ``DROP COLUMN[S] [IF EXISTS] c, ...``,
  ``RENAME COLUMN c TO n``, ``ALTER|CHANGE [COLUMN] c (TYPE type | COMMENT 'c' | FIRST | AFTER c2 |
  SET NOT NULL | DROP NOT NULL)``
* ``ALTER TABLE t ADD PARTITION FIELD term [AS name]``, ``DROP PARTITION FIELD term|name``,
  ``REPLACE PARTITION FIELD term|name WITH term [AS name]`` (``term``: ``col``, ``bucket(n, col)``,
  ``truncate(w, col)``, ``years|months|days|hours(col)``)
* ``ALTER TABLE t WRITE [LOCALLY] ORDERED BY term [ASC|DESC] [NULLS FIRST|LAST], ...``,
  ``WRITE DISTRIBUTED BY PARTITION [LOCALLY ORDERED BY ...]``, ``WRITE UNORDERED``
* ``ALTER TABLE t SET IDENTIFIER FIELDS c, ...``, ``DROP IDENTIFIER FIELDS c, ...``
* ``ALTER TABLE t CREATE [OR REPLACE] BRANCH [IF NOT EXISTS] b [AS OF VERSION n] [RETAIN n DAYS|HOURS|MINUTES]
  [WITH SNAPSHOT RETENTION [n SNAPSHOTS] [n DAYS|HOURS|MINUTES]]``, ``REPLACE BRANCH ...``,
  ``DROP BRANCH [IF EXISTS] b``, the same for ``TAG`` (no snapshot retention)
* ``ALTER TABLE t RENAME TO [catalog.]namespace.u``
* ``CREATE [OR REPLACE] TABLE t [USING iceberg] [PARTITIONED BY (...)] [LOCATION '...']
  [TBLPROPERTIES (...)] [COMMENT '...'] AS <query>``, ``REPLACE TABLE t (cols) ...`` and
  ``[CREATE OR] REPLACE TABLE t ... AS <query>``

Each statement is one metadata commit through the commit kernel (retried on lost races); a refused
change raises a typed error naming what was wrong and leaves the table as it was.

Why a grammar of our own: sqlglot reads Iceberg's extensions (partition fields, write order,
identifier fields, branches and tags) only as an opaque ``exp.Command``, and its tree of the Spark
forms it does know (``ADD COLUMNS``, ``ALTER COLUMN``) drops Spark's ``FIRST``/``AFTER`` positions
and nested column paths; reading every ``ALTER TABLE`` with the one grammar below keeps the rules in
one place.  Column types are read with :func:`procedures.frontend.sqlddl.parse_spark_type`.
"""

from __future__ import annotations

from typing import Any, Mapping

from procedures.catalog.base import Table, staged_create
from procedures.catalog.config import catalog_names
from procedures.core.alter import (
    EvolveSchema, EvolveSpec, ReplacedRows, SetTableProperties, SetWriteOrder, replacement_updates,
)
from procedures.core.kernel.builder import MetadataBuilder, new_table_metadata
from procedures.core.kernel.manage import ManageRef
from procedures.core.kernel.operations import FastAppend, MergeAppend
from procedures.core.kernel.transaction import MetadataChange, commit
from procedures.errors import TableAlreadyExistsError, ValidationError
from procedures.framework.context import open_catalog
from procedures.frontend import sqlddl
from procedures.frontend.parser import Parser, Token
from procedures.spark.dataframes import functions, no_result
from procedures.spark.session import record_engine
from procedures.spark.sql_quoting import quote_name, type_sql
from procedures.spark.write import distribution_of, write_dataframe
from procedures.spec.partitioning import PartitionSpecBuilder
from procedures.spec.schema import Schema
from procedures.spec.snapshots import SPARK_APP_ID, SnapshotRefType
from procedures.spec.types import NestedField

__all__ = ["execute", "AlterParser"]

_TIME_UNITS_MS = {"DAYS": 86_400_000, "HOURS": 3_600_000, "MINUTES": 60_000}
#: words that end a column type in a column definition
_TYPE_END = {"NOT", "COMMENT", "FIRST", "AFTER", "DEFAULT"}


class AlterParser(Parser):
    """Our grammar of the statements above, on the CALL parser's tokens."""

    def spark_type(self):
        """A Spark column type, up to the next top-level ``,``/``)`` or column clause keyword."""
        start, depth = self.tok, 0
        last: Token | None = None
        while self.tok.kind != "EOF":
            t = self.tok
            if t.kind == "OP" and t.text in ("<", "("):
                depth += 1
            elif t.kind == "OP" and t.text in (">", ")"):
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (t.kind == "OP" and t.text == "," or t.kind == "IDENT" and t.text.upper() in _TYPE_END):
                break
            last = self.next()
        if last is None:
            raise self.error("expected a column type", start)
        try:
            return sqlddl.parse_spark_type(self.text[start.pos:last.pos + len(last.text)])
        except ValidationError as e:
            raise ValidationError(f"{e}") from None

    def properties(self, values: bool) -> list[Any]:
        """``('k' = 'v', ...)`` (``values``) or ``('k', ...)``."""
        self.expect_op("(", "'(' and the property list")
        out: list[Any] = []
        while True:
            key = self.string("a property name") if self.tok.kind == "STRING" else self.column("a property name")
            if values:
                if self.op("="):
                    self.next()
                tok = self.next()
                if tok.kind not in ("STRING", "NUMBER", "IDENT"):
                    raise self.error("expected a property value", tok)
                out.append((key, tok.value if tok.kind == "STRING" else tok.text))
            else:
                out.append(key)
            if not self.comma():
                break
        self.expect_op(")", "',' or ')' in the property list")
        return out


# ------------------------------------------------------------------------------------ entry point
def _head(text: str) -> list[str]:
    p = AlterParser(text)
    return [t.text.upper() for t in p.tokens[:5] if t.kind == "IDENT"]


def execute(spark, statement, text: str, conf: Mapping[str, str]):
    """Run ``text`` when it is one of this module's statements on a table of our catalogs; returns an
    empty DataFrame then, ``None`` ("not mine") otherwise.  ``statement`` is the sqlglot tree of the
    text when the dispatcher has one (unused: see the module docstring)."""
    head = _head(text)
    ours = set(catalog_names(conf))
    if head[:2] == ["ALTER", "TABLE"]:
        p = AlterParser(text)
        p.i = 2
        parts = p.multipart("a table name")
        if parts[0] not in ours or len(parts) < 3:
            return None
        _alter(spark, p, parts, conf)
        return no_result(spark)
    replace = head[:2] == ["REPLACE", "TABLE"] or head[:4] == ["CREATE", "OR", "REPLACE", "TABLE"]
    if replace or head[:2] == ["CREATE", "TABLE"]:
        return _create_or_replace(spark, text, conf, ours)
    return None




def _case_sensitive(conf: Mapping[str, str]) -> bool:
    return str(conf.get("spark.sql.caseSensitive", "false")).lower() == "true"


def _commit(spark, conf, parts: list[str], table, ops) -> None:
    commit(table, ops)
    sqlddl.refresh_table_views(spark, conf, [(parts[0], tuple(parts[1:]))])


# ------------------------------------------------------------------------------------ ALTER TABLE
def _alter(spark, p: AlterParser, parts: list[str], conf) -> None:
    catalog = open_catalog(parts[0], conf)
    ident = tuple(parts[1:])
    cs = _case_sensitive(conf)
    if p.take("RENAME", "TO"):
        target = p.multipart("the new table name")
        p.end()
        if target[0] == parts[0] and len(target) >= 3:
            target = target[1:]
        if len(target) == 1:
            target = [*ident[:-1], target[0]]
        catalog.rename_table(ident, tuple(target))
        return
    table = catalog.load_table(ident)
    op = _alter_operation(p, table, cs)
    p.end()
    _commit(spark, conf, parts, table, [op])


def _alter_operation(p: AlterParser, table, cs: bool):
    if p.take("SET", "TBLPROPERTIES") or p.take("SET", "PROPERTIES"):
        return SetTableProperties(updates=tuple(p.properties(True)))
    if p.take("UNSET", "TBLPROPERTIES") or p.take("UNSET", "PROPERTIES"):
        if_exists = p.take("IF", "EXISTS")
        return SetTableProperties(removals=tuple(p.properties(False)), if_exists=if_exists)
    if p.take("ADD", "PARTITION", "FIELD"):
        column, transform = sqlddl.parse_partition_term(p)
        name = p.ident("a partition field name") if p.take("AS") else None
        return EvolveSpec((("add", column, transform, name),), cs)
    if p.take("DROP", "PARTITION", "FIELD"):
        return EvolveSpec((_removal(p, table, cs),), cs)
    if p.take("REPLACE", "PARTITION", "FIELD"):
        removal = _removal(p, table, cs)
        p.need("WITH")
        column, transform = sqlddl.parse_partition_term(p)
        name = p.ident("a partition field name") if p.take("AS") else None
        return EvolveSpec((removal, ("add", column, transform, name)), cs)
    if p.take("WRITE"):
        return _write_order(p, cs)
    if p.take("SET", "IDENTIFIER", "FIELDS"):
        return EvolveSchema((("set_identifier_fields", (tuple(_field_list(p)),), ()),), cs)
    if p.take("DROP", "IDENTIFIER", "FIELDS"):
        return _drop_identifier_fields(table, _field_list(p), cs)
    if p.keyword("CREATE", "REPLACE") or p.keyword("DROP") and p.tokens[p.i + 1].text.upper() in ("BRANCH", "TAG"):
        return _ref_operation(p, table)
    if p.take("ADD", "COLUMNS") or p.take("ADD", "COLUMN"):
        return EvolveSchema(tuple(_add_columns(p)), cs)
    if p.take("DROP", "COLUMNS") or p.take("DROP", "COLUMN"):
        return _drop_columns(p, table, cs)
    if p.take("RENAME", "COLUMN"):
        column = p.column()
        p.need("TO")
        new_name = p.ident("the new column name")
        return EvolveSchema((("rename_column", (column, new_name), ()),), cs)
    if p.take("ALTER", "COLUMN") or p.take("ALTER") or p.take("CHANGE", "COLUMN") or p.take("CHANGE"):
        return EvolveSchema((_alter_column(p),), cs)
    raise p.error("unsupported ALTER TABLE statement: expected SET/UNSET TBLPROPERTIES, ADD/DROP/RENAME/ALTER "
                  "COLUMN, ADD/DROP/REPLACE PARTITION FIELD, WRITE ..., SET/DROP IDENTIFIER FIELDS, "
                  "CREATE/REPLACE/DROP BRANCH or TAG, or RENAME TO")


def _removal(p: AlterParser, table, cs: bool) -> tuple:
    column, transform = sqlddl.parse_partition_term(p)
    # a bare name that is no column of the table names a partition field (as Java's DropPartitionField)
    if transform == "identity" and "." not in column and \
            table.metadata.schema().find_field_or_none(column, cs) is None:
        return ("remove_name", column)
    return ("remove", column, transform)


def _write_order(p: AlterParser, cs: bool) -> SetWriteOrder:
    if p.take("UNORDERED"):
        return SetWriteOrder((), "none", cs)
    if p.take("DISTRIBUTED", "BY", "PARTITION"):
        terms = _order_terms(p) if p.take("LOCALLY", "ORDERED", "BY") else ()
        return SetWriteOrder(terms, "hash", cs)
    if p.take("LOCALLY", "ORDERED", "BY"):
        return SetWriteOrder(_order_terms(p), None, cs)
    if p.take("ORDERED", "BY"):
        return SetWriteOrder(_order_terms(p), "range", cs)
    raise p.error("expected ORDERED BY, LOCALLY ORDERED BY, DISTRIBUTED BY PARTITION or UNORDERED after WRITE")


def _order_terms(p: AlterParser) -> tuple:
    terms = []
    while True:
        column, transform = sqlddl.parse_partition_term(p)
        direction = "desc" if p.take("DESC") else "asc"
        if direction == "asc":
            p.take("ASC")
        nulls = "nulls-first" if p.take("NULLS", "FIRST") else ("nulls-last" if p.take("NULLS", "LAST") else None)
        terms.append((column, transform, direction, nulls))
        if not p.comma():
            return tuple(terms)


def _field_list(p: AlterParser) -> list[str]:
    paren = p.op("(")
    if paren:
        p.next()
    names = [p.column()]
    while p.comma():
        names.append(p.column())
    if paren:
        p.expect_op(")", "',' or ')' in the field list")
    return names


def _drop_identifier_fields(table, names: list[str], cs: bool) -> EvolveSchema:
    schema = table.metadata.schema()
    current = schema.identifier_field_names
    for name in names:
        f = schema.find_field_or_none(name, cs)
        if f is None:
            raise ValidationError(f"Cannot complete drop identifier fields operation: field {name} not found")
        if f.field_id not in schema.identifier_field_ids:
            raise ValidationError(f"Cannot complete drop identifier fields operation: {name} is not an identifier field")
    gone = {schema.find_field(n, cs).field_id for n in names}
    keep = [n for n in current if schema.find_field(n).field_id not in gone]
    return EvolveSchema((("set_identifier_fields", (tuple(keep),), ()),), cs)


def _add_columns(p: AlterParser) -> list[tuple]:
    paren = p.op("(")
    if paren:
        p.next()
    steps: list[tuple] = []
    while True:
        path = p.multipart("a column name")
        ftype = p.spark_type()
        required = p.take("NOT", "NULL")
        doc = p.string("a comment string") if p.take("COMMENT") else None
        parent = ".".join(path[:-1]) or None
        steps.append(("add_column", (parent, path[-1], ftype, doc), (("required", required),)))
        full = ".".join(path)
        if p.take("FIRST"):
            steps.append(("move_first", (full,), ()))
        elif p.take("AFTER"):
            after = p.multipart("a column name")
            steps.append(("move_after", (full, ".".join([*path[:-1], after[-1]]) if len(after) == 1 else ".".join(after)), ()))
        if not p.comma():
            break
    if paren:
        p.expect_op(")", "',' or ')' in the column list")
    return steps


def _drop_columns(p: AlterParser, table, cs: bool) -> EvolveSchema:
    if_exists = p.take("IF", "EXISTS")
    names = _field_list(p)
    schema = table.metadata.schema()
    if if_exists:
        names = [n for n in names if schema.find_field_or_none(n, cs) is not None]
    return EvolveSchema(tuple(("delete_column", (n,), ()) for n in names), cs)


def _alter_column(p: AlterParser) -> tuple:
    column = p.column()
    if p.take("TYPE"):
        return ("update_column", (column, p.spark_type()), ())
    if p.take("COMMENT"):
        return ("update_column_doc", (column, p.string("a comment string")), ())
    if p.take("SET", "NOT", "NULL"):
        return ("require_column", (column,), ())
    if p.take("DROP", "NOT", "NULL"):
        return ("make_column_optional", (column,), ())
    if p.take("FIRST"):
        return ("move_first", (column,), ())
    if p.take("AFTER"):
        after = p.multipart("a column name")
        prefix = column.split(".")[:-1]
        return ("move_after", (column, ".".join([*prefix, after[-1]]) if len(after) == 1 else ".".join(after)), ())
    # Spark's own ALTER COLUMN form with a type and no keyword is not Iceberg's; refuse it by name
    raise p.error("expected TYPE, COMMENT, FIRST, AFTER, SET NOT NULL or DROP NOT NULL after the column name")


# ------------------------------------------------------------------------------------ branches and tags
def _ref_operation(p: AlterParser, table):
    if p.take("DROP"):
        kind = SnapshotRefType.BRANCH if p.take("BRANCH") else (SnapshotRefType.TAG if p.take("TAG") else None)
        if kind is None:
            raise p.error("expected BRANCH or TAG")
        if_exists = p.take("IF", "EXISTS")
        name = p.ident(f"a {kind.value} name")
        existing = table.metadata.refs.get(name)
        if existing is None and if_exists:
            return MetadataChange(())
        if existing is not None and existing.ref_type != kind:
            raise ValidationError(f"Ref {name} is a {existing.ref_type.value} not a {kind.value}")
        return ManageRef("remove", name, kind)
    create = p.take("CREATE")
    replace = p.take("OR", "REPLACE") if create else p.take("REPLACE")
    kind = SnapshotRefType.BRANCH if p.take("BRANCH") else (SnapshotRefType.TAG if p.take("TAG") else None)
    if kind is None:
        raise p.error("expected BRANCH or TAG")
    if_not_exists = not replace and p.take("IF", "NOT", "EXISTS")
    name = p.ident(f"a {kind.value} name")
    snapshot_id = p.integer("a snapshot id") if p.take("AS", "OF", "VERSION") else None
    max_ref_age = min_snapshots = max_snapshot_age = None
    if p.take("RETAIN"):
        max_ref_age = p.integer("a number") * _time_unit(p)
    if kind == SnapshotRefType.BRANCH and p.take("WITH", "SNAPSHOT", "RETENTION"):
        n = p.integer("a number")
        if p.take("SNAPSHOTS"):
            min_snapshots = n
            if p.tok.kind == "NUMBER":
                max_snapshot_age = p.integer("a number") * _time_unit(p)
        else:
            max_snapshot_age = n * _time_unit(p)
    md = table.metadata
    existing = md.refs.get(name)
    if existing is not None and if_not_exists:
        return MetadataChange(())
    if snapshot_id is None and md.current_snapshot_id is None:
        if kind == SnapshotRefType.TAG:
            raise ValidationError(f"Cannot complete create or replace tag operation on {name}, main has no snapshot")
        if existing is None:
            # Java gives a new branch of an empty table an empty snapshot of its own
            return _EmptyBranch(name, ManageRef("retention", name, kind, None, min_snapshots, max_snapshot_age, max_ref_age))
    action = "create_or_replace" if create and replace else ("replace" if replace else "create")
    if action == "create_or_replace" and existing is None:
        action = "create"
    return ManageRef(action, name, kind, snapshot_id, min_snapshots, max_snapshot_age, max_ref_age)


class _EmptyBranch:
    """An empty snapshot on a new branch, then its retention settings (one commit)."""

    replayable = False

    def __init__(self, name: str, retention: ManageRef) -> None:
        self.append = FastAppend([], branch=name)
        self.retention = retention

    def apply(self, base, ctx):
        """The empty append's updates and, when retention was given, the ref's settings."""
        ups = self.append.apply(base, ctx)
        r = self.retention
        if r.min_snapshots_to_keep is None and r.max_snapshot_age_ms is None and r.max_ref_age_ms is None:
            return ups
        builder = MetadataBuilder(base)
        builder.apply_all(ups)
        return ups + r.apply(builder.current(), ctx)


def _time_unit(p: AlterParser) -> int:
    for unit, ms in _TIME_UNITS_MS.items():
        if p.take(unit):
            return ms
    raise p.error("expected DAYS, HOURS or MINUTES")


# ------------------------------------------------------------------------------------ CTAS / REPLACE
def _create_or_replace(spark, text: str, conf, ours: set[str]):
    p = AlterParser(text)
    create = p.take("CREATE")
    replace = p.take("OR", "REPLACE") if create else p.take("REPLACE")
    p.need("TABLE")
    if_not_exists = not replace and p.take("IF", "NOT", "EXISTS")
    parts = p.multipart("a table name")
    if parts[0] not in ours or len(parts) < 3:
        return None
    columns: list[NestedField] = []
    if p.op("("):
        p.next()
        while True:
            name = p.ident("a column name")
            ftype = p.spark_type()
            required = p.take("NOT", "NULL")
            doc = p.string("a comment string") if p.take("COMMENT") else None
            columns.append(NestedField(len(columns) + 1, name, ftype, required, doc))
            if not p.comma():
                break
        p.expect_op(")", "',' or ')' in the column list")
    terms: list[tuple[str, str]] = []
    props: dict[str, str] = {}
    location = None
    query_at = None
    while p.tok.kind != "EOF":
        if p.take("USING"):
            provider = p.ident("a table provider")
            if provider.lower() != "iceberg":
                raise p.error(f"only USING iceberg is supported for catalog {parts[0]}")
        elif p.take("PARTITIONED", "BY"):
            terms += sqlddl.parse_partitioned_by(p)
        elif p.take("LOCATION"):
            location = p.string("a location string")
        elif p.take("TBLPROPERTIES"):
            props.update(p.properties(True))
        elif p.take("COMMENT"):
            props["comment"] = p.string("a comment string")
        elif p.take("AS") or p.keyword("SELECT", "WITH", "VALUES", "FROM") or p.op("("):
            query_at = p.tok.pos
            break
        else:
            raise p.error("expected USING, PARTITIONED BY, LOCATION, TBLPROPERTIES, COMMENT or AS <query>")
    if query_at is None and not replace:
        return None  # a plain CREATE TABLE: the dispatcher's own
    if query_at is not None and columns:
        raise ValidationError("Operation not allowed: Schema may not be specified in a Create Table As Select (CTAS) "
                              "statement; cast the query's columns instead")
    if query_at is None and not columns:
        raise ValidationError(f"REPLACE TABLE {'.'.join(parts)} needs a column list or AS <query>")
    catalog = open_catalog(parts[0], conf)
    ident = tuple(parts[1:])
    exists = catalog.table_exists(ident)
    if exists and not replace:
        if if_not_exists:
            return no_result(spark)
        raise TableAlreadyExistsError(f"Table {'.'.join(parts)} already exists")
    if not exists and replace and not create:
        raise ValidationError(f"Cannot replace table {'.'.join(parts)}: it does not exist "
                              "(use CREATE OR REPLACE TABLE)")
    df = None
    if query_at is not None:
        df = sqlddl.execute(spark, text[query_at:], conf)
        # Spark creates the table of a CTAS with every column optional
        columns = [NestedField(i + 1, f.name, sqlddl.parse_spark_type(type_sql(f.dataType)), False)
                   for i, f in enumerate(df.schema.fields)]
    schema = Schema(tuple(columns))
    with sqlddl.user_errors():
        if exists:
            _replace(spark, conf, parts, catalog.load_table(ident), schema, terms, props, location, df)
        else:
            _create(spark, conf, catalog, ident, schema, terms, props, location, df)
    return no_result(spark)


def _rows_for(spark, table_md, df):
    F = functions(spark)
    fields = table_md.schema().fields
    return df.select(*[F.col(quote_name(c)).cast(sqlddl.iceberg_to_spark_ddl(f.field_type)).alias(f.name)
                       for c, f in zip(df.columns, fields)])


def _app_properties(spark) -> dict[str, str]:
    app_id = record_engine(spark)
    return {SPARK_APP_ID: app_id} if app_id else {}


def _create(spark, conf, catalog, ident, schema: Schema, terms, props, location, df) -> None:
    builder = PartitionSpecBuilder(schema)
    for column, transform in terms:
        builder.add(column, transform)
    md, _ = new_table_metadata(schema=schema, spec=builder.build(), properties=props,
                               location=location or catalog.default_table_location(ident))
    if df is None:
        catalog.create_table(ident, md)
        return
    # one atomic create: the files are written for the staged table, whose first commit creates it
    staged = staged_create(catalog, ident, md)
    files = write_dataframe(spark, staged, _rows_for(spark, md, df), description=f"create {'.'.join(ident)}",
                            distribution=distribution_of(spark, staged))
    if files:
        commit(staged, [MergeAppend(files, snapshot_properties=_app_properties(spark))])
    else:
        catalog.create_table(ident, md)


def _replace(spark, conf, parts, table, schema: Schema, terms, props, location, df) -> None:
    updates = replacement_updates(table.metadata, schema, terms, props, location)
    ops: list[Any] = [MetadataChange(tuple(updates))]
    if df is not None:
        builder = MetadataBuilder(table.metadata, table.metadata_location)
        builder.apply_all(updates)
        staged_md = builder.build()
        staged = Table(table.identifier, staged_md, table.metadata_location, table.io, table.catalog)
        files = write_dataframe(spark, staged, _rows_for(spark, staged_md, df),
                                description=f"replace {'.'.join(parts)}", distribution=distribution_of(spark, staged))
        if files:
            # Java's REPLACE TABLE ... AS SELECT writes the rows as an overwrite of the replaced table
            ops.append(ReplacedRows(add_files=files, snapshot_properties=_app_properties(spark)))
    _commit(spark, conf, parts, table, ops)

