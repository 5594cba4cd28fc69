"""Catalog configuration from Spark conf keys or a plain dict, and Spark's identifier resolution.

Spark configures Iceberg catalogs as ``spark.sql.catalog.<name> = org.apache.iceberg.spark.SparkCatalog``
with ``spark.sql.catalog.<name>.type``, ``.warehouse``, ``.uri``, ``.jdbc.user`` and so on; the same
keys configure our catalogs, so one ``spark-defaults.conf`` serves Java and this package.  A plain
dict (``{"type": "hadoop", "warehouse": ...}``) works too.  A SparkSession is read duck-typed,
without importing pyspark.
"""

from __future__ import annotations

import sys
from typing import Any, Iterable, Mapping

from procedures.catalog.base import Catalog, Identifier, split_dotted, parse_identifier
from procedures.catalog.hadoop import HadoopCatalog
from procedures.catalog.hive import HiveCatalog, MetastoreClient
from procedures.catalog.hive_jvm import JvmMetastoreClient
from procedures.catalog.hive_thrift import ThriftMetastoreClient, parse_thrift_uris
from procedures.catalog.jdbc import JdbcCatalog, parse_jdbc_uri
from procedures.catalog.rest import RestCatalog
from procedures.core.kernel.properties import RETRY_PROPERTIES
from procedures.errors import REDACTED, CatalogConfigError, NoSuchCatalogError, ValidationError, is_secret_key

__all__ = [
    "load_catalog",
    "catalog_properties",
    "catalog_names",
    "default_catalog_name",
    "resolve_identifier",
    "conf_from_spark",
    "DEFAULT_CATALOG",
    "INT_PROPERTIES",
]

DEFAULT_CATALOG = "local"
SPARK_PREFIX = "spark.sql.catalog."
CATALOG_TYPES = ("hadoop", "jdbc", "hive", "rest")
_IMPL_TYPES = {
    "org.apache.iceberg.hadoop.HadoopCatalog": "hadoop",
    "org.apache.iceberg.jdbc.JdbcCatalog": "jdbc",
    "org.apache.iceberg.hive.HiveCatalog": "hive",
    "org.apache.iceberg.rest.RESTCatalog": "rest",
}
#: Iceberg Java's Hadoop-conf switch for metastore locks, read from the Spark conf as a default
HIVE_LOCK_CONF = "spark.hadoop.iceberg.engine.hive.lock-enabled"
#: the metastore server of Spark's own Hive support, when it uses one (a hive catalog without ``uri``)
HIVE_URIS_CONF = "spark.hadoop.hive.metastore.uris"
#: catalog properties whose values must be integers (the transaction reads the commit.retry ones)
INT_PROPERTIES = tuple(p.key for p in RETRY_PROPERTIES) + ("jdbc.busy-timeout-ms",)


#: how Spark's SET shows a value whose key matches ``spark.redaction.regex``
_REDACTED = "(redacted)"


def conf_from_spark(spark: Any) -> dict[str, str]:
    """All conf entries of a SparkSession (static and runtime), read without importing pyspark."""
    conf: dict[str, str] = {}
    runtime = getattr(spark, "conf", None)
    get_all = getattr(runtime, "getAll", None)
    if get_all is not None:
        entries = get_all() if callable(get_all) else get_all
        conf.update({str(k): str(v) for k, v in dict(entries).items()})
        return conf
    # pyspark 3.5 classic: the static conf from the context (a Connect session has none; its SET lists it)
    context = None if _is_connect(spark) else getattr(spark, "sparkContext", None)
    if context is not None:
        conf.update({str(k): str(v) for k, v in context.getConf().getAll()})
    sql = getattr(spark, "sql", None)
    if sql is not None:
        # Spark 3.5 has no RuntimeConfig.getAll; SET lists the session's explicitly set keys
        try:
            for row in sql("SET").collect():
                key, value = str(row[0]), str(row[1])
                if value.endswith(_REDACTED) and runtime is not None:
                    # SET hides secrets (spark.redaction.regex); the runtime conf has the value
                    value = str(runtime.get(key))
                conf[key] = value
        except Exception:  # noqa: BLE001 -- static conf alone is still usable
            pass
    return conf


def _as_conf(conf: Any) -> Mapping[str, Any]:
    if conf is None:
        return {}
    if isinstance(conf, Mapping):
        return conf
    # ``conf`` first: a Connect session raises (not AttributeError) on ``sparkContext``
    if hasattr(conf, "conf"):
        return conf_from_spark(conf)
    raise CatalogConfigError(f"Catalog configuration must be a dict or a SparkSession, got {type(conf).__name__}")


def catalog_names(conf: Any) -> list[str]:
    """Names of the catalogs ``conf`` configures that this package can open (hadoop, jdbc, hive or rest)."""
    mapping = _as_conf(conf)
    names = set()
    for key, value in mapping.items():
        if not key.startswith(SPARK_PREFIX):
            continue
        rest = key[len(SPARK_PREFIX):]
        name, _, prop = rest.partition(".")
        if prop == "type" and str(value).strip().lower() in CATALOG_TYPES:
            names.add(name)
        elif prop == "catalog-impl" and str(value).strip() in _IMPL_TYPES:
            names.add(name)
    return sorted(names)


def default_catalog_name(conf: Any) -> str:
    """``spark.sql.defaultCatalog`` when it names one of our catalogs, else ``local``."""
    mapping = _as_conf(conf)
    configured = str(mapping.get("spark.sql.defaultCatalog", "") or "").strip()
    return configured if configured and configured in catalog_names(mapping) else DEFAULT_CATALOG


def catalog_properties(name: str, conf: Any) -> tuple[dict[str, str], str]:
    """The properties of catalog ``name`` and the key prefix they were found under (for errors).

    Spark keys ``spark.sql.catalog.<name>.<prop>`` win; without any, the plain keys of ``conf`` are used.
    """
    mapping = _as_conf(conf)
    prefix = f"{SPARK_PREFIX}{name}."
    props = {k[len(prefix):]: v for k, v in mapping.items() if isinstance(k, str) and k.startswith(prefix)}
    if props:
        return props, prefix
    return {k: v for k, v in mapping.items() if isinstance(k, str) and not k.startswith("spark.")}, ""


def _check_types(props: Mapping[str, Any], prefix: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in props.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            shown = REDACTED if is_secret_key(key) else repr(value)
            raise CatalogConfigError(f"{prefix}{key}: expected a string value, got {type(value).__name__} {shown}")
        out[key] = str(value)
    for key in INT_PROPERTIES:
        if key in out:
            try:
                number = int(out[key].strip())
            except ValueError:
                raise CatalogConfigError(f"{prefix}{key}: expected an integer, got {out[key]!r}") from None
            if number < 0:
                raise CatalogConfigError(f"{prefix}{key}: must not be negative, got {number}")
    return out


def load_catalog(name: str, conf: Any = None) -> Catalog:
    """Open catalog ``name`` from Spark conf keys, a plain dict, or a SparkSession.

    ``type`` is ``hadoop`` (needs ``warehouse``), ``jdbc`` (needs ``uri``; ``warehouse`` for default
    table locations; ``jdbc.user`` / ``jdbc.password`` for PostgreSQL), ``hive`` or ``rest`` (needs
    ``uri``; :mod:`procedures.catalog.rest`).  Misconfiguration raises
    :class:`CatalogConfigError` naming the offending key.
    """
    if not isinstance(name, str) or not name or "." in name:
        raise CatalogConfigError(f"Invalid catalog name {name!r}")
    raw, prefix = catalog_properties(name, conf)
    if not raw:
        configured = catalog_names(conf)
        shown = ", ".join(configured) if configured else "none"
        raise NoSuchCatalogError(
            f"Catalog {name} is not configured (configured catalogs: {shown}): "
            f"set {SPARK_PREFIX}{name}.type (hadoop, jdbc, hive or rest)",
            catalog=name, configured=configured,
        )
    props = _check_types(raw, prefix)
    kind = props.get("type", "").strip().lower()
    if not kind and props.get("catalog-impl") in _IMPL_TYPES:
        kind = _IMPL_TYPES[props["catalog-impl"]]
    if kind not in CATALOG_TYPES:
        shown = props.get("type", props.get("catalog-impl", ""))
        raise CatalogConfigError(f"{prefix}type: unsupported catalog type {shown!r}; expected one of hadoop, jdbc, hive, rest")
    warehouse = props.get("warehouse", "").strip() or None
    try:
        if kind == "hadoop":
            if not warehouse:
                raise CatalogConfigError(
                    f"{prefix}warehouse: hadoop catalog {name} has no warehouse; set "
                    f"{prefix or SPARK_PREFIX + name + '.'}warehouse to its root folder (e.g. /data/warehouse)"
                )
            return HadoopCatalog(name, warehouse, props)
        if kind == "hive":
            return _hive_catalog(name, props, prefix, conf)
        if kind == "rest":
            return RestCatalog(name, props)

        uri = props.get("uri", "")
        if not str(uri).strip():
            raise CatalogConfigError(
                f"{prefix}uri: jdbc catalog {name} has no uri; set {prefix or SPARK_PREFIX + name + '.'}uri "
                "(e.g. jdbc:sqlite:/data/warehouse/catalog.db or jdbc:postgresql://host:5432/db)"
            )
        parse_jdbc_uri(uri, key=f"{prefix}uri")
        return JdbcCatalog(name, uri, warehouse, props)
    except CatalogConfigError:
        raise
    except ValidationError as e:
        raise CatalogConfigError(f"{prefix}warehouse/uri of catalog {name}: {e}") from e


def _is_connect(session: Any) -> bool:
    """Whether ``session`` is a Spark Connect session, by its class's module (no pyspark import)."""
    return type(session).__module__.startswith("pyspark.sql.connect")


def running_spark_session() -> Any:
    """The process's Spark session when pyspark is already loaded and one is running, else None: the
    active classic session, else a classic one another thread created, else the active Spark Connect
    session.  Looked up through ``sys.modules`` so that this layer never imports pyspark itself."""
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


def _hive_catalog(name: str, props: dict[str, str], prefix: str, conf: Any) -> Catalog:
    """A hive catalog over a metastore server (``uri``, else the ``hive.metastore.uris`` of Spark's
    own Hive support) through the thrift client -- classic and Connect sessions alike, or none -- or
    over a classic session's own (embedded) metastore through its JVM."""
    key = f"{prefix or SPARK_PREFIX + name + '.'}uri"
    mapping = _as_conf(conf)
    raw_lock = props.get("lock-enabled", mapping.get(HIVE_LOCK_CONF, "true"))
    lock_enabled = str(raw_lock).strip().lower() != "false"
    hadoop = {k[len("hadoop."):]: v for k, v in props.items() if k.startswith("hadoop.")}
    uri = props.get("uri", "").strip() or str(mapping.get(HIVE_URIS_CONF, "") or "").strip() or None
    client: MetastoreClient
    if uri is not None:
        parse_thrift_uris(uri, key=key if props.get("uri", "").strip() else HIVE_URIS_CONF)
        client = ThriftMetastoreClient(uri, lock_enabled=lock_enabled, conf=hadoop)
    else:
        client = JvmMetastoreClient(_embedded_metastore_session(name, key, conf), None,
                                    lock_enabled=lock_enabled, conf=hadoop)
    warehouse = props.get("warehouse", "").strip() or str(mapping.get("spark.sql.warehouse.dir", "") or "") or None
    return HiveCatalog(name, client, warehouse, props)


def _embedded_metastore_session(name: str, key: str, conf: Any) -> Any:
    """The classic session whose own metastore a hive catalog without ``uri`` opens."""
    session = conf if hasattr(conf, "conf") and not isinstance(conf, Mapping) else running_spark_session()
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


def resolve_identifier(
    text: str,
    default_catalog: str | None = None,
    *,
    conf: Any = None,
    catalogs: Iterable[str] | None = None,
) -> tuple[str, Identifier]:
    """Resolve a Spark multi-part name to ``(catalog, (*namespace, table))``.

    As in Spark: when the first part names one of our configured catalogs it is the catalog,
    otherwise the whole name lives in the default catalog (``default_catalog``, or
    ``spark.sql.defaultCatalog`` when it is ours, else ``local``).
    """
    known = set(catalogs) if catalogs is not None else set(catalog_names(conf))
    default = default_catalog or default_catalog_name(conf)
    known.add(default)
    if not isinstance(text, str):
        raise ValidationError(f"Invalid table name {text!r}: expected a string such as db.table")
    parts = split_dotted(text.strip())
    if len(parts) >= 3 and parts[0] in known:
        return parts[0], parse_identifier(parts[1:])
    return default, parse_identifier(parts)
