"""Snapshots, refs and the history logs of table metadata (spec "Snapshots", "Snapshot
References", table-metadata fields ``snapshot-log`` / ``metadata-log``, Appendix C JSON).

The JSON codecs follow Java 1.10's ``SnapshotParser`` and ``SnapshotRefParser`` so files we
write read back identically in Java, PyIceberg and DuckDB:

* ``sequence-number`` is written only when it is greater than 0 (readers default it to 0);
* ``summary`` always carries ``operation`` first; a snapshot without one is read as
  ``overwrite``, as Java does;
* ``first-row-id``, ``added-rows`` and ``key-id`` belong to v3 and are written only for v3;
* unknown snapshot keys (and the v1 embedded ``manifests`` list) are kept in ``extra`` and written
  back, so a round trip never drops what another writer put there.

The summary-key constants are Java's ``SnapshotSummary`` names; :func:`apply_totals` keeps the
``total-*`` counters the way Java's snapshot producer does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping

from procedures.errors import InvalidMetadataError

__all__ = [
    "Operation",
    "Snapshot",
    "SnapshotRefType",
    "SnapshotRef",
    "SnapshotLogEntry",
    "MetadataLogEntry",
    "MAIN_BRANCH",
    "snapshot_to_json",
    "snapshot_from_json",
    "ref_to_json",
    "ref_from_json",
    "snapshot_log_entry_to_json",
    "snapshot_log_entry_from_json",
    "metadata_log_entry_to_json",
    "metadata_log_entry_from_json",
    "apply_totals",
    "TOTAL_PAIRS",
]

#: the branch that always tracks ``current-snapshot-id``
MAIN_BRANCH = "main"


class Operation(str, Enum):
    """The ``operation`` of a snapshot summary (a ``str`` so it compares equal to the JSON text)."""

    APPEND = "append"
    REPLACE = "replace"
    OVERWRITE = "overwrite"
    DELETE = "delete"

    def __str__(self) -> str:
        return self.value


# ------------------------------------------------------------------ summary keys (Java SnapshotSummary)
OPERATION = "operation"
ADDED_DATA_FILES = "added-data-files"
DELETED_DATA_FILES = "deleted-data-files"
TOTAL_DATA_FILES = "total-data-files"
ADDED_DELETE_FILES = "added-delete-files"
REMOVED_DELETE_FILES = "removed-delete-files"
TOTAL_DELETE_FILES = "total-delete-files"
ADDED_POS_DELETE_FILES = "added-position-delete-files"
REMOVED_POS_DELETE_FILES = "removed-position-delete-files"
ADDED_EQ_DELETE_FILES = "added-equality-delete-files"
REMOVED_EQ_DELETE_FILES = "removed-equality-delete-files"
ADDED_DVS = "added-dvs"
REMOVED_DVS = "removed-dvs"
ADDED_RECORDS = "added-records"
DELETED_RECORDS = "deleted-records"
TOTAL_RECORDS = "total-records"
ADDED_FILE_SIZE = "added-files-size"
REMOVED_FILE_SIZE = "removed-files-size"
TOTAL_FILE_SIZE = "total-files-size"
ADDED_POS_DELETES = "added-position-deletes"
REMOVED_POS_DELETES = "removed-position-deletes"
TOTAL_POS_DELETES = "total-position-deletes"
ADDED_EQ_DELETES = "added-equality-deletes"
REMOVED_EQ_DELETES = "removed-equality-deletes"
TOTAL_EQ_DELETES = "total-equality-deletes"
CHANGED_PARTITION_COUNT = "changed-partition-count"
DELETED_DUPLICATE_FILES = "deleted-duplicate-files"
MANIFESTS_CREATED = "manifests-created"
MANIFESTS_KEPT = "manifests-kept"
MANIFESTS_REPLACED = "manifests-replaced"
ENTRIES_PROCESSED = "entries-processed"
ENGINE_NAME = "engine-name"
ENGINE_VERSION = "engine-version"
APP_ID = "app-id"
#: what Iceberg Java's Spark writes (not its procedures) add: the Spark application id again
SPARK_APP_ID = "spark.app.id"
ICEBERG_VERSION = "iceberg-version"
STAGED_WAP_ID = "wap.id"
PUBLISHED_WAP_ID = "published-wap-id"
SOURCE_SNAPSHOT_ID = "source-snapshot-id"
REPLACE_PARTITIONS = "replace-partitions"

#: ``(total key, added key, removed key)`` for every counter Java carries from parent to child
TOTAL_PAIRS: tuple[tuple[str, str, str], ...] = (
    (TOTAL_RECORDS, ADDED_RECORDS, DELETED_RECORDS),
    (TOTAL_FILE_SIZE, ADDED_FILE_SIZE, REMOVED_FILE_SIZE),
    (TOTAL_DATA_FILES, ADDED_DATA_FILES, DELETED_DATA_FILES),
    (TOTAL_DELETE_FILES, ADDED_DELETE_FILES, REMOVED_DELETE_FILES),
    (TOTAL_POS_DELETES, ADDED_POS_DELETES, REMOVED_POS_DELETES),
    (TOTAL_EQ_DELETES, ADDED_EQ_DELETES, REMOVED_EQ_DELETES),
)


def apply_totals(summary: Mapping[str, str], previous_summary: Mapping[str, str] | None) -> dict[str, str]:
    """``summary`` plus the ``total-*`` counters derived from the parent's summary.

    ``previous_summary`` is the parent snapshot's summary, or ``None`` for the first snapshot of
    the table (then every total starts at 0).  As in Java, a total the parent does not carry is
    left out rather than guessed, and a total that would turn negative is dropped: both mean
    the counters were lost somewhere in history, and a wrong ``total-records`` misleads engines
    that use it for statistics.
    """
    prev = {k: "0" for k, _, _ in TOTAL_PAIRS} if previous_summary is None else previous_summary
    out = dict(summary)
    for total_key, added_key, removed_key in TOTAL_PAIRS:
        base = prev.get(total_key)
        if base is None:
            out.pop(total_key, None)
            continue
        try:
            total = int(base) + int(summary.get(added_key, 0)) - int(summary.get(removed_key, 0))
        except ValueError:
            out.pop(total_key, None)
            continue
        if total >= 0:
            out[total_key] = str(total)
        else:
            out.pop(total_key, None)
    return out


# ------------------------------------------------------------------ model
@dataclass(frozen=True, slots=True)
class Snapshot:
    """One snapshot of the table: its manifest list, lineage and summary.

    ``summary`` holds every summary entry including ``operation``.  ``first_row_id`` and
    ``added_rows`` are the v3 row-lineage fields; ``key_id`` names the encryption key of the
    manifest list.  ``extra`` keeps JSON keys this model does not know (for example a v1
    embedded ``manifests`` list) so they survive a round trip.
    """

    snapshot_id: int
    parent_snapshot_id: int | None
    sequence_number: int
    timestamp_ms: int
    manifest_list: str | None
    summary: dict[str, str] = field(default_factory=lambda: {OPERATION: Operation.APPEND.value})
    schema_id: int | None = None
    first_row_id: int | None = None
    added_rows: int | None = None
    key_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash(self.snapshot_id)

    @property
    def operation(self) -> Operation | str | None:
        """The summary's operation as an :class:`Operation` (the raw text if it is not one)."""
        op = self.summary.get(OPERATION)
        if op is None:
            return None
        try:
            return Operation(op)
        except ValueError:
            return op


class SnapshotRefType(str, Enum):
    """Kind of a named reference."""

    BRANCH = "branch"
    TAG = "tag"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class SnapshotRef:
    """A branch or tag pointing at a snapshot, with its retention settings.

    ``min_snapshots_to_keep`` and ``max_snapshot_age_ms`` apply to branches only;
    ``max_ref_age_ms`` to any ref except ``main``.  ``None`` means "use the table default".
    """

    snapshot_id: int
    ref_type: SnapshotRefType = SnapshotRefType.BRANCH
    min_snapshots_to_keep: int | None = None
    max_snapshot_age_ms: int | None = None
    max_ref_age_ms: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.ref_type, SnapshotRefType):
            object.__setattr__(self, "ref_type", SnapshotRefType(self.ref_type))
        if self.ref_type is SnapshotRefType.TAG:
            if self.min_snapshots_to_keep is not None:
                raise InvalidMetadataError(
                    f"tag on snapshot {self.snapshot_id} cannot set min-snapshots-to-keep; only branches keep ancestors")
            if self.max_snapshot_age_ms is not None:
                raise InvalidMetadataError(
                    f"tag on snapshot {self.snapshot_id} cannot set max-snapshot-age-ms; only branches keep ancestors")
        for name in ("min_snapshots_to_keep", "max_snapshot_age_ms", "max_ref_age_ms"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise InvalidMetadataError(
                    f"ref on snapshot {self.snapshot_id}: {name.replace('_', '-')} must be greater than 0, got {value}")

    @property
    def is_branch(self) -> bool:
        """True for a branch."""
        return self.ref_type is SnapshotRefType.BRANCH

    @property
    def is_tag(self) -> bool:
        """True for a tag."""
        return self.ref_type is SnapshotRefType.TAG


@dataclass(frozen=True, slots=True)
class SnapshotLogEntry:
    """An entry of ``snapshot-log``: when the current snapshot became ``snapshot_id``."""

    timestamp_ms: int
    snapshot_id: int


@dataclass(frozen=True, slots=True)
class MetadataLogEntry:
    """An entry of ``metadata-log``: a previous metadata file and its ``last-updated-ms``."""

    timestamp_ms: int
    metadata_file: str


# ------------------------------------------------------------------ JSON
_SNAPSHOT_KEYS = frozenset({
    "sequence-number", "snapshot-id", "parent-snapshot-id", "timestamp-ms", "summary",
    "manifest-list", "schema-id", "first-row-id", "added-rows", "key-id",
})


def _req_int(obj: Mapping[str, Any], key: str, what: str) -> int:
    value = obj.get(key)
    if value is None:
        raise InvalidMetadataError(f"{what} is missing required field {key!r}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidMetadataError(f"{what}: {key!r} must be an integer, got {value!r}")
    return value


def _opt_int(obj: Mapping[str, Any], key: str, what: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidMetadataError(f"{what}: {key!r} must be an integer, got {value!r}")
    return value


def _string_value(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    # Some writers put numbers or booleans in string maps; keep their JSON text rather than fail.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    raise InvalidMetadataError(f"{where} must be a string, got {value!r}")


def snapshot_to_json(snapshot: Snapshot, format_version: int = 2) -> dict[str, Any]:
    """The JSON object of a snapshot in Java's key order for the given table format version."""
    out: dict[str, Any] = {}
    if snapshot.sequence_number > 0:
        out["sequence-number"] = snapshot.sequence_number
    out["snapshot-id"] = snapshot.snapshot_id
    if snapshot.parent_snapshot_id is not None:
        out["parent-snapshot-id"] = snapshot.parent_snapshot_id
    out["timestamp-ms"] = snapshot.timestamp_ms
    summary = {OPERATION: snapshot.summary.get(OPERATION, Operation.OVERWRITE.value)}
    summary.update((k, v) for k, v in snapshot.summary.items() if k != OPERATION)
    out["summary"] = summary
    if snapshot.manifest_list is not None:
        out["manifest-list"] = snapshot.manifest_list
    if snapshot.schema_id is not None:
        out["schema-id"] = snapshot.schema_id
    if format_version >= 3:
        if snapshot.first_row_id is not None:
            out["first-row-id"] = snapshot.first_row_id
        if snapshot.added_rows is not None:
            out["added-rows"] = snapshot.added_rows
        if snapshot.key_id is not None:
            out["key-id"] = snapshot.key_id
    for k, v in snapshot.extra.items():
        out.setdefault(k, v)
    return out


def snapshot_from_json(obj: Any) -> Snapshot:
    """Parse a snapshot object; raises InvalidMetadataError naming the missing or bad field."""
    if not isinstance(obj, dict):
        raise InvalidMetadataError(f"a snapshot must be a JSON object, got {str(obj)[:200]}")
    snapshot_id = _req_int(obj, "snapshot-id", "snapshot")
    what = f"snapshot {snapshot_id}"
    timestamp_ms = _req_int(obj, "timestamp-ms", what)
    raw_summary = obj.get("summary")
    summary: dict[str, str]
    if raw_summary is None:
        summary = {OPERATION: Operation.OVERWRITE.value}
    elif isinstance(raw_summary, dict):
        summary = {OPERATION: _string_value(raw_summary.get(OPERATION, Operation.OVERWRITE.value), f"{what} operation")}
        if all(type(v) is str for v in raw_summary.values()):  # the usual map: nothing to convert
            summary.update(raw_summary)  # the operation keeps its place in front
        else:
            for k, v in raw_summary.items():
                if k != OPERATION:
                    summary[k] = _string_value(v, f"{what} summary value {k!r}")
    else:
        raise InvalidMetadataError(f"{what}: 'summary' must be an object, got {raw_summary!r}")
    manifest_list = obj.get("manifest-list")
    if manifest_list is not None and not isinstance(manifest_list, str):
        raise InvalidMetadataError(f"{what}: 'manifest-list' must be a string, got {manifest_list!r}")
    if manifest_list is None and not isinstance(obj.get("manifests"), list):
        raise InvalidMetadataError(f"{what} has neither 'manifest-list' nor an embedded 'manifests' list")
    key_id = obj.get("key-id")
    return Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=_opt_int(obj, "parent-snapshot-id", what),
        sequence_number=_opt_int(obj, "sequence-number", what) or 0,
        timestamp_ms=timestamp_ms,
        manifest_list=manifest_list,
        summary=summary,
        schema_id=_opt_int(obj, "schema-id", what),
        first_row_id=_opt_int(obj, "first-row-id", what),
        added_rows=_opt_int(obj, "added-rows", what),
        key_id=None if key_id is None else str(key_id),
        extra={k: v for k, v in obj.items() if k not in _SNAPSHOT_KEYS},
    )


def ref_to_json(ref: SnapshotRef) -> dict[str, Any]:
    """The JSON object of a ref; retention keys are written only when set, as Java does."""
    out: dict[str, Any] = {"snapshot-id": ref.snapshot_id, "type": ref.ref_type.value}
    if ref.min_snapshots_to_keep is not None:
        out["min-snapshots-to-keep"] = ref.min_snapshots_to_keep
    if ref.max_snapshot_age_ms is not None:
        out["max-snapshot-age-ms"] = ref.max_snapshot_age_ms
    if ref.max_ref_age_ms is not None:
        out["max-ref-age-ms"] = ref.max_ref_age_ms
    return out


def ref_from_json(obj: Any, name: str = "?") -> SnapshotRef:
    """Parse a ref object (``name`` is only used in error messages)."""
    what = f"ref {name!r}"
    if not isinstance(obj, dict):
        raise InvalidMetadataError(f"{what} must be a JSON object, got {str(obj)[:200]}")
    snapshot_id = _req_int(obj, "snapshot-id", what)
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise InvalidMetadataError(f"{what} is missing required field 'type' (branch or tag)")
    try:
        ref_type = SnapshotRefType(kind.lower())
    except ValueError:
        raise InvalidMetadataError(f"{what} has unknown type {kind!r}; expected 'branch' or 'tag'") from None
    return SnapshotRef(
        snapshot_id,
        ref_type,
        _opt_int(obj, "min-snapshots-to-keep", what),
        _opt_int(obj, "max-snapshot-age-ms", what),
        _opt_int(obj, "max-ref-age-ms", what),
    )


def snapshot_log_entry_to_json(entry: SnapshotLogEntry) -> dict[str, Any]:
    """``{"timestamp-ms", "snapshot-id"}``."""
    return {"timestamp-ms": entry.timestamp_ms, "snapshot-id": entry.snapshot_id}


def snapshot_log_entry_from_json(obj: Any) -> SnapshotLogEntry:
    """Parse a ``snapshot-log`` entry."""
    if not isinstance(obj, dict):
        raise InvalidMetadataError(f"a snapshot-log entry must be an object, got {obj!r}")
    return SnapshotLogEntry(_req_int(obj, "timestamp-ms", "snapshot-log entry"),
                            _req_int(obj, "snapshot-id", "snapshot-log entry"))


def metadata_log_entry_to_json(entry: MetadataLogEntry) -> dict[str, Any]:
    """``{"timestamp-ms", "metadata-file"}``."""
    return {"timestamp-ms": entry.timestamp_ms, "metadata-file": entry.metadata_file}


def metadata_log_entry_from_json(obj: Any) -> MetadataLogEntry:
    """Parse a ``metadata-log`` entry."""
    if not isinstance(obj, dict):
        raise InvalidMetadataError(f"a metadata-log entry must be an object, got {obj!r}")
    path = obj.get("metadata-file")
    if not isinstance(path, str):
        raise InvalidMetadataError(f"metadata-log entry is missing required field 'metadata-file': {obj!r}")
    return MetadataLogEntry(_req_int(obj, "timestamp-ms", "metadata-log entry"), path)
