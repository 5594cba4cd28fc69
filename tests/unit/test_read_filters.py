"""Row-group and row pruning by a task's residual filter while reading (``read_task(filter_rows=True)``):
every row the filter keeps is still read, with deletes, positions, schema evolution and name mapping
as without pruning, and row groups whose statistics rule the filter out are never decoded."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from procedures.core.kernel.scan import DeleteFileEntry, FileScanTask
from procedures.io.arrow_schema import schema_to_arrow
from procedures.io.fileio import FileIO
from procedures.io.parquet_reader import read_task_table
from procedures.spec.expression_parser import parse_filter
from procedures.spec.manifest.model import DataFile, FileContent, FileFormat
from procedures.spec.metadata_columns import POSITION_DELETE_SCHEMA
from procedures.spec.name_mapping import create_mapping
from procedures.spec.schema import Schema
from procedures.spec.types import DATE, DOUBLE, INT, LONG, STRING, TIMESTAMP, NestedField, StructType

IO = FileIO()
ROWS = 1000
GROUP = 100  # ten row groups of 100 rows, ids ascending

FILE_SCHEMA = Schema((
    NestedField(1, "id", INT, True),
    NestedField(2, "name", STRING),
    NestedField(3, "v", DOUBLE),
    NestedField(4, "d", DATE),
    NestedField(5, "loc", StructType((NestedField(6, "lat", LONG),))),
))


def _write(path, with_ids: bool = True) -> DataFile:
    arrow = schema_to_arrow(FILE_SCHEMA)
    if not with_ids:  # no field ids at any level
        arrow = pa.schema([pa.field(f.name, pa.struct([pa.field("lat", pa.int64())]) if f.name == "loc" else f.type,
                                    f.nullable) for f in arrow])
    ids = list(range(ROWS))
    table = pa.Table.from_pydict({
        "id": ids,
        "name": [None if i % 7 == 0 else f"n{i:04d}" for i in ids],
        "v": [float("nan") if i % 50 == 0 else i * 0.5 for i in ids],
        "d": [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in ids],
        "loc": [{"lat": i} for i in ids],
    }, schema=arrow)
    pq.write_table(table, str(path), row_group_size=GROUP)
    assert pq.ParquetFile(str(path)).metadata.num_row_groups == ROWS // GROUP
    return DataFile(str(path), FileFormat.PARQUET, (), ROWS, path.stat().st_size, spec_id=0)


def _pos_deletes(path, data_path: str, positions: list[int]) -> DataFile:
    arrow = schema_to_arrow(POSITION_DELETE_SCHEMA)
    table = pa.Table.from_pydict({"file_path": [data_path] * len(positions), "pos": positions}, schema=arrow)
    pq.write_table(table, str(path))
    return DataFile(str(path), FileFormat.PARQUET, (), len(positions), path.stat().st_size,
                    content=FileContent.POSITION_DELETES, spec_id=0)


def _task(df: DataFile, schema: Schema, where: str, deletes=()) -> FileScanTask:
    return FileScanTask(df, 1, tuple(deletes), parse_filter(where), 0, (), schema)


@pytest.fixture
def read_groups(monkeypatch):
    """The row groups each Parquet read decodes (a hook on ``ParquetFile.iter_batches``)."""
    seen: list[int] = []
    original = pq.ParquetFile.iter_batches

    def recording(self, *args, **kwargs):
        seen.extend(kwargs.get("row_groups") or range(self.metadata.num_row_groups))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", recording)
    return seen


def _both(task: FileScanTask, schema: Schema, **kwargs) -> tuple[pa.Table, pa.Table]:
    plain = read_task_table(IO, task, schema, **kwargs)
    pruned = read_task_table(IO, task, schema, filter_rows=True, **kwargs)
    return plain, pruned


def _same_after(plain: pa.Table, pruned: pa.Table, mask) -> None:
    """Pruning keeps every row the filter keeps (the caller's filter, ``mask``, is applied to both)."""
    # compared as text: the NaNs of ``v`` are unequal to themselves
    assert repr(pruned.filter(mask(pruned)).to_pylist()) == repr(plain.filter(mask(plain)).to_pylist())
    assert pruned.num_rows <= plain.num_rows


def test_row_groups_outside_the_filter_are_not_read_and_positions_stay_the_files(tmp_path, read_groups):
    df = _write(tmp_path / "d.parquet")
    deletes = _pos_deletes(tmp_path / "pos.parquet", df.file_path, [3, 455, 460, 519, 999])
    task = _task(df, FILE_SCHEMA, "id >= 450 AND id < 520", [DeleteFileEntry(deletes, 2)])
    plain, pruned = _both(task, FILE_SCHEMA, metadata_columns=("_pos", "_file"))
    assert sorted(set(read_groups)) == list(range(10))  # the plain read decoded every group
    read_groups.clear()
    pruned = read_task_table(IO, task, FILE_SCHEMA, filter_rows=True, metadata_columns=("_pos", "_file"))
    assert sorted(read_groups) == [4, 5]
    # the rows handed on are exactly the matching ones, with their positions in the file
    assert pruned.column("id").to_pylist() == [i for i in range(450, 520) if i not in (455, 460, 519)]
    assert pruned.column("_pos").to_pylist() == pruned.column("id").to_pylist()
    _same_after(plain, pruned, lambda t: pc.and_(pc.greater_equal(t["id"], 450), pc.less(t["id"], 520)))


def test_gaps_between_kept_row_groups_keep_positions(tmp_path, read_groups):
    df = _write(tmp_path / "d.parquet")
    task = _task(df, FILE_SCHEMA, "id < 120 OR id >= 950")
    out = read_task_table(IO, task, FILE_SCHEMA, filter_rows=True, metadata_columns=("_pos",), batch_size=64)
    assert sorted(set(read_groups)) == [0, 1, 9]
    assert out.column("_pos").to_pylist() == out.column("id").to_pylist() == list(range(120)) + list(range(950, 1000))


def test_renamed_promoted_and_added_columns(tmp_path, read_groups):
    df = _write(tmp_path / "d.parquet")
    evolved = Schema((
        NestedField(1, "key", LONG, True),  # renamed and promoted int -> long
        NestedField(2, "label", STRING),  # renamed
        NestedField(4, "d", TIMESTAMP),  # date -> timestamp: its statistics are not read as timestamps
        NestedField(7, "added", LONG, False, None, 5),  # not in the file: its initial default
    ), schema_id=1)
    task = _task(df, evolved, "key > 900 AND label >= 'n0950'")
    plain = read_task_table(IO, task, evolved)
    read_groups.clear()
    pruned = read_task_table(IO, task, evolved, filter_rows=True)
    assert read_groups == [9]
    # a null label keeps its row (Spark's filter decides it)
    assert pruned.column("key").to_pylist() == [i for i in range(901, 1000) if i >= 950 or i % 7 == 0]
    _same_after(plain, pruned, lambda t: pc.and_(pc.greater(t["key"], 900), pc.greater_equal(t["label"], "n0950")))

    for where, mask in [
        ("d >= '2026-01-01T00:00:00'", lambda t: pc.greater_equal(t["d"], pa.scalar(dt.datetime(2026, 1, 1)))),
        ("added = 5", lambda t: pc.equal(t["added"], 5)),
        ("added = 6", lambda t: pc.equal(t["added"], 6)),
        ("label IS NULL", lambda t: pc.is_null(t["label"])),
        ("label NOT IN ('n0001', 'n0002')", lambda t: pc.invert(pc.is_in(t["label"], pa.array(["n0001", "n0002"])))),
    ]:
        plain, pruned = _both(_task(df, evolved, where), evolved)
        _same_after(plain, pruned, lambda t, m=mask: pc.fill_null(m(t), False))


def test_name_mapping_files_without_ids(tmp_path, read_groups):
    df = _write(tmp_path / "n.parquet", with_ids=False)
    task = _task(df, FILE_SCHEMA, "id < 150")
    out = read_task_table(IO, task, FILE_SCHEMA, filter_rows=True, name_mapping=create_mapping(FILE_SCHEMA))
    assert sorted(set(read_groups)) == [0, 1]
    assert out.column("id").to_pylist() == list(range(150))


def test_float_and_nested_columns_prune_nothing(tmp_path, read_groups):
    """Spark orders NaN above every number (Arrow and Parquet statistics leave it out), so a float
    filter keeps every row for Spark to decide; a nested column is not pruned either."""
    df = _write(tmp_path / "d.parquet")
    for where in ("v > 400.0", "loc.lat > 900"):
        plain, pruned = _both(_task(df, FILE_SCHEMA, where), FILE_SCHEMA)
        assert repr(pruned.to_pylist()) == repr(plain.to_pylist())
        assert pruned.num_rows == ROWS


def test_equality_deletes_and_deleted_column(tmp_path):
    df = _write(tmp_path / "d.parquet")
    eq_schema = Schema((NestedField(2, "name", STRING),))
    eq_path = tmp_path / "eq.parquet"
    pq.write_table(pa.Table.from_pydict({"name": [None, "n0101"]}, schema=schema_to_arrow(eq_schema)), str(eq_path))
    eqd = DataFile(str(eq_path), FileFormat.PARQUET, (), 2, 10, content=FileContent.EQUALITY_DELETES,
                   equality_ids=(2,), spec_id=0)
    projected = Schema((FILE_SCHEMA.fields[0],))  # the delete column is not projected
    task = _task(df, FILE_SCHEMA, "id >= 95 AND id <= 105", [DeleteFileEntry(eqd, 2)])
    plain, pruned = _both(task, projected)
    assert pruned.column("id").to_pylist() == [95, 96, 97, 99, 100, 102, 103, 104]
    _same_after(plain, pruned, lambda t: pc.and_(pc.greater_equal(t["id"], 95), pc.less_equal(t["id"], 105)))
    marked = read_task_table(IO, task, projected, filter_rows=True, metadata_columns=("_deleted",))
    assert marked.column("id").to_pylist() == list(range(95, 106))
    assert [i for i, d in zip(marked.column("id").to_pylist(), marked.column("_deleted").to_pylist()) if d] == [98, 101, 105]


def test_without_filter_rows_the_residual_is_ignored(tmp_path, read_groups):
    """Callers that use a filter to choose files but need their other rows (copy-on-write) get them."""
    df = _write(tmp_path / "d.parquet")
    out = read_task_table(IO, _task(df, FILE_SCHEMA, "id < 10"), FILE_SCHEMA)
    assert out.num_rows == ROWS and sorted(set(read_groups)) == list(range(10))


def test_splits_prune_within_their_range(tmp_path, read_groups):
    df = _write(tmp_path / "d.parquet")
    meta = pq.ParquetFile(df.file_path).metadata
    start = meta.row_group(5).column(0).data_page_offset
    dict_off = meta.row_group(5).column(0).dictionary_page_offset
    if dict_off is not None and 0 < dict_off < start:
        start = dict_off
    task = dataclasses.replace(_task(df, FILE_SCHEMA, "id < 120 OR id >= 580"), start=start,
                               length=df.file_size_in_bytes - start)
    out = read_task_table(IO, task, FILE_SCHEMA, filter_rows=True, metadata_columns=("_pos",))
    assert sorted(set(read_groups)) == [5, 6, 7, 8, 9]
    assert out.column("_pos").to_pylist() == list(range(580, 1000))
