"""SQL DML on tables of OUR catalogs: ``DELETE FROM``, ``UPDATE``, ``MERGE INTO`` and ``INSERT OVERWRITE``.

The statement is read with sqlglot (:mod:`procedures.frontend.sqltext`); its conditions, assignments
and source queries stay Spark SQL and run on Spark over temporary views of our tables, so every
expression Spark knows works.  The rows to change are found from the target's rows read with their
``_file``/``_pos`` metadata columns, and :mod:`procedures.spark.row_changes` commits them
copy-on-write or merge-on-read as the table's ``write.<op>.mode`` says:

* ``DELETE FROM t [WHERE c]``: when ``c`` decides whole files from metadata (partition values or
  column bounds), those files are removed without reading them, as Java's metadata delete does;
  otherwise the matching rows are deleted row by row;
* ``UPDATE t SET col = expr, ... [WHERE c]``;
* ``MERGE INTO t USING <table | (query)> [AS s] ON c WHEN MATCHED [AND c] THEN UPDATE SET ... |
  UPDATE SET * | DELETE, WHEN NOT MATCHED [BY TARGET] [AND c] THEN INSERT (cols) VALUES (...) |
  INSERT *, WHEN NOT MATCHED BY SOURCE [AND c] THEN UPDATE SET ... | DELETE``; a target row matched
  by more than one source row is an error (Spark's ``MERGE_CARDINALITY_VIOLATION``), unless the only
  MATCHED clause is an unconditional DELETE, as in Spark;
* ``INSERT OVERWRITE [TABLE] t [PARTITION (col = v, ...)] <query>``: static overwrite (the rows
  matching the static partition values, or the whole table, are replaced) or dynamic
  (``spark.sql.sources.partitionOverwriteMode=dynamic``: the partitions the query writes to).
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Mapping

from sqlglot import exp

from procedures.catalog.config import catalog_names
from procedures.core.kernel.row_level import DELETE, MERGE, UPDATE, conflict_check
from procedures.errors import IcebergError, ValidationError
from procedures.framework.context import open_catalog
from procedures.frontend.sqltext import DIALECT, our_table_refs, parse_statement, spark_errors_as_ours, table_parts
from procedures.spark.dataframes import functions, no_result
from procedures.spark.dml import delete_where, match_files, overwrite, overwrite_partitions
from procedures.spark.read import read_table, spark_type
from procedures.spark.sql_quoting import quote_name, sql_string, type_sql
from procedures.spark.row_changes import KEYS, apply_row_changes, read_target, target_columns
from procedures.spec.expression_parser import parse_filter
from procedures.spec.expressions import ALWAYS_TRUE, Expression, and_
from procedures.spec.types import StructType

__all__ = ["is_dml", "parse", "execute", "changed_table", "CARDINALITY_VIOLATION"]

#: the error class Spark names when a MERGE matches one target row with several source rows
CARDINALITY_VIOLATION = "MERGE_CARDINALITY_VIOLATION"
OVERWRITE_MODE = "spark.sql.sources.partitionOverwriteMode"

_DML_HEAD = re.compile(r"^\s*(DELETE|UPDATE|MERGE|INSERT\s+OVERWRITE)\b", re.IGNORECASE)
# sqlglot reads ``INSERT OVERWRITE LOCAL ...`` as Hive's ``INSERT OVERWRITE LOCAL DIRECTORY`` and drops
# the word: a catalog named ``local`` is quoted before parsing (a directory is never followed by a dot)
_LOCAL_TARGET = re.compile(r"^(\s*INSERT\s+OVERWRITE\s+(?:TABLE\s+)?)(LOCAL)(\s*\.)", re.IGNORECASE)
_MARK_S = "__procedures_source"
_CLAUSE = "__procedures_clause"
_MATCHED = "__procedures_matched"
_VIEW_PREFIX = "__procedures_dml_"


def is_dml(text: str) -> bool:
    """Whether ``text`` starts like one of the statements this module runs."""
    return bool(_DML_HEAD.match(text))


def parse(text: str) -> exp.Expression:
    """``text`` read with :func:`~procedures.frontend.sqltext.parse_statement`, a target catalog
    named ``local`` in ``INSERT OVERWRITE`` first quoted (see ``_LOCAL_TARGET``)."""
    return parse_statement(_LOCAL_TARGET.sub(lambda m: f"{m.group(1)}`{m.group(2)}`{m.group(3)}", text, count=1))




class _Views:
    """Temporary views standing for our tables inside one statement; dropped when it ends.  An error
    quoting a view name is re-raised naming the table as the statement spells it."""

    def __init__(self, spark: Any, conf: Mapping[str, str]) -> None:
        self.spark, self.conf, self.names = spark, conf, {}

    def add(self, df: Any, shown: str) -> str:
        name = f"{_VIEW_PREFIX}{uuid.uuid4().hex[:12]}"
        df.createOrReplaceTempView(name)
        self.names[name] = shown
        return name

    def replace_refs(self, node: exp.Expression, skip: exp.Table | None = None) -> None:
        """Replace every reference to one of our tables under ``node`` (but ``skip``) by a view of its rows."""
        for ref in our_table_refs(node, catalog_names(self.conf)):
            if ref is skip:
                continue
            parts = table_parts(ref)
            table = open_catalog(parts[0], self.conf).load_table(tuple(parts[1:]))
            view = self.add(read_table(self.spark, table), ".".join(parts))
            alias = ref.args.get("alias")
            new = exp.to_table(quote_name(view), dialect=DIALECT)
            new.set("alias", alias.copy() if alias is not None else exp.TableAlias(this=exp.to_identifier(parts[-1])))
            ref.replace(new)

    def drop(self) -> None:
        for view in self.names:
            try:
                self.spark.catalog.dropTempView(view)
            except Exception:  # noqa: BLE001 -- a view that is gone already needs nothing
                pass


def execute(spark: Any, statement: exp.Expression, text: str, conf: Mapping[str, str]) -> Any:
    """Run ``statement`` (read from ``text``) when it is a DELETE, UPDATE, MERGE or INSERT OVERWRITE
    on a table of our catalogs; returns an empty DataFrame, or None when the statement is not one
    of those (the caller handles it)."""
    kinds = (exp.Delete, exp.Update, exp.Merge)
    if not isinstance(statement, kinds) and not (isinstance(statement, exp.Insert) and statement.args.get("overwrite")):
        return None
    target = statement.this
    ours = our_table_refs(statement, catalog_names(conf))
    columns = None
    if isinstance(target, exp.Schema) and target.this in ours:  # INSERT OVERWRITE t (b, a) ...
        columns = [i.name for i in target.expressions]
        target = target.this
    if not isinstance(target, exp.Table) or target not in ours:
        return None
    parts = table_parts(target)
    catalog = open_catalog(parts[0], conf)
    ident = tuple(parts[1:])
    table = catalog.load_table(ident)
    views = _Views(spark, conf)
    try:
        # a Spark error may quote one of our views, and a Connect error carries the server's JVM
        # stack trace (and the plan, naming our views): name the table instead
        with spark_errors_as_ours(views.names):
            if isinstance(statement, exp.Delete):
                _delete(spark, table, statement, views)
            elif isinstance(statement, exp.Update):
                _update(spark, table, statement, views)
            elif isinstance(statement, exp.Merge):
                _merge(spark, table, statement, views)
            else:
                _insert_overwrite(spark, table, statement, target, columns, views)
    finally:
        views.drop()
    return no_result(spark)


def changed_table(statement: exp.Expression) -> tuple[str, tuple[str, ...]]:
    """``(catalog, identifier)`` of the table a statement :func:`execute` ran changed, for refreshing
    the views that stand for it."""
    target = statement.this
    parts = table_parts(target.this if isinstance(target, exp.Schema) else target)
    return parts[0], tuple(parts[1:])


# ------------------------------------------------------------------------------------ helpers
def _alias(target: exp.Table) -> str:
    alias = target.args.get("alias")
    return alias.name if alias is not None and alias.name else target.name


def _sql(node: exp.Expression) -> str:
    return node.sql(dialect=DIALECT)


def _filter_of(condition: exp.Expression | None, t: Any) -> Expression:
    """The conjuncts of ``condition`` our expression language reads, on the columns of ``t`` (named
    as the schema does: Spark resolves names case-insensitively), as a filter that prunes files and
    detects conflicts, as Java's pushed-down filters do; ``true`` when none reads."""
    if condition is None:
        return ALWAYS_TRUE
    names = {f.name.lower(): f.name for f in t.metadata.schema().fields}
    found = []
    for part in condition.flatten() if isinstance(condition, exp.And) else [condition]:
        columns = list(part.find_all(exp.Column))
        if part.find(exp.Subquery, exp.Select, exp.Exists) is not None or \
                any(c.name.lower() not in names for c in columns):
            continue
        bare = part.copy().transform(
            lambda n: exp.column(names[n.name.lower()], quoted=True) if isinstance(n, exp.Column) else n)
        try:
            found.append(parse_filter(_sql(bare)))
        except (IcebergError, ValueError):
            continue
    return and_(*found) if found else ALWAYS_TRUE


def _type_sql(t: Any) -> str:
    """The Spark SQL type a column of Iceberg type ``t`` reads as, for casts in statement text."""
    return type_sql(spark_type(t))


def _cast(F: Any, column: Any, t: Any, name: str) -> Any:
    return column.cast(spark_type(t)).alias(name)


def _assignments(t: Any, eqs: list[exp.Expression], what: str, alias: str | None = None
                 ) -> dict[str, exp.Expression]:
    """``SET col = expr, ...`` as top-level column name -> expression.  A nested field (``s.x = 1``)
    is assigned as Spark's Iceberg assignment alignment does it: its top-level struct is rebuilt with
    the assigned fields and the others read from the target row ``alias`` (no alias: INSERT, where
    nested fields cannot be named).  An unknown column is refused."""
    schema_fields = {f.name.lower(): f for f in t.metadata.schema().fields}
    listing = ", ".join(f.name for f in schema_fields.values())
    out: dict[str, exp.Expression] = {}
    nested: dict[str, dict[tuple[str, ...], exp.Expression]] = {}
    for eq in eqs:
        if not isinstance(eq, exp.EQ) or not isinstance(eq.this, exp.Column):
            raise ValidationError(f"{what}: expected assignments `column = expression`, got {_sql(eq)}")
        parts = [p.name for p in eq.this.parts]
        if len(parts) > 1 and parts[0].lower() not in schema_fields:
            parts = parts[1:]  # qualified by the target's name or alias
        f = schema_fields.get(parts[0].lower())
        if f is None or len(parts) > 1 and alias is None:
            raise ValidationError(f"{what}: {_sql(eq.this)} is not a "
                                  f"{'top-level ' if alias is None else ''}column of {t.name} (columns: {listing})")
        if len(parts) == 1:
            if f.name in out or f.name in nested:
                raise ValidationError(f"{what}: column {f.name} is assigned twice")
            out[f.name] = eq.expression
            continue
        if f.name in out:
            raise ValidationError(f"{what}: column {f.name} is assigned twice (whole and by field)")
        path = _field_path(f, parts[1:], what, _sql(eq.this))
        paths = nested.setdefault(f.name, {})
        for other in paths:
            if other[:len(path)] == path or path[:len(other)] == other:
                raise ValidationError(f"{what}: {f.name}.{'.'.join(path)} is assigned twice (or within a field "
                                      "also assigned)")
        paths[path] = eq.expression
    for name, paths in nested.items():
        f = schema_fields[name.lower()]
        out[name] = _struct_assignment(f.field_type, paths, f"{quote_name(alias or '')}.{quote_name(name)}")
    return out


def _field_path(f: Any, names: list[str], what: str, shown: str) -> tuple[str, ...]:
    """The field names (as the schema spells them) of a nested path below struct column ``f``."""
    path, t = [], f.field_type
    for n in names:
        kids = {k.name.lower(): k for k in t.fields} if isinstance(t, StructType) else {}
        k = kids.get(n.lower())
        if k is None:
            raise ValidationError(f"{what}: {shown} is not a field of {f.name}: only struct fields can be "
                                  "assigned by name")
        path.append(k.name)
        t = k.field_type
    return tuple(path)


def _struct_assignment(struct: Any, assigned: dict[tuple[str, ...], exp.Expression], base: str) -> exp.Expression:
    """``named_struct`` of ``struct``'s fields: an assigned one gets its expression (cast to its type),
    one with assignments below it is rebuilt the same way, the others are read from ``base``."""
    args = []
    for f in struct.fields:
        below = {p[1:]: e for p, e in assigned.items() if p[0] == f.name and len(p) > 1}
        if (f.name,) in assigned:
            value = f"CAST({_sql(assigned[(f.name,)])} AS {_type_sql(f.field_type)})"
        elif below:
            value = _sql(_struct_assignment(f.field_type, below, f"{base}.{quote_name(f.name)}"))
        else:
            value = f"{base}.{quote_name(f.name)}"
        args.append(f"{sql_string(f.name)}, {value}")
    return exp.maybe_parse(f"named_struct({', '.join(args)})", dialect=DIALECT)


# ------------------------------------------------------------------------------------ DELETE
def _delete(spark: Any, t: Any, statement: exp.Delete, views: _Views) -> None:
    where = statement.args.get("where")
    condition = where.this if where is not None else None
    if t.metadata.current_snapshot_id is None:
        return
    pushed = _filter_of(condition, t)
    whole = condition is None or (pushed is not ALWAYS_TRUE and _exact_filter(condition, t))
    if whole:
        # a condition our expression language reads fully: files it decides from metadata go whole,
        # as Java's metadata delete (only when every candidate file is decided)
        match = match_files(t, pushed, spark)
        if not match.partial:
            if match.full:
                delete_where(spark, t, pushed)
            return
    views.replace_refs(statement, skip=statement.this)
    target = read_target(spark, t)
    alias = _alias(statement.this)
    view = views.add(target, t.name)
    sql = f"SELECT {', '.join(KEYS)} FROM {quote_name(view)} AS {quote_name(alias)}"
    if condition is not None:
        sql += f" WHERE {_sql(condition)}"
    touched = spark.sql(sql)
    apply_row_changes(spark, t, target, touched, None, op=DELETE, check=conflict_check(t.metadata, DELETE, pushed),
                      filter=pushed)


def _exact_filter(condition: exp.Expression, t: Any) -> bool:
    """Whether every conjunct of ``condition`` reads as a filter (so the filter is the condition)."""
    parts = condition.flatten() if isinstance(condition, exp.And) else [condition]
    return all(_filter_of(p, t) is not ALWAYS_TRUE for p in parts)


# ------------------------------------------------------------------------------------ UPDATE
def _update(spark: Any, t: Any, statement: exp.Update, views: _Views) -> None:
    F = functions(spark)
    sets = _assignments(t, statement.expressions, "UPDATE", _alias(statement.this))
    where = statement.args.get("where")
    condition = where.this if where is not None else None
    if t.metadata.current_snapshot_id is None:
        return
    views.replace_refs(statement, skip=statement.this)
    target = read_target(spark, t)
    columns, meta = target_columns(t)
    alias = _alias(statement.this)
    view = views.add(target, t.name)
    fields = {f.name: f for f in t.metadata.schema().fields}
    select = []
    for c in columns:
        value = _sql(sets[c]) if c in sets else f"{quote_name(alias)}.{quote_name(c)}"
        select.append(f"CAST({value} AS {_type_sql(fields[c].field_type)}) AS {quote_name(c)}")
    select += [f"{quote_name(alias)}.{m}" for m in meta]
    sql = f"SELECT {', '.join(select)} FROM {quote_name(view)} AS {quote_name(alias)}"
    if condition is not None:
        sql += f" WHERE {_sql(condition)}"
    updated = spark.sql(sql)
    if "_last_updated_sequence_number" in meta:
        # an updated row keeps its id; its sequence number is the commit's (null: inherited)
        updated = updated.withColumn("_last_updated_sequence_number", F.lit(None).cast("bigint"))
    pushed = _filter_of(condition, t)
    apply_row_changes(spark, t, target, updated.select(*KEYS), updated, op=UPDATE,
                      check=conflict_check(t.metadata, UPDATE, pushed), filter=pushed)


# ------------------------------------------------------------------------------------ MERGE
def _merge(spark: Any, t: Any, statement: exp.Merge, views: _Views) -> None:
    F = functions(spark)
    whens = statement.args.get("whens")
    clauses = list(whens.expressions) if whens is not None else []
    if not clauses:
        raise ValidationError("MERGE INTO needs at least one WHEN clause")
    views.replace_refs(statement, skip=statement.this)
    columns, meta = target_columns(t)
    fields = {f.name: f for f in t.metadata.schema().fields}
    target = read_target(spark, t)
    talias = _alias(statement.this)
    tview = views.add(target, t.name)
    source = statement.args["using"]
    salias = source.alias_or_name if source.alias_or_name else "source"
    inner_source = source.copy()
    inner_source.set("alias", None)
    source_sql = _sql(inner_source) if isinstance(inner_source, exp.Subquery) else f"(SELECT * FROM {_sql(inner_source)})"
    matched = f"({quote_name(talias)}._file IS NOT NULL AND {quote_name(salias)}.{_MARK_S} IS NOT NULL)"
    kinds = {
        "matched": matched,
        "not_matched": f"({quote_name(talias)}._file IS NULL)",
        "by_source": f"({quote_name(salias)}.{_MARK_S} IS NULL)",
    }
    cases, values, actions = [], [], {}
    for i, when in enumerate(clauses, 1):
        kind = "matched" if when.args.get("matched") else ("by_source" if when.args.get("source") else "not_matched")
        cond = when.args.get("condition")
        cases.append(f"WHEN {kinds[kind]}" + (f" AND ({_sql(cond)})" if cond is not None else "") + f" THEN {i}")
        then = when.args.get("then")
        assigned: dict[str, str] = {}
        if isinstance(then, exp.Var) and then.name.upper() == "DELETE":
            if kind == "not_matched":
                raise ValidationError("MERGE: WHEN NOT MATCHED clauses can only INSERT")
            actions[i] = "delete"
        elif isinstance(then, exp.Update):
            if kind == "not_matched":
                raise ValidationError("MERGE: WHEN NOT MATCHED clauses can only INSERT")
            if len(then.expressions) == 1 and isinstance(then.expressions[0], exp.Star):
                if kind == "by_source":
                    raise ValidationError("MERGE: UPDATE SET * needs a source row; WHEN NOT MATCHED BY SOURCE "
                                          "clauses must name the columns they set")
                assigned = {c: f"{quote_name(salias)}.{quote_name(c)}" for c in columns}
            else:
                assigned = {c: _sql(e) for c, e in _assignments(t, then.expressions, "MERGE UPDATE", talias).items()}
            actions[i] = "update"
        elif isinstance(then, exp.Insert):
            if kind != "not_matched":
                raise ValidationError("MERGE: INSERT is only allowed in WHEN NOT MATCHED [BY TARGET] clauses")
            if isinstance(then.this, exp.Star):
                assigned = {c: f"{quote_name(salias)}.{quote_name(c)}" for c in columns}
            else:
                names = [c.name for c in then.this.expressions]
                exprs = then.expression.expressions if then.expression is not None else []
                if len(names) != len(exprs):
                    raise ValidationError(f"MERGE INSERT names {len(names)} column(s) but gives {len(exprs)} value(s)")
                eqs = [exp.EQ(this=exp.column(n), expression=e) for n, e in zip(names, exprs)]
                given = _assignments(t, eqs, "MERGE INSERT")
                assigned = {c: (_sql(given[c]) if c in given else "NULL") for c in columns}
            actions[i] = "insert"
        else:
            raise ValidationError(f"MERGE: unsupported action {_sql(then) if then is not None else '(none)'}; use "
                                  "UPDATE SET ..., UPDATE SET *, DELETE, INSERT (...) VALUES (...) or INSERT *")
        for c, v in assigned.items():
            values.append(f"CAST({v} AS {_type_sql(fields[c].field_type)}) AS {quote_name(f'__v{i}_{c}')}")
        actions.setdefault(i, "none")
        clauses[i - 1] = (kind, cond, actions[i], set(assigned))
    select = [f"{quote_name(talias)}.{quote_name(c)} AS {quote_name(c)}" for c in columns] + [f"{quote_name(talias)}.{m} AS {m}" for m in meta]
    select += [f"CASE {' '.join(cases)} ELSE 0 END AS {_CLAUSE}", f"{matched} AS {_MATCHED}"] + values
    sql = (f"SELECT {', '.join(select)} FROM {quote_name(tview)} AS {quote_name(talias)} FULL OUTER JOIN "
           f"(SELECT *, true AS {_MARK_S} FROM {source_sql}) AS {quote_name(salias)} ON {_sql(statement.args['on'])}")
    joined = spark.sql(sql)
    matched_clauses = [c for c in clauses if c[0] == "matched"]
    only_delete = len(matched_clauses) == 1 and matched_clauses[0][1] is None and matched_clauses[0][2] == "delete"
    if matched_clauses and not only_delete:
        dup = (joined.where(F.col(_MATCHED)).groupBy(*KEYS).count().where(F.col("count") > 1).limit(1).collect())
        if dup:
            raise ValidationError(
                f"[{CARDINALITY_VIOLATION}] The ON search condition of the MERGE statement matched a single row from "
                f"the target table {t.name} with multiple rows of the source table. This could result in the target "
                "row being operated on more than once with an update or delete operation and is not allowed; "
                f"{t.name} is unchanged.")
    changing = [i for i, c in enumerate(clauses, 1) if c[2] in ("update", "delete")]
    writing = [i for i, c in enumerate(clauses, 1) if c[2] in ("update", "insert")]
    touched = joined.where(F.col(_CLAUSE).isin(changing) & F.col("_file").isNotNull()).select(*KEYS)
    new_rows = None
    if writing:
        out = []
        for c in columns:
            value = None
            for i in writing:
                if c in clauses[i - 1][3]:
                    value = (F.when(F.col(_CLAUSE) == i, F.col(quote_name(f"__v{i}_{c}"))) if value is None
                             else value.when(F.col(_CLAUSE) == i, F.col(quote_name(f"__v{i}_{c}"))))
            col = F.col(quote_name(c))
            out.append((value.otherwise(col) if value is not None else col).alias(c))
        if "_row_id" in meta:
            out += [F.col("_row_id"), F.lit(None).cast("bigint").alias("_last_updated_sequence_number")]
        new_rows = joined.where(F.col(_CLAUSE).isin(writing)).select(*out)
    apply_row_changes(spark, t, target, touched, new_rows, op=MERGE, check=conflict_check(t.metadata, MERGE),
                      filter=ALWAYS_TRUE)


# ------------------------------------------------------------------------------------ INSERT OVERWRITE
def _listed_fields(t: Any, columns: list[str], by_name: Mapping[str, Any], static: Mapping[str, Any]) -> list[Any]:
    """The table columns an INSERT's column list names, in its order (the query's columns match them
    by position); every column not given in PARTITION must be listed, as Spark requires of an Iceberg
    table."""
    listed = []
    for name in columns:
        f = by_name.get(name.lower())
        if f is None:
            raise ValidationError(f"INSERT OVERWRITE: the column list names {name}, not a column of {t.name} "
                                  f"(columns: {', '.join(f.name for f in by_name.values())})")
        if f in listed or f.name in static:
            raise ValidationError(f"INSERT OVERWRITE: column {f.name} is given twice (in the column list"
                                  + (" and in PARTITION)" if f.name in static else ")"))
        listed.append(f)
    missing = [f.name for f in by_name.values() if f not in listed and f.name not in static]
    if missing:  # Spark with Iceberg: "Cannot find data for the output column"
        raise ValidationError(f"Cannot write to {t.name}: the column list leaves out the column(s) "
                              f"{', '.join(missing)}; list every column not given in PARTITION")
    return listed


def _insert_overwrite(spark: Any, t: Any, statement: exp.Insert, target: exp.Table, columns: list[str] | None,
                      views: _Views) -> None:
    F = functions(spark)
    fields = list(t.metadata.schema().fields)
    by_name = {f.name.lower(): f for f in fields}
    static: dict[str, exp.Expression] = {}
    partition = target.args.get("partition")
    for e in partition.expressions if partition is not None else []:
        if isinstance(e, exp.EQ) and isinstance(e.this, exp.Column):
            f = by_name.get(e.this.name.lower())
            if f is None:
                raise ValidationError(f"INSERT OVERWRITE: PARTITION names {e.this.name}, not a column of {t.name}")
            static[f.name] = e.expression
        elif not isinstance(e, exp.Column) or e.name.lower() not in by_name:
            raise ValidationError(f"INSERT OVERWRITE: unsupported PARTITION entry {_sql(e)}; use col = value or col")
    query = statement.expression
    views.replace_refs(query)
    df = spark.sql(_sql(query))
    dynamic_fields = ([f for f in fields if f.name not in static] if columns is None
                      else _listed_fields(t, columns, by_name, static))
    if len(df.columns) != len(dynamic_fields):
        raise ValidationError(
            f"Cannot write to {t.name}: the query has {len(df.columns)} columns, the table expects "
            f"{len(dynamic_fields)} ({', '.join(f.name for f in dynamic_fields)})")
    # by position: a query's column names may repeat (SELECT 3, 3)
    df = df.toDF(*[f"__c{i}" for i in range(len(df.columns))])
    given = dict(zip([f.name for f in dynamic_fields], df.columns))
    out = []
    for f in fields:
        if f.name in static:
            col = F.expr(_sql(static[f.name]))
        elif f.name in given:
            col = F.col(quote_name(given[f.name]))
        else:  # unreachable: _listed_fields refuses a list that leaves a column out
            raise ValidationError(f"INSERT OVERWRITE: no value for column {f.name}")
        out.append(_cast(F, col, f.field_type, f.name))
    rows = df.select(*out)
    mode = str(spark.conf.get(OVERWRITE_MODE, "static") or "static").strip().lower()
    if mode not in ("static", "dynamic"):
        raise ValidationError(f"{OVERWRITE_MODE}={mode!r}: use static or dynamic")
    # as Spark: dynamic only while some partition field is left to the rows (an unpartitioned table, or
    # one whose every partition column is given a value, is overwritten statically)
    if mode == "dynamic" and len(t.metadata.spec().fields) > len(static):
        overwrite_partitions(spark, t, rows)
        return
    filter = " AND ".join(f"{quote_name(name)} = {_sql(value)}" for name, value in static.items()) or "true"
    overwrite(spark, t, rows, filter)
