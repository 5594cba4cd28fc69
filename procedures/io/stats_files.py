"""Statistics files: the partition statistics file (Parquet, with the spec's field ids) and the
table statistics Puffin file of theta-sketch blobs."""

from __future__ import annotations

import importlib.util
import uuid
from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from procedures.io.arrow_schema import schema_to_arrow
from procedures.spec.file_access import FileAccess
from procedures.spec.puffin import PuffinWriter
from procedures.spec.schema import Schema
from procedures.spec.statistics import BlobMetadata, StatisticsFile
from procedures.spec.types import IcebergType, StructType, UUIDType

__all__ = ["partition_stats_table", "write_partition_stats", "write_statistics_file", "ThetaBlob"]

def _arrow_value(v: Any, t: IcebergType) -> Any:
    # ints convert to date32/time64/timestamp arrays as days/micros; uuids go in as their 16 bytes
    if isinstance(t, UUIDType) and isinstance(v, uuid.UUID):
        return v.bytes
    return v


def partition_stats_table(schema: Schema, rows: Sequence[tuple]) -> pa.Table:
    """Rows of (partition tuple, counters...) as an Arrow table carrying the schema's field ids."""
    arrow = schema_to_arrow(schema)
    ptype = schema.fields[0].field_type
    assert isinstance(ptype, StructType)
    names = [f.name for f in ptype.fields]
    partitions = [
        {n: _arrow_value(v, f.field_type) for n, f, v in zip(names, ptype.fields, row[0])} for row in rows
    ]
    columns = [pa.array(partitions, type=arrow.field(0).type)]
    for i in range(1, len(schema.fields)):
        columns.append(pa.array([row[i] for row in rows], type=arrow.field(i).type))
    return pa.Table.from_arrays(columns, schema=arrow)


def write_partition_stats(io: FileAccess, path: str, schema: Schema, rows: Sequence[tuple]) -> int:
    """Write the partition statistics file (zstd Parquet, as Java's default codec) and return its size."""
    sink = pa.BufferOutputStream()
    pq.write_table(partition_stats_table(schema, rows), sink, compression="zstd")
    data = sink.getvalue().to_pybytes()
    io.write(path, data)
    return len(data)


@dataclass(frozen=True, slots=True)
class ThetaBlob:
    """One theta sketch blob to write: the column's field id, the sketch bytes and its estimate."""

    field_id: int
    sketch: bytes
    ndv: int


def write_statistics_file(io: FileAccess, path: str, snapshot_id: int, sequence_number: int, blobs: Sequence[ThetaBlob],
                          *, blob_type: str, ndv_property: str, created_by: str,
                          compression_codec: str | None = "zstd") -> StatisticsFile:
    """Write a Puffin file of theta sketch blobs (zstd-compressed as Java writes them, uncompressed
    when ``zstandard`` is not installed) and return the ``statistics`` entry describing it."""
    if compression_codec == "zstd" and importlib.util.find_spec("zstandard") is None:
        compression_codec = None
    writer = PuffinWriter(created_by=created_by)
    metas = []
    for b in blobs:
        props = {ndv_property: str(b.ndv)}
        writer.add(blob_type, b.sketch, (b.field_id,), snapshot_id, sequence_number, props, compression_codec)
        metas.append(BlobMetadata(blob_type, snapshot_id, sequence_number, (b.field_id,), props))
    data = writer.finish()
    io.write(path, data)
    return StatisticsFile(snapshot_id, path, len(data), writer.footer_size, tuple(metas))
