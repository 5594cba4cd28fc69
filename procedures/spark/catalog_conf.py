"""Catalogs opened from a Spark session: its conf read (classic and Connect alike), the running
session found, and a hive catalog without ``uri`` on the session's own (embedded) metastore.

The catalog layer (:mod:`procedures.catalog.config`) reads plain conf mappings and knows no Spark;
this module turns a session into such a mapping and hands the catalog layer the one thing only a
session has: the client of its JVM's metastore (:class:`procedures.spark.hive_jvm.JvmMetastoreClient`).
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any, Iterator, Mapping

from procedures.catalog import config as catalog_config
from procedures.catalog.base import Catalog, Identifier
from procedures.catalog.hive import MetastoreClient
from procedures.errors import CatalogConfigError
from procedures.spark.dataframes import conf_scope, scoped_conf
from procedures.spark.hive_jvm import JvmMetastoreClient

__all__ = ["conf_from_spark", "statement_conf", "session_conf", "load_catalog", "resolve_in_session",
           "running_spark_session"]

#: how Spark's SET shows a value whose key matches ``spark.redaction.regex``
_REDACTED = "(redacted)"


def _is_session(conf: Any) -> bool:
    # ``conf`` first: a Connect session raises (not AttributeError) on ``sparkContext``
    return conf is not None and not isinstance(conf, Mapping) and hasattr(conf, "conf")


def session_conf(conf: Any) -> Mapping[str, Any]:
    """``conf`` as the catalog layer takes it: a mapping as it is, a SparkSession's conf read."""
    return conf_from_spark(conf) if _is_session(conf) else conf


def load_catalog(name: str, conf: Any = None, *, session: Any = None) -> Catalog:
    """:func:`procedures.catalog.config.load_catalog` from Spark conf keys, a plain dict, or a
    SparkSession; a hive catalog without ``uri`` opens the metastore of that session (of ``session``
    when ``conf`` is the session's conf already read, else of the process's running one)."""
    session = conf if _is_session(conf) else session

    def embedded(catalog: str, key: str, lock_enabled: bool, hadoop: Mapping[str, str]) -> MetastoreClient:
        return JvmMetastoreClient(_embedded_metastore_session(catalog, key, session), None,
                                  lock_enabled=lock_enabled, conf=hadoop)

    return catalog_config.load_catalog(name, session_conf(conf), embedded_metastore=embedded)


def resolve_in_session(spark: Any, text: str) -> tuple[Catalog, Identifier]:
    """Our catalog and the identifier that the name ``text`` (``cat.db.t``, or ``db.t`` in the
    default catalog) resolves to in ``spark``, from one read of the session's conf: on Spark Connect
    each read is a round trip to the server, and resolving a name then opening its catalog read it twice."""
    conf = conf_from_spark(spark)
    catalog_name, ident = catalog_config.resolve_identifier(text, conf=conf)
    return load_catalog(catalog_name, conf, session=spark), ident


@contextlib.contextmanager
def statement_conf(spark: Any) -> Iterator[dict[str, str]]:
    """The session's conf read once for a whole statement: within the block :func:`conf_from_spark`
    and the parallelism of every distributed step (:func:`procedures.spark.dataframes.parallelism`)
    answer from this read instead of asking the session again (a round trip each on Spark Connect).
    Inside another statement's block, that block's read."""
    outer = scoped_conf(spark)
    if outer is not None:
        yield dict(outer)
        return
    conf = conf_from_spark(spark)
    with conf_scope(spark, conf):
        yield dict(conf)


def conf_from_spark(spark: Any) -> dict[str, str]:
    """All conf entries of a SparkSession (static and runtime), classic or Connect; within a
    :func:`statement_conf` block of the same session, the block's read."""
    scoped = scoped_conf(spark)
    if scoped is not None:
        return dict(scoped)
    jvm_read = _jvm_session_conf(spark)
    if jvm_read is not None:
        return jvm_read
    conf: dict[str, str] = {}
    runtime = getattr(spark, "conf", None)
    get_all = getattr(runtime, "getAll", None)
    if get_all is not None:
        entries = get_all() if callable(get_all) else get_all
        conf.update({str(k): str(v) for k, v in dict(entries).items()})
        return conf
    sql = getattr(spark, "sql", None)
    if sql is not None:
        # Spark 3.5 has no RuntimeConfig.getAll; SET lists the session's explicitly set keys, and a
        # session's SQL conf starts as a copy of its context's conf, so the static keys are there too
        try:
            for row in sql("SET").collect():
                key, value = str(row[0]), str(row[1])
                if value.endswith(_REDACTED) and runtime is not None:
                    # SET hides secrets (spark.redaction.regex); the runtime conf has the value
                    value = str(runtime.get(key))
                conf[key] = value
            return conf
        except Exception:  # noqa: BLE001 -- the context's static conf alone is still usable
            pass
    # the context's conf only where SET cannot be read: a copy of it costs a py4j round trip per
    # entry (about 30 ms, a twentieth of a 5M-row scan)
    context = None if _is_connect(spark) else getattr(spark, "sparkContext", None)
    if context is not None:
        for key, value in context.getConf().getAll():
            conf.setdefault(str(key), str(value))  # what SET gave before it failed is the newer value
    return conf


def _jvm_session_conf(spark: Any) -> dict[str, str] | None:
    """A classic session's conf entries (what ``SET`` lists, secrets unredacted) as one JSON text
    from its JVM: three py4j calls, 1.3-2.2 ms here, where ``SET`` (pyspark 3.5 has no
    ``RuntimeConfig.getAll``) takes 11-14 ms of every statement and pyspark 4's ``getAll`` 6-8 ms
    (a py4j call per entry).  None for a Spark Connect session (no JVM in this process) or where
    the JVM route fails; the caller then asks pyspark."""
    jvm = getattr(spark, "_jvm", None)
    jsession = getattr(spark, "_jsparkSession", None)
    if jvm is None or jsession is None:
        return None
    try:
        entries = jsession.sessionState().conf().getAllConfs()
        text = jvm.com.fasterxml.jackson.databind.ObjectMapper().writeValueAsString(
            jvm.scala.collection.JavaConverters.mapAsJavaMap(entries))
        conf = json.loads(str(text))
    except Exception:  # noqa: BLE001 -- any py4j or JSON failure: SET reads the same entries
        return None
    if not isinstance(conf, dict):
        return None
    return {str(k): str(v) for k, v in conf.items()}


def _is_connect(session: Any) -> bool:
    """Whether ``session`` is a Spark Connect session, by its class's module (no pyspark import)."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def running_spark_session() -> Any:
    """The process's Spark session when pyspark is already loaded and one is running, else None: the
    active classic session, else a classic one another thread created, else the active Spark Connect
    session.  Looked up through ``sys.modules``: a process that never loaded pyspark has no session, and
    looking does not load it."""
    module = sys.modules.get("pyspark.sql.session")
    if module is not None:
        cls = module.SparkSession
        session = cls.getActiveSession()
        if session is None:
            # another thread's session: PySpark keeps the one it created on the class
            session = getattr(cls, "_instantiatedSession", None)
        if session is not None and getattr(session, "_jvm", None) is not None:
            return session
    connect = sys.modules.get("pyspark.sql.connect.session")
    if connect is not None:
        return connect.SparkSession.getActiveSession()
    return None


def _embedded_metastore_session(name: str, key: str, session: Any) -> Any:
    """The classic session whose own metastore a hive catalog without ``uri`` opens: ``session``,
    else the process's running one."""
    session = session if session is not None else running_spark_session()
    if session is not None and _is_connect(session):
        raise CatalogConfigError(
            f"hive catalog {name} has no uri, so it would open the Spark session's own metastore, which on Spark "
            f"Connect lives in the server's JVM out of this process's reach: set {key}=thrift://host:port of the "
            "metastore server (the one the Connect server's spark.hadoop.hive.metastore.uris names)"
        )
    if session is None or getattr(session, "_jvm", None) is None:
        raise CatalogConfigError(
            f"hive catalog {name} has no uri, so it opens the metastore of a Spark session: start a SparkSession "
            f"first or open it with one (load_catalog({name!r}, spark)), or set {key}=thrift://host:port"
        )
    return session
