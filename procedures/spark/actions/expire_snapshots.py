"""The ``expire_snapshots`` action (procedures.md §3.7; Java 1.10's ``ExpireSnapshotsSparkAction``).

Order of work (Java commits before it reads what to delete; here the reads come first):

1. validate the arguments (``max_concurrent_deletes`` > 0 when the parameters are made, then
   ``gc.enabled`` and ``retain_last`` >= 1 by :class:`~procedures.core.kernel.manage.ExpireSnapshots` planned
   on the table as loaded) -- nothing is read or written before that;
2. find the files only the expired snapshots reached (:func:`procedures.core.gc.expire.expired_files`)
   on the expiration planned against the table as loaded, so that a manifest list or manifest that
   cannot be read fails the call before anything is committed;
3. commit the metadata change through the core: :class:`~procedures.core.kernel.manage.ExpireSnapshots`
   and, with ``clean_expired_metadata``, :class:`~procedures.core.gc.expire.CleanExpiredMetadata`;
   when the commit expired other snapshots than planned, or another commit landed, the files are
   found again on the metadata as committed;
4. only after that commit succeeded, delete those files (guarded by
   :class:`~procedures.core.gc.delete_guard.DeleteGuard`).  With a session and large metadata the
   content files are compared as Spark jobs (:func:`_unreached_in_spark`); otherwise on the driver,
   so ``expire_snapshots(table, params)`` works without Spark.
"""

from __future__ import annotations

import logging
from itertools import chain
from typing import Any, Callable, Sequence

from procedures.catalog.overlap import neighbours
from procedures.core.gc import reachability
from procedures.core.gc.delete_guard import DeleteGuard
from procedures.core.gc.deletes import delete_files
from procedures.core.gc.expire import (
    ExpireSnapshotsParams, ExpireSnapshotsResult, CleanExpiredMetadata, UnreachedStep, expired_files,
)
from procedures.core.kernel.builder import MetadataBuilder
from procedures.core.kernel.manage import ExpireSnapshots
from procedures.core.kernel.table_overlap import ForeignFolders, TableFolders, gc_roots, table_folders
from procedures.core.kernel.transaction import CommitContext, commit
from procedures.spark import listing as spark_listing
from procedures.spark.session import optional_job

__all__ = ["expire_snapshots"]

log = logging.getLogger(__name__)


def _unreached_in_spark(spark: Any, io: Any, keep: spark_listing.FrameKeeper) -> UnreachedStep:
    """The engine step of :func:`~procedures.core.gc.expire.expired_files`: a Spark job when the
    manifests pass the driver's limits (:func:`procedures.core.gc.reachability.use_spark`).  The
    manifests are read once (``keep`` persists what the plan reads twice)."""

    def step(candidates: Sequence[Any], retained: Sequence[Any]) -> Any:
        if not reachability.use_spark(spark, chain(candidates, retained)):
            return None
        props = dict(io.properties)
        return spark_listing.unreached_paths(keep(spark_listing.manifest_content_dataframe(spark, props, list(candidates))),
                                 keep(spark_listing.manifest_content_dataframe(spark, props, list(retained))))

    return step


def _as_planned(current: Any, planned: Any, base: Any, after: Any) -> bool:
    """Whether the commit expired what was planned on ``current`` and nothing landed since: the
    same snapshots (and statistics) before and after, so the files found before the commit stand."""
    def ids(md: Any) -> set[int]:
        return {s.snapshot_id for s in md.snapshots}

    def stats(md: Any) -> set[str]:
        return set(reachability.statistics_paths(md))

    return ids(base) == ids(current) and ids(after) == ids(planned) and stats(after) == stats(planned) \
        and stats(base) == stats(current)


def expire_snapshots(table: Any, params: ExpireSnapshotsParams, *, spark: Any = None,
                     committer: Callable[[Any, Sequence[Any]], Any] | None = None) -> ExpireSnapshotsResult:
    """Expire snapshots of ``table`` and delete the files only they reached.

    ``committer(table, operations)`` defaults to :func:`procedures.core.kernel.transaction.commit`.
    Raises :class:`ValidationError` (table unchanged) for bad arguments, ``gc.enabled=false`` and
    an explicit snapshot id that a kept branch or tag still points at.
    """
    plan_args = dict(now_ms=params.now_ms, older_than_ms=params.older_than_ms, retain_last=params.retain_last,
                     snapshot_ids=tuple(params.snapshot_ids))
    # the files to delete are found before the commit, on the expiration planned against the table
    # as loaded: a manifest list that cannot be read then fails the call with the table unchanged
    current = table.metadata
    # the expiration refuses gc.enabled=false, then a retain_last below 1, before anything is read
    preview = ExpireSnapshots(**plan_args)
    planned = MetadataBuilder(current).apply_all(preview.apply(current, CommitContext(table))).current()
    # read before the commit: a catalog that cannot be listed fails the call with the table unchanged
    others, warehouse = neighbours(table)
    expiring = preview.plan.expired_snapshot_ids if preview.plan else ()
    name = getattr(table, "name", "table")
    with optional_job(spark, f"expire_snapshots: files of {len(expiring)} expired snapshot(s) of {name}"), \
            spark_listing.FrameKeeper() as keep:
        unreached = _unreached_in_spark(spark, table.io, keep) if spark is not None else None
        found = expired_files(table.io, current, planned, expiring, unreached=unreached) if expiring else None
        if found is not None and found.content_frame is not None:
            # Spark is lazy: run the manifest reads now (kept for the deletes), before the commit
            keep(found.content_frame).count()
        op = ExpireSnapshots(**plan_args)
        ops: list[Any] = [op]
        if params.clean_expired_metadata:
            ops.append(CleanExpiredMetadata())
        committed = (committer or commit)(table, ops)
        plan = op.plan
        if plan is None or op.base is None or not plan.expired_snapshot_ids:
            return ExpireSnapshotsResult(removed_refs=plan.removed_refs if plan else ())
        # like Java, compare against the table as it is now: a commit that landed after ours counts
        after = committed.refresh().metadata if hasattr(committed, "refresh") else committed.metadata
        files = found if found is not None and _as_planned(current, planned, op.base, after) else \
            expired_files(table.io, op.base, after, plan.expired_snapshot_ids, unreached=unreached)
        roots, foreign = _delete_scope(table, after, name, others, warehouse)
        guard = DeleteGuard(committed, roots, metadata_location=getattr(committed, "metadata_location", None),
                            manifest_lists=files.retained_lists, manifests=files.retained_manifests,
                            procedure=f"expire_snapshots on {name}", others=foreign)
        counts = delete_files(table.io, files.iterate(params.stream_results),
                              max_concurrent_deletes=params.max_concurrent_deletes, guard=guard)
    log.info("expire_snapshots on %s: expired %d snapshot(s), deleted %d file(s)", name,
             len(plan.expired_snapshot_ids), sum(counts.values()))
    return ExpireSnapshotsResult(
        counts[reachability.DATA], counts[reachability.POSITION_DELETE], counts[reachability.EQUALITY_DELETE], counts[reachability.MANIFEST],
        counts[reachability.MANIFEST_LIST], counts[reachability.STATISTICS], plan.expired_snapshot_ids, plan.removed_refs,
        files.content_frame is not None, tuple(guard.report.outside), tuple(guard.report.reachable),
        tuple(guard.report.foreign),
    )


def _delete_scope(table: Any, md: Any, name: str, others: Sequence[TableFolders], warehouse: str | None
                  ) -> tuple[tuple[str, ...], ForeignFolders]:
    """The folders expire may delete in (:func:`~procedures.core.kernel.table_overlap.gc_roots`) and the
    other tables' folders it keeps out of, given the catalog's other tables."""
    own = table_folders(".".join(getattr(table, "identifier", ()) or ()), md)
    roots, dropped = gc_roots(own, others, warehouse)
    for why in dropped:
        log.warning("expire_snapshots on %s: not deleting in %s", name, why)
    return roots, ForeignFolders(roots, others, skip=own.name)
