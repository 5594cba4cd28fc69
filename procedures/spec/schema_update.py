"""Schema evolution (spec "Schema Evolution", "Type promotion" and v3 "Default values").

:class:`SchemaUpdate` is an immutable builder in the spirit of Java's ``UpdateSchema``: every
method returns a new builder holding the accumulated changes, and :meth:`SchemaUpdate.apply`
turns them into ``(new_schema, last_column_id)``.  Columns are resolved by their full dotted
name (``location.lat``), added columns get fresh ids from ``last_column_id + 1`` in call order
(nested types of an added column are numbered parents-first, as Java's ``assignFreshIds``), and
every refused change raises :class:`~procedures.errors.SchemaEvolutionError` naming the column.

The resulting schema keeps the base schema's ``schema_id``: choosing (or reusing) schema ids is
the metadata builder's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from procedures.errors import SchemaEvolutionError, ValidationError
from procedures.spec.schema import MAX_USER_FIELD_ID, Schema
from procedures.spec.types import (
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    LONG,
    TIMESTAMP,
    TIMESTAMP_NS,
    DecimalType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    PrimitiveType,
    StructType,
    UnknownType,
)

__all__ = ["SchemaUpdate", "check_compatible", "promotion_refusal", "assign_fresh_type_ids"]

_ROOT = -1


# ------------------------------------------------------------------ promotion rules
def promotion_refusal(old_type: IcebergType, new_type: IcebergType, format_version: int = 3) -> str | None:
    """Why ``old_type`` may not be promoted to ``new_type`` (None when it may).

    Allowed: int -> long, float -> double, decimal(P, S) -> decimal(P2, S) with P2 > P, and from
    format v3 date -> timestamp / timestamp_ns and unknown -> any type.  Everything else would
    make existing data files unreadable or change partition values.
    """
    if old_type == new_type:
        return None
    if isinstance(old_type, UnknownType):
        return None if format_version >= 3 else "unknown columns exist only in format v3"
    if old_type == INT:
        return None if new_type == LONG else "int can only be promoted to long"
    if old_type == FLOAT:
        return None if new_type == DOUBLE else "float can only be promoted to double"
    if isinstance(old_type, DecimalType):
        if not isinstance(new_type, DecimalType):
            return "a decimal can only be promoted to a decimal with the same scale"
        if new_type.scale != old_type.scale:
            return "decimal scale cannot change"
        if new_type.precision < old_type.precision:
            return "decimal precision can only grow"
        return None
    if old_type == DATE and new_type in (TIMESTAMP, TIMESTAMP_NS):
        return None if format_version >= 3 else "date -> timestamp promotion needs format version 3"
    if old_type == DATE:
        return "date can only be promoted to timestamp or timestamp_ns (format v3)"
    if not isinstance(old_type, PrimitiveType):
        return "nested types cannot change kind; evolve their fields instead"
    return f"{old_type} cannot be promoted to any other type"


def check_compatible(old_type: IcebergType, new_type: IcebergType, format_version: int = 3) -> bool:
    """True when a column of ``old_type`` may become ``new_type`` (the spec's promotion rules)."""
    return promotion_refusal(old_type, new_type, format_version) is None


# ------------------------------------------------------------------ fresh ids
def assign_fresh_type_ids(t: IcebergType, next_id: Callable[[], int]) -> IcebergType:
    """A copy of ``t`` with every nested field id replaced by ``next_id()``.

    Each struct numbers all its own fields before descending into them, a list its element and
    a map its key then value before their types, matching Java so ids agree across engines.
    """
    if isinstance(t, StructType):
        ids = [next_id() for _ in t.fields]
        return StructType(tuple(
            NestedField(new, f.name, assign_fresh_type_ids(f.field_type, next_id), f.required, f.doc,
                        f.initial_default, f.write_default)
            for f, new in zip(t.fields, ids)
        ))
    if isinstance(t, ListType):
        eid = next_id()
        return ListType(eid, assign_fresh_type_ids(t.element_type, next_id), t.element_required)
    if isinstance(t, MapType):
        kid, vid = next_id(), next_id()
        return MapType(kid, assign_fresh_type_ids(t.key_type, next_id), vid,
                       assign_fresh_type_ids(t.value_type, next_id), t.value_required)
    return t


def _min_version(t: IcebergType) -> int:
    if isinstance(t, PrimitiveType):
        return t.min_format_version
    return max((_min_version(f.field_type) for f in t.fields), default=1)  # type: ignore[attr-defined]


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise SchemaEvolutionError(f"Cannot {what}: invalid column name {name!r} (must be a non-empty string)")
    return name


@dataclass(frozen=True, slots=True)
class _Move:
    field_id: int
    kind: str  # "first", "before" or "after"
    ref_id: int | None = None


class SchemaUpdate:
    """Immutable accumulation of schema changes against ``schema``.

    ``last_column_id`` is the table's ``last-column-id``; new ids start after it.
    ``allow_incompatible_changes`` permits changes that may break readers of existing data
    (making a column required, adding a required column without an initial default).
    ``format_version`` gates v3-only features (defaults, v3 types, v3 promotions).
    """

    __slots__ = (
        "_schema", "_last_column_id", "_allow_incompatible", "_case_sensitive", "_format_version",
        "_deletes", "_updates", "_adds", "_added_names", "_added_parents", "_moves", "_identifiers",
    )

    def __init__(
        self,
        schema: Schema,
        last_column_id: int,
        *,
        allow_incompatible_changes: bool = False,
        case_sensitive: bool = True,
        format_version: int = 3,
    ) -> None:
        self._schema = schema
        self._last_column_id = max(last_column_id, schema.highest_field_id)
        self._allow_incompatible = allow_incompatible_changes
        self._case_sensitive = case_sensitive
        self._format_version = format_version
        self._deletes: frozenset[int] = frozenset()
        #: field id -> the field as it will be after this update (added fields live here too)
        self._updates: dict[int, NestedField] = {}
        #: parent struct field id (or _ROOT) -> added field ids in call order
        self._adds: dict[int, tuple[int, ...]] = {}
        self._added_names: dict[str, int] = {}
        self._added_parents: dict[int, int] = {}
        self._moves: dict[int, tuple[_Move, ...]] = {}
        #: identifier fields: an int is a resolved field id, a str a name resolved at apply()
        self._identifiers: tuple[int | str, ...] = tuple(schema.identifier_field_ids)

    # ------------------------------------------------------------------ plumbing
    def _evolve(self, **changes: object) -> "SchemaUpdate":
        new = object.__new__(SchemaUpdate)
        for slot in SchemaUpdate.__slots__:
            object.__setattr__(new, slot, changes.get(slot[1:], getattr(self, slot)))
        return new

    @property
    def last_column_id(self) -> int:
        """The highest id assigned so far (the table's ``last-column-id`` after apply)."""
        return self._last_column_id

    @property
    def base_schema(self) -> Schema:
        """The schema the changes are made against."""
        return self._schema

    def _key(self, name: str) -> str:
        return name if self._case_sensitive else name.lower()

    def _find(self, name: str) -> NestedField | None:
        return self._schema.find_field_or_none(name, self._case_sensitive)

    def _find_for_update(self, name: str) -> NestedField | None:
        existing = self._find(name)
        if existing is not None:
            return self._updates.get(existing.field_id, existing)
        added = self._added_names.get(self._key(name))
        return None if added is None else self._updates[added]

    def _parent_of(self, field_id: int) -> int | None:
        if field_id in self._added_parents:
            parent = self._added_parents[field_id]
            return None if parent == _ROOT else parent
        return self._schema.parent_id(field_id)

    def _check_not_map_key(self, field_id: int, name: str, what: str) -> None:
        parent = self._schema.parent_id(field_id)
        if parent is not None:
            ptype = self._schema.find_field(parent).field_type
            if isinstance(ptype, MapType) and ptype.key_id == field_id:
                raise SchemaEvolutionError(f"Cannot {what} map key {name!r}: map keys cannot change")

    def _check_version(self, t: IcebergType, name: str) -> None:
        needed = _min_version(t)
        if needed > self._format_version:
            raise SchemaEvolutionError(
                f"Cannot use type {t} for column {name!r}: it needs format version {needed}, "
                f"the table is v{self._format_version}; upgrade the table first"
            )

    # ------------------------------------------------------------------ additions
    def add_column(
        self,
        parent: str | None,
        name: str,
        field_type: IcebergType,
        doc: str | None = None,
        *,
        required: bool = False,
        initial_default: object = None,
        write_default: object = None,
    ) -> "SchemaUpdate":
        """Add ``name`` of ``field_type`` at the end of the top-level struct (``parent=None``) or
        of the struct ``parent`` (a list parent means its element struct, a map its value).

        ``initial_default`` is the value readers use for rows written before the column existed;
        when only it is given it also becomes the ``write_default`` (as Java does).  A required
        column needs an initial default unless incompatible changes are allowed.
        """
        _check_name(name, "add column")
        if parent is None and "." in name:
            raise SchemaEvolutionError(
                f"Cannot add column with ambiguous name {name!r}: pass the enclosing struct as parent"
            )
        if parent is None:
            parent_id, full = _ROOT, name
            existing = self._find(name)
            siblings = self._adds.get(_ROOT, ())
        else:
            pf = self._find(parent)
            if pf is None:
                raise SchemaEvolutionError(f"Cannot add column {name!r}: parent struct {parent!r} not found")
            if isinstance(pf.field_type, ListType):
                pf = pf.field_type.element_field
            elif isinstance(pf.field_type, MapType):
                pf = pf.field_type.value_field
            if not isinstance(pf.field_type, StructType):
                raise SchemaEvolutionError(
                    f"Cannot add column {name!r} to non-struct column {parent!r} of type {pf.field_type}"
                )
            parent_id = pf.field_id
            if parent_id in self._deletes or any(a in self._deletes for a in self._ancestors(parent_id)):
                raise SchemaEvolutionError(f"Cannot add column {name!r} to {parent!r}: it will be deleted")
            full = f"{self._schema.find_column_name(parent_id)}.{name}"
            existing = pf.field_type.field_by_name(name, self._case_sensitive)
            siblings = self._adds.get(parent_id, ())
        if existing is not None and existing.field_id not in self._deletes:
            raise SchemaEvolutionError(f"Cannot add column {full!r}: name already exists")
        if any(self._key(self._updates[i].name) == self._key(name) for i in siblings):
            raise SchemaEvolutionError(f"Cannot add column {full!r}: it is already added in this update")
        self._check_version(field_type, full)
        if isinstance(field_type, UnknownType) and required:
            raise SchemaEvolutionError(f"Cannot add column {full!r}: unknown columns must be optional")
        if (initial_default is not None or write_default is not None) and self._format_version < 3:
            raise SchemaEvolutionError(
                f"Cannot add column {full!r} with a default value: defaults need format version 3"
            )
        if write_default is None:
            write_default = initial_default
        if required and initial_default is None and not self._allow_incompatible:
            raise SchemaEvolutionError(
                f"Incompatible change: cannot add required column without an initial default: {full!r}"
            )

        counter = [self._last_column_id]

        def next_id() -> int:
            counter[0] += 1
            return counter[0]

        new_id = next_id()
        new_type = assign_fresh_type_ids(field_type, next_id)
        if counter[0] > MAX_USER_FIELD_ID:
            raise SchemaEvolutionError(f"Cannot add column {full!r}: field ids would exceed {MAX_USER_FIELD_ID}")
        new_field = NestedField(new_id, name, new_type, required, doc, initial_default, write_default)
        return self._evolve(
            last_column_id=counter[0],
            updates={**self._updates, new_id: new_field},
            adds={**self._adds, parent_id: siblings + (new_id,)},
            added_names={**self._added_names, self._key(full): new_id},
            added_parents={**self._added_parents, new_id: parent_id},
        )

    def _ancestors(self, field_id: int) -> list[int]:
        out = []
        parent = self._schema.parent_id(field_id)
        while parent is not None:
            out.append(parent)
            parent = self._schema.parent_id(parent)
        return out

    # ------------------------------------------------------------------ deletes and renames
    def delete_column(self, name: str) -> "SchemaUpdate":
        """Drop the column (and everything nested in it)."""
        f = self._find(name)
        if f is None:
            if self._key(name) in self._added_names:
                raise SchemaEvolutionError(f"Cannot delete column {name!r}: it is added in this same update")
            raise SchemaEvolutionError(f"Cannot delete missing column: {name!r}")
        if f.field_id in self._adds:
            raise SchemaEvolutionError(f"Cannot delete a column that has additions: {name!r}")
        if f.field_id in self._updates:
            raise SchemaEvolutionError(f"Cannot delete a column that has updates: {name!r}")
        parent = self._schema.parent_id(f.field_id)
        if parent is not None and not isinstance(self._schema.find_field(parent).field_type, StructType):
            raise SchemaEvolutionError(
                f"Cannot delete {name!r}: list elements and map keys/values cannot be deleted"
            )
        return self._evolve(deletes=self._deletes | {f.field_id})

    def rename_column(self, name: str, new_name: str) -> "SchemaUpdate":
        """Give the column a new (leaf) name; its id, type and position stay."""
        _check_name(new_name, f"rename column {name!r}")
        f = self._find(name)
        if f is None:
            raise SchemaEvolutionError(f"Cannot rename missing column: {name!r}")
        if f.field_id in self._deletes:
            raise SchemaEvolutionError(f"Cannot rename a column that will be deleted: {name!r}")
        parent = self._schema.parent_id(f.field_id)
        if parent is not None and not isinstance(self._schema.find_field(parent).field_type, StructType):
            raise SchemaEvolutionError(f"Cannot rename {name!r}: list elements and map keys/values have fixed names")
        current = self._updates.get(f.field_id, f)
        return self._with_update(_replace(current, name=new_name))

    def _with_update(self, f: NestedField) -> "SchemaUpdate":
        return self._evolve(updates={**self._updates, f.field_id: f})

    def _for_change(self, name: str) -> NestedField:
        f = self._find_for_update(name)
        if f is None:
            raise SchemaEvolutionError(f"Cannot update missing column: {name!r}")
        if f.field_id in self._deletes:
            raise SchemaEvolutionError(f"Cannot update a column that will be deleted: {name!r}")
        return f

    # ------------------------------------------------------------------ updates
    def update_column(self, name: str, new_type: IcebergType) -> "SchemaUpdate":
        """Promote the column's type (see :func:`check_compatible`); a no-op for the same type."""
        f = self._for_change(name)
        if f.field_type == new_type:
            return self
        self._check_not_map_key(f.field_id, name, "change the type of")
        reason = promotion_refusal(f.field_type, new_type, self._format_version)
        if reason is not None:
            raise SchemaEvolutionError(f"Cannot change column type: {name!r}: {f.field_type} -> {new_type}: {reason}")
        self._check_version(new_type, name)
        if isinstance(new_type, PrimitiveType):
            return self._with_update(f.with_type(new_type))
        # unknown -> nested: the new nested fields need table-unique ids
        counter = [self._last_column_id]

        def next_id() -> int:
            counter[0] += 1
            return counter[0]

        fresh = assign_fresh_type_ids(new_type, next_id)
        return self._evolve(last_column_id=counter[0], updates={**self._updates, f.field_id: f.with_type(fresh)})

    def update_column_doc(self, name: str, doc: str | None) -> "SchemaUpdate":
        """Replace the column's doc string."""
        f = self._for_change(name)
        return self if f.doc == doc else self._with_update(_replace(f, doc=doc))

    def update_column_default(self, name: str, write_default: object) -> "SchemaUpdate":
        """Change the v3 ``write-default`` (the initial default can never change)."""
        if self._format_version < 3:
            raise SchemaEvolutionError(f"Cannot set a default for {name!r}: defaults need format version 3")
        f = self._for_change(name)
        return self if f.write_default == write_default else self._with_update(_replace(f, write_default=write_default))

    def make_column_optional(self, name: str) -> "SchemaUpdate":
        """Allow nulls in the column (always compatible)."""
        f = self._for_change(name)
        if not f.required:
            return self
        self._check_not_map_key(f.field_id, name, "make optional")
        return self._with_update(_replace(f, required=False))

    def require_column(self, name: str) -> "SchemaUpdate":
        """Forbid nulls; only with ``allow_incompatible_changes`` unless the column is added in
        this update with an initial default (old rows then read the default, never null)."""
        f = self._for_change(name)
        if f.required:
            return self
        defaulted_add = self._key(name) in self._added_names and f.initial_default is not None
        if not (defaulted_add or self._allow_incompatible):
            raise SchemaEvolutionError(
                f"Cannot change column nullability: {name!r}: optional -> required "
                "(existing rows may hold nulls; allow incompatible changes to force it)"
            )
        return self._with_update(_replace(f, required=True))

    # ------------------------------------------------------------------ moves
    def _find_for_move(self, name: str, role: str) -> int:
        added = self._added_names.get(self._key(name))
        if added is not None:
            return added
        f = self._find(name)
        if f is None:
            raise SchemaEvolutionError(f"Cannot move {role} missing column: {name!r}")
        if f.field_id in self._deletes:
            raise SchemaEvolutionError(f"Cannot move {role} column {name!r}: it will be deleted")
        return f.field_id

    def _move(self, name: str, move: _Move) -> "SchemaUpdate":
        parent = self._parent_of(move.field_id)
        if parent is not None:
            ptype = self._schema.find_field(parent).field_type
            if not isinstance(ptype, StructType):
                raise SchemaEvolutionError(f"Cannot move {name!r}: fields of {ptype} cannot be reordered")
        if move.ref_id is not None and self._parent_of(move.ref_id) != parent:
            raise SchemaEvolutionError(f"Cannot move field {name!r} to a different struct")
        key = _ROOT if parent is None else parent
        return self._evolve(moves={**self._moves, key: self._moves.get(key, ()) + (move,)})

    def move_first(self, name: str) -> "SchemaUpdate":
        """Make the column the first of its struct."""
        return self._move(name, _Move(self._find_for_move(name, ""), "first"))

    def move_before(self, name: str, before_name: str) -> "SchemaUpdate":
        """Place the column just before ``before_name`` (a sibling in the same struct)."""
        fid = self._find_for_move(name, "")
        ref = self._find_for_move(before_name, f"{name!r} before")
        if fid == ref:
            raise SchemaEvolutionError(f"Cannot move {name!r} before itself")
        return self._move(name, _Move(fid, "before", ref))

    def move_after(self, name: str, after_name: str) -> "SchemaUpdate":
        """Place the column just after ``after_name`` (a sibling in the same struct)."""
        fid = self._find_for_move(name, "")
        ref = self._find_for_move(after_name, f"{name!r} after")
        if fid == ref:
            raise SchemaEvolutionError(f"Cannot move {name!r} after itself")
        return self._move(name, _Move(fid, "after", ref))

    # ------------------------------------------------------------------ identifier fields
    def set_identifier_fields(self, names: Iterable[str]) -> "SchemaUpdate":
        """Replace the identifier fields by these columns (existing or added in this update)."""
        resolved: list[int | str] = []
        for n in names:
            added = self._added_names.get(self._key(n))
            f = self._find(n)
            item: int | str = added if added is not None else (f.field_id if f is not None else n)
            if item not in resolved:
                resolved.append(item)
        return self._evolve(identifiers=tuple(resolved))

    # ------------------------------------------------------------------ union by name
    def union_by_name(self, new: Schema | StructType) -> "SchemaUpdate":
        """Evolve the schema so that every column of ``new`` exists (matched by name): missing
        columns are added as optional, types are widened, required columns made optional when
        ``new`` has them optional.  Columns only in the table are kept."""
        fields = new.fields
        return self._union_fields(self, None, fields, self._schema.as_struct())

    @staticmethod
    def _union_fields(upd: "SchemaUpdate", parent: str | None, fields: Iterable[NestedField],
                      current: StructType) -> "SchemaUpdate":
        for nf in fields:
            cf = current.field_by_name(nf.name, upd._case_sensitive)
            path = nf.name if parent is None else f"{parent}.{nf.name}"
            if cf is None:
                upd = upd.add_column(parent, nf.name, nf.field_type, nf.doc)
                continue
            path = cf.name if parent is None else f"{parent}.{cf.name}"
            upd = SchemaUpdate._union_field(upd, path, cf, nf)
        return upd

    @staticmethod
    def _union_field(upd: "SchemaUpdate", path: str, cf: NestedField, nf: NestedField) -> "SchemaUpdate":
        ct, nt = cf.field_type, nf.field_type
        if isinstance(ct, StructType) and isinstance(nt, StructType):
            upd = SchemaUpdate._union_fields(upd, path, nt.fields, ct)
        elif isinstance(ct, ListType) and isinstance(nt, ListType):
            upd = SchemaUpdate._union_field(upd, f"{path}.element", ct.element_field, nt.element_field)
        elif isinstance(ct, MapType) and isinstance(nt, MapType):
            if ct.key_type != nt.key_type:
                raise SchemaEvolutionError(f"Cannot union map {path!r}: key type {ct.key_type} != {nt.key_type}")
            upd = SchemaUpdate._union_field(upd, f"{path}.value", ct.value_field, nt.value_field)
        elif ct != nt:
            if check_compatible(ct, nt, upd._format_version):
                upd = upd.update_column(path, nt)
            elif not check_compatible(nt, ct, upd._format_version):
                raise SchemaEvolutionError(
                    f"Cannot union column {path!r}: {ct} and {nt} are not compatible: "
                    f"{promotion_refusal(ct, nt, upd._format_version)}"
                )
        if cf.required and not nf.required:
            upd = upd.make_column_optional(path)
        # list elements and map values carry no doc in the spec's JSON
        if nf.doc is not None and nf.doc != cf.doc and not path.endswith((".element", ".value")):
            upd = upd.update_column_doc(path, nf.doc)
        return upd

    # ------------------------------------------------------------------ apply
    def apply(self) -> tuple[Schema, int]:
        """The updated schema and the new ``last_column_id``; raises SchemaEvolutionError when
        the changes conflict (deleted identifier fields, duplicate names ...)."""
        schema = self._schema
        for ident in self._identifiers:
            if not isinstance(ident, int) or schema.find_field_or_none(ident) is None:
                continue
            name = schema.find_column_name(ident)
            if ident in self._deletes:
                raise SchemaEvolutionError(
                    f"Cannot delete identifier field {name!r}. To force deletion, also call "
                    "set_identifier_fields to update identifier fields."
                )
            for ancestor in self._ancestors(ident):
                if ancestor in self._deletes:
                    raise SchemaEvolutionError(
                        f"Cannot delete field {schema.find_column_name(ancestor)!r} as it will delete "
                        f"nested identifier field {name!r}"
                    )
        for parent, moves in self._moves.items():
            for m in moves:
                for fid in (m.field_id, m.ref_id):
                    if fid is not None and fid in self._deletes:
                        raise SchemaEvolutionError(
                            f"Cannot move column {schema.find_column_name(fid)!r}: it will be deleted"
                        )

        fields = self._apply_struct(schema.as_struct(), _ROOT, "").fields
        try:
            new_schema = Schema(fields, schema.schema_id, ())
        except ValidationError as e:
            raise SchemaEvolutionError(str(e)) from None
        ids: list[int] = []
        for ident in self._identifiers:
            if isinstance(ident, str):
                f = new_schema.find_field_or_none(ident, self._case_sensitive)
                if f is None:
                    raise SchemaEvolutionError(
                        f"Cannot add field {ident!r} as an identifier field: not found in current schema "
                        "or added columns"
                    )
                ident = f.field_id
            if ident not in ids:
                ids.append(ident)
        new_schema = Schema(fields, schema.schema_id, tuple(ids))
        try:
            new_schema.validate_identifier_fields()
        except ValidationError as e:
            raise e if isinstance(e, SchemaEvolutionError) else SchemaEvolutionError(str(e)) from None
        return new_schema, self._last_column_id

    def _apply_struct(self, struct: StructType, parent_id: int, prefix: str) -> StructType:
        out: list[NestedField] = []
        for f in struct.fields:
            if f.field_id in self._deletes:
                continue
            upd = self._updates.get(f.field_id)
            full = prefix + f.name
            if upd is not None and upd.field_type != f.field_type:
                new_type = upd.field_type
            else:
                new_type = self._apply_type(f.field_id, f.field_type, full)
            base = upd if upd is not None else f
            out.append(base if base.field_type == new_type else base.with_type(new_type))
        fields = self._add_and_move(out, parent_id)
        seen: dict[str, str] = {}
        for f in fields:
            key = self._key(f.name)
            if key in seen:
                raise SchemaEvolutionError(
                    f"Cannot apply schema changes: duplicate column name {prefix + f.name!r} "
                    f"(also {prefix + seen[key]!r})"
                )
            seen[key] = f.name
        return StructType(tuple(fields))

    def _apply_type(self, field_id: int, t: IcebergType, full: str) -> IcebergType:
        if isinstance(t, StructType):
            return self._apply_struct(t, field_id, full + ".")
        if isinstance(t, ListType):
            elem = self._updates.get(t.element_id)
            if elem is not None and elem.field_type != t.element_type:
                etype = elem.field_type
            else:
                etype = self._apply_type(t.element_id, t.element_type, full + ".element")
            required = elem.required if elem is not None else t.element_required
            return ListType(t.element_id, etype, required)
        if isinstance(t, MapType):
            val = self._updates.get(t.value_id)
            if val is not None and val.field_type != t.value_type:
                vtype = val.field_type
            else:
                vtype = self._apply_type(t.value_id, t.value_type, full + ".value")
            required = val.required if val is not None else t.value_required
            return MapType(t.key_id, t.key_type, t.value_id, vtype, required)
        return t

    def _add_and_move(self, fields: list[NestedField], parent_id: int) -> list[NestedField]:
        fields = fields + [self._updates[i] for i in self._adds.get(parent_id, ())]
        for m in self._moves.get(parent_id, ()):
            moving = next(f for f in fields if f.field_id == m.field_id)
            fields.remove(moving)
            if m.kind == "first":
                fields.insert(0, moving)
            else:
                idx = next(i for i, f in enumerate(fields) if f.field_id == m.ref_id)
                fields.insert(idx if m.kind == "before" else idx + 1, moving)
        return fields


def _replace(f: NestedField, **changes: object) -> NestedField:
    values = {
        "field_id": f.field_id, "name": f.name, "field_type": f.field_type, "required": f.required,
        "doc": f.doc, "initial_default": f.initial_default, "write_default": f.write_default,
    }
    values.update(changes)
    return NestedField(**values)  # type: ignore[arg-type]
