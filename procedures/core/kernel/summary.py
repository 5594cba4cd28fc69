"""Snapshot summaries with the keys and running totals Iceberg Java writes.

A :class:`SummaryBuilder` counts what a commit adds and removes; :func:`summary_with_totals`
turns those counts into the string map of a snapshot, carrying ``total-*`` forward from the
parent snapshot the way Java does (totals are omitted when the parent had none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.snapshots import APP_ID, ENGINE_NAME, ENGINE_VERSION, apply_totals

__all__ = [
    "SummaryBuilder", "summary_with_totals", "is_dv", "content_size", "set_engine", "engine_properties",
    "PACKAGE_VERSION_KEY", "PACKAGE_VERSION",
]

#: our own summary key: this package's name and version (Java's ``iceberg-version`` names the
#: Apache Iceberg build that wrote a snapshot, which this package is not)
PACKAGE_VERSION_KEY = "iceberg-procedures-version"
PACKAGE_VERSION = "iceberg-procedures 0.1.0"
# the engine the process commits for, as Java's EnvironmentContext: one per process, set by the
# layer that holds the engine (procedures.spark.session.record_engine) and read by every commit
_ENGINE: dict[str, str] = {}


def set_engine(name: str, version: str, app_id: str | None = None) -> None:
    """Record the engine every later snapshot summary names: ``engine-name``, ``engine-version``
    and ``app-id``, the keys Iceberg Java's Spark integration writes on every commit."""
    _ENGINE.clear()
    _ENGINE.update({ENGINE_NAME: name, ENGINE_VERSION: version})
    if app_id:
        _ENGINE[APP_ID] = app_id


def engine_properties() -> dict[str, str]:
    """The environment keys of a snapshot summary: the engine's (when one is recorded) and ours."""
    return {**_ENGINE, PACKAGE_VERSION_KEY: PACKAGE_VERSION}


def is_dv(f: DataFile) -> bool:
    """True for a deletion vector (a position-delete entry stored in Puffin)."""
    return f.content == FileContent.POSITION_DELETES and f.file_format == FileFormat.PUFFIN


def content_size(f: DataFile) -> int:
    """Bytes a file contributes: a deletion vector counts its blob, not the whole shared Puffin file
    (as Java counts it in summaries and rewrite sizes)."""
    if is_dv(f) and f.content_size_in_bytes is not None:
        return f.content_size_in_bytes
    return f.file_size_in_bytes


@dataclass
class SummaryBuilder:
    """Counts files, records and sizes a commit adds and removes, and the partitions it touches."""

    counts: dict[str, int] = field(default_factory=dict)
    partitions: set = field(default_factory=set)
    extra: dict[str, str] = field(default_factory=dict)
    #: False when files were counted without their partitions (Java's appended manifests):
    #: the summary then has no ``changed-partition-count``
    partitions_known: bool = True

    def _inc(self, key: str, n: int) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def added_file(self, f: DataFile) -> None:
        """Count a data or delete file the commit adds."""
        self._file(f, "added")

    def removed_file(self, f: DataFile) -> None:
        """Count a data or delete file the commit removes."""
        self._file(f, "removed")

    def _file(self, f: DataFile, kind: str) -> None:
        self.partitions.add((f.spec_id, f.partition))
        added = kind == "added"
        self._inc("added-files-size" if added else "removed-files-size", content_size(f))
        if f.content == FileContent.DATA:
            self._inc("added-data-files" if added else "deleted-data-files", 1)
            self._inc("added-records" if added else "deleted-records", f.record_count)
            return
        self._inc("added-delete-files" if added else "removed-delete-files", 1)
        if f.content == FileContent.POSITION_DELETES:
            if is_dv(f):
                self._inc("added-dvs" if added else "removed-dvs", 1)
            else:
                self._inc("added-position-delete-files" if added else "removed-position-delete-files", 1)
            self._inc("added-position-deletes" if added else "removed-position-deletes", f.record_count)
        else:
            self._inc("added-equality-delete-files" if added else "removed-equality-delete-files", 1)
            self._inc("added-equality-deletes" if added else "removed-equality-deletes", f.record_count)

    def merge(self, other: "SummaryBuilder") -> None:
        """Add another builder's counts to this one."""
        for k, v in other.counts.items():
            self._inc(k, v)
        self.partitions |= other.partitions
        self.extra.update(other.extra)

    def set(self, key: str, value: str) -> None:
        """Set an extra summary property (manifests-created, wap.id ...)."""
        self.extra[key] = value


def summary_with_totals(
    operation: str,
    builder: SummaryBuilder,
    parent_summary: dict[str, str] | None,
    properties: dict[str, str] | None = None,
) -> dict[str, str]:
    """The snapshot summary: operation, this commit's counts, running totals and properties.

    ``parent_summary`` is None for the first snapshot of a branch (totals start at zero).
    """
    out: dict[str, str] = {"operation": operation}
    for key in sorted(builder.counts):
        if builder.counts[key]:
            out[key] = str(builder.counts[key])
    if builder.partitions_known and (builder.partitions or builder.counts):
        out["changed-partition-count"] = str(len(builder.partitions))
    out = apply_totals(out, parent_summary)
    out.update(builder.extra)
    out.update(engine_properties())
    if properties:
        out.update(properties)
    return out
