"""Metadata updates and commit requirements (the vocabulary of the spec's REST commit model).

Every change to a table is expressed as a list of :class:`MetadataUpdate` values that the
:class:`~procedures.core.kernel.builder.MetadataBuilder` applies.  The requirements a commit must hold on
the table it lands on are *derived* from those updates by :func:`requirements_for`, never written
by hand: an update that reads the current schema asserts the schema id, one that moves a branch
asserts the branch head, and so on.  On a retry the transaction checks them against the freshly
loaded metadata before replaying the change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from procedures.errors import CommitFailedError

if TYPE_CHECKING:  # pragma: no cover
    from procedures.spec.metadata import TableMetadata
    from procedures.spec.partitioning import PartitionSpec
    from procedures.spec.schema import Schema
    from procedures.spec.snapshots import Snapshot, SnapshotRef
    from procedures.spec.sorting import SortOrder
    from procedures.spec.statistics import PartitionStatisticsFile, StatisticsFile

__all__ = [
    "AssignUUID", "UpgradeFormatVersion", "AddSchema", "SetCurrentSchema", "AddPartitionSpec",
    "SetDefaultSpec", "AddSortOrder", "SetDefaultSortOrder", "AddSnapshot", "RemoveSnapshots",
    "SetSnapshotRef", "RemoveSnapshotRef", "SetLocation", "SetProperties", "RemoveProperties",
    "SetStatistics", "RemoveStatistics", "SetPartitionStatistics", "RemovePartitionStatistics",
    "RemovePartitionSpecs", "RemoveSchemas", "MetadataUpdate", "Requirement", "AssertCreate", "AssertTableUUID", "AssertRefSnapshotId",
    "AssertLastAssignedFieldId", "AssertCurrentSchemaId", "AssertLastAssignedPartitionId",
    "AssertDefaultSpecId", "AssertDefaultSortOrderId", "requirements_for", "check_requirements",
]

#: "the last one added in this change set", as in the REST spec
LAST_ADDED = -1


@dataclass(frozen=True, slots=True)
class AssignUUID:
    """Give the table its uuid (only on create)."""
    uuid: str


@dataclass(frozen=True, slots=True)
class UpgradeFormatVersion:
    """Raise the format version; downgrades are refused by the builder."""
    format_version: int


@dataclass(frozen=True, slots=True)
class AddSchema:
    """Add a schema; ``last_column_id`` is the highest field id assigned so far."""
    schema: "Schema"
    last_column_id: int


@dataclass(frozen=True, slots=True)
class SetCurrentSchema:
    """Make a schema current; ``-1`` means the one added last in this change set."""
    schema_id: int


@dataclass(frozen=True, slots=True)
class AddPartitionSpec:
    """Add a partition spec (its field ids already assigned)."""
    spec: "PartitionSpec"


@dataclass(frozen=True, slots=True)
class SetDefaultSpec:
    """Make a spec the default; ``-1`` means the one added last."""
    spec_id: int


@dataclass(frozen=True, slots=True)
class AddSortOrder:
    """Add a sort order."""
    sort_order: "SortOrder"


@dataclass(frozen=True, slots=True)
class SetDefaultSortOrder:
    """Make a sort order the default; ``-1`` means the one added last."""
    sort_order_id: int


@dataclass(frozen=True, slots=True)
class AddSnapshot:
    """Add a snapshot to the table's list (it becomes visible only through a ref)."""
    snapshot: "Snapshot"


@dataclass(frozen=True, slots=True)
class RemoveSnapshots:
    """Drop snapshots from metadata (expiration)."""
    snapshot_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SetSnapshotRef:
    """Create or move a branch or tag.

    ``expected_snapshot_id`` is what the writer saw as the ref's head when it decided to move it
    (``None`` when the ref did not exist); it becomes an ``assert-ref-snapshot-id`` requirement.
    ``assert_head`` is False for operations that may be replayed on any newer head (appends).
    """
    name: str
    ref: "SnapshotRef"
    expected_snapshot_id: int | None = None
    assert_head: bool = True


@dataclass(frozen=True, slots=True)
class RemoveSnapshotRef:
    """Remove a branch or tag."""
    name: str


@dataclass(frozen=True, slots=True)
class SetLocation:
    """Move the table's base location."""
    location: str


@dataclass(frozen=True, slots=True)
class SetProperties:
    """Set table properties."""
    updates: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class RemoveProperties:
    """Remove table properties."""
    removals: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetStatistics:
    """Attach a Puffin statistics file to a snapshot."""
    statistics: "StatisticsFile"


@dataclass(frozen=True, slots=True)
class RemoveStatistics:
    """Detach the statistics file of a snapshot."""
    snapshot_id: int


@dataclass(frozen=True, slots=True)
class SetPartitionStatistics:
    """Attach a partition statistics file to a snapshot."""
    partition_statistics: "PartitionStatisticsFile"


@dataclass(frozen=True, slots=True)
class RemovePartitionStatistics:
    """Detach the partition statistics file of a snapshot."""
    snapshot_id: int


@dataclass(frozen=True, slots=True)
class RemovePartitionSpecs:
    """Drop partition specs no snapshot uses any more (``remove-partition-specs``); never the default."""
    spec_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RemoveSchemas:
    """Drop schemas no snapshot uses any more (``remove-schemas``); never the current one."""
    schema_ids: tuple[int, ...]


MetadataUpdate = Union[
    AssignUUID, UpgradeFormatVersion, AddSchema, SetCurrentSchema, AddPartitionSpec, SetDefaultSpec,
    AddSortOrder, SetDefaultSortOrder, AddSnapshot, RemoveSnapshots, SetSnapshotRef, RemoveSnapshotRef,
    SetLocation, SetProperties, RemoveProperties, SetStatistics, RemoveStatistics, SetPartitionStatistics,
    RemovePartitionStatistics, RemovePartitionSpecs, RemoveSchemas,
]


# ------------------------------------------------------------------------------------- requirements
@dataclass(frozen=True, slots=True)
class AssertCreate:
    """The table must not exist yet."""

    def check(self, current: "TableMetadata | None") -> str | None:
        return None if current is None else "the table already exists"


@dataclass(frozen=True, slots=True)
class AssertTableUUID:
    """The table must still be the same table (not dropped and re-created)."""
    uuid: str

    def check(self, current: "TableMetadata | None") -> str | None:
        if current is None:
            return "the table no longer exists"
        return None if current.table_uuid == self.uuid else f"table uuid changed from {self.uuid} to {current.table_uuid}"


@dataclass(frozen=True, slots=True)
class AssertRefSnapshotId:
    """A branch or tag must still point where the writer saw it (``None``: must not exist)."""
    ref: str
    snapshot_id: int | None

    def check(self, current: "TableMetadata | None") -> str | None:
        if current is None:
            return "the table no longer exists"
        actual = current.refs.get(self.ref)
        actual_id = None if actual is None else actual.snapshot_id
        if actual_id == self.snapshot_id:
            return None
        if self.snapshot_id is None:
            return f"branch or tag {self.ref!r} was created concurrently (now at {actual_id})"
        if actual_id is None:
            return f"branch or tag {self.ref!r} was removed concurrently"
        return f"branch or tag {self.ref!r} moved from {self.snapshot_id} to {actual_id}"


@dataclass(frozen=True, slots=True)
class AssertLastAssignedFieldId:
    """No column was added concurrently."""
    last_assigned_field_id: int

    def check(self, current: "TableMetadata | None") -> str | None:
        if current is None or current.last_column_id == self.last_assigned_field_id:
            return None
        return f"last assigned field id changed from {self.last_assigned_field_id} to {current.last_column_id}"


@dataclass(frozen=True, slots=True)
class AssertCurrentSchemaId:
    """The current schema did not change."""
    schema_id: int

    def check(self, current: "TableMetadata | None") -> str | None:
        if current is None or current.current_schema_id == self.schema_id:
            return None
        return f"current schema changed from {self.schema_id} to {current.current_schema_id}"


@dataclass(frozen=True, slots=True)
class AssertLastAssignedPartitionId:
    """No partition field was added concurrently."""
    last_assigned_partition_id: int

    def check(self, current: "TableMetadata | None") -> str | None:
        if current is None or current.last_partition_id == self.last_assigned_partition_id:
            return None
        return f"last assigned partition id changed from {self.last_assigned_partition_id} to {current.last_partition_id}"


@dataclass(frozen=True, slots=True)
class AssertDefaultSpecId:
    """The default partition spec did not change."""
    spec_id: int

    def check(self, current: "TableMetadata | None") -> str | None:
        if current is None or current.default_spec_id == self.spec_id:
            return None
        return f"default partition spec changed from {self.spec_id} to {current.default_spec_id}"


@dataclass(frozen=True, slots=True)
class AssertDefaultSortOrderId:
    """The default sort order did not change."""
    sort_order_id: int

    def check(self, current: "TableMetadata | None") -> str | None:
        if current is None or current.default_sort_order_id == self.sort_order_id:
            return None
        return f"default sort order changed from {self.sort_order_id} to {current.default_sort_order_id}"


Requirement = Union[
    AssertCreate, AssertTableUUID, AssertRefSnapshotId, AssertLastAssignedFieldId, AssertCurrentSchemaId,
    AssertLastAssignedPartitionId, AssertDefaultSpecId, AssertDefaultSortOrderId,
]


def requirements_for(base: "TableMetadata | None", updates: list[MetadataUpdate], *,
                     assert_every_ref: bool = False) -> list[Requirement]:
    """Derive the requirements that must hold on the table for ``updates`` (computed against
    ``base``) to still mean what the writer intended; ``base`` is None when creating a table.

    ``assert_every_ref`` asserts the head of every ref the updates move, replayable ones (appends)
    included: a catalog that applies the updates to *its* current metadata (REST) must refuse them
    when a concurrent commit moved the branch, or the new snapshot would replace that commit's in
    the branch's history.  A catalog that swaps whole metadata files asserts the base by the swap."""
    if base is None:
        return [AssertCreate()]
    reqs: dict[object, Requirement] = {("uuid",): AssertTableUUID(base.table_uuid)}
    for u in updates:
        if isinstance(u, AddSchema):
            reqs[("field-id",)] = AssertLastAssignedFieldId(base.last_column_id)
        elif isinstance(u, SetCurrentSchema):
            reqs[("schema",)] = AssertCurrentSchemaId(base.current_schema_id)
        elif isinstance(u, AddPartitionSpec):
            reqs[("partition-id",)] = AssertLastAssignedPartitionId(base.last_partition_id)
        elif isinstance(u, SetDefaultSpec):
            reqs[("spec",)] = AssertDefaultSpecId(base.default_spec_id)
        elif isinstance(u, SetDefaultSortOrder):
            reqs[("sort",)] = AssertDefaultSortOrderId(base.default_sort_order_id)
        elif isinstance(u, SetSnapshotRef) and u.assert_head:
            # the first assertion on a ref wins: later updates of the same ref build on it
            reqs.setdefault(("ref", u.name), AssertRefSnapshotId(u.name, u.expected_snapshot_id))
        elif isinstance(u, SetSnapshotRef) and assert_every_ref:
            ref = base.refs.get(u.name)
            reqs.setdefault(("ref", u.name), AssertRefSnapshotId(u.name, None if ref is None else ref.snapshot_id))
        elif isinstance(u, (RemovePartitionSpecs, RemoveSchemas)):
            # a writer that committed meanwhile may have used what is being dropped (Java asserts
            # the default spec / current schema and every branch head)
            if isinstance(u, RemovePartitionSpecs):
                reqs[("spec",)] = AssertDefaultSpecId(base.default_spec_id)
            else:
                reqs[("schema",)] = AssertCurrentSchemaId(base.current_schema_id)
            for name, ref in base.refs.items():
                if ref.ref_type.value == "branch":
                    reqs.setdefault(("ref", name), AssertRefSnapshotId(name, ref.snapshot_id))
        elif isinstance(u, RemoveSnapshotRef):
            ref = base.refs.get(u.name)
            reqs.setdefault(("ref", u.name), AssertRefSnapshotId(u.name, None if ref is None else ref.snapshot_id))
    return list(reqs.values())


def check_requirements(requirements: list[Requirement], current: "TableMetadata | None", *, table: str) -> None:
    """Raise :class:`CommitFailedError` naming the first requirement ``current`` breaks."""
    for req in requirements:
        problem = req.check(current)
        if problem is not None:
            raise CommitFailedError(
                f"Cannot commit to {table}: {problem} since the change was prepared; "
                "reload the table and apply the change again",
                table=table,
                retryable=False,
            )
