"""The engine-free rules of ``snapshot`` and ``migrate`` (procedures.md §3.12, §3.13; Iceberg Java 1.10's
``SnapshotTableSparkAction``, ``MigrateTableSparkAction`` and ``BaseTableCreationSparkAction``).

* :func:`spark_schema` converts a Spark ``StructType`` (its JSON form) to an Iceberg schema, as
  Java's ``SparkSchemaUtil.convert`` does (nullable columns are optional, ``timestamp`` is
  ``timestamptz``, ``timestamp_ntz`` is ``timestamp``, bytes and shorts are ints);
* :func:`identity_spec` partitions a schema by identity on the source's partition columns;
* :func:`snapshot_properties` and :func:`migrate_properties` are the new table's properties;
* :func:`check_snapshot_location` refuses a snapshot location equal to or overlapping the source's;
* :func:`backup_name` is migrate's backup table name (``<name>_backup_`` by default);
* :func:`check_source` refuses sources the procedures cannot convert.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from procedures.core.kernel.properties import GC_ENABLED, PARQUET_COMPRESSION, WRITE_PATH_PROPERTIES
from procedures.errors import ValidationError
from procedures.spec import types as spec_types
from procedures.spec.partitioning import PartitionSpec, PartitionSpecBuilder
from procedures.spec.schema import Schema

__all__ = [
    "EXCLUDED_PROPERTIES",
    "LOCATION_PROPERTIES",
    "SUPPORTED_PROVIDERS",
    "SourceTable",
    "spark_schema",
    "identity_spec",
    "table_properties",
    "snapshot_properties",
    "migrate_properties",
    "check_snapshot_location",
    "backup_name",
    "check_source",
]

#: source properties never copied to the new table
EXCLUDED_PROPERTIES = ("path", "transient_lastDdlTime", "serialization.format")
#: location-like properties a snapshot does not copy (it must not write into the source's folders)
LOCATION_PROPERTIES = ("location",) + tuple(p.key for p in WRITE_PATH_PROPERTIES)
#: providers Java converts (``hive`` is a Hive serde table)
SUPPORTED_PROVIDERS = ("parquet", "avro", "orc", "hive")
#: Spark's table property naming the provider of a catalog table
PROVIDER_PROPERTY = "provider"
#: create properties Iceberg's SparkCatalog keeps out of the table's properties
#: (``Spark3Util.rebuildCreateProperties``; ``location`` becomes the table's location)
RESERVED_PROPERTIES = ("provider", "format", "current-snapshot-id", "location", "sort-order", "identifier-fields")
#: what Java's ``TableMetadata.newTableMetadata`` adds to every new table
CREATE_DEFAULTS = ((PARQUET_COMPRESSION.key, PARQUET_COMPRESSION.default),)


@dataclass(frozen=True)
class SourceTable:
    """What snapshot/migrate read from a table of Spark's session catalog."""

    database: str
    name: str
    provider: str | None
    location: str | None
    schema_json: Mapping[str, Any]
    partition_columns: tuple[str, ...]
    properties: Mapping[str, str]
    bucketed: str | None
    table_type: str

    @property
    def qualified(self) -> str:
        """``db.name``."""
        return f"{self.database}.{self.name}"


_PRIMITIVES = {
    "boolean": spec_types.BOOLEAN, "byte": spec_types.INT, "short": spec_types.INT, "integer": spec_types.INT,
    "long": spec_types.LONG,
    "float": spec_types.FLOAT, "double": spec_types.DOUBLE, "date": spec_types.DATE, "timestamp": spec_types.TIMESTAMPTZ,
    "timestamp_ntz": spec_types.TIMESTAMP, "string": spec_types.STRING, "binary": spec_types.BINARY,
}


def _convert(t: Any, next_id: Any) -> spec_types.IcebergType:
    if isinstance(t, str):
        if t in _PRIMITIVES:
            return _PRIMITIVES[t]
        if t.startswith(("varchar(", "char(")):
            return spec_types.STRING
        if t.startswith("decimal"):
            return spec_types.parse_primitive(t.replace(" ", ""))
        raise ValidationError(f"Cannot convert Spark type {t} to an Iceberg type")
    kind = t.get("type")
    if kind == "struct":
        ids = [next_id() for _ in t["fields"]]
        fields = []
        for fid, f in zip(ids, t["fields"]):
            doc = (f.get("metadata") or {}).get("comment")
            fields.append(spec_types.NestedField(fid, f["name"], _convert(f["type"], next_id), not f.get("nullable", True), doc))
        return spec_types.StructType(tuple(fields))
    if kind == "array":
        eid = next_id()
        return spec_types.ListType(eid, _convert(t["elementType"], next_id), not t.get("containsNull", True))
    if kind == "map":
        kid, vid = next_id(), next_id()
        return spec_types.MapType(kid, _convert(t["keyType"], next_id), vid, _convert(t["valueType"], next_id),
                         not t.get("valueContainsNull", True))
    raise ValidationError(f"Cannot convert Spark type {t} to an Iceberg type")


def spark_schema(struct_json: Mapping[str, Any]) -> Schema:
    """The Iceberg schema of a Spark ``StructType`` given as its JSON (``StructType.json()``); the ids
    are provisional (a new table assigns fresh ones)."""
    counter = iter(range(1, 1 << 31))
    converted = _convert(dict(struct_json), lambda: next(counter))
    return Schema(tuple(converted.fields))


def identity_spec(schema: Schema, columns: Sequence[str]) -> PartitionSpec:
    """Identity partitioning on ``columns`` (Java's ``SparkSchemaUtil.identitySpec``)."""
    builder = PartitionSpecBuilder(schema, case_sensitive=False)
    for c in columns:
        builder.add(c, "identity")
    return builder.build()


def _copied(source: Mapping[str, str], drop: Sequence[str]) -> dict[str, str]:
    return {k: v for k, v in source.items() if k not in drop}


def table_properties(create: Mapping[str, str]) -> dict[str, str]:
    """The properties a table created with ``create`` gets: reserved keys dropped, Java's defaults
    added when absent (``format-version`` is left for the metadata builder)."""
    props = {k: v for k, v in create.items() if k not in RESERVED_PROPERTIES}
    for k, v in CREATE_DEFAULTS:
        props.setdefault(k, v)
    return props


def snapshot_properties(source: Mapping[str, str], user: Mapping[str, str]) -> dict[str, str]:
    """A snapshot's properties: the source's (minus excluded and location-like keys), ``provider=iceberg``,
    the user's, then the forced ``gc.enabled=false`` and ``snapshot=true``."""
    props = _copied(source, EXCLUDED_PROPERTIES + LOCATION_PROPERTIES)
    props[PROVIDER_PROPERTY] = "iceberg"
    props.update(user)
    props[GC_ENABLED.key] = "false"
    props["snapshot"] = "true"
    return props


def migrate_properties(source: Mapping[str, str], user: Mapping[str, str]) -> dict[str, str]:
    """A migrated table's properties: the source's (minus excluded keys), ``provider=iceberg``, the
    user's, then ``migrated=true``."""
    props = _copied(source, EXCLUDED_PROPERTIES)
    props[PROVIDER_PROPERTY] = "iceberg"
    props.update(user)
    props["migrated"] = "true"
    return props


def _norm(location: str) -> str:
    text = location.rstrip("/")
    for prefix in ("file://", "file:"):
        if text.startswith(prefix):
            return text[len(prefix):] or "/"
    return text


def check_snapshot_location(location: str, source_location: str) -> None:
    """Refuse a snapshot location that is the source's or lies inside/around it."""
    new, src = _norm(location), _norm(source_location)
    if new == src:
        raise ValidationError(
            "The snapshot table location cannot be same as the source table location. This would mix "
            "snapshot table files with original table files.")
    if new.startswith(src + "/") or src.startswith(new + "/"):
        raise ValidationError(
            f"Cannot create a snapshot at location {location} because it would overlap with source table "
            f"location {source_location}. Overlapping snapshot and source would mix table files.")


def backup_name(name: str, given: str | None) -> str:
    """The backup table's name: ``given`` verbatim, else ``<name>_backup_``."""
    if given is not None and str(given).strip():
        return str(given).strip()
    return f"{name}_backup_"


def check_source(source: SourceTable) -> None:
    """Java's source validations: a non-Iceberg table with a known provider, a location, no buckets."""
    provider = (source.provider or "").lower()
    if provider == "iceberg" or source.properties.get("table_type", "").upper() == "ICEBERG":
        raise ValidationError(f"Cannot convert {source.qualified}: it is already an Iceberg table")
    if provider not in SUPPORTED_PROVIDERS:
        raise ValidationError(f"Cannot create an Iceberg table from source provider: '{source.provider}'")
    if not source.location:
        raise ValidationError("Cannot create an Iceberg table from a source without an explicit location")
    if source.bucketed:
        raise ValidationError(f"Cannot create an Iceberg table from a bucketed source table: {source.bucketed}")
