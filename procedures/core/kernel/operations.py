"""Snapshot operations named after the spec's operations: append, overwrite, delete, replace.

* :class:`FastAppend` adds new manifests and keeps every existing one.
* :class:`MergeAppend` appends and then merges small manifests (``commit.manifest.*``).
* :class:`DeleteFiles` removes files by path or by a row filter that matches whole files.
* :class:`OverwriteFiles` removes and adds data files, with optional conflict checks from a
  starting snapshot (serializable/snapshot isolation as Java's ``OverwriteFiles``).
* :class:`ReplacePartitions` replaces every file in the partitions the new files touch.
* :class:`RewriteFiles` swaps files without changing data (compaction), validating from its
  starting snapshot that nothing it replaces was deleted or received new deletes meanwhile.
* :class:`RowDelta` adds data and delete files together (merge-on-read DML).

All are :class:`~procedures.core.kernel.snapshot_producer.SnapshotProducer` subclasses: they recompute
their manifests and validations on every commit attempt and reuse files written before.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

from procedures.core.kernel.properties import MANIFEST_MERGE_ENABLED, MANIFEST_MIN_MERGE_COUNT, MANIFEST_TARGET_SIZE_BYTES
from procedures.core.kernel.snapshot_producer import (
    ManifestRewriter,
    SnapshotProducer,
    live_entries,
    snapshot_manifests,
)
from procedures.core.kernel.summary import SummaryBuilder, is_dv
from procedures.core.kernel.transaction import CommitContext
from procedures.errors import ValidationError
from procedures.spec.manifest.model import (
    DataFile, FileContent, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile,
)
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.manifest.writer import ManifestWriter
from procedures.spec.evaluators import Evaluator, InclusiveMetricsEvaluator, ManifestEvaluator, StrictMetricsEvaluator
from procedures.spec.expression_parser import parse_filter
from procedures.spec.metadata import TableMetadata
from procedures.spec.projection import inclusive_projection, strict_projection
from procedures.spec.snapshots import Snapshot

__all__ = [
    "FastAppend", "MergeAppend", "DeleteFiles", "OverwriteFiles", "ReplacePartitions", "RewriteFiles",
    "RowDelta", "RowFilterMatcher", "snapshots_since", "added_entries_since",
]


# ------------------------------------------------------------------------------ history helpers
def snapshots_since(base: TableMetadata, head: Snapshot | None, starting_snapshot_id: int | None) -> list[Snapshot]:
    """Snapshots committed on the branch after ``starting_snapshot_id`` up to ``head``, newest first.

    Raises ValidationError when the starting snapshot is no longer an ancestor of the head (it
    was expired or the branch was rolled back past it), because conflicts cannot be checked then.
    """
    out: list[Snapshot] = []
    current = head
    while current is not None and current.snapshot_id != starting_snapshot_id:
        out.append(current)
        current = base.snapshot_by_id(current.parent_snapshot_id) if current.parent_snapshot_id is not None else None
    if starting_snapshot_id is not None and current is None:
        raise ValidationError(
            f"Cannot determine history between starting snapshot {starting_snapshot_id} and the current "
            f"head: the starting snapshot is not an ancestor (expired or rolled back); rerun the operation"
        )
    return out


def added_entries_since(
    io, base: TableMetadata, snapshots: list[Snapshot], content: ManifestContent | None = None,
    statuses: tuple[ManifestEntryStatus, ...] = (ManifestEntryStatus.ADDED,),
) -> Iterator[tuple[Snapshot, ManifestEntry]]:
    """ADDED entries (or those of ``statuses``) of the given snapshots (each read from the manifests
    that snapshot added)."""
    ids = {s.snapshot_id for s in snapshots}
    by_id = {s.snapshot_id: s for s in snapshots}
    specs = {s.spec_id: s for s in base.partition_specs}
    seen: set[str] = set()
    for snap in snapshots:
        for m in snapshot_manifests(io, snap):
            if m.added_snapshot_id not in ids or m.manifest_path in seen:
                continue
            if content is not None and m.content != content:
                continue
            seen.add(m.manifest_path)
            for e in read_manifest(io, m, specs=specs):
                if e.status in statuses and e.snapshot_id in ids:
                    yield by_id[e.snapshot_id], e


def _delete_applies(delete: ManifestEntry, data_path: str, data_entry: ManifestEntry | None, specs_unpartitioned: set[int]) -> bool:
    """Whether a delete entry may apply to a data file (conservative for validation)."""
    f = delete.data_file
    if f.content == FileContent.POSITION_DELETES:
        if f.referenced_data_file is not None:
            return f.referenced_data_file == data_path
        return True  # partition-scoped position deletes may reference any file of the partition
    if data_entry is None:
        return True
    if delete.sequence_number is not None and data_entry.sequence_number is not None and \
            delete.sequence_number <= data_entry.sequence_number:
        return False
    if f.spec_id in specs_unpartitioned:
        return True
    return f.spec_id == data_entry.data_file.spec_id and f.partition == data_entry.data_file.partition


# ------------------------------------------------------------------------------ appends
class FastAppend(SnapshotProducer):
    """Append data files in new manifests; existing manifests are kept as they are."""

    operation = "append"

    def __init__(self, files: Iterable[DataFile], **kwargs) -> None:
        super().__init__(**kwargs)
        self.files = list(files)
        for f in self.files:
            if f.content != FileContent.DATA:
                raise ValidationError(f"Cannot append {f.file_path}: it is a delete file, use a row delta")
        self._written: list[ManifestFile] | None = None
        #: write the new manifests' entries with null snapshot ids (see ``write_manifest``)
        self.inherit_snapshot_id = False

    def new_manifests(self, base: TableMetadata, ctx: CommitContext, summary: SummaryBuilder) -> list[ManifestFile]:
        """The manifests holding the appended files (written once, reused by retries)."""
        if self._written is not None and all(base.spec_by_id(m.partition_spec_id) is not None for m in self._written):
            for f in self.files:
                summary.added_file(f)
            for m in self._written:
                ctx.reuse(m.manifest_path)
            return list(self._written)
        self._written = self.write_added_files(base, ctx, self.files, summary, inherit_snapshot_id=self.inherit_snapshot_id)
        return list(self._written)

    def manifests(self, base, parent, ctx, summary):
        return self.new_manifests(base, ctx, summary) + snapshot_manifests(ctx.io, parent)


class MergeAppend(FastAppend):
    """Append, then merge small data manifests per spec as Java's merge append does; the parent's
    manifests left with no live entries are dropped, as Java's ``MergingSnapshotProducer`` does.

    Governed by ``commit.manifest-merge.enabled`` (true), ``commit.manifest.min-count-to-merge``
    (100) and ``commit.manifest.target-size-bytes`` (8 MiB).
    """

    def __init__(self, files: Iterable[DataFile], **kwargs) -> None:
        super().__init__(files, **kwargs)
        self._merged: dict[tuple[str, ...], ManifestFile] = {}

    def manifests(self, base, parent, ctx, summary):
        new = self.new_manifests(base, ctx, summary)
        # as Java's merging commits: a parent's manifest with no added or existing entries (only
        # DELETED ones, reported by the snapshot that wrote them) is not carried forward; a null
        # v1 count means unknown, and such a manifest is kept
        existing = [m for m in snapshot_manifests(ctx.io, parent)
                    if m.has_added_files() or m.has_existing_files() or m.added_snapshot_id == self.snapshot_id]
        props = base.properties
        if not MANIFEST_MERGE_ENABLED.read(props):
            return new + existing
        min_count = MANIFEST_MIN_MERGE_COUNT.read(props)
        target = MANIFEST_TARGET_SIZE_BYTES.read(props)
        return merge_manifests(self, base, ctx, new + existing, {m.manifest_path for m in new}, min_count, target, self._merged)


def merge_manifests(
    producer: SnapshotProducer,
    base: TableMetadata,
    ctx: CommitContext,
    manifests: list[ManifestFile],
    new_paths: set[str],
    min_count: int,
    target_size: int,
    cache: dict[tuple[str, ...], ManifestFile],
) -> list[ManifestFile]:
    """Bin-pack data manifests of each spec by size and merge bins, newest first.

    A bin holding a manifest new in this commit is merged only once it has ``min_count``
    manifests, so small appends do not rewrite metadata on every commit.
    """
    out: list[ManifestFile] = []
    groups: dict[int, list[ManifestFile]] = {}
    for m in manifests:
        if m.content == ManifestContent.DATA:
            groups.setdefault(m.partition_spec_id, []).append(m)
        else:
            out.append(m)
    merged_out: list[ManifestFile] = []
    for spec_id in sorted(groups, reverse=True):
        bins: list[list[ManifestFile]] = []
        for m in groups[spec_id]:
            if bins and sum(x.manifest_length for x in bins[-1]) + m.manifest_length <= target_size:
                bins[-1].append(m)
            else:
                bins.append([m])
        for b in bins:
            if len(b) == 1 or (any(m.manifest_path in new_paths for m in b) and len(b) < min_count):
                merged_out.extend(b)
                continue
            # this commit's own manifests merged into another are not part of the result
            for m in b:
                if m.manifest_path in new_paths:
                    ctx.supersede(m.manifest_path)
            key = tuple(m.manifest_path for m in b)
            if key in cache:
                ctx.reuse(cache[key].manifest_path)
                merged_out.append(cache[key])
                continue
            merged = _merge_bin(producer, base, ctx, spec_id, b)
            cache[key] = merged
            merged_out.append(merged)
    return merged_out + out


def _merge_bin(producer: SnapshotProducer, base: TableMetadata, ctx: CommitContext, spec_id: int, bin_: list[ManifestFile]) -> ManifestFile:
    specs = {s.spec_id: s for s in base.partition_specs}

    def write(w: ManifestWriter) -> None:
        for m in bin_:
            for e in read_manifest(ctx.io, m, specs=specs):
                if e.status == ManifestEntryStatus.DELETED:
                    # deletes of older snapshots were already reported; only this commit's stay
                    if e.snapshot_id == producer.snapshot_id:
                        w.delete(e.data_file, e.sequence_number, e.file_sequence_number)
                elif e.status == ManifestEntryStatus.ADDED and e.snapshot_id == producer.snapshot_id:
                    w.add(e.data_file)
                else:
                    w.existing(e.data_file, e.snapshot_id, e.sequence_number, e.file_sequence_number)

    return producer.write_manifest(base, ctx, spec_id, ManifestContent.DATA, write)


# ------------------------------------------------------------------------------ removing files
def _file_key(f: DataFile) -> tuple[str, int | None]:
    return (f.file_path, f.content_offset)


class RowFilterMatcher:
    """Decides, for each file, whether all, none or only some of its rows match a row filter.

    Uses the partition tuple (strict and inclusive projections through the file's own spec) first
    and the column metrics second, as Java's delete-by-filter does.  A data file where only some
    rows may match cannot be removed by metadata alone: the caller must rewrite it (copy-on-write).
    """

    ALL, NONE, SOME = "all", "none", "some"

    def __init__(self, base: TableMetadata, row_filter, case_sensitive: bool = True) -> None:
        self.expr = parse_filter(row_filter) if isinstance(row_filter, str) else row_filter
        self.schema = base.schema()
        self.case_sensitive = case_sensitive
        self._specs = {s.spec_id: s for s in base.partition_specs}
        self._per_spec: dict[int, tuple] = {}
        self._inclusive = InclusiveMetricsEvaluator(self.schema, self.expr, case_sensitive)
        self._strict = StrictMetricsEvaluator(self.schema, self.expr, case_sensitive)

    def _spec_evaluators(self, spec_id: int) -> tuple:
        if spec_id not in self._per_spec:
            spec = self._specs[spec_id]
            ptype = spec.partition_type(self.schema)
            self._per_spec[spec_id] = (
                Evaluator(ptype, inclusive_projection(spec, self.schema, self.expr, self.case_sensitive)),
                Evaluator(ptype, strict_projection(spec, self.schema, self.expr, self.case_sensitive)),
                ManifestEvaluator.for_row_filter(self.expr, spec, self.schema, self.case_sensitive),
            )
        return self._per_spec[spec_id]

    def might_match(self, manifest: ManifestFile) -> bool:
        """Whether a manifest may hold a matching file (partition summaries)."""
        return self._spec_evaluators(manifest.partition_spec_id)[2].eval(manifest)

    def classify(self, f: DataFile) -> str:
        """``all``, ``none`` or ``some`` for the rows of ``f``."""
        inclusive, strict, _ = self._spec_evaluators(f.spec_id)
        if not inclusive.eval(f.partition):
            return self.NONE
        if strict.eval(f.partition):
            return self.ALL
        if f.content != FileContent.DATA:
            return self.NONE  # delete files go only with their whole partition
        if not self._inclusive.eval(f):
            return self.NONE
        if self._strict.eval(f):
            return self.ALL
        return self.SOME


class _RemovingProducer(SnapshotProducer):
    """A producer that removes files by path and adds new ones."""

    def __init__(
        self,
        *,
        add_files: Iterable[DataFile] = (),
        remove_paths: Iterable[str] = (),
        remove_files: Iterable[DataFile] = (),
        require_removed_exist: bool = True,
        data_sequence_number: int | None = None,
        row_filter=None,
        case_sensitive: bool = True,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.row_filter = row_filter
        self.case_sensitive = case_sensitive
        self.add_files = list(add_files)
        self.remove_paths = set(remove_paths)
        # files named as DataFile objects are matched by (path, content offset): deletion vectors
        # share one Puffin file, and removing one must not remove its neighbours
        self.remove_keys = {_file_key(f) for f in remove_files}
        self.require_removed_exist = require_removed_exist
        self.data_sequence_number = data_sequence_number
        self._rewriter = ManifestRewriter(self)
        self._added: list[ManifestFile] | None = None
        self.removed: list[DataFile] = []

    def extra_remove(self, base: TableMetadata, parent: Snapshot | None, ctx: CommitContext) -> Callable[[ManifestEntry], bool] | None:
        """An extra predicate selecting entries to remove (for partition replacement)."""
        return None

    def manifests(self, base, parent, ctx, summary):
        if self._added is None:
            self._added = self.write_added_files(base, ctx, self.add_files, summary, self.data_sequence_number)
        else:
            for f in self.add_files:
                summary.added_file(f)
            for m in self._added:
                ctx.reuse(m.manifest_path)
        extra = self.extra_remove(base, parent, ctx)
        paths, keys = self.remove_paths, self.remove_keys
        matcher = RowFilterMatcher(base, self.row_filter, self.case_sensitive) if self.row_filter is not None else None

        def should_remove(e: ManifestEntry) -> bool:
            if e.data_file.file_path in paths or _file_key(e.data_file) in keys or (extra is not None and extra(e)):
                return True
            if matcher is None:
                return False
            verdict = matcher.classify(e.data_file)
            if verdict == RowFilterMatcher.SOME:
                raise ValidationError(
                    f"Cannot delete file where some, but not all, rows match filter {self.row_filter}: "
                    f"{e.data_file.file_path}; rewrite the file's rows instead (copy-on-write)"
                )
            return verdict == RowFilterMatcher.ALL

        might_match = (lambda m: True) if matcher is None or paths or keys or extra is not None else matcher.might_match
        kept, removed = self._rewriter.rewrite(
            base, ctx, snapshot_manifests(ctx.io, parent), should_remove, summary, might_match,
        )
        if self.require_removed_exist:
            missing = (paths - {f.file_path for f in removed}) | {
                k[0] for k in keys - {_file_key(f) for f in removed}
            }
            if missing:
                raise ValidationError(
                    f"Cannot commit to {ctx.identifier}: {len(missing)} file(s) to remove are no longer in the "
                    f"table (deleted by a concurrent commit?): {sorted(missing)[:5]}"
                )
        self.removed = removed
        return list(self._added) + kept

    def operation_for(self, summary: SummaryBuilder) -> str:
        c = summary.counts
        adds_data = c.get("added-data-files", 0) > 0
        removes_data = c.get("deleted-data-files", 0) > 0
        if removes_data and not adds_data and not c.get("added-delete-files"):
            return "delete"
        if adds_data and not removes_data and not c.get("removed-delete-files") and not c.get("added-delete-files"):
            return "append"
        return self.operation


class DeleteFiles(_RemovingProducer):
    """Remove data or delete files by path (``operation = delete``)."""

    operation = "delete"

    def __init__(self, paths: Iterable[str] = (), *, require_exist: bool = True, row_filter=None, **kwargs) -> None:
        super().__init__(remove_paths=paths, require_removed_exist=require_exist, row_filter=row_filter, **kwargs)

    def operation_for(self, summary):
        return "delete"


class OverwriteFiles(_RemovingProducer):
    """Remove and add data files; with ``starting_snapshot_id`` it checks concurrent commits.

    ``conflict_filter(data_file) -> bool`` selects new data files that conflict (serializable
    isolation); ``validate_no_conflicting_deletes`` refuses new delete files against removed files.
    """

    operation = "overwrite"

    def __init__(
        self,
        *,
        add_files: Iterable[DataFile] = (),
        remove_paths: Iterable[str] = (),
        starting_snapshot_id: int | None = None,
        conflict_filter: Callable[[DataFile], bool] | None = None,
        validate_no_conflicting_deletes: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(add_files=add_files, remove_paths=remove_paths, **kwargs)
        self.starting_snapshot_id = starting_snapshot_id
        self.conflict_filter = conflict_filter
        self.validate_no_conflicting_deletes = validate_no_conflicting_deletes
        self._check_from = starting_snapshot_id is not None or conflict_filter is not None

    def validate(self, base, parent, ctx):
        if self.row_filter is not None and self.add_files:
            matcher = RowFilterMatcher(base, self.row_filter, self.case_sensitive)
            for f in self.add_files:
                if matcher.classify(f) != RowFilterMatcher.ALL:
                    raise ValidationError(
                        f"Cannot append file with rows that do not match filter: {self.row_filter}: {f.file_path}"
                    )
        if not self._check_from:
            return
        new = snapshots_since(base, parent, self.starting_snapshot_id)
        if not new:
            return
        for snap, e in added_entries_since(ctx.io, base, new):
            f = e.data_file
            if f.content == FileContent.DATA and self.conflict_filter is not None and self.conflict_filter(f):
                raise ValidationError(
                    f"Found conflicting files that can contain records matching the overwrite: {f.file_path} "
                    f"added by snapshot {snap.snapshot_id}"
                )
            if f.content != FileContent.DATA and self.validate_no_conflicting_deletes:
                if any(_delete_applies(e, p, None, set()) for p in self.remove_paths):
                    raise ValidationError(
                        f"Found new conflicting delete file {f.file_path} (snapshot {snap.snapshot_id}) "
                        "for data files being overwritten"
                    )


class ReplacePartitions(OverwriteFiles):
    """Dynamic partition overwrite: replace all files of the partitions the new files land in."""

    def __init__(self, files: Iterable[DataFile], **kwargs) -> None:
        super().__init__(add_files=files, **kwargs)
        self.snapshot_properties.setdefault("replace-partitions", "true")
        self._targets = {(f.spec_id, f.partition) for f in self.add_files}

    def extra_remove(self, base, parent, ctx):
        targets = self._targets
        unpartitioned = {s.spec_id for s in base.partition_specs if s.is_unpartitioned()}
        if any(spec in unpartitioned for spec, _ in targets):
            return lambda e: True  # an unpartitioned table: replace everything
        return lambda e: (e.data_file.spec_id, e.data_file.partition) in targets

    def operation_for(self, summary):
        return "overwrite"


class RewriteFiles(_RemovingProducer):
    """Replace files without changing the table's rows (``operation = replace``).

    With ``starting_snapshot_id`` it fails cleanly when a file being replaced got new position
    deletes, deletion vectors or applicable equality deletes after that snapshot: the rewritten
    file would resurrect those rows.  New data files take ``data_sequence_number`` when given
    (the starting snapshot's, so concurrent equality deletes still apply to the rewritten rows).
    """

    operation = "replace"

    def __init__(
        self,
        *,
        remove_files: Iterable[DataFile] = (),
        add_files: Iterable[DataFile] = (),
        starting_snapshot_id: int | None = None,
        data_sequence_number: int | None = None,
        **kwargs,
    ) -> None:
        remove = list(remove_files)
        super().__init__(
            add_files=add_files, remove_files=remove,
            data_sequence_number=data_sequence_number, **kwargs,
        )
        self.remove_files = remove
        self.starting_snapshot_id = starting_snapshot_id

    def validate(self, base, parent, ctx):
        if self.starting_snapshot_id is None:
            return
        new = snapshots_since(base, parent, self.starting_snapshot_id)
        removed = [f for f in self.remove_files if f.content == FileContent.DATA]
        if not new or not removed:
            return
        unpartitioned = {s.spec_id for s in base.partition_specs if s.is_unpartitioned()}
        by_path = {d.file_path: d for d in removed}
        for snap, e in added_entries_since(ctx.io, base, new, ManifestContent.DELETES):
            f = e.data_file
            if f.content == FileContent.EQUALITY_DELETES:
                # rewritten rows keep the starting sequence number, so newer equality deletes still
                # apply to them: not a conflict (Java ignores them too)
                if self.data_sequence_number is not None:
                    continue
                hits = [d for d in removed if f.spec_id in unpartitioned or (f.spec_id, f.partition) == (d.spec_id, d.partition)]
            elif f.referenced_data_file is not None:
                hits = [by_path[f.referenced_data_file]] if f.referenced_data_file in by_path else []
            else:
                hits = [d for d in removed if (f.spec_id, f.partition) == (d.spec_id, d.partition)]
            if hits:
                raise ValidationError(
                    f"Cannot commit rewrite of {hits[0].file_path}: found new delete file {f.file_path} added by "
                    f"snapshot {snap.snapshot_id} after the rewrite started from snapshot {self.starting_snapshot_id}"
                )

    def operation_for(self, summary):
        return "replace"


class RowDelta(_RemovingProducer):
    """Add data and delete files together (merge-on-read), optionally removing replaced deletes.

    Validation always checks that data files referenced by new position deletes or deletion
    vectors are still live, and that no concurrent commit added a DV for the same data file.
    """

    operation = "overwrite"

    def __init__(
        self,
        *,
        add_rows: Iterable[DataFile] = (),
        add_deletes: Iterable[DataFile] = (),
        remove_deletes: Iterable[DataFile] = (),
        starting_snapshot_id: int | None = None,
        conflict_filter: Callable[[DataFile], bool] | None = None,
        **kwargs,
    ) -> None:
        rows, deletes = list(add_rows), list(add_deletes)
        for f in rows:
            if f.content != FileContent.DATA:
                raise ValidationError(f"Cannot add {f.file_path} as rows: it is a delete file")
        for f in deletes:
            if f.content == FileContent.DATA:
                raise ValidationError(f"Cannot add {f.file_path} as deletes: it is a data file")
        super().__init__(add_files=rows + deletes, remove_files=remove_deletes, **kwargs)
        self.add_deletes = deletes
        self.starting_snapshot_id = starting_snapshot_id
        self.conflict_filter = conflict_filter

    def validate(self, base, parent, ctx):
        fv = base.format_version
        for f in self.add_deletes:
            if fv < 2:
                raise ValidationError(f"Cannot add delete file {f.file_path} to a format v1 table; upgrade it to v2")
            if fv >= 3 and f.content == FileContent.POSITION_DELETES and not is_dv(f):
                raise ValidationError(
                    f"Cannot add position delete file {f.file_path} to a v3 table: v3 uses deletion vectors"
                )
            if fv < 3 and is_dv(f):
                raise ValidationError(f"Cannot add deletion vector {f.file_path} to a v{fv} table")
        referenced = {f.referenced_data_file for f in self.add_deletes if f.referenced_data_file}
        if referenced and parent is not None:
            live = {e.data_file.file_path for e in live_entries(ctx.io, base, [
                m for m in snapshot_manifests(ctx.io, parent) if m.content == ManifestContent.DATA
            ])}
            missing = referenced - live
            if missing:
                raise ValidationError(
                    f"Cannot commit deletes to {ctx.identifier}: referenced data file(s) no longer exist "
                    f"(removed by a concurrent commit?): {sorted(missing)[:5]}"
                )
        elif referenced:
            raise ValidationError(f"Cannot commit deletes to {ctx.identifier}: the table has no data files")
        if self.starting_snapshot_id is None:
            return
        new = snapshots_since(base, parent, self.starting_snapshot_id)
        dv_targets = {f.referenced_data_file for f in self.add_deletes if is_dv(f)}
        for snap, e in added_entries_since(ctx.io, base, new):
            f = e.data_file
            if is_dv(f) and f.referenced_data_file in dv_targets:
                raise ValidationError(
                    f"Found concurrently added DV for {f.referenced_data_file} (snapshot {snap.snapshot_id}); "
                    "rerun the delete"
                )
            if f.content == FileContent.DATA and self.conflict_filter is not None and self.conflict_filter(f):
                raise ValidationError(
                    f"Found conflicting files that can contain records matching the change: {f.file_path} "
                    f"added by snapshot {snap.snapshot_id}"
                )

    def operation_for(self, summary):
        c = summary.counts
        adds_data = c.get("added-data-files", 0) > 0
        adds_deletes = c.get("added-delete-files", 0) > 0
        if adds_data and not adds_deletes:
            return "append"
        if adds_deletes and not adds_data:
            return "delete"
        return "overwrite"
