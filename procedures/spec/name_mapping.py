"""Name mapping (spec "Column Projection" / "Name Mapping Serialization"; on-disk notes 12.2).

Files written without Iceberg field ids (imported Parquet, Hive tables) are read by matching
column names against the table property ``schema.name-mapping.default``: a JSON list of mapped
fields, each with an optional ``field-id``, every accepted name (``names``) and the mapping of its
children (``fields``; lists map ``element``, maps ``key`` and ``value``).

This module parses and writes that JSON, creates a mapping from a schema the way Java's
``MappingUtil.create`` does, keeps it current across schema changes (``MappingUtil.update``:
renamed fields gain their new name and keep the old ones as aliases; added fields are appended)
and resolves file column paths to field ids.  pyarrow is only imported inside
:func:`arrow_field_ids`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from procedures.errors import InvalidMetadataError
from procedures.spec.schema import Schema
from procedures.spec.types import IcebergType, ListType, MapType, NestedField, StructType

__all__ = [
    "DEFAULT_NAME_MAPPING_PROPERTY",
    "MappedField",
    "NameMapping",
    "parse_name_mapping",
    "name_mapping_to_json",
    "create_mapping",
    "update_mapping",
    "update_mapping_for_schema",
    "resolve_field_ids",
    "arrow_field_ids",
]

#: the table property that holds the mapping JSON string
DEFAULT_NAME_MAPPING_PROPERTY = "schema.name-mapping.default"

_ROOT = -1


@dataclass(frozen=True, slots=True)
class MappedField:
    """One mapped column: its field id (None for columns that exist only in files), every name it
    may have in a file, and the mapping of its children (None when it has none)."""

    field_id: int | None
    names: tuple[str, ...]
    fields: tuple["MappedField", ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.names, tuple):
            object.__setattr__(self, "names", tuple(self.names))
        if self.fields is not None and not isinstance(self.fields, tuple):
            object.__setattr__(self, "fields", tuple(self.fields))

    def child(self, name: str) -> "MappedField | None":
        """The direct child mapped under ``name``, or None."""
        return _child(self.fields or (), name)


def _child(fields: Sequence[MappedField], name: str) -> MappedField | None:
    for f in fields:
        if name in f.names:
            return f
    return None


@dataclass(frozen=True)
class NameMapping:
    """A table's name mapping: the top-level mapped fields plus lookup indexes.

    Construction checks what Java's ``MappedFields`` and ``IndexById`` check: a name is used by
    at most one field at each level, and a field id appears at most once.
    """

    fields: tuple[MappedField, ...]
    _by_name: dict[str, MappedField] = field(init=False, repr=False, compare=False)
    _by_id: dict[int, MappedField] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        by_name: dict[str, MappedField] = {}
        by_id: dict[int, MappedField] = {}

        def index(fields: Sequence[MappedField], prefixes: list[str]) -> None:
            seen: set[str] = set()
            for f in fields:
                for n in f.names:
                    if n in seen:
                        where = f" under {prefixes[0]!r}" if prefixes and prefixes[0] else ""
                        raise InvalidMetadataError(f"invalid name mapping: name {n!r} is mapped twice{where}")
                    seen.add(n)
                if f.field_id is not None:
                    if f.field_id in by_id:
                        raise InvalidMetadataError(f"invalid name mapping: field id {f.field_id} is not unique")
                    by_id[f.field_id] = f
                full = [f"{p}.{n}" if p else n for p in prefixes for n in f.names]
                for name in full:
                    by_name.setdefault(name, f)
                if f.fields:
                    index(f.fields, full)

        index(self.fields, [""])
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_by_id", by_id)

    def find(self, path: str | Sequence[str]) -> MappedField | None:
        """The mapped field for a column path, or None.

        A string is looked up as a full dotted name over every alias combination (Java's
        ``NameMapping.find``); a sequence of names walks the levels exactly, so names that
        contain dots are unambiguous.
        """
        if isinstance(path, str):
            return self._by_name.get(path)
        fields: Sequence[MappedField] = self.fields
        found: MappedField | None = None
        for name in path:
            found = _child(fields, name)
            if found is None:
                return None
            fields = found.fields or ()
        return found

    def find_id(self, path: str | Sequence[str]) -> int | None:
        """The field id mapped to a column path, or None when unmapped or mapped without an id."""
        f = self.find(path)
        return None if f is None else f.field_id

    def find_by_id(self, field_id: int) -> MappedField | None:
        """The mapped field with this id, or None."""
        return self._by_id.get(field_id)

    def __iter__(self):
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)


# ---------------------------------------------------------------------- JSON
def _field_to_obj(f: MappedField) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if f.field_id is not None:
        out["field-id"] = f.field_id
    out["names"] = list(f.names)
    if f.fields is not None:
        out["fields"] = [_field_to_obj(c) for c in f.fields]
    return out


def name_mapping_to_json(mapping: NameMapping) -> str:
    """The JSON string stored in ``schema.name-mapping.default``."""
    return json.dumps([_field_to_obj(f) for f in mapping.fields], separators=(", ", ": "))


def _fields_from_obj(obj: Any, where: str) -> tuple[MappedField, ...]:
    if not isinstance(obj, list):
        raise InvalidMetadataError(f"cannot parse name mapping: {where} must be a JSON array, got {str(obj)[:200]}")
    return tuple(_field_from_obj(o, where) for o in obj)


def _field_from_obj(obj: Any, where: str) -> MappedField:
    if not isinstance(obj, dict):
        raise InvalidMetadataError(f"cannot parse name mapping: {where} holds a non-object field {obj!r}")
    fid = obj.get("field-id")
    if fid is not None and (isinstance(fid, bool) or not isinstance(fid, int)):
        raise InvalidMetadataError(f"cannot parse name mapping: field-id must be an integer, got {fid!r}")
    names = obj.get("names", [])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InvalidMetadataError(f"cannot parse name mapping: names must be a list of strings, got {names!r}")
    # Java keeps names in a set: repeated aliases collapse
    unique = tuple(dict.fromkeys(names))
    nested = None
    if "fields" in obj and obj["fields"] is not None:
        nested = _fields_from_obj(obj["fields"], f"fields of {unique[0] if unique else fid!r}")
    return MappedField(fid, unique, nested)


def parse_name_mapping(data: str | bytes | list) -> NameMapping:
    """Parse the JSON of ``schema.name-mapping.default`` (or an already decoded list).

    Raises InvalidMetadataError naming the offending part; fix or remove the table property.
    """
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError as e:
            raise InvalidMetadataError(
                f"cannot parse {DEFAULT_NAME_MAPPING_PROPERTY}: not valid JSON ({e})"
            ) from None
    return NameMapping(_fields_from_obj(data, "the mapping"))


# ---------------------------------------------------------------------- create / update
def _type_mapping(t: IcebergType) -> tuple[MappedField, ...] | None:
    """Java's ``CreateMapping`` for a type: None for primitives (no ``fields`` key)."""
    if isinstance(t, StructType):
        return tuple(MappedField(f.field_id, (f.name,), _type_mapping(f.field_type)) for f in t.fields)
    if isinstance(t, ListType):
        return (MappedField(t.element_id, ("element",), _type_mapping(t.element_type)),)
    if isinstance(t, MapType):
        return (
            MappedField(t.key_id, ("key",), _type_mapping(t.key_type)),
            MappedField(t.value_id, ("value",), _type_mapping(t.value_type)),
        )
    return None


def create_mapping(schema: Schema | StructType) -> NameMapping:
    """A mapping that maps each field's current name to its id (Java ``MappingUtil.create``)."""
    struct = schema.as_struct() if isinstance(schema, Schema) else schema
    return NameMapping(_type_mapping(struct) or ())


def update_mapping(
    mapping: NameMapping,
    updates: Mapping[int, NestedField],
    adds: Mapping[int, Sequence[int]],
) -> NameMapping:
    """Apply schema changes to a mapping, as Java's ``MappingUtil.update``.

    ``updates`` maps field id -> the field after the change (renamed fields, and the added fields
    themselves); ``adds`` maps a parent field id (``-1`` for top level) -> ids of fields added
    to it.  Renamed fields gain their new name and keep the old ones; added fields are
    appended; a name now taken by another field id is removed from the field that had it.
    """

    def visit_fields(fields: Sequence[MappedField]) -> list[MappedField]:
        results = [visit_field(f) for f in fields]
        assigned = {updates[f.field_id].name: f.field_id for f in results
                    if f.field_id is not None and f.field_id in updates}
        return [_strip_reassigned(f, assigned) for f in results]

    def visit_field(f: MappedField) -> MappedField:
        names = list(f.names)
        upd = updates.get(f.field_id) if f.field_id is not None else None
        if upd is not None and upd.name not in names:
            names.append(upd.name)
        nested = None if f.fields is None else visit_fields(f.fields)
        nested = add_new(nested, f.field_id if f.field_id is not None else None)
        return MappedField(f.field_id, tuple(names), None if nested is None else tuple(nested))

    def add_new(fields: list[MappedField] | None, parent_id: int | None) -> list[MappedField] | None:
        to_add = [updates[i] for i in adds.get(parent_id, ())] if parent_id is not None else []
        if not to_add:
            return fields
        new = [MappedField(a.field_id, (a.name,), _type_mapping(a.field_type)) for a in to_add]
        if not fields:
            return new
        assigned = {a.name: a.field_id for a in to_add}
        by_id = {n.field_id: n for n in new}
        merged: set[int] = set()
        out: list[MappedField] = []
        for f in fields:
            stripped = _strip_reassigned(f, assigned)
            addition = by_id.get(stripped.field_id) if stripped.field_id is not None else None
            if addition is not None:
                # a stale entry for a re-added id: keep its aliases, take the new structure
                merged.add(addition.field_id)  # type: ignore[arg-type]
                out.append(MappedField(addition.field_id,
                                       tuple(dict.fromkeys(stripped.names + addition.names)),
                                       addition.fields if addition.fields is not None else stripped.fields))
            else:
                out.append(stripped)
        out.extend(n for n in new if n.field_id not in merged)
        return out

    top = add_new(visit_fields(mapping.fields), _ROOT) or []
    return NameMapping(tuple(top))


def _strip_reassigned(f: MappedField, assigned: Mapping[str, int]) -> MappedField:
    keep = tuple(n for n in f.names if assigned.get(n, f.field_id) == f.field_id)
    return f if keep == f.names else MappedField(f.field_id, keep, f.fields)


def update_mapping_for_schema(mapping: NameMapping, old_schema: Schema, new_schema: Schema) -> NameMapping:
    """Update a mapping for the change from ``old_schema`` to ``new_schema`` (matched by id):
    fields whose name changed are renames, fields whose id is new are additions."""
    old_ids = old_schema.field_ids()
    updates: dict[int, NestedField] = {}
    adds: dict[int, list[int]] = {}
    for fid in sorted(new_schema.field_ids()):
        nf = new_schema.find_field(fid)
        parent = new_schema.parent_id(fid)
        if fid in old_ids:
            if old_schema.find_field(fid).name != nf.name:
                updates[fid] = nf
            continue
        if parent is None or parent in old_ids:
            # only the outermost new field is added; its children come from its type
            updates[fid] = nf
            adds.setdefault(_ROOT if parent is None else parent, []).append(fid)
    for siblings in adds.values():
        siblings.sort(key=lambda i: _position(new_schema, i))
    return update_mapping(mapping, updates, adds)


def _position(schema: Schema, field_id: int) -> int:
    parent = schema.parent_id(field_id)
    fields = schema.fields if parent is None else schema.find_field(parent).field_type.fields  # type: ignore[attr-defined]
    return next(i for i, f in enumerate(fields) if f.field_id == field_id)


# ---------------------------------------------------------------------- applying to files
def resolve_field_ids(mapping: NameMapping, paths: Iterable[Sequence[str]]) -> dict[tuple[str, ...], int]:
    """Field ids for file column paths (name tuples, list elements as ``element`` and map
    entries as ``key``/``value``); unmapped paths and fields mapped without an id are left out."""
    out: dict[tuple[str, ...], int] = {}
    for path in paths:
        fid = mapping.find_id(tuple(path))
        if fid is not None:
            out[tuple(path)] = fid
    return out


def arrow_field_ids(mapping: NameMapping, arrow_schema: Any) -> dict[tuple[str, ...], int]:
    """Field ids for every mapped field of a pyarrow schema that lacks ids, keyed by the arrow
    path (arrow's own child names, e.g. ``("tags", "item")``).

    List children match the mapping's ``element`` whatever arrow calls them (``item``,
    ``element``, ``array``), map children ``key`` and ``value``.  Columns the mapping does not
    name are absent from the result; readers treat them as not part of the table.
    """
    import pyarrow as pa  # noqa: PLC0415 - keep pyarrow out of the spec layer's import time

    out: dict[tuple[str, ...], int] = {}

    def visit(arrow_type: Any, mapped: MappedField, path: tuple[str, ...]) -> None:
        children = mapped.fields or ()
        if pa.types.is_struct(arrow_type):
            for i in range(arrow_type.num_fields):
                visit_field(arrow_type.field(i), children, path)
        elif pa.types.is_map(arrow_type):
            for name, af in (("key", arrow_type.key_field), ("value", arrow_type.item_field)):
                m = _child(children, name)
                if m is not None:
                    add(m, path + (af.name,), af.type)
        elif pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type) or pa.types.is_fixed_size_list(arrow_type):
            m = _child(children, "element")
            if m is not None:
                add(m, path + (arrow_type.value_field.name,), arrow_type.value_field.type)

    def add(m: MappedField, path: tuple[str, ...], arrow_type: Any) -> None:
        if m.field_id is not None:
            out[path] = m.field_id
        visit(arrow_type, m, path)

    def visit_field(af: Any, fields: Sequence[MappedField], prefix: tuple[str, ...]) -> None:
        m = _child(fields, af.name)
        if m is not None:
            add(m, prefix + (af.name,), af.type)

    for af in arrow_schema:
        visit_field(af, mapping.fields, ())
    return out
