"""Schemas (spec "Schemas", "Schema JSON" in Appendix C) and their JSON form.

A :class:`Schema` is a struct of fields with unique ids plus a schema id and identifier field
ids.  It keeps lookup indexes (by id, by full dotted name, parent of each id) built once at
construction so readers and writers can resolve columns in O(1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.spec import conversions
from procedures.spec.types import (
    DOUBLE,
    FLOAT,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
    parse_primitive,
)

__all__ = [
    "Schema",
    "MAX_USER_FIELD_ID",
    "type_to_json",
    "type_from_json",
    "schema_to_json",
    "schema_from_json",
    "walk_fields",
    "assign_fresh_ids",
    "MAX_NESTING_DEPTH",
    "MAX_JSON_NESTING_DEPTH",
    "nesting_depth",
    "json_type_depth",
    "too_deep",
]

#: user field ids must not exceed this; everything above is reserved for metadata columns
MAX_USER_FIELD_ID = 2147483447


def walk_fields(struct: StructType, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], NestedField, int | None]]:
    """Yield ``(name path, field, parent id)`` for every field below ``struct``, depth first.

    List elements are named ``element`` and map keys/values ``key``/``value`` in the path, as the
    spec's name mapping and Java's name index do.
    """
    stack: list[tuple[tuple[str, ...], NestedField, int | None]] = [
        (prefix + (f.name,), f, None) for f in reversed(struct.fields)
    ]
    while stack:
        path, f, parent = stack.pop()
        yield path, f, parent
        t = f.field_type
        if isinstance(t, StructType):
            stack.extend((path + (c.name,), c, f.field_id) for c in reversed(t.fields))
        elif isinstance(t, ListType):
            stack.append((path + ("element",), t.element_field, f.field_id))
        elif isinstance(t, MapType):
            stack.append((path + ("value",), t.value_field, f.field_id))
            stack.append((path + ("key",), t.key_field, f.field_id))


#: the deepest nesting of struct, list and map types a schema may have.  Iceberg Java reads
#: metadata JSON through Jackson, whose default limit of 1,000 nested JSON levels (three per nested
#: type) stops at about 330 nested types.  Comparing, hashing and converting types here (JSON, Avro,
#: Arrow, Spark) recurses, about seven Python frames per level, and must leave room under Python's
#: limit of 1,000 frames for its callers (Spark, a test runner): a deeper schema is refused with a
#: typed error naming its depth and this limit instead of failing with a bare RecursionError
MAX_NESTING_DEPTH = 64
#: Jackson's default maximum JSON nesting depth (StreamReadConstraints), Iceberg Java's reader limit
MAX_JSON_NESTING_DEPTH = 1000


def nesting_depth(t: IcebergType) -> int:
    """How deeply struct, list and map types nest in ``t`` (a primitive is 0, ``struct<a: int>`` 1)."""
    deepest, stack = 0, [(t, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, StructType):
            children = [f.field_type for f in node.fields]
        elif isinstance(node, ListType):
            children = [node.element_type]
        elif isinstance(node, MapType):
            children = [node.key_type, node.value_type]
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((c, depth + 1) for c in children)
    return deepest


def json_type_depth(obj: Any) -> int:
    """:func:`nesting_depth` of a type in its JSON form, measured without parsing it."""
    deepest, stack = 0, [(obj, 0)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict):
            continue
        kind = node.get("type")
        if kind == "struct":
            fields = node.get("fields")
            children = [f.get("type") for f in fields if isinstance(f, dict)] if isinstance(fields, list) else []
        elif kind == "list":
            children = [node.get("element")]
        elif kind == "map":
            children = [node.get("key"), node.get("value")]
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((c, depth + 1) for c in children)
    return deepest


def too_deep(depth: int, what: str = "schema") -> str:
    """The message refusing a ``what`` whose types nest ``depth`` levels deep."""
    return (f"the {what} nests types {depth} levels deep, beyond the limit of {MAX_NESTING_DEPTH} "
            f"(Iceberg Java's JSON reader stops at about {MAX_JSON_NESTING_DEPTH // 3}); flatten the nested "
            "structs, lists or maps")


@dataclass(frozen=True)
class Schema:
    """A table schema: top-level fields, a schema id and identifier field ids."""

    fields: tuple[NestedField, ...]
    schema_id: int = 0
    identifier_field_ids: tuple[int, ...] = ()
    _by_id: dict[int, NestedField] = field(init=False, repr=False, compare=False)
    _by_name: dict[str, int] = field(init=False, repr=False, compare=False)
    _by_lower_name: dict[str, int] = field(init=False, repr=False, compare=False)
    _names: dict[int, str] = field(init=False, repr=False, compare=False)
    _parents: dict[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))
        object.__setattr__(self, "identifier_field_ids", tuple(self.identifier_field_ids))
        depth = nesting_depth(StructType(self.fields)) - 1
        if depth > MAX_NESTING_DEPTH:
            raise ValidationError(too_deep(depth))
        by_id: dict[int, NestedField] = {}
        by_name: dict[str, int] = {}
        names: dict[int, str] = {}
        parents: dict[int, int] = {}
        for path, f, parent in walk_fields(StructType(self.fields)):
            if f.field_id in by_id:
                raise InvalidMetadataError(
                    f"schema {self.schema_id} uses field id {f.field_id} twice "
                    f"({names[f.field_id]!r} and {'.'.join(path)!r})"
                )
            by_id[f.field_id] = f
            full = ".".join(path)
            names[f.field_id] = full
            by_name.setdefault(full, f.field_id)
            if parent is not None:
                parents[f.field_id] = parent
        # Java also indexes the short form of names below lists and maps ("tags" for
        # "tags.element" is not added, but "points.x" for "points.element.x" is).
        for fid, full in list(names.items()):
            short = ".".join(p for p in full.split(".") if p != "element" and p != "value")
            if short and short != full:
                by_name.setdefault(short, fid)
        object.__setattr__(self, "_by_id", by_id)
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_by_lower_name", {k.lower(): v for k, v in by_name.items()})
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_parents", parents)

    # ------------------------------------------------------------------ lookups
    def as_struct(self) -> StructType:
        """The schema as a struct type."""
        return StructType(self.fields)

    def __iter__(self) -> Iterator[NestedField]:
        return iter(self.fields)

    def __len__(self) -> int:
        return len(self.fields)

    @property
    def highest_field_id(self) -> int:
        """Largest field id in the schema (0 for an empty schema)."""
        return max(self._by_id, default=0)

    def field_ids(self) -> set[int]:
        """Every field id in the schema, nested ones included."""
        return set(self._by_id)

    def find_field(self, name_or_id: str | int, case_sensitive: bool = True) -> NestedField:
        """The field with this id or full dotted name; raises ValidationError when absent."""
        f = self.find_field_or_none(name_or_id, case_sensitive)
        if f is None:
            kind = "id" if isinstance(name_or_id, int) else "column"
            known = ", ".join(sorted(self._names.values())[:20])
            raise ValidationError(
                f"Cannot find field {kind} {name_or_id!r} in schema {self.schema_id}; known columns: {known}"
            )
        return f

    def find_field_or_none(self, name_or_id: str | int, case_sensitive: bool = True) -> NestedField | None:
        """The field with this id or full dotted name, or None."""
        if isinstance(name_or_id, int):
            return self._by_id.get(name_or_id)
        index = self._by_name if case_sensitive else self._by_lower_name
        fid = index.get(name_or_id if case_sensitive else name_or_id.lower())
        return None if fid is None else self._by_id[fid]

    def find_type(self, name_or_id: str | int, case_sensitive: bool = True) -> IcebergType:
        """The type of the field with this id or name."""
        return self.find_field(name_or_id, case_sensitive).field_type

    def find_column_name(self, field_id: int) -> str | None:
        """Full dotted name of the field id, or None."""
        return self._names.get(field_id)

    def parent_id(self, field_id: int) -> int | None:
        """Id of the struct/list/map field that directly contains ``field_id``, or None at top level."""
        return self._parents.get(field_id)

    def field_path(self, field_id: int) -> list[str]:
        """Names from the top-level field down to ``field_id`` (each name whole, even with dots in it)."""
        names = []
        fid: int | None = field_id
        while fid is not None:
            names.append(self.find_field(fid).name)
            fid = self.parent_id(fid)
        return names[::-1]

    def column_names(self) -> list[str]:
        """Full dotted names of every field, depth first."""
        return list(self._names.values())

    @property
    def identifier_field_names(self) -> list[str]:
        """Full names of the identifier fields."""
        return [self._names[i] for i in self.identifier_field_ids if i in self._names]

    def select(self, names: Iterable[str], case_sensitive: bool = True) -> "Schema":
        """A schema that keeps only the named columns (and the structs that lead to them)."""
        ids = {self.find_field(n, case_sensitive).field_id for n in names}
        return self.project(ids)

    def project(self, field_ids: Iterable[int]) -> "Schema":
        """A schema that keeps only the given field ids (with their ancestors and, for
        selected structs, lists and maps, all their children)."""
        keep = set(field_ids)
        return Schema(_prune_struct(StructType(self.fields), keep).fields, self.schema_id, ())

    def with_schema_id(self, schema_id: int) -> "Schema":
        """The same fields under another schema id."""
        return Schema(self.fields, schema_id, self.identifier_field_ids)

    def same_schema(self, other: "Schema") -> bool:
        """True when fields and identifier ids equal, ignoring the schema id."""
        return self.fields == other.fields and set(self.identifier_field_ids) == set(other.identifier_field_ids)

    def validate_identifier_fields(self) -> None:
        """Check the spec's rules for identifier fields; raises ValidationError naming the field."""
        for fid in self.identifier_field_ids:
            f = self._by_id.get(fid)
            if f is None:
                raise ValidationError(f"identifier field id {fid} is not in schema {self.schema_id}")
            name = self._names[fid]
            if not isinstance(f.field_type, PrimitiveType):
                raise ValidationError(f"identifier field {name!r} must be a primitive type, not {f.field_type}")
            if f.field_type in (FLOAT, DOUBLE):
                raise ValidationError(f"identifier field {name!r} cannot be {f.field_type}")
            if not f.required:
                raise ValidationError(f"identifier field {name!r} must be required")
            parent = self._parents.get(fid)
            while parent is not None:
                pf = self._by_id[parent]
                if not isinstance(pf.field_type, StructType):
                    raise ValidationError(f"identifier field {name!r} cannot be nested in a list or map")
                if not pf.required:
                    raise ValidationError(f"identifier field {name!r} cannot be nested in optional struct {self._names[parent]!r}")
                parent = self._parents.get(parent)

    def __str__(self) -> str:
        body = "\n".join(f"  {f}" for f in self.fields)
        return f"table {{\n{body}\n}}"


def _prune_struct(struct: StructType, keep: set[int]) -> StructType:
    out = []
    for f in struct.fields:
        if f.field_id in keep:
            out.append(f)
            continue
        pruned = _prune_type(f.field_type, keep)
        if pruned is not None:
            out.append(f.with_type(pruned))
    return StructType(tuple(out))


def _prune_type(t: IcebergType, keep: set[int]) -> IcebergType | None:
    if isinstance(t, StructType):
        s = _prune_struct(t, keep)
        return s if s.fields else None
    if isinstance(t, ListType):
        if t.element_id in keep:
            return t
        inner = _prune_type(t.element_type, keep)
        return None if inner is None else ListType(t.element_id, inner, t.element_required)
    if isinstance(t, MapType):
        if t.value_id in keep or t.key_id in keep:
            return t
        inner = _prune_type(t.value_type, keep)
        return None if inner is None else MapType(t.key_id, t.key_type, t.value_id, inner, t.value_required)
    return None


def assign_fresh_ids(schema: Schema, next_id: Callable[[], int]) -> Schema:
    """A copy of ``schema`` with every field id replaced by ``next_id()``, parents before children
    at each level (as Java's ``TypeUtil.assignFreshIds``), identifier fields remapped."""
    mapping: dict[int, int] = {}

    def struct(s: StructType) -> StructType:
        ids = [next_id() for _ in s.fields]
        for f, new in zip(s.fields, ids):
            mapping[f.field_id] = new
        return StructType(tuple(
            NestedField(new, f.name, typ(f.field_type), f.required, f.doc, f.initial_default, f.write_default)
            for f, new in zip(s.fields, ids)
        ))

    def typ(t: IcebergType) -> IcebergType:
        if isinstance(t, StructType):
            return struct(t)
        if isinstance(t, ListType):
            eid = next_id()
            return ListType(eid, typ(t.element_type), t.element_required)
        if isinstance(t, MapType):
            kid, vid = next_id(), next_id()
            return MapType(kid, typ(t.key_type), vid, typ(t.value_type), t.value_required)
        return t

    new_struct = struct(StructType(schema.fields))
    return Schema(new_struct.fields, schema.schema_id, tuple(mapping[i] for i in schema.identifier_field_ids if i in mapping))


# ---------------------------------------------------------------------- JSON
def type_to_json(t: IcebergType) -> Any:
    """The spec's JSON form of a type (a string for primitives, an object for nested types)."""
    if isinstance(t, PrimitiveType):
        return str(t)
    if isinstance(t, StructType):
        return {"type": "struct", "fields": [_field_to_json(f) for f in t.fields]}
    if isinstance(t, ListType):
        return {
            "type": "list",
            "element-id": t.element_id,
            "element": type_to_json(t.element_type),
            "element-required": t.element_required,
        }
    if isinstance(t, MapType):
        return {
            "type": "map",
            "key-id": t.key_id,
            "key": type_to_json(t.key_type),
            "value-id": t.value_id,
            "value": type_to_json(t.value_type),
            "value-required": t.value_required,
        }
    raise InvalidMetadataError(f"cannot serialize type {t!r}")


def _field_to_json(f: NestedField) -> dict[str, Any]:
    out: dict[str, Any] = {"id": f.field_id, "name": f.name, "required": f.required, "type": type_to_json(f.field_type)}
    if f.doc is not None:
        out["doc"] = f.doc
    if f.initial_default is not None:
        out["initial-default"] = conversions.to_json(f.initial_default, f.field_type)
    if f.write_default is not None:
        out["write-default"] = conversions.to_json(f.write_default, f.field_type)
    return out


def type_from_json(obj: Any) -> IcebergType:
    """Parse the spec's JSON form of a type; raises InvalidMetadataError naming what is wrong."""
    if isinstance(obj, str):
        return parse_primitive(obj)
    if not isinstance(obj, dict):
        raise InvalidMetadataError(f"cannot parse type from {obj!r}")
    kind = obj.get("type")
    try:
        if kind == "struct":
            return StructType(tuple(_field_from_json(f) for f in obj["fields"]))
        if kind == "list":
            return ListType(int(obj["element-id"]), type_from_json(obj["element"]), bool(obj["element-required"]))
        if kind == "map":
            return MapType(
                int(obj["key-id"]), type_from_json(obj["key"]),
                int(obj["value-id"]), type_from_json(obj["value"]), bool(obj["value-required"]),
            )
    except KeyError as e:
        raise InvalidMetadataError(f"{kind} type is missing {e.args[0]!r}: {obj}") from None
    raise InvalidMetadataError(f"unknown nested type {kind!r}")


def _field_from_json(obj: dict[str, Any]) -> NestedField:
    try:
        fid, name, required, ftype = int(obj["id"]), obj["name"], obj["required"], obj["type"]
    except KeyError as e:
        raise InvalidMetadataError(f"schema field is missing {e.args[0]!r}: {obj}") from None
    if not isinstance(required, bool):
        raise InvalidMetadataError(f"field {name!r}: 'required' must be a boolean, got {required!r}")
    t = type_from_json(ftype)
    init = obj.get("initial-default")
    write = obj.get("write-default")
    return NestedField(
        fid, name, t, required, obj.get("doc"),
        None if init is None else conversions.from_json(init, t),
        None if write is None else conversions.from_json(write, t),
    )


def schema_to_json(schema: Schema) -> dict[str, Any]:
    """The spec's JSON object for a schema (with ``schema-id``; identifier ids only when set)."""
    out: dict[str, Any] = {"type": "struct", "schema-id": schema.schema_id}
    if schema.identifier_field_ids:
        out["identifier-field-ids"] = list(schema.identifier_field_ids)
    out["fields"] = [_field_to_json(f) for f in schema.fields]
    return out


def schema_from_json(obj: Any) -> Schema:
    """Parse a schema JSON object; raises InvalidMetadataError naming what is wrong."""
    if not isinstance(obj, dict) or obj.get("type", "struct") != "struct" or "fields" not in obj:
        raise InvalidMetadataError(f"a schema must be a struct object with 'fields', got {str(obj)[:200]}")
    # measured before the recursive parse, which a schema this deep would exhaust
    depth = json_type_depth({"type": "struct", "fields": obj["fields"]}) - 1
    if depth > MAX_NESTING_DEPTH:
        raise InvalidMetadataError(too_deep(depth))
    struct = type_from_json({"type": "struct", "fields": obj["fields"]})
    assert isinstance(struct, StructType)
    return Schema(struct.fields, int(obj.get("schema-id", 0)), tuple(obj.get("identifier-field-ids") or ()))
