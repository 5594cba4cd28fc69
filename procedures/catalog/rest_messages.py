"""The JSON bodies of the Iceberg REST catalog protocol (the spec's ``rest-catalog-open-api.yaml``):
metadata updates and table requirements as a commit sends them, the updates that build a table from
nothing (a staged create's commit), and identifiers/namespaces as URLs and bodies spell them.

Pure functions over the core's update and requirement values (:mod:`procedures.core.kernel.updates`), which
every catalog shares: the file-swap catalogs apply those updates locally, the REST catalog sends them.
"""

from __future__ import annotations

from typing import Any, Sequence
from urllib.parse import quote

from procedures.core.kernel import updates as metadata_updates
from procedures.spec.metadata import TableMetadata
from procedures.spec.partitioning import spec_to_json
from procedures.spec.schema import schema_to_json
from procedures.spec.snapshots import ref_to_json, snapshot_to_json
from procedures.spec.sorting import sort_order_to_json
from procedures.spec.statistics import partition_statistics_file_to_json, statistics_file_to_json

__all__ = [
    "NAMESPACE_SEPARATOR",
    "namespace_path",
    "table_identifier_json",
    "update_to_json",
    "requirement_to_json",
    "create_updates",
    "commit_request",
]

#: how a multi-level namespace is joined in a URL path segment (the unit separator, as the spec says)
NAMESPACE_SEPARATOR = "\x1f"


def namespace_path(namespace: Sequence[str]) -> str:
    """A namespace as one URL path segment: levels joined by the unit separator, percent-encoded."""
    return quote(NAMESPACE_SEPARATOR.join(namespace), safe="")


def table_identifier_json(identifier: Sequence[str]) -> dict[str, Any]:
    """``{"namespace": [...], "name": ...}`` for ``(*namespace, name)``."""
    return {"namespace": list(identifier[:-1]), "name": identifier[-1]}


def update_to_json(update: metadata_updates.MetadataUpdate, format_version: int) -> dict[str, Any]:
    """One metadata update as the REST protocol's ``TableUpdate`` object."""
    if isinstance(update, metadata_updates.AssignUUID):
        return {"action": "assign-uuid", "uuid": update.uuid}
    if isinstance(update, metadata_updates.UpgradeFormatVersion):
        return {"action": "upgrade-format-version", "format-version": update.format_version}
    if isinstance(update, metadata_updates.AddSchema):
        return {"action": "add-schema", "schema": schema_to_json(update.schema), "last-column-id": update.last_column_id}
    if isinstance(update, metadata_updates.SetCurrentSchema):
        return {"action": "set-current-schema", "schema-id": update.schema_id}
    if isinstance(update, metadata_updates.AddPartitionSpec):
        return {"action": "add-spec", "spec": spec_to_json(update.spec)}
    if isinstance(update, metadata_updates.SetDefaultSpec):
        return {"action": "set-default-spec", "spec-id": update.spec_id}
    if isinstance(update, metadata_updates.AddSortOrder):
        return {"action": "add-sort-order", "sort-order": sort_order_to_json(update.sort_order)}
    if isinstance(update, metadata_updates.SetDefaultSortOrder):
        return {"action": "set-default-sort-order", "sort-order-id": update.sort_order_id}
    if isinstance(update, metadata_updates.AddSnapshot):
        return {"action": "add-snapshot", "snapshot": snapshot_to_json(update.snapshot, format_version)}
    if isinstance(update, metadata_updates.RemoveSnapshots):
        return {"action": "remove-snapshots", "snapshot-ids": list(update.snapshot_ids)}
    if isinstance(update, metadata_updates.SetSnapshotRef):
        return {"action": "set-snapshot-ref", "ref-name": update.name, **ref_to_json(update.ref)}
    if isinstance(update, metadata_updates.RemoveSnapshotRef):
        return {"action": "remove-snapshot-ref", "ref-name": update.name}
    if isinstance(update, metadata_updates.SetLocation):
        return {"action": "set-location", "location": update.location}
    if isinstance(update, metadata_updates.SetProperties):
        return {"action": "set-properties", "updates": dict(update.updates)}
    if isinstance(update, metadata_updates.RemoveProperties):
        return {"action": "remove-properties", "removals": list(update.removals)}
    if isinstance(update, metadata_updates.SetStatistics):
        stats = statistics_file_to_json(update.statistics)
        return {"action": "set-statistics", "snapshot-id": stats.get("snapshot-id"), "statistics": stats}
    if isinstance(update, metadata_updates.RemoveStatistics):
        return {"action": "remove-statistics", "snapshot-id": update.snapshot_id}
    if isinstance(update, metadata_updates.SetPartitionStatistics):
        return {"action": "set-partition-statistics",
                "partition-statistics": partition_statistics_file_to_json(update.partition_statistics)}
    if isinstance(update, metadata_updates.RemovePartitionStatistics):
        return {"action": "remove-partition-statistics", "snapshot-id": update.snapshot_id}
    if isinstance(update, metadata_updates.RemovePartitionSpecs):
        return {"action": "remove-partition-specs", "spec-ids": list(update.spec_ids)}
    if isinstance(update, metadata_updates.RemoveSchemas):
        return {"action": "remove-schemas", "schema-ids": list(update.schema_ids)}
    raise TypeError(f"no REST form for metadata update {type(update).__name__}")


def requirement_to_json(requirement: metadata_updates.Requirement) -> dict[str, Any]:
    """One commit requirement as the REST protocol's ``TableRequirement`` object."""
    if isinstance(requirement, metadata_updates.AssertCreate):
        return {"type": "assert-create"}
    if isinstance(requirement, metadata_updates.AssertTableUUID):
        return {"type": "assert-table-uuid", "uuid": requirement.uuid}
    if isinstance(requirement, metadata_updates.AssertRefSnapshotId):
        return {"type": "assert-ref-snapshot-id", "ref": requirement.ref, "snapshot-id": requirement.snapshot_id}
    if isinstance(requirement, metadata_updates.AssertLastAssignedFieldId):
        return {"type": "assert-last-assigned-field-id", "last-assigned-field-id": requirement.last_assigned_field_id}
    if isinstance(requirement, metadata_updates.AssertCurrentSchemaId):
        return {"type": "assert-current-schema-id", "current-schema-id": requirement.schema_id}
    if isinstance(requirement, metadata_updates.AssertLastAssignedPartitionId):
        return {"type": "assert-last-assigned-partition-id",
                "last-assigned-partition-id": requirement.last_assigned_partition_id}
    if isinstance(requirement, metadata_updates.AssertDefaultSpecId):
        return {"type": "assert-default-spec-id", "default-spec-id": requirement.spec_id}
    if isinstance(requirement, metadata_updates.AssertDefaultSortOrderId):
        return {"type": "assert-default-sort-order-id", "default-sort-order-id": requirement.sort_order_id}
    raise TypeError(f"no REST form for requirement {type(requirement).__name__}")


def create_updates(md: TableMetadata) -> list[metadata_updates.MetadataUpdate]:
    """The updates that build ``md`` from nothing, in an order a server can apply (a staged
    create's commit, as Iceberg Java's REST client sends it): uuid, format version, schemas, specs,
    sort orders, location, properties, then snapshots oldest first and the refs."""
    out: list[metadata_updates.MetadataUpdate] = []
    if md.table_uuid:
        out.append(metadata_updates.AssignUUID(md.table_uuid))
    out.append(metadata_updates.UpgradeFormatVersion(md.format_version))
    for schema in md.schemas:
        out.append(metadata_updates.AddSchema(schema, md.last_column_id))
    out.append(metadata_updates.SetCurrentSchema(md.current_schema_id))
    for spec in md.partition_specs:
        out.append(metadata_updates.AddPartitionSpec(spec))
    out.append(metadata_updates.SetDefaultSpec(md.default_spec_id))
    for order in md.sort_orders:
        out.append(metadata_updates.AddSortOrder(order))
    out.append(metadata_updates.SetDefaultSortOrder(md.default_sort_order_id))
    out.append(metadata_updates.SetLocation(md.location))
    if md.properties:
        out.append(metadata_updates.SetProperties(tuple(sorted(md.properties.items()))))
    for snapshot in sorted(md.snapshots, key=lambda s: (s.sequence_number or 0, s.timestamp_ms)):
        out.append(metadata_updates.AddSnapshot(snapshot))
    for name, ref in md.refs.items():
        out.append(metadata_updates.SetSnapshotRef(name, ref, None, assert_head=False))
    for stats in md.statistics:
        out.append(metadata_updates.SetStatistics(stats))
    for stats in md.partition_statistics:
        out.append(metadata_updates.SetPartitionStatistics(stats))
    return out


def commit_request(identifier: Sequence[str], requirements: Sequence[metadata_updates.Requirement],
                   updates: Sequence[metadata_updates.MetadataUpdate], format_version: int) -> dict[str, Any]:
    """The body of ``POST .../tables/{table}`` (``CommitTableRequest``)."""
    return {
        "identifier": table_identifier_json(identifier),
        "requirements": [requirement_to_json(r) for r in requirements],
        "updates": [update_to_json(u, format_version) for u in updates],
    }
