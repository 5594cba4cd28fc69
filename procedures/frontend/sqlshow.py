"""``SHOW`` and ``DESCRIBE`` on our catalogs and tables, with the columns and rows Spark shows for a
table of Iceberg's Spark catalog.

* ``SHOW NAMESPACES|DATABASES|SCHEMAS IN|FROM cat[.ns] [[LIKE] 'pattern']`` -- ``namespace``;
* ``SHOW TABLES IN|FROM cat.ns [[LIKE] 'pattern']`` -- ``namespace``, ``tableName``, ``isTemporary``;
* ``SHOW TBLPROPERTIES t [('key')]`` -- ``key``, ``value``;
* ``SHOW CREATE TABLE t`` -- ``createtab_stmt``;
* ``DESCRIBE [TABLE] [EXTENDED|FORMATTED] t`` -- ``col_name``, ``data_type``, ``comment``: the columns,
  the ``# Partitioning`` section (``# Partition Information`` when every partition field is an
  identity, as Spark shows partition columns), and with EXTENDED the metadata columns and ``# Detailed Table
  Information`` (Name, Type, Location, Provider, Owner, Table Properties).

sqlglot reads ``SHOW`` only as an opaque command, so its few forms are read here with the CALL
parser's tokenizer (:mod:`procedures.frontend.parser`).  ``table properties`` are what Iceberg's
``SparkTable.properties()`` gives Spark: ``format``, ``provider``, ``current-snapshot-id``,
``location``, ``format-version``, ``sort-order``, ``identifier-fields`` and the table's own.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from sqlglot import exp

from procedures.core.kernel.properties import DEFAULT_FILE_FORMAT, FORMAT_VERSION
from procedures.core.table_selectors import TableSelection, select_table
from procedures.errors import NoSuchNamespaceError, UnsupportedStatementError
from procedures.framework.context import open_catalog
from procedures.frontend.parser import Parser
from procedures.frontend.sqltext import table_parts
from procedures.spark.metadata_tables import metadata_table_docs, metadata_table_schema
from procedures.spark.read import spark_type, unified_partition_type
from procedures.spark.sql_quoting import quote_if_needed, sql_string
from procedures.spec import types as spec_types
from procedures.spec.sorting import NullOrder, SortDirection

__all__ = ["execute_show", "describe", "table_properties", "show_create_table", "describe_transform", "ddl_columns"]

#: Spark's reserved table properties (``CatalogV2Util.TABLE_RESERVED_PROPERTIES``): shown by DESCRIBE
#: EXTENDED as their own rows, never among the table properties
_RESERVED = ("comment", "location", "provider", "owner", "external", "is_managed_location")
#: the keys Iceberg's SparkTable sets itself; the table's own properties of these names are hidden
_ICEBERG_RESERVED = ("provider", "format", "current-snapshot-id", "location", FORMAT_VERSION.key, "sort-order",
                     "identifier-fields")
#: Spark's default redaction of option values (``spark.redaction.regex`` and ``spark.sql.redaction.options.regex``)
_REDACT = re.compile(r"(?i)secret|password|token|access[.]?key|url")
_METADATA_COLUMNS = (("_spec_id", "int"), ("_partition", None), ("_file", "string"), ("_pos", "bigint"),
                     ("_deleted", "boolean"), ("_row_id", "bigint"), ("_last_updated_sequence_number", "bigint"))


class _Show(Parser):
    def pattern(self) -> str | None:
        self.take("LIKE")
        if self.tok.kind == "STRING":
            return self.next().value
        return None

    def end(self) -> None:
        if self.tok.kind != "EOF":
            raise self.error("unexpected text at the end of the statement")


def execute_show(spark: Any, text: str, conf: Mapping[str, str], ours: set[str]) -> Any:
    """The answer to a ``SHOW`` statement naming one of our catalogs, or None when ``text`` is none of
    the forms above (the dispatcher then refuses it)."""
    p = _Show(text)
    if not p.take("SHOW"):
        return None
    if p.take("NAMESPACES") or p.take("DATABASES") or p.take("SCHEMAS"):
        if not (p.take("IN") or p.take("FROM")):
            return None
        parts = p.multipart("a catalog or namespace name")
        pattern = p.pattern()
        p.end()
        if parts[0] not in ours:
            return None
        catalog = open_catalog(parts[0], conf)
        parent = tuple(parts[1:])
        if parent and not catalog.namespace_exists(parent):
            raise NoSuchNamespaceError(f"Namespace {'.'.join(parts)} does not exist")
        names = [_quoted(ns) for ns in catalog.list_namespaces(parent)]
        rows = [(n,) for n in names if _matches(pattern, n)]
        return spark.createDataFrame(rows, "namespace string")
    if p.take("TABLES"):
        if not (p.take("IN") or p.take("FROM")):
            return None
        parts = p.multipart("a namespace name")
        pattern = p.pattern()
        p.end()
        if parts[0] not in ours or len(parts) < 2:
            return None
        catalog = open_catalog(parts[0], conf)
        ns = tuple(parts[1:])
        if not catalog.namespace_exists(ns):
            raise NoSuchNamespaceError(f"Namespace {'.'.join(parts)} does not exist")
        rows = [(_quoted(ident[:-1]), ident[-1], False) for ident in catalog.list_tables(ns)
                if _matches(pattern, ident[-1])]
        return spark.createDataFrame(rows, "namespace string, tableName string, isTemporary boolean")
    if p.take("TBLPROPERTIES"):
        parts = p.multipart("a table name")
        key = None
        if p.tok.kind == "OP" and p.tok.text == "(":
            p.next()
            key = p.tok.value if p.tok.kind == "STRING" else ".".join(p.multipart("a property key"))
            if p.tok.kind == "STRING":
                p.next()
            p.expect_op(")", "')' after the property key")
        p.end()
        if parts[0] not in ours:
            return None
        sel = _select(conf, parts)
        props = {k: v for k, v in table_properties(sel).items() if k not in _RESERVED}
        name = _name(parts[0], sel)
        if key is not None:
            rows = [(key, props.get(key, f"Table {name} does not have property: {key}"))]
        else:
            rows = sorted(props.items())
        return spark.createDataFrame(rows, "key string, value string")
    if p.take("CREATE", "TABLE"):
        parts = p.multipart("a table name")
        p.take("AS", "SERDE")
        p.end()
        if parts[0] not in ours:
            return None
        sel = _select(conf, parts)
        return spark.createDataFrame([(show_create_table(sel, _name(parts[0], sel)),)], "createtab_stmt string")
    return None


def _select(conf: Mapping[str, str], parts: list[str] | tuple[str, ...]) -> TableSelection:
    return select_table(open_catalog(parts[0], conf), tuple(parts[1:]), ".".join(parts))


def _name(catalog: str, sel: TableSelection, quoted: bool = True) -> str:
    """The table's name: catalog, namespace, name (and metadata table), each part as Spark's
    ``quoteIfNeeded`` spells it (SHOW CREATE TABLE, SHOW TBLPROPERTIES), or joined as they are
    (``quoted=False``: Iceberg's ``SparkTable.name()``, which DESCRIBE EXTENDED shows)."""
    parts = [catalog, *sel.table.identifier] + ([sel.metadata_table] if sel.metadata_table else [])
    return _quoted(parts) if quoted else ".".join(parts)


def _quoted(parts) -> str:
    """Spark's ``quoted``: parts joined by dots, each as Spark's ``quoteIfNeeded`` spells it."""
    return ".".join(quote_if_needed(p) for p in parts)


def _matches(pattern: str | None, name: str) -> bool:
    """Spark's ``SHOW ... LIKE`` pattern: ``*`` any text, ``|`` alternatives, case-insensitive."""
    if pattern is None:
        return True
    for alt in pattern.split("|"):
        regex = "".join(".*" if c == "*" else re.escape(c) for c in alt.strip())
        if re.fullmatch(regex, name, re.IGNORECASE):
            return True
    return False


def _redact(props: dict[str, str]) -> dict[str, str]:
    return {k: ("*********(redacted)" if _REDACT.search(k) or _REDACT.search(v) else v) for k, v in props.items()}


def table_properties(sel: TableSelection) -> dict[str, str]:
    """The properties Iceberg's SparkTable reports to Spark for the table (or its metadata table)."""
    t = sel.table
    md = t.metadata
    snap = md.current_snapshot()
    props = {
        "format": "iceberg/" + DEFAULT_FILE_FORMAT.read(md.properties).lower(),
        "provider": "iceberg",
        "current-snapshot-id": "none" if snap is None else str(snap.snapshot_id),
        "location": md.location,
    }
    if sel.metadata_table is not None:
        return props
    props["format-version"] = str(md.format_version)
    order = md.sort_order()
    if not order.is_unsorted():
        props["sort-order"] = ", ".join(_describe_sort_field(md, f) for f in order.fields)
    ids = md.schema().identifier_field_names
    if ids:
        props["identifier-fields"] = "[" + ",".join(ids) + "]"
    props.update({k: v for k, v in md.properties.items() if k not in _ICEBERG_RESERVED})
    return _redact(props)


def _column(md, source_id: int) -> str:
    path = md.schema().field_path(source_id)
    return _quoted(path) if path else str(source_id)


def describe_transform(md, transform, source_id: int) -> str:
    """A transform of a column as Spark's ``Transform.describe`` (partitioning) and Iceberg's
    sort-order description show it."""
    col = _column(md, source_id)
    name = str(transform)
    if name == "identity":
        return col
    if name.startswith("bucket["):
        return f"bucket({name[7:-1]}, {col})"
    if name.startswith("truncate["):
        width = name[9:-1]
        return f"truncate({col}, {width})"
    plural = {"year": "years", "month": "months", "day": "days", "hour": "hours"}
    if name in plural:
        return f"{plural[name]}({col})"
    return f"{name}({col})"


def _describe_sort_field(md, f) -> str:
    direction = "ASC" if f.direction == SortDirection.ASC else "DESC"
    nulls = "NULLS FIRST" if f.null_order == NullOrder.NULLS_FIRST else "NULLS LAST"
    return f"{describe_transform(md, f.transform, f.source_id)} {direction} {nulls}"


# ------------------------------------------------------------------------------ types as Spark shows them
def _type_sql(t: spec_types.IcebergType) -> str:
    """Spark's ``DataType.sql`` of the Spark type of ``t`` (SHOW CREATE TABLE)."""
    if isinstance(t, spec_types.StructType):
        return "STRUCT<" + ", ".join(_field_ddl(f, ": ") for f in t.fields) + ">"
    if isinstance(t, spec_types.ListType):
        return f"ARRAY<{_type_sql(t.element_type)}>"
    if isinstance(t, spec_types.MapType):
        return f"MAP<{_type_sql(t.key_type)}, {_type_sql(t.value_type)}>"
    if isinstance(t, spec_types.DecimalType):
        return f"DECIMAL({t.precision},{t.scale})"
    return spark_type(t).simpleString().upper()


def _field_ddl(f: spec_types.NestedField, sep: str = " ") -> str:
    name = quote_if_needed(f.name)
    out = f"{name}{sep}{_type_sql(f.field_type)}"
    if f.required:
        out += " NOT NULL"
    if f.doc:
        out += f" COMMENT {sql_string(f.doc)}"
    return out


def show_create_table(sel: TableSelection, name: str) -> str:
    """Spark's ``SHOW CREATE TABLE`` text for an Iceberg table (``ShowCreateTableExec``): a bucket
    partition field shows as ``CLUSTERED BY ... INTO n BUCKETS`` (the last one only), as there."""
    md = sel.table.metadata
    if sel.metadata_table is not None:
        raise UnsupportedStatementError(f"SHOW CREATE TABLE is not supported on metadata table {name}")
    fields = md.schema().fields
    out = [f"CREATE TABLE {name} (\n  " + ",\n  ".join(_field_ddl(f) for f in fields) + ")\n", "USING iceberg\n"]
    props = table_properties(sel)
    if sel.metadata_table is None:
        transforms, bucket = [], None
        for pf in md.spec().fields:
            if str(pf.transform).startswith("bucket["):
                bucket = (_column(md, pf.source_id), str(pf.transform)[7:-1])
            else:
                transforms.append(describe_transform(md, pf.transform, pf.source_id))
        if transforms:
            out.append(f"PARTITIONED BY ({', '.join(transforms)})\n")
        if bucket is not None:
            out.append(f"CLUSTERED BY ({bucket[0]})\nINTO {bucket[1]} BUCKETS\n")
    if "comment" in props:
        out.append(f"COMMENT {sql_string(props['comment'])}\n")
    out.append(f"LOCATION {sql_string(props['location'])}\n")
    shown = sorted((k, v) for k, v in props.items() if k not in _RESERVED and not k.startswith("option."))
    if shown:
        out.append("TBLPROPERTIES (\n  " + ",\n  ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in shown)
                   + ")\n")
    return "".join(out)


def ddl_columns(ddl: str) -> list[tuple[str, str]]:
    """``(name, type)`` of each column of a DDL schema (``a int, b struct<x:int,y:string>``)."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(ddl + ","):
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif c == "," and depth == 0:
            name, _, typ = ddl[start:i].strip().partition(" ")
            out.append((name, typ))
            start = i + 1
    return out


# ------------------------------------------------------------------------------ DESCRIBE
def describe(spark: Any, statement: exp.Describe, conf: Mapping[str, str]) -> Any:
    """``DESCRIBE [TABLE] [EXTENDED|FORMATTED] t``: Spark's rows for a table of Iceberg's catalog."""
    parts = table_parts(statement.this)
    sel = _select(conf, parts)
    md = sel.table.metadata
    rows: list[tuple[str, str, str | None]] = []
    blank = ("", "", "")
    if sel.metadata_table is None:
        for f in md.schema().fields:
            rows.append((f.name, spark_type(f.field_type).simpleString(), f.doc))
        spec = md.spec()
        if spec.fields and all(str(pf.transform) == "identity" for pf in spec.fields):
            # Spark lists a partitioning of plain columns as partition columns, with no blank row first
            rows += [("# Partition Information", "", ""), ("# col_name", "data_type", "comment")]
            for pf in spec.fields:
                source = md.schema().find_field(pf.source_id)
                rows.append((_column(md, pf.source_id), spark_type(source.field_type).simpleString(), source.doc))
        elif spec.fields:
            rows += [blank, ("# Partitioning", "", "")]
            rows += [(f"Part {i}", describe_transform(md, pf.transform, pf.source_id), "")
                     for i, pf in enumerate(spec.fields)]
    else:
        # Spark reads the DDL so that a type naming a dotted field (readable_metrics' `s.x`) is shown
        # as Spark shows it, unquoted
        schema = spark.createDataFrame([], metadata_table_schema(sel.metadata_table, md)).schema
        docs = metadata_table_docs(sel.metadata_table)
        rows += [(f.name, f.dataType.simpleString(), docs.get(f.name)) for f in schema.fields]
        if sel.metadata_table == "position_deletes" and "partition" in schema.fieldNames():
            # Java's position_deletes table is partitioned by the identity of each partition field,
            # which Spark lists by its nested column name
            rows += [("# Partition Information", "", ""), ("# col_name", "data_type", "comment")]
            rows += [(f"partition.{f.name}", f.dataType.simpleString(), None)
                     for f in schema["partition"].dataType.fields]
    if str(statement.args.get("style") or "").upper() in ("EXTENDED", "FORMATTED"):
        ptype = unified_partition_type(md) if sel.metadata_table is None else spec_types.StructType()
        rows += [blank, ("# Metadata Columns", "", "")]
        rows += [(n, t or spark_type(ptype).simpleString(), "") for n, t in _METADATA_COLUMNS]
        props = table_properties(sel)
        rows += [blank, ("# Detailed Table Information", "", ""), ("Name", _name(parts[0], sel, quoted=False), ""),
                 ("Type", "EXTERNAL" if "external" in props else "MANAGED", "")]
        rows += [(k.capitalize(), props[k], "") for k in _RESERVED if k in props and k != "external"]
        shown = ",".join(f"{k}={v}" for k, v in sorted(props.items()) if k not in _RESERVED)
        rows.append(("Table Properties", f"[{shown}]", ""))
    return spark.createDataFrame(rows, "col_name string, data_type string, comment string")
