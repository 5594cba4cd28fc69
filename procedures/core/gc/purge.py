"""``DROP TABLE ... PURGE``: delete exactly the files a table's metadata reaches, never a listing.

Iceberg Java's catalogs purge with ``CatalogUtil.dropTableData`` and Spark with
``DeleteReachableFiles``: both read the metadata and delete what it names -- the content files of
every snapshot's manifests, the manifests, the manifest lists, statistics and partition-statistics
files, the metadata files of the log and the current one.  Deleting every file below the table
location instead (what this package once did) deletes whatever else lives there: other tables when
the location is a warehouse root, a user's own files, and through a symlinked folder, files
anywhere.  Here:

* :func:`plan_purge` reads everything first (:mod:`procedures.core.gc.reachability`): a missing or
  corrupt manifest list or manifest fails the purge with :class:`~procedures.errors.InvalidMetadataError`
  before anything is dropped or deleted (drop without ``PURGE`` to unregister such a table);
* a reached file is deleted only when it is the table's (:class:`procedures.core.kernel.ownership.Ownership`
  over :func:`procedures.core.gc.delete_guard.table_roots`: inside the table location or a
  ``write.*.path`` folder, also once local symlinks are resolved, and not a symlink itself); a file
  elsewhere (add_files, a snapshot table reading another table's files) is kept and reported --
  Iceberg Java would delete it;
* ``gc.enabled=false`` refuses a purge with content files, as Spark's ``purgeTable`` does;
* :func:`execute_purge` deletes, then removes the folders the deleted files leave empty, up to the
  table's root folder, one ``rmdir`` at a time: a folder holding anything else stays.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Iterable

from procedures.core.gc import reachability
from procedures.core.gc.delete_guard import table_roots
from procedures.core.kernel.ownership import Ownership
from procedures.core.kernel.paths import is_within, local_path
from procedures.core.kernel.properties import require_gc_enabled
from procedures.errors import InvalidMetadataError
from procedures.spec.file_access import FileAccess
from procedures.spec.metadata import TableMetadata

__all__ = ["PurgePlan", "PurgeResult", "plan_purge", "execute_purge", "PURGE_TABLE", "METADATA"]

log = logging.getLogger(__name__)

#: the kind of a table metadata file (``*.metadata.json``, ``version-hint.text``) in a plan
METADATA = "Metadata"
#: what a purge is called in its refusals
PURGE_TABLE = "purge table"
#: how many kept paths a log line names before it only counts
_LOG_SAMPLE = 10


@dataclass(frozen=True)
class PurgePlan:
    """What a purge deletes (``files``, ``(path, kind)`` in delete order) and what it keeps although
    the metadata reaches it (``outside``: not the table's), with the table's root folders."""

    files: tuple[tuple[str, str], ...]
    outside: tuple[str, ...]
    roots: tuple[str, ...]


@dataclass(frozen=True)
class PurgeResult:
    """What :func:`execute_purge` did: files deleted, deletes that failed, empty folders removed."""

    deleted: int
    failures: tuple[tuple[str, BaseException], ...]
    removed_dirs: int


def plan_purge(io: FileAccess, md: TableMetadata, metadata_location: str | None, *, content: bool = True,
               metadata_files: Iterable[str] = (), table: str = "table") -> PurgePlan:
    """Every file ``md`` reaches (with ``content``: data and delete files too), in Java's delete
    order (content files, manifests, manifest lists, statistics, metadata log, ``metadata_files``,
    the current metadata file), split into the table's files and the others.

    Raises :class:`ValidationError` for a purge of content files with ``gc.enabled=false`` and
    :class:`InvalidMetadataError` when a manifest list or manifest cannot be read: nothing may be
    deleted from a table whose reach is unknown, and no listing replaces it.
    """
    if content:
        require_gc_enabled(md.properties, PURGE_TABLE,
                           advice=f"; drop {table} without PURGE to unregister it and keep its files")
    try:
        sm = reachability.read_snapshot_manifests(io, md, slim=True)
        manifests = sm.distinct()
        contents = reachability.content_paths_driver(io, manifests.values()) if content else {}
    except (InvalidMetadataError, OSError) as e:
        raise InvalidMetadataError(
            f"Cannot purge {table}: its metadata cannot be read whole ({e}), so what it reaches is unknown and "
            "nothing was dropped or deleted. Repair the metadata, or drop the table without PURGE (its files stay)",
            location=getattr(e, "location", None),
        ) from e
    ordered: dict[str, str] = dict(contents)
    for path in manifests:
        ordered.setdefault(path, reachability.MANIFEST)
    for path in sm.manifest_lists.values():
        if path:
            ordered.setdefault(path, reachability.MANIFEST_LIST)
    for path, kind in reachability.statistics_paths(md).items():
        ordered.setdefault(path, kind)
    for path in [e.metadata_file for e in md.metadata_log] + list(metadata_files):
        ordered.setdefault(path, METADATA)
    if metadata_location:
        ordered.pop(metadata_location, None)
        ordered[metadata_location] = METADATA  # last: a purge cut short leaves the table's newest state
    roots = table_roots(md)
    owned = Ownership(roots)
    files: list[tuple[str, str]] = []
    outside: list[str] = []
    for path, kind in ordered.items():
        if owned.owns(path):
            files.append((path, kind))
        else:
            outside.append(path)
    if outside:
        more = f" and {len(outside) - _LOG_SAMPLE} more" if len(outside) > _LOG_SAMPLE else ""
        log.warning("Purge of %s: not deleting %d file(s) outside the table's folders (or symlinks): %s%s", table,
                    len(outside), ", ".join(outside[:_LOG_SAMPLE]), more)
    return PurgePlan(tuple(files), tuple(outside), roots)


def _checksum_sibling(path: str) -> str | None:
    """Hadoop's local ``.<name>.crc`` checksum file of ``path`` when it exists as a regular file (Java's
    local file system writes one next to every file; it goes with the file)."""
    local = local_path(path)
    if local is None:
        return None
    folder, name = os.path.split(local)
    crc = os.path.join(folder, f".{name}.crc")
    return path.rsplit("/", 1)[0] + f"/.{name}.crc" if os.path.isfile(crc) and not os.path.islink(crc) else None


def _emptied_folders(paths: Iterable[str], roots: Iterable[str]) -> list[str]:
    """The folders of ``paths`` and their parents up to the root holding them (itself included),
    deepest first."""
    roots = [r.rstrip("/") or "/" for r in roots]
    folders: set[str] = set()
    for path in paths:
        root = next((r for r in roots if is_within(r, path)), None)
        folder = path.rstrip("/").rsplit("/", 1)[0]
        while root is not None and folder and is_within(root, folder) and folder not in folders:
            folders.add(folder)
            if is_within(folder, root):
                break  # the root itself: nothing above it is the table's
            folder = folder.rsplit("/", 1)[0]
    return sorted(folders, key=lambda f: (-f.count("/"), f))


def execute_purge(io: FileAccess, plan: PurgePlan, *, max_workers: int = 8) -> PurgeResult:
    """Delete the files of ``plan`` (with their Hadoop checksum files), then remove each folder they
    leave empty, up to the table's root folders; a folder holding anything else is left as it is.
    Failures are logged and returned, never raised: the table is already dropped."""
    paths = [p for p, _ in plan.files]
    paths += [crc for crc in map(_checksum_sibling, paths) if crc is not None]
    result = io.delete_many(paths, max_workers=max_workers)
    for path, error in result.failures:
        log.warning("Purge: failed to delete %s: %s", path, error)
    removed = 0
    for folder in _emptied_folders([p for p, _ in plan.files], plan.roots):
        try:
            removed += bool(io.remove_empty_dir(folder))
        except OSError as e:
            log.warning("Purge: could not remove the empty folder %s: %s", folder, e)
    return PurgeResult(result.deleted, tuple(result.failures), removed)

