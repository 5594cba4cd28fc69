"""Table properties: every property the package reads, its default and a typed accessor.

Iceberg keeps a table's configuration in string properties (Java's ``TableProperties``, read through
``PropertyUtil``).  Each one we read is declared here once, with Java's default (or ours, where the
docstring of the declaration says why it differs), and read only through its declaration::

    GC_ENABLED.read(md.properties)                     # bool
    MIN_SNAPSHOTS_TO_KEEP.read(md.properties)          # int
    WRITE_TARGET_FILE_SIZE_BYTES.read(md.properties)   # bytes, an int
    MAX_SNAPSHOT_AGE_MS.read(md.properties)            # a duration in milliseconds, an int

Parsing follows Java: a boolean is true only for ``true`` in any case (``Boolean.parseBoolean``:
no trimming, so `` true`` is false), an integer that does not parse is the user's configuration
error, reported as a :class:`~procedures.errors.ValidationError` naming the property (not a bare
``ValueError``).  ``tests/unit/test_table_properties.py`` fails when a property is read by its key
anywhere else.

Rules that hang on a single property live here too, so that they exist once:
:func:`require_gc_enabled` (every procedure that deletes files refuses a table with
``gc.enabled=false``, with one message).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Mapping, TypeVar

from procedures.errors import ValidationError
from procedures.spec.name_mapping import DEFAULT_NAME_MAPPING_PROPERTY

__all__ = [
    "TableProperty", "BoolProperty", "IntProperty", "BytesProperty", "DurationProperty", "StringProperty",
    "ChoiceProperty", "PathProperty", "OptionalIntProperty", "TABLE_PROPERTIES", "parse_bool", "require_gc_enabled", "gc_disabled_message",
    "METRICS_MODE_COLUMN_PREFIX",
    # commit
    "COMMIT_NUM_RETRIES", "COMMIT_MIN_RETRY_WAIT_MS", "COMMIT_MAX_RETRY_WAIT_MS", "COMMIT_TOTAL_RETRY_TIME_MS",
    "RETRY_PROPERTIES",
    "MANIFEST_TARGET_SIZE_BYTES", "MANIFEST_MIN_MERGE_COUNT", "MANIFEST_MERGE_ENABLED",
    # write
    "DEFAULT_FILE_FORMAT", "PARQUET_ROW_GROUP_SIZE_BYTES", "PARQUET_PAGE_SIZE_BYTES", "PARQUET_PAGE_ROW_LIMIT",
    "PARQUET_DICT_SIZE_BYTES", "PARQUET_COMPRESSION", "PARQUET_COMPRESSION_LEVEL", "AVRO_COMPRESSION",
    "AVRO_COMPRESSION_LEVEL", "ORC_COMPRESSION", "WRITE_TARGET_FILE_SIZE_BYTES", "WRITE_DISTRIBUTION_MODE",
    "DELETE_DISTRIBUTION_MODE", "UPDATE_DISTRIBUTION_MODE", "MERGE_DISTRIBUTION_MODE", "DELETE_TARGET_FILE_SIZE_BYTES",
    "DELETE_GRANULARITY", "DELETE_MODE", "WRITE_DATA_LOCATION", "OBJECT_STORE_PATH", "WRITE_FOLDER_STORAGE_LOCATION",
    "WRITE_METADATA_LOCATION", "WRITE_PATH_PROPERTIES", "DATA_PATH_PROPERTIES", "METADATA_COMPRESSION", "METADATA_PREVIOUS_VERSIONS_MAX",
    "METADATA_DELETE_AFTER_COMMIT_ENABLED", "DEFAULT_WRITE_METRICS_MODE", "METRICS_MAX_INFERRED_COLUMN_DEFAULTS",
    "DEFAULT_NAME_MAPPING",
    # read
    "SPLIT_SIZE", "SPLIT_OPEN_FILE_COST", "SPLIT_LOOKBACK", "READ_NATIVE_PARQUET_ENABLED",
    # history and garbage collection
    "GC_ENABLED", "MAX_SNAPSHOT_AGE_MS", "MIN_SNAPSHOTS_TO_KEEP", "MAX_REF_AGE_MS",
    # compatibility, engines, reserved
    "SNAPSHOT_ID_INHERITANCE_ENABLED", "HIVE_LOCK_ENABLED", "FORMAT_VERSION",
]

T = TypeVar("T")
MIB = 1024 * 1024
#: Java's ``Long.MAX_VALUE``, the default of ``history.expire.max-ref-age-ms`` (refs never age out)
LONG_MAX = 2**63 - 1


def parse_bool(value: str | None, default: bool) -> bool:
    """A property value as Java's ``PropertyUtil.propertyAsBoolean`` reads it: ``default`` when
    unset, else true only for ``true`` in any case (``Boolean.parseBoolean``, no trimming)."""
    if value is None:
        return default
    return str(value).lower() == "true"


@dataclass(frozen=True)
class TableProperty(Generic[T]):
    """One table property: its key, its default and how its string value is read."""

    key: str
    default: T
    doc: str = ""

    def raw(self, props: Mapping[str, str]) -> str | None:
        """The value as stored, or None when unset."""
        value = props.get(self.key)
        return None if value is None else str(value)

    def is_set(self, props: Mapping[str, str]) -> bool:
        """Whether the table sets this property at all."""
        return self.key in props

    def read(self, props: Mapping[str, str]) -> T:
        """The typed value of this property in ``props`` (the default when unset)."""
        raw = self.raw(props)
        return self.default if raw is None else self.parse(raw)

    def parse(self, raw: str) -> T:
        """``raw`` (a set value) as this property's type."""
        raise NotImplementedError

    def invalid(self, raw: Any, expected: str) -> ValidationError:
        """The error for a value that does not read as this property's type."""
        return ValidationError(f"Table property {self.key} must be {expected}, got {raw!r}")


@dataclass(frozen=True)
class BoolProperty(TableProperty[bool]):
    """A boolean read as Java does (:func:`parse_bool`)."""

    def parse(self, raw: str) -> bool:
        """True only for ``true`` in any case."""
        return parse_bool(raw, self.default)

    def setting(self, props: Mapping[str, str]) -> bool | None:
        """The table's own setting, or None when unset (for settings a catalog defaults)."""
        raw = self.raw(props)
        return None if raw is None else self.parse(raw)


@dataclass(frozen=True)
class IntProperty(TableProperty[int]):
    """An integer; ``minimum`` (when given) is the least value accepted."""

    minimum: int | None = None

    def read(self, props: Mapping[str, str], *, minimum: int | None = None) -> int:
        """The value (the default when unset); refuses a non-integer and a value below ``minimum``
        (the declared one, or a stricter one a reader needs)."""
        value = super().read(props)
        bounds = [m for m in (self.minimum, minimum) if m is not None]
        least = max(bounds) if bounds else None
        if value is not None and least is not None and value < least:
            raise ValidationError(f"Table property {self.key} must be at least {least}, got {value}")
        return value

    def parse(self, raw: str) -> int:
        """``raw`` as an integer."""
        try:
            return int(raw)
        except (TypeError, ValueError):
            raise self.invalid(raw, "an integer") from None


@dataclass(frozen=True)
class BytesProperty(IntProperty):
    """A size in bytes (a plain integer, as in Java)."""


@dataclass(frozen=True)
class DurationProperty(IntProperty):
    """A duration in milliseconds (a plain integer, as in Java)."""


@dataclass(frozen=True)
class OptionalIntProperty(IntProperty):
    """An integer with no default (None when unset), such as a compression level."""


@dataclass(frozen=True)
class StringProperty(TableProperty["str | None"]):
    """A string taken as it is (None when unset and without default)."""

    def parse(self, raw: str) -> str:
        """``raw`` unchanged."""
        return raw


@dataclass(frozen=True)
class PathProperty(TableProperty["str | None"]):
    """A folder; an empty value counts as unset."""

    def parse(self, raw: str) -> str | None:
        """``raw`` as it is, or None when empty."""
        return raw or None


@dataclass(frozen=True)
class ChoiceProperty(TableProperty[str]):
    """One of a few words, compared trimmed and case-insensitively; returned in lower case."""

    choices: tuple[str, ...] = ()

    def read(self, props: Mapping[str, str], *, choices: tuple[str, ...] | None = None) -> str:
        """The value in lower case (the default when unset); refuses a value outside
        ``choices`` (the declared ones unless the reader, which knows what it supports, passes them)."""
        value = super().read(props)
        allowed = tuple(choices if choices is not None else self.choices)
        if allowed and value not in allowed:
            shown = ", ".join(allowed[:-1]) + f" or {allowed[-1]}" if len(allowed) > 1 else allowed[0]
            raise ValidationError(f"Table property {self.key}={value!r} is not supported; use {shown}")
        return value

    def parse(self, raw: str) -> str:
        """``raw`` trimmed and in lower case."""
        return raw.strip().lower()


# ------------------------------------------------------------------------------------ commit
COMMIT_NUM_RETRIES = IntProperty("commit.retry.num-retries", 4, "retries of a commit that lost a race", minimum=0)
COMMIT_MIN_RETRY_WAIT_MS = DurationProperty("commit.retry.min-wait-ms", 100, "first retry backoff", minimum=0)
COMMIT_MAX_RETRY_WAIT_MS = DurationProperty("commit.retry.max-wait-ms", 60_000, "largest retry backoff", minimum=0)
COMMIT_TOTAL_RETRY_TIME_MS = DurationProperty("commit.retry.total-timeout-ms", 30 * 60_000,
                                              "time after which a commit stops retrying", minimum=0)
#: the retry policy of a commit, also accepted as catalog properties
RETRY_PROPERTIES = (COMMIT_NUM_RETRIES, COMMIT_MIN_RETRY_WAIT_MS, COMMIT_MAX_RETRY_WAIT_MS, COMMIT_TOTAL_RETRY_TIME_MS)
MANIFEST_TARGET_SIZE_BYTES = BytesProperty("commit.manifest.target-size-bytes", 8 * MIB,
                                           "size merged and rewritten manifests aim at")
MANIFEST_MIN_MERGE_COUNT = IntProperty("commit.manifest.min-count-to-merge", 100,
                                       "manifests of a spec a merging commit tolerates before merging them")
MANIFEST_MERGE_ENABLED = BoolProperty("commit.manifest-merge.enabled", True, "whether appends merge manifests")

# ------------------------------------------------------------------------------------ write
DEFAULT_FILE_FORMAT = ChoiceProperty("write.format.default", "parquet", "format of new data files",
                                     choices=("parquet", "orc", "avro"))
PARQUET_ROW_GROUP_SIZE_BYTES = BytesProperty("write.parquet.row-group-size-bytes", 128 * MIB)
PARQUET_PAGE_SIZE_BYTES = BytesProperty("write.parquet.page-size-bytes", MIB)
PARQUET_PAGE_ROW_LIMIT = IntProperty("write.parquet.page-row-limit", 20_000)
PARQUET_DICT_SIZE_BYTES = BytesProperty("write.parquet.dict-size-bytes", 2 * MIB)
PARQUET_COMPRESSION = ChoiceProperty(
    "write.parquet.compression-codec", "zstd",
    "Java's constant says gzip, but Java has set zstd on every table it creates since 1.4; so do we",
    choices=("zstd", "gzip", "snappy", "lz4", "brotli", "uncompressed", "none"))
PARQUET_COMPRESSION_LEVEL = OptionalIntProperty("write.parquet.compression-level", None)
AVRO_COMPRESSION = ChoiceProperty("write.avro.compression-codec", "gzip", "the Avro writer passes the codecs it has")
AVRO_COMPRESSION_LEVEL = OptionalIntProperty("write.avro.compression-level", None)
ORC_COMPRESSION = ChoiceProperty("write.orc.compression-codec", "zlib", "the ORC writer passes the codecs it has")
WRITE_TARGET_FILE_SIZE_BYTES = BytesProperty("write.target-file-size-bytes", 512 * MIB, "data files roll at this size")
WRITE_DISTRIBUTION_MODE = ChoiceProperty(
    "write.distribution-mode", "", "how an append's rows are shuffled before they are written "
    "(procedures.core.kernel.distribution)", choices=("none", "hash", "range"))
DELETE_DISTRIBUTION_MODE = ChoiceProperty(
    "write.delete.distribution-mode", "", "a DELETE's mode (unset: hash)", choices=("none", "hash", "range"))
UPDATE_DISTRIBUTION_MODE = ChoiceProperty(
    "write.update.distribution-mode", "", "an UPDATE's mode (unset: hash)", choices=("none", "hash", "range"))
MERGE_DISTRIBUTION_MODE = ChoiceProperty(
    "write.merge.distribution-mode", "", "a MERGE's mode (unset: hash on a partitioned table)",
    choices=("none", "hash", "range"))
DELETE_TARGET_FILE_SIZE_BYTES = BytesProperty("write.delete.target-file-size-bytes", 64 * MIB)
DELETE_GRANULARITY = ChoiceProperty(
    "write.delete.granularity", "file",
    "position deletes in one file per data file (file, the effective default of Java's Spark writers "
    "since 1.8) or per partition", choices=("file", "partition"))
DELETE_MODE = ChoiceProperty("write.delete.mode", "copy-on-write", "how DELETE rewrites partly matching files",
                             choices=("copy-on-write", "merge-on-read"))
WRITE_DATA_LOCATION = PathProperty("write.data.path", None, "where data files go")
OBJECT_STORE_PATH = PathProperty("write.object-storage.path", None, "deprecated spelling of write.data.path")
WRITE_FOLDER_STORAGE_LOCATION = PathProperty("write.folder-storage.path", None, "deprecated spelling of write.data.path")
WRITE_METADATA_LOCATION = PathProperty("write.metadata.path", None, "where metadata files go")
#: the properties naming folders a table writes to besides its location (Java's list of path properties)
WRITE_PATH_PROPERTIES = (WRITE_DATA_LOCATION, WRITE_METADATA_LOCATION, WRITE_FOLDER_STORAGE_LOCATION, OBJECT_STORE_PATH)
#: where data files go: the first of these that is set
DATA_PATH_PROPERTIES = (WRITE_DATA_LOCATION, OBJECT_STORE_PATH, WRITE_FOLDER_STORAGE_LOCATION)
METADATA_COMPRESSION = ChoiceProperty("write.metadata.compression-codec", "none", choices=("none", "gzip"))
METADATA_PREVIOUS_VERSIONS_MAX = IntProperty("write.metadata.previous-versions-max", 100,
                                             "previous metadata files the metadata log keeps (Java keeps at least 1)")
METADATA_DELETE_AFTER_COMMIT_ENABLED = BoolProperty("write.metadata.delete-after-commit.enabled", False,
                                                    "delete the metadata files a commit drops from the log")
DEFAULT_WRITE_METRICS_MODE = StringProperty(
    "write.metadata.metrics.default", None,
    "Java's default is truncate(16); unset, the first max-inferred-column-defaults columns get it")
METRICS_MAX_INFERRED_COLUMN_DEFAULTS = IntProperty("write.metadata.metrics.max-inferred-column-defaults", 100)
#: ``write.metadata.metrics.column.<name>``: one column's metrics mode
METRICS_MODE_COLUMN_PREFIX = "write.metadata.metrics.column."
DEFAULT_NAME_MAPPING = StringProperty(DEFAULT_NAME_MAPPING_PROPERTY, None, "JSON name mapping for files without ids")

# ------------------------------------------------------------------------------------ read
SPLIT_SIZE = BytesProperty("read.split.target-size", 128 * MIB)
SPLIT_OPEN_FILE_COST = BytesProperty("read.split.open-file-cost", 4 * MIB)
SPLIT_LOOKBACK = IntProperty("read.split.planning-lookback", 10)
READ_NATIVE_PARQUET_ENABLED = BoolProperty(
    "read.native-parquet.enabled", False,
    "ours: let Spark's own Parquet reader read scans where that is exactly right (procedures.core.native_route); "
    "off by default: Spark lists every file it is handed, 4x slower than our reader at 2,000 files")

# ------------------------------------------------------------------------------------ history, GC
GC_ENABLED = BoolProperty("gc.enabled", True, "whether procedures may delete the table's files")
MAX_SNAPSHOT_AGE_MS = DurationProperty("history.expire.max-snapshot-age-ms", 5 * 24 * 60 * 60 * 1000)
MIN_SNAPSHOTS_TO_KEEP = IntProperty("history.expire.min-snapshots-to-keep", 1)
MAX_REF_AGE_MS = DurationProperty("history.expire.max-ref-age-ms", LONG_MAX)

# ------------------------------------------------------------------------------------ compatibility, engines
SNAPSHOT_ID_INHERITANCE_ENABLED = BoolProperty("compatibility.snapshot-id-inheritance.enabled", False)
HIVE_LOCK_ENABLED = BoolProperty("engine.hive.lock-enabled", True, "unset, the catalog's lock-enabled decides")
FORMAT_VERSION = IntProperty("format-version", 2, "reserved: asked for at create, never stored")

#: every declared property by key
TABLE_PROPERTIES: dict[str, TableProperty[Any]] = {
    p.key: p for p in globals().copy().values() if isinstance(p, TableProperty)
}


# ------------------------------------------------------------------------------------ rules
def gc_disabled_message(action: str) -> str:
    """Why ``action`` (``expire snapshots``, ``delete orphan files``, ...) is refused on a table with
    ``gc.enabled=false`` (Java's words)."""
    return f"Cannot {action}: GC is disabled (deleting files may corrupt other tables)"


def require_gc_enabled(props: Mapping[str, str], action: str, *, advice: str = "") -> None:
    """Refuse ``action`` unless ``gc.enabled`` is true: the table's files may be shared with another
    table (a snapshot table's are its source's), so nothing of it may be deleted.  ``advice`` is
    appended to the message."""
    if not GC_ENABLED.read(props):
        raise ValidationError(gc_disabled_message(action) + advice)
