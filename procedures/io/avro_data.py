"""Avro data files: read into Arrow with field ids, written from Arrow with Iceberg's Avro schema.

Reading: the file's schema becomes an Arrow schema whose fields carry the Avro ``field-id``
(``element-id``, ``key-id``, ``value-id`` for list elements and map keys/values) in the
``PARQUET:field_id`` metadata the data-file reader matches columns by; a file without ids
(written by Spark or Hive) has none, so the reader falls back to the table's name mapping.
Values are decoded without logical types (ints and bytes, our representation) and turned into
Arrow arrays of the logical types: ``date`` -> date32, ``time-micros`` -> time64, ``timestamp-*``
-> timestamp (UTC when ``adjust-to-utc`` is true), ``decimal`` -> decimal128, ``uuid`` fixed ->
16 bytes, Avro maps and Iceberg's key/value record arrays -> Arrow maps, ``["null", T]`` -> a
nullable T.

Writing uses :func:`procedures.spec.avro_schemas.struct_to_avro` (the schema Java writes, with
field ids) and ``write.avro.compression-codec`` (deflate by default).  Java's Avro writer reports
no column metrics, only the record count, and imports of Avro files likewise
(:func:`avro_record_count`); ours do the same.
"""

from __future__ import annotations

import io as _io
from decimal import Decimal
from typing import Any, Callable, Iterator, Mapping

import fastavro
import pyarrow as pa

from procedures.errors import InvalidMetadataError
from procedures.io.arrow_schema import FIELD_ID_KEY
from procedures.spec import avro_codecs
from procedures.spec import types as spec_types
from procedures.spec.avro_schemas import container_record_count, sanitize_name, struct_to_avro, without_logical_types
from procedures.spec.schema import Schema

__all__ = ["avro_record_count", "avro_arrow_schema", "read_avro_batches", "avro_table_bytes", "AVRO_CODECS"]

#: ``write.avro.compression-codec`` values and fastavro's names for them
AVRO_CODECS = {"gzip": "deflate", "deflate": "deflate", "uncompressed": "null", "none": "null",
               "snappy": "snappy", "zstd": "zstandard"}

_UTC = "UTC"


def avro_record_count(data: bytes, location: str) -> int:
    """The number of records of the Avro file ``data`` (block headers only)."""
    try:
        return container_record_count(data)
    except Exception as e:  # noqa: BLE001 - a malformed header or block: name the file
        raise InvalidMetadataError(f"Unable to read Avro file: {e}", location=location) from None


# ------------------------------------------------------------------------------ schema -> Arrow
def _nullable(t: Any, where: str) -> tuple[Any, bool]:
    if isinstance(t, list):
        branches = [b for b in t if b != "null"]
        if len(branches) != 1:
            raise InvalidMetadataError(f"Avro union {t} of column {where} is not supported (only [\"null\", T])")
        return branches[0], len(branches) < len(t)
    return t, False


def _with_id(name: str, t: pa.DataType, nullable: bool, fid: Any) -> pa.Field:
    meta = {FIELD_ID_KEY: str(int(fid)).encode()} if fid is not None else None
    return pa.field(name, t, nullable=nullable, metadata=meta)


def _arrow_type(t: Any, where: str) -> pa.DataType:
    if isinstance(t, str):
        t = {"type": t}
    kind, logical = t.get("type"), t.get("logicalType")
    if isinstance(kind, (dict, list)):
        return _arrow_type(_nullable(kind, where)[0], where)
    if kind == "record":
        return pa.struct([_field(f, where) for f in t["fields"]])
    if kind == "array":
        items, nullable = _nullable(t["items"], where)
        if logical == "map" and isinstance(items, dict) and items.get("type") == "record":
            kf, vf = items["fields"][0], items["fields"][1]
            vt, vnull = _nullable(vf["type"], where)
            return pa.map_(_with_id("key", _arrow_type(kf["type"], where), False, kf.get("field-id")),
                           _with_id("value", _arrow_type(vt, where), vnull, vf.get("field-id")))
        return pa.list_(_with_id("element", _arrow_type(items, where), nullable, t.get("element-id")))
    if kind == "map":
        vt, vnull = _nullable(t["values"], where)
        return pa.map_(_with_id("key", pa.string(), False, t.get("key-id")),
                       _with_id("value", _arrow_type(vt, where), vnull, t.get("value-id")))
    if logical == "decimal":
        return pa.decimal128(int(t["precision"]), int(t.get("scale", 0)))
    if logical == "date" and kind == "int":
        return pa.date32()
    if logical == "time-micros" and kind == "long":
        return pa.time64("us")
    if logical in ("timestamp-micros", "timestamp-millis", "timestamp-nanos") and kind == "long":
        tz = _UTC if str(t.get("adjust-to-utc", "false")).lower() == "true" else None
        return pa.timestamp("ns" if logical == "timestamp-nanos" else "us", tz=tz)
    if kind == "fixed":
        return pa.binary(int(t["size"]))
    simple = {"boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
              "double": pa.float64(), "string": pa.string(), "bytes": pa.binary(), "enum": pa.string(),
              "null": pa.null()}
    if kind in simple:
        return simple[kind]
    raise InvalidMetadataError(f"Avro type {t} of column {where} is not supported")


def _field(f: Mapping[str, Any], where: str) -> pa.Field:
    t, nullable = _nullable(f["type"], f"{where}.{f['name']}".lstrip("."))
    return _with_id(f["name"], _arrow_type(t, f["name"]), nullable, f.get("field-id"))


def avro_arrow_schema(record_schema: Mapping[str, Any]) -> pa.Schema:
    """The Arrow schema of an Avro record schema (named types expanded), ids as field metadata."""
    return pa.schema([_field(f, "") for f in record_schema["fields"]])


# ------------------------------------------------------------------------------ raw values -> Arrow
def _converter(t: Any) -> Callable[[Any], Any] | None:
    """How a raw decoded value becomes what ``pa.array`` takes for the Arrow type (None: as is)."""
    t = _nullable(t, "")[0]
    if isinstance(t, str):
        return None
    kind, logical = t.get("type"), t.get("logicalType")
    if isinstance(kind, (dict, list)):
        return _converter(kind)
    if kind == "record":
        convs = [(f["name"], _converter(f["type"])) for f in t["fields"]]
        if all(c is None for _, c in convs):
            return None
        return lambda v: None if v is None else {n: (v[n] if c is None or v[n] is None else c(v[n])) for n, c in convs}
    if kind == "array":
        items = _nullable(t["items"], "")[0]
        if logical == "map" and isinstance(items, dict) and items.get("type") == "record":
            kc, vc = _converter(items["fields"][0]["type"]), _converter(items["fields"][1]["type"])
            return lambda v: None if v is None else [
                (e["key"] if kc is None else kc(e["key"]),
                 e["value"] if vc is None or e["value"] is None else vc(e["value"])) for e in v]
        ic = _converter(items)
        return None if ic is None else (lambda v: None if v is None else [None if e is None else ic(e) for e in v])
    if kind == "map":
        vc = _converter(t["values"])
        return lambda v: None if v is None else [(k, x if vc is None or x is None else vc(x)) for k, x in v.items()]
    if logical == "decimal":
        scale = int(t.get("scale", 0))
        return lambda v: Decimal(int.from_bytes(v, "big", signed=True)).scaleb(-scale)
    if logical == "timestamp-millis" and kind == "long":
        return lambda v: v * 1000
    return None


def read_avro_batches(data: bytes, location: str, batch_size: int = 65_536) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The Arrow schema of the Avro file ``data`` and an iterator of its record batches."""
    avro_codecs.install()
    try:
        raw, schema = without_logical_types(data)
        reader = fastavro.reader(_io.BytesIO(raw))
        expanded = fastavro.parse_schema(schema, expand=True)
        arrow_schema = avro_arrow_schema(expanded)
    except InvalidMetadataError:
        raise
    except Exception as e:  # noqa: BLE001 - fastavro raises several unrelated types for corrupt files
        raise InvalidMetadataError(f"not a readable Avro file ({type(e).__name__}: {e})", location=location) from None
    convs = [(f["name"], _converter(f["type"])) for f in expanded["fields"]]

    def batches() -> Iterator[pa.RecordBatch]:
        columns: list[list[Any]] = [[] for _ in convs]
        n = 0
        for record in reader:
            for col, (name, conv) in zip(columns, convs):
                v = record.get(name)
                col.append(v if conv is None or v is None else conv(v))
            n += 1
            if n == batch_size:
                yield _batch(columns, arrow_schema)
                columns, n = [[] for _ in convs], 0
        if n:
            yield _batch(columns, arrow_schema)

    return arrow_schema, batches()


def _batch(columns: list[list[Any]], schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema)


# ------------------------------------------------------------------------------ writing
def _storage_value_table(table: pa.Table) -> pa.Table:
    """Columns whose Python values fastavro cannot take as they are, cast to their stored form
    (timestamps and times as int64 micros/nanos, dates as int32 days, uuids as 16 bytes)."""

    def storage(t: pa.DataType) -> pa.DataType:
        if isinstance(t, pa.BaseExtensionType):
            return storage(t.storage_type)
        if pa.types.is_timestamp(t) or pa.types.is_time64(t):
            return pa.int64()
        if pa.types.is_date32(t):
            return pa.int32()
        if pa.types.is_struct(t):
            return pa.struct([f.with_type(storage(f.type)) for f in t])
        if pa.types.is_map(t):
            return pa.map_(t.key_field.with_type(storage(t.key_type)), t.item_field.with_type(storage(t.item_type)))
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return pa.list_(t.value_field.with_type(storage(t.value_type)))
        return t

    cols = []
    for col in table.columns:
        if isinstance(col.type, pa.BaseExtensionType):
            col = pa.chunked_array([c.storage for c in col.chunks], type=col.type.storage_type)
        target = storage(col.type)
        cols.append(col if target == col.type else col.cast(target))
    return pa.Table.from_arrays(cols, names=table.column_names)


def _value_writer(t: spec_types.IcebergType) -> Callable[[Any], Any] | None:
    """How an Arrow Python value of Iceberg type ``t`` becomes fastavro's value (None: as is)."""
    if isinstance(t, spec_types.StructType):
        fields = [(f.name, sanitize_name(f.name), _value_writer(f.field_type)) for f in t.fields]
        return lambda v: {a: (v[n] if c is None or v[n] is None else c(v[n])) for n, a, c in fields}
    if isinstance(t, spec_types.ListType):
        c = _value_writer(t.element_type)
        return None if c is None else (lambda v: [None if e is None else c(e) for e in v])
    if isinstance(t, spec_types.MapType):
        kc, vc = _value_writer(t.key_type), _value_writer(t.value_type)

        def value(x: Any) -> Any:
            return x if vc is None or x is None else vc(x)
        if isinstance(t.key_type, spec_types.StringType):
            return lambda v: {k: value(x) for k, x in v}
        return lambda v: [{"key": k if kc is None else kc(k), "value": value(x)} for k, x in v]
    return None


def _to_records(table: pa.Table, schema: Schema) -> Iterator[dict[str, Any]]:
    writers = [(f.name, sanitize_name(f.name), _value_writer(f.field_type)) for f in schema.fields]
    for batch in _storage_value_table(table.select([f.name for f in schema.fields])).to_batches():
        for row in batch.to_pylist():
            yield {a: (row[n] if c is None or row[n] is None else c(row[n])) for n, a, c in writers}


def avro_table_bytes(table: pa.Table, schema: Schema, codec: str = "gzip", level: int | None = None) -> bytes:
    """An Avro data file holding ``table`` (columns named as ``schema``'s) with ``schema``'s field ids,
    compressed with ``codec`` (a ``write.avro.compression-codec`` value)."""
    avro_codecs.install()
    avro_schema = struct_to_avro(schema.as_struct(), "table")
    buf = _io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(avro_schema), _to_records(table, schema),
                    codec=AVRO_CODECS.get(codec.lower(), "deflate"), codec_compression_level=level)
    return buf.getvalue()
