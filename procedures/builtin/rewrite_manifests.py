"""``rewrite_manifests`` (procedures.md §3.10): cluster manifest entries by partition and resize
manifests to ``commit.manifest.target-size-bytes``.

Parameters and output follow Iceberg Java 1.10's Spark 3.5 procedure (``table``, ``use_caching``,
``spec_id``); the work is the capability :data:`procedures.core.manifest_rewrite.manifest_plan.REWRITE_MANIFESTS`
run as an :class:`~procedures.spark.engine.action.Action`.  ``use_caching`` (a Spark memory hint in
Java) is accepted and has no effect here.
"""

from __future__ import annotations

from procedures.core.manifest_rewrite.manifest_plan import REWRITE_MANIFESTS, RewriteManifestsParams
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.spark.engine.action import Action

__all__ = ["rewrite_manifests"]


@register(
    "rewrite_manifests",
    parameters=[
        P("table", "STRING", True, doc="Table whose current snapshot's manifests are rewritten."),
        P("use_caching", "BOOLEAN", doc="Accepted for compatibility (Java caches the entries in Spark); no effect."),
        P("spec_id", "INT", doc="Only manifests of this partition spec; default the current spec."),
        DRY_RUN,
    ],
    output=(
        Col("rewritten_manifests_count", "INT", False, "Manifests replaced."),
        Col("added_manifests_count", "INT", False, "Manifests written."),
    ),
)
def rewrite_manifests(ctx: ProcedureContext, table: str, use_caching: bool | None, spec_id: int | None,
                      dry_run: bool) -> list[tuple]:
    """Rewrite the current snapshot's data and delete manifests of one spec into clustered manifests."""
    t = ctx.load_table(table, dry_run=dry_run)
    result = Action(REWRITE_MANIFESTS, ctx.spark, committer=ctx.commit).run(t, RewriteManifestsParams(spec_id=spec_id))
    return [result.row()]
