"""The ``rewrite_data_files`` action (procedures.md §3.9): plan from the current snapshot
(:func:`procedures.core.rewrite.planner.plan_rewrite`), rewrite each file group as Spark jobs
(:func:`procedures.spark.rewrite.rewrite_group`), commit through the core's commit manager
(:class:`procedures.core.rewrite.data_files.RewriteDataFilesAction`), then remove dangling deletes
when asked."""

from __future__ import annotations

from typing import Any, Callable

from procedures.catalog.base import Table
from procedures.core.rewrite.data_files import (
    RewriteDataFilesAction, RewriteResult, Strategy, remove_dangling_deletes, sort_order_id,
)
from procedures.core.rewrite.planner import SORT, FileGroup, RewriteOptions, RewritePlan, plan_rewrite
from procedures.core.kernel.scan import partition_key
from procedures.spark.rewrite import RewriteSpec, group_description, rewrite_group
from procedures.spark.scan_planning import SparkEntryReader
from procedures.spark.session import in_caller_context
from procedures.spec.manifest.model import DataFile

__all__ = ["run_rewrite"]


def run_rewrite(
    spark: Any,
    table: Table,
    opts: RewriteOptions,
    how: Strategy | None = None,
    *,
    filter: Any = None,
    case_sensitive: bool = False,
    committer: Callable[[Table, list], Table] | None = None,
) -> RewriteResult:
    """Plan from the current snapshot, rewrite groups on Spark, commit; see the module docstring."""
    how = how or Strategy(opts.rewriter)
    md = table.metadata
    snap = md.current_snapshot()
    if snap is None:
        return RewriteResult()
    plan = plan_rewrite(md, table.io, opts, filter=filter, snapshot_id=snap.snapshot_id, case_sensitive=case_sensitive,
                        read_entries=SparkEntryReader(spark, table.io, table.name) if spark is not None else None)
    spec = RewriteSpec(
        rewriter=how.rewriter, sort_order=how.sort_order, zorder_columns=how.zorder_columns,
        sort_order_id=sort_order_id(md, how.sort_order) if how.rewriter == SORT else 0,
        shuffle_partitions_per_file=opts.shuffle_partitions_per_file,
        var_length_contribution=opts.var_length_contribution, max_output_size=opts.max_output_size,
    )

    def rewrite(group: FileGroup, p: RewritePlan) -> list[DataFile]:
        key = tuple(group.partition)
        text = group_description(table, group, p.total_group_count, how.rewriter,
                                 p.groups_in_partition.get(tuple(partition_key(0, key)[1]), 0))
        return rewrite_group(spark, table, group, spec, description=text)

    action = RewriteDataFilesAction(table, opts, rewrite=in_caller_context(spark, rewrite), committer=committer)
    result = action.execute(plan, snap.snapshot_id)
    if opts.remove_dangling_deletes:
        _, removed = remove_dangling_deletes(action.table.refresh(), committer)
        result.removed_delete_files_count += removed
    return result
