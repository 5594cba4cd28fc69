"""``rewrite_manifests`` (procedures.md §3.10): cluster manifest entries by partition and resize
manifests to ``commit.manifest.target-size-bytes``.

Parameters and output follow Iceberg Java 1.10's Spark 3.5 procedure (``table``, ``use_caching``,
``spec_id``).  The work is metadata only: the core operation
:class:`procedures.core.rewrite_manifests_op.RewriteManifests` plans on the driver and rewrites small
manifest sets there; large ones are read, sorted and written on the executors
(:class:`procedures.spark.actions.rewrite_manifests.SparkManifestRewriter`), so the driver never holds
the entries.  ``use_caching`` (a Spark memory hint in Java) is accepted and has no effect here.
"""

from __future__ import annotations

from procedures.core.rewrite_manifests_op import RewriteManifests
from procedures.errors import ValidationError
from procedures.framework.context import ProcedureContext
from procedures.framework.declaration import DRY_RUN, OutputColumn as Col, Parameter as P
from procedures.framework.registry import register
from procedures.spark.actions.rewrite_manifests import SparkManifestRewriter

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
    md = t.metadata
    if spec_id is not None and md.spec_by_id(spec_id) is None:
        raise ValidationError(f"Invalid spec id {spec_id}")
    if md.current_snapshot() is None:
        return [(0, 0)]
    engine = None if ctx.spark is None else SparkManifestRewriter(ctx.spark, dict(t.io.properties), str(table))
    op = RewriteManifests(spec_id=spec_id, distributed=engine)
    ctx.commit(t, [op])
    return [(len(op.rewritten), len(op.added))]
