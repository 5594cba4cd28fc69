"""Typed literals of filter expressions and their conversion to column types.

Iceberg Java's ``Literals``: a literal keeps its value in the package's value representation (see
:mod:`procedures.spec.types`) with a type, and converts to the type of the column it is bound to.
A value beyond the target type's range converts to ``ABOVE_MAX`` or ``BELOW_MIN`` so binding can
fold the predicate; a conversion that does not exist raises :class:`ExpressionError`.
Strings convert the way Spark coerces them in filters (ISO dates, timestamps, decimals, uuids,
numbers, booleans).
"""

from __future__ import annotations

import math
import re
import struct as _struct
import uuid as _uuid
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from typing import Any

from procedures.errors import ExpressionError
from procedures.spec.types import (
    BINARY, BOOLEAN, DATE, DOUBLE, FLOAT, INT, LONG, STRING, TIME, TIMESTAMP, TIMESTAMPTZ, UUID,
    BinaryType, BooleanType, DateType, DecimalType, DoubleType, FixedType, FloatType, IcebergType,
    IntegerType, LongType, PrimitiveType, StringType, TimestampNanoType, TimestampType,
    TimestamptzNanoType, TimestamptzType, TimeType, UUIDType,
)

__all__ = ["Literal", "ABOVE_MAX", "BELOW_MIN", "lit", "parse_date_days", "parse_timestamp_micros"]


class _OutOfRange:
    """Marker for a literal beyond the range of the type it was converted to."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: result of converting a literal that is larger than every value of the target type
ABOVE_MAX = _OutOfRange("ABOVE_MAX")
#: result of converting a literal that is smaller than every value of the target type
BELOW_MIN = _OutOfRange("BELOW_MIN")

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_FLOAT_MAX = 3.4028234663852886e38
_EPOCH = datetime(1970, 1, 1)
_EPOCH_DATE = date(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class Literal:
    """A typed literal value in the package's value representation."""

    value: Any
    type: PrimitiveType

    def to(self, target: IcebergType) -> "Literal | _OutOfRange":
        """This literal converted to ``target``; ABOVE_MAX/BELOW_MIN when out of its range.

        Raises :class:`ExpressionError` naming value and type when no conversion exists.
        """
        if not isinstance(target, PrimitiveType):
            raise ExpressionError(f"Cannot compare a nested column of type {target} with literal {self.value!r}")
        if self.type == target:
            return self
        try:
            converted = _convert(self, target)
        except (ValueError, ArithmeticError, InvalidOperation) as e:
            raise ExpressionError(
                f"Invalid value for conversion to type {target}: {self.value!r} ({self.type}): {e}"
            ) from None
        if converted is None:
            raise ExpressionError(
                f"Invalid value for conversion to type {target}: {self.value!r} ({self.type})"
            )
        return converted

    def __str__(self) -> str:
        return repr(self.value) if isinstance(self.value, str) else str(self.value)


def lit(value: Any, type_: PrimitiveType | None = None) -> Literal:
    """A literal from a Python value; the type is inferred when not given.

    ``int`` -> int (long when beyond 32 bits), ``float`` -> double, ``str`` -> string,
    ``bool`` -> boolean, ``Decimal`` -> decimal(P, S), ``UUID`` -> uuid, ``bytes`` -> binary,
    ``date`` -> date, ``datetime`` -> timestamp (timestamptz when aware).
    """
    if isinstance(value, Literal):
        return value
    if value is None:
        raise ExpressionError("Cannot create a literal from null: use is_null or not_null")
    if isinstance(value, float) and math.isnan(value):
        raise ExpressionError("Invalid literal NaN: use is_nan or not_nan instead")
    if type_ is not None:
        return Literal(value, type_)
    if isinstance(value, bool):
        return Literal(value, BOOLEAN)
    if isinstance(value, int):
        return Literal(value, INT if _INT_MIN <= value <= _INT_MAX else LONG)
    if isinstance(value, float):
        return Literal(value, DOUBLE)
    if isinstance(value, str):
        return Literal(value, STRING)
    if isinstance(value, Decimal):
        sign, digits, exp = value.as_tuple()
        scale = max(-int(exp), 0)
        precision = max(len(digits), scale, 1)
        return Literal(value, DecimalType(min(precision, 38), scale))
    if isinstance(value, _uuid.UUID):
        return Literal(value, UUID)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Literal(bytes(value), BINARY)
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
            return Literal(_delta_micros(delta), TIMESTAMPTZ)
        return Literal(_delta_micros(value - _EPOCH), TIMESTAMP)
    if isinstance(value, date):
        return Literal((value - _EPOCH_DATE).days, DATE)
    raise ExpressionError(f"Cannot create a literal from {value!r} of Python type {type(value).__name__}")


def _delta_micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _int_range(value: int, lo: int, hi: int, make: Any) -> Any:
    if value > hi:
        return ABOVE_MAX
    if value < lo:
        return BELOW_MIN
    return make(value)


def _to_decimal(value: Decimal, target: DecimalType) -> Literal | _OutOfRange:
    quantum = Decimal(1).scaleb(-target.scale)
    scaled = value.quantize(quantum) if value.is_finite() else value
    if scaled != value:
        raise ValueError(f"the value does not fit scale {target.scale} without rounding")
    if abs(scaled.scaleb(target.scale)) >= 10**target.precision:
        return ABOVE_MAX if scaled > 0 else BELOW_MIN
    return Literal(scaled, target)


def _to_float32(value: float) -> Literal | _OutOfRange:
    if value > _FLOAT_MAX:
        return ABOVE_MAX
    if value < -_FLOAT_MAX:
        return BELOW_MIN
    # Java compares against the float value of the literal, so round to 32 bits here too.
    return Literal(_struct.unpack("<f", _struct.pack("<f", value))[0], FLOAT)


def _convert(source: Literal, target: PrimitiveType) -> Literal | _OutOfRange | None:
    v, s = source.value, source.type
    if isinstance(s, (IntegerType, LongType)):
        if isinstance(target, IntegerType):
            return _int_range(v, _INT_MIN, _INT_MAX, lambda x: Literal(x, INT))
        if isinstance(target, LongType):
            return _int_range(v, _LONG_MIN, _LONG_MAX, lambda x: Literal(x, LONG))
        if isinstance(target, FloatType):
            return _to_float32(float(v))
        if isinstance(target, DoubleType):
            return Literal(float(v), DOUBLE)
        if isinstance(target, DateType):
            return _int_range(v, _INT_MIN, _INT_MAX, lambda x: Literal(x, DATE))
        if isinstance(target, (TimeType, TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)):
            return _int_range(v, _LONG_MIN, _LONG_MAX, lambda x: Literal(x, target))
        if isinstance(target, DecimalType):
            return _to_decimal(Decimal(v), target)
        return None
    if isinstance(s, (FloatType, DoubleType)):
        if isinstance(target, FloatType):
            return _to_float32(v)
        if isinstance(target, DoubleType):
            return Literal(float(v), DOUBLE)
        if isinstance(target, DecimalType):
            return _to_decimal(Decimal(repr(v)), target)
        return None
    if isinstance(s, DecimalType):
        if isinstance(target, DecimalType):
            return _to_decimal(v, target)
        if isinstance(target, FloatType):
            return _to_float32(float(v))
        if isinstance(target, DoubleType):
            return Literal(float(v), DOUBLE)
        if isinstance(target, (IntegerType, LongType)) and v == v.to_integral_value():
            return _convert(Literal(int(v), LONG), target)
        return None
    if isinstance(s, StringType):
        return _from_string(v, target)
    if isinstance(s, DateType):
        if isinstance(target, (TimestampType, TimestamptzType)):
            return Literal(v * 86_400_000_000, target)
        if isinstance(target, (TimestampNanoType, TimestamptzNanoType)):
            return Literal(v * 86_400_000_000_000, target)
        return None
    if isinstance(s, (TimestampType, TimestamptzType)):
        if isinstance(target, (TimestampType, TimestamptzType)):
            return Literal(v, target)
        if isinstance(target, (TimestampNanoType, TimestamptzNanoType)):
            return Literal(v * 1000, target)
        if isinstance(target, DateType):
            return Literal(v // 86_400_000_000, DATE)
        return None
    if isinstance(s, (TimestampNanoType, TimestamptzNanoType)):
        if isinstance(target, (TimestampNanoType, TimestamptzNanoType)):
            return Literal(v, target)
        if isinstance(target, (TimestampType, TimestamptzType)):
            return Literal(v // 1000, target)
        if isinstance(target, DateType):
            return Literal(v // 86_400_000_000_000, DATE)
        return None
    if isinstance(s, BinaryType):
        if isinstance(target, FixedType):
            return Literal(v, target) if len(v) == target.length else None
        return None
    if isinstance(s, FixedType):
        if isinstance(target, BinaryType):
            return Literal(v, BINARY)
        return None
    return None


_TS = re.compile(
    r"^(?P<date>[+-]?\d{4,}-\d{2}-\d{2})"
    r"(?:[T ](?P<h>\d{2}):(?P<m>\d{2})(?::(?P<s>\d{2})(?:\.(?P<f>\d{1,9}))?)?)?"
    r"\s*(?P<tz>Z|UTC|[+-]\d{2}(?::?\d{2})?)?$",
    re.IGNORECASE,
)
_TIME = re.compile(r"^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$")


def parse_date_days(text: str) -> int:
    """Days since 1970-01-01 of an ISO date ``YYYY-MM-DD``; raises ValueError when malformed."""
    return (date.fromisoformat(text.strip()) - _EPOCH_DATE).days


def parse_timestamp_micros(text: str, *, nanos: bool = False) -> tuple[int, bool]:
    """Parse an ISO timestamp (``T`` or space separated, optional fraction and offset).

    Returns ``(micros or nanos since the epoch, has_offset)``; with an offset the value is the UTC
    instant, without it the wall clock read as UTC.  Raises ValueError when malformed.
    """
    m = _TS.match(text.strip())
    if not m:
        raise ValueError(f"not an ISO timestamp: {text!r}")
    days = parse_date_days(m.group("date"))
    secs = int(m.group("h") or 0) * 3600 + int(m.group("m") or 0) * 60 + int(m.group("s") or 0)
    frac = (m.group("f") or "").ljust(9, "0")
    tz = m.group("tz")
    offset = 0
    if tz and tz.upper() not in ("Z", "UTC"):
        digits = tz[1:].replace(":", "")
        offset = (int(digits[:2]) * 3600 + int(digits[2:4] or 0) * 60) * (1 if tz[0] == "+" else -1)
    total_secs = days * 86_400 + secs - offset
    if nanos:
        return total_secs * 1_000_000_000 + int(frac), tz is not None
    if int(frac[6:]):
        raise ValueError(f"timestamp {text!r} has more precision than microseconds")
    return total_secs * 1_000_000 + int(frac[:6]), tz is not None


def _from_string(v: str, target: PrimitiveType) -> Literal | _OutOfRange | None:
    if isinstance(target, StringType):
        return Literal(v, STRING)
    if isinstance(target, DateType):
        return Literal(parse_date_days(v), DATE)
    if isinstance(target, TimeType):
        m = _TIME.match(v.strip())
        if not m:
            raise ValueError("expected HH:MM[:SS[.ffffff]]")
        frac = (m.group(4) or "").ljust(6, "0")[:6]
        return Literal((int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3) or 0)) * 1_000_000 + int(frac), TIME)
    if isinstance(target, (TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)):
        nanos = isinstance(target, (TimestampNanoType, TimestamptzNanoType))
        value, has_offset = parse_timestamp_micros(v, nanos=nanos)
        if has_offset and isinstance(target, (TimestampType, TimestampNanoType)):
            raise ValueError("a timestamp without time zone cannot take a zone offset")
        return Literal(value, target)
    if isinstance(target, UUIDType):
        return Literal(_uuid.UUID(v.strip()), UUID)
    if isinstance(target, DecimalType):
        return _to_decimal(Decimal(v.strip()), target)
    # Spark coerces string literals compared with numeric/boolean columns; accept the same.
    if isinstance(target, (IntegerType, LongType)):
        return _convert(Literal(int(v.strip()), LONG), target)
    if isinstance(target, (FloatType, DoubleType)):
        f = float(v.strip())
        if math.isnan(f):
            raise ValueError("NaN cannot be compared; use is_nan")
        return _convert(Literal(f, DOUBLE), target)
    if isinstance(target, BooleanType):
        low = v.strip().lower()
        if low in ("true", "false"):
            return Literal(low == "true", BOOLEAN)
        raise ValueError("expected true or false")
    return None
