"""Tables of Spark's session catalog (``spark_catalog``: Hive serde and data source tables) read and
renamed through Spark SQL statements, so ``add_files``, ``snapshot`` and ``migrate`` work the same on
a classic session and on a Spark Connect session (no JVM objects):

* exists: ``spark.catalog.tableExists("spark_catalog.db.name")``;
* the table: ``DESCRIBE TABLE EXTENDED`` (type, provider, serde, location, partition columns,
  buckets), ``SHOW TBLPROPERTIES`` (its properties) and ``spark.table(...).schema`` (the schema
  with comments and char/varchar, as the catalog holds it);
* partitions: ``SHOW PARTITIONS``, then ``SHOW TABLE EXTENDED ... PARTITION (...)`` for each one's
  location and serde (statements run a few at a time);
* rename: ``ALTER TABLE ... RENAME TO``.

Locations come back as Spark prints them, which is Hadoop's ``Path`` spelling of the location URI
(``file:/wh/t/p=John Doe``, a Hive-escaped ``p=2023%2F05%2F30`` kept as such): the directory names
as they are on disk.  ``SHOW TBLPROPERTIES`` redacts values whose keys match Spark's redaction
patterns (``spark.redaction.regex``, ``spark.sql.redaction.options.regex``: ``url``, ``password``...);
those two keys are set to match nothing for the one statement, so the properties are the real ones;
a value still redacted (the session refused the change) is refused with a ValidationError rather than
copied as Spark's mask.
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from procedures.errors import NoSuchTableError, ValidationError
from procedures.spark.sql_quoting import quote_name, sql_string

__all__ = ["SessionTable", "SessionPartition", "describe_table", "list_partitions", "table_exists",
           "rename_table", "current_database", "table_name"]

#: how many ``SHOW TABLE EXTENDED ... PARTITION`` statements run at once (more gain nothing on a
#: small driver: each is planned on the driver's cores)
PARTITION_STATEMENTS = 4
#: a Java regex that matches nothing: redaction off for one statement
_NEVER = "(?!)"
_REDACTION_KEYS = ("spark.redaction.regex", "spark.sql.redaction.options.regex")
#: ``SHOW TBLPROPERTIES`` adds the storage properties as ``option.<key>`` (Spark's V1Table); the
#: catalog table's own properties are the others
_OPTION_PREFIX = "option."
_ESCAPED = re.compile(r"%([0-9A-Fa-f]{2})")
#: how Spark shows a redacted value
_REDACTED = "(redacted)"
_REDACT_LOCK = threading.Lock()


@dataclass(frozen=True)
class SessionPartition:
    """One partition: its values by column (Hive's ``__HIVE_DEFAULT_PARTITION__`` for null, as the
    catalog keeps it), its location (Hadoop ``Path`` spelling) and serde when it has its own."""

    values: tuple[tuple[str, str], ...]
    location: str | None
    serde: str | None


@dataclass(frozen=True)
class SessionTable:
    """What the session catalog says of a table (see the module doc)."""

    database: str
    name: str
    table_type: str
    provider: str | None
    serde: str | None
    location: str | None
    partition_columns: tuple[str, ...]
    properties: Mapping[str, str] = field(default_factory=dict)
    bucket_spec: str | None = None
    schema_json: Mapping[str, Any] = field(default_factory=dict)

    @property
    def qualified(self) -> str:
        """``spark_catalog.`db`.`name```, quoted for SQL."""
        return table_name(self.database, self.name)


def table_name(database: str, name: str) -> str:
    """The quoted name of a session-catalog table."""
    return f"spark_catalog.{quote_name(database)}.{quote_name(name)}"


def current_database(spark: Any) -> str:
    """The session's current database."""
    return str(spark.catalog.currentDatabase())


def table_exists(spark: Any, database: str, name: str) -> bool:
    """Whether the session catalog has table (or view) ``database.name`` (temporary views aside)."""
    return bool(spark.catalog.tableExists(table_name(database, name)))


def rename_table(spark: Any, database: str, old: str, new: str) -> None:
    """``ALTER TABLE ... RENAME TO`` within one database."""
    spark.sql(f"ALTER TABLE {table_name(database, old)} RENAME TO {quote_name(database)}.{quote_name(new)}").collect()


def _sections(rows: Sequence[Any]) -> tuple[list[str], dict[str, str]]:
    """Partition columns and the detail rows of a ``DESCRIBE TABLE EXTENDED`` output."""
    partition_columns: list[str] = []
    details: dict[str, str] = {}
    section = "columns"
    for row in rows:
        key, value = str(row[0] if row[0] is not None else ""), row[1]
        if key == "# Partition Information":
            section = "partitions"
        elif key in ("# Detailed Table Information", "# Detailed Partition Information"):
            section = "details"
        elif key.startswith("# ") and section == "details":
            section = "other"  # e.g. the table's "# Storage Information" after a partition's details
        elif section == "partitions" and key and key != "# col_name":
            partition_columns.append(key)
        elif section == "partitions" and not key:
            section = "columns"
        elif section == "details" and key and key not in details:
            details[key] = "" if value is None else str(value)
    return partition_columns, details


def _set_conf(conf: Any, key: str, value: str | None) -> bool:
    """Set (or with None unset) a session conf key; False when the session refuses the key."""
    try:
        if value is None:
            conf.unset(key)
        else:
            conf.set(key, value)
    except Exception:  # noqa: BLE001 -- e.g. a core Spark key a session may refuse to change
        return False
    return True


def _properties(spark: Any, qualified: str) -> dict[str, str]:
    conf = spark.conf
    with _REDACT_LOCK:
        saved = {k: conf.get(k, None) for k in _REDACTION_KEYS}
        changed = [k for k in _REDACTION_KEYS if _set_conf(conf, k, _NEVER)]
        try:
            rows = spark.sql(f"SHOW TBLPROPERTIES {qualified}").collect()
        finally:
            for k in changed:
                _set_conf(conf, k, saved[k])
    props = {str(r[0]): str(r[1]) for r in rows if not str(r[0]).startswith(_OPTION_PREFIX)}
    hidden = sorted(k for k, v in props.items() if v.endswith(_REDACTED))
    if hidden:
        # copying Spark's mask into the new table would silently lose the value
        raise ValidationError(
            f"Spark redacts the value of propert{'ies' if len(hidden) > 1 else 'y'} {', '.join(hidden)} of {qualified} "
            f"(spark.redaction.regex), so it cannot be copied: remove or rename the property, or change "
            f"spark.redaction.regex for the session"
        )
    return props


def _bucket_spec(details: Mapping[str, str]) -> str | None:
    """Spark's ``BucketSpec`` text (``4 buckets, bucket columns: [id], sort columns: [x]``)."""
    if "Num Buckets" not in details:
        return None

    def names(text: str) -> str:
        inner = text.strip()[1:-1] if text.strip().startswith("[") else text.strip()
        return ", ".join(n.strip().strip("`").replace("``", "`") for n in inner.split(",") if n.strip())

    sort = names(details.get("Sort Columns", "[]"))
    return (f"{details['Num Buckets']} buckets, bucket columns: [{names(details.get('Bucket Columns', '[]'))}]"
            + (f", sort columns: [{sort}]" if sort else ""))


def describe_table(spark: Any, parts: Sequence[str], *, full: bool = True) -> SessionTable:
    """The session-catalog table ``[spark_catalog.][db.]name`` (without a database: the current one);
    NoSuchTableError when it does not exist.  ``full=False`` leaves out the properties and the schema
    (two more statements) for callers that only list the table's files."""
    if spark is None:
        raise ValidationError("a session-catalog table needs a Spark session")
    if len(parts) > 1 and parts[0].lower() == "spark_catalog":
        parts = parts[1:]
    if len(parts) > 2:
        raise ValidationError(
            f"Cannot convert {'.'.join(parts)} to a Spark v1 identifier, namespace contains more than 1 part"
        )
    db = parts[0] if len(parts) == 2 else current_database(spark)
    name = parts[-1]
    if not table_exists(spark, db, name):
        raise NoSuchTableError(f"Table `{db}`.`{name}` does not exist")
    qualified = table_name(db, name)
    columns, details = _sections(spark.sql(f"DESCRIBE TABLE EXTENDED {qualified}").collect())
    schema = spark.table(qualified).schema.jsonValue() if full else {}
    return SessionTable(
        database=db, name=name,
        table_type=details.get("Type", ""), provider=details.get("Provider") or None,
        serde=details.get("Serde Library") or None, location=details.get("Location") or None,
        partition_columns=tuple(columns), properties=_properties(spark, qualified) if full else {},
        bucket_spec=_bucket_spec(details), schema_json=schema,
    )


def _unescape(text: str) -> str:
    """Hive's ``unescapePathName``: ``%XX`` back to the character."""
    return _ESCAPED.sub(lambda m: chr(int(m.group(1), 16)), text)


def _partition_values(spec: str) -> tuple[tuple[str, str], ...]:
    out = []
    for part in spec.split("/"):
        key, _, value = part.partition("=")
        out.append((_unescape(key), _unescape(value)))
    return tuple(out)


def _information(text: str) -> dict[str, str]:
    """The ``Key: value`` lines of ``SHOW TABLE EXTENDED``'s ``information`` column."""
    out: dict[str, str] = {}
    for line in str(text or "").splitlines():
        key, sep, value = line.partition(": ")
        if sep and key not in out:
            out[key] = value
    return out


def _describe_partition(spark: Any, table: SessionTable, values: tuple[tuple[str, str], ...]) -> SessionPartition:
    # SHOW TABLE EXTENDED (one row) costs about half a DESCRIBE ... PARTITION (the table's columns too)
    spec = ", ".join(f"{quote_name(k)} = {sql_string(v)}" for k, v in values)
    rows = spark.sql(f"SHOW TABLE EXTENDED IN spark_catalog.{quote_name(table.database)} "
                     f"LIKE {sql_string(table.name)} PARTITION ({spec})").collect()
    info = _information(rows[0][-1] if rows else "")
    return SessionPartition(values, info.get("Location") or None, info.get("Serde Library") or None)


def list_partitions(spark: Any, table: SessionTable) -> list[SessionPartition]:
    """Every partition of ``table`` with its location and serde, in ``SHOW PARTITIONS`` order."""
    specs = [_partition_values(str(r[0])) for r in spark.sql(f"SHOW PARTITIONS {table.qualified}").collect()]
    if len(specs) <= 1:
        return [_describe_partition(spark, table, s) for s in specs]
    # one driver round trip each: a few at once (on Connect each is a call to the server)
    with ThreadPoolExecutor(max_workers=min(PARTITION_STATEMENTS, len(specs))) as pool:
        return list(pool.map(lambda s: _describe_partition(spark, table, s), specs))
