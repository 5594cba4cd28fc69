"""The one place new table metadata is made.

:class:`MetadataBuilder` applies :mod:`~procedures.core.kernel.updates` to a base
:class:`~procedures.spec.metadata.TableMetadata` and refuses changes the spec forbids (a ref to a
missing snapshot, a sequence number that does not advance, a format downgrade ...).  It also keeps
the bookkeeping every commit needs: ``last-updated-ms``, the snapshot log, the metadata log and its
``write.metadata.previous-versions-max`` trim, and v3 row-id accounting.
"""

from __future__ import annotations

import dataclasses
import time
import uuid as uuidlib
from typing import Iterable

from procedures.core.kernel import updates as metadata_updates
from procedures.core.kernel.properties import FORMAT_VERSION, METADATA_PREVIOUS_VERSIONS_MAX
from procedures.errors import NoSuchSnapshotError, ValidationError
from procedures.spec.metadata import TableMetadata
from procedures.spec.partitioning import UNPARTITIONED_SPEC, PartitionSpec
from procedures.spec.schema import assign_fresh_ids, Schema
from procedures.spec.snapshots import MetadataLogEntry, Snapshot, SnapshotLogEntry, SnapshotRefType
from procedures.spec.sorting import UNSORTED_SORT_ORDER, SortOrder

__all__ = ["MetadataBuilder", "new_table_metadata", "SUPPORTED_FORMAT_VERSIONS", "MAIN_BRANCH"]

SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)
MAIN_BRANCH = "main"
#: table properties that are inputs to create/update only and never persisted (Java's reserved set)
RESERVED_PROPERTIES = frozenset({
    FORMAT_VERSION.key, "uuid", "snapshot-count", "current-snapshot-id", "current-snapshot-summary",
    "current-snapshot-timestamp-ms", "current-schema", "default-partition-spec", "default-sort-order",
})


def _now_ms() -> int:
    return int(time.time() * 1000)


class MetadataBuilder:
    """Accumulates updates on top of ``base`` and builds the next :class:`TableMetadata`.

    ``base_location`` is the metadata file ``base`` was loaded from; it is appended to the
    metadata log by :meth:`build`.
    """

    def __init__(self, base: TableMetadata, base_location: str | None = None) -> None:
        self._base = base
        self._base_location = base_location
        self._md: dict = {f.name: getattr(base, f.name) for f in dataclasses.fields(base) if f.init}
        self._md["schemas"] = list(base.schemas)
        self._md["partition_specs"] = list(base.partition_specs)
        self._md["sort_orders"] = list(base.sort_orders)
        self._md["snapshots"] = list(base.snapshots)
        self._md["refs"] = dict(base.refs)
        self._md["snapshot_log"] = list(base.snapshot_log)
        self._md["metadata_log"] = list(base.metadata_log)
        self._md["properties"] = dict(base.properties)
        self._md["statistics"] = list(base.statistics)
        self._md["partition_statistics"] = list(base.partition_statistics)
        self.updates: list[metadata_updates.MetadataUpdate] = []
        self._last_added_schema: int | None = None
        self._last_added_spec: int | None = None
        self._last_added_order: int | None = None
        self._added_snapshots: dict[int, Snapshot] = {}
        self._ref_changes: list[tuple[str, int | None]] = []

    # ------------------------------------------------------------------ dispatch
    def apply(self, update: metadata_updates.MetadataUpdate) -> "MetadataBuilder":
        """Apply one update; raises ValidationError when it is not allowed."""
        handler = getattr(self, "_apply_" + type(update).__name__)
        handler(update)
        self.updates.append(update)
        return self

    def apply_all(self, updates: Iterable[metadata_updates.MetadataUpdate]) -> "MetadataBuilder":
        """Apply updates in order."""
        for u in updates:
            self.apply(u)
        return self

    @property
    def format_version(self) -> int:
        """Format version after the updates so far."""
        return self._md["format_version"]

    def current(self) -> TableMetadata:
        """Metadata with the updates applied so far (no bookkeeping of :meth:`build`)."""
        return self._freeze(self._md)

    # ------------------------------------------------------------------ handlers
    def _apply_AssignUUID(self, u: metadata_updates.AssignUUID) -> None:
        if self._md["table_uuid"] and self._md["table_uuid"] != u.uuid:
            raise ValidationError(f"Cannot reassign table uuid {self._md['table_uuid']} to {u.uuid}")
        self._md["table_uuid"] = u.uuid

    def _apply_UpgradeFormatVersion(self, u: metadata_updates.UpgradeFormatVersion) -> None:
        current = self._md["format_version"]
        if u.format_version not in SUPPORTED_FORMAT_VERSIONS:
            raise ValidationError(
                f"Cannot upgrade to format version {u.format_version}: supported versions are {SUPPORTED_FORMAT_VERSIONS}"
            )
        if u.format_version < current:
            raise ValidationError(f"Cannot downgrade format version from {current} to {u.format_version}")
        if u.format_version >= 3 and current < 3:
            self._md["next_row_id"] = 0
        self._md["format_version"] = u.format_version

    def _apply_AddSchema(self, u: metadata_updates.AddSchema) -> None:
        for s in self._md["schemas"]:
            if s.same_schema(u.schema):
                self._last_added_schema = s.schema_id
                self._md["last_column_id"] = max(self._md["last_column_id"], u.last_column_id)
                return
        if u.last_column_id < self._md["last_column_id"]:
            raise ValidationError(
                f"Invalid last column id {u.last_column_id}: must be at least {self._md['last_column_id']}"
            )
        if u.schema.highest_field_id > u.last_column_id:
            raise ValidationError(
                f"Schema uses field id {u.schema.highest_field_id} above last column id {u.last_column_id}"
            )
        u.schema.validate_identifier_fields()
        self._check_types_allowed(u.schema)
        new_id = max((s.schema_id for s in self._md["schemas"]), default=-1) + 1
        self._md["schemas"].append(u.schema.with_schema_id(new_id))
        self._md["last_column_id"] = u.last_column_id
        self._last_added_schema = new_id

    def _check_types_allowed(self, schema: Schema) -> None:
        fv = self._md["format_version"]
        for fid in schema.field_ids():
            t = schema.find_type(fid)
            needed = getattr(t, "min_format_version", 1)
            if needed > fv:
                raise ValidationError(
                    f"Column {schema.find_column_name(fid)!r} has type {t}, which needs format version {needed} "
                    f"(table is v{fv}); upgrade the table first"
                )
            f = schema.find_field(fid)
            if fv < 3 and (f.initial_default is not None or f.write_default is not None):
                raise ValidationError(
                    f"Column {schema.find_column_name(fid)!r} has a default value, which needs format version 3"
                )

    def _current_schema(self) -> Schema:
        # read without freezing the metadata: between REPLACE TABLE's schema change and its new spec
        # the default spec may name a dropped column, which a whole-metadata check refuses (Java's
        # builder does not check that intermediate state either)
        sid = self._md["current_schema_id"]
        return next(s for s in self._md["schemas"] if s.schema_id == sid)

    def _resolve(self, requested: int, last_added: int | None, what: str) -> int:
        if requested == metadata_updates.LAST_ADDED:
            if last_added is None:
                raise ValidationError(f"Cannot set the last added {what}: none was added in this change")
            return last_added
        return requested

    def _apply_SetCurrentSchema(self, u: metadata_updates.SetCurrentSchema) -> None:
        sid = self._resolve(u.schema_id, self._last_added_schema, "schema")
        if not any(s.schema_id == sid for s in self._md["schemas"]):
            raise ValidationError(f"Cannot set current schema to unknown schema id {sid}")
        self._md["current_schema_id"] = sid

    def _apply_AddPartitionSpec(self, u: metadata_updates.AddPartitionSpec) -> None:
        spec = u.spec
        for s in self._md["partition_specs"]:
            if s.compatible_with(spec):
                self._last_added_spec = s.spec_id
                return
        schema = self._current_schema()
        spec.partition_type(schema)  # binds: raises when a source column is missing or the transform does not fit
        if self._md["format_version"] == 1:
            expected = list(range(1000, 1000 + len(spec.fields)))
            if [f.field_id for f in spec.fields] != expected:
                raise ValidationError(
                    f"v1 partition specs must use sequential field ids {expected}, got {[f.field_id for f in spec.fields]}"
                )
        new_id = max((s.spec_id for s in self._md["partition_specs"]), default=-1) + 1
        self._md["partition_specs"].append(dataclasses.replace(spec, spec_id=new_id))
        highest = max((f.field_id for f in spec.fields), default=self._md["last_partition_id"])
        self._md["last_partition_id"] = max(self._md["last_partition_id"], highest)
        self._last_added_spec = new_id

    def _apply_SetDefaultSpec(self, u: metadata_updates.SetDefaultSpec) -> None:
        sid = self._resolve(u.spec_id, self._last_added_spec, "partition spec")
        if not any(s.spec_id == sid for s in self._md["partition_specs"]):
            raise ValidationError(f"Cannot set default partition spec to unknown spec id {sid}")
        self._md["default_spec_id"] = sid

    def _apply_AddSortOrder(self, u: metadata_updates.AddSortOrder) -> None:
        order = u.sort_order
        for o in self._md["sort_orders"]:
            if tuple(o.fields) == tuple(order.fields):
                self._last_added_order = o.order_id
                return
        if not order.fields:
            new_id = 0
        else:
            schema = self._current_schema()
            for f in order.fields:
                if schema.find_field_or_none(f.source_id) is None:
                    raise ValidationError(f"Cannot add sort order: source column id {f.source_id} is not in the current schema")
            new_id = max((o.order_id for o in self._md["sort_orders"]), default=0) + 1
        self._md["sort_orders"].append(dataclasses.replace(order, order_id=new_id))
        self._last_added_order = new_id

    def _apply_SetDefaultSortOrder(self, u: metadata_updates.SetDefaultSortOrder) -> None:
        oid = self._resolve(u.sort_order_id, self._last_added_order, "sort order")
        if not any(o.order_id == oid for o in self._md["sort_orders"]):
            raise ValidationError(f"Cannot set default sort order to unknown order id {oid}")
        self._md["default_sort_order_id"] = oid

    def _apply_AddSnapshot(self, u: metadata_updates.AddSnapshot) -> None:
        snap = u.snapshot
        if any(s.snapshot_id == snap.snapshot_id for s in self._md["snapshots"]):
            raise ValidationError(f"Snapshot id {snap.snapshot_id} already exists in the table")
        fv = self._md["format_version"]
        if fv > 1 and snap.parent_snapshot_id is not None and snap.sequence_number <= self._md["last_sequence_number"]:
            raise ValidationError(
                f"Cannot add snapshot {snap.snapshot_id} with sequence number {snap.sequence_number}: "
                f"it must be greater than the table's last sequence number {self._md['last_sequence_number']}"
            )
        if fv >= 3:
            if snap.first_row_id is None or snap.added_rows is None:
                raise ValidationError(f"v3 snapshot {snap.snapshot_id} must have first-row-id and added-rows")
            if snap.first_row_id < self._md["next_row_id"]:
                raise ValidationError(
                    f"Cannot add snapshot {snap.snapshot_id}: first-row-id {snap.first_row_id} is below the "
                    f"table's next-row-id {self._md['next_row_id']}"
                )
            self._md["next_row_id"] = snap.first_row_id + snap.added_rows
        self._md["snapshots"].append(snap)
        self._md["last_sequence_number"] = max(self._md["last_sequence_number"], snap.sequence_number or 0)
        self._added_snapshots[snap.snapshot_id] = snap

    def _apply_RemoveSnapshots(self, u: metadata_updates.RemoveSnapshots) -> None:
        remove = set(u.snapshot_ids)
        for name, ref in self._md["refs"].items():
            if ref.snapshot_id in remove and name == MAIN_BRANCH:
                raise ValidationError(f"Cannot remove snapshot {ref.snapshot_id}: it is the current snapshot of main")
        self._md["snapshots"] = [s for s in self._md["snapshots"] if s.snapshot_id not in remove]
        for name in [n for n, r in self._md["refs"].items() if r.snapshot_id in remove]:
            del self._md["refs"][name]
        self._md["statistics"] = [s for s in self._md["statistics"] if s.snapshot_id not in remove]
        self._md["partition_statistics"] = [s for s in self._md["partition_statistics"] if s.snapshot_id not in remove]
        # the spec: drop every log entry up to and including the last one pointing at an expired snapshot
        log = self._md["snapshot_log"]
        last_removed = max((i for i, e in enumerate(log) if e.snapshot_id in remove), default=-1)
        self._md["snapshot_log"] = log[last_removed + 1:]

    def _apply_SetSnapshotRef(self, u: metadata_updates.SetSnapshotRef) -> None:
        ref = u.ref
        if not any(s.snapshot_id == ref.snapshot_id for s in self._md["snapshots"]):
            raise NoSuchSnapshotError(f"Cannot set {u.name!r} to unknown snapshot {ref.snapshot_id}")
        if u.name == MAIN_BRANCH and ref.ref_type != SnapshotRefType.BRANCH:
            raise ValidationError("Cannot make main a tag: main must be a branch")
        if ref.ref_type == SnapshotRefType.TAG and (ref.min_snapshots_to_keep is not None or ref.max_snapshot_age_ms is not None):
            raise ValidationError(f"Tag {u.name!r} cannot have branch retention settings")
        if u.name == MAIN_BRANCH and ref.max_ref_age_ms is not None:
            raise ValidationError("Cannot set max-ref-age-ms on main: main never expires")
        existing = self._md["refs"].get(u.name)
        self._md["refs"][u.name] = ref
        if u.name == MAIN_BRANCH and (existing is None or existing.snapshot_id != ref.snapshot_id):
            self._md["current_snapshot_id"] = ref.snapshot_id
            self._ref_changes.append((u.name, ref.snapshot_id))

    def _apply_RemoveSnapshotRef(self, u: metadata_updates.RemoveSnapshotRef) -> None:
        if u.name not in self._md["refs"]:
            return
        del self._md["refs"][u.name]
        if u.name == MAIN_BRANCH:
            self._md["current_snapshot_id"] = None

    def _apply_SetLocation(self, u: metadata_updates.SetLocation) -> None:
        if not u.location:
            raise ValidationError("Cannot set an empty table location")
        self._md["location"] = u.location.rstrip("/")

    def _apply_SetProperties(self, u: metadata_updates.SetProperties) -> None:
        for k, v in u.updates:
            if not isinstance(k, str) or not isinstance(v, str):
                raise ValidationError(f"Table property {k!r} must be a string key with a string value, got {v!r}")
            if k in RESERVED_PROPERTIES:
                raise ValidationError(f"Table property {k!r} is reserved and cannot be set directly")
            self._md["properties"][k] = v

    def _apply_RemoveProperties(self, u: metadata_updates.RemoveProperties) -> None:
        for k in u.removals:
            self._md["properties"].pop(k, None)

    def _apply_SetStatistics(self, u: metadata_updates.SetStatistics) -> None:
        sid = u.statistics.snapshot_id
        self._md["statistics"] = [s for s in self._md["statistics"] if s.snapshot_id != sid] + [u.statistics]

    def _apply_RemoveStatistics(self, u: metadata_updates.RemoveStatistics) -> None:
        self._md["statistics"] = [s for s in self._md["statistics"] if s.snapshot_id != u.snapshot_id]

    def _apply_SetPartitionStatistics(self, u: metadata_updates.SetPartitionStatistics) -> None:
        sid = u.partition_statistics.snapshot_id
        self._md["partition_statistics"] = [
            s for s in self._md["partition_statistics"] if s.snapshot_id != sid
        ] + [u.partition_statistics]

    def _apply_RemovePartitionStatistics(self, u: metadata_updates.RemovePartitionStatistics) -> None:
        self._md["partition_statistics"] = [
            s for s in self._md["partition_statistics"] if s.snapshot_id != u.snapshot_id
        ]

    def _apply_RemovePartitionSpecs(self, u: metadata_updates.RemovePartitionSpecs) -> None:
        remove = set(u.spec_ids)
        if self._md["default_spec_id"] in remove:
            raise ValidationError(f"Cannot remove the default partition spec {self._md['default_spec_id']}")
        self._md["partition_specs"] = [s for s in self._md["partition_specs"] if s.spec_id not in remove]

    def _apply_RemoveSchemas(self, u: metadata_updates.RemoveSchemas) -> None:
        remove = set(u.schema_ids)
        if self._md["current_schema_id"] in remove:
            raise ValidationError(f"Cannot remove the current schema {self._md['current_schema_id']}")
        self._md["schemas"] = [s for s in self._md["schemas"] if s.schema_id not in remove]

    # ------------------------------------------------------------------ build
    def build(self, *, now_ms: int | None = None) -> TableMetadata:
        """The new metadata: the updates plus ``last-updated-ms``, snapshot and metadata logs."""
        md = dict(self._md)
        if not self.updates and self._base_location is not None:
            return self._base
        now = _now_ms() if now_ms is None else now_ms
        # Java stamps a commit that added snapshots with the newest snapshot's time so the
        # snapshot log and last-updated-ms agree.
        last_updated = max((s.timestamp_ms for s in self._added_snapshots.values()), default=now)
        last_updated = max(last_updated, self._base.last_updated_ms if self._base_location else 0)
        md["last_updated_ms"] = last_updated
        log = list(md["snapshot_log"])
        for _name, sid in self._ref_changes:
            if sid is not None:
                ts = self._added_snapshots[sid].timestamp_ms if sid in self._added_snapshots else last_updated
                log.append(SnapshotLogEntry(ts, sid))
        md["snapshot_log"] = log
        mlog = list(md["metadata_log"])
        if self._base_location is not None:
            mlog.append(MetadataLogEntry(self._base.last_updated_ms, self._base_location))
        # as Java: at least the metadata file this commit replaces stays in the log
        keep = max(METADATA_PREVIOUS_VERSIONS_MAX.read(md["properties"]), 1)
        md["metadata_log"] = mlog[-keep:]
        return self._freeze(md)

    @staticmethod
    def _freeze(md: dict) -> TableMetadata:
        out = dict(md)
        for key in ("schemas", "partition_specs", "sort_orders", "snapshots", "snapshot_log",
                    "metadata_log", "statistics", "partition_statistics"):
            out[key] = tuple(out[key])
        return TableMetadata(**out)


def new_table_metadata(
    *,
    schema: Schema,
    location: str,
    spec: PartitionSpec | None = None,
    sort_order: SortOrder | None = None,
    properties: dict[str, str] | None = None,
    format_version: int = 2,
    table_uuid: str | None = None,
) -> tuple[TableMetadata, list[metadata_updates.MetadataUpdate]]:
    """Metadata for a new table, with ids assigned afresh as Java does on create.

    ``schema``, ``spec`` and ``sort_order`` may use any field ids: columns are renumbered from 1
    and the spec and order are rebound to the new ids.  Returns the metadata and the updates that
    made it (for catalogs that record them).
    """
    props = dict(properties or {})
    if FORMAT_VERSION.is_set(props):
        format_version = FORMAT_VERSION.read(props)
        del props[FORMAT_VERSION.key]
    if format_version not in SUPPORTED_FORMAT_VERSIONS:
        raise ValidationError(f"Unsupported format version {format_version}; use one of {SUPPORTED_FORMAT_VERSIONS}")
    counter = iter(range(1, 1 << 31))
    fresh = assign_fresh_ids(schema, lambda: next(counter))
    id_map = _id_map(schema, fresh)
    spec = spec or UNPARTITIONED_SPEC
    new_fields = tuple(
        dataclasses.replace(f, source_id=id_map[f.source_id], field_id=1000 + i) for i, f in enumerate(spec.fields)
    )
    spec = dataclasses.replace(spec, spec_id=0, fields=new_fields)
    order = sort_order or UNSORTED_SORT_ORDER
    order = dataclasses.replace(
        order,
        order_id=1 if order.fields else 0,
        fields=tuple(dataclasses.replace(f, source_id=id_map[f.source_id]) for f in order.fields),
    )
    if not schema.fields:
        raise ValidationError("Cannot create a table with an empty schema")
    spec.partition_type(fresh)  # binds the spec: raises for a missing column or a transform that does not fit
    first = TableMetadata(
        format_version=format_version,
        table_uuid=table_uuid or str(uuidlib.uuid4()),
        location=location.rstrip("/"),
        last_sequence_number=0,
        last_updated_ms=_now_ms(),
        last_column_id=fresh.highest_field_id,
        schemas=(fresh.with_schema_id(0),),
        current_schema_id=0,
        partition_specs=(spec,),
        default_spec_id=0,
        last_partition_id=max((f.field_id for f in spec.fields), default=999),
        sort_orders=(order,) if not order.fields else (UNSORTED_SORT_ORDER, order),
        default_sort_order_id=order.order_id,
        properties={},
        next_row_id=0 if format_version >= 3 else None,
    )
    builder = MetadataBuilder(first)
    builder._check_types_allowed(first.schema())
    first.schema().validate_identifier_fields()
    builder.apply(metadata_updates.SetProperties(tuple(props.items())))
    md = builder.build()
    updates: list[metadata_updates.MetadataUpdate] = [
        metadata_updates.AssignUUID(md.table_uuid), metadata_updates.UpgradeFormatVersion(format_version),
        metadata_updates.AddSchema(md.schema(), md.last_column_id),
        metadata_updates.SetCurrentSchema(metadata_updates.LAST_ADDED),
        metadata_updates.AddPartitionSpec(spec), metadata_updates.SetDefaultSpec(metadata_updates.LAST_ADDED),
        metadata_updates.AddSortOrder(order), metadata_updates.SetDefaultSortOrder(metadata_updates.LAST_ADDED), *builder.updates,
    ]
    return md, updates


def _id_map(old: Schema, new: Schema) -> dict[int, int]:
    """Map old field ids to fresh ones by full column name."""
    out = {}
    for fid in old.field_ids():
        name = old.find_column_name(fid)
        nf = new.find_field_or_none(name)
        if nf is not None:
            out[fid] = nf.field_id
    return out
