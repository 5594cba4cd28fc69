"""Single-value conversions: spec Appendix D (binary and JSON single-value serialization).

* ``to_bytes`` / ``from_bytes``: the binary form used for lower/upper bounds in manifests and
  manifest-list field summaries (spec-onfile §4.1), including reading bounds written before a
  type promotion (int -> long, float -> double, date -> timestamp).
* ``to_json`` / ``from_json``: the JSON form of ``initial-default`` / ``write-default`` (§4.2),
  printed the way Iceberg Java 1.10 prints it.
* ``to_human_string``: the text of a partition value in a data file path (§7.3), matching
  Java's ``Transform.toHumanString``.
* ``truncate_lower_bound`` / ``truncate_upper_bound``: the metrics truncation of strings and
  binary (``truncate(16)`` metrics mode).

Values use the representation documented in :mod:`procedures.spec.types`.  The calendar helpers
here work on the proleptic Gregorian calendar for any year, because Java prints years beyond
``datetime``'s 1..9999 range and bounds may hold them.
"""

from __future__ import annotations

import base64
import math
import re
import struct
import uuid
from decimal import Decimal, InvalidOperation
from typing import Any

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    GeographyType,
    GeometryType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
    VariantType,
)

__all__ = [
    "to_bytes",
    "from_bytes",
    "to_json",
    "from_json",
    "to_human_string",
    "truncate_lower_bound",
    "truncate_upper_bound",
    "unscaled_value",
    "decimal_from_unscaled",
    "min_bytes_signed",
    "civil_from_days",
    "days_from_civil",
    "java_double_string",
    "java_float_string",
    "iso_date",
    "iso_time",
    "human_date",
    "human_time",
    "parse_iso_date",
    "parse_iso_time",
    "parse_iso_timestamp",
    "MICROS_PER_DAY",
    "MICROS_PER_HOUR",
    "NANOS_PER_DAY",
]

MICROS_PER_DAY = 86_400_000_000
MICROS_PER_HOUR = 3_600_000_000
NANOS_PER_DAY = 86_400_000_000_000
_MAX_CODE_POINT = 0x10FFFF
_INT_RANGE = (-(2**31), 2**31 - 1)
_LONG_RANGE = (-(2**63), 2**63 - 1)

_MICRO_TS = (TimestampType, TimestamptzType)
_NANO_TS = (TimestampNanoType, TimestamptzNanoType)
_TZ = (TimestamptzType, TimestamptzNanoType)


# --------------------------------------------------------------------------- decimals and calendar


def unscaled_value(value: Decimal, scale: int) -> int:
    """The exact unscaled integer of ``value`` at ``scale`` (``14.20`` at scale 2 -> 1420).

    Raises :class:`ValidationError` when the value needs more fraction digits than the scale
    allows, because silently rounding would change partition values and bounds.
    """
    if not isinstance(value, Decimal):
        value = Decimal(value) if isinstance(value, (int, str)) else Decimal(str(value))
    if not value.is_finite():
        raise ValidationError(f"Cannot store {value} in a decimal column: only finite values are allowed")
    sign, digits, exponent = value.as_tuple()
    n = int("".join(map(str, digits)) or "0")
    shift = exponent + scale
    if shift >= 0:
        n *= 10**shift
    else:
        div = 10**-shift
        if n % div:
            raise ValidationError(f"Cannot store {value} at scale {scale} without rounding; round it first")
        n //= div
    return -n if sign else n


def decimal_from_unscaled(unscaled: int, scale: int) -> Decimal:
    """The decimal with this unscaled value and exactly this scale (1420, 2 -> ``14.20``)."""
    digits = tuple(int(c) for c in str(abs(unscaled)))
    return Decimal((1 if unscaled < 0 else 0, digits, -scale))


def min_bytes_signed(n: int) -> bytes:
    """Minimal two's-complement big-endian bytes of ``n`` (Java ``BigInteger.toByteArray``)."""
    length = ((n if n >= 0 else ~n).bit_length() + 8) // 8
    return n.to_bytes(length, "big", signed=True)


def civil_from_days(days: int) -> tuple[int, int, int]:
    """``(year, month, day)`` of a day count since 1970-01-01, proleptic Gregorian, any year."""
    # Howard Hinnant's days-to-civil algorithm: exact for every integer day.
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d


def days_from_civil(year: int, month: int, day: int) -> int:
    """Day count since 1970-01-01 of a proleptic Gregorian date."""
    y = year - 1 if month <= 2 else year
    era = y // 400
    yoe = y - era * 400
    mp = month - 3 if month > 2 else month + 9
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def iso_date(days: int) -> str:
    """Java ``DateTimeFormatter.ISO_LOCAL_DATE``: ``2017-11-16``, ``+10183-09-21``, ``-0221-09-04``."""
    y, m, d = civil_from_days(days)
    if y > 9999:
        year = f"+{y}"
    elif y < 0:
        year = f"-{-y:04d}"
    else:
        year = f"{y:04d}"
    return f"{year}-{m:02d}-{d:02d}"


def human_date(days: int) -> str:
    """Java ``TransformUtil.humanDay``: ``String.format("%04d-%02d-%02d")`` of the date."""
    y, m, d = civil_from_days(days)
    return f"{y:04d}-{m:02d}-{d:02d}"


def iso_time(nanos_of_day: int) -> str:
    """Java ``ISO_LOCAL_TIME``: seconds always printed, fraction without trailing zeros."""
    secs, nanos = divmod(nanos_of_day, 1_000_000_000)
    h, rem = divmod(secs, 3600)
    mi, s = divmod(rem, 60)
    text = f"{h:02d}:{mi:02d}:{s:02d}"
    if nanos:
        text += "." + f"{nanos:09d}".rstrip("0")
    return text


def human_time(nanos_of_day: int) -> str:
    """Java ``LocalTime.toString``: ``22:31`` when seconds and fraction are zero, fraction in
    groups of three digits (``22:31:08.000100``)."""
    secs, nanos = divmod(nanos_of_day, 1_000_000_000)
    h, rem = divmod(secs, 3600)
    mi, s = divmod(rem, 60)
    text = f"{h:02d}:{mi:02d}"
    if s or nanos:
        text += f":{s:02d}"
        if nanos:
            if nanos % 1_000_000 == 0:
                text += f".{nanos // 1_000_000:03d}"
            elif nanos % 1000 == 0:
                text += f".{nanos // 1000:06d}"
            else:
                text += f".{nanos:09d}"
    return text


def _iso_timestamp(value: int, nanos_unit: bool, with_zone: bool) -> str:
    per_day = NANOS_PER_DAY if nanos_unit else MICROS_PER_DAY
    days, rest = divmod(value, per_day)
    text = iso_date(days) + "T" + iso_time(rest if nanos_unit else rest * 1000)
    return text + "+00:00" if with_zone else text


_DATE_RE = re.compile(r"^([+-]?\d{4,})-(\d{2})-(\d{2})$")
_TIME_RE = re.compile(r"^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$")


def parse_iso_date(text: str) -> int:
    """Days since the epoch of an ISO date (``2017-11-16``); raises ValidationError otherwise."""
    m = _DATE_RE.match(text.strip())
    if not m:
        raise ValidationError(f"Invalid date {text!r}: expected yyyy-MM-dd")
    y, mo, d = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not (1 <= mo <= 12 and 1 <= d <= 31) or civil_from_days(days_from_civil(y, mo, d)) != (y, mo, d):
        raise ValidationError(f"Invalid date {text!r}: no such calendar day")
    return days_from_civil(y, mo, d)


def parse_iso_time(text: str) -> int:
    """Nanoseconds since midnight of ``HH:mm[:ss[.fffffffff]]``; raises ValidationError otherwise."""
    m = _TIME_RE.match(text.strip())
    if not m:
        raise ValidationError(f"Invalid time {text!r}: expected HH:mm[:ss[.SSSSSS]]")
    h, mi, s = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if h > 23 or mi > 59 or s > 59:
        raise ValidationError(f"Invalid time {text!r}: field out of range")
    frac = int((m.group(4) or "").ljust(9, "0"))
    return ((h * 60 + mi) * 60 + s) * 1_000_000_000 + frac


def parse_iso_timestamp(text: str, *, with_zone: bool, nanos: bool) -> int:
    """Micros (or nanos) since the epoch of an ISO date-time.

    With ``with_zone`` the text must end in ``+00:00`` (``Z`` is accepted too), as Java requires
    UTC for timestamptz defaults; without it an offset is refused.
    """
    body = text.strip()
    if with_zone:
        if body.endswith("+00:00") or body.endswith("-00:00"):
            body = body[:-6]
        elif body.endswith("Z"):
            body = body[:-1]
        else:
            raise ValidationError(f"Invalid timestamptz {text!r}: the offset must be +00:00")
    date_part, sep, time_part = body.partition("T")
    if not sep:
        raise ValidationError(f"Invalid timestamp {text!r}: expected yyyy-MM-ddTHH:mm:ss")
    if not with_zone and re.search(r"(Z|[+-]\d{2}:\d{2})$", time_part):
        raise ValidationError(f"Invalid timestamp {text!r}: a timestamp without zone has no offset")
    total_ns = parse_iso_date(date_part) * NANOS_PER_DAY + parse_iso_time(time_part)
    return total_ns if nanos else total_ns // 1000


# --------------------------------------------------------------------------- Java number strings


def _java_sci_or_plain(digits: str, exponent: int, negative: bool) -> str:
    """Format shortest digits (``digits`` x 10^exponent) as Java's Double.toString does."""
    sci_exp = exponent + len(digits) - 1
    sign = "-" if negative else ""
    if -3 <= sci_exp < 7:
        if sci_exp >= 0:
            int_part = digits[: sci_exp + 1].ljust(sci_exp + 1, "0")
            frac = digits[sci_exp + 1 :] or "0"
        else:
            int_part = "0"
            frac = "0" * (-sci_exp - 1) + digits
        return f"{sign}{int_part}.{frac}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{sci_exp}"


def _shortest(text: str) -> tuple[str, int, bool]:
    sign, digs, exp = Decimal(text).as_tuple()
    d = "".join(map(str, digs))
    stripped = d.rstrip("0")
    return (stripped or "0"), exp + (len(d) - len(stripped) if stripped else 0), bool(sign)


def java_double_string(value: float) -> str:
    """Java ``Double.toString``: ``1.0``, ``1.0E20``, ``1.0E-5``, ``NaN``, ``-Infinity``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    return _java_sci_or_plain(*_shortest(repr(value)))


def _f32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", value))[0]


def _shortest_f32_text(value: float) -> str:
    target = _f32(value)
    for p in range(1, 10):
        text = f"{target:.{p - 1}e}"
        if _f32(float(text)) == target:
            return text
    return repr(target)  # pragma: no cover - 9 digits always round-trip a float32


def java_float_string(value: float) -> str:
    """Java ``Float.toString`` of a float32 value: shortest digits that round-trip float32."""
    if math.isnan(value) or math.isinf(value) or value == 0:
        return java_double_string(value)
    return _java_sci_or_plain(*_shortest(_shortest_f32_text(value)))


# --------------------------------------------------------------------------- binary


def _check_range(value: int, bounds: tuple[int, int], type_: IcebergType) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"Cannot serialize {value!r} as {type_}: expected an int")
    if not bounds[0] <= value <= bounds[1]:
        raise ValidationError(f"Cannot serialize {value} as {type_}: out of range")
    return value


def to_bytes(value: Any, type_: IcebergType) -> bytes:
    """Binary single-value form of ``value`` (bounds in manifests); see spec-onfile §4.1."""
    if isinstance(type_, BooleanType):
        return b"\x01" if value else b"\x00"
    if isinstance(type_, (IntegerType, DateType)):
        return struct.pack("<i", _check_range(value, _INT_RANGE, type_))
    if isinstance(type_, (LongType, TimeType) + _MICRO_TS + _NANO_TS):
        return struct.pack("<q", _check_range(value, _LONG_RANGE, type_))
    if isinstance(type_, FloatType):
        return struct.pack("<f", value)
    if isinstance(type_, DoubleType):
        return struct.pack("<d", value)
    if isinstance(type_, StringType):
        return value.encode("utf-8")
    if isinstance(type_, UUIDType):
        return (value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))).bytes
    if isinstance(type_, FixedType):
        data = bytes(value)
        if len(data) != type_.length:
            raise ValidationError(f"Cannot serialize {len(data)} bytes as {type_}: length must be {type_.length}")
        return data
    if isinstance(type_, BinaryType):
        return bytes(value)
    if isinstance(type_, DecimalType):
        return min_bytes_signed(unscaled_value(value, type_.scale))
    if isinstance(type_, (GeometryType, GeographyType)):
        coords = list(value)
        return struct.pack(f"<{len(coords)}d", *coords)
    raise ValidationError(f"Type {type_} has no binary single-value form (no bounds are kept for it)")


def from_bytes(data: bytes, type_: IcebergType) -> Any:
    """Read a binary single value (a bound); accepts bounds written before a type promotion.

    A 4-byte ``long`` bound was written as int, a 4-byte ``double`` bound as float, and a
    4-byte ``timestamp``/``timestamp_ns`` bound as a date (days), which is converted to the
    start of that day in the timestamp's unit.
    """
    data = bytes(data)
    n = len(data)

    def bad(expected: str) -> InvalidMetadataError:
        return InvalidMetadataError(f"Invalid {type_} bound of {n} bytes ({data.hex()}): expected {expected}")

    if isinstance(type_, BooleanType):
        if n != 1:
            raise bad("1 byte")
        return data != b"\x00"
    if isinstance(type_, (IntegerType, DateType)):
        if n != 4:
            raise bad("4 bytes")
        return struct.unpack("<i", data)[0]
    if isinstance(type_, LongType):
        if n == 4:
            return struct.unpack("<i", data)[0]
        if n != 8:
            raise bad("8 bytes")
        return struct.unpack("<q", data)[0]
    if isinstance(type_, TimeType):
        if n != 8:
            raise bad("8 bytes")
        return struct.unpack("<q", data)[0]
    if isinstance(type_, _MICRO_TS + _NANO_TS):
        if n == 4:
            per_day = NANOS_PER_DAY if isinstance(type_, _NANO_TS) else MICROS_PER_DAY
            return struct.unpack("<i", data)[0] * per_day
        if n != 8:
            raise bad("8 bytes")
        return struct.unpack("<q", data)[0]
    if isinstance(type_, FloatType):
        if n != 4:
            raise bad("4 bytes")
        return struct.unpack("<f", data)[0]
    if isinstance(type_, DoubleType):
        if n == 4:
            return struct.unpack("<f", data)[0]
        if n != 8:
            raise bad("8 bytes")
        return struct.unpack("<d", data)[0]
    if isinstance(type_, StringType):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidMetadataError(f"Invalid string bound {data.hex()}: not UTF-8 ({e})") from None
    if isinstance(type_, UUIDType):
        if n != 16:
            raise bad("16 bytes")
        return uuid.UUID(bytes=data)
    if isinstance(type_, (FixedType, BinaryType)):
        return data
    if isinstance(type_, DecimalType):
        if n == 0:
            raise bad("at least 1 byte")
        return decimal_from_unscaled(int.from_bytes(data, "big", signed=True), type_.scale)
    if isinstance(type_, (GeometryType, GeographyType)):
        if n not in (16, 24, 32):
            raise bad("16, 24 or 32 bytes")
        return struct.unpack(f"<{n // 8}d", data)
    raise InvalidMetadataError(f"Type {type_} has no binary single-value form")


# --------------------------------------------------------------------------- JSON


def to_json(value: Any, type_: IcebergType) -> Any:
    """JSON single value (a Python object ready for ``json.dumps``) as Java 1.10 writes it."""
    if value is None:
        return None
    if isinstance(type_, BooleanType):
        return bool(value)
    if isinstance(type_, (IntegerType, LongType)):
        return int(value)
    if isinstance(type_, FloatType):
        # the shortest float32 digits, so 1.1f is written as 1.1 as Java does
        return float(_shortest_f32_text(float(value))) if math.isfinite(value) else float(value)
    if isinstance(type_, DoubleType):
        return float(value)
    if isinstance(type_, DecimalType):
        d = decimal_from_unscaled(unscaled_value(value, type_.scale), type_.scale)
        # Java writes toPlainString for scale >= 0, toString (scientific) for negative scales
        return format(d, "f") if type_.scale >= 0 else str(d)
    if isinstance(type_, DateType):
        return iso_date(value)
    if isinstance(type_, TimeType):
        return iso_time(value * 1000)
    if isinstance(type_, _MICRO_TS):
        return _iso_timestamp(value, False, isinstance(type_, _TZ))
    if isinstance(type_, _NANO_TS):
        return _iso_timestamp(value, True, isinstance(type_, _TZ))
    if isinstance(type_, StringType):
        return str(value)
    if isinstance(type_, UUIDType):
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))
    if isinstance(type_, FixedType):
        return to_bytes(value, type_).hex().upper()
    if isinstance(type_, BinaryType):
        return bytes(value).hex().upper()
    if isinstance(type_, (GeometryType, GeographyType)):
        return str(value)
    if isinstance(type_, StructType):
        out: dict[str, Any] = {}
        items = value.items() if isinstance(value, dict) else zip((f.field_id for f in type_.fields), value)
        for key, v in items:
            f = type_.field_by_id(int(key))
            if f is None:
                raise ValidationError(f"Cannot write struct default: no field with id {key} in {type_}")
            if v is not None:
                out[str(f.field_id)] = to_json(v, f.field_type)
        return out
    if isinstance(type_, ListType):
        return [to_json(v, type_.element_type) for v in value]
    if isinstance(type_, MapType):
        return {
            "keys": [to_json(k, type_.key_type) for k in value],
            "values": [to_json(v, type_.value_type) for v in value.values()],
        }
    raise ValidationError(f"A default of type {type_} must be null, got {value!r}")


def from_json(obj: Any, type_: IcebergType) -> Any:
    """Read a JSON single value with Java's checks (floats need a fraction, exact decimal scale,
    36-character uuids, exactly 2L hex digits for fixed)."""
    if obj is None:
        return None

    def bad(expected: str) -> InvalidMetadataError:
        return InvalidMetadataError(f"Cannot parse default as a {type_} value: {obj!r} ({expected})")

    if isinstance(type_, BooleanType):
        if not isinstance(obj, bool):
            raise bad("expected true or false")
        return obj
    if isinstance(type_, (IntegerType, LongType)):
        if isinstance(obj, bool) or not isinstance(obj, int):
            raise bad("expected an integer")
        limits = _INT_RANGE if isinstance(type_, IntegerType) else _LONG_RANGE
        if not limits[0] <= obj <= limits[1]:
            raise bad("out of range")
        return obj
    if isinstance(type_, (FloatType, DoubleType)):
        if not isinstance(obj, float):
            raise bad("expected a number with a fraction, such as 1.0")
        return _f32(obj) if isinstance(type_, FloatType) else obj
    if isinstance(type_, DecimalType):
        if not isinstance(obj, str):
            raise bad("expected a decimal string")
        try:
            d = Decimal(obj)
        except InvalidOperation:
            raise bad("not a decimal") from None
        if not d.is_finite() or -d.as_tuple().exponent != type_.scale:
            raise bad(f"the scale must be exactly {type_.scale}")
        return d
    if isinstance(type_, (StringType, UUIDType, DateType, TimeType, FixedType, BinaryType) + _MICRO_TS + _NANO_TS):
        if not isinstance(obj, str):
            raise bad("expected a string")
    try:
        if isinstance(type_, DateType):
            return parse_iso_date(obj)
        if isinstance(type_, TimeType):
            return parse_iso_time(obj) // 1000
        if isinstance(type_, _MICRO_TS + _NANO_TS):
            return parse_iso_timestamp(obj, with_zone=isinstance(type_, _TZ), nanos=isinstance(type_, _NANO_TS))
    except ValidationError as e:
        raise bad(str(e)) from None
    if isinstance(type_, StringType):
        return obj
    if isinstance(type_, UUIDType):
        if len(obj) != 36:
            raise bad("expected a 36-character uuid")
        try:
            return uuid.UUID(obj)
        except ValueError:
            raise bad("not a uuid") from None
    if isinstance(type_, (FixedType, BinaryType)):
        if isinstance(type_, FixedType) and len(obj) != 2 * type_.length:
            raise bad(f"expected {2 * type_.length} hex digits")
        try:
            return bytes.fromhex(obj)
        except ValueError:
            raise bad("not a hex string") from None
    if isinstance(type_, (GeometryType, GeographyType)):
        return obj
    if isinstance(type_, StructType):
        if not isinstance(obj, dict):
            raise bad("expected an object keyed by field id")
        out: dict[int, Any] = {}
        for key, v in obj.items():
            try:
                f = type_.field_by_id(int(key))
            except ValueError:
                f = None
            if f is None:
                raise bad(f"no field with id {key}")
            out[f.field_id] = from_json(v, f.field_type)
        return out
    if isinstance(type_, ListType):
        if not isinstance(obj, list):
            raise bad("expected an array")
        return [from_json(v, type_.element_type) for v in obj]
    if isinstance(type_, MapType):
        if not isinstance(obj, dict) or set(obj) != {"keys", "values"} or len(obj["keys"]) != len(obj["values"]):
            raise bad('expected {"keys": [...], "values": [...]} of equal length')
        return {
            from_json(k, type_.key_type): from_json(v, type_.value_type)
            for k, v in zip(obj["keys"], obj["values"])
        }
    if isinstance(type_, (UnknownType, VariantType)):
        raise bad("a default of this type must be null")
    raise bad("unsupported type")


# --------------------------------------------------------------------------- human strings


def to_human_string(value: Any, type_: IcebergType) -> str:
    """Java's human string of a value of ``type_`` (partition paths, §7.3); ``null`` for None."""
    if value is None:
        return "null"
    if isinstance(type_, BooleanType):
        return "true" if value else "false"
    if isinstance(type_, (IntegerType, LongType)):
        return str(int(value))
    if isinstance(type_, FloatType):
        return java_float_string(float(value))
    if isinstance(type_, DoubleType):
        return java_double_string(float(value))
    if isinstance(type_, DecimalType):
        # Java BigDecimal.toString and Python str(Decimal) implement the same scientific rules
        return str(decimal_from_unscaled(unscaled_value(value, type_.scale), type_.scale))
    if isinstance(type_, DateType):
        return human_date(value)
    if isinstance(type_, TimeType):
        return human_time(value * 1000)
    if isinstance(type_, _MICRO_TS):
        return _iso_timestamp(value, False, isinstance(type_, _TZ))
    if isinstance(type_, _NANO_TS):
        return _iso_timestamp(value, True, isinstance(type_, _TZ))
    if isinstance(type_, UUIDType):
        return str(value)
    if isinstance(type_, (FixedType, BinaryType)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return str(value)


# --------------------------------------------------------------------------- metrics truncation


def truncate_lower_bound(value: Any, type_: IcebergType, width: int) -> Any:
    """A lower bound of at most ``width`` code points (string) or bytes (binary).

    Other types are returned unchanged: only strings and binary are truncated by metrics modes.
    """
    if value is None:
        return None
    if isinstance(type_, StringType):
        return value[:width]
    if isinstance(type_, BinaryType):
        return bytes(value)[:width]
    return value


def truncate_upper_bound(value: Any, type_: IcebergType, width: int) -> Any:
    """An upper bound of at most ``width`` code points or bytes, or None when none exists.

    The truncated prefix's last code point (byte) is incremented, dropping trailing ones that
    cannot be; surrogate code points are skipped and U+10FFFF (0xFF) cannot be incremented.
    """
    if value is None:
        return None
    if isinstance(type_, StringType):
        if len(value) <= width:
            return value
        prefix = value[:width]
        for i in range(len(prefix) - 1, -1, -1):
            nxt = ord(prefix[i]) + 1
            if 0xD800 <= nxt <= 0xDFFF:
                nxt = 0xE000
            if nxt <= _MAX_CODE_POINT:
                return prefix[:i] + chr(nxt)
        return None
    if isinstance(type_, BinaryType):
        data = bytes(value)
        if len(data) <= width:
            return data
        prefix = data[:width]
        for i in range(len(prefix) - 1, -1, -1):
            if prefix[i] < 0xFF:
                return prefix[:i] + bytes([prefix[i] + 1])
        return None
    return value
