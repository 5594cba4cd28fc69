"""Data files in the table's format: ``write.format.default`` picks Parquet
(:class:`~procedures.io.parquet_writer.ParquetFileWriter`), ORC or Avro (:class:`OrcFileWriter`,
:class:`AvroFileWriter`), and :func:`write_data_files` rolls and partitions them alike.

ORC and Avro files are assembled in memory and written once at :meth:`close`, each holding at
most ``write.target-file-size-bytes`` of estimated output.  Their metrics follow Iceberg Java's
writers: ORC's come from the file's footer statistics (:func:`procedures.io.orc_metrics.orc_metrics`)
with NaN counts and NaN-free float/double bounds computed from the rows, as Java's ORC writer
tracks them itself; Avro files carry only their record count, as Java's Avro writer reports.
Delete files stay Parquet whatever ``write.delete.format.default`` says (every reader reads them).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable

import pyarrow as pa
import pyarrow.compute as pc

from procedures.core.kernel.properties import AVRO_COMPRESSION, AVRO_COMPRESSION_LEVEL, DEFAULT_FILE_FORMAT, ORC_COMPRESSION
from procedures.io.arrow_schema import schema_to_arrow
from procedures.io.avro_data import AVRO_CODECS, avro_table_bytes
from procedures.io.fileio import FileIO
from procedures.io.orc_data import ORC_CODECS, orc_table_bytes
from procedures.io.orc_footer import read_orc_footer
from procedures.io.orc_metrics import orc_metrics, override_float_bounds
from procedures.io.parquet_writer import (
    ParquetFileWriter,
    ParquetMetrics,
    WriteSettings,
    metrics_data_file,
    nan_counts,
    parquet_column_ids,
    source_column,
)
from procedures.io.parquet_writer import write_data_files as _write_files_with
from procedures.spec import types as spec_types
from procedures.spec.manifest.model import DataFile, FileFormat

__all__ = ["OrcFileWriter", "AvroFileWriter", "file_format", "file_writer", "write_data_files"]



def file_format(settings: WriteSettings) -> FileFormat:
    """The data file format ``write.format.default`` asks for (Parquet by default)."""
    return FileFormat(DEFAULT_FILE_FORMAT.read(settings.properties).upper())


class _BufferedFileWriter:
    """A data file written whole at :meth:`close` from the rows buffered until then."""

    EXTENSION = ""

    def __init__(self, io: FileIO, path: str, settings: WriteSettings, partition: tuple = ()) -> None:
        self.io = io
        self.path = path
        self.settings = settings
        self.partition = partition
        self._tables: list[pa.Table] = []
        self._nbytes = 0

    @property
    def estimated_size(self) -> int:
        """The buffered rows' Arrow size at a typical compression ratio (a quarter)."""
        return self._nbytes // 4

    @property
    def bytes_written(self) -> int:
        """What the file will about hold (nothing reaches storage before :meth:`close`)."""
        return self.estimated_size

    def write(self, table: pa.Table) -> None:
        """Buffer rows already in the table's Arrow schema."""
        if table.num_rows:
            self._tables.append(table)
            self._nbytes += table.nbytes

    def flush(self) -> None:
        """Nothing to do: the file is written at :meth:`close`."""

    def discard(self) -> None:
        """Drop the buffered rows."""
        self._tables = []

    def _table(self) -> pa.Table:
        if not self._tables:
            return schema_to_arrow(self.settings.schema).empty_table()
        return pa.concat_tables(self._tables) if len(self._tables) > 1 else self._tables[0]

    def _data_file(self, size: int, m: ParquetMetrics, fmt: FileFormat) -> DataFile:
        df = metrics_data_file(self.path, size, m, self.partition, self.settings.spec.spec_id,
                               self.settings.sort_order_id, split_offsets=False)
        return dataclasses.replace(df, file_format=fmt)


def _float_bounds(table: pa.Table, settings: WriteSettings
                  ) -> tuple[dict[int, tuple[Any, Any]], dict[int, spec_types.IcebergType]]:
    """NaN-free (min, max) of every float/double column outside lists and maps that keeps bounds."""
    bounds: dict[int, tuple[Any, Any]] = {}
    types: dict[int, spec_types.IcebergType] = {}
    for leaf in parquet_column_ids(settings.schema).values():
        t = leaf.iceberg_type
        if (leaf.repeated or not isinstance(t, (spec_types.FloatType, spec_types.DoubleType))
                or not settings.metrics.mode(leaf.name).bounds):
            continue
        col = source_column(table, settings.schema, leaf.field_id)
        values = pc.filter(col, pc.invert(pc.is_nan(col))) if len(col) else col
        mm = pc.min_max(values) if len(values) else None
        lo = mm["min"].as_py() if mm is not None else None
        hi = mm["max"].as_py() if mm is not None else None
        bounds[leaf.field_id] = (lo, hi)
        types[leaf.field_id] = t
    return bounds, types


class OrcFileWriter(_BufferedFileWriter):
    """One ORC data file (``iceberg.id`` attributes, ``write.orc.compression-codec``, zlib by default)."""

    EXTENSION = "orc"

    def close(self) -> DataFile:
        """Write the file and describe it as a ``DataFile``."""
        table = self._table()
        codec = ORC_COMPRESSION.read(self.settings.properties, choices=tuple(sorted(ORC_CODECS)))
        data = orc_table_bytes(table, self.settings.schema, codec)
        self.io.write(self.path, data)
        footer = read_orc_footer(pa.BufferReader(data), self.path)
        m = orc_metrics(footer, self.settings.schema, self.settings.metrics, None)
        m.nan_value_counts.update(nan_counts(table, self.settings.schema, self.settings.metrics))
        override_float_bounds(m, *_float_bounds(table, self.settings))
        return self._data_file(len(data), m, FileFormat.ORC)


class AvroFileWriter(_BufferedFileWriter):
    """One Avro data file (``write.avro.compression-codec``, gzip by default); metrics are the record count."""

    EXTENSION = "avro"

    def close(self) -> DataFile:
        """Write the file and describe it as a ``DataFile``."""
        table = self._table()
        codec = AVRO_COMPRESSION.read(self.settings.properties, choices=tuple(sorted(AVRO_CODECS)))
        level = AVRO_COMPRESSION_LEVEL.read(self.settings.properties)
        data = avro_table_bytes(table, self.settings.schema, codec, level)
        self.io.write(self.path, data)
        df = self._data_file(len(data), ParquetMetrics(record_count=table.num_rows), FileFormat.AVRO)
        return dataclasses.replace(df, column_sizes=None, value_counts=None, null_value_counts=None,
                                   nan_value_counts=None, lower_bounds=None, upper_bounds=None)


_WRITERS = {FileFormat.PARQUET: ParquetFileWriter, FileFormat.ORC: OrcFileWriter, FileFormat.AVRO: AvroFileWriter}


def file_writer(settings: WriteSettings) -> Callable[..., Any]:
    """The class writing one data file in the table's format."""
    return _WRITERS[file_format(settings)]


def write_data_files(io: FileIO, settings: WriteSettings, batches: Iterable[pa.RecordBatch | pa.Table],
                     **kwargs: Any) -> list[DataFile]:
    """:func:`procedures.io.parquet_writer.write_data_files` in the table's format."""
    return _write_files_with(io, settings, batches, file_writer=file_writer(settings), **kwargs)
