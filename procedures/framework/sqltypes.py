"""The SQL type system of procedure parameters: Spark SQL types, literals and argument coercion.

Iceberg's procedures declare each parameter with a Spark SQL type; Spark 3.5's analyzer then
accepts an argument only when ``Cast.canUpCast(argType, paramType)`` holds and casts it
(procedures.md §1.2).  This module reproduces that rule for arguments that arrive as typed
literals from the CALL parser and, slightly more leniently, for plain Python values passed to
:func:`procedures.call` (a Python ``int`` has no width, so it may fill an ``INT`` parameter when it
fits).  NULL / ``None`` means "not provided" everywhere (§1.4).

Canonical values handed to procedure code: ``STRING`` -> ``str``; integer types -> ``int``;
``BOOLEAN`` -> ``bool``; ``DOUBLE``/``FLOAT`` -> ``float``; ``DECIMAL`` -> ``Decimal``;
``DATE`` -> ``int`` days; ``TIMESTAMP`` -> ``int`` epoch microseconds (the session time zone
applied); ``ARRAY`` -> ``list``; ``MAP`` -> ``dict``.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from procedures.errors import ValidationError

__all__ = [
    "SqlType", "Literal", "parse_sql_type", "python_literal", "common_type", "can_up_cast", "coerce",
    "parse_timestamp", "parse_date", "format_value", "micros_to_millis",
    "STRING", "BIGINT", "INT", "SMALLINT", "TINYINT", "BOOLEAN", "DOUBLE", "FLOAT", "DATE", "TIMESTAMP",
    "TIMESTAMP_NTZ", "NULL",
]


@dataclass(frozen=True, slots=True)
class SqlType:
    """A Spark SQL type as procedures use them (``BIGINT``, ``DECIMAL(p,s)``, ``ARRAY<T>``, ``MAP<K,V>``)."""

    name: str
    precision: int = 0
    scale: int = 0
    element: "SqlType | None" = None
    key: "SqlType | None" = None
    value: "SqlType | None" = None

    def __str__(self) -> str:
        if self.name == "DECIMAL":
            return f"DECIMAL({self.precision},{self.scale})"
        if self.name == "ARRAY":
            return f"ARRAY<{self.element}>"
        if self.name == "MAP":
            return f"MAP<{self.key},{self.value}>"
        return self.name

    @property
    def is_atomic(self) -> bool:
        """Not an array, a map or the NULL type."""
        return self.name not in ("ARRAY", "MAP", "NULL")


STRING = SqlType("STRING")
BIGINT = SqlType("BIGINT")
INT = SqlType("INT")
SMALLINT = SqlType("SMALLINT")
TINYINT = SqlType("TINYINT")
BOOLEAN = SqlType("BOOLEAN")
DOUBLE = SqlType("DOUBLE")
FLOAT = SqlType("FLOAT")
DATE = SqlType("DATE")
TIMESTAMP = SqlType("TIMESTAMP")
TIMESTAMP_NTZ = SqlType("TIMESTAMP_NTZ")
NULL = SqlType("NULL")

_ALIASES = {
    "STRING": STRING, "VARCHAR": STRING, "BIGINT": BIGINT, "LONG": BIGINT, "INT": INT, "INTEGER": INT,
    "SMALLINT": SMALLINT, "SHORT": SMALLINT, "TINYINT": TINYINT, "BYTE": TINYINT, "BOOLEAN": BOOLEAN,
    "DOUBLE": DOUBLE, "FLOAT": FLOAT, "REAL": FLOAT, "DATE": DATE, "TIMESTAMP": TIMESTAMP,
    "TIMESTAMP_LTZ": TIMESTAMP, "TIMESTAMP_NTZ": TIMESTAMP_NTZ, "NULL": NULL, "VOID": NULL,
}
_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_NUMERIC_ORDER = ("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE")
_INT_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 20}
_RANGES = {"TINYINT": 7, "SMALLINT": 15, "INT": 31, "BIGINT": 63}


def parse_sql_type(text: str | SqlType) -> SqlType:
    """Parse ``bigint``, ``map<string,string>``, ``array<bigint>``, ``decimal(9,2)`` ... (case-insensitive)."""
    if isinstance(text, SqlType):
        return text
    s = text.strip().upper().replace(" ", "")
    if s in _ALIASES:
        return _ALIASES[s]
    if m := re.fullmatch(r"DECIMAL\((\d+),(\d+)\)", s):
        return SqlType("DECIMAL", int(m.group(1)), int(m.group(2)))
    if s == "DECIMAL":
        return SqlType("DECIMAL", 10, 0)
    if s.startswith("ARRAY<") and s.endswith(">"):
        return SqlType("ARRAY", element=parse_sql_type(s[6:-1]))
    if s.startswith("MAP<") and s.endswith(">"):
        inner = s[4:-1]
        depth = 0
        for i, c in enumerate(inner):
            depth += c in "<("
            depth -= c in ">)"
            if c == "," and depth == 0:
                return SqlType("MAP", key=parse_sql_type(inner[:i]), value=parse_sql_type(inner[i + 1:]))
    raise ValidationError(f"Unknown Spark SQL type {text!r} in a procedure declaration")


@dataclass(frozen=True, slots=True)
class Literal:
    """A typed argument value: from the CALL parser, or a Python value typed by :func:`python_literal`.

    ``TIMESTAMP``/``DATE`` literals may keep their SQL text (``value`` is a ``str``) until coercion,
    which knows the session time zone.  ``ARRAY`` values are lists of :class:`Literal` items and
    ``MAP`` values lists of ``(key, value)`` :class:`Literal` pairs.
    """

    type: SqlType
    value: Any
    #: 0-based position of the literal in the statement text, for error messages (-1 when unknown)
    pos: int = -1


# ------------------------------------------------------------------------------------ Python values
def python_literal(value: Any) -> Literal:
    """Type a Python value like the literal a SQL user would write for it."""
    if value is None:
        return Literal(NULL, None)
    if isinstance(value, Literal):
        return value
    if isinstance(value, bool):
        return Literal(BOOLEAN, value)
    if isinstance(value, int):
        return Literal(INT if -(2**31) <= value < 2**31 else BIGINT, value)
    if isinstance(value, float):
        return Literal(DOUBLE, value)
    if isinstance(value, Decimal):
        sign, digits, exp = value.as_tuple()
        scale = max(0, -int(exp))
        return Literal(SqlType("DECIMAL", max(len(digits), scale), scale), value)
    if isinstance(value, str):
        return Literal(STRING, value)
    if isinstance(value, dt.datetime):
        return Literal(TIMESTAMP, value)
    if isinstance(value, dt.date):
        return Literal(DATE, value)
    if isinstance(value, (list, tuple)):
        items = [python_literal(v) for v in value]
        return Literal(SqlType("ARRAY", element=common_type([i.type for i in items], "array")), items)
    if isinstance(value, dict):
        keys = [python_literal(k) for k in value]
        vals = [python_literal(v) for v in value.values()]
        return Literal(
            SqlType("MAP", key=common_type([k.type for k in keys], "map"), value=common_type([v.type for v in vals], "map")),
            list(zip(keys, vals)),
        )
    raise ValidationError(f"Unsupported argument value {value!r} of Python type {type(value).__name__}")


def common_type(types: list[SqlType], what: str) -> SqlType:
    """The type Spark's ``array``/``map`` functions give their items (the wider of them)."""
    out = NULL
    for t in types:
        if out == NULL or out == t:
            out = t
        elif t == NULL:
            continue
        elif out.name in _NUMERIC_ORDER and t.name in _NUMERIC_ORDER:
            out = out if _NUMERIC_ORDER.index(out.name) >= _NUMERIC_ORDER.index(t.name) else t
        elif out.name == "DECIMAL" or t.name == "DECIMAL":
            out = DOUBLE if "DOUBLE" in (out.name, t.name) or "FLOAT" in (out.name, t.name) else SqlType("DECIMAL", 38, 18)
        elif {out.name, t.name} <= {"DATE", "TIMESTAMP", "TIMESTAMP_NTZ"}:
            out = TIMESTAMP
        else:
            raise ValidationError(f"Cannot mix {out} and {t} in one {what}(...): the items need a common type")
    return out


# ------------------------------------------------------------------------------------ up-casts
def can_up_cast(src: SqlType, dst: SqlType) -> bool:
    """Spark 3.5's ``Cast.canUpCast`` for the types procedures use."""
    if src == dst or src == NULL:
        return True
    if src.name in _NUMERIC_ORDER and dst.name in _NUMERIC_ORDER:
        return _NUMERIC_ORDER.index(src.name) < _NUMERIC_ORDER.index(dst.name)
    if src.name in _INTEGRAL and dst.name == "DECIMAL":
        return dst.precision - dst.scale >= _INT_DIGITS[src.name]
    if src.name == "DECIMAL" and dst.name == "DECIMAL":
        return dst.scale >= src.scale and dst.precision - dst.scale >= src.precision - src.scale
    if src.name == "DECIMAL" and dst.name in ("DOUBLE", "FLOAT"):
        return src.precision <= (15 if dst.name == "DOUBLE" else 7)
    if dst == TIMESTAMP:
        return src.name in ("DATE", "TIMESTAMP_NTZ", "BIGINT")
    if dst == TIMESTAMP_NTZ:
        return src == DATE
    if dst == STRING:
        return src.is_atomic
    if src.name == "ARRAY" and dst.name == "ARRAY":
        return can_up_cast(src.element, dst.element)
    if src.name == "MAP" and dst.name == "MAP":
        return can_up_cast(src.key, dst.key) and can_up_cast(src.value, dst.value)
    return False


def coerce(lit: Literal, target: SqlType, param: str, *, tz: str = "UTC", lenient: bool = False) -> Any:
    """The canonical value of ``lit`` for a parameter of type ``target``; None for NULL.

    ``lenient`` (Python arguments) also lets an integer fill a narrower integer parameter when it
    fits, and refuses any Python integer for a timestamp (its unit is ambiguous).  A refused cast raises ``ValidationError('Wrong arg type for <param>: cannot cast ...')``.
    """
    src = lit.type
    if src == NULL or lit.value is None:
        return None
    if lenient and target in (TIMESTAMP, TIMESTAMP_NTZ) and src.name in _INTEGRAL:
        # a Python int has no unit: 1700000000000 meant as milliseconds would be read as seconds (a
        # date 50,000 years ahead), so Python callers pass a datetime (SQL keeps BIGINT as seconds)
        raise ValidationError(f"Wrong arg type for {param}: cannot cast {src} to {target} (pass a datetime, naive "
                              "meaning the session time zone: a Python int could be seconds or milliseconds)")
    allowed = can_up_cast(src, target)
    if not allowed and lenient and src.name in _INTEGRAL and target.name in _INTEGRAL:
        bits = _RANGES[target.name]
        if not -(2**bits) <= lit.value < 2**bits:
            raise ValidationError(f"Wrong arg value for {param}: {lit.value} does not fit {target}")
        allowed = True
    if not allowed:
        hint = ""
        if target == TIMESTAMP and src.name in ("STRING", "INT"):
            hint = " (write TIMESTAMP '2024-01-31 12:00:00', or a BIGINT of epoch seconds such as 1706702400L)"
        elif target.name in _INTEGRAL and src == STRING:
            hint = " (write the number without quotes)"
        raise ValidationError(f"Wrong arg type for {param}: cannot cast {src} to {target}{hint}")
    return _convert(lit, target, param, tz)


def _convert(lit: Literal, target: SqlType, param: str, tz: str) -> Any:
    src, v = lit.type, lit.value
    name = target.name
    if name in _INTEGRAL:
        return int(v)
    if name in ("DOUBLE", "FLOAT"):
        return float(v)
    if name == "DECIMAL":
        return Decimal(v)
    if name == "BOOLEAN":
        return bool(v)
    if name == "STRING":
        return format_value(_convert(lit, src, param, tz) if src.name in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ") else v, src, tz)
    if name == "DATE":
        return v if isinstance(v, int) else parse_date(v, param) if isinstance(v, str) else (v - dt.date(1970, 1, 1)).days
    if name in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        zone = tz if name == "TIMESTAMP" else "UTC"
        if src == BIGINT:
            return int(v) * 1_000_000  # Spark reads a BIGINT cast to TIMESTAMP as epoch seconds
        if src == DATE:
            days = _convert(lit, DATE, param, tz)
            return parse_timestamp(str(dt.date(1970, 1, 1) + dt.timedelta(days=days)), zone, param)
        if isinstance(v, int):
            return v
        if isinstance(v, dt.datetime):
            if v.tzinfo is None:
                v = v.replace(tzinfo=_zone(zone))
            delta = v - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
            return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return parse_timestamp(v, zone, param)
    if name == "ARRAY":
        return [coerce(item, target.element, param, tz=tz) for item in v]
    if name == "MAP":
        out = {}
        for k, val in v:
            key = coerce(k, target.key, param, tz=tz)
            if key is None:
                raise ValidationError(f"Wrong arg value for {param}: a map key cannot be NULL")
            if key in out:
                raise ValidationError(f"Wrong arg value for {param}: duplicate map key {key!r}")
            out[key] = coerce(val, target.value, param, tz=tz)
        return out
    raise ValidationError(f"Wrong arg type for {param}: cannot cast {src} to {target}")


# ------------------------------------------------------------------------------------ date/time text
_TS = re.compile(
    r"\s*(\d{4})-(\d{1,2})(?:-(\d{1,2}))?"
    r"(?:[ T](\d{1,2})(?::(\d{1,2})(?::(\d{1,2})(?:\.(\d{0,9}))?)?)?)?"
    r"\s*(Z|UTC|GMT|[+-]\d{1,2}(?::?\d{2})?|[A-Za-z_]+/[A-Za-z_/]+)?\s*"
)


def _zone(name: str) -> dt.tzinfo:
    if name in ("Z", "UTC", "GMT"):
        return dt.timezone.utc
    if m := re.fullmatch(r"([+-])(\d{1,2})(?::?(\d{2}))?", name):
        offset = dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0))
        return dt.timezone(offset if m.group(1) == "+" else -offset)
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except Exception:  # noqa: BLE001 -- any lookup failure is an unknown zone to the user
        raise ValidationError(f"Unknown time zone {name!r}") from None


def parse_timestamp(text: str, tz: str, param: str = "timestamp") -> int:
    """Epoch microseconds of Spark timestamp text (``2021-06-30 00:00:00.000[+02:00]``), zone-less text in ``tz``."""
    m = _TS.fullmatch(text)
    if not m:
        raise ValidationError(f"Cannot parse the TIMESTAMP value of {param}: {text!r} (expected 'yyyy-MM-dd HH:mm:ss[.SSSSSS]')")
    y, mo, d, h, mi, s, frac, zone = m.groups()
    try:
        frac_us = int((frac or "").ljust(9, "0")[:6] or 0)
        value = dt.datetime(int(y), int(mo), int(d or 1), int(h or 0), int(mi or 0), int(s or 0), frac_us,
                            tzinfo=_zone(zone or tz))
    except ValueError as e:
        raise ValidationError(f"Cannot parse the TIMESTAMP value of {param}: {text!r} ({e})") from None
    delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def parse_date(text: str, param: str = "date") -> int:
    """Days since 1970-01-01 of Spark date text (``2021-06-30``)."""
    m = re.fullmatch(r"\s*(\d{4})-(\d{1,2})(?:-(\d{1,2}))?\s*", text)
    try:
        if not m:
            raise ValueError("expected 'yyyy-MM-dd'")
        return (dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3) or 1)) - dt.date(1970, 1, 1)).days
    except ValueError as e:
        raise ValidationError(f"Cannot parse the DATE value of {param}: {text!r} ({e})") from None


def format_value(v: Any, t: SqlType, tz: str = "UTC") -> str:
    """Spark's string form of an atomic value (what ``CAST(x AS STRING)`` gives)."""
    if t == BOOLEAN:
        return "true" if v else "false"
    if t == DATE:
        return str(dt.date(1970, 1, 1) + dt.timedelta(days=v))
    if t.name in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        zone = _zone(tz) if t == TIMESTAMP else dt.timezone.utc
        when = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=v)
        text = when.astimezone(zone).strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".")
        return text
    return str(v)


def micros_to_millis(micros: int) -> int:
    """Floor division, like Java's ``DateTimeUtil.microsToMillis`` (pre-1970 values round down)."""
    return micros // 1000


def to_decimal(text: str) -> Decimal:
    """``Decimal(text)`` with a ValidationError naming the text."""
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ValidationError(f"Invalid decimal literal {text!r}") from None
