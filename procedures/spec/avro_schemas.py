"""Avro schemas of manifest lists and manifests (spec "Manifests", "Manifest Lists", and the Avro
type mapping of Appendix A).

The manifest structs are declared once as Iceberg :class:`StructType` values per format version and
translated to Avro the way Java's ``TypeToSchema`` does, so the JSON we emit is the schema Java
writes: record names ``manifest_file`` / ``manifest_entry`` / ``r<field id>``, map arrays
``k<key id>_v<value id>``, ``field-id`` and ``element-id`` properties, optional fields as
``["null", T]`` with ``"default": null``, named fixed types defined once per schema and names that
are not valid Avro names rewritten with ``iceberg-field-name`` keeping the original.
"""

from __future__ import annotations

import copy
import functools
import json
from typing import Any

from procedures.errors import InvalidMetadataError, UnsupportedFormatVersionError
from procedures.spec.types import (
    BINARY,
    INT,
    LONG,
    STRING,
    BOOLEAN,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    UnknownType,
    TimeType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    UUIDType,
    decimal_required_bytes,
)

__all__ = [
    "SUPPORTED_FORMAT_VERSIONS",
    "check_format_version",
    "manifest_list_struct",
    "manifest_entry_struct",
    "data_file_struct",
    "manifest_list_avro_schema",
    "manifest_entry_avro_schema",
    "struct_to_avro",
    "sanitize_name",
    "strip_logical_types",
    "without_logical_types",
    "container_record_count",
    "encode_long",
    "decode_long",
]

SUPPORTED_FORMAT_VERSIONS = (1, 2, 3)


def check_format_version(format_version: int) -> None:
    """Raise :class:`UnsupportedFormatVersionError` for a format version manifests cannot use."""
    if format_version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedFormatVersionError(
            f"manifests of format version {format_version} are not supported; use one of {SUPPORTED_FORMAT_VERSIONS}"
        )


def _req(fid: int, name: str, t: IcebergType, doc: str | None = None) -> NestedField:
    return NestedField(fid, name, t, True, doc)


def _opt(fid: int, name: str, t: IcebergType, doc: str | None = None) -> NestedField:
    return NestedField(fid, name, t, False, doc)


# ------------------------------------------------------------------ manifest list (manifest_file)
_FIELD_SUMMARY = StructType((
    _req(509, "contains_null", BOOLEAN, "True if any file has a null partition value"),
    _opt(518, "contains_nan", BOOLEAN, "True if any file has a nan partition value"),
    _opt(510, "lower_bound", BINARY, "Partition lower bound for all files"),
    _opt(511, "upper_bound", BINARY, "Partition upper bound for all files"),
))

_ML = {
    "manifest_path": _req(500, "manifest_path", STRING, "Location URI with FS scheme"),
    "manifest_length": _req(501, "manifest_length", LONG, "Total file size in bytes"),
    "partition_spec_id": _req(502, "partition_spec_id", INT, "Spec ID used to write"),
    "content": _req(517, "content", INT, "Contents of the manifest: 0=data, 1=deletes"),
    "sequence_number": _req(515, "sequence_number", LONG, "Sequence number when the manifest was added"),
    "min_sequence_number": _req(516, "min_sequence_number", LONG, "Lowest sequence number in the manifest"),
    "added_snapshot_id": _req(503, "added_snapshot_id", LONG, "Snapshot ID that added the manifest"),
    "partitions": _opt(507, "partitions", ListType(508, _FIELD_SUMMARY, True), "Summary for each partition"),
    "key_metadata": _opt(519, "key_metadata", BINARY, "Encryption key metadata blob"),
    "first_row_id": _opt(520, "first_row_id", LONG, "Starting row ID to assign to new rows in ADDED data files"),
}
_ML_COUNTS = (
    (504, "added_files_count", INT, "Added entry count"),
    (505, "existing_files_count", INT, "Existing entry count"),
    (506, "deleted_files_count", INT, "Deleted entry count"),
    (512, "added_rows_count", LONG, "Added rows count"),
    (513, "existing_rows_count", LONG, "Existing rows count"),
    (514, "deleted_rows_count", LONG, "Deleted rows count"),
)


def manifest_list_struct(format_version: int) -> StructType:
    """The Iceberg struct of a manifest-list row (``manifest_file``) in Java's field order."""
    check_format_version(format_version)
    f = _ML
    if format_version == 1:
        counts = [_opt(*c) for c in _ML_COUNTS]
        return StructType((
            f["manifest_path"], f["manifest_length"], f["partition_spec_id"], f["added_snapshot_id"],
            *counts[:3], f["partitions"], *counts[3:], f["key_metadata"],
        ))
    counts = [_req(*c) for c in _ML_COUNTS]
    fields = [
        f["manifest_path"], f["manifest_length"], f["partition_spec_id"], f["content"],
        f["sequence_number"], f["min_sequence_number"], f["added_snapshot_id"],
        *counts, f["partitions"], f["key_metadata"],
    ]
    if format_version >= 3:
        fields.append(f["first_row_id"])
    return StructType(tuple(fields))


# ---------------------------------------------------------------------- manifest (manifest_entry)
def _metrics_map(fid: int, name: str, kid: int, vid: int, vtype: IcebergType, doc: str) -> NestedField:
    return _opt(fid, name, MapType(kid, INT, vid, vtype, True), doc)


def data_file_struct(format_version: int, partition_type: StructType) -> StructType:
    """The ``data_file`` struct (Avro record ``r2``) for a format version and a partition type.

    Every partition field is made optional, as Java writes it.
    """
    check_format_version(format_version)
    partition = StructType(tuple(
        NestedField(p.field_id, p.name, p.field_type, False, None) for p in partition_type.fields
    ))
    v1 = format_version == 1
    fields: list[NestedField] = []
    if not v1:
        fields.append(_req(134, "content", INT, "Contents of the file: 0=data, 1=position deletes, 2=equality deletes"))
    fields += [
        _req(100, "file_path", STRING, "Location URI with FS scheme"),
        _req(101, "file_format", STRING, "File format name: avro, orc, or parquet"),
        _req(102, "partition", partition, None if v1 else "Partition data tuple, schema based on the partition spec"),
        _req(103, "record_count", LONG, "Number of records in the file"),
        _req(104, "file_size_in_bytes", LONG, "Total file size in bytes"),
    ]
    if v1:
        fields.append(_req(105, "block_size_in_bytes", LONG))
    fields += [
        _metrics_map(108, "column_sizes", 117, 118, LONG, "Map of column id to total size on disk"),
        _metrics_map(109, "value_counts", 119, 120, LONG, "Map of column id to total count, including null and NaN"),
        _metrics_map(110, "null_value_counts", 121, 122, LONG, "Map of column id to null value count"),
        _metrics_map(137, "nan_value_counts", 138, 139, LONG, "Map of column id to number of NaN values in the column"),
        _metrics_map(125, "lower_bounds", 126, 127, BINARY, "Map of column id to lower bound"),
        _metrics_map(128, "upper_bounds", 129, 130, BINARY, "Map of column id to upper bound"),
        _opt(131, "key_metadata", BINARY, "Encryption key metadata blob"),
        _opt(132, "split_offsets", ListType(133, LONG, True), "Splittable offsets"),
    ]
    if not v1:
        fields.append(_opt(135, "equality_ids", ListType(136, INT, True), "Equality comparison field IDs"))
    fields.append(_opt(140, "sort_order_id", INT, "Sort order ID"))
    if format_version >= 3:
        fields.append(_opt(142, "first_row_id", LONG, "The first row ID assigned to the first row in the data file"))
    if not v1:
        fields.append(_opt(
            143, "referenced_data_file", STRING,
            "Fully qualified location (URI with FS scheme) of a data file that all deletes reference",
        ))
    if format_version >= 3:
        fields += [
            _opt(144, "content_offset", LONG, "The offset in the file where the content starts"),
            _opt(145, "content_size_in_bytes", LONG, "The length of referenced content stored in the file"),
        ]
    return StructType(tuple(fields))


def manifest_entry_struct(format_version: int, partition_type: StructType) -> StructType:
    """The Iceberg struct of a manifest entry in Java's field order."""
    data_file = _req(2, "data_file", data_file_struct(format_version, partition_type))
    if format_version == 1:
        return StructType((_req(0, "status", INT), _opt(1, "snapshot_id", LONG), data_file))
    return StructType((
        _req(0, "status", INT),
        _opt(1, "snapshot_id", LONG),
        _opt(3, "sequence_number", LONG),
        _opt(4, "file_sequence_number", LONG),
        data_file,
    ))


# ------------------------------------------------------------------------- Iceberg type -> Avro
def sanitize_name(name: str) -> str:
    """An Avro-valid name for ``name``: invalid characters become ``_x<HEX>`` (per UTF-16 unit, as
    Java iterates chars) and a leading digit gets a ``_`` prefix."""
    if _valid_name(name):
        return name
    units = name.encode("utf-16-be")
    chars = [int.from_bytes(units[i:i + 2], "big") for i in range(0, len(units), 2)]
    out = []
    for i, c in enumerate(chars):
        ch = chr(c) if c < 0xD800 or c > 0xDFFF else ""
        ok = ch.isascii() and (ch.isalpha() or ch == "_" or (i > 0 and ch.isdigit()))
        if ok:
            out.append(ch)
        elif i == 0 and ch.isascii() and ch.isdigit():
            out.append("_" + ch)
        else:
            out.append(f"_x{c:X}")
    return "".join(out)


def _valid_name(name: str) -> bool:
    if not name or not name.isascii():
        return False
    first = name[0]
    if not (first.isalpha() or first == "_"):
        return False
    return all(c.isalnum() or c == "_" for c in name[1:])


class _Converter:
    """Turns Iceberg types into Avro JSON, tracking named types so each is defined once."""

    def __init__(self) -> None:
        self.defined: set[str] = set()

    def named(self, name: str, body: dict[str, Any]) -> Any:
        if name in self.defined:
            return name
        self.defined.add(name)
        return body

    def struct(self, s: StructType, record_name: str) -> dict[str, Any]:
        fields = []
        for f in s.fields:
            avro_type = self.type(f.field_type, f.field_id)
            out: dict[str, Any] = {"name": sanitize_name(f.name)}
            if f.required or avro_type == "null":
                # Avro's null is optional already (and ["null", "null"] is no valid union)
                out["type"] = avro_type
            else:
                out["type"] = ["null", avro_type]
            if f.doc is not None:
                out["doc"] = f.doc
            if not f.required:
                out["default"] = None
            out["field-id"] = f.field_id
            if out["name"] != f.name:
                out["iceberg-field-name"] = f.name
            fields.append(out)
        return self.named(record_name, {"type": "record", "name": record_name, "fields": fields})

    def type(self, t: IcebergType, field_id: int) -> Any:
        if isinstance(t, StructType):
            return self.struct(t, f"r{field_id}")
        if isinstance(t, ListType):
            item = self.type(t.element_type, t.element_id)
            return {
                "type": "array",
                "items": item if t.element_required else ["null", item],
                "element-id": t.element_id,
            }
        if isinstance(t, MapType):
            value = self.type(t.value_type, t.value_id)
            if not t.value_required:
                value = ["null", value]
            if isinstance(t.key_type, StringType):
                return {"type": "map", "values": value, "key-id": t.key_id, "value-id": t.value_id}
            name = f"k{t.key_id}_v{t.value_id}"
            record = self.named(name, {
                "type": "record",
                "name": name,
                "fields": [
                    {"name": "key", "type": self.type(t.key_type, t.key_id), "field-id": t.key_id},
                    {"name": "value", "type": value, "field-id": t.value_id},
                ],
            })
            return {"type": "array", "items": record, "logicalType": "map"}
        return self.primitive(t)

    def primitive(self, t: IcebergType) -> Any:
        simple = _SIMPLE_AVRO.get(type(t))
        if simple is not None:
            return simple
        if isinstance(t, (TimestampType, TimestamptzType)):
            return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": isinstance(t, TimestamptzType)}
        if isinstance(t, (TimestampNanoType, TimestamptzNanoType)):
            return {"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": isinstance(t, TimestamptzNanoType)}
        if isinstance(t, UUIDType):
            return self.named("uuid_fixed", {"type": "fixed", "name": "uuid_fixed", "size": 16, "logicalType": "uuid"})
        if isinstance(t, FixedType):
            name = f"fixed_{t.length}"
            return self.named(name, {"type": "fixed", "name": name, "size": t.length})
        if isinstance(t, DecimalType):
            name = f"decimal_{t.precision}_{t.scale}"
            return self.named(name, {
                "type": "fixed", "name": name, "size": decimal_required_bytes(t.precision),
                "logicalType": "decimal", "precision": t.precision, "scale": t.scale,
            })
        raise InvalidMetadataError(f"type {t} cannot be stored in a manifest's Avro schema")


_SIMPLE_AVRO: dict[type, Any] = {
    BooleanType: "boolean",
    IntegerType: "int",
    LongType: "long",
    FloatType: "float",
    DoubleType: "double",
    StringType: "string",
    BinaryType: "bytes",
    DateType: {"type": "int", "logicalType": "date"},
    TimeType: {"type": "long", "logicalType": "time-micros"},
    # a partition field of a dropped column (a replaced v1 table's void field): its values are null
    UnknownType: "null",
}


def struct_to_avro(struct: StructType, record_name: str) -> dict[str, Any]:
    """The Avro record schema (JSON object) of an Iceberg struct, named ``record_name``."""
    return _Converter().struct(struct, record_name)


def manifest_list_avro_schema(format_version: int) -> dict[str, Any]:
    """The Avro schema Java writes for manifest lists of this format version."""
    return struct_to_avro(manifest_list_struct(format_version), "manifest_file")


def manifest_entry_avro_schema(format_version: int, partition_type: StructType) -> dict[str, Any]:
    """The Avro schema Java writes for manifests of this format version and partition type."""
    return struct_to_avro(manifest_entry_struct(format_version, partition_type), "manifest_entry")


def strip_logical_types(schema: Any) -> Any:
    """A deep copy of an Avro schema without ``logicalType`` on primitives and fixed types.

    Reading with it makes fastavro return raw ints and bytes, which are already our value
    representation (dates, times, timestamps) or cheap to convert (decimals, uuids), instead of
    ``datetime`` objects that lose nanoseconds.
    """
    schema = copy.deepcopy(schema)
    _strip(schema)
    return schema


def _strip(node: Any) -> None:
    if isinstance(node, list):
        for n in node:
            _strip(n)
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind in ("int", "long", "fixed", "bytes", "string") and "logicalType" in node:
            del node["logicalType"]
        for key in ("type", "items", "values", "fields"):
            if key in node and not isinstance(node[key], str):
                _strip(node[key])


def without_logical_types(data: bytes) -> tuple[bytes, Any]:
    """An Avro container file whose header schema has no logical types, plus the original schema.

    fastavro converts logical types by the *writer* schema (a reader schema does not stop it), so
    the header is rewritten instead; the blocks are untouched because the encodings are the same.
    """
    meta, sync, end = _parse_header(data)
    meta["avro.schema"], schema = _stripped_schema_text(meta["avro.schema"])
    return _encode_header(meta, sync) + data[end:], schema


@functools.lru_cache(maxsize=64)
def _stripped_schema_text(text: bytes) -> tuple[bytes, Any]:
    # the manifests of a table share a handful of schemas: strip each once (callers must not change
    # the schema returned, it is shared)
    schema = json.loads(text)
    return json.dumps(strip_logical_types(schema)).encode(), schema


def container_record_count(data: bytes) -> int:
    """The number of records in an Avro container file, summed from its block headers without
    decoding any record (as Java's ``Avro.rowCount``)."""
    _, _, pos = _parse_header(data)
    total = 0
    while pos < len(data):
        count, pos = _read_long(data, pos)
        size, pos = _read_long(data, pos)
        if count < 0 or size < 0 or pos + size + 16 > len(data):
            raise EOFError("truncated Avro block")
        total += count
        pos += size + 16
    return total


def decode_long(data: bytes, pos: int) -> tuple[int, int]:
    """The zig-zag varint ``long`` at ``data[pos:]`` and the position after it."""
    return _read_long(data, pos)


def encode_long(n: int) -> bytes:
    """``n`` as Avro encodes a ``long`` (zig-zag varint)."""
    return _write_long(n)


def _read_long(data: bytes, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _write_long(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _parse_header(data: bytes) -> tuple[dict[str, bytes], bytes, int]:
    if data[:4] != b"Obj\x01":
        raise ValueError("missing Avro magic 'Obj\\x01'")
    meta: dict[str, bytes] = {}
    pos = 4
    while True:
        count, pos = _read_long(data, pos)
        if count == 0:
            break
        if count < 0:
            count = -count
            _, pos = _read_long(data, pos)  # block byte size
        for _ in range(count):
            n, pos = _read_long(data, pos)
            key = data[pos:pos + n].decode()
            pos += n
            n, pos = _read_long(data, pos)
            meta[key] = bytes(data[pos:pos + n])
            pos += n
    if pos + 16 > len(data):
        raise EOFError("truncated Avro header")
    return meta, bytes(data[pos:pos + 16]), pos + 16


def _encode_header(meta: dict[str, bytes], sync: bytes) -> bytes:
    out = [b"Obj\x01", _write_long(len(meta))]
    for k, v in meta.items():
        kb = k.encode()
        out += [_write_long(len(kb)), kb, _write_long(len(v)), v]
    out += [b"\x00", sync]
    return b"".join(out)
