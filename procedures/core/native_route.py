"""May a planned scan be read by the engine's own Parquet reader, and if not, why.

Our Python reader resolves every column by Iceberg field id, applies schema evolution, type
promotion, defaults, name mappings and every kind of delete.  An engine's plain Parquet reader
(Spark's vectorized one) resolves columns by *name* and knows nothing of Iceberg.  The two give
the same rows only when a by-name read of every planned file is exactly the by-id read; this
module decides that, conservatively, from table metadata alone (no file is opened):

* every data file is Parquet on the local filesystem (the engine reads ``file:`` paths without
  extra jars), and no path holds a glob character (the engine would expand it);
* the table has no name mapping (files without field ids: imported files may lack columns the
  table has, identity partition values among them);
* every projected field, nested ones too, has had one full name in every schema of the table, and
  no other field id ever had that name, even in another case (the engine's default resolution is
  case-insensitive): a renamed, or dropped and re-added, column is never read under a wrong name;
* every projected field has had one type in every schema (no promotion: Spark 3.5's reader cannot
  widen int to long), of a kind the engine reads as our reader does (no uuid, fixed, time,
  nanosecond timestamps, variant, geo, unknown), and no initial default (files without the
  column must read the default, not null), and no required field below the top level (the
  engine's file source reads every field as nullable; top-level required primitives are made
  non-nullable again by the engine step);
* no nested field of a projected column was added after the column (Spark may read a struct none
  of whose read fields a file holds as null);
* no metadata column is requested;
* deletes are position delete files only (no deletion vectors, no equality deletes); their rows
  are removed by the engine with an anti-join on (file, row position), and
  :attr:`NativeReadPlan.position_deletes` lists which delete file applies to which data file.

Anything else reads through the Python path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from procedures.core.kernel.paths import local_path
from procedures.core.kernel.properties import DEFAULT_NAME_MAPPING
from procedures.core.kernel.scan import FileScanTask
from procedures.errors import ValidationError
from procedures.spec.manifest.model import FileContent, FileFormat
from procedures.spec.metadata import TableMetadata
from procedures.spec.schema import Schema
from procedures.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

__all__ = ["NativeReadPlan", "plan_native_read", "native_path", "GLOB_CHARACTERS"]

#: characters Hadoop's glob expansion interprets in a path handed to a file source
GLOB_CHARACTERS = frozenset("{}[]*?\\")

_NATIVE_PRIMITIVES = (BooleanType, IntegerType, LongType, FloatType, DoubleType, DecimalType, DateType,
                      TimestampType, TimestamptzType, StringType, BinaryType)


@dataclass(frozen=True)
class NativeReadPlan:
    """The decision for one scan: ``native`` with the files to read, or ``reason`` for falling back.

    ``data_files`` are the data files' locations as the metadata spells them, in task order without
    repeats; ``native_paths`` the same files spelled for the engine (``file:/x``);
    ``position_deletes`` the (delete file, data file) location pairs the planner matched.
    """

    native: bool
    reason: str
    data_files: tuple[str, ...] = ()
    native_paths: tuple[str, ...] = ()
    position_deletes: tuple[tuple[str, str], ...] = ()

    @property
    def delete_files(self) -> tuple[str, ...]:
        """The position delete files to read, without repeats."""
        return tuple(dict.fromkeys(d for d, _ in self.position_deletes))


def _fallback(reason: str) -> NativeReadPlan:
    return NativeReadPlan(False, reason)


def native_path(location: str) -> str | None:
    """``location`` spelled ``file:/x`` for the engine, or ``None`` when it is not a local file or
    holds a glob character."""
    try:
        local = local_path(location)
    except ValidationError:
        return None
    if local is None or GLOB_CHARACTERS.intersection(local):
        return None
    return "file:" + local


_Walked = tuple[int, tuple[str, ...], IcebergType, "NestedField | None", bool]


def _walk(fields: Iterable[NestedField], parent: tuple[str, ...]) -> Iterable[_Walked]:
    """(id, full name, type, field, required) of every field under ``fields``, list elements and
    map keys and values included (their field is ``None``)."""
    for f in fields:
        path = parent + (f.name,)
        yield f.field_id, path, f.field_type, f, f.required
        yield from _walk_type(f.field_type, path)


def _walk_type(t: IcebergType, path: tuple[str, ...]) -> Iterable[_Walked]:
    if isinstance(t, StructType):
        yield from _walk(t.fields, path)
    elif isinstance(t, ListType):
        yield t.element_id, path + ("element",), t.element_type, None, t.element_required
        yield from _walk_type(t.element_type, path + ("element",))
    elif isinstance(t, MapType):
        # Spark's map keys are never null whatever the reader does: a key's requiredness is no concern
        yield t.key_id, path + ("key",), t.key_type, None, False
        yield from _walk_type(t.key_type, path + ("key",))
        yield t.value_id, path + ("value",), t.value_type, None, t.value_required
        yield from _walk_type(t.value_type, path + ("value",))


def _shape(t: IcebergType) -> object:
    """What must not change for a by-name read: the type itself for primitives, the kind for nested
    types (their children are checked one by one)."""
    return type(t) if isinstance(t, (StructType, ListType, MapType)) else t


def _schema_problem(schemas: Sequence[Schema], projected: Schema) -> str | None:
    names: dict[int, set[tuple[str, ...]]] = {}
    shapes: dict[int, set[object]] = {}
    owners: dict[tuple[str, ...], set[int]] = {}
    for s in schemas:
        for fid, path, t, _, _ in _walk(s.fields, ()):
            names.setdefault(fid, set()).add(path)
            shapes.setdefault(fid, set()).add(_shape(t))
            owners.setdefault(tuple(p.lower() for p in path), set()).add(fid)
    for fid, path, t, f, required in _walk(projected.fields, ()):
        shown = ".".join(path)
        if not isinstance(t, (StructType, ListType, MapType, *_NATIVE_PRIMITIVES)):
            return f"column {shown} has type {t}, which the Parquet reader does not read as Iceberg does"
        if required and (len(path) > 1 or not isinstance(t, _NATIVE_PRIMITIVES)):
            # the file source makes every read field nullable; only top-level primitives are restored
            return f"column {shown} is a required nested field, which the Parquet reader reads as nullable"
        if f is not None and f.initial_default is not None:
            return f"column {shown} has an initial default that files written before it was added must read"
        if len(names.get(fid, {path})) > 1:
            return f"column {shown} was renamed (field id {fid} had names {sorted('.'.join(n) for n in names[fid])})"
        if len(shapes.get(fid, {_shape(t)})) > 1:
            return f"column {shown} changed type (promotion) in the table's history"
        others = owners.get(tuple(p.lower() for p in path), set()) - {fid}
        if others:
            return f"the name {shown} (in some case) belonged to other field ids {sorted(others)} in the table's history"
    return _added_nested_field(schemas, projected)


def _added_nested_field(schemas: Sequence[Schema], projected: Schema) -> str | None:
    """A nested field added to an existing column: Spark may read a struct none of whose read
    fields a file holds as null, where Iceberg reads the struct with null fields."""
    for top in projected.fields:
        nested = {fid for fid, *_ in _walk_type(top.field_type, (top.name,))}
        for s in schemas:
            ids = {fid for fid, *_ in _walk(s.fields, ())}
            if top.field_id in ids and not nested <= ids:
                return f"a field of column {top.name} was added after the column (schema {s.schema_id} lacks it)"
    return None


def plan_native_read(md: TableMetadata, projected: Schema, tasks: Sequence[FileScanTask],
                     metadata_columns: Sequence[str] = (), *, position_deletes: bool = False) -> NativeReadPlan:
    """Whether the planned ``tasks`` of ``md`` read into ``projected`` may use the engine's plain
    Parquet reader (see the module doc), with the files to read, or the reason it may not.

    ``position_deletes`` lets position delete files be applied by the engine (an anti-join); off,
    a scan with any delete reads through Python (the anti-join measured slower than our reader)."""
    if metadata_columns:
        return _fallback(f"metadata columns {list(metadata_columns)} are requested")
    if not tasks:
        return _fallback("the scan has no files")
    if DEFAULT_NAME_MAPPING.is_set(md.properties):
        return _fallback("the table has a name mapping (files without field ids)")
    problem = _schema_problem(md.schemas, projected)
    if problem is not None:
        return _fallback(problem)
    data: dict[str, str] = {}
    pairs: dict[tuple[str, str], None] = {}
    for task in tasks:
        df = task.data_file
        if df.file_format != FileFormat.PARQUET:
            return _fallback(f"data file {df.file_path} is {df.file_format.value}, not Parquet")
        if task.start != 0 or task.length is not None:
            return _fallback("the scan was planned in splits of files")
        spelled = native_path(df.file_path)
        if spelled is None:
            return _fallback(f"data file {df.file_path} is not a local file the Parquet reader can open as named")
        data[df.file_path] = spelled
        if task.deletes and not position_deletes:
            return _fallback("the scan has deletes (the engine's anti-join on positions is not switched on)")
        for d in task.deletes:
            if d.is_dv:
                return _fallback("the scan has deletion vectors")
            if d.data_file.content != FileContent.POSITION_DELETES:
                return _fallback("the scan has equality deletes")
            if d.data_file.file_format != FileFormat.PARQUET or native_path(d.data_file.file_path) is None:
                return _fallback(f"delete file {d.data_file.file_path} is not a local Parquet file")
            pairs[(d.data_file.file_path, df.file_path)] = None
    return NativeReadPlan(True, "every planned file is plain Parquet read by name exactly as by field id",
                          tuple(data), tuple(data.values()), tuple(pairs))
