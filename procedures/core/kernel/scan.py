"""Scan planning (spec "Scan Planning"; on-disk notes section 10): which data files a read must open
and which delete files apply to each.

:func:`plan_files` selects a snapshot (id, branch or tag, or "as of" a time through the snapshot log as
Java's ``SnapshotUtil.snapshotIdAsOfTime`` does), prunes manifests with their partition summaries --
the filter projected inclusively through *each manifest's own* spec, so partition evolution prunes
correctly -- prunes files with partition values and column metrics, and attaches deletes:

* a deletion vector applies to the data file it references when ``ds(D) <= ds(DV)``;
* a position delete file applies when ``ds(D) <= ds(P)`` and it references the file (file-scoped,
  indexed by path like Java's ``DeleteFileIndex``) or shares the file's spec and partition; position
  delete files are ignored for a data file that has a DV;
* an equality delete file applies when ``ds(D) < ds(E)`` (strictly) and it shares the data file's
  spec and partition, or was written with an unpartitioned spec (global).

Delete manifests are read first into a small index; data manifests are then streamed, so memory
holds the deletes plus one manifest's entries, never the whole table's file list.
"""

from __future__ import annotations

import bisect
import math
import struct
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from procedures.core.kernel.summary import is_dv
from procedures.errors import NoSuchRefError, NoSuchSnapshotError, ValidationError
from procedures.spec.evaluators import Evaluator, InclusiveMetricsEvaluator, ManifestEvaluator
from procedures.spec.expression_parser import parse_filter
from procedures.spec.expressions import (
    ALWAYS_FALSE,
    ALWAYS_TRUE,
    And,
    Expression,
    Not,
    Or,
    and_,
    bind,
    or_,
    has_transform_terms,
    referenced_field_ids,
    rewrite_not,
)
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.manifest_list import ManifestRows, read_manifest_list_where
from procedures.spec.manifest.model import DataFile, FileContent, ManifestContent, FieldSummary, ManifestFile
from procedures.spec.manifest.reader import read_manifest, read_manifest_where
from procedures.spec.metadata import TableMetadata
from procedures.spec.metadata_columns import DELETE_FILE_PATH_ID
from procedures.spec.partitioning import PartitionSpec
from procedures.spec.projection import inclusive_projection, strict_projection
from procedures.spec.schema import Schema
from procedures.spec.transforms import IdentityTransform
from procedures.spec.types import DoubleType, FloatType, NestedField, StructType, UnknownType
from procedures.spec.snapshots import MAIN_BRANCH, Snapshot

__all__ = [
    "DeleteFileEntry",
    "FileScanTask",
    "ScanSelection",
    "DeleteFileIndex",
    "select_snapshot",
    "snapshot_id_as_of_time",
    "plan_files",
    "iter_file_scan_tasks",
    "EntryFilter",
    "ScanEntry",
    "ScanManifests",
    "scan_manifests",
    "read_entries_on_driver",
    "listed_entries",
    "delete_index",
    "tasks_from_entries",
    "partition_key",
    "unified_partition_type",
]


@dataclass(frozen=True, slots=True)
class DeleteFileEntry:
    """A delete file (position deletes, DV or equality deletes) with its data sequence number."""

    data_file: DataFile
    data_sequence_number: int

    @property
    def is_dv(self) -> bool:
        """True for a deletion vector (a Puffin blob)."""
        return is_dv(self.data_file)


@dataclass(frozen=True, slots=True)
class FileScanTask:
    """One data file to read, the deletes that apply to it and what is left of the filter.

    ``residual`` is the row filter simplified with the file's partition values (``ALWAYS_TRUE`` when
    the partition alone proves every row matches); readers may apply it, engines re-filter anyway.
    ``schema`` is the schema the scan projects from (the snapshot's for time travel).
    ``start``/``length`` make the task a split: only the row groups whose first byte lies in
    ``[start, start + length)`` are read (``length`` None = the whole file).
    """

    data_file: DataFile
    data_sequence_number: int
    deletes: tuple[DeleteFileEntry, ...]
    residual: Expression
    spec_id: int
    partition: tuple
    schema: Schema
    file_sequence_number: int | None = None
    start: int = 0
    length: int | None = None

    @property
    def file_path(self) -> str:
        """The data file's location."""
        return self.data_file.file_path

    @property
    def record_count(self) -> int:
        """Rows in the data file before deletes."""
        return self.data_file.record_count


@dataclass(frozen=True, slots=True)
class ScanSelection:
    """The snapshot a scan reads (None for a table without snapshots) and the schema it projects from."""

    snapshot: Snapshot | None
    schema: Schema


# ------------------------------------------------------------------------------ snapshot choice
def snapshot_id_as_of_time(md: TableMetadata, timestamp_ms: int) -> int:
    """The snapshot that was current on main at ``timestamp_ms``: the last snapshot-log entry at or
    before it (Java ``SnapshotUtil.snapshotIdAsOfTime``).  Raises NoSuchSnapshotError when the log
    starts later."""
    found = None
    for entry in md.snapshot_log:
        if entry.timestamp_ms <= timestamp_ms:
            found = entry.snapshot_id
    if found is None:
        raise NoSuchSnapshotError(
            f"Cannot find a snapshot older than {timestamp_ms} ms in the history of table {md.location}"
        )
    return found


def select_snapshot(
    md: TableMetadata,
    *,
    snapshot_id: int | None = None,
    as_of_timestamp_ms: int | None = None,
    ref: str | None = None,
) -> ScanSelection:
    """Resolve the scan's snapshot and schema the way Iceberg Java's Spark source does.

    At most one of ``snapshot_id``, ``as_of_timestamp_ms`` and ``ref`` may be given.  Time travel to a
    snapshot id, a time or a tag reads with the snapshot's own schema; a branch (and the current
    state) reads with the table's current schema.
    """
    given = [n for n, v in (("snapshot_id", snapshot_id), ("as_of_timestamp", as_of_timestamp_ms), ("ref", ref))
             if v is not None]
    if len(given) > 1:
        raise ValidationError(f"Cannot scan {md.location} with both {given[0]} and {given[1]}: choose one")
    if as_of_timestamp_ms is not None:
        snapshot_id = snapshot_id_as_of_time(md, int(as_of_timestamp_ms))
    if snapshot_id is not None:
        snap = md.snapshot_by_id(int(snapshot_id))
        if snap is None:
            raise NoSuchSnapshotError(f"Cannot find snapshot {snapshot_id} in table {md.location}")
        return ScanSelection(snap, _snapshot_schema(md, snap))
    if ref is not None and ref != MAIN_BRANCH:
        r = md.refs.get(ref)
        if r is None:
            raise NoSuchRefError(f"Cannot find ref {ref!r} in table {md.location}; known refs: {sorted(md.refs)}")
        snap = md.snapshot_by_id(r.snapshot_id)
        if snap is None:
            raise NoSuchSnapshotError(f"Ref {ref!r} of {md.location} points at missing snapshot {r.snapshot_id}")
        return ScanSelection(snap, md.schema() if r.is_branch else _snapshot_schema(md, snap))
    return ScanSelection(md.current_snapshot(), md.schema())


def _snapshot_schema(md: TableMetadata, snap: Snapshot) -> Schema:
    if snap.schema_id is not None:
        s = md.schema_by_id(snap.schema_id)
        if s is not None:
            return s
    return md.schema()


# ------------------------------------------------------------------------------ partition keys
def _canonical(value: Any) -> Any:
    # Partition equality compares floats by IEEE bits (NaN canonicalized), so 0.0 and -0.0 differ.
    if isinstance(value, float):
        return ("f", b"nan" if math.isnan(value) else struct.pack(">d", value))
    return value


def partition_key(spec_id: int, partition: tuple) -> tuple:
    """A hashable key equal for two files exactly when their spec ids and partition values are equal."""
    return (spec_id, tuple(_canonical(v) for v in partition))


# ------------------------------------------------------------------------------ delete index
class DeleteFileIndex:
    """Delete files of a snapshot, indexed for :meth:`for_data_file` (section 10 of the notes)."""

    def __init__(self, unpartitioned_spec_ids: Iterable[int]) -> None:
        self._unpartitioned = set(unpartitioned_spec_ids)
        self._dvs: dict[str, DeleteFileEntry] = {}
        self._pos_by_path: dict[str, list[DeleteFileEntry]] = {}
        self._pos_by_partition: dict[tuple, list[DeleteFileEntry]] = {}
        self._eq_by_partition: dict[tuple, list[DeleteFileEntry]] = {}
        self._eq_global: list[DeleteFileEntry] = []
        self._sorted = True

    def __len__(self) -> int:
        return (len(self._dvs) + sum(map(len, self._pos_by_path.values()))
                + sum(map(len, self._pos_by_partition.values())) + sum(map(len, self._eq_by_partition.values()))
                + len(self._eq_global))

    def add(self, delete: DataFile, data_sequence_number: int) -> None:
        """Index one live delete file."""
        entry = DeleteFileEntry(delete, data_sequence_number)
        self._sorted = False
        if delete.content == FileContent.POSITION_DELETES:
            if entry.is_dv:
                target = delete.referenced_data_file
                if target is None:
                    raise ValidationError(f"Deletion vector in {delete.file_path} has no referenced_data_file")
                if target in self._dvs:
                    raise ValidationError(
                        f"Can't index multiple DVs for {target}: {self._dvs[target].data_file.file_path} and "
                        f"{delete.file_path}; the table breaks the one-DV-per-data-file rule"
                    )
                self._dvs[target] = entry
                return
            target = _file_scoped_target(delete)
            if target is not None:
                self._pos_by_path.setdefault(target, []).append(entry)
            else:
                self._pos_by_partition.setdefault(partition_key(delete.spec_id, delete.partition), []).append(entry)
        elif delete.content == FileContent.EQUALITY_DELETES:
            if delete.spec_id in self._unpartitioned:
                self._eq_global.append(entry)
            else:
                self._eq_by_partition.setdefault(partition_key(delete.spec_id, delete.partition), []).append(entry)
        else:
            raise ValidationError(f"{delete.file_path} is a data file, not a delete file")

    def _sort(self) -> None:
        for group in (self._pos_by_path, self._pos_by_partition, self._eq_by_partition):
            for lst in group.values():
                lst.sort(key=_seq)
        self._eq_global.sort(key=_seq)
        self._sorted = True

    def for_data_file(self, data_file: DataFile, data_sequence_number: int) -> tuple[DeleteFileEntry, ...]:
        """The delete files that apply to a data file with this data sequence number."""
        if not self._sorted:
            self._sort()
        seq = data_sequence_number
        out: list[DeleteFileEntry] = []
        dv = self._dvs.get(data_file.file_path)
        # Java raises when a DV is older than its data file; the spec simply says it does not apply.
        if dv is not None and seq <= dv.data_sequence_number:
            out.append(dv)
        else:
            out.extend(_at_or_after(self._pos_by_path.get(data_file.file_path), seq))
            if self._pos_by_partition:
                key = partition_key(data_file.spec_id, data_file.partition)
                out.extend(d for d in _at_or_after(self._pos_by_partition.get(key), seq)
                           if _path_in_bounds(d.data_file, data_file.file_path))
        if self._eq_by_partition:
            out.extend(_after(self._eq_by_partition.get(partition_key(data_file.spec_id, data_file.partition)), seq))
        out.extend(_after(self._eq_global, seq))
        return tuple(out)


def _seq(e: DeleteFileEntry) -> int:
    return e.data_sequence_number


def _at_or_after(entries: list[DeleteFileEntry] | None, seq: int) -> list[DeleteFileEntry]:
    if not entries:
        return []
    return entries[bisect.bisect_left(entries, seq, key=_seq):]


def _after(entries: list[DeleteFileEntry] | None, seq: int) -> list[DeleteFileEntry]:
    if not entries:
        return []
    return entries[bisect.bisect_right(entries, seq, key=_seq):]


def _file_scoped_target(delete: DataFile) -> str | None:
    if delete.referenced_data_file is not None:
        return delete.referenced_data_file
    lo = (delete.lower_bounds or {}).get(DELETE_FILE_PATH_ID)
    hi = (delete.upper_bounds or {}).get(DELETE_FILE_PATH_ID)
    if lo is not None and lo == hi:
        return lo.decode("utf-8")
    return None


def _path_in_bounds(delete: DataFile, path: str) -> bool:
    # A partition-scoped position delete file whose file_path bounds exclude the data file cannot
    # hold a row for it (the bounds are full, untruncated paths).
    lo = (delete.lower_bounds or {}).get(DELETE_FILE_PATH_ID)
    hi = (delete.upper_bounds or {}).get(DELETE_FILE_PATH_ID)
    raw = path.encode("utf-8")
    return (lo is None or lo <= raw) and (hi is None or raw <= hi)


# ------------------------------------------------------------------------------ residuals
class _ResidualEvaluator:
    """Simplifies a row filter with one partition's values, predicate by predicate, as Java's
    ``ResidualEvaluator``: a predicate the partition proves true (strict projection) becomes
    ``true``, one it proves false (inclusive projection) becomes ``false``."""

    def __init__(self, spec: PartitionSpec, schema: Schema, expr: Expression, case_sensitive: bool) -> None:
        self.spec, self.schema, self.case_sensitive = spec, schema, case_sensitive
        self.expr = rewrite_not(expr)
        self.ptype = spec.partition_type(schema)
        self._cache: dict[tuple, Expression] = {}
        self._leaves: dict[int, tuple[Evaluator | None, Evaluator | None]] = {}
        self._constant: tuple[Expression, ...] | None = None  # (residual,) when it ignores the partition

    def residual_for(self, partition: tuple) -> Expression:
        if self.spec.is_unpartitioned() or self.expr is ALWAYS_TRUE:
            return self.expr
        if self._constant is None:
            self._constant = (self._visit(self.expr, ()),) if self._ignores_partition(self.expr) else ()
        if self._constant:  # no predicate projects onto the partition: every file gets the same residual
            return self._constant[0]
        key = partition_key(self.spec.spec_id, partition)
        res = self._cache.get(key)
        if res is None:
            res = self._visit(self.expr, partition)
            if len(self._cache) < 10_000:
                self._cache[key] = res
        return res

    def _ignores_partition(self, e: Expression) -> bool:
        if e is ALWAYS_TRUE or e is ALWAYS_FALSE:
            return True
        if isinstance(e, (And, Or)):
            return self._ignores_partition(e.left) and self._ignores_partition(e.right)
        if isinstance(e, Not):
            return True
        return self._leaf(e) == (None, None)

    def _visit(self, e: Expression, partition: tuple) -> Expression:
        if e is ALWAYS_TRUE or e is ALWAYS_FALSE:
            return e
        if isinstance(e, And):
            return and_(self._visit(e.left, partition), self._visit(e.right, partition))
        if isinstance(e, Or):
            return or_(self._visit(e.left, partition), self._visit(e.right, partition))
        if isinstance(e, Not):  # rewrite_not leaves none; kept for safety
            return e
        strict_ev, incl_ev = self._leaf(e)
        if strict_ev is not None and strict_ev.eval(partition):
            return ALWAYS_TRUE
        if incl_ev is not None and not incl_ev.eval(partition):
            return ALWAYS_FALSE
        return e

    def _leaf(self, e: Expression) -> tuple[Evaluator | None, Evaluator | None]:
        cached = self._leaves.get(id(e))
        if cached is None:
            strict = strict_projection(self.spec, self.schema, e, self.case_sensitive)
            incl = inclusive_projection(self.spec, self.schema, e, self.case_sensitive)
            cached = (
                None if strict is ALWAYS_FALSE else Evaluator(self.ptype, strict),
                None if incl is ALWAYS_TRUE else Evaluator(self.ptype, incl),
            )
            self._leaves[id(e)] = cached
        return cached


# ------------------------------------------------------------------------------ planning
def _as_expression(filter: Expression | str | None) -> Expression:
    if filter is None:
        return ALWAYS_TRUE
    if isinstance(filter, str):
        return parse_filter(filter) if filter.strip() else ALWAYS_TRUE
    return filter


def _pruners(specs: Mapping[int, PartitionSpec], schema: Schema, expr: Expression, case_sensitive: bool):
    """Per-spec (manifest evaluator, partition evaluator) pair, built lazily."""
    cache: dict[int, tuple[ManifestEvaluator | None, Evaluator | None]] = {}

    def get(spec_id: int) -> tuple[ManifestEvaluator | None, Evaluator | None]:
        if spec_id not in cache:
            spec = specs.get(spec_id)
            if spec is None or expr is ALWAYS_TRUE or spec.is_unpartitioned():
                cache[spec_id] = (None, None)
            else:
                projected = inclusive_projection(spec, schema, expr, case_sensitive)
                if projected is ALWAYS_TRUE:
                    cache[spec_id] = (None, None)
                else:
                    ptype = spec.partition_type(schema)
                    cache[spec_id] = (ManifestEvaluator(ptype, projected), Evaluator(ptype, projected))
        return cache[spec_id]

    return get


def listed_entries(manifests: Iterable[ManifestFile]) -> int | None:
    """How many entries (added, existing and deleted files) ``manifests`` list by their manifest-list
    counts; None when a manifest does not record them (optional in v1).  Rows of a manifest list
    still encoded answer from their skimmed counts, without decoding a row."""
    if isinstance(manifests, ManifestRows) and manifests.listed is not None:
        return manifests.listed_entries()
    total = 0
    for m in manifests:
        counts = (m.added_files_count, m.existing_files_count, m.deleted_files_count)
        if any(c is None for c in counts):
            return None
        total += sum(counts)  # type: ignore[arg-type]
    return total


def _manifest_may_have_live_files(m: ManifestFile) -> bool:
    return m.has_added_files() or m.has_existing_files()


@dataclass(frozen=True, slots=True)
class ScanEntry:
    """A live data-file entry of a manifest that passed the scan's filter (before deletes)."""

    data_file: DataFile
    data_sequence_number: int
    file_sequence_number: int | None

    def __reduce__(self) -> tuple:
        # as the constructor's arguments: cheaper than the slots dataclass default (see DataFile)
        return ScanEntry, (self.data_file, self.data_sequence_number, self.file_sequence_number)


class EntryFilter:
    """The partition and metrics tests of a scan for the entries of one manifest at a time.

    Built from plain values (specs, schema, filter) so it pickles small and can travel to Spark
    tasks; the evaluators are built lazily on whichever side uses it, once per spec.
    """

    def __init__(self, specs: Mapping[int, PartitionSpec], schema: Schema, expr: Expression,
                 case_sensitive: bool) -> None:
        self.specs = dict(specs)
        self.schema = schema
        self.expr = expr
        self.case_sensitive = case_sensitive
        self._pruner = _pruners(self.specs, schema, expr, case_sensitive)
        self._metrics: InclusiveMetricsEvaluator | None = None
        self._metric_ids: frozenset[int] = frozenset()
        self._floats: dict[int, bool] = {}
        self._decides: dict[int, bool] = {}

    def __reduce__(self) -> tuple:
        return (EntryFilter, (self.specs, self.schema, self.expr, self.case_sensitive))

    def keeps_manifest(self, m: ManifestFile) -> bool:
        """Whether the manifest's partition summaries allow a matching file."""
        return self.keeps_summaries(m.partition_spec_id, m.partitions)

    def keeps_summaries(self, spec_id: int, summaries: tuple[FieldSummary, ...] | None) -> bool:
        """Whether a manifest of spec ``spec_id`` with these partition summaries may hold a matching file."""
        mev, _ = self._pruner(spec_id)
        return mev is None or summaries is None or mev.eval(summaries)

    def partition_evaluator(self, spec_id: int) -> Evaluator | None:
        """The projected partition filter of a spec (None when it keeps every partition)."""
        return self._pruner(spec_id)[1]

    def data_entries(self, io: FileAccess, manifest: ManifestFile) -> list[ScanEntry]:
        """The live entries of a data manifest whose partition values and column metrics may match.

        The metrics are tested on each entry's bytes before it is decoded
        (:func:`~procedures.spec.manifest.reader.read_manifest_where`): most entries of a selective filter
        are never built."""
        pev = self.partition_evaluator(manifest.partition_spec_id)
        metrics = self._metrics
        if metrics is None and self.expr is not ALWAYS_TRUE:
            metrics = self._metrics = InclusiveMetricsEvaluator(self.schema, self.expr, self.case_sensitive)
            self._metric_ids = frozenset(referenced_field_ids(metrics.expr))
        if metrics is None:
            entries = read_manifest(io, manifest, specs=self.specs, skip_deleted=True)
        elif pev is not None and self._partition_decides(manifest.partition_spec_id):
            # the filter is exact on this spec's partition values: a file the partition test keeps
            # holds only matching rows, so its metrics could drop it only for having no row
            entries = (e for e in read_manifest_where(io, manifest, (), None, specs=self.specs)
                       if e.data_file.record_count != 0)
        else:
            entries = read_manifest_where(io, manifest, self._metric_ids, metrics.eval, specs=self.specs)
        out: list[ScanEntry] = []
        if pev is None:
            for e in entries:
                out.append(ScanEntry(e.data_file, e.sequence_number or 0, e.file_sequence_number))
            return out
        # a manifest's files share a few partitions: each distinct one is evaluated once
        answers: dict[tuple, bool] = {}
        canonical = self._float_partitions(manifest.partition_spec_id)
        for e in entries:
            df = e.data_file
            key = partition_key(0, df.partition) if canonical else df.partition
            answer = answers.get(key)
            if answer is None:
                answer = answers[key] = bool(pev.eval(df.partition))
            if answer:
                out.append(ScanEntry(df, e.sequence_number or 0, e.file_sequence_number))
        return out

    def _partition_decides(self, spec_id: int) -> bool:
        """Whether every column the filter reads is the source of an identity partition field of
        the spec (and not a float or double, whose signed zeros and NaN partition values compare
        apart from their metrics): then a file's partition values are its rows' values, and the
        partition test answers for each file exactly what its column metrics would, rows aside."""
        found = self._decides.get(spec_id)
        if found is None:
            spec = self.specs.get(spec_id)
            identity = {f.source_id for f in spec.fields if isinstance(f.transform, IdentityTransform)} if spec else set()
            # a transform term (system.days(ts) = X) is not decided by identity partition values
            # but is by the metrics (Java transforms the bounds): it keeps the metrics test
            found = (bool(self._metric_ids) and self._metric_ids <= identity
                     and not has_transform_terms(self.expr)) and not any(
                isinstance(getattr(self.schema.find_field_or_none(fid), "field_type", None), (FloatType, DoubleType, type(None)))
                for fid in self._metric_ids)
            self._decides[spec_id] = found
        return found

    def _float_partitions(self, spec_id: int) -> bool:
        # float partition values compare by their bits (0.0 and -0.0 differ, NaN equals NaN), which
        # Python's tuple equality does not: such partitions are keyed through partition_key
        found = self._floats.get(spec_id)
        if found is None:
            spec = self.specs.get(spec_id)
            found = spec is None or any(isinstance(f.field_type, (FloatType, DoubleType))
                                        for f in spec.partition_type(self.schema).fields)
            self._floats[spec_id] = found
        return found


@dataclass(frozen=True)
class ScanManifests:
    """What a scan must read after pruning the manifest list: its delete and data manifests (in
    manifest-list order) and the filter for their entries."""

    schema: Schema
    entry_filter: EntryFilter
    delete_manifests: tuple[ManifestFile, ...]
    data_manifests: Sequence[ManifestFile]  # a tuple, or ManifestRows decoded as they are read


def scan_manifests(
    table_metadata: TableMetadata,
    io: FileAccess,
    *,
    snapshot_id: int | None = None,
    as_of_timestamp_ms: int | None = None,
    ref: str | None = None,
    filter: Expression | str | None = None,
    case_sensitive: bool = True,
    manifests: Iterable[ManifestFile] | None = None,
) -> ScanManifests | None:
    """Which manifests a scan reads: the snapshot's (or ``manifests``) with live files whose
    partition summaries may match ``filter``; None for a table without snapshots.  Binds the filter
    first, so an unknown column fails before any manifest is read."""
    md = table_metadata
    sel = select_snapshot(md, snapshot_id=snapshot_id, as_of_timestamp_ms=as_of_timestamp_ms, ref=ref)
    if sel.snapshot is None and manifests is None:
        return None
    expr = _as_expression(filter)
    if expr is not ALWAYS_TRUE:
        bind(expr, sel.schema, case_sensitive)
    ef = EntryFilter(md.specs_by_id, sel.schema, expr, case_sensitive)
    kept: Sequence[ManifestFile] = ()
    if manifests is not None:
        kept = [m for m in manifests if _manifest_may_have_live_files(m) and ef.keeps_manifest(m)]
    elif sel.snapshot is not None and sel.snapshot.manifest_list:
        # the rows are tested on their encoded summaries; those that pass stay encoded until read
        kept = read_manifest_list_where(io, sel.snapshot.manifest_list, ef.keeps_summaries, live_only=True)
    if isinstance(kept, ManifestRows):
        return ScanManifests(schema=sel.schema, entry_filter=ef,
                             delete_manifests=tuple(kept.with_content(ManifestContent.DELETES)),
                             data_manifests=kept.with_content(ManifestContent.DATA))
    return ScanManifests(
        schema=sel.schema, entry_filter=ef,
        delete_manifests=tuple(m for m in kept if m.content == ManifestContent.DELETES),
        data_manifests=tuple(m for m in kept if m.content == ManifestContent.DATA),
    )


def read_entries_on_driver(io: FileAccess, plan: ScanManifests) -> Iterator[list[ScanEntry]]:
    """The matching entries of each data manifest of ``plan``, in order, read one by one here."""
    for m in plan.data_manifests:
        yield plan.entry_filter.data_entries(io, m)


def delete_index(io: FileAccess, plan: ScanManifests) -> DeleteFileIndex:
    """The live delete files of ``plan``'s delete manifests whose partitions may match."""
    ef = plan.entry_filter
    index = DeleteFileIndex(sid for sid, s in ef.specs.items() if s.is_unpartitioned())
    for m in plan.delete_manifests:
        pev = ef.partition_evaluator(m.partition_spec_id)
        for e in read_manifest(io, m, specs=ef.specs, skip_deleted=True):
            if pev is not None and not pev.eval(e.data_file.partition):
                continue
            index.add(e.data_file, e.sequence_number or 0)
    return index


def tasks_from_entries(plan: ScanManifests, index: DeleteFileIndex,
                       entries: Iterable[list[ScanEntry]]) -> Iterator[FileScanTask]:
    """The scan's tasks from its data manifests' matching entries (one list per manifest of
    ``plan.data_manifests``, in order, wherever they were read): deletes and residuals attached."""
    ef = plan.entry_filter
    expr, schema = ef.expr, plan.schema
    residuals: dict[int, _ResidualEvaluator] = {}
    for m, matched in zip(plan.data_manifests, entries, strict=True):
        spec = ef.specs.get(m.partition_spec_id)
        res_ev = None
        if expr is not ALWAYS_TRUE and spec is not None:
            res_ev = residuals.get(spec.spec_id)
            if res_ev is None:
                res_ev = residuals[spec.spec_id] = _ResidualEvaluator(spec, schema, expr, ef.case_sensitive)
        for e in matched:
            df = e.data_file
            yield FileScanTask(
                data_file=df,
                data_sequence_number=e.data_sequence_number,
                deletes=index.for_data_file(df, e.data_sequence_number),
                residual=ALWAYS_TRUE if res_ev is None else res_ev.residual_for(df.partition),
                spec_id=df.spec_id,
                partition=df.partition,
                schema=schema,
                file_sequence_number=e.file_sequence_number,
            )


def iter_file_scan_tasks(
    table_metadata: TableMetadata,
    io: FileAccess,
    *,
    snapshot_id: int | None = None,
    as_of_timestamp_ms: int | None = None,
    ref: str | None = None,
    filter: Expression | str | None = None,
    case_sensitive: bool = True,
    manifests: Iterable[ManifestFile] | None = None,
    read_entries: Callable[[ScanManifests], Iterable[list[ScanEntry]]] | None = None,
) -> Iterator[FileScanTask]:
    """Stream the :class:`FileScanTask` of a scan; see :func:`plan_files`.

    ``manifests`` replaces the snapshot's manifest list (tests, and callers that already read it).
    ``read_entries`` reads the data manifests' matching entries elsewhere (an engine's tasks); it
    gets the pruned manifests and returns one entry list per data manifest, in order.  By default
    they are streamed here, holding the deletes plus one manifest's entries.
    """
    plan = scan_manifests(table_metadata, io, snapshot_id=snapshot_id, as_of_timestamp_ms=as_of_timestamp_ms,
                          ref=ref, filter=filter, case_sensitive=case_sensitive, manifests=manifests)
    if plan is None:
        return
    index = delete_index(io, plan)
    entries = read_entries_on_driver(io, plan) if read_entries is None else read_entries(plan)
    yield from tasks_from_entries(plan, index, entries)


def plan_files(
    table_metadata: TableMetadata,
    io: FileAccess,
    *,
    snapshot_id: int | None = None,
    as_of_timestamp_ms: int | None = None,
    ref: str | None = None,
    filter: Expression | str | None = None,
    case_sensitive: bool = True,
) -> list[FileScanTask]:
    """Plan a scan: one :class:`FileScanTask` per live data file that may hold matching rows.

    ``filter`` is an expression or a Spark-SQL-style string (parsed with ``parse_filter``); it prunes
    manifests (partition summaries), files (partition values and column metrics) and is kept as each
    task's residual.  Snapshot choice follows :func:`select_snapshot`.  A table without snapshots
    plans no tasks.
    """
    return list(iter_file_scan_tasks(
        table_metadata, io, snapshot_id=snapshot_id, as_of_timestamp_ms=as_of_timestamp_ms, ref=ref,
        filter=filter, case_sensitive=case_sensitive,
    ))


def unified_partition_type(md: TableMetadata, schema: Schema | None = None) -> StructType:
    """The ``_partition`` struct: every partition field of every spec, once per field id, ordered by
    field id, typed by its transform over the current schema (as Java's ``Partitioning.partitionType``)."""
    schema = schema or md.schema()
    seen: dict[int, NestedField] = {}
    for spec in md.partition_specs:
        ptype = spec.partition_type(schema)
        for f in ptype.fields:
            if f.field_id not in seen and not isinstance(f.field_type, UnknownType):
                seen[f.field_id] = f
    return StructType(tuple(seen[i] for i in sorted(seen)))
