"""``plan_maintenance`` (ours; Iceberg Java has no such procedure): the ordered procedure calls that
fix what ``table_health`` finds (:func:`procedures.core.health.plan_steps`), and with
``execute => true`` runs them one after the other through the runner, exactly as CALLs of
those procedures would run (same binding, validation and commits)."""

from __future__ import annotations

from typing import Any

from procedures.core.health import plan_steps, render_arguments, render_call, table_reference
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.spark.actions.table_health import table_health as health
from procedures.spark.session import optional_job

__all__ = ["plan_maintenance", "summarize_result"]

#: rows of a step's output shown in full in the result column
_SHOWN_ROWS = 3


@register(
    "plan_maintenance",
    parameters=[
        P("table", "STRING", True, doc="Table to plan for (relative to the CALL's catalog)."),
        P("execute", "BOOLEAN", default=False, doc="Run the planned calls in order (default: only show them)."),
        P("include_orphans", "BOOLEAN", default=True,
          doc="List the table location for orphan files while planning (default true)."),
    ],
    output=(
        Col("step", "INT", False, "Position of the call in the plan (1-based)."),
        Col("procedure", "STRING", False, "The procedure to call."),
        Col("arguments", "STRING", False, "Its named arguments in CALL syntax."),
        Col("call", "STRING", False, "The whole CALL statement."),
        Col("reason", "STRING", False, "The table_health checks this call answers."),
        Col("executed", "BOOLEAN", False, "Whether the call ran (execute => true)."),
        Col("result", "STRING", True, "What the call returned (column=value, ...); NULL when not executed."),
    ),
)
def plan_maintenance(ctx: ProcedureContext, table: str, execute: bool | None,
                     include_orphans: bool | None) -> list[tuple]:
    """Plan (and with execute => true run) the maintenance the table needs; empty for a maintained table."""
    t = ctx.load_table(table)
    ref = table_reference(ctx.resolve(table))
    steps = plan_steps(health(t, ref, include_orphans=bool(include_orphans), spark=ctx.spark))
    rows = []
    for i, step in enumerate(steps, 1):
        result = None
        if execute:
            # the step's own jobs name themselves; this names whatever runs between them
            with optional_job(ctx.spark, f"plan_maintenance: {ref} step {i}/{len(steps)} {step.procedure}"):
                result = summarize_result(ctx.call_procedure(step.procedure, step.arguments))
        rows.append((i, step.procedure, render_arguments(step.arguments),
                     render_call(ctx.catalog_name, step.procedure, step.arguments), ", ".join(step.reasons),
                     bool(execute), result))
    return rows


def summarize_result(result: Any) -> str:
    """A step's output as text: ``col=value, ...`` for one row, a count and the first rows for more."""
    names = [c.name for c in result.columns]
    rows = result.rows
    if not rows:
        return "no rows"
    texts = [", ".join(f"{n}={v}" for n, v in zip(names, r)) for r in rows[:_SHOWN_ROWS]]
    if len(rows) == 1:
        return texts[0]
    more = f"; ... ({len(rows) - _SHOWN_ROWS} more)" if len(rows) > _SHOWN_ROWS else ""
    return f"{len(rows)} rows: " + "; ".join(texts) + more
