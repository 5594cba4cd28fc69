"""The engine steps the ``table_stats`` capability needs: a typed protocol, implemented once per
engine (Spark: :class:`procedures.spark.engine.table_stats_steps.TableStatsSteps`).

The capability decides what to compute and registers the file; the engine reads the data (column
sketches), writes the statistics files (the writers live above the core) and commits.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from procedures.core.kernel.capability import Committer
from procedures.core.kernel.transaction import Table
from procedures.core.table_stats.statistics_files import StatsColumn
from procedures.spec.schema import Schema
from procedures.spec.snapshots import Snapshot
from procedures.spec.statistics import StatisticsFile

__all__ = ["TableStatsEngine"]


class TableStatsEngine(Committer, Protocol):
    """Engine steps of ``compute_table_stats`` and ``compute_partition_stats``."""

    def sketch_columns(self, table: Table, snapshot: Snapshot, schema: Schema, columns: Sequence[StatsColumn],
                       path: str) -> StatisticsFile:
        """Read the snapshot's rows (deletes applied), sketch ``columns`` and write the Puffin
        statistics file at ``path`` (one theta blob per column, with its NDV); nothing is committed."""
        ...

    def write_partition_statistics(self, table: Table, path: str, schema: Schema, rows: Sequence[tuple]) -> int:
        """Write the partition statistics file (Parquet, the schema's field ids); returns its size."""
        ...

