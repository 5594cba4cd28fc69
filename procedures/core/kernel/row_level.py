"""Commits of row-level changes (DELETE, UPDATE, MERGE) and their conflict rules, as Iceberg Java's
Spark writes validate them.

A row-level change reads a snapshot (its *starting* snapshot), decides which rows to delete, update
or insert, and commits either

* copy-on-write (:class:`CopyOnWriteCommit`, Java's ``OverwriteFiles``): the data files holding
  changed rows are replaced by rewritten ones; or
* merge-on-read (:class:`MergeOnReadCommit`, Java's ``RowDelta``): position delete files (v2) or
  deletion vectors (v3) mark the changed rows, and new rows are appended.

When another writer committed in between, the commit loop replays the change on the new head; these
operations then check the snapshots committed since the starting one, with the rules Java's
``SparkWrite`` / ``SparkPositionDeltaWrite`` turn on for the table's ``write.<op>.isolation-level``:

================================  =========================================================
always                            no data file this change rewrites or references was removed;
                                  no new delete file applies to a data file it rewrites; no new
                                  delete file matching the conflict filter (merge-on-read: no
                                  concurrent deletion vector for a data file it deletes from);
                                  no data file matching the conflict filter was deleted
``serializable`` (the default)    also: no new data file matching the conflict filter
``snapshot``                      only the rules above
================================  =========================================================

The *conflict filter* is the part of the statement's condition that files can be pruned by (Java's
``conflictDetectionFilter``: the pushed-down filters of the scan), ``true`` when there is none, as
for MERGE.  A broken rule raises :class:`~procedures.errors.CommitConflictError`; the commit loop then
deletes what this change wrote, and the table stays as the other writer left it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from procedures.core.kernel.operations import OverwriteFiles, RowDelta, added_entries_since, snapshots_since
from procedures.core.kernel.properties import ChoiceProperty
from procedures.core.kernel.summary import is_dv
from procedures.errors import CommitConflictError, ValidationError
from procedures.spec.evaluators import Evaluator, InclusiveMetricsEvaluator
from procedures.spec.expressions import ALWAYS_TRUE, Expression
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile, FileContent, ManifestEntryStatus
from procedures.spec.metadata import TableMetadata
from procedures.spec.projection import inclusive_projection
from procedures.spec.snapshots import Snapshot

__all__ = [
    "SERIALIZABLE", "SNAPSHOT", "COPY_ON_WRITE", "MERGE_ON_READ", "DELETE", "UPDATE", "MERGE",
    "MODE", "ISOLATION_LEVEL", "ConflictCheck", "CopyOnWriteCommit", "MergeOnReadCommit", "write_mode",
    "conflict_check", "validate_concurrent",
]

SERIALIZABLE, SNAPSHOT = "serializable", "snapshot"
COPY_ON_WRITE, MERGE_ON_READ = "copy-on-write", "merge-on-read"
DELETE, UPDATE, MERGE = "delete", "update", "merge"

#: ``write.<op>.mode`` per statement kind (Java's defaults: copy-on-write)
MODE = {op: ChoiceProperty(f"write.{op}.mode", COPY_ON_WRITE, f"how {op.upper()} changes rows",
                           choices=(COPY_ON_WRITE, MERGE_ON_READ)) for op in (DELETE, UPDATE, MERGE)}
#: ``write.<op>.isolation-level`` per statement kind (Java's defaults: serializable)
ISOLATION_LEVEL = {op: ChoiceProperty(f"write.{op}.isolation-level", SERIALIZABLE,
                                      f"which concurrent commits conflict with a {op.upper()}",
                                      choices=(SERIALIZABLE, SNAPSHOT)) for op in (DELETE, UPDATE, MERGE)}


def write_mode(md: TableMetadata, op: str) -> str:
    """``copy-on-write`` or ``merge-on-read`` for statement kind ``op`` on a table; merge-on-read needs v2."""
    mode = MODE[op].read(md.properties)
    if mode == MERGE_ON_READ and md.format_version < 2:
        raise ValidationError(
            f"{MODE[op].key}={MERGE_ON_READ} needs a format v2 or later table (this one is v1): upgrade it with "
            f"ALTER TABLE ... SET TBLPROPERTIES ('format-version'='2') or use {COPY_ON_WRITE}")
    return mode


@dataclass(frozen=True)
class ConflictCheck:
    """What a row-level commit validates against concurrent commits: the statement kind (for messages),
    the isolation level and the conflict filter."""

    op: str
    isolation_level: str = SERIALIZABLE
    filter: Expression = ALWAYS_TRUE


def conflict_check(md: TableMetadata, op: str, filter: Expression | None = None) -> ConflictCheck:
    """The check of statement kind ``op`` on a table, with its ``write.<op>.isolation-level``."""
    return ConflictCheck(op, ISOLATION_LEVEL[op].read(md.properties), filter if filter is not None else ALWAYS_TRUE)


#: the entries a concurrent snapshot wrote: files it added and files it removed
_CHANGES = (ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED)


class _FilterMatcher:
    """Whether a file may hold rows matching the conflict filter (partition, then column metrics for data)."""

    def __init__(self, base: TableMetadata, expr: Expression) -> None:
        self.expr, self.schema = expr, base.schema()
        self.specs = {s.spec_id: s for s in base.partition_specs}
        self.metrics = InclusiveMetricsEvaluator(self.schema, expr)
        self.parts: dict[int, Evaluator] = {}

    def may_match(self, f: DataFile) -> bool:
        if self.expr is ALWAYS_TRUE:
            return True
        spec = self.specs.get(f.spec_id)
        if spec is not None and spec.fields:
            ev = self.parts.get(f.spec_id)
            if ev is None:
                ev = self.parts[f.spec_id] = Evaluator(spec.partition_type(self.schema),
                                                       inclusive_projection(spec, self.schema, self.expr))
            if not ev.eval(f.partition):
                return False
        # delete files carry metrics of file_path/pos, not of the table's columns
        return f.content != FileContent.DATA or self.metrics.eval(f)


def _conflict(check: ConflictCheck, what: str, snap: Snapshot, start: int | None) -> CommitConflictError:
    return CommitConflictError(
        f"Cannot commit {check.op.upper()} ({check.isolation_level} isolation): {what}, committed by snapshot "
        f"{snap.snapshot_id} ({snap.operation}) after this {check.op.upper()} read snapshot {start}; the table is "
        f"unchanged by this statement, rerun it"
    )


def validate_concurrent(io: FileAccess, base: TableMetadata, parent: Snapshot | None, start: int | None, check: ConflictCheck,
                        rewritten: Iterable[str], referenced: Iterable[str], dv_targets: Iterable[str]) -> None:
    """Raise :class:`CommitConflictError` when a snapshot committed after ``start`` breaks a rule of
    ``check`` (see the module doc).  ``rewritten``: data files the change removes (copy-on-write);
    ``referenced``: data files its new position deletes point at; ``dv_targets``: data files it
    writes a deletion vector for."""
    if start is None:
        return
    snaps = snapshots_since(base, parent, start)
    if not snaps:
        return
    rewritten, referenced, dv_targets = set(rewritten), set(referenced), set(dv_targets)
    touched = rewritten | referenced
    matcher = _FilterMatcher(base, check.filter)
    for snap, e in added_entries_since(io, base, snaps, statuses=_CHANGES):
        f = e.data_file
        if e.status == ManifestEntryStatus.DELETED:
            if f.content == FileContent.DATA and f.file_path in touched:
                raise _conflict(check, f"data file {f.file_path} it changes was removed", snap, start)
            if f.content == FileContent.DATA and matcher.may_match(f):
                raise _conflict(check, f"data file {f.file_path}, which may hold rows it matched, was removed",
                                snap, start)
            continue
        if f.content == FileContent.DATA:
            if check.isolation_level == SERIALIZABLE and matcher.may_match(f):
                raise _conflict(check, f"new data file {f.file_path} may hold rows its condition matches", snap, start)
            continue
        if is_dv(f) and f.referenced_data_file in dv_targets:
            raise _conflict(check, f"a concurrent deletion vector for {f.referenced_data_file}", snap, start)
        if f.content == FileContent.POSITION_DELETES and f.referenced_data_file is not None:
            applies = f.referenced_data_file in rewritten
        else:
            # partition-scoped position deletes and equality deletes may apply to any rewritten file
            # of their partition: conservative, as Java's validateNoNewDeletesForDataFiles
            applies = bool(rewritten)
        if applies:
            raise _conflict(check, f"new delete file {f.file_path} applies to a data file it rewrites", snap, start)
        if matcher.may_match(f) and check.filter is not ALWAYS_TRUE:
            raise _conflict(check, f"new delete file {f.file_path} may delete rows its condition matches", snap, start)


class CopyOnWriteCommit(OverwriteFiles):
    """Copy-on-write commit of a row-level change: remove the data files holding changed rows (and
    the position deletes scoped to them), add their rewritten rows and any new rows."""

    def __init__(self, *, add_files: Iterable[DataFile], remove_paths: Iterable[str], rewritten: Iterable[str],
                 starting_snapshot_id: int | None, check: ConflictCheck, **kwargs) -> None:
        super().__init__(add_files=add_files, remove_paths=remove_paths, **kwargs)
        self.start, self.check, self.rewritten = starting_snapshot_id, check, list(rewritten)

    def validate(self, base, parent, ctx):
        """The rules of the table's isolation level (module doc) against commits since the start."""
        super().validate(base, parent, ctx)
        validate_concurrent(ctx.io, base, parent, self.start, self.check, self.rewritten, (), ())


class MergeOnReadCommit(RowDelta):
    """Merge-on-read commit of a row-level change: new position deletes / deletion vectors for the
    changed rows, new data files for updated and inserted rows, replaced deletion vectors removed."""

    def __init__(self, *, add_rows: Iterable[DataFile], add_deletes: Iterable[DataFile],
                 remove_deletes: Iterable[DataFile], starting_snapshot_id: int | None, check: ConflictCheck,
                 **kwargs) -> None:
        super().__init__(add_rows=add_rows, add_deletes=add_deletes, remove_deletes=remove_deletes, **kwargs)
        self.start, self.check = starting_snapshot_id, check

    def validate(self, base, parent, ctx):
        """The rules of the table's isolation level (module doc) against commits since the start, then
        RowDelta's own checks (the referenced data files are still live)."""
        referenced = {f.referenced_data_file for f in self.add_deletes if f.referenced_data_file}
        dv_targets = {f.referenced_data_file for f in self.add_deletes if is_dv(f)}
        validate_concurrent(ctx.io, base, parent, self.start, self.check, (), referenced, dv_targets)
        super().validate(base, parent, ctx)
