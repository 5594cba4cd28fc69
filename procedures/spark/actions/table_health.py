"""The ``table_health`` action: the engine-free checks of :mod:`procedures.core.health` plus, when
asked, the orphan files a dry run of ``remove_orphan_files`` finds (the listing may run in Spark
tasks for large trees; nothing is deleted)."""

from __future__ import annotations

import time
from typing import Any

from procedures.core.gc.orphans import DEFAULT_OLDER_THAN_MS, RemoveOrphanFilesParams
from procedures.core.health import Finding, analyze, orphan_finding
from procedures.core.kernel.properties import GC_ENABLED
from procedures.core.gc.orphans import REMOVE_ORPHAN_FILES
from procedures.spark.engine.action import Action
from procedures.spark.session import optional_job

__all__ = ["table_health"]


def table_health(table: Any, table_ref: str, *, include_orphans: bool = False, spark: Any = None,
                 now_ms: int | None = None) -> list[Finding]:
    """Findings for ``table`` (see :func:`procedures.core.health.analyze`); with ``include_orphans``
    also the orphan files older than remove_orphan_files' default three days, listed read-only.

    A table with ``gc.enabled=false`` is not listed: remove_orphan_files refuses it, and nothing
    below its location can safely be called an orphan (it may share files with another table).
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    name = getattr(table, "name", table_ref)
    with optional_job(spark, f"table_health: {name} reading the current snapshot's manifests"):
        findings = analyze(table.io, table.metadata, table_ref, now_ms=now)
    if include_orphans and GC_ENABLED.read(table.metadata.properties):
        with optional_job(spark, f"table_health: {name} listing orphan files (dry run)"):
            result = Action(REMOVE_ORPHAN_FILES, spark).run(table, RemoveOrphanFilesParams(dry_run=True, now_ms=now))
        findings += orphan_finding(table.metadata, table_ref, result.orphan_count,
                                   older_than_days=DEFAULT_OLDER_THAN_MS / 86_400_000)
    return findings
