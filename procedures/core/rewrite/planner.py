"""Planning for ``rewrite_data_files`` and ``rewrite_position_delete_files`` (procedures.md §3.9,
§3.17), pure Python: which files to rewrite and how they are grouped into jobs.

This mirrors Iceberg Java 1.10's ``SizeBasedFileRewritePlanner`` / ``BinPackRewriteFilePlanner``
(also used, with a compression factor, by the sort and Z-order rewriters):

1. scan the starting snapshot with the ``where`` filter, residuals ignored (whole files);
2. bucket the tasks by partition of the table's *current* spec; files written with another spec
   all land in one bucket, the all-null partition, as Java does;
3. keep candidate files (size < min or > max, ``delete-file-threshold`` deletes, deleted-row ratio
   >= ``delete-ratio-threshold``), unless ``rewrite-all``;
4. bin-pack them in scan order into groups of at most ``max-file-group-size-bytes``;
5. keep a group when it has >1 file and >= ``min-input-files`` files, or >1 file and more than the
   target bytes, or more than the max bytes, or a file that meets a delete threshold;
6. truncate at ``max-files-to-rewrite``, then order by ``rewrite-job-order``.

Options are validated exactly like Java: unknown keys first (one error naming all of them and the
rewriter), then each value, with Java's messages.  Booleans must be ``true`` or ``false``
(Java silently reads anything else as false; we refuse it).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from procedures.core.kernel.properties import DELETE_TARGET_FILE_SIZE_BYTES, WRITE_TARGET_FILE_SIZE_BYTES
from procedures.core.kernel.scan import FileScanTask, ScanEntry, ScanManifests, iter_file_scan_tasks, partition_key
from procedures.core.kernel.summary import content_size
from procedures.errors import ValidationError
from procedures.spec.manifest.model import FileContent, FileFormat
from procedures.spec.metadata import TableMetadata
from procedures.spec.metadata_columns import DELETE_FILE_PATH_ID

__all__ = [
    "BIN_PACK", "SORT", "Z_ORDER",
    "RewriteOptions", "PositionDeleteRewriteOptions", "FileGroup", "RewritePlan",
    "parse_rewrite_options", "parse_position_delete_options", "valid_options",
    "pack", "plan_groups", "plan_rewrite", "expected_output_files", "input_split_size", "write_max_file_size",
    "is_file_scoped",
]

BIN_PACK, SORT, Z_ORDER = "BIN-PACK", "SORT", "Z-ORDER"

# option names (Java's RewriteDataFiles / SizeBasedFileRewritePlanner constants)
TARGET = "target-file-size-bytes"
MIN_SIZE = "min-file-size-bytes"
MAX_SIZE = "max-file-size-bytes"
MIN_INPUT_FILES = "min-input-files"
REWRITE_ALL = "rewrite-all"
MAX_GROUP_SIZE = "max-file-group-size-bytes"
PARTIAL_ENABLED = "partial-progress.enabled"
PARTIAL_MAX_COMMITS = "partial-progress.max-commits"
PARTIAL_MAX_FAILED = "partial-progress.max-failed-commits"
MAX_CONCURRENT = "max-concurrent-file-group-rewrites"
DELETE_FILE_THRESHOLD = "delete-file-threshold"
DELETE_RATIO_THRESHOLD = "delete-ratio-threshold"
USE_STARTING_SEQ = "use-starting-sequence-number"
REMOVE_DANGLING = "remove-dangling-deletes"
OUTPUT_SPEC_ID = "output-spec-id"
JOB_ORDER = "rewrite-job-order"
MAX_FILES_TO_REWRITE = "max-files-to-rewrite"
SHUFFLE_PARTITIONS = "shuffle-partitions-per-file"
COMPRESSION_FACTOR = "compression-factor"
VAR_LENGTH_CONTRIBUTION = "var-length-contribution"
MAX_OUTPUT_SIZE = "max-output-size"

_SIZE_PLANNER = {TARGET, MIN_SIZE, MAX_SIZE, MIN_INPUT_FILES, REWRITE_ALL, MAX_GROUP_SIZE}
_DATA_PLANNER = _SIZE_PLANNER | {DELETE_FILE_THRESHOLD, DELETE_RATIO_THRESHOLD, JOB_ORDER, MAX_FILES_TO_REWRITE}
_DATA_ACTION = {
    MAX_CONCURRENT, MAX_GROUP_SIZE, PARTIAL_ENABLED, PARTIAL_MAX_COMMITS, PARTIAL_MAX_FAILED, TARGET,
    USE_STARTING_SEQ, JOB_ORDER, OUTPUT_SPEC_ID, REMOVE_DANGLING, MAX_FILES_TO_REWRITE,
}
_SHUFFLING = {SHUFFLE_PARTITIONS, COMPRESSION_FACTOR}
_ZORDER = {VAR_LENGTH_CONTRIBUTION, MAX_OUTPUT_SIZE}
_POS_DELETE_ACTION = {MAX_CONCURRENT, PARTIAL_ENABLED, PARTIAL_MAX_COMMITS, JOB_ORDER}

JOB_ORDERS = ("bytes-asc", "bytes-desc", "files-asc", "files-desc", "none")

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
MAX_GROUP_SIZE_DEFAULT = 100 * 1024**3
SPLIT_OVERHEAD = 5 * 1024


def valid_options(rewriter: str) -> frozenset[str]:
    """Every option ``rewrite_data_files`` accepts with the given rewriter (BIN-PACK, SORT, Z-ORDER)."""
    names = set(_DATA_ACTION | _DATA_PLANNER)
    if rewriter in (SORT, Z_ORDER):
        names |= _SHUFFLING
    if rewriter == Z_ORDER:
        names |= _ZORDER
    return frozenset(names)


# ------------------------------------------------------------------------------ value parsing
_INT_RE = re.compile(r"[+-]?\d+")


def _check_unknown(options: Mapping[str, str], valid: set[str] | frozenset[str], rewriter: str) -> None:
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValidationError(
            f"Cannot use options [{', '.join(unknown)}], they are not supported by the action or the rewriter "
            f"{rewriter}; valid options: {', '.join(sorted(valid))}"
        )


def _long(options: Mapping[str, str], name: str, default: int, *, bits: int = 64) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw)
    if not _INT_RE.fullmatch(text):
        raise ValidationError(f"Option '{name}' must be an integer, got {text!r}")
    value = int(text)
    limit = 2 ** (bits - 1)
    if not -limit <= value < limit:
        raise ValidationError(f"Option '{name}' is set to {value} but must fit in a {bits}-bit integer")
    return value


def _int(options: Mapping[str, str], name: str, default: int) -> int:
    return _long(options, name, default, bits=32)


def _double(options: Mapping[str, str], name: str, default: float) -> float:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise ValidationError(f"Option '{name}' must be a number, got {raw!r}") from None
    if math.isnan(value):
        raise ValidationError(f"Option '{name}' must be a number, got {raw!r}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise ValidationError(f"Option '{name}' must be true or false, got {raw!r}")
    return text == "true"


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ValidationError(message)


def _job_order(options: Mapping[str, str]) -> str:
    raw = options.get(JOB_ORDER, "none")
    text = str(raw).lower()
    if text not in JOB_ORDERS:
        raise ValidationError(f"Invalid rewrite job order name: {raw} (use one of {', '.join(JOB_ORDERS)})")
    return text


# ------------------------------------------------------------------------------ options
@dataclass(frozen=True, slots=True)
class SizeOptions:
    """The size-based planner's settings, shared by data and position delete rewrites."""

    target_file_size: int
    min_file_size: int
    max_file_size: int
    min_input_files: int = 5
    rewrite_all: bool = False
    max_group_size: int = MAX_GROUP_SIZE_DEFAULT
    job_order: str = "none"
    max_concurrent: int = 5
    partial_progress: bool = False
    max_commits: int = 10

    @property
    def write_max_file_size(self) -> int:
        """The writer's target: target plus half the distance to max (avoids tiny remainder files)."""
        return write_max_file_size(self.target_file_size, self.max_file_size)


@dataclass(frozen=True, slots=True)
class RewriteOptions(SizeOptions):
    """Every ``rewrite_data_files`` option, parsed and validated, with Java 1.10's defaults."""

    rewriter: str = BIN_PACK
    delete_file_threshold: int = INT_MAX
    delete_ratio_threshold: float = 0.3
    max_files_to_rewrite: int | None = None
    output_spec_id: int = 0
    max_failed_commits: int = 10
    use_starting_sequence_number: bool = True
    remove_dangling_deletes: bool = False
    shuffle_partitions_per_file: int = 1
    compression_factor: float = 1.0
    var_length_contribution: int = 8
    max_output_size: int = INT_MAX


@dataclass(frozen=True, slots=True)
class PositionDeleteRewriteOptions(SizeOptions):
    """Every ``rewrite_position_delete_files`` option, parsed and validated."""


def _size_options(options: Mapping[str, str], default_target: int) -> dict[str, Any]:
    target = _long(options, TARGET, default_target)
    min_size = _long(options, MIN_SIZE, int(target * 0.75))
    max_size = _long(options, MAX_SIZE, int(target * 1.80))
    _check(target > 0, f"'{TARGET}' is set to {target} but must be > 0")
    _check(min_size >= 0, f"'{MIN_SIZE}' is set to {min_size} but must be >= 0")
    _check(target > min_size, f"'{TARGET}' ({target}) must be > '{MIN_SIZE}' ({min_size}), all new files will be "
                              "smaller than the min threshold")
    _check(target < max_size, f"'{TARGET}' ({target}) must be < '{MAX_SIZE}' ({max_size}), all new files will be "
                              "larger than the max threshold")
    min_input = _int(options, MIN_INPUT_FILES, 5)
    _check(min_input > 0, f"'{MIN_INPUT_FILES}' is set to {min_input} but must be > 0")
    rewrite_all = _bool(options, REWRITE_ALL, False)
    max_group = _long(options, MAX_GROUP_SIZE, MAX_GROUP_SIZE_DEFAULT)
    _check(max_group > 0, f"'{MAX_GROUP_SIZE}' is set to {max_group} but must be > 0")
    return dict(target_file_size=target, min_file_size=min_size, max_file_size=max_size,
                min_input_files=min_input, rewrite_all=rewrite_all, max_group_size=max_group)


def _action_options(options: Mapping[str, str]) -> dict[str, Any]:
    max_concurrent = _int(options, MAX_CONCURRENT, 5)
    max_commits = _int(options, PARTIAL_MAX_COMMITS, 10)
    partial = _bool(options, PARTIAL_ENABLED, False)
    _check(max_concurrent >= 1, f"Cannot set {MAX_CONCURRENT} to {max_concurrent}, the value must be positive.")
    _check(not partial or max_commits > 0,
           f"Cannot set {PARTIAL_MAX_COMMITS} to {max_commits}, the value must be positive when {PARTIAL_ENABLED} is true")
    return dict(max_concurrent=max_concurrent, max_commits=max_commits, partial_progress=partial)


def parse_rewrite_options(
    options: Mapping[str, str] | None,
    *,
    rewriter: str = BIN_PACK,
    table_properties: Mapping[str, str] | None = None,
    spec_ids: Iterable[int] = (0,),
    current_spec_id: int = 0,
) -> RewriteOptions:
    """Validate ``rewrite_data_files`` options for ``rewriter`` the way Java 1.10 does.

    The default target comes from the table property ``write.target-file-size-bytes``.  Raises
    ValidationError naming the offending option (or all unknown ones) and its value.
    """
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    _check_unknown(opts, valid_options(rewriter), rewriter)
    props = table_properties or {}
    default_target = WRITE_TARGET_FILE_SIZE_BYTES.read(props)
    size = _size_options(opts, default_target)
    spec_id = _int(opts, OUTPUT_SPEC_ID, current_spec_id)
    _check(spec_id in set(spec_ids),
           f"Cannot use output spec id {spec_id} because the table does not contain a reference to this spec-id.")
    threshold = _int(opts, DELETE_FILE_THRESHOLD, INT_MAX)
    _check(threshold >= 0, f"'{DELETE_FILE_THRESHOLD}' is set to {threshold} but must be >= 0")
    ratio = _double(opts, DELETE_RATIO_THRESHOLD, 0.3)
    _check(ratio > 0, f"'{DELETE_RATIO_THRESHOLD}' is set to {ratio} but must be > 0")
    _check(ratio <= 1, f"'{DELETE_RATIO_THRESHOLD}' is set to {ratio} but must be <= 1")
    job_order = _job_order(opts)
    max_files = _int(opts, MAX_FILES_TO_REWRITE, 0) if MAX_FILES_TO_REWRITE in opts else None
    _check(max_files is None or max_files > 0,
           f"Cannot set {MAX_FILES_TO_REWRITE} to {max_files}, the value must be positive integer.")
    extra: dict[str, Any] = {}
    if rewriter in (SORT, Z_ORDER):
        cf = _double(opts, COMPRESSION_FACTOR, 1.0)
        _check(cf > 0, f"'{COMPRESSION_FACTOR}' is set to {cf} but must be > 0")
        spf = _int(opts, SHUFFLE_PARTITIONS, 1)
        _check(spf > 0, f"'{SHUFFLE_PARTITIONS}' is set to {spf} but must be > 0")
        extra.update(compression_factor=cf, shuffle_partitions_per_file=spf)
    if rewriter == Z_ORDER:
        vlc = _int(opts, VAR_LENGTH_CONTRIBUTION, 8)
        _check(vlc > 0, f"Cannot use less than 1 byte for variable length types with ZOrder, "
                        f"'{VAR_LENGTH_CONTRIBUTION}' was set to {vlc}")
        mos = _int(opts, MAX_OUTPUT_SIZE, INT_MAX)
        _check(mos > 0, f"Cannot have the interleaved ZOrder value use less than 1 byte, '{MAX_OUTPUT_SIZE}' was set to {mos}")
        extra.update(var_length_contribution=vlc, max_output_size=mos)
    action = _action_options(opts)
    max_failed = _int(opts, PARTIAL_MAX_FAILED, action["max_commits"])
    return RewriteOptions(
        **size, **action, **extra, rewriter=rewriter, job_order=job_order, output_spec_id=spec_id,
        delete_file_threshold=threshold, delete_ratio_threshold=ratio, max_files_to_rewrite=max_files,
        max_failed_commits=max_failed,
        use_starting_sequence_number=_bool(opts, USE_STARTING_SEQ, True),
        remove_dangling_deletes=_bool(opts, REMOVE_DANGLING, False),
    )


def parse_position_delete_options(
    options: Mapping[str, str] | None, *, table_properties: Mapping[str, str] | None = None,
) -> PositionDeleteRewriteOptions:
    """Validate ``rewrite_position_delete_files`` options (Java 1.10's valid set; the default target is
    the table property ``write.delete.target-file-size-bytes``)."""
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    _check_unknown(opts, _POS_DELETE_ACTION | _SIZE_PLANNER | {JOB_ORDER}, BIN_PACK)
    props = table_properties or {}
    default_target = DELETE_TARGET_FILE_SIZE_BYTES.read(props)
    size = _size_options(opts, default_target)
    job_order = _job_order(opts)
    return PositionDeleteRewriteOptions(**size, **_action_options(opts), job_order=job_order)


# ------------------------------------------------------------------------------ sizing
def write_max_file_size(target: int, max_size: int) -> int:
    """Target plus half the way to the max: the size writers roll files at."""
    return int(target + (max_size - target) * 0.5)


def expected_output_files(input_size: int, opts: SizeOptions, compression_factor: float = 1.0) -> int:
    """How many files a group of ``input_size`` bytes should become (Java's rounding rule).

    The remainder after whole target-sized files is kept as its own file when it is larger than the
    min size, or when spreading it over the others would make them more than 10% over target.
    """
    size = int(input_size * compression_factor)
    target, min_size = opts.target_file_size, opts.min_file_size
    if size < target:
        return 1
    with_rem = -(-size // target)
    without_rem = size // target
    avg_without = size // without_rem
    if size % target > min_size:
        n = with_rem
    elif avg_without < min(1.1 * target, float(opts.write_max_file_size)):
        n = without_rem
    else:
        n = with_rem
    return max(1, n)


def input_split_size(input_size: int, opts: SizeOptions, compression_factor: float = 1.0) -> int:
    """Bytes per read split of a bin-pack rewrite, between the target and the writer's max."""
    estimated = input_size // expected_output_files(input_size, opts, compression_factor) + SPLIT_OVERHEAD
    if estimated < opts.target_file_size:
        return opts.target_file_size
    return min(estimated, opts.write_max_file_size)


def pack(items: Sequence[Any], weights: Sequence[int], max_weight: int) -> list[list[Any]]:
    """Sequential bin packing with a look-back of one bin (Java's ``ListPacker(max, 1, false)``):
    an item that does not fit closes the open bin; an item heavier than the max gets its own bin."""
    bins: list[list[Any]] = []
    current: list[Any] = []
    weight = 0
    for item, w in zip(items, weights):
        if current and weight + w > max_weight:
            bins.append(current)
            current, weight = [], 0
        current.append(item)
        weight += w
    if current:
        bins.append(current)
    return bins


# ------------------------------------------------------------------------------ deletes
def is_file_scoped(delete: Any) -> bool:
    """True for a DV or a position delete file whose rows all target one data file (Java's
    ``ContentFileUtil.isFileScoped``: ``referenced_data_file``, or equal ``file_path`` bounds)."""
    if delete.content != FileContent.POSITION_DELETES:
        return False
    if delete.referenced_data_file is not None:
        return True
    lo = (delete.lower_bounds or {}).get(DELETE_FILE_PATH_ID)
    hi = (delete.upper_bounds or {}).get(DELETE_FILE_PATH_ID)
    return lo is not None and lo == hi


def _too_many_deletes(task: FileScanTask, opts: RewriteOptions) -> bool:
    return len(task.deletes) >= opts.delete_file_threshold


def _too_high_delete_ratio(task: FileScanTask, opts: RewriteOptions) -> bool:
    if not task.deletes or task.data_file.record_count <= 0:
        return False
    known = sum(d.data_file.record_count for d in task.deletes if is_file_scoped(d.data_file))
    deleted = min(known, task.data_file.record_count)
    return deleted / task.data_file.record_count >= opts.delete_ratio_threshold


# ------------------------------------------------------------------------------ groups
@dataclass(frozen=True, slots=True)
class FileGroup:
    """One unit of rewriting: files of one partition bucket, rewritten by one Spark job."""

    global_index: int
    partition_index: int
    partition: tuple
    tasks: tuple[Any, ...]
    input_split_size: int
    expected_output_files: int
    max_output_file_size: int
    output_spec_id: int | None = None

    @property
    def files(self) -> list[Any]:
        """The files being replaced."""
        return [t.data_file if hasattr(t, "data_file") else t for t in self.tasks]

    @property
    def input_size(self) -> int:
        """Total bytes of the input files."""
        return sum(_length(t) for t in self.tasks)

    @property
    def input_file_count(self) -> int:
        """Number of input files."""
        return len(self.tasks)

    def dangling_dvs(self) -> list[Any]:
        """DVs of the group's data files: obsolete once the files are rewritten with deletes applied."""
        seen: dict[tuple, Any] = {}
        for t in self.tasks:
            for d in getattr(t, "deletes", ()):
                f = d.data_file
                if f.file_format == FileFormat.PUFFIN and f.content == FileContent.POSITION_DELETES:
                    seen.setdefault((f.file_path, f.content_offset, f.referenced_data_file), f)
        return list(seen.values())


@dataclass(frozen=True, slots=True)
class RewritePlan:
    """Selected groups in submission order; counts per partition before ``max-files-to-rewrite``."""

    groups: tuple[FileGroup, ...]
    total_group_count: int
    groups_in_partition: dict[tuple, int] = field(default_factory=dict)

    @property
    def file_count(self) -> int:
        """Files in the selected groups."""
        return sum(g.input_file_count for g in self.groups)


def _length(task: Any) -> int:
    return content_size(task.data_file if hasattr(task, "data_file") else task)


def _order_key(order: str):
    if order == "bytes-asc":
        return lambda g: g.input_size
    if order == "bytes-desc":
        return lambda g: -g.input_size
    if order == "files-asc":
        return lambda g: g.input_file_count
    if order == "files-desc":
        return lambda g: -g.input_file_count
    return None


def plan_groups(
    tasks: Iterable[Any],
    opts: SizeOptions,
    *,
    bucket_of,
    file_filter=None,
    group_filter=None,
    compression_factor: float = 1.0,
    max_files_to_rewrite: int | None = None,
    output_spec_id: int | None = None,
) -> RewritePlan:
    """Bucket ``tasks`` with ``bucket_of(task)``, filter files, bin-pack, filter and order groups.

    ``file_filter(task)`` and ``group_filter(tasks)`` add the rewriter-specific candidate rules; the
    size rules (outside [min, max] for files; enough files, enough or too much content for groups)
    always apply, and ``rewrite-all`` bypasses both.
    """
    buckets: dict[Any, tuple[tuple, list[Any]]] = {}
    for t in tasks:
        raw = bucket_of(t)
        key = tuple(partition_key(0, raw)[1])
        buckets.setdefault(key, (raw, []))[1].append(t)

    def candidate(t: Any) -> bool:
        n = _length(t)
        return n < opts.min_file_size or n > opts.max_file_size or (file_filter is not None and file_filter(t))

    def keep(group: list[Any]) -> bool:
        size = sum(_length(t) for t in group)
        return ((len(group) > 1 and len(group) >= opts.min_input_files)
                or (len(group) > 1 and size > opts.target_file_size)
                or size > opts.max_file_size
                or (group_filter is not None and group_filter(group)))

    per_bucket: list[tuple[tuple, list[list[Any]]]] = []
    for raw, items in buckets.values():
        selected = items if opts.rewrite_all else [t for t in items if candidate(t)]
        groups = pack(selected, [_length(t) for t in selected], opts.max_group_size)
        if not opts.rewrite_all:
            groups = [g for g in groups if keep(g)]
        per_bucket.append((raw, groups))

    out: list[FileGroup] = []
    partition_counter: dict[tuple, int] = {}
    counted = 0
    index = 0
    writer_max = opts.write_max_file_size
    for raw, groups in per_bucket:
        key = tuple(partition_key(0, raw)[1])
        for g in groups:
            size = sum(_length(t) for t in g)
            if max_files_to_rewrite is not None:
                if counted >= max_files_to_rewrite:
                    continue
                g = g[: max_files_to_rewrite - counted]
                counted += len(g)
            index += 1
            partition_counter[key] = partition_counter.get(key, 0) + 1
            out.append(FileGroup(
                global_index=index, partition_index=partition_counter[key], partition=raw, tasks=tuple(g),
                input_split_size=input_split_size(size, opts, compression_factor),
                expected_output_files=expected_output_files(size, opts, compression_factor),
                max_output_file_size=writer_max, output_spec_id=output_spec_id,
            ))
    key_fn = _order_key(opts.job_order)
    if key_fn is not None:
        out.sort(key=key_fn)  # stable, like Java's comparator sort
    in_partition = {tuple(partition_key(0, raw)[1]): len(groups) for raw, groups in per_bucket if groups}
    return RewritePlan(tuple(out), sum(in_partition.values()), in_partition)


def data_bucket(md: TableMetadata):
    """Java's bucketing for data files: the partition when written with the current spec, else the
    all-null partition of the current spec (files of other specs are rewritten together)."""
    current = md.spec()
    empty = (None,) * len(current.fields)

    def bucket_of(task: FileScanTask) -> tuple:
        return tuple(task.data_file.partition) if task.data_file.spec_id == current.spec_id else empty

    return bucket_of


def plan_rewrite(
    md: TableMetadata,
    io: Any,
    opts: RewriteOptions,
    *,
    filter: Any = None,
    snapshot_id: int | None = None,
    case_sensitive: bool = False,
    tasks: Iterable[FileScanTask] | None = None,
    read_entries: Callable[[ScanManifests], Iterable[list[ScanEntry]]] | None = None,
) -> RewritePlan:
    """Plan a data-file rewrite of ``snapshot_id`` (default: current) restricted by ``filter``.

    ``tasks`` replaces scan planning (tests); otherwise :func:`iter_file_scan_tasks` plans the files
    whose partition or metrics may match ``filter`` -- residuals are ignored, whole files are rewritten
    -- reading the data manifests with ``read_entries`` when given (an engine's tasks).
    """
    if tasks is None:
        if snapshot_id is None and md.current_snapshot() is None:
            return RewritePlan((), 0, {})
        tasks = iter_file_scan_tasks(md, io, snapshot_id=snapshot_id, filter=filter, case_sensitive=case_sensitive,
                                     read_entries=read_entries)
    cf = opts.compression_factor if opts.rewriter in (SORT, Z_ORDER) else 1.0
    return plan_groups(
        tasks, opts, bucket_of=data_bucket(md),
        file_filter=lambda t: _too_many_deletes(t, opts) or _too_high_delete_ratio(t, opts),
        group_filter=lambda g: any(_too_many_deletes(t, opts) or _too_high_delete_ratio(t, opts) for t in g),
        compression_factor=cf, max_files_to_rewrite=opts.max_files_to_rewrite, output_spec_id=opts.output_spec_id,
    )
