"""The ``remove_orphan_files`` action (procedures.md §3.8; Java 1.10's ``DeleteOrphanFilesSparkAction``).

1. **Actual files**: the driver walks the top of the tree (:func:`procedures.io.directory_walk.walk`);
   when it holds more than :data:`DRIVER_MAX_DIRS` directories the rest is listed in Spark tasks
   (:func:`procedures.spark.listing.listed_keys_dataframe`).  A local walk lists names only: the
   ``older_than`` cutoff is applied after matching, to the files nothing references (a ``stat``
   each), so a young file is never an orphan nor a conflict either way.  Alternatively the rows of
   ``file_list_view`` (``file_path``, ``last_modified``) are used and nothing is listed, or the
   FileIO's prefix listing with ``prefix_listing``.
2. **Valid files**: :func:`procedures.core.gc.orphans.valid_paths`, the content files read in
   Spark tasks for large metadata; for many snapshots the manifest lists too
   (:func:`procedures.spark.listing.manifest_rows_dataframe`), so the driver holds nothing per manifest.
3. **Matching** on the driver (:func:`procedures.core.gc.orphans.find_orphans`) or, when either
   side is a Spark frame, as a Spark join (:func:`procedures.spark.listing.find_orphans_dataframe`).
4. **Deletion** (unless ``dry_run``): one delete per file, no retry, on ``max_concurrent_deletes``
   threads, each batch checked by :class:`~procedures.core.gc.delete_guard.DeleteGuard`; failures
   are logged.  A file outside ``location`` is never deleted.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterable, Iterator, Sequence

from procedures.catalog.overlap import neighbours
from procedures.core.gc import reachability
from procedures.core.gc.delete_guard import DeleteGuard
from procedures.core.gc.deletes import delete_files
from procedures.core.gc.orphans import (
    CONFLICTS, DEFAULT_OLDER_THAN_MS, DELETE_ORPHAN_FILES, INTERVAL_TOO_SHORT, MIN_INTERVAL_MS, EngineManifests,
    HiddenPathFilter,
    RemoveOrphanFilesParams, RemoveOrphanFilesResult, find_orphans, format_pairs, listing_location, valid_paths,
)
from procedures.core.kernel.paths import flatten_equal_map, local_path
from procedures.core.kernel.properties import require_gc_enabled
from procedures.core.kernel.table_overlap import ForeignFolders, TableFolders, gc_roots, table_folders
from procedures.errors import InvalidMetadataError, ValidationError
from procedures.io.directory_walk import list_with_prefix, modified_before, walk
from procedures.spark import listing as spark_listing
from procedures.spark.dataframes import functions
from procedures.spark.session import optional_job
from procedures.spec.manifest.avro_container import GONE_FILE

__all__ = ["remove_orphan_files", "DRIVER_MAX_DIRS", "DRIVER_MAX_FILES", "MAX_STREAMED_RESULTS",
           "MAX_METADATA_REFRESHES"]

log = logging.getLogger(__name__)

#: directories the driver lists before handing the rest of the tree to Spark tasks
DRIVER_MAX_DIRS = 64
#: files the driver's part of the listing holds at most (it hands the rest of the tree over once past
#: it), so the driver's memory does not follow the size of the first directories
DRIVER_MAX_FILES = 10_000
#: directories left for Spark tasks before the file limit stops the driver's walk (a table's
#: metadata folder listed first must not leave the whole data tree to one task)
DRIVER_MIN_HANDED_DIRS = 16
#: rows kept in the output with stream_results (the full count is logged)
MAX_STREAMED_RESULTS = 20_000
#: times a run starts over on the current metadata when a file its metadata named was removed by a
#: concurrent expire_snapshots
MAX_METADATA_REFRESHES = 3


def _content_in_spark(spark: Any, io: Any, schemes: dict[str, str], auths: dict[str, str]
                      ) -> Callable[[Sequence[Any]], Any]:
    """The engine step of :func:`~procedures.core.gc.orphans.valid_paths`: the manifests' content
    files as a Spark frame of normalised paths (:data:`procedures.spark.listing.VALID_KEYS`) when
    they pass the driver's limits, else None."""

    def step(manifests: Sequence[Any]) -> Any:
        if not reachability.use_spark(spark, manifests):
            return None
        return spark_listing.valid_keys_dataframe(spark, dict(io.properties), list(manifests), schemes, auths)

    return step


def _lists_in_spark(spark: Any, io: Any, schemes: dict[str, str], auths: dict[str, str], keep: spark_listing.FrameKeeper
                    ) -> Callable[[Any], EngineManifests | None]:
    """The engine step reading the manifest lists of :func:`~procedures.core.gc.orphans.valid_paths`:
    for many or large lists (:func:`~procedures.core.gc.reachability.lists_in_engine`) the manifests
    are read in Spark tasks and stay there, persisted because they feed the valid keys and, when the
    table changes during the run, the delete guard; else None."""

    def step(md: Any) -> EngineManifests | None:
        if not reachability.lists_in_engine(io, md):
            return None
        props = dict(io.properties)
        manifests = keep(spark_listing.manifest_rows_dataframe(spark, props, md))

        def manifest_paths() -> Iterator[str]:
            return (r[0] for r in manifests.select("manifest_path").toLocalIterator())

        return EngineManifests(spark_listing.manifest_keys_dataframe(manifests, props, schemes, auths), manifest_paths)

    return step


def _gone_file(e: BaseException) -> str | None:
    """The metadata file (manifest list or manifest) whose absence ``e`` reports, or ``""`` when it
    is one but its path is unknown (read in a Spark task); None for any other error."""
    if isinstance(e, InvalidMetadataError) and isinstance(e.__cause__, FileNotFoundError):
        return e.location or ""
    return "" if GONE_FILE in str(e) else None


def remove_orphan_files(table: Any, params: RemoveOrphanFilesParams, *, spark: Any = None) -> RemoveOrphanFilesResult:
    """Find (and unless ``dry_run`` delete) files below the location that no metadata references.

    A concurrent expire_snapshots may delete a manifest list or manifest the metadata read here
    still names: then the table is read again and the run starts over, up to
    :data:`MAX_METADATA_REFRESHES` times; only when the table's current metadata still names the
    missing file is it an error.
    """
    for attempt in range(MAX_METADATA_REFRESHES + 1):
        loaded = table.metadata_location
        try:
            return _remove_orphan_files(table, params, spark)
        except Exception as e:  # noqa: BLE001 -- only a file gone from under the run is retried
            gone = _gone_file(e)
            if gone is None or attempt == MAX_METADATA_REFRESHES or not hasattr(table, "refresh"):
                raise
            table.refresh()
            if table.metadata_location == loaded or (gone and gone in _metadata_files(table.metadata)):
                raise
            log.info("remove_orphan_files on %s: %s is gone and the table changed meanwhile (a concurrent "
                     "expire_snapshots); reading the current metadata again", getattr(table, "name", "table"),
                     gone or "a manifest")
    raise AssertionError("unreachable")  # pragma: no cover


def _metadata_files(md: Any) -> set[str]:
    """Manifest lists of ``md``'s snapshots (a manifest's absence is judged by the table's change)."""
    return {s.manifest_list for s in md.snapshots if s.manifest_list}


def _remove_orphan_files(table: Any, params: RemoveOrphanFilesParams, spark: Any) -> RemoveOrphanFilesResult:
    mode = params.mode()
    md = table.metadata
    require_gc_enabled(md.properties, DELETE_ORPHAN_FILES)
    now = int(time.time() * 1000) if params.now_ms is None else params.now_ms
    if params.older_than_ms is not None and not params.testing and now - params.older_than_ms < MIN_INTERVAL_MS:
        raise ValidationError(INTERVAL_TOO_SHORT)
    older_than = params.older_than_ms if params.older_than_ms is not None else now - DEFAULT_OLDER_THAN_MS
    location = listing_location(table.location, params.location)
    others = _foreign_folders(table, location)
    if params.file_list_view is not None and spark is None:
        raise ValidationError(f"file_list_view {params.file_list_view!r} needs a Spark session to be read")
    schemes = flatten_equal_map(params.equal_schemes)
    auths = flatten_equal_map(params.equal_authorities)
    path_filter = HiddenPathFilter.for_metadata(md)
    name = getattr(table, "name", "table")

    # a local walk learns ages only by a stat per file: it lists names, and the cutoff is applied
    # to the files no metadata references (object stores and HDFS list ages with the names)
    deferred = params.file_list_view is None and not params.prefix_listing and local_path(location) is not None
    listing_cutoff = None if deferred else older_than
    with optional_job(spark, f"remove_orphan_files: {name} older_than={older_than} location={location}"), \
            spark_listing.FrameKeeper() as keep:
        actual_list, pending, view_df = _actual_files(table, params, location, listing_cutoff, path_filter, spark)
        engine = spark is not None
        valid = valid_paths(table.io, md, table.metadata_location,
                            content_frame=_content_in_spark(spark, table.io, schemes, auths) if engine else None,
                            lists_step=_lists_in_spark(spark, table.io, schemes, auths, keep) if engine else None)
        used_spark = bool(pending) or view_df is not None or valid.content_frame is not None
        if not used_spark:
            old_enough = (lambda paths: modified_before(paths, older_than, table.io)) if deferred else None
            orphans: Iterable[str] = find_orphans(actual_list, valid.paths, equal_schemes=schemes,
                                                  equal_authorities=auths, mode=mode, old_enough=old_enough)
        else:
            if view_df is not None:
                actual = spark_listing.uri_frame(keep(view_df), "file_path", schemes, auths)
            else:
                actual = spark_listing.listed_keys_dataframe(spark, actual_list, pending, listing_cutoff,
                                                 path_filter.partition_prefixes,
                                                 dict(getattr(table.io, "properties", {}) or {}), schemes, auths)
            del actual_list  # the driver's part of the listing is in the frame now
            orphans = _find_orphans_spark(spark, actual, valid.paths, valid.content_frame, schemes, auths, mode,
                                          params.stream_results, keep, older_than if deferred else None)
        guard = DeleteGuard(table, (location,), metadata_location=table.metadata_location,
                            manifest_lists=valid.manifest_lists, manifests=valid.manifests,
                            procedure=f"remove_orphan_files on {name}", others=others)
        result = _delete(table.io, orphans, guard, params)
    return RemoveOrphanFilesResult(*result, used_spark=used_spark, kept_in_other_table=tuple(guard.report.foreign))


def _foreign_folders(table: Any, location: str) -> ForeignFolders:
    """The other tables' folders the run keeps out of, from one look at the catalog; refuses
    (:class:`ValidationError`, nothing listed) a table whose location is a storage root or holds
    the warehouse root: listing it would list every table."""
    others, warehouse = neighbours(table)
    own = table_folders(".".join(getattr(table, "identifier", ()) or ()), table.metadata)
    _, dropped = gc_roots(TableFolders(own.name, own.location), others, warehouse)
    if dropped:
        raise ValidationError(
            f"Cannot remove orphan files of {getattr(table, 'name', own.name)}: its {dropped[0]}. Every file below "
            "it would be listed, other tables' files among them; move the table (rewrite_table_path) below the "
            "warehouse root first.")
    return ForeignFolders((location,), others, skip=own.name)


def _actual_files(table: Any, params: RemoveOrphanFilesParams, location: str, older_than: int | None,
                  path_filter: HiddenPathFilter, spark: Any) -> tuple[list[str], list[str], Any]:
    """``(files listed on the driver, directories left to Spark tasks, file_list_view frame or None)``;
    a walk with ``older_than=None`` lists files of any age."""
    if params.file_list_view is not None:
        return [], [], _view_files(spark, params.file_list_view, location, older_than)
    if params.prefix_listing:
        return list_with_prefix(table.io, location, older_than, path_filter), [], None
    if spark is None:
        return walk([location], older_than, path_filter, io=table.io)[0], [], None
    files, pending = walk([location], older_than, path_filter, max_dirs=DRIVER_MAX_DIRS,
                          max_files=DRIVER_MAX_FILES, min_pending=DRIVER_MIN_HANDED_DIRS, io=table.io)
    return files, pending, None


def _view_files(spark: Any, view: str, location: str, older_than: int) -> Any:
    from pyspark.sql import types as T  # noqa: PLC0415 -- pyspark only with a session

    F = functions(spark)
    df = spark.table(view)
    fields = {f.name: f.dataType for f in df.schema.fields}
    for col, kind, want in (("file_path", "string", T.StringType), ("last_modified", "timestamp", T.TimestampType)):
        if col not in fields:
            raise ValidationError(
                f"Invalid file_list_view {view}: it has no {col} column (columns: {', '.join(fields)})"
            )
        if not isinstance(fields[col], want):
            raise ValidationError(f"Invalid {col} column: {fields[col].simpleString()} is not a {kind}")
    young = df.where(F.col("last_modified") < F.expr(f"timestamp_micros({int(older_than) * 1000})"))
    # the view may list any spelling of any folder: keep what lies inside the location once normalised
    return spark_listing.within_dataframe(young.select("file_path"), "file_path", location)


def _find_orphans_spark(spark: Any, actual: Any, valid_list: list[str], valid_df: Any, schemes: dict[str, str],
                        auths: dict[str, str], mode: str, stream: bool, keep: spark_listing.FrameKeeper,
                        older_than: int | None) -> Iterator[str]:
    valid = spark_listing.driver_keys_dataframe(spark, valid_list, schemes, auths, actual=False)
    if valid_df is not None:
        valid = valid.unionByName(valid_df)
    orphans, conflicts = spark_listing.find_orphans_dataframe(actual, valid, mode, keep, older_than)
    if conflicts:
        raise ValidationError(CONFLICTS.format(format_pairs(conflicts)))
    rows = orphans.toLocalIterator() if stream else iter(orphans.collect())
    return (r[0] for r in rows)


def _delete(io: Any, orphans: Iterable[str], guard: DeleteGuard,
            params: RemoveOrphanFilesParams) -> tuple[tuple[str, ...], int, int]:
    """Delete (unless ``dry_run``) the orphans that pass the guard; a dry run reports exactly those."""
    kept: list[str] = []
    total = 0
    limit = MAX_STREAMED_RESULTS if params.stream_results else None

    def accepted(path: str, _kind: str) -> None:
        nonlocal total
        total += 1
        if limit is None or len(kept) < limit:
            kept.append(path)

    # untracked metadata.json files are orphans too; the tracked ones are valid and never get here
    counts = delete_files(io, ((p, "orphan") for p in orphans), max_concurrent_deletes=params.max_concurrent_deletes,
                          retries=0, protect=None, guard=guard, dry_run=params.dry_run, accepted=accepted)
    if limit is not None and total > limit:
        log.info("remove_orphan_files: %d orphan files; the result holds the first %d", total, limit)
    return tuple(kept), total, counts["orphan"]
