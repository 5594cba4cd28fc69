"""``create_changelog_view`` as a capability (procedures.md §3.16): :class:`ChangelogParams` ->
:func:`plan` (the arguments checked, the snapshots chosen) -> :func:`execute` on a
:class:`~procedures.core.changelog.changelog_engine.ChangelogEngine`; which snapshots a changelog covers,
which rows each of them inserted or deleted, and the row-stream rules that turn raw changes into
the view (carry-over removal, net changes, update images).

Snapshot range (Iceberg Java's ``SparkScanBuilder.buildChangelogScan`` and
``BaseIncrementalChangelogScan``): ``start-snapshot-id`` is exclusive, ``end-snapshot-id`` inclusive
(default: the current snapshot); timestamps are turned into snapshot ids along the current
lineage.  The changelog snapshots are the ancestors of the end down to (not including) the start,
oldest first, ``replace`` snapshots left out; a snapshot's ``_change_ordinal`` is its position in
that list.

Changes of a snapshot S (:func:`plan_changelog`): a data file added in S inserts the rows it holds
at S; a data file removed in S deletes the rows it held at S's parent.  Java stops there and
refuses any snapshot with delete files; here a data file that stays but whose delete files change
in S (a merge-on-read delete or update: position deletes, deletion vectors, equality deletes) is
planned too: rows visible before S and hidden at S are deletes at S, rows hidden before and
visible at S inserts.  On copy-on-write tables the two plans are the same.

The row rules (:func:`remove_carryovers`, :func:`remove_net_carryovers`, :func:`compute_updates`)
work on one sorted partition of rows, as Java's ``ChangelogIterator`` family does, and return which
input rows to emit with which change type, so an engine can take them from its own batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from procedures.core.changelog.change_model import (
    CHANGE_ORDINAL, CHANGE_TYPE, COMMIT_SNAPSHOT_ID, DELETE, INSERT, METADATA_COLUMNS, UPDATE_AFTER, UPDATE_BEFORE,
    ChangeRule, ChangeTask,
)
from procedures.core.changelog.changelog_engine import ChangelogEngine
from procedures.core.kernel.capability import Capability
from procedures.core.kernel.scan import DeleteFileEntry, DeleteFileIndex
from procedures.errors import NoSuchSnapshotError, ValidationError
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.manifest_list import read_manifest_list
from procedures.spec.manifest.model import DataFile, ManifestContent, ManifestEntryStatus, ManifestFile
from procedures.spec.manifest.reader import read_manifest
from procedures.spec.metadata import TableMetadata
from procedures.spec.schema import Schema
from procedures.spec.snapshots import Operation, Snapshot
from procedures.spec.types import IcebergType, ListType, MapType, StructType

__all__ = [
    "CHANGE_TYPE",
    "CHANGE_ORDINAL",
    "COMMIT_SNAPSHOT_ID",
    "METADATA_COLUMNS",
    "INSERT",
    "DELETE",
    "UPDATE_BEFORE",
    "UPDATE_AFTER",
    "ChangelogOptions",
    "ChangeTask",
    "parse_changelog_options",
    "changelog_snapshots",
    "plan_changelog",
    "unorderable_columns",
    "resolve_columns",
    "default_view_name",
    "row_key",
    "remove_carryovers",
    "remove_net_carryovers",
    "compute_updates",
    "ChangelogParams",
    "ChangelogPlan",
    "ChangelogResult",
    "plan",
    "execute",
    "CREATE_CHANGELOG_VIEW",
]


_RANGE_OPTIONS = ("start-snapshot-id", "end-snapshot-id", "start-timestamp", "end-timestamp")
# point-in-time read options make no sense for a range of changes; Java refuses them
_POINT_OPTIONS = ("snapshot-id", "as-of-timestamp", "branch", "tag")


# ------------------------------------------------------------------------------ options and range
@dataclass(frozen=True, slots=True)
class ChangelogOptions:
    """The range options of a changelog read (Spark read options of the ``changes`` table)."""

    start_snapshot_id: int | None = None
    end_snapshot_id: int | None = None
    start_timestamp: int | None = None
    end_timestamp: int | None = None


def _as_long(key: str, text: str) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise ValidationError(f"Cannot parse option {key}={text!r} of the changelog: expected a long") from None


def parse_changelog_options(options: Mapping[str, str] | None) -> ChangelogOptions:
    """The range options, validated as Iceberg Java validates them.

    Keys are case-insensitive (Spark read options); options other than the range and
    point-in-time ones are accepted and ignored, as Spark's reader ignores them.
    """
    lowered = {str(k).lower(): v for k, v in (options or {}).items()}
    point = [k for k in _POINT_OPTIONS if lowered.get(k) is not None]
    if point:
        raise ValidationError(
            f"Cannot set neither snapshot-id, as-of-timestamp, branch and tag for changelogs (got {', '.join(point)}): "
            "choose the range with start-snapshot-id/end-snapshot-id or start-timestamp/end-timestamp")
    values = {k: (None if lowered.get(k) is None else _as_long(k, lowered[k])) for k in _RANGE_OPTIONS}
    opts = ChangelogOptions(values["start-snapshot-id"], values["end-snapshot-id"], values["start-timestamp"],
                            values["end-timestamp"])
    if opts.start_snapshot_id is not None and opts.start_timestamp is not None:
        raise ValidationError("Cannot set both start-snapshot-id and start-timestamp for changelogs: give one start")
    if opts.end_snapshot_id is not None and opts.end_timestamp is not None:
        raise ValidationError("Cannot set both end-snapshot-id and end-timestamp for changelogs: give one end")
    if (opts.start_timestamp is not None and opts.end_timestamp is not None
            and opts.start_timestamp >= opts.end_timestamp):
        raise ValidationError(
            f"Cannot set start-timestamp to be greater than end-timestamp for changelogs "
            f"({opts.start_timestamp} >= {opts.end_timestamp}): the start must be earlier than the end")
    return opts


def _current_ancestors(md: TableMetadata) -> Iterator[Snapshot]:
    if md.current_snapshot_id is None:
        return iter(())
    return md.ancestors_of(md.current_snapshot_id)


def _start_id_for_time(md: TableMetadata, ts: int) -> int | None:
    """Java's ``getStartSnapshotId``: the snapshot whose commits after ``ts`` start the range."""
    if md.current_snapshot() is None:
        return None
    last: Snapshot | None = None
    found: Snapshot | None = None
    for snap in _current_ancestors(md):
        if snap.timestamp_ms < ts:
            found = last
            break
        if snap.timestamp_ms == ts:
            found = snap
            break
        last = snap
    else:
        if last is None or last.parent_snapshot_id is not None:
            raise NoSuchSnapshotError(
                f"Cannot find snapshot older than {ts} ms in {md.location}: the lineage before it has expired")
        found = last
    if found is None:
        return None
    return found.snapshot_id if found.timestamp_ms == ts else found.parent_snapshot_id


def _end_id_for_time(md: TableMetadata, ts: int) -> int | None:
    for snap in _current_ancestors(md):
        if snap.timestamp_ms <= ts:
            return snap.snapshot_id
    return None


def _is_parent_ancestor(md: TableMetadata, snapshot_id: int, parent_id: int) -> bool:
    return any(s.parent_snapshot_id == parent_id for s in md.ancestors_of(snapshot_id))


def changelog_snapshots(md: TableMetadata, opts: ChangelogOptions) -> list[Snapshot]:
    """The snapshots whose changes the changelog holds, oldest first (index = ``_change_ordinal``).

    Unknown ids and a start that is not on the end's lineage raise, as Java's incremental scans
    do; a time range with no commit in it is empty.
    """
    start, end = opts.start_snapshot_id, opts.end_snapshot_id
    empty = False
    if opts.start_timestamp is not None:
        current = md.current_snapshot()
        empty = current is None or opts.start_timestamp > current.timestamp_ms
        start = _start_id_for_time(md, opts.start_timestamp)
    if opts.end_timestamp is not None:
        end = _end_id_for_time(md, opts.end_timestamp)
        empty = empty or (start is None and end is None) or (start is not None and start == end)
    if empty:
        return []
    if start is None and end is None and md.current_snapshot() is None:
        return []
    if end is None:
        if md.current_snapshot_id is None:
            raise ValidationError(
                f"End snapshot is not set and table {md.location} has no current snapshot: give end-snapshot-id")
        end = md.current_snapshot_id
    if md.snapshot_by_id(end) is None:
        raise NoSuchSnapshotError(f"Cannot find the end snapshot: {end} in table {md.location}")
    if start is not None:
        if md.snapshot_by_id(start) is None:
            raise NoSuchSnapshotError(
                f"Cannot find snapshot: {start} in table {md.location} (start-snapshot-id must be a snapshot of the table)")
        if not _is_parent_ancestor(md, end, start):
            raise ValidationError(
                f"Starting snapshot (exclusive) {start} is not a parent ancestor of end snapshot {end}: "
                "the start must be an older snapshot on the end snapshot's lineage")
    out: list[Snapshot] = []
    if start != end:
        for snap in md.ancestors_of(end):
            if start is not None and snap.snapshot_id == start:
                break
            if snap.operation != Operation.REPLACE:
                out.append(snap)
    out.reverse()
    return out


# ------------------------------------------------------------------------------ change planning
def _delete_index(md: TableMetadata, io: FileAccess, manifests: Sequence[ManifestFile]) -> DeleteFileIndex | None:
    deletes = [m for m in manifests if m.content == ManifestContent.DELETES]
    if not deletes:
        return None
    specs = md.specs_by_id
    index = DeleteFileIndex(sid for sid, s in specs.items() if s.is_unpartitioned())
    for m in deletes:
        for e in read_manifest(io, m, specs=specs, skip_deleted=True):
            index.add(e.data_file, e.sequence_number or 0)
    return index


def _deletes_for(index: DeleteFileIndex | None, df: DataFile, seq: int) -> tuple[DeleteFileEntry, ...]:
    return () if index is None else index.for_data_file(df, seq)


def _paths(entries: Iterable[DeleteFileEntry]) -> frozenset[str]:
    return frozenset(e.data_file.file_path for e in entries)


def plan_changelog(md: TableMetadata, io: FileAccess, snapshots: Sequence[Snapshot]) -> list[ChangeTask]:
    """The change tasks of ``snapshots`` (from :func:`changelog_snapshots`), see the module doc."""
    specs = md.specs_by_id
    tasks: list[ChangeTask] = []
    for ordinal, snap in enumerate(snapshots):
        sid = snap.snapshot_id
        manifests = read_manifest_list(io, snap.manifest_list) if snap.manifest_list else []
        parent = md.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id is not None else None
        parent_manifests = (read_manifest_list(io, parent.manifest_list)
                            if parent is not None and parent.manifest_list else [])
        after_index = _delete_index(md, io, manifests)
        before_index = _delete_index(md, io, parent_manifests)
        added: set[str] = set()
        for m in manifests:
            if m.content != ManifestContent.DATA or m.added_snapshot_id != sid:
                continue
            for e in read_manifest(io, m, specs=specs):
                if e.snapshot_id != sid or e.status == ManifestEntryStatus.EXISTING:
                    continue
                df, seq = e.data_file, e.sequence_number or 0
                if e.status == ManifestEntryStatus.ADDED:
                    added.add(df.file_path)
                    tasks.append(ChangeTask(df, seq, ordinal, sid, None, _deletes_for(after_index, df, seq)))
                else:
                    tasks.append(ChangeTask(df, seq, ordinal, sid, _deletes_for(before_index, df, seq), None))
        if _deletes_changed(io, specs, manifests, sid):
            tasks.extend(_diff_tasks(io, specs, manifests, added, before_index, after_index, ordinal, sid))
    return tasks


def _deletes_changed(io: FileAccess, specs: Mapping[int, Any], manifests: Sequence[ManifestFile], sid: int) -> bool:
    for m in manifests:
        if m.content != ManifestContent.DELETES or m.added_snapshot_id != sid:
            continue
        if any(e.snapshot_id == sid and e.status != ManifestEntryStatus.EXISTING
               for e in read_manifest(io, m, specs=specs)):
            return True
    return False


def _diff_tasks(io: FileAccess, specs: Mapping[int, Any], manifests: Sequence[ManifestFile], added: set[str],
                before_index: DeleteFileIndex | None, after_index: DeleteFileIndex | None, ordinal: int,
                sid: int) -> Iterator[ChangeTask]:
    """Files live before and after the snapshot whose applicable deletes it changed."""
    for m in manifests:
        if m.content != ManifestContent.DATA:
            continue
        for e in read_manifest(io, m, specs=specs, skip_deleted=True):
            df, seq = e.data_file, e.sequence_number or 0
            if df.file_path in added:
                continue
            before = _deletes_for(before_index, df, seq)
            after = _deletes_for(after_index, df, seq)
            if _paths(before) != _paths(after):
                yield ChangeTask(df, seq, ordinal, sid, before, after)


# ------------------------------------------------------------------------------ columns
def _orderable(t: IcebergType) -> bool:
    if isinstance(t, MapType):
        return False
    if isinstance(t, StructType):
        return all(_orderable(f.field_type) for f in t.fields)
    if isinstance(t, ListType):
        return _orderable(t.element_type)
    return True


def unorderable_columns(schema: Schema) -> list[str]:
    """Top-level columns Spark cannot sort (maps, and structs or lists holding one)."""
    return [f.name for f in schema.fields if not _orderable(f.field_type)]


def resolve_columns(names: Sequence[str], columns: Sequence[str], case_sensitive: bool) -> list[str]:
    """The view's column for each identifier column name (back-quoted names are unquoted).

    Raises ValidationError naming the first name that matches no column.
    """
    out = []
    for raw in names:
        name = raw[1:-1].replace("``", "`") if len(raw) >= 2 and raw.startswith("`") and raw.endswith("`") else raw
        match = [c for c in columns if (c == name if case_sensitive else c.lower() == name.lower())]
        if not match:
            raise ValidationError(
                f"Cannot resolve identifier column {raw!r} in the changelog: it matches none of the columns "
                f"{list(columns)}")
        out.append(match[0])
    return out


def default_view_name(table_name: str) -> str:
    """Java's default view name: the table name (no namespace) + ``_changes``, back-quoted."""
    return f"`{table_name}_changes`"


# ------------------------------------------------------------------------------ row rules
def _canonical(v: Any) -> Any:
    # Spark's Row equality treats NaN as equal to NaN; Python's == does not.
    if isinstance(v, float) and math.isnan(v):
        return ("NaN",)
    return v


def row_key(row: Sequence[Any], indices: Sequence[int]) -> tuple:
    """The values of ``row`` at ``indices``, comparable with ``==`` the way Spark rows compare."""
    return tuple(_canonical(row[i]) for i in indices)


Emit = tuple[int, str]  # (index of the input row, change type to emit it with)


def remove_carryovers(keys: Sequence[Any], types: Sequence[str]) -> list[Emit]:
    """Drop DELETE/INSERT pairs of identical rows (Java's ``RemoveCarryoverIterator``).

    ``keys[i]`` identifies row i (all columns but ``_change_type``), rows sorted by key then change
    type.  Within a run of equal keys, d deletes and i inserts leave max(d - i, 0) deletes or
    max(i - d, 0) inserts.
    """
    out: list[Emit] = []
    n = len(keys)
    i = 0
    while i < n:
        if types[i] != DELETE:
            out.append((i, types[i]))
            i += 1
            continue
        first, count = i, 1
        j = i + 1
        while j < n and count > 0 and keys[j] == keys[first]:
            count += -1 if types[j] == INSERT else 1
            j += 1
        out.extend((first, DELETE) for _ in range(count))
        i = j
    return out


def remove_net_carryovers(keys: Sequence[Any], types: Sequence[str]) -> list[Emit]:
    """Net changes across snapshots (Java's ``RemoveNetCarryoverIterator``).

    ``keys[i]`` identifies row i by its table columns only; rows sorted by key, ordinal and change
    type.  A run of equal keys is counted from its first row: same change type +1, opposite -1;
    at zero the run ends and the next row starts a new one.  What remains is emitted as copies of
    the run's first row (its ordinal and snapshot id included).
    """
    out: list[Emit] = []
    n = len(keys)
    i = 0
    while i < n:
        first, count = i, 1
        j = i + 1
        while j < n and keys[j] == keys[first]:
            count += 1 if types[j] == types[first] else -1
            j += 1
            if count <= 0:
                break
        out.extend((first, types[first]) for _ in range(max(count, 0)))
        i = j
    return out


def compute_updates(keys: Sequence[Any], id_keys: Sequence[Any], types: Sequence[str],
                    identifier_columns: Sequence[str]) -> list[Emit]:
    """Carry-overs removed, then a DELETE followed by an INSERT with the same identifier values
    becomes UPDATE_BEFORE/UPDATE_AFTER (Java's ``ComputeUpdateIterator``).

    ``keys`` as for :func:`remove_carryovers`; ``id_keys[i]`` is row i's identifier values plus its
    ordinal; rows sorted by identifier columns, ordinal and change type.  Two rows of one
    identifier in one snapshot that are not a DELETE then an INSERT raise ValidationError.
    """
    kept = remove_carryovers(keys, types)
    out: list[Emit] = []
    k = 0
    while k < len(kept):
        idx, typ = kept[k]
        if typ == DELETE and k + 1 < len(kept) and id_keys[kept[k + 1][0]] == id_keys[idx]:
            nxt, ntyp = kept[k + 1]
            if ntyp != INSERT:
                raise ValidationError(
                    "Cannot compute updates because there are multiple rows with the same identifier "
                    f"fields([{','.join(identifier_columns)}]). Please make sure the rows are unique.")
            out.append((idx, UPDATE_BEFORE))
            out.append((nxt, UPDATE_AFTER))
            k += 2
            continue
        out.append((idx, typ))
        k += 1
    return out


# ------------------------------------------------------------------------------ capability
@dataclass(frozen=True)
class ChangelogParams:
    """The procedure's arguments as Java reads them (None = not given); ``table_name`` is the table's
    name without namespace, for the default view name."""

    table_name: str
    view_name: str | None = None
    options: Mapping[str, str] | None = None
    compute_updates: bool | None = None
    identifier_columns: tuple[str, ...] | None = None
    net_changes: bool = False
    case_sensitive: bool = False


@dataclass(frozen=True)
class ChangelogPlan:
    """The view to register, the snapshots it covers and the row rule it applies."""

    view_name: str
    snapshots: tuple[Snapshot, ...]
    rule: ChangeRule


@dataclass(frozen=True)
class ChangelogResult:
    """The name of the view created."""

    view_name: str

    def row(self) -> tuple[str]:
        """The procedure's output row."""
        return (self.view_name,)


def plan(metadata: TableMetadata, params: ChangelogParams) -> ChangelogPlan:
    """Check the arguments once and choose the snapshots and the row rule.

    Refusals (Java's, plus ours for options Java only rejects when the view is read): range
    options, unorderable columns without identifier columns, net changes with update images,
    update images without identifier columns, identifier columns that name no column.
    """
    md = metadata
    opts = parse_changelog_options(params.options)
    identifier = list(params.identifier_columns) if params.identifier_columns is not None else [
        md.schema().find_column_name(i) for i in md.schema().identifier_field_ids]
    unorderable = unorderable_columns(md.schema())
    if not identifier and unorderable:
        raise ValidationError(
            f"Identifier field is required as table contains unorderable columns: [{', '.join(unorderable)}]; "
            "pass identifier_columns or set the table's identifier fields")
    updates = params.compute_updates if params.compute_updates is not None else (
        params.identifier_columns is not None)
    if updates and params.net_changes:
        raise ValidationError("Not support net changes with update images: set compute_updates => false or "
                              "net_changes => false")
    if updates and not identifier:
        raise ValidationError("Cannot compute the update images because identifier columns are not set: pass "
                              "identifier_columns or set the table's identifier fields")
    table_columns = [f.name for f in md.schema().fields]
    if updates:
        id_cols = resolve_columns(identifier, table_columns + list(METADATA_COLUMNS), params.case_sensitive)
        part = [*id_cols, CHANGE_ORDINAL]
        rule = ChangeRule("updates", tuple(part), (*part, CHANGE_TYPE), tuple(part))
    elif params.net_changes:
        rule = ChangeRule("net", tuple(table_columns), (*table_columns, CHANGE_ORDINAL, CHANGE_TYPE))
    else:
        # every column of the raw changes but the change type
        part = [*table_columns, *(c for c in METADATA_COLUMNS if c != CHANGE_TYPE)]
        rule = ChangeRule("carryovers", tuple(part), (*part, CHANGE_TYPE))
    view = params.view_name if params.view_name is not None else default_view_name(params.table_name)
    return ChangelogPlan(view, tuple(changelog_snapshots(md, opts)), rule)


def execute(table: Any, plan: ChangelogPlan, engine: ChangelogEngine) -> ChangelogResult:
    """Plan the changed files on the driver, then have the engine build and register the view."""
    with engine.job(f"create_changelog_view: plan changes of {table.name}"):
        tasks = plan_changelog(table.metadata, table.io, plan.snapshots)
    return ChangelogResult(engine.register_changelog_view(table, tasks, plan.rule, plan.view_name))


#: the capability as the Spark action runs it
CREATE_CHANGELOG_VIEW: Capability[ChangelogParams, ChangelogPlan, ChangelogResult] = Capability(
    "create_changelog_view", plan, execute)
