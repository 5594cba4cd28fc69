"""Puffin files (the Puffin spec; on-disk notes section 8.4): blobs followed by a JSON footer.

``File := Magic Blob* Footer`` and ``Footer := Magic Payload PayloadSize(4 bytes LE) Flags(4 bytes)
Magic`` with magic ``PFA1``.  We always write an uncompressed footer (Java 1.10 and PyIceberg cannot
read LZ4 footers) and uncompressed blobs unless asked; reading decompresses ``zstd`` and ``lz4``
blobs when the ``zstandard`` / ``lz4`` module is installed.  Deletion-vector blobs (``deletion-vector-v1``)
are written by :meth:`PuffinWriter.add_deletion_vector` with the metadata Java and PyIceberg expect.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any, Iterable

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.deletion_vector import DV_BLOB_TYPE, deserialize_dv, position_bitmap, serialize_dv
from procedures.spec.file_access import FileAccess

__all__ = [
    "MAGIC",
    "FOOTER_STRUCT_LENGTH",
    "ROW_POSITION_FIELD_ID",
    "BlobMetadata",
    "PuffinFile",
    "PuffinWriter",
    "read_puffin",
    "parse_footer",
]

MAGIC = b"PFA1"
#: PayloadSize + Flags + Magic at the very end of the file
FOOTER_STRUCT_LENGTH = 12
#: Java lists the ``_pos`` metadata column as the input field of a DV blob
ROW_POSITION_FIELD_ID = 2147483645
_FLAG_FOOTER_COMPRESSED = 1


@dataclass(frozen=True, slots=True)
class BlobMetadata:
    """One entry of the footer's ``blobs`` list."""

    type: str
    fields: tuple[int, ...]
    snapshot_id: int
    sequence_number: int
    offset: int
    length: int
    compression_codec: str | None = None
    properties: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The footer JSON object (Java's key order)."""
        out: dict[str, Any] = {
            "type": self.type,
            "fields": list(self.fields),
            "snapshot-id": self.snapshot_id,
            "sequence-number": self.sequence_number,
            "offset": self.offset,
            "length": self.length,
        }
        if self.compression_codec is not None:
            out["compression-codec"] = self.compression_codec
        if self.properties:
            out["properties"] = dict(self.properties)
        return out

    @staticmethod
    def from_json(obj: dict[str, Any], location: str | None = None) -> "BlobMetadata":
        """Parse a footer blob object; raises InvalidMetadataError naming the missing key."""
        try:
            return BlobMetadata(
                str(obj["type"]),
                tuple(int(f) for f in obj["fields"]),
                int(obj["snapshot-id"]),
                int(obj["sequence-number"]),
                int(obj["offset"]),
                int(obj["length"]),
                obj.get("compression-codec"),
                dict(obj.get("properties") or {}),
            )
        except KeyError as e:
            raise InvalidMetadataError(f"Puffin blob metadata lacks {e.args[0]!r}: {obj}", location=location) from None
        except (TypeError, ValueError) as e:
            raise InvalidMetadataError(f"malformed Puffin blob metadata {obj}: {e}", location=location) from None


def parse_footer(data: bytes, location: str | None = None) -> tuple[list[BlobMetadata], dict[str, str], int]:
    """Parse the footer of a whole Puffin file: ``(blobs, properties, footer size in bytes)``."""
    n = len(data)
    if n < len(MAGIC) + len(MAGIC) + FOOTER_STRUCT_LENGTH:
        raise InvalidMetadataError(f"Puffin file is truncated: {n} bytes", location=location)
    if data[:4] != MAGIC:
        raise InvalidMetadataError(f"not a Puffin file: starts with {data[:4]!r}, expected {MAGIC!r}", location=location)
    if data[-4:] != MAGIC:
        raise InvalidMetadataError(f"Puffin file is truncated or corrupt: ends with {data[-4:]!r}, expected {MAGIC!r}", location=location)
    payload_size, flags = struct.unpack("<iI", data[n - FOOTER_STRUCT_LENGTH:n - 4])
    footer_size = 4 + payload_size + FOOTER_STRUCT_LENGTH
    start = n - footer_size
    if payload_size < 0 or start < 4:
        raise InvalidMetadataError(f"invalid Puffin footer size {payload_size} for a {n}-byte file", location=location)
    if data[start:start + 4] != MAGIC:
        raise InvalidMetadataError(f"invalid Puffin file: expected footer magic at offset {start}", location=location)
    payload = bytes(data[start + 4:start + 4 + payload_size])
    if flags & _FLAG_FOOTER_COMPRESSED:
        payload = _decompress("lz4", payload, location)
    try:
        obj = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise InvalidMetadataError(f"Puffin footer is not valid JSON: {e}", location=location) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("blobs"), list):
        raise InvalidMetadataError("Puffin footer has no 'blobs' list", location=location)
    blobs = [BlobMetadata.from_json(b, location) for b in obj["blobs"]]
    for b in blobs:
        if b.offset < 4 or b.offset + b.length > start:
            raise InvalidMetadataError(
                f"Puffin blob {b.type} at offset {b.offset} with length {b.length} lies outside the blob area 4..{start}",
                location=location,
            )
    return blobs, dict(obj.get("properties") or {}), footer_size


def _decompress(codec: str, data: bytes, location: str | None) -> bytes:
    if codec == "zstd":
        try:
            import zstandard  # noqa: PLC0415 - optional
        except ImportError:
            raise InvalidMetadataError("blob is zstd-compressed; install 'zstandard' to read it", location=location) from None
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    if codec == "lz4":
        try:
            import lz4.frame  # noqa: PLC0415 - optional
        except ImportError:
            raise InvalidMetadataError("data is lz4-compressed; install 'lz4' to read it", location=location) from None
        return lz4.frame.decompress(data)
    raise InvalidMetadataError(f"unknown Puffin compression codec {codec!r}", location=location)


def _compress(codec: str, data: bytes) -> bytes:
    if codec == "zstd":
        try:
            import zstandard  # noqa: PLC0415 - optional
        except ImportError:
            raise ValidationError("writing zstd-compressed Puffin blobs needs 'zstandard': pip install zstandard") from None
        return zstandard.ZstdCompressor().compress(data)
    if codec == "lz4":
        try:
            import lz4.frame  # noqa: PLC0415 - optional
        except ImportError:
            raise ValidationError("writing lz4-compressed Puffin blobs needs 'lz4': pip install lz4") from None
        return lz4.frame.compress(data)
    raise ValidationError(f"unknown Puffin compression codec {codec!r}; use zstd or lz4")


class PuffinFile:
    """A Puffin file held in memory: footer metadata plus blob access."""

    def __init__(self, data: bytes, location: str | None = None) -> None:
        self.data = data
        self.location = location
        self.blobs, self.properties, self.footer_size = parse_footer(data, location)

    def read_blob(self, blob: BlobMetadata) -> bytes:
        """The (decompressed) bytes of one blob."""
        raw = bytes(self.data[blob.offset:blob.offset + blob.length])
        if blob.compression_codec:
            return _decompress(blob.compression_codec, raw, self.location)
        return raw

    def deletion_vectors(self) -> dict[str, list[int]]:
        """Deleted positions of every DV blob, keyed by its ``referenced-data-file`` property."""
        out = {}
        for b in self.blobs:
            if b.type == DV_BLOB_TYPE:
                ref = b.properties.get("referenced-data-file")
                if ref is None:
                    raise InvalidMetadataError("deletion vector blob lacks 'referenced-data-file'", location=self.location)
                out[ref] = deserialize_dv(self.read_blob(b), location=self.location)
        return out


def read_puffin(io: FileAccess, path: str) -> PuffinFile:
    """Read a whole Puffin file through ``io.new_input(path).read()``."""
    return PuffinFile(io.new_input(path).read(), path)


class PuffinWriter:
    """Builds a Puffin file in memory; :meth:`finish` returns the bytes (write them with FileIO)."""

    def __init__(self, properties: dict[str, str] | None = None, created_by: str | None = "iceberg-procedures") -> None:
        self.properties = dict(properties or {})
        if created_by and "created-by" not in self.properties:
            self.properties["created-by"] = created_by
        self._parts: list[bytes] = [MAGIC]
        self._offset = len(MAGIC)
        self.blobs: list[BlobMetadata] = []
        self._finished: bytes | None = None

    def add(self, type: str, data: bytes, fields: Iterable[int], snapshot_id: int = -1,
            sequence_number: int = -1, properties: dict[str, str] | None = None,
            compression_codec: str | None = None) -> BlobMetadata:
        """Append a blob and return its footer metadata (offset and length are of the stored bytes)."""
        if self._finished is not None:
            raise ValidationError("Puffin writer is already finished")
        stored = _compress(compression_codec, data) if compression_codec else bytes(data)
        meta = BlobMetadata(type, tuple(fields), snapshot_id, sequence_number, self._offset, len(stored),
                            compression_codec, dict(properties or {}))
        self._parts.append(stored)
        self._offset += len(stored)
        self.blobs.append(meta)
        return meta

    def add_deletion_vector(self, referenced_data_file: str, positions: Iterable[int]) -> tuple[BlobMetadata, int]:
        """Append a ``deletion-vector-v1`` blob; returns its metadata and cardinality.

        The blob's offset and length are the DV entry's ``content_offset`` / ``content_size_in_bytes``.
        """
        bitmap = position_bitmap(positions)
        meta = self.add(
            DV_BLOB_TYPE, serialize_dv(bitmap), (ROW_POSITION_FIELD_ID,), -1, -1,
            {"referenced-data-file": referenced_data_file, "cardinality": str(len(bitmap))},
        )
        return meta, len(bitmap)

    def finish(self) -> bytes:
        """The complete file: blobs, then the uncompressed footer."""
        if self._finished is None:
            footer: dict[str, Any] = {"blobs": [b.to_json() for b in self.blobs]}
            if self.properties:
                footer["properties"] = self.properties
            payload = json.dumps(footer, separators=(",", ":")).encode("utf-8")
            self._parts += [MAGIC, payload, struct.pack("<iI", len(payload), 0), MAGIC]
            self._finished = b"".join(self._parts)
            self._parts = []
        return self._finished

    @property
    def footer_size(self) -> int:
        """Size of the footer in bytes (``file-footer-size-in-bytes`` of table statistics)."""
        data = self.finish()
        return len(data) - self._offset
