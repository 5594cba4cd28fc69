"""The ``rewrite_manifests`` capability (procedures.md §3.10): parameters, result, :func:`plan` and
:func:`execute`.

The work is metadata only: :class:`~procedures.core.manifest_rewrite.clustering.RewriteManifests`
plans the clustering on the driver at commit time (recomputed on every retry) and rewrites small
manifest sets there; large ones go to the engine's rewriter
(:meth:`~procedures.core.manifest_rewrite.manifest_rewrite_engine.ManifestRewriteEngine.manifest_rewriter`), so the
driver never holds the entries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from procedures.core.kernel.capability import Capability
from procedures.core.manifest_rewrite.clustering import RewriteManifests
from procedures.core.manifest_rewrite.manifest_rewrite_engine import ManifestRewriteEngine
from procedures.errors import ValidationError
from procedures.spec.metadata import TableMetadata

__all__ = ["RewriteManifestsParams", "RewriteManifestsResult", "RewriteManifestsPlan", "plan", "execute",
           "REWRITE_MANIFESTS"]


@dataclass(frozen=True)
class RewriteManifestsParams:
    """The procedure's arguments: the partition spec whose manifests are rewritten (None: the current)."""

    spec_id: int | None = None


@dataclass(frozen=True)
class RewriteManifestsResult:
    """Manifests replaced and written."""

    rewritten_manifests_count: int = 0
    added_manifests_count: int = 0

    def row(self) -> tuple[int, int]:
        """The procedure's single output row."""
        return (self.rewritten_manifests_count, self.added_manifests_count)


@dataclass(frozen=True)
class RewriteManifestsPlan:
    """Whether there is anything to rewrite (a current snapshot), for which spec."""

    params: RewriteManifestsParams
    has_snapshot: bool


def plan(metadata: TableMetadata, params: RewriteManifestsParams) -> RewriteManifestsPlan:
    """Refuses a ``spec_id`` the table does not have (:class:`ValidationError`); a table without a
    current snapshot has nothing to rewrite."""
    if params.spec_id is not None and metadata.spec_by_id(params.spec_id) is None:
        raise ValidationError(f"Invalid spec id {params.spec_id}")
    return RewriteManifestsPlan(params, metadata.current_snapshot() is not None)


def execute(table: Any, planned: RewriteManifestsPlan, engine: ManifestRewriteEngine) -> RewriteManifestsResult:
    """Commit the rewrite; large manifest sets are rewritten by the engine."""
    if not planned.has_snapshot:
        return RewriteManifestsResult()
    rewriter = engine.manifest_rewriter(table.io, getattr(table, "name", "table"))
    op = RewriteManifests(spec_id=planned.params.spec_id, distributed=rewriter)
    engine.commit(table, [op])
    return RewriteManifestsResult(len(op.rewritten), len(op.added))


#: the capability as the Spark layer runs it (:class:`procedures.spark.engine.action.Action`)
REWRITE_MANIFESTS: Capability[RewriteManifestsParams, RewriteManifestsPlan, RewriteManifestsResult] = Capability(
    "rewrite_manifests", plan, execute)
