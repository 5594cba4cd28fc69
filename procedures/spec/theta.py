"""Theta sketches as Iceberg's ``apache-datasketches-theta-v1`` Puffin blobs expect them.

Iceberg Java (``ThetaSketchAgg``) feeds a column's values to an Apache DataSketches update sketch as
their *single-value binary form* (spec Appendix D, :func:`procedures.spec.conversions.to_bytes`), as
the value reaches it through Spark: a ``uuid`` column is a Spark string, so its canonical
36-character text is hashed, not its 16 bytes.  A sketch hashes each byte string with MurmurHash3
x64-128 and the default seed 9001 and keeps the first 64-bit half shifted right by one.

This module is the pure half: the bytes a value is hashed as (:func:`sketch_input`), the hash
(:func:`value_hash`), a k-minimum-values accumulator of hashes (:class:`HashSketch`) and its
serialized *compact theta sketch* (serial version 3, family 3, the format every DataSketches
library reads), so executors need only ``mmh3``.  Unions, estimates and the blob bytes are left to
the ``datasketches`` library on the driver.
"""

from __future__ import annotations

import heapq
import struct
import uuid
from typing import Any, Iterable

import mmh3

from procedures.errors import ValidationError
from procedures.spec.conversions import to_bytes
from procedures.spec.types import (
    GeographyType,
    GeometryType,
    IcebergType,
    TimestampNanoType,
    TimestamptzNanoType,
    UnknownType,
    UUIDType,
    VariantType,
)

__all__ = [
    "THETA_BLOB_TYPE",
    "NDV_PROPERTY",
    "DEFAULT_SEED",
    "DEFAULT_LG_K",
    "MAX_THETA",
    "seed_hash",
    "sketch_input",
    "value_hash",
    "HashSketch",
    "check_sketch_type",
    "can_sketch",
    "compact_sketch_bytes",
]

THETA_BLOB_TYPE = "apache-datasketches-theta-v1"
NDV_PROPERTY = "ndv"
DEFAULT_SEED = 9001
#: Java's ``UpdateSketch.builder()`` default: 4096 nominal entries
DEFAULT_LG_K = 12
MAX_THETA = (1 << 63) - 1
_MASK64 = (1 << 64) - 1

_SERIAL_VERSION = 3
_COMPACT_FAMILY = 3
_FLAG_READ_ONLY = 2
_FLAG_EMPTY = 4
_FLAG_COMPACT = 8
_FLAG_ORDERED = 16
_NO_SKETCH = (UnknownType, VariantType, GeometryType, GeographyType, TimestampNanoType, TimestamptzNanoType)


def seed_hash(seed: int = DEFAULT_SEED) -> int:
    """The 16-bit seed hash stored in a sketch's preamble (the seed as a long, MurmurHash3 seed 0)."""
    return mmh3.hash64(struct.pack("<q", seed), 0)[0] & 0xFFFF


def can_sketch(type_: IcebergType) -> bool:
    """True for the primitive types a theta sketch of Java's can take."""
    return type_.is_primitive and not isinstance(type_, _NO_SKETCH)


def check_sketch_type(name: str, type_: IcebergType) -> None:
    """Raise ValidationError when a column of this type cannot be sketched: nested types (Java's
    message) and the primitive types Spark cannot hand to Java's aggregate."""
    if not type_.is_primitive:
        raise ValidationError(f"Can't compute stats on non-primitive type column: {name} ({type_})")
    if isinstance(type_, _NO_SKETCH):
        raise ValidationError(
            f"Can't compute stats on column {name} of type {type_}: Iceberg Java's Spark reader has no value of "
            f"this type to feed a theta sketch")


def sketch_input(value: Any, type_: IcebergType) -> bytes:
    """The bytes Java's ``ThetaSketchAgg`` hashes for ``value`` (never None) of ``type_``."""
    if isinstance(type_, UUIDType):
        if isinstance(value, (bytes, bytearray)):
            value = uuid.UUID(bytes=bytes(value))
        return str(value).encode("ascii")
    return to_bytes(value, type_)


def value_hash(data: bytes, seed: int = DEFAULT_SEED) -> int:
    """The 63-bit hash a theta sketch keeps for ``data``."""
    return (mmh3.hash64(data, seed)[0] & _MASK64) >> 1


class HashSketch:
    """The ``k`` smallest distinct hashes seen and the threshold ``theta`` below which every
    distinct hash was kept: a KMV sketch that a theta union merges with any other."""

    def __init__(self, lg_k: int = DEFAULT_LG_K) -> None:
        self.k = 1 << lg_k
        self.theta = MAX_THETA
        self.hashes: set[int] = set()

    def update(self, value: Any, type_: IcebergType) -> None:
        """Add one value (None is skipped, as Java skips nulls)."""
        if value is None:
            return
        data = sketch_input(value, type_)
        if data:  # an empty byte string is rejected by the sketch, as in Java
            self.update_hash(value_hash(data))

    def update_all(self, values: Iterable[Any], type_: IcebergType) -> None:
        """Add many values."""
        for v in values:
            self.update(v, type_)

    def update_hash(self, h: int) -> None:
        """Add one hash."""
        if h < self.theta:
            self.hashes.add(h)
            if len(self.hashes) > 2 * self.k:
                self._trim()

    def _trim(self) -> None:
        if len(self.hashes) > self.k:
            kept = heapq.nsmallest(self.k + 1, self.hashes)
            self.theta = kept[-1]
            self.hashes = set(kept[:-1])

    def compact_bytes(self, seed: int = DEFAULT_SEED) -> bytes:
        """The sketch as a serialized ordered compact theta sketch."""
        self._trim()
        return compact_sketch_bytes(sorted(self.hashes), self.theta, seed_hash(seed))


def compact_sketch_bytes(hashes: list[int], theta: int, seed_hash16: int) -> bytes:
    """A serialized ordered compact theta sketch (DataSketches serial version 3) of sorted
    ``hashes`` all below ``theta``."""
    flags = _FLAG_READ_ONLY | _FLAG_COMPACT | _FLAG_ORDERED
    if not hashes and theta == MAX_THETA:
        return struct.pack("<BBBBBBH", 1, _SERIAL_VERSION, _COMPACT_FAMILY, 0, 0, flags | _FLAG_EMPTY, seed_hash16)
    preamble_longs = 2 if theta == MAX_THETA else 3
    head = struct.pack("<BBBBBBHII", preamble_longs, _SERIAL_VERSION, _COMPACT_FAMILY, 0, 0, flags, seed_hash16,
                       len(hashes), 0)
    if preamble_longs == 3:
        head += struct.pack("<q", theta)
    return head + struct.pack(f"<{len(hashes)}q", *hashes)
