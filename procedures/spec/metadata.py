"""Table metadata (spec "Table Metadata" and Appendix C "Table Metadata and Snapshots") and the
``*.metadata.json`` codec for format versions 1, 2 and 3.

:class:`TableMetadata` is an immutable value with O(1) lookups of schemas, specs, sort orders and
snapshots by id.  Constructing one validates what Java's ``TableMetadata`` constructor
validates (current schema, default spec and order exist, refs point at snapshots, ``main``
agrees with ``current-snapshot-id``, snapshot sequence numbers, v2+ uuid, v3 ``next-row-id``),
so both the reader and the metadata builder get the same checks.

The codec follows Java 1.10's ``TableMetadataParser``:

* reading: missing v1 ``schemas``/``partition-specs``/``sort-orders``/``last-partition-id`` are
  derived from ``schema``/``partition-spec`` as Java derives them; from v2 on they are required and
  a missing one is reported as "<field> must exist in format v<N>"; ``current-snapshot-id`` of
  ``-1`` or ``null`` means none; missing ``refs`` with a current snapshot create the ``main``
  branch; unknown top-level keys are kept in ``extra``; the withdrawn v3-draft ``row-lineage`` key
  is dropped;
* writing: Java's key order; v1 also writes the deprecated ``schema`` and ``partition-spec``;
  ``current-snapshot-id`` is ``-1`` for v1/v2 and ``null`` for v3 when there is no snapshot;
  ``refs``, ``statistics`` and ``partition-statistics`` are always written; ``encryption-keys``
  only when non-empty;
* files named ``*.gz.metadata.json`` or ``*.metadata.json.gz`` are gzip-compressed.

Parsing works on plain dicts from :func:`json.loads`; nothing is validated twice.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from procedures.errors import InvalidMetadataError, UnsupportedFormatVersionError
from procedures.spec.file_access import FileAccess
from procedures.spec.partitioning import PartitionSpec, spec_from_json, spec_to_json
from procedures.spec.schema import (
    MAX_JSON_NESTING_DEPTH, MAX_NESTING_DEPTH, Schema, schema_from_json, schema_to_json,
)
from procedures.spec.snapshots import (
    MAIN_BRANCH,
    MetadataLogEntry,
    Snapshot,
    SnapshotLogEntry,
    SnapshotRef,
    SnapshotRefType,
    metadata_log_entry_from_json,
    metadata_log_entry_to_json,
    ref_from_json,
    ref_to_json,
    snapshot_from_json,
    snapshot_log_entry_from_json,
    snapshot_log_entry_to_json,
    snapshot_to_json,
)
from procedures.spec.sorting import UNSORTED_SORT_ORDER, SortOrder, sort_order_from_json, sort_order_to_json
from procedures.spec.statistics import (
    PartitionStatisticsFile,
    StatisticsFile,
    partition_statistics_file_from_json,
    partition_statistics_file_to_json,
    statistics_file_from_json,
    statistics_file_to_json,
)

__all__ = [
    "TableMetadata",
    "EncryptedKey",
    "SUPPORTED_FORMAT_VERSIONS",
    "metadata_from_json",
    "metadata_from_dict",
    "metadata_to_json",
    "metadata_json_bytes",
    "metadata_file_data",
    "metadata_to_dict",
    "read_table_metadata",
    "write_table_metadata",
    "is_gzip_metadata_name",
]

#: table format versions this package reads and writes
SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)

#: Java's last-partition-id of a table that has only the unpartitioned spec
_UNPARTITIONED_LAST_ASSIGNED_ID = 999
_PARTITION_FIELD_ID_START = 1000

_KNOWN_KEYS = frozenset({
    "format-version", "table-uuid", "location", "last-sequence-number", "last-updated-ms",
    "last-column-id", "schema", "schemas", "current-schema-id", "partition-spec", "partition-specs",
    "default-spec-id", "last-partition-id", "default-sort-order-id", "sort-orders", "properties",
    "current-snapshot-id", "next-row-id", "encryption-keys", "refs", "snapshots", "statistics",
    "partition-statistics", "snapshot-log", "metadata-log",
    # a v3 draft field, removed from the spec before release; never written back
    "row-lineage",
})


@dataclass(frozen=True, slots=True)
class EncryptedKey:
    """An ``encryption-keys`` entry (v3): a wrapped key and the key that wraps it."""

    key_id: str
    encrypted_key_metadata: bytes
    encrypted_by_id: str | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash(self.key_id)


@dataclass(frozen=True)
class TableMetadata:
    """The whole state of a table as stored in one metadata file.

    ``table_uuid`` is the uuid text as written; ``current_snapshot_id`` is ``None`` when the table
    has no current snapshot (never ``-1``); ``next_row_id`` is set for v3 only; ``extra`` keeps
    top-level keys this model does not know, so a read-modify-write keeps them.
    """

    format_version: int
    table_uuid: str | None
    location: str
    last_sequence_number: int
    last_updated_ms: int
    last_column_id: int
    schemas: tuple[Schema, ...]
    current_schema_id: int
    partition_specs: tuple[PartitionSpec, ...]
    default_spec_id: int
    last_partition_id: int
    sort_orders: tuple[SortOrder, ...]
    default_sort_order_id: int
    properties: dict[str, str] = field(default_factory=dict)
    current_snapshot_id: int | None = None
    snapshots: tuple[Snapshot, ...] = ()
    refs: dict[str, SnapshotRef] = field(default_factory=dict)
    snapshot_log: tuple[SnapshotLogEntry, ...] = ()
    metadata_log: tuple[MetadataLogEntry, ...] = ()
    statistics: tuple[StatisticsFile, ...] = ()
    partition_statistics: tuple[PartitionStatisticsFile, ...] = ()
    next_row_id: int | None = None
    encryption_keys: tuple[EncryptedKey, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    _schemas_by_id: dict[int, Schema] = field(init=False, repr=False, compare=False)
    _specs_by_id: dict[int, PartitionSpec] = field(init=False, repr=False, compare=False)
    _orders_by_id: dict[int, SortOrder] = field(init=False, repr=False, compare=False)
    _snapshots_by_id: dict[int, Snapshot] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        for name in ("schemas", "partition_specs", "sort_orders", "snapshots", "snapshot_log",
                     "metadata_log", "statistics", "partition_statistics", "encryption_keys"):
            setattr_(self, name, tuple(getattr(self, name)))
        setattr_(self, "properties", dict(self.properties))
        setattr_(self, "refs", dict(self.refs))
        setattr_(self, "extra", dict(self.extra))
        if self.current_snapshot_id == -1:
            setattr_(self, "current_snapshot_id", None)
        setattr_(self, "_schemas_by_id", {s.schema_id: s for s in self.schemas})
        setattr_(self, "_specs_by_id", {s.spec_id: s for s in self.partition_specs})
        setattr_(self, "_orders_by_id", {o.order_id: o for o in self.sort_orders})
        setattr_(self, "_snapshots_by_id", {s.snapshot_id: s for s in self.snapshots})
        self._validate()

    def __hash__(self) -> int:
        return hash((self.table_uuid, self.location, self.last_updated_ms, self.current_snapshot_id))

    def _validate(self) -> None:
        v = self.format_version
        if v not in SUPPORTED_FORMAT_VERSIONS:
            raise UnsupportedFormatVersionError(
                f"Cannot read unsupported version {v}: this package reads and writes format versions 1 to 3")
        if v >= 2 and not self.table_uuid:
            raise InvalidMetadataError(f"table-uuid must exist in format v{v}")
        if self.current_schema_id not in self._schemas_by_id:
            raise InvalidMetadataError(
                f"Cannot find schema with current-schema-id={self.current_schema_id} from schemas "
                f"(known schema ids: {sorted(self._schemas_by_id)})")
        spec = self._specs_by_id.get(self.default_spec_id)
        if spec is None:
            raise InvalidMetadataError(
                f"Cannot find partition spec with default-spec-id={self.default_spec_id} from partition-specs "
                f"(known spec ids: {sorted(self._specs_by_id)})")
        schema = self._schemas_by_id[self.current_schema_id]
        for pf in spec.fields:
            # the default spec must bind to the current schema; a void field may outlive its column
            if schema.find_field_or_none(pf.source_id) is None and str(pf.transform) != "void":
                raise InvalidMetadataError(
                    f"default partition spec {spec.spec_id} field {pf.name!r} uses source id {pf.source_id}, "
                    f"which is not in current schema {schema.schema_id}")
        if self.default_sort_order_id != 0 and self.default_sort_order_id not in self._orders_by_id:
            raise InvalidMetadataError(
                f"Cannot find sort order with default-sort-order-id={self.default_sort_order_id} from sort-orders "
                f"(known order ids: {sorted(self._orders_by_id)})")
        if v >= 3 and self.next_row_id is None:
            raise InvalidMetadataError(f"next-row-id must exist in format v{v}")
        if len(self._snapshots_by_id) != len(self.snapshots):
            raise InvalidMetadataError("snapshots contains the same snapshot-id more than once")
        if v >= 2:
            for s in self.snapshots:
                if s.sequence_number > self.last_sequence_number:
                    raise InvalidMetadataError(
                        f"snapshot {s.snapshot_id} has sequence number {s.sequence_number}, greater than "
                        f"last-sequence-number {self.last_sequence_number}")
        cur = self.current_snapshot_id
        if cur is not None and cur not in self._snapshots_by_id:
            raise InvalidMetadataError(f"current-snapshot-id {cur} is not among the table's snapshots")
        for name, ref in self.refs.items():
            if ref.snapshot_id not in self._snapshots_by_id:
                raise InvalidMetadataError(
                    f"ref {name!r} points at snapshot {ref.snapshot_id}, which is not among the table's snapshots")
        main = self.refs.get(MAIN_BRANCH)
        if main is not None:
            if cur is None:
                raise InvalidMetadataError(
                    f"current-snapshot-id is not set, but the main branch points at snapshot {main.snapshot_id}")
            if main.snapshot_id != cur:
                raise InvalidMetadataError(
                    f"current-snapshot-id {cur} does not match the main branch ({main.snapshot_id})")
            if not main.is_branch:
                raise InvalidMetadataError("ref 'main' must be a branch, not a tag")

    # ------------------------------------------------------------------ lookups
    def schema(self) -> Schema:
        """The current schema."""
        return self._schemas_by_id[self.current_schema_id]

    def schema_by_id(self, schema_id: int) -> Schema | None:
        """The schema with this id, or None."""
        return self._schemas_by_id.get(schema_id)

    @property
    def schemas_by_id(self) -> Mapping[int, Schema]:
        """Every schema by id (do not modify)."""
        return self._schemas_by_id

    def spec(self) -> PartitionSpec:
        """The default partition spec."""
        return self._specs_by_id[self.default_spec_id]

    def spec_by_id(self, spec_id: int) -> PartitionSpec | None:
        """The partition spec with this id, or None."""
        return self._specs_by_id.get(spec_id)

    @property
    def specs_by_id(self) -> Mapping[int, PartitionSpec]:
        """Every partition spec by id (do not modify)."""
        return self._specs_by_id

    def sort_order(self) -> SortOrder:
        """The default sort order (unsorted when the default id 0 has no entry)."""
        return self._orders_by_id.get(self.default_sort_order_id, UNSORTED_SORT_ORDER)

    def sort_order_by_id(self, order_id: int) -> SortOrder | None:
        """The sort order with this id, or None."""
        return self._orders_by_id.get(order_id)

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        """The snapshot with this id, or None (it may have expired)."""
        return self._snapshots_by_id.get(snapshot_id)

    def current_snapshot(self) -> Snapshot | None:
        """The current snapshot of the main branch, or None for a table without data commits."""
        cur = self.current_snapshot_id
        return None if cur is None else self._snapshots_by_id.get(cur)

    def snapshot_for_ref(self, name: str) -> Snapshot | None:
        """The snapshot a branch or tag points at, or None when there is no such ref."""
        ref = self.refs.get(name)
        return None if ref is None else self._snapshots_by_id.get(ref.snapshot_id)

    def ancestors_of(self, snapshot_id: int | None) -> Iterator[Snapshot]:
        """The snapshot and its ancestors, newest first, stopping where the chain leaves the
        metadata (an expired parent) or reaches the first snapshot."""
        seen: set[int] = set()
        sid = snapshot_id
        while sid is not None and sid not in seen:
            snap = self._snapshots_by_id.get(sid)
            if snap is None:
                return
            seen.add(sid)
            yield snap
            sid = snap.parent_snapshot_id

    def property(self, key: str, default: str | None = None) -> str | None:
        """A table property, or ``default`` when unset."""
        return self.properties.get(key, default)


# ---------------------------------------------------------------------- reading
def _fail(message: str) -> InvalidMetadataError:
    return InvalidMetadataError(message)


def _require(node: Mapping[str, Any], key: str, version: int) -> Any:
    value = node.get(key)
    if value is None:
        raise _fail(f"{key} must exist in format v{version}")
    return value


def _int(node: Mapping[str, Any], key: str, version: int) -> int:
    value = _require(node, key, version)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(f"{key} must be an integer, got {value!r}")
    return value


def _opt_int(node: Mapping[str, Any], key: str) -> int | None:
    value = node.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(f"{key} must be an integer, got {value!r}")
    return value


def _list(node: Mapping[str, Any], key: str) -> list[Any]:
    value = node.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _fail(f"Cannot parse {key} from non-array: {str(value)[:200]}")
    return value


def _schema(obj: Any) -> Schema:
    # Java refuses a schema without "type": "struct"; our schema parser is lenient about it.
    if not isinstance(obj, dict) or obj.get("type") != "struct":
        raise _fail(f"Cannot parse type from json: a schema needs \"type\": \"struct\", got {str(obj)[:200]}")
    return schema_from_json(obj)


def _v1_spec(fields: Any) -> PartitionSpec:
    if not isinstance(fields, list):
        raise _fail(f"Cannot parse partition-spec from non-array: {str(fields)[:200]}")
    # v1 writers may omit field ids; they are then implied as 1000, 1001, ... in order
    if fields and all(isinstance(f, dict) and "field-id" not in f for f in fields):
        fields = [dict(f, **{"field-id": _PARTITION_FIELD_ID_START + i}) for i, f in enumerate(fields)]
    return spec_from_json({"spec-id": 0, "fields": fields})


def _string_map(value: Any, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _fail(f"Cannot parse {key} from non-object: {str(value)[:200]}")
    out: dict[str, str] = {}
    for k, v in value.items():
        if isinstance(v, str):
            out[k] = v
        elif isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, (int, float)):
            out[k] = str(v)
        else:
            raise _fail(f"{key} value of {k!r} must be a string, got {v!r}")
    return out


def _encrypted_key_from_json(obj: Any) -> EncryptedKey:
    if not isinstance(obj, dict) or not isinstance(obj.get("key-id"), str):
        raise _fail(f"an encryption-keys entry needs a string 'key-id': {str(obj)[:200]}")
    raw = obj.get("encrypted-key-metadata")
    if not isinstance(raw, str):
        raise _fail(f"encryption key {obj['key-id']!r} is missing 'encrypted-key-metadata'")
    try:
        key_metadata = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise _fail(f"encryption key {obj['key-id']!r}: 'encrypted-key-metadata' is not base64") from None
    return EncryptedKey(obj["key-id"], key_metadata, obj.get("encrypted-by-id"),
                        _string_map(obj.get("properties"), "encryption key properties"))


def _encrypted_key_to_json(key: EncryptedKey) -> dict[str, Any]:
    out: dict[str, Any] = {
        "key-id": key.key_id,
        "encrypted-key-metadata": base64.b64encode(key.encrypted_key_metadata).decode("ascii"),
    }
    if key.encrypted_by_id is not None:
        out["encrypted-by-id"] = key.encrypted_by_id
    if key.properties:
        out["properties"] = dict(key.properties)
    return out


def metadata_from_dict(node: Any) -> TableMetadata:
    """Build table metadata from the parsed JSON object (see :func:`metadata_from_json`)."""
    if not isinstance(node, dict):
        raise _fail(f"Cannot parse metadata from a non-object: {str(node)[:200]}")
    version = node.get("format-version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise _fail(f"format-version must be an integer, got {version!r}")
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedFormatVersionError(
            f"Cannot read unsupported version {version}: this package reads format versions 1 to 3")

    uuid = node.get("table-uuid")
    if uuid is not None and not isinstance(uuid, str):
        raise _fail(f"table-uuid must be a string, got {uuid!r}")
    location = node.get("location")
    if not isinstance(location, str):
        raise _fail(f"location must exist in format v{version} and be a string, got {location!r}")
    last_seq = _int(node, "last-sequence-number", version) if version > 1 else 0
    last_column_id = _int(node, "last-column-id", version)

    if node.get("schemas") is not None:
        schemas = tuple(_schema(s) for s in _list(node, "schemas"))
        current_schema_id = _int(node, "current-schema-id", version)
        if not any(s.schema_id == current_schema_id for s in schemas):
            raise _fail(f"Cannot find schema with current-schema-id={current_schema_id} from schemas "
                        f"(known schema ids: {sorted(s.schema_id for s in schemas)})")
    else:
        if version != 1:
            raise _fail(f"schemas must exist in format v{version}")
        schema = _schema(_require(node, "schema", version))
        schemas, current_schema_id = (schema,), schema.schema_id

    if node.get("partition-specs") is not None:
        specs = tuple(spec_from_json(s) for s in _list(node, "partition-specs"))
        default_spec_id = _int(node, "default-spec-id", version)
    else:
        if version != 1:
            raise _fail(f"partition-specs must exist in format v{version}")
        specs, default_spec_id = (_v1_spec(_require(node, "partition-spec", version)),), 0

    last_partition_id = _opt_int(node, "last-partition-id")
    if last_partition_id is None:
        if version != 1:
            raise _fail(f"last-partition-id must exist in format v{version}")
        last_partition_id = max(
            (f.field_id for s in specs for f in s.fields), default=_UNPARTITIONED_LAST_ASSIGNED_ID)

    if node.get("sort-orders") is not None:
        orders = tuple(sort_order_from_json(o) for o in _list(node, "sort-orders"))
        default_order_id = _int(node, "default-sort-order-id", version)
    else:
        if version != 1:
            raise _fail(f"sort-orders must exist in format v{version}")
        orders, default_order_id = (UNSORTED_SORT_ORDER,), UNSORTED_SORT_ORDER.order_id

    current_snapshot_id = _opt_int(node, "current-snapshot-id")
    if current_snapshot_id == -1:
        current_snapshot_id = None
    last_updated_ms = _int(node, "last-updated-ms", version)

    refs_node = node.get("refs")
    if refs_node is not None:
        if not isinstance(refs_node, dict):
            raise _fail(f"Cannot parse refs from non-object: {str(refs_node)[:200]}")
        refs = {name: ref_from_json(r, name) for name, r in refs_node.items()}
    elif current_snapshot_id is not None:
        refs = {MAIN_BRANCH: SnapshotRef(current_snapshot_id, SnapshotRefType.BRANCH)}
    else:
        refs = {}

    next_row_id = None
    if version >= 3:
        next_row_id = _int(node, "next-row-id", version)

    return TableMetadata(
        format_version=version,
        table_uuid=uuid,
        location=location,
        last_sequence_number=last_seq,
        last_updated_ms=last_updated_ms,
        last_column_id=last_column_id,
        schemas=schemas,
        current_schema_id=current_schema_id,
        partition_specs=specs,
        default_spec_id=default_spec_id,
        last_partition_id=last_partition_id,
        sort_orders=orders,
        default_sort_order_id=default_order_id,
        properties=_string_map(node.get("properties"), "properties"),
        current_snapshot_id=current_snapshot_id,
        snapshots=tuple(snapshot_from_json(s) for s in _list(node, "snapshots")),
        refs=refs,
        snapshot_log=tuple(snapshot_log_entry_from_json(e) for e in _list(node, "snapshot-log")),
        metadata_log=tuple(metadata_log_entry_from_json(e) for e in _list(node, "metadata-log")),
        statistics=tuple(statistics_file_from_json(e) for e in _list(node, "statistics")),
        partition_statistics=tuple(
            partition_statistics_file_from_json(e) for e in _list(node, "partition-statistics")),
        next_row_id=next_row_id,
        encryption_keys=tuple(_encrypted_key_from_json(k) for k in _list(node, "encryption-keys")),
        extra={k: v for k, v in node.items() if k not in _KNOWN_KEYS},
    )


def json_nesting_depth(data: bytes | str) -> int:
    """The deepest nesting of objects and arrays in a JSON text (strings skipped), counted
    without parsing it: for the message of a document too deep to parse."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def metadata_from_json(data: bytes | str, location: str | None = None) -> TableMetadata:
    """Parse a metadata JSON document (already decompressed).

    ``location`` names the file in errors: every problem raises :class:`InvalidMetadataError`
    (:class:`UnsupportedFormatVersionError` for a version outside 1-3) whose ``location`` is set.
    """
    try:
        node = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
        raise InvalidMetadataError(
            f"table metadata is not valid JSON (truncated or corrupt file?): {e}", location=location) from None
    except RecursionError:
        raise InvalidMetadataError(
            f"table metadata nests JSON {json_nesting_depth(data)} levels deep, beyond what can be read "
            f"(Iceberg Java's reader stops at {MAX_JSON_NESTING_DEPTH}; a schema may nest types at most "
            f"{MAX_NESTING_DEPTH} levels deep)", location=location) from None
    try:
        return metadata_from_dict(node)
    except InvalidMetadataError as e:
        if location is None or e.location is not None:
            raise
        # the same error type again, now naming the file, so callers see which file is bad
        raise type(e)(str(e), location=location) from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        # a malformed nested object that a part parser did not anticipate
        raise InvalidMetadataError(f"cannot parse table metadata: {type(e).__name__}: {e}",
                                   location=location) from None


# ---------------------------------------------------------------------- writing
class _Items:
    """A JSON array whose elements are converted one at a time as the file is written: a long
    history (1,000 snapshots with their summaries) never exists as one tree of dicts."""

    __slots__ = ("convert", "items")

    def __init__(self, convert: Callable[[Any], Any], items: Iterable[Any]) -> None:
        self.convert = convert
        self.items = items


def metadata_to_dict(md: TableMetadata) -> dict[str, Any]:
    """The JSON object of table metadata, with Java 1.10's keys and key order."""
    return {k: [val.convert(x) for x in val.items] if isinstance(val, _Items) else val
            for k, val in _metadata_object(md).items()}


def _metadata_object(md: TableMetadata) -> dict[str, Any]:
    """:func:`metadata_to_dict` with the history arrays left as :class:`_Items`."""
    v = md.format_version
    out: dict[str, Any] = {"format-version": v}
    if md.table_uuid is not None:
        out["table-uuid"] = md.table_uuid
    out["location"] = md.location
    if v > 1:
        out["last-sequence-number"] = md.last_sequence_number
    out["last-updated-ms"] = md.last_updated_ms
    out["last-column-id"] = md.last_column_id
    if v == 1:
        out["schema"] = schema_to_json(md.schema())
    out["current-schema-id"] = md.current_schema_id
    out["schemas"] = [schema_to_json(s) for s in md.schemas]
    if v == 1:
        out["partition-spec"] = spec_to_json(md.spec())["fields"]
    out["default-spec-id"] = md.default_spec_id
    out["partition-specs"] = [spec_to_json(s) for s in md.partition_specs]
    out["last-partition-id"] = md.last_partition_id
    out["default-sort-order-id"] = md.default_sort_order_id
    out["sort-orders"] = [sort_order_to_json(o) for o in md.sort_orders]
    out["properties"] = dict(md.properties)
    if md.current_snapshot_id is not None:
        out["current-snapshot-id"] = md.current_snapshot_id
    else:
        out["current-snapshot-id"] = None if v >= 3 else -1
    if v >= 3:
        out["next-row-id"] = md.next_row_id
        if md.encryption_keys:
            out["encryption-keys"] = [_encrypted_key_to_json(k) for k in md.encryption_keys]
    out["refs"] = {name: ref_to_json(r) for name, r in md.refs.items()}
    out["snapshots"] = _Items(lambda s: snapshot_to_json(s, v), md.snapshots)
    out["statistics"] = [statistics_file_to_json(s) for s in md.statistics]
    out["partition-statistics"] = [partition_statistics_file_to_json(s) for s in md.partition_statistics]
    out["snapshot-log"] = _Items(snapshot_log_entry_to_json, md.snapshot_log)
    out["metadata-log"] = _Items(metadata_log_entry_to_json, md.metadata_log)
    for k, val in md.extra.items():
        out.setdefault(k, val)
    return out


def metadata_json_bytes(md: TableMetadata) -> bytes:
    """``metadata_to_json(md).encode("utf-8")``, written an entry of the history at a time: the
    driver holds the file's bytes and one snapshot's dict, not a tree of the whole history."""
    encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
    parts: list[bytes] = []
    for i, (key, val) in enumerate(_metadata_object(md).items()):
        parts.append(f"{',' if i else '{'}{encode(key)}:".encode())
        if isinstance(val, _Items):
            parts.append(b"[" + b",".join(encode(val.convert(x)).encode() for x in val.items) + b"]")
        else:
            parts.append(encode(val).encode())
    parts.append(b"}")  # format-version always opens the object
    return b"".join(parts)


def metadata_to_json(md: TableMetadata, *, indent: int | None = None) -> str:
    """The metadata file text (compact unless ``indent`` is given)."""
    if indent is None:
        return metadata_json_bytes(md).decode("utf-8")
    return json.dumps(metadata_to_dict(md), indent=indent, ensure_ascii=False)


# ---------------------------------------------------------------------- files
def is_gzip_metadata_name(location: str) -> bool:
    """True for ``*.gz.metadata.json`` and the older ``*.metadata.json.gz`` names."""
    return location.endswith(".gz.metadata.json") or location.endswith(".metadata.json.gz")


def read_table_metadata(io: FileAccess, location: str) -> TableMetadata:
    """Read and parse the metadata file at ``location`` through ``io`` (anything with
    ``new_input(path).read() -> bytes``).  gzip is recognised by name and by its magic bytes,
    since JSON text can never start with them."""
    data = io.new_input(location).read()
    if is_gzip_metadata_name(location) or data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise InvalidMetadataError(f"gzip-compressed table metadata is corrupt or truncated: {e}",
                                       location=location) from None
    return metadata_from_json(data, location)


def write_table_metadata(io: FileAccess, location: str, md: TableMetadata, *, overwrite: bool = False) -> None:
    """Write ``md`` to ``location`` through ``io`` (``write(path, data, overwrite)``), gzip-
    compressed when the name asks for it.  Without ``overwrite`` the write fails if the file
    exists, which is what makes a file-system commit atomic."""
    io.write(location, metadata_file_data(md, location), overwrite=overwrite)


def metadata_file_data(md: TableMetadata, location: str) -> bytes:
    """The bytes of the metadata file at ``location``: compact JSON, gzip-compressed when the name
    asks for it (``mtime=0`` keeps them reproducible, so a retried write can recognise its own file)."""
    data = metadata_json_bytes(md)
    return gzip.compress(data, mtime=0) if is_gzip_metadata_name(location) else data
