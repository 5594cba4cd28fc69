"""Sort orders: spec "Sorting" and the sort order JSON of Appendix C (spec-onfile §5.3).

Also parses Spark-style sort strings (``"name ASC NULLS LAST, id DESC"``, as taken by
``rewrite_data_files(sort_order => ...)``) and provides the spec's float ordering
(-NaN < -Infinity < ... < -0.0 < 0.0 < ... < Infinity < NaN) as a sort key.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from enum import Enum
from typing import Any, NoReturn

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.schema import Schema
from procedures.spec.transforms import (
    DAY,
    HOUR,
    IDENTITY,
    MONTH,
    YEAR,
    BucketTransform,
    Transform,
    TruncateTransform,
    parse_transform,
)

__all__ = [
    "SortDirection",
    "NullOrder",
    "SortField",
    "SortOrder",
    "UNSORTED_SORT_ORDER",
    "sort_order_to_json",
    "sort_order_from_json",
    "parse_sort_order",
    "float_sort_key",
]


class SortDirection(str, Enum):
    """Sort direction; the value is the spec's JSON string."""

    ASC = "asc"
    DESC = "desc"


class NullOrder(str, Enum):
    """Where nulls sort; the value is the spec's JSON string."""

    NULLS_FIRST = "nulls-first"
    NULLS_LAST = "nulls-last"


@dataclass(frozen=True, slots=True)
class SortField:
    """One sort key: a transform of a source column, a direction and a null order."""

    source_id: int
    transform: Transform = IDENTITY
    direction: SortDirection = SortDirection.ASC
    null_order: NullOrder = NullOrder.NULLS_FIRST

    def satisfies(self, other: "SortField") -> bool:
        """True when data sorted by this field is also sorted by ``other``."""
        return (
            self.source_id == other.source_id
            and self.direction == other.direction
            and self.null_order == other.null_order
            and self.transform.satisfies_order_of(other.transform)
        )

    def __str__(self) -> str:
        return f"{self.transform}({self.source_id}) {self.direction.value} {self.null_order.value}"


@dataclass(frozen=True, slots=True)
class SortOrder:
    """A sort order; id 0 with no fields is reserved for "unsorted"."""

    order_id: int = 0
    fields: tuple[SortField, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.fields, tuple):
            object.__setattr__(self, "fields", tuple(self.fields))
        if self.order_id == 0 and self.fields:
            raise ValidationError("Sort order id 0 is reserved for the unsorted order; use an id of 1 or more")
        if self.order_id != 0 and not self.fields:
            raise ValidationError(f"Sort order {self.order_id} has no fields; only order id 0 may be unsorted")

    def is_unsorted(self) -> bool:
        """True for the unsorted order."""
        return not self.fields

    def satisfies(self, other: "SortOrder") -> bool:
        """True when data sorted by this order is also sorted by ``other`` (Java ``satisfies``)."""
        if other.is_unsorted():
            return True
        if len(other.fields) > len(self.fields):
            return False
        return all(a.satisfies(b) for a, b in zip(self.fields, other.fields))

    def same_order(self, other: "SortOrder") -> bool:
        """Same fields, ignoring the order id."""
        return self.fields == other.fields

    def __str__(self) -> str:
        return "[" + ", ".join(str(f) for f in self.fields) + "]"


UNSORTED_SORT_ORDER = SortOrder(0, ())


# --------------------------------------------------------------------------- JSON


def sort_order_to_json(order: SortOrder) -> dict[str, Any]:
    """``{"order-id": N, "fields": [...]}`` as in table metadata."""
    return {
        "order-id": order.order_id,
        "fields": [
            {
                "transform": str(f.transform),
                "source-id": f.source_id,
                "direction": f.direction.value,
                "null-order": f.null_order.value,
            }
            for f in order.fields
        ],
    }


def sort_order_from_json(obj: Any, *, location: str | None = None) -> SortOrder:
    """A sort order from its JSON object; a one-element ``source-ids`` is read as ``source-id``."""
    if not isinstance(obj, dict) or "order-id" not in obj or not isinstance(obj.get("fields"), list):
        raise InvalidMetadataError(f"Cannot parse sort order from {obj!r}: expected order-id and fields", location=location)
    fields = []
    for f in obj["fields"]:
        try:
            if "source-id" in f:
                source_id = int(f["source-id"])
            elif len(f["source-ids"]) == 1:
                source_id = int(f["source-ids"][0])
            else:
                raise ValueError("multi-argument transforms are not supported")
            fields.append(SortField(
                source_id,
                parse_transform(str(f["transform"])),
                SortDirection(str(f["direction"]).lower()),
                NullOrder(str(f["null-order"]).lower()),
            ))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidMetadataError(f"Cannot parse sort field {f!r}: {e}", location=location) from None
    try:
        return SortOrder(int(obj["order-id"]), tuple(fields))
    except ValidationError as e:
        raise InvalidMetadataError(str(e), location=location) from None


# --------------------------------------------------------------------------- Spark-style strings


_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|([A-Za-z_][A-Za-z0-9_$]*)|(-?\d+)|([(),.])|(\S))")
_FUNCS = {
    "years": YEAR, "year": YEAR, "months": MONTH, "month": MONTH,
    "days": DAY, "day": DAY, "date": DAY, "hours": HOUR, "hour": HOUR, "identity": IDENTITY,
}


class _Parser:
    def __init__(self, text: str, schema: Schema, case_sensitive: bool) -> None:
        self.text = text
        self.schema = schema
        self.case_sensitive = case_sensitive
        self.tokens: list[tuple[str, str]] = []  # (kind, text)
        for m in _TOKEN.finditer(text):
            if m.group(1):
                self.tokens.append(("ident", m.group(1)[1:-1].replace("``", "`")))
            elif m.group(2):
                self.tokens.append(("word", m.group(2)))
            elif m.group(3):
                self.tokens.append(("num", m.group(3)))
            elif m.group(4):
                self.tokens.append(("punct", m.group(4)))
            elif m.group(5):
                self.error(f"unexpected character {m.group(5)!r}")
        self.pos = 0

    def error(self, what: str) -> NoReturn:
        raise ValidationError(f"Cannot parse sort order {self.text!r}: {what}")

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            self.error("unexpected end of text")
        self.pos += 1
        return tok  # type: ignore[return-value]

    def keyword(self, *words: str) -> str | None:
        tok = self.peek()
        if tok and tok[0] == "word" and tok[1].upper() in words:
            self.pos += 1
            return tok[1].upper()
        return None

    def expect(self, punct: str) -> None:
        tok = self.take()
        if tok != ("punct", punct):
            self.error(f"expected {punct!r} but found {tok[1]!r}")

    def column(self) -> int:
        kind, name = self.take()
        if kind not in ("ident", "word"):
            self.error(f"expected a column name but found {name!r}")
        parts = [name]
        while self.peek() == ("punct", "."):
            self.pos += 1
            kind, part = self.take()
            if kind not in ("ident", "word"):
                self.error(f"expected a column name after '.' but found {part!r}")
            parts.append(part)
        full = ".".join(parts)
        field = self.schema.find_field_or_none(full, self.case_sensitive)
        if field is None:
            self.error(f"column {full!r} not found in the table schema")
        return field.field_id  # type: ignore[union-attr]

    def term(self) -> tuple[int, Transform]:
        tok = self.peek()
        nxt = self.tokens[self.pos + 1] if self.pos + 1 < len(self.tokens) else None
        if tok and tok[0] == "word" and nxt == ("punct", "("):
            func = tok[1].lower()
            self.pos += 2
            if func in _FUNCS:
                source = self.column()
                self.expect(")")
                return source, _FUNCS[func]
            if func in ("bucket", "truncate"):
                args: list[int | str] = []
                for i in range(2):
                    if i:
                        self.expect(",")
                    t = self.peek()
                    if t and t[0] == "num":
                        args.append(int(self.take()[1]))
                    else:
                        args.append(str(self.column()))
                self.expect(")")
                nums = [a for a in args if isinstance(a, int)]
                cols = [a for a in args if isinstance(a, str)]
                if len(nums) != 1 or len(cols) != 1:
                    self.error(f"{func}() takes one column and one number")
                transform = BucketTransform(nums[0]) if func == "bucket" else TruncateTransform(nums[0])
                return int(cols[0]), transform
            self.error(f"unknown sort transform {tok[1]!r}; use years, months, days, hours, bucket or truncate")
        return self.column(), IDENTITY

    def parse(self, order_id: int) -> SortOrder:
        fields = []
        while True:
            source, transform = self.term()
            direction = SortDirection.DESC if self.keyword("ASC", "DESC") == "DESC" else SortDirection.ASC
            if self.keyword("NULLS"):
                which = self.keyword("FIRST", "LAST")
                if which is None:
                    tok = self.peek()
                    self.error(f"expected FIRST or LAST after NULLS but found {tok[1] if tok else 'the end'!r}")
                nulls = NullOrder.NULLS_FIRST if which == "FIRST" else NullOrder.NULLS_LAST
            else:
                # Spark's defaults
                nulls = NullOrder.NULLS_FIRST if direction is SortDirection.ASC else NullOrder.NULLS_LAST
            fields.append(SortField(source, transform, direction, nulls))
            tok = self.peek()
            if tok is None:
                break
            if tok != ("punct", ","):
                self.error(f"unexpected token {tok[1]!r}; separate sort keys with commas")
            self.pos += 1
        return SortOrder(order_id, tuple(fields))


def parse_sort_order(text: str, schema: Schema, *, order_id: int = 1, case_sensitive: bool = False) -> SortOrder:
    """Parse a Spark-style sort string such as ``"name ASC NULLS LAST, id DESC"``.

    Terms may be columns (dotted or back-quoted) or ``years/months/days/hours(col)``,
    ``bucket(N, col)`` and ``truncate(col, W)`` (either argument order).  Without ``NULLS``,
    ASC sorts nulls first and DESC nulls last, as Spark does.  Errors name the bad column or token.
    """
    if not text or not text.strip():
        raise ValidationError("Cannot parse sort order: the text is empty")
    return _Parser(text, schema, case_sensitive).parse(order_id)


# --------------------------------------------------------------------------- float ordering


def float_sort_key(value: float) -> int:
    """Sort key giving the spec's float order: -NaN < -Inf < ... < -0.0 < 0.0 < ... < Inf < NaN.

    The IEEE bits read as a signed integer order positive values correctly; flipping the
    magnitude bits of negative values reverses their order and keeps them below the positives.
    """
    bits = struct.unpack("<q", struct.pack("<d", float(value)))[0]
    return bits if bits >= 0 else bits ^ 0x7FFFFFFFFFFFFFFF
