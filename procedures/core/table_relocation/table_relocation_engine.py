"""The engine steps the ``table_relocation`` capability needs: a typed protocol, implemented once
per engine (Spark: :class:`procedures.spark.engine.table_relocation_steps.TableRelocationSteps`).

The capability plans and stages the metadata; the engine finds the catalog's table folders (the
catalog sits above the core), rewrites position delete files (their writers sit above the core)
and rewrites manifests, in tasks when that is worth it.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from procedures.core.kernel.capability import JobScope
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile, ManifestFile

__all__ = ["TableRelocationEngine"]


class TableRelocationEngine(JobScope, Protocol):
    """Engine steps of ``rewrite_table_path``."""

    def catalog_folders(self, table: Any) -> list[tuple[str, str]]:
        """``(table name, folder)`` of the table and of every table its catalog knows."""
        ...

    def relocate_in_tasks(self, manifests: Sequence[ManifestFile]) -> bool:
        """Whether rewriting files for these manifests is worth engine tasks (else driver threads)."""
        ...

    def rewrite_delete_files(self, io: FileAccess, items: Sequence[tuple[DataFile, str, str, str]],
                             in_tasks: bool) -> dict[str, int]:
        """Each ``(delete file, staged path, source prefix, target prefix)`` rewritten with its
        referenced paths moved; the new size of each by the original path."""
        ...

    def rewrite_manifest_paths(self, io: FileAccess, items: Sequence[tuple[ManifestFile, str, dict]],
                               in_tasks: bool) -> list[Any]:
        """Each ``(manifest, staged path, rewrite arguments)`` rewritten with
        :func:`procedures.core.table_relocation.relocation.rewrite_manifest`; its ``ManifestRewrite``s."""
        ...
