"""``expire_snapshots`` (procedures.md §3.7): declaration, arguments to
:class:`~procedures.core.gc.expire.ExpireSnapshotsParams`, the capability
(:data:`procedures.core.gc.expire.EXPIRE_SNAPSHOTS`) run as an :class:`~procedures.spark.engine.action.Action`,
the output row."""

from __future__ import annotations

from procedures.core.gc.expire import EXPIRE_SNAPSHOTS, ExpireSnapshotsParams
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.framework.sqltypes import micros_to_millis
from procedures.spark.engine.action import Action

__all__ = ["expire_snapshots_procedure"]

_COUNT_DOC = "Number of {} deleted (only successful deletions)."


@register(
    "expire_snapshots",
    parameters=[
        P("table", "STRING", True, doc="Table to clean (relative to the CALL's catalog)."),
        P("older_than", "TIMESTAMP", doc="Expire snapshots older than this; default now - history.expire.max-snapshot-age-ms."),
        P("retain_last", "INT", doc="Ancestors kept per branch whatever their age (>= 1); default history.expire.min-snapshots-to-keep."),
        P("max_concurrent_deletes", "INT", doc="Threads deleting files (> 0); default: the calling thread."),
        P("stream_results", "BOOLEAN", doc="Stream the files to delete to the driver partition by partition."),
        P("snapshot_ids", "ARRAY<BIGINT>", doc="Snapshots to expire in addition to the retention rules."),
        P("clean_expired_metadata", "BOOLEAN", doc="Also remove partition specs and schemas no kept snapshot uses."),
        DRY_RUN,
    ],
    output=(
        Col("deleted_data_files_count", "BIGINT", True, _COUNT_DOC.format("data files")),
        Col("deleted_position_delete_files_count", "BIGINT", True, _COUNT_DOC.format("position delete files and DV files")),
        Col("deleted_equality_delete_files_count", "BIGINT", True, _COUNT_DOC.format("equality delete files")),
        Col("deleted_manifest_files_count", "BIGINT", True, _COUNT_DOC.format("manifests")),
        Col("deleted_manifest_lists_count", "BIGINT", True, _COUNT_DOC.format("manifest lists")),
        Col("deleted_statistics_files_count", "BIGINT", True, _COUNT_DOC.format("statistics and partition statistics files")),
    ),
)
def expire_snapshots_procedure(
    ctx: ProcedureContext, table: str, older_than: int | None, retain_last: int | None,
    max_concurrent_deletes: int | None, stream_results: bool | None, snapshot_ids: list[int] | None,
    clean_expired_metadata: bool | None, dry_run: bool,
) -> list[tuple]:
    """Remove old snapshots (and the refs that aged out) from metadata, then delete the data,
    delete, manifest, manifest-list and statistics files that only they reached."""
    params = ExpireSnapshotsParams(
        older_than_ms=micros_to_millis(older_than) if older_than is not None else None,
        retain_last=retain_last,
        max_concurrent_deletes=max_concurrent_deletes,
        stream_results=bool(stream_results),
        snapshot_ids=tuple(int(i) for i in snapshot_ids or () if i is not None),
        clean_expired_metadata=bool(clean_expired_metadata),
    )
    t = ctx.load_table(table, dry_run=dry_run)
    result = Action(EXPIRE_SNAPSHOTS, ctx.spark, committer=ctx.commit).run(t, params)
    return [result.row()]
