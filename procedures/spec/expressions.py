"""Filter expressions: the model behind scan planning and the procedures' ``where`` filters.

Iceberg's expression model (Java ``org.apache.iceberg.expressions``): boolean connectives, unbound
predicates that name a column, and bound predicates that carry the field id, its type and an
accessor into struct tuples.  Binding converts each literal to the column's type; a literal out of
the column type's range (an ``int`` column compared with ``2**40``) folds the predicate to
``ALWAYS_TRUE`` or ``ALWAYS_FALSE`` the way Java's ``AboveMax``/``BelowMin`` literals do.

Values use the package's representation (see :mod:`procedures.spec.types`): dates are ``int`` days,
timestamps ``int`` micros (nanos for ``_ns``), decimals ``Decimal``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable

from procedures.errors import ExpressionError
from procedures.spec.literals import (
    ABOVE_MAX,
    BELOW_MIN,
    Literal,
    lit,
    parse_date_days,
    parse_timestamp_micros,
)
from procedures.spec.schema import Schema
from procedures.spec.transforms import Transform
from procedures.spec.types import DoubleType, FloatType, PrimitiveType, StringType, StructType

__all__ = [
    "Operation",
    "Expression",
    "AlwaysTrue",
    "AlwaysFalse",
    "ALWAYS_TRUE",
    "ALWAYS_FALSE",
    "And",
    "Or",
    "Not",
    "and_",
    "or_",
    "not_",
    "Literal",
    "ABOVE_MAX",
    "BELOW_MIN",
    "lit",
    "Reference",
    "BoundReference",
    "UnboundTransform",
    "BoundTransform",
    "UnboundPredicate",
    "BoundPredicate",
    "eq",
    "not_eq",
    "lt",
    "lt_eq",
    "gt",
    "gt_eq",
    "in_",
    "not_in",
    "is_null",
    "not_null",
    "is_nan",
    "not_nan",
    "starts_with",
    "not_starts_with",
    "predicate",
    "transform_term",
    "bind",
    "rewrite_not",
    "referenced_field_ids",
    "referenced_names",
    "has_transform_terms",
    "BoundExpressionVisitor",
    "visit",
    "parse_timestamp_micros",
    "parse_date_days",
]



class Operation(Enum):
    """Expression operations, named as in the spec and Java's ``Expression.Operation``."""

    TRUE = "true"
    FALSE = "false"
    IS_NULL = "is_null"
    NOT_NULL = "not_null"
    IS_NAN = "is_nan"
    NOT_NAN = "not_nan"
    LT = "<"
    LT_EQ = "<="
    GT = ">"
    GT_EQ = ">="
    EQ = "="
    NOT_EQ = "!="
    IN = "in"
    NOT_IN = "not_in"
    STARTS_WITH = "starts_with"
    NOT_STARTS_WITH = "not_starts_with"
    NOT = "not"
    AND = "and"
    OR = "or"

    def negate(self) -> "Operation":
        """The operation whose result is the negation of this one (for predicates)."""
        return _NEGATE[self]

    def flip(self) -> "Operation":
        """The operation with its operands swapped (``a < b`` is ``b > a``)."""
        return _FLIP.get(self, self)

    @property
    def is_unary(self) -> bool:
        """True for predicates without a literal."""
        return self in _UNARY

    @property
    def is_set(self) -> bool:
        """True for IN / NOT IN."""
        return self in (Operation.IN, Operation.NOT_IN)


_NEGATE = {
    Operation.TRUE: Operation.FALSE, Operation.FALSE: Operation.TRUE,
    Operation.IS_NULL: Operation.NOT_NULL, Operation.NOT_NULL: Operation.IS_NULL,
    Operation.IS_NAN: Operation.NOT_NAN, Operation.NOT_NAN: Operation.IS_NAN,
    Operation.LT: Operation.GT_EQ, Operation.GT_EQ: Operation.LT,
    Operation.LT_EQ: Operation.GT, Operation.GT: Operation.LT_EQ,
    Operation.EQ: Operation.NOT_EQ, Operation.NOT_EQ: Operation.EQ,
    Operation.IN: Operation.NOT_IN, Operation.NOT_IN: Operation.IN,
    Operation.STARTS_WITH: Operation.NOT_STARTS_WITH, Operation.NOT_STARTS_WITH: Operation.STARTS_WITH,
}
_FLIP = {
    Operation.LT: Operation.GT, Operation.GT: Operation.LT,
    Operation.LT_EQ: Operation.GT_EQ, Operation.GT_EQ: Operation.LT_EQ,
}
_UNARY = frozenset({Operation.IS_NULL, Operation.NOT_NULL, Operation.IS_NAN, Operation.NOT_NAN})
_SYMBOL = {
    Operation.LT: "<", Operation.LT_EQ: "<=", Operation.GT: ">", Operation.GT_EQ: ">=",
    Operation.EQ: "=", Operation.NOT_EQ: "!=",
}


# ------------------------------------------------------------------------------------ connectives
class Expression:
    """Base of every expression; ``&``, ``|`` and ``~`` build simplified And/Or/Not."""

    __slots__ = ()

    def negate(self) -> "Expression":
        """The logical negation, with NOT pushed into the children."""
        raise NotImplementedError

    def __and__(self, other: "Expression") -> "Expression":
        return and_(self, other)

    def __or__(self, other: "Expression") -> "Expression":
        return or_(self, other)

    def __invert__(self) -> "Expression":
        return not_(self)


class AlwaysTrue(Expression):
    """The expression that every row satisfies."""

    __slots__ = ()
    _instance: "AlwaysTrue | None" = None

    def __new__(cls) -> "AlwaysTrue":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def negate(self) -> Expression:
        return ALWAYS_FALSE

    def __repr__(self) -> str:
        return "AlwaysTrue()"

    def __str__(self) -> str:
        return "true"


class AlwaysFalse(Expression):
    """The expression that no row satisfies."""

    __slots__ = ()
    _instance: "AlwaysFalse | None" = None

    def __new__(cls) -> "AlwaysFalse":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def negate(self) -> Expression:
        return ALWAYS_TRUE

    def __repr__(self) -> str:
        return "AlwaysFalse()"

    def __str__(self) -> str:
        return "false"


ALWAYS_TRUE = AlwaysTrue()
ALWAYS_FALSE = AlwaysFalse()


@dataclass(frozen=True, slots=True)
class And(Expression):
    """Both children hold.  Build with :func:`and_` to get simplification."""

    left: Expression
    right: Expression

    def negate(self) -> Expression:
        return or_(self.left.negate(), self.right.negate())

    def __str__(self) -> str:
        return f"({self.left} AND {self.right})"


@dataclass(frozen=True, slots=True)
class Or(Expression):
    """At least one child holds.  Build with :func:`or_` to get simplification."""

    left: Expression
    right: Expression

    def negate(self) -> Expression:
        return and_(self.left.negate(), self.right.negate())

    def __str__(self) -> str:
        return f"({self.left} OR {self.right})"


@dataclass(frozen=True, slots=True)
class Not(Expression):
    """The child does not hold.  Build with :func:`not_` to get simplification."""

    child: Expression

    def negate(self) -> Expression:
        return self.child

    def __str__(self) -> str:
        return f"NOT {self.child}"


def and_(*exprs: Expression) -> Expression:
    """AND of the expressions, folding ``true``/``false`` (``and_()`` is ``ALWAYS_TRUE``)."""
    result: Expression = ALWAYS_TRUE
    for e in exprs:
        if e is ALWAYS_FALSE or result is ALWAYS_FALSE:
            return ALWAYS_FALSE
        if e is ALWAYS_TRUE:
            continue
        result = e if result is ALWAYS_TRUE else And(result, e)
    return result


def or_(*exprs: Expression) -> Expression:
    """OR of the expressions, folding ``true``/``false`` (``or_()`` is ``ALWAYS_FALSE``)."""
    result: Expression = ALWAYS_FALSE
    for e in exprs:
        if e is ALWAYS_TRUE or result is ALWAYS_TRUE:
            return ALWAYS_TRUE
        if e is ALWAYS_FALSE:
            continue
        result = e if result is ALWAYS_FALSE else Or(result, e)
    return result


def not_(expr: Expression) -> Expression:
    """NOT of the expression, folding constants and double negation."""
    if expr is ALWAYS_TRUE:
        return ALWAYS_FALSE
    if expr is ALWAYS_FALSE:
        return ALWAYS_TRUE
    if isinstance(expr, Not):
        return expr.child
    return Not(expr)


# ------------------------------------------------------------------------------------ terms
@dataclass(frozen=True, slots=True)
class Reference:
    """An unbound reference to a column by its (dotted) name."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class BoundReference:
    """A column bound to a struct: field id, type, full name and the struct positions leading to it."""

    field_id: int
    name: str
    type: PrimitiveType
    positions: tuple[int, ...]
    required: bool = False

    def eval(self, row: Any) -> Any:
        """The value of this column in a struct tuple (None when any enclosing struct is null)."""
        for pos in self.positions:
            if row is None:
                return None
            row = row[pos]
        return row

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class UnboundTransform:
    """A partition transform applied to a column, as a predicate's term (Java's ``UnboundTransform``):
    ``bucket[4](id) = 1`` is what Spark's ``system.bucket(4, id) = 1`` becomes."""

    ref: Reference
    transform: Transform

    @property
    def name(self) -> str:
        """The source column's name."""
        return self.ref.name

    def __str__(self) -> str:
        return f"{self.transform}({self.ref.name})"


@dataclass(frozen=True, slots=True)
class BoundTransform:
    """A transform bound to its source column (Java's ``BoundTransform``).

    ``field_id``, ``name``, ``positions`` and ``required`` are the source column's, so projection
    finds the partition fields of that column; ``type`` is the transform's result type, which the
    predicate's literals were converted to.  Metrics evaluators must not read bounds through it: the
    bounds are of the source values, not of the transformed ones.
    """

    ref: BoundReference
    transform: Transform
    type: PrimitiveType

    @property
    def field_id(self) -> int:
        """The source column's field id."""
        return self.ref.field_id

    @property
    def name(self) -> str:
        """The source column's full name."""
        return self.ref.name

    @property
    def positions(self) -> tuple[int, ...]:
        """The struct positions of the source column."""
        return self.ref.positions

    @property
    def required(self) -> bool:
        """Whether the transformed value is never null (a required source; void gives nulls)."""
        return self.ref.required and not self.transform.is_void

    def eval(self, row: Any) -> Any:
        """The transformed value of the source column in a struct tuple."""
        return self.transform.apply(self.ref.eval(row), self.ref.type)

    def __str__(self) -> str:
        return f"{self.transform}({self.ref.name})"


# ------------------------------------------------------------------------------------ predicates
@dataclass(frozen=True, slots=True)
class UnboundPredicate(Expression):
    """A predicate on a column name (or a transform of one); ``literals`` holds one literal,
    several for IN/NOT IN, or none."""

    op: Operation
    term: Reference | UnboundTransform
    literals: tuple[Literal, ...] = ()

    @property
    def literal(self) -> Literal:
        """The single literal of a comparison."""
        return self.literals[0]

    def negate(self) -> Expression:
        return UnboundPredicate(self.op.negate(), self.term, self.literals)

    def __str__(self) -> str:
        return _predicate_str(self.op, str(self.term), [lt_.value for lt_ in self.literals])


@dataclass(frozen=True, slots=True)
class BoundPredicate(Expression):
    """A predicate bound to a field; ``literal`` for comparisons, ``literal_set`` for IN/NOT IN."""

    op: Operation
    term: BoundReference | BoundTransform
    literal: Literal | None = None
    literal_set: frozenset | None = None

    @property
    def ref(self) -> BoundReference:
        """The bound column (the source column of a transform term)."""
        return self.term.ref if isinstance(self.term, BoundTransform) else self.term

    def negate(self) -> Expression:
        return BoundPredicate(self.op.negate(), self.term, self.literal, self.literal_set)

    def __str__(self) -> str:
        values = sorted(self.literal_set, key=repr) if self.literal_set is not None else (
            [] if self.literal is None else [self.literal.value])
        ref = f"ref(id={self.term.field_id}, name={self.term.name})"
        if isinstance(self.term, BoundTransform):
            ref = f"{self.term.transform}({ref})"
        return _predicate_str(self.op, ref, values)


def _predicate_str(op: Operation, term: str, values: list[Any]) -> str:
    if op in _SYMBOL:
        return f"{term} {_SYMBOL[op]} {values[0]!r}"
    if op.is_set:
        word = "IN" if op is Operation.IN else "NOT IN"
        return f"{term} {word} ({', '.join(repr(v) for v in values)})"
    if op.is_unary:
        return f"{op.value}({term})"
    return f"{op.value}({term}, {values[0]!r})"


def predicate(op: Operation, name: str | UnboundTransform, *values: Any) -> Expression:
    """An unbound predicate of any operation on the column ``name`` (or on a transform of a column,
    as :func:`transform_term` builds)."""
    term = name if isinstance(name, UnboundTransform) else Reference(name)
    if op.is_unary:
        if values:
            raise ExpressionError(f"{op.value} takes no value, got {values!r}")
        return UnboundPredicate(op, term)
    if op.is_set:
        lits: list[Literal] = []
        for v in values:
            literal = lit(v)
            if literal not in lits:
                lits.append(literal)
        return UnboundPredicate(op, term, tuple(lits))
    if op in (Operation.TRUE, Operation.FALSE, Operation.NOT, Operation.AND, Operation.OR):
        raise ExpressionError(f"{op.value} is not a predicate operation")
    if len(values) != 1:
        raise ExpressionError(f"{op.value} takes exactly one value, got {len(values)}")
    return UnboundPredicate(op, term, (lit(values[0]),))


def transform_term(transform: Transform, name: str) -> UnboundTransform:
    """The term ``transform(name)`` for :func:`predicate` (Java's ``Expressions.bucket(name, n)``,
    ``Expressions.year(name)`` ...)."""
    return UnboundTransform(Reference(name), transform)


def eq(name: str, value: Any) -> Expression:
    """``name = value``."""
    return predicate(Operation.EQ, name, value)


def not_eq(name: str, value: Any) -> Expression:
    """``name != value`` (true for null values, as the negation of ``eq``)."""
    return predicate(Operation.NOT_EQ, name, value)


def lt(name: str, value: Any) -> Expression:
    """``name < value``."""
    return predicate(Operation.LT, name, value)


def lt_eq(name: str, value: Any) -> Expression:
    """``name <= value``."""
    return predicate(Operation.LT_EQ, name, value)


def gt(name: str, value: Any) -> Expression:
    """``name > value``."""
    return predicate(Operation.GT, name, value)


def gt_eq(name: str, value: Any) -> Expression:
    """``name >= value``."""
    return predicate(Operation.GT_EQ, name, value)


def in_(name: str, values: Iterable[Any]) -> Expression:
    """``name IN (values)``; an empty list is ``ALWAYS_FALSE``."""
    values = list(values)
    if not values:
        return ALWAYS_FALSE
    return predicate(Operation.IN, name, *values)


def not_in(name: str, values: Iterable[Any]) -> Expression:
    """``name NOT IN (values)``; an empty list is ``ALWAYS_TRUE``."""
    values = list(values)
    if not values:
        return ALWAYS_TRUE
    return predicate(Operation.NOT_IN, name, *values)


def is_null(name: str) -> Expression:
    """``name IS NULL``."""
    return predicate(Operation.IS_NULL, name)


def not_null(name: str) -> Expression:
    """``name IS NOT NULL``."""
    return predicate(Operation.NOT_NULL, name)


def is_nan(name: str) -> Expression:
    """``isnan(name)`` (float/double columns only)."""
    return predicate(Operation.IS_NAN, name)


def not_nan(name: str) -> Expression:
    """``NOT isnan(name)``."""
    return predicate(Operation.NOT_NAN, name)


#: predicates that no null value satisfies, and that rule out a file whose column is all null
#: (every evaluator tests that before the bounds), as ``IS NOT NULL`` does
_NULL_REJECTING = frozenset({Operation.LT, Operation.LT_EQ, Operation.GT, Operation.GT_EQ, Operation.EQ,
                             Operation.IN, Operation.STARTS_WITH})


def without_implied_not_null(conjuncts: Iterable[Expression]) -> list[Expression]:
    """The conjuncts of an AND less each ``x IS NOT NULL`` that another conjunct implies: a
    comparison, IN or STARTS WITH on the same column ``x`` holds for no null value.  The AND means
    the same and prunes the same files, at one test less per file.  Spark's optimizer adds such a
    NOT NULL beside every comparison it pushes to a data source."""
    items = list(conjuncts)
    rejected = {e.term.name for e in items
                if isinstance(e, UnboundPredicate) and isinstance(e.term, Reference) and e.op in _NULL_REJECTING}
    return [e for e in items
            if not (isinstance(e, UnboundPredicate) and e.op is Operation.NOT_NULL
                    and isinstance(e.term, Reference) and e.term.name in rejected)]


def starts_with(name: str, prefix: str) -> Expression:
    """``name LIKE 'prefix%'`` (string columns only)."""
    return predicate(Operation.STARTS_WITH, name, prefix)


def not_starts_with(name: str, prefix: str) -> Expression:
    """``name NOT LIKE 'prefix%'``."""
    return predicate(Operation.NOT_STARTS_WITH, name, prefix)


# ------------------------------------------------------------------------------------ binding
def _positions(struct: StructType, field_id: int) -> tuple[int, ...] | None:
    for i, f in enumerate(struct.fields):
        if f.field_id == field_id:
            return (i,)
        if isinstance(f.field_type, StructType):
            inner = _positions(f.field_type, field_id)
            if inner is not None:
                return (i,) + inner
    return None


class _Binder:
    def __init__(self, struct: Schema | StructType, case_sensitive: bool) -> None:
        self.schema = struct if isinstance(struct, Schema) else Schema(struct.fields)
        self.struct = self.schema.as_struct()
        self.case_sensitive = case_sensitive

    def bind(self, expr: Expression) -> Expression:
        if expr is ALWAYS_TRUE or expr is ALWAYS_FALSE or isinstance(expr, BoundPredicate):
            return expr
        if isinstance(expr, And):
            return and_(self.bind(expr.left), self.bind(expr.right))
        if isinstance(expr, Or):
            return or_(self.bind(expr.left), self.bind(expr.right))
        if isinstance(expr, Not):
            return not_(self.bind(expr.child))
        if isinstance(expr, UnboundPredicate):
            return self.bind_predicate(expr)
        raise ExpressionError(f"Cannot bind unknown expression {expr!r}")

    def reference(self, name: str) -> BoundReference:
        field = self.schema.find_field_or_none(name, self.case_sensitive)
        if field is None:
            raise ExpressionError(f"Cannot find field '{name}' in struct: {self.struct}")
        positions = _positions(self.struct, field.field_id)
        full = self.schema.find_column_name(field.field_id) or name
        if positions is None:
            raise ExpressionError(
                f"Cannot filter by column '{full}': fields inside lists and maps cannot be used in filters"
            )
        if not isinstance(field.field_type, PrimitiveType):
            raise ExpressionError(f"Cannot filter by column '{full}' of nested type {field.field_type}")
        # A field is only never-null when every struct that encloses it is required as well.
        required = all(self._field_at(positions[: i + 1]).required for i in range(len(positions)))
        return BoundReference(field.field_id, full, field.field_type, positions, required)

    def _field_at(self, positions: tuple[int, ...]) -> Any:
        struct: Any = self.struct
        f = None
        for p in positions:
            f = struct.fields[p]
            struct = f.field_type
        return f

    def term(self, term: Reference | UnboundTransform) -> BoundReference | BoundTransform:
        ref = self.reference(term.name)
        if isinstance(term, Reference):
            return ref
        transform = term.transform
        if not transform.can_transform(ref.type):
            # as Java's UnboundTransform.bind
            raise ExpressionError(f"Cannot bind: {transform} cannot transform {ref.type} values from '{ref.name}'")
        result = transform.result_type(ref.type)
        assert isinstance(result, PrimitiveType)
        return BoundTransform(ref, transform, result)

    def bind_predicate(self, pred: UnboundPredicate) -> Expression:
        ref = self.term(pred.term)
        op, t = pred.op, ref.type
        if op is Operation.IS_NULL:
            return ALWAYS_FALSE if ref.required else BoundPredicate(op, ref)
        if op is Operation.NOT_NULL:
            return ALWAYS_TRUE if ref.required else BoundPredicate(op, ref)
        if op in (Operation.IS_NAN, Operation.NOT_NAN):
            if not isinstance(t, (FloatType, DoubleType)):
                raise ExpressionError(
                    f"{op.value} cannot be used with non-floating-point column '{ref.name}' of type {t}"
                )
            return BoundPredicate(op, ref)
        if op in (Operation.STARTS_WITH, Operation.NOT_STARTS_WITH) and not isinstance(t, StringType):
            raise ExpressionError(f"{op.value} requires a string column, but '{ref.name}' is {t}")
        try:
            converted = [lt_.to(t) for lt_ in pred.literals]
        except ExpressionError as e:
            raise ExpressionError(f"Cannot bind '{pred}' to column '{ref.name}': {e}") from None
        if op.is_set:
            values = {c.value for c in converted if isinstance(c, Literal)}
            if not values:
                return ALWAYS_FALSE if op is Operation.IN else ALWAYS_TRUE
            if len(values) == 1:
                single = Operation.EQ if op is Operation.IN else Operation.NOT_EQ
                return BoundPredicate(single, ref, Literal(next(iter(values)), t))
            return BoundPredicate(op, ref, None, frozenset(values))
        c = converted[0]
        if c is ABOVE_MAX:
            return ALWAYS_TRUE if op in (Operation.LT, Operation.LT_EQ, Operation.NOT_EQ) else ALWAYS_FALSE
        if c is BELOW_MIN:
            return ALWAYS_TRUE if op in (Operation.GT, Operation.GT_EQ, Operation.NOT_EQ) else ALWAYS_FALSE
        return BoundPredicate(op, ref, c)


def bind(expr: Expression, struct: Schema | StructType, case_sensitive: bool = True) -> Expression:
    """Bind every predicate of ``expr`` to ``struct``: resolve names to field ids and accessors and
    convert literals to the column types.

    Predicates that are decided by the types fold to constants (``IS NULL`` on a required column,
    literals beyond the type's range).  Raises :class:`ExpressionError` naming the unknown column or
    the literal that does not convert.
    """
    return _Binder(struct, case_sensitive).bind(expr)


# ------------------------------------------------------------------------------------ rewriting
def rewrite_not(expr: Expression) -> Expression:
    """An equivalent expression without ``Not`` nodes: negations are pushed into the predicates."""
    if isinstance(expr, Not):
        return rewrite_not(expr.child.negate())
    if isinstance(expr, And):
        return and_(rewrite_not(expr.left), rewrite_not(expr.right))
    if isinstance(expr, Or):
        return or_(rewrite_not(expr.left), rewrite_not(expr.right))
    return expr


def _predicates(expr: Expression) -> Iterable[Expression]:
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, (And, Or)):
            stack.extend((e.right, e.left))
        elif isinstance(e, Not):
            stack.append(e.child)
        elif isinstance(e, (BoundPredicate, UnboundPredicate)):
            yield e


def referenced_field_ids(expr: Expression) -> set[int]:
    """Field ids of every bound predicate in ``expr``."""
    return {p.term.field_id for p in _predicates(expr) if isinstance(p, BoundPredicate)}


def has_transform_terms(expr: Expression) -> bool:
    """Whether some predicate of ``expr`` is on a transform of a column (``bucket[4](id) = 1``)."""
    return any(isinstance(p.term, (UnboundTransform, BoundTransform)) for p in _predicates(expr))


def referenced_names(expr: Expression) -> set[str]:
    """Column names of every unbound predicate in ``expr``."""
    return {p.term.name for p in _predicates(expr) if isinstance(p, UnboundPredicate)}


# ------------------------------------------------------------------------------------ visiting
class BoundExpressionVisitor:
    """Callbacks for :func:`visit` over a bound expression; override the ones you need."""

    def always_true(self) -> Any:
        """Result for ``ALWAYS_TRUE``."""
        raise NotImplementedError

    def always_false(self) -> Any:
        """Result for ``ALWAYS_FALSE``."""
        raise NotImplementedError

    def not_(self, result: Any) -> Any:
        """Combine the child result of a Not."""
        raise NotImplementedError

    def and_(self, left: Any, right: Any) -> Any:
        """Combine the child results of an And."""
        raise NotImplementedError

    def or_(self, left: Any, right: Any) -> Any:
        """Combine the child results of an Or."""
        raise NotImplementedError

    def predicate(self, pred: BoundPredicate) -> Any:
        """Dispatch a bound predicate to the per-operation callback (a transform term first goes
        through :meth:`transform_predicate`)."""
        if isinstance(pred.term, BoundTransform):
            return self.transform_predicate(pred)
        return self.dispatch(pred)

    def transform_predicate(self, pred: BoundPredicate) -> Any:
        """Result for a predicate on a transform term (``bucket[4](id) = 1``).  By default the
        per-operation callbacks, whose ``ref.eval`` then yields the transformed value; visitors
        that read column statistics override it (Java's ``handleNonReference``)."""
        return self.dispatch(pred)

    def dispatch(self, pred: BoundPredicate) -> Any:
        """Call the per-operation callback of ``pred`` with its term and literal(s)."""
        op, ref = pred.op, pred.term
        if op.is_unary:
            return getattr(self, op.name.lower())(ref)
        if op.is_set:
            return (self.in_ if op is Operation.IN else self.not_in)(ref, pred.literal_set)
        assert pred.literal is not None
        return getattr(self, op.name.lower())(ref, pred.literal.value)

    def is_null(self, ref: BoundReference) -> Any: raise NotImplementedError  # noqa: D102,E704
    def not_null(self, ref: BoundReference) -> Any: raise NotImplementedError  # noqa: D102,E704
    def is_nan(self, ref: BoundReference) -> Any: raise NotImplementedError  # noqa: D102,E704
    def not_nan(self, ref: BoundReference) -> Any: raise NotImplementedError  # noqa: D102,E704
    def lt(self, ref: BoundReference, value: Any) -> Any: raise NotImplementedError  # noqa: D102,E704
    def lt_eq(self, ref: BoundReference, value: Any) -> Any: raise NotImplementedError  # noqa: D102,E704
    def gt(self, ref: BoundReference, value: Any) -> Any: raise NotImplementedError  # noqa: D102,E704
    def gt_eq(self, ref: BoundReference, value: Any) -> Any: raise NotImplementedError  # noqa: D102,E704
    def eq(self, ref: BoundReference, value: Any) -> Any: raise NotImplementedError  # noqa: D102,E704
    def not_eq(self, ref: BoundReference, value: Any) -> Any: raise NotImplementedError  # noqa: D102,E704
    def in_(self, ref: BoundReference, values: frozenset) -> Any: raise NotImplementedError  # noqa: D102,E704
    def not_in(self, ref: BoundReference, values: frozenset) -> Any: raise NotImplementedError  # noqa: D102,E704
    def starts_with(self, ref: BoundReference, value: str) -> Any: raise NotImplementedError  # noqa: D102,E704
    def not_starts_with(self, ref: BoundReference, value: str) -> Any: raise NotImplementedError  # noqa: D102,E704


def visit(expr: Expression, visitor: BoundExpressionVisitor) -> Any:
    """Walk a bound expression bottom-up, calling ``visitor`` for each node."""
    if expr is ALWAYS_TRUE:
        return visitor.always_true()
    if expr is ALWAYS_FALSE:
        return visitor.always_false()
    if isinstance(expr, Not):
        return visitor.not_(visit(expr.child, visitor))
    if isinstance(expr, And):
        return visitor.and_(visit(expr.left, visitor), visit(expr.right, visitor))
    if isinstance(expr, Or):
        return visitor.or_(visit(expr.left, visitor), visit(expr.right, visitor))
    if isinstance(expr, BoundPredicate):
        return visitor.predicate(expr)
    if isinstance(expr, UnboundPredicate):
        raise ExpressionError(f"Cannot evaluate unbound predicate {expr}: bind it first")
    raise ExpressionError(f"Cannot visit unknown expression {expr!r}")
