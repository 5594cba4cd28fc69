"""Conformance oracles: three independent Iceberg readers and row comparison.

Every conformance test checks a table written by our code (or by Java) against readers we did not write:

* ``java_read`` -- Iceberg Java 1.10.2 through Spark (the reference implementation);
* ``pyiceberg_read`` -- PyIceberg 0.12 ``StaticTable`` (an independent Python reader);
* ``duckdb_read`` -- DuckDB 1.5.5's ``iceberg`` extension, loaded from the pip-shipped extension files with
  autoinstall/autoload off, so a run never touches the network.

All three return a ``pyarrow.Table``.  ``sorted_rows`` turns a table into a list of plain dicts whose values
are normalized to one representation (UTC-aware datetimes for ``timestamptz``, naive for ``timestamp``,
``Decimal``, ``bytes``, uuids as lowercase strings, maps as dicts, NaN as the string ``"NaN"``), so rows from
different readers compare with ``==`` and a mismatch shows the offending values.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib.util
import math
import threading
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa

from tests.helpers.references import SPARK4

__all__ = [
    "assert_rows_equal",
    "duckdb_read",
    "read_all",
    "java_metadata_location",
    "java_read",
    "normalize_value",
    "pyiceberg_read",
    "rows_equal",
    "sorted_rows",
    "spark_df_to_arrow",
]

DUCKDB_EXTENSION_VERSION = "v1.5.5"


# --------------------------------------------------------------------------------------------- locations


def _local_path(location: str | Path) -> str:
    """A plain local path for ``file:`` URIs (Java writes ``file:/x``; PyIceberg and DuckDB want ``/x``)."""
    text = str(location)
    if text.startswith("file://"):
        return text[len("file://") :]
    if text.startswith("file:"):
        return text[len("file:") :]
    return text


def java_metadata_location(warehouse: str | Path, ns: str | Sequence[str], table: str) -> str:
    """Current ``vN.metadata.json`` of a Java hadoop-catalog table, found through ``version-hint.text``.

    ``ns`` is a dotted namespace (``"db"`` or ``"a.b"``) or a sequence of levels.  A hadoop table lives at
    ``<warehouse>/<ns levels>/<table>``; its hint file holds the current version number N.
    """
    levels = ns.split(".") if isinstance(ns, str) else list(ns)
    metadata_dir = Path(_local_path(warehouse)).joinpath(*levels, table, "metadata")
    hint = metadata_dir / "version-hint.text"
    if not hint.is_file():
        raise FileNotFoundError(
            f"No version-hint.text in {metadata_dir}: is {'.'.join(levels)}.{table} a hadoop-catalog table "
            f"under warehouse {warehouse}?"
        )
    version = int(hint.read_text().strip())
    # Java names the file by its compression codec; check both spellings before giving up.
    for name in (f"v{version}.metadata.json", f"v{version}.gz.metadata.json"):
        candidate = metadata_dir / name
        if candidate.is_file():
            return str(candidate)
    raise FileNotFoundError(f"version-hint.text in {metadata_dir} says {version} but v{version}.metadata.json is missing")


# --------------------------------------------------------------------------------------------- readers


def java_read(spark: Any, table_ident_or_location: str, snapshot_id: int | None = None) -> pa.Table:
    """Read a table through Iceberg Java in ``spark``.

    A catalog identifier (``"jcat.db.t"``) is read through its catalog.  A location -- anything containing
    ``/`` -- is loaded path-based with ``spark.read.format("iceberg").load``; a ``*.metadata.json`` path is
    opened read-only at exactly that metadata file (Java's static table operations), which is how tables
    written by our own catalogs are checked.
    """
    reader = spark.read.format("iceberg")
    if snapshot_id is not None:
        reader = reader.option("snapshot-id", str(int(snapshot_id)))
    # Iceberg's Spark source takes either form: a string with "/" is a location, otherwise an identifier.
    return spark_df_to_arrow(reader.load(str(table_ident_or_location)))


def spark_df_to_arrow(df: Any) -> pa.Table:
    """Collect a Spark DataFrame as a ``pyarrow.Table`` with Spark's own Arrow schema.

    ``DataFrame.toArrow`` only exists from Spark 4; 3.5's internal ``_collect_as_arrow`` is the same code
    path ``toPandas`` uses, and keeps timestamps as UTC micros instead of local-time Python datetimes.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = df._collect_as_arrow()
    if not batches:
        return to_arrow_schema(df.schema).empty_table()
    return pa.Table.from_batches(batches)


def pyiceberg_read(metadata_path: str | Path, snapshot_id: int | None = None) -> pa.Table:
    """Read a table with PyIceberg's ``StaticTable`` at ``metadata_path`` (optionally at ``snapshot_id``)."""
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(_local_path(metadata_path))
    scan = table.scan(snapshot_id=snapshot_id) if snapshot_id is not None else table.scan()
    return scan.to_arrow()


_duckdb_lock = threading.Lock()


def _duckdb_extension(package: str, name: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"Python package {package} is not installed; install the test extra: pip install -e '.[test]'")
    path = Path(list(spec.submodule_search_locations)[0]) / "extensions" / DUCKDB_EXTENSION_VERSION / f"{name}.duckdb_extension"
    if not path.is_file():
        raise RuntimeError(f"DuckDB extension file missing: {path} (package {package} should ship it)")
    return path


@functools.cache
def _duckdb_connection() -> Any:
    """One in-memory DuckDB connection with the pip-shipped avro and iceberg extensions loaded.

    Autoinstall/autoload are off so DuckDB never downloads anything; avro must be loaded before iceberg
    because the iceberg extension's init would otherwise try to install it from the network.
    """
    import duckdb

    con = duckdb.connect(
        ":memory:", config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    )
    con.execute("SET autoinstall_known_extensions=false")
    con.execute("SET autoload_known_extensions=false")
    con.execute("SET TimeZone='UTC'")
    for package, name in (("duckdb_extension_avro", "avro"), ("duckdb_extension_iceberg", "iceberg")):
        con.execute(f"LOAD {_sql_string(str(_duckdb_extension(package, name)))}")
    return con


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def duckdb_read(metadata_path: str | Path, snapshot_id: int | None = None) -> pa.Table:
    """Read a table with DuckDB's ``iceberg_scan`` at ``metadata_path`` (optionally at ``snapshot_id``)."""
    args = _sql_string(_local_path(metadata_path))
    if snapshot_id is not None:
        args += f", snapshot_from_id => {int(snapshot_id)}"
    with _duckdb_lock:
        con = _duckdb_connection()
        return con.execute(f"SELECT * FROM iceberg_scan({args})").to_arrow_table()


# --------------------------------------------------------------------------------------------- comparison


def _is_uuid_type(arrow_type: pa.DataType) -> bool:
    # PyIceberg returns Iceberg uuid as Arrow's canonical uuid extension (16 bytes); Spark and DuckDB return
    # the canonical string form, so the extension values are turned into that string.
    return isinstance(arrow_type, pa.ExtensionType) and arrow_type.extension_name == "arrow.uuid"


def normalize_value(value: Any, arrow_type: pa.DataType | None = None) -> Any:
    """One comparable representation of a value produced by ``pyarrow``'s ``to_pylist``.

    With ``arrow_type`` the value is normalized by its declared type (maps become dicts even when empty,
    uuid extension bytes become strings); without it, by its Python type.  Timezone-aware datetimes move
    to UTC (Iceberg stores the instant); naive ones stay naive, so a ``timestamp`` read as ``timestamptz``
    (or the reverse) shows up as a difference.  NaN becomes the string ``"NaN"`` because ``nan != nan``
    would make equal rows differ.
    """
    if value is None:
        return None
    if arrow_type is not None:
        if _is_uuid_type(arrow_type):
            return str(value) if isinstance(value, uuid.UUID) else str(uuid.UUID(bytes=bytes(value)))
        if pa.types.is_map(arrow_type):
            return {
                normalize_value(k, arrow_type.key_type): normalize_value(v, arrow_type.item_type) for k, v in value
            }
        if pa.types.is_struct(arrow_type):
            return {
                arrow_type.field(i).name: normalize_value(value.get(arrow_type.field(i).name), arrow_type.field(i).type)
                for i in range(arrow_type.num_fields)
            }
        if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
            return [normalize_value(v, arrow_type.value_type) for v in value]
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc) if value.tzinfo is not None else value
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else value
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, dict):
        return {k: normalize_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(normalize_value(v) for v in value)
    return value


def _column_values(column: pa.ChunkedArray) -> list[Any]:
    arrow_type = column.type
    if _is_uuid_type(arrow_type):
        column = column.cast(arrow_type.storage_type)
    return [normalize_value(v, arrow_type) for v in column.to_pylist()]


def _sort_key(value: Any) -> tuple:
    if value is None:
        return (0, "")
    if isinstance(value, (bool, int, float, Decimal, str, bytes, dt.date, dt.datetime, dt.time)):
        return (1, value)
    return (2, repr(value))


def sorted_rows(table: pa.Table | Sequence[dict], key: str | Sequence[str] | None = None) -> list[dict]:
    """Rows of ``table`` as normalized dicts sorted by ``key`` columns (all columns when ``None``)."""
    if isinstance(table, (pa.Table, pa.RecordBatch)):
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        names = table.column_names
        columns = [_column_values(table.column(i)) for i in range(table.num_columns)]
        rows = [dict(zip(names, values)) for values in zip(*columns)] if names else [{} for _ in range(table.num_rows)]
    else:
        rows = [{k: normalize_value(v) for k, v in row.items()} for row in table]
    keys = [key] if isinstance(key, str) else list(key) if key is not None else None

    def row_key(row: dict) -> tuple:
        names = keys if keys is not None else list(row)
        return tuple(_sort_key(row.get(name)) for name in names)

    return sorted(rows, key=row_key)


def _rows_and_diff(a: Any, b: Any, key: str | Sequence[str] | None) -> str | None:
    rows_a, rows_b = sorted_rows(a, key), sorted_rows(b, key)
    cols_a = sorted(rows_a[0]) if rows_a else _columns(a)
    cols_b = sorted(rows_b[0]) if rows_b else _columns(b)
    if cols_a is not None and cols_b is not None and cols_a != cols_b:
        return f"columns differ: {cols_a} != {cols_b}"
    if len(rows_a) != len(rows_b):
        return f"row counts differ: {len(rows_a)} != {len(rows_b)}; first rows {rows_a[:3]} vs {rows_b[:3]}"
    for index, (ra, rb) in enumerate(zip(rows_a, rows_b)):
        if ra != rb:
            fields = {k: (ra.get(k), rb.get(k)) for k in ra if ra.get(k) != rb.get(k)}
            return f"row {index} differs in {fields}: {ra} != {rb}"
    return None


def _columns(table: Any) -> list[str] | None:
    if isinstance(table, (pa.Table, pa.RecordBatch)):
        return sorted(table.column_names)
    return None


def rows_equal(a: Any, b: Any, key: str | Sequence[str] | None = None) -> bool:
    """Whether two tables (or lists of row dicts) hold the same rows, ignoring order and column order."""
    return _rows_and_diff(a, b, key) is None


def assert_rows_equal(a: Any, b: Any, key: str | Sequence[str] | None = None, label: str = "") -> None:
    """Assert ``rows_equal``; the message names the first differing row and field."""
    diff = _rows_and_diff(a, b, key)
    if diff is not None:
        raise AssertionError(f"{label + ': ' if label else ''}{diff}")


def read_all(spark: Any, ident: str, metadata_path: str, snapshot_id: int | None = None) -> dict[str, pa.Table]:
    """The table as each oracle sees it: ``{"java": ..., "pyiceberg": ..., "duckdb": ...}`` (no ``"java"``
    on pyspark 4, where the Iceberg Java runtime cannot load)."""
    readers = {} if SPARK4 else {"java": java_read(spark, ident, snapshot_id)}
    readers["pyiceberg"] = pyiceberg_read(metadata_path, snapshot_id)
    readers["duckdb"] = duckdb_read(metadata_path, snapshot_id)
    return readers

