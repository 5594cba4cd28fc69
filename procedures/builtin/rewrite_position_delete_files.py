"""``rewrite_position_delete_files`` (procedures.md §3.17): declaration, the ``where`` filter, the
action (:func:`procedures.spark.actions.rewrite_position_delete_files.rewrite_position_deletes`),
the output row."""

from __future__ import annotations

from procedures.core.rewrite.data_files import parse_where
from procedures.core.rewrite.planner import parse_position_delete_options
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.spark.actions.rewrite_position_delete_files import rewrite_position_deletes
from procedures.spark.session import active_session

__all__ = ["rewrite_position_delete_files"]


@register(
    "rewrite_position_delete_files",
    parameters=[
        P("table", "STRING", True, doc="Table whose position delete files are compacted."),
        P("options", "MAP<STRING,STRING>", doc="Rewrite options (target-file-size-bytes, min-input-files, ...)."),
        P("where", "STRING", doc="Predicate on base-table columns selecting delete files by partition."),
        DRY_RUN,
    ],
    output=(
        Col("rewritten_delete_files_count", "INT", False, "Delete files replaced."),
        Col("added_delete_files_count", "INT", False, "Delete files written."),
        Col("rewritten_bytes_count", "BIGINT", False, "Bytes of the replaced delete files."),
        Col("added_bytes_count", "BIGINT", False, "Bytes of the new delete files."),
    ),
)
def rewrite_position_delete_files(ctx: ProcedureContext, table: str, options: dict | None, where: str | None,
                                  dry_run: bool) -> list[tuple]:
    """Compact position delete files, dropping deletes of data files that are gone."""
    t = ctx.load_table(table, dry_run=dry_run)
    cs = ctx.case_sensitive
    expr = parse_where(t.metadata, where, cs)
    # bad options are the caller's error whatever the session: check them before asking for one
    parse_position_delete_options(options, table_properties=t.metadata.properties)
    return [rewrite_position_deletes(t, options, expr, committer=ctx.commit, case_sensitive=cs,
                                     spark=active_session(ctx.spark))]
