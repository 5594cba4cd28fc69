"""``RewriteManifests``: re-cluster manifest entries without changing data (operation ``replace``).

Implements what Iceberg Java's ``rewrite_manifests`` does (procedures.md §3.10) as one core operation:
for each content type (data, deletes), the current snapshot's manifests of the selected spec are
read, their live entries sorted by partition tuple (or by chosen partition fields) and written into
``ceil(total manifest bytes / commit.manifest.target-size-bytes)`` new manifests, each covering a
contiguous partition range (round-robin chunks for an unpartitioned spec).  A content type with one
manifest that would stay one manifest is left alone.  Entries keep their status as EXISTING with
their snapshot id, sequence numbers and (v3) first row id.

The snapshot summary carries ``manifests-created``, ``manifests-kept``, ``manifests-replaced`` and
``entries-processed`` like Java.  On a retry the new manifests are reused when every replaced manifest
is still in the head snapshot; otherwise the commit fails cleanly (a concurrent commit rewrote or
removed them), as Java's ``deleteManifest`` validation does.  Manifests added concurrently are kept.
"""

from __future__ import annotations

import bisect
import math
from array import array
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Iterable, Iterator, Mapping, Protocol, Sequence

from procedures.core.manifest_rewrite.entry_copy import existing_records
from procedures.core.kernel.snapshot_producer import SnapshotProducer, manifest_list_rows, snapshot_manifest_rows
from procedures.core.kernel.summary import SummaryBuilder
from procedures.core.kernel.transaction import CommitContext
from procedures.core.kernel.properties import MANIFEST_TARGET_SIZE_BYTES
from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.avro_schemas import manifest_entry_avro_schema
from procedures.spec.conversions import from_bytes
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.manifest_list import ManifestRows
from procedures.spec.manifest.model import ManifestContent, ManifestEntry, ManifestFile
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.manifest.writer import ManifestWriter
from procedures.spec.metadata import TableMetadata
from procedures.spec.partitioning import PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.snapshots import Snapshot
from procedures.spec.types import DoubleType, FloatType, StructType

__all__ = ["DRIVER_MAX_REWRITE_ENTRIES", "RewriteManifests", "target_manifest_count", "order_key", "assign_chunks", "chunk_of_position",
           "live_entry_counts", "uniform_partition", "ManifestSlice", "live_copies", "write_copy", "copy_slice",
           "RewriteJob", "DistributedRewriter", "take_manifests", "ListedManifests", "MIN_PART_ENTRIES", "parts_per_chunk",
           "ChunkParts", "cut_chunk", "WritePlan", "plan_write_tasks"]

#: live entries above which an engine (when there is one) rewrites instead of the driver, which holds
#: every entry it sorts (about 6 KiB each with metrics: 50,000 entries are ~300 MiB)
DRIVER_MAX_REWRITE_ENTRIES = 50_000

#: live entries each task writes at least when an engine splits one manifest's writing among tasks:
#: below this, the extra step that joins the parts costs more than the copying it shares out
MIN_PART_ENTRIES = 20_000


def target_manifest_count(total_bytes: int, target_size: int) -> int:
    """``ceil(total / target)``, the number of manifests a content type is rewritten into."""
    return max(1, math.ceil(total_bytes / target_size))


def order_key(value: Any) -> tuple:
    """A total-order sort key for a partition value (nulls first, then by type and value)."""
    if value is None:
        return (0,)
    if isinstance(value, float):
        return (1, "float", value if value == value else float("inf"))
    if isinstance(value, (bytes, bytearray)):
        return (1, "bytes", bytes(value))
    if isinstance(value, bool):
        return (1, "bool", value)
    if isinstance(value, (int, float)):
        return (1, "num", value)
    return (1, type(value).__name__, value)


def _chunks(entries: list[Any], keys: list[tuple] | None, n: int) -> list[list[Any]]:
    """Split into at most ``n`` parts of about equal size; a key is never split across parts."""
    if n <= 1 or len(entries) <= 1:
        return [entries] if entries else []
    per = math.ceil(len(entries) / n)
    out: list[list[Any]] = [[]]
    for i, e in enumerate(entries):
        if len(out[-1]) >= per and (keys is None or keys[i] != keys[i - 1]) and len(out) < n:
            out.append([])
        out[-1].append(e)
    return out


def assign_chunks(key_counts: Mapping[Hashable, int], n: int, sort_key: Callable[[Any], Any]) -> dict[Hashable, tuple[int, int]]:
    """``{key: (chunk, rank)}``: the keys in ``sort_key`` order, cut into at most ``n`` chunks of about
    equal entry count without splitting a key -- the same cut :func:`_chunks` makes on the sorted
    entries, computed from per-key counts alone (an engine can then place each entry by its key)."""
    ordered = sorted(key_counts, key=sort_key)
    total = sum(key_counts[k] for k in ordered)
    per = math.ceil(total / n) if n > 1 else total
    out: dict[Hashable, tuple[int, int]] = {}
    chunk, size = 0, 0
    for rank, key in enumerate(ordered):
        if n > 1 and size >= per and size > 0 and chunk < n - 1:
            chunk, size = chunk + 1, 0
        out[key] = (chunk, rank)
        size += key_counts[key]
    return out


def live_entry_counts(manifests: Iterable[ManifestFile]) -> list[int]:
    """Live (added + existing) entries of each manifest, from the manifest list's counts."""
    return [int(m.added_files_count or 0) + int(m.existing_files_count or 0) for m in manifests]


def chunk_of_position(position: int, total: int, n: int) -> int:
    """The chunk of the ``position``-th live entry of an unpartitioned spec (entries in manifest
    order), as :func:`_chunks` cuts them."""
    if n <= 1 or total <= 1:
        return 0
    return min(position // math.ceil(total / n), n - 1)


def uniform_partition(manifest: ManifestFile, partition_type: StructType) -> tuple | None:
    """The one partition tuple of every entry of ``manifest``, when its manifest-list partition
    summaries prove there is only one (each field null throughout, or with equal lower and upper
    bounds and no null); None when they do not, or cannot be read with ``partition_type``.

    An engine places such a manifest's entries without reading it.  Writers store untruncated
    partition bounds (Java's ``PartitionSummary``, ours), so equal bounds mean equal values."""
    summaries, fields = manifest.partitions, partition_type.fields
    if summaries is None or len(summaries) != len(fields):
        return None
    values = []
    for s, f in zip(summaries, fields):
        floating = isinstance(f.field_type, (FloatType, DoubleType))
        if floating and s.contains_nan is not False:
            return None
        if s.lower_bound is None and s.upper_bound is None:
            if not s.contains_null:
                return None  # no values at all (an empty manifest): nothing to place
            values.append(None)
            continue
        if s.contains_null or s.lower_bound != s.upper_bound:
            return None
        try:
            values.append(from_bytes(s.lower_bound, f.field_type))
        except InvalidMetadataError:
            return None
    return tuple(values)


def take_manifests(manifests: Sequence[ManifestFile], indices: Iterable[int]) -> Sequence[ManifestFile]:
    """The manifests at ``indices``, in that order: still encoded when ``manifests`` is a
    :class:`~procedures.spec.manifest.manifest_list.ManifestRows`, a list otherwise."""
    if isinstance(manifests, ManifestRows):
        return manifests.take(indices)
    return [manifests[i] for i in indices]


class ListedManifests(Sequence[ManifestFile]):
    """Manifests of one manifest list named by their positions in it: only the positions are held
    (4 bytes a manifest), the list is read again when the manifests themselves are read.  What
    :class:`RewriteManifests` keeps of the 10,000 manifests it replaces on a large table until its
    commit, which needs their number and, on a retry against a newer head, their paths."""

    __slots__ = ("io", "manifest_list", "positions")

    def __init__(self, io: FileAccess, manifest_list: str, positions: Iterable[int]) -> None:
        self.io = io
        self.manifest_list = manifest_list
        self.positions = array("L", positions)

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list(take_manifests(self._read(), self.positions[index]))
        return self._read()[self.positions[index]]

    def __iter__(self) -> Iterator[ManifestFile]:
        return iter(take_manifests(self._read(), self.positions)) if self.positions else iter(())

    def _read(self) -> Sequence[ManifestFile]:
        try:
            return manifest_list_rows(self.io, self.manifest_list)
        except FileNotFoundError as e:
            raise ValidationError(
                f"Manifest list {self.manifest_list} the rewrite was planned on is gone (a concurrent "
                "expire_snapshots removed it); rerun rewrite_manifests"
            ) from e


@dataclass(frozen=True, slots=True)
class ManifestSlice:
    """The live entries of ``manifest`` at positions ``[start, stop)`` (``stop`` None: to the end),
    as one item of a chunk (an engine's write task reads them itself)."""

    manifest: ManifestFile
    start: int = 0
    stop: int | None = None


def live_copies(io: FileAccess, manifest: ManifestFile, avro_schema: Mapping[str, Any], format_version: int,
                specs: Mapping[int, PartitionSpec]) -> Iterator[tuple[tuple, Any]]:
    """``(partition, copy)`` for each live entry of ``manifest`` in file order; ``copy`` goes to
    :func:`write_copy` of a writer with ``avro_schema``: the entry already encoded as EXISTING when
    the manifest's schema allows (:func:`~procedures.core.manifest_rewrite.entry_copy.existing_records`),
    otherwise the decoded :class:`ManifestEntry`."""
    records = existing_records(io, manifest, avro_schema, format_version, specs=specs)
    if records is not None:
        for record in records:
            yield record[0], record
        return
    for e in read_manifest(io, manifest, specs=specs, skip_deleted=True):
        yield e.data_file.partition, e


def write_copy(writer: ManifestWriter, copy: Any) -> None:
    """Write one :func:`live_copies` item as an EXISTING entry."""
    if isinstance(copy, ManifestEntry):
        writer.existing(copy.data_file, copy.snapshot_id, copy.sequence_number, copy.file_sequence_number)
    else:
        partition, record_count, sequence_number, record = copy
        writer.existing_encoded(record, partition, record_count, sequence_number)


def copy_slice(io: FileAccess, writer: ManifestWriter, part: ManifestSlice, format_version: int,
               specs: Mapping[int, PartitionSpec]) -> int:
    """Write a :class:`ManifestSlice`'s entries into ``writer``; returns how many."""
    written = 0
    for position, (_, copy) in enumerate(live_copies(io, part.manifest, writer.avro_schema, format_version, specs)):
        if part.stop is not None and position >= part.stop:
            break
        if position >= part.start:
            write_copy(writer, copy)
            written += 1
    return written


def parts_per_chunk(chunk_entries: Sequence[int], slots: int, min_entries: int = MIN_PART_ENTRIES) -> list[int]:
    """How many tasks write each chunk's manifest (:class:`ChunkParts`), given its live entries.

    One each when the chunks alone keep ``slots`` tasks busy; otherwise a chunk gets its share of
    the slots by entry count, but never parts under ``min_entries`` entries.  A rewrite into one
    manifest of 100,000 entries is then copied by every core rather than one."""
    total = sum(chunk_entries)
    if len(chunk_entries) >= slots or total <= 0:
        return [1] * len(chunk_entries)
    return [max(1, min(e // min_entries, math.ceil(slots * e / total))) for e in chunk_entries]


@dataclass(frozen=True, slots=True)
class ChunkParts:
    """One chunk's items cut into runs written by separate tasks and joined in order
    (:meth:`~procedures.spec.manifest.writer.ManifestWriter.close_parts`).  ``items[p]`` are part ``p``'s
    items; ``cuts[p]`` is the first sort key ``(rank, manifest index, position)`` of part ``p + 1``,
    which places an entry that arrives alone (:meth:`part_of`)."""

    items: tuple[list[tuple], ...]
    cuts: tuple[tuple[int, int, int], ...]

    def part_of(self, key: tuple[int, int, int]) -> int:
        """The part of the entry with sort key ``key``."""
        return bisect.bisect_right(self.cuts, key)


def cut_chunk(items: Sequence[tuple], counts: Sequence[int], loose: Mapping[int, int], parts: int) -> ChunkParts:
    """Cut a chunk's items into at most ``parts`` runs of about equal entry count, in the order the
    writer sorts them: ``(rank, manifest index, position)``.

    ``items`` are ``(rank, manifest index, first position, stop, ref)`` slices holding ``counts[i]``
    live entries each (``stop`` None: to the manifest's end); a slice is cut at a position when a
    run ends inside it.  ``loose`` counts, per rank, the entries that reach the writers one by one
    (read from mixed manifests); they count at the start of their rank for the balance, and go to
    the part :meth:`ChunkParts.part_of` their key."""
    weighted = sorted(
        [((item[0], item[1], item[2]), n, item) for item, n in zip(items, counts)]
        + [((rank, -1, 0), n, None) for rank, n in loose.items() if n],
        key=lambda t: t[0],
    )
    total = sum(n for _, n, _ in weighted)
    per = max(1, math.ceil(total / parts)) if parts > 1 else max(1, total)
    out: list[list[tuple]] = [[]]
    cuts: list[tuple[int, int, int]] = []
    size = 0
    for key, n, item in weighted:
        if item is None:
            if size >= per and len(out) < parts:
                cuts.append(key)
                out.append([])
                size = 0
            size += n
            continue
        rank, index, start, stop, ref = item
        done = 0
        while True:
            if size >= per and len(out) < parts:
                cuts.append((rank, index, start + done))
                out.append([])
                size = 0
            rest = n - done
            take = rest if len(out) == parts else min(rest, per - size)
            if take == rest:
                out[-1].append((rank, index, start + done, stop, ref))
                size += take
                break
            out[-1].append((rank, index, start + done, start + done + take, ref))
            size += take
            done += take
    return ChunkParts(tuple(out), tuple(cuts))


@dataclass(frozen=True, slots=True)
class WritePlan:
    """Which engine task writes what: task ``t`` writes part ``tasks[t][1]`` of chunk
    ``tasks[t][0]``; an entry that arrives alone in chunk ``c`` goes to task ``routes[c][0] +
    bisect_right(routes[c][1], (rank, manifest index, position))``.  When ``split``, tasks write
    parts (:meth:`~procedures.spec.manifest.writer.ManifestWriter.close_part`) that one task per chunk
    joins; otherwise task ``c`` writes chunk ``c`` whole."""

    tasks: dict[int, tuple[int, int]]
    routes: dict[int, tuple[int, tuple[tuple[int, int, int], ...]]]
    split: bool


def plan_write_tasks(groups: Mapping[int, Sequence[tuple]], counts: Mapping[int, Sequence[int]],
                     loose: Mapping[int, Mapping[int, int]], n_chunks: int, slots: int,
                     min_entries: int = MIN_PART_ENTRIES) -> tuple[list[tuple[int, Sequence[tuple]]], WritePlan]:
    """Share the chunks' writing among tasks (:func:`parts_per_chunk`, :func:`cut_chunk`).

    ``groups[c]`` are chunk ``c``'s item slices and ``counts[c]`` their live entries, ``loose[c]``
    its entries per rank that arrive one by one.  Returns each task's items as ``(task, items)``
    and the :class:`WritePlan`."""
    entries = [sum(counts.get(c, ())) + sum(loose.get(c, {}).values()) for c in range(n_chunks)]
    parts = parts_per_chunk(entries, slots, min_entries)
    if all(p == 1 for p in parts):
        plan = WritePlan({c: (c, 0) for c in range(n_chunks)}, {c: (c, ()) for c in range(n_chunks)}, False)
        return [(c, items) for c, items in groups.items()], plan
    task_items: list[tuple[int, list[tuple]]] = []
    tasks: dict[int, tuple[int, int]] = {}
    routes: dict[int, tuple[int, tuple[tuple[int, int, int], ...]]] = {}
    for c in range(n_chunks):
        cut = cut_chunk(groups.get(c, ()), counts.get(c, ()), loose.get(c, {}), parts[c])
        routes[c] = (len(tasks), cut.cuts)
        for part, items in enumerate(cut.items):
            if items:
                task_items.append((len(tasks), items))
            tasks[len(tasks)] = (c, part)
    return task_items, WritePlan(tasks, routes, True)


@dataclass(frozen=True, slots=True)
class RewriteJob:
    """One content type's rewrite handed to an engine: write the live entries of ``manifests`` as
    EXISTING into at most ``n`` manifests (paths from ``path_for(chunk, attempt)``), cut as
    :func:`assign_chunks` (by partition, fields at ``positions`` or the whole tuple) or, for an
    unpartitioned spec, by position (:func:`chunk_of_position`); within a manifest, entries keep
    key order, then manifest order, then file order -- what the driver writes."""

    spec: PartitionSpec
    schema: Schema
    specs: Mapping[int, PartitionSpec]
    format_version: int
    content: ManifestContent
    snapshot_id: int
    #: a :class:`~procedures.spec.manifest.manifest_list.ManifestRows` (rows still encoded) or a tuple
    manifests: Sequence[ManifestFile]
    n: int
    positions: tuple[int, ...] | None
    path_prefix: str

    def path_for(self, chunk: int, attempt: int) -> str:
        """Where chunk ``chunk`` is written by engine task attempt ``attempt`` (a retried task never
        meets the file of the attempt before it)."""
        return f"{self.path_prefix}-c{chunk}-a{attempt}.avro"

    def entry_schema(self) -> dict[str, Any]:
        """The Avro schema the job's manifests are written with (:attr:`ManifestWriter.avro_schema`)."""
        return manifest_entry_avro_schema(self.format_version, self.spec.partition_type(self.schema))

    def writer(self, io: FileAccess, chunk: int, attempt: int, sync_marker: bytes | None = None) -> ManifestWriter:
        """The writer of chunk ``chunk`` for engine task attempt ``attempt``; the writers of one
        chunk's parts share ``sync_marker`` (:class:`ChunkParts`)."""
        return ManifestWriter(io, self.path_for(chunk, attempt), self.spec, self.schema, self.format_version,
                              self.content, self.snapshot_id, sync_marker=sync_marker)

    def partition_key(self, partition: tuple) -> tuple:
        """The tuple entries are clustered by."""
        return partition if self.positions is None else tuple(partition[i] for i in self.positions)


class DistributedRewriter(Protocol):
    """An engine that rewrites large manifest sets off the driver (:mod:`procedures.spark.engine.manifest_rewrite_steps`)."""

    def wants(self, manifests: Sequence[ManifestFile]) -> bool:
        """Whether these manifests are too many or too large for the driver."""

    def rewrite(self, job: RewriteJob) -> tuple[list[ManifestFile], int]:
        """The new manifests (in chunk order) and the number of entries written."""


class RewriteManifests(SnapshotProducer):
    """Rewrite the manifests of ``spec_id`` (default: the current spec) into clustered ones.

    ``sort_by`` names partition fields of that spec to cluster by (default: the whole tuple);
    ``rewrite_if(manifest)`` restricts which manifests are rewritten.  After :func:`commit`,
    ``rewritten`` and ``added`` hold the replaced and new manifests.
    """

    operation = "replace"

    def __init__(
        self,
        *,
        spec_id: int | None = None,
        sort_by: Sequence[str] | None = None,
        rewrite_if: Callable[[ManifestFile], bool] | None = None,
        target_size_bytes: int | None = None,
        distributed: DistributedRewriter | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.distributed = distributed
        self.spec_id = spec_id
        self.sort_by = list(sort_by) if sort_by is not None else None
        self.rewrite_if = rewrite_if
        self.target_size_bytes = target_size_bytes
        self.rewritten: Sequence[ManifestFile] = []
        self.added: list[ManifestFile] = []
        self.entries_processed = 0
        self._planned = False
        #: (the manifest list planned against, the manifests of it the rewrite keeps)
        self._kept: tuple[str | None, Sequence[ManifestFile]] = (None, [])

    def _spec(self, base: TableMetadata):
        spec_id = base.default_spec_id if self.spec_id is None else self.spec_id
        spec = base.spec_by_id(spec_id)
        if spec is None:
            raise ValidationError(f"Invalid spec id {spec_id}")
        if self.sort_by is not None:
            if not self.sort_by:
                raise ValidationError("sort_by must not be empty when provided")
            names = [f.name for f in spec.fields]
            missing = [n for n in self.sort_by if n not in names]
            if missing:
                raise ValidationError(
                    f"Cannot set manifest sorting because specified field(s) {missing} were not found in current "
                    f"partition spec {spec}. Spec ID {spec.spec_id}"
                )
        return spec

    def _target(self, base: TableMetadata) -> int:
        if self.target_size_bytes is not None:
            return self.target_size_bytes
        return MANIFEST_TARGET_SIZE_BYTES.read(base.properties, minimum=1)

    def _select(self, current: Sequence[ManifestFile], spec_id: int) -> dict[ManifestContent, tuple[list[int], int]]:
        """Per content type, the positions in ``current`` of the manifests to rewrite and their total
        length, in one pass that decodes one manifest-list row at a time."""
        out: dict[ManifestContent, tuple[list[int], int]] = {}
        for i, m in enumerate(current):
            if m.partition_spec_id != spec_id or (self.rewrite_if is not None and not self.rewrite_if(m)):
                continue
            if m.added_files_count is None or m.existing_files_count is None or m.deleted_files_count is None:
                raise ValidationError(f"No file counts in manifest: {m.manifest_path}")
            at, length = out.get(m.content, ([], 0))
            at.append(i)
            out[m.content] = (at, length + m.manifest_length)
        return out

    def _plan(self, base: TableMetadata, parent: Snapshot | None, ctx: CommitContext) -> None:
        spec = self._spec(base)
        target = self._target(base)
        # the rows stay encoded: a large table's manifests are held as their bytes, never all decoded
        current = snapshot_manifest_rows(ctx.io, parent)
        specs = {s.spec_id: s for s in base.partition_specs}
        positions = None
        if self.sort_by is not None:
            names = [f.name for f in spec.fields]
            positions = [names.index(n) for n in self.sort_by]
        selected = self._select(current, spec.spec_id)
        replaced: list[int] = []
        for content in (ManifestContent.DATA, ManifestContent.DELETES):
            at, length = selected.get(content, ([], 0))
            if not at:
                continue
            n = target_manifest_count(length, target)
            if n == 1 and len(at) == 1:
                continue
            replaced.extend(at)
            matching = take_manifests(current, at)
            if self.distributed is not None and self.distributed.wants(matching):
                # the driver never holds the entries: an engine reads, sorts and writes them
                job = RewriteJob(spec, base.schema(), specs, base.format_version, content, self.snapshot_id,
                                 matching, n, None if positions is None else tuple(positions),
                                 self.new_manifest_path(base)[: -len(".avro")])
                added, processed = self.distributed.rewrite(job)
                for m in added:
                    ctx.track(m.manifest_path)
                self.added.extend(added)
                self.entries_processed += processed
                continue
            schema = manifest_entry_avro_schema(base.format_version, spec.partition_type(base.schema()))
            copies = [c for m in matching for c in live_copies(ctx.io, m, schema, base.format_version, specs)]
            keys = None
            if spec.fields:
                def key(c: tuple[tuple, Any]) -> tuple:
                    values = c[0]
                    picked = values if positions is None else tuple(values[i] for i in positions)
                    return tuple(order_key(v) for v in picked)
                copies.sort(key=key)
                keys = [key(c) for c in copies]
            self.entries_processed += len(copies)
            for chunk in _chunks(copies, keys, n):
                def write(w, chunk=chunk) -> None:
                    for _, copy in chunk:
                        write_copy(w, copy)
                self.added.append(self.write_manifest(base, ctx, spec.spec_id, content, write))
        # the replaced manifests by position in the planned list: 4 bytes each until the commit
        self.rewritten = ListedManifests(ctx.io, parent.manifest_list, replaced) if replaced else []
        gone = set(replaced)
        # what the first attempt keeps, known without reading the list again (its parent is this one)
        self._kept = (parent.manifest_list if parent is not None else None,
                      take_manifests(current, [i for i in range(len(current)) if i not in gone]))
        self._planned = True

    def manifests(self, base: TableMetadata, parent: Snapshot | None, ctx: CommitContext, summary: SummaryBuilder) -> list[ManifestFile]:
        if not self._planned:
            self._plan(base, parent, ctx)
        planned_list, kept = self._kept
        if planned_list != (parent.manifest_list if parent is not None else None):
            # a retry on a newer head: the rewritten manifests must all still be there
            current = snapshot_manifest_rows(ctx.io, parent)
            present = {m.manifest_path for m in current}
            gone = [m.manifest_path for m in self.rewritten if m.manifest_path not in present]
            if gone:
                raise ValidationError(
                    f"Deleted manifest {gone[0]} could not be found in the latest snapshot "
                    f"{parent.snapshot_id if parent else None}; a concurrent commit rewrote it, rerun rewrite_manifests"
                )
            replaced = {m.manifest_path for m in self.rewritten}
            kept = take_manifests(current, [i for i, m in enumerate(current) if m.manifest_path not in replaced])
        for m in self.added:  # a retry commits the manifests an earlier attempt wrote
            ctx.reuse(m.manifest_path)
        summary.set("manifests-created", str(len(self.added)))
        summary.set("manifests-kept", str(len(kept)))
        summary.set("manifests-replaced", str(len(self.rewritten)))
        summary.set("entries-processed", str(self.entries_processed))
        return [*self.added, *kept]

    def apply(self, base: TableMetadata, ctx: CommitContext):
        """The snapshot replacing the manifests, or no update at all when nothing needs rewriting."""
        if not self._planned:
            ref = base.refs.get(self.branch)
            parent = base.snapshot_by_id(ref.snapshot_id) if ref is not None else None
            self._plan(base, parent, ctx)
        if not self.rewritten:
            return []
        return super().apply(base, ctx)
