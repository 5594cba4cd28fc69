"""``rewrite_position_delete_files`` (procedures.md §3.17): the declaration, the CALL's arguments as
:class:`~procedures.core.data_rewrite.position_deletes.RewritePositionDeletesParams` (validated in the
capability's ``plan``), the uniform action, the output row."""

from __future__ import annotations

from procedures.core.data_rewrite.position_deletes import REWRITE_POSITION_DELETE_FILES, RewritePositionDeletesParams
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter
from procedures.framework.registry import register
from procedures.spark.engine.action import Action

__all__ = ["rewrite_position_delete_files"]


@register(
    "rewrite_position_delete_files",
    parameters=[
        Parameter("table", "STRING", True, doc="Table whose position delete files are compacted."),
        Parameter("options", "MAP<STRING,STRING>", doc="Rewrite options (target-file-size-bytes, min-input-files, ...)."),
        Parameter("where", "STRING", doc="Predicate on base-table columns selecting delete files by partition."),
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
    params = RewritePositionDeletesParams(options=options or {}, where=where, case_sensitive=ctx.case_sensitive)
    return [Action(REWRITE_POSITION_DELETE_FILES, ctx.spark, committer=ctx.commit).run(t, params).row()]
