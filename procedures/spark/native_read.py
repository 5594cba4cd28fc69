"""Reading planned scans with Spark's own vectorized Parquet reader where that is exactly right.

The Python reader (:func:`procedures.spark.read.read_tasks`) hands every row from Python workers to
the JVM through Arrow; Spark's Parquet reader reads the same files without that hand-over.
:func:`procedures.core.native_route.plan_native_read` decides from metadata alone whether a by-name
read of the planned files gives exactly the by-field-id rows; this module adds what only the
session knows and builds the DataFrame through the DataFrame API alone (classic 3.5, classic 4.x
and Spark Connect):

* the route can be turned off per read (``native=False``), per session
  (``spark.procedures.read.native-parquet.enabled=false``) or per table
  (``read.native-parquet.enabled=false``), in that order of precedence;
* dry runs (a sandboxed FileIO) and tables with a column named ``_metadata`` (which would hide
  Spark's file metadata column) read through Python;
* position deletes (only with ``spark.procedures.read.native-parquet.position-deletes.enabled=true``:
  the anti-join measured slower than the Python reader, so by default a scan with deletes reads
  through Python) are removed with a broadcast anti-join on (file, ``_metadata.row_index``).  The
  file is matched through Spark's own percent-encoding of each path (from ``DataFrame.inputFiles``,
  which spells ``file:///a%20b`` where ``_metadata.file_path`` spells ``file:/a%20b``: both forms
  are joined), mapped back to our locations by the decoded local path, so spaces and ``%`` in
  paths cannot mismatch; any path that does not map back one-to-one sends the read to the Python
  path.

Every ``read_table`` logs (logger ``procedures.spark.read``, level INFO) which route it took and why.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence
from urllib.parse import unquote

from procedures.catalog.base import Table
from procedures.core.kernel.paths import local_path
from procedures.core.kernel.properties import READ_NATIVE_PARQUET_ENABLED, parse_bool
from procedures.core.kernel.scan import FileScanTask
from procedures.core.native_route import NativeReadPlan, plan_native_read
from procedures.io.sandbox_fileio import SANDBOX_PROPERTY
from procedures.spark.dataframes import conf_value, functions, local_frame, struct_schema
from procedures.spark.sql_quoting import quote_name
from procedures.spec.schema import Schema

__all__ = ["NATIVE_READ_CONF", "NATIVE_POSITION_DELETES_CONF", "native_read_plan", "read_native", "required_non_null",
           "spark_local_paths"]

#: the session switch of the native route (a read's ``native`` option wins over it)
NATIVE_READ_CONF = "spark.procedures.read.native-parquet.enabled"
#: the session switch that lets position deletes be applied by Spark (an anti-join), off by default:
#: measured on bench_scan (5M rows, 5% position-deleted) it took about 3x the Python reader's time
NATIVE_POSITION_DELETES_CONF = "spark.procedures.read.native-parquet.position-deletes.enabled"
#: broadcast the deleted positions up to this many rows; beyond, Spark chooses the join
BROADCAST_DELETE_ROWS = 20_000_000
#: a row position shares a long join key with its file's index: positions stay below 2**40
_POS_BITS = 40

#: names the route's DataFrames use beside the table's columns
_RESERVED = frozenset({"_metadata", "__spark_path", "__pos", "__file", "__key", "__delete_path", "__data_path"})

log = logging.getLogger(__name__)


class _NotExact(Exception):
    """Spark's view of the files does not map back one-to-one onto ours."""


def native_read_plan(spark: Any, table: Table, projected: Schema, tasks: Sequence[FileScanTask],
                     metadata_columns: Sequence[str] = (), native: bool | None = None) -> NativeReadPlan:
    """The route of one read: the switches (``native``, then the session conf, then the table
    property), the session-side conditions, then :func:`plan_native_read`."""
    if native is None:
        # a default of "" (not None, which Spark Connect does not take as a default) marks it unset
        conf = conf_value(spark, NATIVE_READ_CONF, "")
        if conf:
            native = parse_bool(conf, True)
        else:
            native = READ_NATIVE_PARQUET_ENABLED.read(table.metadata.properties)
    if not native:
        return NativeReadPlan(False, "the native Parquet route is turned off")
    if parse_bool((getattr(table.io, "properties", None) or {}).get(SANDBOX_PROPERTY), False):
        return NativeReadPlan(False, "the read is part of a dry run")
    if any(f.name.lower() in _RESERVED for f in projected.fields):
        return NativeReadPlan(False, "a column is named _metadata (Spark's file metadata) or like a join column "
                                     "of the route")
    with_deletes = parse_bool(conf_value(spark, NATIVE_POSITION_DELETES_CONF, "") or None, False)
    return plan_native_read(table.metadata, projected, tasks, metadata_columns, position_deletes=with_deletes)


def spark_local_paths(spark_paths: Sequence[str]) -> dict[str, str]:
    """The percent-encoded path of Spark's URI spelling of local files (``file:/a%20b`` or
    ``file:///a%20b`` -> ``/a%20b``) by decoded OS path (``/a b``)."""
    out: dict[str, str] = {}
    for s in spark_paths:
        if not s.startswith("file:"):
            raise _NotExact(s)
        rest = s[5:]
        if rest.startswith("//"):
            authority, _, tail = rest[2:].partition("/")
            if authority not in ("", "localhost"):
                raise _NotExact(s)
            rest = "/" + tail
        local = unquote(rest)
        if local in out:
            raise _NotExact(s)
        out[local] = rest
    return out


def _spark_spellings(frame: Any, locations: Sequence[str]) -> list[list[str]]:
    """Each location's spellings Spark may use for it (``DataFrame.inputFiles`` writes
    ``file:///x``, ``_metadata.file_path`` ``file:/x``; both percent-encode alike)."""
    by_local = spark_local_paths(frame.inputFiles())
    wanted = [local_path(loc) for loc in locations]
    if len(by_local) != len(set(wanted)) or any(w not in by_local for w in wanted):
        raise _NotExact("input files")
    return [["file:" + by_local[w], "file://" + by_local[w]] for w in wanted]  # type: ignore[index]


def _parquet(spark: Any, schema: Any, paths: Sequence[str]) -> Any:
    # Iceberg files carry no Spark writer tag: Spark would refuse (EXCEPTION) or shift ancient
    # dates; they are proleptic Gregorian.  Missing or corrupt files must fail the read as ours do,
    # whatever the session says.
    return (spark.read.schema(schema)
            .option("datetimeRebaseMode", "CORRECTED").option("int96RebaseMode", "CORRECTED")
            .option("ignoreMissingFiles", "false").option("ignoreCorruptFiles", "false")
            .option("mergeSchema", "false")
            .parquet(*paths))


def read_native(spark: Any, plan: NativeReadPlan, schema: Any, delete_rows: int = 0) -> Any | None:
    """The planned files read by Spark's Parquet reader into the Spark ``schema`` (a StructType of
    the projection), position deletes removed; ``None`` when Spark's view of the paths does not map
    back exactly (the caller then reads through Python).  ``delete_rows`` (the delete files'
    record count) chooses whether the deleted positions are broadcast."""
    data = _parquet(spark, schema, plan.native_paths)
    if not plan.position_deletes:
        return data
    F = functions(spark)
    try:
        data_spelled = _spark_spellings(data, plan.data_files)
        deletes = _parquet(spark, struct_schema("file_path string, pos long"), _native_delete_paths(plan))
        delete_spelled = dict(zip(plan.delete_files, _spark_spellings(deletes, plan.delete_files)))
    except _NotExact as e:
        log.info("native Parquet route declined: Spark spells %s differently; reading through Python", e)
        return None
    index = {loc: i for i, loc in enumerate(plan.data_files)}
    files = local_frame(spark, [(s, i) for i, spellings in enumerate(data_spelled) for s in spellings],
                        struct_schema("__spark_path string, __file long"))
    pairs = local_frame(spark, [(s, f, index[f]) for d, f in plan.position_deletes for s in delete_spelled[d]],
                        struct_schema("__delete_path string, __data_path string, __file long"))
    positions = (deletes.select(F.col("_metadata.file_path").alias("__delete_path"),
                                F.col("file_path").alias("__data_path"), F.col("pos"))
                 .join(F.broadcast(pairs), ["__delete_path", "__data_path"])
                 .select((F.shiftleft(F.col("__file"), _POS_BITS) + F.col("pos")).alias("__key")))
    if delete_rows <= BROADCAST_DELETE_ROWS:
        positions = F.broadcast(positions)
    keyed = (data.select("*", F.col("_metadata.file_path").alias("__spark_path"),
                         F.col("_metadata.row_index").alias("__pos"))
             .join(F.broadcast(files), "__spark_path")
             .withColumn("__key", F.shiftleft(F.col("__file"), _POS_BITS) + F.col("__pos")))
    return keyed.join(positions, "__key", "left_anti").select(*[_column(F, n) for n in schema.fieldNames()])


def _native_delete_paths(plan: NativeReadPlan) -> list[str]:
    return ["file:" + local_path(d) for d in plan.delete_files]  # type: ignore[operator]


def required_non_null(spark: Any, df: Any, projected: Schema) -> Any:
    """``df`` (a native read, after any filter) with the projection's required top-level columns
    non-nullable, as the Python reader gives them: the file source makes every field nullable.
    Applied after the filter, so Spark still pushes the filter into the Parquet scan."""
    required = {f.name for f in projected.fields if f.required}
    if not required:
        return df
    F = functions(spark)
    schema = df.schema
    cols = []
    for sf in schema.fields:
        c = _column(F, sf.name)
        if sf.name in required:
            # never taken: Iceberg writers write every row of a required column
            c = F.coalesce(c, _zero(F, sf.dataType)).alias(sf.name)
        cols.append(c)
    return df.select(*cols)


def _column(F: Any, name: str) -> Any:
    """The top-level column ``name``, quoted so dots and backticks in it are no path."""
    return F.col(quote_name(name))


def _zero(F: Any, data_type: Any) -> Any:
    """A non-null literal of ``data_type`` (a Spark primitive type)."""
    name = type(data_type).__name__
    literal = {
        "BooleanType": "false", "StringType": "''", "BinaryType": "X''", "DateType": "DATE'1970-01-01'",
        "TimestampType": "TIMESTAMP'1970-01-01 00:00:00Z'", "TimestampNTZType": "TIMESTAMP_NTZ'1970-01-01 00:00:00'",
    }.get(name)
    if literal is None:
        literal = f"CAST(0 AS {data_type.simpleString()})"
    return F.expr(literal)
