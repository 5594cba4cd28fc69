"""The table_health step of :class:`~procedures.spark.engine.spark_engine.SparkEngine`
(:class:`procedures.core.health.health_engine.HealthEngine`): orphan files counted by a dry run of the gc
capability's remove_orphan_files on the same engine (the listing may run in Spark tasks for large
trees; nothing is deleted)."""

from __future__ import annotations

from typing import Any

from procedures.core.gc.gc_engine import GcEngine
from procedures.core.gc.orphans import DEFAULT_OLDER_THAN_MS, REMOVE_ORPHAN_FILES, RemoveOrphanFilesParams
from procedures.core.health.health_engine import OrphanCount

__all__ = ["HealthSteps"]


class HealthSteps:
    """:class:`~procedures.core.health.health_engine.HealthEngine`'s orphan count, on an engine that also
    has the gc steps (:class:`~procedures.spark.engine.spark_engine.SparkEngine`)."""

    def count_orphans(self: GcEngine, table: Any, now_ms: int) -> OrphanCount:
        """remove_orphan_files with ``dry_run`` at ``now_ms`` (its default cutoff)."""
        params = RemoveOrphanFilesParams(dry_run=True, now_ms=now_ms)
        result = REMOVE_ORPHAN_FILES.execute(table, REMOVE_ORPHAN_FILES.plan(table.metadata, params), self)
        return OrphanCount(result.orphan_count, DEFAULT_OLDER_THAN_MS)
