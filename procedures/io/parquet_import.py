"""Existing Parquet files described as ``data_file`` entries, for ``add_files`` (procedures.md §3.11).

Only the footer is read.  Metrics come from the same code as the files we write
(:func:`procedures.io.parquet_writer.footer_metrics`), with the file's columns matched to the
table's fields by the file's field ids, or, for files without ids (Spark, Hive, other writers),
through the table's name mapping.  As Iceberg Java's import, there are no NaN counts and no split
offsets (the footer has neither), and float/double columns whose footer kept no min/max (Spark
drops them when a row group holds NaN) get no bounds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import pyarrow.parquet as pq

from procedures.errors import InvalidMetadataError
from procedures.io.fileio import FileIO
from procedures.io.parquet_writer import MetricsConfig, file_column_ids, footer_metrics, metrics_data_file
from procedures.spec.manifest import DataFile
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


def imported_data_file(
    io: FileIO, path: str, size: int, target: ImportTarget, spec_id: int, partition: tuple,
) -> DataFile:
    """The ``DataFile`` of the existing Parquet file ``path`` (``size`` bytes) in partition
    ``partition`` of spec ``spec_id``.  A file that is no Parquet raises InvalidMetadataError."""
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
    m = footer_metrics(md, target.schema, target.metrics, leaves=leaves, foreign_footer=True)
    return metrics_data_file(path, size, m, partition, spec_id, 0, split_offsets=False)
