"""Manifests and manifest lists (spec "Manifests", "Manifest Lists", "Sequence Number Inheritance",
"First Row ID Inheritance"; on-disk notes sections 1-3 and 9).

Writing follows Java 1.10: the Avro schemas of :mod:`procedures.spec.avro_schemas`, Java's header
key/value metadata, null sequence numbers for entries added by the writing commit, partition field
summaries with Java's NaN and signed-zero rules, and ``first_row_id`` assignment while a v3 manifest
list is written.  Reading applies the inheritance rules so every :class:`ManifestEntry` carries its
snapshot id, data and file sequence numbers and (v3) first row id.

Values are in the package's representation (see :mod:`procedures.spec.types`): partition tuples in
spec order, dates as int days, timestamps as int micros, decimals as ``Decimal``, uuids as
``uuid.UUID``.  Columns are matched by field id, so files written with older field names read fine.
"""

from __future__ import annotations

import io as _io
import json
import math
import operator
import struct
from dataclasses import dataclass, fields as dataclass_fields, replace
from decimal import Decimal
from enum import Enum, IntEnum
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence
from uuid import UUID

import fastavro

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec import avro_codecs
from procedures.spec.avro_scan import SkimField, compile_skimmer, named_types
from procedures.spec.avro_schemas import (
    check_format_version,
    encode_long,
    decode_long,
    manifest_entry_avro_schema,
    manifest_list_avro_schema,
    sanitize_name,
    strip_logical_types,
    without_logical_types,
)
from procedures.spec.conversions import to_bytes
from procedures.spec.partitioning import fields_to_json
from procedures.spec.schema import Schema, schema_to_json
from procedures.spec.types import (
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    StructType,
    UUIDType,
    decimal_required_bytes,
)

__all__ = [
    "GONE_FILE",
    "FileContent",
    "ManifestContent",
    "ManifestEntryStatus",
    "FileFormat",
    "DataFile",
    "ManifestEntry",
    "FieldSummary",
    "ManifestFile",
    "ManifestWriter",
    "ManifestPart",
    "UNASSIGNED_SEQ",
    "DEFAULT_BLOCK_SIZE",
    "write_manifest_list",
    "EncodedManifestList",
    "read_encoded_manifest_list",
    "decode_manifest_list_head",
    "iter_manifest_list_rows",
    "manifest_live_paths",
    "manifest_live_path_list",
    "read_manifest_list",
    "read_manifest_list_where",
    "ManifestRows",
    "read_manifest",
    "read_manifest_where",
    "EntryMetrics",
    "read_manifest_metadata",
    "existing_records",
]

#: sequence number of a manifest written but not yet committed; the manifest list writer replaces it
UNASSIGNED_SEQ = -1
#: uncompressed bytes of records per Avro block (fastavro's default sync interval)
_BLOCK_BYTES = 16_000
#: the deprecated v1 ``block_size_in_bytes`` value Java writes
DEFAULT_BLOCK_SIZE = 64 * 1024 * 1024


class FileContent(IntEnum):
    """``data_file.content``."""

    DATA = 0
    POSITION_DELETES = 1
    EQUALITY_DELETES = 2


class ManifestContent(IntEnum):
    """``manifest_file.content``."""

    DATA = 0
    DELETES = 1


class ManifestEntryStatus(IntEnum):
    """``manifest_entry.status``."""

    EXISTING = 0
    ADDED = 1
    DELETED = 2


class FileFormat(str, Enum):
    """``data_file.file_format``; written upper case like Java, parsed case-insensitively."""

    AVRO = "AVRO"
    ORC = "ORC"
    PARQUET = "PARQUET"
    PUFFIN = "PUFFIN"

    @classmethod
    def _missing_(cls, value: object) -> "FileFormat | None":
        if isinstance(value, str):
            return cls.__members__.get(value.upper())
        return None


_CONTENTS = tuple(FileContent)
_STATUSES = tuple(ManifestEntryStatus)
_FORMATS = {f.value: f for f in FileFormat}


@dataclass(frozen=True, slots=True)
class DataFile:
    """A ``data_file`` struct: a data file, position or equality delete file, or a deletion vector.

    Metrics maps are keyed by field id; ``partition`` is a tuple in spec order; ``spec_id`` is not
    stored in the manifest but filled from the manifest's ``partition_spec_id`` on read.
    """

    file_path: str
    file_format: FileFormat
    partition: tuple
    record_count: int
    file_size_in_bytes: int
    content: FileContent = FileContent.DATA
    column_sizes: dict[int, int] | None = None
    value_counts: dict[int, int] | None = None
    null_value_counts: dict[int, int] | None = None
    nan_value_counts: dict[int, int] | None = None
    lower_bounds: dict[int, bytes] | None = None
    upper_bounds: dict[int, bytes] | None = None
    key_metadata: bytes | None = None
    split_offsets: tuple[int, ...] | list[int] | None = None
    equality_ids: tuple[int, ...] | list[int] | None = None
    sort_order_id: int | None = None
    first_row_id: int | None = None
    referenced_data_file: str | None = None
    content_offset: int | None = None
    content_size_in_bytes: int | None = None
    spec_id: int = 0

    def __hash__(self) -> int:
        # metrics maps are dicts; identity of a file is its location (and the DV blob within it)
        return hash((self.file_path, self.content_offset))

    def __reduce__(self) -> tuple:
        # pickled as the constructor's arguments: half the cost of the slots dataclass default (a
        # field list built per file on the way out, a setattr per field on the way back), which
        # counted when executors send back the files a scan plans
        return DataFile, _data_file_values(self)


_data_file_values = operator.attrgetter(*(f.name for f in dataclass_fields(DataFile)))


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """A manifest row: status, the snapshot that added or removed the file, its data and file
    sequence numbers, and the file.  After :func:`read_manifest` inheritance has been applied."""

    status: ManifestEntryStatus
    snapshot_id: int | None
    sequence_number: int | None
    file_sequence_number: int | None
    data_file: DataFile

    @property
    def is_live(self) -> bool:
        """True for ADDED and EXISTING entries."""
        return self.status != ManifestEntryStatus.DELETED


@dataclass(frozen=True, slots=True)
class FieldSummary:
    """Summary of one partition field over a manifest's entries (``r508``); bounds are binary
    single values of the partition field's result type."""

    contains_null: bool
    contains_nan: bool | None = None
    lower_bound: bytes | None = None
    upper_bound: bytes | None = None


@dataclass(frozen=True, slots=True)
class ManifestFile:
    """A manifest-list row (``manifest_file``)."""

    manifest_path: str
    manifest_length: int
    partition_spec_id: int
    content: ManifestContent = ManifestContent.DATA
    sequence_number: int = 0
    min_sequence_number: int = 0
    added_snapshot_id: int | None = None
    added_files_count: int | None = None
    existing_files_count: int | None = None
    deleted_files_count: int | None = None
    added_rows_count: int | None = None
    existing_rows_count: int | None = None
    deleted_rows_count: int | None = None
    partitions: tuple[FieldSummary, ...] | None = None
    key_metadata: bytes | None = None
    first_row_id: int | None = None

    def has_added_files(self) -> bool:
        """True unless the manifest is known to add no file (a null v1 count means unknown)."""
        return self.added_files_count is None or self.added_files_count > 0

    def has_existing_files(self) -> bool:
        """True unless the manifest is known to carry no existing file."""
        return self.existing_files_count is None or self.existing_files_count > 0

    def has_deleted_files(self) -> bool:
        """True unless the manifest is known to delete no file."""
        return self.deleted_files_count is None or self.deleted_files_count > 0


class _InputFile(Protocol):
    def read(self) -> bytes: ...


class _FileIO(Protocol):
    def new_input(self, path: str) -> _InputFile: ...

    def write(self, path: str, data: bytes, overwrite: bool = False) -> Any: ...


# ----------------------------------------------------------------------------------- codecs
_CODECS = {
    "deflate": "deflate", "gzip": "deflate", "null": "null", "none": "null", "uncompressed": "null",
    "snappy": "snappy", "zstd": "zstandard", "zstandard": "zstandard",
}


def _codec(name: str) -> str:
    codec = _CODECS.get(name.lower())
    if codec is None:
        raise ValidationError(f"unknown Avro codec {name!r}; use one of deflate, null, snappy, zstd")
    return codec


def _write_avro(schema: dict[str, Any], records: Iterable[dict[str, Any]], metadata: dict[str, str],
                codec: str, level: int | None) -> bytes:
    avro_codecs.install()
    buf = _io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(schema), records, codec=_codec(codec),
                    metadata=metadata, codec_compression_level=level)
    return buf.getvalue()


def _avro_header(parsed: Any, metadata: dict[str, str], codec: str, level: int | None,
                 sync: bytes | None) -> bytes:
    """The Avro container header fastavro writes for ``parsed`` (it ends with the sync marker:
    ``sync``, or a random one when None)."""
    head = _io.BytesIO()
    fastavro.writer(head, parsed, [], codec=codec, metadata=metadata, codec_compression_level=level,
                    sync_marker=sync)
    return head.getvalue()


def _avro_blocks(parsed: Any, records: Iterable[dict[str, Any] | bytes], codec: str, level: int | None,
                 sync: bytes) -> bytes:
    """``records`` (dicts, or bytes already encoded with ``parsed``) framed as Avro data blocks,
    each ending with ``sync``: what follows a header written with the same marker."""
    out: list[bytes] = []
    block: list[bytes] = []
    size = 0

    def flush() -> None:
        payload = avro_codecs.compress_block(codec, b"".join(block), level)
        out.extend((encode_long(len(block)), encode_long(len(payload)), payload, sync))

    for r in records:
        if not isinstance(r, bytes):
            buf = _io.BytesIO()
            fastavro.schemaless_writer(buf, parsed, r)
            r = buf.getvalue()
        block.append(r)
        size += len(r)
        if size >= _BLOCK_BYTES:
            flush()
            block, size = [], 0
    if block:
        flush()
    return b"".join(out)


def _write_encoded_avro(schema: dict[str, Any], records: Iterable[dict[str, Any] | bytes],
                        metadata: dict[str, str], codec: str, level: int | None,
                        sync: bytes | None = None) -> bytes:
    """:func:`_write_avro` for records of which some are already encoded: fastavro writes the header
    (the same one :func:`_write_avro` writes) and the blocks are framed here."""
    avro_codecs.install()
    parsed = fastavro.parse_schema(schema)
    name = _codec(codec)
    header = _avro_header(parsed, metadata, name, level, sync)
    return header + _avro_blocks(parsed, records, name, level, header[-16:])


def _read_bytes(io: _FileIO, path: str) -> bytes:
    try:
        return io.new_input(path).read()
    except FileNotFoundError:
        raise
    except OSError as e:
        raise InvalidMetadataError(f"cannot read file: {e}", location=path) from e


#: the words of every error about a manifest or manifest list the metadata names but that is gone
#: (a Spark task's error carries them in its text, where the error's type is lost)
GONE_FILE = "the table's metadata references a file that is gone"


def _read_manifest_bytes(io: _FileIO, path: str) -> bytes:
    """:func:`_read_bytes` of a manifest the table's metadata names: a gone one is damaged metadata
    (an :class:`InvalidMetadataError` naming it), which garbage collection must stop at rather than
    take for "references nothing"."""
    try:
        return _read_bytes(io, path)
    except FileNotFoundError as e:
        raise InvalidMetadataError(f"the manifest is missing; {GONE_FILE}", location=path) from e


def _open_avro(data: bytes, path: str, strip: bool) -> tuple[Any, Any]:
    """A fastavro reader over ``data`` and the file's original schema; with ``strip`` values come
    back as raw ints and bytes (our representation, or cheap to convert) instead of datetimes."""
    avro_codecs.install()
    try:
        if strip:
            data, schema = without_logical_types(data)
            return fastavro.reader(_io.BytesIO(data)), schema
        reader = fastavro.reader(_io.BytesIO(data))
        return reader, reader.writer_schema
    except Exception as e:  # fastavro raises several unrelated types for corrupt files
        raise InvalidMetadataError(f"not a readable Avro file ({type(e).__name__}: {e})", location=path) from e


def _names_by_id(record_schema: Mapping[str, Any]) -> dict[int, str]:
    return {f["field-id"]: f["name"] for f in record_schema.get("fields", ()) if "field-id" in f}


def _record_type(field_type: Any) -> Any:
    if isinstance(field_type, list):
        return next(t for t in field_type if t != "null")
    return field_type


# ------------------------------------------------------------------- partition value codecs
def _to_avro_converter(t: IcebergType) -> Callable[[Any], Any] | None:
    if isinstance(t, DecimalType):
        size, scale = decimal_required_bytes(t.precision), t.scale
        return lambda v: None if v is None else int(v.scaleb(scale)).to_bytes(size, "big", signed=True)
    if isinstance(t, UUIDType):
        return lambda v: None if v is None else v.bytes
    return None


def _from_avro_converter(avro_type: Any) -> Callable[[Any], Any] | None:
    t = _record_type(avro_type)
    if not isinstance(t, dict):
        return None
    logical = t.get("logicalType")
    if logical == "decimal":
        scale = int(t.get("scale", 0))
        return lambda b: None if b is None else Decimal(int.from_bytes(b, "big", signed=True)).scaleb(-scale)
    if logical == "uuid":
        if t.get("type") == "string":
            return lambda s: None if s is None else UUID(s)
        return lambda b: None if b is None else UUID(bytes=bytes(b))
    return None


# ------------------------------------------------------------------------- partition summaries
class _FieldStats:
    __slots__ = ("type", "is_float", "contains_null", "contains_nan", "lower", "upper")

    def __init__(self, t: IcebergType) -> None:
        self.type = t
        self.is_float = isinstance(t, (FloatType, DoubleType))
        self.contains_null = False
        self.contains_nan = False
        self.lower: Any = None
        self.upper: Any = None

    def update(self, v: Any) -> None:
        if v is None:
            self.contains_null = True
            return
        if self.is_float:
            if v != v:
                self.contains_nan = True
                return
            # Java orders -0.0 before +0.0; the sign in the key keeps Python from treating them equal
            v = (v, math.copysign(1.0, v))
        if self.lower is None or v < self.lower:
            self.lower = v
        if self.upper is None or v > self.upper:
            self.upper = v

    def state(self) -> tuple[bool, bool, Any, Any]:
        """What :meth:`merge` takes: the flags and bounds in this class's comparable form."""
        return self.contains_null, self.contains_nan, self.lower, self.upper

    def merge(self, state: tuple[bool, bool, Any, Any]) -> None:
        """Fold in another run's :meth:`state` (of values of the same field)."""
        contains_null, contains_nan, lower, upper = state
        self.contains_null |= contains_null
        self.contains_nan |= contains_nan
        if lower is not None and (self.lower is None or lower < self.lower):
            self.lower = lower
        if upper is not None and (self.upper is None or upper > self.upper):
            self.upper = upper

    def summary(self) -> FieldSummary:
        lower, upper = self.lower, self.upper
        if self.is_float and lower is not None:
            lower, upper = lower[0], upper[0]
        return FieldSummary(
            self.contains_null,
            self.contains_nan,
            None if lower is None else to_bytes(lower, self.type),
            None if upper is None else to_bytes(upper, self.type),
        )


# ----------------------------------------------------------------------------------- writing
def _metrics_to_avro(m: Mapping[int, Any] | None) -> list[dict[str, Any]] | None:
    if m is None:
        return None
    return [{"key": k, "value": v} for k, v in sorted(m.items())]


@dataclass(frozen=True)
class ManifestPart:
    """A contiguous run of one manifest's entries, written apart from the rest
    (:meth:`ManifestWriter.close_part`): the entries as Avro data blocks framed with the manifest's
    sync marker, and what the manifest-list row needs of them.  :meth:`ManifestWriter.close_parts`
    joins the parts, in order, into the manifest file -- so several tasks can encode and compress
    one large manifest's entries at once."""

    blocks: bytes
    entries: int
    #: files and rows by entry status value (EXISTING, ADDED, DELETED)
    files: tuple[int, int, int]
    rows: tuple[int, int, int]
    #: per partition field: contains-null, contains-NaN and the bounds (in the writer's comparable form)
    bounds: tuple[tuple[bool, bool, Any, Any], ...]
    min_sequence_number: int | None


class ManifestWriter:
    """Writes one manifest of a single partition spec and content (data or deletes).

    Entries added by the committing snapshot (:meth:`add`) get null sequence numbers so they inherit
    the commit's; EXISTING and DELETED entries carry explicit numbers.  :meth:`close` writes the
    file through ``io.write(path, data)`` and returns its :class:`ManifestFile`, whose sequence
    numbers are :data:`UNASSIGNED_SEQ` until :func:`write_manifest_list` fills them in.

    One large manifest can be written by several writers given the same ``sync_marker`` (16 bytes):
    each encodes a run of the entries and ends with :meth:`close_part`, and one joins the parts with
    :meth:`close_parts`.
    """

    def __init__(
        self,
        io: _FileIO,
        path: str,
        spec: Any,
        schema: Schema,
        format_version: int,
        content: ManifestContent = ManifestContent.DATA,
        snapshot_id: int | None = None,
        *,
        codec: str = "deflate",
        compression_level: int | None = None,
        key_metadata: bytes | None = None,
        sync_marker: bytes | None = None,
    ) -> None:
        check_format_version(format_version)
        if sync_marker is not None and len(sync_marker) != 16:
            raise ValidationError(f"{path}: an Avro sync marker is 16 bytes, not {len(sync_marker)}")
        if format_version == 1 and content != ManifestContent.DATA:
            raise ValidationError(f"{path}: format version 1 has no delete manifests")
        self.io, self.path, self.spec, self.schema = io, path, spec, schema
        self.format_version = format_version
        self.content = ManifestContent(content)
        self.snapshot_id = snapshot_id
        self.key_metadata = key_metadata
        self._codec, self._level = codec, compression_level
        self._sync = sync_marker
        self._partition_type: StructType = spec.partition_type(schema)
        self._avro_schema = manifest_entry_avro_schema(format_version, self._partition_type)
        pfields = self._partition_type.fields
        self._pnames = [sanitize_name(f.name) for f in pfields]
        self._pconv = [_to_avro_converter(f.field_type) for f in pfields]
        self._stats = [_FieldStats(f.field_type) for f in pfields]
        self._records: list[dict[str, Any] | bytes] = []
        self._encoded = False
        self._counts = [0, 0, 0]  # files by status value
        self._rows = [0, 0, 0]
        self._min_seq: int | None = None
        self._result: ManifestFile | None = None
        self._part: ManifestPart | None = None

    # -- entry points
    def add(self, data_file: DataFile, sequence_number: int | None = None) -> None:
        """Add a file new in this commit; ``sequence_number`` is an explicit *older* data sequence
        number (compaction), otherwise both numbers are inherited."""
        self.add_entry(ManifestEntry(ManifestEntryStatus.ADDED, self.snapshot_id, sequence_number, None, data_file))

    def existing(self, data_file: DataFile, snapshot_id: int, sequence_number: int | None,
                 file_sequence_number: int | None) -> None:
        """Carry a file over from another manifest, keeping its snapshot and sequence numbers."""
        self.add_entry(ManifestEntry(ManifestEntryStatus.EXISTING, snapshot_id, sequence_number, file_sequence_number, data_file))

    def delete(self, data_file: DataFile, sequence_number: int | None, file_sequence_number: int | None) -> None:
        """Record the removal of a file by this commit (status DELETED, this writer's snapshot id)."""
        self.add_entry(ManifestEntry(ManifestEntryStatus.DELETED, self.snapshot_id, sequence_number, file_sequence_number, data_file))

    def add_entry(self, entry: ManifestEntry) -> None:
        """Write an entry as given (status, snapshot id and sequence numbers are not changed)."""
        self._check_open()
        df = entry.data_file
        status = int(entry.status)
        is_data = df.content == FileContent.DATA
        if is_data != (self.content == ManifestContent.DATA):
            raise ValidationError(
                f"{self.path}: cannot write a {FileContent(df.content).name} file ({df.file_path}) into a "
                f"{self.content.name} manifest"
            )
        v = self.format_version
        if v > 1 and status != ManifestEntryStatus.ADDED and entry.sequence_number is None:
            raise ValidationError(
                f"{self.path}: {ManifestEntryStatus(status).name} entry for {df.file_path} needs an explicit data "
                "sequence number; only ADDED entries may inherit it"
            )
        self._account(status, df.partition, df.record_count, entry.sequence_number, df.file_path)
        record: dict[str, Any] = {"status": status, "snapshot_id": entry.snapshot_id, "data_file": self._data_file_record(df)}
        if v > 1:
            record["sequence_number"] = entry.sequence_number
            record["file_sequence_number"] = entry.file_sequence_number
        self._records.append(record)

    @property
    def avro_schema(self) -> dict[str, Any]:
        """The Avro schema entries are written with (records given to :meth:`existing_encoded` follow it)."""
        return self._avro_schema

    def existing_encoded(self, record: bytes, partition: tuple, record_count: int,
                         sequence_number: int | None) -> None:
        """Append an EXISTING entry already encoded in :attr:`avro_schema` (from
        :func:`existing_records`); the values are the entry's, for the manifest's counts and
        partition summaries."""
        self._check_open()
        if self.format_version > 1 and sequence_number is None:
            raise ValidationError(f"{self.path}: an EXISTING entry needs an explicit data sequence number")
        self._account(ManifestEntryStatus.EXISTING, partition, record_count, sequence_number, "an encoded entry")
        self._encoded = True
        self._records.append(record)

    def _account(self, status: int, partition: tuple, record_count: int, sequence_number: int | None,
                 file_path: str) -> None:
        if len(partition) != len(self._stats):
            raise ValidationError(
                f"{self.path}: partition {partition!r} of {file_path} has {len(partition)} values, "
                f"spec {self.spec.spec_id} has {len(self._stats)} fields"
            )
        self._counts[status] += 1
        self._rows[status] += record_count
        for stats, value in zip(self._stats, partition):
            stats.update(value)
        if status != ManifestEntryStatus.DELETED:
            self._lower_min_seq(sequence_number)

    def _lower_min_seq(self, sequence_number: int | None) -> None:
        if sequence_number is not None and (self._min_seq is None or sequence_number < self._min_seq):
            self._min_seq = sequence_number

    def _data_file_record(self, df: DataFile) -> dict[str, Any]:
        partition = {
            name: (value if conv is None else conv(value))
            for name, conv, value in zip(self._pnames, self._pconv, df.partition)
        }
        rec: dict[str, Any] = {
            "file_path": df.file_path,
            "file_format": FileFormat(df.file_format).value,
            "partition": partition,
            "record_count": df.record_count,
            "file_size_in_bytes": df.file_size_in_bytes,
            "column_sizes": _metrics_to_avro(df.column_sizes),
            "value_counts": _metrics_to_avro(df.value_counts),
            "null_value_counts": _metrics_to_avro(df.null_value_counts),
            "nan_value_counts": _metrics_to_avro(df.nan_value_counts),
            "lower_bounds": _metrics_to_avro(df.lower_bounds),
            "upper_bounds": _metrics_to_avro(df.upper_bounds),
            "key_metadata": df.key_metadata,
            "split_offsets": None if df.split_offsets is None else list(df.split_offsets),
            "sort_order_id": df.sort_order_id,
        }
        v = self.format_version
        if v == 1:
            rec["block_size_in_bytes"] = DEFAULT_BLOCK_SIZE
            return rec
        rec["content"] = int(df.content)
        rec["equality_ids"] = None if df.equality_ids is None else list(df.equality_ids)
        rec["referenced_data_file"] = df.referenced_data_file
        if v >= 3:
            # Java keeps first_row_id for data files only
            rec["first_row_id"] = df.first_row_id if df.content == FileContent.DATA else None
            rec["content_offset"] = df.content_offset
            rec["content_size_in_bytes"] = df.content_size_in_bytes
        return rec

    def _metadata(self) -> dict[str, str]:
        meta = {
            "schema": json.dumps(schema_to_json(self.schema), separators=(",", ":")),
            "schema-id": str(self.schema.schema_id),
            "partition-spec": json.dumps(fields_to_json(self.spec), separators=(",", ":")),
            "partition-spec-id": str(self.spec.spec_id),
            "format-version": str(self.format_version),
        }
        if self.format_version > 1:
            meta["content"] = "data" if self.content == ManifestContent.DATA else "deletes"
        return meta

    def _check_open(self) -> None:
        if self._result is not None or self._part is not None:
            raise ValidationError(f"{self.path}: manifest writer is already closed")

    def close(self) -> ManifestFile:
        """Write the manifest and return its manifest-list row (idempotent)."""
        if self._result is not None:
            return self._result
        if self._part is not None:
            raise ValidationError(f"{self.path}: manifest writer was closed as a part")
        if self._encoded or self._sync is not None:
            data = _write_encoded_avro(self._avro_schema, self._records, self._metadata(), self._codec,
                                       self._level, self._sync)
        else:
            data = _write_avro(self._avro_schema, self._records, self._metadata(), self._codec, self._level)
        return self._finish(data)

    def close_part(self) -> ManifestPart:
        """End this writer as one part of a manifest written by several (no file is written): its
        entries as data blocks framed with the sync marker, and their accounting (idempotent)."""
        if self._part is not None:
            return self._part
        self._check_open()
        if self._sync is None:
            raise ValidationError(f"{self.path}: writing a manifest in parts needs the sync marker they share")
        avro_codecs.install()
        blocks = _avro_blocks(fastavro.parse_schema(self._avro_schema), self._records, _codec(self._codec),
                              self._level, self._sync)
        self._part = ManifestPart(
            blocks=blocks,
            entries=len(self._records),
            files=(self._counts[0], self._counts[1], self._counts[2]),
            rows=(self._rows[0], self._rows[1], self._rows[2]),
            bounds=tuple(s.state() for s in self._stats),
            min_sequence_number=self._min_seq,
        )
        self._records = []
        return self._part

    def close_parts(self, parts: Iterable[ManifestPart]) -> ManifestFile:
        """Write the manifest from ``parts`` (in entry order, each from :meth:`close_part` of a writer
        of the same spec, schema, format and sync marker) and return its manifest-list row.  This
        writer's own entries, if any, follow the parts."""
        self._check_open()
        if self._sync is None:
            raise ValidationError(f"{self.path}: joining manifest parts needs the sync marker they were framed with")
        avro_codecs.install()
        parsed = fastavro.parse_schema(self._avro_schema)
        codec = _codec(self._codec)
        out = [_avro_header(parsed, self._metadata(), codec, self._level, self._sync)]
        for part in parts:
            if len(part.bounds) != len(self._stats):
                raise ValidationError(
                    f"{self.path}: a part with {len(part.bounds)} partition fields cannot join a manifest of "
                    f"spec {self.spec.spec_id} ({len(self._stats)} fields)"
                )
            out.append(part.blocks)
            for status in range(3):
                self._counts[status] += part.files[status]
                self._rows[status] += part.rows[status]
            for stats, state in zip(self._stats, part.bounds):
                stats.merge(state)
            self._lower_min_seq(part.min_sequence_number)
        out.append(_avro_blocks(parsed, self._records, codec, self._level, self._sync))
        return self._finish(b"".join(out))

    def _finish(self, data: bytes) -> ManifestFile:
        self.io.write(self.path, data, overwrite=False)
        self._records = []
        self._result = ManifestFile(
            manifest_path=self.path,
            manifest_length=len(data),
            partition_spec_id=self.spec.spec_id,
            content=self.content,
            sequence_number=UNASSIGNED_SEQ,
            min_sequence_number=UNASSIGNED_SEQ if self._min_seq is None else self._min_seq,
            added_snapshot_id=self.snapshot_id,
            added_files_count=self._counts[1],
            existing_files_count=self._counts[0],
            deleted_files_count=self._counts[2],
            added_rows_count=self._rows[1],
            existing_rows_count=self._rows[0],
            deleted_rows_count=self._rows[2],
            partitions=tuple(s.summary() for s in self._stats),
            key_metadata=self.key_metadata,
            first_row_id=None,
        )
        return self._result

    def __enter__(self) -> "ManifestWriter":
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is None:
            self.close()


def _manifest_file_record(m: ManifestFile, v: int) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "manifest_path": m.manifest_path,
        "manifest_length": m.manifest_length,
        "partition_spec_id": m.partition_spec_id,
        "added_snapshot_id": m.added_snapshot_id,
        "added_files_count": m.added_files_count,
        "existing_files_count": m.existing_files_count,
        "deleted_files_count": m.deleted_files_count,
        "added_rows_count": m.added_rows_count,
        "existing_rows_count": m.existing_rows_count,
        "deleted_rows_count": m.deleted_rows_count,
        "partitions": None if m.partitions is None else [
            {"contains_null": s.contains_null, "contains_nan": s.contains_nan,
             "lower_bound": s.lower_bound, "upper_bound": s.upper_bound}
            for s in m.partitions
        ],
        "key_metadata": m.key_metadata,
    }
    if v > 1:
        rec["content"] = int(m.content)
        rec["sequence_number"] = m.sequence_number
        rec["min_sequence_number"] = m.min_sequence_number
    if v >= 3:
        rec["first_row_id"] = m.first_row_id
    return rec


def write_manifest_list(
    io: _FileIO,
    path: str,
    format_version: int,
    snapshot_id: int,
    parent_snapshot_id: int | None,
    sequence_number: int,
    first_row_id: int | None,
    manifests: Sequence[ManifestFile],
    *,
    codec: str = "deflate",
    compression_level: int | None = None,
) -> tuple[list[ManifestFile], int | None]:
    """Write a snapshot's manifest list and return ``(manifests as written, next row id)``.

    Manifests written by this snapshot with :data:`UNASSIGNED_SEQ` get ``sequence_number``; in v3
    every data manifest without a ``first_row_id`` gets the next row id, starting at
    ``first_row_id`` and advancing by its existing plus added rows.  The returned next row id is the
    table's new ``next-row-id`` (``first_row_id`` unchanged for v1/v2).
    """
    check_format_version(format_version)
    if format_version >= 3 and first_row_id is None:
        raise ValidationError(f"{path}: a v3 manifest list needs the snapshot's first-row-id")
    next_row_id = first_row_id
    out: list[ManifestFile] = []
    for m in manifests:
        if format_version == 1 and m.content != ManifestContent.DATA:
            raise ValidationError(f"{path}: delete manifest {m.manifest_path} cannot be listed in format version 1")
        changes: dict[str, Any] = {}
        for name in ("sequence_number", "min_sequence_number"):
            if getattr(m, name) == UNASSIGNED_SEQ:
                if m.added_snapshot_id != snapshot_id:
                    raise ValidationError(
                        f"{path}: manifest {m.manifest_path} of snapshot {m.added_snapshot_id} has no "
                        f"{name}; only manifests added by snapshot {snapshot_id} may inherit one"
                    )
                changes[name] = sequence_number
        if format_version > 1:
            missing = [n for n in ("added_files_count", "existing_files_count", "deleted_files_count",
                                   "added_rows_count", "existing_rows_count", "deleted_rows_count")
                       if getattr(m, n) is None]
            if missing:
                raise ValidationError(f"{path}: manifest {m.manifest_path} lacks {', '.join(missing)} required in v{format_version}")
        if format_version >= 3:
            if m.content == ManifestContent.DATA:
                if m.first_row_id is None:
                    changes["first_row_id"] = next_row_id
                    next_row_id += m.existing_rows_count + m.added_rows_count
            elif m.first_row_id is not None:
                changes["first_row_id"] = None
        out.append(replace(m, **changes) if changes else m)
    meta = {
        "snapshot-id": str(snapshot_id),
        "parent-snapshot-id": str(parent_snapshot_id) if parent_snapshot_id is not None else "null",
    }
    if format_version > 1:
        meta["sequence-number"] = str(sequence_number)
    if format_version >= 3:
        meta["first-row-id"] = str(first_row_id)
    meta["format-version"] = str(format_version)
    data = _write_avro(
        manifest_list_avro_schema(format_version),
        (_manifest_file_record(m, format_version) for m in out),
        meta, codec, compression_level,
    )
    io.write(path, data, overwrite=False)
    return out, next_row_id


# ----------------------------------------------------------------------------------- reading
def _manifest_file_converter(schema: Mapping[str, Any]) -> Callable[[dict], ManifestFile]:
    """A function from a decoded manifest-list record (writer ``schema``) to a :class:`ManifestFile`."""
    names = _names_by_id(schema)
    g = {fid: names.get(fid, "") for fid in range(500, 521)}
    summaries_name = g[507]

    def convert(r: dict) -> ManifestFile:
        parts = r.get(summaries_name)
        content = r.get(g[517])
        return ManifestFile(
            r[g[500]], r[g[501]], r[g[502]],
            ManifestContent.DATA if content is None else ManifestContent(content),
            r.get(g[515]) or 0,
            r.get(g[516]) or 0,
            r.get(g[503]),
            r.get(g[504]), r.get(g[505]), r.get(g[506]),
            r.get(g[512]), r.get(g[513]), r.get(g[514]),
            _field_summaries(parts),
            r.get(g[519]),
            r.get(g[520]),
        )

    return convert


def read_manifest_list(io: _FileIO, path: str) -> list[ManifestFile]:
    """The rows of a manifest list; v1 rows read as data manifests with sequence numbers 0."""
    data = _read_bytes(io, path)
    reader, schema = _open_avro(data, path, strip=False)
    convert = _manifest_file_converter(schema)
    try:
        return [convert(r) for r in reader]
    except (KeyError, ValueError, EOFError) as e:
        raise InvalidMetadataError(f"corrupt manifest list ({type(e).__name__}: {e})", location=path) from e


#: what :func:`read_manifest_list_where` skims of a manifest-list row, in this order
_LIST_SKIM = (SkimField((502,), "long"), SkimField((504,), "long"), SkimField((505,), "long"),
              SkimField((507,), "span"), SkimField((517,), "long"))
#: positions in :data:`_LIST_SKIM` of the fields a list must have to be skimmed (v1 has no content)
_LIST_REQUIRED = frozenset(range(4))


@dataclass(frozen=True)
class _ListReader:
    """How :func:`read_manifest_list_where` reads rows of one manifest-list schema: the parsed
    schema and row converter of a full decode, the skimmer (None: read in full) and the parsed
    schema of the ``partitions`` field alone, which decodes a skimmed span."""

    parsed: Any
    convert: Callable[[dict], ManifestFile]
    skim: Callable[[bytes, int], tuple[int, tuple]] | None
    summaries: Callable[[bytes], tuple[FieldSummary, ...] | None] | None


#: schema text -> reader, for the few schemas manifest lists have
_LIST_READERS: dict[str, _ListReader] = {}


def _list_reader(schema_text: str) -> _ListReader:
    hit = _LIST_READERS.get(schema_text)
    if hit is None:
        schema = json.loads(schema_text)
        skimmer = compile_skimmer(schema, _LIST_SKIM)
        parts = next((f for f in schema["fields"] if f.get("field-id") == 507), None)
        # every kept field must be in the schema: a list without them is read in full instead
        usable = skimmer is not None and _LIST_REQUIRED <= skimmer.found and parts is not None
        summaries = _summaries_reader(parts["type"]) if usable else None
        usable = usable and summaries is not None
        hit = _ListReader(fastavro.parse_schema(schema), _manifest_file_converter(schema),
                          skimmer.skim if usable else None, summaries)
        if len(_LIST_READERS) >= 16:
            _LIST_READERS.clear()
        _LIST_READERS[schema_text] = hit
    return hit


class ManifestRows(Sequence[ManifestFile]):
    """Rows of a manifest list kept Avro-encoded, decoded into :class:`ManifestFile` one at a time
    when read (by index, slice or iteration).  What :func:`read_manifest_list_where` returns: a
    large table's thousands of kept rows cost their bytes (about a fifth of the objects), and they
    travel to Spark tasks as those bytes."""

    __slots__ = ("path", "schema", "rows", "contents")

    def __init__(self, path: str, schema: str, rows: Sequence[bytes], contents: Sequence[int]) -> None:
        self.path = path  # the manifest list, for errors
        self.schema = schema  # its writer schema (JSON text)
        self.rows = tuple(rows)
        self.contents = tuple(contents)  # each row's ManifestContent value

    def __reduce__(self) -> tuple:
        return ManifestRows, (self.path, self.schema, self.rows, self.contents)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return ManifestRows(self.path, self.schema, self.rows[index], self.contents[index])
        return self._decode(self.rows[index], _list_reader(self.schema), self.path)

    def __iter__(self) -> Iterator[ManifestFile]:
        reader = _list_reader(self.schema)
        for row in self.rows:
            yield self._decode(row, reader, self.path)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ManifestRows) and other.schema == self.schema:
            return other.rows == self.rows
        return isinstance(other, (Sequence, ManifestRows)) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ManifestRows({len(self.rows)} rows)"

    def with_content(self, content: ManifestContent) -> "ManifestRows":
        """The rows of one content (data or delete manifests), in order."""
        want = int(content)
        keep = [i for i, c in enumerate(self.contents) if c == want]
        if len(keep) == len(self.rows):
            return self
        return ManifestRows(self.path, self.schema, [self.rows[i] for i in keep], [want] * len(keep))

    def take(self, indices: Iterable[int]) -> "ManifestRows":
        """The rows at ``indices``, in that order, still encoded."""
        at = list(indices)
        return ManifestRows(self.path, self.schema, [self.rows[i] for i in at], [self.contents[i] for i in at])

    @staticmethod
    def decode_one(path: str, schema: str, row: bytes) -> ManifestFile:
        """One encoded row of the manifest list at ``path`` (writer ``schema``): a task that was handed
        a row alone decodes it with the list's path and schema, shipped once."""
        return ManifestRows._decode(row, _list_reader(schema), path)

    @staticmethod
    def _decode(row: bytes, reader: "_ListReader", path: str) -> ManifestFile:
        fo = _io.BytesIO(row)
        try:
            m = reader.convert(fastavro.schemaless_reader(fo, reader.parsed, None))
        except Exception as e:  # fastavro raises several unrelated types for corrupt bytes
            raise InvalidMetadataError(f"corrupt manifest list ({type(e).__name__}: {e})", location=path) from e
        if fo.tell() != len(row):  # the skim and the decode must agree on where the row ends
            raise InvalidMetadataError(f"a row read as {fo.tell()} bytes and as {len(row)}", location=path)
        return m


def _summaries_reader(parts_type: Any) -> Callable[[bytes], tuple[FieldSummary, ...] | None] | None:
    """A function from the encoded ``partitions`` value of a manifest-list row (a skimmed span) to
    its summaries, through a generated reader; None when the field has a shape it does not handle."""
    wrapper = {"type": "record", "name": "span", "fields": [{"name": "p", "field-id": 1, "type": parts_type}]}
    skimmer = compile_skimmer(wrapper, [SkimField((1,), "records")])
    inner = _record_type(parts_type)
    inner = inner if isinstance(inner, dict) else {}
    if skimmer is None or inner.get("type") != "array" or not isinstance(inner.get("items"), dict):
        return None
    names = [f["name"] for f in inner["items"].get("fields", ())]
    if "contains_null" not in names:
        return None
    at = [names.index(n) if n in names else None for n in ("contains_null", "contains_nan", "lower_bound", "upper_bound")]
    skim = skimmer.skim

    def read(span: bytes) -> tuple[FieldSummary, ...] | None:
        end, (rows,) = skim(span, 0)
        if end != len(span):
            raise ValueError(f"partition summaries read as {end} bytes and as {len(span)}")
        if rows is None:
            return None
        return tuple(FieldSummary(*(None if i is None else r[i] for i in at)) for r in rows)

    return read


def _field_summaries(parts: list[dict] | None) -> tuple[FieldSummary, ...] | None:
    if parts is None:
        return None
    return tuple(FieldSummary(p["contains_null"], p.get("contains_nan"), p.get("lower_bound"), p.get("upper_bound"))
                 for p in parts)


def read_manifest_list_where(
    io: _FileIO,
    path: str,
    keep: Callable[[int, tuple[FieldSummary, ...] | None], bool] | None,
    *,
    live_only: bool = False,
) -> ManifestRows | list[ManifestFile]:
    """The rows of a manifest list whose partition spec id and field summaries pass ``keep``, as
    :func:`read_manifest_list` gives them: a :class:`ManifestRows` that decodes each row when it is
    read (a list, for a schema the skimming reader does not handle).

    Each row's spec id, file counts and encoded ``partitions`` are read from its bytes first; a row
    is decoded only when it passes.  ``keep(spec_id, summaries)`` must depend on its arguments
    alone: it is called once per distinct (spec id, encoded summaries) pair, and the answer reused
    for every other row with the same pair (a table's manifests repeat a few partition ranges).
    ``live_only`` also drops the rows known to list no added or existing file (deleted entries only).
    ``keep=None`` keeps every row, and no summaries are decoded.
    """
    data = _read_bytes(io, path)
    avro_codecs.install()
    try:
        blocks = fastavro.block_reader(_io.BytesIO(data))
        schema_text = blocks.metadata["avro.schema"]
        if isinstance(schema_text, bytes):
            schema_text = schema_text.decode()
        reader = _list_reader(schema_text)
    except Exception as e:  # fastavro raises several unrelated types for corrupt files
        raise InvalidMetadataError(f"not a readable Avro file ({type(e).__name__}: {e})", location=path) from e
    if reader.skim is None:
        rows = read_manifest_list(io, path)
        return [m for m in rows if not (live_only and _no_live_files(m))
                and (keep is None or keep(m.partition_spec_id, m.partitions))]
    answers: dict[tuple[int, bytes], bool] = {}
    rows: list[bytes] = []
    contents: list[int] = []
    skim = reader.skim
    try:
        for block in blocks:
            buf = block.bytes_.getvalue()
            pos = 0
            for _ in range(block.num_records):
                start = pos
                pos, (spec_id, added, existing, parts, content) = skim(buf, pos)
                if live_only and added == 0 and existing == 0:
                    continue
                key = (spec_id, parts)
                answer = True if keep is None else answers.get(key)
                if answer is None:  # first row with these summaries: decode them to ask
                    summaries = reader.summaries(parts)
                    answer = answers[key] = bool(keep(spec_id, summaries))
                if answer:
                    rows.append(buf[start:pos])
                    contents.append(content or 0)
            if pos != len(buf):
                raise ValueError(f"a block holds {len(buf) - pos} bytes past its {block.num_records} rows")
    except (KeyError, IndexError, ValueError, EOFError, TypeError) as e:
        raise InvalidMetadataError(f"corrupt manifest list ({type(e).__name__}: {e})", location=path) from e
    return ManifestRows(path, schema_text, rows, contents)


def _no_live_files(m: ManifestFile) -> bool:
    return not (m.has_added_files() or m.has_existing_files())


@dataclass(frozen=True)
class EncodedManifestList:
    """A manifest list's rows still Avro-encoded: the writer schema (the header's JSON text) and the
    decompressed blocks joined into one byte string of ``count`` records.

    Iceberg writers carry a parent's manifests after the new ones, unchanged, so a snapshot's
    encoded rows usually end with its parent's byte for byte; :func:`decode_manifest_list_head`
    then decodes only the new rows in front.
    """

    path: str
    schema: str
    records: bytes
    count: int


def read_encoded_manifest_list(io: _FileIO, path: str) -> EncodedManifestList:
    """A manifest list's rows, decompressed but not decoded (see :class:`EncodedManifestList`)."""
    data = _read_bytes(io, path)
    avro_codecs.install()
    try:
        blocks = fastavro.block_reader(_io.BytesIO(data))
        schema = blocks.metadata["avro.schema"]
        parts = []
        count = 0
        for block in blocks:
            parts.append(block.bytes_.getvalue())
            count += block.num_records
    except Exception as e:  # fastavro raises several unrelated types for corrupt files
        raise InvalidMetadataError(f"not a readable Avro file ({type(e).__name__}: {e})", location=path) from e
    return EncodedManifestList(path, schema if isinstance(schema, str) else schema.decode(), b"".join(parts), count)


def decode_manifest_list_head(encoded: EncodedManifestList, size: int, count: int) -> list[ManifestFile]:
    """The first ``count`` rows of ``encoded``, which must take exactly its first ``size`` bytes.

    Decoding is deterministic, so when the rest of the bytes equal another list's rows (same
    schema), the rows of ``encoded`` are these followed by that list's.  Raises
    :class:`InvalidMetadataError` when the rows do not end exactly at ``size``.
    """
    return list(iter_manifest_list_rows(encoded, size, count))


def iter_manifest_list_rows(encoded: EncodedManifestList, size: int, count: int) -> Iterator[ManifestFile]:
    """:func:`decode_manifest_list_head` one row at a time (a caller that keeps a few fields of each
    row holds one whole row at a time); the check that the rows end at ``size`` comes after the
    last row, so only a caller that fails on the error may use rows before it."""
    schema = json.loads(encoded.schema)
    parsed = fastavro.parse_schema(schema)
    convert = _manifest_file_converter(schema)
    buf = _io.BytesIO(encoded.records[:size])
    read = fastavro.schemaless_reader
    for _ in range(count):
        try:
            row = convert(read(buf, parsed, None))
        except Exception as e:  # fastavro raises several unrelated types for corrupt bytes
            raise InvalidMetadataError(f"corrupt manifest list ({type(e).__name__}: {e})",
                                       location=encoded.path) from e
        yield row
    if buf.tell() != size:
        raise InvalidMetadataError(f"manifest list rows end at byte {buf.tell()}, expected {size}",
                                   location=encoded.path)


def read_manifest_metadata(io: _FileIO, path: str) -> dict[str, str]:
    """The key/value metadata of a manifest or manifest list header (``schema``, ``partition-spec``...)."""
    reader, _ = _open_avro(_read_bytes(io, path), path, strip=False)
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in reader.metadata.items() if not k.startswith("avro.")}


def _partition_plan(data_file_schema: Mapping[str, Any], spec: Any | None,
                    named: Mapping[str, Any]) -> Callable[[dict], tuple]:
    """A function from the Avro ``partition`` record to our partition tuple (spec order)."""
    pfield = next(f for f in data_file_schema["fields"] if f.get("field-id") == 102 or f["name"] == "partition")
    fields = _record_type(pfield["type"]).get("fields", [])
    by_id = {f["field-id"]: f for f in fields if "field-id" in f}
    if spec is not None and len(by_id) == len(fields):
        chosen = [by_id.get(pf.field_id) for pf in spec.fields]
    else:
        chosen = list(fields)
    names = [f["name"] if f is not None else "\0missing" for f in chosen]
    convs = [_from_avro_converter(_resolve(f["type"], named)) if f is not None else None for f in chosen]
    if any(f is None for f in chosen):
        get: Callable[[dict], tuple] = lambda p: tuple(p.get(n) for n in names)  # noqa: E731
    elif not names:
        get = lambda p: ()  # noqa: E731
    elif len(names) == 1:
        n0 = names[0]
        get = lambda p: (p[n0],)  # noqa: E731
    else:
        get = operator.itemgetter(*names)
    if any(convs):
        raw = get
        get = lambda p: tuple(v if c is None else c(v) for c, v in zip(convs, raw(p)))  # noqa: E731
    return get


def _resolve(avro_type: Any, named: Mapping[str, Any]) -> Any:
    t = _record_type(avro_type)
    return named.get(t, t) if isinstance(t, str) else t


def read_manifest(
    io: _FileIO,
    manifest: ManifestFile,
    *,
    specs: Mapping[int, Any] | None = None,
    skip_deleted: bool = False,
) -> Iterator[ManifestEntry]:
    """Stream a manifest's entries with inheritance applied.

    * ``snapshot_id`` null -> the manifest's ``added_snapshot_id``;
    * null data/file sequence numbers of ADDED entries (or of any entry of a v1 manifest, whose
      sequence number is 0) -> the manifest's ``sequence_number``;
    * v3: data files without ``first_row_id`` get ids from the manifest's ``first_row_id`` in file
      order, skipping DELETED entries;
    * ``spec_id`` of every file -> the manifest's ``partition_spec_id``.

    ``specs`` (spec id -> PartitionSpec) orders partition tuples by the table's spec; without it the
    file's own partition field order is used.  ``skip_deleted`` drops DELETED entries.
    """
    path = manifest.manifest_path
    reader, schema = _open_avro(_read_bytes(io, path), path, strip=True)
    yield from _entries(reader, schema, manifest, specs, skip_deleted)


#: the metrics maps of a data_file struct by field id, in :class:`EntryMetrics` order
_METRIC_MAP_IDS = (109, 110, 137, 125, 128)


class EntryMetrics:
    """What a metrics filter reads of a manifest entry, taken from its bytes before any
    :class:`DataFile` is built: the record count and the metrics maps (``value_counts``,
    ``null_value_counts``, ``nan_value_counts``, ``lower_bounds``, ``upper_bounds``) holding only the
    field ids asked for, so a test that looks only at those ids answers as on the file itself.

    One instance is refilled for each entry of a manifest (building one per entry would cost
    about as much as the test): keep nothing from it past the call.
    """

    __slots__ = ("record_count", "value_counts", "null_value_counts", "nan_value_counts", "lower_bounds",
                 "upper_bounds")

    def __init__(self) -> None:
        self.record_count = 0
        self.value_counts = self.null_value_counts = self.nan_value_counts = None
        self.lower_bounds = self.upper_bounds = None


def read_manifest_where(
    io: _FileIO,
    manifest: ManifestFile,
    field_ids: Iterable[int],
    keep: Callable[[Any], bool] | None,
    *,
    specs: Mapping[int, Any] | None = None,
) -> Iterator[ManifestEntry]:
    """The live entries of a manifest whose metrics pass ``keep``, as :func:`read_manifest` with
    ``skip_deleted`` gives them, decoding in full only those.

    ``keep`` gets an :class:`EntryMetrics` whose maps hold the ``field_ids`` only, or -- for a
    manifest schema the skimming reader does not handle -- the entry's :class:`DataFile`; it must
    answer from those fields and ids alone (an ``InclusiveMetricsEvaluator``'s ``eval`` over the
    ids its filter references does).  ``keep=None`` keeps every live entry, decoded by the same
    generated reader without a first pass over the metrics (faster than fastavro's full decode).
    """
    path = manifest.manifest_path
    data = _read_manifest_bytes(io, path)
    try:
        stripped, schema = without_logical_types(data)
    except Exception as e:  # the header parser raises several unrelated types for corrupt files
        raise InvalidMetadataError(f"not a readable Avro file ({type(e).__name__}: {e})", location=path) from e
    plan = _skim_plan(schema, frozenset(field_ids))
    if plan is None or (keep is None and plan.decode is None):
        reader, _ = _open_avro(data, path, strip=True)
        yield from (e for e in _entries(reader, schema, manifest, specs, True) if keep is None or keep(e.data_file))
        return
    avro_codecs.install()
    numbered = manifest.first_row_id is not None and manifest.content == ManifestContent.DATA
    yield from _entries(_kept_records(stripped, plan, keep, path, numbered), schema, manifest, specs, True)


class _SkimPlan:
    """The skimming reader of one manifest schema for one set of field ids, and what decodes the
    entries it keeps: a generated decoder of the fields :func:`_entries` reads (``decode``, with
    ``build`` making fastavro's record shape of its values) or, for a schema it does not handle,
    fastavro with the parsed schema (``writer``)."""

    __slots__ = ("skim", "decode", "build", "writer")

    def __init__(self, skim: Callable[[bytes, int], tuple[int, tuple]],
                 decode: Callable[[bytes, int], tuple[int, tuple]] | None,
                 build: Callable[[tuple], dict] | None, writer: Any) -> None:
        self.skim, self.decode, self.build, self.writer = skim, decode, build, writer


#: what the decoder of kept entries reads of a data_file struct, by field id (the fields
#: :func:`_entries` uses; the metrics maps whole)
_DECODED_FIELDS = {
    134: "long", 100: "string", 101: "string", 102: "record", 103: "long", 104: "long", 108: "map", 109: "map",
    110: "map", 137: "map", 125: "map", 128: "map", 131: "bytes", 132: "longs", 135: "longs", 140: "long",
    142: "long", 143: "string", 144: "long", 145: "long",
}


def _entry_decoder(stripped: dict[str, Any]) -> tuple[Callable[[bytes, int], tuple[int, tuple]],
                                                      Callable[[tuple], dict]] | None:
    """A decoder of whole entries of ``stripped`` (a manifest schema without logical types) and the
    function turning its values into the record fastavro would give (the fields :func:`_entries`
    reads), or None when the generator does not handle the schema."""
    df_field = next((f for f in stripped["fields"] if f.get("field-id") == 2), None)
    if df_field is None:
        return None
    top_names = _names_by_id(stripped)
    df_names = _names_by_id(_record_type(df_field["type"]))
    fields = [SkimField((fid,), "long") for fid in (0, 1, 3, 4)]
    fields += [SkimField((2, fid), kind, None) for fid, kind in _DECODED_FIELDS.items()]
    decoder = compile_skimmer(stripped, fields)
    if decoder is None:
        return None
    names = [top_names.get(fid) for fid in (0, 1, 3, 4)] + [df_names.get(fid) for fid in _DECODED_FIELDS]
    top = [(i, names[i]) for i in range(4) if i in decoder.found]
    inner = [(i, names[i]) for i in range(4, len(fields)) if i in decoder.found]
    df_name = df_field["name"]

    def build(values: tuple) -> dict:
        record = {name: values[i] for i, name in top}
        record[df_name] = {name: values[i] for i, name in inner}
        return record

    return decoder.skim, build


#: (schema, field ids) -> plan or None; keyed by the schema's identity (the header cache of
#: ``without_logical_types`` hands out one object per schema text)
_SKIM_PLANS: dict[tuple[int, frozenset[int]], tuple[Any, _SkimPlan | None]] = {}


def _skim_plan(schema: dict[str, Any], field_ids: frozenset[int]) -> _SkimPlan | None:
    key = (id(schema), field_ids)
    hit = _SKIM_PLANS.get(key)
    if hit is not None and hit[0] is schema:
        return hit[1]
    wanted = [SkimField((0,), "long"), SkimField((2, 103), "long"), SkimField((2, 142), "long")]
    wanted += [SkimField((2, fid), "map", field_ids) for fid in _METRIC_MAP_IDS]
    stripped = strip_logical_types(schema)
    skimmer = compile_skimmer(stripped, wanted)
    plan = None
    if skimmer is not None:
        decoder = _entry_decoder(stripped)
        plan = _SkimPlan(skimmer.skim, *(decoder or (None, None)), fastavro.parse_schema(stripped))
    if len(_SKIM_PLANS) >= 64:
        _SKIM_PLANS.clear()
    _SKIM_PLANS[key] = (schema, plan)
    return plan


def _kept_records(stripped_data: bytes, plan: _SkimPlan, keep: Callable[[Any], bool] | None, path: str,
                  numbered: bool) -> Iterator[dict | tuple[int, int | None]]:
    """The decoded records of the live entries ``keep`` accepts and, when the manifest gives its
    files row ids (``numbered``), each other live entry's ``(record_count, first_row_id)``: what
    :func:`_entries` needs to number the rows after it."""
    skim, decode, build, writer, read = plan.skim, plan.decode, plan.build, plan.writer, fastavro.schemaless_reader
    metrics = EntryMetrics()
    deleted = int(ManifestEntryStatus.DELETED)
    try:
        for block in fastavro.block_reader(_io.BytesIO(stripped_data)):
            buf = block.bytes_.getvalue()
            fo = _io.BytesIO(buf)
            pos = 0
            if keep is None:  # every live entry, decoded in one pass (status is the first value)
                for _ in range(block.num_records):
                    pos, values = decode(buf, pos)
                    if values[0] != deleted:
                        yield build(values)
                if pos != len(buf):
                    raise ValueError(f"a block holds {len(buf) - pos} bytes past its {block.num_records} records")
                continue
            for _ in range(block.num_records):
                start = pos
                pos, (status, rc, first_row_id, metrics.value_counts, metrics.null_value_counts,
                      metrics.nan_value_counts, metrics.lower_bounds, metrics.upper_bounds) = skim(buf, pos)
                if status == deleted:
                    continue
                metrics.record_count = rc
                if keep(metrics):
                    if decode is None:
                        fo.seek(start)
                        yield read(fo, writer, None)
                        continue
                    end, values = decode(buf, start)
                    if end != pos:
                        raise ValueError(f"an entry read as {end - start} bytes and as {pos - start}")
                    yield build(values)
                elif numbered:
                    yield rc, first_row_id
            if pos != len(buf):
                raise ValueError(f"a block holds {len(buf) - pos} bytes past its {block.num_records} records")
    except (KeyError, IndexError, ValueError, EOFError, TypeError) as e:
        raise InvalidMetadataError(f"corrupt manifest ({type(e).__name__}: {e})", location=path) from e


#: (schema, spec) -> the field names and partition reader of :func:`_entries`; keyed by identity (one
#: schema object per schema text, see ``without_logical_types``), as a table's manifests share a few
_LAYOUTS: dict[tuple[int, int], tuple[Any, Any, tuple[str, ...], Callable[[dict], tuple]]] = {}


def _entry_layout(schema: dict[str, Any], spec: Any | None, path: str) -> tuple[tuple[str, ...], Callable[[dict], tuple]]:
    key = (id(schema), id(spec))
    hit = _LAYOUTS.get(key)
    if hit is not None and hit[0] is schema and hit[1] is spec:
        return hit[2], hit[3]
    top = _names_by_id(schema)
    df_field = next((f for f in schema["fields"] if f.get("field-id") == 2), None)
    if df_field is None:
        raise InvalidMetadataError("manifest schema has no data_file field (id 2)", location=path)
    df_schema = _record_type(df_field["type"])
    dn = _names_by_id(df_schema)
    part_get = _partition_plan(df_schema, spec, named_types(schema))
    names = tuple(top.get(i, "") for i in (0, 1, 3, 4, 2)) + tuple(
        dn.get(i, "\0") for i in (134, 100, 101, 102, 103, 104, 108, 109, 110, 137, 125, 128, 131, 132, 135, 140,
                                  142, 143, 144, 145))
    if len(_LAYOUTS) >= 64:
        _LAYOUTS.clear()
    _LAYOUTS[key] = (schema, spec, names, part_get)
    return names, part_get


def _entries(records: Iterable[dict | tuple[int, int | None]], schema: dict[str, Any], manifest: ManifestFile,
             specs: Mapping[int, Any] | None, skip_deleted: bool) -> Iterator[ManifestEntry]:
    """Manifest entries, inheritance applied, from decoded records of ``schema`` (the file's own,
    logical types stripped from the records); a ``(record_count, first_row_id)`` tuple stands for a
    live entry left out that still takes its row ids."""
    path = manifest.manifest_path
    spec = specs.get(manifest.partition_spec_id) if specs else None
    names, part_get = _entry_layout(schema, spec, path)
    (n_status, n_snap, n_seq, n_fseq, n_df, n_content, n_path, n_fmt, n_part, n_rc, n_size, n_cs, n_vc, n_nc, n_nan,
     n_lb, n_ub, n_km, n_so, n_eq, n_sort, n_frid, n_ref, n_coff, n_csize) = names
    m_snap = manifest.added_snapshot_id
    m_seq = manifest.sequence_number
    spec_id = manifest.partition_spec_id
    next_row_id = manifest.first_row_id if manifest.content == ManifestContent.DATA else None
    ADDED, DELETED = ManifestEntryStatus.ADDED, ManifestEntryStatus.DELETED
    statuses, contents, formats = _STATUSES, _CONTENTS, _FORMATS

    def kv(lst: list | dict | None) -> dict | None:
        # fastavro gives a list of key/value records; the entry decoder the dict itself
        if lst is None or lst.__class__ is dict:
            return lst
        return {d["key"]: d["value"] for d in lst}

    try:
        for r in records:
            if r.__class__ is tuple:  # a live entry left out: it still numbers its rows
                if next_row_id is not None and r[1] is None:
                    next_row_id += r[0]
                continue
            status = statuses[r[n_status]]
            if skip_deleted and status is DELETED:
                continue
            d = r[n_df]
            snap = r.get(n_snap)
            if snap is None:
                snap = m_snap
            seq = r.get(n_seq)
            fseq = r.get(n_fseq)
            if status is ADDED or m_seq == 0:
                if seq is None:
                    seq = m_seq
                if fseq is None:
                    fseq = m_seq
            content = d.get(n_content)
            fmt = d[n_fmt]
            first_row_id = d.get(n_frid)
            if next_row_id is not None and status is not DELETED and first_row_id is None:
                first_row_id = next_row_id
                next_row_id += d[n_rc]
            so = d.get(n_so)
            eq = d.get(n_eq)
            df = DataFile(
                d[n_path],
                formats.get(fmt) or FileFormat(fmt),
                part_get(d[n_part]),
                d[n_rc],
                d[n_size],
                contents[content] if content is not None else FileContent.DATA,
                kv(d.get(n_cs)),
                kv(d.get(n_vc)),
                kv(d.get(n_nc)),
                kv(d.get(n_nan)),
                kv(d.get(n_lb)),
                kv(d.get(n_ub)),
                d.get(n_km),
                None if so is None else tuple(so),
                None if eq is None else tuple(eq),
                d.get(n_sort),
                first_row_id,
                d.get(n_ref),
                d.get(n_coff),
                d.get(n_csize),
                spec_id,
            )
            yield ManifestEntry(status, snap, seq, fseq, df)
    except (KeyError, IndexError, ValueError, EOFError, TypeError) as e:
        raise InvalidMetadataError(f"corrupt manifest ({type(e).__name__}: {e})", location=path) from e


# ------------------------------------------------------------------- copying entries as EXISTING
#: schema attributes that do not change how a value is encoded
_SHAPE_IGNORED = frozenset(("doc", "default", "name", "namespace", "aliases"))
#: the data_file fields a copy decodes (the rest of the struct is copied as bytes)
_COPY_FIELDS = ("content", "file_format", "partition", "record_count")


def _shape(node: Any, named: Mapping[str, Any]) -> Any:
    """What decides an Avro schema's encoding, comparable with ``==``: field names, ids and types
    in order, logical types and their parameters; not docs, defaults or record names."""
    if isinstance(node, str):
        return _shape(named[node], named) if node in named else node
    if isinstance(node, list):
        return tuple(_shape(n, named) for n in node)
    if not isinstance(node, dict):
        return node
    if node.get("type") == "record":
        return ("record", tuple((f["name"], f.get("field-id"), _shape(f["type"], named)) for f in node["fields"]))
    return tuple(sorted(((k, _shape(v, named)) for k, v in node.items() if k not in _SHAPE_IGNORED),
                        key=operator.itemgetter(0)))


def _optional_long(value: int | None) -> bytes:
    return b"\x00" if value is None else b"\x02" + encode_long(value)


def existing_records(
    io: _FileIO,
    manifest: ManifestFile,
    avro_schema: Mapping[str, Any],
    format_version: int,
    *,
    specs: Mapping[int, Any] | None = None,
) -> Iterator[tuple[tuple, int, int | None, bytes]] | None:
    """The live entries of ``manifest`` as EXISTING records encoded in ``avro_schema`` (a
    :class:`ManifestWriter`'s :attr:`~ManifestWriter.avro_schema`), without decoding their metrics.

    Rewriting an entry as EXISTING changes only the entry's own fields: status 0 and the snapshot
    id and sequence numbers made explicit by inheritance (as :func:`read_manifest` fills them in).
    The ``data_file`` struct is copied byte for byte (the file format upper-cased, as the writer
    writes it), so its metrics are never decoded nor re-encoded.  Yields ``(partition, record_count,
    data sequence number, record)`` in file order, for :meth:`ManifestWriter.existing_encoded`.

    In v1 the deprecated ``block_size_in_bytes`` is written as the writer writes it
    (:data:`DEFAULT_BLOCK_SIZE`), the only ``data_file`` field re-encoded besides the format.

    Returns None -- read with :func:`read_manifest` instead -- unless ``format_version`` is 1 or 2
    and the manifest's schema encodes exactly like ``avro_schema`` (v3 makes inherited first row
    ids explicit inside ``data_file``).
    """
    if format_version not in (1, 2):
        return None
    path = manifest.manifest_path
    data = _read_manifest_bytes(io, path)
    try:
        stripped, schema = without_logical_types(data)
    except Exception as e:  # the header parser raises several unrelated types for corrupt files
        raise InvalidMetadataError(f"not a readable Avro file ({type(e).__name__}: {e})", location=path) from e
    plan = _copy_plan(schema, avro_schema)
    if plan is None:
        return None
    if format_version == 1:
        if plan.v1_split is None:
            return None
        return _existing_records_v1(stripped, plan, manifest, specs)
    return _existing_records(stripped, plan, manifest, specs)


class _CopyPlan:
    """What copying entries of one source schema into one target schema needs, built once per pair."""

    __slots__ = ("source", "target", "df_schema", "named", "writer", "projection", "part_getters", "v1_split",
                 "skims")

    def __init__(self, source: dict[str, Any], target: Mapping[str, Any]) -> None:
        self.source, self.target = source, target
        self.named = named_types(source)
        self.df_schema = _resolve(next(f for f in source["fields"] if f["name"] == "data_file")["type"], self.named)
        stripped = strip_logical_types(source)
        self.writer = fastavro.parse_schema(stripped)
        self.projection = fastavro.parse_schema(_copy_projection(stripped))
        self.part_getters: dict[int, Callable[[dict], tuple]] = {}
        self.v1_split = _v1_split(stripped)
        self.skims = _copy_skimmer(stripped)

    def part_get(self, spec: Any | None) -> Callable[[dict], tuple]:
        key = id(spec)
        get = self.part_getters.get(key)
        if get is None:
            get = self.part_getters[key] = _partition_plan(self.df_schema, spec, self.named)
        return get


#: (source schema, target schema) -> plan, or None when they encode differently; keyed by identity
#: (the header cache of ``without_logical_types`` hands out one object per schema text)
_COPY_PLANS: dict[tuple[int, int], tuple[Any, Any, _CopyPlan | None]] = {}


def _copy_plan(source: dict[str, Any], target: Mapping[str, Any]) -> _CopyPlan | None:
    key = (id(source), id(target))
    hit = _COPY_PLANS.get(key)
    if hit is not None and hit[0] is source and hit[1] is target:
        return hit[2]
    same = _shape(source, named_types(source)) == _shape(target, named_types(target))
    plan = _CopyPlan(source, target) if same else None
    if len(_COPY_PLANS) >= 64:
        _COPY_PLANS.clear()
    _COPY_PLANS[key] = (source, target, plan)
    return plan


#: what copying a v2 entry reads of it: status, the three inherited values, and data_file's
#: file_format, partition and record_count
_COPY_SKIM = (SkimField((0,), "long"), SkimField((1,), "long"), SkimField((3,), "long"), SkimField((4,), "long"),
              SkimField((2, 101), "string"), SkimField((2, 102), "record"), SkimField((2, 103), "long"))


def _copy_skimmer(stripped: dict[str, Any]) -> Callable[[bytes, int], tuple[int, tuple]] | None:
    """A skimming reader of what :func:`existing_records` needs of a v2 entry written with
    ``stripped``, or None when the generator does not handle the schema, misses a field, or the
    entry is not laid out as v2's (status, snapshot_id, sequence_number, file_sequence_number,
    data_file: the data_file bytes are the record's tail)."""
    if [f.get("field-id") for f in stripped["fields"]] != [0, 1, 3, 4, 2]:
        return None
    skimmer = compile_skimmer(stripped, _COPY_SKIM)
    if skimmer is None or len(skimmer.found) != len(_COPY_SKIM):
        return None
    return skimmer.skim


def _copy_projection(stripped: dict[str, Any]) -> dict[str, Any]:
    """The stripped entry schema reduced to the fields :func:`existing_records` decodes."""
    fields = []
    for f in stripped["fields"]:
        if f["name"] == "data_file":
            df = dict(f["type"], fields=[g for g in f["type"]["fields"] if g["name"] in _COPY_FIELDS])
            f = dict(f, type=df)
        fields.append(f)
    return dict(stripped, fields=fields)


def _entry_buffers(stripped_data: bytes) -> Iterator[tuple[bytes, _io.BytesIO]]:
    """``(block bytes, stream at the next entry)`` once per entry of an Avro file: the caller reads
    the entry from the stream and slices the bytes it read."""
    for block in fastavro.block_reader(_io.BytesIO(stripped_data)):
        buf = block.bytes_.getvalue()
        fo = _io.BytesIO(buf)
        for _ in range(block.num_records):
            yield buf, fo


def _format_recoded(buf: bytes, start: int, path_at: int, end: int, fmt: str) -> bytes:
    """``buf[start:end]`` (``data_file`` fields) with the ``file_format`` after the ``file_path``
    at ``path_at`` re-encoded upper-cased, as the writer writes it."""
    n, p = decode_long(buf, path_at)
    n_fmt, q = decode_long(buf, p + n)
    canonical = FileFormat(fmt).value.encode()
    return buf[start:p + n] + encode_long(len(canonical)) + canonical + buf[q + n_fmt:end]


def _v1_split(stripped: dict[str, Any]) -> tuple[Any, Any, Any] | None:
    """For a v1 entry schema: the entry read up to ``file_size_in_bytes`` (its fields flattened:
    Avro encodes a nested record as its fields in order), then the ``data_file`` fields after
    ``block_size_in_bytes`` with a reader that keeps none of them; None when the schema has no
    block size or cannot be cut there (the entry is then decoded in full)."""
    top = stripped["fields"]
    if [f["name"] for f in top] != ["status", "snapshot_id", "data_file"]:
        return None
    inner = top[2]["type"]
    names = [g["name"] for g in inner["fields"]] if isinstance(inner, dict) else []
    if "block_size_in_bytes" not in names:
        return None
    cut = names.index("block_size_in_bytes")
    if inner["fields"][cut]["type"] != "long":
        return None
    head = [g for g in inner["fields"][:cut] if g["name"] in _COPY_FIELDS or g["name"] == "file_path"]
    prefix = {"type": "record", "name": "v1_entry_head", "fields": top[:2] + inner["fields"][:cut]}
    wanted = {"type": "record", "name": "v1_entry_head", "fields": top[:2] + head}
    rest = {"type": "record", "name": "v1_entry_tail", "fields": inner["fields"][cut + 1:]}
    try:
        return (fastavro.parse_schema(prefix), fastavro.parse_schema(wanted), fastavro.parse_schema(rest),
                fastavro.parse_schema({"type": "record", "name": "v1_entry_tail", "fields": []}))
    except Exception:  # fastavro raises several types for a schema it cannot cut (named types split)
        return None


def _existing_records_v1(stripped_data: bytes, plan: _CopyPlan, manifest: ManifestFile,
                         specs: Mapping[int, Any] | None) -> Iterator[tuple[tuple, int, int | None, bytes]]:
    path = manifest.manifest_path
    part_get = plan.part_get(specs.get(manifest.partition_spec_id) if specs else None)
    prefix, wanted, rest, nothing = plan.v1_split
    m_snap, m_seq = manifest.added_snapshot_id, manifest.sequence_number
    formats, read, decode = _FORMATS, fastavro.schemaless_reader, decode_long
    block_size = encode_long(DEFAULT_BLOCK_SIZE)
    try:
        for buf, fo in _entry_buffers(stripped_data):
            start = fo.tell()
            r = read(fo, prefix, wanted)
            cut = fo.tell()
            tail = decode(buf, cut)[1]  # past block_size_in_bytes
            fo.seek(tail)
            read(fo, rest, nothing)
            end = fo.tell()
            status = r["status"]
            if status == ManifestEntryStatus.DELETED:
                continue
            pos = decode(buf, start)[1]
            branch, pos = decode(buf, pos)  # snapshot_id: null or long
            if branch:
                pos = decode(buf, pos)[1]
            snap = r["snapshot_id"]
            if snap is None:
                snap = m_snap
            head = b"\x00" + _optional_long(snap)
            fmt = r["file_format"]
            body = buf[pos:cut] if fmt in formats else _format_recoded(buf, pos, pos, cut, fmt)
            yield part_get(r["partition"]), r["record_count"], m_seq, head + body + block_size + buf[tail:end]
    except (KeyError, IndexError, ValueError, EOFError, TypeError) as e:
        raise InvalidMetadataError(f"corrupt manifest ({type(e).__name__}: {e})", location=path) from e


def _existing_records(stripped_data: bytes, plan: _CopyPlan, manifest: ManifestFile,
                      specs: Mapping[int, Any] | None) -> Iterator[tuple[tuple, int, int | None, bytes]]:
    path = manifest.manifest_path
    part_get = plan.part_get(specs.get(manifest.partition_spec_id) if specs else None)
    m_snap, m_seq = manifest.added_snapshot_id, manifest.sequence_number
    formats, decode, deleted = _FORMATS, decode_long, int(ManifestEntryStatus.DELETED)
    added = int(ManifestEntryStatus.ADDED)
    heads: dict[tuple, bytes] = {}  # a manifest's entries mostly share their inherited values
    entries = (_copy_fields_skimmed(stripped_data, plan.skims) if plan.skims is not None
               else _copy_fields_read(stripped_data, plan))
    try:
        for buf, start, end, (status, snap, seq, fseq, fmt, partition, record_count) in entries:
            if status == deleted:
                continue
            pos = decode(buf, start)[1]
            for _ in range(3):  # snapshot_id, sequence_number, file_sequence_number: null or long
                branch, pos = decode(buf, pos)
                if branch:
                    pos = decode(buf, pos)[1]
            if snap is None:
                snap = m_snap
            if status == added or m_seq == 0:
                if seq is None:
                    seq = m_seq
                if fseq is None:
                    fseq = m_seq
            key = (snap, seq, fseq)
            head = heads.get(key)
            if head is None:
                head = heads[key] = b"\x00" + _optional_long(snap) + _optional_long(seq) + _optional_long(fseq)
            # content comes before file_path
            body = buf[pos:end] if fmt in formats else _format_recoded(buf, pos, decode(buf, pos)[1], end, fmt)
            yield part_get(partition), record_count, seq, head + body
    except (KeyError, IndexError, ValueError, EOFError, TypeError, struct.error) as e:
        raise InvalidMetadataError(f"corrupt manifest ({type(e).__name__}: {e})", location=path) from e


#: what :func:`_existing_records` reads of an entry: ``(block bytes, entry start, entry end, (status,
#: snapshot_id, sequence_number, file_sequence_number, file_format, partition, record_count))``
_CopyFields = tuple[bytes, int, int, tuple]


def _copy_fields_skimmed(stripped_data: bytes, skim: Callable[[bytes, int], tuple[int, tuple]]) -> Iterator[_CopyFields]:
    """The fields through the generated reader of :func:`_copy_skimmer` (about half of fastavro's
    time per entry: the metrics it steps over are never built)."""
    for block in fastavro.block_reader(_io.BytesIO(stripped_data)):
        buf = block.bytes_.getvalue()
        pos = 0
        for _ in range(block.num_records):
            start = pos
            pos, values = skim(buf, start)
            yield buf, start, pos, values
        if pos != len(buf):  # the generated skips trust lengths: a block must end where its entries do
            raise ValueError(f"a block of {len(buf)} bytes held {pos} bytes of entries")


def _copy_fields_read(stripped_data: bytes, plan: _CopyPlan) -> Iterator[_CopyFields]:
    """The fields through fastavro's projection (schemas the generator refuses)."""
    writer, projection, read = plan.writer, plan.projection, fastavro.schemaless_reader
    for buf, fo in _entry_buffers(stripped_data):
        start = fo.tell()
        r = read(fo, writer, projection)
        d = r["data_file"]
        yield buf, start, fo.tell(), (r["status"], r["snapshot_id"], r["sequence_number"], r["file_sequence_number"],
                                      d["file_format"], d["partition"], d["record_count"])


def _live_paths_schema(schema: Mapping[str, Any]) -> tuple[dict[str, Any], str, str, str, str]:
    """A reader schema keeping only an entry's status and its file's content and path (by field id),
    with the names of status, data_file, content and file_path; fastavro skips everything else
    without building it."""
    top = {f.get("field-id"): f for f in schema["fields"]}
    status, df_field = top.get(0), top.get(2)
    if status is None or df_field is None:
        raise InvalidMetadataError("manifest schema has no status (id 0) or data_file (id 2) field")
    df_schema = _record_type(df_field["type"])
    inner = {f.get("field-id"): f for f in df_schema["fields"]}
    if 100 not in inner:
        raise InvalidMetadataError("manifest schema has no file_path field (id 100)")
    kept = [inner[i] for i in (134, 100) if i in inner]
    reader = {"type": "record", "name": schema["name"], "fields": [
        status,
        {"name": df_field["name"], "type": {"type": "record", "name": df_schema["name"], "fields": kept}},
    ]}
    return (reader, status["name"], df_field["name"], inner[134]["name"] if 134 in inner else "\0",
            inner[100]["name"])


def manifest_live_paths(io: _FileIO, manifest: ManifestFile) -> Iterator[tuple[str, FileContent]]:
    """``(file_path, content)`` of every live (ADDED or EXISTING) entry of a manifest, decoding only
    those fields: garbage collection needs nothing else and :func:`read_manifest` builds far more."""
    paths: list[str] = []
    contents: list[int | None] = []
    projected = _read_live(io, manifest, paths, contents)
    if projected is not None:
        yield from projected
        return
    kinds = {None: FileContent.DATA, **{int(k): k for k in FileContent}}
    for p, c in zip(paths, contents):
        kind = kinds.get(c)
        if kind is None:
            raise InvalidMetadataError(f"corrupt manifest (content {c} of {p!r} is not 0, 1 or 2)",
                                       location=manifest.manifest_path)
        yield p, kind


def manifest_live_path_list(io: _FileIO, manifest: ManifestFile) -> list[str]:
    """The ``file_path`` of every live entry of a manifest (:func:`manifest_live_paths` without the
    content)."""
    paths: list[str] = []
    projected = _read_live(io, manifest, paths, None)
    return paths if projected is None else [p for p, _ in projected]


def _read_live(io: _FileIO, manifest: ManifestFile, paths: list[str], contents: list[int | None] | None
               ) -> Iterator[tuple[str, FileContent]] | None:
    """Append the live entries' paths (and, unless None, content codes) of a manifest to the lists,
    skimming each entry's bytes; for a schema the skimmer does not handle, return the entries
    read through a fastavro projection instead."""
    path = manifest.manifest_path
    data = _read_manifest_bytes(io, path)
    try:
        stripped, schema = without_logical_types(data)
    except Exception as e:  # the header parser raises several unrelated types for corrupt files
        raise InvalidMetadataError(f"not a readable Avro file ({type(e).__name__}: {e})", location=path) from e
    skim = _live_paths_skimmer(schema)
    if skim is None:
        return _live_paths_projected(data, schema, path)
    avro_codecs.install()
    deleted = int(ManifestEntryStatus.DELETED)
    add_path = paths.append
    add_content = contents.append if contents is not None else None
    try:
        for block in fastavro.block_reader(_io.BytesIO(stripped)):
            buf = block.bytes_.getvalue()
            pos = 0
            for _ in range(block.num_records):
                pos, (status, content, file_path) = skim(buf, pos)
                if status != deleted:
                    add_path(file_path)
                    if add_content is not None:
                        add_content(content)
            if pos != len(buf):
                raise ValueError(f"a block holds {len(buf) - pos} bytes past its {block.num_records} records")
    except (KeyError, IndexError, ValueError, EOFError, TypeError) as e:
        raise InvalidMetadataError(f"corrupt manifest ({type(e).__name__}: {e})", location=path) from e
    return None


#: what garbage collection reads of an entry: status, then data_file's content and file_path
_LIVE_PATH_FIELDS = (SkimField((0,), "long"), SkimField((2, 134), "long"), SkimField((2, 100), "string"))
#: schema -> its live-paths skimmer, or None (read through the fastavro projection instead); keyed by
#: identity (the header cache of ``without_logical_types`` hands out one object per schema text)
_LIVE_PATH_SKIMMERS: dict[int, tuple[Any, Callable[[bytes, int], tuple[int, tuple]] | None]] = {}


def _live_paths_skimmer(schema: dict[str, Any]) -> Callable[[bytes, int], tuple[int, tuple]] | None:
    """The skimming reader of status, content and file_path for manifests written with ``schema``,
    or None when the generator does not handle the schema or the schema lacks status or file_path
    (the projection then reads it, or names what is missing)."""
    hit = _LIVE_PATH_SKIMMERS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    skimmer = compile_skimmer(strip_logical_types(schema), _LIVE_PATH_FIELDS)
    # without status or file_path the skimmer would answer None: let the projection raise instead
    skim = skimmer.skim if skimmer is not None and {0, 2} <= skimmer.found else None
    if len(_LIVE_PATH_SKIMMERS) >= 64:
        _LIVE_PATH_SKIMMERS.clear()
    _LIVE_PATH_SKIMMERS[id(schema)] = (schema, skim)
    return skim


def _live_paths_projected(data: bytes, schema: dict[str, Any], path: str) -> Iterator[tuple[str, FileContent]]:
    """:func:`manifest_live_paths` through fastavro with a reader schema of the three fields (for a
    schema the skimmer does not handle)."""
    _open_avro(data, path, strip=False)  # a readable container, or InvalidMetadataError naming the file
    try:
        projection, n_status, n_df, n_content, n_path = _live_paths_schema(schema)
        records = fastavro.reader(_io.BytesIO(data), reader_schema=projection)
        deleted = int(ManifestEntryStatus.DELETED)
        contents = _CONTENTS
        for r in records:
            if r[n_status] == deleted:
                continue
            d = r[n_df]
            content = d.get(n_content)
            yield d[n_path], (
                FileContent.DATA if content is None else contents[content])
    except InvalidMetadataError as e:
        raise InvalidMetadataError(str(e), location=path) from e
    except (KeyError, IndexError, ValueError, EOFError, TypeError) as e:
        raise InvalidMetadataError(f"corrupt manifest ({type(e).__name__}: {e})", location=path) from e