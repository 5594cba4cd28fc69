"""``table_health`` (ours; Iceberg Java has no such procedure): one row per finding of
:func:`procedures.spark.actions.table_health.table_health`, worst first, each naming the CALL that
fixes it.  Read-only: nothing is committed or deleted."""

from __future__ import annotations

from procedures.core.health import CHECKS, Finding, render_arguments, render_call, severity_rank, table_reference
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.spark.actions.table_health import table_health as health

__all__ = ["table_health", "finding_row"]


@register(
    "table_health",
    parameters=[
        P("table", "STRING", True, doc="Table to examine (relative to the CALL's catalog)."),
        P("include_orphans", "BOOLEAN", default=False,
          doc="Also list the table location for orphan files (a dry run of remove_orphan_files; slow on big tables)."),
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
    ),
)
def table_health(ctx: ProcedureContext, table: str, include_orphans: bool | None) -> list[tuple]:
    """Report what maintenance the table needs: small files, deletes, old snapshots, manifests,
    the metadata log, statistics and (with include_orphans) orphan files."""
    t = ctx.load_table(table)
    ref = table_reference(ctx.resolve(table))
    findings = health(t, ref, include_orphans=bool(include_orphans), spark=ctx.spark)
    ordered = sorted(findings, key=lambda f: (-severity_rank(f.severity), CHECKS.index(f.check), f.partition or ""))
    return [finding_row(ctx.catalog_name, f) for f in ordered]


def finding_row(catalog: str, f: Finding) -> tuple:
    """One output row of table_health."""
    if f.procedure is None:
        return (f.check, f.severity, f.partition, float(f.measured), _float(f.threshold), f.message, None, None,
                f.statement)
    return (f.check, f.severity, f.partition, float(f.measured), _float(f.threshold), f.message, f.procedure,
            render_arguments(f.arguments), render_call(catalog, f.procedure, f.arguments))


def _float(v: float | None) -> float | None:
    return None if v is None else float(v)
