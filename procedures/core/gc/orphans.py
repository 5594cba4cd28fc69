"""The ``remove_orphan_files`` procedure (procedures.md §3.8; Java 1.10's ``RemoveOrphanFilesProcedure``
and ``DeleteOrphanFilesSparkAction``).

1. **Actual files**: the files below ``location`` (default: the table location) modified before
   ``older_than``, skipping hidden paths (a name starting with ``_`` or ``.``, except directories
   of partition fields whose names start that way, e.g. ``_bucket=3``).  The driver lists the top
   of the tree; when it holds more than :data:`DRIVER_MAX_DIRS` directories the rest is listed
   in Spark tasks (:func:`procedures.spark.listing.list_directories`).  Alternatively the rows of
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

import logging
import os
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from procedures.core.paths import flatten_equal_map, path_keys, relative_path
from procedures.errors import ValidationError
from procedures.io.fileio import join_path, local_path
from procedures.maintenance import reachability as R
from procedures.maintenance.delete_guard import DeleteGuard
from procedures.maintenance.expire_snapshots import _job, delete_files, gc_enabled
from procedures.maintenance.params import OutputColumn as Col, Parameter as P, micros_to_millis
from procedures.maintenance.registry import ProcedureContext, register
from procedures.spec.metadata import TableMetadata

__all__ = [
    "RemoveOrphanFilesParams", "RemoveOrphanFilesResult", "remove_orphan_files", "listing_location",
    "HiddenPathFilter", "walk", "find_orphans", "valid_paths", "ValidFiles", "PREFIX_MISMATCH_MODES",
]

log = logging.getLogger(__name__)

GC_DISABLED = "Cannot delete orphan files: GC is disabled (deleting files may corrupt other tables)"
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
MIN_INTERVAL_MS = 24 * 60 * 60 * 1000
#: directories the driver lists before handing the rest of the tree to Spark tasks
DRIVER_MAX_DIRS = 64
#: rows kept in the output with stream_results (the full count is logged)
MAX_STREAMED_RESULTS = 20_000


# ------------------------------------------------------------------------------------ location
def listing_location(table_location: str, location: str | None) -> str:
    """The folder to list: ``location`` re-spelled under the table location, after checking that it
    is the table location or a folder below it (:func:`procedures.core.paths.is_within`).

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
    return join_path(table_location, rel) if rel else table_location


# ------------------------------------------------------------------------------------ listing
@dataclass(frozen=True)
class HiddenPathFilter:
    """Java's ``PartitionAwareHiddenPathFilter``: names starting with ``_`` or ``.`` are hidden,
    except those starting with ``<partition field>=`` for partition fields named that way."""

    partition_prefixes: tuple[str, ...] = ()

    @classmethod
    def for_metadata(cls, md: TableMetadata) -> "HiddenPathFilter":
        """The filter for every partition spec of the table."""
        names = {f"{f.name}=" for spec in md.partition_specs for f in spec.fields if f.name.startswith(("_", "."))}
        return cls(tuple(sorted(names)))

    def accept(self, name: str) -> bool:
        """True when ``name`` (one path segment) is not hidden."""
        if any(name.startswith(p) for p in self.partition_prefixes):
            return True
        return not name.startswith(("_", "."))


def _list_one(directory: str) -> tuple[list[tuple[str, int]], list[str]]:
    """Direct children of ``directory``: files with mtimes, and sub-directories."""
    local = local_path(directory)
    files: list[tuple[str, int]] = []
    dirs: list[str] = []
    if local is not None:
        try:
            entries = list(os.scandir(local))
        except (FileNotFoundError, NotADirectoryError):
            return files, dirs
        for e in entries:
            # Hadoop spells local files file:/x; the valid side matches whatever it spells
            full = "file:" + os.path.join(local, e.name)
            if e.is_dir(follow_symlinks=False):
                dirs.append(full)
            elif e.is_file():
                files.append((full, e.stat().st_mtime_ns // 1_000_000))
        return files, dirs
    import pyarrow.fs as pafs  # noqa: PLC0415

    fs, p = pafs.FileSystem.from_uri(directory)
    scheme, _, rest = directory.partition("://")
    # object stores list "bucket/key"; HDFS lists the path alone, without the authority
    prefix = f"{scheme}://" + (rest.split("/", 1)[0] if scheme in ("hdfs", "viewfs") else "")
    for info in fs.get_file_info(pafs.FileSelector(p, recursive=False, allow_not_found=True)):
        full = prefix + info.path
        if info.type == pafs.FileType.Directory:
            dirs.append(full)
        elif info.type == pafs.FileType.File:
            files.append((full, (info.mtime_ns or 0) // 1_000_000))
    return files, dirs


def _name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def walk(dirs: Sequence[str], older_than_ms: int, path_filter: HiddenPathFilter, *,
         max_dirs: int | None = None) -> tuple[list[str], list[str]]:
    """List ``dirs`` breadth-first: ``(files modified before older_than_ms, directories left unlisted)``.

    Hidden files and directories are skipped (hidden directories are not entered).  With
    ``max_dirs`` the walk stops after listing that many directories and returns the rest.
    """
    queue = deque(dirs)
    files: list[str] = []
    listed = 0
    while queue:
        if max_dirs is not None and listed >= max_dirs:
            break
        directory = queue.popleft()
        listed += 1
        found, subdirs = _list_one(directory)
        files.extend(p for p, mtime in found if mtime < older_than_ms and path_filter.accept(_name(p)))
        queue.extend(d for d in subdirs if path_filter.accept(_name(d)))
    return files, list(queue)


def _list_with_prefix(io: Any, location: str, older_than_ms: int, path_filter: HiddenPathFilter) -> list[str]:
    """``prefix_listing``: the FileIO's recursive listing, filtered by age and hidden segments."""
    out = []
    for info in io.list_prefix(location):
        rel = relative_path(location, info.path)
        if rel is None:
            continue
        if info.mtime_ms is not None and info.mtime_ms < older_than_ms and all(path_filter.accept(s) for s in rel.split("/")):
            out.append(info.path)
    return out


# ------------------------------------------------------------------------------------ matching
def find_orphans(actual: Iterable[str], valid: Iterable[str], *, equal_schemes: Mapping[str, str],
                 equal_authorities: Mapping[str, str], mode: str) -> list[str]:
    """Orphans among ``actual`` (driver implementation of Java's ``findOrphanFiles``).

    Both sides are compared under every normalised reading (:func:`procedures.core.paths.path_keys`):
    a file is valid when any reading of it matches a valid path on scheme and authority.  Raises
    :class:`ValidationError` listing the conflicting ``(valid, actual)`` schemes and authorities when
    ``mode`` is ``ERROR`` and some file matched a valid path only under another scheme or authority.
    """
    index: dict[str, set[tuple[str | None, str | None]]] = {}
    for v in valid:
        for k in path_keys(v, equal_schemes, equal_authorities):
            index.setdefault(k.path, set()).add((k.scheme, k.authority))
    orphans: list[str] = []
    conflicts: set[tuple[str | None, str | None]] = set()
    seen: set[str] = set()
    for a in actual:
        if a in seen:
            continue
        seen.add(a)
        pairs = [(k, e) for k in path_keys(a, equal_schemes, equal_authorities) for e in index.get(k.path, ())]
        if not pairs:
            orphans.append(a)
            continue
        if any(_component_match(s, k.scheme) and _component_match(au, k.authority) for k, (s, au) in pairs):
            continue
        if mode == "DELETE":
            orphans.append(a)
        elif mode == "ERROR":
            for k, (s, au) in pairs:
                if not _component_match(s, k.scheme):
                    conflicts.add((s, k.scheme))
                if not _component_match(au, k.authority):
                    conflicts.add((au, k.authority))
    if conflicts:
        raise ValidationError(CONFLICTS.format(_format_pairs(conflicts)))
    return orphans


def _component_match(valid: str | None, actual: str | None) -> bool:
    return not valid or (actual is not None and valid.lower() == actual.lower())


def _format_pairs(pairs: Iterable[tuple[str | None, str | None]]) -> str:
    def s(x: str | None) -> str:
        return "null" if x is None else x

    return "[" + ", ".join(f"({s(a)}, {s(b)})" for a, b in sorted(pairs, key=lambda p: (s(p[0]), s(p[1])))) + "]"


@dataclass(frozen=True)
class ValidFiles:
    """Everything the metadata references: paths on the driver, content paths as a Spark DataFrame
    for large metadata (else None), and the manifest lists and manifests that were read."""

    paths: list[str]
    content_frame: Any
    manifest_lists: tuple[str, ...]
    manifests: tuple[str, ...]


def valid_paths(io: Any, md: TableMetadata, metadata_location: str | None, *, spark: Any = None) -> ValidFiles:
    """Everything the metadata references (content files are read on the driver for small metadata
    and in Spark tasks for large metadata)."""
    sm = R.read_snapshot_manifests(io, md)
    manifests = sm.distinct()
    lists = tuple(p for p in sm.manifest_lists.values() if p)
    driver = list(lists)
    driver.extend(manifests)
    driver.extend(R.statistics_paths(md))
    driver.extend(R.metadata_file_paths(md, metadata_location))
    frame = None
    if R.use_spark(spark, manifests.values()):
        frame = R.content_paths_spark(spark, io, manifests.values()).select("path")
    else:
        driver.extend(R.content_paths_driver(io, manifests.values()))
    return ValidFiles(driver, frame, lists, tuple(manifests))


# ------------------------------------------------------------------------------------ entry point
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

    def validate(self) -> None:
        """Checks Java makes before it loads the table."""
        if self.max_concurrent_deletes is not None and self.max_concurrent_deletes <= 0:
            raise ValidationError(
                f"max_concurrent_deletes should have value > 0, value: {self.max_concurrent_deletes}"
            )
        self.mode()


@dataclass(frozen=True)
class RemoveOrphanFilesResult:
    """Orphan files found (deleted unless ``dry_run``); with ``stream_results`` at most
    :data:`MAX_STREAMED_RESULTS` of them, ``orphan_count`` is always the full number."""

    orphan_file_locations: tuple[str, ...]
    orphan_count: int
    deleted_count: int
    used_spark: bool = False


def remove_orphan_files(table: Any, params: RemoveOrphanFilesParams, *, spark: Any = None) -> RemoveOrphanFilesResult:
    """Find (and unless ``dry_run`` delete) files below the location that no metadata references."""
    params.validate()
    mode = params.mode()
    md = table.metadata
    if not gc_enabled(md):
        raise ValidationError(GC_DISABLED)
    now = int(time.time() * 1000) if params.now_ms is None else params.now_ms
    if params.older_than_ms is not None and not params.testing and now - params.older_than_ms < MIN_INTERVAL_MS:
        raise ValidationError(INTERVAL_TOO_SHORT)
    older_than = params.older_than_ms if params.older_than_ms is not None else now - DEFAULT_OLDER_THAN_MS
    location = listing_location(table.location, params.location)
    if params.file_list_view is not None and spark is None:
        raise ValidationError(f"file_list_view {params.file_list_view!r} needs a Spark session to be read")
    schemes = flatten_equal_map(params.equal_schemes)
    auths = flatten_equal_map(params.equal_authorities)
    path_filter = HiddenPathFilter.for_metadata(md)
    name = getattr(table, "name", "table")

    with _job(spark, f"remove_orphan_files: {name} older_than={older_than} location={location}"):
        actual_list, actual_df = _actual_files(table, params, location, older_than, path_filter, spark)
        valid = valid_paths(table.io, md, table.metadata_location, spark=spark)
        used_spark = actual_df is not None or valid.content_frame is not None
        if not used_spark:
            orphans: Iterable[str] = find_orphans(actual_list, valid.paths, equal_schemes=schemes,
                                                  equal_authorities=auths, mode=mode)
        else:
            orphans = _find_orphans_spark(spark, actual_list, actual_df, valid.paths, valid.content_frame, schemes,
                                          auths, mode, params.stream_results)
        guard = DeleteGuard(table, (location,), metadata_location=table.metadata_location,
                            manifest_lists=valid.manifest_lists, manifests=valid.manifests,
                            procedure=f"remove_orphan_files on {name}")
        result = _delete(table.io, orphans, guard, params)
    return RemoveOrphanFilesResult(*result, used_spark=used_spark)


def _actual_files(table: Any, params: RemoveOrphanFilesParams, location: str, older_than: int,
                  path_filter: HiddenPathFilter, spark: Any) -> tuple[list[str], Any]:
    if params.file_list_view is not None:
        return [], _view_files(spark, params.file_list_view, location, older_than)
    if params.prefix_listing:
        return _list_with_prefix(table.io, location, older_than, path_filter), None
    files, pending = walk([location], older_than, path_filter, max_dirs=DRIVER_MAX_DIRS if spark is not None else None)
    if not pending:
        return files, None
    from procedures.spark.listing import list_directories  # noqa: PLC0415

    return files, list_directories(spark, pending, older_than, path_filter.partition_prefixes)


def _view_files(spark: Any, view: str, location: str, older_than: int) -> Any:
    from pyspark.sql import functions as F, types as T  # noqa: PLC0415

    from procedures.spark.listing import within_dataframe  # noqa: PLC0415

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
    return within_dataframe(young.select("file_path"), "file_path", location)


def _find_orphans_spark(spark: Any, actual_list: list[str], actual_df: Any, valid_list: list[str], valid_df: Any,
                        schemes: dict[str, str], auths: dict[str, str], mode: str, stream: bool) -> Iterator[str]:
    from procedures.spark import listing as L  # noqa: PLC0415

    actual = L.paths_dataframe(spark, actual_list)
    if actual_df is not None:
        actual = actual.unionByName(actual_df.select("file_path"))
    valid = L.paths_dataframe(spark, valid_list)
    if valid_df is not None:
        valid = valid.unionByName(valid_df.withColumnRenamed("path", "file_path").select("file_path"))
    orphans, conflicts = L.find_orphans_dataframe(
        L.uri_dataframe(actual, "file_path", schemes, auths), L.uri_dataframe(valid, "file_path", schemes, auths), mode
    )
    if conflicts:
        raise ValidationError(CONFLICTS.format(_format_pairs(conflicts)))
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
    params.validate()
    t = ctx.load_table(table)
    result = remove_orphan_files(t, params, spark=ctx.spark)
    return [(p,) for p in result.orphan_file_locations]
