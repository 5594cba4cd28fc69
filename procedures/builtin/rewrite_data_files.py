"""``rewrite_data_files`` (procedures.md §3.9): declaration, strategy and options checked up front
(:func:`procedures.core.rewrite.data_files.parse_strategy`,
:func:`procedures.core.rewrite.planner.parse_rewrite_options`), the action
(:func:`procedures.spark.actions.rewrite_data_files.run_rewrite`), the output row."""

from __future__ import annotations

from procedures.core.rewrite.data_files import RewriteResult, parse_strategy, parse_where
from procedures.core.rewrite.planner import parse_rewrite_options
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.spark.actions.rewrite_data_files import run_rewrite
from procedures.spark.session import active_session

__all__ = ["rewrite_data_files"]


@register(
    "rewrite_data_files",
    parameters=[
        P("table", "STRING", True, doc="Table to compact."),
        P("strategy", "STRING", doc="binpack or sort (case-insensitive); default binpack, or sort when sort_order is given."),
        P("sort_order", "STRING", doc="'col ASC NULLS LAST, ...' or 'zorder(c1, c2)'; default: the table's sort order."),
        P("options", "MAP<STRING,STRING>", doc="Rewrite options (target-file-size-bytes, partial-progress.enabled, ...)."),
        P("where", "STRING", doc="Predicate selecting the files to consider (whole files are rewritten)."),
        DRY_RUN,
    ],
    output=(
        Col("rewritten_data_files_count", "INT", False, "Data files replaced."),
        Col("added_data_files_count", "INT", False, "Data files written."),
        Col("rewritten_bytes_count", "BIGINT", False, "Total size of the replaced files."),
        Col("failed_data_files_count", "INT", False, "Files of groups that failed (partial progress only)."),
        Col("removed_delete_files_count", "INT", False, "Delete files removed (DVs of rewritten files, dangling deletes)."),
    ),
)
def rewrite_data_files(ctx: ProcedureContext, table: str, strategy: str | None, sort_order: str | None,
                       options: dict | None, where: str | None, dry_run: bool) -> list[tuple]:
    """Rewrite small, large or delete-heavy data files into well-sized (optionally sorted) files."""
    t = ctx.load_table(table, dry_run=dry_run)
    md = t.metadata
    name = f"{ctx.catalog_name}.{'.'.join(t.identifier)}"
    cs = ctx.case_sensitive
    how = parse_strategy(md, name, strategy, sort_order, case_sensitive=cs)
    expr = parse_where(md, where, cs)
    if md.current_snapshot() is None:
        return [RewriteResult().row()]
    opts = parse_rewrite_options(
        options or {}, rewriter=how.rewriter, table_properties=md.properties,
        spec_ids=[s.spec_id for s in md.partition_specs], current_spec_id=md.default_spec_id,
    )
    spark = active_session(ctx.spark)
    result = run_rewrite(spark, t, opts, how, filter=expr, case_sensitive=cs, committer=ctx.commit)
    return [result.row()]
