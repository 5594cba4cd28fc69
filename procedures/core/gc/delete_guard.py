"""The last check before garbage collection deletes a file.

Both collectors (expire_snapshots, remove_orphan_files) decide what to delete from the metadata
they read at the start; the deletes happen later, and another writer may commit in between.
:class:`DeleteGuard` is consulted right before each batch of deletes (and in a dry run, at the same
point) and removes from the batch:

* every file outside the table's own folders (:func:`table_roots`, or the folders
  :func:`procedures.core.kernel.table_overlap.gc_roots` leaves), also once local symlinks are resolved, and
  every symlink (:class:`procedures.core.kernel.ownership.Ownership`): a file brought in from another folder
  (add_files, a shared warehouse) is reported, never deleted -- Iceberg Java would delete it;
* every file inside a folder of another table the catalog shows (``others``,
  :class:`procedures.core.kernel.table_overlap.ForeignFolders`): tables never overlap, but one made before
  that rule, or by another engine, must not lose its files to its neighbour's garbage collection;
* every file the retained metadata names itself: the current metadata file and its log, the
  statistics and partition-statistics files, the manifest lists of every retained snapshot and
  the retained manifests the caller passes (``manifests``) -- whatever the candidates were computed
  from, a corrupt expired entry naming one of them cannot get it deleted.  The guard holds a
  16-byte digest per retained manifest plus the hash of its file name (a cheap first test, so a
  data file costs one set lookup);
* every file that the table's *current* metadata reaches: it re-reads the table, and when the
  metadata changed since the collector's view it reads the new manifest lists, the manifests it
  has not seen yet, their statistics and metadata files, and keeps anything they name.

Paths are compared by their normalised path under both readings (:func:`procedures.core.kernel.paths.path_keys`),
ignoring scheme and authority, so any spelling of a reachable file keeps it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from procedures.core.gc import reachability
from procedures.core.kernel.ownership import Ownership
from procedures.core.kernel.paths import PathSet, keys_within, path_keys, plain_prefix, plainly_within
from procedures.core.kernel.table_overlap import WRITE_PATH_PROPERTIES, ForeignFolders
from procedures.spec.metadata import TableMetadata

__all__ = ["DeleteGuard", "table_roots", "GuardReport"]

log = logging.getLogger(__name__)

#: how many paths a log line names before it only counts
_LOG_SAMPLE = 10


def table_roots(md: TableMetadata) -> tuple[str, ...]:
    """The folders whose files belong to the table: its location and any folder its
    ``write.*.path`` properties send files to."""
    roots = [md.location]
    roots.extend(md.properties[p] for p in WRITE_PATH_PROPERTIES if md.properties.get(p))
    return tuple(dict.fromkeys(r.rstrip("/") or "/" for r in roots))


@dataclass
class GuardReport:
    """What the guard held back: files outside the allowed folders, files in another table's
    folders and files found reachable (retained, or named by the current metadata)."""

    outside: list[str] = field(default_factory=list)
    reachable: list[str] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)


class DeleteGuard:
    """Filters batches of ``(path, kind)`` about to be deleted (see the module doc).

    ``roots`` are the folders a deleted file must lie in; ``metadata_location`` and
    ``manifest_lists``/``manifests`` describe what the caller already counted as reachable.
    ``manifests`` may be a callable producing them (an engine read them): it is called once, at
    the first batch that reaches the check, and the guard keeps 16-byte digests per manifest.
    ``table`` is re-read with ``refresh()`` before each batch when it has one.  ``others`` are
    the folders of the other tables the catalog shows.

    Every manifest list, statistics and metadata file of the table's metadata at construction and
    every path of ``manifest_lists`` and ``manifests`` is protected: never deleted, reported as
    reachable.
    """

    def __init__(self, table: Any, roots: Sequence[str], *, metadata_location: str | None,
                 manifest_lists: Iterable[str], manifests: Iterable[str] | Callable[[], Iterable[str]],
                 procedure: str, others: ForeignFolders | None = None) -> None:
        self._table = table
        self._others = others
        self._roots = tuple(path_keys(r) for r in roots)
        self._owned = Ownership(roots)
        # most paths spell a root as it is: a prefix test spares normalising each of them
        self._prefixes = tuple(p for p in map(plain_prefix, roots) if p is not None)
        self._seen_location = metadata_location
        self._seen_lists = set(manifest_lists)
        # produced at the first batch: a run that deletes nothing never asks the engine for them
        self._manifest_source = manifests if callable(manifests) else None
        self._key: Callable[[str], Any] = reachability.path_digest if callable(manifests) else str
        self._seen_manifests: set[Any] = set() if callable(manifests) else set(manifests)
        self._reachable = PathSet()
        self._procedure = procedure
        self.report = GuardReport()
        # digests of every reading of the retained files, and the hashes of their names (a first test)
        self._protected: set[bytes] = set()
        self._protected_names: set[int] = set()
        md = getattr(table, "metadata", None)
        if md is not None:
            self._protect(reachability.metadata_file_paths(md, metadata_location))
            self._protect(reachability.statistics_paths(md))
            self._protect(s.manifest_list for s in md.snapshots if s.manifest_list)
        self._protect(self._seen_lists)
        if not callable(manifests):
            self._protect(self._seen_manifests)
        self._pending_protection = manifests if callable(manifests) else None

    def _protect(self, paths: Iterable[str]) -> None:
        for p in paths:
            self._protected_names.add(hash(p.rsplit("/", 1)[-1]))
            self._protected.update(reachability.path_digest(k.path) for k in path_keys(p))

    def retained(self, path: str) -> bool:
        """Whether ``path`` is (a spelling of) a file the retained metadata names itself."""
        name = path.rsplit("/", 1)[-1]
        # a name that decoding or '.'/'..' could change is always checked in full
        if "%" not in path and name not in ("", ".", "..") and hash(name) not in self._protected_names:
            return False
        return any(reachability.path_digest(k.path) in self._protected for k in path_keys(path))

    def inside(self, path: str) -> bool:
        """Whether ``path`` lies in one of the allowed folders, and for a local path also once symlinks
        are resolved, without being one (:class:`procedures.core.kernel.ownership.Ownership`)."""
        if any(plainly_within(p, path) for p in self._prefixes):
            return self._owned.resolves_inside(path)
        keys = path_keys(path)
        return any(keys_within(root, keys) for root in self._roots) and self._owned.resolves_inside(path)

    def check(self, items: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
        """The items of one batch that may be deleted now."""
        allowed = self._hold(items, lambda p: not self.inside(p), self.report.outside, "outside the table's folders")
        if self._others:
            allowed = self._hold(allowed, lambda p: self._others.owner(p) is not None, self.report.foreign,
                                 "inside another table's folder")
        if not allowed:
            return allowed
        if self._pending_protection is not None:
            produced = list(self._pending_protection())
            self._pending_protection = None
            self._protect(produced)
            if self._manifest_source is not None:
                self._seen_manifests.update(map(self._key, produced))
                self._manifest_source = None
        allowed = self._hold(allowed, self.retained, self.report.reachable, "named by the retained metadata")
        if not allowed:
            return allowed
        self._refresh()
        if not self._reachable:
            return allowed
        return self._hold(allowed, self._reachable.__contains__, self.report.reachable,
                          "reachable from the table's current metadata")

    def _hold(self, items: Sequence[tuple[str, str]], held: Callable[[str], bool], report: list[str],
              why: str) -> list[tuple[str, str]]:
        """The items whose path ``held`` rejects are reported in ``report`` and logged; the rest returned."""
        keep, out = [], []
        for item in items:
            (out if held(item[0]) else keep).append(item)
        if out:
            report.extend(p for p, _ in out)
            self._log(why, out)
        return keep

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
        paths: list[str] = list(reachability.metadata_file_paths(md, location))
        paths.extend(reachability.statistics_paths(md))
        new_ids = [s.snapshot_id for s in md.snapshots if (s.manifest_list or "") not in self._seen_lists]
        read = reachability.read_snapshot_manifests(io, md, new_ids)
        paths.extend(p for p in read.manifest_lists.values() if p)
        fresh = {p: m for p, m in read.distinct().items() if self._key(p) not in self._seen_manifests}
        paths.extend(fresh)
        paths.extend(reachability.content_paths_driver(io, fresh.values()))
        self._reachable.update(paths)
        self._seen_lists.update(p for p in read.manifest_lists.values() if p)
        self._seen_manifests.update(map(self._key, fresh))
        self._seen_location = location
