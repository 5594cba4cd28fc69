"""The one engine of the package: every capability's steps on a Spark session
(:class:`procedures.core.engine.Engine`), through the DataFrame API only, so the same steps run on a
classic and a Spark Connect session; without a session, the steps that can run on the driver do."""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

from procedures.core.kernel.transaction import commit
from procedures.spark.engine.changelog_steps import ChangelogSteps
from procedures.spark.engine.data_rewrite_steps import DataRewriteSteps
from procedures.spark.engine.file_import_steps import FileImportSteps
from procedures.spark.engine.gc_steps import GcSteps
from procedures.spark.engine.health_steps import HealthSteps
from procedures.spark.engine.manifest_rewrite_steps import ManifestRewriteSteps
from procedures.spark.engine.table_relocation_steps import TableRelocationSteps
from procedures.spark.engine.table_stats_steps import TableStatsSteps
from procedures.spark.listing import FrameKeeper
from procedures.spark.session import optional_job

__all__ = ["SparkEngine"]


class SparkEngine(GcSteps, ManifestRewriteSteps, HealthSteps, DataRewriteSteps, TableStatsSteps, TableRelocationSteps,
                  ChangelogSteps, FileImportSteps):
    """:class:`~procedures.core.engine.Engine` on ``spark`` (None: the driver alone); ``committer``
    commits for the capability (the CALL's, which records the changed table; default the kernel's)."""

    def __init__(self, spark: Any = None, *, committer: Callable[[Any, Sequence[Any]], Any] | None = None) -> None:
        self.spark = spark
        self.committer = committer
        self.keep = FrameKeeper()

    def commit(self, table: Any, operations: Sequence[Any]) -> Any:
        """Through the caller's committer (the CALL's, which records the changed table), else the kernel's."""
        return (self.committer or commit)(table, operations)

    @contextlib.contextmanager
    def job(self, description: str) -> Iterator[None]:
        """The run's Spark jobs described as ``description``; its kept frames unpersisted on exit."""
        with optional_job(self.spark, description), self.keep:
            yield
