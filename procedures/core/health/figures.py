"""The numbers behind a table's health report: what its pictures plot, read from the table's
metadata (engine-free).  The HTML report (:mod:`procedures.frontend.report`) draws them, and
embeds them as JSON so a program (or a test) can check each figure against the metadata tables.

* data file sizes of the current snapshot, against the table's target file size;
* per partition, the share of rows that delete files hide (position and equality delete rows over
  data rows: an upper bound, as the findings of :mod:`procedures.core.health.findings` count them);
* every snapshot and every metadata file over time (the history and the metadata log);
* manifests per snapshot, for the newest :data:`MANIFEST_HISTORY` snapshots still in the metadata;
* orphan files: how many and how many bytes, when a listing was asked for.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from procedures.core.health.findings import HealthThresholds, partition_text
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.errors import IcebergError
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import FileContent, ManifestContent
from procedures.spec.metadata import TableMetadata

__all__ = ["HealthFigures", "health_figures", "MANIFEST_HISTORY"]

#: how many of the newest snapshots get their manifest lists read for the manifests-per-snapshot figure
MANIFEST_HISTORY = 200


@dataclass(frozen=True)
class HealthFigures:
    """What one table's report plots (see the module doc); plain values, JSON-ready via :meth:`as_dict`."""

    table: str
    target_file_size: int
    data_file_sizes: list[int]
    delete_files: int
    #: partition text ("" for an unpartitioned table) -> [data rows, deleted rows]
    rows_by_partition: dict[str, list[int]]
    #: (timestamp ms, snapshot id, operation), oldest first
    snapshots: list[tuple[int, int, str]]
    #: timestamps (ms) of the metadata files of the log and the current one, oldest first
    metadata_files: list[int]
    #: (timestamp ms, snapshot id, data manifests, delete manifests), oldest first
    manifests_per_snapshot: list[tuple[int, int, int, int]]
    orphan_files: int | None = None
    orphan_bytes: int | None = None
    notes: list[str] = field(default_factory=list)

    def delete_ratio_by_partition(self) -> dict[str, float]:
        """Deleted rows over data rows per partition (partitions with deletes only)."""
        return {p: deleted / data if data else 1.0 for p, (data, deleted) in self.rows_by_partition.items() if deleted}

    def as_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready values."""
        out = asdict(self)
        out["delete_ratio_by_partition"] = self.delete_ratio_by_partition()
        return out


def health_figures(io: FileAccess, md: TableMetadata, table: str, *, metadata_timestamp_ms: int | None = None,
                   orphans: Sequence[int] | None = None) -> HealthFigures:
    """The figures of ``md`` (see the module doc).  ``metadata_timestamp_ms`` dates the current
    metadata file (default: its last-updated time); ``orphans`` are the sizes of the orphan files a
    listing found (None when none was made)."""
    snapshot = md.current_snapshot()
    sizes: list[int] = []
    rows: dict[str, list[int]] = {}
    delete_files = 0
    notes: list[str] = []
    if snapshot is not None:
        for entry in live_entries(io, md, snapshot_manifests(io, snapshot)):
            f = entry.data_file
            part = partition_text(md, f) or ""
            counts = rows.setdefault(part, [0, 0])
            if f.content == FileContent.DATA:
                sizes.append(int(f.file_size_in_bytes))
                counts[0] += int(f.record_count)
            else:
                delete_files += 1
                counts[1] += int(f.record_count)
    history = sorted(md.snapshots, key=lambda s: (s.timestamp_ms, s.snapshot_id))
    per_snapshot = []
    for s in history[-MANIFEST_HISTORY:]:
        try:
            manifests = snapshot_manifests(io, s)
        except (IcebergError, OSError) as e:
            notes.append(f"manifest list of snapshot {s.snapshot_id} unreadable: {e}")
            continue
        deletes = sum(1 for m in manifests if m.content == ManifestContent.DELETES)
        per_snapshot.append((s.timestamp_ms, s.snapshot_id, len(manifests) - deletes, deletes))
    if len(history) > MANIFEST_HISTORY:
        notes.append(f"manifests per snapshot: the newest {MANIFEST_HISTORY} of {len(history)} snapshots")
    metadata_files = sorted([e.timestamp_ms for e in md.metadata_log]
                            + [metadata_timestamp_ms if metadata_timestamp_ms is not None else md.last_updated_ms])
    return HealthFigures(
        table=table,
        target_file_size=HealthThresholds.of(md.properties).target_file_size,
        data_file_sizes=sorted(sizes),
        delete_files=delete_files,
        rows_by_partition=dict(sorted(rows.items())),
        snapshots=[(s.timestamp_ms, s.snapshot_id, str(s.summary.get("operation", ""))) for s in history],
        metadata_files=metadata_files,
        manifests_per_snapshot=per_snapshot,
        orphan_files=None if orphans is None else len(orphans),
        orphan_bytes=None if orphans is None else int(sum(orphans)),
        notes=notes,
    )

