"""ORC data files: read into Arrow with field ids, written from Arrow with Iceberg's ORC attributes.

Iceberg keeps a column's field id in the ORC type attribute ``iceberg.id`` (and whether it is
required in ``iceberg.required``); pyarrow carries type attributes as Arrow field metadata both
ways, so reading only renames ``iceberg.id`` to the ``PARQUET:field_id`` key the data-file reader
matches columns by.  A file without ids (Spark, Hive) keeps none and is read through the table's
name mapping.  Writing stores types as Java does: uuid and fixed as ``binary`` with
``iceberg.binary-type`` (``UUID``/``FIXED``), time as ``long`` with ``iceberg.long-type=TIME``,
timestamps with time zone as ``timestamp with local time zone``.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa
import pyarrow.orc as po

from procedures.errors import InvalidMetadataError
from procedures.io.arrow_schema import FIELD_ID_KEY, field_id, schema_to_arrow
from procedures.io.orc_metrics import ICEBERG_BINARY_TYPE, ICEBERG_ID, ICEBERG_LONG_TYPE
from procedures.spec.schema import Schema

__all__ = ["ORC_CODECS", "read_orc_batches", "orc_table_bytes"]

#: ``write.orc.compression-codec`` values and pyarrow's names for them
ORC_CODECS = {"zlib": "zlib", "snappy": "snappy", "zstd": "zstd", "lz4": "lz4", "none": "uncompressed",
              "uncompressed": "uncompressed"}
_ID = ICEBERG_ID.encode()
_REQUIRED = b"iceberg.required"


def _rename_ids(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([_renamed(f) for f in t])
    if pa.types.is_list(t):
        return pa.list_(_renamed(t.value_field))
    if pa.types.is_map(t):
        return pa.map_(_renamed(t.key_field), _renamed(t.item_field))
    return t


def _renamed(f: pa.Field) -> pa.Field:
    md = dict(f.metadata or {})
    if _ID in md:
        md[FIELD_ID_KEY] = md.pop(_ID)
    return pa.field(f.name, _rename_ids(f.type), f.nullable, metadata=md or None)


def read_orc_batches(stream: Any, location: str) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The Arrow schema (ids under ``PARQUET:field_id``) of the ORC file open as ``stream`` and an
    iterator of its record batches, one per stripe."""
    try:
        f = po.ORCFile(stream)
        schema = pa.schema([_renamed(x) for x in f.schema])
        stripes = f.nstripes
    except Exception as e:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError ...: name the file
        raise InvalidMetadataError(f"cannot read the ORC file: {e}", location=location) from None

    def batches() -> Iterator[pa.RecordBatch]:
        for i in range(stripes):
            # a cast, not from_arrays: nested types keep their own field metadata otherwise
            yield f.read_stripe(i).cast(schema)

    return schema, batches()


# ------------------------------------------------------------------------------ writing
def _orc_field(f: pa.Field) -> tuple[pa.Field, Any]:
    """The field as stored in ORC (attributes instead of Parquet ids) and its storage cast."""
    md = {k: v for k, v in (f.metadata or {}).items() if k != FIELD_ID_KEY}
    fid = field_id(f)
    if fid is not None:
        md[_ID] = str(fid).encode()
        md[_REQUIRED] = b"false" if f.nullable else b"true"
    t = f.type
    if isinstance(t, pa.BaseExtensionType):  # uuid
        md[ICEBERG_BINARY_TYPE.encode()] = b"UUID"
        t = pa.binary()
    elif pa.types.is_fixed_size_binary(t):
        md[ICEBERG_BINARY_TYPE.encode()] = b"FIXED"
        md[b"iceberg.length"] = str(t.byte_width).encode()
        t = pa.binary()
    elif pa.types.is_time64(t):
        md[ICEBERG_LONG_TYPE.encode()] = b"TIME"
        t = pa.int64()
    elif pa.types.is_struct(t):
        t = pa.struct([_orc_field(c)[0] for c in t])
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        t = pa.list_(_orc_field(t.value_field)[0])
    elif pa.types.is_map(t):
        t = pa.map_(_orc_field(t.key_field)[0], _orc_field(t.item_field)[0])
    return pa.field(f.name, t, True, metadata=md or None), t


def _storage(col: pa.ChunkedArray) -> pa.ChunkedArray:
    if isinstance(col.type, pa.BaseExtensionType):
        return pa.chunked_array([c.storage for c in col.chunks], type=col.type.storage_type)
    return col


def orc_table_bytes(table: pa.Table, schema: Schema, codec: str = "zlib") -> bytes:
    """An ORC data file holding ``table`` (columns named as ``schema``'s) with ``iceberg.id``
    attributes, compressed with ``codec`` (a ``write.orc.compression-codec`` value)."""
    target = schema_to_arrow(schema)
    fields, cols = [], []
    for f in target:
        of, t = _orc_field(f)
        col = _storage(table.column(f.name))
        fields.append(of)
        cols.append(col if col.type == t else col.cast(t))
    out = pa.BufferOutputStream()
    po.write_table(pa.Table.from_arrays(cols, schema=pa.schema(fields)), out,
                   compression=ORC_CODECS.get(codec.lower(), "zlib"))
    return out.getvalue().to_pybytes()
