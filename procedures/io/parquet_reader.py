"""Reading one planned data file into Arrow (spec "Column Projection", "Row-level Deletes", "Row
Lineage"; on-disk notes sections 8-10 and 12).

:func:`read_task` turns a :class:`~procedures.core.kernel.scan.FileScanTask` into record batches of a
requested Iceberg schema, matching columns **by field id**:

* renamed, reordered and dropped columns follow the ids; nested structs, lists and maps too;
* a field missing from the file takes, in order, the identity-partition value of the file's
  partition, the field's ``initial-default``, or null;
* promoted types are cast (int -> long, float -> double, decimal widening, date -> timestamp);
* files without Parquet field ids are resolved through the table's name mapping
  (``schema.name-mapping.default``), or, like Java, by top-level position when there is none;
* deletes: position delete files (rows for this data file only), deletion vectors (the Puffin blob
  at ``content_offset``/``content_size_in_bytes``) and equality deletes (null-safe equality on the
  delete columns);
* metadata columns ``_file``, ``_pos``, ``_spec_id``, ``_partition``, ``_deleted`` and the v3 row
  lineage columns ``_row_id`` / ``_last_updated_sequence_number`` with their inheritance.

The output uses the Iceberg Arrow types of :mod:`procedures.io.arrow_schema` (uuid as 16-byte
uuid, timestamps in micros).  Engines convert to their own types afterwards.
"""

from __future__ import annotations

import contextlib
import threading
from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from procedures.errors import InvalidMetadataError, ValidationError
from procedures.io.arrow_schema import (
    UUID_ARROW_TYPE,
    field_id,
    has_field_ids,
    schema_to_arrow,
    type_to_arrow,
)
from procedures.io.avro_data import read_avro_batches
from procedures.io.orc_data import read_orc_batches
from procedures.io.read_filters import RowFilter, row_filter
from procedures.spec.deletion_vector import deserialize_dv_array
from procedures.spec.file_access import FileAccess
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.metadata_columns import (
    DELETE_FILE_PATH_ID,
    DELETE_FILE_POS_ID,
    DELETE_FILE_ROW_ID,
    FILE_PATH,
    IS_DELETED,
    LAST_UPDATED_SEQUENCE_NUMBER,
    LAST_UPDATED_SEQUENCE_NUMBER_ID,
    ROW_ID,
    ROW_ID_ID,
    ROW_POSITION,
    SPEC_ID,
    partition_column,
)
from procedures.spec.name_mapping import NameMapping, arrow_field_ids
from procedures.spec.partitioning import PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.transforms import IdentityTransform
from procedures.spec.types import (
    DateType,
    IcebergType,
    ListType,
    MapType,
    NestedField,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)
from procedures.spec.types import BINARY

__all__ = [
    "METADATA_COLUMN_NAMES",
    "metadata_field",
    "read_task",
    "read_task_table",
    "open_parquet",
    "output_schema",
    "deleted_positions",
    "read_position_deletes",
    "read_position_delete_rows",
    "read_dv_positions",
    "constant_array",
]

DEFAULT_BATCH_SIZE = 131_072

#: metadata columns :func:`read_task` can add, by name
METADATA_COLUMN_NAMES = ("_file", "_pos", "_spec_id", "_partition", "_deleted", "_row_id",
                         "_last_updated_sequence_number")
_STATIC_META = {f.name: f for f in (FILE_PATH, ROW_POSITION, SPEC_ID, IS_DELETED, ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER)}


def output_schema(
    projected: Schema, metadata_columns: Sequence[str] = (), partition_type: StructType | None = None
) -> pa.Schema:
    """The Arrow schema :func:`read_task` yields: the projected columns (ids in field metadata)
    followed by the requested metadata columns in the order given."""
    fields = list(schema_to_arrow(projected))
    meta = [metadata_field(n, partition_type) for n in metadata_columns]
    return pa.schema(fields + list(schema_to_arrow(Schema(tuple(meta)))))


def metadata_field(name: str, partition_type: StructType | None) -> NestedField:
    """The field of metadata column ``name`` (``_file``, ``_pos``, ``_partition``, ...) for a table
    whose unified partition type is ``partition_type``."""
    if name == "_partition":
        return partition_column(partition_type or StructType())
    f = _STATIC_META.get(name)
    if f is None:
        raise ValidationError(f"Cannot read metadata column {name!r}; supported: {', '.join(METADATA_COLUMN_NAMES)}")
    # nullable in Arrow so a row-lineage null or an absent partition field can be represented
    return NestedField(f.field_id, f.name, f.field_type, False, f.doc)


# ------------------------------------------------------------------------------ constants
def _python_to_arrow_value(value: Any, t: IcebergType) -> Any:
    if isinstance(t, UUIDType):
        return value.bytes if hasattr(value, "bytes") else value
    return value


def constant_array(value: Any, t: IcebergType, n: int) -> pa.Array:
    """An Arrow array of ``n`` copies of a value in the package's Python representation."""
    target = type_to_arrow(t)
    if value is None:
        return pa.nulls(n, target)
    if isinstance(t, StructType):
        children = [constant_array(_struct_child(value, i, f), f.field_type, n) for i, f in enumerate(t.fields)]
        return pa.StructArray.from_arrays(children, fields=list(target))
    if isinstance(t, (ListType, MapType)):
        one = pa.array([value], type=target)
    elif isinstance(t, DateType):
        one = pa.array([value], pa.int32()).cast(target)
    elif isinstance(t, (TimeType, TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)):
        one = pa.array([value], pa.int64()).cast(target)
    elif isinstance(t, UUIDType):
        storage = pa.array([_python_to_arrow_value(value, t)], pa.binary(16))
        one = pa.ExtensionArray.from_storage(UUID_ARROW_TYPE, storage) if isinstance(
            UUID_ARROW_TYPE, pa.BaseExtensionType) else storage
    else:
        one = pa.array([value], type=target)
    return one.take(pa.array(np.zeros(n, dtype=np.int32)))


def _struct_child(value: Any, i: int, f: NestedField) -> Any:
    if isinstance(value, dict):
        return value.get(f.field_id, value.get(f.name))
    return value[i]


# ------------------------------------------------------------------------------ file field ids
class _FileIds:
    """Field ids of a file's Arrow schema: from ``PARQUET:field_id``, a name mapping, or (as Java
    does when neither exists) top-level positions."""

    def __init__(self, arrow_schema: pa.Schema, name_mapping: NameMapping | None) -> None:
        self.mapped: dict[tuple[str, ...], int] | None = None
        self.positional = False
        if not has_field_ids(arrow_schema):
            if name_mapping is not None:
                self.mapped = arrow_field_ids(name_mapping, arrow_schema)
            else:
                self.positional = True
                # positions in the file, not in a batch that holds only some of its columns
                self._file_position = {f.name: i for i, f in reversed(list(enumerate(arrow_schema)))}

    def of(self, f: pa.Field, path: tuple[str, ...], position: int | None) -> int | None:
        if self.mapped is not None:
            return self.mapped.get(path)
        if self.positional:
            at = self._file_position.get(f.name) if position is not None and len(path) == 1 else None
            return None if at is None else at + 1
        return field_id(f)


# ------------------------------------------------------------------------------ projection
class _Projector:
    """Builds arrays of an Iceberg type from a file's arrays, matching children by id."""

    def __init__(self, ids: _FileIds, constants: Mapping[int, Any]) -> None:
        self.ids = ids
        self.constants = constants

    def struct_children(
        self, arrays: Sequence[pa.Array], fields: Sequence[pa.Field], path: tuple[str, ...],
        target: Sequence[NestedField], n: int,
    ) -> list[pa.Array]:
        by_id: dict[int, int] = {}
        for i, f in enumerate(fields):
            fid = self.ids.of(f, path + (f.name,), i if not path else None)
            if fid is not None:
                by_id.setdefault(fid, i)
        out = []
        for tf in target:
            i = by_id.get(tf.field_id)
            if i is None:
                out.append(self.missing(tf, n))
            else:
                out.append(self.value(arrays[i], fields[i], path + (fields[i].name,), tf.field_type))
        return out

    def missing(self, tf: NestedField, n: int) -> pa.Array:
        if tf.field_id in self.constants:
            return constant_array(self.constants[tf.field_id], tf.field_type, n)
        return constant_array(tf.initial_default, tf.field_type, n)

    def value(self, arr: pa.Array, f: pa.Field, path: tuple[str, ...], t: IcebergType) -> pa.Array:
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        at = arr.type
        if isinstance(t, StructType):
            if not pa.types.is_struct(at):
                raise InvalidMetadataError(f"column {'.'.join(path)} is {at} in the file, expected a struct")
            kids = [at.field(i) for i in range(at.num_fields)]
            children = self.struct_children([arr.field(i) for i in range(at.num_fields)], kids, path, t.fields, len(arr))
            mask = arr.is_null() if arr.null_count else None
            return pa.StructArray.from_arrays(children, fields=list(type_to_arrow(t)), mask=mask)
        if isinstance(t, ListType):
            vf = at.value_field
            el = self._child(vf, path, t.element_id, arr.values, t.element_type, t.element_field)
            mask = arr.is_null() if arr.null_count else None
            return pa.ListArray.from_arrays(arr.offsets, el, type=type_to_arrow(t), mask=mask)
        if isinstance(t, MapType):
            keys = self._child(at.key_field, path, t.key_id, arr.keys, t.key_type, t.key_field)
            items = self._child(at.item_field, path, t.value_id, arr.items, t.value_type, t.value_field)
            offsets = pc.subtract(arr.offsets, arr.offsets[0])
            mask = arr.is_null() if arr.null_count else None
            return pa.MapArray.from_arrays(offsets, keys, items, type=type_to_arrow(t), mask=mask)
        return _cast_primitive(arr, t, path)

    def _child(self, f: pa.Field, path: tuple[str, ...], expected_id: int, arr: pa.Array, t: IcebergType,
               tf: NestedField) -> pa.Array:
        # list elements and map keys/values are matched by position; their ids only confirm it
        fid = self.ids.of(f, path + (f.name,), None)
        if fid is not None and fid != expected_id and not self.ids.positional:
            return self.missing(tf, len(arr))
        return self.value(arr, f, path + (f.name,), t)


def _cast_primitive(arr: pa.Array, t: IcebergType, path: tuple[str, ...]) -> pa.Array:
    target = type_to_arrow(t)
    at = arr.type
    if at == target:
        return arr
    if isinstance(t, UUIDType):
        storage = arr.storage if isinstance(arr, pa.ExtensionArray) else arr
        if isinstance(UUID_ARROW_TYPE, pa.BaseExtensionType):
            return pa.ExtensionArray.from_storage(UUID_ARROW_TYPE, storage.cast(pa.binary(16)))
        return storage.cast(pa.binary(16))
    if pa.types.is_dictionary(at):
        arr = arr.dictionary_decode()
    if pa.types.is_timestamp(target) and pa.types.is_timestamp(arr.type) and bool(target.tz) != bool(arr.type.tz):
        # a file written with the other timestamp flavour: same stored micros, relabel only
        arr = arr.cast(pa.int64()).cast(pa.timestamp(arr.type.unit, tz=target.tz))
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise InvalidMetadataError(f"column {'.'.join(path)}: cannot read Arrow {at} as {t}: {e}") from None


# ------------------------------------------------------------------------------ deletes
class _RecentFiles:
    """A small thread-safe least-recently-used cache of parsed delete files, per process: a
    partition-scoped delete file serves every data file (and split) of its partition."""

    def __init__(self, capacity: int = 8) -> None:
        self._lock = threading.Lock()
        self._items: OrderedDict[Any, Any] = OrderedDict()
        self._capacity = capacity

    def get(self, key: Any) -> Any:
        """The cached value, or None."""
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
            return hit

    def put(self, key: Any, value: Any) -> None:
        """Cache ``value``, evicting the least recently used entries beyond capacity."""
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)


_pos_cache = _RecentFiles()
_eq_cache = _RecentFiles()


def read_position_deletes(io: FileAccess, delete: DataFile) -> dict[str, np.ndarray]:
    """Deleted positions of a Parquet position delete file, grouped by data file path (sorted).

    A few recently read files are cached per process, since a partition-scoped delete file serves
    every data file of its partition.
    """
    key = delete.file_path
    hit = _pos_cache.get(key)
    if hit is not None:
        return hit
    if delete.file_format != FileFormat.PARQUET:
        raise ValidationError(f"Cannot read {delete.file_format.value} position delete file {delete.file_path}; "
                              "only Parquet is supported")
    with contextlib.ExitStack() as stack:
        try:
            # the path column repeats a few paths: read as a dictionary, never as one string per row
            pf = stack.enter_context(open_parquet(io, delete.file_path, delete.file_size_in_bytes,
                                                  read_dictionary=["file_path"]))
        except KeyError:  # a hand-written file that names the column otherwise (matched by id below)
            pf = stack.enter_context(open_parquet(io, delete.file_path, delete.file_size_in_bytes))
        names = _columns_by_id(pf.schema_arrow, {DELETE_FILE_PATH_ID: "file_path", DELETE_FILE_POS_ID: "pos"})
        # a file-scoped delete file names one data file: its path column need not be decoded
        scoped = delete.referenced_data_file is not None
        wanted = [names[DELETE_FILE_POS_ID]] if scoped else [names[DELETE_FILE_PATH_ID], names[DELETE_FILE_POS_ID]]
        table = pf.read(columns=wanted)
    pos = table.column(names[DELETE_FILE_POS_ID]).to_numpy()
    out: dict[str, np.ndarray] = {}
    if scoped:
        out[delete.referenced_data_file] = _sorted(pos)
    else:
        paths = table.column(names[DELETE_FILE_PATH_ID])
        if pa.types.is_dictionary(paths.type):
            enc = paths.unify_dictionaries().combine_chunks()
        else:
            enc = pc.dictionary_encode(paths).combine_chunks()
        codes = enc.indices.to_numpy()
        for i, p in enumerate(enc.dictionary.to_pylist()):
            out[p] = _sorted(pos[codes == i])
    _pos_cache.put(key, out)
    return out


def _sorted(pos: np.ndarray) -> np.ndarray:
    # writers sort positions (the spec asks for it): checking is linear, sorting is not
    return pos if len(pos) < 2 or bool(np.all(pos[1:] >= pos[:-1])) else np.sort(pos)


def read_position_delete_rows(io: FileAccess, delete: DataFile, row_type: StructType) -> pa.Table | None:
    """``file_path``, ``pos`` and ``row`` of a Parquet position delete file that stores the deleted
    rows (the spec's optional, deprecated ``row`` column), in file order, ``row`` projected onto
    ``row_type`` by field id (columns the file lacks are null, as in a data file read); None when the
    file does not store rows."""
    if delete.file_format != FileFormat.PARQUET:
        return None
    with open_parquet(io, delete.file_path, delete.file_size_in_bytes) as pf:
        schema = pf.schema_arrow
        found = _columns_by_id(schema, {DELETE_FILE_PATH_ID: "file_path", DELETE_FILE_POS_ID: "pos"})
        row = next((f.name for f in schema if field_id(f) == DELETE_FILE_ROW_ID), None)
        if row is None:
            return None
        table = pf.read(columns=[found[DELETE_FILE_PATH_ID], found[DELETE_FILE_POS_ID], row])
    proj = _Projector(_FileIds(table.schema, None), {})
    rows = proj.value(table.column(2), table.schema.field(2), (row,), row_type)
    return pa.table({"file_path": table.column(0), "pos": table.column(1), "row": rows})


def _columns_by_id(arrow_schema: pa.Schema, wanted: Mapping[int, str]) -> dict[int, str]:
    out = {}
    for f in arrow_schema:
        fid = field_id(f)
        if fid in wanted:
            out[fid] = f.name
    for fid, name in wanted.items():
        # files without ids (hand-written) still use the spec's column names
        if fid not in out and name in arrow_schema.names:
            out[fid] = name
    if len(out) != len(wanted):
        raise InvalidMetadataError(f"position delete file lacks columns {sorted(set(wanted) - set(out))}")
    return out


def read_dv_positions(io: FileAccess, dv: DataFile) -> np.ndarray:
    """Deleted positions of a deletion vector: the Puffin blob at its content offset and size."""
    if dv.content_offset is None or dv.content_size_in_bytes is None:
        raise InvalidMetadataError("deletion vector entry lacks content_offset/content_size_in_bytes",
                                   location=dv.file_path)
    with io.new_input(dv.file_path).open() as f:
        f.seek(dv.content_offset)
        blob = f.read(dv.content_size_in_bytes)
    return deserialize_dv_array(blob, location=dv.file_path)


def deleted_positions(io: FileAccess, data_file_path: str, deletes: Iterable[Any]) -> np.ndarray:
    """Sorted unique positions deleted from a data file by its position deletes and DVs
    (``deletes`` are :class:`~procedures.core.kernel.scan.DeleteFileEntry` or DataFile objects)."""
    parts = []
    for d in deletes:
        df = getattr(d, "data_file", d)
        if df.content != FileContent.POSITION_DELETES:
            continue
        if df.file_format == FileFormat.PUFFIN:
            parts.append(read_dv_positions(io, df))
        else:
            got = read_position_deletes(io, df).get(data_file_path)
            if got is not None:
                parts.append(got)
    if not parts:
        return np.empty(0, dtype=np.int64)
    if len(parts) == 1 and (len(parts[0]) < 2 or bool(np.all(parts[0][1:] > parts[0][:-1]))):
        return parts[0]  # one sorted source without repeats (the usual case): nothing to merge
    return np.unique(np.concatenate(parts))


class _EqualityDeletes:
    """The key rows of one equality delete file, projected to the table's types.

    A single integer-like key column (ints, dates, times, timestamps) is matched by binary search
    in its sorted keys, sorted once per delete file; any other single column with Arrow's ``is_in``,
    which hashes the whole key set again on every call, so once per batch (nulls match nulls, as the
    spec's null-safe equality asks); several columns with combined per-column value indexes
    (:class:`_KeyCoder`) looked up in row keys sorted once per delete file; types
    Arrow cannot hash fall back to a set of Python tuples.
    """

    def __init__(self, ids: tuple[int, ...], arrays: list[pa.Array]) -> None:
        self.ids = ids
        self.arrays = arrays
        self.empty = not arrays or len(arrays[0]) == 0
        self._tuples: set | None = None
        self._codes: Any = None  # (a _KeyCoder per column, sorted row keys), or False: use tuples
        self._sorted: Any = None  # (sorted distinct non-null keys as int64, whether a null key), or False

    def matches(self, columns: Sequence[pa.Array], n: int) -> np.ndarray:
        """Which of ``n`` rows (their key columns, in ``ids`` order) the file deletes."""
        if len(columns) == 1 and columns[0].type == self.arrays[0].type:
            hit = self._sorted_matches(columns[0])
            if hit is not None:
                return hit
            try:
                hit = pc.is_in(columns[0], value_set=self.arrays[0], skip_nulls=False)
                return hit.to_numpy(zero_copy_only=False)
            except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError):
                pass  # e.g. extension types: compare as Python values below
        hit = self._coded_matches(columns, n)
        if hit is not None:
            return hit
        if self._tuples is None:
            self._tuples = set(zip(*(a.to_pylist() for a in self.arrays)))
        values = self._tuples
        cols = [c.to_pylist() for c in columns]
        return np.fromiter((t in values for t in zip(*cols)), dtype=bool, count=n)

    def _sorted_matches(self, column: pa.Array) -> np.ndarray | None:
        """Rows of an integer-like ``column`` whose value (or null) is a key; None for other types."""
        if self._sorted is None:
            self._sorted = _sorted_int_keys(self.arrays[0])
        if self._sorted is False:
            return None
        keys, null_key = self._sorted
        values = _as_int64(column)
        if len(keys):
            hit = keys[np.minimum(np.searchsorted(keys, values), len(keys) - 1)] == values
        else:
            hit = np.zeros(len(values), dtype=bool)
        if column.null_count:
            valid = column.is_valid().to_numpy(zero_copy_only=False)
            hit = (hit & valid) | ~valid if null_key else hit & valid
        return hit

    def _coded_matches(self, columns: Sequence[pa.Array], n: int) -> np.ndarray | None:
        """Several key columns matched without a Python pass over the rows: each column's values
        become their index among the delete file's distinct values of that column (null-safe: a
        null is a value of its own), and the indexes of a row combine into one integer key looked
        up by binary search among the delete rows' keys, sorted once per delete file.  Integer-like
        columns find their index by binary search too, so only other types hash anything per batch
        (their column's distinct values, not the delete rows).  None when a column's type cannot
        be matched this way or the keys would overflow."""
        if self._codes is None:
            self._codes = self._delete_codes()
        if self._codes is False:
            return None
        coders, keys = self._codes
        combined = np.zeros(n, dtype=np.int64)
        possible = np.ones(n, dtype=bool)
        try:
            for col, coder in zip(columns, coders):
                codes, found = coder.codes(col)
                if codes is None:
                    return None
                possible &= found
                combined = combined * coder.radix + codes
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError):
            return None
        if not len(keys):
            return np.zeros(n, dtype=bool)
        return possible & (keys[np.minimum(np.searchsorted(keys, combined), len(keys) - 1)] == combined)

    def _delete_codes(self) -> Any:
        coders, keys, space = [], np.zeros(len(self.arrays[0]), dtype=np.int64), 1
        try:
            for arr in self.arrays:
                coder = _KeyCoder(arr)
                space *= max(coder.radix, 1)
                if space >= 1 << 62:
                    return False
                codes, _ = coder.codes(arr)
                keys = keys * coder.radix + codes
                coders.append(coder)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError):
            return False
        return coders, np.unique(keys)


class _KeyCoder:
    """One equality key column's distinct values (of a delete file), numbering any column's values
    by them: ``codes(col)`` is ``(index of each value, whether the value is one of them)``, a null
    numbered as a value of its own.  Integer-like values are found by binary search in the sorted
    distinct values, others by Arrow's ``index_in`` (which hashes the distinct values per call)."""

    def __init__(self, arr: pa.Array) -> None:
        self.type = arr.type
        sorted_keys = _sorted_int_keys(arr)
        if sorted_keys is not False:
            self.ints, self.null_key = sorted_keys
            self.values = None
            self.radix = len(self.ints) + 1  # the last code is the null
        else:
            self.ints = None
            self.values = pc.unique(arr)
            self.radix = len(self.values)

    def codes(self, col: pa.Array) -> tuple[np.ndarray | None, np.ndarray]:
        """(code of each value, found) for a column of the key's type; (None, _) for another type."""
        if col.type != self.type:
            return None, np.zeros(0, dtype=bool)
        if self.ints is None:
            idx = pc.index_in(col, value_set=self.values, skip_nulls=False)
            return (pc.fill_null(idx, 0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False),
                    idx.is_valid().to_numpy(zero_copy_only=False))
        values = _as_int64(col)
        if len(self.ints):
            pos = np.minimum(np.searchsorted(self.ints, values), len(self.ints) - 1)
            found = self.ints[pos] == values
        else:
            pos = np.zeros(len(values), dtype=np.int64)
            found = np.zeros(len(values), dtype=bool)
        if col.null_count:
            valid = col.is_valid().to_numpy(zero_copy_only=False)
            pos = np.where(valid, pos, len(self.ints))
            found = np.where(valid, found, self.null_key)
        return pos.astype(np.int64, copy=False), found


def _integer_like(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t)
            or pa.types.is_duration(t))


def _as_int64(arr: pa.Array) -> np.ndarray:
    """The values of an integer-like array as int64 (nulls as 0): the same bits read as a signed
    integer of their width, so equal values stay equal and distinct ones distinct."""
    signed = pa.int32() if arr.type.bit_width == 32 else pa.int64() if arr.type.bit_width == 64 else (
        pa.int16() if arr.type.bit_width == 16 else pa.int8())
    ints = arr.view(signed)
    if ints.null_count:
        ints = pc.fill_null(ints, 0)
    return ints.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _sorted_int_keys(keys: pa.Array) -> Any:
    """(sorted distinct non-null keys as int64, whether a key is null) of an integer-like key
    column, or False for other types."""
    if not _integer_like(keys.type):
        return False
    valid = keys.drop_null()
    return np.unique(_as_int64(valid)), keys.null_count > 0


def _equality_delete_sets(io: FileAccess, deletes: Iterable[Any], table_schema: Schema,
                          name_mapping: NameMapping | None) -> list[_EqualityDeletes]:
    out = []
    for d in deletes:
        df = getattr(d, "data_file", d)
        if df.content != FileContent.EQUALITY_DELETES:
            continue
        ids = tuple(df.equality_ids or ())
        if not ids:
            raise InvalidMetadataError("equality delete file has no equality_ids", location=df.file_path)
        fields = [_field_for_id(table_schema, fid) for fid in ids]
        # a split of a file, and the other files of a partition, reuse the same delete files
        key = (df.file_path, tuple((f.field_id, str(f.field_type)) for f in fields))
        hit = _eq_cache.get(key)
        if hit is None:
            with open_parquet(io, df.file_path, df.file_size_in_bytes) as pf:
                table = pf.read()
            batch = table.combine_chunks().to_batches()
            arrays = _project_batch(batch[0] if batch else None, table.schema, fields, table.num_rows, {}, name_mapping)
            hit = _EqualityDeletes(ids, arrays)
            _eq_cache.put(key, hit)
        out.append(hit)
    return out


def _field_for_id(schema: Schema, fid: int) -> NestedField:
    f = schema.find_field_or_none(fid)
    if f is None:
        # a delete column dropped from the table still applies; its values are compared as stored
        return NestedField(fid, f"_dropped_{fid}", BINARY, False)
    return f


def _project_batch(batch: pa.RecordBatch | None, file_schema: pa.Schema, fields: Sequence[NestedField], n: int,
                   constants: Mapping[int, Any], name_mapping: NameMapping | None) -> list[pa.Array]:
    proj = _Projector(_FileIds(file_schema, name_mapping), constants)
    if batch is None:
        return [proj.missing(f, n) for f in fields]
    return proj.struct_children(batch.columns, list(batch.schema), (), fields, n)


# ------------------------------------------------------------------------------ opening
#: Files up to this size are fetched with one read and parsed from memory.  Parquet is read as a
#: footer and then column chunks, each its own request; for the small files compaction exists for,
#: those requests cost more than the bytes (about half the time of reading a 2 KB file).
WHOLE_FILE_READ_BYTES = 8 * 1024 * 1024


@contextlib.contextmanager
def open_parquet(io: FileAccess, path: str, size_hint: int | None = None, **options: Any) -> Iterator[pq.ParquetFile]:
    """A :class:`pyarrow.parquet.ParquetFile` of ``path`` (``options`` passed on to it): read whole
    into memory when ``size_hint`` (the file's recorded size) is at most
    :data:`WHOLE_FILE_READ_BYTES`, otherwise streamed from storage."""
    if size_hint is not None and 0 < size_hint <= WHOLE_FILE_READ_BYTES:
        yield pq.ParquetFile(pa.BufferReader(io.new_input(path).read()), **options)
        return
    with io.new_input(path).open() as f:
        yield pq.ParquetFile(f, **options)


# ------------------------------------------------------------------------------ reading
def _identity_constants(task: Any, specs: Mapping[int, PartitionSpec] | None) -> dict[int, Any]:
    spec = (specs or {}).get(task.spec_id)
    if spec is None:
        return {}
    return {f.source_id: v for f, v in zip(spec.fields, task.partition) if isinstance(f.transform, IdentityTransform)}


def _partition_struct(task: Any, specs: Mapping[int, PartitionSpec] | None, ptype: StructType, n: int) -> pa.Array:
    spec = (specs or {}).get(task.spec_id)
    values = {}
    if spec is not None:
        values = {f.field_id: v for f, v in zip(spec.fields, task.partition)}
    if not ptype.fields:
        return pa.array([{}] * n, type=pa.struct([]))
    children = [constant_array(values.get(f.field_id), f.field_type, n) for f in ptype.fields]
    return pa.StructArray.from_arrays(children, fields=list(type_to_arrow(ptype)))


def _top_level_needed(file_schema: pa.Schema, ids: _FileIds, wanted: set[int]) -> list[str]:
    """Names of the file's top-level columns that hold any wanted id (or a descendant of one)."""
    names = []
    for i, f in enumerate(file_schema):
        fid = ids.of(f, (f.name,), i)
        if fid in wanted:
            names.append(f.name)
    return names


def _parquet_columns(file_schema: pa.Schema, ids: _FileIds, fields: Sequence[NestedField]) -> list[str]:
    """The Parquet column paths to read for ``fields``: whole top-level columns, except that a
    struct read for some of its children reads only those (``loc.lat``), so a projection of a
    nested field decodes no sibling columns."""
    by_id = {f.field_id: f for f in fields}
    out: list[str] = []
    for i, f in enumerate(file_schema):
        tf = by_id.get(ids.of(f, (f.name,), i))
        if tf is not None:
            out.extend(_struct_paths(f, (f.name,), tf.field_type, ids))
    return out


def _struct_paths(f: pa.Field, path: tuple[str, ...], t: IcebergType, ids: _FileIds) -> list[str]:
    whole = [".".join(path)]
    if not (isinstance(t, StructType) and pa.types.is_struct(f.type)) or ids.positional:
        return whole
    targets = {c.field_id: c for c in t.fields}
    kids = [f.type.field(k) for k in range(f.type.num_fields)]
    found = [(c, targets[fid]) for c in kids if (fid := ids.of(c, path + (c.name,), None)) in targets]
    if not found or len(found) == len(kids):
        # none of the wanted children is in the file: the struct's own nulls still come from it
        return whole
    return [p for c, tc in found for p in _struct_paths(c, path + (c.name,), tc.field_type, ids)]


@contextlib.contextmanager
def _open_batches(io: FileAccess, task: Any, name_mapping: NameMapping | None, fields: Sequence[NestedField], batch_size: int,
                  rows: RowFilter | None = None,
                  ) -> Iterator[tuple[pa.Schema, Iterator[tuple[pa.RecordBatch | None, int, int]]]]:
    """(file schema, batches of the columns holding ``fields`` (by id) with their row count
    and the file position of their first row) of a task's data file, whatever its format.  With
    ``rows``, Parquet row groups whose statistics prove no row matches are not read."""
    df: DataFile = task.data_file
    wanted = {fld.field_id for fld in fields}
    if df.file_format == FileFormat.PARQUET:
        # a split of a large file streams its row groups; a small file is one read
        size_hint = df.file_size_in_bytes if getattr(task, "length", None) is None else None
        with open_parquet(io, df.file_path, size_hint) as pf:
            file_schema = pf.schema_arrow
            ids = _FileIds(file_schema, name_mapping)
            columns = _parquet_columns(file_schema, ids, fields)
            meta = pf.metadata
            row_groups = _row_groups_in_range(meta, getattr(task, "start", 0), getattr(task, "length", None))
            if rows is not None and not ids.positional:
                row_groups = rows.row_groups(meta, file_schema, ids.mapped, row_groups)
            # decoding columns on threads only pays off for large files
            threads = size_hint is None or size_hint > WHOLE_FILE_READ_BYTES
            yield file_schema, _batches(pf, columns, batch_size, row_groups, threads)
        return
    # ORC and Avro files are planned whole (they have no split offsets); a range that does not
    # start the file is another task's share of it and reads nothing
    if getattr(task, "start", 0):
        yield pa.schema([]), iter(())
        return
    if df.file_format == FileFormat.AVRO:
        file_schema, raw = read_avro_batches(io.new_input(df.file_path).read(), df.file_path, batch_size)
        yield file_schema, _selected(raw, file_schema, name_mapping, wanted)
        return
    with io.new_input(df.file_path).open() as stream:
        file_schema, raw = read_orc_batches(stream, df.file_path)
        yield file_schema, _selected(raw, file_schema, name_mapping, wanted)


def _selected(batches: Iterator[pa.RecordBatch], file_schema: pa.Schema, name_mapping: NameMapping | None,
              wanted: set[int]) -> Iterator[tuple[pa.RecordBatch | None, int, int]]:
    columns = _top_level_needed(file_schema, _FileIds(file_schema, name_mapping), wanted)
    pos = 0
    for batch in batches:
        yield (batch.select(columns) if columns else None), batch.num_rows, pos
        pos += batch.num_rows


def read_task(
    io: FileAccess,
    task: Any,
    projected_schema: Schema | None = None,
    *,
    specs: Mapping[int, PartitionSpec] | None = None,
    name_mapping: NameMapping | None = None,
    metadata_columns: Sequence[str] = (),
    partition_type: StructType | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    apply_deletes: bool = True,
    filter_rows: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Read one :class:`~procedures.core.kernel.scan.FileScanTask` as record batches of
    :func:`output_schema` (``projected_schema`` defaults to the task's schema).

    Deleted rows are dropped, unless ``_deleted`` is requested: then every row is returned and
    ``_deleted`` says which ones the deletes remove (Iceberg's semantics for that column).
    ``apply_deletes=False`` ignores the task's deletes (reading a file as written).  ``specs`` (the
    table's specs by id) supplies identity-partition values and ``_partition``.

    ``filter_rows`` lets the read drop Parquet row groups and rows that the task's residual filter
    proves unmatched (:mod:`procedures.io.read_filters`; rows it cannot decide are kept), for
    callers that apply the filter to the rows afterwards anyway.  Positions (``_pos``, deletes)
    stay those of the file.
    """
    projected = projected_schema if projected_schema is not None else task.schema
    out_schema = output_schema(projected, metadata_columns, partition_type)
    df: DataFile = task.data_file
    if df.file_format not in (FileFormat.PARQUET, FileFormat.ORC, FileFormat.AVRO):
        raise ValidationError(f"Cannot read {df.file_format.value} data file {df.file_path}; "
                              "only Parquet, ORC and Avro data files are supported")
    keep_deleted = "_deleted" in metadata_columns
    deletes = task.deletes if apply_deletes else ()
    dpos = deleted_positions(io, df.file_path, deletes)
    eq_sets = _equality_delete_sets(io, deletes, task.schema, name_mapping) if deletes else []
    constants = _identity_constants(task, specs)
    want_lineage = [c for c in metadata_columns if c in ("_row_id", "_last_updated_sequence_number")]

    # Everything read from the file: the projection, equality-delete columns, stored lineage columns.
    eq_ids = sorted({i for eq in eq_sets for i in eq.ids})
    read_fields = list(projected.fields)
    have = {f.field_id for f in read_fields}
    extra = [_field_for_id(task.schema, i) for i in eq_ids if i not in have]
    lineage_fields = [f for f in (ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER) if f.name in want_lineage]
    all_fields = read_fields + extra + [NestedField(f.field_id, f.name, f.field_type, False) for f in lineage_fields]

    rows = row_filter(task.residual, task.schema) if filter_rows else None
    with _open_batches(io, task, name_mapping, all_fields, batch_size, rows) as (file_schema, batches):
        for batch, n, offset in batches:
            arrays = _project_batch(batch, file_schema, all_fields, n, constants, name_mapping)
            deleted = _delete_mask(dpos, offset, n)
            if eq_sets:
                by_id = {fld.field_id: a for fld, a in zip(all_fields, arrays)}
                for eq in eq_sets:
                    if eq.empty:
                        continue
                    hit = eq.matches([by_id[i] for i in eq.ids], n)
                    deleted = hit if deleted is None else (deleted | hit)
            positions = None
            out_cols = arrays[:len(read_fields)]
            for name in metadata_columns:
                if name == "_file":
                    out_cols.append(constant_array(df.file_path, FILE_PATH.field_type, n))
                elif name == "_pos":
                    positions = positions if positions is not None else np.arange(offset, offset + n, dtype=np.int64)
                    out_cols.append(pa.array(positions))
                elif name == "_spec_id":
                    out_cols.append(constant_array(task.spec_id, SPEC_ID.field_type, n))
                elif name == "_partition":
                    out_cols.append(_partition_struct(task, specs, partition_type or StructType(), n))
                elif name == "_deleted":
                    out_cols.append(pa.array(deleted if deleted is not None else np.zeros(n, dtype=bool)))
                elif name == "_row_id":
                    stored = arrays[all_fields.index(next(x for x in all_fields if x.field_id == ROW_ID_ID))]
                    out_cols.append(_row_ids(stored, df.first_row_id, offset, n))
                elif name == "_last_updated_sequence_number":
                    stored = arrays[all_fields.index(next(
                        x for x in all_fields if x.field_id == LAST_UPDATED_SEQUENCE_NUMBER_ID))]
                    inherited = None if df.first_row_id is None else task.data_sequence_number
                    out_cols.append(stored if inherited is None else pc.fill_null(stored, pa.scalar(inherited, pa.int64())))
                else:
                    metadata_field(name, partition_type)  # raises naming the column
            out = pa.RecordBatch.from_arrays(out_cols, schema=out_schema)
            keep = None if deleted is None or keep_deleted or not deleted.any() else ~deleted
            if rows is not None:
                may_match = rows.mask({fld.field_id: a for fld, a in zip(all_fields, arrays)}, n)
                if may_match is not None:
                    keep = may_match if keep is None else (keep & may_match)
            if keep is not None:
                out = out.filter(pa.array(keep))
            if out.num_rows:
                yield out


def _row_ids(stored: pa.Array, first_row_id: int | None, offset: int, n: int) -> pa.Array:
    if first_row_id is None:
        return stored
    inherited = pa.array(np.arange(first_row_id + offset, first_row_id + offset + n, dtype=np.int64))
    return pc.coalesce(stored, inherited) if stored.null_count < n else inherited if stored.null_count == n else stored


def _delete_mask(dpos: np.ndarray, offset: int, n: int) -> np.ndarray | None:
    if not len(dpos):
        return None
    lo, hi = np.searchsorted(dpos, [offset, offset + n])
    if lo == hi:
        return None
    mask = np.zeros(n, dtype=bool)
    mask[dpos[lo:hi] - offset] = True
    return mask


def _row_group_start(rg: Any) -> int:
    """Where a row group's bytes begin: its first column chunk's dictionary page, else data page."""
    col = rg.column(0)
    dict_off = col.dictionary_page_offset
    if dict_off is not None and 0 < dict_off < col.data_page_offset:
        return dict_off
    return col.data_page_offset


def _row_groups_in_range(meta: Any, start: int, length: int | None) -> list[int]:
    """The row groups of a split (every row group when ``length`` is None)."""
    if length is None:
        return list(range(meta.num_row_groups))
    end = start + length
    return [i for i in range(meta.num_row_groups) if start <= _row_group_start(meta.row_group(i)) < end]


def _runs(meta: Any, row_groups: list[int]) -> Iterator[tuple[list[int], int]]:
    """Consecutive runs of ``row_groups`` with the file position of each run's first row."""
    starts = np.concatenate([[0], np.cumsum([meta.row_group(i).num_rows for i in range(meta.num_row_groups)])])
    run: list[int] = []
    for g in row_groups:
        if run and g != run[-1] + 1:
            yield run, int(starts[run[0]])
            run = []
        run.append(g)
    if run:
        yield run, int(starts[run[0]])


def _batches(pf: pq.ParquetFile, columns: list[str], batch_size: int, row_groups: list[int],
             use_threads: bool = True) -> Iterator[tuple[pa.RecordBatch | None, int, int]]:
    meta = pf.metadata
    for run, pos in _runs(meta, row_groups):
        if not columns:
            # nothing to read but the row count (count(*), metadata columns only)
            remaining = sum(meta.row_group(g).num_rows for g in run)
            while remaining > 0:
                n = min(batch_size, remaining)
                remaining -= n
                yield None, n, pos
                pos += n
            continue
        # batches may span the row groups of one run, whose rows are contiguous in the file
        for batch in pf.iter_batches(batch_size=batch_size, columns=columns, row_groups=run, use_threads=use_threads):
            yield batch, batch.num_rows, pos
            pos += batch.num_rows


def read_task_table(io: FileAccess, task: Any, projected_schema: Schema | None = None, **kwargs: Any) -> pa.Table:
    """:func:`read_task` collected into one table (with the output schema even when empty)."""
    projected = projected_schema if projected_schema is not None else task.schema
    schema = output_schema(projected, kwargs.get("metadata_columns", ()), kwargs.get("partition_type"))
    return pa.Table.from_batches(list(read_task(io, task, projected, **kwargs)), schema=schema)
