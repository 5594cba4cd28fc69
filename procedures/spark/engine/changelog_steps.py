"""The Spark steps of the ``changelog`` capability (:class:`ChangelogSteps`, the Spark side of
:class:`procedures.core.changelog.changelog_engine.ChangelogEngine`): ``create_changelog_view``'s session
temporary view of a table's row changes between two snapshots (Iceberg Java 1.10's
``CreateChangelogViewProcedure`` over the ``changes`` table).

The driver plans the changes (:mod:`procedures.core.changelog.changes`); Python tasks read each changed
data file with the deletes that applied before and after its snapshot and emit the raw changes
(the table's columns plus ``_change_type``, ``_change_ordinal``, ``_commit_snapshot_id``).  The
view then goes through Java's steps with the same shuffles: rows repartitioned and sorted by the
carry-over key (or the identifier columns and ordinal for update images) and each sorted partition
filtered by the row rules of :mod:`procedures.core.changelog.changes`.  The view is lazy: its files are
read each time it is queried; which files is fixed when the view is created.
"""

from __future__ import annotations

import pickle
from typing import Any, Iterator, Sequence

import numpy as np
import pyarrow as pa

from procedures.catalog.base import Table
from procedures.core.changelog.change_model import (
    CHANGE_ORDINAL, CHANGE_TYPE, COMMIT_SNAPSHOT_ID, DELETE, INSERT, ChangeRule, ChangeTask,
)
from procedures.core.changelog.changes import compute_updates, remove_carryovers, remove_net_carryovers, row_key
from procedures.core.kernel.scan import FileScanTask
from procedures.errors import ValidationError
from procedures.spark.dataframes import empty_frame, parallelism
from procedures.spark.read import TaskReader, light_task, spark_type, tasks_frame, to_spark_arrow
from procedures.spark.session import map_in_arrow
from procedures.spark.sql_quoting import quote_name
from procedures.spark.worker import prepare_python_worker
from procedures.spec.expressions import ALWAYS_TRUE
from procedures.spec.schema import Schema

__all__ = ["ChangelogSteps", "changes_frame"]


def _scan_task(t: ChangeTask, deletes: tuple, schema: Schema) -> FileScanTask:
    return light_task(FileScanTask(t.data_file, t.data_sequence_number, deletes, ALWAYS_TRUE, t.data_file.spec_id,
                                   t.data_file.partition, schema))


def _groups(tasks: Sequence[ChangeTask], n: int) -> list[list[ChangeTask]]:
    """Tasks dealt into at most ``n`` groups of similar byte size (largest first)."""
    groups: list[list[ChangeTask]] = [[] for _ in range(max(1, min(n, len(tasks))))]
    sizes = [0] * len(groups)
    for t in sorted(tasks, key=lambda t: -t.data_file.file_size_in_bytes):
        i = sizes.index(min(sizes))
        groups[i].append(t)
        sizes[i] += t.data_file.file_size_in_bytes * (2 if t.kind == "DIFF" else 1)
    return [g for g in groups if g]


def _with_meta(batch: pa.RecordBatch, change_type: str, ordinal: int, snapshot_id: int) -> pa.RecordBatch:
    n = batch.num_rows
    arrays = list(batch.columns) + [pa.array([change_type] * n, pa.string()),
                                    pa.array(np.full(n, ordinal, np.int32)), pa.array(np.full(n, snapshot_id, np.int64))]
    fields = list(batch.schema) + [pa.field(CHANGE_TYPE, pa.string(), False), pa.field(CHANGE_ORDINAL, pa.int32()),
                                   pa.field(COMMIT_SNAPSHOT_ID, pa.int64())]
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def changes_frame(spark: Any, table: Table, tasks: Sequence[ChangeTask]) -> Any:
    """The raw changes of ``tasks`` (carry-overs included), as the ``changes`` table reads them."""
    from pyspark.sql import types as T  # noqa: PLC0415

    schema = table.metadata.schema()
    fields = list(schema.fields)
    out_schema = T.StructType(
        [T.StructField(f.name, spark_type(f.field_type), not f.required) for f in fields]
        + [T.StructField(CHANGE_TYPE, T.StringType(), False), T.StructField(CHANGE_ORDINAL, T.IntegerType(), True),
           T.StructField(COMMIT_SNAPSHOT_ID, T.LongType(), True)])
    # nullability as Java's changes table reports it (only _change_type is required)
    if not tasks:
        return empty_frame(spark, out_schema)
    payloads = []
    for group in _groups(tasks, parallelism(spark)):
        items = [(None if t.before is None else _scan_task(t, t.before, schema),
                  None if t.after is None else _scan_task(t, t.after, schema), t.ordinal, t.snapshot_id)
                 for t in group]
        payloads.append(pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL))
    plain = TaskReader.for_table(table, schema)
    flagged = TaskReader.for_table(table, schema, metadata_columns=("_deleted",))

    def read_changes(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        for b in batches:
            for raw in b.column(0).to_pylist():
                for before, after, ordinal, sid in pickle.loads(raw):
                    yield from _task_changes(plain, flagged, fields, before, after, ordinal, sid)

    return tasks_frame(spark, payloads).mapInArrow(read_changes, out_schema)


def _task_changes(plain: TaskReader, flagged: TaskReader, fields: list, before: FileScanTask | None,
                  after: FileScanTask | None, ordinal: int, sid: int) -> Iterator[pa.RecordBatch]:
    if before is None or after is None:
        change = INSERT if before is None else DELETE
        for out in plain.batches([after if before is None else before]):
            if out.num_rows:
                yield _with_meta(to_spark_arrow(out, fields), change, ordinal, sid)
        return
    # both readings keep every row (``_deleted`` flags them), so their batches line up
    for old, new in zip(flagged.batches([before]), flagged.batches([after])):
        hidden_before = old.column(old.num_columns - 1).to_numpy(zero_copy_only=False)
        hidden_after = new.column(new.num_columns - 1).to_numpy(zero_copy_only=False)
        rows = to_spark_arrow(pa.RecordBatch.from_arrays(old.columns[:-1], schema=pa.schema(list(old.schema)[:-1])),
                              fields)
        for mask, change in ((~hidden_before & hidden_after, DELETE), (hidden_before & ~hidden_after, INSERT)):
            if mask.any():
                yield _with_meta(rows.filter(pa.array(mask)), change, ordinal, sid)


# ------------------------------------------------------------------------------ row rules on Spark
def _apply_rule(df: Any, partition_cols: Sequence[str], sort_cols: Sequence[str], rule: str,
                id_cols: Sequence[str] = ()) -> Any:
    """Repartition, sort within partitions and filter each partition with one row rule."""
    columns = list(df.columns)
    type_idx = columns.index(CHANGE_TYPE)
    key_names = partition_cols if rule != "updates" else [c for c in columns if c != CHANGE_TYPE]
    key_idx = [columns.index(c) for c in key_names]
    id_idx = [columns.index(c) for c in id_cols]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        parts = [b for b in batches if b.num_rows]
        if not parts:
            return
        data = pa.Table.from_batches(parts).combine_chunks()
        rows = list(zip(*[data.column(i).to_pylist() for i in range(data.num_columns)]))
        types = [r[type_idx] for r in rows]
        keys = [row_key(r, key_idx) for r in rows]
        if rule == "carryovers":
            emit = remove_carryovers(keys, types)
        elif rule == "net":
            emit = remove_net_carryovers(keys, types)
        else:
            emit = compute_updates(keys, [row_key(r, id_idx) for r in rows], types, list(id_cols))
        if not emit:
            return
        taken = data.take(pa.array([i for i, _ in emit], pa.int64()))
        new_types = pa.array([t for _, t in emit], pa.string())
        out = taken.set_column(type_idx, data.schema.field(type_idx), new_types)
        yield from out.to_batches()

    ordered = df.repartition(*[df[quote_name(c)] for c in partition_cols]).sortWithinPartitions(
        *[df[quote_name(c)] for c in sort_cols])
    return map_in_arrow(ordered, run, df.schema)


class ChangelogSteps:
    """:class:`~procedures.core.changelog.changelog_engine.ChangelogEngine` on ``self.spark``."""

    spark: Any

    def register_changelog_view(self, table: Table, tasks: Sequence[ChangeTask], rule: ChangeRule,
                                view_name: str) -> str:
        """The raw changes read lazily by Python tasks, the rule applied with Java's shuffles, the
        result registered as ``view_name``."""
        df = changes_frame(self.spark, table, tasks)
        df = _apply_rule(df, list(rule.partition_columns), list(rule.sort_columns), rule.kind,
                         id_cols=list(rule.id_columns))
        from pyspark.errors import AnalysisException  # noqa: PLC0415

        try:
            df.createOrReplaceTempView(view_name)
        except AnalysisException as e:
            raise ValidationError(f"Cannot create the changelog view {view_name!r}: {e}") from None
        return view_name
