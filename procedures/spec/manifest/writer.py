"""Writing manifests (spec "Manifests"; on-disk notes sections 1-3) as Java 1.10 does: the Avro
schemas of :mod:`procedures.spec.avro_schemas`, Java's header key/value metadata, null sequence
numbers for entries added by the writing commit, and partition field summaries with Java's NaN and
signed-zero rules.  A large manifest can be written in parts by several tasks and joined.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import fastavro

from procedures.errors import ValidationError
from procedures.spec import avro_codecs
from procedures.spec.avro_schemas import check_format_version, manifest_entry_avro_schema, sanitize_name
from procedures.spec.conversions import to_bytes
from procedures.spec.manifest.avro_container import (
    MetadataIO, avro_blocks, avro_codec, avro_header, write_avro, write_encoded_avro,
)
from procedures.spec.manifest.model import (
    DEFAULT_BLOCK_SIZE, UNASSIGNED_SEQ, DataFile, FieldSummary, FileContent, FileFormat, ManifestContent,
    ManifestEntry, ManifestEntryStatus, ManifestFile,
)
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

__all__ = ["ManifestWriter", "ManifestPart"]

# ------------------------------------------------------------------- partition value codecs
def _to_avro_converter(t: IcebergType) -> Callable[[Any], Any] | None:
    if isinstance(t, DecimalType):
        size, scale = decimal_required_bytes(t.precision), t.scale
        return lambda v: None if v is None else int(v.scaleb(scale)).to_bytes(size, "big", signed=True)
    if isinstance(t, UUIDType):
        return lambda v: None if v is None else v.bytes
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
    numbers are :data:`UNASSIGNED_SEQ` until
    :func:`~procedures.spec.manifest.manifest_list.write_manifest_list` fills them in.

    One large manifest can be written by several writers given the same ``sync_marker`` (16 bytes):
    each encodes a run of the entries and ends with :meth:`close_part`, and one joins the parts with
    :meth:`close_parts`.
    """

    def __init__(
        self,
        io: MetadataIO,
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
        """Append an EXISTING entry already encoded in :attr:`avro_schema` (by rewrite_manifests'
        byte-level copy, :func:`procedures.core.manifest_rewrite.entry_copy.existing_records`); the values
        are the entry's, for the manifest's counts and partition summaries."""
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
            data = write_encoded_avro(self._avro_schema, self._records, self._metadata(), self._codec,
                                       self._level, self._sync)
        else:
            data = write_avro(self._avro_schema, self._records, self._metadata(), self._codec, self._level)
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
        blocks = avro_blocks(fastavro.parse_schema(self._avro_schema), self._records, avro_codec(self._codec),
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
        codec = avro_codec(self._codec)
        out = [avro_header(parsed, self._metadata(), codec, self._level, self._sync)]
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
        out.append(avro_blocks(parsed, self._records, codec, self._level, self._sync))
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
