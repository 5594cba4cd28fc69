"""``plan_maintenance`` (ours; Iceberg Java has no such procedure): the ordered procedure calls that
fix what ``table_health`` finds (:func:`procedures.core.health.plan_steps`), and with
``execute => true`` runs them one after the other through the runner, exactly as CALLs of
those procedures would run (same binding, validation and commits)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Iterator

from procedures.core.health.findings import plan_steps
from procedures.framework.call_text import render_arguments, render_call, table_reference
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import OutputColumn as Col, Parameter as P
from procedures.catalog.targets import iter_tables, parse_target
from procedures.core.health.fleet import benefit_score, parse_duration, rank_by_benefit
from procedures.errors import MissingDependencyError, MissingParameterError
from procedures.framework.registry import register
from procedures.framework.sqltypes import format_value
from procedures.core.health.checkup import TABLE_HEALTH, TableHealthParams
from procedures.spark.engine.action import Action
from procedures.spark.session import optional_job

__all__ = ["plan_maintenance", "summarize_result", "output_maps", "run_step", "StepOutcome",
           "examined_tables",
           "PLANNED", "DONE", "SKIPPED", "FAILED", "NOT_STARTED"]

log = logging.getLogger(__name__)

#: rows of a step's output shown in full in the result column
_SHOWN_ROWS = 3


#: a step's status: not executed (planned), or how its execution ended
PLANNED, DONE, SKIPPED, FAILED, NOT_STARTED = "planned", "done", "skipped", "failed", "not started"


@register(
    "plan_maintenance",
    parameters=[
        P("table", "STRING",
          doc="Table to plan for (relative to the CALL's catalog); 'db.*' for every table of namespace db "
              "(and below), '*' for every table of the catalog."),
        P("execute", "BOOLEAN", default=False, doc="Run the planned calls in order (default: only show them)."),
        P("include_orphans", "BOOLEAN", default=True,
          doc="List the table location for orphan files while planning (default true)."),
        P("continue_on_error", "BOOLEAN", default=False,
          doc="After a failed step, run the table's remaining ones (default false: they are not started)."),
        P("namespace", "STRING", doc="Plan for every table of this namespace (and below) instead of one table."),
        P("max_duration", "STRING",
          doc="Time budget of the run, e.g. '45m' or '2h': steps not begun when it is spent are not started."),
    ],
    output=(
        Col("step", "INT", False, "Position of the call in the table's plan (1-based; 0 when the table could "
                                  "not be examined)."),
        Col("procedure", "STRING", False, "The procedure to call."),
        Col("arguments", "STRING", False, "Its named arguments in CALL syntax."),
        Col("call", "STRING", False, "The whole CALL statement."),
        Col("reason", "STRING", False, "The table_health checks this call answers."),
        Col("executed", "BOOLEAN", False, "Whether the call ran (done or failed)."),
        Col("result", "STRING", True, "What the call returned (column=value, ...); NULL when it did not run."),
        Col("status", "STRING", False,
            "planned (execute => false), done, skipped (an optional dependency is missing), failed or not started."),
        Col("output", "ARRAY<MAP<STRING,STRING>>", True,
            "The call's output rows, one map of column to value each; NULL when it did not run."),
        Col("duration_seconds", "DOUBLE", True, "How long the call took; NULL when it did not run."),
        Col("error", "STRING", True, "Why the step failed, was skipped or not started (with the fix), else NULL."),
        Col("table", "STRING", False, "The table the step is for (namespace.name)."),
    ),
)
def plan_maintenance(ctx: ProcedureContext, table: str | None, execute: bool | None, include_orphans: bool | None,
                     continue_on_error: bool | None, namespace: str | None, max_duration: str | None) -> list[tuple]:
    """Plan (and with execute => true run) the maintenance a table, a namespace or the catalog needs.

    A failing step never raises: its row says ``failed`` with the error, and the table's steps after
    it are ``not started`` unless ``continue_on_error``; other tables go on.  Several tables are
    planned in the order of :func:`procedures.core.health.fleet.benefit_score` (most to gain first), so a
    ``max_duration`` budget is spent where it helps most."""
    budget = parse_duration(max_duration)
    deadline = None if budget is None else time.monotonic() + budget
    many = parse_target(table, namespace)
    if many is None and table is None:
        raise MissingParameterError("Missing required parameters: [table] (or namespace)",
                                    procedure="plan_maintenance", parameters=["table"])
    rows: list[tuple] = []
    planned = []  # (score, ref, steps)
    for ref, loaded, error in examined_tables(ctx, table, many):
        if error is not None:
            rows.append((0, "table_health", "", "", "", False, None, FAILED, None, None, error, ref))
            continue
        findings = Action(TABLE_HEALTH, ctx.spark).run(loaded, TableHealthParams(ref, bool(include_orphans))).findings
        planned.append((benefit_score(findings), ref, plan_steps(findings)))
    for ref, steps in rank_by_benefit([((ref, steps), score) for score, ref, steps in planned]):
        stopped = False
        for i, step in enumerate(steps, 1):
            outcome = StepOutcome(PLANNED if not execute else NOT_STARTED)
            if execute and stopped:
                outcome = StepOutcome(NOT_STARTED, error="an earlier step of this table failed")
            elif execute and deadline is not None and time.monotonic() >= deadline:
                outcome = StepOutcome(NOT_STARTED, error=f"max_duration '{max_duration}' was spent before this step")
            elif execute:
                # the step's own jobs name themselves; this names whatever runs between them
                with optional_job(ctx.spark, f"plan_maintenance: {ref} step {i}/{len(steps)} {step.procedure}"):
                    outcome = run_step(ctx, step.procedure, step.arguments)
                stopped = outcome.status == FAILED and not continue_on_error
            rows.append((i, step.procedure, render_arguments(step.arguments),
                         render_call(ctx.catalog_name, step.procedure, step.arguments), ", ".join(step.reasons),
                         outcome.status in (DONE, FAILED), outcome.result, outcome.status, outcome.output,
                         outcome.duration_seconds, outcome.error, ref))
    return rows


def examined_tables(ctx: ProcedureContext, table: str | None, many: tuple[str, ...] | None) -> Iterator[tuple]:
    """``(reference, table, error)`` for each table to examine: the one ``table`` (whose errors
    raise, as any procedure's), or every table below namespace ``many``, where a table that cannot
    be loaded yields its error text instead so the others go on."""
    if many is None:
        ident = ctx.resolve(table)
        yield table_reference(ident), ctx.load_table(table), None
        return
    for ident in iter_tables(ctx.catalog, many):
        try:
            loaded = ctx.catalog.load_table(ident)
        except Exception as e:  # noqa: BLE001 -- one broken table must not stop a catalog's maintenance
            log.warning("plan_maintenance: cannot load %s", ".".join(ident), exc_info=True)
            yield table_reference(ident), None, f"{type(e).__name__}: {e}"
            continue
        yield table_reference(ident), loaded, None


@dataclass(frozen=True)
class StepOutcome:
    """How one planned call ended: its status, output (text and rows) and duration, or the error."""

    status: str
    result: str | None = None
    output: list[dict[str, str | None]] | None = None
    duration_seconds: float | None = None
    error: str | None = None


def run_step(ctx: ProcedureContext, procedure: str, arguments: Any) -> StepOutcome:
    """Run one planned call through the runner; a missing optional dependency skips it, any other
    error fails it (the table is as that procedure's own failure leaves it: unchanged)."""
    started = time.monotonic()
    try:
        result = ctx.call_procedure(procedure, arguments)
    except MissingDependencyError as e:
        # raised before the procedure does any work: nothing ran, and the message names the extra
        return StepOutcome(SKIPPED, duration_seconds=time.monotonic() - started, error=str(e))
    except Exception as e:  # noqa: BLE001 -- a failed step is reported in its row, not raised
        log.warning("plan_maintenance: %s failed", procedure, exc_info=True)
        return StepOutcome(FAILED, duration_seconds=time.monotonic() - started,
                           error=f"{type(e).__name__}: {e}")
    return StepOutcome(DONE, summarize_result(result), output_maps(result, ctx.tz),
                       time.monotonic() - started)


def output_maps(result: Any, tz: str = "UTC") -> list[dict[str, str | None]]:
    """A step's output rows as maps of column name to its value as Spark would cast it to STRING
    (NULL stays None); ``tz`` is the session time zone for timestamps."""
    columns = result.columns
    return [{c.name: None if v is None else format_value(v, c.type, tz) for c, v in zip(columns, r)}
            for r in result.rows]


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
