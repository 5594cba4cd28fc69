"""Orphan-file detection without an engine (procedures.md §3.8; Java 1.10's
``DeleteOrphanFilesSparkAction``): the listing location, the hidden-path filter, the valid files
and the matching rules.  The action that lists, matches at scale and deletes is
:mod:`procedures.spark.actions.remove_orphan_files`; the directory walk is
:mod:`procedures.io.directory_walk`.

1. **Actual files**: the files below ``location`` (default: the table location) modified before
   ``older_than``, skipping hidden paths (a name starting with ``_`` or ``.``, except directories
   of partition fields whose names start that way, e.g. ``_bucket=3``).  The driver lists the top
   of the tree; when it holds more than the action's ``DRIVER_MAX_DIRS`` directories the rest is
   listed in Spark tasks (:func:`procedures.spark.listing.list_directories`).  Alternatively the rows of
   ``file_list_view`` (``file_path``, ``last_modified``) are used and nothing is listed.
2. **Valid files**: everything the metadata references -- content files, manifests and manifest
   lists of *all* snapshots, statistics and partition-statistics files, the current metadata
   file, the files of its metadata log and ``version-hint.text``.
3. **Matching**: both sides are parsed as URIs like Hadoop's ``Path`` (``file:/x``, ``file:///x``
   and ``/x`` share the path ``/x``), schemes and authorities are mapped through
   ``equal_schemes`` (always including ``s3n,s3a -> s3``) and ``equal_authorities``, and files
   are joined on the path alone.  A file with no valid path is an orphan; a file whose path is
   valid only under another scheme/authority is a *prefix mismatch*, handled by
   ``prefix_mismatch_mode``: ``ERROR`` fails naming the conflicting pairs (nothing deleted),
   ``IGNORE`` keeps the file, ``DELETE`` deletes it.
4. **Deletion** (unless ``dry_run``): one delete per file, no retry, on ``max_concurrent_deletes``
   threads; failures are logged.  A file outside ``location`` is never deleted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from procedures.core.gc import reachability
from procedures.core.gc.deletes import check_max_concurrent_deletes
from procedures.core.gc.engine import EngineManifests, ValidFiles
from procedures.core.gc.hidden_paths import HiddenPathFilter
from procedures.core.kernel.ownership import resolve_local
from procedures.core.kernel.paths import join_path, normalize_path, path_keys, relative_path
from procedures.errors import ValidationError
from procedures.spec.manifest.model import ManifestFile
from procedures.spec.metadata import TableMetadata

__all__ = [
    "RemoveOrphanFilesParams", "RemoveOrphanFilesResult", "listing_location", "HiddenPathFilter", "find_orphans",
    "format_pairs", "valid_paths", "ValidFiles", "EngineManifests", "PREFIX_MISMATCH_MODES", "DELETE_ORPHAN_FILES",
    "INTERVAL_TOO_SHORT", "CONFLICTS", "DEFAULT_OLDER_THAN_MS", "MIN_INTERVAL_MS",
]

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


def valid_paths(io: Any, md: TableMetadata, metadata_location: str | None, *,
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
