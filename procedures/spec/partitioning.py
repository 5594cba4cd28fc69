"""Partition specs: spec "Partitioning", "Partition Evolution" and the partition spec JSON of
Appendix C (spec-onfile §3.4, §5.3, §7.3).

A :class:`PartitionSpec` is an ordered tuple of :class:`PartitionField`; partition values are
tuples in that order.  :class:`PartitionSpecBuilder` assigns field ids (v1: 1000, 1001, ... per
spec; v2+: ids unique across specs, reusing the id of a field with the same source and
transform) and Java's default field names, and enforces Java's naming and redundancy rules.
Paths use Java's ``DefaultLocationProvider`` layout with ``URLEncoder`` escaping.
"""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Iterable, Sequence
from urllib.parse import quote_plus, unquote_plus

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec import conversions as conv
from procedures.spec.schema import Schema
from procedures.spec.types import (
    UNKNOWN,
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
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from procedures.spec.transforms import (
    DAY,
    HOUR,
    IDENTITY,
    MONTH,
    VOID,
    YEAR,
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    Transform,
    TruncateTransform,
    UnknownTransform,
    YearTransform,
    parse_transform,
)

__all__ = [
    "PartitionField",
    "PartitionSpec",
    "PartitionSpecBuilder",
    "UNPARTITIONED_SPEC",
    "PARTITION_FIELD_ID_START",
    "spec_to_json",
    "spec_from_json",
    "fields_to_json",
    "fields_from_json",
    "assign_fresh_partition_ids",
    "escape_path_part",
    "HIVE_NULL",
    "value_from_partition_string",
]

#: the first partition field id; ``last-partition-id`` of a table without partition fields is 999
PARTITION_FIELD_ID_START = 1000
#: the null marker Hive writes into paths, read back as null as Java's ``fromPartitionString`` does
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True, slots=True)
class PartitionField:
    """One partition field: a transform of a source column, with a field id and a name."""

    source_id: int
    field_id: int
    transform: Transform
    name: str

    def equivalent_to(self, other: "PartitionField") -> bool:
        """Same source, transform and name (ids aside): the fields partition data identically."""
        return (self.source_id, str(self.transform), self.name) == (other.source_id, str(other.transform), other.name)

    def __str__(self) -> str:
        return f"{self.field_id}: {self.name}: {self.transform}({self.source_id})"


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """A partition spec: a spec id and partition fields in partition-tuple order."""

    spec_id: int = 0
    fields: tuple[PartitionField, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.fields, tuple):
            object.__setattr__(self, "fields", tuple(self.fields))

    def is_unpartitioned(self) -> bool:
        """True when no field partitions data: no fields, or only void fields (as Java)."""
        return all(f.transform.is_void for f in self.fields)

    def is_partitioned(self) -> bool:
        """True when at least one field is not void."""
        return not self.is_unpartitioned()

    @property
    def last_assigned_field_id(self) -> int:
        """The highest field id in the spec, or 999 when it has no fields."""
        return max((f.field_id for f in self.fields), default=PARTITION_FIELD_ID_START - 1)

    def compatible_with(self, other: "PartitionSpec") -> bool:
        """Same fields in the same order by source, transform and name (ids ignored), as Java's
        ``compatibleWith``: such a spec can be reused instead of adding a new one."""
        return len(self.fields) == len(other.fields) and all(
            a.equivalent_to(b) for a, b in zip(self.fields, other.fields)
        )

    def fields_by_source_id(self, source_id: int) -> list[PartitionField]:
        """The fields whose source column is ``source_id``."""
        return [f for f in self.fields if f.source_id == source_id]

    def partition_type(self, schema: Schema) -> StructType:
        """The struct of partition values: field ids, names and result types, all optional.

        A field whose source column is no longer in the schema gets the ``unknown`` type, as
        old specs may still reference dropped columns.
        """
        out = []
        for f in self.fields:
            source = schema.find_field_or_none(f.source_id)
            result = UNKNOWN if source is None else f.transform.result_type(source.field_type)
            out.append(NestedField(f.field_id, f.name, result, False))
        return StructType(tuple(out))

    def partition_to_path(self, values: Sequence[Any], schema: Schema) -> str:
        """``name=value/...`` as Java's ``PartitionSpec.partitionToPath`` builds it."""
        if len(values) != len(self.fields):
            raise ValidationError(
                f"Partition tuple {tuple(values)!r} has {len(values)} values but spec {self.spec_id} has {len(self.fields)} fields"
            )
        parts = []
        for f, v in zip(self.fields, values):
            source_type = _source_type(schema, f)
            text = f.transform.to_human_string(v, source_type) if source_type is not None else (
                "null" if v is None else str(v)
            )
            parts.append(f"{escape_path_part(f.name)}={escape_path_part(text)}")
        return "/".join(parts)

    def partition_from_path(self, path: str, schema: Schema) -> tuple[Any, ...]:
        """The partition tuple of a path written by :meth:`partition_to_path`.

        ``path`` may be a full data file location: the segments before the partition and a
        trailing file name are ignored.  ``null`` and ``__HIVE_DEFAULT_PARTITION__`` read as null.
        """
        segments = [s for s in path.split("/") if s]
        if segments and "=" not in segments[-1]:
            segments = segments[:-1]
        n = len(self.fields)
        if n == 0:
            return ()
        if len(segments) < n:
            raise ValidationError(f"Path {path!r} has fewer than {n} partition segments for spec {self.spec_id}")
        out = []
        for f, seg in zip(self.fields, segments[-n:]):
            raw_name, eq, raw_value = seg.partition("=")
            if not eq or unquote_plus(raw_name) != f.name:
                raise ValidationError(f"Path {path!r}: expected segment {f.name}=..., got {seg!r}")
            text = unquote_plus(raw_value)
            if text in ("null", HIVE_NULL) or f.transform.is_void:
                out.append(None)
                continue
            out.append(_parse_human(text, f.transform, _source_type(schema, f), path))
        return tuple(out)

    def __str__(self) -> str:
        return "[" + ", ".join(str(f) for f in self.fields) + "]"


UNPARTITIONED_SPEC = PartitionSpec(0, ())


def escape_path_part(text: str) -> str:
    """Java ``URLEncoder.encode(text, "UTF-8")``: space -> ``+``, keep ``A-Za-z0-9.-*_``."""
    return quote_plus(text, safe="*").replace("~", "%7E")


def _source_type(schema: Schema, f: PartitionField) -> IcebergType | None:
    source = schema.find_field_or_none(f.source_id)
    return None if source is None else source.field_type


def _split_date(text: str) -> int:
    year, month, day = text.rsplit("-", 2)
    return conv.days_from_civil(int(year), int(month), int(day))


def _parse_human(text: str, transform: Transform, source_type: IcebergType | None, path: str) -> Any:
    """Inverse of the human strings of §7.3 for one partition value."""
    try:
        if isinstance(transform, BucketTransform):
            return int(text)
        if isinstance(transform, YearTransform):
            return int(text) - 1970
        if isinstance(transform, MonthTransform):
            year, month = text.rsplit("-", 1)
            return (int(year) - 1970) * 12 + int(month) - 1
        if isinstance(transform, DayTransform):
            return _split_date(text)
        if isinstance(transform, HourTransform):
            day, hour = text.rsplit("-", 1)
            return _split_date(day) * 24 + int(hour)
        if source_type is None or isinstance(transform, UnknownTransform):
            return text
        return _parse_human_value(text, source_type)
    except (ValueError, InvalidOperation, ValidationError) as e:
        raise ValidationError(f"Path {path!r}: cannot read {text!r} as a {transform} value of {source_type}: {e}") from None


def value_from_partition_string(text: str | None, t: IcebergType) -> Any:
    """A partition value from the string a Hive/Spark partition directory or catalog holds
    (``k=<text>``) for a source column of type ``t``; ``None`` and ``__HIVE_DEFAULT_PARTITION__``
    are null.  Raises ValueError when the text is no value of the type."""
    if text is None or text == HIVE_NULL:
        return None
    try:
        return _parse_human_value(text, t)
    except (ValueError, InvalidOperation, ValidationError) as e:
        raise ValidationError(f"Cannot read partition value {text!r} as {t}: {e}") from None


def _parse_human_value(text: str, t: IcebergType) -> Any:
    if isinstance(t, BooleanType):
        if text not in ("true", "false"):
            raise ValueError("expected true or false")
        return text == "true"
    if isinstance(t, (IntegerType, LongType)):
        return int(text)
    if isinstance(t, FloatType):
        return conv.from_bytes(conv.to_bytes(float(text), t), t)
    if isinstance(t, DoubleType):
        return float(text)
    if isinstance(t, DecimalType):
        return conv.decimal_from_unscaled(conv.unscaled_value(Decimal(text), t.scale), t.scale)
    if isinstance(t, DateType):
        return _split_date(text)
    if isinstance(t, TimeType):
        return conv.parse_iso_time(text) // 1000
    if isinstance(t, (TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)):
        return conv.parse_iso_timestamp(
            text,
            with_zone=isinstance(t, (TimestamptzType, TimestamptzNanoType)),
            nanos=isinstance(t, (TimestampNanoType, TimestamptzNanoType)),
        )
    if isinstance(t, UUIDType):
        return uuid.UUID(text)
    if isinstance(t, (FixedType, BinaryType)):
        return base64.b64decode(text, validate=True)
    if isinstance(t, StringType):
        return text
    return text


# --------------------------------------------------------------------------- builder


_SUFFIX = {"bucket": "_bucket", "truncate": "_trunc", "year": "_year", "month": "_month", "day": "_day",
           "hour": "_hour", "void": "_null"}


def _default_name(column: str, transform: Transform) -> str:
    if isinstance(transform, IdentityTransform):
        return column
    key = str(transform).split("[", 1)[0]
    return column + _SUFFIX.get(key, "_" + key)


class PartitionSpecBuilder:
    """Builds a validated :class:`PartitionSpec` for a schema.

    Field ids: with ``format_version`` 1 each spec numbers its fields 1000, 1001, ...; from v2
    on, a field reuses the id of a field with the same source and transform in
    ``existing_specs`` (the highest such id, as Java's ``reassignPartitionIds``) and otherwise
    takes ``last_partition_id + 1``.  Names default to Java's (``id``, ``id_bucket``,
    ``name_trunc``, ``ts_day``, ``x_null`` ...).
    """

    def __init__(
        self,
        schema: Schema,
        spec_id: int = 0,
        last_partition_id: int = PARTITION_FIELD_ID_START - 1,
        *,
        format_version: int = 2,
        existing_specs: Iterable[PartitionSpec] = (),
        case_sensitive: bool = True,
    ) -> None:
        self.schema = schema
        self.spec_id = spec_id
        self.format_version = format_version
        self.case_sensitive = case_sensitive
        self._last_id = last_partition_id
        self._fields: list[PartitionField] = []
        self._reuse: dict[tuple[int, str], int] = {}
        for spec in existing_specs:
            for f in spec.fields:
                key = (f.source_id, str(f.transform))
                self._reuse[key] = max(self._reuse.get(key, f.field_id), f.field_id)

    @property
    def last_partition_id(self) -> int:
        """The highest partition field id assigned so far (table's ``last-partition-id``)."""
        return self._last_id

    def _resolve(self, column: str | int) -> NestedField:
        try:
            return self.schema.find_field(column, self.case_sensitive) if isinstance(column, str) \
                else self.schema.find_field(column)
        except (LookupError, ValidationError):
            raise ValidationError(f"Cannot partition by {column!r}: no such column in the schema") from None

    def _next_id(self, source_id: int, transform: Transform) -> int:
        if self.format_version <= 1:
            return PARTITION_FIELD_ID_START + len(self._fields)
        reused = self._reuse.get((source_id, str(transform)))
        if reused is not None:
            return reused
        self._last_id += 1
        return self._last_id

    def add(self, source: str | int, transform: Transform | str, name: str | None = None,
            field_id: int | None = None) -> "PartitionSpecBuilder":
        """Add a field on a column (name or id) with a transform; returns the builder."""
        if isinstance(transform, str):
            transform = parse_transform(transform)
        if transform.is_void and isinstance(source, int) and self.schema.find_field_or_none(source) is None:
            # a v1 spec cannot drop a field: a table replaced without the column keeps it as void,
            # naming the dropped column (as Java's replacement); its partition values are null
            if name is None:
                raise ValidationError(f"Cannot add a void partition field of dropped column {source} without a name")
            return self._append(source, transform, name, field_id)
        src = self._resolve(source)
        if not isinstance(transform, UnknownTransform) and not transform.can_transform(src.field_type):
            raise ValidationError(
                f"Cannot partition by {transform} of column {src.name!r}: type {src.field_type} is not supported"
            )
        column = self.schema.find_column_name(src.field_id) or src.name
        return self._append(src.field_id, transform, name if name is not None else _default_name(column, transform),
                            field_id)

    def _append(self, source_id: int, transform: Transform, name: str, field_id: int | None) -> "PartitionSpecBuilder":
        self._check_name(name, source_id, transform)
        self._check_redundant(source_id, transform)
        if field_id is None:
            field_id = self._next_id(source_id, transform)
        self._last_id = max(self._last_id, field_id)
        self._fields.append(PartitionField(source_id, field_id, transform, name))
        return self

    def _check_name(self, name: str, source_id: int, transform: Transform) -> None:
        if not name:
            raise ValidationError("Cannot add a partition field with an empty name")
        if any(f.name == name for f in self._fields):
            raise ValidationError(f"Cannot add partition field {name!r}: a partition field with that name already exists")
        column = self.schema.find_field_or_none(name)
        if column is not None:
            if isinstance(transform, IdentityTransform):
                if column.field_id != source_id:
                    raise ValidationError(
                        f"Cannot create identity partition {name!r} sourced from a different column than the one named {name!r}"
                    )
            elif not transform.is_void:
                raise ValidationError(
                    f"Cannot name partition field {name!r}: a schema column has that name; choose another name"
                )

    def _check_redundant(self, source_id: int, transform: Transform) -> None:
        if transform.is_void:
            return
        for f in self._fields:
            if f.source_id == source_id and not f.transform.is_void and f.transform.dedup_name == transform.dedup_name:
                raise ValidationError(
                    f"Cannot add redundant partition {transform}({source_id}): it conflicts with field {f.name!r} ({f.transform})"
                )

    def identity(self, column: str | int, name: str | None = None) -> "PartitionSpecBuilder":
        """Partition by the column's value."""
        return self.add(column, IDENTITY, name)

    def bucket(self, column: str | int, num_buckets: int, name: str | None = None) -> "PartitionSpecBuilder":
        """Partition by ``bucket[num_buckets]`` of the column."""
        return self.add(column, BucketTransform(num_buckets), name)

    def truncate(self, column: str | int, width: int, name: str | None = None) -> "PartitionSpecBuilder":
        """Partition by ``truncate[width]`` of the column."""
        return self.add(column, TruncateTransform(width), name)

    def year(self, column: str | int, name: str | None = None) -> "PartitionSpecBuilder":
        """Partition by years since 1970."""
        return self.add(column, YEAR, name)

    def month(self, column: str | int, name: str | None = None) -> "PartitionSpecBuilder":
        """Partition by months since 1970-01."""
        return self.add(column, MONTH, name)

    def day(self, column: str | int, name: str | None = None) -> "PartitionSpecBuilder":
        """Partition by day."""
        return self.add(column, DAY, name)

    def hour(self, column: str | int, name: str | None = None) -> "PartitionSpecBuilder":
        """Partition by hour."""
        return self.add(column, HOUR, name)

    def void(self, column: str | int, name: str | None = None) -> "PartitionSpecBuilder":
        """An always-null field (Java ``alwaysNull``), used to drop a field in v1 specs."""
        return self.add(column, VOID, name)

    def build(self) -> PartitionSpec:
        """The spec with the fields added so far."""
        return PartitionSpec(self.spec_id, tuple(self._fields))


def assign_fresh_partition_ids(
    spec: PartitionSpec,
    *,
    format_version: int,
    existing_specs: Iterable[PartitionSpec],
    last_partition_id: int,
    spec_id: int | None = None,
) -> tuple[PartitionSpec, int]:
    """Reassign a spec's field ids for a table (Java ``reassignPartitionIds``).

    v1 keeps the ids as given; v2+ reuses ids of fields with the same source and transform in
    ``existing_specs`` and numbers new fields after ``last_partition_id``.  Returns the spec and
    the new last partition id.
    """
    if format_version <= 1:
        last = max(last_partition_id, spec.last_assigned_field_id)
        return PartitionSpec(spec.spec_id if spec_id is None else spec_id, spec.fields), last
    reuse: dict[tuple[int, str], int] = {}
    for s in existing_specs:
        for f in s.fields:
            key = (f.source_id, str(f.transform))
            reuse[key] = max(reuse.get(key, f.field_id), f.field_id)
    last = last_partition_id
    fields = []
    for f in spec.fields:
        key = (f.source_id, str(f.transform))
        if key not in reuse:
            last += 1
            reuse[key] = last
        fields.append(PartitionField(f.source_id, reuse[key], f.transform, f.name))
    return PartitionSpec(spec.spec_id if spec_id is None else spec_id, tuple(fields)), last


# --------------------------------------------------------------------------- JSON


def fields_to_json(spec: PartitionSpec) -> list[dict[str, Any]]:
    """The spec's fields as the JSON array Java writes in manifest headers (``partition-spec``);
    serialize it compactly with ``json.dumps(..., separators=(",", ":"))``."""
    return [
        {"name": f.name, "transform": str(f.transform), "source-id": f.source_id, "field-id": f.field_id}
        for f in spec.fields
    ]


def spec_to_json(spec: PartitionSpec) -> dict[str, Any]:
    """``{"spec-id": N, "fields": [...]}`` as in table metadata."""
    return {"spec-id": spec.spec_id, "fields": fields_to_json(spec)}


def fields_from_json(obj: Any, spec_id: int = 0, *, location: str | None = None) -> PartitionSpec:
    """A spec from a JSON field array (manifest header or v1 ``partition-spec``).

    Field ids must be on all fields or none; without them ids are 1000, 1001, ... in order (v1).
    A v3 ``source-ids`` list of one id is accepted for ``source-id``.
    """
    if not isinstance(obj, list):
        raise InvalidMetadataError(f"Cannot parse partition fields: expected an array, got {obj!r}", location=location)
    with_ids = [isinstance(f, dict) and "field-id" in f for f in obj]
    if any(with_ids) and not all(with_ids):
        raise InvalidMetadataError(
            f"Cannot parse partition spec {spec_id}: field-id must be set on all fields or on none", location=location
        )
    fields = []
    for i, f in enumerate(obj):
        try:
            if "source-id" in f:
                source_id = int(f["source-id"])
            else:
                ids = f["source-ids"]
                if len(ids) != 1:
                    raise InvalidMetadataError(
                        f"Cannot parse partition field {f.get('name')!r}: multi-argument transforms are not supported",
                        location=location,
                    )
                source_id = int(ids[0])
            field_id = int(f["field-id"]) if "field-id" in f else PARTITION_FIELD_ID_START + i
            fields.append(PartitionField(source_id, field_id, parse_transform(str(f["transform"])), str(f["name"])))
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, InvalidMetadataError):
                raise
            raise InvalidMetadataError(
                f"Cannot parse partition field {f!r} of spec {spec_id}: missing or invalid {e}", location=location
            ) from None
    return PartitionSpec(spec_id, tuple(fields))


def spec_from_json(obj: Any, *, location: str | None = None) -> PartitionSpec:
    """A spec from its table-metadata JSON object."""
    if not isinstance(obj, dict) or "fields" not in obj:
        raise InvalidMetadataError(f"Cannot parse partition spec from {obj!r}: expected spec-id and fields", location=location)
    try:
        spec_id = int(obj.get("spec-id", 0))
    except (TypeError, ValueError):
        raise InvalidMetadataError(f"Cannot parse partition spec: invalid spec-id {obj.get('spec-id')!r}", location=location) from None
    return fields_from_json(obj["fields"], spec_id, location=location)
