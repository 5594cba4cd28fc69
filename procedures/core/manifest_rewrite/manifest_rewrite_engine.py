"""The engine step rewrite_manifests needs: a rewriter of large manifest sets off the driver."""

from __future__ import annotations

from typing import Protocol

from procedures.core.kernel.capability import Committer
from procedures.core.manifest_rewrite.clustering import DistributedRewriter
from procedures.spec.file_access import FileAccess

__all__ = ["ManifestRewriteEngine"]


class ManifestRewriteEngine(Committer, Protocol):
    """The steps of rewrite_manifests that an engine runs."""

    def manifest_rewriter(self, io: FileAccess, name: str) -> DistributedRewriter | None:
        """The rewriter that takes the manifest sets too large for the driver (reading through a
        FileIO like ``io``; ``name`` in its job descriptions), or None when there is none (no session)."""
        ...
