"""The engine steps the ``data_rewrite`` capability needs (``rewrite_data_files``,
``rewrite_position_delete_files``): a typed protocol, implemented once per engine (Spark:
:class:`procedures.spark.engine.data_rewrite_steps.DataRewriteSteps`).

The capability decides what to rewrite and what to commit; the engine only reads manifests for
planning, rewrites groups (as many at once as the plan allows) and commits operations.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, Protocol, Sequence

from procedures.core.data_rewrite.grouping import DeleteGroup, GroupRewrite, RewritePlan
from procedures.core.data_rewrite.options import PositionDeleteRewriteOptions, RewriteOptions
from procedures.core.data_rewrite.rewriter import Rewriter
from procedures.core.kernel.scan import ScanEntry, ScanManifests
from procedures.core.kernel.capability import Committer
from procedures.core.kernel.transaction import Table

__all__ = ["DataRewriteEngine", "EntryReader"]

#: Reads the entries of a scan's data manifests (an engine may read them in parallel tasks).
EntryReader = Callable[[ScanManifests], Iterable[list[ScanEntry]]]


class DataRewriteEngine(Committer, Protocol):
    """Engine steps of ``rewrite_data_files`` and ``rewrite_position_delete_files``."""

    def manifest_entry_reader(self, table: Table) -> EntryReader | None:
        """How planning reads ``table``'s data manifests (``rewrite_data_files``' file groups,
        ``rewrite_position_delete_files``' live data files); None reads them on the driver."""
        ...

    def rewrite_groups(self, table: Table, rewriter: Rewriter, options: RewriteOptions, groups: RewritePlan, *,
                       stop_on_failure: bool) -> Iterator[GroupRewrite]:
        """Rewrite ``groups`` with ``rewriter`` (at most ``max-concurrent-file-group-rewrites`` at once) into new,
        uncommitted data files, yielding each group's outcome as it finishes.  With
        ``stop_on_failure`` the groups not yet started are dropped after the first failure; the
        running ones still report."""
        ...

    def rewrite_delete_groups(self, table: Table, groups: Sequence[DeleteGroup],
                              options: PositionDeleteRewriteOptions, *, stop_on_failure: bool) -> list[GroupRewrite]:
        """Rewrite position delete groups into new, uncommitted delete files (one outcome per group);
        with ``stop_on_failure`` a failure skips the groups not yet rewritten."""
        ...

