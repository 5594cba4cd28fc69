"""Reading any name Iceberg's Spark catalog reads: a table, one of its metadata tables
(``cat.db.t.snapshots``) or a snapshot selector (``cat.db.t.branch_dev``, ``.tag_v1``,
``.snapshot_id_<id>``, ``.at_timestamp_<millis>``), with time travel.

This is the ``procedures.read_table`` of the public API and what the SQL front end reads each of our
tables with; :func:`procedures.spark.read.read_table` reads the rows of one loaded table.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Sequence

from procedures.catalog.base import Table
from procedures.core.kernel.scan import snapshot_id_as_of_time
from procedures.core.table_selectors import TableSelection, select_table, with_version
from procedures.errors import ValidationError
from procedures.spec.expressions import Expression
from procedures.spark.catalog_conf import resolve_in_session
from procedures.spark.metadata_tables import SNAPSHOT_TABLES, metadata_table
from procedures.spark.environment import check_session
from procedures.spark.read import as_of_ms
from procedures.spark.read import read_table as read_table_rows

__all__ = ["read_table", "read_selection", "selection_of"]


def selection_of(spark: Any, table: str | Table) -> TableSelection:
    """What the name ``table`` (``cat.db.t``, ``cat.db.t.files``, ``cat.db.t.branch_b``, ...) reads."""
    check_session(spark)
    if isinstance(table, Table):
        return TableSelection(table)
    catalog, ident = resolve_in_session(spark, table)
    return select_table(catalog, ident, table)


def read_selection(spark: Any, sel: TableSelection, **kwargs: Any) -> Any:
    """The DataFrame of a resolved name: a metadata table (as of its chosen snapshot when it is one
    Java reads from a snapshot; the others always describe the whole table) or the table's rows
    through :func:`procedures.spark.read.read_table` (``kwargs`` are its options)."""
    if sel.metadata_table is None:
        return read_table_rows(spark, sel.table, snapshot_id=sel.snapshot_id, as_of_timestamp=sel.as_of_ms,
                               ref=sel.ref, **kwargs)
    md = sel.table.metadata
    snapshot_id = sel.snapshot_id
    if sel.as_of_ms is not None:
        snapshot_id = snapshot_id_as_of_time(md, sel.as_of_ms)
    elif sel.ref is not None:
        snapshot_id = md.refs[sel.ref].snapshot_id
    if sel.metadata_table not in SNAPSHOT_TABLES:
        snapshot_id = None
    df = metadata_table(spark, sel.table, sel.metadata_table, snapshot_id)
    if kwargs.get("metadata_columns"):
        raise ValidationError(f"Metadata table {sel.metadata_table} has no metadata columns")
    if isinstance(kwargs.get("filter"), str) and kwargs["filter"].strip():
        df = df.where(kwargs["filter"])
    elif kwargs.get("filter") is not None:
        raise ValidationError("A metadata table takes its filter as Spark SQL text")
    if kwargs.get("columns") is not None:
        df = df.select(*kwargs["columns"])
    return df


def read_table(
    spark: Any,
    table: str | Table,
    snapshot_id: int | None = None,
    as_of_timestamp: int | dt.datetime | str | None = None,
    ref: str | None = None,
    filter: str | Expression | None = None,
    columns: Sequence[str] | None = None,
    metadata_columns: Sequence[str] = (),
    *,
    case_sensitive: bool = True,
    native: bool | None = None,
) -> Any:
    """Read ``table`` as a Spark DataFrame: ``"cat.db.t"`` or a loaded :class:`Table`, or a metadata
    table or snapshot selector of one (``"cat.db.t.snapshots"``, ``"cat.db.t.branch_dev"``), as
    Iceberg's Spark catalog resolves the name.

    ``snapshot_id``, ``as_of_timestamp`` (epoch millis, a datetime, or ISO text; naive means UTC) or
    ``ref`` (branch or tag) choose the snapshot (of a table, or of the metadata tables Java reads from
    one snapshot); ``filter`` (Spark-SQL text or an expression) prunes files and, when given as text,
    is also applied to the rows; ``columns`` selects top-level or dotted columns; ``metadata_columns``
    adds ``_file``, ``_pos``, ``_spec_id``, ``_partition``, ``_deleted``, ``_row_id``,
    ``_last_updated_sequence_number`` after them (tables only); ``native`` switches Spark's own
    Parquet reader on or off for this read (:func:`procedures.spark.read.read_table`).
    """
    sel = selection_of(spark, table)
    display = table if isinstance(table, str) else sel.table.name
    if ref is not None:
        if sel.time_travel:
            raise ValidationError(f"Cannot do time-travel based on both table identifier and ref: {display}")
        sel = TableSelection(sel.table, sel.metadata_table, ref=ref)
    elif snapshot_id is not None or as_of_timestamp is not None:
        if snapshot_id is not None and as_of_timestamp is not None:
            raise ValidationError(f"Cannot read {display} with both snapshot_id and as_of_timestamp: choose one")
        sel = with_version(sel, version=snapshot_id, as_of_ms=as_of_ms(as_of_timestamp), display=display)
    extra = {} if native is None else {"native": native}
    return read_selection(spark, sel, filter=filter, columns=columns, metadata_columns=metadata_columns,
                          case_sensitive=case_sensitive, **extra)
