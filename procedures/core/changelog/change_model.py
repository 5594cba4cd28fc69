"""What the ``changelog`` capability and its engine share: the change metadata columns, the change
types, a planned changed file (:class:`ChangeTask`) and the row rule the view applies
(:class:`ChangeRule`)."""

from __future__ import annotations

from dataclasses import dataclass

from procedures.core.kernel.scan import DeleteFileEntry
from procedures.spec.manifest.model import DataFile

__all__ = [
    "CHANGE_TYPE", "CHANGE_ORDINAL", "COMMIT_SNAPSHOT_ID", "METADATA_COLUMNS", "INSERT", "DELETE", "UPDATE_BEFORE",
    "UPDATE_AFTER", "ChangeTask", "ChangeRule",
]

CHANGE_TYPE = "_change_type"
CHANGE_ORDINAL = "_change_ordinal"
COMMIT_SNAPSHOT_ID = "_commit_snapshot_id"
METADATA_COLUMNS = (CHANGE_TYPE, CHANGE_ORDINAL, COMMIT_SNAPSHOT_ID)

INSERT = "INSERT"
DELETE = "DELETE"
UPDATE_BEFORE = "UPDATE_BEFORE"
UPDATE_AFTER = "UPDATE_AFTER"


@dataclass(frozen=True, slots=True)
class ChangeTask:
    """One data file whose visible rows changed in a changelog snapshot.

    ``before`` are the deletes that applied to the file in the snapshot's parent (None: the file
    was not live there), ``after`` those that apply in the snapshot (None: the snapshot removed
    it).  Rows visible only before are deletes, rows visible only after inserts.
    """

    data_file: DataFile
    data_sequence_number: int
    ordinal: int
    snapshot_id: int
    before: tuple[DeleteFileEntry, ...] | None
    after: tuple[DeleteFileEntry, ...] | None

    @property
    def kind(self) -> str:
        """``INSERT`` (file added), ``DELETE`` (file removed) or ``DIFF`` (its deletes changed)."""
        if self.before is None:
            return INSERT
        if self.after is None:
            return DELETE
        return "DIFF"


@dataclass(frozen=True, slots=True)
class ChangeRule:
    """How the raw changes become the view: rows repartitioned by ``partition_columns``, sorted by
    ``sort_columns`` within partitions, each partition filtered by the row rule ``kind``
    (``carryovers``, ``net`` or ``updates``, the last pairing rows by ``id_columns``)."""

    kind: str
    partition_columns: tuple[str, ...]
    sort_columns: tuple[str, ...]
    id_columns: tuple[str, ...] = ()
