"""Snapshot expiration without an engine: parameters, result, ``CleanExpiredMetadata``, the files
expired snapshots alone reached, and the guarded delete loop (procedures.md §3.7; Java 1.10's
``ExpireSnapshotsSparkAction``).

The action that runs it (:mod:`procedures.spark.actions.expire_snapshots`) commits the metadata
change through the core -- :class:`~procedures.core.kernel.manage.ExpireSnapshots` (Java's
``RemoveSnapshots`` retention rules, recomputed on every retry) and, with
``clean_expired_metadata``, :class:`CleanExpiredMetadata` dropping the partition specs and schemas
no retained snapshot uses -- and only after that commit succeeded deletes what
:func:`expired_files` finds: the files the expired snapshots reached (from the metadata *before*
the commit) that no retained snapshot reaches (the metadata *after* it): content files,
manifests, manifest lists, statistics and partition-statistics files.  Reachability is computed
on the driver for small metadata; for large metadata the caller passes an engine step that
compares the content files as a distributed job (:mod:`procedures.core.gc.reachability`).

Table metadata files and ``version-hint.text`` are never deleted.  Deletes run on the calling
thread, or on ``max_concurrent_deletes`` threads, with up to three retries per file; a failed
delete is logged and not counted.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

from procedures.core.kernel import updates as metadata_updates
from procedures.core.gc import pruning
from procedures.core.gc import reachability
from procedures.core.gc.deletes import check_max_concurrent_deletes
from procedures.core.kernel.paths import PathSet, path_keys
from procedures.core.kernel.transaction import CommitContext
from procedures.spec.manifest.model import ManifestFile
from procedures.spec.metadata import TableMetadata

__all__ = [
    "ExpireSnapshotsParams", "ExpireSnapshotsResult", "CleanExpiredMetadata", "ExpiredFiles", "UnreachedStep",
    "expired_files",
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
#: an engine step: ``(candidate manifests, retained manifests) -> rows (path, kind)`` of the live
#: content files of the candidates that no live entry of the retained manifests names, computed as
#: a distributed job -- or None when the manifests are few enough for the driver
UnreachedStep = Callable[[Sequence[ManifestFile], Sequence[ManifestFile]], Any]


@dataclass
class ExpiredFiles:
    """Files to delete: small driver-side groups plus, for large metadata, a Spark DataFrame of
    content files ``(path, kind)`` that is collected or streamed only while deleting."""

    driver: dict[str, str]
    content_frame: Any = None
    #: manifest lists and manifests of the retained snapshots (already known reachable)
    retained_lists: tuple[str, ...] = ()
    retained_manifests: tuple[str, ...] = ()
    #: content files read from the expired manifests only while deleting (when no retained
    #: manifest can name them, nothing needs holding them all at once)
    content_stream: Callable[[], Iterator[tuple[str, str]]] | None = None

    def iterate(self, stream: bool) -> Iterator[tuple[str, str]]:
        """Every ``(path, kind)``.

        A Spark frame always reaches the driver a partition at a time (``toLocalIterator``), so the
        driver never holds every path; ``stream`` (Java's ``stream_results``) only decides whether
        the next partition is computed while the current one is deleted (it is, without ``stream``:
        the faster choice).  At 1M files that took 7.1 s and 12 MiB where collecting took 7.9 s and
        43 MiB.

        Content files come first: they are read from the expired manifests, which are among the
        driver items and must still exist while they are read.
        """
        if self.content_frame is not None:
            for r in self.content_frame.toLocalIterator(prefetchPartitions=not stream):
                yield r[0], r[1]
        if self.content_stream is not None:
            yield from self.content_stream()
        yield from self.driver.items()


def expired_files(io: Any, before: TableMetadata, after: TableMetadata, expired_ids: Iterable[int], *,
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


def _drop_reachable(io: Any, candidates: dict[str, str], manifests: Iterable[Any]) -> None:
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
