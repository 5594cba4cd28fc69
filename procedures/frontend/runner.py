"""Running a procedure: choose its catalog, bind its arguments, call it, check its rows.

The one execution path behind :func:`procedures.call`, ``CALL`` statements and the console
(procedures.md §1-§2).  Importing this module registers the built-in procedures
(:mod:`procedures.builtin`).  Nothing here imports pyspark: a run returns a
:class:`ProcedureResult` (columns and rows); :mod:`procedures.frontend.sqlcall` turns it into a
DataFrame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import procedures.builtin  # noqa: F401 -- registers the built-in procedures
from procedures.catalog.base import split_dotted
from procedures.catalog.config import SPARK_PREFIX, catalog_names, catalog_properties, default_catalog_name
from procedures.errors import NoSuchCatalogError, NoSuchProcedureError, ValidationError
from procedures.spark.catalog_conf import conf_from_spark
from procedures.framework.context import ProcedureContext, local_zone
from procedures.framework.declaration import OutputColumn, Procedure
from procedures.framework.registry import get_procedure
from procedures.framework.sqltypes import Literal
from procedures.frontend.binding import bind

__all__ = ["ProcedureResult", "run", "split_procedure_name", "SYSTEM_NAMESPACE"]

SYSTEM_NAMESPACE = "system"
#: Spark's session catalog, whose tables live in the metastore
SESSION_CATALOG = "spark_catalog"


@dataclass
class ProcedureResult:
    """The output of one run: the procedure's columns and its rows (tuples in column order)."""

    procedure: Procedure
    rows: list[tuple]
    #: ``(catalog, identifier)`` of every table the run committed to
    changed_tables: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    @property
    def columns(self) -> tuple[OutputColumn, ...]:
        """The output schema."""
        return self.procedure.output


def _hive_catalogs(conf: Mapping[str, str]) -> list[str]:
    """Our catalogs of type hive (the ones on Spark's metastore)."""
    out = []
    for name in catalog_names(conf):
        props, _ = catalog_properties(name, conf)
        kind = str(props.get("type", "")).strip().lower()
        if kind == "hive" or (not kind and props.get("catalog-impl") == "org.apache.iceberg.hive.HiveCatalog"):
            out.append(name)
    return out


def _catalog_for_python_call(table_arg: Any, conf: Mapping[str, str]) -> str:
    """For ``procedures.call`` without a catalog: the table's catalog when it names one of ours.

    A table of Spark's session catalog (``spark_catalog.db.t``, migrate's source) lives in the
    metastore, so when ``spark_catalog`` is not one of ours the hive catalog on that metastore is
    the table's catalog: the default catalog when it is a hive one, else the only hive catalog of
    ours on Spark's own metastore (no ``uri``), else the only one that is not a Spark plugin too,
    else the only hive catalog.
    """
    default = default_catalog_name(conf)
    if isinstance(table_arg, str):
        try:
            parts = split_dotted(table_arg.strip())
        except ValidationError:
            parts = []
        if len(parts) >= 3 and parts[0] in catalog_names(conf):
            return parts[0]
        if len(parts) >= 3 and parts[0] == SESSION_CATALOG:
            hive = _hive_catalogs(conf)
            if default in hive:
                return default
            # a hive catalog that is also a Spark plugin (Iceberg Java's SparkCatalog) is Java's
            # view of the same metastore; our own one is meant when there is exactly one
            own = [n for n in hive if f"{SPARK_PREFIX}{n}" not in conf]
            # without a uri a hive catalog uses Spark's own metastore: the one spark_catalog is on
            session = [n for n in own if not str(catalog_properties(n, conf)[0].get("uri", "")).strip()]
            for group in (session, own, hive):
                if len(group) == 1:
                    return group[0]
    return default


def _table_argument(proc: Procedure, args: Sequence[Any], kwargs: Any) -> Any:
    """The value given for the procedure's ``table`` parameter, by name or by its position."""
    named = dict((k.lower(), v) for k, v in (kwargs.items() if isinstance(kwargs, Mapping) else kwargs))
    if "table" in named:
        value = named["table"]
    else:
        position = next((i for i, p in enumerate(proc.parameters) if p.name == "table"), None)
        value = args[position] if position is not None and position < len(args) else None
    return value.value if isinstance(value, Literal) else value


def split_procedure_name(name: str) -> tuple[str | None, str]:
    """``[catalog.]system.<name>`` or a bare ``<name>`` -> ``(catalog or None, name)``."""
    parts = [p for p in split_dotted(name.strip())]
    if len(parts) == 1:
        return None, parts[0]
    if len(parts) == 2 and parts[0].lower() == SYSTEM_NAMESPACE:
        return None, parts[1]
    if len(parts) == 3 and parts[1].lower() == SYSTEM_NAMESPACE:
        return parts[0], parts[2]
    raise NoSuchProcedureError(f"Procedure {name} not found: procedures live in the namespace <catalog>.system")


def run(
    name: str | Procedure,
    *,
    args: Sequence[Any] = (),
    kwargs: Sequence[tuple[str, Any]] | Mapping[str, Any] = (),
    catalog: str | None = None,
    conf: Mapping[str, str] | None = None,
    spark: Any = None,
    lenient: bool = False,
) -> ProcedureResult:
    """Bind, validate and run a procedure; returns its rows.

    ``name`` may be qualified (``ours.system.rollback_to_snapshot``).  ``catalog`` is the CALL's
    catalog; without one, a Python call uses the catalog its ``table`` argument names (when that is
    one of ours) and otherwise ``spark.sql.defaultCatalog`` / ``local``.  ``conf`` defaults to the
    Spark session's configuration.
    """
    if isinstance(name, Procedure):
        proc, qualified = name, None
    else:
        qualified, bare = split_procedure_name(name)
        proc = get_procedure(bare)
    if conf is None:
        conf = conf_from_spark(spark) if spark is not None else {}
    catalog = catalog or qualified
    if catalog is None:
        catalog = _catalog_for_python_call(_table_argument(proc, args, kwargs), conf)
    # arguments first: a call without its table names the missing parameter, not a catalog
    tz = conf.get("spark.sql.session.timeZone") or local_zone()
    values = bind(proc, args, kwargs, tz=tz, lenient=lenient)
    configured = catalog_names(conf)
    if catalog not in configured:
        shown = ", ".join(configured) if configured else "none"
        raise NoSuchCatalogError(
            f"Cannot use catalog {catalog}: not an iceberg-procedures catalog (configured: {shown}); "
            f"set {SPARK_PREFIX}{catalog}.type to hadoop, jdbc, hive or rest, or name one of the configured catalogs",
            catalog=catalog, configured=configured,
        )
    def nested(inner: str, arguments: Sequence[tuple[str, Any]]) -> ProcedureResult:
        return run(inner, kwargs=list(arguments), catalog=catalog, conf=conf, spark=spark, lenient=True)

    ctx = ProcedureContext(proc, catalog, conf, spark, call=nested)
    rows = [tuple(r) for r in proc.fn(ctx, **values)]
    for row in rows:
        if len(row) != len(proc.output):
            raise ValidationError(
                f"Procedure {proc.name} returned a row of {len(row)} values; its output has {len(proc.output)} columns"
            )
        for col, v in zip(proc.output, row):
            if v is None and not col.nullable:
                raise ValidationError(f"Procedure {proc.name} returned NULL for non-nullable column {col.name}")
    return ProcedureResult(proc, rows, ctx.changed_tables)
