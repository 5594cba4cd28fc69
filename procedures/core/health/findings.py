"""Table health and maintenance planning without an engine: what is wrong with a table, judged
against its own properties and Iceberg Java's defaults, and which procedure calls would fix it.

:func:`analyze` reads the current snapshot's manifests on the driver and returns one
:class:`Finding` per problem (small files per partition, rows hidden by deletes, delete files to
compact, snapshots past retention, small or too many manifests, a full metadata log, missing
statistics, and orphan files when the caller counted them).  :func:`plan_steps` turns findings into
ordered :class:`MaintenanceStep` calls.  Listing orphan files needs an engine step and lives in
:meth:`procedures.core.health.health_engine.HealthEngine.count_orphans`; running the steps is the ``plan_maintenance``
procedure's business.

Every threshold is the one the fixing procedure itself applies, so a finding disappears once its
procedure ran: a partition is flagged for small files exactly when ``rewrite_data_files`` (bin-pack,
default options) would rewrite some of them, snapshots exactly when ``expire_snapshots`` (default
arguments) would expire some.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from procedures.core.kernel.manage import plan_expiration
from procedures.core.kernel.properties import (
    DELETE_TARGET_FILE_SIZE_BYTES, GC_ENABLED, MANIFEST_MIN_MERGE_COUNT, MANIFEST_TARGET_SIZE_BYTES, MAX_SNAPSHOT_AGE_MS,
    METADATA_DELETE_AFTER_COMMIT_ENABLED, METADATA_PREVIOUS_VERSIONS_MAX, MIN_SNAPSHOTS_TO_KEEP,
    WRITE_TARGET_FILE_SIZE_BYTES,
)
from procedures.core.kernel.snapshot_producer import live_entries, snapshot_manifests
from procedures.core.kernel.summary import is_dv
from procedures.errors import IcebergError
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile, FileContent, ManifestContent, ManifestFile
from procedures.spec.metadata import TableMetadata

__all__ = [
    "Finding", "MaintenanceStep", "HealthThresholds", "analyze", "orphan_finding", "plan_steps",
    "partition_text", "severity_rank", "SEVERITIES", "CHECKS", "STEP_ORDER", "MIN_SMALL_MANIFESTS",
]

SEVERITIES = ("info", "warning", "critical")
CHECKS = (
    "small_files", "deleted_rows", "dangling_deletes", "equality_deletes", "delete_files", "expired_snapshots", "manifest_count",
    "small_manifests", "orphan_files", "metadata_log", "missing_statistics",
)
#: the order maintenance runs in: rewrites first (each commits a snapshot), rewrite_manifests on the
#: final file set, expiry after every snapshot-producing step so the replaced files go with it,
#: orphans once expiry deleted what it could, statistics last on the snapshot that stays current
STEP_ORDER = (
    "rewrite_data_files", "rewrite_position_delete_files", "rewrite_manifests", "expire_snapshots",
    "remove_orphan_files", "compute_table_stats",
)
#: manifests below the target size a snapshot may hold (per content) before small_manifests is
#: raised; Java has no property for it (merge-on-append uses commit.manifest.min-count-to-merge)
MIN_SMALL_MANIFESTS = 10
#: the checks whose rewrite_data_files call drops deletes
_DELETE_CHECKS = ("deleted_rows", "equality_deletes")
#: a count finding turns critical at this multiple of its threshold
CRITICAL_FACTOR = 10
#: share of a partition's rows hidden by deletes that is critical
CRITICAL_DELETED_SHARE = 0.75
#: expirable snapshots (and aged refs) that are critical: metadata.json grows with each of them
CRITICAL_EXPIRED_SNAPSHOTS = 1000


# ------------------------------------------------------------------------------------ model
@dataclass(frozen=True)
class Finding:
    """One problem of a table: the check that found it, how bad it is, where, the measured value
    against the threshold, and the procedure call (named arguments as Python values) that fixes it
    (None when no procedure can, e.g. a table property to change)."""

    check: str
    severity: str
    partition: str | None
    measured: float
    threshold: float | None
    message: str
    procedure: str | None = None
    arguments: tuple[tuple[str, Any], ...] = ()
    #: a statement that fixes it when no procedure does (e.g. ALTER TABLE ... SET TBLPROPERTIES)
    statement: str | None = None


@dataclass(frozen=True)
class MaintenanceStep:
    """One planned procedure call, with the checks it answers."""

    procedure: str
    arguments: tuple[tuple[str, Any], ...]
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class HealthThresholds:
    """The table properties (with Iceberg Java's defaults) the checks compare against."""

    target_file_size: int
    min_file_size: int
    min_input_files: int
    delete_ratio: float
    delete_target_file_size: int
    max_snapshot_age_ms: int
    min_snapshots_to_keep: int
    manifest_target_size: int
    manifest_min_count_to_merge: int
    previous_versions_max: int
    delete_after_commit: bool

    @classmethod
    def of(cls, props: Mapping[str, str]) -> "HealthThresholds":
        """Read from ``props`` (the table properties); a malformed value is a ValidationError naming it."""
        target = WRITE_TARGET_FILE_SIZE_BYTES.read(props, minimum=1)
        return cls(
            target_file_size=target,
            # rewrite_data_files' defaults: min-file-size-bytes = 75% of the target, min-input-files 5
            min_file_size=int(target * 0.75),
            min_input_files=5,
            delete_ratio=0.3,
            delete_target_file_size=DELETE_TARGET_FILE_SIZE_BYTES.read(props, minimum=1),
            max_snapshot_age_ms=MAX_SNAPSHOT_AGE_MS.read(props),
            min_snapshots_to_keep=MIN_SNAPSHOTS_TO_KEEP.read(props, minimum=1),
            manifest_target_size=MANIFEST_TARGET_SIZE_BYTES.read(props, minimum=1),
            manifest_min_count_to_merge=MANIFEST_MIN_MERGE_COUNT.read(props, minimum=1),
            previous_versions_max=METADATA_PREVIOUS_VERSIONS_MAX.read(props, minimum=1),
            delete_after_commit=METADATA_DELETE_AFTER_COMMIT_ENABLED.read(props),
        )


# ------------------------------------------------------------------------------------ analysis
def analyze(io: FileAccess, md: TableMetadata, table_ref: str, *, now_ms: int | None = None) -> list[Finding]:
    """Every finding of the table's current state except orphan files (see :func:`orphan_finding`).

    ``table_ref`` is the table argument the fixing calls name (e.g. ``db.events``).  Reads the
    current snapshot's manifest list and manifests through ``io``.
    """
    limits = HealthThresholds.of(md.properties)
    findings: list[Finding] = []
    snapshot = md.current_snapshot()
    if snapshot is not None:
        manifests = snapshot_manifests(io, snapshot)
        files = [e.data_file for e in live_entries(io, md, manifests)]
        findings += _file_findings(md, files, table_ref, limits)
        findings += _manifest_findings(md, manifests, table_ref, limits)
    findings += _snapshot_findings(md, table_ref, limits, now_ms)
    findings += _metadata_log_findings(md, table_ref, limits)
    if snapshot is not None and not any(s.snapshot_id == snapshot.snapshot_id for s in md.statistics):
        findings.append(Finding(
            "missing_statistics", "info", None, 0, 1,
            f"the current snapshot {snapshot.snapshot_id} has no table statistics (column NDV sketches) for "
            "cost-based planning",
            "compute_table_stats", (("table", table_ref),),
        ))
    return findings


def orphan_finding(md: TableMetadata, table_ref: str, orphan_count: int, older_than_days: float = 3) -> list[Finding]:
    """The orphan_files finding for ``orphan_count`` files found by a dry run of remove_orphan_files."""
    if orphan_count <= 0:
        return []
    fix = ("remove_orphan_files", (("table", table_ref),)) if GC_ENABLED.read(md.properties) else (None, ())
    return [Finding(
        "orphan_files", _count_severity(orphan_count, 1), None, orphan_count, 1,
        f"{orphan_count} {'file' if orphan_count == 1 else 'files'} below the table location, older than "
        f"{older_than_days:g} days, referenced by no snapshot or metadata file",
        *fix,
    )]


def partition_text(md: TableMetadata, f: DataFile) -> str | None:
    """The partition of ``f`` as in data paths (``name=value/...``); None for an unpartitioned spec."""
    spec = md.spec_by_id(f.spec_id)
    if spec is None or spec.is_unpartitioned():
        return None
    try:
        return spec.partition_to_path(f.partition, md.schema())
    except IcebergError:
        # a partition source dropped from the current schema: still name the partition
        return f"spec {f.spec_id} {tuple(f.partition)!r}"


def _file_findings(md: TableMetadata, files: Sequence[DataFile], table_ref: str,
                   limits: HealthThresholds) -> list[Finding]:
    groups: dict[tuple[int, tuple], dict[str, list[DataFile]]] = {}
    for f in files:
        g = groups.setdefault((f.spec_id, tuple(f.partition)), {"data": [], "pos": [], "eq": []})
        kind = {FileContent.DATA: "data", FileContent.POSITION_DELETES: "pos"}.get(f.content, "eq")
        g[kind].append(f)
    out: list[Finding] = []
    rewrite = (("table", table_ref), ("options", {
        "target-file-size-bytes": str(limits.target_file_size), "min-input-files": str(limits.min_input_files),
    }))
    purge = (("table", table_ref), ("options", {
        "target-file-size-bytes": str(limits.target_file_size), "min-input-files": str(limits.min_input_files),
        "delete-file-threshold": "1", "remove-dangling-deletes": "true",
    }))
    drop_dangling = (("table", table_ref), ("options", {"rewrite-all": "true"}))
    live = {f.file_path for f in files if f.content == FileContent.DATA}
    for key in sorted(groups, key=lambda k: (k[0], repr(k[1]))):
        g = groups[key]
        sample = (g["data"] or g["pos"] or g["eq"])[0]
        part = partition_text(md, sample)
        where = f" in partition {part}" if part else ""
        small = [f for f in g["data"] if f.file_size_in_bytes < limits.min_file_size]
        small_bytes = sum(f.file_size_in_bytes for f in small)
        # rewrite_data_files' group rule: more than one file and either enough files or more than the target
        if len(small) > 1 and (len(small) >= limits.min_input_files or small_bytes > limits.target_file_size):
            out.append(Finding(
                "small_files", _count_severity(len(small), limits.min_input_files), part, len(small),
                limits.min_input_files,
                f"{len(small)} data files{where} are smaller than {limits.min_file_size} bytes (75% of "
                f"write.target-file-size-bytes {limits.target_file_size}); together {small_bytes} bytes",
                "rewrite_data_files", rewrite,
            ))
        rows = sum(f.record_count for f in g["data"])
        # a file-scoped delete (or DV) whose data file is gone hides nothing: it is dangling
        dangling = [f for f in g["pos"] if f.referenced_data_file is not None and f.referenced_data_file not in live]
        gone = {id(f) for f in dangling}
        applying = [f for f in g["pos"] if id(f) not in gone]
        hidden = sum(f.record_count for f in applying)
        if dangling:
            out.append(Finding(
                "dangling_deletes", "warning", part, len(dangling), 1,
                f"{len(dangling)} position delete files{where} reference data files that are no longer live; "
                "every scan still plans them",
                "rewrite_position_delete_files", drop_dangling,
            ))
        if applying and rows:
            share = min(hidden / rows, 1.0)
            heavy = share >= limits.delete_ratio
            severity = "critical" if share >= CRITICAL_DELETED_SHARE else "warning" if heavy else "info"
            out.append(Finding(
                "deleted_rows", severity, part, round(share, 6), limits.delete_ratio,
                f"{len(applying)} position delete files{where} hide {hidden} of {rows} rows ({share:.1%}); every "
                "read merges them" + ("; rewriting the data files drops them" if heavy else ""),
                *(("rewrite_data_files", purge) if heavy else (None, ())),
            ))
        if g["eq"]:
            out.append(Finding(
                "equality_deletes", _count_severity(len(g["eq"]), 1), part, len(g["eq"]), 1,
                f"{len(g['eq'])} equality delete files{where} are joined with every read of the partition's data",
                "rewrite_data_files", purge,
            ))
        # file-scoped deletes and DVs are compacted by rewrite_position_delete_files only when many
        small_deletes = [f for f in g["pos"] if f.file_size_in_bytes < int(limits.delete_target_file_size * 0.75)
                         and not is_dv(f)]
        if len(small_deletes) >= limits.min_input_files:
            out.append(Finding(
                "delete_files", _count_severity(len(small_deletes), limits.min_input_files), part,
                len(small_deletes), limits.min_input_files,
                f"{len(small_deletes)} small position delete files{where} (below 75% of "
                f"write.delete.target-file-size-bytes {limits.delete_target_file_size})",
                "rewrite_position_delete_files",
                (("table", table_ref), ("options", {"target-file-size-bytes": str(limits.delete_target_file_size),
                                                    "min-input-files": str(limits.min_input_files)})),
            ))
    return out


def _manifest_findings(md: TableMetadata, manifests: Sequence[ManifestFile], table_ref: str,
                       limits: HealthThresholds) -> list[Finding]:
    out: list[Finding] = []
    fix = ("rewrite_manifests", (("table", table_ref),))
    for content, label in ((ManifestContent.DATA, "data"), (ManifestContent.DELETES, "delete")):
        ms = [m for m in manifests if m.content == content]
        total = sum(m.manifest_length for m in ms)
        if len(ms) >= limits.manifest_min_count_to_merge:
            out.append(Finding(
                "manifest_count", _count_severity(len(ms), limits.manifest_min_count_to_merge), None, len(ms),
                limits.manifest_min_count_to_merge,
                f"the current snapshot has {len(ms)} {label} manifests (commit.manifest.min-count-to-merge "
                f"{limits.manifest_min_count_to_merge}); every scan plans through all of them",
                *fix,
            ))
            continue
        small = [m for m in ms if m.manifest_length < limits.manifest_target_size]
        wanted = max(1, math.ceil(total / limits.manifest_target_size))
        if len(small) >= MIN_SMALL_MANIFESTS and wanted < len(ms):
            out.append(Finding(
                "small_manifests", "warning", None, len(small), MIN_SMALL_MANIFESTS,
                f"{len(small)} {label} manifests are smaller than commit.manifest.target-size-bytes "
                f"{limits.manifest_target_size}; {total} bytes fit in {wanted}",
                *fix,
            ))
    return out


def _snapshot_findings(md: TableMetadata, table_ref: str, limits: HealthThresholds,
                       now_ms: int | None) -> list[Finding]:
    plan = plan_expiration(md, now_ms=now_ms)
    expired = len(plan.expired_snapshot_ids) + len(plan.removed_refs)
    if not expired:
        return []
    gc = GC_ENABLED.read(md.properties)
    fix = ("expire_snapshots", (("table", table_ref), ("retain_last", limits.min_snapshots_to_keep))) if gc \
        else (None, ())
    refs = f" and {len(plan.removed_refs)} aged refs" if plan.removed_refs else ""
    return [Finding(
        "expired_snapshots", "critical" if expired >= CRITICAL_EXPIRED_SNAPSHOTS else "warning", None, expired, 1,
        f"{len(plan.expired_snapshot_ids)} of {len(md.snapshots)} snapshots{refs} are past the retention "
        f"(history.expire.max-snapshot-age-ms {limits.max_snapshot_age_ms}, history.expire.min-snapshots-to-keep "
        f"{limits.min_snapshots_to_keep}); they keep replaced files alive"
        + ("" if gc else "; gc.enabled is false, so only a table property change allows expiring them"),
        *fix,
    )]


def _metadata_log_findings(md: TableMetadata, table_ref: str, limits: HealthThresholds) -> list[Finding]:
    tracked = len(md.metadata_log)
    if tracked < limits.previous_versions_max or limits.delete_after_commit:
        return []
    return [Finding(
        "metadata_log", "warning", None, tracked, limits.previous_versions_max,
        f"the metadata log is full ({tracked} previous metadata files, write.metadata.previous-versions-max "
        f"{limits.previous_versions_max}) and write.metadata.delete-after-commit.enabled is false: every commit "
        "leaves one more untracked metadata.json behind; enable the property (remove_orphan_files removes "
        "those already left)",
        statement=f"ALTER TABLE {table_ref} SET TBLPROPERTIES ('write.metadata.delete-after-commit.enabled'='true')",
    )]


def _count_severity(measured: int, threshold: int) -> str:
    return "critical" if measured >= CRITICAL_FACTOR * max(threshold, 1) else "warning"


# ------------------------------------------------------------------------------------ planning
def plan_steps(findings: Iterable[Finding]) -> list[MaintenanceStep]:
    """The procedure calls that fix ``findings``, one per procedure, in :data:`STEP_ORDER`.

    Options of several findings for one procedure are merged (the delete thresholds of
    ``deleted_rows`` join the size options of ``small_files``).  A rewrite_data_files step that
    drops deletes (``delete-file-threshold``) is followed by rewrite_position_delete_files with
    ``rewrite-all``, which drops the position deletes of the replaced files.
    """
    merged: dict[str, dict[str, Any]] = {}
    reasons: dict[str, list[str]] = {}
    for f in findings:
        if f.procedure is None:
            continue
        args = merged.setdefault(f.procedure, {})
        for name, value in f.arguments:
            if isinstance(value, Mapping):
                args[name] = {**args.get(name, {}), **value}
            else:
                args.setdefault(name, value)
        if f.check not in reasons.setdefault(f.procedure, []):
            reasons[f.procedure].append(f.check)
    rewrite = merged.get("rewrite_data_files", {})
    if "delete-file-threshold" in rewrite.get("options", {}):
        # the rewritten files' position deletes stay behind, dangling, unless sequence numbers
        # prove them so (rewritten files keep the starting sequence number): drop them right after
        deletes = merged.setdefault("rewrite_position_delete_files", {"table": rewrite["table"]})
        deletes["options"] = {**deletes.get("options", {}), "rewrite-all": "true"}
        for check in reasons["rewrite_data_files"]:
            if check in _DELETE_CHECKS and check not in reasons.setdefault("rewrite_position_delete_files", []):
                reasons["rewrite_position_delete_files"].append(check)
    order = {p: i for i, p in enumerate(STEP_ORDER)}
    names = sorted(merged, key=lambda p: (order.get(p, len(order)), p))
    return [MaintenanceStep(p, tuple(merged[p].items()), tuple(reasons[p])) for p in names]


def severity_rank(severity: str) -> int:
    """0 for info, 1 for warning, 2 for critical (for sorting worst first)."""
    return SEVERITIES.index(severity)
