"""A scan's row filter applied while reading a data file: whole Parquet row groups skipped by their
footer statistics, then the rows of what is read tested in Arrow.

Both are *inclusive*: they drop only row groups and rows the filter proves unmatched, and keep every
row they cannot decide (a float column, where Spark orders NaN above every number and Arrow does not;
a transform term; a nested column; statistics of a type the table promoted).  So a reader may use
them only when its caller applies the filter to the rows afterwards, as Spark does with the filter of
``read_table`` and with the filters pushed to the data source: the goal is fewer bytes decoded and
fewer rows handed to Spark, not the final answer.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from procedures.errors import ValidationError
from procedures.io.arrow_schema import type_to_arrow
from procedures.io.parquet_writer import FULL, MetricsConfig, file_column_ids, footer_metrics
from procedures.spec.evaluators import InclusiveMetricsEvaluator
from procedures.spec.expressions import (
    ALWAYS_TRUE,
    BoundExpressionVisitor,
    BoundPredicate,
    BoundTransform,
    Expression,
    bind,
    rewrite_not,
    visit,
)
from procedures.spec.schema import Schema
from procedures.spec.types import (
    BooleanType,
    DateType,
    DecimalType,
    IntegerType,
    LongType,
    StringType,
    TimestampType,
    TimestamptzType,
)

__all__ = ["RowFilter", "row_filter"]

#: column types whose Arrow comparisons order and equate values as Spark does
_EXACT_TYPES = (BooleanType, IntegerType, LongType, StringType, DateType, TimestampType, TimestamptzType, DecimalType)

#: widenings whose footer statistics still read as the table type
_SAME_STATS = {(pa.int32(), pa.int64())}

_FULL_METRICS = MetricsConfig(default=FULL)


def row_filter(residual: Expression | None, schema: Schema) -> "RowFilter | None":
    """The reading filter of a task's residual bound to the scan schema, or None when there is
    nothing to filter or the residual does not bind (reading then keeps every row)."""
    if residual is None or residual is ALWAYS_TRUE:
        return None
    for case_sensitive in (True, False):
        try:
            return RowFilter(bind(rewrite_not(residual), schema, case_sensitive), schema)
        except (ValidationError, TypeError, ValueError):
            continue
    return None


class RowFilter:
    """A bound residual filter of one scan schema (see the module doc)."""

    def __init__(self, bound: Expression, schema: Schema) -> None:
        self.bound = bound
        self.schema = schema
        self._metrics = InclusiveMetricsEvaluator(schema, bound)

    def row_groups(self, meta: pq.FileMetaData, file_schema: pa.Schema, mapping_ids: Mapping[tuple[str, ...], int] | None,
                   groups: Iterable[int]) -> list[int]:
        """The row groups among ``groups`` whose statistics may hold matching rows.

        Only top-level columns whose file type reads as the table type give statistics: any other
        column counts as unknown, which never drops a row group.
        """
        leaves = {path: leaf for path, leaf in file_column_ids(file_schema, self.schema, mapping_ids).items()
                  if path in file_schema.names and _stats_readable(file_schema.field(path).type, leaf.iceberg_type)}
        groups = list(groups)
        if not leaves:
            return groups
        kept = []
        for g in groups:
            m = footer_metrics(meta, self.schema, _FULL_METRICS, leaves=leaves, foreign_footer=True, row_groups=[g])
            if self._metrics.eval(m):
                kept.append(g)
        return kept

    def mask(self, columns: Mapping[int, pa.Array], n: int) -> np.ndarray | None:
        """Which of ``n`` rows may match, from the top-level columns by field id; None = all may."""
        result = visit(self.bound, _ArrowMask(columns, n))
        if result is True:
            return None
        if result is False:
            return np.zeros(n, dtype=bool)
        return np.asarray(result, dtype=bool)


def _stats_readable(file_type: pa.DataType, t: Any) -> bool:
    if not isinstance(t, _EXACT_TYPES):
        return False  # floats: a row group's NaNs are not counted, and Spark's NaN is above every number
    target = type_to_arrow(t)
    if file_type == target or (file_type, target) in _SAME_STATS:
        return True
    # decimal precision widening keeps the unscaled values
    return pa.types.is_decimal(file_type) and pa.types.is_decimal(target) and file_type.scale == target.scale


def _combine(left: Any, right: Any, absorbing: bool, op: Any) -> Any:
    """``left op right`` where either side may be a constant (True/False for every row)."""
    if left is absorbing or right is absorbing:
        return absorbing
    if left is (not absorbing):
        return right
    if right is (not absorbing):
        return left
    return op(left, right)


class _ArrowMask(BoundExpressionVisitor):
    """Visits a bound filter to a numpy mask of the rows that may match, or True/False for all."""

    def __init__(self, columns: Mapping[int, pa.Array], n: int) -> None:
        self.columns = columns
        self.n = n

    def always_true(self) -> Any:
        return True

    def always_false(self) -> Any:
        return False

    def not_(self, result: Any) -> Any:
        return True  # rewrite_not leaves none; unknown keeps every row

    def and_(self, left: Any, right: Any) -> Any:
        return _combine(left, right, False, np.logical_and)

    def or_(self, left: Any, right: Any) -> Any:
        return _combine(left, right, True, np.logical_or)

    def predicate(self, pred: BoundPredicate) -> Any:
        if isinstance(pred.term, BoundTransform) or len(pred.term.positions) != 1:
            return True
        col = self.columns.get(pred.term.field_id)
        if col is None or not isinstance(pred.term.type, _EXACT_TYPES):
            return True
        try:
            out = self._compute(pred, col)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return True  # a literal Arrow cannot hold as the column's type: keep the rows
        return out

    def _compute(self, pred: BoundPredicate, col: pa.Array) -> Any:
        op = pred.op.name.lower()
        if op == "is_null":
            return col.is_null().to_numpy(zero_copy_only=False)
        if op == "not_null":
            return col.is_valid().to_numpy(zero_copy_only=False)
        if op in ("is_nan", "not_nan"):
            return op == "not_nan"  # not a float column (see _EXACT_TYPES)
        if op in ("in", "not_in"):
            values = pa.array(list(pred.literal_set or ()), type=col.type)
            hit = pc.is_in(col, value_set=values)
            out = pc.invert(hit) if op == "not_in" else hit
        elif op in ("starts_with", "not_starts_with"):
            hit = pc.starts_with(col, pattern=pred.literal.value)
            out = pc.invert(hit) if op == "not_starts_with" else hit
        else:
            fn = {"lt": pc.less, "lt_eq": pc.less_equal, "gt": pc.greater, "gt_eq": pc.greater_equal,
                  "eq": pc.equal, "not_eq": pc.not_equal}.get(op)
            if fn is None:
                return True
            out = fn(col, pa.scalar(pred.literal.value, type=col.type))
        # a null value keeps its row: Spark decides it (SQL comparisons with null are never true)
        return pc.fill_null(out, True).to_numpy(zero_copy_only=False)

