"""The Spark steps of the ``table_stats`` capability (:class:`TableStatsSteps`, the Spark side of
:class:`procedures.core.table_stats.table_stats_engine.TableStatsEngine`).

Column sketches (``compute_table_stats``): every Spark partition of the snapshot's scan (deletes applied) reads its files in a Python task
and builds one KMV hash sketch per column (:class:`procedures.spec.theta.HashSketch`, hashing the
values as Java's ``ThetaSketchAgg`` does); the driver unions the compact sketches with the
``datasketches`` library (the ``stats`` extra), writes one ``apache-datasketches-theta-v1`` blob per
column with its ``ndv`` estimate.  Without a session the same steps run on the driver.  The
partition statistics file (``compute_partition_stats``) is written on the driver.
"""

from __future__ import annotations

import pickle
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from procedures.catalog.base import Table
from procedures.core.kernel.scan import iter_file_scan_tasks
from procedures.core.table_stats.statistics_files import StatsColumn
from procedures.errors import MissingDependencyError
from procedures.io.stats_files import ThetaBlob, write_partition_stats, write_statistics_file
from procedures.spark.dataframes import parallelism, slices_frame
from procedures.spark.read import TaskReader, group_tasks, light_task
from procedures.spark.scan_planning import SparkEntryReader
from procedures.spark.session import job_description
from procedures.spark.worker import prepare_python_worker
from procedures.spec.schema import Schema
from procedures.spec.snapshots import Snapshot
from procedures.spec.statistics import StatisticsFile
from procedures.spec.theta import NDV_PROPERTY, THETA_BLOB_TYPE, HashSketch
from procedures.spec.types import DateType, IcebergType, TimestampType, TimestamptzType, TimeType

__all__ = ["TableStatsSteps", "require_datasketches", "sketch_batches", "STATS_EXTRA_HINT"]

STATS_EXTRA_HINT = "pip install 'iceberg-procedures[stats]'"


def require_datasketches() -> Any:
    """The ``datasketches`` module, or a MissingDependencyError naming the extra to install."""
    try:
        import datasketches  # noqa: PLC0415 -- optional extra 'stats'
    except ImportError as exc:
        raise MissingDependencyError(
            f"compute_table_stats needs the Apache DataSketches library: {STATS_EXTRA_HINT}") from exc
    return datasketches


def _column(batch: pa.RecordBatch, name: str) -> pa.Array:
    parts = name.split(".")
    arr = batch.column(batch.schema.get_field_index(parts[0]))
    for p in parts[1:]:
        arr = pc.struct_field(arr, p)
    return arr


def _values(arr: pa.Array, t: IcebergType) -> list:
    if isinstance(t, DateType):
        arr = arr.cast(pa.int32())
    elif isinstance(t, (TimeType, TimestampType, TimestamptzType)):
        arr = arr.cast(pa.int64())
    return arr.to_pylist()


def sketch_batches(batches: Iterable[pa.RecordBatch], columns: Sequence[StatsColumn]) -> list[bytes]:
    """One serialized compact sketch per column over ``batches``."""
    sketches = [HashSketch() for _ in columns]
    for batch in batches:
        for sk, col in zip(sketches, columns):
            sk.update_all(_values(_column(batch, col.name), col.field.field_type), col.field.field_type)
    return [sk.compact_bytes() for sk in sketches]


def _sketch_on_spark(spark: Any, table: Table, tasks: list, reader: TaskReader,
                     columns: Sequence[StatsColumn]) -> list[list[bytes]]:
    from pyspark.sql import types as T  # noqa: PLC0415 -- pyspark only when Spark runs

    groups = group_tasks(table.metadata, tasks, None, None, parallelism(spark))
    slices = [[light_task(t) for t in g] for g in groups]
    if not slices:
        return []
    cols = list(columns)

    def sketch_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        tasks_here = [t for b in batches for raw in b.column(0).to_pylist() for t in pickle.loads(raw)]
        sketches = sketch_batches(reader.batches(tasks_here), cols)
        yield pa.RecordBatch.from_arrays([pa.array(list(range(len(cols))), pa.int32()), pa.array(sketches, pa.binary())],
                                         names=["column", "sketch"])

    schema = T.StructType([T.StructField("column", T.IntegerType(), False),
                           T.StructField("sketch", T.BinaryType(), False)])
    rows = slices_frame(spark, slices).mapInArrow(sketch_partition, schema).collect()
    per_column: list[list[bytes]] = [[] for _ in cols]
    for r in rows:
        per_column[r["column"]].append(bytes(r["sketch"]))
    return per_column


class TableStatsSteps:
    """:class:`~procedures.core.table_stats.table_stats_engine.TableStatsEngine` on ``self.spark`` (None: on the driver)."""

    spark: Any

    def sketch_columns(self, table: Table, snapshot: Snapshot, schema: Schema, columns: Sequence[StatsColumn],
                       path: str) -> StatisticsFile:
        """The snapshot's scan sketched in Spark tasks (or on the driver), the sketches unioned on
        the driver with ``datasketches``, the Puffin file written at ``path``."""
        spark = self.spark
        ds = require_datasketches()
        md = table.metadata
        cols = list(columns)
        projected = schema.select([c.name for c in cols])
        reader = SparkEntryReader(spark, table.io, table.name) if spark is not None else None
        tasks = list(iter_file_scan_tasks(md, table.io, snapshot_id=snapshot.snapshot_id, read_entries=reader))
        reader = TaskReader.for_table(table, projected, schema)
        if spark is None:
            per_column = [[s] for s in sketch_batches(reader.batches(tasks), cols)]
        else:
            with job_description(spark, f"compute_table_stats: sketch {len(cols)} column(s) of {table.name}"):
                per_column = _sketch_on_spark(spark, table, tasks, reader, cols)
        blobs = []
        for i, col in enumerate(cols):
            union = ds.theta_union()
            for raw in per_column[i] if per_column else ():
                union.update(ds.compact_theta_sketch.deserialize(raw))
            result = union.get_result()
            blobs.append(ThetaBlob(col.field.field_id, result.serialize(), int(result.get_estimate())))
        created_by = "iceberg-procedures" + (f" Spark {spark.version}" if spark is not None else "")
        return write_statistics_file(table.io, path, snapshot.snapshot_id, snapshot.sequence_number, blobs,
                                     blob_type=THETA_BLOB_TYPE, ndv_property=NDV_PROPERTY, created_by=created_by)

    def write_partition_statistics(self, table: Table, path: str, schema: Schema, rows: Sequence[tuple]) -> int:
        """The Parquet file written on the driver (the rows are one per partition)."""
        return write_partition_stats(table.io, path, schema, list(rows))
