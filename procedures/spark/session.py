"""The Spark session side of the package: the active session, job descriptions and groups shown
in the Spark UI, and our catalogs configured from the session's ``spark.sql.catalog.*`` keys.

Works with PySpark 3.5 and 4.x classic sessions and with Spark Connect sessions (pyspark 4.x): on
Connect a job description or group becomes a job tag of the operations the block starts (the Spark UI
lists tags; ``spark.interruptTag`` cancels them), as Connect has no SparkContext local properties.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import weakref
from typing import Any, Callable, Iterator, Sequence, TypeVar

from procedures.catalog.base import Catalog, Identifier, Table
from procedures.catalog.config import default_catalog_name
from procedures.spark.catalog_conf import conf_from_spark, load_catalog, resolve_in_session
from procedures.core.kernel.summary import set_engine
from procedures.errors import ValidationError
from procedures.spark.dataframes import app_id as session_app_id
from procedures.spark.dataframes import conf_scope, is_connect, scoped_conf
from procedures.spark.environment import check_session
from procedures.spark.task_errors import typed_task_error

__all__ = [
    "map_in_arrow",
    "in_caller_context",
    "active_session",
    "record_engine",
    "job_description",
    "job_group",
    "cancel_job_group",
    "job_tag",
    "optional_job",
    "active_descriptions",
    "catalog_for",
    "resolve_table",
    "load_table",
]

_DESCRIPTION = "spark.job.description"
_GROUP = "spark.jobGroup.id"
_INTERRUPT = "spark.job.interruptOnCancel"
#: the job descriptions open right now, outermost first, over all threads (for the console's progress,
#: which runs in a thread of its own and cannot read another thread's local properties)
_OPEN_DESCRIPTIONS: list[str] = []
_OPEN_LOCK = threading.Lock()
#: ``spark.version`` per live session object (on Spark Connect each read is a round trip to the server)
_VERSIONS: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()


def active_descriptions() -> list[str]:
    """The job descriptions of the blocks open now (:func:`job_description`), outermost first."""
    with _OPEN_LOCK:
        return list(_OPEN_DESCRIPTIONS)


def record_engine(spark: Any) -> str | None:
    """Name Spark as the engine of every later commit's snapshot summary (``engine-name=spark``,
    ``engine-version``, ``app-id``, as Iceberg Java's Spark integration does); returns the
    application id.  Read through ``spark.conf``, which classic and Connect sessions both have."""
    version = _spark_version(spark)
    if not isinstance(version, str):  # a stand-in for a session (tests) names no engine
        return None
    app_id = session_app_id(spark)
    set_engine("spark", version, str(app_id) if app_id else None)
    return str(app_id) if app_id else None


def _spark_version(spark: Any) -> Any:
    try:
        return _VERSIONS[spark]
    except (KeyError, TypeError):
        pass
    version = getattr(spark, "version", None)
    if isinstance(version, str):
        try:
            _VERSIONS[spark] = version
        except TypeError:  # an object that cannot be weakly referenced: read again next time
            pass
    return version


def active_session(spark: Any = None) -> Any:
    """``spark`` when given, else the active SparkSession -- the thread's classic session, else the
    active Spark Connect session; raises when there is none.

    The first time a session is seen its pyspark and Java versions are checked
    (:func:`procedures.spark.environment.check_session`)."""
    if spark is not None:
        record_engine(spark)
        return check_session(spark)
    session = _classic_active_session() or _connect_active_session()
    if session is None:
        raise ValidationError("No active SparkSession: create one (SparkSession.builder...getOrCreate()) first")
    record_engine(session)
    return check_session(session)


def _classic_active_session() -> Any:
    from pyspark.sql import SparkSession  # noqa: PLC0415 -- the package loads without pyspark

    session = SparkSession.getActiveSession()
    # pyspark 4 hands back the Connect session here when the process runs in Connect mode
    return session


def _connect_active_session() -> Any:
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession  # noqa: PLC0415
    except ImportError:  # pyspark without the Connect client's dependencies (grpc, ...)
        return None
    return ConnectSession.getActiveSession()


R = TypeVar("R")


def in_caller_context(spark: Any, fn: Callable[..., R]) -> Callable[..., R]:
    """``fn`` for a pool thread: its Spark jobs run with the local properties the calling thread has
    now (job group, description, scheduler pool...), as a JVM thread inherits them from the thread
    that starts it.  A Python thread of a ``ThreadPoolExecutor`` gets a fresh JVM thread with none,
    so without this a rewrite's jobs would leave the caller's job group (``cancelJobGroup`` would
    miss them) and its fair-scheduler pool.  Each call runs on a copy, so threads setting their own
    job description do not race; the thread's previous properties come back afterwards.  The conf
    the caller's statement read (:func:`procedures.spark.dataframes.conf_scope`) goes along too."""
    fn = _in_statement_conf(spark, fn)
    if spark is not None and is_connect(spark):
        return _with_tags(spark, fn)
    # without pinned threads (PYSPARK_PIN_THREAD=false) Python threads share JVM threads at random,
    # so there is no thread of one's own to set properties on (pyspark's own helpers skip it too)
    if spark is None or type(spark.sparkContext._gateway).__name__ != "ClientServer":
        return fn
    jsc = spark.sparkContext._jsc.sc()
    captured = jsc.getLocalProperties().clone()

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> R:
        previous = jsc.getLocalProperties()
        jsc.setLocalProperties(captured.clone())
        try:
            return fn(*args, **kwargs)
        finally:
            jsc.setLocalProperties(previous)

    return run


def _in_statement_conf(spark: Any, fn: Callable[..., R]) -> Callable[..., R]:
    """``fn`` run within the calling thread's statement conf, if it has one (a context variable,
    which a pool thread does not inherit)."""
    conf = scoped_conf(spark) if spark is not None else None
    if conf is None:
        return fn

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> R:
        with conf_scope(spark, conf):
            return fn(*args, **kwargs)

    return run


def _with_tags(spark: Any, fn: Callable[..., R]) -> Callable[..., R]:
    """``fn`` run with the calling thread's Connect job tags (Connect keeps tags per thread)."""
    captured = set(spark.getTags())

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> R:
        added = captured - set(spark.getTags())
        for tag in added:
            spark.addTag(tag)
        try:
            return fn(*args, **kwargs)
        finally:
            for tag in added:
                spark.removeTag(tag)

    return run


def job_tag(text: str) -> str:
    """``text`` as a Spark Connect job tag (tags may not be empty or hold a comma)."""
    tag = " ".join(text.replace(",", ";").split())
    return tag or "iceberg-procedures"


@contextlib.contextmanager
def _tagged(spark: Any, tag: str) -> Iterator[None]:
    already = tag in spark.getTags()
    if not already:
        spark.addTag(tag)
    try:
        yield
    finally:
        if not already:
            spark.removeTag(tag)


@contextlib.contextmanager
def _typed_errors() -> Iterator[None]:
    try:
        yield
    except Exception as e:
        typed = typed_task_error(e)
        if typed is None:
            raise
        raise typed from e


@contextlib.contextmanager
def job_description(spark: Any, text: str) -> Iterator[None]:
    """Label the Spark jobs started inside the block (``rewrite_data_files: rewrite group 3/10``)
    and restore the previous label afterwards, also on errors.  A job that fails because a task
    raised one of our errors raises that error here (:func:`~procedures.spark.task_errors.typed_task_error`),
    not Spark's wrapper of it.  On Spark Connect the label is a job tag."""
    with _OPEN_LOCK:
        _OPEN_DESCRIPTIONS.append(text)
    try:
        if is_connect(spark):
            with _tagged(spark, job_tag(text)), _typed_errors():
                yield
            return
        sc = spark.sparkContext
        previous = sc.getLocalProperty(_DESCRIPTION)
        sc.setJobDescription(text)
        try:
            with _typed_errors():
                yield
        finally:
            sc.setLocalProperty(_DESCRIPTION, previous)
    finally:
        with _OPEN_LOCK:
            _OPEN_DESCRIPTIONS.remove(text)


@contextlib.contextmanager
def optional_job(spark: Any, text: str) -> Iterator[None]:
    """:func:`job_description` when there is a session; nothing for a run without one (driver only)."""
    if spark is None:
        yield
        return
    with job_description(spark, text):
        yield


@contextlib.contextmanager
def job_group(spark: Any, group_id: str, description: str, *, interrupt_on_cancel: bool = False) -> Iterator[None]:
    """Run the block's Spark jobs in job group ``group_id`` (cancellable together with
    :func:`cancel_job_group`); the previous group and description come back afterwards.  On Spark
    Connect the group is a job tag (``interrupt_on_cancel`` is what Connect always does)."""
    if is_connect(spark):
        with _tagged(spark, job_tag(group_id)):
            yield
        return
    sc = spark.sparkContext
    previous = (sc.getLocalProperty(_GROUP), sc.getLocalProperty(_DESCRIPTION), sc.getLocalProperty(_INTERRUPT))
    sc.setJobGroup(group_id, description, interrupt_on_cancel)
    try:
        yield
    finally:
        for key, value in zip((_GROUP, _DESCRIPTION, _INTERRUPT), previous):
            sc.setLocalProperty(key, value)


def cancel_job_group(spark: Any, group_id: str) -> None:
    """Cancel the running jobs of :func:`job_group` ``group_id`` (Connect: interrupt its tag)."""
    if is_connect(spark):
        spark.interruptTag(job_tag(group_id))
    else:
        spark.sparkContext.cancelJobGroup(group_id)


def catalog_for(spark: Any, name: str | None = None) -> Catalog:
    """Our catalog ``name`` (default: the session's default catalog) configured from the
    session's ``spark.sql.catalog.<name>.*`` keys."""
    spark = active_session(spark)
    conf = conf_from_spark(spark)
    return load_catalog(name or default_catalog_name(conf), conf, session=spark)


def resolve_table(spark: Any, ident: str) -> tuple[Catalog, Identifier]:
    """The catalog and identifier of ``cat.db.t`` (or ``db.t`` in the default catalog)."""
    return resolve_in_session(active_session(spark), ident)


def load_table(spark: Any, table: str | Table) -> Table:
    """The table for a name through our catalogs (a loaded :class:`Table` is returned as is)."""
    if isinstance(table, Table):
        return table
    catalog, identifier = resolve_table(spark, table)
    return catalog.load_table(identifier)


def map_in_arrow(df: Any, fn: Callable[[Iterator[Any]], Iterator[Any]], schema: Any,
                 columns: Sequence[str] | None = None) -> Any:
    """``df.mapInArrow(fn, schema)`` for a DataFrame whose column names may hold ``.`` or a
    back-quote (``the.data``, ``we`ird``): pyspark 3.5's ``mapInArrow`` picks its input columns by
    name and resolves such a name as a nested field or fails to parse it, so the columns are handed
    over under positional names and ``fn`` gets its batches with the real names back.
    ``columns``: ``df``'s column names when the caller knows them (on Spark Connect ``df.columns``
    asks the server to analyze the plan)."""
    names = list(columns) if columns is not None else list(df.columns)
    if not any("." in n or "`" in n for n in names):
        return df.mapInArrow(fn, schema)
    import pyarrow as pa  # noqa: PLC0415 -- Arrow only when a job is built

    def renamed(batches: Iterator[Any]) -> Iterator[Any]:
        return fn(pa.RecordBatch.from_arrays(b.columns, names=names) for b in batches)

    return df.toDF(*[f"_c{i}" for i in range(len(names))]).mapInArrow(renamed, schema)
