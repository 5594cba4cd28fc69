"""``compute_table_stats`` (procedures.md §3.18): NDV theta sketches of columns of a snapshot, in a
Puffin statistics file registered for that snapshot.

Parameters and output follow Iceberg Java 1.10's Spark 3.5 procedure (``table``, ``snapshot_id``,
``columns``), mapped onto :class:`~procedures.core.table_stats.column_sketches.TableStatsParams` and
run by the uniform action.
Needs the ``stats`` extra (``datasketches``).  No row for a table without snapshots.
"""

from __future__ import annotations

from procedures.core.table_stats.column_sketches import COMPUTE_TABLE_STATS, TableStatsParams
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter
from procedures.framework.registry import register
from procedures.spark.engine.action import Action

__all__ = ["compute_table_stats"]


@register(
    "compute_table_stats",
    parameters=[
        Parameter("table", "STRING", True, doc="Table to compute statistics for."),
        Parameter("snapshot_id", "BIGINT", doc="Snapshot to compute for; default the current snapshot."),
        Parameter("columns", "ARRAY<STRING>", doc="Columns to sketch; default every top-level primitive column."),
        DRY_RUN,
    ],
    output=(Col("statistics_file", "STRING", True, "Path of the Puffin statistics file written."),),
)
def compute_table_stats(ctx: ProcedureContext, table: str, snapshot_id: int | None,
                        columns: list[str] | None, dry_run: bool) -> list[tuple]:
    """Sketch the columns, write the Puffin file and register it (one commit)."""
    t = ctx.load_table(table, dry_run=dry_run)
    params = TableStatsParams(snapshot_id, None if columns is None else tuple(columns))
    return Action(COMPUTE_TABLE_STATS, ctx.spark, committer=ctx.commit).run(t, params).rows()
