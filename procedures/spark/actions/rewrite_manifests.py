"""The engine half of ``rewrite_manifests`` for large tables (procedures.md §3.10).

:class:`~procedures.core.rewrite_manifests_op.RewriteManifests` plans on the driver; when a content
type's manifests pass the driver's limits (:func:`procedures.core.gc.reachability.use_spark`), it
hands a :class:`~procedures.core.rewrite_manifests_op.RewriteJob` to :class:`SparkManifestRewriter`,
which keeps the entries off the driver, as Java's ``RewriteManifestsSparkAction`` does:

1. executors read the manifests and count live entries per clustering key; the driver gets only the
   distinct keys and cuts them into chunks (:func:`~procedures.core.rewrite_manifests_op.assign_chunks`);
2. executors read the manifests again and send each entry to the task of its chunk, which sorts
   its entries (key, manifest, position) and writes one manifest.

The manifests written are the driver's, entry for entry; only their file names differ.  A retried
task writes under a new name (the attempt number is part of it); files of failed attempts are
orphans for remove_orphan_files, never referenced.
"""

from __future__ import annotations

import pickle
from typing import Any, Iterable, Iterator, Sequence

from procedures.core.gc import reachability as R
from procedures.core import rewrite_manifests_op as RM
from procedures.core.rewrite_manifests_op import (
    RewriteJob, assign_chunks, chunk_of_position, live_entry_counts, order_key,
)
from procedures.io.sandbox import file_io
from procedures.spark.environment import check_python_workers
from procedures.spark.session import job_description
from procedures.spark.worker import prepare_python_worker
from procedures.spec.manifest import ManifestEntryStatus, ManifestFile, ManifestWriter, read_manifest

__all__ = ["SparkManifestRewriter"]


def _sort_key(key: tuple) -> tuple:
    return tuple(order_key(v) for v in key)


class SparkManifestRewriter:
    """Rewrites large manifest sets on the executors (see the module docstring)."""

    def __init__(self, spark: Any, io_properties: dict[str, str], name: str = "table") -> None:
        self.spark = spark
        self.props = dict(io_properties)
        self.name = name

    def wants(self, manifests: Sequence[ManifestFile]) -> bool:
        """True when the manifests pass the driver's reading limits or hold more live entries than
        the driver should sort (:data:`~procedures.core.rewrite_manifests_op.DRIVER_MAX_REWRITE_ENTRIES`)."""
        return (R.use_spark(self.spark, manifests)
                or sum(live_entry_counts(manifests)) > RM.DRIVER_MAX_REWRITE_ENTRIES)

    def rewrite(self, job: RewriteJob) -> tuple[list[ManifestFile], int]:
        """Write the job's chunks on the executors; returns the new manifests and entries written."""
        check_python_workers(self.spark)
        sc = self.spark.sparkContext
        props, specs, manifests = self.props, dict(job.specs), list(job.manifests)
        indexed = list(enumerate(manifests))
        slices = max(1, min(len(indexed), sc.defaultParallelism * 4))
        partitioned = bool(job.spec.fields)

        def live(pairs: Iterable[tuple[int, ManifestFile]]) -> Iterator[tuple[int, int, Any]]:
            prepare_python_worker()
            io = file_io(props)
            for index, manifest in pairs:
                position = 0
                for e in read_manifest(io, manifest, specs=specs):
                    if e.status != ManifestEntryStatus.DELETED:
                        yield index, position, e
                        position += 1

        chunks: dict[bytes, tuple[int, int]] = {}
        if partitioned:
            with job_description(self.spark, f"rewrite_manifests: {self.name}: count entries per partition "
                                             f"in {len(manifests)} manifests"):
                counts = (sc.parallelize(indexed, slices)
                          .mapPartitions(lambda pairs: ((pickle.dumps(job.partition_key(e.data_file.partition)), 1)
                                                        for _, _, e in live(pairs)))
                          .reduceByKey(lambda a, b: a + b).collect())
            keyed = {pickle.loads(k): n for k, n in counts}
            by_key = assign_chunks(keyed, job.n, _sort_key)
            chunks = {pickle.dumps(k): v for k, v in by_key.items()}
            total = sum(keyed.values())
        else:
            live_counts = live_entry_counts(manifests)
            starts = [sum(live_counts[:i]) for i in range(len(live_counts))]
            total = sum(live_counts)
        n_chunks = 1 + max((c for c, _ in chunks.values()), default=0) if partitioned else \
            1 + chunk_of_position(max(total - 1, 0), total, job.n)
        placement = sc.broadcast(chunks)

        def place(pairs: Iterable[tuple[int, ManifestFile]]) -> Iterator[tuple[int, tuple]]:
            table = placement.value
            for index, position, e in live(pairs):
                if partitioned:
                    chunk, rank = table[pickle.dumps(job.partition_key(e.data_file.partition))]
                else:
                    chunk, rank = chunk_of_position(starts[index] + position, total, job.n), 0
                yield chunk, (rank, index, position, pickle.dumps(e))

        def write(chunk_and_entries: Iterator[tuple[int, tuple]]) -> Iterator[bytes]:
            prepare_python_worker()
            rows = list(chunk_and_entries)
            if not rows:
                return
            chunk = rows[0][0]
            rows.sort(key=lambda r: r[1][:3])
            attempt = TaskAttempt.number()
            writer = ManifestWriter(file_io(props), job.path_for(chunk, attempt), job.spec, job.schema,
                                    job.format_version, job.content, job.snapshot_id)
            for _, (_, _, _, blob) in rows:
                e = pickle.loads(blob)
                writer.existing(e.data_file, e.snapshot_id, e.sequence_number, e.file_sequence_number)
            yield pickle.dumps((chunk, writer.close(), len(rows)))

        with job_description(self.spark, f"rewrite_manifests: {self.name}: write {n_chunks} manifests "
                                         f"from {len(manifests)}"):
            results = (sc.parallelize(indexed, slices).mapPartitions(place)
                       .partitionBy(n_chunks, lambda chunk: chunk).mapPartitions(write).collect())
        placement.unpersist()
        done = sorted(pickle.loads(r) for r in results)
        return [m for _, m, _ in done], sum(n for _, _, n in done)


class TaskAttempt:
    """The running Spark task's attempt number (0 outside a task)."""

    @staticmethod
    def number() -> int:
        """``TaskContext.attemptNumber()`` of the current task."""
        from pyspark import TaskContext  # noqa: PLC0415 -- executor side only

        ctx = TaskContext.get()
        return 0 if ctx is None else int(ctx.attemptNumber())
