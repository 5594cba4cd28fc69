"""Files reachable from snapshots: what expire_snapshots may delete and what remove_orphan_files must keep.

Iceberg's garbage collection (spec "Snapshot Retention"/"Maintenance"; Java's ``BaseSparkAction``
``contentFileDS``/``manifestDS``/``manifestListDS``/``statisticsFileDS``) works on four kinds of
reachable files: the manifest list of a snapshot, the manifests it names, the live (ADDED or
EXISTING) content files of those manifests, and the statistics / partition-statistics files
registered for the snapshot.  A Puffin file holding deletion vectors is one content path however
many entries point into it, so it is reachable as long as one live entry references it.

Two implementations share one plan:

* manifest lists are read on the driver (they are small, one per snapshot) and give the set of
  distinct manifests involved; remove_orphan_files reads them in engine tasks instead when they are
  many (:func:`lists_in_engine`), each task a contiguous parents-first chunk
  (:func:`manifest_list_chunks`, :func:`read_chunk_manifests`), so the driver holds nothing per manifest;
* the manifests themselves -- the bulk of the work -- are read on the driver with a thread pool
  when they are few and small, and as a Spark job (``mapInArrow`` over the manifest rows) when
  their count or total size passes :data:`DRIVER_MAX_MANIFESTS` / :data:`DRIVER_MAX_MANIFEST_BYTES`.
  The choice is by size, so a small table never starts a Spark job and a large one never has
  every content path on the driver.

Nothing here imports pyspark: the Spark side (:func:`procedures.spark.listing.manifest_content_dataframe`,
:func:`procedures.spark.listing.unreached_paths`) is called by the GC engine steps (:mod:`procedures.spark.engine.gc_steps`),
which decide with :func:`use_spark`.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from procedures.core.gc.live_paths import manifest_live_paths
from procedures.core.kernel.paths import is_table_metadata_file
from procedures.errors import InvalidMetadataError
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.avro_container import GONE_FILE
from procedures.spec.manifest.manifest_list import (
    EncodedManifestList, decode_manifest_list_head, iter_manifest_list_rows, read_encoded_manifest_list,
)
from procedures.spec.manifest.model import FileContent, ManifestContent, ManifestFile
from procedures.spec.metadata import TableMetadata

__all__ = [
    "DATA", "POSITION_DELETE", "EQUALITY_DELETE", "MANIFEST", "MANIFEST_LIST", "STATISTICS", "KINDS",
    "DRIVER_MAX_MANIFESTS", "DRIVER_MAX_MANIFEST_BYTES", "DRIVER_MAX_LISTS", "DRIVER_MAX_LIST_BYTES",
    "SnapshotManifests", "read_snapshot_manifests", "ListLink", "ListChunk", "lists_in_engine",
    "manifest_list_chunks", "read_chunk_manifests", "path_digest",
    "use_spark", "content_kind", "manifest_content_paths", "content_paths_driver", "stream_content_paths",
    "statistics_paths", "metadata_file_paths", "is_table_metadata_file", "manifest_row", "manifest_from_row",
]

log = logging.getLogger(__name__)

# Java's FileInfo type names (BaseSparkAction), used as the kind of every reachable path
DATA = "Data"
POSITION_DELETE = "Position Delete"
EQUALITY_DELETE = "Equality Delete"
MANIFEST = "Manifest"
MANIFEST_LIST = "Manifest List"
STATISTICS = "Statistics Files"
KINDS = (DATA, POSITION_DELETE, EQUALITY_DELETE, MANIFEST, MANIFEST_LIST, STATISTICS)

#: above this many distinct manifests (or bytes of them) reachability runs as a Spark job
DRIVER_MAX_MANIFESTS = 1000
DRIVER_MAX_MANIFEST_BYTES = 64 * 1024 * 1024
#: above this many snapshots with a manifest list (or a current list of this many bytes, about
#: 16,000 manifests) remove_orphan_files reads the lists in engine tasks (:func:`lists_in_engine`)
DRIVER_MAX_LISTS = 200
DRIVER_MAX_LIST_BYTES = 256 * 1024
#: threads reading manifest lists and manifests on the driver
DRIVER_READ_THREADS = 8
#: decompressed manifest-list bytes fetched ahead of the decoding at most (a list of 10,000
#: manifests is about 2 MB: a fixed number of lists ahead would make memory follow the table)
PREFETCH_BYTES = 8 * 1024 * 1024
#: manifest bytes read ahead of the consumer by :func:`stream_content_paths` (one manifest at least)
STREAM_AHEAD_BYTES = 16 * 1024 * 1024

_KIND_OF_CONTENT = {FileContent.DATA: DATA, FileContent.POSITION_DELETES: POSITION_DELETE,
                    FileContent.EQUALITY_DELETES: EQUALITY_DELETE}


def content_kind(content: FileContent | int) -> str:
    """Java's type name of a content file."""
    return _KIND_OF_CONTENT[FileContent(content)]


@dataclass(frozen=True)
class SnapshotManifests:
    """The manifest lists and the distinct manifests of a set of snapshots (read once, on the driver)."""

    #: snapshot id -> manifest list path (None for v1 snapshots with embedded manifests)
    manifest_lists: dict[int, str | None]
    #: every distinct manifest (by path) of the snapshots read
    all_manifests: dict[str, ManifestFile]
    #: snapshot id -> its manifests; only when read with ``per_snapshot`` (5M references for 1,000
    #: snapshots of 10,000 manifests: the caller asks when it needs them)
    manifests: dict[int, tuple[ManifestFile, ...]]

    def distinct(self) -> dict[str, ManifestFile]:
        """Distinct manifests (by path) of all the snapshots read."""
        return self.all_manifests


def _parents_first(ids: Iterable[int], snapshots: dict[int, Any]) -> list[int]:
    """``ids`` ordered so that every snapshot comes after its ancestors (by depth in the history)."""
    depth: dict[int, int] = {}
    for sid in ids:
        chain: list[int] = []
        cur: int | None = sid
        # bounded walk: a corrupt history with a parent cycle must not loop forever
        while cur is not None and cur not in depth and cur in snapshots and len(chain) <= len(snapshots):
            chain.append(cur)
            cur = snapshots[cur].parent_snapshot_id
        base = depth.get(cur, -1) if cur is not None else -1
        for c in reversed(chain):
            if c not in depth:
                base += 1
                depth[c] = base
    return sorted(ids, key=depth.__getitem__)


def read_snapshot_manifests(io: FileAccess, md: TableMetadata, snapshot_ids: Iterable[int] | None = None,
                            *, threads: int = DRIVER_READ_THREADS, per_snapshot: bool = False,
                            shared: dict[str, ManifestFile] | None = None, slim: bool = False,
                            prefetch_bytes: int | None = None) -> SnapshotManifests:
    """Read the manifest lists of ``snapshot_ids`` (default: every snapshot of ``md``).

    A manifest appears in the list of every later snapshot that keeps it: 1,000 snapshots over
    10,000 manifests are 5M list rows but 10,000 manifests.  Writers put a snapshot's new manifests
    first and carry the parent's rows after them unchanged, so the lists are read parents first and
    a list whose encoded rows end with its parent's (same schema, byte for byte) decodes only the
    rows in front; the rest are the parent's, already read.  Any other list is decoded in full.
    One object is kept per manifest, so memory follows the distinct manifests, not the rows; a
    snapshot's own tuple of manifests is kept only with ``per_snapshot`` (else only until its
    children are decoded).  Files are fetched by ``threads`` threads ahead of the decoding, at most
    ``prefetch_bytes`` (default :data:`PREFETCH_BYTES`) of them.

    ``shared`` (path -> manifest) lets several reads of one table keep one object per manifest
    between them: a manifest already in it is not kept again, and new ones are added to it.
    With ``slim`` a manifest is kept as :func:`manifest_from_row` gives it (path, length, spec and
    content: what reading its paths needs), without counts and partition summaries.

    v1 snapshots that embed a ``manifests`` array instead of a list are not supported by the
    model; they have no manifest list and contribute no manifests.
    """
    wanted = {s.snapshot_id: s for s in md.snapshots}
    ids = list(wanted) if snapshot_ids is None else [i for i in dict.fromkeys(snapshot_ids) if i in wanted]
    return _read_lists(io, wanted, ids, threads=threads, per_snapshot=per_snapshot, shared=shared, slim=slim,
                       prefetch_bytes=prefetch_bytes)


def _read_lists(io: FileAccess, wanted: Mapping[int, Any], ids: list[int], *, threads: int, per_snapshot: bool,
                shared: dict[str, ManifestFile] | None, slim: bool, prefetch_bytes: int | None) -> SnapshotManifests:
    """:func:`read_snapshot_manifests` of the snapshots ``ids`` among ``wanted`` (id -> anything with
    ``snapshot_id``, ``parent_snapshot_id`` and ``manifest_list``): a parent outside ``wanted`` is
    unknown, and its children's lists are decoded whole."""
    lists = {sid: wanted[sid].manifest_list or None for sid in ids}
    order = _parents_first(ids, wanted)
    # a parent's encoded rows are kept only until its last child in this read has been decoded
    children_left = Counter(wanted[sid].parent_snapshot_id for sid in ids)
    encoded: dict[int, EncodedManifestList] = {}
    interned: dict[str, ManifestFile] = {}
    common = shared if shared is not None else interned

    def keep(m: ManifestFile) -> ManifestFile:
        one = common.get(m.manifest_path)
        if one is None:
            one = common[m.manifest_path] = manifest_from_row(*manifest_row(m)) if slim else m
        return interned.setdefault(one.manifest_path, one)
    pairs: dict[int, tuple[ManifestFile, ...]] = {}

    def fetch(sid: int) -> EncodedManifestList | None:
        path = lists[sid]
        if not path:
            return None
        try:
            return read_encoded_manifest_list(io, path)
        except FileNotFoundError as e:
            # what a snapshot reaches is unknown without its list: nothing may be judged unreferenced
            raise InvalidMetadataError(
                f"the manifest list of snapshot {sid} is missing; {GONE_FILE} (restore it, or expire or remove the "
                "snapshot, then rerun)", location=path) from e

    def decode(sid: int, enc: EncodedManifestList) -> tuple[ManifestFile, ...]:
        parent = wanted[sid].parent_snapshot_id
        prev = encoded.get(parent) if parent is not None else None
        if (prev is not None and prev.schema == enc.schema and prev.count <= enc.count
                and enc.records.endswith(prev.records)):
            try:
                head = decode_manifest_list_head(enc, len(enc.records) - len(prev.records), enc.count - prev.count)
                return tuple(map(keep, head)) + pairs[parent]
            except InvalidMetadataError:
                pass  # the rows do not split there: decode the whole list below
        # row by row: a list decoded whole (a rewrite's) never holds all its rows decoded at once
        return tuple(map(keep, iter_manifest_list_rows(enc, len(enc.records), enc.count)))

    # decompressing the lists is CPU work: threads past the cores add no speed, only malloc arenas
    # that keep their freed buffers (8 threads held 35 MiB at 1,000 lists of 10,000 rows, 2 held 19)
    workers = min(threads, max(2, os.cpu_count() or 2), len(ids))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="read-manifest-list") if workers > 1 else None
    budget = PREFETCH_BYTES if prefetch_bytes is None else prefetch_bytes
    largest = 0
    start = 0
    try:
        while start < len(order):
            # as many lists ahead as fit the byte budget at the size of the largest seen so far
            batch = max(1, min(workers * 4, budget // largest)) if largest else max(1, workers)
            chunk = order[start:start + batch]
            start += len(chunk)
            for sid, enc in zip(chunk, pool.map(fetch, chunk) if pool is not None else map(fetch, chunk)):
                if enc is not None:
                    largest = max(largest, len(enc.records))
                pairs[sid] = decode(sid, enc) if enc is not None else ()
                if enc is not None and children_left[sid]:
                    encoded[sid] = enc
                parent = wanted[sid].parent_snapshot_id
                children_left[parent] -= 1
                if children_left[parent] <= 0:
                    encoded.pop(parent, None)
                    if not per_snapshot:
                        pairs.pop(parent, None)
                if not per_snapshot and not children_left[sid]:
                    pairs.pop(sid, None)  # no child of this read needs it
    finally:
        if pool is not None:
            pool.shutdown()
    return SnapshotManifests(lists, interned, {sid: pairs[sid] for sid in ids} if per_snapshot else {})


@dataclass(frozen=True)
class ListLink:
    """A snapshot as far as reading its manifest list needs (plain values an engine task carries)."""

    snapshot_id: int
    parent_snapshot_id: int | None
    manifest_list: str


#: a chunk of :func:`manifest_list_chunks`: ``(snapshot_id, parent_snapshot_id, manifest_list)`` rows
ListChunk = tuple[tuple[int, "int | None", str], ...]


def lists_in_engine(io: FileAccess, md: TableMetadata) -> bool:
    """Whether the manifest lists of ``md`` are many or large enough to be read in engine tasks
    rather than on the driver: more than :data:`DRIVER_MAX_LISTS` snapshots with a list, or a
    current list above :data:`DRIVER_MAX_LIST_BYTES` (a file of that many manifests).  The driver
    keeps one object per distinct manifest while it reads, so its memory would follow the table."""
    lists = sum(1 for s in md.snapshots if s.manifest_list)
    if lists > DRIVER_MAX_LISTS:
        return True
    current = md.current_snapshot()
    if current is None or not current.manifest_list:
        return False
    try:
        return io.new_input(current.manifest_list).size() > DRIVER_MAX_LIST_BYTES
    except OSError:
        return False  # the driver's read reports the missing file with its own error


def manifest_list_chunks(md: TableMetadata, chunks: int) -> list[ListChunk]:
    """The snapshots of ``md`` that have a manifest list, ordered parents first and cut into at most
    ``chunks`` contiguous runs of near-equal length, one engine task each.

    Contiguous runs keep most parents in their children's run, so :func:`read_chunk_manifests`
    decodes only the rows a list adds to its parent's, except for the first list of a run (and a
    list whose parent is in another run, or gone), which it decodes whole.
    """
    wanted = {s.snapshot_id: s for s in md.snapshots}
    order = [sid for sid in _parents_first(list(wanted), wanted) if wanted[sid].manifest_list]
    if not order:
        return []
    n = max(1, min(chunks, len(order)))
    bounds = [len(order) * k // n for k in range(n + 1)]
    return [tuple((sid, wanted[sid].parent_snapshot_id, str(wanted[sid].manifest_list)) for sid in order[a:b])
            for a, b in zip(bounds, bounds[1:])]


def read_chunk_manifests(io: FileAccess, chunk: Sequence[tuple[int, int | None, str]], *, threads: int = 2,
                         prefetch_bytes: int | None = None) -> list[tuple[str, int, int, int]]:
    """:func:`manifest_row` of every distinct manifest the lists of one chunk of
    :func:`manifest_list_chunks` name, read as :func:`read_snapshot_manifests` reads them (slim)."""
    links = {sid: ListLink(sid, parent, path) for sid, parent, path in chunk}
    read = _read_lists(io, links, list(links), threads=threads, per_snapshot=False, shared=None, slim=True,
                       prefetch_bytes=prefetch_bytes)
    return [manifest_row(m) for m in read.distinct().values()]


def use_spark(spark: Any, manifests: Iterable[ManifestFile]) -> bool:
    """Whether reading ``manifests`` is large enough to be a Spark job (never without a session)."""
    return spark is not None and exceeds_driver_limits(manifests)


def exceeds_driver_limits(manifests: Iterable[ManifestFile]) -> bool:
    """Whether ``manifests`` are more than the driver reads: over :data:`DRIVER_MAX_MANIFESTS` of
    them or :data:`DRIVER_MAX_MANIFEST_BYTES` in all."""
    count = 0
    size = 0
    for m in manifests:
        count += 1
        size += m.manifest_length or 0
        if count > DRIVER_MAX_MANIFESTS or size > DRIVER_MAX_MANIFEST_BYTES:
            return True
    return False


def manifest_content_paths(io: FileAccess, manifest: ManifestFile) -> Iterator[tuple[str, str]]:
    """``(path, kind)`` of every live content file of one manifest (DVs give their Puffin file)."""
    for path, content in manifest_live_paths(io, manifest):
        yield path, _KIND_OF_CONTENT[content]


def content_paths_driver(io: FileAccess, manifests: Iterable[ManifestFile], *,
                         threads: int = DRIVER_READ_THREADS) -> dict[str, str]:
    """Live content files of ``manifests`` read on the driver: ``{path: kind}``."""
    ms = list(manifests)
    out: dict[str, str] = {}
    if not ms:
        return out

    def one(m: ManifestFile) -> list[tuple[str, str]]:
        return list(manifest_content_paths(io, m))

    if len(ms) == 1 or threads <= 1:
        results = map(one, ms)
        for pairs in results:
            out.update(pairs)
        return out
    with ThreadPoolExecutor(max_workers=min(threads, len(ms)), thread_name_prefix="read-manifest") as pool:
        for pairs in pool.map(one, ms):
            out.update(pairs)
    return out


def path_digest(path: str) -> bytes:
    """A 16-byte digest of ``path``: a set of them tells paths apart in a third of the memory."""
    return hashlib.blake2b(path.encode(), digest_size=16).digest()


def stream_content_paths(io: FileAccess, manifests: Iterable[ManifestFile], *, threads: int = DRIVER_READ_THREADS,
                         ahead_bytes: int = STREAM_AHEAD_BYTES) -> Iterator[tuple[str, str]]:
    """``(path, kind)`` of the live content files of ``manifests``, each distinct path once, read on
    the driver while the caller consumes them.

    :func:`content_paths_driver` holds every path at once; this holds only the manifests read ahead
    (``threads`` threads, at most ``ahead_bytes`` of manifest files) and, to give a path named by
    several manifests once, a 16-byte digest per path seen (a third of what the path itself costs).
    A manifest that cannot be read is logged and skipped: the caller is already deleting.
    """
    ms = list(manifests)
    if not ms:
        return
    seen: set[bytes] = set()

    def read(m: ManifestFile) -> list[tuple[str, str]]:
        # deletes are under way when a manifest fails: stopping would leave every later file behind
        # as well, so its files are left (for remove_orphan_files) and the others still go
        try:
            return list(manifest_content_paths(io, m))
        except (InvalidMetadataError, OSError) as e:
            log.warning("Cannot read manifest %s (%s): the files only it names are not deleted; "
                        "remove_orphan_files can find them later", m.manifest_path, e)
            return []

    def emit(pairs: Iterable[tuple[str, str]]) -> Iterator[tuple[str, str]]:
        for path, kind in pairs:
            key = path_digest(path)
            if key not in seen:
                seen.add(key)
                yield path, kind

    if len(ms) == 1 or threads <= 1:
        for m in ms:
            yield from emit(read(m))
        return
    pool = ThreadPoolExecutor(max_workers=min(threads, len(ms)), thread_name_prefix="read-manifest")
    pending: deque = deque()
    try:
        held = 0
        nxt = 0
        while nxt < len(ms) or pending:
            while nxt < len(ms) and len(pending) < threads * 2 and (
                    not pending or held + (ms[nxt].manifest_length or 0) <= ahead_bytes):
                m = ms[nxt]
                pending.append((pool.submit(read, m), m.manifest_length or 0))
                held += m.manifest_length or 0
                nxt += 1
            future, size = pending.popleft()
            held -= size
            yield from emit(future.result())
    finally:
        for future, _ in pending:
            future.cancel()
        pool.shutdown(wait=True)


def statistics_paths(md: TableMetadata, snapshot_ids: Iterable[int] | None = None) -> dict[str, str]:
    """Statistics and partition-statistics files registered for ``snapshot_ids`` (default all)."""
    ids = None if snapshot_ids is None else set(snapshot_ids)
    out: dict[str, str] = {}
    for s in md.statistics:
        if ids is None or s.snapshot_id in ids:
            out[s.statistics_path] = STATISTICS
    for s in md.partition_statistics:
        if ids is None or s.snapshot_id in ids:
            out[s.statistics_path] = STATISTICS
    return out


def metadata_file_paths(md: TableMetadata, metadata_location: str | None) -> list[str]:
    """Table metadata files that count as valid for orphan detection: the current metadata file,
    every file of its metadata log and ``<location>/metadata/version-hint.text`` (Java's
    ``ReachableFileUtil.metadataFileLocations(table, false)`` and ``versionHintLocation``)."""
    out = [e.metadata_file for e in md.metadata_log]
    if metadata_location:
        out.append(metadata_location)
    out.append(f"{md.location.rstrip('/')}/metadata/version-hint.text")
    return out


def manifest_row(m: ManifestFile) -> tuple[str, int, int, int]:
    """The plain values of a manifest an executor needs to list its paths (:func:`manifest_from_row`)."""
    return (m.manifest_path, int(m.manifest_length or 0), int(m.partition_spec_id), int(m.content))


def manifest_from_row(path: str, length: int, spec_id: int, content: int) -> ManifestFile:
    """The minimal :class:`ManifestFile` needed to list a manifest's paths (executor side)."""
    return ManifestFile(path, length, spec_id, ManifestContent(content))
