"""Table changes of Iceberg's DDL (``ALTER TABLE ...``, ``REPLACE TABLE``) as commit-kernel operations.

Each operation computes its metadata updates from the base metadata the commit hands it, so a
commit that lost a race recomputes them on the fresh table (or is refused by the requirements the
kernel derives from the first attempt: a schema change made on a schema that moved meanwhile is
not replayed blindly).  The rules are Iceberg Java's: ``SchemaUpdate`` (through
:class:`procedures.spec.schema_update.SchemaUpdate`), ``BaseUpdatePartitionSpec``,
``ReplaceSortOrder``, ``PropertiesUpdate`` and ``TableMetadata.buildReplacement``.  Pure: no Spark.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Sequence

from procedures.core.kernel import updates as metadata_updates
from procedures.core.kernel.properties import FORMAT_VERSION, WRITE_DISTRIBUTION_MODE
from procedures.core.kernel.builder import RESERVED_PROPERTIES
from procedures.core.kernel.operations import OverwriteFiles
from procedures.errors import SchemaEvolutionError, ValidationError
from procedures.spec.metadata import TableMetadata
from procedures.spec.partitioning import PartitionField, PartitionSpec, PartitionSpecBuilder
from procedures.spec.schema import Schema
from procedures.spec.schema_update import SchemaUpdate
from procedures.spec.snapshots import MAIN_BRANCH
from procedures.spec.sorting import NullOrder, SortDirection, SortField, SortOrder
from procedures.spec.transforms import VOID, IdentityTransform, Transform, parse_transform
from procedures.spec.types import ListType, MapType, NestedField, StructType

__all__ = [
    "EvolveSchema", "EvolveSpec", "SetWriteOrder", "SetTableProperties", "DISTRIBUTION_MODE",
    "evolution_partition_name", "replacement_updates", "ReplacedRows", "schema_updates", "spec_updates",
    "order_updates", "assign_ids_by_name", "check_bound",
]

#: the table property ``WRITE ... ORDERED BY / DISTRIBUTED BY`` sets, as Java's
DISTRIBUTION_MODE = WRITE_DISTRIBUTION_MODE.key

#: properties Iceberg's Spark catalog refuses in ``SET TBLPROPERTIES``, with the statement to use
_REDIRECTED = {
    "sort-order": "ALTER TABLE ... WRITE ORDERED BY",
    "identifier-fields": "ALTER TABLE ... SET IDENTIFIER FIELDS",
}
#: Spark's reserved table properties (set by clauses of their own, never by TBLPROPERTIES)
_SPARK_RESERVED = {"location": "LOCATION", "provider": "USING", "owner": None, "comment": "COMMENT", "external": None}


def _column(schema: Schema, source_id: int) -> str:
    return schema.find_column_name(source_id) or str(source_id)


def check_bound(md: TableMetadata, schema: Schema) -> None:
    """Refuse a schema that loses a source column of the default partition spec or sort order:
    the table could no longer be written (Java fails binding them with "Cannot find source column")."""
    old = md.schema()
    for f in md.spec().fields:
        if not f.transform.is_void and schema.find_field_or_none(f.source_id) is None:
            raise SchemaEvolutionError(
                f"Cannot drop column {_column(old, f.source_id)!r}: it is the source of partition field {f.name!r} "
                "of the current partition spec; drop the partition field first (ALTER TABLE ... DROP PARTITION FIELD)")
    for f in md.sort_order().fields:
        if schema.find_field_or_none(f.source_id) is None:
            raise SchemaEvolutionError(
                f"Cannot drop column {_column(old, f.source_id)!r}: the table's sort order uses it; change the "
                "order first (ALTER TABLE ... WRITE ORDERED BY / UNORDERED)")


def schema_updates(md: TableMetadata, schema: Schema, last_column_id: int) -> list[metadata_updates.MetadataUpdate]:
    """Make ``schema`` current: an equal schema the table has is set by its id (a REST server does not
    count a re-added schema as "last added"), a new one is added first."""
    for s in md.schemas:
        if s.same_schema(schema) and last_column_id <= md.last_column_id:
            return [] if s.schema_id == md.current_schema_id else [metadata_updates.SetCurrentSchema(s.schema_id)]
    return [metadata_updates.AddSchema(schema, last_column_id), metadata_updates.SetCurrentSchema(metadata_updates.LAST_ADDED)]


def spec_updates(md: TableMetadata, spec: PartitionSpec) -> list[metadata_updates.MetadataUpdate]:
    """Make ``spec`` the default: an existing spec with the same fields by its id, else added."""
    for s in md.partition_specs:
        if tuple(s.fields) == tuple(spec.fields):
            return [] if s.spec_id == md.default_spec_id else [metadata_updates.SetDefaultSpec(s.spec_id)]
    return [metadata_updates.AddPartitionSpec(spec), metadata_updates.SetDefaultSpec(metadata_updates.LAST_ADDED)]


def order_updates(md: TableMetadata, order: SortOrder) -> list[metadata_updates.MetadataUpdate]:
    """Make ``order`` the default sort order: an existing order with the same fields by its id, else added."""
    for o in md.sort_orders:
        if tuple(o.fields) == tuple(order.fields):
            return [] if o.order_id == md.default_sort_order_id else [metadata_updates.SetDefaultSortOrder(o.order_id)]
    return [metadata_updates.AddSortOrder(order), metadata_updates.SetDefaultSortOrder(metadata_updates.LAST_ADDED)]


@dataclass(frozen=True)
class EvolveSchema:
    """A schema change: ``steps`` are ``(SchemaUpdate method, args, kwargs)`` applied in order to a
    :class:`SchemaUpdate` of the base schema, committed as one new schema (none when unchanged)."""

    steps: tuple[tuple[str, tuple, tuple], ...]
    case_sensitive: bool = False
    replayable: ClassVar[bool] = False

    def new_schema(self, base: TableMetadata) -> tuple[Schema, int]:
        """The schema and last column id the steps make of ``base``'s current schema."""
        upd = SchemaUpdate(base.schema(), base.last_column_id, case_sensitive=self.case_sensitive,
                           format_version=base.format_version)
        for method, args, kwargs in self.steps:
            upd = getattr(upd, method)(*args, **dict(kwargs))
        return upd.apply()

    def apply(self, base: TableMetadata, ctx: Any) -> list[metadata_updates.MetadataUpdate]:
        """The new schema as ``AddSchema`` + ``SetCurrentSchema``."""
        schema, last = self.new_schema(base)
        check_bound(base, schema)
        if schema.same_schema(base.schema()) and last == base.last_column_id:
            return []
        return schema_updates(base, schema, last)


# ------------------------------------------------------------------------------ partition evolution
_EVOLUTION_SUFFIX = {"year": "_year", "month": "_month", "day": "_day", "hour": "_hour", "void": "_null"}


def evolution_partition_name(column: str, transform: Transform) -> str:
    """The name Java's partition evolution gives an added field (its ``PartitionNameGenerator``):
    ``id``, ``id_bucket_16``, ``data_trunc_4``, ``ts_day`` -- unlike a new table's ``id_bucket``."""
    if isinstance(transform, IdentityTransform):
        return column
    text = str(transform)
    if text.startswith("bucket["):
        return f"{column}_bucket_{text[7:-1]}"
    if text.startswith("truncate["):
        return f"{column}_trunc_{text[9:-1]}"
    return column + _EVOLUTION_SUFFIX.get(text, "_" + text)


@dataclass(frozen=True)
class EvolveSpec:
    """A partition spec change (``ADD/DROP/REPLACE PARTITION FIELD``), Java's ``UpdatePartitionSpec``.

    ``steps`` are ``("add", column, transform, name or None)``, ``("remove", column, transform)``
    (a field by its term) and ``("remove_name", name)`` (a field by its name).
    """

    steps: tuple[tuple, ...]
    case_sensitive: bool = False
    replayable: ClassVar[bool] = False

    def apply(self, base: TableMetadata, ctx: Any) -> list[metadata_updates.MetadataUpdate]:
        """The new spec as ``AddPartitionSpec`` + ``SetDefaultSpec`` (none when unchanged)."""
        spec = self.new_spec(base)
        return spec_updates(base, spec)

    def _source(self, schema: Schema, column: str) -> NestedField:
        f = schema.find_field_or_none(column, self.case_sensitive)
        if f is None:
            raise ValidationError(f"Cannot find source column for partition field: {column!r} is not a column of the table")
        return f

    def new_spec(self, base: TableMetadata) -> PartitionSpec:
        """The default spec after the steps (ids from ``last-partition-id``; v2 recycles the id and
        name of a field with the same term from any earlier spec; v1 keeps a dropped field as void)."""
        schema, spec, fv = base.schema(), base.spec(), base.format_version
        last_id = base.last_partition_id
        by_name = {f.name: f for f in spec.fields}
        by_term = {(f.source_id, str(f.transform)): f for f in spec.fields}
        deletes: set[int] = set()
        renames: dict[str, str] = {}
        adds: list[PartitionField] = []
        added_terms: dict[tuple[int, str], PartitionField] = {}
        added_names: set[str] = set()
        for step in self.steps:
            if step[0] == "remove_name":
                f = by_name.get(step[1])
                if f is None:
                    raise ValidationError(f"Cannot find partition field to remove: {step[1]!r}")
                deletes.add(f.field_id)
                continue
            kind, column, transform_text = step[0], step[1], step[2]
            transform = parse_transform(transform_text)
            src = self._source(schema, column)
            term = f"{transform}({_column(schema, src.field_id)})"
            key = (src.field_id, str(transform))
            if kind == "remove":
                if key in added_terms:
                    raise ValidationError(f"Cannot delete newly added field: {term}")
                f = by_term.get(key)
                if f is None:
                    raise ValidationError(f"Cannot find partition field to remove: {term}")
                deletes.add(f.field_id)
                continue
            name = step[3]
            existing = by_term.get(key)
            if existing is not None and existing.field_id in deletes:
                # dropped and added back in one change: the field stays (renamed when asked)
                deletes.discard(existing.field_id)
                if name is not None and name != existing.name:
                    renames[existing.name] = name
                continue
            if existing is not None:
                raise ValidationError(
                    f"Cannot add duplicate partition field {name or existing.name}={term}, conflicts with {existing}")
            if key in added_terms:
                raise ValidationError(f"Cannot add duplicate partition field {term}, already added: {added_terms[key]}")
            if not transform.can_transform(src.field_type):
                raise ValidationError(
                    f"Cannot partition by {transform} of column {_column(schema, src.field_id)!r}: "
                    f"type {src.field_type} is not supported")
            recycled = None
            if fv >= 2:
                for old in (f for s in base.partition_specs for f in s.fields):
                    if (old.source_id, str(old.transform)) == key and (name is None or old.name == name):
                        recycled = old
                        break
            if recycled is not None:
                new = PartitionField(src.field_id, recycled.field_id, transform, name or recycled.name)
            else:
                last_id += 1
                new = PartitionField(src.field_id, last_id, transform,
                                     name or evolution_partition_name(_column(schema, src.field_id), transform))
            clash = by_name.get(new.name)
            if new.name in added_names:
                raise ValidationError(f"Cannot add duplicate partition field name: {new.name!r}")
            if clash is not None and clash.field_id not in deletes:
                if clash.transform.is_void:
                    renames[clash.name] = f"{clash.name}_{clash.field_id}"
                else:
                    raise ValidationError(f"Cannot add duplicate partition field name: {new.name!r}")
            elif clash is not None:
                renames[clash.name] = f"{clash.name}_{clash.field_id}"
            added_terms[key] = new
            added_names.add(new.name)
            adds.append(new)
        fields: list[PartitionField] = []
        for f in spec.fields:
            name = renames.get(f.name, f.name)
            if f.field_id not in deletes:
                fields.append(dataclasses.replace(f, name=name))
            elif fv < 2:
                fields.append(dataclasses.replace(f, name=name, transform=VOID))
        fields += adds
        # Java builds the evolved spec with its unchecked builder: names are checked, but a time
        # transform beside another of the same column (days and hours of ts) is allowed
        names: set[str] = set()
        for f in fields:
            _check_partition_name(schema, f, names, self.case_sensitive)
        new = PartitionSpec(0, tuple(fields))
        new.partition_type(schema)
        return new


def _check_partition_name(schema: Schema, f: PartitionField, seen: set[str], case_sensitive: bool) -> None:
    if not f.name:
        raise ValidationError("Cannot use empty partition name")
    if f.name in seen:
        raise ValidationError(f"Cannot use partition name more than once: {f.name!r}")
    seen.add(f.name)
    column = schema.find_field_or_none(f.name, case_sensitive)
    if column is None or f.transform.is_void:
        return
    if isinstance(f.transform, IdentityTransform):
        if column.field_id != f.source_id:
            raise ValidationError(f"Cannot create identity partition sourced from different field in schema: {f.name!r}")
    else:
        raise ValidationError(f"Cannot create partition from name that exists in schema: {f.name!r}")


# ------------------------------------------------------------------------------ write order
@dataclass(frozen=True)
class SetWriteOrder:
    """``WRITE [LOCALLY] ORDERED BY`` / ``DISTRIBUTED BY PARTITION`` / ``UNORDERED``: a new default
    sort order of ``terms`` (``(column, transform, "asc"|"desc", "nulls-first"|"nulls-last" or None)``)
    and ``write.distribution-mode`` set to ``mode`` (left as it is when ``mode`` is None: ``LOCALLY
    ORDERED BY``), in one commit."""

    terms: tuple[tuple[str, str, str, str | None], ...]
    mode: str | None
    case_sensitive: bool = False
    replayable: ClassVar[bool] = False

    def order(self, schema: Schema) -> SortOrder:
        """The sort order of the terms bound to ``schema`` (id 1; the builder numbers it)."""
        fields = []
        for column, transform_text, direction, nulls in self.terms:
            src = schema.find_field_or_none(column, self.case_sensitive)
            if src is None:
                raise ValidationError(f"Cannot find field {column!r} in the table schema for the sort order")
            transform = parse_transform(transform_text)
            if not transform.can_transform(src.field_type):
                raise ValidationError(f"Cannot sort by {transform} of column {column!r}: type {src.field_type} is not supported")
            d = SortDirection(direction)
            n = NullOrder(nulls) if nulls else (NullOrder.NULLS_FIRST if d == SortDirection.ASC else NullOrder.NULLS_LAST)
            fields.append(SortField(src.field_id, transform, d, n))
        return SortOrder(1 if fields else 0, tuple(fields))

    def apply(self, base: TableMetadata, ctx: Any) -> list[metadata_updates.MetadataUpdate]:
        """``AddSortOrder`` + ``SetDefaultSortOrder`` and the distribution-mode property change."""
        order = self.order(base.schema())
        ups: list[metadata_updates.MetadataUpdate] = []
        ups += order_updates(base, order)
        if self.mode is not None and base.properties.get(DISTRIBUTION_MODE) != self.mode:
            ups.append(metadata_updates.SetProperties(((DISTRIBUTION_MODE, self.mode),)))
        return ups


# ------------------------------------------------------------------------------ properties
def _check_settable(key: str) -> None:
    if key in _REDIRECTED:
        raise ValidationError(f"Cannot specify the {key!r} because it's a reserved table property. "
                              f"Please use the command '{_REDIRECTED[key]}' instead.")
    if key in _SPARK_RESERVED:
        clause = _SPARK_RESERVED[key]
        raise ValidationError(f"{key!r} is a reserved table property"
                              + (f", please use the {clause} clause to specify it" if clause else ""))
    if key in RESERVED_PROPERTIES and key != FORMAT_VERSION.key:
        raise ValidationError(f"Table property {key!r} is reserved and cannot be set")


@dataclass(frozen=True)
class SetTableProperties:
    """``SET TBLPROPERTIES`` / ``UNSET TBLPROPERTIES [IF EXISTS]``.  ``format-version`` upgrades the
    table, as Java's property update does; an unknown key to unset is refused unless ``if_exists``."""

    updates: tuple[tuple[str, str], ...] = ()
    removals: tuple[str, ...] = ()
    if_exists: bool = True
    replayable: ClassVar[bool] = False

    def apply(self, base: TableMetadata, ctx: Any) -> list[metadata_updates.MetadataUpdate]:
        """The property updates (a format upgrade first)."""
        ups: list[metadata_updates.MetadataUpdate] = []
        sets = []
        for k, v in self.updates:
            _check_settable(k)
            if k == FORMAT_VERSION.key:
                try:
                    version = int(v)
                except ValueError:
                    raise ValidationError(f"Invalid format-version {v!r}: expected an integer") from None
                if version != base.format_version:
                    ups.append(metadata_updates.UpgradeFormatVersion(version))
                continue
            sets.append((k, v))
        for k in self.removals:
            _check_settable(k)
            if k not in base.properties and not self.if_exists:
                raise ValidationError(f"Cannot unset table property {k!r}: the table has no such property "
                                      "(use UNSET TBLPROPERTIES IF EXISTS)")
        if sets:
            ups.append(metadata_updates.SetProperties(tuple(sets)))
        gone = tuple(k for k in self.removals if k in base.properties)
        if gone:
            ups.append(metadata_updates.RemoveProperties(gone))
        return ups


# ------------------------------------------------------------------------------ replace table
class ReplacedRows(OverwriteFiles):
    """The rows of ``REPLACE TABLE ... AS SELECT``: Java's Spark writes them as an overwrite by the
    filter ``true`` of the replaced table (which has no rows), so the snapshot is an ``overwrite``
    even though it only adds files."""

    def operation_for(self, summary: Any) -> str:
        """Always ``overwrite``."""
        return "overwrite"


def assign_ids_by_name(schema: Schema, base: Schema, next_id: Callable[[], int]) -> Schema:
    """``schema`` with field ids taken from ``base`` where a column of the same full name exists
    there, fresh ones from ``next_id`` otherwise (Java's ``assignFreshIds(schema, baseSchema, ...)``:
    a replaced table keeps the ids of the columns it keeps)."""

    def idfor(name: str) -> int:
        f = base.find_field_or_none(name)
        return f.field_id if f is not None else next_id()

    def struct(s: StructType, prefix: str) -> StructType:
        ids = [idfor(prefix + f.name) for f in s.fields]
        return StructType(tuple(
            dataclasses.replace(f, field_id=i, field_type=typ(f.field_type, prefix + f.name + "."))
            for f, i in zip(s.fields, ids)))

    def typ(t: Any, prefix: str) -> Any:
        if isinstance(t, StructType):
            return struct(t, prefix)
        if isinstance(t, ListType):
            eid = idfor(prefix + "element")
            return ListType(eid, typ(t.element_type, prefix + "element."), t.element_required)
        if isinstance(t, MapType):
            kid, vid = idfor(prefix + "key"), idfor(prefix + "value")
            return MapType(kid, typ(t.key_type, prefix + "key."), vid, typ(t.value_type, prefix + "value."), t.value_required)
        return t

    return Schema(struct(schema.as_struct(), "").fields, 0)


def _replacement_spec(base: TableMetadata, schema: Schema, terms: Sequence[tuple[str, str]]) -> PartitionSpec:
    if base.format_version >= 2:
        builder = PartitionSpecBuilder(schema, format_version=base.format_version, existing_specs=base.partition_specs,
                                       last_partition_id=base.last_partition_id)
        for column, transform in terms:
            builder.add(column, transform)
        return builder.build()
    # v1: every field of the current spec is carried forward (as void when the new spec lacks it),
    # so field ids stay sequential across specs
    fresh = PartitionSpecBuilder(schema, format_version=2)
    for column, transform in terms:
        fresh.add(column, transform)
    new = {(f.source_id, str(f.transform)): f for f in fresh.build().fields}
    names = {f.name for f in new.values()}
    builder = PartitionSpecBuilder(schema, format_version=1)
    for f in base.spec().fields:
        kept = new.pop((f.source_id, str(f.transform)), None)
        if kept is not None:
            builder.add(kept.source_id, kept.transform, kept.name, field_id=f.field_id)
        else:
            builder.add(f.source_id, VOID, f"{f.name}_{f.field_id}" if f.name in names else f.name, field_id=f.field_id)
    last = base.last_partition_id
    for f in new.values():
        last += 1
        builder.add(f.source_id, f.transform, f.name, field_id=last)
    return builder.build()


def replacement_updates(base: TableMetadata, schema: Schema, partition_terms: Sequence[tuple[str, str]] = (),
                        properties: Mapping[str, str] | None = None, location: str | None = None,
                        ) -> list[metadata_updates.MetadataUpdate]:
    """The updates of ``REPLACE TABLE`` (Java's ``TableMetadata.buildReplacement``): the table keeps
    its uuid, history, snapshots, branches and tags; ``main`` is removed (the table reads empty until
    a new snapshot), the schema becomes ``schema`` with the ids of same-named columns kept, the spec
    ``partition_terms`` (ids of earlier fields with the same term reused), the sort order unsorted,
    and ``properties`` are added to the table's."""
    props = dict(properties or {})
    ups: list[metadata_updates.MetadataUpdate] = []
    if FORMAT_VERSION.is_set(props):
        version = FORMAT_VERSION.read(props)
        del props[FORMAT_VERSION.key]
        if version != base.format_version:
            ups.append(metadata_updates.UpgradeFormatVersion(version))
    for k in props:
        _check_settable(k)
    last = [base.last_column_id]

    def next_id() -> int:
        last[0] += 1
        return last[0]

    fresh = assign_ids_by_name(schema, base.schema(), next_id)
    spec = _replacement_spec(base, fresh, partition_terms)
    ups.append(metadata_updates.RemoveSnapshotRef(MAIN_BRANCH))
    ups += schema_updates(base, fresh, max(last[0], base.last_column_id))
    ups += spec_updates(base, spec)
    ups += order_updates(base, SortOrder(0, ()))
    if location:
        ups.append(metadata_updates.SetLocation(location))
    if props:
        ups.append(metadata_updates.SetProperties(tuple(props.items())))
    return ups
