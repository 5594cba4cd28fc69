"""Iceberg data types (spec section "Schemas and Data Types") for format versions 1-3.

Types are frozen value objects: two ``DecimalType(9, 2)`` compare equal, and the parameterless
primitives have module-level singletons (``LONG``, ``STRING`` ...).  ``str(t)`` is the spec's JSON
type string for primitives.

Python representation of values, used by every module of the package:

=====================  ============================================
type                   Python value
=====================  ============================================
boolean                ``bool``
int, long              ``int``
float, double          ``float``
decimal(P, S)          ``decimal.Decimal``
date                   ``int`` days since 1970-01-01
time                   ``int`` microseconds since midnight
timestamp(tz)          ``int`` microseconds since the epoch
timestamp(tz)_ns       ``int`` nanoseconds since the epoch
string                 ``str``
uuid                   ``uuid.UUID``
fixed[L], binary       ``bytes``
struct                 ``tuple`` (or dict keyed by field id in defaults)
list / map             ``list`` / ``dict``
=====================  ============================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar, Iterator

from procedures.errors import InvalidMetadataError

__all__ = [
    "IcebergType",
    "PrimitiveType",
    "NestedType",
    "BooleanType",
    "IntegerType",
    "LongType",
    "FloatType",
    "DoubleType",
    "DecimalType",
    "DateType",
    "TimeType",
    "TimestampType",
    "TimestamptzType",
    "TimestampNanoType",
    "TimestamptzNanoType",
    "StringType",
    "UUIDType",
    "FixedType",
    "BinaryType",
    "UnknownType",
    "VariantType",
    "GeometryType",
    "GeographyType",
    "NestedField",
    "StructType",
    "ListType",
    "MapType",
    "parse_primitive",
    "decimal_required_bytes",
    "BOOLEAN",
    "INT",
    "LONG",
    "FLOAT",
    "DOUBLE",
    "DATE",
    "TIME",
    "TIMESTAMP",
    "TIMESTAMPTZ",
    "TIMESTAMP_NS",
    "TIMESTAMPTZ_NS",
    "STRING",
    "UUID",
    "BINARY",
    "UNKNOWN",
    "VARIANT",
    "MIN_FORMAT_VERSION",
]


class IcebergType:
    """Base of every Iceberg type."""

    __slots__ = ()

    @property
    def is_primitive(self) -> bool:
        """True for every type that is not struct, list or map."""
        return isinstance(self, PrimitiveType)

    @property
    def is_nested(self) -> bool:
        """True for struct, list and map."""
        return isinstance(self, NestedType)


class PrimitiveType(IcebergType):
    """A type with no children."""

    __slots__ = ()
    type_string: ClassVar[str] = ""
    #: lowest table format version that may use the type
    min_format_version: ClassVar[int] = 1

    def __str__(self) -> str:
        return self.type_string

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class NestedType(IcebergType):
    """struct, list or map."""

    __slots__ = ()

    @property
    def fields(self) -> tuple["NestedField", ...]:  # pragma: no cover - overridden
        """The direct child fields (list element and map key/value count as fields)."""
        raise NotImplementedError


def _simple(name: str, type_string: str, min_version: int = 1) -> type:
    cls = type(
        name,
        (PrimitiveType,),
        {
            "__slots__": (),
            "type_string": type_string,
            "min_format_version": min_version,
            "__eq__": lambda self, other: type(self) is type(other),
            "__hash__": lambda self: hash(type_string),
            "__doc__": f"The Iceberg ``{type_string}`` type.",
        },
    )
    cls.__module__ = __name__
    return cls


BooleanType = _simple("BooleanType", "boolean")
IntegerType = _simple("IntegerType", "int")
LongType = _simple("LongType", "long")
FloatType = _simple("FloatType", "float")
DoubleType = _simple("DoubleType", "double")
DateType = _simple("DateType", "date")
TimeType = _simple("TimeType", "time")
TimestampType = _simple("TimestampType", "timestamp")
TimestamptzType = _simple("TimestamptzType", "timestamptz")
TimestampNanoType = _simple("TimestampNanoType", "timestamp_ns", 3)
TimestamptzNanoType = _simple("TimestamptzNanoType", "timestamptz_ns", 3)
StringType = _simple("StringType", "string")
UUIDType = _simple("UUIDType", "uuid")
BinaryType = _simple("BinaryType", "binary")
UnknownType = _simple("UnknownType", "unknown", 3)
VariantType = _simple("VariantType", "variant", 3)


@dataclass(frozen=True, slots=True, repr=False)
class DecimalType(PrimitiveType):
    """``decimal(P, S)``: precision 1..38, any scale up to the precision."""

    precision: int
    scale: int

    def __post_init__(self) -> None:
        if not 1 <= self.precision <= 38:
            raise InvalidMetadataError(f"decimal precision must be 1..38, got {self.precision}")

    def __str__(self) -> str:
        return f"decimal({self.precision}, {self.scale})"

    def __repr__(self) -> str:
        return f"DecimalType({self.precision}, {self.scale})"


@dataclass(frozen=True, slots=True, repr=False)
class FixedType(PrimitiveType):
    """``fixed[L]``: exactly L bytes."""

    length: int

    def __str__(self) -> str:
        return f"fixed[{self.length}]"

    def __repr__(self) -> str:
        return f"FixedType({self.length})"


@dataclass(frozen=True, slots=True, repr=False)
class GeometryType(PrimitiveType):
    """``geometry(C)`` (v3); carried through metadata, not interpreted."""

    crs: str = "OGC:CRS84"
    min_format_version: ClassVar[int] = 3

    def __str__(self) -> str:
        return f"geometry({self.crs})"

    def __repr__(self) -> str:
        return f"GeometryType({self.crs!r})"


@dataclass(frozen=True, slots=True, repr=False)
class GeographyType(PrimitiveType):
    """``geography(C, A)`` (v3); carried through metadata, not interpreted."""

    crs: str = "OGC:CRS84"
    algorithm: str = "spherical"
    min_format_version: ClassVar[int] = 3

    def __str__(self) -> str:
        return f"geography({self.crs}, {self.algorithm})"

    def __repr__(self) -> str:
        return f"GeographyType({self.crs!r}, {self.algorithm!r})"


BOOLEAN = BooleanType()
INT = IntegerType()
LONG = LongType()
FLOAT = FloatType()
DOUBLE = DoubleType()
DATE = DateType()
TIME = TimeType()
TIMESTAMP = TimestampType()
TIMESTAMPTZ = TimestamptzType()
TIMESTAMP_NS = TimestampNanoType()
TIMESTAMPTZ_NS = TimestamptzNanoType()
STRING = StringType()
UUID = UUIDType()
BINARY = BinaryType()
UNKNOWN = UnknownType()
VARIANT = VariantType()

MIN_FORMAT_VERSION = 1

_SIMPLE = {
    t.type_string: t
    for t in (
        BOOLEAN, INT, LONG, FLOAT, DOUBLE, DATE, TIME, TIMESTAMP, TIMESTAMPTZ,
        TIMESTAMP_NS, TIMESTAMPTZ_NS, STRING, UUID, BINARY, UNKNOWN, VARIANT,
    )
}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
_FIXED = re.compile(r"^fixed\[\s*(\d+)\s*\]$")
_GEOMETRY = re.compile(r"^geometry\s*(?:\(\s*([^)]*?)\s*\))?$")
_GEOGRAPHY = re.compile(r"^geography\s*(?:\(\s*([^,)]*?)\s*(?:,\s*([^)]*?)\s*)?\))?$")


def parse_primitive(text: str) -> PrimitiveType:
    """Parse a primitive type string of the spec's JSON form (``long``, ``decimal(9, 2)`` ...).

    Raises :class:`InvalidMetadataError` naming the string when it is not a known type.
    """
    key = text.strip().lower()
    if key in _SIMPLE:
        return _SIMPLE[key]
    if m := _DECIMAL.match(key):
        return DecimalType(int(m.group(1)), int(m.group(2)))
    if m := _FIXED.match(key):
        return FixedType(int(m.group(1)))
    if m := _GEOMETRY.match(text.strip()):
        return GeometryType(m.group(1) or "OGC:CRS84")
    if m := _GEOGRAPHY.match(text.strip()):
        return GeographyType(m.group(1) or "OGC:CRS84", m.group(2) or "spherical")
    raise InvalidMetadataError(f"unknown Iceberg type {text!r}")


def decimal_required_bytes(precision: int) -> int:
    """Smallest byte count whose two's complement holds every unscaled value of the precision."""
    n = 1
    while 2 ** (8 * n - 1) <= 10**precision:
        n += 1
    return n


@dataclass(frozen=True, slots=True)
class NestedField:
    """A named field with an id: a struct member, list element or map key/value.

    ``initial_default`` and ``write_default`` (v3) hold Python values in this module's
    representation; ``None`` means no default.
    """

    field_id: int
    name: str
    field_type: IcebergType
    required: bool = False
    doc: str | None = None
    initial_default: object = None
    write_default: object = None

    @property
    def optional(self) -> bool:
        """True when the field may hold null."""
        return not self.required

    def with_type(self, field_type: IcebergType) -> "NestedField":
        """A copy of the field with another type."""
        return NestedField(
            self.field_id, self.name, field_type, self.required, self.doc,
            self.initial_default, self.write_default,
        )

    def __str__(self) -> str:
        req = "required" if self.required else "optional"
        return f"{self.field_id}: {self.name}: {req} {self.field_type}"


@dataclass(frozen=True, slots=True)
class StructType(NestedType):
    """An ordered tuple of named fields."""

    fields: tuple[NestedField, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.fields, tuple):
            object.__setattr__(self, "fields", tuple(self.fields))

    def field_by_id(self, field_id: int) -> NestedField | None:
        """The direct child with this id, or None."""
        for f in self.fields:
            if f.field_id == field_id:
                return f
        return None

    def field_by_name(self, name: str, case_sensitive: bool = True) -> NestedField | None:
        """The direct child with this name, or None."""
        if case_sensitive:
            return next((f for f in self.fields if f.name == name), None)
        lowered = name.lower()
        return next((f for f in self.fields if f.name.lower() == lowered), None)

    def __iter__(self) -> Iterator[NestedField]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    def __str__(self) -> str:
        return "struct<" + ", ".join(str(f) for f in self.fields) + ">"


@dataclass(frozen=True, slots=True)
class ListType(NestedType):
    """``list<element>`` whose element has its own field id."""

    element_id: int
    element_type: IcebergType
    element_required: bool = False

    @property
    def element_field(self) -> NestedField:
        """The element as a field named ``element``."""
        return NestedField(self.element_id, "element", self.element_type, self.element_required)

    @property
    def fields(self) -> tuple[NestedField, ...]:
        return (self.element_field,)

    def __str__(self) -> str:
        return f"list<{self.element_type}>"


@dataclass(frozen=True, slots=True)
class MapType(NestedType):
    """``map<key, value>``; the key is always required."""

    key_id: int
    key_type: IcebergType
    value_id: int
    value_type: IcebergType
    value_required: bool = False

    @property
    def key_field(self) -> NestedField:
        """The key as a required field named ``key``."""
        return NestedField(self.key_id, "key", self.key_type, True)

    @property
    def value_field(self) -> NestedField:
        """The value as a field named ``value``."""
        return NestedField(self.value_id, "value", self.value_type, self.value_required)

    @property
    def fields(self) -> tuple[NestedField, ...]:
        return (self.key_field, self.value_field)

    def __str__(self) -> str:
        return f"map<{self.key_type}, {self.value_type}>"
