"""Distributed steps through the DataFrame API alone, so one code path runs on a classic SparkSession
and on a Spark Connect session (which has no ``sparkContext``, RDDs, accumulators or py4j).

* :func:`is_connect` -- whether a session is a Spark Connect client.
* :func:`parallelism` -- how many tasks the session runs at once, from its conf
  (``spark.procedures.parallelism``, ``spark.default.parallelism``,
  ``spark.sql.leafNodeDefaultParallelism``), else measured once per application by a JVM-only job.
* :func:`slices_frame` / :func:`run_slices` -- the replacement for
  ``sc.parallelize(items, n).mapPartitions(fn).collect()``: each slice of Python objects becomes one row
  (its pickle), each row one task, and what ``fn`` yields comes back to the driver as pickled rows.
* :func:`payload_frame` -- the same for payloads already in bytes; :func:`empty_frame` -- no rows, a
  given schema, no task.

How a payload gets a task of its own.  Up to :data:`INLINE_PAYLOAD_BYTES` in all, the payloads travel
inside the query plan as one literal and ``spark.range(0, n, 1, n)`` (row ``i`` alone in partition
``i``) picks row ``i``'s: no shuffle, no Python pass, no job before the one that uses the frame -- as
cheap as the classic ``parallelize`` it replaces.  Every task then holds every payload, so past that
size the payloads become a local DataFrame hash-partitioned on a ``slot`` column into ``n`` partitions,
slot values chosen on the driver so that Spark's partition rule (``pmod(murmur3(slot, seed 42), n)``,
the rule of ``HashPartitioning`` since Spark 2) sends payload ``i`` to partition ``i``.  Payload numbers
themselves would collide (two payloads in one task, another task idle), and a round-robin repartition
starts each input partition at a random place.  AQE never coalesces a repartition with an explicit
partition count.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import functools
import pickle
import struct
import threading
import weakref
from typing import Any, Callable, Iterable, Iterator, Sequence

from procedures.spark.sql_quoting import quote_name

__all__ = [
    "PARALLELISM_CONF",
    "is_connect",
    "parallelism",
    "session_key",
    "app_id",
    "slices_frame",
    "payload_frame",
    "empty_frame",
    "no_result",
    "INLINE_PAYLOAD_BYTES",
    "map_slices",
    "run_slices",
    "iter_slices",
    "unpickle_rows",
    "collect_first_column",
    "collect_columns",
    "with_schema",
    "partition_slots",
    "functions",
    "struct_schema",
    "local_frame",
    "conf_scope",
    "scoped_conf",
    "conf_value",
    "query_frame",
]

#: our own override of the session's parallelism (an int), read before Spark's keys
PARALLELISM_CONF = "spark.procedures.parallelism"
#: Spark's keys that say how many tasks a stage runs, first one set wins
_SPARK_PARALLELISM_KEYS = ("spark.default.parallelism", "spark.sql.leafNodeDefaultParallelism")
#: rows of a probe job; ``spark.range`` splits them over the session's default parallelism
_PROBE_ROWS = 1 << 20
_PAYLOAD_SCHEMA = "payload binary"
#: the type names :func:`struct_schema` reads, with the ``pyspark.sql.types`` class of each
_DDL_TYPES = {"string": "StringType", "binary": "BinaryType", "int": "IntegerType", "integer": "IntegerType",
              "bigint": "LongType", "long": "LongType", "double": "DoubleType", "boolean": "BooleanType"}
#: results per Arrow batch coming back from a task
_BATCH_ROWS = 1024

#: payload bytes a frame carries inline in its plan at most: every task deserializes them all (about
#: a millisecond per MB, against tens of milliseconds of a Python task's own start)
INLINE_PAYLOAD_BYTES = 1 << 20

#: Spark's seed of ``Murmur3Hash`` in ``HashPartitioning``
_SPARK_HASH_SEED = 42

_LOCK = threading.Lock()
_measured: dict[tuple, int] = {}
#: ``spark.app.id`` per live session object: a session's application never changes, and on Spark
#: Connect every ``spark.conf.get`` is a round trip to the server (several per procedure otherwise)
_app_ids: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
#: the session and its conf as read once for the statement running in this context (:func:`conf_scope`)
_STATEMENT_CONF: "contextvars.ContextVar[tuple[Any, dict] | None]" = contextvars.ContextVar(
    "procedures_statement_conf", default=None)


@contextlib.contextmanager
def conf_scope(spark: Any, conf: dict) -> Iterator[dict]:
    """Within the block, ``conf`` (the session's conf, read once for a statement) answers every conf
    lookup of the package on ``spark`` (:func:`scoped_conf`): on Spark Connect each read of the conf is
    a round trip to the server, and one statement asked for it several times (the catalog, then the
    parallelism of each distributed step).  A statement changes no conf key the package reads, so
    the one read holds for its whole run (and goes along to the threads it starts through
    :func:`procedures.spark.session.in_caller_context`)."""
    token = _STATEMENT_CONF.set((spark, conf))
    try:
        yield conf
    finally:
        _STATEMENT_CONF.reset(token)


def scoped_conf(spark: Any) -> dict | None:
    """The conf of ``spark`` read for the running statement (:func:`conf_scope`), else None."""
    current = _STATEMENT_CONF.get()
    return current[1] if current is not None and current[0] is spark else None


def conf_value(spark: Any, key: str, default: str) -> str:
    """``spark.conf.get(key, default)``, from the running statement's conf when there is one
    (:func:`conf_scope`: a key the session does not set has its default either way)."""
    scoped = scoped_conf(spark)
    if scoped is not None:
        return str(scoped.get(key, default))
    return spark.conf.get(key, default)


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (``pyspark.sql.connect``), by its class's module,
    so the check works without importing the Connect client's dependencies."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def functions(spark: Any) -> Any:
    """The ``functions`` module whose columns ``spark``'s DataFrames take: ``pyspark.sql.functions``
    picks Connect or classic by the process's mode, which is wrong in a process holding both kinds
    (a notebook beside a remote session, our tests), so the package asks the session."""
    if is_connect(spark):
        from pyspark.sql.connect import functions as connect_functions  # noqa: PLC0415

        return connect_functions
    from pyspark.sql import functions as classic_functions  # noqa: PLC0415 -- the package loads without pyspark

    return classic_functions


@functools.lru_cache(maxsize=None)
def _parsed_schema(ddl: str) -> Any:
    from pyspark.sql import types  # noqa: PLC0415 -- the package loads without pyspark

    fields = []
    for column in ddl.split(","):
        name, _, type_name = column.strip().rpartition(" ")
        name = name.strip()
        if name.startswith("`") and name.endswith("`"):
            name = name[1:-1].replace("``", "`")
        if not name or type_name.lower() not in _DDL_TYPES:
            raise ValueError(f"struct_schema reads 'name type, ...' with a type of {sorted(_DDL_TYPES)}: {ddl!r}")
        fields.append(types.StructField(name, getattr(types, _DDL_TYPES[type_name.lower()])(), True))
    return types.StructType(fields)


def struct_schema(schema: Any) -> Any:
    """``schema`` as a ``StructType``: a ``StructType`` as is, a flat DDL text (``"path string, n
    int"``, the types of :data:`_DDL_TYPES`, every field nullable as Spark makes them) parsed here.

    Give ``mapInArrow``/``createDataFrame`` this, never the text: a Connect client sends a type text
    to the server to parse (a round trip per frame), and then knows no schema of the result (its
    ``columns`` are another round trip); a ``StructType`` is kept on the result.  pyspark's plain
    ``udf`` even parses a text through a classic SparkContext, which a process holding only a Connect
    session made without Connect mode lacks."""
    if not isinstance(schema, str):
        return schema
    return _parsed_schema(schema)


def app_id(spark: Any) -> str | None:
    """``spark.app.id`` of the session (both kinds read it through ``spark.conf``), read once per
    session object; None for a session without one (a stand-in in tests, a stopped one)."""
    try:
        return _app_ids[spark]
    except (KeyError, TypeError):
        pass
    try:
        app = spark.conf.get("spark.app.id", None)
    except Exception:  # noqa: BLE001 -- a stand-in session (tests) or a stopped one
        return None
    if not app:
        return None
    try:
        _app_ids[spark] = str(app)
    except TypeError:  # an object that cannot be weakly referenced: read again next time
        pass
    return str(app)


#: the Spark types :func:`local_frame` sends as Arrow on a classic session (no time zones to agree on)
_ARROW_LOCAL_TYPES = ("StringType", "LongType", "IntegerType", "ShortType", "ByteType", "BooleanType",
                      "DoubleType", "FloatType", "DecimalType", "BinaryType")


def _arrow_local(data_type: Any) -> bool:
    name = type(data_type).__name__
    if name == "ArrayType":
        return _arrow_local(data_type.elementType)
    if name == "MapType":
        return _arrow_local(data_type.keyType) and _arrow_local(data_type.valueType)
    return name in _ARROW_LOCAL_TYPES


#: Arrow bytes of rows up to which :func:`local_frame` builds a Connect local relation itself: far
#: below Spark's ``spark.sql.session.localRelationCacheThreshold`` (64 MB by default), past which
#: ``createDataFrame`` uploads the rows as an artifact instead of inlining them in the plan
LOCAL_RELATION_INLINE_BYTES = 1 << 20


def local_frame(spark: Any, rows: Sequence[tuple], schema: Any) -> Any:
    """``spark.createDataFrame(rows, schema)`` for a few rows held by the driver (``schema`` a
    ``StructType``), as a local relation that a collect or show reads without a Spark job.

    A classic session makes a list into an RDD read by a Python worker pass (a job of tens of
    milliseconds on every collect of a procedure's output); from pyspark 4 it takes an Arrow table as
    a local relation instead (below Spark's ``spark.sql.execution.arrow.localRelationThreshold``).
    Connect's ``createDataFrame`` makes a local relation too, but first asks the server for a batch
    of conf keys on every call (a round trip per procedure output): the time zone, the Arrow type
    options and the size past which the rows go as an artifact.  For a small table of the plain
    types of :data:`_ARROW_LOCAL_TYPES` none of them changes the plan, so the relation is built here
    as ``createDataFrame`` builds it (pyspark's Connect ``LocalRelation`` plan; when a pyspark lacks
    it, ``createDataFrame``).  Timestamps keep ``createDataFrame`` and its time-zone rules."""
    import pyspark  # noqa: PLC0415 -- the package loads without pyspark

    if int(pyspark.__version__.split(".")[0]) < 4 or not all(_arrow_local(f.dataType) for f in schema.fields):
        return spark.createDataFrame(list(rows), schema)
    table = _arrow_table(rows, schema)
    if table is None:
        return spark.createDataFrame(list(rows), schema)
    if is_connect(spark):
        return _connect_local_relation(spark, table, schema) or spark.createDataFrame(list(rows), schema)
    return spark.createDataFrame(table, schema)


def _arrow_table(rows: Sequence[tuple], schema: Any) -> Any:
    """``rows`` as an Arrow table of ``schema``'s Arrow types (the types ``createDataFrame`` sends);
    None when Arrow will not take a value as is (Spark's own checks then say what is wrong)."""
    import pyarrow as pa  # noqa: PLC0415
    from pyspark.sql.pandas.types import to_arrow_schema  # noqa: PLC0415

    arrow_schema = to_arrow_schema(schema)
    columns = list(zip(*rows)) if rows else [()] * len(schema.fields)
    try:
        return pa.Table.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(columns, arrow_schema)],
                                    schema=arrow_schema)
    except (pa.ArrowException, TypeError, ValueError):
        return None


def _connect_local_relation(spark: Any, table: Any, schema: Any) -> Any:
    """A Connect DataFrame over the local relation of ``table`` with ``schema``, as
    ``createDataFrame`` plans a small table; None for a large table or a pyspark whose Connect
    client plans it otherwise.

    The relation names no schema of its own where the Arrow table's schema converts to ``schema``
    exactly (names, types, nullability, column comments): the server then takes the Arrow schema
    as it is, where a given schema has it parse the text and plan a projection to it, which made
    collecting a procedure's one-row output take about 15 ms instead of 11 (min of 90, pyspark 4.3,
    loopback)."""
    if table.nbytes > LOCAL_RELATION_INLINE_BYTES:
        return None
    try:
        from pyspark.sql.connect.dataframe import DataFrame  # noqa: PLC0415
        from pyspark.sql.connect.plan import LocalRelation  # noqa: PLC0415
        from pyspark.sql.pandas.types import from_arrow_schema  # noqa: PLC0415

        if from_arrow_schema(table.schema) == schema:
            return DataFrame(LocalRelation(table), spark)
        return DataFrame(LocalRelation(table, schema=schema.json()), spark)
    except (ImportError, TypeError):  # another client's planning: createDataFrame then
        return None


def query_frame(spark: Any, query: str) -> Any:
    """``spark.sql(query)`` for a query (a SELECT, not a command), analyzed when the caller first
    asks for its schema or runs it.

    Connect's ``spark.sql`` sends every text to the server at once to find out whether it is a
    command, and for a query gets back the same text as a relation: one round trip in which the
    server analyzes the query, and a caller that then needs the columns asks the server to analyze
    it again.  The relation is built here as that answer holds it (pyspark's Connect ``SQL`` plan),
    so the caller's ``schema`` is the one round trip, and raises what ``spark.sql`` would have.  A
    classic ``spark.sql`` analyzes in the JVM, no round trip; so does a pyspark whose Connect client
    plans SQL otherwise."""
    if is_connect(spark):
        try:
            from pyspark.sql.connect.dataframe import DataFrame  # noqa: PLC0415
            from pyspark.sql.connect.plan import SQL  # noqa: PLC0415

            return DataFrame(SQL(query), spark)
        except (ImportError, TypeError):  # another client's planning: its spark.sql then
            pass
    return spark.sql(query)


def session_key(spark: Any) -> tuple:
    """A key for per-application caches: the session kind and ``spark.app.id`` (:func:`app_id`); a
    session without one is keyed by identity."""
    app = app_id(spark)
    return (is_connect(spark), app) if app else (is_connect(spark), id(spark))


def _positive_int(value: Any) -> int | None:
    try:
        number = int(str(value).strip()) if value is not None else None
    except ValueError:
        return None
    return number if number and number > 0 else None


def _conf_int(spark: Any, key: str) -> int | None:
    try:
        value = spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 -- Connect refuses some static keys; unset then
        return None
    return _positive_int(value)


def _parallelism_conf(spark: Any) -> int | None:
    """The first of :data:`PARALLELISM_CONF` and Spark's keys the session sets.  On Spark Connect every
    ``spark.conf.get`` is a round trip to the server, and a procedure asks for its parallelism several
    times, so the keys come in one read of the whole conf (``getAll``) there."""
    keys = (PARALLELISM_CONF, *_SPARK_PARALLELISM_KEYS)
    scoped = scoped_conf(spark)
    if scoped is not None:
        return next((n for n in (_positive_int(scoped.get(k)) for k in keys) if n), None)
    if is_connect(spark):
        try:
            entries = spark.conf.getAll
            entries = entries() if callable(entries) else entries
        except Exception:  # noqa: BLE001 -- an older server: the keys one at a time below
            entries = None
        if entries is not None:
            return next((n for n in (_positive_int(entries.get(k)) for k in keys) if n), None)
    return next((n for n in (_conf_int(spark, k) for k in keys) if n), None)


def parallelism(spark: Any) -> int:
    """How many tasks ``spark`` runs at once: ``spark.procedures.parallelism``, else Spark's
    ``spark.default.parallelism`` / ``spark.sql.leafNodeDefaultParallelism``, else the partitions
    Spark gives ``spark.range`` (its default parallelism), measured once per application by a job
    that runs in the JVM only (no Python worker)."""
    number = _parallelism_conf(spark)
    if number:
        return number
    key = session_key(spark)
    with _LOCK:
        known = _measured.get(key)
    if known:
        return known
    fns = functions(spark)
    # the partition id is projected first: Spark 4 refuses a non-deterministic argument of an aggregate
    row = spark.range(0, _PROBE_ROWS).select(fns.spark_partition_id().alias("p")).agg(fns.max("p").alias("p")).first()
    measured = max(1, int(row["p"]) + 1) if row is not None and row["p"] is not None else 1
    with _LOCK:
        _measured[key] = measured
    return measured


def partition_slots(n: int) -> list[int]:
    """Int keys ``k_0 .. k_{n-1}`` such that Spark's hash partitioning into ``n`` partitions sends
    ``k_i`` to partition ``i`` (``pmod(murmur3_32(k_i, 42), n) == i``)."""
    import mmh3  # noqa: PLC0415 -- a runtime dependency; imported where used

    slots: list[int | None] = [None] * n
    missing = n
    candidate = 0
    while missing:
        target = mmh3.hash(struct.pack("<i", candidate), _SPARK_HASH_SEED) % n
        if slots[target] is None:
            slots[target] = candidate
            missing -= 1
        candidate += 1
    return [int(s) for s in slots if s is not None]


def slices_frame(spark: Any, slices: Sequence[Any]) -> Any:
    """A DataFrame of one row per slice (column ``payload``: the slice's pickle), each row in a
    partition of its own (:func:`payload_frame`).  The slices travel to the executors inside the query
    plan (a literal, or a local relation when large, which Connect caches server-side), so keep them
    to plans and paths, not data."""
    return payload_frame(spark, [pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL) for s in slices])


def payload_frame(spark: Any, payloads: Sequence[bytes], column: str = "payload") -> Any:
    """A DataFrame of one binary column ``column`` whose partition ``i`` holds payload ``i`` as its
    only row (see the module doc for how), on both session kinds."""
    n = len(payloads)
    schema = struct_schema(f"{quote_name(column)} binary")
    if not n:
        return empty_frame(spark, schema)
    fns = functions(spark)
    if sum(len(p) for p in payloads) <= INLINE_PAYLOAD_BYTES:
        # one string literal (folded once into an array by the optimizer): no job builds the frame
        joined = ",".join(base64.b64encode(p).decode("ascii") for p in payloads)
        picked = fns.element_at(fns.split(fns.lit(joined), ","), (fns.col("id") + 1).cast("int"))
        return with_schema(spark.range(0, n, 1, n).select(fns.unbase64(picked).alias(column)), schema)
    from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType  # noqa: PLC0415

    slots = partition_slots(n)
    rows = [(slots[i], bytearray(p)) for i, p in enumerate(payloads)]
    keyed = StructType([StructField("slot", IntegerType(), False), StructField(column, BinaryType(), False)])
    return with_schema(spark.createDataFrame(rows, keyed).repartition(n, "slot").select(column), schema)


def with_schema(df: Any, schema: Any) -> Any:
    """``df`` whose schema is ``schema`` (a ``StructType`` of the same columns and types, nullable
    where ``df``'s may be null), known to a Spark Connect client without asking the server.

    A Connect ``mapInArrow``/``mapInPandas`` sends the input's column names with the plan, and
    unless the client already knows the schema it asks the server to analyze the plan first (a round
    trip per job); ``df.to(schema)`` records the schema on the client.  A classic DataFrame is
    analyzed when built, so it is returned as it is."""
    return df.to(schema) if is_connect(df.sparkSession) else df


def _no_batches(batches: Iterator[Any]) -> Iterator[Any]:
    return iter(())


def empty_frame(spark: Any, schema: Any) -> Any:
    """A DataFrame of no rows with ``schema`` (a ``StructType``, nullability kept, or a flat DDL text
    :func:`struct_schema` reads) that runs
    no task: an always-false filter becomes an empty local relation in the optimizer (the
    ``sparkContext.emptyRDD`` of both session kinds)."""
    return spark.range(0, 0, 1, 1).mapInArrow(_no_batches, struct_schema(schema)).where(functions(spark).lit(False))


def no_result(spark: Any) -> Any:
    """The result of a statement that returns nothing (INSERT, DDL, DML): no columns, no rows, and
    no Spark job when a caller collects it (the always-false filter becomes an empty local relation;
    a classic ``createDataFrame([])`` parallelizes an RDD, about 10 ms per statement, and runs a job on
    every collect)."""
    return spark.range(0, 0, 1, 1).select().where("false")


def _pickled_batches(values: Iterable[Any]) -> Iterator[Any]:
    import pyarrow as pa  # noqa: PLC0415 -- on the executor

    chunk: list[bytes] = []
    for value in values:
        chunk.append(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        if len(chunk) >= _BATCH_ROWS:
            yield pa.RecordBatch.from_arrays([pa.array(chunk, pa.binary())], names=["payload"])
            chunk = []
    if chunk:
        yield pa.RecordBatch.from_arrays([pa.array(chunk, pa.binary())], names=["payload"])


def map_slices(df: Any, fn: Callable[[Any], Iterable[Any]]) -> Any:
    """``df`` (rows of pickled slices, :func:`slices_frame`) mapped by ``fn`` on the executors: each
    slice's unpickled value goes to ``fn``, and every value ``fn`` yields becomes one row of pickled
    ``payload``.  Chain it (a slice of results is again a ``payload`` row) or collect it with
    :func:`unpickle_rows`."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        for batch in batches:
            for payload in batch.column(0).to_pylist():
                yield from _pickled_batches(fn(pickle.loads(payload)))

    return df.mapInArrow(run, struct_schema(_PAYLOAD_SCHEMA))


def unpickle_rows(rows: Iterable[Any]) -> Iterator[Any]:
    """The values of collected ``payload`` rows, in order."""
    for row in rows:
        yield pickle.loads(bytes(row[0]))


def collect_first_column(df: Any) -> list[Any]:
    """The values of ``df``'s first column (binary payloads, as ``bytes``), in order: ``[r[0] for r in
    df.collect()]``.  ``df`` must be one whose schema its session knows (a ``mapInArrow`` given a
    ``StructType``): a Connect ``collect`` reads a conf key of the server on every call (one more
    round trip per job), its ``toArrow`` does not."""
    if is_connect(df.sparkSession):
        return _plain_values(df.toArrow().column(0).to_pylist())
    return [r[0] for r in df.collect()]


def collect_columns(df: Any) -> list[tuple[Any, ...]]:
    """The rows of ``df`` as tuples, in order: :func:`collect_first_column` for every column (on
    Spark Connect through ``toArrow``, which reads no conf key of the server first)."""
    if is_connect(df.sparkSession):
        table = df.toArrow()
        return list(zip(*(_plain_values(table.column(i).to_pylist()) for i in range(table.num_columns))))
    return [tuple(r) for r in df.collect()]


def _plain_values(values: list[Any]) -> list[Any]:
    return [bytes(v) if isinstance(v, (bytearray, memoryview)) else v for v in values]


def run_slices(spark: Any, slices: Sequence[Any], fn: Callable[[Any], Iterable[Any]]) -> list[Any]:
    """Run ``fn`` on each slice in a task of its own and return everything it yielded, slice by slice
    in no fixed order (the DataFrame replacement of ``parallelize(...).mapPartitions(fn).collect()``)."""
    if not slices:
        return []
    payloads = collect_first_column(map_slices(slices_frame(spark, slices), fn))
    return [pickle.loads(p) for p in payloads]


def iter_slices(spark: Any, slices: Sequence[Any], fn: Callable[[Any], Iterable[Any]]) -> Iterator[Any]:
    """:func:`run_slices` streamed to the driver one partition at a time (``toLocalIterator``), for
    results too many to hold at once."""
    if not slices:
        return iter(())
    return unpickle_rows(map_slices(slices_frame(spark, slices), fn).toLocalIterator())
