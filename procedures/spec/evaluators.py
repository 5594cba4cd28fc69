"""Evaluate bound expressions against rows, manifest partition summaries and file metrics.

These follow Iceberg Java's ``Evaluator``, ``ManifestEvaluator``, ``InclusiveMetricsEvaluator`` and
``StrictMetricsEvaluator``:

* :class:`Evaluator` decides a predicate for one struct tuple (a row or a partition tuple).
* :class:`ManifestEvaluator` answers "might this manifest hold matching files?" from the manifest
  list's ``partitions`` field summaries, for an expression over the partition struct.
* :class:`InclusiveMetricsEvaluator` answers "might this file hold matching rows?" and
  :class:`StrictMetricsEvaluator` "must every row of this file match?" from a data file's value,
  null and NaN counts and its lower/upper bounds (spec "Manifests": metrics).

A predicate on a transform term (``bucket[4](id) = 1``) is read as Java reads it: the inclusive
metrics evaluator applies an order-preserving transform to the source column's bounds (bucket has
none), the strict one never proves it, and a manifest's summaries never rule it out.

Missing statistics always give the safe answer: "might match" for inclusive, "might not match"
for strict.  What counts and bounds prove is written once (the "metrics rules" functions) and called
by all three bound-reading evaluators, including the direct functions the inclusive one compiles for
comparisons and ``IN``.  Bounds are decoded with :func:`procedures.spec.conversions.from_bytes`, which accepts
bounds written before a type promotion (4-byte bounds of a ``long`` column).
"""

from __future__ import annotations

import math
import operator
from typing import Any, Callable, Iterable, Sequence

from procedures.spec.conversions import from_bytes
from procedures.spec.expressions import (
    ALWAYS_FALSE,
    ALWAYS_TRUE,
    And,
    BoundExpressionVisitor,
    BoundPredicate,
    BoundReference,
    BoundTransform,
    Expression,
    Operation,
    Or,
    bind,
    rewrite_not,
    visit,
)
from procedures.spec.projection import inclusive_projection
from procedures.spec.schema import Schema
from procedures.spec.transforms import IdentityTransform
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


def _on_column(e: Expression) -> bool:
    """Whether ``e`` is a bound predicate directly on a column (not on a transform of one)."""
    return isinstance(e, BoundPredicate) and isinstance(e.term, BoundReference)


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
            if _on_column(e) and e.literal is not None and e.op in _SIDES:
                return _summary_test(e.op, e.term.positions[0], e.term.type, e.literal.value)
            return None
        return _compiled_tree(expr, leaf, self._visited)

    def always_true(self) -> bool:
        return True

    def always_false(self) -> bool:
        return False

    def transform_predicate(self, pred: BoundPredicate) -> bool:
        # summaries bound partition values, not transformed ones: might match (as Java)
        return True

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

    def _comparison(self, op: Operation, ref: BoundReference, value: Any) -> bool:
        return _summary_test(op, ref.positions[0], ref.type, value)(self._stats)

    def lt(self, ref: BoundReference, value: Any) -> bool:
        return self._comparison(Operation.LT, ref, value)

    def lt_eq(self, ref: BoundReference, value: Any) -> bool:
        return self._comparison(Operation.LT_EQ, ref, value)

    def gt(self, ref: BoundReference, value: Any) -> bool:
        return self._comparison(Operation.GT, ref, value)

    def gt_eq(self, ref: BoundReference, value: Any) -> bool:
        return self._comparison(Operation.GT_EQ, ref, value)

    def eq(self, ref: BoundReference, value: Any) -> bool:
        return self._comparison(Operation.EQ, ref, value)

    def not_eq(self, ref: BoundReference, value: Any) -> bool:
        return True

    def in_(self, ref: BoundReference, values: frozenset) -> bool:
        s = self._summary(ref)
        lower = self._lower(ref, s)
        if lower is None:
            return False
        if len(values) > IN_PREDICATE_LIMIT:
            return True
        return _in_range_test(values)(lower, self._upper(ref, s))

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


# ------------------------------------------------------------------------------------ metrics rules
# What a column's counts and bounds prove, each rule written once: the manifest evaluator (summary
# bounds), the inclusive metrics evaluator (its visitor and the functions it compiles for plain
# comparisons) and the strict one all call these, so their answers cannot drift apart.  Planning runs
# them for every manifest entry: they are plain functions and closures built once per predicate.
# String and binary bounds may be truncated (spec "Manifests": metrics): a truncated lower bound is
# still below every value and a truncated upper bound above, which is all the range rules assume.

def _metric(metrics: dict[int, Any] | None, fid: int) -> Any:
    """A column's entry in one metrics map (a count or a raw bound); None when the map or the entry
    is missing, which proves nothing."""
    return metrics.get(fid) if metrics else None


def _only_nulls(values: int | None, nulls: int | None) -> bool:
    """Whether a column's value and null counts prove it holds no non-null value."""
    return values is not None and nulls is not None and values == nulls


def _only_nans(values: int | None, nans: int | None) -> bool:
    """Whether a column's value and NaN counts prove every value is NaN."""
    return values is not None and nans is not None and values == nans


def _no_ordered_values(f: Any, fid: int) -> bool:
    """Whether a file's counts prove column ``fid`` holds only nulls or only NaNs: no value that a
    comparison (``<``, ``=``, ``IN`` ...) can accept."""
    values = _metric(f.value_counts, fid)
    # both rules need the value count: without it the other two maps are not read
    return values is not None and (_only_nulls(values, _metric(f.null_value_counts, fid))
                                   or _only_nans(values, _metric(f.nan_value_counts, fid)))


def _may_hold_nulls(nulls: int | None) -> bool:
    """Whether a column may hold nulls: only a null count of zero proves it does not."""
    return nulls != 0


def _no_nans(nans: int | None) -> bool:
    """Whether a column's NaN count proves it holds no NaN (a missing count does not)."""
    return nans == 0


def _bound_reader(fid: int, ftype: Any) -> Callable[[dict[int, bytes] | None], Any]:
    """A function reading column ``fid``'s decoded bound from a bounds map (lower or upper): None
    when missing, or NaN -- writers that did not leave NaN out wrote it, and it bounds nothing.  Only
    float and double bounds can be NaN, so other types skip the test."""
    nan_possible = isinstance(ftype, (FloatType, DoubleType))

    def read(bounds: dict[int, bytes] | None) -> Any:
        raw = _metric(bounds, fid)
        if raw is None:
            return None
        value = from_bytes(raw, ftype)
        return None if nan_possible and value != value else value  # NaN alone is unequal to itself
    return read


#: the order each bound test needs between a bound and the literal (see :func:`_admits`)
_ORDER_TESTS: dict[Operation, Callable[[Any, Any], bool]] = {
    Operation.LT: operator.lt, Operation.LT_EQ: operator.le, Operation.GT: operator.gt, Operation.GT_EQ: operator.ge,
}


def _admits(op: Operation, literal: Any) -> Callable[[Any], bool]:
    """For ``v op literal`` (``op`` a key of ``_ORDER_TESTS``): a test of one bound ``b`` of the values
    -- the lower bound for ``<`` and ``<=``, the upper one for ``>`` and ``>=`` -- saying whether a value
    on the inner side of ``b`` may satisfy it.  A None bound (missing) bounds nothing and admits."""
    test = _ORDER_TESTS[op]
    if isinstance(literal, float):
        # float columns (literals are bound to the column type) order as Java's Double.compare: a
        # literal is never NaN, but a manifest summary's bound may be
        return lambda b: b is None or test(compare_values(b, literal), 0)
    return lambda b: b is None or test(b, literal)


#: the bound tests (of :func:`_admits`) deciding whether a value range may satisfy each comparison:
#: (test of the lower bound, test of the upper bound), None for a bound it does not read
_SIDES: dict[Operation, tuple[Operation | None, Operation | None]] = {
    Operation.LT: (Operation.LT, None),
    Operation.LT_EQ: (Operation.LT_EQ, None),
    Operation.GT: (None, Operation.GT),
    Operation.GT_EQ: (None, Operation.GT_EQ),
    Operation.EQ: (Operation.LT_EQ, Operation.GT_EQ),
}

#: the comparison true exactly where each one is false: every value of a range satisfies ``op`` when
#: none may satisfy its complement
_COMPLEMENT = {Operation.LT: Operation.GT_EQ, Operation.LT_EQ: Operation.GT, Operation.GT: Operation.LT_EQ,
               Operation.GT_EQ: Operation.LT, Operation.NOT_EQ: Operation.EQ}


def _range_may_hold(op: Operation, lower: Any, upper: Any, literal: Any) -> bool:
    """Whether some value in [lower, upper] (a None bound is open) may satisfy ``v op literal``
    (``op`` a key of ``_SIDES``)."""
    lo, hi = _SIDES[op]
    return (lo is None or _admits(lo, literal)(lower)) and (hi is None or _admits(hi, literal)(upper))


def _range_must_hold(op: Operation, lower: Any, upper: Any, literal: Any) -> bool:
    """Whether every value in [lower, upper] satisfies ``v op literal`` (a comparison: ``<``, ``<=``,
    ``>``, ``>=``, ``=`` or ``!=``); an open (None) bound proves nothing."""
    if op is Operation.EQ:
        # a single value: both bounds equal the literal
        return (lower is not None and upper is not None
                and compare_values(lower, literal) == 0 and compare_values(upper, literal) == 0)
    return not _range_may_hold(_COMPLEMENT[op], lower, upper, literal)


def _in_range_test(values: Iterable[Any]) -> Callable[[Any, Any], bool]:
    """A test of a value range [lower, upper] (a None bound is open): may it hold one of ``values``?"""
    tests = [(_admits(Operation.LT_EQ, v), _admits(Operation.GT_EQ, v)) for v in values]
    return lambda lower, upper: any(lower_ok(lower) and upper_ok(upper) for lower_ok, upper_ok in tests)


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
    """:class:`ManifestEvaluator`'s answer for ``field op value`` (a key of ``_SIDES``) as a direct
    function of a manifest's summaries, by the shared range rules.  Unlike a file's metrics, a summary
    without bounds has no non-null value (or only NaN), and those satisfy no comparison: the first
    bound the comparison reads decides (an ``=`` without an upper bound may still match)."""
    lo, hi = _SIDES[op]
    lower_ok = None if lo is None else _admits(lo, value)
    upper_ok = None if hi is None else _admits(hi, value)

    def test(stats: Sequence[Any]) -> bool:
        s = stats[position]
        first = s.lower_bound if lower_ok is not None else s.upper_bound
        if first is None:
            return False
        if lower_ok is not None and not lower_ok(from_bytes(s.lower_bound, t)):
            return False
        return upper_ok is None or upper_ok(None if s.upper_bound is None else from_bytes(s.upper_bound, t))
    return test




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

    def _value_count(self, fid: int) -> int | None:
        return _metric(self._file.value_counts, fid)

    def _null_count(self, fid: int) -> int | None:
        return _metric(self._file.null_value_counts, fid)

    def _nan_count(self, fid: int) -> int | None:
        return _metric(self._file.nan_value_counts, fid)

    def _contains_nulls_only(self, fid: int) -> bool:
        return _only_nulls(self._value_count(fid), self._null_count(fid))

    def _contains_nans_only(self, fid: int) -> bool:
        return _only_nans(self._value_count(fid), self._nan_count(fid))

    def _no_ordered_values(self, ref: BoundReference) -> bool:
        return _no_ordered_values(self._file, ref.field_id)

    def _lower(self, ref: BoundReference) -> Any:
        return _bound_reader(ref.field_id, ref.type)(self._file.lower_bounds)

    def _upper(self, ref: BoundReference) -> Any:
        return _bound_reader(ref.field_id, ref.type)(self._file.upper_bounds)

    def _bounds_read_by(self, op: Operation, ref: BoundReference) -> tuple[Any, Any]:
        """The decoded (lower, upper) bounds that ``_range_may_hold(op, ...)`` reads; None for the
        other (a bound is decoded only when a test needs it)."""
        lo, hi = _SIDES[op]
        return (None if lo is None else self._lower(ref)), (None if hi is None else self._upper(ref))

    def _raw(self, name: str, ref: BoundReference) -> bytes | None:
        return _metric(getattr(self._file, name), ref.field_id)


def _inclusive_comparison(op: Operation, fid: int, ftype: Any, literal: Any) -> Callable[[Any], bool]:
    """The inclusive test of ``v op literal`` (``op`` a key of ``_SIDES``) on column ``fid`` of type
    ``ftype``: a function of a data file's metrics that is False only when they prove no row matches.
    Built once per predicate: planning calls it for every manifest entry."""
    read = _bound_reader(fid, ftype)
    lo, hi = _SIDES[op]
    lower_ok = None if lo is None else _admits(lo, literal)
    upper_ok = None if hi is None else _admits(hi, literal)

    def test(f: Any) -> bool:
        return (not _no_ordered_values(f, fid)
                and (lower_ok is None or lower_ok(read(f.lower_bounds)))
                and (upper_ok is None or upper_ok(read(f.upper_bounds))))
    return test


def _inclusive_in(fid: int, ftype: Any, values: frozenset) -> Callable[[Any], bool]:
    """The inclusive test of ``v IN values`` on column ``fid``, as :func:`_inclusive_comparison`."""
    if len(values) > IN_PREDICATE_LIMIT:
        # too many values to test each (as Java): only a column without ordered values rules a file out
        return lambda f: not _no_ordered_values(f, fid)
    read = _bound_reader(fid, ftype)
    in_range = _in_range_test(values)
    return lambda f: not _no_ordered_values(f, fid) and in_range(read(f.lower_bounds), read(f.upper_bounds))


class InclusiveMetricsEvaluator(_MetricsVisitor):
    """Might a data file hold rows matching ``expr``?  Answers from the file's column metrics.

    ``eval(data_file)`` is False only when the metrics prove no row can match (all-null column for
    a comparison, bounds outside the literal, zero NaN count for ``is_nan`` ...).
    """

    def __init__(self, schema: Schema | StructType, expr: Expression, case_sensitive: bool = True) -> None:
        super().__init__(schema, expr, case_sensitive)
        # planning tests every entry of every manifest: comparisons and IN get a direct function each
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
            if _on_column(e) and e.op in _SIDES and e.literal is not None:
                return _inclusive_comparison(e.op, e.term.field_id, e.term.type, e.literal.value)
            if _on_column(e) and e.op is Operation.IN and e.literal_set is not None:
                return _inclusive_in(e.term.field_id, e.term.type, e.literal_set)
            return None
        return _compiled_tree(expr, leaf, self._visited)

    def always_true(self) -> bool:
        return True

    def always_false(self) -> bool:
        return False

    def transform_predicate(self, pred: BoundPredicate) -> bool:
        """A predicate on ``transform(x)`` from x's metrics, as Java's evaluator: the counts of x
        hold for the transformed values, and an order-preserving transform (truncate, year ...)
        of x's bounds bounds the transformed values (``f(lower) <= f(v) <= f(upper)``); bucket has
        no bounds, so only the counts can rule a file out."""
        term, op = pred.term, pred.op
        assert isinstance(term, BoundTransform)
        fid = term.field_id
        if isinstance(term.transform, IdentityTransform):
            return self.dispatch(BoundPredicate(op, term.ref, pred.literal, pred.literal_set))
        if op is Operation.IS_NULL:
            # only an order-preserving transform is known to map every non-null value to non-null
            return not (term.transform.preserves_order and not _may_hold_nulls(self._null_count(fid)))
        if op in (Operation.NOT_NULL, Operation.IS_NAN):
            return not self._contains_nulls_only(fid)
        if op in (Operation.NOT_NAN, Operation.NOT_EQ, Operation.NOT_IN, Operation.STARTS_WITH):
            return True
        lower, upper = self._transformed_bounds(term)
        if op is Operation.NOT_STARTS_WITH:
            if _may_hold_nulls(self._null_count(fid)) or lower is None or upper is None:
                return True
            assert pred.literal is not None
            prefix = pred.literal.value
            return not (lower.startswith(prefix) and upper.startswith(prefix))
        if _no_ordered_values(self._file, fid):
            return False
        if op is Operation.IN:
            assert pred.literal_set is not None
            if len(pred.literal_set) > IN_PREDICATE_LIMIT or lower is None:
                return True
            return _in_range_test(pred.literal_set)(lower, upper)
        assert pred.literal is not None
        return _range_may_hold(op, lower, upper, pred.literal.value)

    def _transformed_bounds(self, term: BoundTransform) -> tuple[Any, Any]:
        """The transform of the source column's (lower, upper) bounds; None for a missing bound or
        a transform that does not preserve order."""
        if not term.transform.preserves_order:
            return None, None
        source = term.ref
        return (term.transform.apply(self._lower(source), source.type),
                term.transform.apply(self._upper(source), source.type))

    def is_null(self, ref: BoundReference) -> bool:
        return _may_hold_nulls(self._null_count(ref.field_id))

    def not_null(self, ref: BoundReference) -> bool:
        return not self._contains_nulls_only(ref.field_id)

    def is_nan(self, ref: BoundReference) -> bool:
        fid = ref.field_id
        if _no_nans(self._nan_count(fid)):
            return False
        return not self._contains_nulls_only(fid)

    def not_nan(self, ref: BoundReference) -> bool:
        return not self._contains_nans_only(ref.field_id)

    def _comparison(self, op: Operation, ref: BoundReference, value: Any) -> bool:
        # the same test the compiled path runs (only reached when visiting directly)
        return _inclusive_comparison(op, ref.field_id, ref.type, value)(self._file)

    def lt(self, ref: BoundReference, value: Any) -> bool:
        return self._comparison(Operation.LT, ref, value)

    def lt_eq(self, ref: BoundReference, value: Any) -> bool:
        return self._comparison(Operation.LT_EQ, ref, value)

    def gt(self, ref: BoundReference, value: Any) -> bool:
        return self._comparison(Operation.GT, ref, value)

    def gt_eq(self, ref: BoundReference, value: Any) -> bool:
        return self._comparison(Operation.GT_EQ, ref, value)

    def eq(self, ref: BoundReference, value: Any) -> bool:
        return self._comparison(Operation.EQ, ref, value)

    def not_eq(self, ref: BoundReference, value: Any) -> bool:
        return True

    def in_(self, ref: BoundReference, values: frozenset) -> bool:
        return _inclusive_in(ref.field_id, ref.type, values)(self._file)

    def not_in(self, ref: BoundReference, values: frozenset) -> bool:
        return True

    def starts_with(self, ref: BoundReference, value: str) -> bool:
        if self._contains_nulls_only(ref.field_id):
            return False
        return _prefix_in_range(value, self._raw("lower_bounds", ref), self._raw("upper_bounds", ref))

    def not_starts_with(self, ref: BoundReference, value: str) -> bool:
        if _may_hold_nulls(self._null_count(ref.field_id)):
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

    def transform_predicate(self, pred: BoundPredicate) -> bool:
        # the metrics cannot prove a transformed value matches (Java's handleNonReference)
        return False

    def _nested(self, ref: BoundReference) -> bool:
        return ref.field_id not in self._top_level

    def _can_contain_nans(self, fid: int) -> bool:
        # a missing NaN count comes from writers that predate NaN counts; Java reads it as "none"
        nans = self._nan_count(fid)
        return nans is not None and nans > 0

    def _undecidable(self, ref: BoundReference) -> bool:
        fid = ref.field_id
        return self._nested(ref) or _may_hold_nulls(self._null_count(fid)) or self._can_contain_nans(fid)

    def _all_satisfy(self, op: Operation, ref: BoundReference, value: Any) -> bool:
        """Whether the metrics prove every row satisfies ``v op literal`` (a comparison): no null or
        NaN (neither satisfies it) and bounds inside the accepted range."""
        if self._undecidable(ref):
            return False
        # < ... >= read the bound of their complement's test; = reads both
        lower, upper = self._bounds_read_by(_COMPLEMENT.get(op, op), ref)
        return _range_must_hold(op, lower, upper, value)

    def is_null(self, ref: BoundReference) -> bool:
        return not self._nested(ref) and self._contains_nulls_only(ref.field_id)

    def not_null(self, ref: BoundReference) -> bool:
        return not self._nested(ref) and not _may_hold_nulls(self._null_count(ref.field_id))

    def is_nan(self, ref: BoundReference) -> bool:
        return not self._nested(ref) and self._contains_nans_only(ref.field_id)

    def not_nan(self, ref: BoundReference) -> bool:
        if self._nested(ref):
            return False
        return _no_nans(self._nan_count(ref.field_id)) or self._contains_nulls_only(ref.field_id)

    def lt(self, ref: BoundReference, value: Any) -> bool:
        return self._all_satisfy(Operation.LT, ref, value)

    def lt_eq(self, ref: BoundReference, value: Any) -> bool:
        return self._all_satisfy(Operation.LT_EQ, ref, value)

    def gt(self, ref: BoundReference, value: Any) -> bool:
        return self._all_satisfy(Operation.GT, ref, value)

    def gt_eq(self, ref: BoundReference, value: Any) -> bool:
        return self._all_satisfy(Operation.GT_EQ, ref, value)

    def eq(self, ref: BoundReference, value: Any) -> bool:
        return self._all_satisfy(Operation.EQ, ref, value)

    def not_eq(self, ref: BoundReference, value: Any) -> bool:
        # nulls and NaN satisfy !=, so only the nested rule makes it undecidable
        if self._nested(ref):
            return False
        if self._no_ordered_values(ref):
            return True
        return _range_must_hold(Operation.NOT_EQ, *self._bounds_read_by(Operation.EQ, ref), value)

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
        if self._no_ordered_values(ref):
            return True
        return not _in_range_test(values)(self._lower(ref), self._upper(ref))

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
