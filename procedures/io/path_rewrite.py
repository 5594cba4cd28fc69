"""Delete files whose contents name data files, rewritten for ``rewrite_table_path``: the
``file_path`` column of a v2 position delete file, or the ``referenced-data-file`` property of each
deletion-vector blob in a Puffin file.  Everything else in the file is kept: rows, their order,
the other columns with their field ids, the blobs' bytes and offsets (so a DV entry's
``content_offset`` / ``content_size_in_bytes`` stay valid)."""

from __future__ import annotations

from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.metadata_columns import DELETE_FILE_PATH_ID
from procedures.spec.puffin import PuffinWriter, read_puffin

__all__ = ["rewrite_delete_file_paths", "REFERENCED_DATA_FILE"]

#: the Puffin blob property naming a DV's data file
REFERENCED_DATA_FILE = "referenced-data-file"
_FIELD_ID = b"PARQUET:field_id"


def _path_column(schema: pa.Schema, location: str) -> int:
    for i, f in enumerate(schema):
        if f.metadata and f.metadata.get(_FIELD_ID) == str(DELETE_FILE_PATH_ID).encode():
            return i
    if "file_path" in schema.names:
        return schema.get_field_index("file_path")
    raise InvalidMetadataError("position delete file has no file_path column", location=location)


_PYARROW_CODECS = {"uncompressed": "none", "snappy": "snappy", "gzip": "gzip", "zstd": "zstd", "brotli": "brotli",
                   "lz4": "lz4", "lz4_raw": "lz4"}


def _codec(pf: pq.ParquetFile) -> str:
    """The source file's compression codec, so the copy is written alike (zstd when unknown)."""
    if not pf.metadata.num_row_groups or not pf.metadata.num_columns:
        return "zstd"
    return _PYARROW_CODECS.get(pf.metadata.row_group(0).column(0).compression.lower(), "zstd")


def _rewrite_parquet(io: FileAccess, source: str, output: str, rename: Callable[[str], str]) -> int:
    data = io.new_input(source).read()
    pf = pq.ParquetFile(pa.BufferReader(data))
    table = pf.read()
    i = _path_column(table.schema, source)
    paths = table.column(i).combine_chunks()
    # a delete file names few data files: rename each distinct path once
    encoded = pc.dictionary_encode(paths)
    renamed = pa.array([rename(p) for p in encoded.dictionary.to_pylist()], pa.string())
    column = pc.take(renamed, encoded.indices)
    table = table.set_column(i, table.schema.field(i), column)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=_codec(pf), write_statistics=True, store_schema=False)
    out = sink.getvalue().to_pybytes()
    io.write(output, out, overwrite=False)
    return len(out)


def _rewrite_puffin(io: FileAccess, source: str, output: str, rename: Callable[[str], str]) -> int:
    pf = read_puffin(io, source)
    props = dict(pf.properties)
    writer = PuffinWriter(props, created_by=None)
    for blob in pf.blobs:
        blob_props = dict(blob.properties)
        if REFERENCED_DATA_FILE in blob_props:
            blob_props[REFERENCED_DATA_FILE] = rename(blob_props[REFERENCED_DATA_FILE])
        writer.add(blob.type, pf.read_blob(blob), blob.fields, blob.snapshot_id, blob.sequence_number,
                   blob_props, blob.compression_codec)
    out = writer.finish()
    io.write(output, out, overwrite=False)
    return len(out)


def rewrite_delete_file_paths(io: FileAccess, delete_file: DataFile, output: str, rename: Callable[[str], str]) -> int:
    """Write a copy of a position delete file (Parquet) or DV Puffin file at ``output`` (a new file:
    an existing one is never replaced) with every data file path passed through ``rename``;
    returns the size written."""
    if delete_file.file_format == FileFormat.PUFFIN:
        return _rewrite_puffin(io, delete_file.file_path, output, rename)
    if delete_file.file_format == FileFormat.PARQUET:
        return _rewrite_parquet(io, delete_file.file_path, output, rename)
    raise ValidationError(
        f"Cannot rewrite {delete_file.file_format.value} position delete file {delete_file.file_path}: only "
        "Parquet position deletes and Puffin deletion vectors are supported"
    )
