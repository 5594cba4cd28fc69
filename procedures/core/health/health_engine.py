"""The engine steps table_health needs: its job scope and a read-only count of orphan files."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from procedures.core.kernel.capability import JobScope

__all__ = ["OrphanCount", "HealthEngine"]


@dataclass(frozen=True)
class OrphanCount:
    """Orphan files a dry run of remove_orphan_files found, older than ``older_than_ms`` ago."""

    count: int
    older_than_ms: int


class HealthEngine(JobScope, Protocol):
    """The steps of table_health that an engine runs."""

    def count_orphans(self, table: Any, now_ms: int) -> OrphanCount:
        """The orphan files below ``table``'s location older than remove_orphan_files' default age
        at ``now_ms``, found by a dry run (nothing deleted)."""
        ...
