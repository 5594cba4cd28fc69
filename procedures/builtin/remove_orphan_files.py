"""``remove_orphan_files`` (procedures.md §3.8): declaration, arguments to
:class:`~procedures.core.gc.orphans.RemoveOrphanFilesParams`, the capability
(:data:`procedures.core.gc.orphans.REMOVE_ORPHAN_FILES`, run as an
:class:`~procedures.spark.engine.action.Action`), the output rows."""

from __future__ import annotations

from procedures.core.gc.orphans import REMOVE_ORPHAN_FILES, RemoveOrphanFilesParams
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.framework.sqltypes import micros_to_millis
from procedures.spark.engine.action import Action

__all__ = ["remove_orphan_files_procedure"]


@register(
    "remove_orphan_files",
    parameters=[
        P("table", "STRING", True, doc="Table to clean (relative to the CALL's catalog)."),
        P("older_than", "TIMESTAMP", doc="Only files modified before this; default now - 3 days; at least 24 h ago."),
        P("location", "STRING", doc="Directory to list; default the table location."),
        P("dry_run", "BOOLEAN", doc="Report orphan files without deleting them."),
        P("max_concurrent_deletes", "INT", doc="Threads deleting files (> 0); default: the calling thread."),
        P("file_list_view", "STRING", doc="Table/view with file_path STRING, last_modified TIMESTAMP to use instead of listing."),
        P("equal_schemes", "MAP<STRING,STRING>", doc="Schemes to treat as equal (comma-separated keys); s3n,s3a -> s3 always applies."),
        P("equal_authorities", "MAP<STRING,STRING>", doc="Authorities to treat as equal (comma-separated keys)."),
        P("prefix_mismatch_mode", "STRING", doc="ERROR (default), IGNORE or DELETE for files valid only under another scheme/authority."),
        P("prefix_listing", "BOOLEAN", doc="List with the FileIO's recursive prefix listing instead of a directory walk."),
        P("stream_results", "BOOLEAN", doc="Stream orphan paths to the driver; the result keeps at most 20,000 of them."),
    ],
    output=(Col("orphan_file_location", "STRING", False, "An orphan file (deleted unless dry_run)."),),
)
def remove_orphan_files_procedure(
    ctx: ProcedureContext, table: str, older_than: int | None, location: str | None, dry_run: bool | None,
    max_concurrent_deletes: int | None, file_list_view: str | None, equal_schemes: dict | None,
    equal_authorities: dict | None, prefix_mismatch_mode: str | None, prefix_listing: bool | None,
    stream_results: bool | None,
) -> list[tuple]:
    """Delete files below the table location that no snapshot or metadata file references."""
    params = RemoveOrphanFilesParams(
        older_than_ms=micros_to_millis(older_than) if older_than is not None else None,
        location=location, dry_run=bool(dry_run), max_concurrent_deletes=max_concurrent_deletes,
        file_list_view=file_list_view, equal_schemes=equal_schemes, equal_authorities=equal_authorities,
        prefix_mismatch_mode=prefix_mismatch_mode, prefix_listing=bool(prefix_listing),
        stream_results=bool(stream_results),
        testing=str(ctx.conf.get("spark.testing", "false")).strip().lower() == "true",
    )
    t = ctx.load_table(table)
    result = Action(REMOVE_ORPHAN_FILES, ctx.spark, committer=ctx.commit).run(t, params)
    return [(p,) for p in result.orphan_file_locations]
