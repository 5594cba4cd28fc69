"""``rewrite_data_files`` as a capability (procedures.md §3.9): :class:`RewriteDataFilesParams` ->
:func:`plan` -> :func:`execute` on a :class:`~procedures.core.data_rewrite.data_rewrite_engine.DataRewriteEngine`.

Follows Iceberg Java 1.10's procedure and ``RewriteDataFilesSparkAction``:

* the rewriter (:func:`procedures.core.data_rewrite.rewriter.choose_rewriter`), ``where`` parsed into
  an Iceberg filter used for file selection only (whole files are rewritten) and the options
  (:mod:`procedures.core.data_rewrite.options`), all validated once, in :func:`plan`;
* a plan of file groups from the starting snapshot (:func:`procedures.core.data_rewrite.grouping.plan_rewrite`),
  then the groups rewritten by the engine, at most ``max-concurrent-file-group-rewrites`` at once;
* the commit manager: one ``RewriteFiles`` commit (or, with ``partial-progress.enabled``, one per
  batch of ``ceil(groups / max-commits)`` groups) validated from the starting snapshot, new files
  taking the starting snapshot's data sequence number (``use-starting-sequence-number``), the DVs of
  rewritten files removed with them; every file written for a failed rewrite or commit is deleted;
* ``remove-dangling-deletes``: a second commit removing delete files that apply to no live file.

Concurrent appends never conflict.  A concurrent delete against a rewritten file fails the commit
that contains it (the whole call without partial progress) and leaves the table as it was.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from procedures.core.data_rewrite.data_rewrite_engine import DataRewriteEngine
from procedures.core.data_rewrite.grouping import FileGroup, GroupRewrite, RewritePlan, plan_rewrite
from procedures.core.data_rewrite.options import RewriteOptions, parse_rewrite_options, parse_where
from procedures.core.data_rewrite.rewriter import Rewriter, choose_rewriter
from procedures.core.kernel.capability import Capability
from procedures.core.kernel.operations import RewriteFiles
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.core.kernel.summary import is_dv
from procedures.core.kernel.transaction import Table, commit
from procedures.errors import CommitFailedError, CommitStateUnknownError, IcebergError, ValidationError
from procedures.spec.expressions import Expression
from procedures.spec.manifest.model import DataFile, FileContent, ManifestContent
from procedures.spec.metadata import TableMetadata

__all__ = [
    "RewriteDataFilesParams", "RewriteDataFilesPlan", "RewriteResult", "GroupOutcome", "plan", "execute",
    "plan_file_groups", "execute_groups", "REWRITE_DATA_FILES",
    "compaction_rewrite", "find_dangling_deletes", "remove_dangling_deletes", "delete_written",
]

log = logging.getLogger(__name__)

PARTIAL_PROGRESS_HINT = (
    "This usually means that this rewrite has conflicted with another concurrent Iceberg operation. To reduce the "
    "likelihood of conflicts, set partial-progress.enabled which will break up the rewrite into multiple smaller "
    "commits controlled by partial-progress.max-commits. Separate smaller rewrite commits can succeed independently "
    "while any commits that conflict with another Iceberg operation will be ignored. This mode will create "
    "additional snapshots in the table history, one for each commit."
)


# ------------------------------------------------------------------------------ params, plan, result
@dataclass(frozen=True)
class RewriteDataFilesParams:
    """Every argument of ``rewrite_data_files`` as the CALL gave it; :func:`plan` validates them.

    ``table_name`` is the name error messages use (``catalog.db.table``)."""

    table_name: str
    strategy: str | None = None
    sort_order: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    where: str | None = None
    case_sensitive: bool = False
    snapshot_properties: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RewriteDataFilesPlan:
    """The validated call: the rewriter, the options, the ``where`` filter and the starting snapshot
    (None: the table has none, there is nothing to do and the options were not checked)."""

    rewriter: Rewriter
    options: RewriteOptions | None
    filter: Expression | None
    starting_snapshot_id: int | None
    case_sensitive: bool = False
    snapshot_properties: Mapping[str, str] = field(default_factory=dict)


@dataclass
class GroupOutcome:
    """A rewritten group and the files written for it."""

    group: FileGroup
    added: list[DataFile]


@dataclass(frozen=True)
class RewriteResult:
    """The procedure's output row, with the groups committed and the snapshots made."""

    rewritten_data_files_count: int = 0
    added_data_files_count: int = 0
    rewritten_bytes_count: int = 0
    failed_data_files_count: int = 0
    removed_delete_files_count: int = 0
    committed: tuple[GroupOutcome, ...] = ()
    snapshot_ids: tuple[int, ...] = ()

    def row(self) -> tuple[int, int, int, int, int]:
        """``(rewritten_data_files_count, added_data_files_count, rewritten_bytes_count,
        failed_data_files_count, removed_delete_files_count)``."""
        return (self.rewritten_data_files_count, self.added_data_files_count, self.rewritten_bytes_count,
                self.failed_data_files_count, self.removed_delete_files_count)


@dataclass
class _Tally:
    """The counts of one execution as its commits land."""

    committed: list[GroupOutcome] = field(default_factory=list)
    failed_data_files_count: int = 0

    def add(self, outcome: GroupOutcome) -> None:
        """Count a committed group."""
        self.committed.append(outcome)

    def result(self, snapshot_ids: Sequence[int], removed_dangling: int) -> RewriteResult:
        """The result: committed groups in group order, the DVs they removed plus ``removed_dangling``."""
        groups = [o.group for o in self.committed]
        return RewriteResult(
            rewritten_data_files_count=sum(g.input_file_count for g in groups),
            added_data_files_count=sum(len(o.added) for o in self.committed),
            rewritten_bytes_count=sum(g.input_size for g in groups),
            failed_data_files_count=self.failed_data_files_count,
            removed_delete_files_count=sum(len(g.dangling_dvs()) for g in groups) + removed_dangling,
            committed=tuple(self.committed), snapshot_ids=tuple(snapshot_ids),
        )


def plan(metadata: TableMetadata, params: RewriteDataFilesParams) -> RewriteDataFilesPlan:
    """Validate the call once: the rewriter, ``where`` and the options (those of a table without a
    snapshot are not checked: nothing is rewritten)."""
    cs = params.case_sensitive
    rewriter = choose_rewriter(metadata, params.table_name, params.strategy, params.sort_order, case_sensitive=cs)
    expr = parse_where(metadata, params.where, cs)
    snap = metadata.current_snapshot()
    if snap is None:
        return RewriteDataFilesPlan(rewriter, None, expr, None, cs, params.snapshot_properties)
    opts = parse_rewrite_options(
        params.options, rewriter=rewriter.kind, table_properties=metadata.properties,
        spec_ids=[s.spec_id for s in metadata.partition_specs], current_spec_id=metadata.default_spec_id,
    )
    return RewriteDataFilesPlan(rewriter, opts, expr, snap.snapshot_id, cs, params.snapshot_properties)


def plan_file_groups(table: Table, plan: RewriteDataFilesPlan, engine: DataRewriteEngine) -> RewritePlan:
    """The file groups to rewrite from the plan's starting snapshot, its manifests read by the engine
    (:meth:`DataRewriteEngine.manifest_entry_reader`)."""
    if plan.starting_snapshot_id is None or plan.options is None:
        return RewritePlan((), 0, {})
    return plan_rewrite(table.metadata, table.io, plan.options, filter=plan.filter,
                        snapshot_id=plan.starting_snapshot_id, case_sensitive=plan.case_sensitive,
                        read_entries=engine.manifest_entry_reader(table))


def execute(table: Table, plan: RewriteDataFilesPlan, engine: DataRewriteEngine) -> RewriteResult:
    """Group the files (:func:`plan_file_groups`), rewrite the groups on ``engine``, commit them, then
    remove dangling deletes when asked."""
    opts = plan.options
    if plan.starting_snapshot_id is None or opts is None:
        return RewriteResult()
    groups = plan_file_groups(table, plan, engine)
    return execute_groups(table, plan, groups, engine)


def execute_groups(table: Table, plan: RewriteDataFilesPlan, groups: RewritePlan,
                   engine: DataRewriteEngine) -> RewriteResult:
    """Rewrite and commit ``groups`` planned from the plan's starting snapshot of ``table``."""
    opts = plan.options
    run = _Run(table, plan, groups, engine)
    if groups.total_group_count == 0 or not groups.groups:
        tally = _Tally()
    elif opts.partial_progress:
        tally = _with_partial_progress(run)
    else:
        tally = _all_at_once(run)
    removed = 0
    if opts.remove_dangling_deletes:
        _, removed = remove_dangling_deletes(run.table.refresh(), engine.commit)
    return tally.result(run.snapshot_ids, removed)


#: the capability as the Spark action runs it
REWRITE_DATA_FILES: Capability[RewriteDataFilesParams, RewriteDataFilesPlan, RewriteResult] = Capability(
    "rewrite_data_files", plan, execute)


# ------------------------------------------------------------------------------ commits
def compaction_rewrite(*, remove_deletes: Iterable[DataFile] = (), remove_files: Iterable[DataFile] = (), **kwargs) -> RewriteFiles:
    """The ``RewriteFiles`` a compaction commits: data files and delete files it replaces (delete files
    by path and blob offset, so one DV leaves a shared Puffin file alone)."""
    return RewriteFiles(remove_files=[*remove_files, *remove_deletes], **kwargs)


def delete_written(table: Table, files: Iterable[DataFile], what: str) -> None:
    """Delete files written for a rewrite that will not be committed; a failure to delete is logged,
    never raised (it must not hide the failure being cleaned up after)."""
    paths = sorted({f.file_path for f in files})
    if not paths:
        return
    try:
        table.io.delete_many(paths)
    except Exception as e:  # noqa: BLE001 - cleanup must not hide the real failure
        log.warning("could not delete %d file(s) written by a failed %s of %s: %s", len(paths), what, table.name, e)


class _Run:
    """One execution: what it rewrites, the table as last committed and the snapshots it made."""

    def __init__(self, table: Table, plan: RewriteDataFilesPlan, groups: RewritePlan, engine: DataRewriteEngine) -> None:
        self.start = table.metadata
        self.table = table
        self.plan = plan
        self.groups = groups
        self.engine = engine
        self.snapshot_ids: list[int] = []

    def operation(self, outcomes: Sequence[GroupOutcome]) -> RewriteFiles:
        """The ``RewriteFiles`` of a batch of rewritten groups."""
        starting_id = self.plan.starting_snapshot_id
        removed: dict[str, DataFile] = {}
        added: list[DataFile] = []
        dvs: dict[tuple, DataFile] = {}
        for o in outcomes:
            for f in o.group.files:
                removed[f.file_path] = f
            added.extend(o.added)
            for d in o.group.dangling_dvs():
                dvs[(d.file_path, d.content_offset)] = d
        seq = None
        if self.plan.options.use_starting_sequence_number and self.start.format_version > 1:
            seq = self.start.snapshot_by_id(starting_id).sequence_number
        return compaction_rewrite(
            remove_files=list(removed.values()), add_files=added, remove_deletes=list(dvs.values()),
            starting_snapshot_id=starting_id, data_sequence_number=seq,
            snapshot_properties=dict(self.plan.snapshot_properties),
        )

    def commit_or_clean(self, outcomes: Sequence[GroupOutcome]) -> None:
        """Commit a batch; on a typed refusal delete its files and re-raise."""
        op = self.operation(outcomes)
        try:
            self.table = self.engine.commit(self.table.refresh(), [op])
        except CommitStateUnknownError:
            log.error("Commit state unknown for a rewrite of %s; written files are kept", self.table.name)
            raise
        except IcebergError:
            # a typed refusal means the table did not change; anything else (an I/O error or an
            # interrupt) may have come after the swap, when the table references these files,
            # so they are left for remove_orphan_files, as Java cleans up only CleanableFailures
            for o in outcomes:
                delete_written(self.table, o.added, "rewrite")
            raise
        if op.snapshot is not None:
            self.snapshot_ids.append(op.snapshot.snapshot_id)

    def rewrites(self, *, stop_on_failure: bool) -> Iterator[tuple[FileGroup, GroupRewrite]]:
        """The engine's outcomes, each with its group."""
        for r in self.engine.rewrite_groups(self.table, self.plan.rewriter, self.plan.options, self.groups,
                                            stop_on_failure=stop_on_failure):
            yield self.groups.groups[r.index], r


def _all_at_once(run: _Run) -> _Tally:
    done: list[GroupOutcome] = []
    error: BaseException | None = None
    for group, r in run.rewrites(stop_on_failure=True):
        if r.error is None:
            done.append(GroupOutcome(group, list(r.added)))
        elif error is None:
            error = r.error
    if error is not None:
        log.error("Cannot complete rewrite of %s: a file group failed while writing; cleaning up %d finished "
                  "groups (partial-progress.enabled may help, but find the root cause)", run.table.name, len(done))
        for o in done:
            delete_written(run.table, o.added, "rewrite")
        raise error
    try:
        run.commit_or_clean(done)
    except (ValidationError, CommitFailedError) as e:
        raise ValidationError(
            f"Cannot commit rewrite because of a ValidationException or CommitFailedException. "
            f"{PARTIAL_PROGRESS_HINT} Cause: {e}"
        ) from e
    result = _Tally()
    for o in sorted(done, key=lambda o: o.group.global_index):
        result.add(o)
    return result


def _with_partial_progress(run: _Run) -> _Tally:
    opts = run.plan.options
    per_commit = math.ceil(run.groups.total_group_count / opts.max_commits)
    result = _Tally()
    pending: list[GroupOutcome] = []
    succeeded = 0

    def flush(batch: list[GroupOutcome]) -> None:
        nonlocal succeeded
        try:
            run.commit_or_clean(batch)
        except CommitStateUnknownError:
            raise
        except IcebergError as e:
            log.error("Failure during rewrite commit of %d group(s) of %s: %s", len(batch), run.table.name, e)
            return
        succeeded += 1
        for o in batch:
            result.add(o)

    for group, r in run.rewrites(stop_on_failure=False):
        if r.error is not None:
            # a failed group fails only itself
            log.error("Failure during rewrite group %s of %s: %s", group.global_index, run.table.name, r.error)
            result.failed_data_files_count += group.input_file_count
            continue
        pending.append(GroupOutcome(group, list(r.added)))
        if len(pending) >= per_commit:
            batch, pending = pending, []
            flush(batch)
    if pending:
        flush(pending)
    total_commits = min(run.groups.total_group_count, opts.max_commits)
    failed = total_commits - succeeded
    if failed > opts.max_failed_commits:
        raise ValidationError(
            f"partial-progress.enabled is true but {failed} rewrite commits failed. This is more than the maximum "
            f"allowed failures of {opts.max_failed_commits}. Check the logs to determine why the individual commits "
            "failed. If this is persistent it may help to increase partial-progress.max-commits which will split "
            "the rewrite operation into smaller commits."
        )
    if failed > 0:
        log.warning("partial-progress.enabled is true but %d rewrite commits failed for %s", failed, run.table.name)
    return result


# ------------------------------------------------------------------------------ dangling deletes
def find_dangling_deletes(table: Table) -> list[DataFile]:
    """Live delete files of the current snapshot that can apply to no live data file.

    Per (spec, partition) the minimum data sequence number of live data files decides, as in Java's
    ``RemoveDanglingDeletesSparkAction``: position deletes older than it and equality deletes not newer
    than it are dangling, as is every delete of a partition without data files and every DV whose data
    file is gone.  Global equality deletes (unpartitioned spec) compare with the whole table's minimum
    instead of their own empty partition (Java would drop them whenever the data is partitioned).
    """
    md = table.metadata
    snap = md.current_snapshot()
    if snap is None:
        return []
    manifests = snapshot_manifests(table.io, snap)
    min_seq: dict[tuple, int] = {}
    live_data: set[str] = set()
    overall: int | None = None
    for e in live_entries(table.io, md, [m for m in manifests if m.content == ManifestContent.DATA]):
        f = e.data_file
        seq = e.sequence_number or 0
        key = (f.spec_id, tuple(f.partition))
        min_seq[key] = min(seq, min_seq.get(key, seq))
        overall = seq if overall is None else min(overall, seq)
        live_data.add(f.file_path)
    unpartitioned = {s.spec_id for s in md.partition_specs if s.is_unpartitioned()}
    out = []
    for e in live_entries(table.io, md, [m for m in manifests if m.content == ManifestContent.DELETES]):
        f = e.data_file
        seq = e.sequence_number or 0
        if is_dv(f):
            if f.referenced_data_file not in live_data:
                out.append(f)
                continue
        floor = overall if f.spec_id in unpartitioned else min_seq.get((f.spec_id, tuple(f.partition)))
        if floor is None:
            out.append(f)
        elif f.content == FileContent.POSITION_DELETES and seq < floor:
            out.append(f)
        elif f.content == FileContent.EQUALITY_DELETES and seq <= floor:
            out.append(f)
    return out


def remove_dangling_deletes(table: Table, committer: Callable[[Table, list], Table] | None = None) -> tuple[Table, int]:
    """Commit the removal of :func:`find_dangling_deletes`; returns the table and the count removed."""
    dangling = find_dangling_deletes(table)
    if not dangling:
        return table, 0
    op = compaction_rewrite(remove_deletes=dangling)
    table = (committer or (lambda t, ops: commit(t, ops)))(table, [op])
    return table, len(dangling)
