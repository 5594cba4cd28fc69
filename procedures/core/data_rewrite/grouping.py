"""File groups for ``rewrite_data_files`` and ``rewrite_position_delete_files`` (procedures.md §3.9,
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

The options are parsed and validated in :mod:`procedures.core.data_rewrite.options`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from procedures.core.data_rewrite.options import RewriteOptions, SizeOptions
from procedures.core.kernel.scan import FileScanTask, ScanEntry, ScanManifests, iter_file_scan_tasks, partition_key
from procedures.core.kernel.summary import content_size
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.metadata import TableMetadata
from procedures.spec.metadata_columns import DELETE_FILE_PATH_ID

__all__ = [
    "FileGroup", "RewritePlan", "pack", "plan_groups", "plan_rewrite", "data_bucket", "expected_output_files",
    "input_split_size", "is_file_scoped", "GroupRewrite", "DeleteGroup",
]

SPLIT_OVERHEAD = 5 * 1024


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


@dataclass(frozen=True, slots=True)
class DeleteGroup:
    """What rewriting one group needs: its delete files, the live data files they may keep deletes
    for (those of the group's partition, by path), and those files' current DVs (v3).  The engine
    writes new delete files holding only the positions of these targets; on v3 each new DV absorbs
    its data file's current DV, which the commit then replaces."""

    files: tuple[DataFile, ...]
    targets: dict[str, DataFile]
    dvs: dict[str, DataFile]


@dataclass(frozen=True, slots=True)
class GroupRewrite:
    """What an engine reports for one group it rewrote: the group's position in its plan, the files
    written for it (uncommitted), or the error that failed it (with the task's traceback when the
    group failed inside an engine task)."""

    index: int
    added: tuple[Any, ...] = ()
    error: BaseException | None = None
    task_traceback: str | None = None


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
    io: FileAccess,
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
    return plan_groups(
        tasks, opts, bucket_of=data_bucket(md),
        file_filter=lambda t: _too_many_deletes(t, opts) or _too_high_delete_ratio(t, opts),
        group_filter=lambda g: any(_too_many_deletes(t, opts) or _too_high_delete_ratio(t, opts) for t in g),
        compression_factor=opts.compression_factor, max_files_to_rewrite=opts.max_files_to_rewrite, output_spec_id=opts.output_spec_id,
    )
