"""``rewrite_position_delete_files`` as a capability (procedures.md §3.17): compact position delete
files and drop deletes that point at data files no longer in the table.

Follows Iceberg Java 1.10: live position delete files of the current snapshot (restricted by ``where``
on base-table columns through each file's partition) are bucketed per spec and partition,
bin-packed with the size rules of the data rewrite (target ``write.delete.target-file-size-bytes``),
and each kept group is rewritten into new files holding only the positions of *live* data files.
On a v3 table where every position delete is already a deletion vector there is nothing to do; v2
position delete files of a v3 table are rewritten into DVs (merged with a data file's existing DV,
which is replaced).  As in Java, a group keeps only the deletes of live data files of its own
partition.  The engine reads the data manifests (:meth:`DataRewriteEngine.manifest_entry_reader`, only
when there is a group to rewrite) and rewrites the groups (:meth:`DataRewriteEngine.rewrite_delete_groups`); commits go through the same ``RewriteFiles`` path as
``rewrite_data_files``, all at once or, with partial progress, in batches (a failed group or batch
is logged and skipped, as in Java).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from procedures.core.data_rewrite.compaction import compaction_rewrite, delete_written
from procedures.core.data_rewrite.data_rewrite_engine import DataRewriteEngine
from procedures.core.data_rewrite.grouping import DeleteGroup, FileGroup, plan_groups
from procedures.core.data_rewrite.options import (
    PositionDeleteRewriteOptions, parse_position_delete_options, parse_where,
)
from procedures.core.kernel.capability import Capability
from procedures.core.kernel.scan import read_entries_on_driver, scan_manifests
from procedures.core.kernel.snapshot_producer import live_entries
from procedures.core.kernel.summary import content_size, is_dv
from procedures.core.kernel.transaction import Table
from procedures.errors import CommitStateUnknownError, IcebergError, ValidationError
from procedures.spec.evaluators import Evaluator
from procedures.spec.expressions import Expression
from procedures.spec.manifest.model import DataFile, FileContent
from procedures.spec.metadata import TableMetadata
from procedures.spec.projection import inclusive_projection

__all__ = [
    "RewritePositionDeletesParams", "RewritePositionDeletesPlan", "RewritePositionDeletesResult",
    "DeleteGroups", "plan", "plan_delete_groups", "execute", "REWRITE_POSITION_DELETE_FILES",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RewritePositionDeletesParams:
    """Every argument of ``rewrite_position_delete_files`` as the CALL gave it; :func:`plan` validates them."""

    options: Mapping[str, str] = field(default_factory=dict)
    where: str | None = None
    case_sensitive: bool = False


@dataclass(frozen=True)
class RewritePositionDeletesResult:
    """The procedure's output row."""

    rewritten_delete_files_count: int = 0
    added_delete_files_count: int = 0
    rewritten_bytes_count: int = 0
    added_bytes_count: int = 0

    def row(self) -> tuple[int, int, int, int]:
        """``(rewritten_delete_files_count, added_delete_files_count, rewritten_bytes_count, added_bytes_count)``."""
        return (self.rewritten_delete_files_count, self.added_delete_files_count, self.rewritten_bytes_count,
                self.added_bytes_count)


@dataclass(frozen=True)
class RewritePositionDeletesPlan:
    """The validated call: the options, the ``where`` filter and the starting snapshot (None: the
    table has none, nothing to do)."""

    options: PositionDeleteRewriteOptions
    filter: Expression | None = None
    starting_snapshot_id: int | None = None
    case_sensitive: bool = False


@dataclass(frozen=True)
class DeleteGroups:
    """The groups to rewrite and what each needs."""

    file_groups: tuple[FileGroup, ...] = ()
    total_group_count: int = 0
    inputs: tuple[DeleteGroup, ...] = ()


class _DeleteTask:
    """A position delete file as a planning item (the planner only needs ``data_file``)."""

    __slots__ = ("data_file",)

    def __init__(self, f: DataFile) -> None:
        self.data_file = f


def plan(metadata: TableMetadata, params: RewritePositionDeletesParams) -> RewritePositionDeletesPlan:
    """Validate the call once: ``where``, then the options (bad options are the caller's error
    whatever the table holds)."""
    cs = params.case_sensitive
    expr = parse_where(metadata, params.where, cs)
    opts = parse_position_delete_options(params.options, table_properties=metadata.properties)
    snap = metadata.current_snapshot()
    return RewritePositionDeletesPlan(opts, expr, snap.snapshot_id if snap is not None else None, cs)


def plan_delete_groups(table: Table, plan: RewritePositionDeletesPlan, engine: DataRewriteEngine) -> DeleteGroups:
    """Group the live position delete files of the starting snapshot.

    The live data files (every data manifest: the bulk of the reading) come through the engine's
    manifest reader, as ``rewrite_data_files`` plans (:meth:`DataRewriteEngine.manifest_entry_reader`);
    the delete manifests are read on the driver, as every scan's delete index is.
    """
    if plan.starting_snapshot_id is None:
        return DeleteGroups()
    md = table.metadata
    opts, expr, cs = plan.options, plan.filter, plan.case_sensitive
    scan = scan_manifests(md, table.io, snapshot_id=plan.starting_snapshot_id)
    if scan is None:
        return DeleteGroups()
    deletes = [e.data_file for e in live_entries(table.io, md, scan.delete_manifests)
               if e.data_file.content == FileContent.POSITION_DELETES]
    dvs = {f.referenced_data_file: f for f in deletes if is_dv(f)}
    candidates = [f for f in deletes if not is_dv(f)]
    if md.format_version >= 3 and not candidates:
        log.info("v2 deletes in %s have already been rewritten to v3 DVs", table.name)
        return DeleteGroups()
    if expr is not None:
        evaluators: dict[int, Evaluator] = {}

        def matches(f: DataFile) -> bool:
            if f.spec_id not in evaluators:
                spec = md.spec_by_id(f.spec_id)
                evaluators[f.spec_id] = Evaluator(spec.partition_type(md.schema()),
                                                  inclusive_projection(spec, md.schema(), expr, cs))
            return evaluators[f.spec_id].eval(f.partition)

        candidates = [f for f in candidates if matches(f)]
    if md.format_version >= 3:
        opts = dataclasses.replace(opts, rewrite_all=True)  # every v2 file must become DVs
    grouped = plan_groups([_DeleteTask(f) for f in candidates], opts,
                          bucket_of=lambda t: (t.data_file.spec_id,) + tuple(t.data_file.partition))
    if not grouped.groups:
        # nothing to rewrite: the data manifests are not read (nor an engine session asked for)
        return DeleteGroups((), grouped.total_group_count)
    reader = engine.manifest_entry_reader(table)
    entries = read_entries_on_driver(table.io, scan) if reader is None else reader(scan)
    data_files = [e.data_file for batch in entries for e in batch]
    inputs = _group_inputs(md, grouped.groups, data_files, dvs)
    return DeleteGroups(grouped.groups, grouped.total_group_count, tuple(inputs))


def _group_inputs(md: Any, groups: tuple[FileGroup, ...], data_files: list[DataFile], dvs: dict[str, DataFile]
                  ) -> list[DeleteGroup]:
    # Java keeps a group's deletes only for live data files of the same partition (and spec)
    by_partition: dict[tuple, dict[str, DataFile]] = {}
    for f in data_files:
        by_partition.setdefault((f.spec_id, tuple(f.partition)), {})[f.file_path] = f
    out = []
    for g in groups:
        key = (g.files[0].spec_id, tuple(g.files[0].partition)) if g.files else (md.default_spec_id, ())
        targets = by_partition.get(key, {})
        out.append(DeleteGroup(tuple(g.files), targets, {p: dvs[p] for p in targets if p in dvs}))
    return out


def _replaced_dvs(group: DeleteGroup, added: list[DataFile]) -> list[DataFile]:
    """The current DVs that the group's new DVs absorbed (every new DV replaces its file's old one)."""
    return [group.dvs[f.referenced_data_file] for f in added
            if f.referenced_data_file is not None and f.referenced_data_file in group.dvs]


def execute(table: Table, plan: RewritePositionDeletesPlan, engine: DataRewriteEngine) -> RewritePositionDeletesResult:
    """Group the files (:func:`plan_delete_groups`), rewrite the groups on ``engine`` and commit them
    (all at once, or in batches with partial progress)."""
    grouped = plan_delete_groups(table, plan, engine)
    if not grouped.file_groups:
        return RewritePositionDeletesResult()
    opts, inputs = plan.options, list(grouped.inputs)
    try:
        outcomes = engine.rewrite_delete_groups(table, inputs, opts, stop_on_failure=not opts.partial_progress)
    except Exception as e:
        if not opts.partial_progress:
            raise
        # the engine failed as a whole (its files are gone): every group failed, and with partial
        # progress a failed group is logged and skipped, as in Java
        log.error("Failure during rewrite of the position delete file groups of %s: %s", table.name, e)
        outcomes = []
    written = [(grouped.file_groups[o.index], list(o.added), _replaced_dvs(inputs[o.index], list(o.added)))
               for o in outcomes if o.error is None]
    failures = [o for o in outcomes if o.error is not None]
    for o in failures:
        log.error("Failure during rewrite of position delete file group %d/%d of %s: %s\n%s", o.index + 1,
                  len(inputs), table.name, o.error, o.task_traceback)
    if failures and not opts.partial_progress:
        # nothing is committed: the files of the groups that did finish go too
        delete_written(table, [f for _, added, _ in written for f in added], "position delete rewrite")
        raise failures[0].error
    per_commit = math.ceil(grouped.total_group_count / opts.max_commits) if opts.partial_progress else len(written)
    results: list[tuple[FileGroup, list[DataFile]]] = []
    current = table
    for start in range(0, len(written), max(1, per_commit)):
        batch = written[start:start + per_commit]
        removed = [f for g, _, _ in batch for f in g.files] + [d for _, _, r in batch for d in r]
        added = [f for _, a, _ in batch for f in a]
        op = compaction_rewrite(remove_deletes=removed, add_files=added, starting_snapshot_id=plan.starting_snapshot_id)
        try:
            current = engine.commit(current.refresh(), [op])
        except CommitStateUnknownError:
            raise
        except IcebergError as e:
            delete_written(table, added, "position delete rewrite")
            if not opts.partial_progress:
                raise ValidationError(f"Cannot commit rewrite because of a ValidationException or "
                                      f"CommitFailedException: {e}") from e
            log.error("Failure during position delete rewrite commit of %s: %s", table.name, e)
            continue
        results.extend((g, a) for g, a, _ in batch)
    rewritten = [f for g, _ in results for f in g.files]
    added = [f for _, a in results for f in a]
    return RewritePositionDeletesResult(len(rewritten), len(added), sum(content_size(f) for f in rewritten),
                                        sum(content_size(f) for f in added))


#: the capability as the Spark action runs it
REWRITE_POSITION_DELETE_FILES: Capability[RewritePositionDeletesParams, RewritePositionDeletesPlan,
                                          RewritePositionDeletesResult] = Capability(
    "rewrite_position_delete_files", plan, execute)
