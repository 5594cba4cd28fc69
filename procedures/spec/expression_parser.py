"""Parse Spark-SQL-style filter text into unbound Iceberg expressions.

Iceberg's procedures take a ``where`` string that Spark parses, optimizes and converts into an
Iceberg expression (``SparkExpressionConverter``).  This module covers the subset that survives that
conversion: comparisons, ``IN``, ``IS [NOT] NULL``, ``isnan``, prefix ``LIKE``, ``BETWEEN`` and the
boolean connectives, with Spark's literal syntax.  Iceberg's system functions
(``[catalog.]system.bucket(4, id)``, ``system.truncate(4, data)``, ``system.years/months/days/hours(ts)``)
become transform terms, as Spark's ``SparkV2Filters`` converts them.  Comparisons with ``NULL`` fold to false (as
Spark's optimizer does) and comparisons between two literals are folded.

The result is unbound: bind it to a schema with :func:`procedures.spec.expressions.bind`.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable

from procedures.errors import ExpressionError, ValidationError
from procedures.spec.expressions import (
    ALWAYS_FALSE,
    ALWAYS_TRUE,
    Expression,
    Literal,
    Operation,
    UnboundTransform,
    and_,
    is_nan,
    is_null,
    lit,
    not_,
    not_null,
    or_,
    parse_date_days,
    parse_timestamp_micros,
    predicate,
    transform_term,
)
from procedures.spec.transforms import DAY, HOUR, MONTH, YEAR, BucketTransform, TruncateTransform
from procedures.spec.types import BINARY, DATE, DOUBLE, FLOAT, INT, LONG, TIMESTAMP, TIMESTAMPTZ

__all__ = ["parse_filter"]

_KEYWORDS = {
    "AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE", "LIKE", "BETWEEN",
    "TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "DATE",
}
_COMPARISONS = {
    "=": Operation.EQ, "==": Operation.EQ, "<=>": Operation.EQ,
    "!=": Operation.NOT_EQ, "<>": Operation.NOT_EQ,
    "<": Operation.LT, "<=": Operation.LT_EQ, ">": Operation.GT, ">=": Operation.GT_EQ,
}
_PY_COMPARE: dict[Operation, Callable[[Any, Any], bool]] = {
    Operation.EQ: operator.eq, Operation.NOT_EQ: operator.ne, Operation.LT: operator.lt,
    Operation.LT_EQ: operator.le, Operation.GT: operator.gt, Operation.GT_EQ: operator.ge,
}
_SYMBOLS = ("<=>", "==", "!=", "<>", "<=", ">=", "=", "<", ">", "(", ")", ",", ".", "-", "+", "!")
_ESCAPES = {"'": "'", '"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b",
            "%": "\\%", "_": "\\_"}


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # ident, qident, string, number, op, eof
    text: str  # source text (for errors)
    value: Any  # identifier name, unescaped string, number text, operator
    pos: int

    def is_kw(self, *words: str) -> bool:
        return self.kind == "ident" and self.value.upper() in words

    def describe(self) -> str:
        return "end of input" if self.kind == "eof" else f"'{self.text}'"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = self._tokenize()
        self.i = 0

    # -------------------------------------------------------------------------------- errors
    def error(self, expected: str, token: _Token | None = None) -> ExpressionError:
        token = token or self.peek()
        return ExpressionError(
            f"Cannot parse filter '{self.text}': {expected} at position {token.pos}, found {token.describe()}"
        )

    # -------------------------------------------------------------------------------- lexing
    def _tokenize(self) -> list[_Token]:
        text, n, i = self.text, len(self.text), 0
        out: list[_Token] = []
        while i < n:
            c = text[i]
            if c.isspace():
                i += 1
                continue
            start = i
            if c in "'\"":
                value, i = self._string(i)
                out.append(_Token("string", text[start:i], value, start))
            elif c == "`":
                j, parts = i + 1, []
                while True:
                    if j >= n:
                        raise ExpressionError(
                            f"Cannot parse filter '{text}': unterminated quoted identifier at position {start}"
                        )
                    if text[j] == "`":
                        if j + 1 < n and text[j + 1] == "`":
                            parts.append("`")
                            j += 2
                            continue
                        break
                    parts.append(text[j])
                    j += 1
                i = j + 1
                out.append(_Token("qident", text[start:i], "".join(parts), start))
            elif c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()
                                 and not (out and out[-1].kind in ("ident", "qident"))):
                i = self._number_end(i)
                out.append(_Token("number", text[start:i], text[start:i], start))
            elif c.isalpha() or c == "_":
                while i < n and (text[i].isalnum() or text[i] == "_"):
                    i += 1
                word = text[start:i]
                # X'0a1b' is a binary literal
                if word.upper() == "X" and i < n and text[i] == "'":
                    value, i = self._string(i)
                    out.append(_Token("binary", text[start:i], value, start))
                else:
                    out.append(_Token("ident", word, word, start))
            else:
                sym = next((s for s in _SYMBOLS if text.startswith(s, i)), None)
                if sym is None:
                    raise ExpressionError(
                        f"Cannot parse filter '{text}': unexpected character at position {i}, found '{c}'"
                    )
                i += len(sym)
                out.append(_Token("op", sym, sym, start))
        out.append(_Token("eof", "", None, n))
        return out

    def _string(self, i: int) -> tuple[str, int]:
        text, quote, start = self.text, self.text[i], i
        i += 1
        parts: list[str] = []
        while True:
            if i >= len(text):
                raise ExpressionError(f"Cannot parse filter '{text}': unterminated string at position {start}")
            c = text[i]
            if c == quote:
                if i + 1 < len(text) and text[i + 1] == quote:
                    parts.append(quote)
                    i += 2
                    continue
                return "".join(parts), i + 1
            if c == "\\" and i + 1 < len(text):
                nxt = text[i + 1]
                parts.append(_ESCAPES.get(nxt, nxt))
                i += 2
                continue
            parts.append(c)
            i += 1

    def _number_end(self, i: int) -> int:
        text, n = self.text, len(self.text)
        while i < n and text[i].isdigit():
            i += 1
        if i < n and text[i] == ".":
            i += 1
            while i < n and text[i].isdigit():
                i += 1
        if i < n and text[i] in "eE":
            j = i + 1
            if j < n and text[j] in "+-":
                j += 1
            if j < n and text[j].isdigit():
                i = j
                while i < n and text[i].isdigit():
                    i += 1
        if text[i:i + 2].upper() == "BD":
            i += 2
        elif i < n and text[i].upper() in "LSYDF":
            i += 1
        if i < n and (text[i].isalnum() or text[i] == "_"):
            raise ExpressionError(
                f"Cannot parse filter '{text}': malformed number at position {i}, found '{text[i]}'"
            )
        return i

    # -------------------------------------------------------------------------------- cursor
    def peek(self, k: int = 0) -> _Token:
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    def advance(self) -> _Token:
        t = self.peek()
        self.i += 1
        return t

    def accept_op(self, *ops: str) -> _Token | None:
        t = self.peek()
        if t.kind == "op" and t.value in ops:
            self.i += 1
            return t
        return None

    def accept_kw(self, *words: str) -> _Token | None:
        t = self.peek()
        if t.is_kw(*words):
            self.i += 1
            return t
        return None

    def expect_op(self, op: str, what: str) -> _Token:
        t = self.accept_op(op)
        if t is None:
            raise self.error(what)
        return t

    # -------------------------------------------------------------------------------- grammar
    def parse(self) -> Expression:
        if self.peek().kind == "eof":
            raise self.error("expected a filter expression")
        expr = self.parse_or()
        if self.peek().kind != "eof":
            raise self.error("expected AND, OR or end of input")
        return expr

    def parse_or(self) -> Expression:
        expr = self.parse_and()
        while self.accept_kw("OR"):
            expr = or_(expr, self.parse_and())
        return expr

    def parse_and(self) -> Expression:
        expr = self.parse_not()
        while self.accept_kw("AND"):
            expr = and_(expr, self.parse_not())
        return expr

    def parse_not(self) -> Expression:
        if self.accept_kw("NOT") or self.accept_op("!"):
            return not_(self.parse_not())
        return self.parse_predicate()

    def parse_predicate(self) -> Expression:
        start = self.peek()
        if self.accept_op("("):
            expr = self.parse_or()
            self.expect_op(")", "expected ')'")
            return expr
        func = self.parse_function()
        if func is not None:
            return func
        left = self.parse_operand("expected a column or a value")
        t = self.peek()
        if t.kind == "op" and t.value in _COMPARISONS:
            self.advance()
            right = self.parse_operand("expected a value")
            return self.comparison(t, left, right)
        if self.accept_kw("IS"):
            negated = self.accept_kw("NOT") is not None
            if not self.accept_kw("NULL"):
                raise self.error("expected NULL")
            return self.null_check(left, start, negated)
        negated = False
        if t.is_kw("NOT") and self.peek(1).is_kw("IN", "LIKE", "BETWEEN"):
            self.advance()
            negated = True
        if self.accept_kw("IN"):
            return self.in_list(left, start, negated)
        if self.accept_kw("LIKE"):
            return self.like(left, start, negated)
        if self.accept_kw("BETWEEN"):
            low = self.parse_operand("expected a value")
            if not self.accept_kw("AND"):
                raise self.error("expected AND")
            high = self.parse_operand("expected a value")
            lo_t = _Token("op", ">=", ">=", start.pos)
            hi_t = _Token("op", "<=", "<=", start.pos)
            expr = and_(self.comparison(lo_t, left, low), self.comparison(hi_t, left, high))
            return not_(expr) if negated else expr
        nxt = self.peek()
        ends = nxt.kind == "eof" or nxt.is_kw("AND", "OR") or (nxt.kind == "op" and nxt.value == ")")
        if not ends:
            raise self.error("expected a comparison operator")
        if isinstance(left, str):
            # a bare boolean column, as in `where => 'active'`
            return predicate(Operation.EQ, left, True)
        if isinstance(left, Literal) and isinstance(left.value, bool):
            return ALWAYS_TRUE if left.value else ALWAYS_FALSE
        if left is None:
            return ALWAYS_FALSE
        raise self.error("expected a comparison operator", nxt)

    def parse_function(self) -> Expression | None:
        t = self.peek()
        if t.kind != "ident" or self.peek(1).kind != "op" or self.peek(1).value != "(":
            return None
        name = t.value.lower()
        builders = {"isnan": is_nan, "isnull": is_null, "isnotnull": not_null}
        if name not in builders:
            if t.value.upper() in _KEYWORDS:
                return None
            hint = f" (Iceberg's function is system.{name})" if name in _SYSTEM_FUNCTIONS else ""
            raise self.error(f"function '{t.value}' cannot be converted to an Iceberg filter{hint}", t)
        self.advance()
        self.advance()
        column = self.parse_operand("expected a column")
        if not _is_term(column):
            raise self.error("expected a column", t)
        self.expect_op(")", "expected ')'")
        return builders[name](column)

    def parse_operand(self, expected: str) -> str | Literal | None:
        """A column name (str), a literal, or None for NULL."""
        t = self.peek()
        if t.kind in ("ident", "qident") and not (t.kind == "ident" and t.value.upper() in _KEYWORDS):
            self.advance()
            parts = [t.value]
            while self.accept_op("."):
                nxt = self.peek()
                if nxt.kind not in ("ident", "qident"):
                    raise self.error("expected a field name after '.'")
                parts.append(self.advance().value)
            if self.peek().kind == "op" and self.peek().value == "(":
                return self.system_function(parts, t)
            return ".".join(parts)
        value = self.parse_literal()
        if value is _NO_VALUE:
            raise self.error(expected)
        return value

    def system_function(self, parts: list[str], start: _Token) -> UnboundTransform:
        """An Iceberg system function call, ``[catalog.]system.bucket(4, id)``, as the transform term
        Spark's ``SparkV2Filters`` hands Iceberg (``bucket[4](id)``); the cursor is on its '('."""
        name = ".".join(parts)
        fn = parts[-1].lower()
        if len(parts) not in (2, 3) or parts[-2].lower() != "system" or fn not in _SYSTEM_FUNCTIONS:
            raise self.error(
                f"function '{name}' cannot be converted to an Iceberg filter (Iceberg's system functions "
                f"are {', '.join('system.' + f for f in _SYSTEM_FUNCTIONS)})", start)
        self.advance()
        args: list[Any] = []
        if not self.accept_op(")"):
            args.append(self.parse_operand("expected a function argument"))
            while self.accept_op(","):
                args.append(self.parse_operand("expected a function argument"))
            self.expect_op(")", "expected ',' or ')'")
        width_arg = fn in ("bucket", "truncate")
        usage = f"{name}({'width, ' if width_arg else ''}column)"
        if len(args) != (2 if width_arg else 1):
            raise self.error(f"{name} takes {2 if width_arg else 1} argument(s): {usage}", start)
        column = args[-1]
        if not isinstance(column, str):
            raise self.error(f"the last argument of {name} must be a column: {usage}", start)
        if not width_arg:
            return transform_term(_SYSTEM_FUNCTIONS[fn], column)
        width = args[0]
        if not (isinstance(width, Literal) and width.type == INT):
            raise self.error(f"the first argument of {name} must be an integer literal: {usage}", start)
        try:
            transform = BucketTransform(width.value) if fn == "bucket" else TruncateTransform(width.value)
        except ValidationError as e:
            raise self.error(f"invalid {name} width {width.value} ({e})", start) from None
        return transform_term(transform, column)

    def parse_literal(self) -> Any:
        t = self.peek()
        if t.kind == "string":
            self.advance()
            return lit(t.value)
        if t.kind == "binary":
            self.advance()
            try:
                return Literal(bytes.fromhex(t.value), BINARY)
            except ValueError:
                raise self.error("invalid binary literal", t) from None
        if t.kind == "number":
            self.advance()
            return self.number(t, 1)
        if t.kind == "op" and t.value in ("-", "+"):
            nxt = self.peek(1)
            if nxt.kind == "number":
                self.advance()
                self.advance()
                return self.number(nxt, -1 if t.value == "-" else 1)
            return _NO_VALUE
        if t.kind != "ident":
            return _NO_VALUE
        word = t.value.upper()
        if word == "NULL":
            self.advance()
            return None
        if word in ("TRUE", "FALSE"):
            self.advance()
            return lit(word == "TRUE")
        # date('2023-01-01') and timestamp('...') are casts Spark folds to the typed literals
        call = (word in ("DATE", "TIMESTAMP") and self.peek(1).kind == "op" and self.peek(1).value == "("
                and self.peek(2).kind == "string" and self.peek(3).kind == "op" and self.peek(3).value == ")")
        if call or (word in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ") and self.peek(1).kind == "string"):
            self.advance()
            if call:
                self.advance()
            s = self.advance()
            if call:
                self.advance()
            try:
                if word == "DATE":
                    return Literal(parse_date_days(s.value), DATE)
                micros, has_offset = parse_timestamp_micros(s.value)
            except ValueError:
                raise self.error(f"invalid {word} literal", s) from None
            if word == "TIMESTAMP_NTZ" and has_offset:
                raise self.error("TIMESTAMP_NTZ literal cannot have a zone offset", s)
            return Literal(micros, TIMESTAMPTZ if has_offset else TIMESTAMP)
        return _NO_VALUE

    def number(self, t: _Token, sign: int) -> Literal:
        text = t.value
        upper = text.upper()
        try:
            if upper.endswith("BD"):
                return lit(Decimal(text[:-2]) * sign)
            suffix = upper[-1]
            if suffix in "LSY":
                return Literal(int(text[:-1]) * sign, LONG if suffix == "L" else INT)
            if suffix == "D":
                return Literal(float(text[:-1]) * sign, DOUBLE)
            if suffix == "F":
                return Literal(float(text[:-1]) * sign, FLOAT)
            if "E" in upper:
                value = float(text) * sign
                if math.isinf(value):
                    raise ValueError("out of range")
                return Literal(value, DOUBLE)
            if "." in text:
                return lit(Decimal(text) * sign)
            return lit(int(text) * sign)
        except (ValueError, ArithmeticError):
            raise self.error("invalid number", t) from None

    # -------------------------------------------------------------------------------- builders
    def comparison(self, op_token: _Token, left: Any, right: Any) -> Expression:
        op = _COMPARISONS[op_token.value]
        null_safe = op_token.value == "<=>"
        if _is_term(left) and _is_term(right):
            raise self.error("comparisons between two columns cannot be converted to an Iceberg filter", op_token)
        if not _is_term(left) and _is_term(right):
            left, right, op = right, left, op.flip()
        if _is_term(left):
            if right is None:
                # col <=> NULL is IS NULL; any other comparison with NULL is never true
                return is_null(left) if null_safe else ALWAYS_FALSE
            return predicate(op, left, right)
        if left is None or right is None:
            if null_safe:
                return ALWAYS_TRUE if left is None and right is None else ALWAYS_FALSE
            return ALWAYS_FALSE
        try:
            return ALWAYS_TRUE if _PY_COMPARE[op](left.value, right.value) else ALWAYS_FALSE
        except TypeError:
            raise self.error(f"cannot compare {left} with {right}", op_token) from None

    def null_check(self, operand: Any, start: _Token, negated: bool) -> Expression:
        if _is_term(operand):
            return not_null(operand) if negated else is_null(operand)
        is_null_value = operand is None
        return ALWAYS_TRUE if is_null_value != negated else ALWAYS_FALSE

    def in_list(self, left: Any, start: _Token, negated: bool) -> Expression:
        self.expect_op("(", "expected '('")
        values: list[Any] = [self.parse_operand("expected a value")]
        while self.accept_op(","):
            values.append(self.parse_operand("expected a value"))
        self.expect_op(")", "expected ',' or ')'")
        if any(_is_term(v) for v in values):
            raise self.error("IN lists must hold literals, not columns", start)
        if not _is_term(left):
            raise self.error("expected a column before IN", start)
        has_null = any(v is None for v in values)
        literals = [v for v in values if v is not None]
        if negated:
            # x NOT IN (..., NULL) is never true in SQL
            if has_null:
                return ALWAYS_FALSE
            return predicate(Operation.NOT_IN, left, *literals)
        if not literals:
            return ALWAYS_FALSE
        return predicate(Operation.IN, left, *literals)

    def like(self, left: Any, start: _Token, negated: bool) -> Expression:
        t = self.peek()
        if t.kind != "string":
            raise self.error("expected a string pattern")
        self.advance()
        if not _is_term(left):
            raise self.error("expected a column before LIKE", start)
        prefix, wildcard = _like_prefix(t.value)
        if prefix is None:
            raise self.error("only prefix patterns ('abc%') can be converted from LIKE", t)
        if wildcard:
            return predicate(Operation.NOT_STARTS_WITH if negated else Operation.STARTS_WITH, left, prefix)
        return predicate(Operation.NOT_EQ if negated else Operation.EQ, left, prefix)


_NO_VALUE = object()

#: Iceberg's Spark functions that SparkV2Filters turns into transform terms (by their names under
#: the catalog's ``system`` namespace); bucket and truncate take the width first
_SYSTEM_FUNCTIONS: dict[str, Any] = {
    "years": YEAR, "months": MONTH, "days": DAY, "hours": HOUR, "bucket": None, "truncate": None,
}


def _is_term(operand: Any) -> bool:
    """Whether a parsed operand is a column or a transform of one (not a literal or NULL)."""
    return isinstance(operand, (str, UnboundTransform))


def _like_prefix(pattern: str) -> tuple[str | None, bool]:
    """``(prefix, ends_with_wildcard)`` of a LIKE pattern; prefix None when it is not a prefix pattern."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            out.append(pattern[i + 1])
            i += 2
            continue
        if c == "%":
            rest = pattern[i:]
            return ("".join(out), True) if rest.strip("%") == "" else (None, True)
        if c == "_":
            return None, True
        out.append(c)
        i += 1
    return "".join(out), False


def parse_filter(text: str) -> Expression:
    """Parse a Spark-SQL filter such as ``id > 5 AND data LIKE 'a%'`` into an unbound expression.

    Keywords are case-insensitive; identifiers may be dotted (``s.x``) or backquoted.  Raises
    :class:`ExpressionError` naming the position and the offending token.
    """
    if not isinstance(text, str):
        raise ExpressionError(f"A filter must be a string, got {type(text).__name__}")
    return _Parser(text).parse()
