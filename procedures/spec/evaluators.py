"""Evaluate bound expressions against rows, manifest partition summaries and file metrics.

These follow Iceberg Java's ``Evaluator``, ``ManifestEvaluator``, ``InclusiveMetricsEvaluator`` and
``StrictMetricsEvaluator``:

* :class:`Evaluator` decides a predicate for one struct tuple (a row or a partition tuple).
* :class:`ManifestEvaluator` answers "might this manifest hold matching files?" from the manifest
  list's ``partitions`` field summaries, for an expression over the partition struct.
* :class:`InclusiveMetricsEvaluator` answers "might this file hold matching rows?" and
  :class:`StrictMetricsEvaluator` "must every row of this file match?" from a data file's value,
  null and NaN counts and its lower/upper bounds (spec "Manifests": metrics).

Missing statistics always give the safe answer: "might match" for inclusive, "might not match"
for strict.  Bounds are decoded with :func:`procedures.spec.conversions.from_bytes`, which accepts
bounds written before a type promotion (4-byte bounds of a ``long`` column).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

from procedures.spec.conversions import from_bytes
from procedures.spec.expressions import (
    ALWAYS_FALSE,
    ALWAYS_TRUE,
    And,
    BoundExpressionVisitor,
    BoundPredicate,
    BoundReference,
    Expression,
    Operation,
    Or,
    bind,
    rewrite_not,
    visit,
)
from procedures.spec.projection import inclusive_projection
from procedures.spec.schema import Schema
from procedures.spec.types import DoubleType, FloatType, StringType, StructType

__all__ = [
    "Evaluator",
    "ManifestEvaluator",
    "InclusiveMetricsEvaluator",
    "StrictMetricsEvaluator",
    "IN_PREDICATE_LIMIT",
    "compare_values",
]

#: above this many IN values the metrics and manifest evaluators stop testing each value (as Java)
IN_PREDICATE_LIMIT = 200


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def compare_values(a: Any, b: Any) -> int:
    """-1, 0 or 1 comparing two non-null values of one type; NaN sorts above every number, as in
    Java's ``Double.compare``."""
    if isinstance(a, float) or isinstance(b, float):
        a_nan, b_nan = _is_nan(a), _is_nan(b)
        if a_nan or b_nan:
            return (a_nan > b_nan) - (a_nan < b_nan)
    return (a > b) - (a < b)


class _BoolVisitor(BoundExpressionVisitor):
    def not_(self, result: bool) -> bool:
        return not result

    def and_(self, left: bool, right: bool) -> bool:
        return left and right

    def or_(self, left: bool, right: bool) -> bool:
        return left or right


# ------------------------------------------------------------------------------------ rows
class Evaluator(_BoolVisitor):
    """Evaluates an expression on struct tuples (rows or partition tuples) of ``struct``.

    SQL null semantics collapsed to booleans as Iceberg does: a comparison with a null value is
    false, and its negation (``!=``, ``NOT IN``, ``NOT starts_with``) is true.
    """

    def __init__(self, struct: Schema | StructType, expr: Expression, case_sensitive: bool = True) -> None:
        self.expr = bind(expr, struct, case_sensitive)
        self._row: Any = None

    def eval(self, row: Sequence[Any]) -> bool:
        """True when ``row`` satisfies the expression."""
        self._row = row
        try:
            return bool(visit(self.expr, self))
        finally:
            self._row = None

    def always_true(self) -> bool:
        return True

    def always_false(self) -> bool:
        return False

    def _value(self, ref: BoundReference) -> Any:
        return ref.eval(self._row)

    def is_null(self, ref: BoundReference) -> bool:
        return self._value(ref) is None

    def not_null(self, ref: BoundReference) -> bool:
        return self._value(ref) is not None

    def is_nan(self, ref: BoundReference) -> bool:
        return _is_nan(self._value(ref))

    def not_nan(self, ref: BoundReference) -> bool:
        return not _is_nan(self._value(ref))

    def _cmp(self, ref: BoundReference, lit: Any) -> int | None:
        v = self._value(ref)
        return None if v is None else compare_values(v, lit)

    def lt(self, ref: BoundReference, value: Any) -> bool:
        c = self._cmp(ref, value)
        return c is not None and c < 0

    def lt_eq(self, ref: BoundReference, value: Any) -> bool:
        c = self._cmp(ref, value)
        return c is not None and c <= 0

    def gt(self, ref: BoundReference, value: Any) -> bool:
        c = self._cmp(ref, value)
        return c is not None and c > 0

    def gt_eq(self, ref: BoundReference, value: Any) -> bool:
        c = self._cmp(ref, value)
        return c is not None and c >= 0

    def eq(self, ref: BoundReference, value: Any) -> bool:
        c = self._cmp(ref, value)
        return c == 0

    def not_eq(self, ref: BoundReference, value: Any) -> bool:
        return not self.eq(ref, value)

    def in_(self, ref: BoundReference, values: frozenset) -> bool:
        return self._value(ref) in values

    def not_in(self, ref: BoundReference, values: frozenset) -> bool:
        return not self.in_(ref, values)

    def starts_with(self, ref: BoundReference, value: str) -> bool:
        v = self._value(ref)
        return v is not None and str(v).startswith(value)

    def not_starts_with(self, ref: BoundReference, value: str) -> bool:
        return not self.starts_with(ref, value)


# ------------------------------------------------------------------------------------ manifests
class ManifestEvaluator(_BoolVisitor):
    """Inclusive test of a manifest's partition field summaries against a partition filter.

    ``eval`` returns False only when no file in the manifest can hold a matching partition.
    Build it from a row filter with :meth:`for_row_filter` (inclusive projection through the
    spec's transforms) or from a filter on partition columns with :meth:`for_partition_filter`.
    """

    def __init__(self, partition_struct: StructType, partition_filter: Expression, case_sensitive: bool = True) -> None:
        self.partition_struct = partition_struct
        self.expr = bind(rewrite_not(partition_filter), partition_struct, case_sensitive)
        self._stats: Sequence[Any] = ()
        # planning tests every manifest of a table: comparisons get a direct function each (the
        # visitor's dispatch costs more than the test), the rest go through the visitor
        self._test = self._compiled(self.expr)

    @classmethod
    def for_partition_filter(cls, partition_struct: StructType, partition_filter: Expression,
                             case_sensitive: bool = True) -> "ManifestEvaluator":
        """An evaluator for a filter that names partition fields."""
        return cls(partition_struct, partition_filter, case_sensitive)

    @classmethod
    def for_row_filter(cls, row_filter: Expression, spec: Any, schema: Schema,
                       case_sensitive: bool = True) -> "ManifestEvaluator":
        """An evaluator for a filter on table columns, projected inclusively onto ``spec``."""
        projected = inclusive_projection(spec, schema, row_filter, case_sensitive)
        return cls(spec.partition_type(schema), projected, case_sensitive=True)

    def eval(self, manifest: Any) -> bool:
        """True when the manifest (a ``ManifestFile`` or its list of ``FieldSummary``) might match."""
        stats = getattr(manifest, "partitions", manifest)
        if stats is None:
            return True
        return self._test(stats)

    def _visited(self, stats: Sequence[Any], expr: Expression) -> bool:
        self._stats = stats
        try:
            return bool(visit(expr, self))
        finally:
            self._stats = ()

    def _compiled(self, expr: Expression) -> Callable[[Sequence[Any]], bool]:
        """A function of a manifest's summaries giving what a visit of ``expr`` gives."""
        def leaf(e: Expression) -> Callable[[Sequence[Any]], bool] | None:
            if (isinstance(e, BoundPredicate) and e.literal is not None
                    and e.op in (Operation.LT, Operation.LT_EQ, Operation.GT, Operation.GT_EQ, Operation.EQ)):
                return _summary_test(e.op, e.term.positions[0], e.term.type, e.literal.value)
            return None
        return _compiled_tree(expr, leaf, self._visited)

    def always_true(self) -> bool:
        return True

    def always_false(self) -> bool:
        return False

    def _summary(self, ref: BoundReference) -> Any:
        return self._stats[ref.positions[0]]

    def _lower(self, ref: BoundReference, summary: Any) -> Any:
        return None if summary.lower_bound is None else from_bytes(summary.lower_bound, ref.type)

    def _upper(self, ref: BoundReference, summary: Any) -> Any:
        return None if summary.upper_bound is None else from_bytes(summary.upper_bound, ref.type)

    def _all_values_null(self, ref: BoundReference, summary: Any) -> bool:
        # without a lower bound every value is null, unless NaN values (never bounds) are present
        all_null = summary.contains_null and summary.lower_bound is None
        if all_null and isinstance(ref.type, (FloatType, DoubleType)):
            return summary.contains_nan is not None and not summary.contains_nan
        return all_null

    def is_null(self, ref: BoundReference) -> bool:
        return bool(self._summary(ref).contains_null)

    def not_null(self, ref: BoundReference) -> bool:
        return not self._all_values_null(ref, self._summary(ref))

    def is_nan(self, ref: BoundReference) -> bool:
        s = self._summary(ref)
        return not (s.contains_nan is not None and not s.contains_nan)

    def not_nan(self, ref: BoundReference) -> bool:
        s = self._summary(ref)
        # only NaN values: NaN flagged, no nulls and no bounds
        return not (s.contains_nan and not s.contains_null and s.lower_bound is None)

    def lt(self, ref: BoundReference, value: Any) -> bool:
        s = self._summary(ref)
        lower = self._lower(ref, s)
        return lower is not None and compare_values(lower, value) < 0

    def lt_eq(self, ref: BoundReference, value: Any) -> bool:
        s = self._summary(ref)
        lower = self._lower(ref, s)
        return lower is not None and compare_values(lower, value) <= 0

    def gt(self, ref: BoundReference, value: Any) -> bool:
        s = self._summary(ref)
        upper = self._upper(ref, s)
        return upper is not None and compare_values(upper, value) > 0

    def gt_eq(self, ref: BoundReference, value: Any) -> bool:
        s = self._summary(ref)
        upper = self._upper(ref, s)
        return upper is not None and compare_values(upper, value) >= 0

    def eq(self, ref: BoundReference, value: Any) -> bool:
        s = self._summary(ref)
        lower = self._lower(ref, s)
        if lower is None or compare_values(lower, value) > 0:
            return False
        upper = self._upper(ref, s)
        return upper is None or compare_values(upper, value) >= 0

    def not_eq(self, ref: BoundReference, value: Any) -> bool:
        return True

    def in_(self, ref: BoundReference, values: frozenset) -> bool:
        s = self._summary(ref)
        lower = self._lower(ref, s)
        if lower is None:
            return False
        if len(values) > IN_PREDICATE_LIMIT:
            return True
        remaining = [v for v in values if compare_values(lower, v) <= 0]
        if not remaining:
            return False
        upper = self._upper(ref, s)
        return upper is None or any(compare_values(upper, v) >= 0 for v in remaining)

    def not_in(self, ref: BoundReference, values: frozenset) -> bool:
        return True

    def starts_with(self, ref: BoundReference, value: str) -> bool:
        s = self._summary(ref)
        if s.lower_bound is None:
            return False
        return _prefix_in_range(value, s.lower_bound, s.upper_bound)

    def not_starts_with(self, ref: BoundReference, value: str) -> bool:
        s = self._summary(ref)
        if s.contains_null:
            return True
        return not _all_start_with(value, s.lower_bound, s.upper_bound)


def _compiled_tree(expr: Expression, leaf: Callable[[Expression], Callable[[Any], bool] | None],
                   visited: Callable[[Any, Expression], bool]) -> Callable[[Any], bool]:
    """A function of one argument giving what a visit of ``expr`` gives: constants, And and Or
    composed here, each predicate tested by ``leaf(predicate)`` when it gives a direct test and by
    ``visited(argument, predicate)`` otherwise."""
    if expr is ALWAYS_TRUE:
        return lambda x: True
    if expr is ALWAYS_FALSE:
        return lambda x: False
    if isinstance(expr, (And, Or)):
        left, right = (_compiled_tree(e, leaf, visited) for e in (expr.left, expr.right))
        if isinstance(expr, And):
            return lambda x: left(x) and right(x)
        return lambda x: left(x) or right(x)
    direct = leaf(expr)
    return direct if direct is not None else (lambda x: visited(x, expr))


def _summary_test(op: Operation, position: int, t: Any, value: Any) -> Callable[[Sequence[Any]], bool]:
    """:class:`ManifestEvaluator`'s answer for one comparison of a partition field with a literal,
    as a direct function of the summaries (the same rules as its ``lt`` ... ``eq``)."""
    if op in (Operation.LT, Operation.LT_EQ):
        limit = 0 if op == Operation.LT else 1

        def below(stats: Sequence[Any]) -> bool:
            lo = stats[position].lower_bound
            return lo is not None and compare_values(from_bytes(lo, t), value) < limit
        return below
    if op in (Operation.GT, Operation.GT_EQ):
        limit = 0 if op == Operation.GT else -1

        def above(stats: Sequence[Any]) -> bool:
            hi = stats[position].upper_bound
            return hi is not None and compare_values(from_bytes(hi, t), value) > limit
        return above

    def equal(stats: Sequence[Any]) -> bool:
        s = stats[position]
        lo = s.lower_bound
        if lo is None or compare_values(from_bytes(lo, t), value) > 0:
            return False
        hi = s.upper_bound
        return hi is None or compare_values(from_bytes(hi, t), value) >= 0
    return equal


def _prefix_in_range(prefix: str, lower: bytes | None, upper: bytes | None) -> bool:
    """Whether values starting with ``prefix`` can lie in [lower, upper] (UTF-8 byte order).

    Bounds may be truncated: a truncated lower bound is still <= every value and a truncated upper
    bound >= every value, so comparing only the first len(prefix) bytes stays safe.
    """
    p = prefix.encode("utf-8")
    if lower is not None and bytes(lower)[: len(p)] > p:
        return False
    if upper is not None and bytes(upper)[: len(p)] < p:
        return False
    return True


def _all_start_with(prefix: str, lower: bytes | None, upper: bytes | None) -> bool:
    """True when both bounds start with ``prefix``, so every value between them does too."""
    if lower is None or upper is None:
        return False
    p = prefix.encode("utf-8")
    return bytes(lower).startswith(p) and bytes(upper).startswith(p)


# ------------------------------------------------------------------------------------ metrics
class _MetricsVisitor(_BoolVisitor):
    def __init__(self, schema: Schema | StructType, expr: Expression, case_sensitive: bool) -> None:
        self.schema = schema if isinstance(schema, Schema) else Schema(schema.fields)
        self.expr = bind(rewrite_not(expr), self.schema, case_sensitive)
        self._file: Any = None

    def _count(self, counts_name: str, field_id: int) -> int | None:
        counts = getattr(self._file, counts_name)
        if not counts:
            return None
        return counts.get(field_id)

    def _value_count(self, fid: int) -> int | None:
        return self._count("value_counts", fid)

    def _null_count(self, fid: int) -> int | None:
        return self._count("null_value_counts", fid)

    def _nan_count(self, fid: int) -> int | None:
        return self._count("nan_value_counts", fid)

    def _contains_nulls_only(self, fid: int) -> bool:
        values, nulls = self._value_count(fid), self._null_count(fid)
        return values is not None and nulls is not None and values - nulls == 0

    def _contains_nans_only(self, fid: int) -> bool:
        values, nans = self._value_count(fid), self._nan_count(fid)
        return values is not None and nans is not None and nans == values

    def _bound(self, name: str, ref: BoundReference) -> Any:
        bounds = getattr(self._file, name)
        if not bounds or ref.field_id not in bounds:
            return None
        value = from_bytes(bounds[ref.field_id], ref.type)
        # a NaN bound comes from writers that did not exclude NaN: it says nothing useful
        return None if _is_nan(value) else value

    def _lower(self, ref: BoundReference) -> Any:
        return self._bound("lower_bounds", ref)

    def _upper(self, ref: BoundReference) -> Any:
        return self._bound("upper_bounds", ref)

    def _any_within_bounds(self, ref: BoundReference, values: Iterable[Any]) -> bool:
        """Whether some value lies inside the file's [lower, upper] bounds (missing bounds do not
        exclude anything)."""
        remaining = list(values)
        lower = self._lower(ref)
        if lower is not None:
            remaining = [v for v in remaining if compare_values(lower, v) <= 0]
        upper = self._upper(ref)
        if upper is not None and remaining:
            remaining = [v for v in remaining if compare_values(upper, v) >= 0]
        return bool(remaining)

    def _raw(self, name: str, ref: BoundReference) -> bytes | None:
        bounds = getattr(self._file, name)
        if not bounds:
            return None
        return bounds.get(ref.field_id)


def _count_of(counts: dict[int, int] | None, fid: int) -> int | None:
    return counts.get(fid) if counts else None


def _no_values(f: Any, fid: int) -> bool:
    """Whether the file's metrics say the column holds only nulls or only NaNs (as
    ``_MetricsVisitor._contains_nulls_only`` or ``_contains_nans_only``)."""
    values = _count_of(f.value_counts, fid)
    if values is None:
        return False
    nulls = _count_of(f.null_value_counts, fid)
    if nulls is not None and values - nulls == 0:
        return True
    nans = _count_of(f.nan_value_counts, fid)
    return nans is not None and nans == values


def _bound_test(op: Operation, fid: int, ftype: Any, value: Any) -> Callable[[Any], bool]:
    """The inclusive test of one comparison, reading the data file's metrics as
    :class:`InclusiveMetricsEvaluator`'s ``lt`` ... ``eq`` do."""

    def bound(bounds: dict[int, bytes] | None) -> Any:
        if not bounds or fid not in bounds:
            return None
        decoded = from_bytes(bounds[fid], ftype)
        return None if _is_nan(decoded) else decoded

    if op is Operation.EQ:
        def test(f: Any) -> bool:
            if _no_values(f, fid):
                return False
            lower = bound(f.lower_bounds)
            if lower is not None and compare_values(lower, value) > 0:
                return False
            upper = bound(f.upper_bounds)
            return upper is None or compare_values(upper, value) >= 0
        return test
    use_lower = op in (Operation.LT, Operation.LT_EQ)
    accept = _BOUND_TESTS[op]

    def compare(f: Any) -> bool:
        if _no_values(f, fid):
            return False
        b = bound(f.lower_bounds if use_lower else f.upper_bounds)
        return b is None or accept(compare_values(b, value))
    return compare


#: what a comparison of the file's bound with the literal must give for the file to stay
_BOUND_TESTS: dict[Operation, Callable[[int], bool]] = {
    Operation.LT: lambda c: c < 0,
    Operation.LT_EQ: lambda c: c <= 0,
    Operation.GT: lambda c: c > 0,
    Operation.GT_EQ: lambda c: c >= 0,
    Operation.EQ: lambda c: c == 0,
}


class InclusiveMetricsEvaluator(_MetricsVisitor):
    """Might a data file hold rows matching ``expr``?  Answers from the file's column metrics.

    ``eval(data_file)`` is False only when the metrics prove no row can match (all-null column for
    a comparison, bounds outside the literal, zero NaN count for ``is_nan`` ...).
    """

    def __init__(self, schema: Schema | StructType, expr: Expression, case_sensitive: bool = True) -> None:
        super().__init__(schema, expr, case_sensitive)
        # planning tests every entry of every manifest: comparisons get a direct function each
        # (the visitor's dispatch cost more than the test itself), the rest go through the visitor
        self._test = self._compiled(self.expr)

    def eval(self, data_file: Any) -> bool:
        """True when the file might contain matching rows."""
        if data_file.record_count == 0:
            return False
        if data_file.record_count < 0:
            # imported files may carry -1 when the row count was never computed
            return True
        return self._test(data_file)

    def _visited(self, data_file: Any, expr: Expression) -> bool:
        self._file = data_file
        try:
            return bool(visit(expr, self))
        finally:
            self._file = None

    def _compiled(self, expr: Expression) -> Callable[[Any], bool]:
        """A function of a data file giving what :meth:`eval`'s visit of ``expr`` gives."""
        def leaf(e: Expression) -> Callable[[Any], bool] | None:
            if isinstance(e, BoundPredicate) and e.op in _BOUND_TESTS and e.literal is not None:
                return _bound_test(e.op, e.term.field_id, e.term.type, e.literal.value)
            return None
        return _compiled_tree(expr, leaf, self._visited)

    def always_true(self) -> bool:
        return True

    def always_false(self) -> bool:
        return False

    def is_null(self, ref: BoundReference) -> bool:
        return self._null_count(ref.field_id) != 0

    def not_null(self, ref: BoundReference) -> bool:
        return not self._contains_nulls_only(ref.field_id)

    def is_nan(self, ref: BoundReference) -> bool:
        fid = ref.field_id
        if self._nan_count(fid) == 0:
            return False
        return not self._contains_nulls_only(fid)

    def not_nan(self, ref: BoundReference) -> bool:
        return not self._contains_nans_only(ref.field_id)

    def _no_values(self, ref: BoundReference) -> bool:
        return self._contains_nulls_only(ref.field_id) or self._contains_nans_only(ref.field_id)

    def lt(self, ref: BoundReference, value: Any) -> bool:
        if self._no_values(ref):
            return False
        lower = self._lower(ref)
        return lower is None or compare_values(lower, value) < 0

    def lt_eq(self, ref: BoundReference, value: Any) -> bool:
        if self._no_values(ref):
            return False
        lower = self._lower(ref)
        return lower is None or compare_values(lower, value) <= 0

    def gt(self, ref: BoundReference, value: Any) -> bool:
        if self._no_values(ref):
            return False
        upper = self._upper(ref)
        return upper is None or compare_values(upper, value) > 0

    def gt_eq(self, ref: BoundReference, value: Any) -> bool:
        if self._no_values(ref):
            return False
        upper = self._upper(ref)
        return upper is None or compare_values(upper, value) >= 0

    def eq(self, ref: BoundReference, value: Any) -> bool:
        if self._no_values(ref):
            return False
        lower = self._lower(ref)
        if lower is not None and compare_values(lower, value) > 0:
            return False
        upper = self._upper(ref)
        return upper is None or compare_values(upper, value) >= 0

    def not_eq(self, ref: BoundReference, value: Any) -> bool:
        return True

    def in_(self, ref: BoundReference, values: frozenset) -> bool:
        if self._no_values(ref):
            return False
        if len(values) > IN_PREDICATE_LIMIT:
            return True
        return self._any_within_bounds(ref, values)

    def not_in(self, ref: BoundReference, values: frozenset) -> bool:
        return True

    def starts_with(self, ref: BoundReference, value: str) -> bool:
        if self._contains_nulls_only(ref.field_id):
            return False
        return _prefix_in_range(value, self._raw("lower_bounds", ref), self._raw("upper_bounds", ref))

    def not_starts_with(self, ref: BoundReference, value: str) -> bool:
        nulls = self._null_count(ref.field_id)
        if nulls is None or nulls > 0:
            return True
        return not _all_start_with(value, self._raw("lower_bounds", ref), self._raw("upper_bounds", ref))


class StrictMetricsEvaluator(_MetricsVisitor):
    """Must every row of a data file match ``expr``?  Answers from the file's column metrics.

    ``eval(data_file)`` is True only when the metrics prove that all rows match; used to drop whole
    files on delete and to skip residual filtering.  Columns nested in structs are not trusted (as
    Java), so predicates on them never prove a match.
    """

    def __init__(self, schema: Schema | StructType, expr: Expression, case_sensitive: bool = True) -> None:
        super().__init__(schema, expr, case_sensitive)
        self._top_level = {f.field_id for f in self.schema.fields}

    def eval(self, data_file: Any) -> bool:
        """True when every row of the file must match."""
        if data_file.record_count <= 0:
            return True
        self._file = data_file
        try:
            return bool(visit(self.expr, self))
        finally:
            self._file = None

    def always_true(self) -> bool:
        return True

    def always_false(self) -> bool:
        return False

    def _nested(self, ref: BoundReference) -> bool:
        return ref.field_id not in self._top_level

    def _can_contain_nulls(self, fid: int) -> bool:
        nulls = self._null_count(fid)
        return nulls is None or nulls > 0

    def _can_contain_nans(self, fid: int) -> bool:
        # a missing NaN count comes from writers that predate NaN counts; Java reads it as "none"
        nans = self._nan_count(fid)
        return nans is not None and nans > 0

    def _undecidable(self, ref: BoundReference) -> bool:
        return self._nested(ref) or self._can_contain_nulls(ref.field_id) or self._can_contain_nans(ref.field_id)

    def is_null(self, ref: BoundReference) -> bool:
        return not self._nested(ref) and self._contains_nulls_only(ref.field_id)

    def not_null(self, ref: BoundReference) -> bool:
        return not self._nested(ref) and self._null_count(ref.field_id) == 0

    def is_nan(self, ref: BoundReference) -> bool:
        return not self._nested(ref) and self._contains_nans_only(ref.field_id)

    def not_nan(self, ref: BoundReference) -> bool:
        if self._nested(ref):
            return False
        return self._nan_count(ref.field_id) == 0 or self._contains_nulls_only(ref.field_id)

    def lt(self, ref: BoundReference, value: Any) -> bool:
        if self._undecidable(ref):
            return False
        upper = self._upper(ref)
        return upper is not None and compare_values(upper, value) < 0

    def lt_eq(self, ref: BoundReference, value: Any) -> bool:
        if self._undecidable(ref):
            return False
        upper = self._upper(ref)
        return upper is not None and compare_values(upper, value) <= 0

    def gt(self, ref: BoundReference, value: Any) -> bool:
        if self._undecidable(ref):
            return False
        lower = self._lower(ref)
        return lower is not None and compare_values(lower, value) > 0

    def gt_eq(self, ref: BoundReference, value: Any) -> bool:
        if self._undecidable(ref):
            return False
        lower = self._lower(ref)
        return lower is not None and compare_values(lower, value) >= 0

    def eq(self, ref: BoundReference, value: Any) -> bool:
        if self._undecidable(ref):
            return False
        lower, upper = self._lower(ref), self._upper(ref)
        return (lower is not None and upper is not None
                and compare_values(lower, value) == 0 and compare_values(upper, value) == 0)

    def not_eq(self, ref: BoundReference, value: Any) -> bool:
        if self._nested(ref):
            return False
        fid = ref.field_id
        if self._contains_nulls_only(fid) or self._contains_nans_only(fid):
            return True
        lower = self._lower(ref)
        if lower is not None and compare_values(lower, value) > 0:
            return True
        upper = self._upper(ref)
        return upper is not None and compare_values(upper, value) < 0

    def in_(self, ref: BoundReference, values: frozenset) -> bool:
        if self._undecidable(ref):
            return False
        lower, upper = self._lower(ref), self._upper(ref)
        if lower is None or upper is None:
            return False
        return lower in values and upper in values and compare_values(lower, upper) == 0

    def not_in(self, ref: BoundReference, values: frozenset) -> bool:
        if self._nested(ref):
            return False
        fid = ref.field_id
        if self._contains_nulls_only(fid) or self._contains_nans_only(fid):
            return True
        return not self._any_within_bounds(ref, values)

    def starts_with(self, ref: BoundReference, value: str) -> bool:
        if self._undecidable(ref) or not isinstance(ref.type, StringType):
            return False
        # every value lies in [lower, upper]; if both bounds start with the prefix, so do all values
        return _all_start_with(value, self._raw("lower_bounds", ref), self._raw("upper_bounds", ref))

    def not_starts_with(self, ref: BoundReference, value: str) -> bool:
        if self._nested(ref):
            return False
        if self._contains_nulls_only(ref.field_id):
            return True
        lower, upper = self._raw("lower_bounds", ref), self._raw("upper_bounds", ref)
        if lower is None and upper is None:
            return False
        # nulls satisfy NOT starts_with, so only the non-null range has to avoid the prefix
        return not _prefix_in_range(value, lower, upper)
