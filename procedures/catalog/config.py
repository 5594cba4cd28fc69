"""Catalog configuration from Spark conf keys or a plain dict, and Spark's identifier resolution.

Spark configures Iceberg catalogs as ``spark.sql.catalog.<name> = org.apache.iceberg.spark.SparkCatalog``
with ``spark.sql.catalog.<name>.type``, ``.warehouse``, ``.uri``, ``.jdbc.user`` and so on; the same
keys configure our catalogs, so one ``spark-defaults.conf`` serves Java and this package.  A plain
dict (``{"type": "hadoop", "warehouse": ...}``) works too.  A SparkSession is
not read here: the catalog layer knows no Spark, duck-typed or not.  A session's conf and its own
(embedded) metastore are the Spark layer's (:mod:`procedures.spark.catalog_conf`).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from procedures.catalog.base import Catalog, Identifier, split_dotted, parse_identifier
from procedures.catalog.hadoop import HadoopCatalog
from procedures.catalog.hive import HiveCatalog, MetastoreClient
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
    "EmbeddedMetastore",
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


#: the client of a metastore a Spark session opens itself (a hive catalog without ``uri``):
#: ``(catalog name, the uri key to name in errors, lock_enabled, hadoop conf) -> MetastoreClient``
EmbeddedMetastore = Callable[[str, str, bool, Mapping[str, str]], MetastoreClient]


def _as_conf(conf: Any) -> Mapping[str, Any]:
    if conf is None:
        return {}
    if isinstance(conf, Mapping):
        return conf
    raise CatalogConfigError(
        f"Catalog configuration must be a dict of Spark conf keys, got {type(conf).__name__}; for a SparkSession "
        "use procedures.spark.catalog_conf (load_catalog, conf_from_spark)")


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


def load_catalog(name: str, conf: Mapping[str, Any] | None = None, *,
                 embedded_metastore: EmbeddedMetastore | None = None) -> Catalog:
    """Open catalog ``name`` from Spark conf keys or a plain dict.

    ``type`` is ``hadoop`` (needs ``warehouse``), ``jdbc`` (needs ``uri``; ``warehouse`` for default
    table locations; ``jdbc.user`` / ``jdbc.password`` for PostgreSQL), ``hive`` or ``rest`` (needs
    ``uri``; :mod:`procedures.catalog.rest`).  Misconfiguration raises
    :class:`CatalogConfigError` naming the offending key.  A hive catalog without ``uri`` opens the
    metastore of a Spark session through ``embedded_metastore`` (the Spark layer's).
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
            return _hive_catalog(name, props, prefix, conf, embedded_metastore)
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


def _hive_catalog(name: str, props: dict[str, str], prefix: str, conf: Any,
                  embedded_metastore: EmbeddedMetastore | None) -> Catalog:
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
    elif embedded_metastore is None:
        raise CatalogConfigError(
            f"hive catalog {name} has no uri, so it opens the metastore of a Spark session: start a SparkSession "
            f"first or open it with one (load_catalog({name!r}, spark) of procedures.spark.catalog_conf), or set "
            f"{key}=thrift://host:port"
        )
    else:
        client = embedded_metastore(name, key, lock_enabled, hadoop)
    warehouse = props.get("warehouse", "").strip() or str(mapping.get("spark.sql.warehouse.dir", "") or "") or None
    return HiveCatalog(name, client, warehouse, props)


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
