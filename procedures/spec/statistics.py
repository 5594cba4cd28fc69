"""Table statistics files (spec "Table Statistics" and "Partition Statistics"): the
``statistics`` and ``partition-statistics`` entries of table metadata and their JSON form.

A :class:`StatisticsFile` points at a Puffin file of blobs (for example theta sketches giving
``ndv``) computed for one snapshot; a :class:`PartitionStatisticsFile` points at a per-partition
counts file.  The codecs follow Java 1.10's ``StatisticsFileParser`` and
``PartitionStatisticsFileParser``: blob ``properties`` are written only when non-empty, and the
optional ``key-metadata`` (base64) only when present.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Mapping

from procedures.errors import InvalidMetadataError

__all__ = [
    "BlobMetadata",
    "StatisticsFile",
    "PartitionStatisticsFile",
    "statistics_file_to_json",
    "statistics_file_from_json",
    "partition_statistics_file_to_json",
    "partition_statistics_file_from_json",
]


@dataclass(frozen=True, slots=True)
class BlobMetadata:
    """One blob of a Puffin statistics file: its type, the snapshot it was computed from, the
    field ids it covers and free-form properties (``ndv`` for theta sketches)."""

    type: str
    snapshot_id: int
    sequence_number: int
    fields: tuple[int, ...]
    properties: dict[str, str] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.type, self.snapshot_id, self.fields))


@dataclass(frozen=True, slots=True)
class StatisticsFile:
    """A Puffin table-statistics file registered for ``snapshot_id``.

    ``file_footer_size_in_bytes`` is the whole Puffin footer (start magic, payload and the
    12 trailing bytes).  ``key_metadata`` is the raw (decoded) key metadata, if any.
    """

    snapshot_id: int
    statistics_path: str
    file_size_in_bytes: int
    file_footer_size_in_bytes: int
    blob_metadata: tuple[BlobMetadata, ...] = ()
    key_metadata: bytes | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "blob_metadata", tuple(self.blob_metadata))


@dataclass(frozen=True, slots=True)
class PartitionStatisticsFile:
    """A partition-statistics file registered for ``snapshot_id`` (at most one per snapshot)."""

    snapshot_id: int
    statistics_path: str
    file_size_in_bytes: int


def _req(obj: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    value = obj.get(key)
    if value is None:
        raise InvalidMetadataError(f"{what} is missing required field {key!r}")
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InvalidMetadataError(f"{what}: {key!r} must be {kind.__name__}, got {value!r}")
    return value


def _blob_to_json(blob: BlobMetadata) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": blob.type,
        "snapshot-id": blob.snapshot_id,
        "sequence-number": blob.sequence_number,
        "fields": list(blob.fields),
    }
    if blob.properties:
        out["properties"] = dict(blob.properties)
    return out


def _blob_from_json(obj: Any, what: str) -> BlobMetadata:
    if not isinstance(obj, dict):
        raise InvalidMetadataError(f"{what}: blob metadata must be an object, got {obj!r}")
    fields = _req(obj, "fields", list, f"{what} blob")
    if not all(isinstance(f, int) and not isinstance(f, bool) for f in fields):
        raise InvalidMetadataError(f"{what} blob: 'fields' must be a list of field ids, got {fields!r}")
    props = obj.get("properties") or {}
    if not isinstance(props, dict):
        raise InvalidMetadataError(f"{what} blob: 'properties' must be an object, got {props!r}")
    return BlobMetadata(
        _req(obj, "type", str, f"{what} blob"),
        _req(obj, "snapshot-id", int, f"{what} blob"),
        _req(obj, "sequence-number", int, f"{what} blob"),
        tuple(fields),
        {str(k): str(v) for k, v in props.items()},
    )


def statistics_file_to_json(stats: StatisticsFile) -> dict[str, Any]:
    """The ``statistics`` entry for a statistics file, in Java's key order."""
    out: dict[str, Any] = {
        "snapshot-id": stats.snapshot_id,
        "statistics-path": stats.statistics_path,
        "file-size-in-bytes": stats.file_size_in_bytes,
        "file-footer-size-in-bytes": stats.file_footer_size_in_bytes,
    }
    if stats.key_metadata is not None:
        out["key-metadata"] = base64.b64encode(stats.key_metadata).decode("ascii")
    out["blob-metadata"] = [_blob_to_json(b) for b in stats.blob_metadata]
    return out


def statistics_file_from_json(obj: Any) -> StatisticsFile:
    """Parse a ``statistics`` entry; raises InvalidMetadataError naming the bad field."""
    if not isinstance(obj, dict):
        raise InvalidMetadataError(f"a statistics entry must be an object, got {str(obj)[:200]}")
    snapshot_id = _req(obj, "snapshot-id", int, "statistics entry")
    what = f"statistics file of snapshot {snapshot_id}"
    key_metadata = obj.get("key-metadata")
    if key_metadata is not None:
        try:
            key_metadata = base64.b64decode(key_metadata, validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise InvalidMetadataError(f"{what}: 'key-metadata' is not valid base64: {key_metadata!r}") from None
    blobs = _req(obj, "blob-metadata", list, what)
    return StatisticsFile(
        snapshot_id,
        _req(obj, "statistics-path", str, what),
        _req(obj, "file-size-in-bytes", int, what),
        _req(obj, "file-footer-size-in-bytes", int, what),
        tuple(_blob_from_json(b, what) for b in blobs),
        key_metadata,
    )


def partition_statistics_file_to_json(stats: PartitionStatisticsFile) -> dict[str, Any]:
    """The ``partition-statistics`` entry for a partition-statistics file."""
    return {
        "snapshot-id": stats.snapshot_id,
        "statistics-path": stats.statistics_path,
        "file-size-in-bytes": stats.file_size_in_bytes,
    }


def partition_statistics_file_from_json(obj: Any) -> PartitionStatisticsFile:
    """Parse a ``partition-statistics`` entry; raises InvalidMetadataError naming the bad field."""
    if not isinstance(obj, dict):
        raise InvalidMetadataError(f"a partition-statistics entry must be an object, got {str(obj)[:200]}")
    snapshot_id = _req(obj, "snapshot-id", int, "partition-statistics entry")
    what = f"partition statistics file of snapshot {snapshot_id}"
    return PartitionStatisticsFile(
        snapshot_id,
        _req(obj, "statistics-path", str, what),
        _req(obj, "file-size-in-bytes", int, what),
    )
