"""Project row filters onto partition filters through partition transforms (spec "Scan Planning").

An *inclusive* projection ``P`` of a row filter ``F`` holds for every partition that may contain a
row matching ``F`` (rows matching ``F`` imply partitions matching ``P``); it prunes manifests and
files.  A *strict* projection holds only for partitions in which every row matches ``F``; it lets
deletes drop whole files.  Each transform projects the operations it can (Java's
``Transform.project`` / ``projectStrict`` and ``ProjectionUtil``):

* ``identity`` projects every predicate unchanged;
* ``bucket`` projects ``=``/``IN`` (inclusive) and ``!=``/``NOT IN`` (strict);
* ``truncate`` and ``year``/``month``/``day``/``hour`` project range predicates by moving the
  boundary by one unit before transforming; time projections widen for values before 1970 because
  old writers truncated toward zero there, so a partition value may be one greater than correct
  (except ``day`` of a date, which is the date itself);
* ``void`` and unknown transforms project nothing (always true inclusive, always false strict);
* a predicate on a transform term (``bucket[4](id) = 1``, from Spark's ``system.bucket(4, id)``)
  projects unchanged onto a partition field with the same transform of the same column, and onto
  no other field.

Results are unbound expressions on partition field names; bind them to ``spec.partition_type``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable, Iterable

from procedures.spec.expressions import (
    ALWAYS_FALSE,
    ALWAYS_TRUE,
    And,
    BoundPredicate,
    BoundTransform,
    Expression,
    Literal,
    Operation,
    Or,
    Reference,
    UnboundPredicate,
    and_,
    bind,
    or_,
    rewrite_not,
)
from procedures.spec.schema import Schema
from procedures.spec.transforms import (
    BucketTransform,
    IdentityTransform,
    TimeTransform,
    Transform,
    TruncateTransform,
)
from procedures.spec.types import (
    DateType,
    DecimalType,
    IcebergType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
)

__all__ = ["inclusive_projection", "strict_projection", "project_inclusive", "project_strict"]

_OP = Operation


def inclusive_projection(spec: Any, schema: Schema, expr: Expression, case_sensitive: bool = True) -> Expression:
    """Inclusive projection of the row filter ``expr`` onto the partition fields of ``spec``.

    Predicates on a column with several partition fields AND their projections; a predicate no
    field can project becomes ``ALWAYS_TRUE``.
    """
    bound = bind(rewrite_not(expr), schema, case_sensitive)
    return _project(bound, spec, schema, strict=False)


def strict_projection(spec: Any, schema: Schema, expr: Expression, case_sensitive: bool = True) -> Expression:
    """Strict projection of the row filter ``expr`` onto the partition fields of ``spec``.

    Projections of several partition fields on one column are ORed; a predicate no field can
    project becomes ``ALWAYS_FALSE``.
    """
    bound = bind(rewrite_not(expr), schema, case_sensitive)
    return _project(bound, spec, schema, strict=True)


def _project(expr: Expression, spec: Any, schema: Schema, strict: bool) -> Expression:
    if expr is ALWAYS_TRUE or expr is ALWAYS_FALSE:
        return expr
    if isinstance(expr, And):
        return and_(_project(expr.left, spec, schema, strict), _project(expr.right, spec, schema, strict))
    if isinstance(expr, Or):
        return or_(_project(expr.left, spec, schema, strict), _project(expr.right, spec, schema, strict))
    assert isinstance(expr, BoundPredicate), f"unexpected node after rewrite_not: {expr!r}"
    result: Expression = ALWAYS_FALSE if strict else ALWAYS_TRUE
    for field in spec.fields:
        if field.source_id != expr.term.field_id:
            continue
        projected = (project_strict if strict else project_inclusive)(field.name, expr, field.transform)
        if projected is not None:
            result = or_(result, projected) if strict else and_(result, projected)
    return result


def project_inclusive(name: str, pred: BoundPredicate, transform: Transform) -> Expression | None:
    """Inclusive projection of one bound predicate through ``transform`` onto partition field
    ``name``; None when the transform cannot project the operation."""
    return _dispatch(name, pred, transform, strict=False)


def project_strict(name: str, pred: BoundPredicate, transform: Transform) -> Expression | None:
    """Strict projection of one bound predicate through ``transform``; None when impossible."""
    return _dispatch(name, pred, transform, strict=True)


def _dispatch(name: str, pred: BoundPredicate, transform: Transform, strict: bool) -> Expression | None:
    if isinstance(pred.term, BoundTransform):
        # a predicate on transform(x) says exactly what it says about a partition field with the
        # same transform of x, both ways; any other field learns nothing (Java's ProjectionUtil)
        return _copy(name, pred) if pred.term.transform == transform else None
    source = pred.term.type
    if isinstance(transform, IdentityTransform):
        return _copy(name, pred)
    if not isinstance(transform, (BucketTransform, TruncateTransform, TimeTransform)):
        return None  # void and unknown transforms
    if pred.op in (_OP.IS_NULL, _OP.NOT_NULL):
        return UnboundPredicate(pred.op, Reference(name))
    if pred.op.is_unary:
        return None
    if isinstance(transform, BucketTransform):
        return _bucket(name, pred, transform, strict)
    if isinstance(transform, TruncateTransform):
        if isinstance(source, StringType):
            return _truncate_string(name, pred, transform, strict)
        if isinstance(source, (IntegerType, LongType, DecimalType)):
            return _truncate_number(name, pred, transform, strict)
        return None  # binary truncation: no range projection (Java projects nothing either)
    return _time(name, pred, transform, strict)


def _copy(name: str, pred: BoundPredicate) -> Expression:
    """``pred`` on the partition field ``name`` with the same operation and literal(s)."""
    if pred.op.is_unary:
        return UnboundPredicate(pred.op, Reference(name))
    if pred.op.is_set:
        return _set(pred.op, name, pred.literal_set or (), pred.term.type)
    assert pred.literal is not None
    return UnboundPredicate(pred.op, Reference(name), (pred.literal,))


def _one(op: Operation, name: str, value: Any, type_: IcebergType) -> Expression:
    assert isinstance(type_, PrimitiveType)
    return UnboundPredicate(op, Reference(name), (Literal(value, type_),))


def _set(op: Operation, name: str, values: Iterable[Any], type_: IcebergType) -> Expression:
    assert isinstance(type_, PrimitiveType)
    distinct = sorted(set(values), key=lambda v: (v is None, v))
    if len(distinct) == 1:
        return _one(_OP.EQ if op is _OP.IN else _OP.NOT_EQ, name, distinct[0], type_)
    return UnboundPredicate(op, Reference(name), tuple(Literal(v, type_) for v in distinct))


def _apply_all(pred: BoundPredicate, transform: Transform) -> list[Any]:
    source = pred.term.type
    return [transform.apply(v, source) for v in (pred.literal_set or ())]


# ------------------------------------------------------------------------------------ bucket
def _bucket(name: str, pred: BoundPredicate, t: BucketTransform, strict: bool) -> Expression | None:
    source, rtype = pred.term.type, t.result_type(pred.term.type)
    wanted_one, wanted_set = (_OP.NOT_EQ, _OP.NOT_IN) if strict else (_OP.EQ, _OP.IN)
    if pred.op is wanted_one:
        assert pred.literal is not None
        return _one(pred.op, name, t.apply(pred.literal.value, source), rtype)
    if pred.op is wanted_set:
        return _set(pred.op, name, _apply_all(pred, t), rtype)
    return None


# ------------------------------------------------------------------------------------ ranges
def _unit(source: IcebergType) -> Any:
    """The distance between adjacent source values, used to turn < into <= and > into >=."""
    if isinstance(source, DecimalType):
        return Decimal(1).scaleb(-source.scale)
    return 1


def _range_inclusive(name: str, pred: BoundPredicate, apply: Callable[[Any], Any], unit: Any,
                     rtype: IcebergType) -> Expression | None:
    op = pred.op
    if op.is_set:
        return _set(op, name, [apply(v) for v in (pred.literal_set or ())], rtype) if op is _OP.IN else None
    assert pred.literal is not None
    v = pred.literal.value
    if op is _OP.LT:
        return _one(_OP.LT_EQ, name, apply(v - unit), rtype)
    if op is _OP.LT_EQ:
        return _one(_OP.LT_EQ, name, apply(v), rtype)
    if op is _OP.GT:
        return _one(_OP.GT_EQ, name, apply(v + unit), rtype)
    if op is _OP.GT_EQ:
        return _one(_OP.GT_EQ, name, apply(v), rtype)
    if op is _OP.EQ:
        return _one(_OP.EQ, name, apply(v), rtype)
    return None


def _range_strict(name: str, pred: BoundPredicate, apply: Callable[[Any], Any], unit: Any,
                  rtype: IcebergType) -> Expression | None:
    op = pred.op
    if op.is_set:
        return _set(op, name, [apply(v) for v in (pred.literal_set or ())], rtype) if op is _OP.NOT_IN else None
    assert pred.literal is not None
    v = pred.literal.value
    if op is _OP.LT:
        return _one(_OP.LT, name, apply(v), rtype)
    if op is _OP.LT_EQ:
        return _one(_OP.LT, name, apply(v + unit), rtype)
    if op is _OP.GT:
        return _one(_OP.GT, name, apply(v), rtype)
    if op is _OP.GT_EQ:
        return _one(_OP.GT, name, apply(v - unit), rtype)
    if op is _OP.NOT_EQ:
        return _one(_OP.NOT_EQ, name, apply(v), rtype)
    return None


def _truncate_number(name: str, pred: BoundPredicate, t: TruncateTransform, strict: bool) -> Expression | None:
    source = pred.term.type
    apply = lambda v: t.apply(v, source)  # noqa: E731
    project = _range_strict if strict else _range_inclusive
    return project(name, pred, apply, _unit(source), source)


def _truncate_string(name: str, pred: BoundPredicate, t: TruncateTransform, strict: bool) -> Expression | None:
    source, width, op = pred.term.type, t.width, pred.op
    apply = lambda v: t.apply(v, source)  # noqa: E731
    if op.is_set:
        if op is (_OP.NOT_IN if strict else _OP.IN):
            return _set(op, name, [apply(v) for v in (pred.literal_set or ())], source)
        return None
    assert pred.literal is not None
    v: str = pred.literal.value
    if op in (_OP.STARTS_WITH, _OP.NOT_STARTS_WITH):
        positive = op is _OP.STARTS_WITH
        if len(v) < width:
            return _one(op, name, v, source)
        if len(v) == width:
            return _one(_OP.EQ if positive else _OP.NOT_EQ, name, v, source)
        # a longer prefix pins the partition value to its first `width` characters
        if positive and not strict:
            return _one(_OP.STARTS_WITH, name, apply(v), source)
        if not positive and strict:
            return _one(_OP.NOT_STARTS_WITH, name, apply(v), source)
        return None
    if not strict:
        if op in (_OP.LT, _OP.LT_EQ):
            return _one(_OP.LT_EQ, name, apply(v), source)
        if op in (_OP.GT, _OP.GT_EQ):
            return _one(_OP.GT_EQ, name, apply(v), source)
        if op is _OP.EQ:
            return _one(_OP.EQ, name, apply(v), source)
        return None
    if op in (_OP.LT, _OP.LT_EQ):
        return _one(_OP.LT, name, apply(v), source)
    if op in (_OP.GT, _OP.GT_EQ):
        return _one(_OP.GT, name, apply(v), source)
    if op is _OP.NOT_EQ:
        return _one(_OP.NOT_EQ, name, apply(v), source)
    return None


# ------------------------------------------------------------------------------------ time
def _time(name: str, pred: BoundPredicate, t: TimeTransform, strict: bool) -> Expression | None:
    source = pred.term.type
    if not isinstance(source, (DateType, TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)):
        return None
    rtype = t.result_type(source)
    apply = lambda v: t.apply(v, source)  # noqa: E731
    # day(date) is the date itself: old writers never got it wrong, so Java (Dates.DAY) does not widen it
    exact = isinstance(source, DateType) and isinstance(rtype, DateType)
    if strict:
        projected = _range_strict(name, pred, apply, 1, rtype)
        return projected if exact else _fix_strict_time(projected, rtype)
    projected = _range_inclusive(name, pred, apply, 1, rtype)
    return projected if exact else _fix_inclusive_time(projected, rtype)


def _fix_inclusive_time(projected: Expression | None, rtype: IcebergType) -> Expression | None:
    """Widen an inclusive time projection for partition values that pre-1.0 writers computed one too
    large for timestamps before the epoch (they truncated toward zero instead of flooring)."""
    if not isinstance(projected, UnboundPredicate):
        return projected
    op, name = projected.op, projected.term.name
    if op.is_set:
        values = {lit.value for lit in projected.literals}
        fixed = values | {v + 1 for v in values if v < 0}
        return _set(op, name, fixed, rtype) if fixed != values else projected
    v = projected.literal.value
    if v >= 0:
        return projected
    if op in (_OP.LT, _OP.LT_EQ):
        return _one(op, name, v + 1, rtype)
    if op is _OP.EQ:
        return _set(_OP.IN, name, [v, v + 1], rtype)
    return projected


def _fix_strict_time(projected: Expression | None, rtype: IcebergType) -> Expression | None:
    """Narrow a strict time projection for the same pre-epoch off-by-one partition values."""
    if not isinstance(projected, UnboundPredicate):
        return projected
    op, name = projected.op, projected.term.name
    if op.is_set:
        values = {lit.value for lit in projected.literals}
        fixed = values | {v + 1 for v in values if v < 0}
        return _set(op, name, fixed, rtype) if fixed != values else projected
    v = projected.literal.value
    if op in (_OP.GT, _OP.GT_EQ) and v <= 0:
        return _one(op, name, v + 1, rtype)
    if op is _OP.NOT_EQ and v < 0:
        return _set(_OP.NOT_IN, name, [v, v + 1], rtype)
    return projected
