"""Iceberg metrics of an ORC file from its footer, as Iceberg Java 1.10's ``OrcMetrics`` computes
them for imported files and (with our own float bounds and NaN counts) for files we write.

* Field ids come from the ``iceberg.id`` type attributes, or, when no column has one, from the
  table's name mapping by field name; a file with neither gets only its row count.
* Every column with an id that is reached through structs only (not inside a list or map) and
  whose metrics mode is not ``none`` gets its ``bytesOnDisk`` as column size, a value count and a
  null count (``rows - values`` when the column has nulls); struct columns too, as in Java.
* Bounds (modes ``truncate(N)``/``full``, columns with at least one value) come from the ORC
  statistics typed by the *file's* column type: integers, doubles (a NaN bound becomes -inf/+inf),
  strings (only these are truncated; an upper bound that cannot be truncated stays whole),
  decimals at the column's scale, dates, timestamps from the UTC statistics, booleans.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Mapping

import numpy as np

from procedures.io.orc_footer import OrcColumnStats, OrcFooter, OrcKind, OrcType
from procedures.io.parquet_writer import MetricsConfig, ParquetMetrics
from procedures.spec import types as spec_types
from procedures.spec.conversions import to_bytes, truncate_lower_bound, truncate_upper_bound
from procedures.spec.name_mapping import NameMapping
from procedures.spec.schema import Schema

__all__ = ["ICEBERG_ID", "orc_column_ids", "orc_file_type", "orc_metrics"]

#: the ORC type attribute holding a column's Iceberg field id
ICEBERG_ID = "iceberg.id"
ICEBERG_LONG_TYPE = "iceberg.long-type"
ICEBERG_BINARY_TYPE = "iceberg.binary-type"
ICEBERG_TIMESTAMP_UNIT = "iceberg.timestamp-unit"

_SIMPLE = {
    OrcKind.BOOLEAN: spec_types.BOOLEAN, OrcKind.BYTE: spec_types.INT, OrcKind.SHORT: spec_types.INT, OrcKind.INT: spec_types.INT,
    OrcKind.FLOAT: spec_types.FLOAT, OrcKind.DOUBLE: spec_types.DOUBLE, OrcKind.STRING: spec_types.STRING,
    OrcKind.VARCHAR: spec_types.STRING, OrcKind.CHAR: spec_types.STRING, OrcKind.DATE: spec_types.DATE,
}


def orc_file_type(t: OrcType) -> spec_types.IcebergType | None:
    """The Iceberg type Java reads a primitive ORC column as (None for nested kinds)."""
    if t.kind in _SIMPLE:
        return _SIMPLE[t.kind]
    if t.kind == OrcKind.LONG:
        return spec_types.TIME if t.attributes.get(ICEBERG_LONG_TYPE) == "TIME" else spec_types.LONG
    if t.kind == OrcKind.BINARY:
        kind = t.attributes.get(ICEBERG_BINARY_TYPE)
        return spec_types.UUID if kind == "UUID" else spec_types.BINARY
    if t.kind in (OrcKind.TIMESTAMP, OrcKind.TIMESTAMP_INSTANT):
        nanos = t.attributes.get(ICEBERG_TIMESTAMP_UNIT) == "NANOS"
        if t.kind == OrcKind.TIMESTAMP:
            return spec_types.TIMESTAMP_NS if nanos else spec_types.TIMESTAMP
        return spec_types.TIMESTAMPTZ_NS if nanos else spec_types.TIMESTAMPTZ
    if t.kind == OrcKind.DECIMAL:
        return spec_types.DecimalType(t.precision, t.scale)
    return None


def orc_column_ids(footer: OrcFooter, mapping: NameMapping | None) -> dict[int, tuple[int, tuple[str, ...], bool]]:
    """ORC column -> (field id, name path, inside a list or map) for every column with an id."""
    types = footer.types
    if not types:
        return {}
    with_ids = any(ICEBERG_ID in t.attributes for t in types)
    if not with_ids and mapping is None:
        return {}
    out: dict[int, tuple[int, tuple[str, ...], bool]] = {}

    def visit(col: int, path: tuple[str, ...], nested: bool, mapped: Any) -> None:
        t = types[col]
        if t.kind == OrcKind.STRUCT:
            for name, child in zip(t.field_names, t.subtypes):
                m = None if mapped is None else _mapped_child(mapped, name)
                fid = _id_of(types[child], m, with_ids)
                if fid is not None:
                    out[child] = (fid, path + (name,), nested)
                visit(child, path + (name,), nested, m)
        elif t.kind == OrcKind.LIST and t.subtypes:
            m = None if mapped is None else _mapped_child(mapped, "element")
            _visit_nested(t.subtypes[0], "element", m)
        elif t.kind == OrcKind.MAP and len(t.subtypes) == 2:
            for child, name in zip(t.subtypes, ("key", "value")):
                _visit_nested(child, name, None if mapped is None else _mapped_child(mapped, name))

    def _visit_nested(child: int, name: str, m: Any) -> None:
        fid = _id_of(types[child], m, with_ids)
        if fid is not None:
            out[child] = (fid, (name,), True)
        visit(child, (name,), True, m)

    visit(0, (), False, None if with_ids else mapping)
    return out


def _mapped_child(mapped: Any, name: str) -> Any:
    for f in mapped.fields or ():
        if name in f.names:
            return f
    return None


def _id_of(t: OrcType, mapped: Any, with_ids: bool) -> int | None:
    if with_ids:
        raw = t.attributes.get(ICEBERG_ID)
        return int(raw) if raw is not None else None
    return None if mapped is None else mapped.field_id


def _bound(t: spec_types.IcebergType, st: OrcColumnStats, upper: bool) -> Any:
    """The min (max) of a column's statistics as a value of the file type, or None."""
    if isinstance(t, spec_types.BooleanType):
        if st.true_count is None:
            return None
        return st.true_count > 0 if upper else (st.number_of_values - st.true_count) <= 0
    if isinstance(t, (spec_types.IntegerType, spec_types.LongType, spec_types.TimeType)):
        return st.int_max if upper else st.int_min
    if isinstance(t, (spec_types.FloatType, spec_types.DoubleType)):
        v = st.double_max if upper else st.double_min
        if v is None:
            return None
        if v != v:
            v = float("inf") if upper else float("-inf")
        return float(np.float32(v)) if isinstance(t, spec_types.FloatType) else v
    if isinstance(t, spec_types.StringType):
        return st.string_max if upper else st.string_min
    if isinstance(t, spec_types.DecimalType):
        v = st.decimal_max if upper else st.decimal_min
        return None if v is None else Decimal(v).quantize(Decimal(1).scaleb(-t.scale))
    if isinstance(t, spec_types.DateType):
        return st.date_max if upper else st.date_min
    if isinstance(t, (spec_types.TimestampType, spec_types.TimestamptzType, spec_types.TimestampNanoType,
                      spec_types.TimestamptzNanoType)):
        ts = st.timestamp_max if upper else st.timestamp_min
        if ts is None:
            return None
        millis, nanos = ts
        total_nanos = millis * 1_000_000 + (nanos or 0)
        if isinstance(t, (spec_types.TimestampNanoType, spec_types.TimestamptzNanoType)):
            return total_nanos
        return total_nanos // 1000
    return None


def orc_metrics(footer: OrcFooter, table_schema: Schema, config: MetricsConfig,
                mapping: NameMapping | None) -> ParquetMetrics:
    """The metrics of an ORC file (see the module doc); ``table_schema`` names columns for their
    metrics modes, ``mapping`` gives ids to a file without ``iceberg.id`` attributes."""
    m = ParquetMetrics(record_count=footer.number_of_rows)
    rows = footer.number_of_rows
    for col, (fid, path, nested) in sorted(orc_column_ids(footer, mapping).items()):
        if nested or col >= len(footer.statistics):
            continue
        name = table_schema.find_column_name(fid) if table_schema.find_field_or_none(fid) else ".".join(path)
        mode = config.mode(name) if name is not None else config.default
        if not mode.counts:
            continue
        st = footer.statistics[col]
        m.column_sizes[fid] = st.bytes_on_disk
        nulls = rows - st.number_of_values if st.has_null else 0
        m.null_value_counts[fid] = nulls
        m.value_counts[fid] = st.number_of_values + nulls
        ftype = orc_file_type(footer.types[col])
        if not mode.bounds or ftype is None or st.number_of_values <= 0:
            continue
        lo, hi = _bound(ftype, st, False), _bound(ftype, st, True)
        if mode.kind == "truncate" and isinstance(ftype, spec_types.StringType):
            lo = truncate_lower_bound(lo, ftype, mode.length) if lo is not None else None
            if hi is not None:
                truncated = truncate_upper_bound(hi, ftype, mode.length)
                hi = truncated if truncated is not None else hi
        if lo is not None:
            m.lower_bounds[fid] = to_bytes(lo, ftype)
        if hi is not None:
            m.upper_bounds[fid] = to_bytes(hi, ftype)
    return m


def override_float_bounds(m: ParquetMetrics, bounds: Mapping[int, tuple[Any, Any]],
                          types: Mapping[int, spec_types.IcebergType]) -> None:
    """Replace the footer's float/double bounds by NaN-free ones computed from the data (a file we
    write: Java's ORC writer tracks these itself rather than trusting ORC's statistics)."""
    for fid, (lo, hi) in bounds.items():
        t = types[fid]
        m.lower_bounds.pop(fid, None)
        m.upper_bounds.pop(fid, None)
        if lo is not None:
            m.lower_bounds[fid] = to_bytes(lo, t)
            m.upper_bounds[fid] = to_bytes(hi, t)
