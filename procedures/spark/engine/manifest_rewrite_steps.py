"""The rewrite_manifests step of :class:`~procedures.spark.engine.spark_engine.SparkEngine`
(:class:`procedures.core.manifest_rewrite.manifest_rewrite_engine.ManifestRewriteEngine`): the engine half of
``rewrite_manifests`` for large tables (procedures.md §3.10).

:class:`~procedures.core.manifest_rewrite.clustering.RewriteManifests` plans on the driver; when a content
type's manifests pass the driver's limits (:func:`procedures.core.gc.reachability.use_spark`), it
hands a :class:`~procedures.core.manifest_rewrite.clustering.RewriteJob` to :class:`SparkManifestRewriter`,
which keeps the entries off the driver, as Java's ``RewriteManifestsSparkAction`` does:

1. the clustering keys are counted: a manifest whose partition summaries show a single partition
   (:func:`~procedures.core.manifest_rewrite.clustering.uniform_partition`) counts from the manifest list
   alone; only the other ("mixed") manifests are read, on the executors, which send back the
   distinct keys and their counts.  The driver cuts the keys into chunks
   (:func:`~procedures.core.manifest_rewrite.clustering.assign_chunks`; an unpartitioned spec is cut by
   position, :func:`~procedures.core.manifest_rewrite.clustering.chunk_of_position`);
2. a manifest that falls in one chunk, or a run of positions of one, travels to its chunk's task as
   its encoded manifest-list row (the planning holds the list as
   :class:`~procedures.spec.manifest.manifest_list.ManifestRows`, per manifest only its count and key), which the
   task decodes into a :class:`~procedures.core.manifest_rewrite.clustering.ManifestSlice` and reads itself; the
   entries of mixed manifests are read on the executors and sent to their chunks' tasks.  Each task
   sorts its items (key, manifest, position) and writes one manifest, copying every entry's
   ``data_file`` bytes unchanged where the schemas allow
   (:func:`~procedures.core.manifest_rewrite.entry_copy.existing_records`).  Every entry is read once and pickled at
   most once (by Spark's shuffle, mixed manifests only);
3. when the chunks are fewer than the task slots (a table rewritten into one manifest), a large
   chunk is cut into runs of its sorted items (:func:`~procedures.core.manifest_rewrite.clustering.plan_write_tasks`):
   each run's task encodes and compresses its entries into Avro blocks framed with a sync marker
   the driver chose for the job, and one task per chunk joins the blocks behind the header
   (:meth:`~procedures.spec.manifest.writer.ManifestWriter.close_parts`), so every core copies entries.

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
from typing import Any, Callable, Iterator, Sequence

from procedures.core.gc import reachability
from procedures.core.manifest_rewrite import clustering
from procedures.core.manifest_rewrite.clustering import (
    ManifestSlice, RewriteJob, assign_chunks, chunk_of_position, copy_slice, live_copies, live_entry_counts, order_key,
    plan_write_tasks, uniform_partition, write_copy,
)
from procedures.io.sandbox_fileio import file_io
from procedures.spark.dataframes import (
    collect_columns, collect_first_column, functions, local_frame, parallelism, partition_slots, payload_frame,
    slices_frame, struct_schema, with_schema,
)
from procedures.spark.environment import check_python_workers
from procedures.spark.session import job_description
from procedures.spark.worker import prepare_python_worker
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.manifest_list import ManifestRows
from procedures.spec.manifest.model import ManifestFile

__all__ = ["SparkManifestRewriter", "ManifestRewriteSteps"]

#: rows keyed for a shuffle to the task of their key (:func:`_keyed_batch`)
_KEYED = "slot int, payload binary"
_PAYLOAD = "payload binary"
#: entries a placement task routes before sending them on as one batch
_ROUTED_BATCH = 4096


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


class ManifestRewriteSteps:
    """:class:`~procedures.core.manifest_rewrite.manifest_rewrite_engine.ManifestRewriteEngine` on ``spark``."""

    spark: Any

    def manifest_rewriter(self, io: FileAccess, name: str) -> "SparkManifestRewriter | None":
        """A :class:`SparkManifestRewriter` on the session; None without one (all on the driver)."""
        if self.spark is None:
            return None
        return SparkManifestRewriter(self.spark, dict(io.properties), name)


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
        the driver should sort (:data:`~procedures.core.manifest_rewrite.clustering.DRIVER_MAX_REWRITE_ENTRIES`)."""
        return (reachability.use_spark(self.spark, manifests)
                or sum(live_entry_counts(manifests)) > clustering.DRIVER_MAX_REWRITE_ENTRIES)

    def rewrite(self, job: RewriteJob) -> tuple[list[ManifestFile], int]:
        """Write the job's chunks on the executors; returns the new manifests and entries written.

        The driver keeps per manifest only its live count and clustering key (or "mixed"); each
        manifest travels to its task as its encoded manifest-list row, once.  When there are fewer
        chunks than task slots, a large chunk is written by several tasks, each encoding a run of its
        entries (:func:`~procedures.core.manifest_rewrite.clustering.cut_chunk`), and one task per chunk
        joins the runs into the manifest."""
        check_python_workers(self.spark)
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
            # live entries of the mixed manifests, None when a manifest list does not count them
            mixed_live: int | None = 0
            for i, m in enumerate(manifests.manifests):
                u = uniform_partition(m, ptype)
                n = 0 if u is None else live_entry_counts((m,))[0]
                live.append(n)
                if u is None:
                    mixed.append((i, manifests.ref(i)))
                    counted = (m.added_files_count, m.existing_files_count)
                    mixed_live = None if mixed_live is None or None in counted else mixed_live + sum(counted)
                elif n:
                    key = job.partition_key(u)
                    keyed[key] = keyed.get(key, 0) + n
                    key_of.append(keys.setdefault(key, len(keys)))
                    continue
                key_of.append(-1)
            read_keys: list[bytes] = []
            if mixed:
                uniform = dict(keyed)
                # the tasks' own counts come back as they are while they are at most the entries the
                # driver may hold (each task sends a key once); past that Spark sums them in a shuffle
                summed = mixed_live is None or mixed_live > clustering.DRIVER_MAX_REWRITE_ENTRIES
                read_keys = self._count_keys(job, mixed, keyed, decode, summed)
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
        slots = self.slots or parallelism(self.spark)
        task_items, plan = plan_write_tasks(groups, counts, loose, n_chunks, slots,
                                            self.min_part_entries or clustering.MIN_PART_ENTRIES)
        groups.clear()
        counts.clear()
        entry_routes = (entry_chunks, plan.routes)
        tasks = plan.tasks
        # the parts of one manifest frame their blocks with the marker its header will carry
        sync = os.urandom(16) if plan.split else None
        task_slots = partition_slots(len(tasks))
        chunk_slots = partition_slots(n_chunks) if sync is not None else []

        def place(batches: Iterator[Any]) -> Iterator[Any]:
            prepare_python_worker()
            io, schema = file_io(props), job.entry_schema()
            table, routes = entry_routes
            out: dict[int, list[tuple]] = {}
            held = 0
            for batch in batches:
                for payload in batch.column(0).to_pylist():
                    for index, ref in pickle.loads(payload):
                        for position, (partition, copy) in enumerate(live_copies(io, decode(ref), schema, fv, specs)):
                            chunk, rank = table[pickle.dumps(job.partition_key(partition))]
                            first, cuts = routes[chunk]
                            task = first + bisect.bisect_right(cuts, (rank, index, position))
                            out.setdefault(task, []).append((rank, index, position, copy))
                            held += 1
                        if held >= _ROUTED_BATCH:
                            yield _keyed_batch(task_slots, out)
                            out, held = {}, 0
            if out:
                yield _keyed_batch(task_slots, out)

        def write(batches: Iterator[Any]) -> Iterator[Any]:
            prepare_python_worker()
            io = file_io(props)
            for task, rows in _gathered(batches, decode).items():
                chunk, part = tasks[task]
                rows.sort(key=lambda r: r[:3])
                writer = job.writer(io, chunk, TaskAttempt.number(), sync)
                written = 0
                for _, _, _, item in rows:
                    if isinstance(item, ManifestSlice):
                        written += copy_slice(io, writer, item, fv, specs)
                    else:
                        write_copy(writer, item)
                        written += 1
                if sync is None:
                    yield _payload_batch([pickle.dumps((chunk, writer.close(), written))])
                else:
                    yield _keyed_batch(chunk_slots, {chunk: [(part, writer.close_part())]})

        def join(batches: Iterator[Any]) -> Iterator[Any]:
            prepare_python_worker()
            for chunk, parts in _gathered(batches, decode).items():
                parts.sort(key=lambda p: p[0])
                writer = job.writer(file_io(props), chunk, TaskAttempt.number(), sync)
                written = sum(p.entries for _, p in parts)
                yield _payload_batch([pickle.dumps((chunk, writer.close_parts(p for _, p in parts), written))])

        # one row per write task, in the partition of its own the shuffle below sends it to (or, with
        # no entries to route, the frame puts it in): the driver's lists go into the plan and are
        # dropped before the job runs
        items = [(task_slots[task], bytearray(pickle.dumps((task, True, group), protocol=pickle.HIGHEST_PROTOCOL)))
                 for task, group in task_items]
        task_items.clear()
        n_mixed = len(mixed)
        if mixed:
            # a local relation, not a list the classic createDataFrame hands through a Python pass
            routed = local_frame(self.spark, items, struct_schema(_KEYED))
            # entries read on the executors reach their write task through the same shuffle
            placed = slices_frame(self.spark, _slices(mixed, self._read_tasks(len(mixed))))
            mixed.clear()
            # its schema told to a Connect client, which would ask the server for it before the mapInArrow
            routed = with_schema(routed.unionByName(placed.mapInArrow(place, struct_schema(_KEYED)))
                                 .repartition(len(tasks), "slot"), struct_schema(_KEYED))
        else:
            # every task's items are in its row: one row per partition needs no shuffle
            routed = payload_frame(self.spark, [bytes(payload) for _, payload in items])
        del items
        outcomes = routed.mapInArrow(write, struct_schema(_KEYED if sync is not None else _PAYLOAD))
        if sync is not None:
            # the parts of a chunk meet in one task, which writes the manifest
            outcomes = outcomes.repartition(n_chunks, "slot").mapInArrow(join, struct_schema(_PAYLOAD))
        split = f", in {len(tasks)} parts" if sync is not None else ""
        with job_description(self.spark, f"rewrite_manifests: {self.name}: write {n_chunks} manifests "
                                         f"from {count} ({n_mixed} read for placement){split}"):
            results = collect_first_column(outcomes)
        done = sorted(pickle.loads(r) for r in results)
        return [m for _, m, _ in done], sum(n for _, _, n in done)

    def _read_tasks(self, manifests: int) -> int:
        """Tasks reading ``manifests`` mixed manifests: a few per core."""
        return max(1, min(manifests, parallelism(self.spark) * 4))

    def _count_keys(self, job: RewriteJob, mixed: list[tuple[int, Any]], keyed: dict[Any, int],
                    decode: Callable[[Any], ManifestFile], summed: bool = True) -> list[bytes]:
        """Count the live entries of the mixed manifests (``(index, ref)``, ``decode(ref)`` the
        manifest) per clustering key on the executors, into ``keyed``; returns the keys as the
        executors pickled them.  ``summed``: Spark adds up the tasks' counts per key (a shuffle, a
        second job under AQE) rather than the driver."""
        props, specs, fv = self.props, dict(job.specs), job.format_version

        def keys(batches: Iterator[Any]) -> Iterator[Any]:
            import pyarrow as pa  # noqa: PLC0415 -- on the executor

            prepare_python_worker()
            io, schema = file_io(props), job.entry_schema()
            counted: dict[bytes, int] = {}
            for batch in batches:
                for payload in batch.column(0).to_pylist():
                    for _, ref in pickle.loads(payload):
                        for partition, _ in live_copies(io, decode(ref), schema, fv, specs):
                            key = pickle.dumps(job.partition_key(partition))
                            counted[key] = counted.get(key, 0) + 1
            if counted:
                yield pa.RecordBatch.from_arrays([pa.array(list(counted), pa.binary()),
                                                  pa.array(list(counted.values()), pa.int64())], names=["key", "n"])

        F = functions(self.spark)
        frame = slices_frame(self.spark, _slices(mixed, self._read_tasks(len(mixed))))
        with job_description(self.spark, f"rewrite_manifests: {self.name}: count entries per partition "
                                         f"in {len(mixed)} manifests"):
            counts = frame.mapInArrow(keys, struct_schema("key binary, n long"))
            if summed:
                counts = counts.groupBy("key").agg(F.sum("n").alias("n"))
            counted = [(bytes(k), int(n)) for k, n in collect_columns(counts)]
        out: dict[bytes, None] = {}
        for k, n in counted:
            key = pickle.loads(k)
            keyed[key] = keyed.get(key, 0) + int(n)
            out[k] = None
        return list(out)


def _slices(items: Sequence[Any], n: int) -> list[list[Any]]:
    """``items`` cut into ``n`` contiguous slices of near-equal length."""
    size, extra = divmod(len(items), n)
    out, start = [], 0
    for k in range(n):
        stop = start + size + (1 if k < extra else 0)
        out.append(list(items[start:stop]))
        start = stop
    return out


def _payload_batch(payloads: list[bytes]) -> Any:
    import pyarrow as pa  # noqa: PLC0415 -- on the executor

    return pa.RecordBatch.from_arrays([pa.array(payloads, pa.binary())], names=["payload"])


def _keyed_batch(slots: Sequence[int], by_key: dict[int, list[Any]]) -> Any:
    """Rows of :data:`_KEYED`: per key, its values pickled with it, in the slot that sends the row
    to partition ``key`` of the next shuffle (:func:`~procedures.spark.dataframes.partition_slots`)."""
    import pyarrow as pa  # noqa: PLC0415 -- on the executor

    keys = list(by_key)
    payloads = [pickle.dumps((k, False, by_key[k]), protocol=pickle.HIGHEST_PROTOCOL) for k in keys]
    return pa.RecordBatch.from_arrays([pa.array([slots[k] for k in keys], pa.int32()), pa.array(payloads, pa.binary())],
                                      names=["slot", "payload"])


def _gathered(batches: Iterator[Any], decode: Callable[[Any], ManifestFile]) -> dict[int, list[tuple]]:
    """The values of the ``payload`` rows of one task (:data:`_KEYED` rows, or the driver's own rows
    of a write without routed entries) per key (a task normally holds one key; a write task's compact
    items from the driver expanded by :func:`_expand`)."""
    out: dict[int, list[tuple]] = {}
    for batch in batches:
        for payload in batch.column("payload").to_pylist():
            key, compact, values = pickle.loads(payload)
            here = out.setdefault(key, [])
            if compact:
                here.extend(item for _, item in _expand((key, values), decode))
            else:
                here.extend(values)
    return out


class TaskAttempt:
    """The running Spark task's attempt number (0 outside a task)."""

    @staticmethod
    def number() -> int:
        """``TaskContext.attemptNumber()`` of the current task."""
        from pyspark import TaskContext  # noqa: PLC0415 -- executor side only

        ctx = TaskContext.get()
        return 0 if ctx is None else int(ctx.attemptNumber())
