"""Existing data files described as ``data_file`` entries, for ``add_files``, ``snapshot`` and
``migrate`` (procedures.md §3.11-3.13; Java's ``TableMigrationUtil.listPartition``).

Only what Java reads is read, by the file's format:

* Parquet: the footer.  Metrics come from the same code as the files we write
  (:func:`procedures.io.parquet_writer.footer_metrics`), with the file's columns matched to the
  table's fields by the file's field ids, or, for files without ids (Spark, Hive, other writers),
  through the table's name mapping.  As Iceberg Java's import, there are no NaN counts and no
  split offsets (the footer has neither), and float/double columns whose footer kept no min/max
  (Spark drops them when a row group holds NaN) get no bounds.
* ORC: the footer's column statistics (:func:`procedures.io.orc_metrics.orc_metrics`, Java's
  ``OrcMetrics``): sizes, value and null counts and bounds, ids from ``iceberg.id`` attributes or
  the name mapping.
* Avro: the record count from the block headers and nothing else, as Java's import.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Mapping

import pyarrow.parquet as pq

from procedures.errors import InvalidMetadataError
from procedures.io.avro_data import avro_record_count
from procedures.io.fileio import FileIO
from procedures.io.orc_footer import read_orc_footer
from procedures.io.orc_metrics import orc_metrics
from procedures.io.parquet_writer import MetricsConfig, ParquetMetrics, file_column_ids, footer_metrics, metrics_data_file
from procedures.spec.manifest.model import DataFile, FileFormat
from procedures.spec.name_mapping import NameMapping, arrow_field_ids
from procedures.spec.schema import Schema

__all__ = ["ImportTarget", "imported_data_file"]


@dataclass(frozen=True)
class ImportTarget:
    """What describing a file needs from the target table; small and picklable for Spark tasks."""

    schema: Schema
    mapping: NameMapping
    metrics: MetricsConfig
    io_properties: Mapping[str, str] = field(repr=False)  # storage secrets stay out of reprs and logs


def _parquet_metrics(io: FileIO, path: str, target: ImportTarget) -> ParquetMetrics:
    try:
        with io.new_input(path).open() as stream:
            pf = pq.ParquetFile(stream)
            md = pf.metadata
            arrow_schema = pf.schema_arrow
    except InvalidMetadataError:
        raise
    except Exception as e:  # noqa: BLE001 - pyarrow raises ArrowInvalid, OSError ...: name the file
        raise InvalidMetadataError(f"cannot read the Parquet footer: {e}", location=path) from None
    leaves = file_column_ids(arrow_schema, target.schema, arrow_field_ids(target.mapping, arrow_schema))
    return footer_metrics(md, target.schema, target.metrics, leaves=leaves, foreign_footer=True)


def _orc_metrics(io: FileIO, path: str, target: ImportTarget) -> ParquetMetrics:
    with io.new_input(path).open() as stream:
        footer = read_orc_footer(stream, path)
    return orc_metrics(footer, target.schema, target.metrics, target.mapping)


def _avro_metrics(io: FileIO, path: str) -> ParquetMetrics:
    return ParquetMetrics(record_count=avro_record_count(io.new_input(path).read(), path))


def imported_data_file(
    io: FileIO, path: str, size: int, target: ImportTarget, spec_id: int, partition: tuple,
    file_format: str = "parquet",
) -> DataFile:
    """The ``DataFile`` of the existing ``file_format`` (``parquet``, ``orc``, ``avro``) file ``path``
    (``size`` bytes) in partition ``partition`` of spec ``spec_id``.  A file that is not of that
    format raises InvalidMetadataError naming it."""
    fmt = FileFormat(file_format.upper())
    if fmt == FileFormat.ORC:
        m = _orc_metrics(io, path, target)
    elif fmt == FileFormat.AVRO:
        m = _avro_metrics(io, path)
    else:
        m = _parquet_metrics(io, path, target)
    df = metrics_data_file(path, size, m, partition, spec_id, 0, split_offsets=False)
    if fmt == FileFormat.AVRO:
        # Java's Avro metrics are the record count alone: every metrics map is absent, not empty
        return dataclasses.replace(df, file_format=fmt, column_sizes=None, value_counts=None, null_value_counts=None,
                                   nan_value_counts=None, lower_bounds=None, upper_bounds=None)
    return df if fmt == FileFormat.PARQUET else dataclasses.replace(df, file_format=fmt)
