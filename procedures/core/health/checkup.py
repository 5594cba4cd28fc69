"""The ``table_health`` capability (ours; Iceberg Java has no such procedure): parameters, result,
:func:`plan` and :func:`execute` -- the checks of :func:`procedures.core.health.findings.analyze`
plus, when asked, the orphan files a dry run of remove_orphan_files finds (an engine step:
:meth:`~procedures.core.health.health_engine.HealthEngine.count_orphans`).  Read-only."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from procedures.core.health.health_engine import HealthEngine
from procedures.core.health.findings import Finding, analyze, orphan_finding
from procedures.core.kernel.capability import Capability
from procedures.core.kernel.properties import GC_ENABLED
from procedures.spec.metadata import TableMetadata

__all__ = ["TableHealthParams", "TableHealthResult", "TableHealthPlan", "plan", "execute", "TABLE_HEALTH"]


@dataclass(frozen=True)
class TableHealthParams:
    """``table_ref``: the table as the proposed CALLs name it; ``include_orphans``: also list the
    location for orphan files; ``now_ms``: the checks' "now" (None: the wall clock)."""

    table_ref: str
    include_orphans: bool = False
    now_ms: int | None = None


@dataclass(frozen=True)
class TableHealthResult:
    """The findings, in the order the checks made them."""

    findings: tuple[Finding, ...]


@dataclass(frozen=True)
class TableHealthPlan:
    """The checks to run at ``now_ms``; orphans only when asked and the table allows garbage
    collection (with ``gc.enabled=false`` remove_orphan_files refuses the table, and nothing below
    its location can safely be called an orphan: it may share files with another table)."""

    params: TableHealthParams
    now_ms: int
    list_orphans: bool


def plan(metadata: TableMetadata, params: TableHealthParams) -> TableHealthPlan:
    """Fix "now" and decide whether orphan files are listed."""
    now = int(time.time() * 1000) if params.now_ms is None else params.now_ms
    return TableHealthPlan(params, now, params.include_orphans and GC_ENABLED.read(metadata.properties))


def execute(table: Any, planned: TableHealthPlan, engine: HealthEngine) -> TableHealthResult:
    """Run the checks on the table's metadata (its current snapshot's manifests read on the driver)."""
    name = getattr(table, "name", planned.params.table_ref)
    ref = planned.params.table_ref
    with engine.job(f"table_health: {name} reading the current snapshot's manifests"):
        findings = analyze(table.io, table.metadata, ref, now_ms=planned.now_ms)
    if planned.list_orphans:
        with engine.job(f"table_health: {name} listing orphan files (dry run)"):
            orphans = engine.count_orphans(table, planned.now_ms)
        findings += orphan_finding(table.metadata, ref, orphans.count, older_than_days=orphans.older_than_ms / 86_400_000)
    return TableHealthResult(tuple(findings))


#: the capability as the Spark layer runs it (:class:`procedures.spark.engine.action.Action`)
TABLE_HEALTH: Capability[TableHealthParams, TableHealthPlan, TableHealthResult] = Capability(
    "table_health", plan, execute)
