"""Snapshot-management procedures: rollback_to_snapshot, rollback_to_timestamp, set_current_snapshot,
cherrypick_snapshot, publish_changes, fast_forward, ancestors_of and register_table.

Parameters, output columns and error texts follow Iceberg's Spark procedures (procedures.md §3.1-§3.6,
§3.14, §3.15).  They are metadata-only: each one is a single commit of an operation from
:mod:`procedures.core.kernel.manage` (which re-validates on every retry) or, for ``ancestors_of``, a read.
The six that move refs take ``dry_run`` (beyond Java): the same commit, planned on a sandbox
table (:mod:`procedures.catalog.sandbox`) and never made.
The eight share their table parameter and output columns and have no action of their own, so they
stay together in one module instead of eight near-identical ones.
"""

from __future__ import annotations

from procedures.core.kernel.manage import (
    CherryPick, FastForward, RollbackTo, RollbackToTime, SetCurrentSnapshot, ancestor_ids, wap_snapshot,
)
from procedures.errors import ValidationError
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.framework.sqltypes import micros_to_millis

__all__ = [
    "rollback_to_snapshot", "rollback_to_timestamp", "set_current_snapshot", "cherrypick_snapshot",
    "publish_changes", "fast_forward", "ancestors_of", "register_table",
]

_TABLE = P("table", "STRING", True, doc="Table to change (relative to the CALL's catalog).")
_PREV_CUR = (
    Col("previous_snapshot_id", "BIGINT", False, "Head of main before the call."),
    Col("current_snapshot_id", "BIGINT", False, "Head of main after the call."),
)
_SRC_CUR = (
    Col("source_snapshot_id", "BIGINT", False, "The picked (staged) snapshot."),
    Col("current_snapshot_id", "BIGINT", False, "Head of main after the call."),
)


@register(
    "rollback_to_snapshot",
    parameters=[_TABLE, P("snapshot_id", "BIGINT", True, doc="Ancestor of main's head that becomes the head."), DRY_RUN],
    output=_PREV_CUR,
)
def rollback_to_snapshot(ctx: ProcedureContext, table: str, snapshot_id: int, dry_run: bool) -> list[tuple]:
    """Point ``main`` at an ancestor of its current head (metadata only, no new snapshot)."""
    t = ctx.load_table(table, dry_run=dry_run)
    op = RollbackTo(snapshot_id)
    ctx.commit(t, [op])
    return [(op.previous_snapshot_id, snapshot_id)]


@register(
    "rollback_to_timestamp",
    parameters=[_TABLE, P("timestamp", "TIMESTAMP", True, doc="Point in time; the newest older ancestor wins."), DRY_RUN],
    output=_PREV_CUR,
)
def rollback_to_timestamp(ctx: ProcedureContext, table: str, timestamp: int, dry_run: bool) -> list[tuple]:
    """Point ``main`` at the newest ancestor committed strictly before ``timestamp``."""
    t = ctx.load_table(table, dry_run=dry_run)
    op = RollbackToTime(micros_to_millis(timestamp))
    ctx.commit(t, [op])
    return [(op.previous_snapshot_id, op.snapshot_id)]


@register(
    "set_current_snapshot",
    parameters=[
        _TABLE,
        P("snapshot_id", "BIGINT", doc="Snapshot to make current."),
        P("ref", "STRING", doc="Branch or tag whose snapshot becomes current."),
        DRY_RUN,
    ],
    output=(
        Col("previous_snapshot_id", "BIGINT", True, "Head of main before the call; NULL when there was none."),
        Col("current_snapshot_id", "BIGINT", False, "Head of main after the call."),
    ),
)
def set_current_snapshot(ctx: ProcedureContext, table: str, snapshot_id: int | None, ref: str | None,
                         dry_run: bool) -> list[tuple]:
    """Make any snapshot current, or the snapshot of a branch or tag; no ancestry requirement."""
    # argument checks come before the load, as in Java: a bad combination on an unknown table
    # names the argument problem, not the missing table
    if (snapshot_id is None) == (ref is None):
        raise ValidationError("Either snapshot_id or ref must be provided, not both")
    t = ctx.load_table(table, dry_run=dry_run)
    op = SetCurrentSnapshot.for_ref(t.metadata, ref) if ref is not None else SetCurrentSnapshot(snapshot_id)
    ctx.commit(t, [op])
    return [(op.previous_snapshot_id, op.snapshot_id)]


@register(
    "cherrypick_snapshot",
    parameters=[_TABLE, P("snapshot_id", "BIGINT", True, doc="Snapshot whose changes are applied to main."), DRY_RUN],
    output=_SRC_CUR,
)
def cherrypick_snapshot(ctx: ProcedureContext, table: str, snapshot_id: int, dry_run: bool) -> list[tuple]:
    """Apply an append, a dynamic overwrite or a fast-forward snapshot to ``main``."""
    t = ctx.load_table(table, dry_run=dry_run)
    op = CherryPick(snapshot_id)
    ctx.commit(t, [op])
    return [(snapshot_id, op.current_snapshot_id)]


@register(
    "publish_changes",
    parameters=[_TABLE, P("wap_id", "STRING", True, doc="Write-audit-publish id of the staged snapshot."), DRY_RUN],
    output=_SRC_CUR,
)
def publish_changes(ctx: ProcedureContext, table: str, wap_id: str, dry_run: bool) -> list[tuple]:
    """Cherry-pick the one snapshot staged with ``wap.id = wap_id`` onto ``main``."""
    t = ctx.load_table(table, dry_run=dry_run)
    staged = wap_snapshot(t.metadata, wap_id)
    op = CherryPick(staged.snapshot_id)
    ctx.commit(t, [op])
    return [(staged.snapshot_id, op.current_snapshot_id)]


@register(
    "fast_forward",
    parameters=[
        _TABLE,
        P("branch", "STRING", True, doc="Branch to move forward (created when missing)."),
        P("to", "STRING", True, doc="Branch or tag whose snapshot becomes the branch head."),
        DRY_RUN,
    ],
    output=(
        Col("branch_updated", "STRING", False, "The branch argument."),
        Col("previous_ref", "BIGINT", True, "Head of the branch before; NULL when it did not exist."),
        Col("updated_ref", "BIGINT", False, "Head of the branch after."),
    ),
)
def fast_forward(ctx: ProcedureContext, table: str, branch: str, to: str, dry_run: bool) -> list[tuple]:
    """Move ``branch`` to ``to``'s snapshot when that is a true fast-forward."""
    t = ctx.load_table(table, dry_run=dry_run)
    op = FastForward(branch, to)
    ctx.commit(t, [op])
    return [(branch, op.previous_snapshot_id, op.updated_snapshot_id)]


@register(
    "ancestors_of",
    parameters=[_TABLE, P("snapshot_id", "BIGINT", doc="Snapshot whose lineage is listed; default the current one.")],
    output=(
        Col("snapshot_id", "BIGINT", True, "A snapshot of the lineage, newest first."),
        Col("timestamp", "BIGINT", True, "Its commit time in epoch milliseconds."),
    ),
)
def ancestors_of(ctx: ProcedureContext, table: str, snapshot_id: int | None) -> list[tuple]:
    """The snapshot and its ancestors still in the metadata, newest first (read-only)."""
    md = ctx.load_table(table).metadata
    if snapshot_id is None:
        snapshot_id = md.current_snapshot_id if md.current_snapshot_id is not None else -1
    if md.snapshot_by_id(snapshot_id) is None:
        raise ValidationError(f"Cannot find snapshot: {snapshot_id}")
    return [(sid, md.snapshot_by_id(sid).timestamp_ms) for sid in ancestor_ids(md, snapshot_id)]


@register(
    "register_table",
    parameters=[
        P("table", "STRING", True, doc="Identifier to create in the CALL's catalog."),
        P("metadata_file", "STRING", True, doc="Path or URI of an existing *.metadata.json."),
    ],
    output=(
        Col("current_snapshot_id", "BIGINT", True, "Current snapshot of the registered table."),
        Col("total_records_count", "BIGINT", True, "Its summary total-records."),
        Col("total_data_files_count", "BIGINT", True, "Its summary total-data-files."),
    ),
)
def register_table(ctx: ProcedureContext, table: str, metadata_file: str) -> list[tuple]:
    """Register an existing metadata file under a new identifier (no data is read or written)."""
    if not table or not table.strip():
        raise ValidationError("Cannot handle an empty identifier for argument table")
    if not metadata_file or not metadata_file.strip():
        raise ValidationError("Cannot handle an empty argument metadata_file")
    ident = ctx.resolve(table)
    registered = ctx.catalog.register_table(ident, metadata_file)
    ctx.changed_tables.append((ctx.catalog_name, ident))
    snap = registered.metadata.current_snapshot()
    if snap is None:
        return [(None, None, None)]

    def total(key: str) -> int | None:
        raw = snap.summary.get(key)
        return int(raw) if raw is not None else None

    return [(snap.snapshot_id, total("total-records"), total("total-data-files"))]
