"""Scan planning with the data manifests read on the executors, past a size.

:func:`procedures.core.kernel.scan.iter_file_scan_tasks` reads every data manifest on the driver, where
decoding the entries of a large table (10k manifests, 1M files) is most of a filtered scan's time.
When more than :data:`DRIVER_MAX_SCAN_MANIFESTS` data manifests listing more than
:data:`DRIVER_MAX_SCAN_ENTRIES` files remain after pruning, or they pass the driver's reading limits
of the garbage-collection procedures (:func:`procedures.core.gc.reachability.exceeds_driver_limits`;
:func:`reads_manifests_in_tasks`), :class:`SparkEntryReader` reads them in Spark tasks, a contiguous group of
manifests per task, each task applying the scan's partition and metrics filter
(:class:`~procedures.core.kernel.scan.EntryFilter`) and sending back only the matching entries, one pickled
list per manifest.  The driver reads the delete manifests and builds the tasks from those lists in
manifest order (:func:`~procedures.core.kernel.scan.tasks_from_entries`), so the tasks are the driver
path's, in the same order.

:func:`plan_scan_tasks` returns the tasks as a list (the job's results collected at once, every
partition in parallel).  :func:`iter_scan_tasks` streams them: the results are pulled from the
executors a partition at a time (``toLocalIterator``), so the driver holds one partition's matching
entries and whatever the caller keeps, never the whole task list; for callers that use each task
once.
"""

from __future__ import annotations

import pickle
from typing import Any, Iterable, Iterator, Sequence, TypeVar

from procedures.core.gc import reachability
from procedures.core.kernel.scan import (
    FileScanTask,
    ScanEntry,
    ScanManifests,
    iter_file_scan_tasks,
    listed_entries,
    read_entries_on_driver,
)
from procedures.errors import ScanPlanningError
from procedures.io.sandbox_fileio import file_io
from procedures.spark.dataframes import collect_first_column, map_slices, parallelism, slices_frame, unpickle_rows
from procedures.spark.environment import check_python_workers
from procedures.spark.session import job_description
from procedures.spark.worker import prepare_python_worker
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import ManifestFile

__all__ = ["DRIVER_MAX_SCAN_MANIFESTS", "DRIVER_MAX_SCAN_ENTRIES", "SparkEntryReader", "reads_manifests_in_tasks",
           "in_manifest_order", "in_order", "iter_scan_tasks", "plan_scan_tasks"]

T = TypeVar("T")
_NONE = object()  # no result yet (None could be a value)

#: Data manifests a scan always reads on the driver (more of them go to a Spark job when they list
#: more than DRIVER_MAX_SCAN_ENTRIES files).  Measured on 100-entry manifests: 1,000 of them
#: take 5.4 s on the driver and 3.0 s as a Spark job on two cores; a job's fixed cost (~0.3 s) is
#: about what the driver spends on 50 such manifests.
DRIVER_MAX_SCAN_MANIFESTS = 200

#: Files (by their manifest-list counts) that more than DRIVER_MAX_SCAN_MANIFESTS data manifests may
#: list and still be read on the driver.  The driver decodes about 24 us an entry; a planning job
#: costs about 0.2 s before its first entry (a DataFrame job: about 40 ms more than the RDD job
#: before the Spark Connect conversion), then about 7 us an entry on the driver plus 24 us spread
#: over the executor cores.  Measured on two cores (28 November): 250 one-file manifests take 27 ms
#: on the driver against 182 ms as a job, 1,000 of them 113 against 242 ms, 250 of 100 files 610
#: against 681 ms, 1,000 of 100 files 2.4 against 2.1 s: a job pays off past about 40,000 entries
#: on two cores and 15,000 on eight.
DRIVER_MAX_SCAN_ENTRIES = 20_000

#: pickled entries a Spark task sends back in one piece (several manifests' when they are small)
RESULT_PIECE_BYTES = 256 * 1024


def reads_manifests_in_tasks(manifests: Sequence[ManifestFile]) -> bool:
    """Whether a scan reads its data manifests (after pruning) in Spark tasks rather than on the
    driver: more than :data:`DRIVER_MAX_SCAN_MANIFESTS` of them listing more than
    :data:`DRIVER_MAX_SCAN_ENTRIES` files (or not saying how many), or past the driver's reading
    limits of the garbage-collection procedures."""
    if len(manifests) > DRIVER_MAX_SCAN_MANIFESTS:
        listed = listed_entries(manifests)
        if listed is None or listed > DRIVER_MAX_SCAN_ENTRIES:
            return True
    return reachability.exceeds_driver_limits(manifests)


class SparkEntryReader:
    """Reads a scan's data manifests on the executors when there are enough of them.

    ``min_manifests`` forces the choice: read on the executors when at least that many data
    manifests remain after pruning (tests use a small one); None uses :func:`reads_manifests_in_tasks`.  ``stream`` pulls the job's results a partition at a time
    instead of collecting them (bounded driver memory, for a caller that consumes the entries once).
    """

    def __init__(self, spark: Any, io: FileAccess, name: str = "table", min_manifests: int | None = None,
                 stream: bool = False) -> None:
        self.spark = spark
        self.io = io  # the driver path reads with the table's own FileIO
        self.props = dict(getattr(io, "properties", {}) or {})  # the executors rebuild it from these
        self.name = name
        self.min_manifests = min_manifests
        self.stream = stream
        self.distributed = False  # whether the last plan read its manifests on the executors

    def wants(self, manifests: Sequence[ManifestFile]) -> bool:
        """Whether reading ``manifests`` should be a Spark job."""
        if self.spark is None:
            return False
        if self.min_manifests is not None:
            return len(manifests) >= self.min_manifests
        return reads_manifests_in_tasks(manifests)

    def __call__(self, plan: ScanManifests) -> Iterable[list[ScanEntry]]:
        """One list of matching entries per data manifest of ``plan``, in order."""
        manifests = plan.data_manifests  # kept encoded (ManifestRows) until a task reads them
        self.distributed = bool(manifests) and self.wants(manifests)
        if not self.distributed:
            return read_entries_on_driver(self.io, plan)
        return self._read(plan, manifests)

    def _read(self, plan: ScanManifests, manifests: Sequence[ManifestFile]) -> Iterator[list[ScanEntry]]:
        check_python_workers(self.spark)
        props, entry_filter = self.props, plan.entry_filter

        def read(group: tuple[int, Sequence[ManifestFile]]) -> Iterator[tuple[int, list[bytes]]]:
            # consecutive manifests' pickled entries go back together, about RESULT_PIECE_BYTES at a
            # time: a result row never holds one large batch for the driver
            prepare_python_worker()
            io = file_io(props)
            first, manifests_of_task = group
            piece: list[bytes] = []
            size = 0
            for manifest in manifests_of_task:
                raw = pickle.dumps(entry_filter.data_entries(io, manifest), protocol=pickle.HIGHEST_PROTOCOL)
                piece.append(raw)
                size += len(raw)
                if size >= RESULT_PIECE_BYTES:
                    yield first, piece
                    first, piece, size = first + len(piece), [], 0
            if piece:
                yield first, piece

        # one contiguous group of manifests per task, in task order (slices_frame: slice i, partition i)
        count = len(manifests)
        slices = max(1, min(count, parallelism(self.spark) * 4))
        cuts = [count * k // slices for k in range(slices + 1)]
        groups = [(a, manifests[a:b]) for a, b in zip(cuts, cuts[1:]) if b > a]
        frame = map_slices(slices_frame(self.spark, groups), read)
        if self.stream:
            yield from self._streamed(frame, count)
            return
        with job_description(self.spark, f"Planning scan of {self.name}: reading {count} manifests"):
            results = collect_first_column(frame)
        placed = in_manifest_order(_each_manifest(pickle.loads(p) for p in results), len(manifests), self.name)
        del results
        for i, raw in enumerate(placed):
            placed[i] = None  # the driver holds each manifest's entries once, never bytes and objects together
            yield pickle.loads(raw)

    def _streamed(self, frame: Any, count: int) -> Iterator[list[ScanEntry]]:
        # Every partition is computed at once into the cluster's cache, then pulled to the driver one
        # partition at a time, in partition (= manifest) order: the parallelism of a collect, the
        # memory of one partition (a bare toLocalIterator would compute the partitions one by one).
        from pyspark import StorageLevel  # noqa: PLC0415 -- the package imports without pyspark

        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            with job_description(self.spark, f"Planning scan of {self.name}: reading {count} manifests"):
                frame.count()
                # the serving thread that runs the pulling jobs starts here and inherits the description
                streamed = frame.toLocalIterator(prefetchPartitions=True)
            for raw in in_order(_each_manifest(unpickle_rows(streamed)), count, self.name):
                yield pickle.loads(raw)
        finally:
            frame.unpersist(blocking=False)


def _each_manifest(pieces: Iterable[tuple[int, list[bytes]]]) -> Iterator[tuple[int, bytes]]:
    for first, piece in pieces:
        for index, raw in enumerate(piece, first):
            yield index, raw


def in_manifest_order(results: Iterable[tuple[int, T]], count: int, name: str = "table") -> list[T]:
    """The values of ``(manifest index, value)`` pairs put in manifest order, whatever order a Spark
    job returned them in; raises ScanPlanningError unless each of the ``count`` manifests has
    exactly one (a job that lost or repeated a partition's output must not plan a wrong scan)."""
    placed: list[Any] = [_NONE] * count
    repeated, received = [], 0
    for index, value in results:
        received += 1
        if not 0 <= index < count or placed[index] is not _NONE:
            repeated.append(index)
        else:
            placed[index] = value
    missing = [i for i, value in enumerate(placed) if value is _NONE]
    if missing or repeated:
        raise ScanPlanningError(
            f"Planning the scan of {name}: the Spark job reading its {count} data manifests returned {received} "
            f"results ({len(missing)} manifests without one, first {missing[:5]}; {len(repeated)} repeated or "
            f"unknown, first {repeated[:5]}), so no task was planned from it. Retry the scan; if it happens again, look in "
            "the executors' logs for lost or re-run tasks",
            table=name, missing=missing, repeated=repeated,
        )
    return placed


def in_order(results: Iterable[tuple[int, T]], count: int, name: str = "table") -> Iterator[T]:
    """The values of ``(manifest index, value)`` pairs that must arrive in manifest order (a
    partition-by-partition stream of a job's results), passed on as they come; raises
    ScanPlanningError at the first one out of place, or at the end when some never came."""
    expected = 0
    for index, value in results:
        if index != expected:
            raise ScanPlanningError(
                f"Planning the scan of {name}: the Spark job reading its {count} data manifests returned the "
                f"result of manifest {index} where manifest {expected} was due, so the scan stops here. Retry the "
                "scan; if it happens again, look in the executors' logs for lost or re-run tasks",
                table=name, missing=[expected], repeated=[index],
            )
        expected += 1
        yield value
    if expected != count:
        raise ScanPlanningError(
            f"Planning the scan of {name}: the Spark job reading its {count} data manifests returned {expected} "
            f"results (manifests {expected} to {count - 1} without one), so the scan is incomplete. Retry the "
            "scan; if it happens again, look in the executors' logs for lost or re-run tasks",
            table=name, missing=list(range(expected, min(count, expected + 5))), repeated=[],
        )


def iter_scan_tasks(spark: Any, table: Any, *, min_manifests: int | None = None, **scan: Any) -> Iterator[FileScanTask]:
    """:func:`plan_scan_tasks` as a stream, for callers that use each task once: past a size the
    executors' results are pulled a partition at a time, so the driver never holds the whole task
    list (its memory stays flat as the table grows).  Same tasks, same order."""
    reader = SparkEntryReader(spark, table.io, str(table.name), min_manifests, stream=True)
    return iter_file_scan_tasks(table.metadata, table.io, read_entries=reader, **scan)


def plan_scan_tasks(spark: Any, table: Any, *, min_manifests: int | None = None, **scan: Any) -> list[FileScanTask]:
    """:func:`~procedures.core.kernel.scan.iter_file_scan_tasks` of a loaded table (``scan`` are its keyword
    arguments), reading the data manifests on the executors past a size (:class:`SparkEntryReader`)."""
    reader = SparkEntryReader(spark, table.io, str(table.name), min_manifests)
    return list(iter_file_scan_tasks(table.metadata, table.io, read_entries=reader, **scan))
