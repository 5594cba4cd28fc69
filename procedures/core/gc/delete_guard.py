"""The last check before garbage collection deletes a file.

Both collectors (expire_snapshots, remove_orphan_files) decide what to delete from the metadata
they read at the start; the deletes happen later, and another writer may commit in between.
:class:`DeleteGuard` is consulted right before each batch of deletes (and in a dry run, at the same
point) and removes from the batch:

* every file outside the table's own folders (:func:`table_roots`), also once local symlinks are
  resolved, and every symlink (:class:`procedures.core.ownership.Ownership`): a file brought in from another
  folder (add_files, a shared warehouse) is reported, never deleted -- Iceberg Java would delete it;
* every file that the table's *current* metadata reaches: it re-reads the table, and when the
  metadata changed since the collector's view it reads the new manifest lists, the manifests it
  has not seen yet, their statistics and metadata files, and keeps anything they name.

Paths are compared by their normalised path under both readings (:func:`procedures.core.paths.path_keys`),
ignoring scheme and authority, so any spelling of a reachable file keeps it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from procedures.core.gc import reachability as R
from procedures.core.ownership import Ownership
from procedures.core.paths import PathSet, keys_within, path_keys, plain_prefix, plainly_within
from procedures.spec.metadata import TableMetadata

__all__ = ["DeleteGuard", "table_roots", "GuardReport"]

log = logging.getLogger(__name__)

#: table properties naming folders the table writes to besides its location
_WRITE_PATH_PROPERTIES = ("write.data.path", "write.metadata.path", "write.folder-storage.path",
                          "write.object-storage.path")
#: how many paths a log line names before it only counts
_LOG_SAMPLE = 10


def table_roots(md: TableMetadata) -> tuple[str, ...]:
    """The folders whose files belong to the table: its location and any folder its
    ``write.*.path`` properties send files to."""
    roots = [md.location]
    roots.extend(md.properties[p] for p in _WRITE_PATH_PROPERTIES if md.properties.get(p))
    return tuple(dict.fromkeys(r.rstrip("/") or "/" for r in roots))


@dataclass
class GuardReport:
    """What the guard held back: files outside the allowed folders and files found reachable."""

    outside: list[str] = field(default_factory=list)
    reachable: list[str] = field(default_factory=list)


class DeleteGuard:
    """Filters batches of ``(path, kind)`` about to be deleted (see the module doc).

    ``roots`` are the folders a deleted file must lie in; ``metadata_location`` and
    ``manifest_lists``/``manifests`` describe what the caller already counted as reachable.
    ``manifests`` may be a callable producing them: it is called once, only when the table changed
    since the caller's view, and the guard then keeps a 16-byte digest per manifest, so in the
    usual run it holds nothing per manifest.  ``table`` is re-read with ``refresh()`` before each
    batch when it has one.
    """

    def __init__(self, table: Any, roots: Sequence[str], *, metadata_location: str | None,
                 manifest_lists: Iterable[str], manifests: Iterable[str] | Callable[[], Iterable[str]],
                 procedure: str) -> None:
        self._table = table
        self._roots = tuple(path_keys(r) for r in roots)
        self._owned = Ownership(roots)
        # most paths spell a root as it is: a prefix test spares normalising each of them
        self._prefixes = tuple(p for p in map(plain_prefix, roots) if p is not None)
        self._seen_location = metadata_location
        self._seen_lists = set(manifest_lists)
        # produced on demand: the seen manifests are only needed to skip them once the table changed
        self._manifest_source = manifests if callable(manifests) else None
        self._key: Callable[[str], Any] = R.path_digest if callable(manifests) else str
        self._seen_manifests: set[Any] = set() if callable(manifests) else set(manifests)
        self._reachable = PathSet()
        self._procedure = procedure
        self.report = GuardReport()

    def inside(self, path: str) -> bool:
        """Whether ``path`` lies in one of the allowed folders, and for a local path also once symlinks
        are resolved, without being one (:class:`procedures.core.ownership.Ownership`)."""
        if any(plainly_within(p, path) for p in self._prefixes):
            return self._owned.resolves_inside(path)
        keys = path_keys(path)
        return any(keys_within(root, keys) for root in self._roots) and self._owned.resolves_inside(path)

    def check(self, items: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """The items of one batch that may be deleted now."""
        allowed = []
        outside = []
        for item in items:
            (allowed if self.inside(item[0]) else outside).append(item)
        if outside:
            self.report.outside.extend(p for p, _ in outside)
            self._log("outside the table's folders", outside)
        if not allowed:
            return allowed
        self._refresh()
        if not self._reachable:
            return allowed
        safe, held = [], []
        for item in allowed:
            (held if item[0] in self._reachable else safe).append(item)
        if held:
            self.report.reachable.extend(p for p, _ in held)
            self._log("reachable from the table's current metadata", held)
        return safe

    def _log(self, why: str, items: Sequence[tuple[str, str]]) -> None:
        sample = ", ".join(p for p, _ in items[:_LOG_SAMPLE])
        more = f" and {len(items) - _LOG_SAMPLE} more" if len(items) > _LOG_SAMPLE else ""
        log.warning("%s: not deleting %d file(s) %s: %s%s", self._procedure, len(items), why, sample, more)

    def _current(self) -> tuple[TableMetadata, str | None]:
        refresh = getattr(self._table, "refresh", None)
        if callable(refresh) and getattr(self._table, "catalog", None) is not None:
            refresh()
        return self._table.metadata, getattr(self._table, "metadata_location", None)

    def _refresh(self) -> None:
        md, location = self._current()
        if location is not None and location == self._seen_location:
            return
        io = self._table.io
        if self._manifest_source is not None:
            self._seen_manifests.update(map(self._key, self._manifest_source()))
            self._manifest_source = None
        paths: list[str] = list(R.metadata_file_paths(md, location))
        paths.extend(R.statistics_paths(md))
        new_ids = [s.snapshot_id for s in md.snapshots if (s.manifest_list or "") not in self._seen_lists]
        read = R.read_snapshot_manifests(io, md, new_ids)
        paths.extend(p for p in read.manifest_lists.values() if p)
        fresh = {p: m for p, m in read.distinct().items() if self._key(p) not in self._seen_manifests}
        paths.extend(fresh)
        paths.extend(R.content_paths_driver(io, fresh.values()))
        self._reachable.update(paths)
        self._seen_lists.update(p for p in read.manifest_lists.values() if p)
        self._seen_manifests.update(map(self._key, fresh))
        self._seen_location = location
