"""``table_health`` (ours; Iceberg Java has no such procedure): one row per finding of
:data:`procedures.core.health.checkup.TABLE_HEALTH`, worst first, each naming the CALL that
fixes it.  Read-only: nothing is committed or deleted."""

from __future__ import annotations

from procedures.core.health.findings import CHECKS, Finding, severity_rank
from procedures.framework.call_text import render_arguments, render_call
from procedures.builtin.plan_maintenance import examined_tables
from procedures.catalog.targets import parse_target
from procedures.core.health.fleet import benefit_score, rank_by_benefit
from procedures.errors import MissingParameterError
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.core.health.checkup import TABLE_HEALTH, TableHealthParams
from procedures.spark.engine.action import Action

__all__ = ["table_health", "finding_row"]


@register(
    "table_health",
    parameters=[
        P("table", "STRING",
          doc="Table to examine (relative to the CALL's catalog); 'db.*' for every table of namespace db (and "
              "below), '*' for every table of the catalog."),
        P("include_orphans", "BOOLEAN", default=False,
          doc="Also list the table location for orphan files (a dry run of remove_orphan_files; slow on big tables)."),
        P("namespace", "STRING", doc="Examine every table of this namespace (and below) instead of one table."),
    ],
    output=(
        Col("check", "STRING", False, "What was checked: small_files, deleted_rows, expired_snapshots, ..."),
        Col("severity", "STRING", False, "info, warning or critical."),
        Col("partition", "STRING", True, "The partition (name=value/...) for per-partition checks, else NULL."),
        Col("measured", "DOUBLE", False, "The measured value (a count, or a share for deleted_rows)."),
        Col("threshold", "DOUBLE", True, "The value it is compared with (from the table's properties or Java's defaults)."),
        Col("message", "STRING", False, "What is wrong, with the numbers and properties involved."),
        Col("procedure", "STRING", True, "The procedure that fixes it; NULL when none does."),
        Col("arguments", "STRING", True, "That procedure's named arguments in CALL syntax."),
        Col("call", "STRING", True, "The whole statement that fixes it."),
        Col("table", "STRING", False, "The table examined (namespace.name)."),
    ),
)
def table_health(ctx: ProcedureContext, table: str | None, include_orphans: bool | None,
                 namespace: str | None) -> list[tuple]:
    """Report what maintenance a table (or every table of a namespace or the catalog, most to gain
    first) needs: small files, deletes, old snapshots, manifests, the metadata log, statistics and
    (with include_orphans) orphan files.  Of several tables, one that cannot be loaded is reported as
    a critical ``error`` finding and the others are still examined."""
    many = parse_target(table, namespace)
    if many is None and table is None:
        raise MissingParameterError("Missing required parameters: [table] (or namespace)",
                                    procedure="table_health", parameters=["table"])
    errors, examined = [], []
    for ref, loaded, error in examined_tables(ctx, table, many):
        if error is not None:
            errors.append(("error", "critical", None, 0.0, None, f"Cannot examine {ref}: {error}", None, None, None,
                           ref))
            continue
        findings = Action(TABLE_HEALTH, ctx.spark).run(loaded, TableHealthParams(ref, bool(include_orphans))).findings
        ordered = sorted(findings, key=lambda f: (-severity_rank(f.severity), CHECKS.index(f.check), f.partition or ""))
        examined.append(([finding_row(ctx.catalog_name, f) + (ref,) for f in ordered], benefit_score(findings)))
    return errors + [row for rows in rank_by_benefit(examined) for row in rows]


def finding_row(catalog: str, f: Finding) -> tuple:
    """One output row of table_health (without the table column)."""
    if f.procedure is None:
        return (f.check, f.severity, f.partition, float(f.measured), _float(f.threshold), f.message, None, None,
                f.statement)
    return (f.check, f.severity, f.partition, float(f.measured), _float(f.threshold), f.message, f.procedure,
            render_arguments(f.arguments), render_call(catalog, f.procedure, f.arguments))


def _float(v: float | None) -> float | None:
    return None if v is None else float(v)
