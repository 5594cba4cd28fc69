"""Partition transforms: spec "Partition Transforms" and Appendix B (32-bit hash requirements).

Each transform maps a source value to a partition value, on single Python values (``apply``)
and on whole Arrow arrays (``apply_arrow``), and the two agree value for value.  Results follow
Iceberg Java 1.10: ``bucket``/``year``/``month``/``hour`` give ``int``, ``day`` gives ``date``,
``identity``/``truncate``/``void`` keep the source type; time transforms use floor semantics so
values before 1970 round toward minus infinity (spec-onfile §6, §7).
"""

from __future__ import annotations

import math
import re
import struct
import uuid
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import mmh3
import pyarrow as pa
import pyarrow.compute as pc

from procedures.errors import ValidationError
from procedures.spec import conversions as conv
from procedures.spec.types import (
    DATE,
    INT,
    STRING,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
    VariantType,
    GeographyType,
    GeometryType,
)

__all__ = [
    "Transform",
    "IdentityTransform",
    "BucketTransform",
    "TruncateTransform",
    "TimeTransform",
    "YearTransform",
    "MonthTransform",
    "DayTransform",
    "HourTransform",
    "VoidTransform",
    "UnknownTransform",
    "IDENTITY",
    "YEAR",
    "MONTH",
    "DAY",
    "HOUR",
    "VOID",
    "parse_transform",
    "murmur3_hash",
]

_TS_MICROS = (TimestampType, TimestamptzType)
_TS_NANOS = (TimestampNanoType, TimestamptzNanoType)
_TIMESTAMPS = _TS_MICROS + _TS_NANOS
_INTEGRAL = (IntegerType, LongType)
_BUCKET_SOURCES = (
    IntegerType, LongType, DecimalType, DateType, TimeType, StringType, UUIDType, FixedType, BinaryType,
) + _TIMESTAMPS


# --------------------------------------------------------------------------- hashing


def _hash_bytes(data: bytes) -> int:
    return mmh3.hash(data, 0, signed=True)


def _hash_long(v: int) -> int:
    return _hash_bytes(struct.pack("<q", v))


def murmur3_hash(value: Any, type_: IcebergType) -> int:
    """Signed 32-bit Murmur3 (x86, seed 0) of a value, with Java ``BucketUtil``'s byte rules.

    Every integral value (int, long, date days, time and timestamp micros) is hashed as an
    8-byte little-endian long so that int -> long promotion keeps bucket assignments; ``_ns``
    timestamps are floor-divided to micros first.
    """
    if isinstance(type_, (IntegerType, LongType, DateType, TimeType) + _TS_MICROS):
        return _hash_long(value)
    if isinstance(type_, _TS_NANOS):
        return _hash_long(value // 1000)
    if isinstance(type_, DecimalType):
        return _hash_bytes(conv.min_bytes_signed(conv.unscaled_value(value, type_.scale)))
    if isinstance(type_, StringType):
        return _hash_bytes(value.encode("utf-8"))
    if isinstance(type_, UUIDType):
        return _hash_bytes((value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=bytes(value))).bytes)
    if isinstance(type_, (FixedType, BinaryType)):
        return _hash_bytes(bytes(value))
    if isinstance(type_, BooleanType):
        return _hash_long(1 if value else 0)
    if isinstance(type_, (FloatType, DoubleType)):
        # Java hashes doubleToLongBits with -0.0 folded into 0.0 and NaN canonicalised
        v = float(value)
        if math.isnan(v):
            return _hash_long(0x7FF8000000000000)
        if v == 0.0:
            v = 0.0
        return _hash_long(struct.unpack("<q", struct.pack("<d", v))[0])
    raise ValidationError(f"Cannot hash values of type {type_}")


# --------------------------------------------------------------------------- Arrow helpers


def _as_array(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(array, pa.ChunkedArray):
        return array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    return array


def _storage_ints(array: pa.Array, source_type: IcebergType) -> pa.Array:
    """Temporal Arrow arrays as the int64/int32 values of the package's representation."""
    t = array.type
    if pa.types.is_date32(t):
        return array.cast(pa.int32())
    if pa.types.is_date64(t):
        return _floor_div(array.cast(pa.int64()), 86_400_000).cast(pa.int32())
    if pa.types.is_time(t) or pa.types.is_timestamp(t):
        want = "ns" if isinstance(source_type, _TS_NANOS) else "us"
        if t.unit != want:
            target = pa.time64(want) if pa.types.is_time(t) else pa.timestamp(want, tz=t.tz)
            array = array.cast(target)
        return array.cast(pa.int64())
    return array


def _floor_div(array: pa.Array, divisor: int) -> pa.Array:
    """Floor division of an integer array by a positive constant (Arrow's divide truncates)."""
    d = pa.scalar(divisor, array.type)
    q = pc.divide(array, d)
    r = pc.subtract(array, pc.multiply(q, d))
    return pc.if_else(pc.less(r, pa.scalar(0, array.type)), pc.subtract(q, pa.scalar(1, array.type)), q)


def _python_values(array: pa.Array, source_type: IcebergType) -> list[Any]:
    values = _storage_ints(array, source_type).to_pylist()
    if isinstance(source_type, UUIDType):
        return [v if v is None or isinstance(v, uuid.UUID) else uuid.UUID(bytes=bytes(v)) for v in values]
    return values


def _map_unique(array: pa.Array, source_type: IcebergType, fn: Callable[[Any], Any], out_type: pa.DataType) -> pa.Array:
    """Apply a Python function once per distinct non-null value and spread the results back."""
    if isinstance(array.type, pa.BaseExtensionType):
        array = array.storage  # e.g. arrow.uuid: hash the 16 stored bytes
    uniq = pc.unique(array).drop_null()
    results = pa.array([fn(v) for v in _python_values(uniq, source_type)], type=out_type)
    index = pc.index_in(array, value_set=uniq)
    return pc.take(results, index)


# --------------------------------------------------------------------------- transforms


class Transform:
    """A partition transform; ``str(t)`` is its spec string (``bucket[16]``)."""

    __slots__ = ()
    preserves_order: ClassVar[bool] = False

    def can_transform(self, source_type: IcebergType) -> bool:
        """True when the transform accepts values of ``source_type``."""
        raise NotImplementedError

    def result_type(self, source_type: IcebergType) -> IcebergType:
        """The partition value type for ``source_type``."""
        raise NotImplementedError

    def apply(self, value: Any, source_type: IcebergType) -> Any:
        """The partition value of one source value (None stays None)."""
        raise NotImplementedError

    def apply_arrow(self, array: pa.Array | pa.ChunkedArray, source_type: IcebergType) -> pa.Array:
        """``apply`` over an Arrow array; nulls stay null."""
        raise NotImplementedError

    def to_human_string(self, value: Any, source_type: IcebergType) -> str:
        """The partition value as Java prints it in data file paths (``null`` for None)."""
        if value is None:
            return "null"
        return conv.to_human_string(value, self.result_type(source_type))

    def satisfies_order_of(self, other: "Transform", source_type: IcebergType | None = None) -> bool:
        """True when data ordered by this transform is also ordered by ``other``.

        ``source_type`` refines the answer where it depends on the type (truncate widths).
        """
        return self == other

    @property
    def dedup_name(self) -> str:
        """Key under which two fields on one source count as redundant in a partition spec."""
        return str(self)

    @property
    def is_void(self) -> bool:
        """True only for the void transform."""
        return False

    def _check(self, source_type: IcebergType) -> None:
        if not self.can_transform(source_type):
            raise ValidationError(f"Cannot apply {self} to a {source_type} value: type not supported by the transform")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


@dataclass(frozen=True, slots=True, repr=False)
class IdentityTransform(Transform):
    """``identity``: the source value itself."""

    preserves_order: ClassVar[bool] = True

    def can_transform(self, source_type: IcebergType) -> bool:
        return isinstance(source_type, PrimitiveType) and not isinstance(
            source_type, (VariantType, UnknownType, GeometryType, GeographyType)
        )

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return source_type

    def apply(self, value: Any, source_type: IcebergType) -> Any:
        return value

    def apply_arrow(self, array: pa.Array | pa.ChunkedArray, source_type: IcebergType) -> pa.Array:
        return _as_array(array)

    def satisfies_order_of(self, other: Transform, source_type: IcebergType | None = None) -> bool:
        # rows sorted by a value are sorted by any order-preserving function of it
        return other.preserves_order

    def __str__(self) -> str:
        return "identity"


@dataclass(frozen=True, slots=True, repr=False)
class BucketTransform(Transform):
    """``bucket[N]``: ``(murmur3(v) & 0x7FFFFFFF) % N``."""

    num_buckets: int

    def __post_init__(self) -> None:
        if self.num_buckets <= 0:
            raise ValidationError(f"Invalid bucket transform bucket[{self.num_buckets}]: N must be positive")

    def can_transform(self, source_type: IcebergType) -> bool:
        return isinstance(source_type, _BUCKET_SOURCES)

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return INT

    def apply(self, value: Any, source_type: IcebergType) -> Any:
        if value is None:
            return None
        return (murmur3_hash(value, source_type) & 0x7FFFFFFF) % self.num_buckets

    def apply_arrow(self, array: pa.Array | pa.ChunkedArray, source_type: IcebergType) -> pa.Array:
        self._check(source_type)
        return _map_unique(_as_array(array), source_type, lambda v: self.apply(v, source_type), pa.int32())

    def to_human_string(self, value: Any, source_type: IcebergType) -> str:
        return "null" if value is None else str(value)

    def __str__(self) -> str:
        return f"bucket[{self.num_buckets}]"


@dataclass(frozen=True, slots=True, repr=False)
class TruncateTransform(Transform):
    """``truncate[W]``: floor to a multiple of W (ints, decimal unscaled values), or the first W
    code points (string) or bytes (binary)."""

    width: int
    preserves_order: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.width <= 0:
            raise ValidationError(f"Invalid truncate transform truncate[{self.width}]: W must be positive")

    def can_transform(self, source_type: IcebergType) -> bool:
        return isinstance(source_type, (IntegerType, LongType, DecimalType, StringType, BinaryType))

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return source_type

    def apply(self, value: Any, source_type: IcebergType) -> Any:
        if value is None:
            return None
        w = self.width
        if isinstance(source_type, _INTEGRAL):
            # Python's % is already the floor remainder; wrap like Java's int/long arithmetic
            bits = 32 if isinstance(source_type, IntegerType) else 64
            half = 1 << (bits - 1)
            return (value - value % w + half) % (1 << bits) - half
        if isinstance(source_type, DecimalType):
            n = conv.unscaled_value(value, source_type.scale)
            return conv.decimal_from_unscaled(n - n % w, source_type.scale)
        if isinstance(source_type, StringType):
            return value[:w]
        if isinstance(source_type, BinaryType):
            return bytes(value)[:w]
        self._check(source_type)
        return None  # pragma: no cover

    def apply_arrow(self, array: pa.Array | pa.ChunkedArray, source_type: IcebergType) -> pa.Array:
        self._check(source_type)
        array = _as_array(array)
        if isinstance(source_type, _INTEGRAL):
            w = pa.scalar(self.width, array.type)
            rem = pc.subtract(array, pc.multiply(pc.divide(array, w), w))  # sign follows the value
            floor_rem = pc.if_else(pc.less(rem, pa.scalar(0, array.type)), pc.add(rem, w), rem)
            return pc.subtract(array, floor_rem)
        if isinstance(source_type, StringType):
            return pc.utf8_slice_codeunits(array, 0, self.width)
        if isinstance(source_type, BinaryType):
            return pc.binary_slice(array, 0, self.width)
        return _map_unique(array, source_type, lambda v: self.apply(v, source_type), array.type)

    def satisfies_order_of(self, other: Transform, source_type: IcebergType | None = None) -> bool:
        if self == other:
            return True
        if not isinstance(other, TruncateTransform):
            return False
        # other must be a function of this truncation: a shorter prefix for strings and binary,
        # a multiple of this width for numbers; without the type only both rules together are safe
        prefix = other.width <= self.width
        multiple = other.width % self.width == 0
        if isinstance(source_type, (StringType, BinaryType)):
            return prefix
        if isinstance(source_type, (IntegerType, LongType, DecimalType)):
            return multiple
        return prefix and multiple

    def __str__(self) -> str:
        return f"truncate[{self.width}]"


class TimeTransform(Transform):
    """Base of ``year``, ``month``, ``day`` and ``hour``: ordinals since 1970 with floor semantics."""

    __slots__ = ()
    preserves_order: ClassVar[bool] = True
    granularity: ClassVar[int] = 0  # hour < day < month < year
    name: ClassVar[str] = ""

    def can_transform(self, source_type: IcebergType) -> bool:
        return isinstance(source_type, (DateType,) + _TIMESTAMPS)

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return INT

    def apply(self, value: Any, source_type: IcebergType) -> Any:
        if value is None:
            return None
        self._check(source_type)
        if isinstance(source_type, DateType):
            return self._from_days(value)
        micros = value // 1000 if isinstance(source_type, _TS_NANOS) else value
        return self._from_micros(micros)

    def _from_days(self, days: int) -> int:
        raise NotImplementedError

    def _from_micros(self, micros: int) -> int:
        return self._from_days(micros // conv.MICROS_PER_DAY)

    def apply_arrow(self, array: pa.Array | pa.ChunkedArray, source_type: IcebergType) -> pa.Array:
        self._check(source_type)
        ints = _storage_ints(_as_array(array), source_type)
        if isinstance(source_type, DateType):
            days = ints
        else:
            micros = _floor_div(ints, 1000) if isinstance(source_type, _TS_NANOS) else ints
            hours = self._arrow_from_micros(micros)
            if hours is not None:
                return hours
            days = _floor_div(micros, conv.MICROS_PER_DAY).cast(pa.int32())
        return self._arrow_from_days(days)

    def _arrow_from_micros(self, micros: pa.Array) -> pa.Array | None:
        return None

    def _arrow_from_days(self, days: pa.Array) -> pa.Array:
        raise NotImplementedError

    def satisfies_order_of(self, other: Transform, source_type: IcebergType | None = None) -> bool:
        if isinstance(other, TimeTransform):
            return self.granularity <= other.granularity
        return self == other

    @property
    def dedup_name(self) -> str:
        # Java refuses two time partitions on one source (e.g. both day(ts) and hour(ts))
        return "time"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return self.name


def _arrow_years(days: pa.Array) -> pa.Array:
    return pc.subtract(pc.year(days.cast(pa.date32())), 1970).cast(pa.int32())


class YearTransform(TimeTransform):
    """``year``: years since 1970."""

    __slots__ = ()
    granularity = 3
    name = "year"

    def _from_days(self, days: int) -> int:
        return conv.civil_from_days(days)[0] - 1970

    def _arrow_from_days(self, days: pa.Array) -> pa.Array:
        return _arrow_years(days)

    def to_human_string(self, value: Any, source_type: IcebergType) -> str:
        return "null" if value is None else f"{1970 + value:04d}"


class MonthTransform(TimeTransform):
    """``month``: months since 1970-01."""

    __slots__ = ()
    granularity = 2
    name = "month"

    def _from_days(self, days: int) -> int:
        y, m, _ = conv.civil_from_days(days)
        return (y - 1970) * 12 + m - 1

    def _arrow_from_days(self, days: pa.Array) -> pa.Array:
        months = pc.month(days.cast(pa.date32())).cast(pa.int32())
        return pc.add(pc.multiply(_arrow_years(days), 12), pc.subtract(months, 1)).cast(pa.int32())

    def to_human_string(self, value: Any, source_type: IcebergType) -> str:
        if value is None:
            return "null"
        y, m = divmod(value, 12)
        return f"{1970 + y:04d}-{m + 1:02d}"


class DayTransform(TimeTransform):
    """``day``: days since 1970-01-01; the result type is ``date`` as in Java 1.10."""

    __slots__ = ()
    granularity = 1
    name = "day"

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return DATE

    def _from_days(self, days: int) -> int:
        return days

    def _arrow_from_days(self, days: pa.Array) -> pa.Array:
        return days.cast(pa.int32()).cast(pa.date32())

    def to_human_string(self, value: Any, source_type: IcebergType) -> str:
        return "null" if value is None else conv.human_date(value)


class HourTransform(TimeTransform):
    """``hour``: hours since 1970-01-01T00:00 (timestamps only)."""

    __slots__ = ()
    granularity = 0
    name = "hour"

    def can_transform(self, source_type: IcebergType) -> bool:
        return isinstance(source_type, _TIMESTAMPS)

    def _from_micros(self, micros: int) -> int:
        return micros // conv.MICROS_PER_HOUR

    def _arrow_from_micros(self, micros: pa.Array) -> pa.Array | None:
        return _floor_div(micros, conv.MICROS_PER_HOUR).cast(pa.int32())

    def to_human_string(self, value: Any, source_type: IcebergType) -> str:
        if value is None:
            return "null"
        days, hour = divmod(value, 24)
        return f"{conv.human_date(days)}-{hour:02d}"


@dataclass(frozen=True, slots=True, repr=False)
class VoidTransform(Transform):
    """``void``: always null; keeps a dropped partition field in v1 specs."""

    def can_transform(self, source_type: IcebergType) -> bool:
        return True

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return source_type

    def apply(self, value: Any, source_type: IcebergType) -> Any:
        return None

    def apply_arrow(self, array: pa.Array | pa.ChunkedArray, source_type: IcebergType) -> pa.Array:
        array = _as_array(array)
        return pa.nulls(len(array), type=array.type)

    def to_human_string(self, value: Any, source_type: IcebergType) -> str:
        return "null"

    @property
    def is_void(self) -> bool:
        return True

    def __str__(self) -> str:
        return "void"


@dataclass(frozen=True, slots=True, repr=False)
class UnknownTransform(Transform):
    """A transform this package does not know, kept as text so metadata round-trips.

    It can be read and written back but never applied.
    """

    text: str

    def can_transform(self, source_type: IcebergType) -> bool:
        return True

    def result_type(self, source_type: IcebergType) -> IcebergType:
        return STRING

    def apply(self, value: Any, source_type: IcebergType) -> Any:
        raise ValidationError(f"Cannot apply unsupported transform {self.text!r}; upgrade or drop the partition field")

    def apply_arrow(self, array: pa.Array | pa.ChunkedArray, source_type: IcebergType) -> pa.Array:
        return self.apply(None, source_type)

    def to_human_string(self, value: Any, source_type: IcebergType) -> str:
        return "null" if value is None else str(value)

    def __str__(self) -> str:
        return self.text


IDENTITY = IdentityTransform()
YEAR = YearTransform()
MONTH = MonthTransform()
DAY = DayTransform()
HOUR = HourTransform()
VOID = VoidTransform()

_SIMPLE: dict[str, Transform] = {"identity": IDENTITY, "year": YEAR, "month": MONTH, "day": DAY, "hour": HOUR, "void": VOID}
_PARAM = re.compile(r"^(bucket|truncate)\[\s*(\d+)\s*\]$", re.IGNORECASE)


def parse_transform(text: str) -> Transform:
    """The transform of a spec string (case-insensitive): ``identity``, ``bucket[16]``,
    ``truncate[3]``, ``year`` ... ; anything else is kept as an :class:`UnknownTransform`."""
    key = text.strip().lower()
    if key in _SIMPLE:
        return _SIMPLE[key]
    if m := _PARAM.match(key):
        n = int(m.group(2))
        return BucketTransform(n) if m.group(1) == "bucket" else TruncateTransform(n)
    return UnknownTransform(text)

