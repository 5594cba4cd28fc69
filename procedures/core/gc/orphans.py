"""The ``remove_orphan_files`` capability (procedures.md §3.8; Java 1.10's ``DeleteOrphanFilesSparkAction``):
parameters, result, :func:`plan`, :func:`execute`, the listing location, the valid files and the
matching rules.  The engine (:class:`~procedures.core.gc.gc_engine.GcEngine`) lists, reads and matches
at scale; the directory walk is :mod:`procedures.io.directory_walk`.

1. **Actual files**: the files below ``location`` (default: the table location) modified before
   ``older_than``, skipping hidden paths (:class:`~procedures.core.gc.hidden_paths.HiddenPathFilter`).
   The engine lists them (:meth:`~procedures.core.gc.gc_engine.GcEngine.list_files`: on Spark the driver
   walks the top of the tree and Spark tasks list the directories it hands over).  A local walk
   lists names only: the ``older_than`` cutoff is applied after matching, to the files nothing
   references (a ``stat`` each), so a young file is never an orphan nor a conflict either way.
   Alternatively the rows of ``file_list_view`` (``file_path``, ``last_modified``) are used and
   nothing is listed, or the FileIO's prefix listing with ``prefix_listing``.
2. **Valid files**: everything the metadata references -- content files, manifests and manifest
   lists of *all* snapshots, statistics and partition-statistics files, the current metadata
   file, the files of its metadata log and ``version-hint.text`` (:func:`valid_paths`; the engine
   reads the content files, and for many snapshots the manifest lists, of large metadata).
3. **Matching**: both sides are parsed as URIs like Hadoop's ``Path`` (``file:/x``, ``file:///x``
   and ``/x`` share the path ``/x``), schemes and authorities are mapped through
   ``equal_schemes`` (always including ``s3n,s3a -> s3``) and ``equal_authorities``, and files
   are joined on the path alone.  A file with no valid path is an orphan; a file whose path is
   valid only under another scheme/authority is a *prefix mismatch*, handled by
   ``prefix_mismatch_mode``: ``ERROR`` fails naming the conflicting pairs (nothing deleted),
   ``IGNORE`` keeps the file, ``DELETE`` deletes it.
   Matching runs on the driver (:func:`find_orphans`) or, when the engine holds either side, in the
   engine (:meth:`~procedures.core.gc.gc_engine.GcEngine.match_orphans`).
4. **Deletion** (unless ``dry_run``): one delete per file, no retry, on ``max_concurrent_deletes``
   threads, each batch checked by :class:`~procedures.core.gc.delete_guard.DeleteGuard`; failures are
   logged.  A file outside ``location`` is never deleted.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from procedures.core.gc import reachability
from procedures.core.gc.delete_guard import DeleteGuard
from procedures.core.gc.deletes import check_max_concurrent_deletes, delete_files
from procedures.core.gc.gc_engine import EngineManifests, GcEngine, ValidFiles
from procedures.core.gc.hidden_paths import HiddenPathFilter
from procedures.core.kernel.capability import Capability
from procedures.core.kernel.ownership import resolve_local
from procedures.core.kernel.paths import flatten_equal_map, join_path, local_path, normalize_path, path_keys, relative_path
from procedures.core.kernel.properties import require_gc_enabled
from procedures.core.kernel.table_overlap import ForeignFolders, TableFolders, gc_roots, table_folders
from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.avro_container import GONE_FILE
from procedures.spec.manifest.model import ManifestFile
from procedures.spec.metadata import TableMetadata

__all__ = [
    "RemoveOrphanFilesParams", "RemoveOrphanFilesResult", "listing_location", "HiddenPathFilter", "find_orphans",
    "format_pairs", "valid_paths", "ValidFiles", "EngineManifests", "PREFIX_MISMATCH_MODES", "DELETE_ORPHAN_FILES",
    "INTERVAL_TOO_SHORT", "CONFLICTS", "DEFAULT_OLDER_THAN_MS", "MIN_INTERVAL_MS", "MAX_STREAMED_RESULTS",
    "MAX_METADATA_REFRESHES", "RemoveOrphanFilesPlan", "plan", "execute", "REMOVE_ORPHAN_FILES",
]

log = logging.getLogger(__name__)

#: what remove_orphan_files is called in its refusals
DELETE_ORPHAN_FILES = "delete orphan files"
INTERVAL_TOO_SHORT = (
    "Cannot remove orphan files with an interval less than 24 hours. Executing this procedure with a short "
    "interval may corrupt the table if other operations are happening at the same time. If you are absolutely "
    "confident that no concurrent operations will be affected by removing orphan files with such a short interval, "
    "you can use the Action API to remove orphan files with an arbitrary interval."
)
CONFLICTS = (
    "Unable to determine whether certain files are orphan. Metadata references files that match listed/provided "
    "files except for authority/scheme. Please, inspect the conflicting authorities/schemes and provide which of "
    "them are equal by further configuring the action via equalSchemes() and equalAuthorities() methods. Set the "
    "prefix mismatch mode to 'NONE' to ignore remaining locations with conflicting authorities/schemes or to "
    "'DELETE' iff you are ABSOLUTELY confident that remaining conflicting authorities/schemes are different. It "
    "will be impossible to recover deleted files. Conflicting authorities/schemes: {}."
)
PREFIX_MISMATCH_MODES = ("ERROR", "IGNORE", "DELETE")
DEFAULT_OLDER_THAN_MS = 3 * 24 * 60 * 60 * 1000
#: decompressed manifest-list bytes :func:`valid_paths` fetches ahead of the decoding
VALID_PREFETCH_BYTES = 2 * 1024 * 1024
MIN_INTERVAL_MS = 24 * 60 * 60 * 1000
#: rows kept in the output with stream_results (the full count is logged)
MAX_STREAMED_RESULTS = 20_000
#: times a run starts over on the current metadata when a file its metadata named was removed by a
#: concurrent expire_snapshots
MAX_METADATA_REFRESHES = 3


# ------------------------------------------------------------------------------------ location
def listing_location(table_location: str, location: str | None) -> str:
    """The folder to list: ``location`` re-spelled under the table location, after checking that it
    is the table location or a folder below it (:func:`procedures.core.kernel.paths.is_within`).

    Raises :class:`ValidationError` naming both locations otherwise -- Iceberg Java lists any
    location it is given, which lets one call delete other tables' files.
    """
    table_location = table_location.rstrip("/") or "/"
    if location is None:
        return table_location
    if not location.strip():
        raise ValidationError("Invalid location '': pass the table location or a folder below it, or omit location")
    rel = relative_path(table_location, location)
    if rel is None:
        raise ValidationError(
            f"Cannot remove orphan files from location {location!r}: it is not the table location "
            f"{table_location!r} or a folder below it (compared after resolving '.', '..', doubled slashes "
            "and percent-escapes). Pass a folder inside the table, or omit location to clean the whole table."
        )
    _check_no_link_between(table_location, rel, location)
    return join_path(table_location, rel) if rel else table_location


def _check_no_link_between(table_location: str, rel: str, location: str) -> None:
    """Refuse a local ``location`` reached through a symlink below the table location: listing it
    would find (and delete) files wherever the link points -- outside the table, or the table's own
    files under a name no metadata uses."""
    real_table = resolve_local(table_location)
    if real_table is None or not rel:
        return
    real = resolve_local(join_path(table_location, rel))
    expected = join_path(real_table, rel)
    if real is not None and normalize_path(real).path != normalize_path(expected).path:
        raise ValidationError(
            f"Cannot remove orphan files from location {location!r}: a symlink on the way leads it to {real}, "
            f"not to the folder {expected} inside the table location {table_location!r}. Pass the real folder "
            "inside the table, or omit location; symlinks are never followed"
        )


# ------------------------------------------------------------------------------------ listing
# ------------------------------------------------------------------------------------ matching
def find_orphans(actual: Iterable[str], valid: Iterable[str], *, equal_schemes: Mapping[str, str],
                 equal_authorities: Mapping[str, str], mode: str,
                 old_enough: Callable[[list[str]], Sequence[bool]] | None = None) -> list[str]:
    """Orphans among ``actual`` (driver implementation of Java's ``findOrphanFiles``).

    Both sides are compared under every normalised reading (:func:`procedures.core.kernel.paths.path_keys`):
    a file is valid when any reading of it matches a valid path on scheme and authority.  Raises
    :class:`ValidationError` listing the conflicting ``(valid, actual)`` schemes and authorities when
    ``mode`` is ``ERROR`` and some file matched a valid path only under another scheme or authority.

    ``old_enough`` is the age cutoff of a listing that did not apply it (a flag per path, see
    :func:`procedures.io.directory_walk.modified_before`): it is asked about the files no valid path
    matches, and those it rejects are neither orphans nor conflicts, exactly as if the listing
    had left them out.
    """
    index: dict[str, set[tuple[str | None, str | None]]] = {}
    for v in valid:
        for k in path_keys(v, equal_schemes, equal_authorities):
            index.setdefault(k.path, set()).add((k.scheme, k.authority))
    # the files no valid path matches, in listing order, each with its mismatched pairs (none: no
    # valid path at all)
    unmatched: list[tuple[str, list[tuple[Any, tuple[str | None, str | None]]]]] = []
    seen: set[str] = set()
    for a in actual:
        if a in seen:
            continue
        seen.add(a)
        pairs = [(k, e) for k in path_keys(a, equal_schemes, equal_authorities) for e in index.get(k.path, ())]
        if not any(_component_match(s, k.scheme) and _component_match(au, k.authority) for k, (s, au) in pairs):
            unmatched.append((a, pairs))
    if old_enough is not None and unmatched:
        flags = old_enough([a for a, _ in unmatched])
        unmatched = [u for u, old in zip(unmatched, flags, strict=True) if old]
    orphans: list[str] = []
    conflicts: set[tuple[str | None, str | None]] = set()
    for a, pairs in unmatched:
        if not pairs or mode == "DELETE":
            orphans.append(a)
        elif mode == "ERROR":
            for k, (s, au) in pairs:
                if not _component_match(s, k.scheme):
                    conflicts.add((s, k.scheme))
                if not _component_match(au, k.authority):
                    conflicts.add((au, k.authority))
    if conflicts:
        raise ValidationError(CONFLICTS.format(format_pairs(conflicts)))
    return orphans


def _component_match(valid: str | None, actual: str | None) -> bool:
    return not valid or (actual is not None and valid.lower() == actual.lower())


def format_pairs(pairs: Iterable[tuple[str | None, str | None]]) -> str:
    """Conflicting ``(valid, actual)`` scheme/authority pairs as Java prints them."""
    def s(x: str | None) -> str:
        return "null" if x is None else x

    return "[" + ", ".join(f"({s(a)}, {s(b)})" for a, b in sorted(pairs, key=lambda p: (s(p[0]), s(p[1])))) + "]"


def valid_paths(io: FileAccess, md: TableMetadata, metadata_location: str | None, *,
                content_frame: Callable[[Sequence[ManifestFile]], Any] | None = None,
                lists_step: Callable[[TableMetadata], EngineManifests | None] | None = None) -> ValidFiles:
    """Everything the metadata references.  Content files are read on the driver, unless the
    engine step ``content_frame(manifests)`` returns them as a distributed frame with a ``path``
    column (it returns None when the manifests are few enough for the driver).  Before that,
    ``lists_step(md)`` may read the manifest lists themselves in engine tasks (it returns None when
    they are few enough for the driver): then nothing per manifest reaches the driver, which keeps
    only the lists, statistics and metadata files."""
    if lists_step is not None:
        engine = lists_step(md)
        if engine is not None:
            lists = tuple(dict.fromkeys(s.manifest_list for s in md.snapshots if s.manifest_list))
            return ValidFiles(_driver_paths(md, metadata_location, lists), engine.frame, lists, engine.manifests)
    # only paths are read from the manifests: their counts and partition summaries are not kept, and
    # lists are fetched a few MiB ahead (at 1,000 lists of 10,000 rows, 2 MiB ahead instead of 8 keeps
    # the driver's peak 3 MiB above what it holds, in the same time)
    sm = reachability.read_snapshot_manifests(io, md, slim=True, prefetch_bytes=VALID_PREFETCH_BYTES)
    manifests = sm.distinct()
    lists = tuple(p for p in sm.manifest_lists.values() if p)
    driver = _driver_paths(md, metadata_location, lists, manifests)
    frame = content_frame(list(manifests.values())) if content_frame is not None else None
    if frame is None:
        driver.extend(reachability.content_paths_driver(io, manifests.values()))
    return ValidFiles(driver, frame, lists, tuple(manifests))


def _driver_paths(md: TableMetadata, metadata_location: str | None, lists: Iterable[str],
                  manifests: Iterable[str] = ()) -> list[str]:
    """The valid paths the driver holds itself: manifest lists, the manifests when it read them,
    statistics files and the table's metadata files."""
    out = list(lists)
    out.extend(manifests)
    out.extend(reachability.statistics_paths(md))
    out.extend(reachability.metadata_file_paths(md, metadata_location))
    return out


# ------------------------------------------------------------------------------------ arguments and result
@dataclass(frozen=True)
class RemoveOrphanFilesParams:
    """The procedure's arguments in Python terms (times in epoch milliseconds, None = default)."""

    older_than_ms: int | None = None
    location: str | None = None
    dry_run: bool = False
    max_concurrent_deletes: int | None = None
    file_list_view: str | None = None
    equal_schemes: Mapping[str, str] | None = None
    equal_authorities: Mapping[str, str] | None = None
    prefix_mismatch_mode: str | None = None
    prefix_listing: bool = False
    stream_results: bool = False
    #: skip the 24-hour guard (Java: Spark conf ``spark.testing=true``)
    testing: bool = False
    now_ms: int | None = None

    def mode(self) -> str:
        """The prefix mismatch mode, upper-cased; ``Invalid mode`` for anything else."""
        if self.prefix_mismatch_mode is None:
            return "ERROR"
        m = str(self.prefix_mismatch_mode).upper()
        if m not in PREFIX_MISMATCH_MODES:
            raise ValidationError(
                f"Invalid mode: {self.prefix_mismatch_mode} (prefix_mismatch_mode must be one of ERROR, IGNORE, DELETE)"
            )
        return m

    def __post_init__(self) -> None:
        # the checks Java makes before it loads the table, made where the arguments are taken
        check_max_concurrent_deletes(self.max_concurrent_deletes)
        self.mode()


@dataclass(frozen=True)
class RemoveOrphanFilesResult:
    """Orphan files found (deleted unless ``dry_run``); with ``stream_results`` at most
    :data:`MAX_STREAMED_RESULTS` of them, ``orphan_count`` is always the full number."""

    orphan_file_locations: tuple[str, ...]
    orphan_count: int
    deleted_count: int
    used_spark: bool = False
    #: unreferenced files inside a folder of another table of the catalog: kept, not orphans
    kept_in_other_table: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------ plan and execute
@dataclass(frozen=True)
class RemoveOrphanFilesPlan:
    """A run planned on the metadata as loaded: the folder to list, the cutoff, the prefix mismatch
    mode, the equal schemes and authorities flattened, and the hidden-path filter of its specs."""

    params: RemoveOrphanFilesParams
    metadata: TableMetadata
    location: str
    older_than: int
    mode: str
    schemes: Mapping[str, str]
    auths: Mapping[str, str]
    path_filter: HiddenPathFilter


def plan(metadata: TableMetadata, params: RemoveOrphanFilesParams) -> RemoveOrphanFilesPlan:
    """Validate ``params`` against ``metadata``: ``gc.enabled``, the 24-hour guard on ``older_than``
    (off with ``testing``), a ``location`` inside the table (:func:`listing_location`)."""
    mode = params.mode()
    require_gc_enabled(metadata.properties, DELETE_ORPHAN_FILES)
    now = int(time.time() * 1000) if params.now_ms is None else params.now_ms
    if params.older_than_ms is not None and not params.testing and now - params.older_than_ms < MIN_INTERVAL_MS:
        raise ValidationError(INTERVAL_TOO_SHORT)
    older_than = params.older_than_ms if params.older_than_ms is not None else now - DEFAULT_OLDER_THAN_MS
    return RemoveOrphanFilesPlan(
        params, metadata, listing_location(metadata.location, params.location), older_than, mode,
        flatten_equal_map(params.equal_schemes), flatten_equal_map(params.equal_authorities),
        HiddenPathFilter.for_metadata(metadata))


def execute(table: Any, planned: RemoveOrphanFilesPlan, engine: GcEngine) -> RemoveOrphanFilesResult:
    """Find (and unless ``dry_run`` delete) the files below the location that no metadata references.

    A concurrent expire_snapshots may delete a manifest list or manifest the metadata read here
    still names: then the table is read again, planned again and the run starts over, up to
    :data:`MAX_METADATA_REFRESHES` times; only when the table's current metadata still names the
    missing file is it an error.
    """
    for attempt in range(MAX_METADATA_REFRESHES + 1):
        loaded = table.metadata_location
        try:
            return _run(table, planned, engine)
        except Exception as e:  # noqa: BLE001 -- only a file gone from under the run is retried
            gone = _gone_file(e)
            if gone is None or attempt == MAX_METADATA_REFRESHES or not hasattr(table, "refresh"):
                raise
            table.refresh()
            if table.metadata_location == loaded or (gone and gone in _manifest_lists(table.metadata)):
                raise
            log.info("remove_orphan_files on %s: %s is gone and the table changed meanwhile (a concurrent "
                     "expire_snapshots); reading the current metadata again", getattr(table, "name", "table"),
                     gone or "a manifest")
            planned = plan(table.metadata, planned.params)
    raise AssertionError("unreachable")  # pragma: no cover


def _gone_file(e: BaseException) -> str | None:
    """The metadata file (manifest list or manifest) whose absence ``e`` reports, or ``""`` when it
    is one but its path is unknown (read in an engine task); None for any other error."""
    if isinstance(e, InvalidMetadataError) and isinstance(e.__cause__, FileNotFoundError):
        return e.location or ""
    return "" if GONE_FILE in str(e) else None


def _manifest_lists(md: TableMetadata) -> set[str]:
    """Manifest lists of ``md``'s snapshots (a manifest's absence is judged by the table's change)."""
    return {s.manifest_list for s in md.snapshots if s.manifest_list}


def _run(table: Any, planned: RemoveOrphanFilesPlan, engine: GcEngine) -> RemoveOrphanFilesResult:
    params, md, location = planned.params, planned.metadata, planned.location
    older_than, schemes, auths = planned.older_than, planned.schemes, planned.auths
    others = _foreign_folders(table, md, location, engine)
    name = getattr(table, "name", "table")
    # a local walk learns ages only by a stat per file: it lists names, and the cutoff is applied
    # to the files no metadata references (object stores and HDFS list ages with the names)
    deferred = params.file_list_view is None and not params.prefix_listing and local_path(location) is not None
    listing_cutoff = None if deferred else older_than
    with engine.job(f"remove_orphan_files: {name} older_than={older_than} location={location}"):
        listing = engine.list_files(table.io, location, listing_cutoff, planned.path_filter,
                                    prefix_listing=params.prefix_listing, file_list_view=params.file_list_view,
                                    schemes=schemes, auths=auths)
        valid = valid_paths(
            table.io, md, table.metadata_location,
            content_frame=lambda manifests: engine.valid_content(table.io, manifests, schemes, auths),
            lists_step=lambda metadata: engine.engine_manifests(table.io, metadata, schemes, auths))
        used_engine = listing.in_engine or valid.content_frame is not None
        if not used_engine:
            old_enough = (lambda paths: engine.modified_before(table.io, paths, older_than)) if deferred else None
            orphans: Iterable[str] = find_orphans(listing.files, valid.paths, equal_schemes=schemes,
                                                  equal_authorities=auths, mode=planned.mode, old_enough=old_enough)
        else:
            orphans = engine.match_orphans(listing, valid, schemes, auths, planned.mode, stream=params.stream_results,
                                           older_than=older_than if deferred else None)
        guard = DeleteGuard(table, (location,), metadata_location=table.metadata_location,
                            manifest_lists=valid.manifest_lists, manifests=valid.manifests,
                            procedure=f"remove_orphan_files on {name}", others=others)
        kept, total, deleted = _delete(table.io, orphans, guard, params)
    return RemoveOrphanFilesResult(kept, total, deleted, used_spark=used_engine,
                                   kept_in_other_table=tuple(guard.report.foreign))


def _foreign_folders(table: Any, md: TableMetadata, location: str, engine: GcEngine) -> ForeignFolders:
    """The other tables' folders the run keeps out of, from one look at the catalog; refuses
    (:class:`ValidationError`, nothing listed) a table whose location is a storage root or holds
    the warehouse root: listing it would list every table."""
    others, warehouse = engine.neighbours(table)
    own = table_folders(".".join(getattr(table, "identifier", ()) or ()), md)
    _, dropped = gc_roots(TableFolders(own.name, own.location), others, warehouse)
    if dropped:
        raise ValidationError(
            f"Cannot remove orphan files of {getattr(table, 'name', own.name)}: its {dropped[0]}. Every file below "
            "it would be listed, other tables' files among them; move the table (rewrite_table_path) below the "
            "warehouse root first.")
    return ForeignFolders((location,), others, skip=own.name)


def _delete(io: FileAccess, orphans: Iterable[str], guard: DeleteGuard,
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


#: the capability as the Spark layer runs it (:class:`procedures.spark.engine.action.Action`)
REMOVE_ORPHAN_FILES: Capability[RemoveOrphanFilesParams, RemoveOrphanFilesPlan, RemoveOrphanFilesResult] = Capability(
    "remove_orphan_files", plan, execute)
