"""expire_snapshots and remove_orphan_files called the way the builtins call them (an
:class:`~procedures.spark.engine.action.Action` of the gc capability), with the session and the
committer as keywords: ``spark=None`` runs everything on the driver."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from procedures.core.gc.expire import EXPIRE_SNAPSHOTS, ExpireSnapshotsParams, ExpireSnapshotsResult
from procedures.core.gc.orphans import REMOVE_ORPHAN_FILES, RemoveOrphanFilesParams, RemoveOrphanFilesResult
from procedures.spark.engine.action import Action


def expire_snapshots(table: Any, params: ExpireSnapshotsParams, *, spark: Any = None,
                     committer: Callable[[Any, Sequence[Any]], Any] | None = None) -> ExpireSnapshotsResult:
    """The expire_snapshots capability on ``table``."""
    return Action(EXPIRE_SNAPSHOTS, spark, committer=committer).run(table, params)


def remove_orphan_files(table: Any, params: RemoveOrphanFilesParams, *, spark: Any = None) -> RemoveOrphanFilesResult:
    """The remove_orphan_files capability on ``table``."""
    return Action(REMOVE_ORPHAN_FILES, spark).run(table, params)
