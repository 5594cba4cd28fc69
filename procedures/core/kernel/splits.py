"""Turning planned file scan tasks into read splits and packing them into engine tasks.

A scan engine should neither start one task per tiny file nor read a huge file in a single task.
Iceberg Java solves both with the table properties ``read.split.target-size`` (bytes per engine
task), ``read.split.open-file-cost`` (the minimum weight a file counts for, so many tiny files do not
pile into one task) and ``read.split.planning-lookback`` (how many partly filled bins stay open).
This module does the same on plain :class:`~procedures.core.kernel.scan.FileScanTask` objects:

* :func:`split_task` cuts a data file at its ``split_offsets`` (row-group starts) into byte ranges of
  about the target size; a reader keeps a row group when its first byte lies in the range, so
  contiguous ranges read every row group exactly once;
* :func:`plan_task_groups` bin-packs the pieces by weight (bytes read, deletes included) with a
  bounded look-back, emitting the fullest open bin when a new one is needed;
* :func:`plan_spread_groups` cuts a scan too small to give every core a group finer and deals the
  pieces into one balanced group per core.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Sequence

from procedures.core.kernel.properties import SPLIT_LOOKBACK, SPLIT_OPEN_FILE_COST, SPLIT_SIZE
from procedures.core.kernel.scan import FileScanTask
from procedures.errors import ValidationError
from procedures.spec.manifest.model import FileFormat

__all__ = [
    "SplitOptions",
    "valid_split_offsets",
    "split_task",
    "task_weight",
    "plan_task_groups",
    "plan_spread_groups",
    "spread_groups",
    "spread_weights",
]

_DEFAULT_SPLIT_SIZE = SPLIT_SIZE.default
_DEFAULT_OPEN_FILE_COST = SPLIT_OPEN_FILE_COST.default
_DEFAULT_LOOKBACK = SPLIT_LOOKBACK.default
#: a small scan is cut into this many pieces per core before they are dealt out
_PIECES_PER_CORE = 4


@dataclasses.dataclass(frozen=True)
class SplitOptions:
    """How a scan is cut into engine tasks (defaults are Iceberg's)."""

    split_size: int = _DEFAULT_SPLIT_SIZE
    open_file_cost: int = _DEFAULT_OPEN_FILE_COST
    lookback: int = _DEFAULT_LOOKBACK

    def __post_init__(self) -> None:
        for name, low in (("split_size", 1), ("open_file_cost", 0), ("lookback", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValidationError(f"Invalid {name} {value!r}: must be an integer >= {low}")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], **overrides: int | None) -> "SplitOptions":
        """Options from table properties; keyword overrides (``None`` = not given) win."""
        values = {
            "split_size": SPLIT_SIZE.read(properties),
            "open_file_cost": SPLIT_OPEN_FILE_COST.read(properties),
            "lookback": SPLIT_LOOKBACK.read(properties),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)


def valid_split_offsets(task: FileScanTask) -> tuple[int, ...] | None:
    """The data file's split offsets when they can be trusted: strictly ascending, non-negative
    and inside the file (Java ignores the whole list otherwise, and so do we)."""
    df = task.data_file
    offsets = df.split_offsets
    if not offsets or df.file_format != FileFormat.PARQUET:
        return None
    offsets = tuple(offsets)
    if offsets[0] < 0 or offsets[-1] >= df.file_size_in_bytes:
        return None
    if any(b <= a for a, b in zip(offsets, offsets[1:])):
        return None
    return offsets


def split_task(task: FileScanTask, split_size: int) -> list[FileScanTask]:
    """``task`` cut at its row-group offsets into byte ranges of at most about ``split_size``
    (a single row group larger than that stays whole).  Ranges are contiguous and cover the file
    from byte 0, so a reader that keeps a row group when its start lies in ``[start, start+length)``
    reads each row group exactly once.  Files without usable offsets stay whole."""
    if task.length is not None:
        return [task]  # already a split
    offsets = valid_split_offsets(task)
    size = task.data_file.file_size_in_bytes
    if offsets is None or len(offsets) < 2 or size <= split_size:
        return [task]
    ends = list(offsets[1:]) + [size]
    out: list[FileScanTask] = []
    start, first = 0, offsets[0]
    for rg_start, rg_end in zip(offsets, ends):
        if rg_start > first and rg_end - first > split_size:
            # this row group does not fit: the range ends where it begins
            out.append(dataclasses.replace(task, start=start, length=rg_start - start))
            start = first = rg_start
    out.append(dataclasses.replace(task, start=start, length=size - start))
    return out


def task_weight(task: FileScanTask, open_file_cost: int) -> int:
    """Bytes a task costs to read: its range plus its delete files, at least the open-file cost
    for each file it opens."""
    length = task.length if task.length is not None else task.data_file.file_size_in_bytes
    deletes = sum(d.data_file.content_size_in_bytes or d.data_file.file_size_in_bytes for d in task.deletes)
    return max(length + deletes, (1 + len(task.deletes)) * open_file_cost)


def plan_task_groups(tasks: Iterable[FileScanTask], options: SplitOptions) -> list[list[FileScanTask]]:
    """Split large files and bin-pack the pieces into groups of about ``options.split_size``.

    Up to ``options.lookback`` bins stay open; a piece goes into the first open bin it fits, and
    when none has room the fullest open bin is emitted to make space.  Pieces heavier than the
    target get a bin of their own.  Order within a bin follows the input order.
    """
    target = options.split_size
    bins: list[list[FileScanTask]] = []
    weights: list[int] = []  # of the open bins, index for index
    out: list[list[FileScanTask]] = []
    for task in tasks:
        for piece in split_task(task, target):
            w = task_weight(piece, options.open_file_cost)
            for i in range(len(bins)):
                if weights[i] + w <= target:
                    bins[i].append(piece)
                    weights[i] += w
                    break
            else:
                if len(bins) >= options.lookback:
                    fullest = max(range(len(bins)), key=weights.__getitem__)
                    out.append(bins.pop(fullest))
                    weights.pop(fullest)
                bins.append([piece])
                weights.append(w)
    out.extend(bins)
    return out


def spread_groups(groups: Sequence[Sequence[FileScanTask]], slots: int,
                  open_file_cost: int = 0) -> list[list[int]]:
    """Indexes of ``groups`` dealt into at most ``slots`` engine tasks of balanced weight.

    For work whose output is per group (a compaction writes each split's files) but whose engine
    tasks have a fixed cost: see :func:`spread_weights`, with each group weighing what its tasks read.
    """
    return spread_weights([sum(task_weight(t, open_file_cost) for t in g) for g in groups], slots)


def spread_weights(weights: Sequence[int], slots: int) -> list[list[int]]:
    """Indexes of items of the given ``weights`` dealt into at most ``slots`` engine tasks of
    balanced weight: the heaviest item goes to the lightest task first (longest-processing-time
    order); each task lists its items in their original order, and no task is empty."""
    if slots < 1:
        raise ValidationError(f"Invalid slots {slots!r}: must be at least 1")
    n = min(slots, len(weights))
    loads = [0] * n
    members: list[list[int]] = [[] for _ in range(n)]
    for i in sorted(range(len(weights)), key=lambda i: -weights[i]):
        j = min(range(n), key=lambda j: (loads[j], j))
        loads[j] += weights[i]
        members[j].append(i)
    return [sorted(m) for m in members]


def plan_spread_groups(tasks: Iterable[FileScanTask], options: SplitOptions, parallelism: int) -> list[list[FileScanTask]]:
    """:func:`plan_task_groups`, except for a scan that would leave some of ``parallelism`` cores
    without a group: it is cut into pieces of about a quarter of a core's share and dealt into
    ``parallelism`` groups of balanced weight, so one wave of tasks reads it evenly (a plain
    smaller target would pack unevenly: 1,000 files into two bins of 564 and 436)."""
    tasks = list(tasks)
    groups = plan_task_groups(tasks, options)
    if parallelism <= 1 or len(groups) >= parallelism:
        return groups
    scan_size = sum(task_weight(t, options.open_file_cost) for t in tasks)
    piece = max(1, -(-scan_size // (_PIECES_PER_CORE * parallelism)))
    pieces = plan_task_groups(tasks, dataclasses.replace(options, split_size=piece))
    return [[t for i in members for t in pieces[i]]
            for members in spread_groups(pieces, parallelism, options.open_file_cost)]
