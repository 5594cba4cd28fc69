"""The manifest model (spec "Manifests", "Manifest Lists"): the ``data_file`` struct, manifest
entries, manifest-list rows and their enums, as frozen dataclasses in the package's value
representation (see :mod:`procedures.spec.types`): partition tuples in spec order, dates as int
days, timestamps as int micros, decimals as ``Decimal``, uuids as ``uuid.UUID``.

No Avro here: :mod:`procedures.spec.manifest.reader` and :mod:`~procedures.spec.manifest.writer`
read and write manifests, :mod:`~procedures.spec.manifest.manifest_list` manifest lists.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, fields as dataclass_fields
from enum import Enum, IntEnum

__all__ = [
    "UNASSIGNED_SEQ", "DEFAULT_BLOCK_SIZE", "FileContent", "ManifestContent", "ManifestEntryStatus", "FileFormat",
    "FILE_CONTENTS", "ENTRY_STATUSES", "FORMATS_BY_NAME", "DataFile", "ManifestEntry", "FieldSummary",
    "ManifestFile",
]

#: sequence number of a manifest written but not yet committed; the manifest list writer replaces it
UNASSIGNED_SEQ = -1
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


#: the members by value, for readers that look a decoded int up in a hot loop
FILE_CONTENTS = tuple(FileContent)
ENTRY_STATUSES = tuple(ManifestEntryStatus)
#: the members by their written (upper-case) value; other spellings go through ``FileFormat(value)``
FORMATS_BY_NAME = {f.value: f for f in FileFormat}


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
    sequence numbers, and the file.  After :func:`~procedures.spec.manifest.reader.read_manifest`
    inheritance has been applied."""

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
