"""Position delete files (v2) and deletion vectors (v3): spec "Position Delete Files",
"Deletion Vectors"; on-disk notes 8.1 and 8.3.

* :func:`write_position_delete_files` writes one Parquet file per data file or per partition
  (``write.delete.granularity``) with the reserved
  ``file_path`` / ``pos`` columns, rows sorted by path then position, full untruncated bounds on
  both columns and ``referenced_data_file`` when the file targets a single data file.
* :func:`write_deletion_vectors` writes one Puffin file holding one ``deletion-vector-v1`` blob
  per data file and returns a ``DataFile`` (format PUFFIN) per blob.

Merging new deletes with the deletes a data file already has is the caller's job (a new DV must
absorb the old one); :func:`merge_positions` and :func:`read_existing_positions` help with it.
"""

from __future__ import annotations

import dataclasses
import uuid as _uuid
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
import pyarrow as pa

from procedures.core.kernel.properties import DELETE_GRANULARITY
from procedures.errors import ValidationError
from procedures.io.arrow_schema import schema_to_arrow
from procedures.io.fileio import FileIO, join_path
from procedures.io.parquet_reader import read_position_deletes as read_parquet_positions
from procedures.io.parquet_writer import FULL, MetricsConfig, ParquetFileWriter, WriteSettings, data_location
from procedures.spec.deletion_vector import deserialize_dv_array
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.metadata_columns import DELETE_FILE_PATH_ID, DELETE_FILE_POS_ID
from procedures.spec.partitioning import PartitionSpec
from procedures.spec.puffin import PuffinWriter, read_puffin
from procedures.spec.schema import Schema
from procedures.spec.types import LONG, STRING, NestedField

__all__ = [
    "POSITION_DELETE_SCHEMA",
    "DeleteTarget",
    "merge_positions",
    "merged_positions",
    "write_position_delete_file",
    "write_position_delete_files",
    "write_deletion_vectors",
    "write_deletes",
    "read_position_deletes",
    "read_position_arrays",
    "read_existing_positions",
]

#: the schema of v2 position delete files (without the deprecated ``row`` column)
POSITION_DELETE_SCHEMA = Schema((
    NestedField(DELETE_FILE_PATH_ID, "file_path", STRING, True),
    NestedField(DELETE_FILE_POS_ID, "pos", LONG, True),
))


@dataclass(frozen=True, slots=True)
class DeleteTarget:
    """The data file whose rows are deleted: its exact path, partition tuple and spec id (the
    delete must carry the same partition and spec)."""

    file_path: str
    partition: tuple = ()
    spec_id: int = 0

    @classmethod
    def of(cls, data_file: DataFile) -> "DeleteTarget":
        """The target describing ``data_file``."""
        return cls(data_file.file_path, tuple(data_file.partition), data_file.spec_id)


def merged_positions(*position_sets: Iterable[int]) -> np.ndarray:
    """The sorted union of several position collections as an int64 array (vectorised: a rewrite
    merges millions of positions)."""
    arrays = [np.asarray(s if isinstance(s, np.ndarray) else list(s), dtype=np.int64) for s in position_sets]
    merged = np.unique(np.concatenate(arrays)) if arrays else np.empty(0, dtype=np.int64)
    if len(merged) and merged[0] < 0:
        raise ValidationError(f"row positions must be non-negative, got {int(merged[0])}")
    return merged


def merge_positions(*position_sets: Iterable[int]) -> list[int]:
    """The sorted union of several position collections (a new DV absorbing older deletes)."""
    return merged_positions(*position_sets).tolist()


def _file_name(partition_id: int, task_id: int, operation_id: str, n: int, ext: str) -> str:
    return f"{partition_id:05d}-{task_id}-{operation_id}-{n:05d}-deletes.{ext}"


def _as_target(key: DeleteTarget | DataFile | str) -> DeleteTarget:
    if isinstance(key, DeleteTarget):
        return key
    if isinstance(key, DataFile):
        return DeleteTarget.of(key)
    if isinstance(key, str):
        return DeleteTarget(key)
    raise ValidationError(f"a delete target must be a DataFile, DeleteTarget or path, got {type(key).__name__}")


def write_position_delete_file(
    io: FileIO,
    path: str,
    deletes: Mapping[str, Iterable[int]],
    *,
    partition: tuple = (),
    spec_id: int = 0,
    properties: Mapping[str, str] | None = None,
) -> DataFile:
    """Write one position delete file at ``path`` holding ``deletes`` (data file path ->
    positions), sorted by path then position, and describe it as a ``DataFile`` (content 1)."""
    order = sorted(deletes)
    runs = [merged_positions(deletes[data_path]) for data_path in order]
    positions = np.concatenate(runs) if runs else np.empty(0, dtype=np.int64)
    if not len(positions):
        raise ValidationError(f"{path}: no positions to delete; refusing to write an empty delete file")
    props = {k: v for k, v in (properties or {}).items() if k.startswith("write.parquet.")}
    settings = WriteSettings(
        schema=POSITION_DELETE_SCHEMA,
        spec=PartitionSpec(spec_id, ()),
        data_path="",
        properties=props,
        sort_order_id=None,
        metrics=MetricsConfig(FULL),
        # positions are unique: a dictionary of them doubles the file (plain, as Java writes them)
        dictionary_columns=("file_path",),
    )
    # each path once, repeated by index: no Python object per deleted row
    indices = np.repeat(np.arange(len(order), dtype=np.int32), [len(r) for r in runs])
    paths = pa.DictionaryArray.from_arrays(pa.array(indices), pa.array(order, pa.string())).cast(pa.string())
    table = pa.Table.from_arrays(
        [paths, pa.array(positions, pa.int64())],
        schema=schema_to_arrow(POSITION_DELETE_SCHEMA),
    )
    writer = ParquetFileWriter(io, path, settings, partition)
    writer.write(table)
    df = writer.close()
    referenced = order[0] if len(order) == 1 else None
    return dataclasses.replace(
        df, content=FileContent.POSITION_DELETES, referenced_data_file=referenced, sort_order_id=None,
        split_offsets=df.split_offsets, spec_id=spec_id,
    )


def write_position_delete_files(
    io: FileIO,
    metadata: Any,
    deletes: Mapping[DeleteTarget | DataFile | str, Iterable[int]],
    *,
    partition_id: int = 0,
    task_id: int = 0,
    operation_id: str | None = None,
    file_scoped: bool | None = None,
) -> list[DataFile]:
    """v2 position delete files for ``deletes`` (target data file -> deleted positions).

    One file per data file (each then has ``referenced_data_file``) when ``file_scoped``, else one
    per (spec, partition) of the targets; by default as the table's ``write.delete.granularity``
    says.  Files go under the partition's data directory.  If writing fails part way, the files
    already written are deleted before the error propagates.
    """
    if metadata.format_version < 2:
        raise ValidationError(f"table {metadata.location} is format v1, which has no delete files; upgrade it to v2")
    if file_scoped is None:
        file_scoped = DELETE_GRANULARITY.read(metadata.properties) == "file"
    operation_id = operation_id or str(_uuid.uuid4())
    groups: dict[Any, dict[str, Iterable[int]]] = {}
    targets: dict[Any, DeleteTarget] = {}
    for key, positions in deletes.items():
        t = _as_target(key)
        g = (t.spec_id, t.partition, t.file_path if file_scoped else None)
        groups.setdefault(g, {})
        existing = groups[g].get(t.file_path)
        groups[g][t.file_path] = positions if existing is None else merged_positions(existing, positions)
        targets[g] = t
    base = data_location(metadata.location, metadata.properties)
    schema = metadata.schema()
    out: list[DataFile] = []
    path = None
    try:
        for n, g in enumerate(sorted(groups, key=repr), start=1):
            t = targets[g]
            spec = metadata.spec_by_id(t.spec_id)
            directory = join_path(base, spec.partition_to_path(t.partition, schema)) if spec.fields else base
            path = join_path(directory, _file_name(partition_id, task_id, operation_id, n, "parquet"))
            out.append(
                write_position_delete_file(io, path, groups[g], partition=t.partition, spec_id=t.spec_id,
                                           properties=metadata.properties)
            )
    except BaseException:
        # the caller never learns the names of the files written before the failure: they go here
        # (delete_many reports rather than raises, so the original error stays the one seen)
        io.delete_many([f.file_path for f in out] + ([path] if path is not None else []))
        raise
    return out


def write_deletion_vectors(
    io: FileIO,
    metadata: Any,
    deletes: Mapping[DeleteTarget | DataFile | str, Iterable[int]],
    *,
    partition_id: int = 0,
    task_id: int = 0,
    operation_id: str | None = None,
    path: str | None = None,
) -> list[DataFile]:
    """v3 deletion vectors: one Puffin file with one blob per target data file.

    Positions given here must already include the data file's earlier deletes (see
    :func:`merge_positions`); the returned entries (format PUFFIN, ``content_offset`` /
    ``content_size_in_bytes`` of each blob, ``record_count`` = cardinality) go into a RowDelta.
    """
    if metadata.format_version < 3:
        raise ValidationError(
            f"table {metadata.location} is format v{metadata.format_version}; deletion vectors need v3, use position delete files"
        )
    merged: dict[str, list[int]] = {}
    targets: dict[str, DeleteTarget] = {}
    for key, positions in deletes.items():
        t = _as_target(key)
        merged[t.file_path] = merge_positions(merged.get(t.file_path, ()), positions)
        targets[t.file_path] = t
    merged = {k: v for k, v in merged.items() if v}
    if not merged:
        return []
    if path is None:
        operation_id = operation_id or str(_uuid.uuid4())
        path = join_path(
            data_location(metadata.location, metadata.properties),
            _file_name(partition_id, task_id, operation_id, 1, "puffin"),
        )
    writer = PuffinWriter()
    blobs = []
    for data_path in sorted(merged):
        meta, cardinality = writer.add_deletion_vector(data_path, merged[data_path])
        blobs.append((data_path, meta, cardinality))
    data = writer.finish()
    io.write(path, data)
    out = []
    for data_path, meta, cardinality in blobs:
        t = targets[data_path]
        out.append(DataFile(
            file_path=path,
            file_format=FileFormat.PUFFIN,
            partition=tuple(t.partition),
            record_count=cardinality,
            file_size_in_bytes=len(data),
            content=FileContent.POSITION_DELETES,
            referenced_data_file=data_path,
            content_offset=meta.offset,
            content_size_in_bytes=meta.length,
            sort_order_id=None,
            spec_id=t.spec_id,
        ))
    return out


def write_deletes(
    io: FileIO, metadata: Any, deletes: Mapping[DeleteTarget | DataFile | str, Iterable[int]], **kwargs: Any
) -> list[DataFile]:
    """Deletion vectors for v3 tables, position delete files for v2."""
    if metadata.format_version >= 3:
        return write_deletion_vectors(io, metadata, deletes, **kwargs)
    return write_position_delete_files(io, metadata, deletes, **kwargs)


def read_position_arrays(io: FileIO, delete_file: DataFile) -> dict[str, np.ndarray]:
    """The positions a delete file (Parquet position deletes or one DV blob) deletes, by data file,
    as sorted int64 arrays (shared with a cache: do not modify them)."""
    if delete_file.file_format == FileFormat.PUFFIN:
        pf = read_puffin(io, delete_file.file_path)
        blob = next((b for b in pf.blobs if b.offset == delete_file.content_offset), None)
        if blob is None:
            raise ValidationError(
                f"{delete_file.file_path}: no blob at offset {delete_file.content_offset} for {delete_file.referenced_data_file}"
            )
        positions = deserialize_dv_array(pf.read_blob(blob), location=delete_file.file_path)
        return {delete_file.referenced_data_file or "": positions}
    # the scan's reader: columns found by field id, small files in one read, recent files cached
    return read_parquet_positions(io, delete_file)


def read_position_deletes(io: FileIO, delete_file: DataFile) -> dict[str, list[int]]:
    """The positions a delete file (Parquet position deletes or one DV blob) deletes, by data file."""
    return {path: pos.tolist() for path, pos in read_position_arrays(io, delete_file).items()}


def read_existing_positions(io: FileIO, delete_files: Iterable[DataFile], data_file_path: str) -> list[int]:
    """Every position already deleted from ``data_file_path`` by the given delete files (DVs and
    position delete files), sorted: what a new DV for that file must absorb."""
    sets = []
    for df in delete_files:
        if df.content != FileContent.POSITION_DELETES:
            continue
        if df.referenced_data_file is not None and df.referenced_data_file != data_file_path:
            continue
        sets.append(read_position_deletes(io, df).get(data_file_path, ()))
    return merge_positions(*sets)
