"""Producing snapshots: the shared machinery of every operation that writes one.

:class:`SnapshotProducer` owns what every snapshot commit must get right on each attempt: the
snapshot id (generated once, kept across retries unless it collides), the sequence number (the
base's ``last-sequence-number + 1``), the parent (the head of the target branch), v3 row lineage
(``first-row-id`` from the base's ``next-row-id``, ``added-rows`` from the manifest list), a new
manifest list per attempt, and the summary with running totals.  Subclasses only say which
manifests the snapshot holds (:meth:`SnapshotProducer.manifests`) and what they validate against
concurrent commits (:meth:`SnapshotProducer.validate`).

:class:`ManifestRewriter` implements the "filter" half of a merging commit: it rewrites the parent's
manifests that hold files being removed (marking them DELETED) and keeps the others untouched,
caching its results so a retry on a newer base reuses every manifest it can.
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Iterator

from procedures.core.kernel import updates as metadata_updates
from procedures.core.kernel.builder import MAIN_BRANCH
from procedures.core.kernel.paths import join_path
from procedures.core.kernel.properties import WRITE_METADATA_LOCATION
from procedures.core.kernel.summary import SummaryBuilder, summary_with_totals
from procedures.core.kernel.transaction import CommitContext
from procedures.errors import ValidationError
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.manifest_list import (
    ManifestRows, read_manifest_list, read_manifest_list_where, write_manifest_list,
)
from procedures.spec.manifest.model import (
    DataFile, FileContent, ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile,
)
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.manifest.writer import ManifestWriter
from procedures.spec.metadata import TableMetadata
from procedures.spec.snapshots import Snapshot, SnapshotRef, SnapshotRefType

__all__ = ["SnapshotProducer", "ManifestRewriter", "new_snapshot_id", "live_entries", "snapshot_manifests",
           "snapshot_manifest_rows", "manifest_list_rows", "metadata_dir"]


def new_snapshot_id() -> int:
    """A positive random 63-bit id, made as Java makes them (uuid halves xor'ed)."""
    u = uuidlib.uuid4().int
    return ((u >> 64) ^ (u & ((1 << 64) - 1))) & ((1 << 63) - 1)


def snapshot_manifests(io: FileAccess, snapshot: Snapshot | None) -> list[ManifestFile]:
    """The manifests of ``snapshot`` (empty for None)."""
    if snapshot is None or not snapshot.manifest_list:
        return []
    return read_manifest_list(io, snapshot.manifest_list)


def snapshot_manifest_rows(io: FileAccess, snapshot: Snapshot | None) -> ManifestRows | list[ManifestFile]:
    """:func:`snapshot_manifests` kept Avro-encoded (a :class:`ManifestRows`, decoded a row at a time
    when read; a list for a schema the skimming reader does not handle): an operation that walks a
    large table's thousands of manifests holds their bytes, not one object per manifest with its
    partition summaries."""
    if snapshot is None or not snapshot.manifest_list:
        return []
    return manifest_list_rows(io, snapshot.manifest_list)


def manifest_list_rows(io: FileAccess, path: str) -> ManifestRows | list[ManifestFile]:
    """Every row of the manifest list at ``path``, kept encoded as :func:`snapshot_manifest_rows` keeps them."""
    return read_manifest_list_where(io, path, None)


def live_entries(io: FileAccess, md: TableMetadata, manifests: Iterable[ManifestFile]) -> Iterator[ManifestEntry]:
    """Every ADDED or EXISTING entry of ``manifests`` with inheritance applied."""
    specs = {s.spec_id: s for s in md.partition_specs}
    for m in manifests:
        for e in read_manifest(io, m, specs=specs):
            if e.status != ManifestEntryStatus.DELETED:
                yield e


class SnapshotProducer:
    """Base of every operation that commits a new snapshot."""

    replayable = True
    operation = "overwrite"

    def __init__(
        self,
        *,
        branch: str = MAIN_BRANCH,
        snapshot_properties: dict[str, str] | None = None,
        stage_only: bool = False,
    ) -> None:
        self.branch = branch
        self.snapshot_properties = dict(snapshot_properties or {})
        self.stage_only = stage_only
        self.snapshot_id = new_snapshot_id()
        self.commit_uuid = str(uuidlib.uuid4())
        self._manifest_count = 0
        #: the snapshot committed by the last attempt
        self.snapshot: Snapshot | None = None

    # ---------------------------------------------------------------- subclass hooks
    def validate(self, base: TableMetadata, parent: Snapshot | None, ctx: CommitContext) -> None:
        """Check the change still applies on ``base``; raise ValidationError when it does not."""

    def manifests(
        self, base: TableMetadata, parent: Snapshot | None, ctx: CommitContext, summary: SummaryBuilder
    ) -> list[ManifestFile]:
        """All manifests of the new snapshot; count what changes into ``summary``."""
        raise NotImplementedError

    def operation_for(self, summary: SummaryBuilder) -> str:
        """The snapshot's ``operation``; most producers have a fixed one."""
        return self.operation

    # ---------------------------------------------------------------- helpers for subclasses
    def new_manifest_path(self, base: TableMetadata) -> str:
        """A fresh manifest location under the table's metadata folder."""
        self._manifest_count += 1
        return f"{metadata_dir(base)}/{self.commit_uuid}-m{self._manifest_count - 1}.avro"

    def write_manifest(
        self,
        base: TableMetadata,
        ctx: CommitContext,
        spec_id: int,
        content: ManifestContent,
        write: Callable[[ManifestWriter], None],
        *,
        inherit_snapshot_id: bool = False,
    ) -> ManifestFile:
        """Write one manifest for ``spec_id`` with ``write(writer)`` and register it for cleanup.

        ``inherit_snapshot_id``: the entries' snapshot ids are left null, to be inherited from the
        manifest list (only for a table that allows inheritance, with ADDED entries only), as Java's
        imports write the manifests they append; the manifest list still names this snapshot."""
        path = self.new_manifest_path(base)
        writer = ManifestWriter(
            ctx.io, path, base.spec_by_id(spec_id), base.schema(), base.format_version, content,
            None if inherit_snapshot_id else self.snapshot_id,
        )
        ctx.track(path)
        try:
            write(writer)
        finally:
            manifest = writer.close()
        return replace(manifest, added_snapshot_id=self.snapshot_id) if inherit_snapshot_id else manifest

    def write_added_files(
        self, base: TableMetadata, ctx: CommitContext, files: list[DataFile], summary: SummaryBuilder,
        data_sequence_number: int | None = None, inherit_snapshot_id: bool = False,
    ) -> list[ManifestFile]:
        """New manifests holding ``files`` as ADDED, one per (spec, content kind); see
        :meth:`write_manifest` for ``inherit_snapshot_id``."""
        groups: dict[tuple[int, ManifestContent], list[DataFile]] = {}
        for f in files:
            if base.spec_by_id(f.spec_id) is None:
                raise ValidationError(f"Cannot add {f.file_path}: partition spec {f.spec_id} is not in the table")
            kind = ManifestContent.DATA if f.content == FileContent.DATA else ManifestContent.DELETES
            groups.setdefault((f.spec_id, kind), []).append(f)
            summary.added_file(f)
        out = []
        for (spec_id, kind), group in sorted(groups.items(), key=lambda kv: (kv[0][0], int(kv[0][1]))):
            def write(w: ManifestWriter, group=group) -> None:
                for f in group:
                    w.add(f, sequence_number=data_sequence_number)
            out.append(self.write_manifest(base, ctx, spec_id, kind, write, inherit_snapshot_id=inherit_snapshot_id))
        return out

    # ---------------------------------------------------------------- the operation
    def apply(self, base: TableMetadata, ctx: CommitContext) -> list[metadata_updates.MetadataUpdate]:
        """Updates that add the snapshot to ``base`` and move the branch to it."""
        if any(s.snapshot_id == self.snapshot_id for s in base.snapshots):
            self.snapshot_id = new_snapshot_id()
        ref = base.refs.get(self.branch)
        if ref is not None and ref.ref_type != SnapshotRefType.BRANCH:
            raise ValidationError(f"Cannot commit to {self.branch!r}: it is a tag, not a branch")
        parent = base.snapshot_by_id(ref.snapshot_id) if ref is not None else None
        self.validate(base, parent, ctx)
        summary = SummaryBuilder()
        manifests = self.manifests(base, parent, ctx, summary)
        fv = base.format_version
        sequence_number = base.last_sequence_number + 1 if fv > 1 else 0
        list_path = f"{metadata_dir(base)}/snap-{self.snapshot_id}-{ctx.attempt + 1}-{self.commit_uuid}.avro"
        first_row_id = base.next_row_id if fv >= 3 else None
        ctx.track(list_path)
        _, next_row_id = write_manifest_list(
            ctx.io, list_path, fv, self.snapshot_id,
            parent.snapshot_id if parent is not None else None,
            sequence_number, first_row_id, manifests,
        )
        props = dict(self.snapshot_properties)
        snapshot = Snapshot(
            snapshot_id=self.snapshot_id,
            parent_snapshot_id=parent.snapshot_id if parent is not None else None,
            sequence_number=sequence_number,
            timestamp_ms=max(_now_ms(), base.last_updated_ms),
            manifest_list=list_path,
            summary=summary_with_totals(
                self.operation_for(summary), summary, dict(parent.summary) if parent is not None else None, props
            ),
            schema_id=base.current_schema_id,
            first_row_id=first_row_id,
            added_rows=(next_row_id - first_row_id) if fv >= 3 else None,
        )
        self.snapshot = snapshot
        out: list[metadata_updates.MetadataUpdate] = [metadata_updates.AddSnapshot(snapshot)]
        if not self.stage_only:
            new_ref = (
                SnapshotRef(snapshot.snapshot_id, SnapshotRefType.BRANCH)
                if ref is None
                else SnapshotRef(
                    snapshot.snapshot_id, SnapshotRefType.BRANCH, ref.min_snapshots_to_keep,
                    ref.max_snapshot_age_ms, ref.max_ref_age_ms,
                )
            )
            out.append(metadata_updates.SetSnapshotRef(
                self.branch, new_ref, expected_snapshot_id=parent.snapshot_id if parent else None, assert_head=False,
            ))
        return out


def metadata_dir(md: TableMetadata) -> str:
    """Where a table's metadata files go: ``write.metadata.path`` or ``<location>/metadata``."""
    custom = WRITE_METADATA_LOCATION.read(md.properties)
    return custom.rstrip("/") if custom else join_path(md.location, "metadata")


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


_MISS = object()


@dataclass
class _Rewrite:
    manifest: ManifestFile
    removed: list[DataFile]


@dataclass
class ManifestRewriter:
    """Rewrites manifests to drop files, reusing results across commit attempts.

    ``should_remove(entry)`` decides for each live entry; entries it selects are written as
    DELETED (by the new snapshot) and everything else as EXISTING.  Manifests where nothing is
    selected are kept as they are.  Manifests left with no live entries are dropped, as Java does.
    """

    producer: SnapshotProducer
    cache: dict[str, object] = field(default_factory=dict)

    def rewrite(
        self,
        base: TableMetadata,
        ctx: CommitContext,
        manifests: list[ManifestFile],
        should_remove: Callable[[ManifestEntry], bool],
        summary: SummaryBuilder,
        might_match: Callable[[ManifestFile], bool] = lambda m: True,
    ) -> tuple[list[ManifestFile], list[DataFile]]:
        """``(manifests of the new snapshot, files removed)``; removed files are counted."""
        out: list[ManifestFile] = []
        removed: list[DataFile] = []
        specs = {s.spec_id: s for s in base.partition_specs}
        for m in manifests:
            # a null v1 count means unknown: such manifests are kept
            if not (m.has_added_files() or m.has_existing_files()):
                continue
            if not might_match(m):
                out.append(m)
                continue
            cached = self.cache.get(m.manifest_path, _MISS)
            if cached is _MISS:
                entries = list(read_manifest(ctx.io, m, specs=specs))
                live = [e for e in entries if e.status != ManifestEntryStatus.DELETED]
                selected = [e for e in live if should_remove(e)]
                if not selected:
                    cached = None
                else:
                    chosen = {id(e) for e in selected}

                    def write(w: ManifestWriter) -> None:
                        for e in live:
                            if id(e) in chosen:
                                w.delete(e.data_file, e.sequence_number, e.file_sequence_number)
                            else:
                                w.existing(e.data_file, e.snapshot_id, e.sequence_number, e.file_sequence_number)

                    new = self.producer.write_manifest(base, ctx, m.partition_spec_id, m.content, write)
                    cached = _Rewrite(new, [e.data_file for e in selected])
                self.cache[m.manifest_path] = cached
            elif cached is not None:
                ctx.reuse(cached.manifest.manifest_path)
            if cached is None:
                out.append(m)
            else:
                out.append(cached.manifest)
                removed.extend(cached.removed)
        for f in removed:
            summary.removed_file(f)
        return out, removed
