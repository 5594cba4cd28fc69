"""Distributed file listing and manifest reading for the garbage-collection procedures.

* :func:`list_directories` lists directory sub-trees on the executors (the driver lists the top
  of the tree and hands over the directories it did not expand, as Java's
  ``DeleteOrphanFilesSparkAction`` does), applying the same hidden-path and age filters;
* :func:`manifest_content_dataframe` reads manifests on the executors and returns the live
  content files they name, for reachability of large tables;
* :func:`manifest_rows_dataframe` reads the manifest lists themselves on the executors (tables of
  many snapshots), and :func:`manifest_keys_dataframe` turns its manifests into valid keys;
* :func:`find_orphans_dataframe` normalises actual and valid paths and joins them on the URI path,
  classifying prefix mismatches like Java's ``FindOrphanFiles``.

Executors rebuild a :class:`~procedures.io.fileio.FileIO` from the table's properties, so only
plain values travel with the tasks.
"""

from __future__ import annotations

import pickle
from typing import Any, Callable, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from procedures.core.gc.hidden_paths import HiddenPathFilter
from procedures.core.gc.reachability import (
    manifest_content_paths, manifest_from_row, manifest_list_chunks, manifest_row, read_chunk_manifests,
)
from procedures.core.kernel.paths import DEFAULT_EQUAL_SCHEMES, keys_within, path_keys
from procedures.core.kernel.splits import spread_weights
from procedures.io.sandbox_fileio import file_io
from procedures.io.directory_walk import modified_before, walk
from procedures.spark.dataframes import conf_value, functions, parallelism, slices_frame, struct_schema
from procedures.spark.environment import check_python_workers
from procedures.spark.sql_quoting import quote_name
from procedures.spark.worker import prepare_python_worker
from procedures.core.gc.live_paths import manifest_live_path_list
from procedures.spec.file_access import FileAccess

__all__ = ["FrameKeeper", "list_directories", "manifest_content_dataframe", "uri_dataframe", "uri_frame",
           "find_orphans_dataframe", "unreached_paths", "within_dataframe", "listed_keys_dataframe",
           "valid_keys_dataframe", "driver_keys_dataframe", "manifest_rows_dataframe", "manifest_keys_dataframe",
           "ACTUAL_KEYS", "VALID_KEYS", "MANIFEST_ROWS"]

_PATH_KIND = "path string, kind string"
_URI = "scheme string, authority string, path string, uri string"
#: the actual files of remove_orphan_files: one row per normalised reading (``path``) of each file
#: (``uri``), with the number of readings the file has
ACTUAL_KEYS = "scheme string, authority string, path string, uri string, nkeys int"
#: the valid files of remove_orphan_files: one row per normalised reading
VALID_KEYS = "scheme string, authority string, path string"
#: the manifests read from the manifest lists in Spark tasks (:func:`manifest_rows_dataframe`)
MANIFEST_ROWS = "manifest_path string, manifest_length long, spec_id int, content int"
#: manifest-list reading tasks per core: contiguous chunks decode their first list whole, so a few
#: per core balance the load without decoding many lists whole
_LIST_TASKS_PER_CORE = 3
#: paths a manifest-reading task gathers before sending them as one Arrow batch
_KEY_BATCH_ROWS = 8192


def _parallelism(spark: Any, n: int) -> int:
    cap = int(conf_value(spark, "spark.sql.sources.parallelPartitionDiscovery.parallelism", "10000"))
    return max(1, min(n, cap, parallelism(spark) * 4))


class FrameKeeper:
    """Persists the frames a step reads more than once and unpersists them all on exit.

    A listing or a manifest read feeds several branches of one plan (plain and odd spellings, the
    join and the conflict check); without persisting, Spark reruns the Python step for each branch.
    """

    def __init__(self) -> None:
        self.frames: list[Any] = []

    def __call__(self, df: Any) -> Any:
        """``df`` persisted (memory, then disk) until the keeper closes."""
        from pyspark import StorageLevel  # noqa: PLC0415

        kept = df.persist(StorageLevel.MEMORY_AND_DISK)
        self.frames.append(kept)
        return kept

    def __enter__(self) -> "FrameKeeper":
        return self

    def __exit__(self, *_: Any) -> None:
        for df in self.frames:
            df.unpersist()
        self.frames.clear()


def list_directories(spark: Any, dirs: Sequence[str], older_than_ms: int, partition_prefixes: Sequence[str],
                     io_properties: dict[str, str] | None = None) -> Any:
    """Files below ``dirs`` (recursively, on the executors) that are not hidden and were modified
    before ``older_than_ms``: a DataFrame with one column ``file_path``.  The executors list through
    a FileIO built from ``io_properties`` (the table's, with its storage settings), with the driver's
    :func:`~procedures.io.directory_walk.walk`: a symlink is never entered nor listed there either."""
    check_python_workers(spark)
    props = dict(io_properties or {})
    path_filter = HiddenPathFilter(tuple(partition_prefixes))
    cutoff = int(older_than_ms)
    dirs = list(dirs)

    def list_slice(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        for batch in batches:
            for payload in batch.column(0).to_pylist():
                files, _ = walk(pickle.loads(payload), cutoff, path_filter, io=file_io(props))
                for i in range(0, len(files), _KEY_BATCH_ROWS):
                    yield pa.RecordBatch.from_arrays([pa.array(files[i:i + _KEY_BATCH_ROWS], pa.string())],
                                                     names=["file_path"])

    n = _parallelism(spark, len(dirs))
    return slices_frame(spark, [dirs[k::n] for k in range(n)]).mapInArrow(list_slice, struct_schema("file_path string"))


def _key_columns(paths: Iterable[str], schemes: dict[str, str], auths: dict[str, str],
                 with_uri: bool) -> dict[str, list[Any]]:
    """Columns of :data:`ACTUAL_KEYS` (``with_uri``) or :data:`VALID_KEYS` for ``paths``."""
    cols: dict[str, list[Any]] = {"scheme": [], "authority": [], "path": [], "uri": [], "nkeys": []}
    scheme, authority, path, uri, nkeys = cols.values()
    for p in paths:
        keys = path_keys(p, schemes, auths)
        for k in keys:
            scheme.append(k.scheme)
            authority.append(k.authority)
            path.append(k.path)
            if with_uri:
                uri.append(p)
                nkeys.append(len(keys))
    if not with_uri:
        del cols["uri"], cols["nkeys"]
    return cols


def _key_batch(paths: Iterable[str], schemes: dict[str, str], auths: dict[str, str], with_uri: bool) -> pa.RecordBatch:
    cols = _key_columns(paths, schemes, auths, with_uri)
    types = {"nkeys": pa.int32()}
    return pa.RecordBatch.from_arrays([pa.array(v, types.get(k, pa.string())) for k, v in cols.items()],
                                      names=list(cols))


def driver_keys_dataframe(spark: Any, paths: Sequence[str], equal_schemes: dict[str, str],
                          equal_authorities: dict[str, str], *, actual: bool) -> Any:
    """Paths held by the driver as a frame of :data:`ACTUAL_KEYS` (``actual``) or :data:`VALID_KEYS`,
    normalised (:func:`procedures.core.kernel.paths.path_keys`) in Spark tasks, a slice of the paths each."""
    check_python_workers(spark)
    schemes, auths = dict(equal_schemes), dict(equal_authorities)
    with_uri = bool(actual)
    n = _parallelism(spark, -(-len(paths) // _KEY_BATCH_ROWS))
    paths = list(paths)

    def key(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        for batch in batches:
            for payload in batch.column(0).to_pylist():
                here = pickle.loads(payload)
                for i in range(0, len(here), _KEY_BATCH_ROWS):
                    yield _key_batch(here[i:i + _KEY_BATCH_ROWS], schemes, auths, with_uri)

    return slices_frame(spark, [paths[k::n] for k in range(n)]).mapInArrow(key, struct_schema(ACTUAL_KEYS if actual else VALID_KEYS))


def listed_keys_dataframe(spark: Any, files: Sequence[str], dirs: Sequence[str], older_than_ms: int | None,
                          partition_prefixes: Sequence[str], io_properties: dict[str, str] | None,
                          equal_schemes: dict[str, str], equal_authorities: dict[str, str]) -> Any:
    """The actual files of remove_orphan_files as :data:`ACTUAL_KEYS`: ``files`` (listed by the
    driver) and the files below ``dirs``, listed recursively on the executors as
    :func:`list_directories` does; both normalised in the same Python tasks, so the paths reach the
    JVM once, already keyed, and nothing downstream runs Python again.  ``older_than_ms=None`` lists
    every file whatever its age (:func:`procedures.io.directory_walk.walk`)."""
    check_python_workers(spark)
    props = dict(io_properties or {})
    path_filter = HiddenPathFilter(tuple(partition_prefixes))
    cutoff = None if older_than_ms is None else int(older_than_ms)
    schemes, auths = dict(equal_schemes), dict(equal_authorities)
    # directories dealt round-robin (the driver's walk hands over siblings of similar size) and the
    # driver's files in even slices: no task gets the whole tree
    n = _parallelism(spark, max(1, len(dirs)))
    slices = [(list(files[k::n]), list(dirs[k::n])) for k in range(n)]

    def list_and_key(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        for batch in batches:
            for payload in batch.column(0).to_pylist():
                found, todo = pickle.loads(payload)
                if todo:
                    found.extend(walk(todo, cutoff, path_filter, io=file_io(props))[0])
                for i in range(0, len(found), _KEY_BATCH_ROWS):
                    yield _key_batch(found[i:i + _KEY_BATCH_ROWS], schemes, auths, True)

    return slices_frame(spark, slices).mapInArrow(list_and_key, struct_schema(ACTUAL_KEYS))


def _manifest_keys(io: FileAccess, rows: Iterable[tuple[str, int, int, int]], schemes: dict[str, str],
                   auths: dict[str, str], with_manifests: bool) -> Iterator[pa.RecordBatch]:
    """:data:`VALID_KEYS` batches of the live content files of the manifests ``rows``
    (:func:`~procedures.core.gc.reachability.manifest_row`), and of the manifests themselves with
    ``with_manifests`` (executor side)."""
    paths: list[str] = []
    for row in rows:
        if with_manifests:
            paths.append(row[0])
        paths.extend(manifest_live_path_list(io, manifest_from_row(*row)))
        if len(paths) >= _KEY_BATCH_ROWS:  # a few large batches: each one costs a round trip
            yield _key_batch(paths, schemes, auths, False)
            paths = []
    if paths:
        yield _key_batch(paths, schemes, auths, False)


def valid_keys_dataframe(spark: Any, io_properties: dict[str, str], manifests: Sequence[Any],
                         equal_schemes: dict[str, str], equal_authorities: dict[str, str]) -> Any:
    """The live content files of ``manifests`` as :data:`VALID_KEYS`, read and normalised in the same
    tasks on the executors (the manifests dealt into tasks of balanced bytes)."""
    check_python_workers(spark)
    props = dict(io_properties)
    schemes, auths = dict(equal_schemes), dict(equal_authorities)

    def read_and_key(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        rows = (row for batch in batches for payload in batch.column(0).to_pylist() for row in pickle.loads(payload))
        yield from _manifest_keys(file_io(props), rows, schemes, auths, False)

    rows = [manifest_row(m) for m in manifests]
    groups = spread_weights([max(1, r[1]) for r in rows], _parallelism(spark, len(rows)))
    return slices_frame(spark, [[rows[i] for i in group] for group in groups]).mapInArrow(read_and_key, struct_schema(VALID_KEYS))


def manifest_rows_dataframe(spark: Any, io_properties: dict[str, str], md: Any) -> Any:
    """The distinct manifests of every snapshot of ``md`` as :data:`MANIFEST_ROWS`, read from the
    manifest lists in Spark tasks: the snapshots are dealt parents first into contiguous chunks
    (:func:`~procedures.core.gc.reachability.manifest_list_chunks`, a few per core), each task reads
    its chunk's lists (:func:`~procedures.core.gc.reachability.read_chunk_manifests`), and the
    manifests several chunks name are merged in one shuffle by path.  Nothing per manifest goes
    through the driver; read the frame more than once only persisted."""
    check_python_workers(spark)
    props = dict(io_properties)
    cores = parallelism(spark)
    chunks = manifest_list_chunks(md, cores * _LIST_TASKS_PER_CORE)
    if not chunks:
        return spark.createDataFrame([], struct_schema(MANIFEST_ROWS))

    def read_lists(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        io = file_io(props)
        for batch in batches:
            for payload in batch.column(0).to_pylist():
                rows = read_chunk_manifests(io, pickle.loads(payload))
                for i in range(0, len(rows), _KEY_BATCH_ROWS):
                    cols = list(zip(*rows[i:i + _KEY_BATCH_ROWS]))
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(c, t) for c, t in zip(cols, (pa.string(), pa.int64(), pa.int32(), pa.int32()))],
                        names=["manifest_path", "manifest_length", "spec_id", "content"])

    listed = slices_frame(spark, chunks).mapInArrow(read_lists, struct_schema(MANIFEST_ROWS))
    # hashed by path into the tasks that read the manifests next (as many as _parallelism allows: the
    # count of manifests is not known here), so the merge needs no other shuffle
    return listed.repartition(_parallelism(spark, 1 << 30), "manifest_path").dropDuplicates(["manifest_path"])


def manifest_keys_dataframe(manifests: Any, io_properties: dict[str, str], equal_schemes: dict[str, str],
                            equal_authorities: dict[str, str]) -> Any:
    """:data:`VALID_KEYS` of the manifests of the frame ``manifests`` (:data:`MANIFEST_ROWS`) and of
    their live content files, read and normalised in the frame's own partitions."""
    check_python_workers(manifests.sparkSession)
    props = dict(io_properties)
    schemes, auths = dict(equal_schemes), dict(equal_authorities)

    def read_and_key(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        rows = (row for batch in batches for row in zip(*(c.to_pylist() for c in batch.columns)))
        yield from _manifest_keys(file_io(props), rows, schemes, auths, True)

    return manifests.select("manifest_path", "manifest_length", "spec_id", "content").mapInArrow(
        read_and_key, struct_schema(VALID_KEYS))


def manifest_content_dataframe(spark: Any, io_properties: dict[str, str], manifests: Sequence[Any]) -> Any:
    """Live content files ``(path, kind)`` of ``manifests``, read on the executors."""
    check_python_workers(spark)
    rows = [manifest_row(m) for m in manifests]
    props = dict(io_properties)
    df = spark.createDataFrame(rows, struct_schema(MANIFEST_ROWS))
    df = df.repartition(_parallelism(spark, len(rows)))

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        io = file_io(props)
        for batch in batches:
            cols = batch.to_pydict()
            paths: list[str] = []
            kinds: list[str] = []
            for path, length, spec_id, content in zip(cols["manifest_path"], cols["manifest_length"],
                                                      cols["spec_id"], cols["content"]):
                for p, k in manifest_content_paths(io, manifest_from_row(path, length, spec_id, content)):
                    paths.append(p)
                    kinds.append(k)
            yield pa.RecordBatch.from_arrays([pa.array(paths, pa.string()), pa.array(kinds, pa.string())],
                                             names=["path", "kind"])

    return df.mapInArrow(read, struct_schema(_PATH_KIND))


def uri_dataframe(df: Any, column: str, equal_schemes: dict[str, str], equal_authorities: dict[str, str]) -> Any:
    """``(scheme, authority, path, uri)`` of the paths in ``df[column]``: one row per normalised
    reading of each path (:func:`procedures.core.kernel.paths.path_keys`), so a join on ``path`` matches
    any spelling."""
    check_python_workers(df.sparkSession)
    schemes, auths = dict(equal_schemes), dict(equal_authorities)

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        for batch in batches:
            rows = [(k, p) for p in batch.column(0).to_pylist() if p is not None for k in path_keys(p, schemes, auths)]
            yield pa.RecordBatch.from_arrays(
                [pa.array([k.scheme for k, _ in rows], pa.string()),
                 pa.array([k.authority for k, _ in rows], pa.string()),
                 pa.array([k.path for k, _ in rows], pa.string()), pa.array([p for _, p in rows], pa.string())],
                names=["scheme", "authority", "path", "uri"])

    return df.select(column).mapInArrow(convert, struct_schema(_URI))


#: paths whose normal form needs Python: dot segments, percent-escapes, a leading "//", or a colon
#: that is not a plain scheme's (Hadoop's split takes any prefix before the first colon and slash).
#: The rest is normalised in the JVM, giving the same key as path_keys' literal reading.
_SCHEME_RE = "^[A-Za-z][A-Za-z0-9+.-]+:"
_NEEDS_PYTHON = ("instr(path, '/.') > 0 OR instr(path, '%') > 0 OR path LIKE '//%' "
                 f"OR (instr(path, ':') > 0 AND NOT path RLIKE '{_SCHEME_RE}')")
_PLAIN_KEY = (f"regexp_replace(regexp_replace(regexp_replace(path, '{_SCHEME_RE}(//[^/]*)?', ''), "
              "'/{2,}', '/'), '(.)/$', '$1')")


def _mapped(F: Any, column: Any, mapping: dict[str, str]) -> Any:
    """``column`` through ``mapping`` (a few entries: a CASE chain, no map lookup that ANSI mode would
    turn into an error for a missing key); ``F`` the session's functions module."""
    out = None
    for key, value in mapping.items():
        out = (F.when(column == F.lit(key), F.lit(value)) if out is None
               else out.when(column == F.lit(key), F.lit(value)))
    return column if out is None else out.otherwise(column)


def _plain_uri_frame(df: Any, equal_schemes: dict[str, str], equal_authorities: dict[str, str]) -> Any:
    """``(scheme, authority, path, uri)`` of plain paths in ``df.path``, in the JVM: the same values as
    the literal reading of :func:`procedures.core.kernel.paths.path_keys` (the only reading a plain path has)."""
    F = functions(df.sparkSession)

    raw_scheme = F.lower(F.regexp_extract(F.col("path"), "^([A-Za-z][A-Za-z0-9+.-]+):", 1))
    scheme = _mapped(F, _mapped(F, raw_scheme, dict(DEFAULT_EQUAL_SCHEMES)), dict(equal_schemes))
    raw_auth = F.regexp_extract(F.col("path"), f"{_SCHEME_RE}//([^/]*)", 1)
    authority = F.lower(_mapped(F, raw_auth, dict(equal_authorities)))
    return df.select(
        F.when(scheme == "", None).otherwise(scheme).alias("scheme"),
        F.when(authority == "", None).otherwise(authority).alias("authority"),
        F.expr(_PLAIN_KEY).alias("path"),
        F.col("path").alias("uri"),
    )


def _path_keys_frame(df: Any) -> Any:
    """``(uri, path)``: every normalised path (``path``) of each original path (``uri``) of ``df.path``,
    computed in the JVM for plain paths and by :func:`uri_dataframe` for the others."""
    plain = df.where(f"NOT ({_NEEDS_PYTHON})").selectExpr("path AS uri", f"{_PLAIN_KEY} AS path")
    odd = uri_dataframe(df.where(_NEEDS_PYTHON), "path", {}, {}).select("uri", "path")
    return plain.unionByName(odd)


def unreached_paths(candidates: Any, valid: Any) -> Any:
    """Rows ``(path, kind)`` of ``candidates`` whose path no row of ``valid`` names under any
    normalised reading (scheme and authority ignored: a false match only keeps a file), one per path."""
    cand = _path_keys_frame(candidates.select("path"))
    valid_keys = _path_keys_frame(valid.select("path")).select("path").distinct()
    reached = cand.join(valid_keys, "path").selectExpr("uri AS path").distinct()
    # a file several expired manifests name (its first manifest and the ones rewritten since) is
    # one file to delete and to count, as Java's set difference and the driver's dict make it
    return candidates.join(reached, "path", "left_anti").select("path", "kind").dropDuplicates(["path"])


def _modified_before(df: Any, column: str, older_than_ms: int) -> Any:
    """The rows of ``df`` whose file ``column`` was last modified before ``older_than_ms``
    (:func:`procedures.io.directory_walk.modified_before`, in the tasks)."""
    cutoff = int(older_than_ms)

    def keep(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        for batch in batches:
            mask = modified_before(batch.column(column).to_pylist(), cutoff)
            yield pc.filter(batch, pa.array(mask, pa.bool_()))

    return df.mapInArrow(keep, df.schema)


def within_dataframe(df: Any, column: str, location: str) -> Any:
    """The rows of ``df`` whose ``column`` lies inside ``location`` (:func:`procedures.core.kernel.paths.is_within`)."""
    check_python_workers(df.sparkSession)
    outer = path_keys(str(location))
    fields = df.schema.fields

    def keep(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        for batch in batches:
            mask = [p is not None and keys_within(outer, path_keys(p)) for p in batch.column(column).to_pylist()]
            yield pc.filter(batch, pa.array(mask, pa.bool_()))

    return df.mapInArrow(keep, df.schema) if fields else df


def uri_frame(df: Any, column: str, equal_schemes: dict[str, str], equal_authorities: dict[str, str]) -> Any:
    """:data:`ACTUAL_KEYS` of the paths in ``df[column]``: the rows of :func:`uri_dataframe` plus each
    path's number of readings, computed in the JVM for plain paths and in Python only for the others
    (dot segments, escapes...), so not every path goes through a Python worker.  ``df`` is read
    twice: persist it."""
    F = functions(df.sparkSession)

    check_python_workers(df.sparkSession)
    schemes, auths = dict(equal_schemes), dict(equal_authorities)
    paths = df.selectExpr(f"{quote_name(column)} AS path").where("path IS NOT NULL")
    plain = _plain_uri_frame(paths.where(f"NOT ({_NEEDS_PYTHON})"), schemes, auths).withColumn("nkeys", F.lit(1))

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prepare_python_worker()
        for batch in batches:
            yield _key_batch(batch.column(0).to_pylist(), schemes, auths, True)

    return plain.unionByName(paths.where(_NEEDS_PYTHON).mapInArrow(convert, struct_schema(ACTUAL_KEYS)))


def find_orphans_dataframe(actual: Any, valid: Any, mode: str, keep: Callable[[Any], Any],
                           older_than_ms: int | None = None) -> tuple[Any, list[tuple[str | None, str | None]]]:
    """Join normalised actual (:data:`ACTUAL_KEYS`) and valid (:data:`VALID_KEYS`) files on the path;
    returns the orphan DataFrame (``uri``) and, for ``mode == "ERROR"``, the conflicting
    ``(valid, actual)`` scheme/authority pairs.

    An actual file is not an orphan when one valid entry with one of its paths matches on scheme
    and authority (case-insensitive; an empty valid component matches anything).  When entries
    exist but none matches, ``IGNORE`` keeps the file, ``DELETE`` treats it as an orphan and
    ``ERROR`` reports the conflicts.

    The verdict is reached per reading right after the join, grouped on the join's own key (no
    second shuffle of every file); only the readings nothing matched go on to be grouped by file,
    where a file is unmatched when all its ``nkeys`` readings are.  ``keep`` (a
    :class:`FrameKeeper`) persists those few rows for the conflict check and the orphan rows.  The
    conflicting pairs are looked up in a second join only when a conflict exists (the call fails).

    With ``older_than_ms`` (a listing that did not stat its files) the unmatched files are stat-ed
    in the tasks that group them, and those modified since are dropped before anything else sees
    them: neither orphans nor conflicts, as if the listing had left them out.
    """
    F = functions(actual.sparkSession)

    a = actual.select(*(F.col(c).alias(f"a_{c}") for c in ("scheme", "authority", "path", "uri", "nkeys")))
    v = valid.select(*(F.col(c).alias(f"v_{c}") for c in ("scheme", "authority", "path")))
    joined = a.join(v, a.a_path == v.v_path, "left_outer")

    def comp(vc: str, ac: str) -> Any:
        return (F.col(vc).isNull() | (F.col(vc) == "")
                | F.coalesce(F.lower(F.col(vc)) == F.lower(F.col(ac)), F.lit(False)))

    s_ok, a_ok = comp("v_scheme", "a_scheme"), comp("v_authority", "a_authority")
    has_valid = F.col("v_path").isNotNull()
    # grouped by the join key first: the join's partitioning serves it, every file stays where it is
    per_key = joined.groupBy("a_path", "a_uri", "a_nkeys").agg(
        F.max(has_valid.cast("int")).alias("has_valid"),
        F.max((has_valid & s_ok & a_ok).cast("int")).alias("matched"),
    ).where("matched = 0")
    per_file = per_key.groupBy("a_uri").agg(
        F.count(F.lit(1)).alias("unmatched"), F.max("a_nkeys").alias("nkeys"), F.max("has_valid").alias("has_valid"),
    ).where("unmatched >= nkeys")
    per_file = keep(per_file if older_than_ms is None else _modified_before(per_file, "a_uri", older_than_ms))
    conflicts: list[tuple[str | None, str | None]] = []
    if mode == "ERROR" and per_file.where("has_valid = 1").count():
        bad = joined.join(per_file.where("has_valid = 1").select("a_uri"), "a_uri").where(has_valid)
        pairs = bad.where(~s_ok).select(F.col("v_scheme").alias("x"), F.col("a_scheme").alias("y")).union(
            bad.where(~a_ok).select(F.col("v_authority").alias("x"), F.col("a_authority").alias("y"))).distinct()
        conflicts = [(r.x, r.y) for r in pairs.collect()]
    orphans = per_file if mode == "DELETE" else per_file.where("has_valid = 0")
    return orphans.select(F.col("a_uri").alias("uri")), conflicts
