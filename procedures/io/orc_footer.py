"""The parts of an ORC file's footer that Iceberg metrics need: the type tree (kinds, field names,
type attributes such as ``iceberg.id``) and the file-level column statistics.

pyarrow opens ORC files but exposes no column statistics; it does hand out the file tail as a
serialized ``FileTail`` protobuf message whose footer is already decompressed, so only the
protobuf wire format is decoded here (ORC's ``orc_proto.proto``: ``FileTail``, ``Footer``,
``Type``, ``ColumnStatistics`` and its per-kind messages).  Columns are numbered as ORC numbers
them: a pre-order walk of the type tree, the root struct being column 0.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import pyarrow.orc as po

from procedures.errors import InvalidMetadataError

__all__ = ["OrcKind", "OrcType", "OrcColumnStats", "OrcFooter", "parse_file_tail", "read_orc_footer"]


class OrcKind:
    """``Type.Kind`` numbers."""

    BOOLEAN, BYTE, SHORT, INT, LONG, FLOAT, DOUBLE, STRING, BINARY, TIMESTAMP = range(10)
    LIST, MAP, STRUCT, UNION, DECIMAL, DATE, VARCHAR, CHAR, TIMESTAMP_INSTANT = range(10, 19)


@dataclass(frozen=True)
class OrcType:
    """One node of the type tree: its kind, child column ids, struct field names, attributes."""

    kind: int
    subtypes: tuple[int, ...] = ()
    field_names: tuple[str, ...] = ()
    precision: int = 0
    scale: int = 0
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OrcColumnStats:
    """File-level statistics of one column; ``None`` where the writer kept none."""

    number_of_values: int = 0
    has_null: bool = False
    bytes_on_disk: int = 0
    int_min: int | None = None
    int_max: int | None = None
    double_min: float | None = None
    double_max: float | None = None
    string_min: str | None = None
    string_max: str | None = None
    decimal_min: str | None = None
    decimal_max: str | None = None
    date_min: int | None = None
    date_max: int | None = None
    #: timestamps in UTC as (millis, nanos within the milli or None)
    timestamp_min: tuple[int, int | None] | None = None
    timestamp_max: tuple[int, int | None] | None = None
    true_count: int | None = None


@dataclass(frozen=True)
class OrcFooter:
    """Row count, types by column id and statistics by column id."""

    number_of_rows: int
    types: tuple[OrcType, ...]
    statistics: tuple[OrcColumnStats, ...]


# ------------------------------------------------------------------------------ protobuf wire
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _fields(buf: bytes) -> dict[int, list[Any]]:
    """Every field of one message: number -> values (ints for varints, bytes otherwise)."""
    out: dict[int, list[Any]] = {}
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _first(msg: dict[int, list[Any]], number: int, default: Any = None) -> Any:
    values = msg.get(number)
    return values[0] if values else default


def _packed_uints(values: list[Any]) -> list[int]:
    out: list[int] = []
    for v in values:
        if isinstance(v, int):
            out.append(v)
            continue
        pos = 0
        while pos < len(v):
            n, pos = _varint(v, pos)
            out.append(n)
    return out


def _double(raw: bytes | None) -> float | None:
    return None if raw is None else struct.unpack("<d", raw)[0]


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else bytes(raw).decode("utf-8")


# ------------------------------------------------------------------------------ messages
def _type(buf: bytes) -> OrcType:
    m = _fields(buf)
    attrs = {}
    for pair in m.get(7, []):
        p = _fields(pair)
        attrs[_text(_first(p, 1, b""))] = _text(_first(p, 2, b""))
    return OrcType(
        kind=_first(m, 1, 0),
        subtypes=tuple(_packed_uints(m.get(2, []))),
        field_names=tuple(_text(v) for v in m.get(3, [])),
        precision=_first(m, 5, 0),
        scale=_first(m, 6, 0),
        attributes=attrs,
    )


def _timestamp(millis: int | None, nanos: int | None) -> tuple[int, int | None] | None:
    if millis is None:
        return None
    # ORC stores the nanoseconds within the millisecond plus one, so that 0 means "not written"
    return (_zigzag(millis), nanos - 1 if nanos else None)


def _signed_min_max(s: dict[int, list[Any]]) -> tuple[int | None, int | None]:
    """Fields 1 and 2 (minimum, maximum) of a statistics message holding zigzag integers."""
    lo, hi = _first(s, 1), _first(s, 2)
    return (None if lo is None else _zigzag(lo)), (None if hi is None else _zigzag(hi))


def _stats(buf: bytes) -> OrcColumnStats:
    m = _fields(buf)
    kw: dict[str, Any] = {
        "number_of_values": _first(m, 1, 0),
        "has_null": bool(_first(m, 10, 0)),
        "bytes_on_disk": _first(m, 11, 0),
    }
    if (raw := _first(m, 2)) is not None:
        kw["int_min"], kw["int_max"] = _signed_min_max(_fields(raw))
    if (raw := _first(m, 3)) is not None:
        s = _fields(raw)
        kw["double_min"], kw["double_max"] = _double(_first(s, 1)), _double(_first(s, 2))
    if (raw := _first(m, 4)) is not None:
        s = _fields(raw)
        # a value longer than the writer's limit is kept only as lowerBound/upperBound (4, 5),
        # which readers do not report as the minimum or maximum
        kw["string_min"], kw["string_max"] = _text(_first(s, 1)), _text(_first(s, 2))
    if (raw := _first(m, 5)) is not None:
        counts = _packed_uints(_fields(raw).get(1, []))
        kw["true_count"] = counts[0] if counts else 0
    if (raw := _first(m, 6)) is not None:
        s = _fields(raw)
        kw["decimal_min"], kw["decimal_max"] = _text(_first(s, 1)), _text(_first(s, 2))
    if (raw := _first(m, 7)) is not None:
        kw["date_min"], kw["date_max"] = _signed_min_max(_fields(raw))
    if (raw := _first(m, 9)) is not None:
        s = _fields(raw)
        kw["timestamp_min"] = _timestamp(_first(s, 3), _first(s, 5))
        kw["timestamp_max"] = _timestamp(_first(s, 4), _first(s, 6))
    return OrcColumnStats(**kw)


def parse_file_tail(tail: bytes) -> OrcFooter:
    """The footer of a serialized ``FileTail`` message (pyarrow's ``serialized_file_tail()``)."""
    footer = _fields(_first(_fields(tail), 2, b""))
    return OrcFooter(
        number_of_rows=_first(footer, 6, 0),
        types=tuple(_type(t) for t in footer.get(4, [])),
        statistics=tuple(_stats(s) for s in footer.get(7, [])),
    )


def read_orc_footer(stream: Any, location: str) -> OrcFooter:
    """The footer of the ORC file open as ``stream``; InvalidMetadataError naming ``location``
    when it is no readable ORC file."""
    try:
        tail = po.ORCFile(stream).reader.serialized_file_tail()
        return parse_file_tail(tail)
    except Exception as e:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError ...: name the file
        raise InvalidMetadataError(f"cannot read the ORC footer: {e}", location=location) from None
