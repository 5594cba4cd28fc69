"""``rewrite_data_files`` (procedures.md §3.9): the declaration, the CALL's arguments as
:class:`~procedures.core.data_rewrite.compaction.RewriteDataFilesParams` (validated in the
capability's ``plan``), the uniform action, the output row."""

from __future__ import annotations

from procedures.core.data_rewrite.compaction import REWRITE_DATA_FILES, RewriteDataFilesParams
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter
from procedures.framework.registry import register
from procedures.spark.engine.action import Action

__all__ = ["rewrite_data_files"]


@register(
    "rewrite_data_files",
    parameters=[
        Parameter("table", "STRING", True, doc="Table to compact."),
        Parameter("strategy", "STRING", doc="binpack or sort (case-insensitive); default binpack, or sort when sort_order is given."),
        Parameter("sort_order", "STRING", doc="'col ASC NULLS LAST, ...' or 'zorder(c1, c2)'; default: the table's sort order."),
        Parameter("options", "MAP<STRING,STRING>", doc="Rewrite options (target-file-size-bytes, partial-progress.enabled, ...)."),
        Parameter("where", "STRING", doc="Predicate selecting the files to consider (whole files are rewritten)."),
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
    params = RewriteDataFilesParams(
        table_name=f"{ctx.catalog_name}.{'.'.join(t.identifier)}", strategy=strategy, sort_order=sort_order,
        options=options or {}, where=where, case_sensitive=ctx.case_sensitive,
    )
    return [Action(REWRITE_DATA_FILES, ctx.spark, committer=ctx.commit).run(t, params).row()]
