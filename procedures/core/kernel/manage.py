"""Snapshot management: refs, rollback, set-current, cherry-pick, fast-forward and expiration.

Every class here is a replayable :class:`~procedures.core.kernel.transaction.Operation`: on each commit
attempt it re-reads the fresh base and re-checks its preconditions (an ancestor is still an
ancestor, a WAP id is still unpublished ...), so a concurrent commit can never make it apply to
a state it did not validate.  Error messages follow Iceberg Java's where users may know them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Iterable

from procedures.core.kernel import updates as metadata_updates
from procedures.core.kernel.builder import MAIN_BRANCH
from procedures.core.kernel.properties import MAX_REF_AGE_MS, MAX_SNAPSHOT_AGE_MS, MIN_SNAPSHOTS_TO_KEEP, require_gc_enabled
from procedures.core.kernel.operations import FastAppend, ReplacePartitions, snapshots_since
from procedures.core.kernel.snapshot_producer import snapshot_manifests
from procedures.core.kernel.transaction import CommitContext
from procedures.errors import NoSuchRefError, NoSuchSnapshotError, ValidationError
from procedures.spec.manifest.model import ManifestEntryStatus
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.metadata import TableMetadata
from procedures.spec.snapshots import Snapshot, SnapshotRef, SnapshotRefType

__all__ = [
    "is_ancestor", "ancestor_ids", "SetBranchHead", "RollbackTo", "RollbackToTime", "SetCurrentSnapshot",
    "CherryPick", "FastForward", "ManageRef", "ExpireSnapshots", "ExpirePlan", "plan_expiration",
    "check_retain_last", "EXPIRE_SNAPSHOTS", "wap_snapshot",
]


def ancestor_ids(md: TableMetadata, snapshot_id: int | None) -> list[int]:
    """``snapshot_id`` and its ancestors still in the metadata, newest first."""
    out = []
    current = md.snapshot_by_id(snapshot_id) if snapshot_id is not None else None
    while current is not None:
        out.append(current.snapshot_id)
        current = md.snapshot_by_id(current.parent_snapshot_id) if current.parent_snapshot_id is not None else None
    return out


def is_ancestor(md: TableMetadata, snapshot_id: int, of: int | None) -> bool:
    """True when ``snapshot_id`` is ``of`` or one of its ancestors."""
    return snapshot_id in ancestor_ids(md, of)


def _move(md: TableMetadata, name: str, snapshot_id: int) -> metadata_updates.SetSnapshotRef:
    old = md.refs.get(name)
    ref = SnapshotRef(snapshot_id, SnapshotRefType.BRANCH) if old is None else SnapshotRef(
        snapshot_id, old.ref_type, old.min_snapshots_to_keep, old.max_snapshot_age_ms, old.max_ref_age_ms
    )
    return metadata_updates.SetSnapshotRef(name, ref, expected_snapshot_id=None if old is None else old.snapshot_id,
                                           assert_head=False)


@dataclass
class SetBranchHead:
    """Move ``main`` (or another branch) to a snapshot; the base class of the rollbacks."""

    snapshot_id: int
    branch: str = MAIN_BRANCH
    replayable: bool = True
    previous_snapshot_id: int | None = None

    def check(self, base: TableMetadata) -> None:
        """Preconditions on the fresh base."""
        if base.snapshot_by_id(self.snapshot_id) is None:
            raise NoSuchSnapshotError(f"Cannot roll back to unknown snapshot id: {self.snapshot_id}")

    def apply(self, base: TableMetadata, ctx: CommitContext) -> list[metadata_updates.MetadataUpdate]:
        """Move the branch after re-checking the preconditions."""
        self.check(base)
        ref = base.refs.get(self.branch)
        self.previous_snapshot_id = ref.snapshot_id if ref is not None else None
        if self.previous_snapshot_id == self.snapshot_id:
            return []
        return [_move(base, self.branch, self.snapshot_id)]


@dataclass
class RollbackTo(SetBranchHead):
    """Roll ``main`` back to an ancestor of its current head."""

    def check(self, base: TableMetadata) -> None:
        super().check(base)
        if not is_ancestor(base, self.snapshot_id, base.current_snapshot_id):
            raise ValidationError(
                f"Cannot roll back to snapshot, not an ancestor of the current state: {self.snapshot_id}"
            )


@dataclass
class RollbackToTime:
    """Roll ``main`` back to the newest ancestor committed strictly before ``timestamp_ms``."""

    timestamp_ms: int
    replayable: bool = True
    previous_snapshot_id: int | None = None
    snapshot_id: int | None = None

    def apply(self, base: TableMetadata, ctx: CommitContext) -> list[metadata_updates.MetadataUpdate]:
        """Pick the target on the fresh base and move main to it."""
        head = base.current_snapshot_id
        target = None
        for sid in ancestor_ids(base, head):
            if base.snapshot_by_id(sid).timestamp_ms < self.timestamp_ms:
                target = sid
                break
        if target is None:
            raise ValidationError(f"Cannot roll back, no valid snapshot older than: {self.timestamp_ms}")
        self.snapshot_id = target
        self.previous_snapshot_id = head
        return [] if target == head else [_move(base, MAIN_BRANCH, target)]


@dataclass
class SetCurrentSnapshot(SetBranchHead):
    """Make any snapshot (or a ref's snapshot) current, with no ancestry requirement."""

    @classmethod
    def for_ref(cls, base: TableMetadata, ref: str) -> "SetCurrentSnapshot":
        """The operation for a branch or tag name."""
        r = base.refs.get(ref)
        if r is None:
            raise NoSuchRefError(f"Cannot find matching snapshot ID for ref {ref}")
        return cls(r.snapshot_id)


def wap_snapshot(md: TableMetadata, wap_id: str) -> Snapshot:
    """The one snapshot staged with ``wap.id == wap_id``."""
    found = [s for s in md.snapshots if s.summary.get("wap.id") == wap_id]
    if not found:
        raise ValidationError(f"Cannot apply unknown WAP ID '{wap_id}'")
    if len(found) > 1:
        raise ValidationError(f"Cannot apply non-unique WAP ID. Found multiple snapshots with WAP ID '{wap_id}'")
    return found[0]


class CherryPick:
    """Apply a snapshot's changes to ``main``: re-append an append, replay a dynamic overwrite,
    or fast-forward to a snapshot whose parent is the current head."""

    replayable = True

    def __init__(self, snapshot_id: int) -> None:
        self.snapshot_id = snapshot_id
        self.current_snapshot_id: int | None = None
        self._producer = None

    def apply(self, base: TableMetadata, ctx: CommitContext) -> list[metadata_updates.MetadataUpdate]:
        """Validate against the fresh base and produce the updates."""
        pick = base.snapshot_by_id(self.snapshot_id)
        if pick is None:
            raise NoSuchSnapshotError(f"Cannot cherry-pick unknown snapshot ID: {self.snapshot_id}")
        head = base.current_snapshot_id
        ancestors = ancestor_ids(base, head)
        op = pick.summary.get("operation")
        wap_id = pick.summary.get("wap.id")
        replays = op == "append" or (op == "overwrite" and pick.summary.get("replace-partitions") == "true")
        # Java validates the WAP publish when the pick is requested, before the ancestry checks
        if wap_id is not None and replays:
            for sid in ancestors:
                if base.snapshot_by_id(sid).summary.get("published-wap-id") == wap_id:
                    raise ValidationError(
                        f"Duplicate request to cherry pick wap id that was published already: {wap_id}"
                    )
        if self.snapshot_id in ancestors:
            raise ValidationError(f"Cannot cherrypick snapshot {self.snapshot_id}: already an ancestor")
        for sid in ancestors:
            if base.snapshot_by_id(sid).summary.get("source-snapshot-id") == str(self.snapshot_id):
                raise ValidationError(
                    f"Cannot cherrypick snapshot {self.snapshot_id}: already picked to create ancestor {sid}"
                )
        fast_forward = pick.parent_snapshot_id == head
        if fast_forward:
            self.current_snapshot_id = self.snapshot_id
            return [_move(base, MAIN_BRANCH, self.snapshot_id)]
        props = {"source-snapshot-id": str(self.snapshot_id)}
        if wap_id is not None:
            props["published-wap-id"] = wap_id
        if op == "append":
            if self._producer is None:
                files = [e.data_file for e in _added_by(ctx, base, pick)]
                self._producer = FastAppend(files, snapshot_properties=props)
        elif op == "overwrite" and pick.summary.get("replace-partitions") == "true":
            if pick.parent_snapshot_id is not None and pick.parent_snapshot_id not in ancestors:
                raise ValidationError(
                    f"Cannot cherry-pick overwrite not based on an ancestor of the current state: {self.snapshot_id}"
                )
            if self._producer is None:
                added = [e.data_file for e in _added_by(ctx, base, pick)]
                self._producer = ReplacePartitions(added, snapshot_properties=props)
            self._validate_replaced_partitions(base, ctx, pick, head)
        else:
            raise ValidationError(
                f"Cannot cherry-pick snapshot {self.snapshot_id}: not append, dynamic overwrite, or fast-forward"
            )
        updates = self._producer.apply(base, ctx)
        self.current_snapshot_id = self._producer.snapshot_id
        return updates

    def _validate_replaced_partitions(self, base, ctx, pick: Snapshot, head: int | None) -> None:
        since = snapshots_since(base, base.snapshot_by_id(head) if head is not None else None, pick.parent_snapshot_id)
        if not since:
            return
        replaced = {(f.spec_id, f.partition) for f in self._producer.add_files}
        for snap in since:
            for e in _added_by(ctx, base, snap):
                key = (e.data_file.spec_id, e.data_file.partition)
                if key in replaced:
                    raise ValidationError(
                        f"Cannot cherry-pick replace partitions with changed partition: {e.data_file.partition}"
                    )


def _added_by(ctx: CommitContext, base: TableMetadata, snap: Snapshot):
    specs = {s.spec_id: s for s in base.partition_specs}
    for m in snapshot_manifests(ctx.io, snap):
        if m.added_snapshot_id != snap.snapshot_id:
            continue
        for e in read_manifest(ctx.io, m, specs=specs):
            if e.status == ManifestEntryStatus.ADDED and e.snapshot_id == snap.snapshot_id:
                yield e


@dataclass
class FastForward:
    """Move ``branch`` forward to the snapshot of ``to`` (a branch or tag); creates the branch."""

    branch: str
    to: str
    replayable: bool = True
    previous_snapshot_id: int | None = None
    updated_snapshot_id: int | None = None

    def apply(self, base: TableMetadata, ctx: CommitContext) -> list[metadata_updates.MetadataUpdate]:
        """Validate on the fresh base and move the branch."""
        target = base.refs.get(self.to)
        if target is None:
            raise NoSuchRefError(f"Ref does not exist: {self.to}")
        current = base.refs.get(self.branch)
        self.updated_snapshot_id = target.snapshot_id
        if current is None:
            self.previous_snapshot_id = None
            return [metadata_updates.SetSnapshotRef(self.branch, SnapshotRef(target.snapshot_id, SnapshotRefType.BRANCH), None)]
        if current.ref_type != SnapshotRefType.BRANCH:
            raise ValidationError(f"Ref {self.branch} is a tag not a branch")
        self.previous_snapshot_id = current.snapshot_id
        if current.snapshot_id == target.snapshot_id:
            return []
        if not is_ancestor(base, current.snapshot_id, target.snapshot_id):
            raise ValidationError(f"Cannot fast-forward: {self.branch} is not an ancestor of {self.to}")
        return [_move(base, self.branch, target.snapshot_id)]


@dataclass
class ManageRef:
    """Create, replace or remove a branch or tag, or change its retention settings.

    ``action`` is one of ``create``, ``replace``, ``create_or_replace``, ``remove``,
    ``retention``.
    """

    action: str
    name: str
    ref_type: SnapshotRefType = SnapshotRefType.BRANCH
    snapshot_id: int | None = None
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None
    max_ref_age_ms: int | None = None
    replayable: bool = True

    def apply(self, base: TableMetadata, ctx: CommitContext) -> list[metadata_updates.MetadataUpdate]:
        """Validate on the fresh base and produce the ref update."""
        kind = self.ref_type.value
        existing = base.refs.get(self.name)
        if self.action == "remove":
            if existing is None or existing.ref_type != self.ref_type:
                raise NoSuchRefError(f"{kind.capitalize()} does not exist: {self.name}")
            if self.name == MAIN_BRANCH:
                raise ValidationError("Cannot remove main branch")
            return [metadata_updates.RemoveSnapshotRef(self.name)]
        if self.action == "create" and existing is not None:
            raise ValidationError(f"Ref {self.name} already exists")
        if self.action == "replace" and existing is None:
            raise NoSuchRefError(f"{kind.capitalize()} does not exist: {self.name}")
        if existing is not None and existing.ref_type != self.ref_type:
            raise ValidationError(f"Ref {self.name} is a {existing.ref_type.value} not a {kind}")
        sid = self.snapshot_id
        if self.action == "retention":
            if existing is None:
                raise NoSuchRefError(f"{kind.capitalize()} does not exist: {self.name}")
            sid = existing.snapshot_id
        elif sid is None:
            sid = base.current_snapshot_id
            if sid is None:
                raise ValidationError(f"Cannot create {kind} {self.name}: the table has no current snapshot")
        if base.snapshot_by_id(sid) is None:
            raise NoSuchSnapshotError(f"Cannot set {self.name} to unknown snapshot: {sid}")
        keep = existing if existing is not None and self.action in ("retention", "replace", "create_or_replace") else None
        ref = SnapshotRef(
            sid, self.ref_type,
            self.min_snapshots_to_keep if self.min_snapshots_to_keep is not None else (keep.min_snapshots_to_keep if keep else None),
            self.max_snapshot_age_ms if self.max_snapshot_age_ms is not None else (keep.max_snapshot_age_ms if keep else None),
            self.max_ref_age_ms if self.max_ref_age_ms is not None else (keep.max_ref_age_ms if keep else None),
        )
        return [metadata_updates.SetSnapshotRef(self.name, ref, existing.snapshot_id if existing else None, assert_head=False)]


# ------------------------------------------------------------------------------ expiration
#: what expire_snapshots is called in its refusals
EXPIRE_SNAPSHOTS = "expire snapshots"


def check_retain_last(retain_last: int) -> None:
    """Every branch keeps at least one snapshot: ``retain_last`` (the argument, or
    ``history.expire.min-snapshots-to-keep``) below 1 is refused, in Java's words."""
    if retain_last < 1:
        raise ValidationError(f"Number of snapshots to retain must be at least 1, cannot be: {retain_last}")


@dataclass(frozen=True)
class ExpirePlan:
    """Which snapshots and refs an expiration removes from ``base``."""

    expired_snapshot_ids: frozenset[int]
    removed_refs: tuple[str, ...]
    retained_snapshot_ids: frozenset[int]


def plan_expiration(
    base: TableMetadata,
    *,
    now_ms: int | None = None,
    older_than_ms: int | None = None,
    retain_last: int | None = None,
    snapshot_ids: Iterable[int] = (),
) -> ExpirePlan:
    """Iceberg's retention rules (``RemoveSnapshots``): refs by age, branch ancestry by count and
    age, tag heads, unreferenced snapshots by age, plus explicitly named snapshots."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    if older_than_ms is None:
        older_than_ms = now - MAX_SNAPSHOT_AGE_MS.read(base.properties)
    if retain_last is None:
        retain_last = MIN_SNAPSHOTS_TO_KEEP.read(base.properties)
    check_retain_last(retain_last)
    default_max_ref_age = MAX_REF_AGE_MS.read(base.properties)

    retained_refs: dict[str, SnapshotRef] = {}
    for name, ref in base.refs.items():
        snap = base.snapshot_by_id(ref.snapshot_id)
        if name == MAIN_BRANCH:
            retained_refs[name] = ref
            continue
        if snap is None:
            continue
        max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else default_max_ref_age
        if now - snap.timestamp_ms <= max_age:
            retained_refs[name] = ref
    removed_refs = tuple(sorted(n for n in base.refs if n not in retained_refs))

    explicit = set(snapshot_ids)
    heads: dict[int, list[str]] = {}
    for name, ref in retained_refs.items():
        heads.setdefault(ref.snapshot_id, []).append(name)
    for sid in explicit:
        if sid in heads:
            raise ValidationError(f"Cannot expire {sid}. Still referenced by refs: [{', '.join(sorted(heads[sid]))}]")

    retain: set[int] = set(heads)
    for ref in retained_refs.values():
        if ref.ref_type != SnapshotRefType.BRANCH:
            continue
        cutoff = now - ref.max_snapshot_age_ms if ref.max_snapshot_age_ms is not None else older_than_ms
        keep_n = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else retain_last
        kept = 0
        for sid in ancestor_ids(base, ref.snapshot_id):
            snap = base.snapshot_by_id(sid)
            if kept < keep_n or snap.timestamp_ms >= cutoff:
                retain.add(sid)
                kept += 1
            else:
                break
    # as Java: a branch references its whole ancestry, a tag only its head
    reachable: set[int] = set()
    for ref in retained_refs.values():
        if ref.ref_type == SnapshotRefType.BRANCH:
            reachable.update(ancestor_ids(base, ref.snapshot_id))
        else:
            reachable.add(ref.snapshot_id)
    for s in base.snapshots:
        if s.snapshot_id not in reachable and s.timestamp_ms >= older_than_ms:
            retain.add(s.snapshot_id)
    expired = {s.snapshot_id for s in base.snapshots if s.snapshot_id not in retain} | (
        explicit & {s.snapshot_id for s in base.snapshots}
    )
    return ExpirePlan(frozenset(expired), removed_refs, frozenset(s.snapshot_id for s in base.snapshots) - expired)


class ExpireSnapshots:
    """Remove expired snapshots and aged refs from metadata (files are the caller's business:
    they may only be deleted after this commit succeeded)."""

    replayable = True

    def __init__(self, **plan_args) -> None:
        self.plan_args = plan_args
        self.plan: ExpirePlan | None = None
        self.base: TableMetadata | None = None

    def apply(self, base: TableMetadata, ctx: CommitContext) -> list[metadata_updates.MetadataUpdate]:
        """Recompute the plan on the fresh base."""
        require_gc_enabled(base.properties, EXPIRE_SNAPSHOTS)
        self.plan = plan_expiration(base, **self.plan_args)
        self.base = base
        out: list[metadata_updates.MetadataUpdate] = [metadata_updates.RemoveSnapshotRef(n) for n in self.plan.removed_refs]
        if self.plan.expired_snapshot_ids:
            out.append(metadata_updates.RemoveSnapshots(tuple(sorted(self.plan.expired_snapshot_ids))))
        return out

