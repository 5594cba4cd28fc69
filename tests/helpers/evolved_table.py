"""A small evolved table for the native Parquet route's tests (tests/unit/test_native_read.py,
tests/spark/test_native_read.py), built without Spark: identity-partitioned (``p=0``/``p=1``
directories), evolved after its first append (a column added, one renamed, one dropped and
re-added, int promoted to long, a nested field renamed), with position deletes in both appends."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from procedures.catalog.hadoop import HadoopCatalog
from procedures.core.alter import EvolveSchema
from procedures.core.kernel.builder import new_table_metadata
from procedures.core.kernel.operations import FastAppend, RowDelta
from procedures.core.kernel.transaction import commit
from procedures.io.delete_writers import write_position_delete_file
from procedures.io.parquet_writer import WriteSettings, write_data_files
from procedures.spec.partitioning import PartitionField, PartitionSpec
from procedures.spec.schema import Schema
from procedures.spec.transforms import parse_transform
from procedures.spec.types import INT, LONG, STRING, NestedField, StructType

SCHEMA = Schema((
    NestedField(1, "id", LONG, required=True),
    NestedField(2, "data", STRING),
    NestedField(3, "s", StructType((NestedField(6, "a", INT), NestedField(7, "b", STRING)))),
    NestedField(4, "n", INT),
    NestedField(5, "old", STRING),
    NestedField(8, "p", INT),
))
BY_P = PartitionSpec(0, (PartitionField(8, 1000, parse_transform("identity"), "p"),))
FIRST, SECOND = range(6), range(6, 10)
DELETED = {1, 3, 6}


def _first_rows() -> pa.Table:
    ids = list(FIRST)
    return pa.table({
        "id": pa.array(ids, pa.int64()), "data": [f"d{i}" for i in ids],
        "s": pa.array([{"a": i, "b": f"b{i}"} for i in ids], pa.struct([("a", pa.int32()), ("b", pa.string())])),
        "n": pa.array(ids, pa.int32()), "old": [f"o{i}" for i in ids], "p": pa.array([i % 2 for i in ids], pa.int32()),
    })


def _second_rows() -> pa.Table:
    ids = list(SECOND)
    return pa.table({
        "id": pa.array(ids, pa.int64()), "label": [f"d{i}" for i in ids],
        "s": pa.array([{"a": i, "c": f"c{i}"} for i in ids], pa.struct([("a", pa.int32()), ("c", pa.string())])),
        "n": pa.array(ids, pa.int64()), "p": pa.array([i % 2 for i in ids], pa.int32()),
        "added": [f"x{i}" for i in ids], "old": pa.array([i * 10 for i in ids], pa.int64()),
    })


def _append(t, arrow):
    files = write_data_files(t.io, WriteSettings.from_metadata(t.metadata), [arrow])
    return commit(t, [FastAppend(files)]), files


def _evolve(t, *steps):
    return commit(t, [EvolveSchema(tuple((m, args, ()) for m, *args in steps))])


def _delete(t, files, ids_of, name):
    """Position deletes of the rows of ``files`` whose id is in DELETED (positions from ``ids_of``)."""
    for f in files:
        positions = [pos for pos, i in enumerate(ids_of(f)) if i in DELETED]
        if positions:
            d = write_position_delete_file(t.io, f"{t.location}/data/{name}-{f.partition[0]}.parquet",
                                           {f.file_path: positions}, partition=f.partition, spec_id=0)
            t = commit(t, [RowDelta(add_deletes=[d])])
    return t


def evolved_table(root: Path):
    """The table (see the module doc) under ``root``, whose directory name holds a space and ``%``."""
    root = root / "wh dir%41 x"
    cat = HadoopCatalog("local", str(root))
    cat.create_namespace("db")
    md, _ = new_table_metadata(schema=SCHEMA, location=f"{cat.warehouse}/db/t", spec=BY_P, format_version=2)
    t = cat.create_table(("db", "t"), md)
    first = _first_rows()
    t, files = _append(t, first)
    t = _delete(t, files, lambda f: [i for i in FIRST if i % 2 == f.partition[0]], "del-a")
    t = _evolve(t, ("add_column", None, "added", STRING), ("rename_column", "data", "label"),
                ("update_column", "n", LONG), ("rename_column", "s.b", "c"), ("delete_column", "old"))
    t = _evolve(t, ("add_column", None, "old", LONG))
    t, files = _append(t, _second_rows())
    return _delete(t, files, lambda f: [i for i in SECOND if i % 2 == f.partition[0]], "del-b")


def expected(i: int) -> dict:
    """Row ``i`` as the current schema reads it."""
    old = i < 6
    return {"id": i, "label": f"d{i}", "s": {"a": i, "c": f"b{i}" if old else f"c{i}"}, "n": i,
            "old": None if old else i * 10, "p": i % 2, "added": None if old else f"x{i}"}



#: ids of the rows the position deletes leave
LIVE = [i for i in range(10) if i not in DELETED]
