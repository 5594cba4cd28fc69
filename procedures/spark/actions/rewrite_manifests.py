"""The engine half of ``rewrite_manifests`` for large tables (procedures.md §3.10).

:class:`~procedures.core.rewrite_manifests_op.RewriteManifests` plans on the driver; when a content
type's manifests pass the driver's limits (:func:`procedures.core.gc.reachability.use_spark`), it
hands a :class:`~procedures.core.rewrite_manifests_op.RewriteJob` to :class:`SparkManifestRewriter`,
which keeps the entries off the driver, as Java's ``RewriteManifestsSparkAction`` does:

1. the clustering keys are counted: a manifest whose partition summaries show a single partition
   (:func:`~procedures.core.rewrite_manifests_op.uniform_partition`) counts from the manifest list
   alone; only the other ("mixed") manifests are read, on the executors, which send back the
   distinct keys and their counts.  The driver cuts the keys into chunks
   (:func:`~procedures.core.rewrite_manifests_op.assign_chunks`; an unpartitioned spec is cut by
   position, :func:`~procedures.core.rewrite_manifests_op.chunk_of_position`);
2. a manifest that falls in one chunk, or a run of positions of one, travels to its chunk's task as
   its encoded manifest-list row (the planning holds the list as
   :class:`~procedures.spec.manifest.ManifestRows`, per manifest only its count and key), which the
   task decodes into a :class:`~procedures.core.rewrite_manifests_op.ManifestSlice` and reads itself; the
   entries of mixed manifests are read on the executors and sent to their chunks' tasks.  Each task
   sorts its items (key, manifest, position) and writes one manifest, copying every entry's
   ``data_file`` bytes unchanged where the schemas allow
   (:func:`~procedures.spec.manifest.existing_records`).  Every entry is read once and pickled at
   most once (by Spark's shuffle, mixed manifests only);
3. when the chunks are fewer than the task slots (a table rewritten into one manifest), a large
   chunk is cut into runs of its sorted items (:func:`~procedures.core.rewrite_manifests_op.plan_write_tasks`):
   each run's task encodes and compresses its entries into Avro blocks framed with a sync marker
   the driver chose for the job, and one task per chunk joins the blocks behind the header
   (:meth:`~procedures.spec.manifest.ManifestWriter.close_parts`), so every core copies entries.

The manifests written are the driver's, entry for entry; only their file names differ.  A retried
task writes under a new name (the attempt number is part of it); files of failed attempts are
orphans for remove_orphan_files, never referenced.
"""

from __future__ import annotations

import bisect
import os
import pickle
from array import array
from dataclasses import replace
from typing import Any, Callable, Iterable, Iterator, Sequence

from procedures.core.gc import reachability as R
from procedures.core import rewrite_manifests_op as RM
from procedures.core.rewrite_manifests_op import (
    ManifestSlice, RewriteJob, assign_chunks, chunk_of_position, copy_slice, live_copies, live_entry_counts, order_key,
    plan_write_tasks, uniform_partition, write_copy,
)
from procedures.io.sandbox_fileio import file_io
from procedures.spark.environment import check_python_workers
from procedures.spark.session import job_description
from procedures.spark.worker import prepare_python_worker
from procedures.spec.manifest.manifest_list import ManifestRows
from procedures.spec.manifest.model import ManifestFile

__all__ = ["SparkManifestRewriter"]


def _sort_key(key: tuple) -> tuple:
    return tuple(order_key(v) for v in key)


class _Manifests:
    """A job's manifests as the driver hands them out: ``ref(i)`` is what travels to a task for the
    ``i``-th (its encoded row, no decoding), ``decoder()`` what turns it back into a
    :class:`ManifestFile` there (it carries the list's path and schema once, not per manifest)."""

    def __init__(self, manifests: Sequence[ManifestFile]) -> None:
        self.manifests = manifests
        self.encoded = isinstance(manifests, ManifestRows)

    def ref(self, index: int) -> Any:
        return self.manifests.rows[index] if self.encoded else self.manifests[index]

    def decoder(self) -> Callable[[Any], ManifestFile]:
        if not self.encoded:
            return lambda ref: ref
        path, schema = self.manifests.path, self.manifests.schema
        return lambda ref: ManifestRows.decode_one(path, schema, ref)


def _expand(group: tuple[int, list[tuple]], decode: Callable[[Any], ManifestFile]) -> Iterator[tuple[int, tuple]]:
    """A write task's compact items as it sorts and copies them (executor side):
    ``(task, (rank, manifest index, first position, ManifestSlice))``, each manifest decoded from
    the reference it travelled as."""
    task, items = group
    for rank, index, start, stop, ref in items:
        yield task, (rank, index, start, ManifestSlice(decode(ref), start, stop))


def _position_slices(index: int, ref: Any, start: int, count: int, total: int,
                     n: int) -> Iterator[tuple[int, tuple]]:
    """The chunk items of an unpartitioned manifest whose live entries are global positions
    ``[start, start + count)``: one slice per chunk it falls in, as ``(chunk, (rank, index, first
    position, stop, ref))`` (:func:`_expand` makes the task's item of it)."""
    local = 0
    while local < count:
        chunk = chunk_of_position(start + local, total, n)
        # chunks grow with the position: the slice ends where the next chunk starts
        stop = bisect.bisect_right(range(count), chunk, lo=local, key=lambda p: chunk_of_position(start + p, total, n))
        yield chunk, (0, index, local, stop, ref)
        local = stop


class SparkManifestRewriter:
    """Rewrites large manifest sets on the executors (see the module docstring)."""

    def __init__(self, spark: Any, io_properties: dict[str, str], name: str = "table", *,
                 slots: int | None = None, min_part_entries: int | None = None) -> None:
        self.spark = spark
        self.props = dict(io_properties)
        self.name = name
        # how many tasks may write at once (default: Spark's default parallelism), and the fewest
        # entries a task writes when a manifest is written in parts (default: MIN_PART_ENTRIES)
        self.slots = slots
        self.min_part_entries = min_part_entries

    def wants(self, manifests: Sequence[ManifestFile]) -> bool:
        """True when the manifests pass the driver's reading limits or hold more live entries than
        the driver should sort (:data:`~procedures.core.rewrite_manifests_op.DRIVER_MAX_REWRITE_ENTRIES`)."""
        return (R.use_spark(self.spark, manifests)
                or sum(live_entry_counts(manifests)) > RM.DRIVER_MAX_REWRITE_ENTRIES)

    def rewrite(self, job: RewriteJob) -> tuple[list[ManifestFile], int]:
        """Write the job's chunks on the executors; returns the new manifests and entries written.

        The driver keeps per manifest only its live count and clustering key (or "mixed"); each
        manifest travels to its task as its encoded manifest-list row, once.  When there are fewer
        chunks than task slots, a large chunk is written by several tasks, each encoding a run of its
        entries (:func:`~procedures.core.rewrite_manifests_op.cut_chunk`), and one task per chunk
        joins the runs into the manifest."""
        check_python_workers(self.spark)
        sc = self.spark.sparkContext
        props, specs, fv = self.props, dict(job.specs), job.format_version
        manifests = _Manifests(job.manifests)
        decode = manifests.decoder()
        count = len(job.manifests)
        job = replace(job, manifests=())  # what the tasks need, without the list they are handed parts of
        # chunk -> its items as (rank, manifest index, first position, stop, ref) and their live
        # counts, built once; the tasks expand them (_expand): ten thousand manifests are a few plain
        # tuples each here
        groups: dict[int, list[tuple]] = {}
        counts: dict[int, list[int]] = {}
        loose: dict[int, dict[int, int]] = {}  # chunk -> rank -> entries read from mixed manifests
        mixed: list[tuple[int, Any]] = []
        entry_chunks: dict[bytes, tuple[int, int]] = {}
        if job.spec.fields:
            ptype = job.spec.partition_type(job.schema)
            keys: dict[Any, int] = {}  # clustering key -> its number in key_of
            key_of = array("l")  # per manifest: the number of its key, -1 when mixed or empty
            live = array("q")  # per manifest: its live entries (of a uniform one)
            keyed: dict[Any, int] = {}
            for i, m in enumerate(manifests.manifests):
                u = uniform_partition(m, ptype)
                n = 0 if u is None else live_entry_counts((m,))[0]
                live.append(n)
                if u is None:
                    mixed.append((i, manifests.ref(i)))
                elif n:
                    key = job.partition_key(u)
                    keyed[key] = keyed.get(key, 0) + n
                    key_of.append(keys.setdefault(key, len(keys)))
                    continue
                key_of.append(-1)
            read_keys: list[bytes] = []
            if mixed:
                uniform = dict(keyed)
                read_keys = self._count_keys(job, mixed, keyed, decode)
            by_key = assign_chunks(keyed, job.n, _sort_key)
            if mixed:
                for key, n in keyed.items():
                    if n > uniform.get(key, 0):
                        chunk, rank = by_key[key]
                        loose.setdefault(chunk, {})[rank] = n - uniform.get(key, 0)
                del uniform
            # the executors look keys up by their own pickles (a key the driver derived from a summary
            # may pickle differently while equal)
            entry_chunks = {k: by_key[pickle.loads(k)] for k in read_keys}
            placed_at = [by_key[key] for key in keys]  # key number -> (chunk, rank)
            del keys
            for i, k in enumerate(key_of):
                if k >= 0:
                    chunk, rank = placed_at[k]
                    groups.setdefault(chunk, []).append((rank, i, 0, None, manifests.ref(i)))
                    counts.setdefault(chunk, []).append(live[i])
            del key_of, placed_at, live
            n_chunks = 1 + max((c for c, _ in by_key.values()), default=0)
        else:
            live_counts = live_entry_counts(manifests.manifests)
            total, start = sum(live_counts), 0
            for i, n in enumerate(live_counts):
                for chunk, item in _position_slices(i, manifests.ref(i), start, n, total, job.n):
                    groups.setdefault(chunk, []).append(item)
                    counts.setdefault(chunk, []).append(item[3] - item[2])
                start += n
            n_chunks = 1 + chunk_of_position(max(total - 1, 0), total, job.n)
        task_items, plan = plan_write_tasks(groups, counts, loose, n_chunks, self.slots or sc.defaultParallelism,
                                            self.min_part_entries or RM.MIN_PART_ENTRIES)
        groups.clear()
        counts.clear()
        placement = sc.broadcast((entry_chunks, plan.routes))
        tasks = plan.tasks
        # the parts of one manifest frame their blocks with the marker its header will carry
        sync = os.urandom(16) if plan.split else None

        def place(pairs: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, tuple]]:
            prepare_python_worker()
            io, schema = file_io(props), job.entry_schema()
            table, routes = placement.value
            for index, ref in pairs:
                for position, (partition, copy) in enumerate(live_copies(io, decode(ref), schema, fv, specs)):
                    chunk, rank = table[pickle.dumps(job.partition_key(partition))]
                    first, cuts = routes[chunk]
                    yield first + bisect.bisect_right(cuts, (rank, index, position)), (rank, index, position, copy)

        def write(task_and_items: Iterator[tuple[int, tuple]]) -> Iterator[Any]:
            prepare_python_worker()
            rows = list(task_and_items)
            if not rows:
                return
            chunk, part = tasks[rows[0][0]]
            rows.sort(key=lambda r: r[1][:3])
            io = file_io(props)
            writer = job.writer(io, chunk, TaskAttempt.number(), sync)
            written = 0
            for _, (_, _, _, item) in rows:
                if isinstance(item, ManifestSlice):
                    written += copy_slice(io, writer, item, fv, specs)
                else:
                    write_copy(writer, item)
                    written += 1
            if sync is None:
                yield pickle.dumps((chunk, writer.close(), written))
            else:
                yield chunk, (part, writer.close_part())

        def join(chunk_and_parts: Iterator[tuple[int, tuple]]) -> Iterator[bytes]:
            prepare_python_worker()
            parts = sorted(chunk_and_parts, key=lambda cp: cp[1][0])
            if not parts:
                return
            chunk = parts[0][0]
            writer = job.writer(file_io(props), chunk, TaskAttempt.number(), sync)
            written = sum(p.entries for _, (_, p) in parts)
            yield pickle.dumps((chunk, writer.close_parts(p for _, (_, p) in parts), written))

        # one slice per task; parallelize hands the items to the JVM at once, so the driver's lists
        # are dropped before the job runs
        chunked = sc.parallelize(task_items, max(1, len(task_items))).flatMap(lambda group: _expand(group, decode))
        task_items.clear()
        n_mixed = len(mixed)
        if mixed:
            placed = sc.parallelize(mixed, max(1, min(len(mixed), sc.defaultParallelism * 4))).mapPartitions(place)
            mixed.clear()
            # entries read on the executors reach their task through a shuffle
            chunked = chunked.union(placed).partitionBy(len(tasks), lambda task: task)
        outcomes = chunked.mapPartitions(write)
        if sync is not None:
            # the parts of a chunk meet in one task, which writes the manifest
            outcomes = outcomes.partitionBy(n_chunks, lambda chunk: chunk).mapPartitions(join)
        split = f", in {len(tasks)} parts" if sync is not None else ""
        with job_description(self.spark, f"rewrite_manifests: {self.name}: write {n_chunks} manifests "
                                         f"from {count} ({n_mixed} read for placement){split}"):
            results = outcomes.collect()
        placement.unpersist()
        done = sorted(pickle.loads(r) for r in results)
        return [m for _, m, _ in done], sum(n for _, _, n in done)

    def _count_keys(self, job: RewriteJob, mixed: list[tuple[int, Any]], keyed: dict[Any, int],
                    decode: Callable[[Any], ManifestFile]) -> list[bytes]:
        """Count the live entries of the mixed manifests (``(index, ref)``, ``decode(ref)`` the
        manifest) per clustering key on the executors, into ``keyed``; returns the keys as the
        executors pickled them."""
        sc = self.spark.sparkContext
        props, specs, fv = self.props, dict(job.specs), job.format_version

        def keys(pairs: Iterable[tuple[int, Any]]) -> Iterator[tuple[bytes, int]]:
            prepare_python_worker()
            io, schema = file_io(props), job.entry_schema()
            for _, ref in pairs:
                for partition, _ in live_copies(io, decode(ref), schema, fv, specs):
                    yield pickle.dumps(job.partition_key(partition)), 1

        with job_description(self.spark, f"rewrite_manifests: {self.name}: count entries per partition "
                                         f"in {len(mixed)} manifests"):
            counted = (sc.parallelize(mixed, max(1, min(len(mixed), sc.defaultParallelism * 4)))
                       .mapPartitions(keys).reduceByKey(lambda a, b: a + b).collect())
        for k, n in counted:
            key = pickle.loads(k)
            keyed[key] = keyed.get(key, 0) + n
        return [k for k, _ in counted]


class TaskAttempt:
    """The running Spark task's attempt number (0 outside a task)."""

    @staticmethod
    def number() -> int:
        """``TaskContext.attemptNumber()`` of the current task."""
        from pyspark import TaskContext  # noqa: PLC0415 -- executor side only

        ctx = TaskContext.get()
        return 0 if ctx is None else int(ctx.attemptNumber())
