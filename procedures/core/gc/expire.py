"""The ``expire_snapshots`` capability (procedures.md §3.7; Java 1.10's ``ExpireSnapshotsSparkAction``):
parameters, result, :func:`plan`, :func:`execute`, ``CleanExpiredMetadata`` and the files expired
snapshots alone reached.

Order of work (Java commits before it reads what to delete; here the reads come first):

1. :func:`plan` validates the arguments (``max_concurrent_deletes`` > 0 when the parameters are made,
   then ``gc.enabled`` and ``retain_last`` >= 1 by :class:`~procedures.core.kernel.manage.ExpireSnapshots`
   planned on the metadata as loaded) -- nothing is read or written before that;
2. :func:`execute` finds the files only the expired snapshots reached (:func:`expired_files`) on that
   planned expiration, so that a manifest list or manifest that cannot be read fails the call before
   anything is committed;
3. commits the metadata change through the engine's committer --
   :class:`~procedures.core.kernel.manage.ExpireSnapshots` (Java's ``RemoveSnapshots`` retention rules,
   recomputed on every retry) and, with ``clean_expired_metadata``, :class:`CleanExpiredMetadata`
   dropping the partition specs and schemas no retained snapshot uses; when the commit expired other
   snapshots than planned, or another commit landed, the files are found again on the metadata as
   committed;
4. only after that commit succeeded, deletes (guarded by
   :class:`~procedures.core.gc.delete_guard.DeleteGuard`) what :func:`expired_files` finds: the files the expired snapshots reached (from the metadata *before*
the commit) that no retained snapshot reaches (the metadata *after* it): content files,
manifests, manifest lists, statistics and partition-statistics files.  Reachability is computed
on the driver for small metadata; for large metadata the engine compares the content files as a
distributed job (:meth:`~procedures.core.gc.gc_engine.GcEngine.unreached_content`).

Table metadata files and ``version-hint.text`` are never deleted.  Deletes run on the calling
thread, or on ``max_concurrent_deletes`` threads, with up to three retries per file; a failed
delete is logged and not counted.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

from procedures.core.gc import pruning
from procedures.core.gc import reachability
from procedures.core.gc.delete_guard import DeleteGuard
from procedures.core.gc.deletes import check_max_concurrent_deletes, delete_files
from procedures.core.gc.gc_engine import GcEngine
from procedures.core.kernel import updates as metadata_updates
from procedures.core.kernel.builder import MetadataBuilder
from procedures.core.kernel.capability import Capability
from procedures.core.kernel.manage import ExpireSnapshots
from procedures.core.kernel.paths import PathSet, path_keys
from procedures.core.kernel.table_overlap import ForeignFolders, TableFolders, gc_roots, table_folders
from procedures.core.kernel.transaction import CommitContext
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import ManifestFile
from procedures.spec.metadata import TableMetadata

__all__ = [
    "ExpireSnapshotsParams", "ExpireSnapshotsResult", "ExpireSnapshotsPlan", "CleanExpiredMetadata", "ExpiredFiles",
    "UnreachedStep", "expired_files", "plan", "execute", "EXPIRE_SNAPSHOTS",
]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ExpireSnapshotsParams:
    """The procedure's arguments in Python terms (times in epoch milliseconds, None = default)."""

    older_than_ms: int | None = None
    retain_last: int | None = None
    max_concurrent_deletes: int | None = None
    stream_results: bool = False
    snapshot_ids: tuple[int, ...] = ()
    clean_expired_metadata: bool = False
    #: the expiration's "now" (for ref ages and default cutoffs); None = the wall clock
    now_ms: int | None = None

    def __post_init__(self) -> None:
        # the one argument check that needs no table, made where the arguments are taken; the
        # others (gc.enabled, then retain_last) are the expiration's own, on the table it expires
        check_max_concurrent_deletes(self.max_concurrent_deletes)


@dataclass(frozen=True)
class ExpireSnapshotsResult:
    """Counts of files actually deleted, by type, plus what the commit expired."""

    deleted_data_files_count: int = 0
    deleted_position_delete_files_count: int = 0
    deleted_equality_delete_files_count: int = 0
    deleted_manifest_files_count: int = 0
    deleted_manifest_lists_count: int = 0
    deleted_statistics_files_count: int = 0
    expired_snapshot_ids: frozenset[int] = field(default_factory=frozenset)
    removed_refs: tuple[str, ...] = ()
    #: True when the content files were compared as Spark jobs (large metadata)
    used_spark: bool = False
    #: files only expired snapshots reached that lie outside the table's folders: kept (and logged)
    kept_outside_location: tuple[str, ...] = ()
    #: files that became reachable again (a concurrent commit), or that the retained metadata names
    #: itself (a manifest, list, statistics or metadata file), found right before the delete: kept
    kept_reachable: tuple[str, ...] = ()
    #: files inside a folder of another table of the catalog: kept
    kept_in_other_table: tuple[str, ...] = ()

    def row(self) -> tuple[int, ...]:
        """The procedure's single output row."""
        return (self.deleted_data_files_count, self.deleted_position_delete_files_count,
                self.deleted_equality_delete_files_count, self.deleted_manifest_files_count,
                self.deleted_manifest_lists_count, self.deleted_statistics_files_count)


@dataclass(frozen=True)
class ExpireSnapshotsPlan:
    """The expiration planned on the metadata as loaded: ``planned`` is that metadata once the
    expired snapshots (``expiring``) and aged refs are removed."""

    params: ExpireSnapshotsParams
    current: TableMetadata
    planned: TableMetadata
    expiring: frozenset[int]

    def operation(self) -> ExpireSnapshots:
        """A fresh :class:`~procedures.core.kernel.manage.ExpireSnapshots` of these parameters (the
        commit recomputes its plan on every attempt)."""
        p = self.params
        return ExpireSnapshots(now_ms=p.now_ms, older_than_ms=p.older_than_ms, retain_last=p.retain_last,
                               snapshot_ids=tuple(p.snapshot_ids))


def plan(metadata: TableMetadata, params: ExpireSnapshotsParams) -> ExpireSnapshotsPlan:
    """The expiration of ``metadata``; refuses (:class:`~procedures.errors.ValidationError`)
    ``gc.enabled=false``, then a ``retain_last`` below 1, then an explicit snapshot id a kept ref
    still points at -- the rules of :class:`~procedures.core.kernel.manage.ExpireSnapshots`, applied here
    to the metadata alone before anything is read."""
    preview = ExpireSnapshotsPlan(params, metadata, metadata, frozenset()).operation()
    # the expiration reads nothing through the commit context: it plans from the metadata alone
    updates = preview.apply(metadata, None)  # type: ignore[arg-type]
    planned = MetadataBuilder(metadata).apply_all(updates).current()
    expiring = frozenset(preview.plan.expired_snapshot_ids) if preview.plan else frozenset()
    return ExpireSnapshotsPlan(params, metadata, planned, expiring)


def execute(table: Any, planned: ExpireSnapshotsPlan, engine: GcEngine) -> ExpireSnapshotsResult:
    """Expire the planned snapshots of ``table`` and delete the files only they reached (module
    docstring: reads, commit, deletes)."""
    params, current = planned.params, planned.current
    # read before the commit: a catalog that cannot be listed fails the call with the table unchanged
    others, warehouse = engine.neighbours(table)
    name = getattr(table, "name", "table")
    with engine.job(f"expire_snapshots: files of {len(planned.expiring)} expired snapshot(s) of {name}"):
        def unreached(candidates: Sequence[ManifestFile], retained: Sequence[ManifestFile]) -> Any:
            return engine.unreached_content(table.io, candidates, retained)

        found = expired_files(table.io, current, planned.planned, planned.expiring, unreached=unreached) \
            if planned.expiring else None
        if found is not None and found.content_frame is not None:
            # a distributed read runs now (kept for the deletes), before the commit
            engine.materialize(found.content_frame)
        op = planned.operation()
        ops: list[Any] = [op]
        if params.clean_expired_metadata:
            ops.append(CleanExpiredMetadata())
        committed = engine.commit(table, ops)
        done = op.plan
        if done is None or op.base is None or not done.expired_snapshot_ids:
            return ExpireSnapshotsResult(removed_refs=done.removed_refs if done else ())
        # like Java, compare against the table as it is now: a commit that landed after ours counts
        after = committed.refresh().metadata if hasattr(committed, "refresh") else committed.metadata
        files = found if found is not None and _as_planned(current, planned.planned, op.base, after) else \
            expired_files(table.io, op.base, after, done.expired_snapshot_ids, unreached=unreached)
        roots, foreign = _delete_scope(table, after, name, others, warehouse)
        guard = DeleteGuard(committed, roots, metadata_location=getattr(committed, "metadata_location", None),
                            manifest_lists=files.retained_lists, manifests=files.retained_manifests,
                            procedure=f"expire_snapshots on {name}", others=foreign)
        counts = delete_files(table.io, files.iterate(engine, params.stream_results),
                              max_concurrent_deletes=params.max_concurrent_deletes, guard=guard)
    log.info("expire_snapshots on %s: expired %d snapshot(s), deleted %d file(s)", name,
             len(done.expired_snapshot_ids), sum(counts.values()))
    return ExpireSnapshotsResult(
        counts[reachability.DATA], counts[reachability.POSITION_DELETE], counts[reachability.EQUALITY_DELETE],
        counts[reachability.MANIFEST], counts[reachability.MANIFEST_LIST], counts[reachability.STATISTICS],
        done.expired_snapshot_ids, done.removed_refs, files.content_frame is not None,
        tuple(guard.report.outside), tuple(guard.report.reachable), tuple(guard.report.foreign),
    )


def _as_planned(current: TableMetadata, planned: TableMetadata, base: TableMetadata, after: TableMetadata) -> bool:
    """Whether the commit expired what was planned on ``current`` and nothing landed since: the
    same snapshots (and statistics) before and after, so the files found before the commit stand."""
    def ids(md: TableMetadata) -> set[int]:
        return {s.snapshot_id for s in md.snapshots}

    def stats(md: TableMetadata) -> set[str]:
        return set(reachability.statistics_paths(md))

    return ids(base) == ids(current) and ids(after) == ids(planned) and stats(after) == stats(planned) \
        and stats(base) == stats(current)


def _delete_scope(table: Any, md: TableMetadata, name: str, others: Sequence[TableFolders], warehouse: str | None
                  ) -> tuple[tuple[str, ...], ForeignFolders]:
    """The folders expire may delete in (:func:`~procedures.core.kernel.table_overlap.gc_roots`) and the
    other tables' folders it keeps out of, given the catalog's other tables."""
    own = table_folders(".".join(getattr(table, "identifier", ()) or ()), md)
    roots, dropped = gc_roots(own, others, warehouse)
    for why in dropped:
        log.warning("expire_snapshots on %s: not deleting in %s", name, why)
    return roots, ForeignFolders(roots, others, skip=own.name)


class CleanExpiredMetadata:
    """Drop partition specs and schemas that no retained snapshot uses (``clean_expired_metadata``).

    Applied after :class:`ExpireSnapshots` in the same commit, so ``base`` holds only the retained
    snapshots.  A spec is used when a manifest of a retained snapshot was written with it; a schema
    when a retained snapshot names it.  The default spec and the current schema always stay.
    """

    replayable = True

    def __init__(self) -> None:
        self._spec_ids_by_list: dict[str, frozenset[int]] = {}
        self.removed_spec_ids: tuple[int, ...] = ()
        self.removed_schema_ids: tuple[int, ...] = ()

    def apply(self, base: TableMetadata, ctx: CommitContext) -> list[metadata_updates.MetadataUpdate]:
        """Updates that remove the unused specs and schemas of ``base``."""
        todo = [s for s in base.snapshots if s.manifest_list and s.manifest_list not in self._spec_ids_by_list]
        if todo:
            read = reachability.read_snapshot_manifests(ctx.io, base, [s.snapshot_id for s in todo], per_snapshot=True)
            for s in todo:
                self._spec_ids_by_list[s.manifest_list] = frozenset(
                    m.partition_spec_id for m in read.manifests.get(s.snapshot_id, ()))
        used_specs = {base.default_spec_id}
        used_schemas = {base.current_schema_id}
        for s in base.snapshots:
            used_specs.update(self._spec_ids_by_list.get(s.manifest_list or "", ()))
            if s.schema_id is not None:
                used_schemas.add(s.schema_id)
        self.removed_spec_ids = tuple(sorted(p.spec_id for p in base.partition_specs if p.spec_id not in used_specs))
        self.removed_schema_ids = tuple(sorted(s.schema_id for s in base.schemas if s.schema_id not in used_schemas))
        out: list[metadata_updates.MetadataUpdate] = []
        if self.removed_spec_ids:
            out.append(metadata_updates.RemovePartitionSpecs(self.removed_spec_ids))
        if self.removed_schema_ids:
            out.append(metadata_updates.RemoveSchemas(self.removed_schema_ids))
        return out


# ------------------------------------------------------------------------------------ files
#: an engine step (:meth:`~procedures.core.gc.gc_engine.GcEngine.unreached_content` bound to a FileIO):
#: ``(candidate manifests, retained manifests) -> rows (path, kind)`` of the live content files of the
#: candidates that no live entry of the retained manifests names, computed as a distributed job -- or
#: None when the manifests are few enough for the driver
UnreachedStep = Callable[[Sequence[ManifestFile], Sequence[ManifestFile]], Any]


@dataclass
class ExpiredFiles:
    """Files to delete: small driver-side groups plus, for large metadata, the engine's rows of
    content files ``(path, kind)``, brought to the driver only while deleting."""

    driver: dict[str, str]
    content_frame: Any = None
    #: manifest lists and manifests of the retained snapshots (already known reachable)
    retained_lists: tuple[str, ...] = ()
    retained_manifests: tuple[str, ...] = ()
    #: content files read from the expired manifests only while deleting (when no retained
    #: manifest can name them, nothing needs holding them all at once)
    content_stream: Callable[[], Iterator[tuple[str, str]]] | None = None

    def iterate(self, engine: GcEngine, stream: bool) -> Iterator[tuple[str, str]]:
        """Every ``(path, kind)``.

        The engine's rows always reach the driver a part at a time (:meth:`GcEngine.iterate`), so the
        driver never holds every path; ``stream`` (Java's ``stream_results``) only decides whether
        the next part is computed while the current one is deleted (it is, without ``stream``:
        the faster choice).  At 1M files that took 7.1 s and 12 MiB where collecting took 7.9 s and
        43 MiB.

        Content files come first: they are read from the expired manifests, which are among the
        driver items and must still exist while they are read.
        """
        if self.content_frame is not None:
            for row in engine.iterate(self.content_frame, prefetch=not stream):
                yield row[0], row[1]
        if self.content_stream is not None:
            yield from self.content_stream()
        yield from self.driver.items()


def expired_files(io: FileAccess, before: TableMetadata, after: TableMetadata, expired_ids: Iterable[int], *,
                  unreached: UnreachedStep | None = None) -> ExpiredFiles:
    """Files reachable from ``expired_ids`` in ``before`` and from no snapshot of ``after``.

    ``unreached`` is the engine's step for large metadata (see :data:`UnreachedStep`); without one,
    or when it returns None, the content files are compared on the driver.

    Manifests shared by an expired and a retained snapshot are never read for content: every live
    entry of a shared manifest is reachable from the retained snapshot.  Only manifests reachable
    exclusively from expired snapshots yield candidates, which are then checked against the
    retained manifests that may name one (:func:`procedures.core.gc.pruning.retained_to_read`).
    """
    expired_ids = [i for i in expired_ids if before.snapshot_by_id(i) is not None]
    if not expired_ids:
        return ExpiredFiles({})
    retained_ids = [s.snapshot_id for s in after.snapshots]
    shared: dict[str, ManifestFile] = {}  # a manifest both sides reach is one object
    old = reachability.read_snapshot_manifests(io, before, expired_ids, shared=shared)
    kept = reachability.read_snapshot_manifests(io, after, retained_ids, shared=shared)
    kept_manifests = kept.distinct()
    # every comparison is by normalised path: another spelling of a retained file keeps it
    kept_manifest_paths = PathSet(kept_manifests)
    only_expired = {p: m for p, m in old.distinct().items() if p not in kept_manifest_paths}

    driver: dict[str, str] = {}
    kept_lists = PathSet(p for p in kept.manifest_lists.values() if p)
    for path in old.manifest_lists.values():
        if path and path not in kept_lists:
            driver[path] = reachability.MANIFEST_LIST
    for path in only_expired:
        driver[path] = reachability.MANIFEST
    kept_stats = PathSet(reachability.statistics_paths(after))
    for path, kind in reachability.statistics_paths(before, expired_ids).items():
        if path not in kept_stats:
            driver[path] = kind

    retained = {"retained_lists": tuple(p for p in kept.manifest_lists.values() if p),
                "retained_manifests": tuple(kept_manifests)}
    if not only_expired:
        return ExpiredFiles(driver, **retained)
    to_read = pruning.retained_to_read(before, only_expired.values(), kept_manifests.values())
    log.info("expire: %d manifest(s) only expired snapshots reach; %d of %d retained manifest(s) may name "
             "their files", len(only_expired), len(to_read), len(kept_manifests))
    if unreached is not None:
        frame = unreached(list(only_expired.values()), to_read)
        if frame is not None:
            return ExpiredFiles(driver, frame, **retained)
    if not to_read:
        # no retained manifest can name them: every live entry goes, read while deleting
        expired = list(only_expired.values())
        return ExpiredFiles(driver, content_stream=lambda: reachability.stream_content_paths(io, expired), **retained)
    candidates = reachability.content_paths_driver(io, only_expired.values())
    if candidates:
        _drop_reachable(io, candidates, to_read)
    driver.update(candidates)
    return ExpiredFiles(driver, **retained)


def _drop_reachable(io: FileAccess, candidates: dict[str, str], manifests: Iterable[Any]) -> None:
    """Remove from ``candidates`` every path a live entry of ``manifests`` names (under any
    spelling), without keeping the retained paths themselves in memory."""
    ms = list(manifests)
    by_key: dict[str, list[str]] = {}
    for c in candidates:
        for k in path_keys(c):
            by_key.setdefault(k.path, []).append(c)

    def one(m: Any) -> list[str]:
        return [c for p, _ in reachability.manifest_content_paths(io, m) for k in path_keys(p) for c in by_key.get(k.path, ())]

    if len(ms) <= 1:
        hits: Iterable[list[str]] = map(one, ms)
        for found in hits:
            for p in found:
                candidates.pop(p, None)
        return
    with ThreadPoolExecutor(max_workers=min(reachability.DRIVER_READ_THREADS, len(ms)),
                            thread_name_prefix="read-manifest") as pool:
        for found in pool.map(one, ms):
            for p in found:
                candidates.pop(p, None)


#: the capability as the Spark layer runs it (:class:`procedures.spark.engine.action.Action`)
EXPIRE_SNAPSHOTS: Capability[ExpireSnapshotsParams, ExpireSnapshotsPlan, ExpireSnapshotsResult] = Capability(
    "expire_snapshots", plan, execute)
