"""The ``data_rewrite`` capability on the Spark engine without a session, and with a fake group
rewrite, so its commit manager is tested without Spark."""

from __future__ import annotations

from typing import Any, Callable

from procedures.core.data_rewrite.compaction import RewriteDataFilesPlan, RewriteResult, execute_groups
from procedures.core.data_rewrite.grouping import RewritePlan
from procedures.core.data_rewrite.options import RewriteOptions
from procedures.core.data_rewrite.rewriter import Rewriter
from procedures.spark.engine.spark_engine import SparkEngine


class DriverEngine(SparkEngine):
    """The Spark engine without a session: every data rewrite step on the driver."""

    on_driver = True


class FakeRewriteEngine(DriverEngine):
    """The driver-only engine whose group rewrite is ``rewrite(group, groups)``."""

    def __init__(self, rewrite: Callable[[Any, RewritePlan], list], committer: Callable | None = None) -> None:
        super().__init__(None, committer=committer)
        self.rewrite = rewrite

    def rewrite_data_group(self, table, rewriter, options, groups, group):
        """The fake's files for ``group``."""
        return self.rewrite(group, groups)


def run_groups(table: Any, opts: RewriteOptions, groups: RewritePlan, starting_snapshot_id: int,
               rewrite: Callable, committer: Callable | None = None) -> RewriteResult:
    """Rewrite (with ``rewrite``) and commit ``groups`` planned from ``starting_snapshot_id``."""
    plan = RewriteDataFilesPlan(Rewriter(), opts, None, starting_snapshot_id)
    return execute_groups(table, plan, groups, FakeRewriteEngine(rewrite, committer))
